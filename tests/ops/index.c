/* index.c -- conformance rows of the INDEX family (Gather, ScatterSum/Max/Min, DynamicSlice,
 * DynamicUpdateSlice) against plain reference loops written here from the XLA definitions:
 * each result element is found from its own coordinates (gather, slices) or each update element
 * is sent to its target (scatter), in double precision (int64 for integer sums, wrapped). */
#include <stdint.h>

#include "core/core.h"
#include "testing.h"

#define MAXR 8

static const lathe_dtype idx_dtypes[] = {LATHE_DTYPE_INT32, LATHE_DTYPE_INT64, LATHE_DTYPE_UINT8, LATHE_DTYPE_INT16,
                                         LATHE_DTYPE_UINT64, LATHE_DTYPE_INT8,  LATHE_DTYPE_UINT32, LATHE_DTYPE_INT4};
#define N_IDX_DTYPES (int)(sizeof idx_dtypes / sizeof idx_dtypes[0])

static bool has(const int *l, int n, int v) {
  for (int i = 0; i < n; i++)
    if (l[i] == v) return true;
  return false;
}

static int64_t clampi(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static void copy_val(void *dst, lathe_dtype dt, int64_t di, const void *src, int64_t si) {
  tst_set_complex(dst, dt, di, tst_get(src, dt, si), tst_get_imag(src, dt, si));
}

/* Index values: explicit ones when given, else a spread that goes past both ends of [0, hi]. */
static void fill_indices(void *data, lathe_dtype dt, int64_t n, const int64_t *given, int n_given, int64_t hi,
                         unsigned seed) {
  bool is_unsigned = lathe_dtype_class_of(dt) == LATHE_CLASS_UINT;
  int64_t lim = lathe_dtype_bits(dt) < 8 ? (1 << (lathe_dtype_bits(dt) - 1)) - 1 : 127;
  uint32_t x = seed * 2654435761u + 7u;
  for (int64_t i = 0; i < n; i++) {
    int64_t v;
    if (n_given) {
      v = given[i % n_given];
    } else {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      v = (int64_t)(x % (uint32_t)(hi + 5)) - 2;
    }
    if (is_unsigned && v < 0) v = hi + 3; /* unsigned types cannot go below 0: go past the top */
    if (v > lim) v = lim;
    if (v < -lim - 1) v = -lim - 1;
    tst_set(data, dt, i, (double)v);
  }
}

/* ---------------------------------------------------------------------------------------------
 * Gather */

typedef struct {
  const char *label;
  int op_rank;
  int64_t op_dims[MAXR];
  int idx_rank;
  int64_t idx_dims[MAXR];
  int iva;
  int n_off, off[MAXR], n_col, col[MAXR], n_map, map[MAXR];
  int64_t sizes[MAXR];
  int out_rank;
  int64_t out_dims[MAXR];
  int n_given;
  int64_t given[16];
} gather_case;

static void gather_ref(const gather_case *c, lathe_dtype dt, const void *operand, lathe_dtype it, const void *idx,
                       void *want) {
  int64_t n = tst_numel(c->out_rank, c->out_dims);
  for (int64_t o = 0; o < n; o++) {
    int64_t oc[MAXR], bc[MAXR], ic[MAXR], opc[MAXR] = {0};
    tst_unravel(o, c->out_rank, c->out_dims, oc);
    int nb = 0, next_off = 0;
    for (int a = 0; a < c->out_rank; a++) {
      if (has(c->off, c->n_off, a)) {
        while (has(c->col, c->n_col, next_off)) next_off++;
        opc[next_off++] = oc[a];
      } else {
        bc[nb++] = oc[a];
      }
    }
    for (int k = 0; k < c->n_map; k++) {
      int j = 0;
      for (int a = 0; a < c->idx_rank; a++) ic[a] = a == c->iva ? k : bc[j++];
      int64_t v = (int64_t)tst_get(idx, it, tst_ravel(c->idx_rank, c->idx_dims, ic));
      int ax = c->map[k];
      opc[ax] += clampi(v, 0, c->op_dims[ax] - c->sizes[ax]);
    }
    copy_val(want, dt, o, operand, tst_ravel(c->op_rank, c->op_dims, opc));
  }
}

static void gather_one(const gather_case *c, lathe_dtype dt, lathe_dtype it, unsigned seed) {
  char label[160];
  snprintf(label, sizeof label, "Gather %s %s indices %s", c->label, lathe_dtype_name(dt), lathe_dtype_name(it));
  if (!lathe_backend_supports_op(tst_backend(), LATHE_OP_GATHER, dt)) SKIP("%s: unsupported", label);
  lathe_shape os = tst_shape(dt, c->op_rank, c->op_dims), is = tst_shape(it, c->idx_rank, c->idx_dims);
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("index", &fn);
  if (!b) return;
  lathe_value_t x, i, y;
  x = tst_param(fn, "x", os);
  i = tst_param(fn, "i", is);
  lathe_status_t st = lathe_gather(fn, x, i, c->iva, c->off, c->n_off, c->col, c->n_col, c->map, c->n_map, c->sizes,
                                   c->op_rank, seed & 1, &y);
  if (!tst_built(label, st, b)) return;
  lathe_shape ys;
  CHECK_OK(lathe_value_shape(y, &ys));
  lathe_shape want_s = tst_shape(dt, c->out_rank, c->out_dims);
  CHECK(lathe_shape_equal(&ys, &want_s), "%s: result shape rank %d", label, ys.rank);
  CHECK_OK(lathe_function_return(fn, &y, 1));
  void *xd = tst_alloc_for(&os), *id = tst_alloc_for(&is), *want = tst_alloc_for(&want_s);
  tst_fill(xd, dt, lathe_shape_num_elements(&os), seed);
  int64_t hi = 0;
  for (int a = 0; a < c->op_rank; a++) hi = c->op_dims[a] > hi ? c->op_dims[a] : hi;
  fill_indices(id, it, lathe_shape_num_elements(&is), c->given, c->n_given, hi, seed + 1);
  gather_ref(c, dt, xd, it, id, want);
  const void *ins[2] = {xd, id};
  void *got = NULL;
  lathe_shape gs;
  st = tst_run(b, ins, 2, &got, 1, &gs);
  CHECK(st == NULL, "%s: run: %s", label, lathe_status_message(st));
  lathe_status_free(st);
  if (got) tst_expect_close(label, got, want, dt, lathe_shape_num_elements(&want_s), 0);
  tst_free_output(got);
  free(xd), free(id), free(want);
  lathe_builder_free(b);
}

static const gather_case gather_cases[] = {
    /* embedding lookup: rows of a table */
    {"rows", 2, {7, 5}, 2, {4, 1}, 1, 1, {1}, 1, {0}, 1, {0}, {1, 5}, 2, {4, 5}, 0, {0}},
    /* same, index vector axis == rank (implicit size-1 axis) */
    {"rows-implicit-vector", 2, {7, 5}, 1, {6}, 1, 1, {1}, 1, {0}, 1, {0}, {1, 5}, 2, {6, 5}, 0, {0}},
    /* several collapsed axes */
    {"collapse-2", 3, {3, 4, 5}, 2, {6, 2}, 1, 1, {1}, 2, {0, 1}, 2, {0, 1}, {1, 1, 5}, 2, {6, 5}, 0, {0}},
    /* full-rank point gather with two batch axes */
    {"points", 3, {3, 4, 5}, 3, {2, 3, 3}, 2, 0, {0}, 3, {0, 1, 2}, 3, {2, 0, 1}, {1, 1, 1}, 2, {2, 3}, 0, {0}},
    /* index vector axis first */
    {"vector-axis-0", 2, {6, 4}, 2, {2, 3}, 0, 1, {1}, 1, {0}, 2, {0, 1}, {1, 3}, 2, {3, 3}, 0, {0}},
    /* batch axes after an offset axis; axis 0 sliced without an index */
    {"offset-first", 2, {5, 6}, 3, {2, 2, 1}, 2, 1, {0}, 1, {1}, 1, {1}, {4, 1}, 3, {4, 2, 2}, 0, {0}},
    /* offset axes around a batch axis; start_index_map not in axis order */
    {"offset-around", 3, {4, 3, 5}, 2, {2, 2}, 1, 2, {0, 2}, 1, {1}, 2, {1, 0}, {2, 1, 5}, 3, {2, 2, 5}, 0, {0}},
    /* windows with clamped starts (negative, past the end, far past) */
    {"clamp", 1, {10}, 2, {6, 1}, 1, 1, {1}, 0, {0}, 1, {0}, {4}, 2, {6, 4}, 6, {-3, 8, 100, 6, 0, 3}},
    /* nothing gathered */
    {"no-indices", 2, {7, 5}, 2, {0, 1}, 1, 1, {1}, 1, {0}, 1, {0}, {1, 5}, 2, {0, 5}, 0, {0}},
    {"empty-slice", 2, {7, 5}, 2, {3, 1}, 1, 1, {1}, 1, {0}, 1, {0}, {1, 0}, 2, {3, 0}, 0, {0}},
    /* a scalar result */
    {"scalar", 1, {5}, 0, {0}, 0, 0, {0}, 1, {0}, 1, {0}, {1}, 0, {0}, 1, {3}},
    /* size-1 axes everywhere */
    {"ones", 2, {1, 1}, 2, {1, 1}, 1, 1, {1}, 1, {0}, 1, {0}, {1, 1}, 2, {1, 1}, 0, {0}},
    /* index vector axis in the middle of three */
    {"vector-axis-mid", 2, {5, 4}, 3, {2, 2, 3}, 1, 0, {0}, 2, {0, 1}, 2, {1, 0}, {1, 1}, 2, {2, 3}, 0, {0}},
};

TEST(gather_conformance) {
  int nc = (int)(sizeof gather_cases / sizeof gather_cases[0]);
  for (int c = 0; c < nc; c++)
    for (int d = 0; d < tst_n_all_dtypes; d++)
      gather_one(&gather_cases[c], tst_all_dtypes[d], idx_dtypes[(c + d) % N_IDX_DTYPES], (unsigned)(c * 31 + d));
}

TEST(gather_large_parallel) {
  /* embedding lookup large enough to be split among threads, and a strided (non-run) one */
  gather_case big = {"large-rows", 2, {1000, 64}, 2, {3000, 1}, 1, 1, {1}, 1, {0}, 1, {0}, {1, 64}, 2, {3000, 64}, 0, {0}};
  gather_one(&big, LATHE_DTYPE_FLOAT32, LATHE_DTYPE_INT32, 5);
  gather_one(&big, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_INT64, 6);
  gather_case cols = {"large-cols", 2, {64, 1000}, 2, {3000, 1}, 1, 1, {0}, 1, {1}, 1, {1}, {64, 1}, 2, {64, 3000}, 0, {0}};
  gather_one(&cols, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_INT32, 7);
}

TEST(gather_uint64_huge_index_clamps) {
  gather_case c = {"u64-huge", 2, {7, 5}, 2, {2, 1}, 1, 1, {1}, 1, {0}, 1, {0}, {1, 5}, 2, {2, 5}, 0, {0}};
  lathe_shape os = tst_shape(LATHE_DTYPE_INT32, 2, c.op_dims), is = tst_shape(LATHE_DTYPE_UINT64, 2, c.idx_dims);
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("index", &fn);
  lathe_value_t x, i, y;
  x = tst_param(fn, "x", os);
  i = tst_param(fn, "i", is);
  CHECK_OK(lathe_gather(fn, x, i, 1, c.off, 1, c.col, 1, c.map, 1, c.sizes, 2, false, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  int32_t xd[35];
  for (int k = 0; k < 35; k++) xd[k] = k;
  uint64_t id[2] = {UINT64_MAX, 1};
  const void *ins[2] = {xd, id};
  void *got = NULL;
  CHECK_OK(tst_run(b, ins, 2, &got, 1, NULL));
  if (got) {
    const int32_t *g = got;
    CHECK(g[0] == 30 && g[4] == 34 && g[5] == 5, "huge uint64 index clamps to the last row: %d %d %d", g[0], g[4], g[5]);
  }
  tst_free_output(got);
  lathe_builder_free(b);
}

/* ---------------------------------------------------------------------------------------------
 * Scatter */

typedef struct {
  const char *label;
  int op_rank;
  int64_t op_dims[MAXR];
  int idx_rank;
  int64_t idx_dims[MAXR];
  int upd_rank;
  int64_t upd_dims[MAXR];
  int iva;
  int n_uwa, uwa[MAXR], n_iwa, iwa[MAXR], n_sa, sa[MAXR];
  int n_given;
  int64_t given[16];
} scatter_case;

static void scatter_ref(const scatter_case *c, lathe_op op, lathe_dtype dt, const void *operand, lathe_dtype it,
                        const void *idx, const void *upd, void *want) {
  int64_t n_op = tst_numel(c->op_rank, c->op_dims), n_upd = tst_numel(c->upd_rank, c->upd_dims);
  bool is_int = lathe_dtype_is_int(dt);
  double *re = calloc((size_t)n_op + 1, sizeof(double)), *im = calloc((size_t)n_op + 1, sizeof(double));
  int64_t *iv = calloc((size_t)n_op + 1, sizeof(int64_t));
  for (int64_t k = 0; k < n_op; k++) {
    re[k] = tst_get(operand, dt, k), im[k] = tst_get_imag(operand, dt, k);
    iv[k] = (int64_t)re[k];
  }
  /* window size per operand axis */
  int64_t wsize[MAXR];
  for (int a = 0, i = 0; a < c->op_rank; a++) wsize[a] = has(c->iwa, c->n_iwa, a) ? 1 : c->upd_dims[c->uwa[i++]];
  for (int64_t u = 0; u < n_upd; u++) {
    int64_t uc[MAXR], bc[MAXR], wc[MAXR], ic[MAXR], start[MAXR] = {0}, opc[MAXR];
    tst_unravel(u, c->upd_rank, c->upd_dims, uc);
    int nb = 0, nw = 0;
    for (int a = 0; a < c->upd_rank; a++) {
      if (has(c->uwa, c->n_uwa, a)) wc[nw++] = uc[a];
      else bc[nb++] = uc[a];
    }
    for (int k = 0; k < c->n_sa; k++) {
      int j = 0;
      for (int a = 0; a < c->idx_rank; a++) ic[a] = a == c->iva ? k : bc[j++];
      start[c->sa[k]] = (int64_t)tst_get(idx, it, tst_ravel(c->idx_rank, c->idx_dims, ic));
    }
    bool fits = true;
    for (int a = 0, w = 0; a < c->op_rank; a++) {
      fits &= start[a] >= 0 && start[a] + wsize[a] <= c->op_dims[a];
      opc[a] = start[a] + (has(c->iwa, c->n_iwa, a) ? 0 : wc[w++]);
    }
    if (!fits) continue;
    int64_t t = tst_ravel(c->op_rank, c->op_dims, opc);
    double v = tst_get(upd, dt, u), vi = tst_get_imag(upd, dt, u);
    if (op == LATHE_OP_SCATTER_SUM) {
      re[t] += v, im[t] += vi, iv[t] += (int64_t)v;
    } else if (op == LATHE_OP_SCATTER_MAX) {
      if (v > re[t]) re[t] = v, iv[t] = (int64_t)v;
    } else {
      if (v < re[t]) re[t] = v, iv[t] = (int64_t)v;
    }
  }
  for (int64_t k = 0; k < n_op; k++) {
    if (is_int) tst_set(want, dt, k, (double)tst_wrap_int(dt, (uint64_t)iv[k]));
    else tst_set_complex(want, dt, k, re[k], im[k]);
  }
  free(re), free(im), free(iv);
}

static void scatter_one(const scatter_case *c, lathe_op op, lathe_dtype dt, lathe_dtype it, unsigned seed) {
  char label[160];
  snprintf(label, sizeof label, "%s %s %s indices %s", lathe_op_name(op), c->label, lathe_dtype_name(dt),
           lathe_dtype_name(it));
  if (!lathe_backend_supports_op(tst_backend(), op, dt)) SKIP("%s: unsupported", label);
  lathe_shape os = tst_shape(dt, c->op_rank, c->op_dims), is = tst_shape(it, c->idx_rank, c->idx_dims);
  lathe_shape us = tst_shape(dt, c->upd_rank, c->upd_dims);
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("index", &fn);
  if (!b) return;
  lathe_value_t x, i, u, y;
  x = tst_param(fn, "x", os);
  i = tst_param(fn, "i", is);
  u = tst_param(fn, "u", us);
  lathe_status_t st = lathe_scatter(fn, op, x, i, u, c->iva, c->uwa, c->n_uwa, c->iwa, c->n_iwa, c->sa, c->n_sa,
                                    seed & 1, seed & 2, &y);
  if (!tst_built(label, st, b)) return;
  lathe_shape ys;
  CHECK_OK(lathe_value_shape(y, &ys));
  CHECK(lathe_shape_equal(&ys, &os), "%s: result shape is the operand's", label);
  CHECK_OK(lathe_function_return(fn, &y, 1));
  void *xd = tst_alloc_for(&os), *id = tst_alloc_for(&is), *ud = tst_alloc_for(&us), *want = tst_alloc_for(&os);
  tst_fill(xd, dt, lathe_shape_num_elements(&os), seed);
  tst_fill(ud, dt, lathe_shape_num_elements(&us), seed + 7);
  int64_t hi = 0;
  for (int a = 0; a < c->op_rank; a++) hi = c->op_dims[a] > hi ? c->op_dims[a] : hi;
  fill_indices(id, it, lathe_shape_num_elements(&is), c->given, c->n_given, hi, seed + 1);
  scatter_ref(c, op, dt, xd, it, id, ud, want);
  const void *ins[3] = {xd, id, ud};
  void *got = NULL;
  st = tst_run(b, ins, 3, &got, 1, NULL);
  CHECK(st == NULL, "%s: run: %s", label, lathe_status_message(st));
  lathe_status_free(st);
  /* sums of halves round at each step (like a running sum in that dtype) */
  if (got) tst_expect_close(label, got, want, dt, lathe_shape_num_elements(&os), 2 * tst_tol(dt));
  tst_free_output(got);
  free(xd), free(id), free(ud), free(want);
  lathe_builder_free(b);
}

static const scatter_case scatter_cases[] = {
    /* rows with duplicate indices and out-of-bounds ones (-1, 6, 7 are dropped) */
    {"rows-dup", 2, {6, 4}, 2, {8, 1}, 2, {8, 4}, 1, 1, {1}, 1, {0}, 1, {0}, 8, {2, 0, 2, 5, -1, 6, 2, 7}},
    /* points, random indices past both ends */
    {"points", 2, {3, 4}, 2, {9, 2}, 1, {9}, 1, 0, {0}, 2, {0, 1}, 2, {0, 1}, 0, {0}},
    /* index vector axis == rank */
    {"implicit-vector", 1, {7}, 1, {10}, 1, {10}, 1, 0, {0}, 1, {0}, 1, {0}, 0, {0}},
    /* windows that do not fit are skipped whole */
    {"window-oob", 1, {8}, 2, {5, 1}, 2, {5, 3}, 1, 1, {1}, 0, {0}, 1, {0}, 5, {0, 5, 6, -1, 2}},
    /* window axis before the batch axis; scatter on axis 1 */
    {"window-first", 2, {5, 6}, 2, {4, 1}, 2, {5, 4}, 1, 1, {0}, 1, {1}, 1, {1}, 4, {1, 1, 5, 3}},
    /* index vector axis 0; scatter axes in reverse order */
    {"vector-axis-0", 3, {4, 5, 3}, 2, {2, 6}, 2, {6, 3}, 0, 1, {1}, 2, {0, 1}, 2, {1, 0}, 0, {0}},
    /* two batch axes */
    {"batch-2", 2, {4, 3}, 3, {2, 3, 1}, 3, {2, 3, 3}, 2, 1, {2}, 1, {0}, 1, {0}, 0, {0}},
    /* nothing scattered */
    {"no-updates", 2, {6, 4}, 2, {0, 1}, 2, {0, 4}, 1, 1, {1}, 1, {0}, 1, {0}, 0, {0}},
    {"empty-window", 2, {6, 0}, 2, {3, 1}, 2, {3, 0}, 1, 1, {1}, 1, {0}, 1, {0}, 0, {0}},
    /* a scalar operand, no index vector entries */
    {"scalar", 0, {0}, 2, {3, 0}, 1, {3}, 1, 0, {0}, 0, {0}, 0, {0}, 0, {0}},
};

TEST(scatter_conformance) {
  const lathe_op ops[3] = {LATHE_OP_SCATTER_SUM, LATHE_OP_SCATTER_MAX, LATHE_OP_SCATTER_MIN};
  int nc = (int)(sizeof scatter_cases / sizeof scatter_cases[0]);
  for (int o = 0; o < 3; o++)
    for (int c = 0; c < nc; c++)
      for (int d = 0; d < tst_n_all_dtypes; d++)
        scatter_one(&scatter_cases[c], ops[o], tst_all_dtypes[d], idx_dtypes[(c + d + o) % N_IDX_DTYPES],
                    (unsigned)(o * 1000 + c * 31 + d));
}

TEST(scatter_large_parallel) {
  /* embedding gradient: the window axis is split among threads; duplicates everywhere */
  scatter_case big = {"large-rows", 2, {50, 256}, 2, {4000, 1}, 2, {4000, 256}, 1, 1, {1}, 1, {0}, 1, {0}, 0, {0}};
  scatter_one(&big, LATHE_OP_SCATTER_SUM, LATHE_DTYPE_INT32, LATHE_DTYPE_INT32, 11);
  scatter_one(&big, LATHE_OP_SCATTER_SUM, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_INT64, 12);
  scatter_one(&big, LATHE_OP_SCATTER_MAX, LATHE_DTYPE_FLOAT32, LATHE_DTYPE_INT32, 13);
  /* the window axis is also indexed: no split, sequential */
  scatter_case pts = {"large-points", 2, {300, 300}, 2, {70000, 2}, 1, {70000}, 1, 0, {0}, 2, {0, 1}, 2, {0, 1}, 0, {0}};
  scatter_one(&pts, LATHE_OP_SCATTER_MIN, LATHE_DTYPE_INT64, LATHE_DTYPE_INT32, 14);
}

TEST(scatter_max_nan) {
  lathe_shape os = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3), is = TST_SHAPE(LATHE_DTYPE_INT32, 3, 1);
  lathe_shape us = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3);
  const lathe_op ops[2] = {LATHE_OP_SCATTER_MAX, LATHE_OP_SCATTER_MIN};
  for (int o = 0; o < 2; o++) {
    lathe_function_t fn;
    lathe_builder_t b = tst_builder("index", &fn);
    lathe_value_t x, i, u, y;
    x = tst_param(fn, "x", os);
    i = tst_param(fn, "i", is);
    u = tst_param(fn, "u", us);
    int sa[1] = {0};
    CHECK_OK(lathe_scatter(fn, ops[o], x, i, u, 1, NULL, 0, sa, 1, sa, 1, false, false, &y));
    CHECK_OK(lathe_function_return(fn, &y, 1));
    float xd[3] = {1, NAN, 2}, ud[3] = {NAN, 5, 1};
    int32_t id[3] = {0, 1, 2};
    const void *ins[3] = {xd, id, ud};
    void *got = NULL;
    CHECK_OK(tst_run(b, ins, 3, &got, 1, NULL));
    if (got) {
      const float *g = got;
      float want2 = o == 0 ? 2.f : 1.f;
      CHECK(isnan(g[0]) && isnan(g[1]) && g[2] == want2, "%s: NaN propagates: %g %g %g", lathe_op_name(ops[o]), g[0],
            g[1], g[2]);
    }
    tst_free_output(got);
    lathe_builder_free(b);
  }
}

/* ---------------------------------------------------------------------------------------------
 * DynamicSlice and DynamicUpdateSlice */

typedef struct {
  const char *label;
  int rank;
  int64_t op_dims[MAXR], sizes[MAXR], starts[MAXR];
} dyn_case;

static const dyn_case dyn_cases[] = {
    {"inside", 2, {5, 7}, {2, 3}, {1, 2}},
    {"clamp-low-high", 2, {5, 7}, {2, 3}, {-3, 10}},
    {"clamp-edge", 2, {5, 7}, {2, 3}, {4, 6}},
    {"whole", 2, {5, 7}, {5, 7}, {3, 3}},
    {"size-0", 2, {5, 7}, {0, 3}, {2, 1}},
    {"rank-1", 1, {9}, {4}, {7}},
    {"rank-3", 3, {3, 4, 5}, {2, 1, 3}, {1, 9, -1}},
    {"ones", 3, {1, 1, 1}, {1, 1, 1}, {0, 5, -5}},
    {"scalar", 0, {0}, {0}, {0}},
};

/* Builds main(x[, upd], s0..s{r-1}) with the start indices as scalar parameters, or, with
 * `vector`, main(x[, upd], s) with all of them in one 1-D parameter (XLA's other form). */
static void dyn_one(const dyn_case *c, bool update, lathe_dtype dt, lathe_dtype it, unsigned seed, bool vector) {
  lathe_op op = update ? LATHE_OP_DYNAMIC_UPDATE_SLICE : LATHE_OP_DYNAMIC_SLICE;
  char label[160];
  snprintf(label, sizeof label, "%s %s %s starts %s%s", lathe_op_name(op), c->label, lathe_dtype_name(dt),
           lathe_dtype_name(it), vector ? " (one vector)" : "");
  int n_starts = vector ? 1 : c->rank;
  if (!lathe_backend_supports_op(tst_backend(), op, dt)) SKIP("%s: unsupported", label);
  lathe_shape os = tst_shape(dt, c->rank, c->op_dims), ss = tst_shape(dt, c->rank, c->sizes), sc = tst_shape0(it);
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("index", &fn);
  if (!b) return;
  lathe_value_t x, u = NULL, s[MAXR], y;
  x = tst_param(fn, "x", os);
  if (update) u = tst_param(fn, "u", ss);
  lathe_shape sv = TST_SHAPE(it, c->rank);
  for (int a = 0; a < n_starts; a++) s[a] = tst_param(fn, NULL, vector ? sv : sc);
  lathe_status_t st = update ? lathe_dynamic_update_slice(fn, x, u, s, n_starts, &y)
                             : lathe_dynamic_slice(fn, x, s, n_starts, c->sizes, c->rank, &y);
  if (!tst_built(label, st, b)) return;
  lathe_shape ys;
  CHECK_OK(lathe_value_shape(y, &ys));
  const lathe_shape *want_s = update ? &os : &ss;
  CHECK(lathe_shape_equal(&ys, want_s), "%s: result shape", label);
  CHECK_OK(lathe_function_return(fn, &y, 1));
  void *xd = tst_alloc_for(&os), *ud = tst_alloc_for(&ss), *want = tst_alloc_for(want_s);
  void *sd[MAXR];
  tst_fill(xd, dt, lathe_shape_num_elements(&os), seed);
  tst_fill(ud, dt, lathe_shape_num_elements(&ss), seed + 3);
  int64_t start[MAXR];
  if (vector) {
    sd[0] = tst_alloc_for(&sv);
    fill_indices(sd[0], it, c->rank, c->starts, c->rank, 0, seed);
  }
  for (int a = 0; a < c->rank; a++) {
    if (!vector) {
      sd[a] = tst_alloc_for(&sc);
      fill_indices(sd[a], it, 1, &c->starts[a], 1, c->op_dims[a], seed);
    }
    int64_t v = vector ? (int64_t)tst_get(sd[0], it, a) : (int64_t)tst_get(sd[a], it, 0);
    start[a] = clampi(v, 0, c->op_dims[a] - c->sizes[a]);
  }
  /* reference: every element of the slice at clamped start + its own coordinates */
  if (update) {
    for (int64_t k = 0; k < lathe_shape_num_elements(&os); k++) copy_val(want, dt, k, xd, k);
  }
  for (int64_t k = 0; k < lathe_shape_num_elements(&ss); k++) {
    int64_t cc[MAXR];
    tst_unravel(k, c->rank, c->sizes, cc);
    for (int a = 0; a < c->rank; a++) cc[a] += start[a];
    int64_t t = tst_ravel(c->rank, c->op_dims, cc);
    if (update) copy_val(want, dt, t, ud, k);
    else copy_val(want, dt, k, xd, t);
  }
  const void *ins[2 + MAXR];
  int n_in = 0;
  ins[n_in++] = xd;
  if (update) ins[n_in++] = ud;
  for (int a = 0; a < n_starts; a++) ins[n_in++] = sd[a];
  void *got = NULL;
  st = tst_run(b, ins, n_in, &got, 1, NULL);
  CHECK(st == NULL, "%s: run: %s", label, lathe_status_message(st));
  lathe_status_free(st);
  if (got) tst_expect_close(label, got, want, dt, lathe_shape_num_elements(want_s), 0);
  tst_free_output(got);
  for (int a = 0; a < n_starts; a++) free(sd[a]);
  free(xd), free(ud), free(want);
  lathe_builder_free(b);
}

TEST(dynamic_slice_conformance) {
  int nc = (int)(sizeof dyn_cases / sizeof dyn_cases[0]);
  for (int u = 0; u < 2; u++)
    for (int c = 0; c < nc; c++)
      for (int d = 0; d < tst_n_all_dtypes; d++)
        dyn_one(&dyn_cases[c], u, tst_all_dtypes[d], idx_dtypes[(c + d + u) % N_IDX_DTYPES], (unsigned)(u * 500 + c * 31 + d),
                false);
}

TEST(dynamic_slice_vector_starts) {
  int nc = (int)(sizeof dyn_cases / sizeof dyn_cases[0]);
  for (int u = 0; u < 2; u++)
    for (int c = 0; c < nc; c++)
      if (dyn_cases[c].rank > 0)
        for (int d = 0; d < tst_n_all_dtypes; d += 3)
          dyn_one(&dyn_cases[c], u, tst_all_dtypes[d], idx_dtypes[(c + d + u) % N_IDX_DTYPES], (unsigned)(u * 70 + c * 7 + d),
                  true);
}

TEST(dynamic_slice_large) {
  dyn_case big = {"large", 3, {40, 50, 60}, {30, 20, 50}, {15, 40, 3}};
  dyn_one(&big, false, LATHE_DTYPE_FLOAT32, LATHE_DTYPE_INT32, 3, false);
  dyn_one(&big, true, LATHE_DTYPE_FLOAT32, LATHE_DTYPE_INT64, 4, false);
  dyn_one(&big, true, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_INT32, 5, true);
  dyn_one(&big, true, LATHE_DTYPE_COMPLEX128, LATHE_DTYPE_INT32, 5, false);
}

TEST(index_capabilities) {
  /* lathe:cpu's own list; another backend reports its own, and its rows run or skip (UNIMPLEMENTED) */
  if (!tst_backend_is_cpu()) SKIP("asserts lathe:cpu's capabilities, not the backend under test's");
  lathe_backend_t be = tst_backend();
  for (int d = 0; d < tst_n_all_dtypes; d++) {
    lathe_dtype dt = tst_all_dtypes[d];
    CHECK(lathe_backend_supports_op(be, LATHE_OP_GATHER, dt), "Gather %s", lathe_dtype_name(dt));
    CHECK(lathe_backend_supports_op(be, LATHE_OP_DYNAMIC_SLICE, dt), "DynamicSlice %s", lathe_dtype_name(dt));
    CHECK(lathe_backend_supports_op(be, LATHE_OP_DYNAMIC_UPDATE_SLICE, dt), "DynamicUpdateSlice %s", lathe_dtype_name(dt));
    bool numeric = dt != LATHE_DTYPE_BOOL, ordered = numeric && !lathe_dtype_is_complex(dt);
    CHECK(lathe_backend_supports_op(be, LATHE_OP_SCATTER_SUM, dt) == numeric, "ScatterSum %s", lathe_dtype_name(dt));
    CHECK(lathe_backend_supports_op(be, LATHE_OP_SCATTER_MAX, dt) == ordered, "ScatterMax %s", lathe_dtype_name(dt));
    CHECK(lathe_backend_supports_op(be, LATHE_OP_SCATTER_MIN, dt) == ordered, "ScatterMin %s", lathe_dtype_name(dt));
  }
}

/* Hand-computed values, independent of the reference loops above. */
TEST(index_known_values) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("index", &fn);
  if (!b) return;
  lathe_shape ts = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 2), is = TST_SHAPE(LATHE_DTYPE_INT32, 4, 1);
  lathe_shape zs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 4), js = TST_SHAPE(LATHE_DTYPE_INT32, 5, 1);
  lathe_shape us = TST_SHAPE(LATHE_DTYPE_FLOAT32, 5), ss = tst_shape0(LATHE_DTYPE_INT64);
  lathe_value_t t, i, z, j, u, s0, g, sc, ds, dus;
  t = tst_param(fn, "table", ts);
  i = tst_param(fn, "rows", is);
  z = tst_param(fn, "zeros", zs);
  j = tst_param(fn, "at", js);
  u = tst_param(fn, "upd", us);
  s0 = tst_param(fn, "start", ss);
  const int off[] = {1}, zero[] = {0};
  const int64_t row[] = {1, 2}, three[] = {3};
  CHECK_OK(lathe_gather(fn, t, i, 1, off, 1, zero, 1, zero, 1, row, 2, false, &g));
  CHECK_OK(lathe_scatter_sum(fn, z, j, u, 1, NULL, 0, zero, 1, zero, 1, false, false, &sc));
  CHECK_OK(lathe_dynamic_slice(fn, z, &s0, 1, three, 1, &ds));
  CHECK_OK(lathe_dynamic_update_slice(fn, u, z, &s0, 1, &dus));
  lathe_value_t outs[4] = {g, sc, ds, dus};
  CHECK_OK(lathe_function_return(fn, outs, 4));
  float table[6] = {0, 1, 2, 3, 4, 5}, zeros[4] = {10, 20, 30, 40}, upd[5] = {1, 2, 3, 4, 5};
  int32_t rows[4] = {2, 0, 5, -1}, at[5] = {1, 1, 3, 7, -1};
  int64_t start = 4;
  const void *ins[6] = {table, rows, zeros, at, upd, &start};
  void *got[4] = {0};
  CHECK_OK(tst_run(b, ins, 6, got, 4, NULL));
  const float want_g[8] = {4, 5, 0, 1, 4, 5, 0, 1}, want_sc[4] = {10, 23, 30, 43}, want_ds[3] = {20, 30, 40};
  const float want_dus[5] = {1, 10, 20, 30, 40};
  if (got[0]) tst_expect_close("gather rows (clamped)", got[0], want_g, LATHE_DTYPE_FLOAT32, 8, 0);
  if (got[1]) tst_expect_close("scatter sum (duplicates, dropped)", got[1], want_sc, LATHE_DTYPE_FLOAT32, 4, 0);
  if (got[2]) tst_expect_close("dynamic slice (clamped)", got[2], want_ds, LATHE_DTYPE_FLOAT32, 3, 0);
  if (got[3]) tst_expect_close("dynamic update slice (clamped)", got[3], want_dus, LATHE_DTYPE_FLOAT32, 5, 0);
  for (int k = 0; k < 4; k++) tst_free_output(got[k]);
  lathe_builder_free(b);
}

/* Runs main on inputs of concrete shapes (main may have dynamic axes); out gets the first
 * output's bytes (up to cap). */
static lathe_status_t run_concrete(lathe_builder_t b, const lathe_shape *shapes, const void *const *data, int n_in,
                                   void *out, size_t cap, lathe_shape *out_shape) {
  tst_exec *x = NULL;
  lathe_buffer_t res = NULL;
  lathe_status_t st = tst_compile(b, &x);
  if (!st) st = tst_exec_run(x, shapes, data, n_in, &res, 1);
  if (!st) st = lathe_buffer_shape(res, out_shape);
  if (!st && (size_t)lathe_shape_byte_size(out_shape) <= cap)
    st = lathe_buffer_to_host(res, out, (size_t)lathe_shape_byte_size(out_shape));
  lathe_buffer_free(res);
  tst_exec_free(x);
  return st;
}

TEST(index_dynamic_axes) {
  if (!lathe_backend_supports_dynamic_axes(tst_backend())) SKIP("no dynamic axes");
  /* Gather rows of a table with a dynamic vocabulary by a dynamic number of indices. */
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("index", &fn);
  if (!b) return;
  lathe_shape ts = TST_SHAPE(LATHE_DTYPE_FLOAT32, -1, 4), is = TST_SHAPE(LATHE_DTYPE_INT32, -1, 1);
  ts.axis_names[0] = "vocab";
  is.axis_names[0] = "n";
  lathe_value_t t, i, g;
  t = tst_param(fn, "table", ts);
  i = tst_param(fn, "ids", is);
  const int off[] = {1}, zero[] = {0};
  const int64_t row[] = {1, -1}; /* -1 on a static axis: the whole axis */
  CHECK_OK(lathe_gather(fn, t, i, 1, off, 1, zero, 1, zero, 1, row, 2, false, &g));
  lathe_shape gs;
  CHECK_OK(lathe_value_shape(g, &gs));
  CHECK(gs.rank == 2 && gs.dims[0] == -1 && gs.axis_names[0] && strcmp(gs.axis_names[0], "n") == 0 && gs.dims[1] == 4,
        "Gather keeps the batch axis name");
  CHECK_OK(lathe_function_return(fn, &g, 1));
  float table[12];
  for (int k = 0; k < 12; k++) table[k] = (float)k;
  int32_t ids[2] = {2, 9};
  lathe_shape shapes[2] = {TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 4), TST_SHAPE(LATHE_DTYPE_INT32, 2, 1)};
  const void *data[2] = {table, ids};
  float got[8] = {0};
  lathe_shape os;
  CHECK_OK(run_concrete(b, shapes, data, 2, got, sizeof got, &os));
  const float want[8] = {8, 9, 10, 11, 8, 9, 10, 11};
  CHECK(os.rank == 2 && os.dims[0] == 2 && os.dims[1] == 4, "bound result shape");
  tst_expect_close("gather dynamic", got, want, LATHE_DTYPE_FLOAT32, 8, 0);
  lathe_builder_free(b);

  /* DynamicSlice of a static size from a dynamic axis bound too short is an error, not a read
   * past the end. */
  b = tst_builder("index", &fn);
  if (!b) return;
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, -1), ss = tst_shape0(LATHE_DTYPE_INT32);
  xs.axis_names[0] = "len";
  lathe_value_t x, s, y;
  x = tst_param(fn, "x", xs);
  s = tst_param(fn, "s", ss);
  const int64_t three[] = {3};
  CHECK_OK(lathe_dynamic_slice(fn, x, &s, 1, three, 1, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  float xd[4] = {1, 2, 3, 4};
  int32_t sd = 1;
  lathe_shape shapes2[2] = {TST_SHAPE(LATHE_DTYPE_FLOAT32, 4), tst_shape0(LATHE_DTYPE_INT32)};
  const void *data2[2] = {xd, &sd};
  float got2[3] = {0};
  CHECK_OK(run_concrete(b, shapes2, data2, 2, got2, sizeof got2, &os));
  const float want2[3] = {2, 3, 4};
  tst_expect_close("dynamic slice of a dynamic axis", got2, want2, LATHE_DTYPE_FLOAT32, 3, 0);
  /* Bound too short: an error, not a read past the end. */
  shapes2[0] = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2);
  CHECK_ERR(run_concrete(b, shapes2, data2, 2, got2, sizeof got2, &os), INVALID_ARGUMENT, "DynamicSlice");
  lathe_builder_free(b);
}
