/* test_cuda_dot.c -- DotGeneral and ConvGeneral on lathe:cuda against lathe:cpu (SKIP without a
 * GPU): operands read in place and gathered, transposed layouts, batch and contracting axes
 * anywhere, accumulator and output dtypes, integers, complex, sizes 0 and 1, tiles beyond one
 * block; convolutions in several layouts with strides, padding, dilations and groups. */
#include "cuda_testing.h"

/* Per-dtype tolerance of GPU-vs-CPU results (sums in another order; halves round once). */
static double tol_of(lathe_dtype dt) {
  switch (dt) {
    case LATHE_DTYPE_FLOAT32:
    case LATHE_DTYPE_COMPLEX64: return 1e-4;
    case LATHE_DTYPE_FLOAT64:
    case LATHE_DTYPE_COMPLEX128: return 1e-10;
    case LATHE_DTYPE_FLOAT16: return 1e-2;
    case LATHE_DTYPE_BFLOAT16: return 3e-2;
    default: return 0;
  }
}

typedef struct {
  int lrank, rrank;
  int64_t ld[6], rd[6];
  int lc[3], rc[3], lb[3], rb[3];
  int nc, nb;
} dspec;

static void dot_case(const char *label, lathe_dtype dt, const dspec *sp, lathe_dtype acc, lathe_dtype odt) {
  char lab[192];
  snprintf(lab, sizeof lab, "%s %s acc=%s out=%s", label, lathe_dtype_name(dt), lathe_dtype_name(acc), lathe_dtype_name(odt));
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("cuda_dot", &fn);
  lathe_value_t x = tst_param(fn, "lhs", tst_shape(dt, sp->lrank, sp->ld)), y = tst_param(fn, "rhs", tst_shape(dt, sp->rrank, sp->rd));
  lathe_value_t z = NULL;
  lathe_dot_config cfg = {acc, odt};
  lathe_status_t st = lathe_dot_general(fn, x, sp->lc, sp->nc, sp->lb, sp->nb, y, sp->rc, sp->nc, sp->rb, sp->nb, &cfg, &z);
  if (!tst_built(lab, st, b)) return;
  CHECK_OK(lathe_function_return(fn, &z, 1));
  int64_t nl = tst_numel(sp->lrank, sp->ld), nr = tst_numel(sp->rrank, sp->rd);
  lathe_shape ls = tst_shape(dt, sp->lrank, sp->ld), rs = tst_shape(dt, sp->rrank, sp->rd);
  void *a = tst_alloc_for(&ls), *c = tst_alloc_for(&rs);
  tst_fill(a, dt, nl, 3);
  tst_fill(c, dt, nr, 4);
  const void *ins[2] = {a, c};
  lathe_shape os;
  CHECK_OK(lathe_value_shape(z, &os));
  /* the coarsest of operand, accumulator and output; long sums of Float32 lose more */
  double tol = tol_of(dt);
  tol = tol_of(os.dtype) > tol ? tol_of(os.dtype) : tol;
  tol = acc != LATHE_DTYPE_INVALID && tol_of(acc) > tol ? tol_of(acc) : tol;
  agree(lab, b, ins, 2, tol * (nl > 4096 ? 10 : 1));
  free(a);
  free(c);
  lathe_builder_free(b);
}

static const dspec specs[] = {
    /* plain matmul [M, K] x [K, N] */
    {2, 2, {7, 5}, {5, 9}, {1}, {0}, {0}, {0}, 1, 0},
    /* rhs transposed [N, K]: read in place with a transpose flag */
    {2, 2, {7, 5}, {9, 5}, {1}, {1}, {0}, {0}, 1, 0},
    /* lhs transposed [K, M] */
    {2, 2, {5, 7}, {5, 9}, {0}, {0}, {0}, {0}, 1, 0},
    /* batched, batch leading */
    {3, 3, {3, 6, 4}, {3, 4, 5}, {2}, {1}, {0}, {0}, 1, 1},
    /* batch axis last on the lhs, in the middle on the rhs: gathered */
    {3, 3, {6, 4, 3}, {4, 3, 5}, {1}, {0}, {2}, {1}, 1, 1},
    /* two contracting axes, in the opposite orders */
    {3, 3, {4, 2, 3}, {3, 5, 2}, {1, 2}, {2, 0}, {0}, {0}, 2, 0},
    /* vector . matrix, and size-1 axes */
    {1, 2, {6}, {6, 4}, {0}, {0}, {0}, {0}, 1, 0},
    {3, 3, {1, 1, 7}, {1, 7, 1}, {2}, {1}, {0}, {0}, 1, 1},
    /* no contracting axes: an outer product */
    {2, 2, {3, 4}, {3, 5}, {0}, {0}, {0}, {0}, 0, 1},
    /* two cross axes on each side (merged into one stride), batch in the middle */
    {4, 4, {2, 3, 4, 5}, {5, 3, 2, 2}, {3}, {0}, {1}, {1}, 1, 1},
};

TEST(cuda_dot_layouts_dtypes) {
  if (!gpu()) SKIP("no usable GPU");
  static const lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT64,
                                    LATHE_DTYPE_INT32, LATHE_DTYPE_INT8, LATHE_DTYPE_UINT8, LATHE_DTYPE_INT64,
                                    LATHE_DTYPE_UINT16, LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_COMPLEX128, LATHE_DTYPE_INT4};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
      char label[48];
      snprintf(label, sizeof label, "dot spec %zu", s);
      dot_case(label, dts[d], &specs[s], LATHE_DTYPE_INVALID, LATHE_DTYPE_INVALID);
    }
}

TEST(cuda_dot_accumulator_output) {
  if (!gpu()) SKIP("no usable GPU");
  const dspec *mm = &specs[3];
  static const lathe_dtype combos[][3] = {
      {LATHE_DTYPE_FLOAT16, LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT32},
      {LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT16},
      {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_FLOAT32},
      {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_BFLOAT16},
      {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT32},
      {LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64},
      {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_INT32, LATHE_DTYPE_INT16},
      {LATHE_DTYPE_INT8, LATHE_DTYPE_INT32, LATHE_DTYPE_INT32},
      {LATHE_DTYPE_INT8, LATHE_DTYPE_INT16, LATHE_DTYPE_INT8},
      {LATHE_DTYPE_UINT8, LATHE_DTYPE_UINT8, LATHE_DTYPE_INT64},
      {LATHE_DTYPE_INT32, LATHE_DTYPE_INT64, LATHE_DTYPE_FLOAT32},
      {LATHE_DTYPE_INT16, LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT32},
      {LATHE_DTYPE_INT32, LATHE_DTYPE_INT32, LATHE_DTYPE_INT4},
      {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_COMPLEX128},
      {LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_COMPLEX128, LATHE_DTYPE_COMPLEX64},
      {LATHE_DTYPE_UINT4, LATHE_DTYPE_UINT32, LATHE_DTYPE_UINT32},
  };
  for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++) {
    dot_case("matmul", combos[i][0], mm, combos[i][1], combos[i][2]);
    dot_case("gathered", combos[i][0], &specs[4], combos[i][1], combos[i][2]);
  }
}

TEST(cuda_dot_sizes) {
  if (!gpu()) SKIP("no usable GPU");
  /* empty sums, empty results, and products over several 64 x 64 tiles and batches */
  static const dspec sizes[] = {
      {2, 2, {4, 0}, {0, 3}, {1}, {0}, {0}, {0}, 1, 0},
      {2, 2, {0, 5}, {5, 3}, {1}, {0}, {0}, {0}, 1, 0},
      {2, 2, {1, 1}, {1, 1}, {1}, {0}, {0}, {0}, 1, 0},
      {3, 3, {3, 130, 67}, {3, 67, 129}, {2}, {1}, {0}, {0}, 1, 1},
      {2, 2, {257, 300}, {65, 300}, {1}, {1}, {0}, {0}, 1, 0},
  };
  static const lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_INT32,
                                    LATHE_DTYPE_UINT64, LATHE_DTYPE_COMPLEX64};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      char label[48];
      snprintf(label, sizeof label, "dot size %zu", s);
      dot_case(label, dts[d], &sizes[s], LATHE_DTYPE_INVALID, LATHE_DTYPE_INVALID);
    }
}

/* ---- ConvGeneral ---- */
typedef struct {
  int rank;
  int64_t in[5], ker[5];
  lathe_conv_axes ax;
  int64_t strides[3];
  lathe_padding pads[3];
  int64_t idil[3], kdil[3];
  int64_t cgc, bgc;
} cspec;

static void conv_case(const char *label, lathe_dtype dt, const cspec *c) {
  char lab[160];
  snprintf(lab, sizeof lab, "%s %s", label, lathe_dtype_name(dt));
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("cuda_conv", &fn);
  lathe_shape is = tst_shape(dt, c->rank, c->in), ks = tst_shape(dt, c->rank, c->ker);
  lathe_value_t x = tst_param(fn, "x", is), k = tst_param(fn, "k", ks), y = NULL;
  int ns = c->rank - 2;
  lathe_conv_params p = {c->strides, ns, c->pads, ns, c->idil, ns, c->kdil, ns, c->cgc, c->bgc};
  lathe_status_t st = lathe_conv_general(fn, x, k, &c->ax, &p, &y);
  if (!tst_built(lab, st, b)) return;
  CHECK_OK(lathe_function_return(fn, &y, 1));
  void *xv = tst_alloc_for(&is), *kv = tst_alloc_for(&ks);
  tst_fill(xv, dt, lathe_shape_num_elements(&is), 5);
  tst_fill(kv, dt, lathe_shape_num_elements(&ks), 6);
  const void *ins[2] = {xv, kv};
  agree(lab, b, ins, 2, tol_of(dt));
  free(xv);
  free(kv);
  lathe_builder_free(b);
}

static const int sp12[] = {2, 3}, sp_nhwc[] = {1, 2}, sp_hwio[] = {0, 1}, sp_hw_odd[] = {3, 0}, sp_13[] = {1, 3},
                 sp_1[] = {1}, sp_0[] = {0}, sp_234[] = {2, 3, 4};

TEST(cuda_conv_layouts_dtypes) {
  if (!gpu()) SKIP("no usable GPU");
  const cspec cases[] = {
      /* NHWC x HWIO -> NHWC, stride 2, padding */
      {4, {2, 9, 8, 3}, {3, 3, 3, 5}, {0, 3, sp_nhwc, 2, 2, 3, sp_hwio, 2, 0, 3, sp_nhwc, 2}, {2, 1}, {{1, 1}, {0, 2}}, {1, 1}, {1, 1}, 0, 0},
      /* NCHW x OIHW -> NCHW, negative padding, kernel dilation */
      {4, {2, 3, 10, 7}, {4, 3, 2, 3}, {0, 1, sp12, 2, 1, 0, sp12, 2, 0, 1, sp12, 2}, {1, 1}, {{-1, 0}, {1, -1}}, {1, 1}, {2, 1}, 0, 0},
      /* an odd layout: input [W, N, C, H], kernel [O, H, I, W], output [C, H, N, W]; input dilation */
      {4, {6, 2, 3, 5}, {4, 2, 3, 3}, {1, 2, sp_hw_odd, 2, 2, 0, sp_13, 2, 2, 0, sp_13, 2}, {1, 2}, {{0, 0}, {1, 1}}, {2, 1}, {1, 1}, 0, 0},
      /* 1-D NWC x WIO with input dilation */
      {3, {2, 11, 3}, {3, 3, 4}, {0, 2, sp_1, 1, 1, 2, sp_0, 1, 0, 2, sp_1, 1}, {1}, {{2, 2}}, {3}, {1}, 0, 0},
      /* 3-D NCDHW */
      {5, {1, 2, 4, 5, 3}, {3, 2, 2, 2, 2}, {0, 1, sp_234, 3, 1, 0, sp_234, 3, 0, 1, sp_234, 3}, {1, 2, 1}, {{0, 1}, {1, 0}, {0, 0}}, {1, 1, 1}, {1, 1, 2}, 0, 0},
      /* channel groups (2) in NHWC */
      {4, {2, 5, 6, 4}, {3, 3, 2, 6}, {0, 3, sp_nhwc, 2, 2, 3, sp_hwio, 2, 0, 3, sp_nhwc, 2}, {1, 1}, {{1, 1}, {1, 1}}, {1, 1}, {1, 1}, 2, 0},
      /* depthwise: channel groups = channels, in NCHW */
      {4, {1, 6, 7, 7}, {6, 1, 3, 3}, {0, 1, sp12, 2, 1, 0, sp12, 2, 0, 1, sp12, 2}, {1, 1}, {{1, 1}, {1, 1}}, {1, 1}, {1, 1}, 6, 0},
      /* batch groups (2) */
      {4, {4, 5, 5, 3}, {2, 2, 3, 4}, {0, 3, sp_nhwc, 2, 2, 3, sp_hwio, 2, 0, 3, sp_nhwc, 2}, {1, 1}, {{0, 0}, {0, 0}}, {1, 1}, {1, 1}, 0, 2},
  };
  static const lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT64,
                                    LATHE_DTYPE_INT32, LATHE_DTYPE_INT8, LATHE_DTYPE_UINT16, LATHE_DTYPE_INT64};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      char label[48];
      snprintf(label, sizeof label, "conv case %zu", i);
      conv_case(label, dts[d], &cases[i]);
    }
}

TEST(cuda_conv_sizes) {
  if (!gpu()) SKIP("no usable GPU");
  const cspec cases[] = {
      /* no input channels (empty sums: zeros), no output channels, an empty batch */
      {4, {1, 4, 4, 0}, {3, 3, 0, 2}, {0, 3, sp_nhwc, 2, 2, 3, sp_hwio, 2, 0, 3, sp_nhwc, 2}, {1, 1}, {{0, 0}, {0, 0}}, {1, 1}, {1, 1}, 0, 0},
      {4, {1, 4, 4, 3}, {3, 3, 3, 0}, {0, 3, sp_nhwc, 2, 2, 3, sp_hwio, 2, 0, 3, sp_nhwc, 2}, {1, 1}, {{0, 0}, {0, 0}}, {1, 1}, {1, 1}, 0, 0},
      {4, {0, 4, 4, 3}, {3, 3, 3, 2}, {0, 3, sp_nhwc, 2, 2, 3, sp_hwio, 2, 0, 3, sp_nhwc, 2}, {1, 1}, {{1, 1}, {1, 1}}, {1, 1}, {1, 1}, 0, 0},
      /* 1x1 everything */
      {4, {1, 1, 1, 1}, {1, 1, 1, 1}, {0, 3, sp_nhwc, 2, 2, 3, sp_hwio, 2, 0, 3, sp_nhwc, 2}, {1, 1}, {{0, 0}, {0, 0}}, {1, 1}, {1, 1}, 0, 0},
      /* a larger NCHW run over several tiles */
      {4, {3, 16, 20, 19}, {70, 16, 3, 3}, {0, 1, sp12, 2, 1, 0, sp12, 2, 0, 1, sp12, 2}, {1, 1}, {{1, 1}, {1, 1}}, {1, 1}, {1, 1}, 0, 0},
  };
  static const lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_INT16};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      char label[48];
      snprintf(label, sizeof label, "conv size %zu", i);
      conv_case(label, dts[d], &cases[i]);
    }
}

/* ---- tf32x3=1: Float32 products as three TF32 products of split operands (gemm.c) ----
 * Every element within 2^-19 of the sum of |a||b| over its k (the bound docs/CUDA.md states),
 * against a Float64 reference on the host, over operands whose magnitudes span 2^-8 to 2^8: read
 * in place, transposed, batched, with lines off 16 bytes (staged), and in chunks of k (gemm_pad=1:
 * split operands of at most 1 MiB). tf32=1 on the same data
 * must exceed the bound somewhere, so the check can tell them apart; the exact default meets it. */
static void run_f32(lathe_backend_t g, lathe_builder_t b, const void *const *ins, int n_in, float *out, size_t nb) {
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile_for(b, g, &e));
  if (!e) return;
  lathe_buffer_t in[2] = {0}, o = NULL;
  for (int i = 0; i < n_in; i++) {
    lathe_shape s;
    CHECK_OK(lathe_executable_input_shape(e, i, &s));
    CHECK_OK(lathe_buffer_from_host(g, 0, &s, ins[i], (size_t)lathe_shape_byte_size(&s), &in[i]));
  }
  CHECK_OK(lathe_executable_execute(e, in, NULL, n_in, 0, &o, 1));
  if (o) CHECK_OK(lathe_buffer_to_host(o, out, nb));
  for (int i = 0; i < n_in; i++) lathe_buffer_free(in[i]);
  lathe_buffer_free(o);
  lathe_executable_free(e);
}

/* Values uniform in [-1, 1) times 2^e, e uniform in [-8, 8]. */
static void fill_wide(float *x, int64_t n, uint64_t seed) {
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    double u = (double)(seed >> 11) / 9007199254740992.0 * 2 - 1;
    int e = (int)((seed >> 3) % 17) - 8;
    x[i] = (float)ldexp(u, e);
  }
}

/* The largest error over 2^-19 * sum |a||b| of z = dot(x, y) (sp) on g. */
static double tf32x3_worst(lathe_backend_t g, const char *label, const dspec *sp) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("tf32x3", &fn);
  lathe_value_t x = tst_param(fn, "lhs", tst_shape(LATHE_DTYPE_FLOAT32, sp->lrank, sp->ld));
  lathe_value_t y = tst_param(fn, "rhs", tst_shape(LATHE_DTYPE_FLOAT32, sp->rrank, sp->rd)), z = NULL;
  CHECK_OK(lathe_dot_general(fn, x, sp->lc, sp->nc, sp->lb, sp->nb, y, sp->rc, sp->nc, sp->rb, sp->nb, NULL, &z));
  if (!z) return 0;
  CHECK_OK(lathe_function_return(fn, &z, 1));
  int64_t nl = tst_numel(sp->lrank, sp->ld), nr = tst_numel(sp->rrank, sp->rd);
  float *a = malloc((size_t)nl * 4), *c = malloc((size_t)nr * 4);
  fill_wide(a, nl, 11);
  fill_wide(c, nr, 12);
  /* rank 2 or 3 (a batch axis 0 on both), one contracting axis */
  bool bat = sp->nb == 1;
  int64_t B = bat ? sp->ld[0] : 1, lo = bat ? 1 : 0;
  int64_t K = sp->ld[sp->lc[0]], M = sp->ld[lo + (sp->lc[0] == lo)], N = sp->rd[lo + (sp->rc[0] == lo)];
  size_t nz = (size_t)(B * M * N);
  float *got = calloc(nz, 4);
  const void *ins[2] = {a, c};
  run_f32(g, b, ins, 2, got, nz * 4);
  double worst = 0;
  for (int64_t bb = 0; bb < B; bb++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; k++) {
          int64_t ia = bb * M * K + (sp->lc[0] == lo ? k * M + i : i * K + k);
          int64_t ic = bb * K * N + (sp->rc[0] == lo ? k * N + j : j * K + k);
          ref += (double)a[ia] * c[ic];
          mag += fabs((double)a[ia] * c[ic]);
        }
        double r = fabs(got[(bb * M + i) * N + j] - ref) / (ldexp(mag, -19) + 1e-300);
        if (r > worst) worst = r;
      }
  printf("note: %s: worst error %.3g of 2^-19 sum|a||b|\n", label, worst);
  free(a);
  free(c);
  free(got);
  lathe_builder_free(b);
  return worst;
}

TEST(cuda_dot_tf32x3_bound) {
  static lathe_backend_t x3, x3k;
  static bool tried, tried_k;
  if (!gpu() || !gpu_once("lathe:cuda,tf32x3=1", &x3, &tried)) SKIP("no usable GPU");
  /* gemm_pad=1: split operands of at most 1 MiB, so the larger cases run in chunks of k */
  gpu_once("lathe:cuda,tf32x3=1,gemm_pad=1", &x3k, &tried_k);
  static const dspec cases[] = {
      {2, 2, {300, 700}, {700, 257}, {1}, {0}, {0}, {0}, 1, 0},      /* n off 16 bytes: staged */
      {2, 2, {513, 96}, {513, 132}, {0}, {0}, {0}, {0}, 1, 0},       /* lhs [K, M]: split by columns */
      {2, 2, {200, 384}, {260, 384}, {1}, {1}, {0}, {0}, 1, 0},      /* rhs [N, K] */
      {3, 3, {3, 70, 129}, {3, 129, 66}, {2}, {1}, {0}, {0}, 1, 1}, /* batched, k off 4 */
  };
  double tf32_worst = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char l[64];
    snprintf(l, sizeof l, "tf32x3 case %zu", i);
    double w = tf32x3_worst(x3, l, &cases[i]);
    CHECK(w <= 1, "%s: an error of %.3g times the bound", l, w);
    snprintf(l, sizeof l, "tf32x3 k chunks case %zu", i);
    w = x3k ? tf32x3_worst(x3k, l, &cases[i]) : 0;
    CHECK(w <= 1, "%s: an error of %.3g times the bound", l, w);
    snprintf(l, sizeof l, "exact case %zu", i);
    w = tf32x3_worst(gpu(), l, &cases[i]);
    CHECK(w <= 1, "%s: an error of %.3g times the bound", l, w);
    if (gpu_tf32()) {
      snprintf(l, sizeof l, "tf32 case %zu", i);
      w = tf32x3_worst(gpu_tf32(), l, &cases[i]);
      tf32_worst = w > tf32_worst ? w : tf32_worst;
    }
  }
  CHECK(!gpu_tf32() || tf32_worst > 1, "tf32=1 stayed within tf32x3's bound (worst %.3g): the check cannot tell them apart",
        tf32_worst);
}
