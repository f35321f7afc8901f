/* scan.c -- conformance rows of the SCAN family (CumSum): every dtype it accepts x shapes of rank
 * 1..4 (size-0, size-1 and odd axes) x every axis x Exclusive x Reverse, large (threaded, and on
 * the GPU chunked) shapes, wrapping integer sums, and a dynamic axis run at several sizes. The
 * reference is a plain loop along each line: integers in wrapping 64-bit arithmetic truncated to
 * the dtype (bit-exact), floats in double rounded to the dtype once, within tst_tol(dtype) *
 * sqrt(2 + n) of 1 + the running sum of |x| (another order of the same sums, on another device,
 * rounds differently by about that much). */
#include "core/core.h"
#include "testing.h"

static bool scan_accepts(lathe_dtype dt) { return lathe_dtype_is_int(dt) || lathe_dtype_is_float(dt); }

/* want <- CumSum(x) along axis, and scale[i] <- 1 + the running sum of |x| (floats). */
static void ref_cum_sum(const lathe_shape *xs, int axis, bool excl, bool rev, const void *x, void *want, double *scale) {
  lathe_dtype dt = xs->dtype;
  int64_t pre = lathe_dims_product(xs->dims, 0, axis), len = xs->dims[axis];
  int64_t post = lathe_dims_product(xs->dims, axis + 1, xs->rank);
  bool is_int = lathe_dtype_is_int(dt);
  for (int64_t p = 0; p < pre; p++)
    for (int64_t c = 0; c < post; c++) {
      uint64_t u = 0;
      double s = 0, a = 0;
      for (int64_t t = 0; t < len; t++) {
        int64_t k = rev ? len - 1 - t : t, i = (p * len + k) * post + c;
        if (is_int) {
          uint64_t v = (uint64_t)tst_get_int(x, dt, i);
          if (!excl) u += v;
          tst_set_int(want, dt, i, u);
          if (excl) u += v;
        } else {
          double v = tst_get(x, dt, i);
          if (!excl) s += v, a += fabs(v);
          tst_set(want, dt, i, s);
          scale[i] = 1 + a;
          if (excl) s += v, a += fabs(v);
        }
      }
    }
}

static void check_cum_sum(const lathe_shape *xs, int axis, bool excl, bool rev, const void *x, const char *label) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("cum_sum", &fn);
  if (!b) return;
  lathe_value_t p = tst_param(fn, "x", *xs), r = NULL;
  if (!tst_built(label, lathe_cum_sum(fn, p, axis, excl, rev, &r), b)) return;
  tst_expect_shape_and_return(label, fn, r, xs);
  void *got = NULL;
  const void *ins[1] = {x};
  lathe_status_t st = tst_run(b, ins, 1, &got, 1, NULL);
  lathe_builder_free(b);
  if (lathe_status_code_of(st) == LATHE_STATUS_UNIMPLEMENTED) {
    tst_skipf(label, "%s", lathe_status_message(st));
    lathe_status_free(st);
    return;
  }
  CHECK(st == NULL, "%s: run: %s", label, lathe_status_message(st));
  lathe_status_free(st);
  if (!got) return;
  lathe_dtype dt = xs->dtype;
  int64_t n = lathe_shape_size(xs), len = xs->dims[axis];
  void *want = tst_alloc_for(xs);
  double *scale = calloc((size_t)(n ? n : 1), sizeof(double));
  ref_cum_sum(xs, axis, excl, rev, x, want, scale);
  double tol = tst_tol(dt) * sqrt(2.0 + (double)len);
  if (!lathe_dtype_is_int(dt)) tst_expect_tol(got, tol);
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    bool ok;
    if (lathe_dtype_is_int(dt)) {
      ok = tst_get_int(got, dt, i) == tst_get_int(want, dt, i);
    } else {
      double g = tst_get(got, dt, i), w = tst_get(want, dt, i);
      ok = isinf(w) ? g == w : fabs(g - w) <= tol * scale[i];
    }
    if (!ok && bad++ < 3)
      printf("  %s: element %lld: got %.9g want %.9g\n", label, (long long)i, tst_get(got, dt, i), tst_get(want, dt, i));
  }
  CHECK(bad == 0, "%s: %d of %lld elements differ", label, bad, (long long)n);
  free(scale);
  free(want);
  tst_free_output(got);
}

static void label_of(char *buf, size_t cap, const char *what, const lathe_shape *xs, int axis, bool excl, bool rev) {
  char sb[LATHE_SHAPE_STR_MAX];
  snprintf(buf, cap, "%sCumSum %s axis %d%s%s", what, lathe_shape_str(xs, sb, sizeof sb), axis, excl ? " exclusive" : "",
           rev ? " reverse" : "");
}

/* Every dtype x shape x axis x option. */
TEST(cum_sum_dtypes_shapes_axes_options) {
  tst_rows_of(LATHE_OP_CUM_SUM);
  static const struct {
    int rank;
    int64_t dims[4];
  } shapes[] = {
      {1, {7}}, {1, {0}}, {1, {1}}, {2, {3, 5}}, {2, {4, 0}}, {2, {1, 9}}, {3, {2, 3, 4}}, {3, {3, 1, 5}}, {4, {2, 3, 1, 5}},
  };
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (int d = 0; d < tst_n_all_dtypes; d++) {
      lathe_dtype dt = tst_all_dtypes[d];
      if (!scan_accepts(dt)) continue;
      lathe_shape xs = tst_shape(dt, shapes[si].rank, shapes[si].dims);
      void *x = tst_alloc_for(&xs);
      tst_fill(x, dt, lathe_shape_size(&xs), (unsigned)(si * 131 + (size_t)d * 7));
      for (int axis = 0; axis < xs.rank; axis++)
        for (int opt = 0; opt < 4; opt++) {
          char label[192];
          label_of(label, sizeof label, "", &xs, axis, opt & 1, opt & 2);
          check_cum_sum(&xs, axis, opt & 1, opt & 2, x, label);
        }
      free(x);
    }
}

/* Threaded lines on the CPU; on the GPU both engines, with and without chunks (one long line,
 * few long columns, many short ones). */
TEST(cum_sum_large_shapes) {
  tst_rows_of(LATHE_OP_CUM_SUM);
  static const struct {
    int rank;
    int64_t dims[3];
    int axis;
  } cases[] = {
      {2, {300, 1001}, 1}, {2, {300, 1001}, 0}, {1, {200003}, 0},  {2, {40003, 3}, 0},
      {3, {7, 5003, 9}, 1}, {2, {20000, 17}, 1}, {2, {3, 70001}, 1}, {3, {5, 3, 600}, 0},
  };
  const lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_INT32,
                             LATHE_DTYPE_INT8, LATHE_DTYPE_UINT64};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
      lathe_shape xs = tst_shape(dts[d], cases[c].rank, cases[c].dims);
      void *x = tst_alloc_for(&xs);
      tst_fill(x, dts[d], lathe_shape_size(&xs), (unsigned)(c * 10 + d));
      for (int opt = 0; opt < 4; opt += 3) { /* plain, and exclusive reversed */
        char label[192];
        label_of(label, sizeof label, "large ", &xs, cases[c].axis, opt & 1, opt & 2);
        check_cum_sum(&xs, cases[c].axis, opt & 1, opt & 2, x, label);
      }
      free(x);
    }
}

/* Integer sums wrap at the dtype's width, sub-byte dtypes included (bit-exact). */
TEST(cum_sum_integers_wrap) {
  tst_rows_of(LATHE_OP_CUM_SUM);
  const lathe_dtype dts[] = {LATHE_DTYPE_INT8, LATHE_DTYPE_UINT8, LATHE_DTYPE_INT16, LATHE_DTYPE_UINT32, LATHE_DTYPE_INT64,
                             LATHE_DTYPE_INT4, LATHE_DTYPE_UINT2};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    lathe_shape xs = TST_SHAPE(dts[d], 2, 9);
    void *x = tst_alloc_for(&xs);
    for (int i = 0; i < 18; i++) tst_set_int(x, dts[d], i, (uint64_t)(i % 2 ? -1 : 1) << (lathe_dtype_bits(dts[d]) - 2));
    for (int opt = 0; opt < 4; opt++) {
      char label[192];
      label_of(label, sizeof label, "wrap ", &xs, 1, opt & 1, opt & 2);
      check_cum_sum(&xs, 1, opt & 1, opt & 2, x, label);
    }
    free(x);
  }
  /* a known answer: Int8 [100, 100, 100] -> [100, -56, 44] */
  lathe_shape s3 = TST_SHAPE(LATHE_DTYPE_INT8, 3);
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("cum_sum_int8", &fn);
  if (!b) return;
  lathe_value_t p = tst_param(fn, "x", s3), r = NULL;
  if (!tst_built("Int8 CumSum", lathe_cum_sum(fn, p, 0, false, false, &r), b)) return;
  CHECK_OK(lathe_function_return(fn, &r, 1));
  const int8_t x3[3] = {100, 100, 100}, w3[3] = {100, -56, 44};
  const void *ins[1] = {x3};
  tst_run_expect("Int8 CumSum wraps", b, ins, 1, w3, LATHE_DTYPE_INT8, 3, 0);
  lathe_builder_free(b);
}

/* A dynamic axis: one executable, each axis scanned, run at several sizes (0, 1, odd). */
TEST(cum_sum_dynamic_axis) {
  tst_rows_of(LATHE_OP_CUM_SUM);
  for (int axis = 0; axis < 2; axis++)
    for (int opt = 0; opt < 4; opt++) {
      lathe_function_t fn;
      lathe_builder_t b = tst_builder("cum_sum_dyn", &fn);
      if (!b) return;
      lathe_shape ds = TST_SHAPE(LATHE_DTYPE_FLOAT32, -1, 5);
      ds.axis_names[0] = "batch";
      lathe_value_t p = tst_param(fn, "x", ds), r = NULL;
      if (!tst_built("dynamic CumSum", lathe_cum_sum(fn, p, axis, opt & 1, opt & 2, &r), b)) return;
      lathe_shape rs;
      CHECK_OK(lathe_value_shape(r, &rs));
      CHECK(rs.dims[0] == -1 && rs.axis_names[0] && strcmp(rs.axis_names[0], "batch") == 0,
            "CumSum keeps the dynamic axis and its name");
      CHECK_OK(lathe_function_return(fn, &r, 1));
      tst_exec *ex = NULL;
      CHECK_OK(tst_compile(b, &ex));
      lathe_builder_free(b);
      if (!ex) continue;
      const int64_t batches[] = {3, 0, 1, 7, 3};
      for (int k = 0; k < 5; k++) {
        lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, batches[k], 5);
        int64_t n = lathe_shape_size(&xs);
        float *x = tst_alloc_for(&xs), *got = tst_alloc_for(&xs), *want = tst_alloc_for(&xs);
        double *scale = calloc((size_t)n + 1, sizeof(double));
        for (int64_t i = 0; i < n; i++) x[i] = (float)((i * 37 % 11) - 5) / 4;
        ref_cum_sum(&xs, axis, opt & 1, opt & 2, x, want, scale);
        const void *ins[1] = {x};
        lathe_buffer_t o = NULL;
        lathe_status_t st = tst_exec_run(ex, &xs, ins, 1, &o, 1);
        CHECK(st == NULL, "dynamic CumSum axis %d batch %lld: run: %s", axis, (long long)batches[k], lathe_status_message(st));
        lathe_status_free(st);
        if (o) {
          lathe_shape os;
          CHECK_OK(lathe_buffer_shape(o, &os));
          CHECK(os.rank == 2 && os.dims[0] == batches[k] && os.dims[1] == 5, "dynamic CumSum: result shape");
          if (n) CHECK_OK(lathe_buffer_to_host(o, got, sizeof(float) * (size_t)n));
          char label[96];
          snprintf(label, sizeof label, "dynamic CumSum axis %d opt %d batch %lld", axis, opt, (long long)batches[k]);
          tst_expect_close(label, got, want, LATHE_DTYPE_FLOAT32, n, 1e-6); /* quarters: exact sums */
          lathe_buffer_free(o);
        }
        free(scale);
        free(x);
        free(got);
        free(want);
      }
      tst_exec_free(ex);
    }
}
