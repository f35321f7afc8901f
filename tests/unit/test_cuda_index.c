/* test_cuda_index.c -- Gather, ScatterSum/Max/Min, DynamicSlice and DynamicUpdateSlice on
 * lathe:cuda against lathe:cpu (SKIP without a GPU): every element width (Bool to Complex128, and
 * a sub-byte dtype), index dtypes of every width and sign, starts clamped (negative, past the
 * end, a huge Uint64), XLA's general forms (collapsed and offset axes, index vector axis first,
 * middle or implicit, several batch axes), scatter windows that do not fit (dropped), many
 * duplicate indices (atomics contend: integers exact, floats within rounding), NaN in
 * ScatterMax/Min, and large embedding lookups. */
#include "core/core.h"
#include "cuda_testing.h"

#define F32 LATHE_DTYPE_FLOAT32
#define MAXR 6

/* Index values: a spread past both ends of [0, hi] (as far as dt holds), or given ones. */
static void fill_indices(void *data, lathe_dtype dt, int64_t n, int64_t hi, const int64_t *given, int n_given,
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
    if (is_unsigned && v < 0) v = hi + 3;
    if (v > lim) v = lim;
    if (v < -lim - 1) v = -lim - 1;
    tst_set(data, dt, i, (double)v);
  }
}

typedef struct {
  const char *label;
  int op_rank;
  int64_t op_dims[MAXR];
  int idx_rank;
  int64_t idx_dims[MAXR];
  int iva;
  int n_off, off[MAXR], n_col, col[MAXR], n_map, map[MAXR];
  int64_t sizes[MAXR];
} gather_case;

static const gather_case gathers[] = {
    {"rows", 2, {7, 5}, 2, {4, 1}, 1, 1, {1}, 1, {0}, 1, {0}, {1, 5}},
    {"rows-implicit-vector", 2, {7, 5}, 1, {6}, 1, 1, {1}, 1, {0}, 1, {0}, {1, 5}},
    {"collapse-2", 3, {3, 4, 5}, 2, {6, 2}, 1, 1, {1}, 2, {0, 1}, 2, {0, 1}, {1, 1, 5}},
    {"points", 3, {3, 4, 5}, 3, {2, 3, 3}, 2, 0, {0}, 3, {0, 1, 2}, 3, {2, 0, 1}, {1, 1, 1}},
    {"vector-axis-0", 2, {6, 4}, 2, {2, 3}, 0, 1, {1}, 1, {0}, 2, {0, 1}, {1, 3}},
    {"offset-first", 2, {5, 6}, 3, {2, 2, 1}, 2, 1, {0}, 1, {1}, 1, {1}, {4, 1}},
    {"offset-around", 3, {4, 3, 5}, 2, {2, 2}, 1, 2, {0, 2}, 1, {1}, 2, {1, 0}, {2, 1, 5}},
    {"clamp-window", 1, {10}, 2, {6, 1}, 1, 1, {1}, 0, {0}, 1, {0}, {4}},
    {"no-indices", 2, {7, 5}, 2, {0, 1}, 1, 1, {1}, 1, {0}, 1, {0}, {1, 5}},
    {"empty-slice", 2, {7, 5}, 2, {3, 1}, 1, 1, {1}, 1, {0}, 1, {0}, {1, 0}},
    {"scalar", 1, {5}, 0, {0}, 0, 0, {0}, 1, {0}, 1, {0}, {1}},
    {"vector-axis-mid", 2, {5, 4}, 3, {2, 2, 3}, 1, 0, {0}, 2, {0, 1}, 2, {1, 0}, {1, 1}},
    {"large-rows", 2, {1000, 64}, 2, {30000, 1}, 1, 1, {1}, 1, {0}, 1, {0}, {1, 64}},
    {"large-cols", 2, {64, 1000}, 2, {3000, 1}, 1, 1, {0}, 1, {1}, 1, {1}, {64, 1}},
};

static const lathe_dtype idx_dtypes[] = {LATHE_DTYPE_INT32, LATHE_DTYPE_INT64, LATHE_DTYPE_UINT8, LATHE_DTYPE_INT16,
                                         LATHE_DTYPE_UINT64, LATHE_DTYPE_INT8, LATHE_DTYPE_UINT32, LATHE_DTYPE_UINT16,
                                         LATHE_DTYPE_INT4};
static const lathe_dtype move_dtypes[] = {LATHE_DTYPE_BOOL,    LATHE_DTYPE_INT8,      LATHE_DTYPE_FLOAT16,
                                          F32,                 LATHE_DTYPE_FLOAT64,   LATHE_DTYPE_COMPLEX64,
                                          LATHE_DTYPE_COMPLEX128, LATHE_DTYPE_UINT4,  LATHE_DTYPE_BFLOAT16};
#define N_IDX (sizeof idx_dtypes / sizeof idx_dtypes[0])
#define N_MOVE (sizeof move_dtypes / sizeof move_dtypes[0])

TEST(cuda_gather) {
  if (!gpu()) SKIP("no usable GPU");
  for (size_t c = 0; c < sizeof gathers / sizeof gathers[0]; c++)
    for (size_t d = 0; d < N_MOVE; d++) {
      const gather_case *g = &gathers[c];
      lathe_dtype dt = move_dtypes[d], it = idx_dtypes[(c + d) % N_IDX];
      lathe_shape os = tst_shape(dt, g->op_rank, g->op_dims), is = tst_shape(it, g->idx_rank, g->idx_dims);
      lathe_function_t fn;
      lathe_builder_t b = tst_builder("cuda_gather", &fn);
      lathe_value_t x = tst_param(fn, "x", os), i = tst_param(fn, "i", is), y = NULL;
      lathe_status_t st = lathe_gather(fn, x, i, g->iva, g->off, g->n_off, g->col, g->n_col, g->map, g->n_map, g->sizes,
                                       g->op_rank, false, &y);
      if (!tst_built(g->label, st, b)) continue;
      CHECK_OK(lathe_function_return(fn, &y, 1));
      void *xv = tst_alloc_for(&os), *iv = tst_alloc_for(&is);
      tst_fill(xv, dt, lathe_shape_num_elements(&os), (unsigned)(c * 5 + d));
      int64_t hi = 0;
      for (int a = 0; a < g->op_rank; a++) hi = g->op_dims[a] > hi ? g->op_dims[a] : hi;
      static const int64_t clampv[] = {-3, 8, 100, 6, 0, 3};
      bool clamp = !strcmp(g->label, "clamp-window");
      fill_indices(iv, it, lathe_shape_num_elements(&is), hi, clamp ? clampv : NULL, clamp ? 6 : 0, (unsigned)(c + d));
      char label[128];
      snprintf(label, sizeof label, "Gather %s %s indices %s", g->label, lathe_dtype_name(dt), lathe_dtype_name(it));
      const void *ins[2] = {xv, iv};
      agree(label, b, ins, 2, 0);
      free(xv);
      free(iv);
      lathe_builder_free(b);
    }
  /* a Uint64 index past INT64_MAX clamps to the last row */
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("cuda_gather_u64", &fn);
  const gather_case *g = &gathers[0];
  lathe_shape os = TST_SHAPE(LATHE_DTYPE_INT32, 7, 5), is = TST_SHAPE(LATHE_DTYPE_UINT64, 2, 1);
  lathe_value_t x = tst_param(fn, "x", os), i = tst_param(fn, "i", is), y = NULL;
  CHECK_OK(lathe_gather(fn, x, i, 1, g->off, 1, g->col, 1, g->map, 1, g->sizes, 2, false, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  int32_t xv[35];
  for (int k = 0; k < 35; k++) xv[k] = k;
  uint64_t iv[2] = {UINT64_MAX, 1};
  const void *ins[2] = {xv, iv};
  agree("Gather huge Uint64 index", b, ins, 2, 0);
  lathe_builder_free(b);
}

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

static const scatter_case scatters[] = {
    {"rows-dup", 2, {6, 4}, 2, {8, 1}, 2, {8, 4}, 1, 1, {1}, 1, {0}, 1, {0}, 8, {2, 0, 2, 5, -1, 6, 2, 7}},
    {"points", 2, {3, 4}, 2, {9, 2}, 1, {9}, 1, 0, {0}, 2, {0, 1}, 2, {0, 1}, 0, {0}},
    {"implicit-vector", 1, {7}, 1, {10}, 1, {10}, 1, 0, {0}, 1, {0}, 1, {0}, 0, {0}},
    {"window-oob", 1, {8}, 2, {5, 1}, 2, {5, 3}, 1, 1, {1}, 0, {0}, 1, {0}, 5, {0, 5, 6, -1, 2}},
    {"window-first", 2, {5, 6}, 2, {4, 1}, 2, {5, 4}, 1, 1, {0}, 1, {1}, 1, {1}, 4, {1, 1, 5, 3}},
    {"vector-axis-0", 3, {4, 5, 3}, 2, {2, 6}, 2, {6, 3}, 0, 1, {1}, 2, {0, 1}, 2, {1, 0}, 0, {0}},
    {"batch-2", 2, {4, 3}, 3, {2, 3, 1}, 3, {2, 3, 3}, 2, 1, {2}, 1, {0}, 1, {0}, 0, {0}},
    {"no-updates", 2, {6, 4}, 2, {0, 1}, 2, {0, 4}, 1, 1, {1}, 1, {0}, 1, {0}, 0, {0}},
    {"empty-window", 2, {6, 0}, 2, {3, 1}, 2, {3, 0}, 1, 1, {1}, 1, {0}, 1, {0}, 0, {0}},
    {"scalar", 0, {0}, 2, {3, 0}, 1, {3}, 1, 0, {0}, 0, {0}, 0, {0}, 0, {0}},
    /* every update onto a few rows: heavy contention on the same elements */
    {"hot-rows", 2, {3, 33}, 2, {20000, 1}, 2, {20000, 33}, 1, 1, {1}, 1, {0}, 1, {0}, 4, {0, 2, 1, 2}},
    /* narrow lanes next to each other (CAS on shared 32-bit words) */
    {"adjacent", 1, {5}, 2, {4000, 1}, 1, {4000}, 1, 0, {0}, 1, {0}, 1, {0}, 5, {0, 1, 2, 3, 4}},
};

TEST(cuda_scatter) {
  if (!gpu()) SKIP("no usable GPU");
  const lathe_dtype dts[] = {LATHE_DTYPE_INT8,  LATHE_DTYPE_UINT16, LATHE_DTYPE_INT32,     LATHE_DTYPE_UINT32,
                             LATHE_DTYPE_INT64, LATHE_DTYPE_UINT64, LATHE_DTYPE_FLOAT16,   LATHE_DTYPE_BFLOAT16,
                             F32,               LATHE_DTYPE_FLOAT64, LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_COMPLEX128,
                             LATHE_DTYPE_INT2};
  const lathe_op ops[] = {LATHE_OP_SCATTER_SUM, LATHE_OP_SCATTER_MAX, LATHE_OP_SCATTER_MIN};
  for (size_t o = 0; o < 3; o++)
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
      lathe_dtype dt = dts[d];
      if (!lathe_backend_supports_op(tst_backend(), ops[o], dt)) continue;
      CHECK(lathe_backend_supports_op(gpu(), ops[o], dt), "%s %s on the GPU", lathe_op_name(ops[o]), lathe_dtype_name(dt));
      for (size_t c = 0; c < sizeof scatters / sizeof scatters[0]; c++) {
        const scatter_case *s = &scatters[c];
        lathe_dtype it = idx_dtypes[(c + d + o) % N_IDX];
        lathe_shape os = tst_shape(dt, s->op_rank, s->op_dims), is = tst_shape(it, s->idx_rank, s->idx_dims);
        lathe_shape us = tst_shape(dt, s->upd_rank, s->upd_dims);
        lathe_function_t fn;
        lathe_builder_t b = tst_builder("cuda_scatter", &fn);
        lathe_value_t x = tst_param(fn, "x", os), i = tst_param(fn, "i", is), u = tst_param(fn, "u", us), y = NULL;
        lathe_status_t st = lathe_scatter(fn, ops[o], x, i, u, s->iva, s->uwa, s->n_uwa, s->iwa, s->n_iwa, s->sa, s->n_sa,
                                          false, false, &y);
        if (!tst_built(s->label, st, b)) continue;
        CHECK_OK(lathe_function_return(fn, &y, 1));
        void *xv = tst_alloc_for(&os), *iv = tst_alloc_for(&is), *uv = tst_alloc_for(&us);
        int64_t nu = lathe_shape_num_elements(&us);
        tst_fill(xv, dt, lathe_shape_num_elements(&os), (unsigned)(c * 3 + d));
        tst_fill(uv, dt, nu, (unsigned)(c * 3 + d + 50));
        if (lathe_dtype_is_float(dt) && ops[o] != LATHE_OP_SCATTER_SUM && nu > 3) tst_set(uv, dt, nu / 2, NAN);
        /* Half sums round per update, so thousands of duplicates (hot-rows) added in another order
         * drift apart by several units. With whole numbers every Float16 partial sum (|s| < 2048
         * here) is exact in any order, so the GPU's must equal the CPU's; BFloat16 (exact to 256)
         * rounds only where a partial sum strays past 256, by an ulp there. */
        bool half_sum = lathe_dtype_class_of(dt) == LATHE_CLASS_HALF && ops[o] == LATHE_OP_SCATTER_SUM;
        bool f16_sum = half_sum && dt == LATHE_DTYPE_FLOAT16;
        for (int64_t k = 0; half_sum && k < nu; k++) tst_set(uv, dt, k, round(tst_get(uv, dt, k) / (f16_sum ? 1 : 4)));
        for (int64_t k = 0; half_sum && k < lathe_shape_num_elements(&os); k++) tst_set(xv, dt, k, round(tst_get(xv, dt, k)));
        int64_t hi = 0;
        for (int a = 0; a < s->op_rank; a++) hi = s->op_dims[a] > hi ? s->op_dims[a] : hi;
        fill_indices(iv, it, lathe_shape_num_elements(&is), hi, s->given, s->n_given, (unsigned)(c + o));
        char label[128];
        snprintf(label, sizeof label, "%s %s %s indices %s", lathe_op_name(ops[o]), s->label, lathe_dtype_name(dt),
                 lathe_dtype_name(it));
        const void *ins[3] = {xv, iv, uv};
        /* float sums: duplicates add in another order (up to ~7000 per element in hot-rows) */
        double tol = ops[o] == LATHE_OP_SCATTER_SUM && !lathe_dtype_is_int(dt) && !f16_sum ? 200 * tst_tol(dt) : 0;
        agree(label, b, ins, 3, tol);
        free(xv);
        free(iv);
        free(uv);
        lathe_builder_free(b);
      }
    }
}

typedef struct {
  const char *label;
  int rank;
  int64_t op_dims[MAXR], sizes[MAXR], starts[MAXR];
} dyn_case;

static const dyn_case dyns[] = {
    {"inside", 2, {5, 7}, {2, 3}, {1, 2}},      {"clamp-low-high", 2, {5, 7}, {2, 3}, {-3, 10}},
    {"clamp-edge", 2, {5, 7}, {2, 3}, {4, 6}},  {"whole", 2, {5, 7}, {5, 7}, {3, 3}},
    {"size-0", 2, {5, 7}, {0, 3}, {2, 1}},      {"rank-1", 1, {9}, {4}, {7}},
    {"rank-3", 3, {3, 4, 5}, {2, 1, 3}, {1, 9, -1}}, {"ones", 3, {1, 1, 1}, {1, 1, 1}, {0, 5, -5}},
    {"large", 2, {512, 1000}, {300, 999}, {100, -7}}, {"scalar", 0, {0}, {0}, {0}},
};

TEST(cuda_dynamic_slices) {
  if (!gpu()) SKIP("no usable GPU");
  for (size_t c = 0; c < sizeof dyns / sizeof dyns[0]; c++)
    for (size_t d = 0; d < N_MOVE; d++)
      for (int update = 0; update < 2; update++) {
        const dyn_case *k = &dyns[c];
        lathe_dtype dt = move_dtypes[d];
        lathe_shape os = tst_shape(dt, k->rank, k->op_dims), bs = tst_shape(dt, k->rank, k->sizes);
        lathe_function_t fn;
        lathe_builder_t b = tst_builder("cuda_dynamic_slice", &fn);
        lathe_value_t x = tst_param(fn, "x", os), u = update ? tst_param(fn, "u", bs) : NULL, starts[MAXR], y = NULL;
        lathe_dtype sdt[MAXR];
        for (int a = 0; a < k->rank; a++) {
          sdt[a] = idx_dtypes[(c + d + (size_t)a) % N_IDX];
          if (lathe_dtype_class_of(sdt[a]) == LATHE_CLASS_UINT) sdt[a] = LATHE_DTYPE_INT32; /* negative starts */
          char name[16];
          snprintf(name, sizeof name, "s%d", a);
          starts[a] = tst_param(fn, name, tst_shape0(sdt[a]));
        }
        lathe_status_t st = update ? lathe_dynamic_update_slice(fn, x, u, starts, k->rank, &y)
                                   : lathe_dynamic_slice(fn, x, starts, k->rank, k->sizes, k->rank, &y);
        if (!tst_built(k->label, st, b)) continue;
        CHECK_OK(lathe_function_return(fn, &y, 1));
        void *xv = tst_alloc_for(&os), *uv = tst_alloc_for(&bs), *sv[MAXR];
        tst_fill(xv, dt, lathe_shape_num_elements(&os), (unsigned)(c + d));
        tst_fill(uv, dt, lathe_shape_num_elements(&bs), (unsigned)(c + d + 9));
        const void *ins[2 + MAXR];
        int ni = 0;
        ins[ni++] = xv;
        if (update) ins[ni++] = uv;
        for (int a = 0; a < k->rank; a++) {
          lathe_shape ss = tst_shape0(sdt[a]);
          sv[a] = tst_alloc_for(&ss);
          tst_set(sv[a], sdt[a], 0, (double)k->starts[a]);
          ins[ni++] = sv[a];
        }
        char label[128];
        snprintf(label, sizeof label, "%s %s %s", update ? "DynamicUpdateSlice" : "DynamicSlice", k->label, lathe_dtype_name(dt));
        agree(label, b, ins, ni, 0);
        for (int a = 0; a < k->rank; a++) free(sv[a]);
        free(xv);
        free(uv);
        lathe_builder_free(b);
      }
}
