/* reduce.c -- conformance rows of the REDUCE family: every reduction x every dtype it accepts x
 * shapes of rank 0..4 (size-0, size-1 and odd axes) x every subset of axes (given in reverse
 * order), plus NaN propagation, identities of empty reductions, large (threaded) shapes and
 * ArgMinMax (every axis, ties, NaN, several output dtypes). References are plain loops in
 * double precision (integers: wrapping 64-bit arithmetic truncated to the dtype). */
#include "core/core.h"
#include "testing.h"

static lathe_shape shape_of(lathe_dtype dt, int rank, const int64_t *dims) { return tst_shape(dt, rank, dims); }

static bool int_equal(const void *a, const void *b, lathe_dtype dt, int64_t i) {
  int bits = lathe_dtype_bits(dt);
  if (bits >= 8) return memcmp((const char *)a + i * bits / 8, (const char *)b + i * bits / 8, (size_t)bits / 8) == 0;
  return tst_get(a, dt, i) == tst_get(b, dt, i);
}

/* ---- the reference reduction ---- */
typedef struct {
  double re, im; /* floats and complex */
  uint64_t u;    /* integers and Bool */
  double scale;  /* sum of |x|, for the tolerance of sums */
} ref_acc;

static void ref_init(lathe_op op, lathe_dtype dt, ref_acc *a) {
  bool sint = lathe_dtype_class_of(dt) == LATHE_CLASS_SINT;
  int bits = lathe_dtype_bits(dt);
  uint64_t top = bits >= 64 ? ~0ull : (1ull << bits) - 1; /* all ones of the width (ints) */
  memset(a, 0, sizeof *a);
  switch (op) {
    case LATHE_OP_REDUCE_PRODUCT: a->re = 1, a->u = 1; break;
    case LATHE_OP_REDUCE_MAX: a->re = -INFINITY, a->u = sint ? (uint64_t)(-(int64_t)(top >> 1) - 1) : 0; break;
    case LATHE_OP_REDUCE_MIN: a->re = INFINITY, a->u = sint ? top >> 1 : top; break;
    case LATHE_OP_REDUCE_BITWISE_AND: a->u = ~0ull; break;
    case LATHE_OP_REDUCE_LOGICAL_AND: a->u = 1; break;
    default: break;
  }
}

static void ref_combine(lathe_op op, lathe_dtype dt, ref_acc *a, const void *x, int64_t i) {
  lathe_dtype_class c = lathe_dtype_class_of(dt);
  if (c == LATHE_CLASS_FLOAT || c == LATHE_CLASS_HALF || c == LATHE_CLASS_COMPLEX) {
    double v = tst_get(x, dt, i), w = tst_get_imag(x, dt, i);
    a->scale += fabs(v) + fabs(w);
    switch (op) {
      case LATHE_OP_REDUCE_SUM: a->re += v, a->im += w; break;
      case LATHE_OP_REDUCE_PRODUCT: {
        double r = a->re * v - a->im * w, m = a->re * w + a->im * v;
        a->re = r, a->im = m;
        break;
      }
      case LATHE_OP_REDUCE_MAX: if (isnan(v) || v > a->re) a->re = isnan(a->re) ? a->re : v; break;
      case LATHE_OP_REDUCE_MIN: if (isnan(v) || v < a->re) a->re = isnan(a->re) ? a->re : v; break;
      default: break;
    }
    return;
  }
  uint64_t v = (uint64_t)tst_get_int(x, dt, i);
  bool sint = c == LATHE_CLASS_SINT;
  switch (op) {
    case LATHE_OP_REDUCE_SUM: a->u += v; break;
    case LATHE_OP_REDUCE_PRODUCT: a->u *= v; break;
    case LATHE_OP_REDUCE_MAX: if (sint ? (int64_t)v > (int64_t)a->u : v > a->u) a->u = v; break;
    case LATHE_OP_REDUCE_MIN: if (sint ? (int64_t)v < (int64_t)a->u : v < a->u) a->u = v; break;
    case LATHE_OP_REDUCE_BITWISE_AND: a->u &= v; break;
    case LATHE_OP_REDUCE_BITWISE_OR: a->u |= v; break;
    case LATHE_OP_REDUCE_BITWISE_XOR: a->u ^= v; break;
    case LATHE_OP_REDUCE_LOGICAL_AND: a->u &= v != 0; break;
    case LATHE_OP_REDUCE_LOGICAL_OR: a->u |= v != 0; break;
    case LATHE_OP_REDUCE_LOGICAL_XOR: a->u ^= v != 0; break;
    default: break;
  }
}

static bool op_accepts(lathe_op op, lathe_dtype dt) {
  lathe_dtype_class c = lathe_dtype_class_of(dt);
  switch (op) {
    case LATHE_OP_REDUCE_SUM:
    case LATHE_OP_REDUCE_PRODUCT: return c != LATHE_CLASS_BOOL;
    case LATHE_OP_REDUCE_MAX:
    case LATHE_OP_REDUCE_MIN: return c != LATHE_CLASS_BOOL && c != LATHE_CLASS_COMPLEX;
    case LATHE_OP_REDUCE_BITWISE_AND:
    case LATHE_OP_REDUCE_BITWISE_OR:
    case LATHE_OP_REDUCE_BITWISE_XOR: return c == LATHE_CLASS_SINT || c == LATHE_CLASS_UINT;
    default: return c == LATHE_CLASS_BOOL;
  }
}

/* Fills x for op: products get values near 1 so that long products stay finite. */
static void fill_for(lathe_op op, lathe_dtype dt, void *x, int64_t n, unsigned seed) {
  tst_fill(x, dt, n, seed);
  if (op == LATHE_OP_REDUCE_PRODUCT && (lathe_dtype_is_float(dt) || lathe_dtype_is_complex(dt)))
    for (int64_t i = 0; i < n; i++)
      tst_set_complex(x, dt, i, 1 + tst_get(x, dt, i) / 16, tst_get_imag(x, dt, i) / 16);
}

/* Builds op(x, axes), runs it and compares with the reference. Returns false on a build/run error. */
static void check_reduce(lathe_op op, const lathe_shape *xs, const int *axes, int n_axes, const void *x,
                         const char *label) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("reduce", &fn);
  if (!b) return;
  lathe_value_t p = NULL, r = NULL;
  p = tst_param(fn, "x", *xs);
  lathe_status_t st = lathe_reduce(fn, op, p, axes, n_axes, &r);
  CHECK(st == NULL, "%s: build: %s", label, lathe_status_message(st));
  /* No axes reduces every axis (GoMLX's definition): the reference does the same. */
  int all_axes[LATHE_MAX_RANK];
  if (n_axes == 0) {
    for (int a = 0; a < xs->rank; a++) all_axes[a] = a;
    axes = all_axes;
    n_axes = xs->rank;
  }
  lathe_status_free(st);
  if (!r) {
    lathe_builder_free(b);
    return;
  }
  CHECK_OK(lathe_function_return(fn, &r, 1));
  void *got = NULL;
  lathe_shape os;
  const void *ins[1] = {x};
  st = tst_run(b, ins, 1, &got, 1, &os);
  if (lathe_status_code_of(st) == LATHE_STATUS_UNIMPLEMENTED) {
    tst_skipf(label, "%s", lathe_status_message(st));
    lathe_status_free(st);
    lathe_builder_free(b);
    return;
  }
  CHECK(st == NULL, "%s: run: %s", label, lathe_status_message(st));
  lathe_status_free(st);
  lathe_builder_free(b);
  if (!got) return;
  /* reference */
  bool red[LATHE_MAX_RANK] = {false};
  for (int i = 0; i < n_axes; i++) red[axes[i]] = true;
  int64_t on = lathe_shape_size(&os), xn = lathe_shape_size(xs);
  CHECK(os.rank == xs->rank - n_axes && os.dtype == xs->dtype, "%s: result rank %d dtype %s", label, os.rank,
        lathe_dtype_name(os.dtype));
  ref_acc *acc = malloc(sizeof(ref_acc) * (size_t)(on ? on : 1));
  for (int64_t o = 0; o < on; o++) ref_init(op, xs->dtype, &acc[o]);
  for (int64_t i = 0; i < xn; i++) {
    int64_t rem = i, o = 0, mul = 1;
    for (int a = xs->rank - 1; a >= 0; a--) {
      int64_t c = rem % xs->dims[a];
      rem /= xs->dims[a];
      if (!red[a]) o += c * mul, mul *= xs->dims[a];
    }
    ref_combine(op, xs->dtype, &acc[o], x, i);
  }
  lathe_dtype dt = xs->dtype;
  bool is_int = !lathe_dtype_is_float(dt) && !lathe_dtype_is_complex(dt);
  void *want = tst_alloc_for(&os);
  int bad = 0;
  int64_t nred = on ? xn / on : 0;
  /* Under -b, a long float sum or product may round differently in another order: rounding
   * errors grow about as sqrt(n) in the reduced length. */
  if (!is_int && (op == LATHE_OP_REDUCE_SUM || op == LATHE_OP_REDUCE_PRODUCT))
    tst_expect_tol(got, tst_tol(dt) * sqrt(2.0 + (double)nred));
  for (int64_t o = 0; o < on; o++) {
    if (is_int) {
      tst_set_int(want, dt, o, acc[o].u);
      if (!int_equal(got, want, dt, o)) {
        if (bad < 3) printf("  %s: element %lld: got %g want %g\n", label, (long long)o, tst_get(got, dt, o), tst_get(want, dt, o));
        bad++;
      }
      continue;
    }
    double tol = tst_tol(dt) * (op == LATHE_OP_REDUCE_SUM || op == LATHE_OP_REDUCE_PRODUCT ? 2 + (double)nred : 1);
    double g = tst_get(got, dt, o), gi = tst_get_imag(got, dt, o);
    /* the reference rounded to dt first, as the result is */
    tst_set_complex(want, dt, o, acc[o].re, acc[o].im);
    double w = tst_get(want, dt, o), wi = tst_get_imag(want, dt, o);
    double scale = op == LATHE_OP_REDUCE_SUM ? 1 + acc[o].scale : 1 + fabs(w) + fabs(wi);
    bool ok = isnan(w) ? isnan(g) : isinf(w) ? g == w : fabs(g - w) <= tol * scale && fabs(gi - wi) <= tol * scale;
    if (!ok) {
      if (bad < 3) printf("  %s: element %lld: got %.9g%+.9gi want %.9g%+.9gi\n", label, (long long)o, g, gi, w, wi);
      bad++;
    }
  }
  CHECK(bad == 0, "%s: %d of %lld elements differ", label, bad, (long long)on);
  free(want);
  free(acc);
  tst_free_output(got);
}

static const lathe_op reduce_ops[] = {
    LATHE_OP_REDUCE_SUM,         LATHE_OP_REDUCE_PRODUCT,     LATHE_OP_REDUCE_MAX,         LATHE_OP_REDUCE_MIN,
    LATHE_OP_REDUCE_BITWISE_AND, LATHE_OP_REDUCE_BITWISE_OR,  LATHE_OP_REDUCE_BITWISE_XOR, LATHE_OP_REDUCE_LOGICAL_AND,
    LATHE_OP_REDUCE_LOGICAL_OR,  LATHE_OP_REDUCE_LOGICAL_XOR,
};
enum { N_REDUCE_OPS = sizeof reduce_ops / sizeof reduce_ops[0] };

/* Every op x dtype x shape x subset of axes. */
TEST(reduce_all_ops_dtypes_shapes_axes) {
  static const struct {
    int rank;
    int64_t dims[4];
  } shapes[] = {
      {0, {0}},        {1, {7}},         {1, {0}},         {1, {1}},         {2, {3, 5}},
      {2, {1, 4}},     {2, {0, 3}},      {2, {4, 9}},      {3, {2, 3, 4}},   {3, {4, 1, 5}},
      {3, {3, 0, 2}},  {4, {2, 3, 1, 5}}, {4, {3, 2, 4, 3}},
  };
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (int d = 0; d < tst_n_all_dtypes; d++) {
      lathe_dtype dt = tst_all_dtypes[d];
      lathe_shape xs = shape_of(dt, shapes[si].rank, shapes[si].dims);
      int64_t xn = lathe_shape_size(&xs);
      void *x = tst_alloc_for(&xs);
      for (int k = 0; k < N_REDUCE_OPS; k++) {
        lathe_op op = reduce_ops[k];
        if (!op_accepts(op, dt)) continue;
        fill_for(op, dt, x, xn, (unsigned)(si * 131 + (size_t)d * 7 + (size_t)k));
        for (int mask = 0; mask < (1 << xs.rank); mask++) {
          int axes[4], n = 0;
          for (int a = xs.rank - 1; a >= 0; a--) /* reverse order: any order is accepted */
            if (mask >> a & 1) axes[n++] = a;
          char label[160], sb[LATHE_SHAPE_STR_MAX];
          snprintf(label, sizeof label, "%s %s axes mask %d", lathe_op_name(op), lathe_shape_str(&xs, sb, sizeof sb), mask);
          check_reduce(op, &xs, axes, n, x, label);
        }
      }
      free(x);
    }
}

/* Large shapes: threaded splits of the first kept axis, full reductions in parts, halves. */
TEST(reduce_large_shapes) {
  static const struct {
    int rank;
    int64_t dims[3];
    int n_axes;
    int axes[3];
  } cases[] = {
      {2, {300, 1001}, 1, {1}}, {2, {300, 1001}, 1, {0}}, {2, {300, 1001}, 2, {0, 1}}, {1, {200003}, 1, {0}},
      {3, {7, 5003, 9}, 1, {1}}, {3, {7, 5003, 9}, 2, {0, 2}},
  };
  const lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_INT32,
                             LATHE_DTYPE_COMPLEX64};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
      lathe_shape xs = shape_of(dts[d], cases[c].rank, cases[c].dims);
      void *x = tst_alloc_for(&xs);
      tst_fill(x, dts[d], lathe_shape_size(&xs), (unsigned)(c * 10 + d));
      const lathe_op ops[] = {LATHE_OP_REDUCE_SUM, LATHE_OP_REDUCE_MAX, LATHE_OP_REDUCE_MIN};
      for (int k = 0; k < 3; k++) {
        if (!op_accepts(ops[k], dts[d])) continue;
        char label[160], sb[LATHE_SHAPE_STR_MAX];
        snprintf(label, sizeof label, "large %s %s", lathe_op_name(ops[k]), lathe_shape_str(&xs, sb, sizeof sb));
        check_reduce(ops[k], &xs, cases[c].axes, cases[c].n_axes, x, label);
      }
      free(x);
    }
}

/* Max/Min propagate NaN; empty reductions give each op's identity. */
TEST(reduce_nan_and_identities) {
  const lathe_dtype fdts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16};
  for (size_t d = 0; d < 4; d++) {
    lathe_shape xs = TST_SHAPE(fdts[d], 4, 6);
    void *x = tst_alloc_for(&xs);
    tst_fill(x, fdts[d], 24, 5);
    tst_set(x, fdts[d], 7, NAN);  /* row 1 */
    tst_set(x, fdts[d], 23, NAN); /* row 3, last */
    tst_set(x, fdts[d], 0, INFINITY);
    int ax1[] = {1}, ax0[] = {0};
    check_reduce(LATHE_OP_REDUCE_MAX, &xs, ax1, 1, x, "ReduceMax NaN rows");
    check_reduce(LATHE_OP_REDUCE_MIN, &xs, ax1, 1, x, "ReduceMin NaN rows");
    check_reduce(LATHE_OP_REDUCE_MAX, &xs, ax0, 1, x, "ReduceMax NaN cols");
    check_reduce(LATHE_OP_REDUCE_MIN, &xs, ax0, 1, x, "ReduceMin NaN cols");
    /* spot-check the NaN rows directly */
    lathe_function_t fn;
    lathe_builder_t b = tst_builder("nan", &fn);
    lathe_value_t p = NULL, r = NULL;
    p = tst_param(fn, "x", xs);
    CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_MAX, p, ax1, 1, &r));
    CHECK_OK(lathe_function_return(fn, &r, 1));
    void *got = NULL;
    const void *ins[1] = {x};
    CHECK_OK(tst_run(b, ins, 1, &got, 1, NULL));
    if (got) {
      CHECK(isnan(tst_get(got, fdts[d], 1)) && isnan(tst_get(got, fdts[d], 3)), "%s: NaN rows give NaN",
            lathe_dtype_name(fdts[d]));
      CHECK(isinf(tst_get(got, fdts[d], 0)) && !isnan(tst_get(got, fdts[d], 2)), "%s: other rows", lathe_dtype_name(fdts[d]));
    }
    tst_free_output(got);
    lathe_builder_free(b);
    free(x);
  }
  /* identities, checked against literal values */
  static const struct {
    lathe_op op;
    lathe_dtype dt;
    double want;
  } ids[] = {
      {LATHE_OP_REDUCE_SUM, LATHE_DTYPE_FLOAT32, 0},         {LATHE_OP_REDUCE_PRODUCT, LATHE_DTYPE_FLOAT64, 1},
      {LATHE_OP_REDUCE_MAX, LATHE_DTYPE_FLOAT32, -INFINITY}, {LATHE_OP_REDUCE_MIN, LATHE_DTYPE_BFLOAT16, INFINITY},
      {LATHE_OP_REDUCE_MAX, LATHE_DTYPE_INT8, -128},         {LATHE_OP_REDUCE_MIN, LATHE_DTYPE_INT16, 32767},
      {LATHE_OP_REDUCE_MIN, LATHE_DTYPE_UINT8, 255},         {LATHE_OP_REDUCE_MAX, LATHE_DTYPE_UINT32, 0},
      {LATHE_OP_REDUCE_BITWISE_AND, LATHE_DTYPE_INT32, -1},  {LATHE_OP_REDUCE_BITWISE_AND, LATHE_DTYPE_UINT16, 65535},
      {LATHE_OP_REDUCE_BITWISE_OR, LATHE_DTYPE_INT64, 0},    {LATHE_OP_REDUCE_LOGICAL_AND, LATHE_DTYPE_BOOL, 1},
      {LATHE_OP_REDUCE_LOGICAL_OR, LATHE_DTYPE_BOOL, 0},     {LATHE_OP_REDUCE_PRODUCT, LATHE_DTYPE_COMPLEX64, 1},
      {LATHE_OP_REDUCE_MAX, LATHE_DTYPE_INT4, -8},           {LATHE_OP_REDUCE_MIN, LATHE_DTYPE_UINT2, 3},
  };
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    lathe_shape xs = TST_SHAPE(ids[i].dt, 3, 0);
    int ax[] = {1};
    lathe_function_t fn;
    lathe_builder_t b = tst_builder("id", &fn);
    lathe_value_t p = NULL, r = NULL;
    p = tst_param(fn, "x", xs);
    CHECK_OK(lathe_reduce(fn, ids[i].op, p, ax, 1, &r));
    CHECK_OK(lathe_function_return(fn, &r, 1));
    void *got = NULL;
    const void *ins[1] = {""};
    CHECK_OK(tst_run(b, ins, 1, &got, 1, NULL));
    for (int k = 0; got && k < 3; k++)
      CHECK(tst_get(got, ids[i].dt, k) == ids[i].want, "%s %s identity: got %g want %g", lathe_op_name(ids[i].op),
            lathe_dtype_name(ids[i].dt), tst_get(got, ids[i].dt, k), ids[i].want);
    tst_free_output(got);
    lathe_builder_free(b);
  }
}

/* ---- ArgMinMax ---- */
static void check_argminmax(const lathe_shape *xs, const void *x, int axis, lathe_dtype odt, bool is_min, const char *label) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("arg", &fn);
  lathe_value_t p = NULL, r = NULL;
  p = tst_param(fn, "x", *xs);
  CHECK_OK(lathe_arg_min_max(fn, p, axis, odt, is_min, &r));
  if (!r) {
    lathe_builder_free(b);
    return;
  }
  CHECK_OK(lathe_function_return(fn, &r, 1));
  void *got = NULL;
  lathe_shape os;
  const void *ins[1] = {x};
  lathe_status_t st = tst_run(b, ins, 1, &got, 1, &os);
  CHECK(st == NULL, "%s: %s", label, lathe_status_message(st));
  lathe_status_free(st);
  lathe_builder_free(b);
  if (!got) return;
  int64_t pre = 1, len = xs->dims[axis], post = 1;
  for (int a = 0; a < axis; a++) pre *= xs->dims[a];
  for (int a = axis + 1; a < xs->rank; a++) post *= xs->dims[a];
  CHECK(os.dtype == odt && os.rank == xs->rank - 1, "%s: result shape", label);
  int bad = 0;
  for (int64_t i = 0; i < pre; i++)
    for (int64_t k = 0; k < post; k++) {
      int64_t best = 0;
      for (int64_t r2 = 1; r2 < len; r2++) {
        double v = tst_get(x, xs->dtype, (i * len + r2) * post + k), bv = tst_get(x, xs->dtype, (i * len + best) * post + k);
        if (isnan(bv)) break;
        if (isnan(v) || (is_min ? v < bv : v > bv)) best = r2;
      }
      double g = tst_get(got, odt, i * post + k);
      uint64_t scratch[2] = {0, 0}; /* indices wrap to the output dtype */
      tst_set_int(scratch, odt, 0, (uint64_t)best);
      if (g != tst_get(scratch, odt, 0)) {
        if (bad < 3) printf("  %s: [%lld,%lld] got %g want %lld\n", label, (long long)i, (long long)k, g, (long long)best);
        bad++;
      }
    }
  CHECK(bad == 0, "%s: %d mismatches", label, bad);
  tst_free_output(got);
}

TEST(arg_min_max_rows) {
  static const struct {
    int rank;
    int64_t dims[4];
  } shapes[] = {{1, {7}}, {1, {1}}, {2, {3, 5}}, {2, {0, 4}}, {2, {4, 0}}, {3, {2, 3, 4}}, {4, {2, 1, 3, 5}}, {2, {3, 300}}};
  const lathe_dtype odts[] = {LATHE_DTYPE_INT32, LATHE_DTYPE_INT64, LATHE_DTYPE_UINT8, LATHE_DTYPE_INT16};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (int d = 0; d < tst_n_all_dtypes; d++) {
      lathe_dtype dt = tst_all_dtypes[d];
      if (!lathe_dtype_is_int(dt) && !lathe_dtype_is_float(dt) && dt != LATHE_DTYPE_BOOL) continue;
      lathe_shape xs = shape_of(dt, shapes[si].rank, shapes[si].dims);
      int64_t xn = lathe_shape_size(&xs);
      void *x = tst_alloc_for(&xs);
      tst_fill(x, dt, xn, (unsigned)(si * 17 + (size_t)d));
      /* ties: repeat some values; NaN in floats */
      for (int64_t i = 0; i + 3 < xn; i += 5) tst_set_complex(x, dt, i + 3, tst_get(x, dt, i), 0);
      if (lathe_dtype_is_float(dt) && xn > 6) tst_set(x, dt, xn / 2, NAN), tst_set(x, dt, xn / 2 + 1, NAN);
      for (int axis = 0; axis < xs.rank; axis++)
        for (int m = 0; m < 2; m++) {
          char label[160], sb[LATHE_SHAPE_STR_MAX];
          lathe_dtype odt = odts[(axis + m + d) % 4];
          snprintf(label, sizeof label, "ArgMinMax %s axis %d %s -> %s", lathe_shape_str(&xs, sb, sizeof sb), axis,
                   m ? "min" : "max", lathe_dtype_name(odt));
          check_argminmax(&xs, x, axis, odt, m, label);
        }
      free(x);
    }
}
