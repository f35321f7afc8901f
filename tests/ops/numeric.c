/* numeric.c -- conformance rows of the NUMERIC family: RNGBitGenerator (Philox known answers,
 * XLA's state layout for every values dtype, statistics), FFT (all four types against a naive
 * O(N^2) DFT in double, 1-3 axes, round trips), BatchNorm (inference, training and gradient
 * against the formulas in double, the gradient also against finite differences). */
#include "cpu/numeric.h"
#include "testing.h"

/* ---------------------------------------------------------------------------------------------
 * RNGBitGenerator */

TEST(philox_known_answers) {
  /* Random123's kat_vectors for philox4x32_10 */
  static const uint32_t ctr[3][4] = {{0, 0, 0, 0},
                                     {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                                     {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}};
  static const uint32_t key[3][2] = {{0, 0}, {0xffffffff, 0xffffffff}, {0xa4093822, 0x299f31d0}};
  static const uint32_t want[3][4] = {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
                                      {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
                                      {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}};
  for (int v = 0; v < 3; v++) {
    uint32_t got[4];
    lathe_philox4x32_10(ctr[v], key[v], got);
    CHECK(memcmp(got, want[v], sizeof got) == 0, "vector %d: got %08x %08x %08x %08x", v, got[0], got[1], got[2],
          got[3]);
  }
}

/* Runs RNGBitGenerator(state, shape); out_state/out_values are tst outputs (caller frees). */
static lathe_status_t run_rng(const uint64_t state[3], lathe_shape shape, void **out_state, void **out_values) {
  lathe_builder_t b;
  lathe_status_t st = tst_builder_new("rng", &b);
  if (st) return st;
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape ss = TST_SHAPE(LATHE_DTYPE_UINT64, 3);
  lathe_value_t p, outs[2];
  if (!(st = lathe_parameter(fn, "state", &ss, &p)) && !(st = lathe_rng_bit_generator(fn, p, &shape, outs)) &&
      !(st = lathe_function_return(fn, outs, 2))) {
    const void *in[1] = {state};
    void *res[2];
    st = tst_run(b, in, 1, res, 2, NULL);
    if (!st) *out_state = res[0], *out_values = res[1];
  }
  lathe_builder_free(b);
  return st;
}

/* The 32-bit word j of block b, per XLA: Philox(counter + b, key). */
static uint32_t ref_word(const uint64_t s[3], int64_t b, int j) {
  uint64_t lo = s[1] + (uint64_t)b, hi = s[2] + (lo < s[1]);
  uint32_t ctr[4] = {(uint32_t)lo, (uint32_t)(lo >> 32), (uint32_t)hi, (uint32_t)(hi >> 32)};
  uint32_t key[2] = {(uint32_t)s[0], (uint32_t)(s[0] >> 32)}, w[4];
  lathe_philox4x32_10(ctr, key, w);
  return w[j];
}

TEST(rng_every_dtype_matches_xla_layout) {
  const uint64_t state[3] = {0x0123456789abcdefull, 0xfffffffffffffffeull, 7}; /* counter low wraps */
  const int64_t sizes[] = {0, 1, 3, 4, 5, 9, 37, 70}; /* 37+: the 8-block vector path */
  for (int d = 0; d < tst_n_all_dtypes; d++) {
    lathe_dtype dt = tst_all_dtypes[d];
    lathe_dtype_class cl = lathe_dtype_class_of(dt);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
      int64_t n = sizes[si];
      lathe_shape shape = TST_SHAPE(dt, n);
      void *ns = NULL, *vals = NULL;
      lathe_status_t st = run_rng(state, shape, &ns, &vals);
      if (cl == LATHE_CLASS_BOOL || cl == LATHE_CLASS_COMPLEX) {
        CHECK_ERR(st, INVALID_ARGUMENT, "RNGBitGenerator");
        break;
      }
      CHECK(st == NULL, "%s[%lld]: %s", lathe_dtype_name(dt), (long long)n, lathe_status_message(st));
      lathe_status_free(st);
      if (!ns) continue;
      int bits = lathe_dtype_bits(dt);
      int64_t blocks = bits == 64 ? (n + 1) / 2 : (n + 3) / 4;
      const uint64_t *s2 = ns;
      uint64_t lo = state[1] + (uint64_t)blocks;
      CHECK(s2[0] == state[0] && s2[1] == lo && s2[2] == state[2] + (lo < state[1]),
            "%s[%lld]: new state %llx %llx %llx", lathe_dtype_name(dt), (long long)n, (unsigned long long)s2[0],
            (unsigned long long)s2[1], (unsigned long long)s2[2]);
      int bad = 0;
      for (int64_t i = 0; i < n; i++) {
        uint64_t want, got;
        if (bits == 64) {
          want = ref_word(state, i / 2, (int)(i % 2) * 2) | (uint64_t)ref_word(state, i / 2, (int)(i % 2) * 2 + 1) << 32;
          memcpy(&got, (const char *)vals + 8 * i, 8);
        } else {
          want = ref_word(state, i / 4, (int)(i % 4));
          if (bits < 32) want &= (1u << bits) - 1;
          if (bits < 8) { /* packed: compare through the element's value */
            got = (uint64_t)((int64_t)tst_get(vals, dt, i)) & ((1u << bits) - 1);
          } else {
            got = 0;
            memcpy(&got, (const char *)vals + bits / 8 * i, (size_t)bits / 8);
          }
        }
        bad += got != want;
      }
      CHECK(bad == 0, "%s[%lld]: %d elements differ from Philox", lathe_dtype_name(dt), (long long)n, bad);
      tst_free_output(ns);
      tst_free_output(vals);
    }
  }
}

/* A values shape with a dynamic axis named by a parameter (GoMLX's sampling over a dynamic
 * batch): each binding gives it a size, and the values are those of the static shape. */
TEST(rng_dynamic_axis) {
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(tst_backend(), "rng_dyn", &b));
  if (!b) return;
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape ss = TST_SHAPE(LATHE_DTYPE_UINT64, 3), xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, -1), vs = TST_SHAPE(LATHE_DTYPE_UINT32, -1, 5);
  xs.axis_names[0] = vs.axis_names[0] = "batch";
  lathe_value_t p, x, outs[2];
  CHECK_OK(lathe_parameter(fn, "state", &ss, &p));
  CHECK_OK(lathe_parameter(fn, "x", &xs, &x));
  CHECK_OK(lathe_rng_bit_generator(fn, p, &vs, outs));
  lathe_shape got_s;
  CHECK_OK(lathe_value_shape(outs[1], &got_s));
  CHECK(got_s.dims[0] == -1 && got_s.axis_names[0] && strcmp(got_s.axis_names[0], "batch") == 0,
        "values keep the dynamic axis \"batch\"");
  CHECK_OK(lathe_function_return(fn, outs, 2));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  if (!e) return;
  const uint64_t state[3] = {0x0123456789abcdefULL, 7, 0};
  for (int64_t batch = 0; batch <= 6; batch += 3) {
    lathe_shape xb = TST_SHAPE(LATHE_DTYPE_FLOAT32, batch);
    float xd[8] = {0};
    lathe_buffer_t in[2] = {0}, o[2] = {0};
    CHECK_OK(lathe_buffer_from_host(tst_backend(), 0, &ss, state, sizeof state, &in[0]));
    CHECK_OK(lathe_buffer_from_host(tst_backend(), 0, &xb, xd, sizeof(float) * (size_t)batch, &in[1]));
    CHECK_OK(lathe_executable_execute(e, in, NULL, 2, 0, o, 2));
    if (o[1]) {
      lathe_shape os;
      CHECK_OK(lathe_buffer_shape(o[1], &os));
      CHECK(os.rank == 2 && os.dims[0] == batch && os.dims[1] == 5, "batch %lld: values shaped [%lld,%lld]",
            (long long)batch, (long long)os.dims[0], (long long)os.dims[1]);
      uint32_t got[30];
      CHECK_OK(lathe_buffer_to_host(o[1], got, sizeof(uint32_t) * (size_t)(batch * 5)));
      void *ns = NULL, *want = NULL;
      CHECK_OK(run_rng(state, TST_SHAPE(LATHE_DTYPE_UINT32, batch, 5), &ns, &want));
      if (want)
        CHECK(memcmp(got, want, sizeof(uint32_t) * (size_t)(batch * 5)) == 0, "batch %lld: values differ from the static "
              "shape's", (long long)batch);
      tst_free_output(ns), tst_free_output(want);
    }
    for (int i = 0; i < 2; i++) lathe_buffer_free(in[i]), lathe_buffer_free(o[i]);
  }
  lathe_executable_free(e);
}

TEST(rng_scalar_and_rank3) {
  const uint64_t state[3] = {42, 0, 0};
  void *ns, *vals;
  CHECK_OK(run_rng(state, tst_shape0(LATHE_DTYPE_UINT32), &ns, &vals));
  if (ns && vals) {
    CHECK(((uint32_t *)vals)[0] == ref_word(state, 0, 0) && ((uint64_t *)ns)[1] == 1, "scalar");
    tst_free_output(ns), tst_free_output(vals);
  }
  ns = vals = NULL;
  CHECK_OK(run_rng(state, TST_SHAPE(LATHE_DTYPE_INT32, 2, 3, 5), &ns, &vals));
  if (ns && vals) {
    int bad = 0;
    for (int i = 0; i < 30; i++) bad += ((uint32_t *)vals)[i] != ref_word(state, i / 4, i % 4);
    CHECK(bad == 0 && ((uint64_t *)ns)[1] == 8, "rank 3: %d bad", bad);
    tst_free_output(ns), tst_free_output(vals);
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

TEST(rng_statistics) {
  enum { N = 1 << 17 };
  uint64_t state[3] = {2024, 0, 0};
  void *ns1, *v1, *ns2, *v2;
  CHECK_OK(run_rng(state, TST_SHAPE(LATHE_DTYPE_UINT64, N), &ns1, &v1));
  if (!ns1) return;
  CHECK_OK(run_rng(ns1, TST_SHAPE(LATHE_DTYPE_UINT64, N), &ns2, &v2));
  if (!ns2) return;
  CHECK(((uint64_t *)ns2)[1] == (uint64_t)N, "two calls advance the counter by N/2 each: %llu",
        (unsigned long long)((uint64_t *)ns2)[1]);
  /* bit balance: every bit position is set in 50% of the values, within 5 sigma */
  int worst = 0;
  double sigma = sqrt(N * 0.25);
  for (int bit = 0; bit < 64; bit++) {
    int64_t ones = 0;
    for (int i = 0; i < N; i++) ones += (((uint64_t *)v1)[i] >> bit) & 1;
    if (fabs((double)ones - N / 2.0) > 5 * sigma) worst++;
  }
  CHECK(worst == 0, "%d bit positions are unbalanced", worst);
  /* no repeats within and across the two calls */
  uint64_t *all = malloc(sizeof(uint64_t) * 2 * N);
  memcpy(all, v1, sizeof(uint64_t) * N);
  memcpy(all + N, v2, sizeof(uint64_t) * N);
  qsort(all, 2 * N, sizeof(uint64_t), cmp_u64);
  int dups = 0;
  for (int i = 1; i < 2 * N; i++) dups += all[i] == all[i - 1];
  CHECK(dups == 0, "%d repeated 64-bit values over two calls", dups);
  free(all);
  /* uniform mean and the lag-1 correlation of the top 32 bits as [0,1) numbers */
  double mean = 0, corr = 0;
  for (int i = 0; i < N; i++) mean += (double)(((uint64_t *)v1)[i] >> 11) / 9007199254740992.0;
  mean /= N;
  for (int i = 1; i < N; i++)
    corr += ((double)(((uint64_t *)v1)[i] >> 11) / 9007199254740992.0 - 0.5) *
            ((double)(((uint64_t *)v1)[i - 1] >> 11) / 9007199254740992.0 - 0.5);
  corr /= (N - 1) / 12.0;
  CHECK(fabs(mean - 0.5) < 5 * sqrt(1.0 / 12 / N), "mean %g", mean);
  CHECK(fabs(corr) < 5 / sqrt((double)N), "lag-1 correlation %g", corr);
  /* a different key gives different values */
  uint64_t other[3] = {2025, 0, 0};
  void *ns3, *v3;
  CHECK_OK(run_rng(other, TST_SHAPE(LATHE_DTYPE_UINT64, 16), &ns3, &v3));
  if (ns3) {
    int same = 0;
    for (int i = 0; i < 16; i++) same += ((uint64_t *)v3)[i] == ((uint64_t *)v1)[i];
    CHECK(same == 0, "key change: %d equal values", same);
    tst_free_output(ns3), tst_free_output(v3);
  }
  tst_free_output(ns1), tst_free_output(v1), tst_free_output(ns2), tst_free_output(v2);
}

/* ---------------------------------------------------------------------------------------------
 * FFT */

/* Naive DFT along axis `axis` of a complex double array (re/im interleaved), in place. */
static void naive_dft_axis(double *a, const int64_t *dims, int rank, int axis, bool inverse) {
  int64_t outer = 1, inner = 1, n = dims[axis];
  for (int i = 0; i < axis; i++) outer *= dims[i];
  for (int i = axis + 1; i < rank; i++) inner *= dims[i];
  double *tmp = malloc(sizeof(double) * 2 * (size_t)(n ? n : 1));
  double sign = inverse ? 1 : -1;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      double *base = a + 2 * (o * n * inner + in);
      for (int64_t k = 0; k < n; k++) {
        double re = 0, im = 0;
        for (int64_t j = 0; j < n; j++) {
          double ang = sign * 2 * M_PI * (double)((j * k) % n) / (double)n;
          double xr = base[2 * j * inner], xi = base[2 * j * inner + 1];
          re += xr * cos(ang) - xi * sin(ang);
          im += xr * sin(ang) + xi * cos(ang);
        }
        tmp[2 * k] = inverse ? re / n : re;
        tmp[2 * k + 1] = inverse ? im / n : im;
      }
      for (int64_t k = 0; k < n; k++) base[2 * k * inner] = tmp[2 * k], base[2 * k * inner + 1] = tmp[2 * k + 1];
    }
  free(tmp);
}

static int64_t numel(const lathe_shape *s) { return lathe_shape_num_elements(s); }

/* Builds and runs FFT(x) for a parameter x of shape xs with data x. */
static lathe_status_t run_fft(lathe_shape xs, const void *x, lathe_fft_type type, const int64_t *len, int k,
                              void **out, lathe_shape *out_shape) {
  lathe_builder_t b;
  lathe_status_t st = tst_builder_new("fft", &b);
  if (st) return st;
  lathe_function_t fn = lathe_builder_main(b);
  lathe_value_t p, y;
  if (!(st = lathe_parameter(fn, "x", &xs, &p)) && !(st = lathe_fft(fn, p, type, len, k, &y)) &&
      !(st = lathe_function_return(fn, &y, 1))) {
    const void *in[1] = {x};
    st = tst_run(b, in, 1, out, 1, out_shape);
  }
  lathe_builder_free(b);
  return st;
}

static double fft_tol(lathe_dtype dt) {
  return dt == LATHE_DTYPE_COMPLEX64 || dt == LATHE_DTYPE_FLOAT32 ? 2e-5 : 1e-10;
}

/* One FFT case: shape dims (rank), k transformed axes, all four types for the complex/real
 * dtype pair, compared with the naive DFT, plus round trips. */
static void fft_case(const int64_t *dims, int rank, int k, bool dbl, unsigned seed) {
  lathe_dtype cdt = dbl ? LATHE_DTYPE_COMPLEX128 : LATHE_DTYPE_COMPLEX64;
  lathe_dtype rdt = dbl ? LATHE_DTYPE_FLOAT64 : LATHE_DTYPE_FLOAT32;
  lathe_shape cs = tst_shape(cdt, rank, dims), rs = tst_shape(rdt, rank, dims);
  const int64_t *len = dims + rank - k;
  int64_t n = numel(&cs), nlast = dims[rank - 1], half = nlast / 2 + 1;
  char label[160];
  int off = snprintf(label, sizeof label, "%s[", lathe_dtype_name(cdt));
  for (int i = 0; i < rank; i++) off += snprintf(label + off, sizeof label - (size_t)off, "%s%lld", i ? "," : "", (long long)dims[i]);
  snprintf(label + off, sizeof label - (size_t)off, "] k=%d", k);

  void *cx = tst_alloc_for(&cs), *rx = tst_alloc_for(&rs), *want = tst_alloc_for(&cs);
  tst_fill(cx, cdt, n, seed);
  tst_fill(rx, rdt, n, seed + 1);
  double *a = malloc(sizeof(double) * 2 * (size_t)(n ? n : 1));

  for (int inv = 0; inv < 2; inv++) { /* complex forward and inverse */
    for (int64_t i = 0; i < n; i++) a[2 * i] = tst_get(cx, cdt, i), a[2 * i + 1] = tst_get_imag(cx, cdt, i);
    for (int ax = rank - k; ax < rank; ax++) naive_dft_axis(a, dims, rank, ax, inv);
    for (int64_t i = 0; i < n; i++) tst_set_complex(want, cdt, i, a[2 * i], a[2 * i + 1]);
    void *got = NULL;
    lathe_shape gs;
    CHECK_OK(run_fft(cs, cx, inv ? LATHE_FFT_TYPE_INVERSE : LATHE_FFT_TYPE_FORWARD, len, k, &got, &gs));
    if (got) {
      CHECK(lathe_shape_equal(&gs, &cs), "%s: shape", label);
      char l2[200];
      snprintf(l2, sizeof l2, "%s %s", label, inv ? "FFTInverse" : "FFTForward");
      tst_expect_close(l2, got, want, cdt, n, fft_tol(cdt));
      /* round trip through the opposite direction */
      void *back = NULL;
      CHECK_OK(run_fft(cs, got, inv ? LATHE_FFT_TYPE_FORWARD : LATHE_FFT_TYPE_INVERSE, len, k, &back, NULL));
      if (back) {
        snprintf(l2, sizeof l2, "%s round trip %s", label, inv ? "inverse->forward" : "forward->inverse");
        tst_expect_close(l2, back, cx, cdt, n, fft_tol(cdt) * 4);
        tst_free_output(back);
      }
      tst_free_output(got);
    }
  }

  /* real forward: the first nlast/2+1 outputs of the complex transform of the real input */
  int64_t hdims[LATHE_MAX_RANK];
  memcpy(hdims, dims, sizeof(int64_t) * (size_t)rank);
  hdims[rank - 1] = half;
  lathe_shape hs = tst_shape(cdt, rank, hdims);
  int64_t hn = numel(&hs), lines = nlast ? n / nlast : 0;
  void *hwant = tst_alloc_for(&hs);
  for (int64_t i = 0; i < n; i++) a[2 * i] = tst_get(rx, rdt, i), a[2 * i + 1] = 0;
  for (int ax = rank - k; ax < rank; ax++) naive_dft_axis(a, dims, rank, ax, false);
  for (int64_t l = 0; l < lines; l++)
    for (int64_t j = 0; j < half; j++)
      tst_set_complex(hwant, cdt, l * half + j, a[2 * (l * nlast + j)], a[2 * (l * nlast + j) + 1]);
  void *got = NULL;
  lathe_shape gs;
  CHECK_OK(run_fft(rs, rx, LATHE_FFT_TYPE_FORWARD_REAL, len, k, &got, &gs));
  if (got) {
    CHECK(lathe_shape_equal(&gs, &hs), "%s: FFTForwardReal shape", label);
    char l2[200];
    snprintf(l2, sizeof l2, "%s FFTForwardReal", label);
    tst_expect_close(l2, got, hwant, cdt, hn, fft_tol(cdt));
    /* real inverse of it gives the input back */
    void *back = NULL;
    CHECK_OK(run_fft(hs, got, LATHE_FFT_TYPE_INVERSE_REAL, len, k, &back, &gs));
    if (back) {
      CHECK(lathe_shape_equal(&gs, &rs), "%s: FFTInverseReal shape", label);
      snprintf(l2, sizeof l2, "%s FFTInverseReal(FFTForwardReal)", label);
      tst_expect_close(l2, back, rx, rdt, n, fft_tol(rdt) * 4);
      tst_free_output(back);
    }
    tst_free_output(got);
  }

  /* real inverse of an arbitrary half spectrum: the inverse DFT of its Hermitian completion
   * (imaginary parts of the self-conjugate bins do not contribute) */
  void *hx = tst_alloc_for(&hs);
  tst_fill(hx, cdt, hn, seed + 2);
  for (int64_t l = 0; l < lines; l++)
    for (int64_t j = 0; j < nlast; j++) {
      int64_t src = j < half ? j : nlast - j;
      double re = tst_get(hx, cdt, l * half + src), im = tst_get_imag(hx, cdt, l * half + src);
      a[2 * (l * nlast + j)] = re;
      a[2 * (l * nlast + j) + 1] = j < half ? im : -im;
    }
  /* As numpy's irfftn: inverse over the leading axes of the half spectrum, then complete
   * each last-axis line to Hermitian symmetry and take the real part of its inverse. */
  for (int ax = rank - k; ax < rank - 1; ax++) naive_dft_axis(a, dims, rank, ax, true);
  for (int64_t l = 0; l < lines; l++)
    for (int64_t j = half; j < nlast; j++) {
      a[2 * (l * nlast + j)] = a[2 * (l * nlast + nlast - j)];
      a[2 * (l * nlast + j) + 1] = -a[2 * (l * nlast + nlast - j) + 1];
    }
  naive_dft_axis(a, dims, rank, rank - 1, true);
  void *rwant = tst_alloc_for(&rs);
  for (int64_t i = 0; i < n; i++) tst_set(rwant, rdt, i, a[2 * i]);
  got = NULL;
  CHECK_OK(run_fft(hs, hx, LATHE_FFT_TYPE_INVERSE_REAL, len, k, &got, NULL));
  if (got) {
    char l2[200];
    snprintf(l2, sizeof l2, "%s FFTInverseReal", label);
    tst_expect_close(l2, got, rwant, rdt, n, fft_tol(rdt));
    tst_free_output(got);
  }
  free(a);
  free(cx), free(rx), free(want), free(hwant), free(hx), free(rwant);
}

TEST(fft_1d_sizes) {
  const int64_t sizes[] = {1, 2, 3, 5, 8, 12, 17, 64};
  for (int dbl = 0; dbl < 2; dbl++)
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      int64_t d1[1] = {sizes[i]};
      fft_case(d1, 1, 1, dbl, (unsigned)i);
      int64_t d2[2] = {3, sizes[i]}; /* a batch axis */
      fft_case(d2, 2, 1, dbl, (unsigned)i + 100);
    }
}

TEST(fft_multi_axis) {
  static const int64_t d2[] = {3, 4, 6}, d2b[] = {5, 7}, d3[] = {2, 3, 5, 4}, d3b[] = {4, 2, 9}, d1[] = {2, 3, 1};
  for (int dbl = 0; dbl < 2; dbl++) {
    fft_case(d2, 3, 2, dbl, 1);
    fft_case(d2b, 2, 2, dbl, 2);
    fft_case(d3, 4, 3, dbl, 3);
    fft_case(d3b, 3, 3, dbl, 4);
    fft_case(d2, 3, 1, dbl, 5);
    fft_case(d1, 3, 2, dbl, 6);  /* length-1 last axis */
    fft_case(d3, 4, 2, dbl, 7);
  }
}

TEST(fft_zero_size_batch) {
  static const int64_t d[] = {0, 8};
  fft_case(d, 2, 1, false, 9);
  fft_case(d, 2, 1, true, 10);
}

TEST(fft_1d_long_lengths) {
  /* Bluestein on primes and composite lengths, radix-2 on a large power of two */
  const int64_t sizes[] = {97, 997, 1000, 4096};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    int64_t n = sizes[s];
    lathe_c128 *x = malloc(sizeof(lathe_c128) * (size_t)n);
    double *a = malloc(sizeof(double) * 2 * (size_t)n);
    tst_fill(x, LATHE_DTYPE_COMPLEX128, n, (unsigned)s);
    for (int64_t i = 0; i < n; i++) a[2 * i] = x[i].re, a[2 * i + 1] = x[i].im;
    CHECK_OK(lathe_fft_1d(x, n, false));
    naive_dft_axis(a, &n, 1, 0, false);
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < n; i++) {
      worst = fmax(worst, fmax(fabs(x[i].re - a[2 * i]), fabs(x[i].im - a[2 * i + 1])));
      scale = fmax(scale, fmax(fabs(a[2 * i]), fabs(a[2 * i + 1])));
    }
    CHECK(worst <= 1e-12 * scale * log2((double)n), "n=%lld: max error %g (scale %g)", (long long)n, worst, scale);
    CHECK_OK(lathe_fft_1d(x, n, true));
    tst_fill(a, LATHE_DTYPE_COMPLEX128, n, (unsigned)s);
    worst = 0;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fmax(fabs(x[i].re - a[2 * i]), fabs(x[i].im - a[2 * i + 1])));
    CHECK(worst < 1e-12, "n=%lld: round trip error %g", (long long)n, worst);
    free(x), free(a);
  }
}

TEST(fft_large_parallel) {
  /* many lines along a strided axis exercise the parallel path */
  static const int64_t d[] = {256, 12, 64};
  lathe_shape s = tst_shape(LATHE_DTYPE_COMPLEX64, 3, d);
  int64_t n = numel(&s);
  void *x = tst_alloc_for(&s), *want = tst_alloc_for(&s);
  tst_fill(x, LATHE_DTYPE_COMPLEX64, n, 77);
  double *a = malloc(sizeof(double) * 2 * (size_t)n);
  for (int64_t i = 0; i < n; i++) a[2 * i] = tst_get(x, s.dtype, i), a[2 * i + 1] = tst_get_imag(x, s.dtype, i);
  naive_dft_axis(a, d, 3, 1, false);
  naive_dft_axis(a, d, 3, 2, false);
  for (int64_t i = 0; i < n; i++) tst_set_complex(want, s.dtype, i, a[2 * i], a[2 * i + 1]);
  void *got = NULL;
  CHECK_OK(run_fft(s, x, LATHE_FFT_TYPE_FORWARD, d + 1, 2, &got, NULL));
  if (got) tst_expect_close("FFT Complex64[256,12,64] k=2", got, want, s.dtype, n, 2e-5), tst_free_output(got);
  free(a), free(x), free(want);
}

/* The transform of a real block is exactly Hermitian: X[-k] = conj(X[k]) bit for bit over the
 * transformed axes (gradients through |FFT(x)| are real only then), for every kind of length
 * (odd direct, power of two, Bluestein), both directions, both complex dtypes; and the
 * self-conjugate bins of a real forward transform have a zero imaginary part. */
static void expect_hermitian(const char *label, const void *y, lathe_dtype dt, const int64_t *dims, int rank, int k) {
  int64_t n = 1, bsize = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  for (int i = rank - k; i < rank; i++) bsize *= dims[i];
  int bad = 0;
  for (int64_t i = 0; i < n && !bad; i++) {
    int64_t rest = i % bsize, p = 0, stride = bsize;
    for (int a = rank - k; a < rank; a++) {
      stride /= dims[a];
      int64_t c = rest / stride;
      rest %= stride;
      p += (c ? dims[a] - c : 0) * stride;
    }
    p += i - i % bsize;
    double re = tst_get(y, dt, i), im = tst_get_imag(y, dt, i), pre = tst_get(y, dt, p), pim = tst_get_imag(y, dt, p);
    if (re != pre || im != -pim) {
      CHECK(false, "%s: X[%lld] = %.17g%+.17gi but X[-k] = %.17g%+.17gi", label, (long long)i, re, im, pre, pim);
      bad = 1;
    }
  }
}

TEST(fft_real_input_hermitian) {
  if (!tst_backend_is_cpu()) SKIP("a property of lathe:cpu's own FFT; other backends' FFT is compared with it by the other fft rows");
  static const struct {
    int rank, k;
    int64_t dims[3];
  } cases[] = {{1, 1, {1}},  {1, 1, {2}},   {1, 1, {3}},     {1, 1, {8}},       {1, 1, {11}},     {1, 1, {12}},
               {1, 1, {17}}, {1, 1, {97}},  {1, 1, {257}},   {1, 1, {1000}},    {2, 1, {3, 13}},  {2, 2, {3, 5}},
               {2, 2, {4, 6}}, {3, 2, {2, 7, 9}}, {3, 3, {4, 3, 10}}, {3, 2, {2, 6, 300}}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int dbl = 0; dbl < 2; dbl++)
      for (int inv = 0; inv < 2; inv++) {
        lathe_dtype dt = dbl ? LATHE_DTYPE_COMPLEX128 : LATHE_DTYPE_COMPLEX64;
        lathe_shape s = tst_shape(dt, cases[c].rank, cases[c].dims);
        int64_t n = numel(&s);
        void *x = tst_alloc_for(&s), *y = NULL;
        tst_fill(x, dt, n, (unsigned)(c * 4 + (size_t)dbl * 2 + (size_t)inv));
        for (int64_t i = 0; i < n; i++) tst_set_complex(x, dt, i, tst_get(x, dt, i), 0);
        const int64_t *len = cases[c].dims + cases[c].rank - cases[c].k;
        CHECK_OK(run_fft(s, x, inv ? LATHE_FFT_TYPE_INVERSE : LATHE_FFT_TYPE_FORWARD, len, cases[c].k, &y, NULL));
        if (y) {
          char label[96];
          snprintf(label, sizeof label, "%s %s case %zu", lathe_dtype_name(dt), inv ? "FFTInverse" : "FFTForward", c);
          expect_hermitian(label, y, dt, cases[c].dims, cases[c].rank, cases[c].k);
          tst_free_output(y);
        }
        free(x);
        /* real forward: bins 0 and n/2 of the last axis are their own conjugates along it */
        if (inv) continue;
        lathe_dtype rdt = dbl ? LATHE_DTYPE_FLOAT64 : LATHE_DTYPE_FLOAT32;
        lathe_shape rs = tst_shape(rdt, cases[c].rank, cases[c].dims);
        void *rx = tst_alloc_for(&rs);
        tst_fill(rx, rdt, n, (unsigned)c + 50);
        lathe_shape hs;
        CHECK_OK(run_fft(rs, rx, LATHE_FFT_TYPE_FORWARD_REAL, len, cases[c].k, &y, &hs));
        if (y && cases[c].k == 1) {
          int64_t nl = cases[c].dims[cases[c].rank - 1], half = nl / 2 + 1, lines = n / nl;
          for (int64_t l = 0; l < lines; l++) {
            CHECK(tst_get_imag(y, dt, l * half) == 0, "FFTForwardReal case %zu line %lld: DC has imaginary part %g", c,
                  (long long)l, tst_get_imag(y, dt, l * half));
            if (nl % 2 == 0)
              CHECK(tst_get_imag(y, dt, l * half + nl / 2) == 0, "FFTForwardReal case %zu: Nyquist bin is not real", c);
          }
        } else if (y && cases[c].rank == cases[c].k) {
          /* over all axes: the planes of bins 0 and n/2 of the last axis are Hermitian in the others */
          int64_t nl = cases[c].dims[cases[c].rank - 1], half = nl / 2 + 1, hn = numel(&hs);
          for (int64_t i = 0; i < hn; i++) {
            int64_t cl = i % half;
            if (cl != 0 && !(nl % 2 == 0 && cl == nl / 2)) continue;
            int64_t rest = i / half, p = 0, stride = hn / half;
            for (int a = 0; a < cases[c].rank - 1; a++) {
              stride /= cases[c].dims[a];
              int64_t co = rest / stride;
              rest %= stride;
              p += (co ? cases[c].dims[a] - co : 0) * stride;
            }
            p = p * half + cl;
            CHECK(tst_get(y, dt, i) == tst_get(y, dt, p) && tst_get_imag(y, dt, i) == -tst_get_imag(y, dt, p),
                  "FFTForwardReal case %zu: bin %lld is not the conjugate of bin %lld", c, (long long)i, (long long)p);
          }
        }
        if (y) tst_free_output(y);
        free(rx);
      }
}

/* Prime lengths: the largest error against a long double DFT is at most twice pocketfft's on the
 * same input (numpy 2.4.6's numpy.fft.fft, measured on the values tst_fill gives with seed n, and
 * on their real parts). Lengths up to 255 take the direct DFT, longer ones Bluestein. */
TEST(fft_prime_accuracy) {
  if (!tst_backend_is_cpu()) SKIP("a property of lathe:cpu's own FFT; other backends' FFT is compared with it by the other fft rows");
  static const struct {
    int64_t n;
    double pocketfft, pocketfft_real;
  } cases[] = {{3, 5.8e-16, 7.16e-18},   {5, 6.26e-16, 2.21e-16},  {7, 1.56e-15, 5.95e-16},  {11, 1.95e-15, 1.78e-15},
               {13, 1.83e-15, 1.27e-15}, {31, 8.06e-15, 3.44e-15}, {97, 1.51e-14, 9.23e-15}, {101, 3.67e-14, 2.25e-14},
               {127, 2.83e-14, 2.42e-14}, {257, 6.68e-14, 3.71e-14}, {509, 7.91e-14, 5.2e-14},
               {1009, 1.63e-13, 9.94e-14}, {2003, 2.25e-13, 1.91e-13}, {4093, 3.76e-13, 2.43e-13}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int real = 0; real < 2; real++) {
      int64_t n = cases[c].n;
      lathe_shape s = tst_shape(LATHE_DTYPE_COMPLEX128, 1, &n);
      lathe_c128 *x = tst_alloc_for(&s);
      tst_fill(x, LATHE_DTYPE_COMPLEX128, n, (unsigned)n);
      if (real)
        for (int64_t i = 0; i < n; i++) x[i].im = 0;
      lathe_c128 *y = NULL;
      CHECK_OK(run_fft(s, x, LATHE_FFT_TYPE_FORWARD, &n, 1, (void **)&y, NULL));
      if (!y) {
        free(x);
        continue;
      }
      const long double pi = 3.141592653589793238462643383279502884L;
      long double *cs = malloc(sizeof(long double) * 2 * (size_t)n);
      for (int64_t m = 0; m < n; m++) cs[2 * m] = cosl(-2 * pi * m / n), cs[2 * m + 1] = sinl(-2 * pi * m / n);
      double worst = 0;
      for (int64_t u = 0; u < n; u++) {
        long double re = 0, im = 0;
        for (int64_t j = 0, m = 0; j < n; j++, m = m + u < n ? m + u : m + u - n) {
          re += x[j].re * cs[2 * m] - x[j].im * cs[2 * m + 1];
          im += x[j].re * cs[2 * m + 1] + x[j].im * cs[2 * m];
        }
        worst = fmax(worst, (double)hypotl(y[u].re - re, y[u].im - im));
      }
      free(cs);
      double bound = 2 * (real ? cases[c].pocketfft_real : cases[c].pocketfft);
      CHECK(worst <= bound, "FFT n=%lld%s: max error %.3g, pocketfft's %.3g", (long long)n, real ? " (real input)" : "",
            worst, bound / 2);
      tst_free_output(y);
      free(x);
    }
}

/* GoMLX's TestGradientFFT differentiates |FFT(sin(2 pi k/11))|, whose 9 near-zero bins are
 * rounding noise with a direction; its expected gradient is pocketfft's. Lengths 3, 5, 7 and 11
 * give pocketfft's bits (numpy 2.4.6's numpy.fft.fft of the same input, printed with float.hex). */
TEST(fft_pocketfft_bits) {
  if (!tst_backend_is_cpu()) SKIP("a property of lathe:cpu's own FFT; other backends' FFT is compared with it by the other fft rows");
  static const double want[11][2] = {
      {0x1.c000000000000p-52, 0x0.0p+0},        {-0x1.97bdf4c17a524p-52, -0x1.5ffffffffffffp+2},
      {0x1.5cfcb925f5caap-52, -0x1.c000000000000p-52}, {0x1.656c90a1a761fp-53, 0x1.2000000000000p-50},
      {0x1.19a262e60c1aep-54, 0x1.0000000000000p-53}, {-0x1.9e5da56ed2300p-52, 0x1.0000000000000p-51},
      {-0x1.9e5da56ed2300p-52, -0x1.0000000000000p-51}, {0x1.19a262e60c1aep-54, -0x1.0000000000000p-53},
      {0x1.656c90a1a761fp-53, -0x1.2000000000000p-50}, {0x1.5cfcb925f5caap-52, 0x1.c000000000000p-52},
      {-0x1.97bdf4c17a524p-52, 0x1.5ffffffffffffp+2}};
  int64_t n = 11;
  lathe_shape s = tst_shape(LATHE_DTYPE_COMPLEX128, 1, &n);
  lathe_c128 x[11], *y = NULL;
  for (int k = 0; k < 11; k++) x[k] = (lathe_c128){sin((double)k * (2.0 * M_PI / 11)), 0};
  CHECK_OK(run_fft(s, x, LATHE_FFT_TYPE_FORWARD, &n, 1, (void **)&y, NULL));
  if (!y) return;
  for (int k = 0; k < 11; k++)
    CHECK(y[k].re == want[k][0] && y[k].im == want[k][1], "FFT(sin) bin %d: %a%+ai, pocketfft %a%+ai", k, y[k].re,
          y[k].im, want[k][0], want[k][1]);
  tst_free_output(y);
}

/* ---------------------------------------------------------------------------------------------
 * BatchNorm */

typedef struct bn_geom {
  int64_t outer, f, inner;
} bn_geom;

static bn_geom bn_geom_of(const lathe_shape *s, int axis) {
  bn_geom g = {1, s->dims[axis], 1};
  for (int i = 0; i < axis; i++) g.outer *= s->dims[i];
  for (int i = axis + 1; i < s->rank; i++) g.inner *= s->dims[i];
  return g;
}
#define BN_AT(g, o, c, i) (((o) * (g).f + (c)) * (g).inner + (i))

/* Reference batch statistics and normalisation in double from values x (double). */
static void bn_ref_train(bn_geom g, const double *x, const double *scale, const double *offset, double eps,
                         double *y, double *mean, double *var) {
  double cnt = (double)(g.outer * g.inner);
  for (int64_t c = 0; c < g.f; c++) {
    double s = 0, ss = 0;
    for (int64_t o = 0; o < g.outer; o++)
      for (int64_t i = 0; i < g.inner; i++) s += x[BN_AT(g, o, c, i)];
    mean[c] = s / cnt;
    for (int64_t o = 0; o < g.outer; o++)
      for (int64_t i = 0; i < g.inner; i++) ss += (x[BN_AT(g, o, c, i)] - mean[c]) * (x[BN_AT(g, o, c, i)] - mean[c]);
    var[c] = ss / cnt;
    for (int64_t o = 0; o < g.outer; o++)
      for (int64_t i = 0; i < g.inner; i++)
        y[BN_AT(g, o, c, i)] = (x[BN_AT(g, o, c, i)] - mean[c]) / sqrt(var[c] + eps) * scale[c] + offset[c];
  }
}

static double *as_doubles(const void *d, lathe_dtype dt, int64_t n) {
  double *r = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) r[i] = tst_get(d, dt, i);
  return r;
}

static void *from_doubles(const double *v, lathe_dtype dt, int64_t n) {
  lathe_shape s = TST_SHAPE(dt, n);
  void *r = tst_alloc_for(&s);
  for (int64_t i = 0; i < n; i++) tst_set(r, dt, i, v[i]);
  return r;
}

typedef enum { BN_INFER, BN_TRAIN, BN_GRAD } bn_kind;

/* Builds op kind with parameters (operand first, then vectors, grad_output last for BN_GRAD). */
static lathe_status_t run_bn(bn_kind kind, lathe_shape xs, int axis, float eps, const void *const *in, void **out) {
  lathe_builder_t b;
  lathe_status_t st = tst_builder_new("bn", &b);
  if (st) return st;
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape vs = TST_SHAPE(xs.dtype, xs.dims[axis]);
  int n_in = kind == BN_TRAIN ? 3 : 5;
  lathe_value_t p[5], outs[3];
  for (int i = 0; i < n_in && !st; i++) {
    lathe_shape s = i == 0 || (kind == BN_GRAD && i == 4) ? xs : vs;
    st = lathe_parameter(fn, NULL, &s, &p[i]);
  }
  int n_out = kind == BN_INFER ? 1 : 3;
  if (!st) {
    if (kind == BN_INFER) st = lathe_batch_norm_for_inference(fn, p[0], p[1], p[2], p[3], p[4], eps, axis, outs);
    else if (kind == BN_TRAIN) st = lathe_batch_norm_for_training(fn, p[0], p[1], p[2], eps, axis, outs);
    else st = lathe_batch_norm_gradient(fn, p[0], p[1], p[2], p[3], p[4], eps, axis, outs);
  }
  if (!st) st = lathe_function_return(fn, outs, n_out);
  if (!st) st = tst_run(b, in, n_in, out, n_out, NULL);
  lathe_builder_free(b);
  return st;
}

static const lathe_dtype bn_dtypes[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT16,
                                        LATHE_DTYPE_BFLOAT16};

static double bn_tol(lathe_dtype dt) { return dt == LATHE_DTYPE_FLOAT64 ? 1e-11 : 2 * tst_tol(dt); }

/* One shape × axis × dtype: inference, training and gradient against the formulas. */
static void bn_case(const int64_t *dims, int rank, int axis, lathe_dtype dt, float eps, unsigned seed) {
  lathe_shape xs = tst_shape(dt, rank, dims);
  bn_geom g = bn_geom_of(&xs, axis);
  int64_t n = numel(&xs), f = g.f;
  char label[160];
  int off = snprintf(label, sizeof label, "%s[", lathe_dtype_name(dt));
  for (int i = 0; i < rank; i++) off += snprintf(label + off, sizeof label - (size_t)off, "%s%lld", i ? "," : "", (long long)dims[i]);
  snprintf(label + off, sizeof label - (size_t)off, "] axis=%d eps=%g", axis, (double)eps);
  char l2[220];

  lathe_shape vs = TST_SHAPE(dt, f);
  void *x = tst_alloc_for(&xs), *dy = tst_alloc_for(&xs), *scale = tst_alloc_for(&vs), *offset = tst_alloc_for(&vs),
       *mean = tst_alloc_for(&vs), *var = tst_alloc_for(&vs);
  tst_fill(x, dt, n, seed);
  tst_fill(dy, dt, n, seed + 1);
  tst_fill(scale, dt, f, seed + 2);
  tst_fill(offset, dt, f, seed + 3);
  tst_fill(mean, dt, f, seed + 4);
  tst_fill(var, dt, f, seed + 5);
  for (int64_t c = 0; c < f; c++) tst_set(var, dt, c, fabs(tst_get(var, dt, c)) + 0.25); /* positive */
  double *xd = as_doubles(x, dt, n), *dyd = as_doubles(dy, dt, n), *sd = as_doubles(scale, dt, f),
         *od = as_doubles(offset, dt, f), *md = as_doubles(mean, dt, f), *vd = as_doubles(var, dt, f);
  double *y = malloc(sizeof(double) * (size_t)(n + 1)), *bm = malloc(sizeof(double) * (size_t)(f + 1)),
         *bv = malloc(sizeof(double) * (size_t)(f + 1));

  /* inference */
  for (int64_t o = 0; o < g.outer; o++)
    for (int64_t c = 0; c < f; c++)
      for (int64_t i = 0; i < g.inner; i++)
        y[BN_AT(g, o, c, i)] = (xd[BN_AT(g, o, c, i)] - md[c]) / sqrt(vd[c] + (double)eps) * sd[c] + od[c];
  void *want = from_doubles(y, dt, n);
  void *out[3] = {0};
  const void *in5[5] = {x, scale, offset, mean, var};
  CHECK_OK(run_bn(BN_INFER, xs, axis, eps, in5, out));
  if (out[0]) {
    snprintf(l2, sizeof l2, "BatchNormForInference %s", label);
    tst_expect_close(l2, out[0], want, dt, n, bn_tol(dt));
    tst_free_output(out[0]);
  }
  free(want);

  /* training */
  bn_ref_train(g, xd, sd, od, eps, y, bm, bv);
  want = from_doubles(y, dt, n);
  void *wm = from_doubles(bm, dt, f), *wv = from_doubles(bv, dt, f);
  const void *in3[3] = {x, scale, offset};
  memset(out, 0, sizeof out);
  CHECK_OK(run_bn(BN_TRAIN, xs, axis, eps, in3, out));
  if (out[0]) {
    snprintf(l2, sizeof l2, "BatchNormForTraining normalized %s", label);
    tst_expect_close(l2, out[0], want, dt, n, bn_tol(dt));
    snprintf(l2, sizeof l2, "BatchNormForTraining mean %s", label);
    tst_expect_close(l2, out[1], wm, dt, f, bn_tol(dt));
    snprintf(l2, sizeof l2, "BatchNormForTraining variance %s", label);
    tst_expect_close(l2, out[2], wv, dt, f, bn_tol(dt));
    for (int k = 0; k < 3; k++) tst_free_output(out[k]);
  }
  free(want), free(wm), free(wv);

  /* gradient, analytic: with xhat = (x-mean)/sqrt(var+eps) and N values per feature,
   * d_offset = sum dy, d_scale = sum dy*xhat,
   * d_x = scale/sqrt(var+eps) * (dy - d_offset/N - xhat*d_scale/N) */
  double cnt = (double)(g.outer * g.inner);
  double *gx = malloc(sizeof(double) * (size_t)(n + 1)), *gs = calloc((size_t)f + 1, sizeof(double)),
         *go = calloc((size_t)f + 1, sizeof(double));
  for (int64_t c = 0; c < f; c++) {
    double inv = 1 / sqrt(vd[c] + (double)eps);
    for (int64_t o = 0; o < g.outer; o++)
      for (int64_t i = 0; i < g.inner; i++) {
        int64_t at = BN_AT(g, o, c, i);
        go[c] += dyd[at];
        gs[c] += dyd[at] * (xd[at] - md[c]) * inv;
      }
    for (int64_t o = 0; o < g.outer; o++)
      for (int64_t i = 0; i < g.inner; i++) {
        int64_t at = BN_AT(g, o, c, i);
        gx[at] = sd[c] * inv * (dyd[at] - go[c] / cnt - (xd[at] - md[c]) * inv * gs[c] / cnt);
      }
  }
  void *wgx = from_doubles(gx, dt, n), *wgs = from_doubles(gs, dt, f), *wgo = from_doubles(go, dt, f);
  const void *ing[5] = {x, scale, mean, var, dy};
  memset(out, 0, sizeof out);
  CHECK_OK(run_bn(BN_GRAD, xs, axis, eps, ing, out));
  if (out[0]) {
    /* sums over many half-precision inputs: scale the tolerance with the count */
    double tol = bn_tol(dt) * (dt == LATHE_DTYPE_FLOAT64 ? 1 : 1 + sqrt(cnt));
    snprintf(l2, sizeof l2, "BatchNormGradient operand %s", label);
    tst_expect_close(l2, out[0], wgx, dt, n, tol);
    snprintf(l2, sizeof l2, "BatchNormGradient scale %s", label);
    tst_expect_close(l2, out[1], wgs, dt, f, tol);
    snprintf(l2, sizeof l2, "BatchNormGradient offset %s", label);
    tst_expect_close(l2, out[2], wgo, dt, f, tol);
    for (int k = 0; k < 3; k++) tst_free_output(out[k]);
  }
  free(wgx), free(wgs), free(wgo), free(gx), free(gs), free(go);
  free(xd), free(dyd), free(sd), free(od), free(md), free(vd), free(y), free(bm), free(bv);
  free(x), free(dy), free(scale), free(offset), free(mean), free(var);
}

TEST(batch_norm_shapes_axes_dtypes) {
  static const int64_t s1[] = {4, 3}, s2[] = {2, 3, 5}, s3[] = {1}, s4[] = {5, 1, 2}, s5[] = {2, 7, 3, 2},
                       s6[] = {0, 3}, s7[] = {3, 0, 2};
  for (size_t d = 0; d < sizeof bn_dtypes / sizeof bn_dtypes[0]; d++) {
    lathe_dtype dt = bn_dtypes[d];
    bn_case(s1, 2, 1, dt, 1e-3f, 1);
    bn_case(s1, 2, 0, dt, 0.5f, 2);
    for (int ax = 0; ax < 3; ax++) bn_case(s2, 3, ax, dt, 1e-5f, 10 + (unsigned)ax);
    bn_case(s3, 1, 0, dt, 1e-3f, 20);
    for (int ax = 0; ax < 3; ax++) bn_case(s4, 3, ax, dt, 0.f, 30 + (unsigned)ax);
    for (int ax = 0; ax < 4; ax++) bn_case(s5, 4, ax, dt, 1e-2f, 40 + (unsigned)ax);
    bn_case(s6, 2, 1, dt, 1e-3f, 50); /* empty batch: NaN statistics, zero gradients */
    bn_case(s7, 3, 1, dt, 1e-3f, 51); /* no features */
  }
}

TEST(batch_norm_large_parallel) {
  static const int64_t nhwc[] = {16, 24, 24, 32}, nchw[] = {8, 6, 64, 64}, c1[] = {3, 200000};
  bn_case(nhwc, 4, 3, LATHE_DTYPE_FLOAT32, 1e-3f, 60);
  bn_case(nchw, 4, 1, LATHE_DTYPE_FLOAT32, 1e-3f, 61);
  bn_case(c1, 2, 0, LATHE_DTYPE_FLOAT64, 1e-3f, 62);
}

/* The gradient of L = sum(dy * BatchNormForTraining(x, scale, offset)) by central differences
 * in double, against BatchNormGradient given the batch statistics. */
TEST(batch_norm_gradient_finite_differences) {
  static const int64_t dims[] = {3, 4, 2};
  const int axis = 1;
  const double eps = 1e-3, h = 1e-5;
  lathe_shape xs = tst_shape(LATHE_DTYPE_FLOAT64, 3, dims);
  bn_geom g = bn_geom_of(&xs, axis);
  int64_t n = numel(&xs), f = g.f;
  double x[24], dy[24], scale[4], offset[4], y[24], mean[4], var[4];
  tst_fill(x, LATHE_DTYPE_FLOAT64, n, 5);
  tst_fill(dy, LATHE_DTYPE_FLOAT64, n, 6);
  tst_fill(scale, LATHE_DTYPE_FLOAT64, f, 7);
  tst_fill(offset, LATHE_DTYPE_FLOAT64, f, 8);
  bn_ref_train(g, x, scale, offset, eps, y, mean, var);
  void *out[3] = {0};
  const void *in[5] = {x, scale, mean, var, dy};
  CHECK_OK(run_bn(BN_GRAD, xs, axis, (float)eps, in, out));
  if (!out[0]) return;
  /* eps went through float: use the same value in the reference */
  double e = (double)(float)eps;
  double worst = 0;
  double xp[24], sp[4], op[4];
  for (int64_t k = 0; k < n + 2 * f; k++) {
    double lp = 0, lm = 0;
    for (int side = 0; side < 2; side++) {
      memcpy(xp, x, sizeof x), memcpy(sp, scale, sizeof scale), memcpy(op, offset, sizeof offset);
      double d = side ? -h : h;
      if (k < n) xp[k] += d;
      else if (k < n + f) sp[k - n] += d;
      else op[k - n - f] += d;
      double mm[4], vv[4], yy[24], l = 0;
      bn_ref_train(g, xp, sp, op, e, yy, mm, vv);
      for (int64_t i = 0; i < n; i++) l += dy[i] * yy[i];
      if (side) lm = l;
      else lp = l;
    }
    double fd = (lp - lm) / (2 * h);
    double got = k < n ? ((double *)out[0])[k] : k < n + f ? ((double *)out[1])[k - n] : ((double *)out[2])[k - n - f];
    worst = fmax(worst, fabs(got - fd) / (1 + fabs(fd)));
  }
  CHECK(worst < 1e-6, "BatchNormGradient vs finite differences: worst relative error %g", worst);
  for (int k = 0; k < 3; k++) tst_free_output(out[k]);
}
