/* window.c -- conformance rows for ReduceWindow (sum, product, max, min) and
 * SelectAndScatterMax/Min: default and explicit strides, padding, input and window dilation,
 * windows wholly in padding, overlapping windows, rank 0..3, every integer and float dtype;
 * compared against direct loops written here. */
#include <stdint.h>

#include "testing.h"

#define R LATHE_MAX_RANK

typedef struct win_row {
  const char *label;
  int rank;
  int64_t dims[6], win[6], strides[6], idil[6], wdil[6];
  lathe_padding pads[6];
  bool has_win, has_strides, has_idil, has_wdil, has_pads;
} win_row;

static const lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16,
                                  LATHE_DTYPE_INT8,    LATHE_DTYPE_INT16,   LATHE_DTYPE_INT32,   LATHE_DTYPE_INT64,
                                  LATHE_DTYPE_UINT8,   LATHE_DTYPE_UINT16,  LATHE_DTYPE_UINT32,  LATHE_DTYPE_UINT64,
                                  LATHE_DTYPE_INT4};

static bool is_float(lathe_dtype dt) {
  return dt == LATHE_DTYPE_FLOAT16 || dt == LATHE_DTYPE_BFLOAT16 || dt == LATHE_DTYPE_FLOAT32 ||
         dt == LATHE_DTYPE_FLOAT64;
}

/* Lowest / highest value of dt (the max / min identities). */
static double lowest(lathe_dtype dt) {
  switch (dt) {
    case LATHE_DTYPE_INT8: return INT8_MIN;
    case LATHE_DTYPE_INT16: return INT16_MIN;
    case LATHE_DTYPE_INT32: return INT32_MIN;
    case LATHE_DTYPE_INT64: return (double)INT64_MIN;
    case LATHE_DTYPE_INT4: return -8;
    default: return is_float(dt) ? -INFINITY : 0;
  }
}
static double highest(lathe_dtype dt) {
  switch (dt) {
    case LATHE_DTYPE_INT8: return INT8_MAX;
    case LATHE_DTYPE_INT16: return INT16_MAX;
    case LATHE_DTYPE_INT32: return INT32_MAX;
    case LATHE_DTYPE_INT64: return (double)INT64_MAX;
    case LATHE_DTYPE_UINT8: return UINT8_MAX;
    case LATHE_DTYPE_UINT16: return UINT16_MAX;
    case LATHE_DTYPE_UINT32: return UINT32_MAX;
    case LATHE_DTYPE_UINT64: return (double)UINT64_MAX;
    case LATHE_DTYPE_INT4: return 7;
    case LATHE_DTYPE_BOOL: return 1;
    default: return INFINITY;
  }
}

/* Writes the max (min) identity: 64-bit extremes exactly (doubles cannot hold them). */
static void set_identity(void *p, lathe_dtype dt, int64_t i, bool is_max) {
  if (dt == LATHE_DTYPE_INT64) ((int64_t *)p)[i] = is_max ? INT64_MIN : INT64_MAX;
  else if (dt == LATHE_DTYPE_UINT64) ((uint64_t *)p)[i] = is_max ? 0 : UINT64_MAX;
  else tst_set(p, dt, i, is_max ? lowest(dt) : highest(dt));
}

static void params_of(const win_row *r, lathe_window_params *p) {
  memset(p, 0, sizeof *p);
  if (r->has_win) p->window_dims = r->win, p->n_window_dims = r->rank;
  if (r->has_strides) p->strides = r->strides, p->n_strides = r->rank;
  if (r->has_idil) p->input_dilations = r->idil, p->n_input_dilations = r->rank;
  if (r->has_wdil) p->window_dilations = r->wdil, p->n_window_dilations = r->rank;
  if (r->has_pads) p->paddings = r->pads, p->n_paddings = r->rank;
}

/* Effective per-axis parameters and the windows' grid dims. */
static void effective(const win_row *r, int64_t *w, int64_t *st, int64_t *id, int64_t *wd, int64_t *lo, int64_t *od) {
  for (int d = 0; d < r->rank; d++) {
    w[d] = r->has_win ? r->win[d] : 1;
    st[d] = r->has_strides ? r->strides[d] : w[d];
    id[d] = r->has_idil ? r->idil[d] : 1;
    wd[d] = r->has_wdil ? r->wdil[d] : 1;
    lo[d] = r->has_pads ? r->pads[d].low : 0;
    int64_t hi = r->has_pads ? r->pads[d].high : 0;
    int64_t padded = (r->dims[d] - 1) * id[d] + 1 + lo[d] + hi, ew = (w[d] - 1) * wd[d] + 1;
    od[d] = (padded - ew) / st[d] + 1;
  }
}

/* Operand flat index of window position kx of output oi, or -1 (padding / hole). */
static int64_t window_elem(const win_row *r, const int64_t *oi, const int64_t *kx, const int64_t *st,
                           const int64_t *id, const int64_t *wd, const int64_t *lo) {
  int64_t f = 0;
  for (int d = 0; d < r->rank; d++) {
    int64_t pos = oi[d] * st[d] - lo[d] + kx[d] * wd[d];
    if (pos < 0 || pos % id[d] != 0 || pos / id[d] >= r->dims[d]) return -1;
    f = f * r->dims[d] + pos / id[d];
  }
  return f;
}

static void run_reduce(const win_row *r, lathe_op red, lathe_dtype dt) {
  char label[160];
  snprintf(label, sizeof label, "%s/%s/%s", r->label, lathe_op_name(red), lathe_dtype_name(dt));
  if (!lathe_backend_supports_op(tst_backend(), LATHE_OP_REDUCE_WINDOW, dt))
    SKIP("%s: ReduceWindow unsupported for %s", label, lathe_dtype_name(dt));
  int rank = r->rank;
  int64_t w[R], st[R], id[R], wd[R], lo[R], od[R];
  effective(r, w, st, id, wd, lo, od);
  lathe_shape xs = tst_shape(dt, rank, r->dims), ys = tst_shape(dt, rank, od);
  lathe_function_t fn;
  lathe_builder_t b = tst_builder(label, &fn);
  lathe_value_t x = tst_param(fn, "x", xs), y = NULL;
  lathe_window_params p;
  params_of(r, &p);
  if (!tst_built(label, lathe_reduce_window(fn, red, x, &p, &y), b)) return;
  tst_expect_shape_and_return(label, fn, y, &ys);
  int64_t nx = tst_numel(rank, r->dims), ny = tst_numel(rank, od), nw = tst_numel(rank, w);
  void *xd = tst_alloc_for(&xs), *want = tst_alloc_for(&ys);
  tst_fill(xd, dt, nx, 7 + (unsigned)nx);
  for (int64_t e = 0; e < ny; e++) {
    int64_t oi[R], kx[R];
    tst_unravel(e, rank, od, oi);
    double acc = red == LATHE_OP_REDUCE_SUM ? 0 : red == LATHE_OP_REDUCE_PRODUCT ? 1
                 : red == LATHE_OP_REDUCE_MAX ? lowest(dt) : highest(dt);
    uint64_t iacc = red == LATHE_OP_REDUCE_PRODUCT ? 1 : 0;
    bool any = false;
    for (int64_t k = 0; k < nw; k++) {
      tst_unravel(k, rank, w, kx);
      int64_t f = window_elem(r, oi, kx, st, id, wd, lo);
      if (f < 0) continue;
      double v = tst_get(xd, dt, f);
      any = true;
      if (red == LATHE_OP_REDUCE_SUM) acc += v, iacc += (uint64_t)(int64_t)v;
      else if (red == LATHE_OP_REDUCE_PRODUCT) acc *= v, iacc *= (uint64_t)(int64_t)v;
      else if (red == LATHE_OP_REDUCE_MAX) acc = v > acc ? v : acc;
      else acc = v < acc ? v : acc;
    }
    bool wraps = !is_float(dt) && (red == LATHE_OP_REDUCE_SUM || red == LATHE_OP_REDUCE_PRODUCT);
    if (!any && (red == LATHE_OP_REDUCE_MAX || red == LATHE_OP_REDUCE_MIN))
      set_identity(want, dt, e, red == LATHE_OP_REDUCE_MAX);
    else
      tst_set(want, dt, e, wraps ? tst_wrap_value(dt, iacc) : acc);
  }
  const void *ins[1] = {xd};
  tst_run_expect(label, b, ins, 1, want, dt, ny, tst_tol(dt));
  free(xd);
  free(want);
  lathe_builder_free(b);
}

static void run_sas(const win_row *r, lathe_op op, lathe_dtype dt) {
  char label[160];
  snprintf(label, sizeof label, "%s/%s/%s", r->label, lathe_op_name(op), lathe_dtype_name(dt));
  if (!lathe_backend_supports_op(tst_backend(), op, dt)) SKIP("%s: unsupported for %s", label, lathe_dtype_name(dt));
  int rank = r->rank;
  int64_t w[R], st[R], id[R], wd[R], lo[R], od[R];
  effective(r, w, st, id, wd, lo, od);
  lathe_shape xs = tst_shape(dt, rank, r->dims), ss = tst_shape(dt, rank, od);
  lathe_function_t fn;
  lathe_builder_t b = tst_builder(label, &fn);
  lathe_value_t x = tst_param(fn, "x", xs), src = tst_param(fn, "source", ss), y = NULL;
  lathe_window_params p;
  params_of(r, &p);
  if (!tst_built(label, lathe_select_and_scatter(fn, op, x, src, &p, &y), b)) return;
  tst_expect_shape_and_return(label, fn, y, &xs);
  int64_t nx = tst_numel(rank, r->dims), ns = tst_numel(rank, od), nw = tst_numel(rank, w);
  void *xd = tst_alloc_for(&xs), *sd = tst_alloc_for(&ss), *want = tst_alloc_for(&xs);
  tst_fill(xd, dt, nx, 3 + (unsigned)nx);
  tst_fill(sd, dt, ns, 5 + (unsigned)ns);
  double *acc = calloc((size_t)nx + 1, sizeof(double));
  uint64_t *iacc = calloc((size_t)nx + 1, sizeof(uint64_t));
  for (int64_t e = 0; e < ns; e++) {
    int64_t oi[R], kx[R], best = -1;
    double bv = 0;
    tst_unravel(e, rank, od, oi);
    for (int64_t k = 0; k < nw; k++) {
      tst_unravel(k, rank, w, kx);
      int64_t f = window_elem(r, oi, kx, st, id, wd, lo);
      if (f < 0) continue;
      double v = tst_get(xd, dt, f);
      if (best < 0 || (op == LATHE_OP_SELECT_AND_SCATTER_MAX ? v > bv : v < bv)) best = f, bv = v;
    }
    if (best >= 0) {
      double sv = tst_get(sd, dt, e);
      acc[best] += sv;
      iacc[best] += (uint64_t)(int64_t)sv;
    }
  }
  for (int64_t i = 0; i < nx; i++) tst_set(want, dt, i, is_float(dt) ? acc[i] : tst_wrap_value(dt, iacc[i]));
  const void *ins[2] = {xd, sd};
  tst_run_expect(label, b, ins, 2, want, dt, nx, tst_tol(dt));
  free(acc);
  free(iacc);
  free(xd);
  free(sd);
  free(want);
  lathe_builder_free(b);
}

static const lathe_op reductions[] = {LATHE_OP_REDUCE_SUM, LATHE_OP_REDUCE_PRODUCT, LATHE_OP_REDUCE_MAX,
                                      LATHE_OP_REDUCE_MIN};

static void reduce_all(const win_row *r) {
  for (size_t k = 0; k < sizeof reductions / sizeof reductions[0]; k++)
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) run_reduce(r, reductions[k], dts[i]);
}

static void sas_all(const win_row *r) {
  for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
    run_sas(r, LATHE_OP_SELECT_AND_SCATTER_MAX, dts[i]);
    run_sas(r, LATHE_OP_SELECT_AND_SCATTER_MIN, dts[i]);
  }
}

TEST(reduce_window_strided) {
  win_row r = {.label = "3d_win132_str122", .rank = 3, .dims = {2, 7, 6}, .has_win = true, .win = {1, 3, 2},
               .has_strides = true, .strides = {1, 2, 2}};
  reduce_all(&r);
}

TEST(reduce_window_default_strides_padding) {
  win_row r = {.label = "3d_pool_pad_default_strides", .rank = 3, .dims = {2, 5, 7}, .has_win = true,
               .win = {1, 3, 3}, .has_pads = true, .pads = {{0, 0}, {1, 2}, {2, 1}}};
  reduce_all(&r);
}

TEST(reduce_window_dilations) {
  win_row r = {.label = "3d_input_window_dilation", .rank = 3, .dims = {2, 4, 5}, .has_win = true,
               .win = {1, 2, 3}, .has_strides = true, .strides = {1, 1, 2}, .has_idil = true, .idil = {1, 2, 1},
               .has_wdil = true, .wdil = {1, 1, 2}, .has_pads = true, .pads = {{0, 1}, {1, 1}, {2, 0}}};
  reduce_all(&r);
}

TEST(reduce_window_edges) {
  win_row s = {.label = "scalar", .rank = 0};
  reduce_all(&s);
  win_row all = {.label = "1d_whole_axis", .rank = 1, .dims = {9}, .has_win = true, .win = {9}};
  reduce_all(&all);
  win_row none = {.label = "1d_windows_in_padding", .rank = 1, .dims = {3}, .has_win = true, .win = {2},
                  .has_strides = true, .strides = {1}, .has_pads = true, .pads = {{3, 3}}};
  reduce_all(&none);
  win_row ones = {.label = "2d_no_params", .rank = 2, .dims = {3, 4}};
  reduce_all(&ones);
  win_row zero = {.label = "2d_size0_axis_padded", .rank = 2, .dims = {0, 4}, .has_win = true, .win = {1, 2},
                  .has_pads = true, .pads = {{1, 0}, {0, 0}}};
  reduce_all(&zero);
  win_row big = {.label = "4d_nhwc_maxpool_large", .rank = 4, .dims = {2, 33, 31, 8}, .has_win = true,
                 .win = {1, 3, 3, 1}, .has_strides = true, .strides = {1, 2, 2, 1},
                 .has_pads = true, .pads = {{0, 0}, {1, 1}, {1, 1}, {0, 0}}};
  run_reduce(&big, LATHE_OP_REDUCE_MAX, LATHE_DTYPE_FLOAT32);
  run_reduce(&big, LATHE_OP_REDUCE_SUM, LATHE_DTYPE_FLOAT64);
}

TEST(reduce_window_nan) {
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 4);
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("nan", &fn);
  lathe_value_t x = tst_param(fn, "x", xs), y[2];
  int64_t win[1] = {2}, str[1] = {1};
  lathe_window_params p = {.window_dims = win, .n_window_dims = 1, .strides = str, .n_strides = 1};
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, x, &p, &y[0]));
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MIN, x, &p, &y[1]));
  CHECK_OK(lathe_function_return(fn, y, 2));
  float xd[4] = {1, NAN, 3, 2};
  const void *ins[1] = {xd};
  void *out[2];
  CHECK_OK(tst_run(b, ins, 1, out, 2, NULL));
  if (out[0] && out[1]) {
    const float *mx = out[0], *mn = out[1];
    CHECK(isnan(mx[0]) && isnan(mx[1]) && mx[2] == 3, "max lets NaN through: %g %g %g", mx[0], mx[1], mx[2]);
    CHECK(isnan(mn[0]) && isnan(mn[1]) && mn[2] == 2, "min lets NaN through: %g %g %g", mn[0], mn[1], mn[2]);
  }
  tst_free_output(out[0]);
  tst_free_output(out[1]);
  lathe_builder_free(b);
}

TEST(select_and_scatter_overlapping) {
  win_row r = {.label = "2d_overlap_3x3_s1", .rank = 2, .dims = {5, 6}, .has_win = true, .win = {3, 3},
               .has_strides = true, .strides = {1, 1}};
  sas_all(&r);
  win_row p = {.label = "4d_nhwc_pad_overlap", .rank = 4, .dims = {2, 5, 4, 3}, .has_win = true,
               .win = {1, 3, 2, 1}, .has_strides = true, .strides = {1, 2, 1, 1},
               .has_pads = true, .pads = {{0, 0}, {1, 1}, {0, 1}, {0, 0}}};
  sas_all(&p);
}

TEST(select_and_scatter_defaults_and_edges) {
  win_row d = {.label = "2d_default_strides", .rank = 2, .dims = {4, 6}, .has_win = true, .win = {2, 3}};
  sas_all(&d);
  win_row pad = {.label = "1d_windows_in_padding", .rank = 1, .dims = {3}, .has_win = true, .win = {2},
                 .has_strides = true, .strides = {1}, .has_pads = true, .pads = {{2, 2}}};
  sas_all(&pad);
  win_row s = {.label = "scalar", .rank = 0};
  sas_all(&s);
  win_row big = {.label = "4d_maxpool_grad_large", .rank = 4, .dims = {2, 32, 30, 8}, .has_win = true,
                 .win = {1, 3, 3, 1}, .has_strides = true, .strides = {1, 2, 2, 1},
                 .has_pads = true, .pads = {{0, 0}, {1, 1}, {1, 1}, {0, 0}}};
  run_sas(&big, LATHE_OP_SELECT_AND_SCATTER_MAX, LATHE_DTYPE_FLOAT32);
  run_sas(&big, LATHE_OP_SELECT_AND_SCATTER_MIN, LATHE_DTYPE_BFLOAT16);
}

/* Bool windows: Max is "any", Min is "all"; empty windows give false and true. GoMLX's DropBlock
 * min-pools a Bool mask. */
TEST(reduce_window_bool) {
  win_row rows[] = {
      {.label = "bool_3d_win132_str122", .rank = 3, .dims = {2, 7, 6}, .has_win = true, .win = {1, 3, 2},
       .has_strides = true, .strides = {1, 2, 2}},
      {.label = "bool_pool_same_padding", .rank = 3, .dims = {2, 5, 7}, .has_win = true, .win = {1, 3, 3},
       .has_strides = true, .strides = {1, 1, 1}, .has_pads = true, .pads = {{0, 0}, {1, 1}, {1, 1}}},
      {.label = "bool_dilations", .rank = 3, .dims = {2, 4, 5}, .has_win = true, .win = {1, 2, 3},
       .has_strides = true, .strides = {1, 1, 2}, .has_idil = true, .idil = {1, 2, 1}, .has_wdil = true,
       .wdil = {1, 1, 2}, .has_pads = true, .pads = {{0, 1}, {1, 1}, {2, 0}}},
      {.label = "bool_windows_in_padding", .rank = 1, .dims = {3}, .has_win = true, .win = {2}, .has_strides = true,
       .strides = {1}, .has_pads = true, .pads = {{3, 3}}},
      {.label = "bool_scalar", .rank = 0},
      {.label = "bool_large", .rank = 4, .dims = {2, 33, 31, 8}, .has_win = true, .win = {1, 5, 5, 1},
       .has_strides = true, .strides = {1, 1, 1, 1}, .has_pads = true, .pads = {{0, 0}, {2, 2}, {2, 2}, {0, 0}}},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    run_reduce(&rows[i], LATHE_OP_REDUCE_MAX, LATHE_DTYPE_BOOL);
    run_reduce(&rows[i], LATHE_OP_REDUCE_MIN, LATHE_DTYPE_BOOL);
  }
}

TEST(window_capabilities) {
  static const lathe_dtype no[] = {LATHE_DTYPE_BOOL, LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_COMPLEX128};
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
    /* Bool is a ReduceWindow capability (Max and Min; the builder rejects Sum and Product) */
    CHECK(lathe_backend_supports_op(tst_backend(), LATHE_OP_REDUCE_WINDOW, no[i]) == (no[i] == LATHE_DTYPE_BOOL),
          "ReduceWindow %s", lathe_dtype_name(no[i]));
    CHECK(!lathe_backend_supports_op(tst_backend(), LATHE_OP_SELECT_AND_SCATTER_MAX, no[i]), "SAS %s",
          lathe_dtype_name(no[i]));
  }
  for (int i = 0; i < tst_n_all_dtypes; i++)
    CHECK(!lathe_backend_supports_op(tst_backend(), LATHE_OP_SELECT_AND_SCATTER_SUM, tst_all_dtypes[i]),
          "SelectAndScatterSum has no builder, so it is no capability (%s)", lathe_dtype_name(tst_all_dtypes[i]));
}

/* Pooling windows (no padding or dilation, one or two neighbouring axes: lathe:cpu's pooling
 * kernels) over values full of ties, NaNs and signed zeros, bit for bit against the rules: max
 * and min take the first extreme in row-major window order and the first NaN; SelectAndScatter
 * selects the first extreme, a NaN replacing the choice, and adds each source value to 0 (so -0
 * lands as +0); windows that overlap add in source order. */
static void pool_expect(const char *label, lathe_dtype dt, int rank, const int64_t *dims, const int64_t *win,
                        const int64_t *str) {
  int64_t od[4], nx = tst_numel(rank, dims);
  for (int d = 0; d < rank; d++) od[d] = (dims[d] - win[d]) / str[d] + 1;
  int64_t ny = tst_numel(rank, od), nw = tst_numel(rank, win);
  lathe_shape xs = tst_shape(dt, rank, dims), ys = tst_shape(dt, rank, od);
  lathe_function_t fn;
  lathe_builder_t b = tst_builder(label, &fn);
  lathe_value_t x = tst_param(fn, "x", xs), s = tst_param(fn, "source", ys), y[4];
  lathe_window_params p = {.window_dims = win, .n_window_dims = rank, .strides = str, .n_strides = rank};
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, x, &p, &y[0]));
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MIN, x, &p, &y[1]));
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MAX, x, s, &p, &y[2]));
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MIN, x, s, &p, &y[3]));
  CHECK_OK(lathe_function_return(fn, y, 4));
  bool fl = is_float(dt);
  const double vals[] = {-1, 0, fl ? -0.0 : 3, 1, 2, fl ? NAN : -2, 1, 0};
  void *xd = tst_alloc_for(&xs), *sd = tst_alloc_for(&ys);
  uint32_t r = 99;
  for (int64_t i = 0; i < nx; i++) r = r * 1103515245u + 12345u, tst_set(xd, dt, i, vals[(r >> 16) % (fl && i % 7 ? 6 : 8)]);
  for (int64_t i = 0; i < ny; i++) r = r * 1103515245u + 12345u, tst_set(sd, dt, i, vals[(r >> 16) % 6] * (double)(i % 5 + 1));
  double *want[4];
  for (int k = 0; k < 4; k++) want[k] = calloc((size_t)nx + 1, sizeof(double));
  for (int64_t e = 0; e < ny; e++) {
    int64_t oi[4], kx[4];
    tst_unravel(e, rank, od, oi);
    int64_t first[2] = {-1, -1}, sel[2] = {-1, -1};
    for (int64_t k = 0; k < nw; k++) {
      tst_unravel(k, rank, win, kx);
      int64_t f = 0;
      for (int d = 0; d < rank; d++) f = f * dims[d] + oi[d] * str[d] + kx[d];
      double v = tst_get(xd, dt, f);
      for (int m = 0; m < 2; m++) { /* m 0: max, 1: min */
        double cur = first[m] < 0 ? 0 : tst_get(xd, dt, first[m]);
        bool better = m == 0 ? v > cur : v < cur;
        if (first[m] < 0 || (!isnan(cur) && (better || isnan(v)))) first[m] = f;
        double sv = sel[m] < 0 ? 0 : tst_get(xd, dt, sel[m]);
        if (sel[m] < 0 || (m == 0 ? v > sv : v < sv) || isnan(v)) sel[m] = f;
      }
    }
    for (int m = 0; m < 2; m++) {
      want[m][e] = tst_get(xd, dt, first[m]);
      double v = tst_get(sd, dt, e), *w = &want[2 + m][sel[m]];
      *w = fl ? *w + v : tst_wrap_value(dt, (uint64_t)(int64_t)*w + (uint64_t)(int64_t)v); /* integers wrap */
    }
  }
  const void *ins[2] = {xd, sd};
  void *out[4] = {NULL, NULL, NULL, NULL};
  CHECK_OK(tst_run(b, ins, 2, out, 4, NULL));
  /* Which zero a tie of -0 and +0 yields is lathe:cpu's rule (the first extreme); other
   * backends (MLX's max, cuDNN-style kernels) may return either. */
  bool zero_sign = tst_backend_is_cpu();
  for (int k = 0; k < 4 && out[0]; k++) {
    int64_t n = k < 2 ? ny : nx, bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++) {
      double g = tst_get(out[k], dt, i), w = want[k][i];
      if (isnan(w) ? !isnan(g) : (g != w || (zero_sign && signbit(g) != signbit(w)))) bad = i;
    }
    CHECK(bad < 0, "%s output %d (%s): element %lld is %g, want %g", label, k, k < 2 ? "ReduceWindow" : "SelectAndScatter",
          (long long)bad, bad < 0 ? 0 : tst_get(out[k], dt, bad), bad < 0 ? 0 : want[k][bad]);
    tst_free_output(out[k]);
  }
  for (int k = 0; k < 4; k++) free(want[k]);
  free(xd);
  free(sd);
  lathe_builder_free(b);
}

TEST(pooling_ties_nan_zero) {
  static const lathe_dtype pdts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_INT8, LATHE_DTYPE_INT32,
                                     LATHE_DTYPE_UINT16};
  struct {
    const char *label;
    int rank;
    int64_t dims[4], win[4], str[4];
  } rows[] = {
      {"nhwc_2x2_s2", 4, {2, 7, 9, 5}, {1, 2, 2, 1}, {1, 2, 2, 1}},
      {"nhwc_3x3_s2_overlap", 4, {2, 9, 8, 3}, {1, 3, 3, 1}, {1, 2, 2, 1}},
      {"nhwc_2x3_s3x2_gaps", 4, {1, 8, 10, 4}, {1, 2, 3, 1}, {1, 3, 3, 1}},
      {"nchw_2x2_s2", 4, {2, 3, 6, 7}, {1, 1, 2, 2}, {1, 1, 2, 2}},
      {"one_axis_3_s2", 3, {3, 11, 6}, {1, 3, 1}, {1, 2, 1}},
      {"channels_300", 3, {5, 6, 300}, {2, 2, 1}, {2, 2, 1}},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    for (size_t k = 0; k < sizeof pdts / sizeof pdts[0]; k++) {
      char label[96];
      snprintf(label, sizeof label, "pool_%s/%s", rows[i].label, lathe_dtype_name(pdts[k]));
      pool_expect(label, pdts[k], rows[i].rank, rows[i].dims, rows[i].win, rows[i].str);
    }
}
