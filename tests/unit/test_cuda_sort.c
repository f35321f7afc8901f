/* test_cuda_sort.c -- Sort on lathe:cuda against lathe:cpu (SKIP without a GPU), results compared
 * exactly (the order of a stable sort is unique): the key path (LessThan, GreaterThan, swapped
 * parameters, TotalOrder) over every key dtype class including Bool and sub-byte integers, row
 * lengths around the shared-memory tile (1 .. 200001), every axis of 2-D and 3-D tensors, NaN and
 * signed-zero placement; the comparator path (negated keys, a lexicographic two-operand order,
 * a captured scale, constants, complex keys by real part); and a comparator with a
 * non-elementwise op, which must be UNIMPLEMENTED rather than wrong. */
#include "core/core.h"
#include "cuda_testing.h"

#define F32 LATHE_DTYPE_FLOAT32
#define I32 LATHE_DTYPE_INT32

typedef enum { K_LT, K_GT, K_LT_SWAP, K_LT_TOTAL, K_GT_TOTAL, K_NEG_LT, K_LEX, K_SCALED, K_REAL_LT, K_DIST, K_BOOL } cmp_kind;
static const char *const kind_names[] = {"LT", "GT", "LT_SWAP", "LT_TOTAL", "GT_TOTAL", "NEG_LT", "LEX", "SCALED", "REAL_LT", "DIST", "BOOL"};

static lathe_function_t make_comparator(lathe_function_t m, cmp_kind kind, lathe_dtype kdt, lathe_value_t scale) {
  lathe_function_t c = NULL;
  CHECK_OK(lathe_function_closure(m, &c));
  lathe_value_t p[4];
  lathe_dtype dts[2] = {kdt, I32};
  for (int i = 0; i < 4; i++) p[i] = tst_param(c, NULL, tst_shape0(dts[i / 2]));
  lathe_value_t r = NULL, t1 = NULL, t2 = NULL, t3 = NULL, k = NULL;
  lathe_status_t st = NULL;
  switch (kind) {
    case K_LT: st = lathe_less_than(c, p[0], p[1], &r); break;
    case K_GT: st = lathe_greater_than(c, p[0], p[1], &r); break;
    case K_LT_SWAP: st = lathe_less_than(c, p[1], p[0], &r); break;
    case K_LT_TOTAL: st = lathe_less_than_total_order(c, p[0], p[1], &r); break;
    case K_GT_TOTAL: st = lathe_greater_than_total_order(c, p[0], p[1], &r); break;
    case K_NEG_LT:
      if (!(st = lathe_neg(c, p[0], &t1)) && !(st = lathe_neg(c, p[1], &t2))) st = lathe_less_than(c, t1, t2, &r);
      break;
    case K_SCALED:
      if (!(st = lathe_mul(c, p[0], scale, &t1)) && !(st = lathe_mul(c, p[1], scale, &t2))) st = lathe_less_than(c, t1, t2, &r);
      break;
    case K_REAL_LT:
      if (!(st = lathe_real(c, p[0], &t1)) && !(st = lathe_real(c, p[1], &t2))) st = lathe_less_than(c, t1, t2, &r);
      break;
    case K_DIST: { /* |l - 0.25| < |r - 0.25|: a constant inside */
      float q = 0.25f;
      lathe_shape s0 = tst_shape0(F32);
      if (!(st = lathe_constant(c, &s0, &q, sizeof q, &k)) && !(st = lathe_sub(c, p[0], k, &t1)) &&
          !(st = lathe_abs(c, t1, &t1)) && !(st = lathe_sub(c, p[1], k, &t2)) && !(st = lathe_abs(c, t2, &t2)))
        st = lathe_less_than(c, t1, t2, &r);
      break;
    }
    case K_BOOL: /* false before true */
      if (!(st = lathe_logical_not(c, p[0], &t1))) st = lathe_logical_and(c, t1, p[1], &r);
      break;
    case K_LEX:
      if (!(st = lathe_less_than(c, p[0], p[1], &t1)) && !(st = lathe_equal(c, p[0], p[1], &t2)) &&
          !(st = lathe_greater_than(c, p[2], p[3], &t3)) && !(st = lathe_logical_and(c, t2, t3, &t2)))
        st = lathe_logical_or(c, t1, t2, &r);
      break;
  }
  CHECK(st == NULL, "comparator %s on %s: %s", kind_names[kind], lathe_dtype_name(kdt), lathe_status_message(st));
  lathe_status_free(st);
  if (!r) return NULL;
  CHECK_OK(lathe_function_return(c, &r, 1));
  return c;
}

/* Sorts keys of kdt (dims) along axis with an Int32 payload (which, for LEX, is also a key). */
static void sort_case(lathe_dtype kdt, const int64_t *dims, int rank, int axis, cmp_kind kind, unsigned seed, bool dup) {
  lathe_shape ks = tst_shape(kdt, rank, dims), ps = tst_shape(I32, rank, dims);
  lathe_function_t m;
  lathe_builder_t b = tst_builder("cuda_sort", &m);
  lathe_value_t k = tst_param(m, "k", ks), p = tst_param(m, "p", ps), sv = NULL;
  if (kind == K_SCALED) sv = tst_param(m, "s", tst_shape0(kdt));
  lathe_function_t c = make_comparator(m, kind, kdt, sv);
  if (!c) {
    lathe_builder_free(b);
    return;
  }
  lathe_value_t r[2];
  CHECK_OK(lathe_sort(m, c, axis, true, (lathe_value_t[]){k, p}, 2, r));
  CHECK_OK(lathe_function_return(m, r, 2));
  int64_t n = lathe_shape_num_elements(&ks);
  void *kv = tst_alloc_for(&ks);
  int32_t *pv = malloc(sizeof(int32_t) * (size_t)(n + 1));
  tst_fill(kv, kdt, n, seed);
  if (dup && n > 4) /* many equal keys: stability decides */
    for (int64_t i = 0; i < n; i++) tst_set_complex(kv, kdt, i, tst_get(kv, kdt, i % 5), tst_get_imag(kv, kdt, i % 5));
  for (int64_t i = 0; i < n; i++) pv[i] = kind == K_LEX ? (int32_t)(i * 7919 % 13) : (int32_t)i;
  char svb[16] = {0};
  tst_set(svb, kdt, 0, -2);
  const void *ins[3] = {kv, pv, svb};
  char label[160];
  int o = snprintf(label, sizeof label, "Sort %s %s [", kind_names[kind], lathe_dtype_name(kdt));
  for (int d = 0; d < rank; d++) o += snprintf(label + o, sizeof label - (size_t)o, "%s%lld", d ? "," : "", (long long)dims[d]);
  snprintf(label + o, sizeof label - (size_t)o, "] axis %d%s", axis, dup ? " ties" : "");
  agree(label, b, ins, kind == K_SCALED ? 3 : 2, 0);
  free(kv);
  free(pv);
  lathe_builder_free(b);
}

TEST(cuda_sort_key_path) {
  if (!gpu()) SKIP("no usable GPU");
  const lathe_dtype dts[] = {F32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16, I32, LATHE_DTYPE_INT8,
                             LATHE_DTYPE_UINT8, LATHE_DTYPE_INT64, LATHE_DTYPE_UINT64, LATHE_DTYPE_INT16, LATHE_DTYPE_UINT32,
                             LATHE_DTYPE_INT4, LATHE_DTYPE_UINT2};
  const int64_t sizes[] = {1, 2, 7, 33, 1000, 2048, 2049, 5000};
  const cmp_kind kinds[] = {K_LT, K_GT, K_LT_SWAP, K_LT_TOTAL, K_GT_TOTAL};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    CHECK(lathe_backend_supports_op(gpu(), LATHE_OP_SORT, dts[d]), "Sort %s on the GPU", lathe_dtype_name(dts[d]));
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
      for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        sort_case(dts[d], &sizes[s], 1, 0, kinds[k], (unsigned)(d * 11 + s * 3 + k), s % 2 == 1);
      }
  }
  /* every axis; rows of many lengths at once; the global merge steps */
  const int64_t d2[] = {5, 7}, d3[] = {3, 4, 5}, wide[] = {64, 3001}, tall[] = {3001, 64}, big[] = {200001}, many[] = {20000, 3};
  for (int axis = 0; axis < 2; axis++) sort_case(F32, d2, 2, axis, K_LT, 11, false);
  for (int axis = 0; axis < 3; axis++) sort_case(I32, d3, 3, axis, K_GT, 12, true);
  sort_case(F32, wide, 2, 1, K_LT, 13, false);
  sort_case(LATHE_DTYPE_FLOAT64, tall, 2, 0, K_GT, 14, true);
  sort_case(I32, big, 1, 0, K_LT, 15, true);
  sort_case(F32, big, 1, 0, K_GT_TOTAL, 16, false);
  sort_case(LATHE_DTYPE_FLOAT16, many, 2, 1, K_LT, 17, false);
  sort_case(LATHE_DTYPE_UINT8, many, 2, 0, K_LT, 18, true);
}

/* NaN placement and signed zeros, short and long rows, every ordering, keys with a payload. */
TEST(cuda_sort_nan_and_zeros) {
  if (!gpu()) SKIP("no usable GPU");
  const float keys[8] = {NAN, 1, -INFINITY, -NAN, 0.0f, -0.0f, INFINITY, 2};
  const cmp_kind kinds[] = {K_LT, K_GT, K_LT_TOTAL, K_GT_TOTAL};
  const lathe_dtype dts[] = {F32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16};
  for (int reps = 1; reps <= 1001; reps += 1000)
    for (int d = 0; d < 4; d++)
      for (int k = 0; k < 4; k++) {
        lathe_dtype dt = dts[d];
        int64_t n = 8 * reps;
        lathe_shape ks = TST_SHAPE(dt, n), ps = TST_SHAPE(I32, n);
        lathe_function_t m;
        lathe_builder_t b = tst_builder("cuda_sort_nan", &m);
        lathe_value_t kx = tst_param(m, "k", ks), px = tst_param(m, "p", ps), r[2];
        lathe_function_t c = make_comparator(m, kinds[k], dt, NULL);
        if (!c) {
          lathe_builder_free(b);
          continue;
        }
        CHECK_OK(lathe_sort(m, c, 0, true, (lathe_value_t[]){kx, px}, 2, r));
        CHECK_OK(lathe_function_return(m, r, 2));
        char *kv = calloc((size_t)n, 8);
        int32_t *pv = malloc(sizeof(int32_t) * (size_t)n);
        for (int64_t i = 0; i < n; i++) {
          float key = keys[i % 8];
          pv[i] = (int32_t)i;
          if (dt == LATHE_DTYPE_FLOAT64) ((double *)kv)[i] = key; /* keeps the NaN sign */
          else if (dt == F32) ((float *)kv)[i] = key;
          else {
            uint32_t u;
            memcpy(&u, &key, 4);
            tst_set(kv, dt, i, key);
            if (isnan(key)) ((uint16_t *)kv)[i] = (uint16_t)((u >> 16 & 0x8000) | (dt == LATHE_DTYPE_FLOAT16 ? 0x7e00 : 0x7fc0));
          }
        }
        char label[96];
        snprintf(label, sizeof label, "Sort NaN/zeros %s %s x%d", kind_names[kinds[k]], lathe_dtype_name(dt), reps);
        agree(label, b, (const void *[]){kv, pv}, 2, 0);
        free(kv);
        free(pv);
        lathe_builder_free(b);
      }
}

TEST(cuda_sort_comparator_path) {
  if (!gpu()) SKIP("no usable GPU");
  const int64_t sizes[] = {1, 7, 16, 33, 1000, 2049, 4097};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    sort_case(F32, &sizes[s], 1, 0, K_NEG_LT, (unsigned)s, false);
    sort_case(F32, &sizes[s], 1, 0, K_LEX, (unsigned)s + 10, true);
    sort_case(LATHE_DTYPE_FLOAT64, &sizes[s], 1, 0, K_SCALED, (unsigned)s + 20, false);
    sort_case(F32, &sizes[s], 1, 0, K_DIST, (unsigned)s + 30, true);
    sort_case(LATHE_DTYPE_COMPLEX64, &sizes[s], 1, 0, K_REAL_LT, (unsigned)s + 40, true);
    sort_case(LATHE_DTYPE_BOOL, &sizes[s], 1, 0, K_BOOL, (unsigned)s + 50, false);
  }
  const int64_t d2[] = {6, 11}, d3[] = {3, 4, 5}, wide[] = {8, 3001};
  for (int axis = 0; axis < 2; axis++) {
    sort_case(F32, d2, 2, axis, K_SCALED, 5, false);
    sort_case(LATHE_DTYPE_COMPLEX128, d2, 2, axis, K_REAL_LT, 6, true);
  }
  for (int axis = 0; axis < 3; axis++) {
    sort_case(I32, d3, 3, axis, K_LEX, 7, true);
    sort_case(LATHE_DTYPE_INT4, d3, 3, axis, K_LEX, 8, true);
    sort_case(LATHE_DTYPE_BFLOAT16, d3, 3, axis, K_NEG_LT, 9, true);
  }
  sort_case(F32, wide, 2, 1, K_NEG_LT, 10, false);
  sort_case(LATHE_DTYPE_UINT16, wide, 2, 1, K_LEX, 11, true);
}

/* A comparator whose ops cannot run inside a GPU sort: UNIMPLEMENTED, never a wrong answer. */
TEST(cuda_sort_unsupported_comparator) {
  if (!gpu()) SKIP("no usable GPU");
  lathe_function_t m, c = NULL;
  lathe_builder_t b = tst_builder("cuda_sort_unsupported", &m);
  lathe_shape ks = TST_SHAPE(F32, 9);
  lathe_value_t k = tst_param(m, "k", ks), r[1];
  CHECK_OK(lathe_function_closure(m, &c));
  lathe_value_t l = tst_param(c, NULL, tst_shape0(F32)), rr = tst_param(c, NULL, tst_shape0(F32)), lv, s, lt;
  const int64_t one[] = {1};
  int ax[] = {0};
  CHECK_OK(lathe_reshape(c, l, one, 1, &lv));
  CHECK_OK(lathe_reduce(c, LATHE_OP_REDUCE_SUM, lv, ax, 1, &s)); /* a reduction inside the comparator */
  CHECK_OK(lathe_less_than(c, s, rr, &lt));
  CHECK_OK(lathe_function_return(c, &lt, 1));
  CHECK_OK(lathe_sort(m, c, 0, true, &k, 1, r));
  CHECK_OK(lathe_function_return(m, r, 1));
  lathe_executable_t e = NULL;
  lathe_status_t st = lathe_builder_compile_for(b, gpu(), &e);
  if (!st) {
    float kv[9] = {3, 1, 2, 9, 8, 7, 4, 5, 6};
    lathe_buffer_t in = NULL, out = NULL;
    CHECK_OK(lathe_buffer_from_host(gpu(), 0, &ks, kv, sizeof kv, &in));
    st = lathe_executable_execute(e, &in, NULL, 1, 0, &out, 1);
    if (!st && out) {
      float got[9];
      st = lathe_buffer_to_host(out, got, sizeof got);
    }
    lathe_buffer_free(in);
    lathe_buffer_free(out);
  }
  CHECK(st && lathe_status_code_of(st) == LATHE_STATUS_UNIMPLEMENTED && strstr(lathe_status_message(st), "Sort"),
        "a reduction in the comparator: UNIMPLEMENTED naming Sort, got %s", st ? lathe_status_message(st) : "success");
  lathe_status_free(st);
  lathe_executable_free(e);
  lathe_builder_free(b);
}
