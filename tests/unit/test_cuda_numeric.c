/* test_cuda_numeric.c -- lathe:cuda's NUMERIC family against lathe:cpu on a GPU (SKIP without
 * one): RNGBitGenerator bit for bit (values and next state, every values dtype), FFT (all four
 * types, Complex64/128 and Float32/64, 1 to 3 axes, length-1 axes, odd and prime lengths,
 * non-Hermitian half spectra, empty batches), BatchNorm (the three ops, every float dtype, the
 * feature axis everywhere, both the strided and the contiguous layout, empty batch and no
 * features). The capability rules run anywhere. */
#include "cuda/cuda.h"
#include "cuda_testing.h"
#include "testing.h"

TEST(cuda_numeric_capabilities) {
  CHECK(lathe_cuda_supports_op(LATHE_OP_RNG_BIT_GENERATOR, LATHE_DTYPE_UINT64), "RNGBitGenerator");
  CHECK(!lathe_cuda_supports_op(LATHE_OP_RNG_BIT_GENERATOR, LATHE_DTYPE_UINT32), "RNGBitGenerator takes a Uint64 state");
  const lathe_dtype fl[] = {LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64};
  for (int i = 0; i < 4; i++) {
    CHECK(lathe_cuda_supports_op(LATHE_OP_BATCH_NORM_FOR_INFERENCE, fl[i]), "BatchNormForInference %s", lathe_dtype_name(fl[i]));
    CHECK(lathe_cuda_supports_op(LATHE_OP_BATCH_NORM_FOR_TRAINING, fl[i]), "BatchNormForTraining %s", lathe_dtype_name(fl[i]));
    CHECK(lathe_cuda_supports_op(LATHE_OP_BATCH_NORM_GRADIENT, fl[i]), "BatchNormGradient %s", lathe_dtype_name(fl[i]));
  }
  CHECK(!lathe_cuda_supports_op(LATHE_OP_BATCH_NORM_GRADIENT, LATHE_DTYPE_INT32), "no integer BatchNorm");
  /* FFT: exactly where cuFFT loads */
  bool cufft = lathe_cuda_have_cufft();
  const lathe_dtype ft[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_COMPLEX128};
  for (int i = 0; i < 4; i++)
    CHECK(lathe_cuda_supports_op(LATHE_OP_FFT, ft[i]) == cufft, "FFT %s with%s cuFFT", lathe_dtype_name(ft[i]),
          cufft ? "" : "out");
  CHECK(!lathe_cuda_supports_op(LATHE_OP_FFT, LATHE_DTYPE_FLOAT16), "no Float16 FFT");
}

/* ---- RNGBitGenerator: the same bytes on both devices ---- */

/* Runs b's graph on backend be; out[k] receives malloc'd bytes of output k (n_out of them). */
static bool run_raw(lathe_backend_t be, lathe_builder_t b, const void *const *ins, int n_in, void **out, int n_out) {
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile_for(b, be, &e));
  if (!e) return false;
  lathe_buffer_t bi[4] = {0}, bo[4] = {0};
  for (int i = 0; i < n_in; i++) {
    lathe_shape s;
    CHECK_OK(lathe_executable_input_shape(e, i, &s));
    CHECK_OK(lathe_buffer_from_host(be, 0, &s, ins[i], (size_t)lathe_shape_byte_size(&s), &bi[i]));
  }
  lathe_status_t st = lathe_executable_execute(e, bi, NULL, n_in, 0, bo, n_out);
  CHECK(!st, "run on %s: %s", lathe_backend_config(be), lathe_status_message(st));
  bool ok = !st;
  lathe_status_free(st);
  for (int k = 0; ok && k < n_out; k++) {
    lathe_shape s;
    CHECK_OK(lathe_buffer_shape(bo[k], &s));
    out[k] = tst_alloc_for(&s);
    CHECK_OK(lathe_buffer_to_host(bo[k], out[k], (size_t)lathe_shape_byte_size(&s)));
  }
  for (int i = 0; i < 4; i++) lathe_buffer_free(bi[i]), lathe_buffer_free(bo[i]);
  lathe_executable_free(e);
  return ok;
}

static void rng_case(const uint64_t state[3], lathe_shape vs) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("rng", &fn);
  lathe_shape ss = TST_SHAPE(LATHE_DTYPE_UINT64, 3);
  lathe_value_t p = tst_param(fn, "state", ss), outs[2];
  CHECK_OK(lathe_rng_bit_generator(fn, p, &vs, outs));
  CHECK_OK(lathe_function_return(fn, outs, 2));
  const void *ins[1] = {state};
  void *g[2] = {0}, *c[2] = {0};
  if (run_raw(gpu(), b, ins, 1, g, 2) && run_raw(tst_backend(), b, ins, 1, c, 2)) {
    char shape[LATHE_SHAPE_STR_MAX];
    lathe_shape_str(&vs, shape, sizeof shape);
    CHECK(!memcmp(g[0], c[0], 24), "RNGBitGenerator %s: next state %llx %llx %llx, lathe:cpu %llx %llx %llx", shape,
          (unsigned long long)((uint64_t *)g[0])[0], (unsigned long long)((uint64_t *)g[0])[1],
          (unsigned long long)((uint64_t *)g[0])[2], (unsigned long long)((uint64_t *)c[0])[0],
          (unsigned long long)((uint64_t *)c[0])[1], (unsigned long long)((uint64_t *)c[0])[2]);
    size_t nb = (size_t)lathe_shape_byte_size(&vs);
    size_t first = 0;
    while (first < nb && ((unsigned char *)g[1])[first] == ((unsigned char *)c[1])[first]) first++;
    CHECK(first == nb, "RNGBitGenerator %s: values differ from lathe:cpu from byte %zu of %zu", shape, first, nb);
  }
  for (int k = 0; k < 2; k++) free(g[k]), free(c[k]);
  lathe_builder_free(b);
}

TEST(cuda_rng_bit_for_bit) {
  if (!gpu()) SKIP("no usable GPU");
  const uint64_t states[3][3] = {{0x0123456789abcdefull, 0xfffffffffffffffdull, 7}, /* counter low wraps */
                                 {42, 0, 0},
                                 {~0ull, ~0ull, ~0ull}}; /* the whole counter wraps */
  const int64_t sizes[] = {0, 1, 2, 3, 4, 5, 7, 9, 37, 70, 1001};
  for (int d = 0; d < tst_n_all_dtypes; d++) {
    lathe_dtype dt = tst_all_dtypes[d];
    lathe_dtype_class cl = lathe_dtype_class_of(dt);
    if (cl == LATHE_CLASS_BOOL || cl == LATHE_CLASS_COMPLEX) continue;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) rng_case(states[si % 3], TST_SHAPE(dt, sizes[si]));
    rng_case(states[0], TST_SHAPE(dt, 7, 11, 13));
    rng_case(states[1], tst_shape0(dt));
  }
  /* many thread blocks, and a chain: the next state feeds the next draw */
  rng_case(states[0], TST_SHAPE(LATHE_DTYPE_UINT32, 1 << 22));
  rng_case(states[1], TST_SHAPE(LATHE_DTYPE_FLOAT64, 3, 333333));
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("rng chain", &fn);
  lathe_shape ss = TST_SHAPE(LATHE_DTYPE_UINT64, 3), v1 = TST_SHAPE(LATHE_DTYPE_UINT8, 1001), v2 = TST_SHAPE(LATHE_DTYPE_INT64, 77);
  lathe_value_t p = tst_param(fn, "state", ss), o1[2], o2[2], r[3];
  CHECK_OK(lathe_rng_bit_generator(fn, p, &v1, o1));
  CHECK_OK(lathe_rng_bit_generator(fn, o1[0], &v2, o2));
  r[0] = o2[0], r[1] = o1[1], r[2] = o2[1];
  CHECK_OK(lathe_function_return(fn, r, 3));
  const void *ins[1] = {states[0]};
  void *g[3] = {0}, *c[3] = {0};
  if (run_raw(gpu(), b, ins, 1, g, 3) && run_raw(tst_backend(), b, ins, 1, c, 3))
    CHECK(!memcmp(g[0], c[0], 24) && !memcmp(g[1], c[1], 1001) && !memcmp(g[2], c[2], 77 * 8), "RNG chain differs");
  for (int k = 0; k < 3; k++) free(g[k]), free(c[k]);
  lathe_builder_free(b);
}

/* ---- FFT ---- */
static void fft_one(lathe_shape xs, lathe_fft_type type, const int64_t *len, int k, unsigned seed) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("fft", &fn);
  lathe_value_t p = tst_param(fn, "x", xs), y;
  CHECK_OK(lathe_fft(fn, p, type, len, k, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  void *x = tst_alloc_for(&xs);
  tst_fill(x, xs.dtype, lathe_shape_num_elements(&xs), seed);
  const void *ins[1] = {x};
  char label[LATHE_SHAPE_STR_MAX + 80], shape[LATHE_SHAPE_STR_MAX];
  lathe_shape_str(&xs, shape, sizeof shape);
  snprintf(label, sizeof label, "FFT type %d of %s over %d axes", (int)type, shape, k);
  /* both compute in double and round once */
  bool single = xs.dtype == LATHE_DTYPE_FLOAT32 || xs.dtype == LATHE_DTYPE_COMPLEX64;
  agree(label, b, ins, 1, single ? 1e-6 : 1e-10);
  free(x);
  lathe_builder_free(b);
}

/* All four types over the k innermost axes of dims. */
static void fft_case(const int64_t *dims, int rank, int k, bool dbl, unsigned seed) {
  lathe_dtype cdt = dbl ? LATHE_DTYPE_COMPLEX128 : LATHE_DTYPE_COMPLEX64, rdt = dbl ? LATHE_DTYPE_FLOAT64 : LATHE_DTYPE_FLOAT32;
  const int64_t *len = dims + rank - k;
  fft_one(tst_shape(cdt, rank, dims), LATHE_FFT_TYPE_FORWARD, len, k, seed);
  fft_one(tst_shape(cdt, rank, dims), LATHE_FFT_TYPE_INVERSE, len, k, seed + 1);
  fft_one(tst_shape(rdt, rank, dims), LATHE_FFT_TYPE_FORWARD_REAL, len, k, seed + 2);
  int64_t hd[LATHE_MAX_RANK];
  memcpy(hd, dims, sizeof(int64_t) * (size_t)rank);
  hd[rank - 1] = dims[rank - 1] / 2 + 1; /* an arbitrary (non-Hermitian) half spectrum */
  fft_one(tst_shape(cdt, rank, hd), LATHE_FFT_TYPE_INVERSE_REAL, len, k, seed + 3);
}

TEST(cuda_fft) {
  if (!gpu()) SKIP("no usable GPU");
  if (!lathe_cuda_have_cufft()) SKIP("no cuFFT: FFT is unsupported on lathe:cuda");
  const int64_t sizes[] = {1, 2, 3, 5, 8, 12, 17, 64, 97};
  for (int dbl = 0; dbl < 2; dbl++) {
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      int64_t d1[1] = {sizes[i]}, d2[2] = {3, sizes[i]};
      fft_case(d1, 1, 1, dbl, (unsigned)i);
      fft_case(d2, 2, 1, dbl, (unsigned)i + 100);
    }
    static const int64_t a[] = {3, 4, 6}, b[] = {5, 7}, c[] = {2, 3, 5, 4}, d[] = {4, 2, 9}, e[] = {2, 3, 1},
                         f[] = {2, 1, 4, 6}, g[] = {3, 4, 1, 1}, h[] = {1, 1, 1}, z[] = {0, 8}, q[] = {2, 6, 4, 8},
                         big[] = {256, 12, 64}, lng[] = {2, 4096}, odd[] = {3, 997}, n2[] = {2, 1000};
    fft_case(a, 3, 2, dbl, 1);
    fft_case(b, 2, 2, dbl, 2);
    fft_case(c, 4, 3, dbl, 3);
    fft_case(d, 3, 3, dbl, 4);
    fft_case(a, 3, 1, dbl, 5);
    fft_case(e, 3, 2, dbl, 6); /* length-1 last axis */
    fft_case(c, 4, 2, dbl, 7);
    fft_case(f, 4, 3, dbl, 8);  /* a length-1 leading transformed axis */
    fft_case(g, 4, 3, dbl, 9);  /* length-1 axes, the last one included */
    fft_case(h, 3, 3, dbl, 10); /* nothing to transform */
    fft_case(z, 2, 1, dbl, 11); /* empty batch */
    fft_case(q, 4, 3, dbl, 12); /* even lengths: Nyquist rows and columns */
    fft_case(big, 3, 2, dbl, 13);
    fft_case(lng, 2, 1, dbl, 14);
    fft_case(odd, 2, 1, dbl, 15);
    fft_case(n2, 2, 1, dbl, 16);
  }
}

/* ---- BatchNorm ---- */
typedef enum { BN_INFER, BN_TRAIN, BN_GRAD } bn_kind;

static void bn_one(bn_kind kind, lathe_shape xs, int axis, float eps, unsigned seed) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("bn", &fn);
  lathe_dtype dt = xs.dtype;
  int64_t f = xs.dims[axis];
  lathe_shape vs = TST_SHAPE(dt, f);
  int n_in = kind == BN_TRAIN ? 3 : 5, n_out = kind == BN_INFER ? 1 : 3;
  lathe_value_t p[5], outs[3];
  void *data[5];
  for (int i = 0; i < n_in; i++) {
    lathe_shape s = i == 0 || (kind == BN_GRAD && i == 4) ? xs : vs;
    p[i] = tst_param(fn, NULL, s);
    data[i] = tst_alloc_for(&s);
    tst_fill(data[i], dt, lathe_shape_num_elements(&s), seed + (unsigned)i);
  }
  if (kind != BN_TRAIN) { /* positive variances */
    int var = kind == BN_INFER ? 4 : 3;
    for (int64_t c = 0; c < f; c++) tst_set(data[var], dt, c, fabs(tst_get(data[var], dt, c)) + 0.25);
  }
  if (kind == BN_INFER) CHECK_OK(lathe_batch_norm_for_inference(fn, p[0], p[1], p[2], p[3], p[4], eps, axis, outs));
  else if (kind == BN_TRAIN) CHECK_OK(lathe_batch_norm_for_training(fn, p[0], p[1], p[2], eps, axis, outs));
  else CHECK_OK(lathe_batch_norm_gradient(fn, p[0], p[1], p[2], p[3], p[4], eps, axis, outs));
  CHECK_OK(lathe_function_return(fn, outs, n_out));
  char label[LATHE_SHAPE_STR_MAX + 80], shape[LATHE_SHAPE_STR_MAX];
  lathe_shape_str(&xs, shape, sizeof shape);
  static const char *const names[] = {"BatchNormForInference", "BatchNormForTraining", "BatchNormGradient"};
  snprintf(label, sizeof label, "%s %s axis %d", names[kind], shape, axis);
  /* both compute in double; sums differ in order only */
  double tol = dt == LATHE_DTYPE_FLOAT64 ? 1e-10 : dt == LATHE_DTYPE_FLOAT32 ? 2e-6 : tst_tol(dt);
  agree(label, b, (const void *const *)data, n_in, tol);
  for (int i = 0; i < n_in; i++) free(data[i]);
  lathe_builder_free(b);
}

static void bn_case(const int64_t *dims, int rank, int axis, lathe_dtype dt, float eps, unsigned seed) {
  lathe_shape xs = tst_shape(dt, rank, dims);
  for (int kind = 0; kind < 3; kind++) bn_one((bn_kind)kind, xs, axis, eps, seed);
}

TEST(cuda_batch_norm) {
  if (!gpu()) SKIP("no usable GPU");
  static const int64_t s1[] = {4, 3}, s2[] = {2, 3, 5}, s3[] = {1}, s4[] = {5, 1, 2}, s5[] = {2, 7, 3, 2}, s6[] = {0, 3},
                       s7[] = {3, 0, 2}, s8[] = {3, 40, 2}, s9[] = {2, 5, 100}, s10[] = {1, 3, 1000}, s11[] = {700, 5},
                       s12[] = {2, 2000, 3};
  const lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16};
  for (size_t d = 0; d < 4; d++) {
    lathe_dtype dt = dts[d];
    bn_case(s1, 2, 1, dt, 1e-3f, 1);
    bn_case(s1, 2, 0, dt, 0.5f, 2);
    for (int ax = 0; ax < 3; ax++) bn_case(s2, 3, ax, dt, 1e-5f, 10 + (unsigned)ax);
    bn_case(s3, 1, 0, dt, 1e-3f, 20);
    for (int ax = 0; ax < 3; ax++) bn_case(s4, 3, ax, dt, 0.f, 30 + (unsigned)ax);
    for (int ax = 0; ax < 4; ax++) bn_case(s5, 4, ax, dt, 1e-2f, 40 + (unsigned)ax);
    bn_case(s6, 2, 1, dt, 1e-3f, 50); /* empty batch: NaN statistics, zero gradients */
    bn_case(s6, 2, 0, dt, 1e-3f, 51); /* no features */
    bn_case(s7, 3, 1, dt, 1e-3f, 52);
    for (int ax = 0; ax < 3; ax++) bn_case(s8, 3, ax, dt, 1e-3f, 60 + (unsigned)ax);
    for (int ax = 0; ax < 3; ax++) bn_case(s9, 3, ax, dt, 1e-3f, 70 + (unsigned)ax);
    bn_case(s10, 3, 1, dt, 1e-3f, 80);
    bn_case(s11, 2, 1, dt, 1e-3f, 81);
    bn_case(s11, 2, 0, dt, 1e-3f, 82);
    for (int ax = 0; ax < 3; ax++) bn_case(s12, 3, ax, dt, 1e-3f, 90 + (unsigned)ax);
  }
  /* NHWC and NCHW image batches, one huge feature row */
  static const int64_t nhwc[] = {16, 24, 24, 32}, nchw[] = {8, 6, 64, 64}, c1[] = {3, 200000}, wide[] = {2, 300000};
  bn_case(nhwc, 4, 3, LATHE_DTYPE_FLOAT32, 1e-3f, 100);
  bn_case(nhwc, 4, 3, LATHE_DTYPE_BFLOAT16, 1e-3f, 101);
  bn_case(nchw, 4, 1, LATHE_DTYPE_FLOAT32, 1e-3f, 102);
  bn_case(nchw, 4, 1, LATHE_DTYPE_FLOAT16, 1e-3f, 103);
  bn_case(c1, 2, 0, LATHE_DTYPE_FLOAT64, 1e-3f, 104);
  bn_case(wide, 2, 1, LATHE_DTYPE_FLOAT32, 1e-3f, 105); /* more features than GPU threads */
}
