/* control.c -- conformance rows for Call, While, If, Sort, OptimizationBarrier and
 * SchedulingBarrier: named functions, closures that capture parent (and grand-parent) values,
 * loops, branches, and sorts on every dtype, axis and path (native comparisons and the
 * comparator closure), all against references computed here. */
#include <stdint.h>

#include "testing.h"

typedef lathe_status_t (*binop)(lathe_function_t, lathe_value_t, lathe_value_t, lathe_value_t *);

#define F32 LATHE_DTYPE_FLOAT32
#define F64 LATHE_DTYPE_FLOAT64
#define I32 LATHE_DTYPE_INT32
#define I64 LATHE_DTYPE_INT64
#define BOOL LATHE_DTYPE_BOOL

static lathe_value_t cst(lathe_function_t fn, lathe_shape s, const void *data) {
  lathe_value_t v = NULL;
  CHECK_OK(lathe_constant(fn, &s, data, (size_t)lathe_shape_byte_size(&s), &v));
  return v;
}

static lathe_value_t bin(binop f, lathe_function_t fn, lathe_value_t a, lathe_value_t b) {
  lathe_value_t v = NULL;
  CHECK_OK(f(fn, a, b, &v));
  return v;
}

static void ret(lathe_function_t fn, const lathe_value_t *v, int n) { CHECK_OK(lathe_function_return(fn, v, n)); }

static lathe_function_t closure(lathe_function_t parent) {
  lathe_function_t c = NULL;
  CHECK_OK(lathe_function_closure(parent, &c));
  return c;
}

/* Runs b on host inputs; an UNIMPLEMENTED op is a counted skip. Returns whether outputs came. */
static bool run(lathe_builder_t b, const void *const *in, int n_in, void **out, int n_out) {
  lathe_status_t st = tst_run(b, in, n_in, out, n_out, NULL);
  bool ok = st == NULL;
  if (lathe_status_code_of(st) == LATHE_STATUS_UNIMPLEMENTED) {
    tst_skipf(tst_current, "%s", lathe_status_message(st));
  } else {
    CHECK(ok, "run: %s", lathe_status_message(st));
  }
  lathe_status_free(st);
  return ok;
}

static void free_outs(void **out, int n) {
  for (int k = 0; k < n; k++) tst_free_output(out[k]);
}

/* ---- Call ---- */

/* f(x, y) = (x*y + x, y) */
static lathe_function_t make_f(lathe_builder_t b, lathe_shape s) {
  lathe_function_t f = NULL;
  CHECK_OK(lathe_builder_new_function(b, "f", &f));
  lathe_value_t x = tst_param(f, NULL, s), y = tst_param(f, NULL, s);
  ret(f, (lathe_value_t[]){bin(lathe_add, f, bin(lathe_mul, f, x, y), x), y}, 2);
  return f;
}

TEST(call_named_function) {
  lathe_builder_t b = tst_builder("call_named", NULL);
  lathe_shape s = TST_SHAPE(F32, 5);
  lathe_function_t m = lathe_builder_main(b), f = make_f(b, s);
  lathe_value_t a = tst_param(m, NULL, s), c = tst_param(m, NULL, s), r[2], q[2];
  int n = 0;
  CHECK_OK(lathe_call(m, f, (lathe_value_t[]){a, c}, 2, r, 2, &n));
  CHECK(n == 2, "Call has 2 results, got %d", n);
  CHECK_OK(lathe_call(m, f, (lathe_value_t[]){r[0], c}, 2, q, 2, &n));
  ret(m, (lathe_value_t[]){r[0], q[0], q[1]}, 3);
  float av[5] = {1, -2, 0.5f, 3, 0}, cv[5] = {2, 3, -4, 0.25f, 7}, w0[5], w1[5];
  for (int i = 0; i < 5; i++) w0[i] = av[i] * cv[i] + av[i], w1[i] = w0[i] * cv[i] + w0[i];
  void *out[3];
  if (run(b, (const void *[]){av, cv}, 2, out, 3)) {
    tst_expect_close("f(a,b)", out[0], w0, F32, 5, 1e-6);
    tst_expect_close("f(f(a,b),b)", out[1], w1, F32, 5, 1e-6);
    tst_expect_close("second result", out[2], cv, F32, 5, 0);
    free_outs(out, 3);
  }
  lathe_builder_free(b);
}

/* A closure that captures a main value and calls a top-level function. */
TEST(call_closure_capture) {
  lathe_builder_t b = tst_builder("call_closure", NULL);
  lathe_shape s = TST_SHAPE(F64, 3);
  lathe_function_t m = lathe_builder_main(b), f = make_f(b, s);
  lathe_value_t a = tst_param(m, NULL, s), c = tst_param(m, NULL, s);
  /* h: a closure of main, called from inside g (a sibling closure), captures c too */
  lathe_function_t h = closure(m);
  lathe_value_t hx = tst_param(h, NULL, s);
  ret(h, (lathe_value_t[]){bin(lathe_mul, h, hx, c)}, 1);
  lathe_function_t g = closure(m);
  lathe_value_t x = tst_param(g, NULL, s), r[2], gr[1], hr[1];
  int n = 0;
  CHECK_OK(lathe_call(g, f, (lathe_value_t[]){x, c}, 2, r, 2, &n)); /* c is captured */
  CHECK_OK(lathe_call(g, h, &x, 1, hr, 1, &n));
  ret(g, (lathe_value_t[]){bin(lathe_add, g, bin(lathe_add, g, r[0], c), hr[0])}, 1);
  CHECK_OK(lathe_call(m, g, &a, 1, gr, 1, &n));
  ret(m, gr, 1);
  double av[3] = {1, 2, -3}, cv[3] = {0.5, -1, 4}, w[3];
  for (int i = 0; i < 3; i++) w[i] = av[i] * cv[i] + av[i] + cv[i] + av[i] * cv[i];
  void *out[1];
  if (run(b, (const void *[]){av, cv}, 2, out, 1)) {
    tst_expect_close("g(a) = a*c + a + c + h(a)", out[0], w, F64, 3, 1e-12);
    free_outs(out, 1);
  }
  lathe_builder_free(b);
}

/* Call, If and both barriers pass every dtype through unchanged (no other op involved). */
TEST(control_passthrough_all_dtypes) {
  for (int di = 0; di < tst_n_all_dtypes; di++) {
    lathe_dtype dt = tst_all_dtypes[di];
    for (int64_t len = 0; len <= 7; len += 7) {
      lathe_builder_t b = tst_builder("passthrough", NULL);
      lathe_shape s = TST_SHAPE(dt, len);
      lathe_function_t m = lathe_builder_main(b), id = NULL;
      CHECK_OK(lathe_builder_new_function(b, "id", &id));
      lathe_value_t ip = tst_param(id, NULL, s);
      ret(id, (lathe_value_t[]){ip, ip}, 2);
      lathe_value_t x = tst_param(m, NULL, s), y = tst_param(m, NULL, s), p = tst_param(m, NULL, tst_shape0(BOOL));
      lathe_value_t cr[2], ir[1], ob[2], sb = NULL;
      int n = 0;
      CHECK_OK(lathe_call(m, id, &x, 1, cr, 2, &n));
      lathe_function_t t = closure(m), e = closure(m);
      ret(t, &x, 1);
      ret(e, &y, 1);
      CHECK_OK(lathe_if(m, p, t, e, ir, 1, &n));
      CHECK_OK(lathe_optimization_barrier(m, (lathe_value_t[]){x, y}, 2, ob));
      CHECK_OK(lathe_scheduling_barrier(m, y, (lathe_value_t[]){x, ob[0]}, 2, &sb));
      ret(m, (lathe_value_t[]){cr[0], cr[1], ir[0], ob[0], ob[1], sb}, 6);
      void *xv = tst_alloc_for(&s), *yv = tst_alloc_for(&s);
      tst_fill(xv, dt, len, 1);
      tst_fill(yv, dt, len, 2);
      for (int pv = 0; pv < 2; pv++) {
        uint8_t pb = (uint8_t)pv;
        void *out[6];
        if (!run(b, (const void *[]){xv, yv, &pb}, 3, out, 6)) break;
        char label[64];
        snprintf(label, sizeof label, "%s[%lld] pred=%d", lathe_dtype_name(dt), (long long)len, pv);
        tst_expect_close(label, out[0], xv, dt, len, 0);
        tst_expect_close(label, out[1], xv, dt, len, 0);
        tst_expect_close(label, out[2], pv ? xv : yv, dt, len, 0);
        tst_expect_close(label, out[3], xv, dt, len, 0);
        tst_expect_close(label, out[4], yv, dt, len, 0);
        tst_expect_close(label, out[5], yv, dt, len, 0);
        free_outs(out, 6);
      }
      free(xv);
      free(yv);
      lathe_builder_free(b);
    }
  }
}

/* ---- While ---- */

/* (i, acc) -> (i+1, acc*i) while i < n+1, n captured from main: acc = n! */
TEST(while_factorial) {
  for (int64_t nv = 0; nv <= 20; nv += 5) {
    lathe_builder_t b = tst_builder("factorial", NULL);
    lathe_function_t m = lathe_builder_main(b);
    lathe_shape s = tst_shape0(I64);
    int64_t one = 1;
    lathe_value_t n = tst_param(m, NULL, s), c1 = cst(m, s, &one);
    lathe_value_t limit = bin(lathe_add, m, n, c1); /* computed in main, captured by cond */
    lathe_function_t cond = closure(m), body = closure(m);
    lathe_value_t ci = tst_param(cond, NULL, s);
    tst_param(cond, NULL, s);
    ret(cond, (lathe_value_t[]){bin(lathe_less_than, cond, ci, limit)}, 1);
    lathe_value_t bi = tst_param(body, NULL, s), bacc = tst_param(body, NULL, s);
    ret(body, (lathe_value_t[]){bin(lathe_add, body, bi, cst(body, s, &one)), bin(lathe_mul, body, bacc, bi)}, 2);
    lathe_value_t r[2];
    int nr = 0;
    CHECK_OK(lathe_while(m, cond, body, (lathe_value_t[]){c1, c1}, 2, r, 2, &nr));
    ret(m, r, 2);
    int64_t want = 1;
    for (int64_t k = 2; k <= nv; k++) want *= k;
    void *out[2];
    if (run(b, (const void *[]){&nv}, 1, out, 2)) {
      int64_t got_i = *(int64_t *)out[0], got = *(int64_t *)out[1];
      CHECK(got == want && got_i == (nv > 0 ? nv + 1 : 1), "%lld! = %lld (i=%lld), got %lld", (long long)nv,
            (long long)want, (long long)got_i, (long long)got);
      free_outs(out, 2);
    }
    lathe_builder_free(b);
  }
}

/* (k, a, b) -> (k+1, b, a+b) while k < n: a = fib(n); plus a tensor state doubled each turn. */
TEST(while_fibonacci_and_tensor_state) {
  lathe_builder_t b = tst_builder("fib", NULL);
  lathe_function_t m = lathe_builder_main(b);
  lathe_shape si = tst_shape0(I32), sl = tst_shape0(I64), sx = TST_SHAPE(F32, 2, 3);
  lathe_value_t n = tst_param(m, NULL, si), x0 = tst_param(m, NULL, sx);
  int32_t zero = 0, onei = 1;
  int64_t z64 = 0, o64 = 1;
  lathe_function_t cond = closure(m), body = closure(m);
  lathe_value_t ck = tst_param(cond, NULL, si);
  tst_param(cond, NULL, sl), tst_param(cond, NULL, sl), tst_param(cond, NULL, sx);
  ret(cond, (lathe_value_t[]){bin(lathe_less_than, cond, ck, n)}, 1);
  lathe_value_t bk = tst_param(body, NULL, si), ba = tst_param(body, NULL, sl), bb = tst_param(body, NULL, sl), bx = tst_param(body, NULL, sx);
  ret(body,
      (lathe_value_t[]){bin(lathe_add, body, bk, cst(body, si, &onei)), bb, bin(lathe_add, body, ba, bb),
                        bin(lathe_add, body, bx, bx)},
      4);
  lathe_value_t r[4];
  int nr = 0;
  CHECK_OK(lathe_while(m, cond, body, (lathe_value_t[]){cst(m, si, &zero), cst(m, sl, &z64), cst(m, sl, &o64), x0},
                       4, r, 4, &nr));
  CHECK(nr == 4, "While has 4 results");
  ret(m, r, 4);
  float xv[6] = {1, -2, 0.5f, 0, 3, -0.25f};
  for (int32_t nv = 0; nv <= 90; nv += 30) {
    int64_t fa = 0, fb = 1;
    for (int k = 0; k < nv; k++) {
      int64_t t = fa + fb;
      fa = fb, fb = t;
    }
    float wx[6];
    for (int i = 0; i < 6; i++) wx[i] = ldexpf(xv[i], nv);
    void *out[4];
    if (!run(b, (const void *[]){&nv, xv}, 2, out, 4)) break;
    CHECK(*(int32_t *)out[0] == nv, "k = %d, got %d", nv, *(int32_t *)out[0]);
    CHECK(*(int64_t *)out[1] == fa, "fib(%d) = %lld, got %lld", nv, (long long)fa, (long long)*(int64_t *)out[1]);
    CHECK(*(int64_t *)out[2] == fb, "fib(%d) = %lld, got %lld", nv + 1, (long long)fb, (long long)*(int64_t *)out[2]);
    tst_expect_close("x * 2^n", out[3], wx, F32, 6, 0);
    free_outs(out, 4);
  }
  lathe_builder_free(b);
}

/* ---- If ---- */

TEST(if_branches_capture) {
  lathe_builder_t b = tst_builder("if", NULL);
  lathe_function_t m = lathe_builder_main(b);
  lathe_shape s = TST_SHAPE(F32, 4);
  lathe_value_t p = tst_param(m, NULL, tst_shape0(BOOL)), x = tst_param(m, NULL, s), y = tst_param(m, NULL, s);
  lathe_function_t t = closure(m), e = closure(m);
  ret(t, (lathe_value_t[]){bin(lathe_add, t, x, y), x}, 2);
  ret(e, (lathe_value_t[]){bin(lathe_mul, e, x, y), y}, 2);
  lathe_value_t r[2];
  int n = 0;
  CHECK_OK(lathe_if(m, p, t, e, r, 2, &n));
  CHECK(n == 2, "If has 2 results");
  ret(m, r, 2);
  float xv[4] = {1, 2, 3, -4}, yv[4] = {0.5f, -1, 2, 2}, sum[4], prod[4];
  for (int i = 0; i < 4; i++) sum[i] = xv[i] + yv[i], prod[i] = xv[i] * yv[i];
  for (uint8_t pv = 0; pv < 2; pv++) {
    void *out[2];
    if (!run(b, (const void *[]){&pv, xv, yv}, 3, out, 2)) break;
    tst_expect_close(pv ? "true: x+y" : "false: x*y", out[0], pv ? sum : prod, F32, 4, 1e-6);
    tst_expect_close("second", out[1], pv ? xv : yv, F32, 4, 0);
    free_outs(out, 2);
  }
  lathe_builder_free(b);
}

/* main -> While body (closure) -> If branches (closures of the body) that capture the body's
 * parameter and main's value c: three levels of capture. */
TEST(nested_closures) {
  lathe_builder_t b = tst_builder("nested", NULL);
  lathe_function_t m = lathe_builder_main(b);
  lathe_shape si = tst_shape0(I32), sx = TST_SHAPE(F32, 3);
  lathe_value_t c = tst_param(m, NULL, sx), x0 = tst_param(m, NULL, sx);
  int32_t zero = 0, one = 1, two = 2, four = 4;
  lathe_function_t cond = closure(m), body = closure(m);
  lathe_value_t ci = tst_param(cond, NULL, si);
  tst_param(cond, NULL, sx);
  ret(cond, (lathe_value_t[]){bin(lathe_less_than, cond, ci, cst(cond, si, &four))}, 1);
  lathe_value_t bi = tst_param(body, NULL, si), bx = tst_param(body, NULL, sx);
  lathe_function_t t = closure(body), e = closure(body);
  ret(t, (lathe_value_t[]){bin(lathe_add, t, bx, c)}, 1);
  ret(e, (lathe_value_t[]){bin(lathe_mul, e, bx, c)}, 1);
  lathe_value_t ir[1];
  int n = 0;
  CHECK_OK(lathe_if(body, bin(lathe_less_than, body, bi, cst(body, si, &two)), t, e, ir, 1, &n));
  ret(body, (lathe_value_t[]){bin(lathe_add, body, bi, cst(body, si, &one)), ir[0]}, 2);
  lathe_value_t r[2];
  CHECK_OK(lathe_while(m, cond, body, (lathe_value_t[]){cst(m, si, &zero), x0}, 2, r, 2, &n));
  ret(m, &r[1], 1);
  float cv[3] = {3, -1, 0.5f}, xv[3] = {1, 2, -2}, w[3];
  for (int k = 0; k < 3; k++) {
    float v = xv[k];
    for (int i = 0; i < 4; i++) v = i < 2 ? v + cv[k] : v * cv[k];
    w[k] = v;
  }
  void *out[1];
  if (run(b, (const void *[]){cv, xv}, 2, out, 1)) {
    tst_expect_close("nested", out[0], w, F32, 3, 1e-6);
    free_outs(out, 1);
  }
  lathe_builder_free(b);
}

/* ---- Sort ---- */

typedef enum {
  K_LT,      /* LessThan(lhs0, rhs0): native, ascending */
  K_GT,      /* GreaterThan(lhs0, rhs0): native, descending */
  K_LT_SWAP, /* LessThan(rhs0, lhs0): native, descending */
  K_NEG_LT,  /* LessThan(-lhs0, -rhs0): comparator path, descending */
  K_LEX,     /* lhs0 < rhs0 || (lhs0 == rhs0 && lhs1 > rhs1): comparator path */
  K_SCALED,  /* LessThan(lhs0*s, rhs0*s), s captured from main: comparator path */
  K_REAL_LT, /* LessThan(Real(lhs0), Real(rhs0)) for complex keys: comparator path */
} cmp_kind;
static const char *const kind_names[] = {"LT", "GT", "LT_SWAP", "NEG_LT", "LEX", "SCALED", "REAL_LT"};

/* The comparator closure of m; NULL with a skip when the ops it needs are refused. */
static lathe_function_t make_comparator(lathe_function_t m, cmp_kind kind, const lathe_dtype *dts, int n,
                                        lathe_value_t scale) {
  lathe_function_t c = closure(m);
  lathe_value_t p[8];
  for (int i = 0; i < 2 * n; i++) p[i] = tst_param(c, NULL, tst_shape0(dts[i / 2]));
  lathe_value_t r = NULL, t1 = NULL, t2 = NULL, t3 = NULL;
  lathe_status_t st = NULL;
  switch (kind) {
    case K_LT: st = lathe_less_than(c, p[0], p[1], &r); break;
    case K_GT: st = lathe_greater_than(c, p[0], p[1], &r); break;
    case K_LT_SWAP: st = lathe_less_than(c, p[1], p[0], &r); break;
    case K_NEG_LT:
      if (!(st = lathe_neg(c, p[0], &t1)) && !(st = lathe_neg(c, p[1], &t2))) st = lathe_less_than(c, t1, t2, &r);
      break;
    case K_SCALED:
      if (!(st = lathe_mul(c, p[0], scale, &t1)) && !(st = lathe_mul(c, p[1], scale, &t2)))
        st = lathe_less_than(c, t1, t2, &r);
      break;
    case K_REAL_LT:
      if (!(st = lathe_real(c, p[0], &t1)) && !(st = lathe_real(c, p[1], &t2))) st = lathe_less_than(c, t1, t2, &r);
      break;
    case K_LEX:
      if (!(st = lathe_less_than(c, p[0], p[1], &t1)) && !(st = lathe_equal(c, p[0], p[1], &t2)) &&
          !(st = lathe_greater_than(c, p[2], p[3], &t3)) && !(st = lathe_logical_and(c, t2, t3, &t2)))
        st = lathe_logical_or(c, t1, t2, &r);
      break;
  }
  if (st) {
    tst_skipf(tst_current, "comparator %s on %s: %s", kind_names[kind], lathe_dtype_name(dts[0]),
              lathe_status_message(st));
    lathe_status_free(st);
    return NULL;
  }
  ret(c, &r, 1);
  return c;
}

/* The reference order: whether element a goes strictly before element b. */
typedef struct ref_ctx {
  cmp_kind kind;
  const void *keys, *payload;
  lathe_dtype kdt;
  double scale;
  int64_t base, inner;
} ref_ctx;

static bool ref_less(const ref_ctx *c, int64_t a, int64_t b) {
  int64_t ia = c->base + a * c->inner, ib = c->base + b * c->inner;
  double ka = tst_get(c->keys, c->kdt, ia), kb = tst_get(c->keys, c->kdt, ib);
  switch (c->kind) {
    case K_LT:
    case K_REAL_LT: return ka < kb;
    case K_GT:
    case K_LT_SWAP:
    case K_NEG_LT: return ka > kb;
    case K_SCALED: return ka * c->scale < kb * c->scale;
    case K_LEX: return ka < kb || (ka == kb && ((const int32_t *)c->payload)[ia] > ((const int32_t *)c->payload)[ib]);
  }
  return false;
}

static void ref_merge_sort(const ref_ctx *c, int64_t *idx, int64_t *tmp, int64_t n) {
  if (n < 2) return;
  int64_t h = n / 2;
  ref_merge_sort(c, idx, tmp, h);
  ref_merge_sort(c, idx + h, tmp, n - h);
  int64_t i = 0, j = h, k = 0;
  while (i < h && j < n) tmp[k++] = ref_less(c, idx[j], idx[i]) ? idx[j++] : idx[i++];
  while (i < h) tmp[k++] = idx[i++];
  while (j < n) tmp[k++] = idx[j++];
  memcpy(idx, tmp, sizeof(int64_t) * (size_t)n);
}

static void copy_el(void *dst, int64_t di, const void *src, int64_t si, lathe_dtype dt) {
  int bits = lathe_dtype_bits(dt);
  if (bits < 8) tst_set(dst, dt, di, tst_get(src, dt, si));
  else memcpy((char *)dst + di * (bits / 8), (const char *)src + si * (bits / 8), (size_t)bits / 8);
}

/* Sorts keys of kdt (dims) along axis with an Int32 payload (its flat index) when with_payload,
 * and checks against the stable reference (payload checked when the order is fully defined). */
static void sort_case(lathe_dtype kdt, const int64_t *dims, int rank, int axis, bool with_payload, cmp_kind kind,
                      bool stable, double scale, unsigned seed) {
  lathe_shape ks = tst_shape(kdt, rank, dims), ps = tst_shape(I32, rank, dims);
  lathe_builder_t b = tst_builder("sort", NULL);
  lathe_function_t m = lathe_builder_main(b);
  lathe_value_t k = tst_param(m, NULL, ks), p = with_payload ? tst_param(m, NULL, ps) : NULL, sv = NULL;
  if (kind == K_SCALED) sv = tst_param(m, NULL, tst_shape0(kdt));
  lathe_dtype dts[2] = {kdt, I32};
  lathe_function_t c = make_comparator(m, kind, dts, with_payload ? 2 : 1, sv);
  if (!c) {
    lathe_builder_free(b);
    return;
  }
  lathe_value_t r[2];
  CHECK_OK(lathe_sort(m, c, axis, stable, (lathe_value_t[]){k, p}, with_payload ? 2 : 1, r));
  ret(m, r, with_payload ? 2 : 1);
  int64_t total = lathe_shape_num_elements(&ks);
  void *kv = tst_alloc_for(&ks), *pv = tst_alloc_for(&ps), *wk = tst_alloc_for(&ks), *wp = tst_alloc_for(&ps);
  tst_fill(kv, kdt, total, seed);
  for (int64_t i = 0; i < total; i++) ((int32_t *)pv)[i] = (int32_t)i;
  char svb[16] = {0};
  tst_set(svb, kdt, 0, scale);
  const void *ins[3] = {kv, with_payload ? pv : svb, svb};
  void *out[2];
  if (run(b, ins, with_payload ? 2 + (kind == K_SCALED) : 1 + (kind == K_SCALED), out, with_payload ? 2 : 1)) {
    int ax = axis < 0 ? axis + rank : axis;
    int64_t outer = 1, inner = 1, len = dims[ax];
    for (int d = 0; d < ax; d++) outer *= dims[d];
    for (int d = ax + 1; d < rank; d++) inner *= dims[d];
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(len + 1)), *tmp = malloc(sizeof(int64_t) * (size_t)(len + 1));
    ref_ctx rc = {.kind = kind, .keys = kv, .payload = pv, .kdt = kdt, .scale = scale, .inner = inner};
    for (int64_t r0 = 0; r0 < outer * inner; r0++) {
      rc.base = (r0 / inner) * len * inner + r0 % inner;
      for (int64_t j = 0; j < len; j++) idx[j] = j;
      ref_merge_sort(&rc, idx, tmp, len);
      for (int64_t j = 0; j < len; j++) {
        copy_el(wk, rc.base + j * inner, kv, rc.base + idx[j] * inner, kdt);
        copy_el(wp, rc.base + j * inner, pv, rc.base + idx[j] * inner, I32);
      }
    }
    char label[160];
    int o = snprintf(label, sizeof label, "Sort %s %s%s [", kind_names[kind], lathe_dtype_name(kdt), stable ? " stable" : "");
    for (int d = 0; d < rank; d++) o += snprintf(label + o, sizeof label - (size_t)o, "%s%lld", d ? "," : "", (long long)dims[d]);
    snprintf(label + o, sizeof label - (size_t)o, "] axis %d", axis);
    tst_expect_close(label, out[0], wk, kdt, total, 0);
    if (with_payload && (stable || kind == K_LEX)) tst_expect_close(label, out[1], wp, I32, total, 0);
    free(idx);
    free(tmp);
    free_outs(out, with_payload ? 2 : 1);
  }
  free(kv);
  free(pv);
  free(wk);
  free(wp);
  lathe_builder_free(b);
}

TEST(sort_1d_sizes_and_directions) {
  const int64_t sizes[] = {1, 2, 7, 16, 17, 33, 1000};
  const cmp_kind kinds[] = {K_LT, K_GT, K_LT_SWAP, K_NEG_LT};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
    for (size_t ki = 0; ki < 4; ki++)
      for (int stable = 0; stable < 2; stable++)
        sort_case(F32, &sizes[si], 1, 0, true, kinds[ki], stable, 1, (unsigned)(si * 7 + ki));
}

TEST(sort_axes) {
  const int64_t d2[] = {5, 7}, d3[] = {3, 4, 5};
  for (int axis = -1; axis < 2; axis++) {
    sort_case(F32, d2, 2, axis, true, K_LT, true, 1, 11);
    sort_case(F64, d2, 2, axis, true, K_NEG_LT, true, 1, 12);
  }
  for (int axis = 0; axis < 3; axis++) {
    sort_case(I32, d3, 3, axis, true, K_GT, true, 1, 13);
    sort_case(F32, d3, 3, axis, true, K_LEX, false, 1, 14);
  }
}

/* Every dtype, both axes of a 2-D tensor, native and comparator paths. */
TEST(sort_all_dtypes) {
  const int64_t dims[] = {4, 9};
  for (int di = 0; di < tst_n_all_dtypes; di++) {
    lathe_dtype dt = tst_all_dtypes[di];
    bool cplx = lathe_dtype_name(dt)[0] == 'C';
    for (int axis = 0; axis < 2; axis++) {
      sort_case(dt, dims, 2, axis, true, cplx ? K_REAL_LT : K_LT, true, 1, (unsigned)(20 + di));
      if (!cplx) {
        sort_case(dt, dims, 2, axis, true, K_GT, true, 1, (unsigned)(40 + di));
        sort_case(dt, dims, 2, axis, true, K_LEX, true, 1, (unsigned)(60 + di));
      }
    }
  }
}

TEST(sort_size0_size1_axes) {
  const int64_t shapes[][2] = {{0, 3}, {3, 0}, {1, 4}, {4, 1}, {1, 1}};
  for (int s = 0; s < 5; s++)
    for (int axis = 0; axis < 2; axis++) {
      sort_case(F32, shapes[s], 2, axis, true, K_LT, true, 1, 3);
      sort_case(F32, shapes[s], 2, axis, true, K_NEG_LT, true, 1, 3);
    }
  const int64_t zero[] = {0};
  sort_case(I64, zero, 1, 0, false, K_LT, false, 1, 3);
}

/* A comparator that captures a main value (its sign flips the order). */
TEST(sort_comparator_capture) {
  const int64_t dims[] = {6, 11};
  for (int axis = 0; axis < 2; axis++) {
    sort_case(F32, dims, 2, axis, true, K_SCALED, true, -1, 5);
    sort_case(F64, dims, 2, axis, true, K_SCALED, true, 2, 6);
  }
}

/* Rows sorted in parallel on the native path, checked against the reference. */
TEST(sort_large) {
  const int64_t a[] = {64, 3001}, c[] = {3001, 64}, d[] = {200001}, e[] = {8, 3001};
  sort_case(F32, a, 2, 1, true, K_LT, true, 1, 7);
  sort_case(F64, c, 2, 0, true, K_GT, true, 1, 8);
  sort_case(I32, d, 1, 0, true, K_LT, true, 1, 9);
  sort_case(F32, e, 2, 1, false, K_NEG_LT, true, 1, 10); /* the comparator path, larger */
}

/* NaN placement and signed zeros on the native path (keys + payload to see the order), on a
 * short row (merge sort) and a long one (the pattern repeated: radix sort). */
TEST(sort_nan_and_zeros) {
  const float nan = NAN;
  const float keys[8] = {nan, 1, -INFINITY, -nan, 0.0f, -0.0f, INFINITY, 2};
  /* expected payload orders of one pattern */
  const int32_t lt[8] = {2, 4, 5, 1, 7, 6, 0, 3};       /* NaNs last, 0 and -0 tie (stable) */
  const int32_t gt[8] = {0, 3, 6, 7, 1, 4, 5, 2};       /* NaNs first */
  const int32_t lt_total[8] = {3, 2, 5, 4, 1, 7, 6, 0}; /* -NaN < -Inf < -0 < 0 < ... < +NaN */
  const int32_t gt_total[8] = {0, 6, 7, 1, 4, 5, 2, 3};
  const int32_t *want[4] = {lt, gt, lt_total, gt_total};
  binop ops[4] = {lathe_less_than, lathe_greater_than, lathe_less_than_total_order, lathe_greater_than_total_order};
  const char *names[4] = {"LessThan", "GreaterThan", "LessThanTotalOrder", "GreaterThanTotalOrder"};
  lathe_dtype dts[3] = {F32, F64, LATHE_DTYPE_FLOAT16};
  for (int reps = 1; reps <= 100; reps += 99)
    for (int di = 0; di < 3; di++)
      for (int o = 0; o < 4; o++) {
        lathe_dtype dt = dts[di];
        int n = 8 * reps;
        lathe_builder_t b = tst_builder("sort_nan", NULL);
        lathe_function_t m = lathe_builder_main(b);
        lathe_value_t k = tst_param(m, NULL, TST_SHAPE(dt, n)), p = tst_param(m, NULL, TST_SHAPE(I32, n));
        lathe_function_t c = closure(m);
        lathe_value_t c0 = tst_param(c, NULL, tst_shape0(dt)), c1 = tst_param(c, NULL, tst_shape0(dt));
        tst_param(c, NULL, tst_shape0(I32)), tst_param(c, NULL, tst_shape0(I32));
        lathe_value_t r = NULL;
        lathe_status_t st = ops[o](c, c0, c1, &r);
        if (st) {
          tst_skipf(tst_current, "%s %s: %s", names[o], lathe_dtype_name(dt), lathe_status_message(st));
          lathe_status_free(st);
          lathe_builder_free(b);
          continue;
        }
        ret(c, &r, 1);
        lathe_value_t s[2];
        CHECK_OK(lathe_sort(m, c, 0, true, (lathe_value_t[]){k, p}, 2, s));
        ret(m, s, 2);
        char *kv = calloc((size_t)n, 8);
        int32_t *pv = malloc(sizeof(int32_t) * (size_t)n), *wp = malloc(sizeof(int32_t) * (size_t)n);
        for (int i = 0; i < n; i++) {
          float key = keys[i % 8];
          pv[i] = i;
          if (dt == F64) ((double *)kv)[i] = key; /* keeps the NaN sign */
          else if (dt == F32) ((float *)kv)[i] = key;
          else {
            uint32_t u;
            memcpy(&u, &key, 4);
            tst_set(kv, dt, i, key);
            if (isnan(key)) ((uint16_t *)kv)[i] = (uint16_t)((u >> 16 & 0x8000) | 0x7e00);
          }
        }
        /* rank of each pattern slot; ties (plain comparisons: 0 ~ -0, NaN ~ -NaN) share one */
        int rank[8];
        for (int j = 0; j < 8; j++) rank[want[o][j]] = j;
        if (o < 2) {
          int z = rank[4] < rank[5] ? rank[4] : rank[5], q = rank[0] < rank[3] ? rank[0] : rank[3];
          rank[4] = rank[5] = z, rank[0] = rank[3] = q;
        }
        int w = 0;
        for (int rk = 0; rk < 8; rk++)
          for (int i = 0; i < n; i++)
            if (rank[i % 8] == rk) wp[w++] = i;
        void *out[2];
        if (run(b, (const void *[]){kv, pv}, 2, out, 2)) {
          int bad = 0, badk = 0, eb = lathe_dtype_bits(dt) / 8;
          for (int i = 0; i < n; i++) {
            bad += ((int32_t *)out[1])[i] != wp[i];
            badk += memcmp((char *)out[0] + i * eb, kv + wp[i] * eb, (size_t)eb) != 0;
          }
          CHECK(bad == 0, "%s %s [%d]: payload order starts %d %d %d %d %d %d %d %d", names[o], lathe_dtype_name(dt), n,
                ((int32_t *)out[1])[0], ((int32_t *)out[1])[1], ((int32_t *)out[1])[2], ((int32_t *)out[1])[3],
                ((int32_t *)out[1])[4], ((int32_t *)out[1])[5], ((int32_t *)out[1])[6], ((int32_t *)out[1])[7]);
          CHECK(badk == 0, "%s %s [%d]: keys (bits) follow the payload", names[o], lathe_dtype_name(dt), n);
          free_outs(out, 2);
        }
        free(kv);
        free(pv);
        free(wp);
        lathe_builder_free(b);
      }
}

/* ---- barriers with computation around them ---- */
TEST(barriers_compute) {
  lathe_builder_t b = tst_builder("barriers", NULL);
  lathe_function_t m = lathe_builder_main(b);
  lathe_shape s = TST_SHAPE(F32, 3);
  lathe_value_t x = tst_param(m, NULL, s), y = tst_param(m, NULL, s), ob[2], sb = NULL;
  lathe_value_t twice = bin(lathe_add, m, x, x);
  CHECK_OK(lathe_optimization_barrier(m, (lathe_value_t[]){x, twice}, 2, ob));
  CHECK_OK(lathe_scheduling_barrier(m, y, (lathe_value_t[]){twice, ob[1]}, 2, &sb));
  ret(m, (lathe_value_t[]){bin(lathe_add, m, ob[0], ob[1]), bin(lathe_mul, m, sb, ob[0])}, 2);
  float xv[3] = {1, -2, 0.5f}, yv[3] = {3, 4, -1}, w0[3], w1[3];
  for (int i = 0; i < 3; i++) w0[i] = 3 * xv[i], w1[i] = yv[i] * xv[i];
  void *out[2];
  if (run(b, (const void *[]){xv, yv}, 2, out, 2)) {
    tst_expect_close("x + barrier(2x)", out[0], w0, F32, 3, 1e-6);
    tst_expect_close("sched(y) * x", out[1], w1, F32, 3, 1e-6);
    free_outs(out, 2);
  }
  lathe_builder_free(b);
}
