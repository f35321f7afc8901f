/* elementwise.c -- conformance rows of the elementwise families: every UNARY, BINARY and
 * COMPARE op x every dtype x shapes (scalar, [0], [1], [7], [3,5], broadcasting [3,1]x[1,5],
 * scalar x [4,3], [4,3] x scalar, and a large threaded shape), Where and Clamp, ConvertDType for
 * all 21x21 dtype pairs, and Bitcast. References are computed here: integers exactly (64-bit
 * arithmetic wrapped to the dtype's width), floats in double, complex in double complex.
 * Which dtypes each op accepts is its domain (lathe_op_domain, from src/graph/ew.def): a builder
 * that rejects what the domain accepts (or accepts what it rejects) fails, and so does a
 * combination the device reports unsupported that the test has a reference for; rejected and
 * unsupported combinations are counted as skips. */
#include <complex.h>

#include "graph/graph.h"
#include "testing.h"

/* ---- dtype classes (integers wrap through tst_wrap_int, tst_set_int, tst_get_int) ---- */
static bool is_intlike(lathe_dtype dt) { return lathe_dtype_is_int(dt) || dt == LATHE_DTYPE_BOOL; }
static bool is_sint(lathe_dtype dt) { return lathe_dtype_class_of(dt) == LATHE_CLASS_SINT; }
static bool is_flt(lathe_dtype dt) { return lathe_dtype_is_float(dt); }
static bool is_cplx(lathe_dtype dt) { return lathe_dtype_is_complex(dt); }

/* Edge values per dtype class, then pseudo-random fill. */
static void fill_input(void *d, lathe_dtype dt, int64_t n, unsigned seed) {
  tst_fill(d, dt, n, seed);
  if (n < 5) return;
  int bits = lathe_dtype_bits(dt);
  if (is_flt(dt)) {
    const double edges[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, 2.5, -1.5, 0.5, 1.0, -3.0};
    for (int64_t i = 0; i < n && i < 10; i++) tst_set(d, dt, (i * 7 + seed) % n, edges[i]);
  } else if (is_sint(dt)) {
    uint64_t mn = UINT64_C(1) << (bits - 1);
    const uint64_t edges[] = {mn, mn - 1, (uint64_t)-1, 0, 1};
    for (int64_t i = 0; i < 5; i++) tst_set_int(d, dt, (i * 3 + seed) % n, edges[i]);
  } else if (lathe_dtype_is_int(dt)) {
    const uint64_t edges[] = {~UINT64_C(0), 0, 1, UINT64_C(1) << (bits - 1)};
    for (int64_t i = 0; i < 4; i++) tst_set_int(d, dt, (i * 3 + seed) % n, edges[i]);
  } else if (is_cplx(dt)) {
    tst_set_complex(d, dt, seed % n, 0, 0);
  }
}

/* ---- building and running one-op graphs ---- */
typedef enum { R_OK, R_REJECTED, R_UNSUPPORTED, R_FAILED } run_result;
typedef lathe_status_t (*build_fn)(void *ctx, lathe_function_t fn, const lathe_value_t *p, lathe_value_t *out);

static run_result run_op(const char *label, int n_in, const lathe_shape *shapes, const void *const *data, build_fn b,
                         void *ctx, void **out, lathe_shape *out_shape) {
  lathe_builder_t bl = NULL;
  *out = NULL;
  lathe_status_t st = tst_builder_new("elementwise", &bl);
  lathe_function_t fn = lathe_builder_main(bl);
  lathe_value_t p[4] = {0}, r = NULL;
  for (int i = 0; i < n_in && !st; i++) st = lathe_parameter(fn, NULL, &shapes[i], &p[i]);
  run_result res = R_OK;
  if (!st && (st = b(ctx, fn, p, &r))) res = lathe_status_code_of(st) == LATHE_STATUS_INVALID_ARGUMENT ? R_REJECTED : R_FAILED;
  if (!st) st = lathe_function_return(fn, &r, 1);
  if (!st && (st = tst_run(bl, data, n_in, out, 1, out_shape)))
    res = lathe_status_code_of(st) == LATHE_STATUS_UNIMPLEMENTED ? R_UNSUPPORTED : R_FAILED;
  if (res == R_FAILED) CHECK(0, "%s: %s", label, lathe_status_message(st));
  lathe_status_free(st);
  lathe_builder_free(bl);
  return res;
}

/* Counts one skip per (op, dtype) that is rejected or unsupported, printing one line per op. */
typedef struct {
  char rejected[512], unsupported[512];
} skip_log;
static void skip_note(char *buf, lathe_dtype dt) {
  size_t k = strlen(buf);
  snprintf(buf + k, 512 - k, " %s", lathe_dtype_name(dt));
  tst_skipped++;
}
static void skip_flush(const char *op, skip_log *s) {
  if (*s->rejected) printf("SKIP elementwise %s: rejected (INVALID_ARGUMENT) for%s\n", op, s->rejected);
  if (*s->unsupported) printf("SKIP elementwise %s: unsupported on lathe:cpu for%s\n", op, s->unsupported);
}

/* Compares complex or real results with a tolerance relative to the magnitude. */
static void expect_close_c(const char *label, const void *got, const double complex *want, lathe_dtype dt, int64_t n,
                           double tol) {
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double complex g = tst_get(got, dt, i) + I * tst_get_imag(got, dt, i), w = want[i];
    bool ok;
    if (isnan(creal(w)) || isnan(cimag(w)) || isnan(creal(g)) || isnan(cimag(g)))
      ok = (isnan(creal(w)) || isnan(cimag(w))) == (isnan(creal(g)) || isnan(cimag(g)));
    else if (isinf(creal(w)) || isinf(cimag(w)) || isinf(creal(g)) || isinf(cimag(g)))
      ok = creal(g) == creal(w) && cimag(g) == cimag(w);
    else
      ok = cabs(g - w) <= tol * (1 + cabs(w));
    if (!ok && bad++ < 3)
      printf("  %s: element %lld: got %.9g%+.9gi, want %.9g%+.9gi\n", label, (long long)i, creal(g), cimag(g), creal(w),
             cimag(w));
  }
  CHECK(bad == 0, "%s (%s, %lld elements): %d mismatches", label, lathe_dtype_name(dt), (long long)n, bad);
}

static void expect_ints(const char *label, const void *got, const int64_t *want, lathe_dtype dt, int64_t n) {
  int bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (tst_get_int(got, dt, i) != tst_wrap_int(dt, (uint64_t)want[i]) && bad++ < 3)
      printf("  %s: element %lld: got %lld, want %lld\n", label, (long long)i, (long long)tst_get_int(got, dt, i),
             (long long)tst_wrap_int(dt, (uint64_t)want[i]));
  CHECK(bad == 0, "%s (%s, %lld elements): %d mismatches", label, lathe_dtype_name(dt), (long long)n, bad);
}

static double complex mkc(double re, double im) {
  double p[2] = {re, im};
  double complex z;
  memcpy(&z, p, sizeof z);
  return z;
}

/* A reference result: integer, or (complex) double. */
typedef struct {
  int64_t i;
  double complex z;
} rval;

static double tol_for(lathe_dtype dt) {
  double t = tst_tol(dt);
  return t ? t * 4 : 0;
}

/* Compares n outputs with references of kind "int" or "complex". */
static void expect_vals(const char *label, const void *got, const rval *want, lathe_dtype dt, int64_t n) {
  if (is_intlike(dt)) {
    int64_t *w = malloc(sizeof *w * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) w[i] = want[i].i;
    expect_ints(label, got, w, dt, n);
    free(w);
  } else {
    double complex *w = malloc(sizeof *w * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
      /* round the reference to the output dtype, as a kernel must */
      unsigned char tmp[16];
      tst_set_complex(tmp, dt, 0, creal(want[i].z), cimag(want[i].z));
      w[i] = tst_get(tmp, dt, 0) + I * tst_get_imag(tmp, dt, 0);
      if (isnan(creal(want[i].z)) || isnan(cimag(want[i].z))) w[i] = NAN;
    }
    expect_close_c(label, got, w, dt, n, tol_for(dt));
    free(w);
  }
}

static rval input_val(const void *d, lathe_dtype dt, int64_t i) {
  rval v = {0, 0};
  if (is_intlike(dt)) v.i = tst_get_int(d, dt, i);
  else v.z = tst_get(d, dt, i) + I * tst_get_imag(d, dt, i);
  if (!is_intlike(dt) && !is_cplx(dt)) v.z = tst_get(d, dt, i); /* keep -0 and NaN exact */
  return v;
}

static int bits_of(lathe_dtype dt) { return lathe_dtype_bits(dt); }
static uint64_t mask_of(lathe_dtype dt) { return bits_of(dt) >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << bits_of(dt)) - 1; }

/* ================================ unary ================================ */

/* The result dtype of a unary op (the dtypes it accepts are its domain: lathe_op_domain). */
static lathe_dtype unary_out(lathe_op op, lathe_dtype dt) {
  if (op == LATHE_OP_IS_FINITE || op == LATHE_OP_IS_NAN) return LATHE_DTYPE_BOOL;
  if (op == LATHE_OP_ABS || op == LATHE_OP_REAL || op == LATHE_OP_IMAG) return lathe_dtype_real_of(dt);
  return dt;
}

static int sigbits(uint64_t v) {
  int n = 0;
  while (v) n++, v >>= 1;
  return n;
}
static int popc(uint64_t v) {
  int n = 0;
  for (; v; v &= v - 1) n++;
  return n;
}

/* false: no reference (the op is accepted but defined nowhere for this dtype). */
static bool unary_ref(lathe_op op, lathe_dtype dt, rval x, rval *r) {
  r->i = 0, r->z = 0;
  if (op == LATHE_OP_IDENTITY) {
    *r = x;
    return true;
  }
  if (is_intlike(dt)) {
    int64_t v = x.i;
    uint64_t u = (uint64_t)v & mask_of(dt);
    switch (op) {
      case LATHE_OP_LOGICAL_NOT: r->i = !v; return true;
      case LATHE_OP_ABS: r->i = (is_sint(dt) && v < 0) ? (int64_t)(0 - (uint64_t)v) : v; return true;
      case LATHE_OP_NEG: r->i = (int64_t)(0 - (uint64_t)v); return true;
      case LATHE_OP_SIGN: r->i = is_sint(dt) ? (v > 0) - (v < 0) : u != 0; return true;
      case LATHE_OP_BITWISE_NOT: r->i = ~v; return true;
      case LATHE_OP_BIT_COUNT: r->i = popc(u); return true;
      case LATHE_OP_CLZ: r->i = bits_of(dt) - sigbits(u); return true;
      case LATHE_OP_IS_NAN: r->i = 0; return true;
      default: return false;
    }
  }
  if (!is_cplx(dt)) {
    double v = creal(x.z), o;
    switch (op) {
      case LATHE_OP_ABS: o = fabs(v); break;
      case LATHE_OP_NEG: o = -v; break;
      case LATHE_OP_SIGN: o = isnan(v) ? v : v > 0 ? 1 : v < 0 ? -1 : v; break;
      case LATHE_OP_CEIL: o = ceil(v); break;
      case LATHE_OP_FLOOR: o = floor(v); break;
      case LATHE_OP_ROUND: o = nearbyint(v); break;
      case LATHE_OP_SQRT: o = sqrt(v); break;
      case LATHE_OP_RSQRT: o = 1 / sqrt(v); break;
      case LATHE_OP_EXP: o = exp(v); break;
      case LATHE_OP_EXPM1: o = expm1(v); break;
      case LATHE_OP_LOG: o = log(v); break;
      case LATHE_OP_LOG1P: o = log1p(v); break;
      case LATHE_OP_LOGISTIC: o = 1 / (1 + exp(-v)); break;
      case LATHE_OP_TANH: o = tanh(v); break;
      case LATHE_OP_SIN: o = sin(v); break;
      case LATHE_OP_COS: o = cos(v); break;
      case LATHE_OP_ERF: o = erf(v); break;
      case LATHE_OP_IS_FINITE: r->i = isfinite(v) != 0; return true;
      case LATHE_OP_IS_NAN: r->i = isnan(v) != 0; return true;
      case LATHE_OP_REAL: o = v; break;
      case LATHE_OP_IMAG: o = 0; break;
      default: return false;
    }
    r->z = o;
    return true;
  }
  double complex z = x.z;
  switch (op) {
    case LATHE_OP_ABS: r->z = cabs(z); break;
    case LATHE_OP_NEG: r->z = -z; break;
    case LATHE_OP_SIGN: r->z = cabs(z) == 0 ? z : z / cabs(z); break;
    case LATHE_OP_SQRT: r->z = csqrt(z); break;
    case LATHE_OP_RSQRT: r->z = 1 / csqrt(z); break;
    case LATHE_OP_EXP: r->z = cexp(z); break;
    case LATHE_OP_EXPM1: r->z = cexp(z) - 1; break;
    case LATHE_OP_LOG: r->z = clog(z); break;
    case LATHE_OP_LOG1P: r->z = clog(1 + z); break;
    case LATHE_OP_LOGISTIC: r->z = 1 / (1 + cexp(-z)); break;
    case LATHE_OP_TANH: r->z = ctanh(z); break;
    case LATHE_OP_SIN: r->z = csin(z); break;
    case LATHE_OP_COS: r->z = ccos(z); break;
    case LATHE_OP_IS_FINITE: r->i = isfinite(creal(z)) && isfinite(cimag(z)); break;
    case LATHE_OP_IS_NAN: r->i = isnan(creal(z)) || isnan(cimag(z)); break;
    case LATHE_OP_REAL: r->z = creal(z); break;
    case LATHE_OP_IMAG: r->z = cimag(z); break;
    case LATHE_OP_CONJ: r->z = conj(z); break;
    default: return false; /* Ceil, Floor, Round of complex: accepted by GoMLX, defined nowhere */
  }
  return true;
}

static lathe_status_t build_unary(void *ctx, lathe_function_t fn, const lathe_value_t *p, lathe_value_t *out) {
  return lathe_unary(fn, *(lathe_op *)ctx, p[0], out);
}

static const int64_t shapes1[][3] = {{0}, {1, 0}, {1, 1}, {1, 7}, {2, 3, 5}}; /* rank, dims */

/* Runs op on dt over every test shape; returns the run result of the first shape. */
static run_result unary_case(lathe_op op, lathe_dtype dt, const lathe_shape *s, unsigned seed) {
  char label[128];
  snprintf(label, sizeof label, "%s %s[%d]", lathe_op_name(op), lathe_dtype_name(dt), s->rank);
  int64_t n = lathe_shape_size(s);
  void *in = tst_alloc_for(s), *out = NULL;
  fill_input(in, dt, n, seed);
  lathe_shape os;
  const void *data[1] = {in};
  run_result res = run_op(label, 1, s, data, build_unary, &op, &out, &os);
  if (res == R_OK) {
    lathe_dtype odt = unary_out(op, dt);
    CHECK(os.dtype == odt && os.rank == s->rank && lathe_shape_size(&os) == n, "%s: result shape dtype %s, want %s",
          label, lathe_dtype_name(os.dtype), lathe_dtype_name(odt));
    rval *want = calloc((size_t)(n ? n : 1), sizeof *want);
    bool have = true;
    for (int64_t i = 0; i < n && have; i++) have = unary_ref(op, dt, input_val(in, dt, i), &want[i]);
    CHECK(have, "%s: accepted and run, but the test has no reference for it", label);
    if (have) expect_vals(label, out, want, odt, n);
    free(want);
  }
  tst_free_output(out);
  free(in);
  return res;
}

TEST(elementwise_unary) {
  for (int op = 0; op < LATHE_OP_COUNT; op++) {
    if (lathe_op_kind_of((lathe_op)op) != LATHE_KIND_UNARY) continue;
    if (!tst_rows_of((lathe_op)op)) continue; /* rejected dtypes build no graph: declare the op */
    skip_log sk = {{0}, {0}};
    for (int d = 0; d < tst_n_all_dtypes; d++) {
      lathe_dtype dt = tst_all_dtypes[d];
      run_result first = R_OK;
      for (size_t k = 0; k < sizeof shapes1 / sizeof shapes1[0]; k++) {
        lathe_shape s = tst_shape(dt, (int)shapes1[k][0], &shapes1[k][1]);
        run_result r = unary_case((lathe_op)op, dt, &s, (unsigned)(op * 31 + d * 7 + k));
        if (k == 0) first = r;
        else CHECK(r == first, "%s %s: inconsistent across shapes", lathe_op_name(op), lathe_dtype_name(dt));
        if (r != R_OK) break;
      }
      bool accepts = lathe_op_accepts_dtype((lathe_op)op, dt);
      CHECK(accepts == (first != R_REJECTED), "%s on %s: builder %s, its domain says %s", lathe_op_name(op),
            lathe_dtype_name(dt), first == R_REJECTED ? "rejects" : "accepts", accepts ? "accept" : "reject");
      if (first == R_REJECTED) skip_note(sk.rejected, dt);
      if (first == R_UNSUPPORTED) {
        rval tmp;
        rval x = {0, 0};
        CHECK(!unary_ref((lathe_op)op, dt, x, &tmp), "%s on %s is unsupported but defined", lathe_op_name(op),
              lathe_dtype_name(dt));
        skip_note(sk.unsupported, dt);
      }
    }
    skip_flush(lathe_op_name(op), &sk);
  }
}

TEST(elementwise_unary_large) {
  /* Big enough for the thread pool to split. */
  const lathe_op ops[] = {LATHE_OP_EXP, LATHE_OP_NEG, LATHE_OP_IS_NAN};
  const lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_INT32};
  for (size_t o = 0; o < 3; o++)
    for (size_t d = 0; d < 4; d++) {
      lathe_shape s = TST_SHAPE(dts[d], 301, 257);
      if (lathe_op_accepts_dtype(ops[o], dts[d])) CHECK(unary_case(ops[o], dts[d], &s, 5) == R_OK, "large unary");
    }
}

/* ================================ binary and compare ================================ */

static lathe_dtype binary_out(lathe_op op, lathe_dtype dt) {
  if (op == LATHE_OP_COMPLEX) return dt == LATHE_DTYPE_FLOAT32 ? LATHE_DTYPE_COMPLEX64 : LATHE_DTYPE_COMPLEX128;
  return lathe_op_kind_of(op) == LATHE_KIND_COMPARE ? LATHE_DTYPE_BOOL : dt;
}

/* IEEE totalOrder of two reals: -1, 0, 1. */
static int total_cmp(double a, double b) {
  int ra = isnan(a) ? (signbit(a) ? -2 : 2) : 0, rb = isnan(b) ? (signbit(b) ? -2 : 2) : 0;
  if (ra || rb) return (ra > rb) - (ra < rb);
  if (a < b) return -1;
  if (a > b) return 1;
  if (a == 0) return (signbit(b) != 0) - (signbit(a) != 0);
  return 0;
}
static int ordering(lathe_op op, int c) { /* c = sign of lhs - rhs; -2: unordered */
  switch (op) {
    case LATHE_OP_EQUAL:
    case LATHE_OP_EQUAL_TOTAL_ORDER: return c == 0;
    case LATHE_OP_NOT_EQUAL:
    case LATHE_OP_NOT_EQUAL_TOTAL_ORDER: return c != 0;
    case LATHE_OP_GREATER_THAN:
    case LATHE_OP_GREATER_THAN_TOTAL_ORDER: return c == 1;
    case LATHE_OP_GREATER_OR_EQUAL:
    case LATHE_OP_GREATER_OR_EQUAL_TOTAL_ORDER: return c == 1 || c == 0;
    case LATHE_OP_LESS_THAN:
    case LATHE_OP_LESS_THAN_TOTAL_ORDER: return c == -1;
    default: return c == -1 || c == 0;
  }
}

static bool is_total_order(lathe_op op) {
  switch (op) {
    case LATHE_OP_EQUAL_TOTAL_ORDER:
    case LATHE_OP_NOT_EQUAL_TOTAL_ORDER:
    case LATHE_OP_GREATER_THAN_TOTAL_ORDER:
    case LATHE_OP_GREATER_OR_EQUAL_TOTAL_ORDER:
    case LATHE_OP_LESS_THAN_TOTAL_ORDER:
    case LATHE_OP_LESS_OR_EQUAL_TOTAL_ORDER: return true;
    default: return false;
  }
}

static bool binary_ref(lathe_op op, lathe_dtype dt, rval x, rval y, rval *r) {
  r->i = 0, r->z = 0;
  bool total = is_total_order(op);
  if (lathe_op_kind_of(op) == LATHE_KIND_COMPARE) {
    int c;
    if (is_intlike(dt)) {
      if (lathe_dtype_class_of(dt) == LATHE_CLASS_UINT) {
        uint64_t a = (uint64_t)x.i & mask_of(dt), b = (uint64_t)y.i & mask_of(dt);
        c = (a > b) - (a < b);
      } else {
        c = (x.i > y.i) - (x.i < y.i);
      }
    } else if (is_cplx(dt)) {
      c = total ? (total_cmp(creal(x.z), creal(y.z)) || total_cmp(cimag(x.z), cimag(y.z)) ? 2 : 0)
                : (x.z == y.z ? 0 : 2);
    } else {
      double a = creal(x.z), b = creal(y.z);
      c = total ? total_cmp(a, b) : (isnan(a) || isnan(b)) ? 2 : (a > b) - (a < b);
    }
    r->i = ordering(op, c);
    return true;
  }
  if (is_intlike(dt)) {
    int bits = bits_of(dt);
    bool s = is_sint(dt);
    int64_t a = x.i, b = y.i;
    uint64_t ua = (uint64_t)a & mask_of(dt), ub = (uint64_t)b & mask_of(dt);
    int64_t minv = s ? -(int64_t)((UINT64_C(1) << (bits - 1)) - 1) - 1 : 0; /* no overflow at 64 bits */
    switch (op) {
      case LATHE_OP_ADD: r->i = (int64_t)((uint64_t)a + (uint64_t)b); return true;
      case LATHE_OP_SUB: r->i = (int64_t)((uint64_t)a - (uint64_t)b); return true;
      case LATHE_OP_MUL: r->i = (int64_t)((uint64_t)a * (uint64_t)b); return true;
      case LATHE_OP_DIV:
        if (b == 0) r->i = -1;
        else if (s && b == -1) r->i = (int64_t)(0 - (uint64_t)a);
        else r->i = s ? a / b : (int64_t)(ua / ub);
        (void)minv;
        return true;
      case LATHE_OP_REM:
        if (b == 0) r->i = a;
        else if (s && b == -1) r->i = 0;
        else r->i = s ? a % b : (int64_t)(ua % ub);
        return true;
      case LATHE_OP_POW: { /* a negative exponent gives 1, as Go's loop */
        uint64_t acc = 1, base = (uint64_t)a;
        for (int64_t e = s ? b : (int64_t)ub; e > 0; e >>= 1, base *= base)
          if (e & 1) acc *= base;
        r->i = (int64_t)acc;
        return true;
      }
      case LATHE_OP_MAX: r->i = s ? (a > b ? a : b) : (int64_t)(ua > ub ? ua : ub); return true;
      case LATHE_OP_MIN: r->i = s ? (a < b ? a : b) : (int64_t)(ua < ub ? ua : ub); return true;
      case LATHE_OP_BITWISE_AND: r->i = a & b; return true;
      case LATHE_OP_BITWISE_OR: r->i = a | b; return true;
      case LATHE_OP_BITWISE_XOR: r->i = a ^ b; return true;
      case LATHE_OP_LOGICAL_AND: r->i = a && b; return true;
      case LATHE_OP_LOGICAL_OR: r->i = a || b; return true;
      case LATHE_OP_LOGICAL_XOR: r->i = !a != !b; return true;
      case LATHE_OP_SHIFT_LEFT: r->i = ub >= (uint64_t)bits || (s && b < 0) ? 0 : (int64_t)(ua << ub); return true;
      case LATHE_OP_SHIFT_RIGHT_LOGICAL: r->i = ub >= (uint64_t)bits || (s && b < 0) ? 0 : (int64_t)(ua >> ub); return true;
      case LATHE_OP_SHIFT_RIGHT_ARITHMETIC:
        if (!s) r->i = ub >= (uint64_t)bits ? 0 : (int64_t)(ua >> ub);
        else if (b < 0 || b >= bits) r->i = a < 0 ? -1 : 0;
        else r->i = a < 0 ? ~(~a >> b) : a >> b;
        return true;
      default: return false;
    }
  }
  if (!is_cplx(dt)) {
    double a = creal(x.z), b = creal(y.z);
    switch (op) {
      case LATHE_OP_ADD: r->z = a + b; return true;
      case LATHE_OP_SUB: r->z = a - b; return true;
      case LATHE_OP_MUL: r->z = a * b; return true;
      case LATHE_OP_DIV: r->z = a / b; return true;
      case LATHE_OP_REM: r->z = fmod(a, b); return true;
      case LATHE_OP_POW: r->z = pow(a, b); return true;
      case LATHE_OP_MAX: r->z = isnan(a) || isnan(b) ? NAN : a > b ? a : b; return true;
      case LATHE_OP_MIN: r->z = isnan(a) || isnan(b) ? NAN : a < b ? a : b; return true;
      case LATHE_OP_ATAN2: r->z = atan2(a, b); return true;
      case LATHE_OP_COMPLEX: r->z = mkc(a, b); return true;
      default: return false;
    }
  }
  switch (op) {
    case LATHE_OP_ADD: r->z = x.z + y.z; return true;
    case LATHE_OP_SUB: r->z = x.z - y.z; return true;
    case LATHE_OP_MUL: r->z = x.z * y.z; return true;
    case LATHE_OP_DIV: r->z = x.z / y.z; return true;
    case LATHE_OP_POW: r->z = cpow(x.z, y.z); return true;
    default: return false; /* Rem of complex: accepted by GoMLX, defined nowhere */
  }
}

static lathe_status_t build_binary(void *ctx, lathe_function_t fn, const lathe_value_t *p, lathe_value_t *out) {
  return lathe_binary(fn, *(lathe_op *)ctx, p[0], p[1], out);
}

/* Shape pairs (rank, dims) for lhs and rhs. */
static const int64_t pairs[][2][3] = {
    {{0}, {0}},           {{1, 0}, {1, 0}},     {{1, 1}, {1, 1}}, {{1, 7}, {1, 7}},
    {{2, 3, 5}, {2, 3, 5}}, {{2, 3, 1}, {2, 1, 5}}, {{0}, {2, 4, 3}}, {{2, 4, 3}, {0}},
};

/* Values for the rhs of shifts, Pow and Div on integers: small, plus edges. */
static void fill_rhs(void *d, lathe_dtype dt, int64_t n, lathe_op op, unsigned seed) {
  fill_input(d, dt, n, seed);
  if (!lathe_dtype_is_int(dt)) {
    if (op == LATHE_OP_POW && is_cplx(dt))
      for (int64_t i = 0; i < n; i++) tst_set_complex(d, dt, i, tst_get(d, dt, i) / 2, tst_get_imag(d, dt, i) / 4);
    return;
  }
  if (op == LATHE_OP_POW)
    for (int64_t i = 0; i < n; i++) tst_set_int(d, dt, i, (uint64_t)(i % 5 == 4 ? -1 : i % 5)); /* -1: a negative exponent */
  if (op == LATHE_OP_SHIFT_LEFT || op == LATHE_OP_SHIFT_RIGHT_ARITHMETIC || op == LATHE_OP_SHIFT_RIGHT_LOGICAL)
    for (int64_t i = 0; i < n; i++) {
      const int64_t amounts[] = {0, 1, 3, bits_of(dt) - 1, bits_of(dt), bits_of(dt) + 5, -1, 2};
      tst_set_int(d, dt, i, (uint64_t)amounts[i % 8]);
    }
}

static run_result binary_case(lathe_op op, lathe_dtype dt, const lathe_shape *ls, const lathe_shape *rs,
                              unsigned seed) {
  char label[160];
  snprintf(label, sizeof label, "%s %s rank %d x rank %d", lathe_op_name(op), lathe_dtype_name(dt), ls->rank, rs->rank);
  int64_t nl = lathe_shape_size(ls), nr = lathe_shape_size(rs);
  void *a = tst_alloc_for(ls), *b = tst_alloc_for(rs), *out = NULL;
  fill_input(a, dt, nl, seed);
  fill_rhs(b, dt, nr, op, seed + 3);
  lathe_shape shapes[2] = {*ls, *rs}, os;
  const void *data[2] = {a, b};
  run_result res = run_op(label, 2, shapes, data, build_binary, &op, &out, &os);
  if (res == R_OK) {
    /* the broadcast result shape */
    lathe_shape want = ls->rank ? *ls : *rs;
    for (int i = 0; i < want.rank && ls->rank && rs->rank; i++)
      want.dims[i] = ls->dims[i] > rs->dims[i] ? ls->dims[i] : rs->dims[i];
    want.dtype = binary_out(op, dt);
    CHECK(lathe_shape_equal(&os, &want), "%s: wrong result shape", label);
    int64_t n = lathe_shape_size(&want);
    rval *ref = calloc((size_t)(n ? n : 1), sizeof *ref);
    int64_t sl[LATHE_MAX_RANK], sr[LATHE_MAX_RANK];
    lathe_shape_strides(ls, sl);
    lathe_shape_strides(rs, sr);
    bool have = true;
    for (int64_t i = 0; i < n && have; i++) {
      int64_t rem = i, il = 0, ir = 0;
      for (int ax = want.rank - 1; ax >= 0; ax--) {
        int64_t c = rem % want.dims[ax];
        rem /= want.dims[ax];
        if (ls->rank && ls->dims[ax] != 1) il += c * sl[ax];
        if (rs->rank && rs->dims[ax] != 1) ir += c * sr[ax];
      }
      have = binary_ref(op, dt, input_val(a, dt, il), input_val(b, dt, ir), &ref[i]);
    }
    CHECK(have, "%s: accepted and run, but the test has no reference for it", label);
    if (have) expect_vals(label, out, ref, want.dtype, n);
    free(ref);
  }
  tst_free_output(out);
  free(a);
  free(b);
  return res;
}

TEST(elementwise_binary_and_compare) {
  for (int op = 0; op < LATHE_OP_COUNT; op++) {
    lathe_op_kind kind = lathe_op_kind_of((lathe_op)op);
    if (kind != LATHE_KIND_BINARY && kind != LATHE_KIND_COMPARE) continue;
    if (!tst_rows_of((lathe_op)op)) continue;
    skip_log sk = {{0}, {0}};
    for (int d = 0; d < tst_n_all_dtypes; d++) {
      lathe_dtype dt = tst_all_dtypes[d];
      run_result first = R_OK;
      for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        lathe_shape ls = tst_shape(dt, (int)pairs[k][0][0], &pairs[k][0][1]);
        lathe_shape rs = tst_shape(dt, (int)pairs[k][1][0], &pairs[k][1][1]);
        run_result r = binary_case((lathe_op)op, dt, &ls, &rs, (unsigned)(op * 13 + d * 5 + k));
        if (k == 0) first = r;
        else CHECK(r == first, "%s %s: inconsistent across shapes", lathe_op_name(op), lathe_dtype_name(dt));
        if (r != R_OK) break;
      }
      bool accepts = lathe_op_accepts_dtype((lathe_op)op, dt);
      CHECK(accepts == (first != R_REJECTED), "%s on %s: builder %s, its domain says %s", lathe_op_name(op),
            lathe_dtype_name(dt), first == R_REJECTED ? "rejects" : "accepts", accepts ? "accept" : "reject");
      if (first == R_REJECTED) skip_note(sk.rejected, dt);
      if (first == R_UNSUPPORTED) {
        rval tmp, z = {0, 0};
        CHECK(!binary_ref((lathe_op)op, dt, z, z, &tmp), "%s on %s is unsupported but defined", lathe_op_name(op),
              lathe_dtype_name(dt));
        skip_note(sk.unsupported, dt);
      }
    }
    skip_flush(lathe_op_name(op), &sk);
  }
}

TEST(elementwise_binary_large) {
  const lathe_op ops[] = {LATHE_OP_ADD, LATHE_OP_MAX, LATHE_OP_LESS_THAN, LATHE_OP_DIV};
  const lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_INT64, LATHE_DTYPE_UINT8};
  for (size_t o = 0; o < 4; o++)
    for (size_t d = 0; d < 4; d++) {
      lathe_shape full = TST_SHAPE(dts[d], 301, 257), col = TST_SHAPE(dts[d], 301, 1), row = TST_SHAPE(dts[d], 1, 257);
      lathe_shape s0 = tst_shape0(dts[d]);
      CHECK(binary_case(ops[o], dts[d], &full, &full, 1) == R_OK, "large binary");
      CHECK(binary_case(ops[o], dts[d], &col, &row, 2) == R_OK, "large broadcast");
      CHECK(binary_case(ops[o], dts[d], &s0, &full, 3) == R_OK, "large scalar lhs");
      CHECK(binary_case(ops[o], dts[d], &full, &col, 4) == R_OK, "large column");
    }
}

/* Same-node operands and in-place reuse: x*x, and a chain whose intermediate dies. */
static lathe_status_t build_chain(void *ctx, lathe_function_t fn, const lathe_value_t *p, lathe_value_t *out) {
  (void)ctx;
  lathe_value_t sq, e;
  lathe_status_t st = lathe_mul(fn, p[0], p[0], &sq);
  if (!st) st = lathe_neg(fn, sq, &e);
  if (!st) st = lathe_less_than(fn, e, p[1], &sq); /* Bool[4,4] output over a broadcast operand */
  if (!st) *out = sq;
  return st;
}

TEST(elementwise_chain_in_place) {
  lathe_shape s[2] = {TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, 4), TST_SHAPE(LATHE_DTYPE_FLOAT32, 4, 1)};
  float a[4] = {1, -2, 3, 0.5f}, b[4] = {-1, -5, -9, 0};
  const void *data[2] = {a, b};
  void *out = NULL;
  lathe_shape os;
  CHECK(run_op("chain", 2, s, data, build_chain, NULL, &out, &os) == R_OK, "chain runs");
  if (!out) return;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++)
      CHECK(((uint8_t *)out)[i * 4 + j] == (-(a[j] * a[j]) < b[i]), "chain element %d,%d: got %d", i, j,
            ((uint8_t *)out)[i * 4 + j]);
  tst_free_output(out);
}

/* ================================ Where and Clamp ================================ */

static lathe_status_t build_where(void *ctx, lathe_function_t fn, const lathe_value_t *p, lathe_value_t *out) {
  (void)ctx;
  return lathe_where(fn, p[0], p[1], p[2], out);
}
static lathe_status_t build_clamp(void *ctx, lathe_function_t fn, const lathe_value_t *p, lathe_value_t *out) {
  (void)ctx;
  return lathe_clamp(fn, p[0], p[1], p[2], out);
}

static bool same_value(const void *a, lathe_dtype da, int64_t i, const void *b, int64_t j) {
  if (is_intlike(da)) return tst_get_int(a, da, i) == tst_get_int(b, da, j);
  double x = tst_get(a, da, i), y = tst_get(b, da, j), xi = tst_get_imag(a, da, i), yi = tst_get_imag(b, da, j);
  return (x == y || (isnan(x) && isnan(y))) && (xi == yi || (isnan(xi) && isnan(yi)));
}

TEST(elementwise_where) {
  const int ranks[][3] = {{1, 1, 1}, {0, 1, 1}, {1, 0, 1}, {1, 1, 0}, {0, 0, 0}, {1, 0, 0}, {0, 1, 0}};
  for (int d = 0; d < tst_n_all_dtypes; d++) {
    lathe_dtype dt = tst_all_dtypes[d];
    for (size_t k = 0; k < sizeof ranks / sizeof ranks[0]; k++) {
      lathe_shape s[3];
      s[0] = ranks[k][0] ? TST_SHAPE(LATHE_DTYPE_BOOL, 3, 5) : tst_shape0(LATHE_DTYPE_BOOL);
      for (int j = 1; j < 3; j++) s[j] = ranks[k][j] ? TST_SHAPE(dt, 3, 5) : tst_shape0(dt);
      void *buf[3];
      for (int j = 0; j < 3; j++) {
        buf[j] = tst_alloc_for(&s[j]);
        fill_input(buf[j], s[j].dtype, lathe_shape_size(&s[j]), (unsigned)(d * 3 + j + k));
      }
      void *out = NULL;
      lathe_shape os;
      char label[64];
      snprintf(label, sizeof label, "Where %s case %zu", lathe_dtype_name(dt), k);
      run_result r = run_op(label, 3, s, (const void *const *)buf, build_where, NULL, &out, &os);
      CHECK(r == R_OK, "%s runs", label);
      if (r == R_OK) {
        bool any = ranks[k][0] || ranks[k][1] || ranks[k][2];
        CHECK(os.dtype == dt && os.rank == (any ? 2 : 0), "%s: result shape", label);
        int64_t n = lathe_shape_size(&os);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
          bool c = tst_get_int(buf[0], LATHE_DTYPE_BOOL, ranks[k][0] ? i : 0) != 0;
          int j = c ? 1 : 2;
          if (!same_value(out, dt, i, buf[j], ranks[k][j] ? i : 0)) bad++;
        }
        CHECK(bad == 0, "%s: %d mismatches", label, bad);
      }
      tst_free_output(out);
      for (int j = 0; j < 3; j++) free(buf[j]);
    }
  }
}

/* Where's operands broadcast together (compute v0.1.11+): scalars and size-1 axes, in each
 * operand and in several at once, ranks 0 to 4, size-0 axes; the result's dims are the largest
 * per axis. A shape is {rank, dims}; rank -1 ends the list. */
typedef struct {
  int rank;
  int64_t dims[4];
} bshape;

static const bshape where_bcast_cases[][3] = {
    {{0, {0}}, {0, {0}}, {0, {0}}},                         /* rank 0 */
    {{1, {1}}, {1, {7}}, {1, {7}}},                         /* condition [1] */
    {{1, {7}}, {1, {1}}, {1, {7}}},                         /* on_true [1] */
    {{1, {7}}, {1, {7}}, {1, {1}}},                         /* on_false [1] */
    {{1, {1}}, {1, {1}}, {1, {7}}},                         /* two of them [1] */
    {{1, {0}}, {1, {1}}, {0, {0}}},                         /* size 0 against 1 and a scalar */
    {{0, {0}}, {2, {2, 3}}, {2, {1, 3}}},                   /* on_false [1,3] */
    {{2, {2, 1}}, {2, {1, 3}}, {0, {0}}},                   /* none has the result's dims */
    {{2, {2, 3}}, {2, {2, 1}}, {2, {1, 3}}},                /* both values broadcast */
    {{2, {1, 1}}, {2, {1, 1}}, {2, {1, 1}}},                /* a single element */
    {{2, {1, 5}}, {0, {0}}, {2, {4, 1}}},                   /* on_true a scalar */
    {{2, {4, 1}}, {2, {1, 5}}, {0, {0}}},                   /* on_false a scalar */
    {{0, {0}}, {3, {3, 1, 5}}, {3, {1, 4, 1}}},             /* condition a scalar */
    {{3, {1, 4, 1}}, {3, {3, 1, 5}}, {3, {3, 4, 5}}},       /* rank 3 */
    {{3, {3, 4, 5}}, {3, {3, 1, 5}}, {3, {1, 4, 1}}},
    {{4, {1, 8, 1, 8}}, {4, {2, 8, 4, 8}}, {4, {2, 8, 4, 8}}}, /* a masked attention's mask */
    {{4, {1, 8, 1, 8}}, {4, {2, 8, 4, 8}}, {0, {0}}},          /* ... against a scalar fill */
    {{4, {2, 1, 4, 5}}, {4, {2, 3, 1, 5}}, {4, {2, 3, 4, 1}}}, /* 1s on a different axis each */
    {{4, {1, 3, 1, 5}}, {4, {2, 1, 4, 1}}, {4, {1, 1, 1, 1}}}, /* all three broadcast */
    {{4, {2, 1, 4, 1}}, {4, {1, 3, 1, 5}}, {4, {2, 3, 4, 5}}},
    {{3, {64, 1, 33}}, {3, {1, 40, 33}}, {3, {64, 40, 1}}},    /* large enough to split over threads */
};

static lathe_shape bshape_of(const bshape *b, lathe_dtype dt) {
  return b->rank ? tst_shape(dt, b->rank, b->dims) : tst_shape0(dt);
}

/* The flat index into an operand of shape s of the result's element at coordinates c. */
static int64_t bcast_index(const lathe_shape *s, const int64_t *c) {
  int64_t idx = 0;
  for (int a = 0; a < s->rank; a++) idx = idx * s->dims[a] + (s->dims[a] == 1 ? 0 : c[a]);
  return idx;
}

TEST(elementwise_where_broadcast) {
  const int n_cases = (int)(sizeof where_bcast_cases / sizeof where_bcast_cases[0]);
  for (int d = 0; d < tst_n_all_dtypes; d++) {
    lathe_dtype dt = tst_all_dtypes[d];
    for (int k = 0; k < n_cases; k++) {
      /* every dtype on the small cases; the large one for a dtype of each width */
      if (k == n_cases - 1 && dt != LATHE_DTYPE_BOOL && dt != LATHE_DTYPE_INT16 && dt != LATHE_DTYPE_FLOAT32 &&
          dt != LATHE_DTYPE_FLOAT64 && dt != LATHE_DTYPE_COMPLEX128 && dt != LATHE_DTYPE_INT4)
        continue;
      lathe_shape s[3];
      for (int j = 0; j < 3; j++) s[j] = bshape_of(&where_bcast_cases[k][j], j ? dt : LATHE_DTYPE_BOOL);
      /* the expected result: the largest size per axis */
      int rank = 0;
      int64_t dims[4] = {1, 1, 1, 1};
      for (int j = 0; j < 3; j++)
        if (s[j].rank) {
          rank = s[j].rank;
          for (int a = 0; a < rank; a++)
            if (s[j].dims[a] != 1) dims[a] = s[j].dims[a];
        }
      void *buf[3];
      for (int j = 0; j < 3; j++) {
        buf[j] = tst_alloc_for(&s[j]);
        fill_input(buf[j], s[j].dtype, lathe_shape_size(&s[j]), (unsigned)(d * 7 + j * 3 + k));
      }
      void *out = NULL;
      lathe_shape os;
      char label[64];
      snprintf(label, sizeof label, "Where broadcast %s case %d", lathe_dtype_name(dt), k);
      run_result r = run_op(label, 3, s, (const void *const *)buf, build_where, NULL, &out, &os);
      CHECK(r == R_OK, "%s runs", label);
      if (r == R_OK) {
        bool shape_ok = os.dtype == dt && os.rank == rank;
        for (int a = 0; a < rank && shape_ok; a++) shape_ok = os.dims[a] == dims[a];
        CHECK(shape_ok, "%s: result shape", label);
        int64_t n = shape_ok ? lathe_shape_size(&os) : 0;
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
          int64_t c[4];
          tst_unravel(i, rank, dims, c);
          bool cv = tst_get_int(buf[0], LATHE_DTYPE_BOOL, bcast_index(&s[0], c)) != 0;
          int j = cv ? 1 : 2;
          if (!same_value(out, dt, i, buf[j], bcast_index(&s[j], c)) && bad++ < 3)
            printf("  %s: element %lld differs\n", label, (long long)i);
        }
        CHECK(bad == 0, "%s: %d mismatches", label, bad);
      }
      tst_free_output(out);
      for (int j = 0; j < 3; j++) free(buf[j]);
    }
  }
}

/* A masked attention's softmax as GoMLX v0.28.13+ writes it: a Bool[1,h,1,k] mask against
 * Float32[b,h,q,k] scores and a scalar fill, then a softmax over the last axis -- the mask read
 * with stride 0 inside a fusion region (a ROWS region on lathe:cuda). */
TEST(elementwise_where_masked_softmax) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("where_masked_softmax", &fn);
  if (!b) return;
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 8, 4, 8), ms = TST_SHAPE(LATHE_DTYPE_BOOL, 1, 8, 1, 8);
  lathe_shape ks = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 8, 4, 1), s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  lathe_value_t x = tst_param(fn, "x", xs), mask = tst_param(fn, "mask", ms), half, fill, sc, w, mx, e, sum, y = NULL;
  float hv = 0.5f, fv = -1e9f;
  CHECK_OK(lathe_constant(fn, &s0, &hv, sizeof hv, &half));
  CHECK_OK(lathe_constant(fn, &s0, &fv, sizeof fv, &fill));
  CHECK_OK(lathe_mul(fn, x, half, &sc));
  CHECK_OK(lathe_where(fn, mask, sc, fill, &w));
  mx = tst_reduce_keep(fn, LATHE_OP_REDUCE_MAX, w, 3, &ks);
  CHECK_OK(lathe_sub(fn, w, mx, &e));
  CHECK_OK(lathe_exp(fn, e, &e));
  sum = tst_reduce_keep(fn, LATHE_OP_REDUCE_SUM, e, 3, &ks);
  CHECK_OK(lathe_div(fn, e, sum, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  float xd[2 * 8 * 4 * 8], want[2 * 8 * 4 * 8];
  uint8_t md[8 * 8];
  tst_fill(xd, LATHE_DTYPE_FLOAT32, 512, 3);
  for (int i = 0; i < 64; i++) md[i] = (uint8_t)((i * 5 + i / 8) % 3 != 0 || i % 8 == 0); /* >= 1 kept per row */
  for (int r = 0; r < 64; r++) { /* row (b, h, q): h = (r / 4) % 8 */
    int h = (r / 4) % 8;
    double v[8], m = -INFINITY, t = 0;
    for (int k = 0; k < 8; k++) v[k] = md[h * 8 + k] ? (double)(xd[r * 8 + k] * 0.5f) : -1e9, m = fmax(m, v[k]);
    for (int k = 0; k < 8; k++) t += exp(v[k] - m);
    for (int k = 0; k < 8; k++) want[r * 8 + k] = (float)(exp(v[k] - m) / t);
  }
  const void *ins[2] = {xd, md};
  tst_run_expect("Where masked softmax", b, ins, 2, want, LATHE_DTYPE_FLOAT32, 512, 1e-5);
  lathe_builder_free(b);
}

TEST(elementwise_clamp) {
  const int ranks[][3] = {{0, 1, 0}, {1, 1, 1}, {0, 1, 1}, {1, 1, 0}, {0, 0, 0}};
  for (int d = 0; d < tst_n_all_dtypes; d++) {
    lathe_dtype dt = tst_all_dtypes[d];
    bool accepts = lathe_op_accepts_dtype(LATHE_OP_CLAMP, dt);
    for (size_t k = 0; k < sizeof ranks / sizeof ranks[0]; k++) {
      lathe_shape s[3];
      for (int j = 0; j < 3; j++) s[j] = ranks[k][j] ? TST_SHAPE(dt, 3, 5) : tst_shape0(dt);
      void *buf[3];
      for (int j = 0; j < 3; j++) {
        buf[j] = tst_alloc_for(&s[j]);
        fill_input(buf[j], dt, lathe_shape_size(&s[j]), (unsigned)(d * 5 + j * 11 + k));
      }
      void *out = NULL;
      lathe_shape os;
      char label[64];
      snprintf(label, sizeof label, "Clamp %s case %zu", lathe_dtype_name(dt), k);
      run_result r = run_op(label, 3, s, (const void *const *)buf, build_clamp, NULL, &out, &os);
      CHECK((r == R_REJECTED) == !accepts && r != R_FAILED, "%s: result %d", label, (int)r);
      if (r == R_REJECTED && k == 0) {
        tst_skipf("elementwise Clamp", "rejected for %s", lathe_dtype_name(dt));
      }
      if (r == R_OK) {
        int64_t n = lathe_shape_size(&os);
        rval *want = calloc((size_t)(n ? n : 1), sizeof *want);
        for (int64_t i = 0; i < n; i++) {
          rval lo = input_val(buf[0], dt, ranks[k][0] ? i : 0), x = input_val(buf[1], dt, ranks[k][1] ? i : 0);
          rval hi = input_val(buf[2], dt, ranks[k][2] ? i : 0), m;
          binary_ref(LATHE_OP_MAX, dt, lo, x, &m);
          binary_ref(LATHE_OP_MIN, dt, m, hi, &want[i]);
        }
        expect_vals(label, out, want, dt, n);
        free(want);
      }
      tst_free_output(out);
      for (int j = 0; j < 3; j++) free(buf[j]);
    }
  }
}

/* ================================ ConvertDType and Bitcast ================================ */

static lathe_status_t build_convert(void *ctx, lathe_function_t fn, const lathe_value_t *p, lathe_value_t *out) {
  return lathe_convert_dtype(fn, p[0], *(lathe_dtype *)ctx, out);
}

/* Reference of converting element i of src (dtype from) to dtype to. */
static rval convert_ref(const void *src, lathe_dtype from, int64_t i, lathe_dtype to) {
  rval r = {0, 0};
  bool from_int = is_intlike(from);
  int64_t iv = from_int ? tst_get_int(src, from, i) : 0;
  double re = from_int ? 0 : tst_get(src, from, i), im = tst_get_imag(src, from, i);
  if (from_int && lathe_dtype_class_of(from) == LATHE_CLASS_UINT) re = (double)(uint64_t)(iv & (int64_t)mask_of(from));
  else if (from_int) re = (double)iv;
  if (to == LATHE_DTYPE_BOOL) {
    r.i = from_int ? iv != 0 : (re != 0 || im != 0);
  } else if (lathe_dtype_is_int(to)) {
    if (from_int) {
      r.i = iv;
    } else {
      int bits = bits_of(to);
      double lo = is_sint(to) ? -ldexp(1, bits - 1) : 0, hi = is_sint(to) ? ldexp(1, bits - 1) : ldexp(1, bits);
      if (isnan(re)) r.i = 0;
      else if (re <= lo) r.i = is_sint(to) ? (bits == 64 ? INT64_MIN : (int64_t)lo) : 0;
      else if (re >= hi) r.i = is_sint(to) ? (int64_t)((UINT64_C(1) << (bits - 1)) - 1) : (int64_t)(bits == 64 ? ~UINT64_C(0) : (UINT64_C(1) << bits) - 1);
      else r.i = is_sint(to) ? (int64_t)trunc(re) : (int64_t)(uint64_t)trunc(re);
    }
  } else {
    r.z = mkc(re, is_cplx(to) ? im : 0);
  }
  return r;
}

TEST(elementwise_convert_all_pairs) {
  const double vals[] = {0, 1, -1, 2.5, -2.5, 7.9, -8.5, 100, -100, 300, 127, 128, -129, 65504, 1e10, -1e10,
                         3e38, NAN, INFINITY, -INFINITY};
  const int nv = (int)(sizeof vals / sizeof vals[0]);
  for (int f = 0; f < tst_n_all_dtypes; f++)
    for (int t = 0; t < tst_n_all_dtypes; t++) {
      lathe_dtype from = tst_all_dtypes[f], to = tst_all_dtypes[t];
      lathe_shape s = TST_SHAPE(from, nv);
      void *src = tst_alloc_for(&s), *out = NULL;
      for (int i = 0; i < nv; i++) {
        /* past int64's range: what x86's conversion gives (INT64_MIN), without C's undefined cast */
        int64_t iv = fabs(vals[i]) < 0x1p63 ? (int64_t)vals[i] : INT64_MIN;
        if (is_intlike(from)) tst_set_int(src, from, i, isfinite(vals[i]) ? (uint64_t)iv : (uint64_t)i);
        else tst_set_complex(src, from, i, vals[i], is_cplx(from) ? -vals[nv - 1 - i] / 2 : 0);
      }
      char label[80];
      snprintf(label, sizeof label, "ConvertDType %s -> %s", lathe_dtype_name(from), lathe_dtype_name(to));
      lathe_shape os;
      const void *data[1] = {src};
      run_result r = run_op(label, 1, &s, data, build_convert, &to, &out, &os);
      CHECK(r == R_OK, "%s runs", label);
      if (r == R_OK) {
        CHECK(os.dtype == to && os.rank == 1 && os.dims[0] == nv, "%s: result shape", label);
        rval want[32];
        for (int i = 0; i < nv; i++) want[i] = convert_ref(src, from, i, to);
        expect_vals(label, out, want, to, nv);
      }
      tst_free_output(out);
      free(src);
    }
}

static lathe_status_t build_bitcast(void *ctx, lathe_function_t fn, const lathe_value_t *p, lathe_value_t *out) {
  return lathe_bitcast(fn, p[0], *(lathe_dtype *)ctx, out);
}

/* Bitcasts bytes of shape s to dtype to, expecting result dims want (rank wr) and the same bytes. */
static void bitcast_case(lathe_shape s, const void *bytes, lathe_dtype to, int wr, const int64_t *wdims) {
  char label[96], buf[LATHE_SHAPE_STR_MAX];
  snprintf(label, sizeof label, "Bitcast %s -> %s", lathe_shape_str(&s, buf, sizeof buf), lathe_dtype_name(to));
  void *out = NULL;
  lathe_shape os;
  const void *data[1] = {bytes};
  CHECK(run_op(label, 1, &s, data, build_bitcast, &to, &out, &os) == R_OK, "%s runs", label);
  if (!out) return;
  lathe_shape want = tst_shape(to, wr, wdims);
  CHECK(lathe_shape_equal(&os, &want), "%s: result shape %s", label, lathe_shape_str(&os, buf, sizeof buf));
  CHECK(memcmp(out, bytes, (size_t)lathe_shape_byte_size(&s)) == 0, "%s: bytes differ", label);
  tst_free_output(out);
}

TEST(elementwise_bitcast) {
  uint32_t w = 0xdeadbeef;
  bitcast_case(TST_SHAPE(LATHE_DTYPE_UINT32, 1), &w, LATHE_DTYPE_UINT16, 2, (int64_t[]){1, 2});
  uint16_t h[2] = {0xbeef, 0xdead};
  bitcast_case(TST_SHAPE(LATHE_DTYPE_UINT16, 1, 2), h, LATHE_DTYPE_UINT32, 1, (int64_t[]){1});
  float f[3] = {1.5f, -0.0f, NAN};
  bitcast_case(TST_SHAPE(LATHE_DTYPE_FLOAT32, 3), f, LATHE_DTYPE_INT32, 1, (int64_t[]){3});
  uint8_t b2[2] = {0x21, 0x43};
  bitcast_case(TST_SHAPE(LATHE_DTYPE_UINT8, 2), b2, LATHE_DTYPE_UINT4, 2, (int64_t[]){2, 2});
  bitcast_case(TST_SHAPE(LATHE_DTYPE_UINT8, 2), b2, LATHE_DTYPE_INT4, 2, (int64_t[]){2, 2});
  bitcast_case(TST_SHAPE(LATHE_DTYPE_INT4, 2, 2), b2, LATHE_DTYPE_INT8, 1, (int64_t[]){2});
  uint8_t a5 = 0xA5;
  bitcast_case(TST_SHAPE(LATHE_DTYPE_UINT8, 1), &a5, LATHE_DTYPE_UINT1, 2, (int64_t[]){1, 8});
  bitcast_case(TST_SHAPE(LATHE_DTYPE_UINT8, 1), &a5, LATHE_DTYPE_UINT2, 2, (int64_t[]){1, 4});
  bitcast_case(TST_SHAPE(LATHE_DTYPE_UINT1, 8), &a5, LATHE_DTYPE_UINT8, 0, NULL);
  bitcast_case(TST_SHAPE(LATHE_DTYPE_INT4, 3), b2, LATHE_DTYPE_UINT4, 1, (int64_t[]){3});
  uint16_t hv[2] = {0x3c00, 0x7e00};
  bitcast_case(TST_SHAPE(LATHE_DTYPE_FLOAT16, 2), hv, LATHE_DTYPE_BFLOAT16, 1, (int64_t[]){2});
  double c[4] = {1, 2, 3, 4};
  bitcast_case(TST_SHAPE(LATHE_DTYPE_COMPLEX128, 2), c, LATHE_DTYPE_FLOAT64, 2, (int64_t[]){2, 2});
  bitcast_case(TST_SHAPE(LATHE_DTYPE_COMPLEX64, 2), c, LATHE_DTYPE_FLOAT64, 1, (int64_t[]){2});
  /* element values after the packed bitcast: little-endian nibbles and bits */
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_UINT8, 2);
  lathe_dtype to = LATHE_DTYPE_UINT4;
  void *out = NULL;
  lathe_shape os;
  const void *data[1] = {b2};
  if (run_op("Bitcast nibbles", 1, &s, data, build_bitcast, &to, &out, &os) == R_OK) {
    for (int i = 0; i < 4; i++) CHECK(tst_get(out, LATHE_DTYPE_UINT4, i) == i + 1, "nibble %d", i);
    tst_free_output(out);
  }
}

/* Sub-byte integer arithmetic: computed widened, wrapped back to 4 bits. */
TEST(elementwise_subbyte_ops) {
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_INT4, 8);
  uint8_t a[4] = {0x98, 0xf7, 0x21, 0x00}; /* -8, -7, 7, -1, 1, 2, 0, 0 */
  uint8_t b[4] = {0x11, 0x11, 0x11, 0x11}; /* all 1 */
  const void *data[2] = {a, b};
  lathe_shape ss[2] = {s, s};
  void *out = NULL;
  lathe_shape os;
  lathe_op op = LATHE_OP_SHIFT_RIGHT_LOGICAL;
  if (run_op("Int4 ShiftRightLogical", 2, ss, data, build_binary, &op, &out, &os) == R_OK) {
    const int want[8] = {4, 4, 3, 7, 0, 1, 0, 0};
    for (int i = 0; i < 8; i++) CHECK(tst_get(out, LATHE_DTYPE_INT4, i) == want[i], "Int4 srl %d: got %g", i, tst_get(out, LATHE_DTYPE_INT4, i));
    tst_free_output(out);
  }
  op = LATHE_OP_CLZ;
  if (run_op("Int4 Clz", 1, &s, data, build_unary, &op, &out, &os) == R_OK) {
    const int want[8] = {0, 0, 1, 0, 3, 2, 4, 4};
    for (int i = 0; i < 8; i++) CHECK(tst_get(out, LATHE_DTYPE_INT4, i) == want[i], "Int4 clz %d", i);
    tst_free_output(out);
  }
}
