/* test_cuda_reduce.c -- the REDUCE family on lathe:cuda against lathe:cpu (SKIP without a GPU):
 * every reduction x dtypes (Bool, integers that wrap, halves, floats, complex, sub-byte) x shapes
 * (scalar, size 0 and 1, odd sizes) x every subset of axes; the layouts that take the GPU's
 * other paths (a warp or a block per output, one thread per output, reduced ranges split in two
 * passes, several reduced groups, full reductions of a million elements, column reductions by
 * 16-byte vectors, and on lathe:cuda,reduce_cols=0 one thread per column); NaN propagation;
 * ArgMinMax with ties, NaN and several output dtypes; a reduction fused with elementwise ops. */
#include "core/core.h"
#include "cuda_testing.h"

#define F32 LATHE_DTYPE_FLOAT32

static const lathe_op red_ops[] = {
    LATHE_OP_REDUCE_SUM,         LATHE_OP_REDUCE_PRODUCT,    LATHE_OP_REDUCE_MAX,         LATHE_OP_REDUCE_MIN,
    LATHE_OP_REDUCE_BITWISE_AND, LATHE_OP_REDUCE_BITWISE_OR, LATHE_OP_REDUCE_BITWISE_XOR, LATHE_OP_REDUCE_LOGICAL_AND,
    LATHE_OP_REDUCE_LOGICAL_OR,  LATHE_OP_REDUCE_LOGICAL_XOR,
};

/* Values for op: near 1 for float products (long products stay finite). */
static void fill_for(lathe_op op, lathe_dtype dt, void *x, int64_t n, unsigned seed) {
  tst_fill(x, dt, n, seed);
  if (op == LATHE_OP_REDUCE_PRODUCT && (lathe_dtype_is_float(dt) || lathe_dtype_is_complex(dt)))
    for (int64_t i = 0; i < n; i++) tst_set_complex(x, dt, i, 1 + tst_get(x, dt, i) / 64, tst_get_imag(x, dt, i) / 64);
}

/* Floating sums and products reassociate on the GPU: a tolerance growing with the reduced count. */
static double tol_for(lathe_op op, lathe_dtype dt, int64_t n_red) {
  double t = tst_tol(dt);
  if (op == LATHE_OP_REDUCE_SUM || op == LATHE_OP_REDUCE_PRODUCT) t *= 4 + sqrt((double)n_red);
  return t;
}

/* lathe:cuda,reduce_cols=0: column reductions by one thread an output (the default takes the
 * 16-byte vector kernels, lt_redc_*). */
static lathe_backend_t gpu_cols(void) {
  static lathe_backend_t b;
  static bool tried;
  return gpu_once("lathe:cuda,reduce_cols=0", &b, &tried);
}

static void check_reduce_on(lathe_backend_t g, lathe_op op, const lathe_shape *xs, const int *axes, int n_axes,
                            unsigned seed) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("cuda_reduce", &fn);
  lathe_value_t x = tst_param(fn, "x", *xs), r = NULL;
  lathe_status_t st = lathe_reduce(fn, op, x, axes, n_axes, &r);
  if (!tst_built("reduce", st, b)) return;
  CHECK_OK(lathe_function_return(fn, &r, 1));
  int64_t n = lathe_shape_num_elements(xs), n_red = 1;
  for (int i = 0; i < n_axes; i++) n_red *= xs->dims[axes[i]];
  void *xv = tst_alloc_for(xs);
  fill_for(op, xs->dtype, xv, n, seed);
  char label[160], sb[LATHE_SHAPE_STR_MAX];
  int o = snprintf(label, sizeof label, "%s %s axes", lathe_op_name(op), lathe_shape_str(xs, sb, sizeof sb));
  for (int i = 0; i < n_axes && o < (int)sizeof label - 8; i++) o += snprintf(label + o, sizeof label - (size_t)o, " %d", axes[i]);
  const void *ins[1] = {xv};
  agree_on(g, label, b, ins, 1, tol_for(op, xs->dtype, n_axes ? n_red : n));
  free(xv);
  lathe_builder_free(b);
}

static void check_reduce(lathe_op op, const lathe_shape *xs, const int *axes, int n_axes, unsigned seed) {
  check_reduce_on(gpu(), op, xs, axes, n_axes, seed);
}

TEST(cuda_reduce_ops_dtypes_axes) {
  if (!gpu()) SKIP("no usable GPU");
  const lathe_dtype dts[] = {LATHE_DTYPE_BOOL,    LATHE_DTYPE_INT8,    LATHE_DTYPE_INT32,   LATHE_DTYPE_UINT16,
                             LATHE_DTYPE_INT64,   LATHE_DTYPE_UINT64,  LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16,
                             LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_COMPLEX128,
                             LATHE_DTYPE_INT4,    LATHE_DTYPE_UINT2};
  static const struct {
    int rank;
    int64_t dims[4];
  } shapes[] = {{0, {0}},       {1, {1}},       {1, {7}},          {1, {0}},          {2, {3, 5}},
                {3, {4, 1, 5}}, {3, {2, 0, 3}}, {2, {33, 65}},     {4, {3, 2, 4, 5}}, {2, {1, 40}}};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (size_t k = 0; k < sizeof red_ops / sizeof red_ops[0]; k++) {
      if (!lathe_backend_supports_op(tst_backend(), red_ops[k], dts[d])) continue;
      CHECK(lathe_backend_supports_op(gpu(), red_ops[k], dts[d]), "%s %s on the GPU", lathe_op_name(red_ops[k]),
            lathe_dtype_name(dts[d]));
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        lathe_shape xs = tst_shape(dts[d], shapes[s].rank, shapes[s].dims);
        for (int mask = 0; mask < (1 << xs.rank); mask++) {
          int axes[4], n = 0;
          for (int a = 0; a < xs.rank; a++)
            if (mask >> a & 1) axes[n++] = a;
          if (mask == 0 && xs.rank > 0) { /* no axes: every axis (GoMLX) */
            check_reduce(red_ops[k], &xs, NULL, 0, (unsigned)(d * 31 + k * 7 + s));
            continue;
          }
          check_reduce(red_ops[k], &xs, axes, n, (unsigned)(d * 31 + k * 7 + s + (size_t)mask));
        }
      }
    }
}

/* Layouts that take the other paths: row reductions by warps and by blocks, column reductions,
 * reduced ranges split into parts (two passes), several groups on each side, full reductions. */
TEST(cuda_reduce_layouts_and_sizes) {
  if (!gpu()) SKIP("no usable GPU");
  static const struct {
    int rank;
    int64_t dims[5];
    int n_axes;
    int axes[5];
  } cases[] = {
      {2, {300, 1001}, 1, {1}},   {2, {300, 1001}, 1, {0}},      {2, {300, 1001}, 2, {0, 1}}, {1, {1 << 20}, 1, {0}},
      {1, {1000003}, 1, {0}},     {2, {4, 1000003}, 1, {1}},     {2, {1000003, 3}, 1, {0}},   {2, {257, 4099}, 1, {0}},
      {3, {7, 5003, 9}, 1, {1}},  {3, {7, 5003, 9}, 2, {0, 2}},  {5, {2, 3, 4, 5, 6}, 3, {0, 2, 4}},
      {5, {3, 1, 5, 7, 2}, 2, {1, 3}}, {2, {100000, 20}, 1, {1}}, {2, {20, 50}, 1, {1}},
      /* column kernels (whole 16-byte vectors of outputs, at least 16 of them): a bias gradient's
       * shape, outer kept groups, parts reduced again, tiles of 32 vectors partly filled, two
       * reduced groups; narrower columns keep the other path */
      {2, {8192, 768}, 1, {0}},   {3, {8, 1024, 768}, 2, {0, 1}}, {3, {6, 3000, 64}, 1, {1}},  {2, {70000, 96}, 1, {0}},
      {2, {2000, 200}, 1, {0}},   {4, {4, 6, 5, 64}, 2, {0, 2}},  {2, {13, 32}, 1, {0}},       {2, {1000, 48}, 1, {0}},
  };
  const lathe_dtype dts[] = {F32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_INT32, LATHE_DTYPE_COMPLEX64,
                             LATHE_DTYPE_UINT8};
  const lathe_op ops[] = {LATHE_OP_REDUCE_SUM, LATHE_OP_REDUCE_MAX, LATHE_OP_REDUCE_MIN, LATHE_OP_REDUCE_BITWISE_XOR};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
      for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        if (!lathe_backend_supports_op(tst_backend(), ops[k], dts[d])) continue;
        lathe_shape xs = tst_shape(dts[d], cases[c].rank, cases[c].dims);
        check_reduce(ops[k], &xs, cases[c].axes, cases[c].n_axes, (unsigned)(c * 13 + d * 3 + k));
        if (gpu_cols()) check_reduce_on(gpu_cols(), ops[k], &xs, cases[c].axes, cases[c].n_axes, (unsigned)(c * 13 + d * 3 + k));
      }
  /* Bool over a long run */
  lathe_shape bs = TST_SHAPE(LATHE_DTYPE_BOOL, 3, 400001);
  int ax1[] = {1};
  check_reduce(LATHE_OP_REDUCE_LOGICAL_XOR, &bs, ax1, 1, 3);
  check_reduce(LATHE_OP_REDUCE_LOGICAL_AND, &bs, ax1, 1, 4);
}

/* Max/Min let NaN through (rows, columns and a full reduction); an infinity stays. */
TEST(cuda_reduce_nan) {
  if (!gpu()) SKIP("no usable GPU");
  const lathe_dtype dts[] = {F32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16};
  for (size_t d = 0; d < 4; d++) {
    lathe_shape xs = TST_SHAPE(dts[d], 64, 700);
    void *x = tst_alloc_for(&xs);
    tst_fill(x, dts[d], 64 * 700, 9);
    tst_set(x, dts[d], 700 + 5, NAN);
    tst_set(x, dts[d], 3 * 700 + 699, NAN);
    tst_set(x, dts[d], 20 * 700 + 3, INFINITY);
    tst_set(x, dts[d], 21 * 700 + 3, -INFINITY);
    const int rows[] = {1}, cols[] = {0}, both[] = {0, 1};
    const int *axs[3] = {rows, cols, both};
    const int ns[3] = {1, 1, 2};
    const lathe_op ops[2] = {LATHE_OP_REDUCE_MAX, LATHE_OP_REDUCE_MIN};
    for (int a = 0; a < 3; a++)
      for (int k = 0; k < 2; k++) {
        lathe_function_t fn;
        lathe_builder_t b = tst_builder("cuda_reduce_nan", &fn);
        lathe_value_t p = tst_param(fn, "x", xs), r = NULL;
        CHECK_OK(lathe_reduce(fn, ops[k], p, axs[a], ns[a], &r));
        CHECK_OK(lathe_function_return(fn, &r, 1));
        char label[96];
        snprintf(label, sizeof label, "%s NaN %s axes set %d", lathe_op_name(ops[k]), lathe_dtype_name(dts[d]), a);
        const void *ins[1] = {x};
        agree(label, b, ins, 1, 0);
        if (gpu_cols()) agree_on(gpu_cols(), label, b, ins, 1, 0);
        lathe_builder_free(b);
      }
    free(x);
  }
}

static void check_argminmax(const lathe_shape *xs, const void *x, int axis, lathe_dtype odt, bool is_min) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("cuda_argminmax", &fn);
  lathe_value_t p = tst_param(fn, "x", *xs), r = NULL;
  lathe_status_t st = lathe_arg_min_max(fn, p, axis, odt, is_min, &r);
  if (!tst_built("argminmax", st, b)) return;
  CHECK_OK(lathe_function_return(fn, &r, 1));
  char label[160], sb[LATHE_SHAPE_STR_MAX];
  snprintf(label, sizeof label, "ArgMinMax %s axis %d %s -> %s", lathe_shape_str(xs, sb, sizeof sb), axis,
           is_min ? "min" : "max", lathe_dtype_name(odt));
  const void *ins[1] = {x};
  agree(label, b, ins, 1, 0);
  lathe_builder_free(b);
}

/* Ties take the first index, NaN wins, indices wrap into narrow outputs; long axes split. */
TEST(cuda_arg_min_max) {
  if (!gpu()) SKIP("no usable GPU");
  const lathe_dtype dts[] = {F32, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT64,
                             LATHE_DTYPE_INT8, LATHE_DTYPE_INT32, LATHE_DTYPE_UINT64, LATHE_DTYPE_INT4,
                             LATHE_DTYPE_BOOL};
  const lathe_dtype odts[] = {LATHE_DTYPE_INT32, LATHE_DTYPE_INT64, LATHE_DTYPE_UINT8, LATHE_DTYPE_INT16, LATHE_DTYPE_INT4};
  static const struct {
    int rank;
    int64_t dims[3];
  } shapes[] = {{1, {1}}, {1, {7}}, {2, {3, 5}}, {2, {0, 4}}, {2, {4, 0}}, {3, {2, 3, 4}}, {2, {3, 300}},
                {2, {5, 100003}}, {2, {100003, 3}}, {2, {129, 70}}};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      lathe_dtype dt = dts[d];
      lathe_shape xs = tst_shape(dt, shapes[s].rank, shapes[s].dims);
      int64_t n = lathe_shape_num_elements(&xs);
      void *x = tst_alloc_for(&xs);
      tst_fill(x, dt, n, (unsigned)(d * 17 + s));
      for (int64_t i = 0; i + 3 < n; i += 5) tst_set_complex(x, dt, i + 3, tst_get(x, dt, i), 0); /* ties */
      if (lathe_dtype_is_float(dt) && n > 6) {
        tst_set(x, dt, n / 2, NAN);
        tst_set(x, dt, n / 2 + 1, NAN);
        tst_set(x, dt, n - 1, NAN);
      }
      for (int axis = 0; axis < xs.rank; axis++)
        for (int m = 0; m < 2; m++) check_argminmax(&xs, x, axis, odts[(axis + m + d + s) % 5], m);
      free(x);
    }
}

/* A reduction with an elementwise prologue and epilogue (a REDUCE fusion region). */
TEST(cuda_reduce_fused_region) {
  if (!gpu()) SKIP("no usable GPU");
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("cuda_reduce_region", &fn);
  lathe_shape xs = TST_SHAPE(F32, 96, 333);
  lathe_value_t x = tst_param(fn, "x", xs), e, s, r, y;
  int ax[] = {1};
  CHECK_OK(lathe_exp(fn, x, &e));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, e, ax, 1, &s));
  CHECK_OK(lathe_log(fn, s, &r));
  CHECK_OK(lathe_neg(fn, r, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  void *xv = tst_alloc_for(&xs);
  tst_fill(xv, F32, 96 * 333, 21);
  const void *ins[1] = {xv};
  agree("exp-sum-log region", b, ins, 1, 1e-5);
  free(xv);
  lathe_builder_free(b);
}
