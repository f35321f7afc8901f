/* test_cuda_window.c -- ReduceWindow and SelectAndScatterMax/Min on lathe:cuda against lathe:cpu
 * (SKIP without a GPU): every reduction x dtypes (floats, halves, integers, sub-byte) with
 * strides, paddings (padding takes the identity), input and window dilations, windows larger
 * than the operand's real part (empty windows), size 0 and 1; NaN; SelectAndScatter with
 * overlapping windows (ties: first), paddings and NaN. */
#include "core/core.h"
#include "cuda_testing.h"

#define F32 LATHE_DTYPE_FLOAT32

typedef struct win_case {
  int rank;
  int64_t dims[4], wd[4], st[4], idil[4], wdil[4];
  lathe_padding pad[4];
  bool has_st, has_idil, has_wdil, has_pad;
} win_case;

static lathe_window_params params_of(const win_case *c) {
  lathe_window_params p;
  memset(&p, 0, sizeof p);
  p.window_dims = c->wd, p.n_window_dims = c->rank;
  if (c->has_st) p.strides = c->st, p.n_strides = c->rank;
  if (c->has_idil) p.input_dilations = c->idil, p.n_input_dilations = c->rank;
  if (c->has_wdil) p.window_dilations = c->wdil, p.n_window_dilations = c->rank;
  if (c->has_pad) p.paddings = c->pad, p.n_paddings = c->rank;
  return p;
}

static const win_case cases[] = {
    {2, {6, 7}, {2, 3}, {1, 1}, {1, 1}, {1, 1}, {{0, 0}}, false, false, false, false},
    {2, {6, 7}, {2, 3}, {2, 1}, {1, 1}, {1, 1}, {{0, 0}}, true, false, false, false},
    {2, {5, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {{1, 1}, {2, 0}}, true, false, false, true},
    {2, {5, 9}, {3, 2}, {1, 3}, {2, 1}, {1, 2}, {{1, 2}, {0, 3}}, true, true, true, true},
    {1, {1}, {1}, {1}, {1}, {1}, {{0, 0}}, false, false, false, false},
    {1, {5}, {4}, {1}, {3}, {1}, {{3, 3}}, true, true, false, true}, /* windows on holes only */
    {3, {2, 0, 3}, {1, 1, 2}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {{0, 0}, {1, 0}}, true, false, false, true}, /* empty axis, padded to fit the window */
    {4, {2, 3, 17, 19}, {1, 1, 3, 3}, {1, 1, 2, 2}, {1, 1, 1, 1}, {1, 1, 1, 1}, {{0, 0}, {0, 0}, {1, 1}, {1, 1}}, true, false, false, true},
    {2, {64, 64}, {64, 1}, {1, 1}, {1, 1}, {1, 1}, {{0, 0}}, true, false, false, false},
    {0, {0}, {0}, {0}, {0}, {0}, {{0, 0}}, false, false, false, false},
};

TEST(cuda_reduce_window) {
  if (!gpu()) SKIP("no usable GPU");
  const lathe_dtype dts[] = {F32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_INT8,
                             LATHE_DTYPE_INT32, LATHE_DTYPE_UINT16, LATHE_DTYPE_UINT64, LATHE_DTYPE_INT4};
  const lathe_op reds[] = {LATHE_OP_REDUCE_SUM, LATHE_OP_REDUCE_PRODUCT, LATHE_OP_REDUCE_MAX, LATHE_OP_REDUCE_MIN};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    CHECK(lathe_backend_supports_op(gpu(), LATHE_OP_REDUCE_WINDOW, dts[d]), "ReduceWindow %s on the GPU",
          lathe_dtype_name(dts[d]));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
      for (size_t k = 0; k < 4; k++) {
        const win_case *wc = &cases[c];
        lathe_shape xs = tst_shape(dts[d], wc->rank, wc->dims);
        lathe_function_t fn;
        lathe_builder_t b = tst_builder("cuda_reduce_window", &fn);
        lathe_value_t x = tst_param(fn, "x", xs), r = NULL;
        lathe_window_params p = params_of(wc);
        lathe_status_t st = lathe_reduce_window(fn, reds[k], x, &p, &r);
        if (!tst_built("ReduceWindow", st, b)) continue;
        CHECK_OK(lathe_function_return(fn, &r, 1));
        int64_t n = lathe_shape_num_elements(&xs);
        void *xv = tst_alloc_for(&xs);
        tst_fill(xv, dts[d], n, (unsigned)(c * 7 + d));
        if (reds[k] == LATHE_OP_REDUCE_PRODUCT && lathe_dtype_is_float(dts[d]))
          for (int64_t i = 0; i < n; i++) tst_set(xv, dts[d], i, 1 + tst_get(xv, dts[d], i) / 8);
        if (lathe_dtype_is_float(dts[d]) && n > 10) tst_set(xv, dts[d], n / 3, NAN);
        char label[128];
        snprintf(label, sizeof label, "ReduceWindow %s %s case %zu", lathe_op_name(reds[k]), lathe_dtype_name(dts[d]), c);
        const void *ins[1] = {xv};
        /* same order, double accumulators: the CPU's rounding */
        agree(label, b, ins, 1, tst_tol(dts[d]));
        free(xv);
        lathe_builder_free(b);
      }
  }
}

static void check_sas(lathe_op op, lathe_dtype dt, const win_case *wc, unsigned seed, bool ties, bool nan) {
  lathe_shape xs = tst_shape(dt, wc->rank, wc->dims);
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("cuda_sas", &fn);
  lathe_window_params p = params_of(wc);
  lathe_value_t x = tst_param(fn, "x", xs), probe = NULL;
  /* the source has ReduceWindow's shape: ask the builder */
  lathe_status_t st = lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, x, &p, &probe);
  if (!tst_built("SelectAndScatter source shape", st, b)) return;
  lathe_shape ss;
  CHECK_OK(lathe_value_shape(probe, &ss));
  lathe_value_t s = tst_param(fn, "s", ss), r = NULL;
  st = lathe_select_and_scatter(fn, op, x, s, &p, &r);
  if (!tst_built("SelectAndScatter", st, b)) return;
  CHECK_OK(lathe_function_return(fn, &r, 1));
  int64_t n = lathe_shape_num_elements(&xs), ns = lathe_shape_num_elements(&ss);
  void *xv = tst_alloc_for(&xs), *sv = tst_alloc_for(&ss);
  tst_fill(xv, dt, n, seed);
  tst_fill(sv, dt, ns, seed + 1);
  if (ties)
    for (int64_t i = 0; i < n; i++) tst_set(xv, dt, i, tst_get(xv, dt, i) > 0 ? 1 : 0);
  if (nan && n > 4) tst_set(xv, dt, n / 2, NAN), tst_set(xv, dt, n / 2 + 1, NAN);
  char label[128];
  snprintf(label, sizeof label, "%s %s case %u%s%s", lathe_op_name(op), lathe_dtype_name(dt), seed, ties ? " ties" : "",
           nan ? " NaN" : "");
  const void *ins[2] = {xv, sv};
  /* floats: atomic additions in another order */
  agree(label, b, ins, 2, lathe_dtype_is_float(dt) ? 4 * tst_tol(dt) : 0);
  free(xv);
  free(sv);
  lathe_builder_free(b);
}

TEST(cuda_select_and_scatter) {
  if (!gpu()) SKIP("no usable GPU");
  static const win_case sc[] = {
      {2, {6, 7}, {2, 3}, {1, 1}, {1, 1}, {1, 1}, {{0, 0}}, true, false, false, false},  /* overlapping */
      {2, {6, 7}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, {{0, 0}}, false, false, false, false}, /* tiling */
      {2, {5, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {{1, 1}, {2, 0}}, true, false, false, true},
      {4, {2, 3, 17, 19}, {1, 1, 3, 3}, {1, 1, 2, 2}, {1, 1, 1, 1}, {1, 1, 1, 1}, {{0, 0}, {0, 0}, {1, 1}, {1, 1}}, true, false, false, true},
      {1, {1}, {1}, {1}, {1}, {1}, {{0, 0}}, false, false, false, false},
      {2, {0, 4}, {1, 2}, {1, 1}, {1, 1}, {1, 1}, {{1, 0}}, true, false, false, true}, /* empty axis, padded */
      {2, {300, 200}, {5, 5}, {1, 1}, {1, 1}, {1, 1}, {{2, 2}, {2, 2}}, true, false, false, true},
  };
  const lathe_dtype dts[] = {F32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_INT8,
                             LATHE_DTYPE_INT32, LATHE_DTYPE_UINT64, LATHE_DTYPE_INT16, LATHE_DTYPE_UINT4};
  const lathe_op ops[] = {LATHE_OP_SELECT_AND_SCATTER_MAX, LATHE_OP_SELECT_AND_SCATTER_MIN};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (int k = 0; k < 2; k++) {
      CHECK(lathe_backend_supports_op(gpu(), ops[k], dts[d]), "%s %s on the GPU", lathe_op_name(ops[k]), lathe_dtype_name(dts[d]));
      for (size_t c = 0; c < sizeof sc / sizeof sc[0]; c++) {
        check_sas(ops[k], dts[d], &sc[c], (unsigned)(c * 3 + d), false, false);
        check_sas(ops[k], dts[d], &sc[c], (unsigned)(c * 3 + d + 100), true, false);
        if (lathe_dtype_is_float(dts[d])) check_sas(ops[k], dts[d], &sc[c], (unsigned)(c * 3 + d + 200), false, true);
      }
    }
}
