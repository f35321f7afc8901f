/* diff.c -- a differential test: random graphs built once with the C API, run on a backend
 * configuration and on lathe:cpu (lathe_builder_compile_for), outputs compared: integers, Bool
 * and exact floats bit for bit, other floats within a per-dtype tolerance scaled by the output's
 * magnitude, NaN and infinity positions equal.
 *
 *   build/test_diff CONFIG [-n N] [-seed S] [-v]
 *
 * A graph is a random walk over a pool of values: parameters of every dtype the backend claims
 * (lathe_backend_supports_dtype), ranks 0-3 with empty and size-1 axes; elementwise ops (with
 * broadcasting), conversions, Where, reductions, ArgMinMax, layout ops that make transposed and
 * strided views (Transpose, Slice with strides, Reverse, Pad with interior padding, Reshape,
 * BroadcastInDim, Concatenate), DotGeneral, Iota, FusedSoftmax, FusedGelu, and control flow
 * (While with a counter, If on a data-dependent predicate, Call of a function); an op is used
 * only where lathe_backend_supports_op says so. A value remembers whether it is exact (the same
 * bits on every correct backend): ops with jumps (Floor, comparisons, ArgMinMax, float to
 * integer conversion, Div...) take only exact operands, so that a rounding difference allowed by
 * the tolerance never becomes a different integer. A graph the backend cannot compile
 * (UNIMPLEMENTED) is a skip. Ends with "N passed, N failed, N skipped". */
#include <inttypes.h>

#include "graph/graph.h"
#include "testing.h"

static uint64_t rng;
static uint64_t rnd(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}
static int rin(int lo, int hi) { return lo + (int)(rnd() % (uint64_t)(hi - lo + 1)); }

typedef struct val {
  lathe_value_t v;
  lathe_shape s;
  bool exact;
  double tol; /* relative error it may carry: its dtype's, or a narrower ancestor's (0: exact) */
} val;

enum { POOL = 40, MAXP = 12 };
typedef struct walk {
  lathe_backend_t be;
  lathe_builder_t b;
  lathe_function_t fn;
  val pool[POOL];
  int n;
  lathe_shape ps[MAXP]; /* parameters of main */
  int np;
  char ops[2400];       /* the ops used and their results, for the report */
  double cur_tol;       /* the largest tol of the current op's operands */
  lathe_dtype dts[32];  /* dtypes the backend claims */
  int ndt;
} walk;

static bool is_float(lathe_dtype dt) { return lathe_dtype_is_float(dt); }
static bool is_cplx(lathe_dtype dt) { return lathe_dtype_is_complex(dt); }
static bool is_bool(lathe_dtype dt) { return dt == LATHE_DTYPE_BOOL; }

static void note(walk *w, const char *op) {
  size_t l = strlen(w->ops);
  if (l + strlen(op) + 2 < sizeof w->ops) snprintf(w->ops + l, sizeof w->ops - l, "%s%s", l ? " " : "", op);
}

static bool ok(lathe_status_t st) {
  lathe_status_free(st);
  return st == NULL;
}

static double tol_of(lathe_dtype dt);

static bool add(walk *w, lathe_function_t fn, lathe_value_t v, bool exact, const char *op) {
  if (fn != w->fn) return false;
  val x = {v, {0}, exact, 0};
  if (!ok(lathe_value_shape(v, &x.s))) return false;
  if (!exact) x.tol = fmax(w->cur_tol, tol_of(x.s.dtype));
  if (w->n < POOL) w->pool[w->n++] = x;
  else w->pool[rin(0, POOL - 1)] = x;
  char what[96];
  int k = snprintf(what, sizeof what, "%s:%s[", op, lathe_dtype_name(x.s.dtype));
  for (int a = 0; a < x.s.rank && k > 0 && k < (int)sizeof what - 24; a++)
    k += snprintf(what + k, sizeof what - (size_t)k, "%s%lld", a ? "," : "", (long long)x.s.dims[a]);
  if (k > 0 && k < (int)sizeof what - 2) snprintf(what + k, sizeof what - (size_t)k, "]");
  note(w, what);
  return true;
}

static lathe_shape rand_shape(lathe_dtype dt) {
  int rank = rin(0, 3);
  int64_t d[4];
  for (int i = 0; i < rank; i++) d[i] = rin(0, 9) == 0 ? 0 : rin(1, 5);
  return tst_shape(dt, rank, d);
}

static val *param(walk *w, lathe_shape s) {
  if (w->np >= MAXP) return NULL;
  char name[16];
  snprintf(name, sizeof name, "p%d", w->np);
  lathe_value_t v;
  if (!ok(lathe_parameter(w->fn, name, &s, &v))) return NULL;
  w->ps[w->np++] = s;
  add(w, w->fn, v, true, "Parameter");
  return &w->pool[w->n - 1];
}

static val *pick(walk *w) { return &w->pool[rin(0, w->n - 1)]; }

/* A pool value of dtype dt and x's dims, or a new parameter of that shape (or a scalar). */
static val partner(walk *w, const val *x, lathe_dtype dt) {
  for (int tries = 0; tries < 8; tries++) {
    val *y = pick(w);
    if (y->s.dtype == dt && y->s.rank == x->s.rank && !memcmp(y->s.dims, x->s.dims, sizeof(int64_t) * (size_t)x->s.rank))
      return w->cur_tol = fmax(w->cur_tol, y->tol), *y;
  }
  lathe_shape s = rin(0, 3) == 0 ? tst_shape0(dt) : x->s;
  s.dtype = dt;
  val *p = param(w, s);
  return p ? *p : (val){0};
}

static const lathe_op smooth_unary[] = {LATHE_OP_NEG, LATHE_OP_ABS, LATHE_OP_TANH, LATHE_OP_SIN, LATHE_OP_COS,
                                        LATHE_OP_LOGISTIC, LATHE_OP_ERF, LATHE_OP_EXP, LATHE_OP_IDENTITY};
static const lathe_op exact_unary[] = {LATHE_OP_SIGN, LATHE_OP_CEIL, LATHE_OP_FLOOR, LATHE_OP_ROUND, LATHE_OP_SQRT,
                                       LATHE_OP_RSQRT, LATHE_OP_LOG, LATHE_OP_IS_FINITE, LATHE_OP_IS_NAN,
                                       LATHE_OP_LOGICAL_NOT, LATHE_OP_BITWISE_NOT, LATHE_OP_BIT_COUNT, LATHE_OP_CLZ,
                                       LATHE_OP_REAL, LATHE_OP_IMAG, LATHE_OP_CONJ};
static const lathe_op smooth_binary[] = {LATHE_OP_ADD, LATHE_OP_SUB, LATHE_OP_MUL, LATHE_OP_MAX, LATHE_OP_MIN};
static const lathe_op exact_binary[] = {
    LATHE_OP_DIV, LATHE_OP_REM, LATHE_OP_POW, LATHE_OP_BITWISE_AND, LATHE_OP_BITWISE_OR, LATHE_OP_BITWISE_XOR,
    LATHE_OP_LOGICAL_AND, LATHE_OP_LOGICAL_OR, LATHE_OP_LOGICAL_XOR, LATHE_OP_SHIFT_LEFT,
    LATHE_OP_SHIFT_RIGHT_ARITHMETIC, LATHE_OP_SHIFT_RIGHT_LOGICAL, LATHE_OP_EQUAL, LATHE_OP_NOT_EQUAL,
    LATHE_OP_GREATER_THAN, LATHE_OP_GREATER_OR_EQUAL, LATHE_OP_LESS_THAN, LATHE_OP_LESS_OR_EQUAL,
    LATHE_OP_EQUAL_TOTAL_ORDER, LATHE_OP_LESS_THAN_TOTAL_ORDER, LATHE_OP_GREATER_OR_EQUAL_TOTAL_ORDER, LATHE_OP_COMPLEX};
#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Whether op on dtype keeps exact operands exact (integers always; floats: ops without rounding). */
static bool keeps_exact(lathe_op op, lathe_dtype dt) {
  if (!is_float(dt) && !is_cplx(dt)) return true;
  if (is_cplx(dt) && (op == LATHE_OP_ABS || op == LATHE_OP_SIGN)) return false; /* |z|, z / |z| round */
  switch (op) {
    case LATHE_OP_NEG: case LATHE_OP_ABS: case LATHE_OP_SIGN: case LATHE_OP_CEIL: case LATHE_OP_FLOOR:
    case LATHE_OP_ROUND: case LATHE_OP_IS_FINITE: case LATHE_OP_IS_NAN: case LATHE_OP_MAX: case LATHE_OP_MIN:
    case LATHE_OP_IDENTITY: case LATHE_OP_REAL: case LATHE_OP_IMAG: case LATHE_OP_CONJ: case LATHE_OP_COMPLEX:
      return true;
    default: return op >= LATHE_OP_EQUAL && op <= LATHE_OP_LESS_OR_EQUAL_TOTAL_ORDER;
  }
}

static lathe_dtype rand_dtype(walk *w) { return w->dts[rin(0, w->ndt - 1)]; }

/* One random op on the pool of main (or of fn for closures' bodies: see control()). */
static void step(walk *w);

static void unary(walk *w, val *x) {
  bool ex = x->exact && rin(0, 1);
  lathe_op op = ex ? exact_unary[rin(0, N_OF(exact_unary) - 1)] : smooth_unary[rin(0, N_OF(smooth_unary) - 1)];
  if (!lathe_backend_supports_op(w->be, op, x->s.dtype)) return;
  lathe_value_t y;
  if (ok(lathe_unary(w->fn, op, x->v, &y))) add(w, w->fn, y, x->exact && keeps_exact(op, x->s.dtype), lathe_op_name(op));
}

static void binary(walk *w, val *x) {
  bool ex = x->exact && rin(0, 1);
  lathe_op op = ex ? exact_binary[rin(0, N_OF(exact_binary) - 1)] : smooth_binary[rin(0, N_OF(smooth_binary) - 1)];
  lathe_dtype dt = x->s.dtype;
  if (!lathe_backend_supports_op(w->be, op, dt)) return;
  val y = partner(w, x, dt);
  if (!y.v || (ex && !y.exact)) return;
  lathe_value_t a = x->v, b = y.v, z;
  if (rin(0, 1)) a = y.v, b = x->v;
  if (ok(lathe_binary(w->fn, op, a, b, &z))) add(w, w->fn, z, x->exact && y.exact && keeps_exact(op, dt), lathe_op_name(op));
}

static void convert(walk *w, val *x) {
  lathe_dtype to = rand_dtype(w), from = x->s.dtype;
  bool jumps = (is_float(from) || is_cplx(from)) && !is_float(to) && !is_cplx(to);
  if (jumps && !x->exact) return;
  if (!lathe_backend_supports_op(w->be, LATHE_OP_CONVERT_DTYPE, from) || !lathe_backend_supports_op(w->be, LATHE_OP_CONVERT_DTYPE, to))
    return;
  lathe_value_t y;
  bool exact = x->exact && (!(is_float(to) || is_cplx(to)) || lathe_dtype_bits(to) >= lathe_dtype_bits(from) * (is_cplx(to) && !is_cplx(from) ? 2 : 1));
  if (ok(lathe_convert_dtype(w->fn, x->v, to, &y))) add(w, w->fn, y, exact, "ConvertDType");
}

/* A partner, or a parameter of x's shape with 1s on some axes: Where broadcasts all three. */
static val bcast_partner(walk *w, const val *x, lathe_dtype dt) {
  if (!x->s.rank || rin(0, 2)) return partner(w, x, dt);
  lathe_shape s = x->s;
  s.dtype = dt;
  for (int a = 0; a < s.rank; a++)
    if (rin(0, 1)) s.dims[a] = 1;
  val *p = param(w, s);
  return p ? *p : (val){0};
}

static void where(walk *w, val *x) {
  val c = bcast_partner(w, x, LATHE_DTYPE_BOOL);
  if (!c.v || !c.exact || !lathe_backend_supports_op(w->be, LATHE_OP_WHERE, x->s.dtype)) return;
  val y = bcast_partner(w, x, x->s.dtype);
  if (!y.v) return;
  lathe_value_t z;
  if (ok(lathe_where(w->fn, c.v, x->v, y.v, &z))) add(w, w->fn, z, x->exact && y.exact, "Where");
}

static void reduce(walk *w, val *x) {
  static const lathe_op ops[] = {LATHE_OP_REDUCE_SUM, LATHE_OP_REDUCE_PRODUCT, LATHE_OP_REDUCE_MAX, LATHE_OP_REDUCE_MIN,
                                 LATHE_OP_REDUCE_BITWISE_AND, LATHE_OP_REDUCE_BITWISE_OR, LATHE_OP_REDUCE_BITWISE_XOR,
                                 LATHE_OP_REDUCE_LOGICAL_AND, LATHE_OP_REDUCE_LOGICAL_OR, LATHE_OP_REDUCE_LOGICAL_XOR};
  lathe_op op = ops[rin(0, N_OF(ops) - 1)];
  if (!lathe_backend_supports_op(w->be, op, x->s.dtype)) return;
  int axes[4], n = 0;
  for (int a = 0; a < x->s.rank; a++)
    if (rin(0, 1)) axes[n++] = a;
  if (n == 0 && x->s.rank > 0) axes[n++] = rin(0, x->s.rank - 1);
  lathe_value_t y;
  bool exact = x->exact && (op == LATHE_OP_REDUCE_MAX || op == LATHE_OP_REDUCE_MIN || !is_float(x->s.dtype));
  if (is_cplx(x->s.dtype)) exact = false;
  if (ok(lathe_reduce(w->fn, op, x->v, axes, n, &y))) add(w, w->fn, y, exact, lathe_op_name(op));
}

static void argminmax(walk *w, val *x) {
  if (!x->exact || x->s.rank == 0 || !lathe_backend_supports_op(w->be, LATHE_OP_ARG_MIN_MAX, x->s.dtype)) return;
  lathe_value_t y;
  lathe_dtype it = rin(0, 1) ? LATHE_DTYPE_INT32 : LATHE_DTYPE_INT64;
  if (ok(lathe_arg_min_max(w->fn, x->v, rin(0, x->s.rank - 1), it, rin(0, 1), &y))) add(w, w->fn, y, true, "ArgMinMax");
}

static void layout(walk *w, val *x) {
  int r = x->s.rank;
  lathe_value_t y = NULL;
  lathe_status_t st = NULL;
  const char *name = "";
  lathe_op op = LATHE_OP_IDENTITY;
  switch (rin(0, 7)) {
    case 0: { /* transpose */
      int perm[4] = {0, 1, 2, 3};
      for (int i = r - 1; i > 0; i--) {
        int j = rin(0, i), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
      }
      name = "Transpose", op = LATHE_OP_TRANSPOSE, st = lathe_transpose(w->fn, x->v, perm, r, &y);
      break;
    }
    case 1: { /* strided slice */
      int64_t s0[4], l[4], s[4];
      for (int a = 0; a < r; a++) {
        int64_t d = x->s.dims[a];
        s0[a] = d ? rin(0, (int)d - 1) : 0, l[a] = d ? rin((int)s0[a], (int)d) : 0, s[a] = rin(1, 3);
      }
      name = "Slice", op = LATHE_OP_SLICE, st = lathe_slice(w->fn, x->v, s0, l, s, r, &y);
      break;
    }
    case 2: { /* reverse */
      int axes[4], n = 0;
      for (int a = 0; a < r; a++)
        if (rin(0, 1)) axes[n++] = a;
      name = "Reverse", op = LATHE_OP_REVERSE, st = lathe_reverse(w->fn, x->v, axes, n, &y);
      break;
    }
    case 3: { /* pad, with interior padding and cropping */
      lathe_pad_axis p[4];
      for (int a = 0; a < r; a++) p[a] = (lathe_pad_axis){rin(-1, 2), rin(-1, 2), rin(0, 1)};
      for (int a = 0; a < r; a++)
        if (x->s.dims[a] == 0) p[a].start = p[a].start < 0 ? 0 : p[a].start, p[a].end = p[a].end < 0 ? 0 : p[a].end;
      lathe_shape s0 = tst_shape0(x->s.dtype);
      void *z = tst_alloc_for(&s0);
      tst_set(z, x->s.dtype, 0, rin(0, 2));
      lathe_value_t fill;
      st = lathe_constant(w->fn, &s0, z, (size_t)lathe_shape_byte_size(&s0), &fill);
      free(z);
      if (!st) name = "Pad", op = LATHE_OP_PAD, st = lathe_pad(w->fn, x->v, fill, p, r, &y);
      break;
    }
    case 4: { /* reshape: flat, or two axes */
      int64_t n = lathe_shape_num_elements(&x->s), d[2] = {n, 1};
      int rank = rin(1, 2);
      if (rank == 2 && n > 1)
        for (int64_t f = 2; f <= n; f++)
          if (n % f == 0) { d[0] = n / f, d[1] = f; break; }
      name = "Reshape", op = LATHE_OP_RESHAPE, st = lathe_reshape(w->fn, x->v, d, rank, &y);
      break;
    }
    case 5: { /* broadcast: a new axis */
      if (r >= 3) return;
      lathe_shape s = x->s;
      int at = rin(0, r), axes[4];
      for (int a = 0, k = 0; a <= r; a++)
        if (a != at) s.dims[a] = x->s.dims[k], axes[k] = a, k++;
      s.dims[at] = rin(0, 6) ? rin(1, 3) : 0;
      s.rank = r + 1;
      name = "BroadcastInDim", op = LATHE_OP_BROADCAST_IN_DIM, st = lathe_broadcast_in_dim(w->fn, x->v, &s, axes, r, &y);
      break;
    }
    case 6: { /* concatenate with a partner */
      if (r == 0) return;
      val p = partner(w, x, x->s.dtype);
      if (!p.v || p.s.rank != r) return;
      lathe_value_t ops[3] = {x->v, p.v, x->v};
      name = "Concatenate", st = lathe_concatenate(w->fn, rin(0, r - 1), ops, rin(2, 3), &y);
      if (!st) add(w, w->fn, y, x->exact && p.exact, name);
      lathe_status_free(st);
      return;
    }
    default: { /* iota */
      lathe_shape s = rand_shape(rand_dtype(w));
      if (s.rank == 0 || is_bool(s.dtype) || !lathe_backend_supports_op(w->be, LATHE_OP_IOTA, s.dtype)) return;
      name = "Iota", st = lathe_iota(w->fn, &s, rin(0, s.rank - 1), &y);
      if (!st) add(w, w->fn, y, !is_float(s.dtype) && !is_cplx(s.dtype), name);
      lathe_status_free(st);
      return;
    }
  }
  if (!lathe_backend_supports_op(w->be, op, x->s.dtype)) {
    lathe_status_free(st);
    return;
  }
  if (!st) add(w, w->fn, y, x->exact, name);
  lathe_status_free(st);
}

static void dot(walk *w, val *x) {
  lathe_dtype dt = x->s.dtype;
  if (x->s.rank == 0 || !lathe_backend_supports_op(w->be, LATHE_OP_DOT_GENERAL, dt)) return;
  int r = x->s.rank, k = rin(0, r - 1);
  lathe_shape s = tst_shape(dt, 2, (int64_t[]){x->s.dims[k], rin(0, 6) ? rin(1, 4) : 0});
  val *p = param(w, s);
  if (!p) return;
  int lc[1] = {k}, rc[1] = {0};
  lathe_value_t y;
  if (ok(lathe_dot_general(w->fn, x->v, lc, 1, NULL, 0, p->v, rc, 1, NULL, 0, NULL, &y)))
    add(w, w->fn, y, !is_float(dt) && !is_cplx(dt), "DotGeneral");
}

static void fused(walk *w, val *x) {
  lathe_dtype dt = x->s.dtype;
  lathe_value_t y;
  if (!is_float(dt)) return;
  int which = rin(0, 2);
  if (which == 0 && x->s.rank > 0 && lathe_backend_supports_op(w->be, LATHE_OP_FUSED_SOFTMAX, dt)) {
    if (ok(lathe_fused_softmax(w->fn, x->v, rin(0, x->s.rank - 1), &y))) add(w, w->fn, y, false, "FusedSoftmax");
  } else if (which == 1 && lathe_backend_supports_op(w->be, LATHE_OP_FUSED_ACTIVATION, dt)) {
    /* every activation (SwiGLU builds where the last axis is even); the forward functions are continuous */
    if (ok(lathe_fused_activation(w->fn, x->v, (lathe_activation)rin(0, LATHE_ACTIVATION_SWIGLU), &y)))
      add(w, w->fn, y, false, "FusedActivation");
  } else if (lathe_backend_supports_op(w->be, LATHE_OP_FUSED_GELU, dt)) {
    if (ok(lathe_fused_gelu(w->fn, x->v, rin(0, 1), &y))) add(w, w->fn, y, false, "FusedGelu");
  }
}

/* f(v) in fn: a shape- and dtype-preserving op (the body of a loop, a branch, a callee). */
static lathe_value_t keep_op(lathe_function_t fn, lathe_value_t v, lathe_dtype dt, int which, bool *exact) {
  lathe_value_t y = NULL;
  lathe_status_t st;
  if (is_bool(dt)) st = lathe_unary(fn, LATHE_OP_LOGICAL_NOT, v, &y);
  else if (is_float(dt)) *exact = false, st = lathe_unary(fn, which ? LATHE_OP_TANH : LATHE_OP_SIN, v, &y);
  else if (is_cplx(dt)) *exact = false, st = lathe_binary(fn, LATHE_OP_MUL, v, v, &y);
  else st = lathe_binary(fn, which ? LATHE_OP_ADD : LATHE_OP_SUB, v, v, &y);
  return ok(st) ? y : NULL;
}

static void control(walk *w, val *x) {
  lathe_dtype dt = x->s.dtype;
  lathe_value_t outs[4];
  int n = 0;
  bool exact = x->exact;
  switch (rin(0, 2)) {
    case 0: { /* While: counter < 3, state (counter, x) */
      if (!lathe_backend_supports_op(w->be, LATHE_OP_WHILE, dt)) return;
      lathe_shape is = tst_shape0(LATHE_DTYPE_INT32);
      int32_t zero = 0, three = rin(0, 3), one = 1;
      lathe_value_t c0, state[2];
      if (!ok(lathe_constant(w->fn, &is, &zero, 4, &c0))) return;
      lathe_function_t cond, body;
      if (!ok(lathe_function_closure(w->fn, &cond)) || !ok(lathe_function_closure(w->fn, &body))) return;
      lathe_value_t ci, xi, lim, pr, cb, xb, inc, c1, x1, res[2];
      if (!ok(lathe_parameter(cond, "c", &is, &ci)) || !ok(lathe_parameter(cond, "x", &x->s, &xi)) ||
          !ok(lathe_constant(cond, &is, &three, 4, &lim)) || !ok(lathe_binary(cond, LATHE_OP_LESS_THAN, ci, lim, &pr)) ||
          !ok(lathe_function_return(cond, &pr, 1)))
        return;
      if (!ok(lathe_parameter(body, "c", &is, &cb)) || !ok(lathe_parameter(body, "x", &x->s, &xb)) ||
          !ok(lathe_constant(body, &is, &one, 4, &inc)) || !ok(lathe_binary(body, LATHE_OP_ADD, cb, inc, &c1)))
        return;
      x1 = keep_op(body, xb, dt, rin(0, 1), &exact);
      res[0] = c1, res[1] = x1;
      if (!x1 || !ok(lathe_function_return(body, res, 2))) return;
      state[0] = c0, state[1] = x->v;
      if (!ok(lathe_while(w->fn, cond, body, state, 2, outs, 4, &n)) || n != 2) return;
      add(w, w->fn, outs[1], exact, "While");
      return;
    }
    case 1: { /* If: on whether any element of an exact Bool partner is set; branches capture x */
      if (!lathe_backend_supports_op(w->be, LATHE_OP_IF, dt)) return;
      val c = partner(w, x, LATHE_DTYPE_BOOL);
      if (!c.v || !c.exact) return;
      lathe_value_t pred;
      if (!ok(lathe_reduce(w->fn, LATHE_OP_REDUCE_LOGICAL_OR, c.v, NULL, 0, &pred))) return;
      lathe_function_t t, f;
      if (!ok(lathe_function_closure(w->fn, &t)) || !ok(lathe_function_closure(w->fn, &f))) return;
      lathe_value_t yt = keep_op(t, x->v, dt, 1, &exact), yf = keep_op(f, x->v, dt, 0, &exact);
      if (!yt || !yf || !ok(lathe_function_return(t, &yt, 1)) || !ok(lathe_function_return(f, &yf, 1))) return;
      if (!ok(lathe_if(w->fn, pred, t, f, outs, 4, &n)) || n != 1) return;
      add(w, w->fn, outs[0], exact, "If");
      return;
    }
    default: { /* Call of a top-level function */
      if (!lathe_backend_supports_op(w->be, LATHE_OP_CALL, dt)) return;
      char name[24];
      snprintf(name, sizeof name, "f%d", w->n);
      lathe_function_t g;
      lathe_value_t p, y;
      if (!ok(lathe_builder_new_function(w->b, name, &g)) || !ok(lathe_parameter(g, "x", &x->s, &p))) return;
      y = keep_op(g, p, dt, rin(0, 1), &exact);
      if (!y || !ok(lathe_function_return(g, &y, 1))) return;
      if (!ok(lathe_call(w->fn, g, &x->v, 1, outs, 4, &n)) || n != 1) return;
      add(w, w->fn, outs[0], exact, "Call");
      return;
    }
  }
}

static void step(walk *w) {
  if (w->n == 0 || rin(0, 7) == 0) {
    w->cur_tol = 0;
    param(w, rand_shape(rand_dtype(w)));
    return;
  }
  val x = *pick(w);
  w->cur_tol = x.tol;
  switch (rin(0, 11)) {
    case 0: case 1: unary(w, &x); break;
    case 2: case 3: binary(w, &x); break;
    case 4: convert(w, &x); break;
    case 5: where(w, &x); break;
    case 6: reduce(w, &x); break;
    case 7: argminmax(w, &x); break;
    case 8: layout(w, &x); break;
    case 9: dot(w, &x); break;
    case 10: fused(w, &x); break;
    default: control(w, &x); break;
  }
}

/* ---- running and comparing ---- */
static double tol_of(lathe_dtype dt) {
  switch (dt) {
    case LATHE_DTYPE_FLOAT64: case LATHE_DTYPE_COMPLEX128: return 1e-9;
    case LATHE_DTYPE_FLOAT32: case LATHE_DTYPE_COMPLEX64: return 1e-4;
    case LATHE_DTYPE_FLOAT16: return 1e-2;
    default: return 5e-2; /* BFloat16: 8 bits, and backends round a chain at different points */
  }
}

/* Compares one output; returns the number of mismatching elements and prints the first. */
static int64_t compare(const lathe_shape *s, const void *got, const void *want, bool exact, double tol, int graph, int k) {
  int64_t n = lathe_shape_num_elements(s), bad = 0;
  lathe_dtype dt = s->dtype;
  bool fl = is_float(dt) || is_cplx(dt);
  double scale = 1;
  if (fl && !exact)
    for (int64_t i = 0; i < n; i++) {
      double a = fabs(tst_get(want, dt, i)), b = fabs(tst_get_imag(want, dt, i));
      if (isfinite(a) && a + 1 > scale) scale = a + 1;
      if (isfinite(b) && b + 1 > scale) scale = b + 1;
    }
  for (int64_t i = 0; i < n; i++) {
    bool good;
    if (!fl) {
      good = tst_get_int(got, dt, i) == tst_get_int(want, dt, i);
    } else {
      good = true;
      for (int part = 0; part < (is_cplx(dt) ? 2 : 1); part++) {
        double g = part ? tst_get_imag(got, dt, i) : tst_get(got, dt, i), e = part ? tst_get_imag(want, dt, i) : tst_get(want, dt, i);
        if (isnan(g) || isnan(e)) good &= isnan(g) && isnan(e);
        else if (isinf(g) || isinf(e)) good &= g == e;
        else if (exact) good &= g == e;
        else good &= fabs(g - e) <= tol * scale;
      }
    }
    if (!good && bad++ == 0)
      printf("  graph %d output %d (%s, %lld elements%s): element %lld: got %.9g%+.9gi, want %.9g%+.9gi\n", graph, k,
             lathe_dtype_name(dt), (long long)n, exact ? ", exact" : "", (long long)i, tst_get(got, dt, i),
             tst_get_imag(got, dt, i), tst_get(want, dt, i), tst_get_imag(want, dt, i));
  }
  return bad;
}

/* Runs exec on the inputs; outputs downloaded into fresh memory (caller frees). */
static lathe_status_t run(lathe_backend_t be, lathe_executable_t ex, const walk *w, void *const *in, int n_out,
                          void **out, lathe_shape *os) {
  lathe_buffer_t ib[MAXP] = {0}, ob[8] = {0};
  lathe_status_t st = NULL;
  for (int i = 0; i < w->np && !st; i++)
    st = lathe_buffer_from_host(be, 0, &w->ps[i], in[i], (size_t)lathe_shape_byte_size(&w->ps[i]), &ib[i]);
  if (!st) st = lathe_executable_execute(ex, ib, NULL, w->np, 0, ob, n_out);
  for (int k = 0; k < n_out && !st; k++) {
    st = lathe_buffer_shape(ob[k], &os[k]);
    size_t nb = st ? 0 : (size_t)lathe_shape_byte_size(&os[k]);
    out[k] = malloc(nb + 1);
    if (!st) st = lathe_buffer_to_host(ob[k], out[k], nb);
  }
  for (int i = 0; i < w->np; i++) lathe_buffer_release(ib[i]);
  for (int k = 0; k < n_out; k++) lathe_buffer_release(ob[k]);
  return st;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* lines appear as graphs finish, even into a pipe */
  const char *config = NULL;
  int n = 200, verbose = 0;
  uint64_t seed = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "-v")) verbose = 1;
    else if (argv[i][0] != '-' && !config) config = argv[i];
    else {
      fprintf(stderr, "usage: %s CONFIG [-n N] [-seed S] [-v]\n", argv[0]);
      return 2;
    }
  }
  if (!config) {
    fprintf(stderr, "usage: %s CONFIG [-n N] [-seed S] [-v]\n", argv[0]);
    return 2;
  }
  lathe_backend_t be = NULL, ref = NULL;
  lathe_status_t st = lathe_backend_new(config, &be);
  if (!st) st = lathe_backend_new("lathe:cpu", &ref);
  if (st) {
    printf("%s: %s\n0 passed, 1 failed\n", config, lathe_status_message(st));
    lathe_status_free(st);
    return 1;
  }
  int passed = 0, failed = 0, skipped = 0;
  for (int g = 0; g < n; g++) {
    walk w;
    memset(&w, 0, sizeof w);
    w.be = be;
    rng = (seed * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)g * 0xD1B54A32D192ED03ull) ^ 0x5DEECE66Dull;
    for (int i = 0; i < 4; i++) rnd();
    for (int i = 0; i < tst_n_all_dtypes; i++)
      if (lathe_backend_supports_dtype(be, tst_all_dtypes[i]) && w.ndt < 32) w.dts[w.ndt++] = tst_all_dtypes[i];
    char name[32];
    snprintf(name, sizeof name, "diff%d", g);
    if (!ok(lathe_builder_new(be, name, &w.b))) { failed++; continue; }
    w.fn = lathe_builder_main(w.b);
    int steps = rin(3, 14);
    for (int i = 0; i < steps; i++) step(&w);
    if (w.n == 0) param(&w, rand_shape(rand_dtype(&w)));
    /* the last values made, up to three, as outputs */
    int n_out = w.n < 3 ? w.n : rin(1, 3);
    lathe_value_t outs[3];
    bool ex[3];
    double tl[3];
    for (int k = 0; k < n_out; k++)
      outs[k] = w.pool[w.n - 1 - k].v, ex[k] = w.pool[w.n - 1 - k].exact, tl[k] = w.pool[w.n - 1 - k].tol;
    lathe_executable_t te = NULL, re = NULL;
    st = lathe_function_return(w.fn, outs, n_out);
    if (!st) st = lathe_builder_compile_for(w.b, ref, &re);
    if (st) { /* the reference cannot: not a difference of the backend */
      if (verbose) printf("graph %d: reference: %s [%s]\n", g, lathe_status_message(st), w.ops);
      lathe_status_free(st);
      lathe_builder_free(w.b);
      skipped++;
      continue;
    }
    st = lathe_builder_compile(w.b, &te);
    lathe_builder_free(w.b);
    if (st) {
      bool unimpl = lathe_status_code_of(st) == LATHE_STATUS_UNIMPLEMENTED;
      printf("%s graph %d (-seed %" PRIu64 "): compile on %s: %s [%s]\n", unimpl ? "SKIP" : "FAIL", g, seed, config,
             lathe_status_message(st), w.ops);
      unimpl ? skipped++ : failed++;
      lathe_status_free(st);
      lathe_executable_release(re);
      continue;
    }
    void *in[MAXP];
    for (int i = 0; i < w.np; i++) {
      in[i] = tst_alloc_for(&w.ps[i]);
      tst_fill(in[i], w.ps[i].dtype, lathe_shape_num_elements(&w.ps[i]), (unsigned)(g * 131 + i * 7 + 1));
    }
    void *got[3] = {0}, *want[3] = {0};
    lathe_shape gs[3], ws[3];
    lathe_status_t rs = run(ref, re, &w, in, n_out, want, ws);
    st = rs ? NULL : run(be, te, &w, in, n_out, got, gs);
    int64_t bad = 0;
    if (rs) {
      if (verbose) printf("graph %d: reference run: %s [%s]\n", g, lathe_status_message(rs), w.ops);
      skipped++;
    } else if (st) {
      printf("FAIL graph %d (-seed %" PRIu64 "): run on %s: %s [%s]\n", g, seed, config, lathe_status_message(st), w.ops);
      failed++;
    } else {
      for (int k = 0; k < n_out; k++) {
        if (!lathe_shape_equal(&gs[k], &ws[k])) {
          printf("  graph %d output %d: shapes differ\n", g, k);
          bad++;
          continue;
        }
        bad += compare(&ws[k], got[k], want[k], ex[k], tl[k], g, k);
      }
      if (bad) printf("FAIL graph %d (-seed %" PRIu64 "): %lld elements differ on %s [%s]\n", g, seed, (long long)bad,
                      config, w.ops);
      else if (verbose) printf("ok graph %d [%s]\n", g, w.ops);
      bad ? failed++ : passed++;
    }
    lathe_status_free(rs);
    lathe_status_free(st);
    for (int k = 0; k < 3; k++) free(got[k]), free(want[k]);
    for (int i = 0; i < w.np; i++) free(in[i]);
    lathe_executable_release(te);
    lathe_executable_release(re);
  }
  lathe_backend_release(be);
  lathe_backend_release(ref);
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}
