/* ops_elementwise.c -- builders of the elementwise families: unary, binary, comparisons,
 * ConvertDType, Bitcast, Where and Clamp. Dtype rules follow GoMLX's shapeinference, with
 * these documented differences:
 *  - Logistic, Tanh, Sin and Cos also take complex operands (XLA defines them);
 *  - Real and Imag take real floats too (Real is x, Imag is 0), as compute.Builder documents;
 *  - Abs, Real and Imag of a complex operand give the real dtype (Complex64 -> Float32);
 *  - IsNaN takes any number (integers are never NaN), as the Go backend's NotEqual(x, x);
 *  - Max, Min and Clamp need integers or real floats; Atan2 needs real floats;
 *    ordering comparisons reject complex operands (only (Not)Equal are defined on them).
 * The dtypes each op accepts are its domain in ew.def (lathe_op_domain), stated nowhere else. */
#include "graph.h"

/* An op's domain in words, from its classes (Float16 and BFloat16 counted as floats). */
#define C_(c) (1u << LATHE_CLASS_##c)
#define C_INT (C_(SINT) | C_(UINT))
#define C_NUM (C_INT | C_(FLOAT) | C_(COMPLEX))

static const char *domain_str(unsigned m) {
  if (m & C_(HALF)) m = (m & ~C_(HALF)) | C_(FLOAT);
  switch (m) {
    case C_(BOOL): return "a Bool";
    case C_INT: return "an integer";
    case C_(SINT) | C_(FLOAT) | C_(COMPLEX): return "a signed number (signed integer, float or complex)";
    case C_NUM: return "a number (integer, float or complex)";
    case C_(FLOAT): return "a real float";
    case C_(FLOAT) | C_(COMPLEX): return "a float or complex";
    case C_(COMPLEX): return "a complex";
    case C_INT | C_(FLOAT): return "an integer or real float";
    default: return "a valid";
  }
}

static lathe_status_t check_dtype(lathe_op op, const char *what, const lathe_shape *s) {
  if (lathe_op_accepts_dtype(op, s->dtype)) return NULL;
  char buf[LATHE_SHAPE_STR_MAX];
  return LATHE_INVALID("%s: %s must have %s dtype, got %s", lathe_op_name(op), what,
                       domain_str(lathe_op_domain_classes(op)), lathe_shape_str(s, buf, sizeof buf));
}

/* ---- unary ---- */
lathe_status_t lathe_unary(lathe_function_t fn, lathe_op op, lathe_value_t x, lathe_value_t *out) {
  if (lathe_op_kind_of(op) != LATHE_KIND_UNARY || op >= LATHE_OP_COUNT)
    return LATHE_INVALID("Unary: %s is not a unary elementwise op", lathe_op_name(op));
  const char *name = lathe_op_name(op);
  if (!out) return LATHE_INVALID("%s: out is NULL", name);
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, op, &x, 1, &n));
  LATHE_RETURN_IF_ERROR(check_dtype(op, "operand", &n->in[0]->shape));
  n->shape = n->in[0]->shape;
  switch (op) {
    case LATHE_OP_IS_FINITE:
    case LATHE_OP_IS_NAN: n->shape.dtype = LATHE_DTYPE_BOOL; break;
    case LATHE_OP_ABS:
    case LATHE_OP_REAL:
    case LATHE_OP_IMAG: n->shape.dtype = lathe_dtype_real_of(n->shape.dtype); break;
    default: break;
  }
  return lathe_node_commit(n, out);
}

/* ---- binary and comparisons ---- */
lathe_status_t lathe_binary(lathe_function_t fn, lathe_op op, lathe_value_t lhs, lathe_value_t rhs,
                            lathe_value_t *out) {
  lathe_op_kind k = lathe_op_kind_of(op);
  if ((k != LATHE_KIND_BINARY && k != LATHE_KIND_COMPARE) || op >= LATHE_OP_COUNT)
    return LATHE_INVALID("Binary: %s is not a binary elementwise op", lathe_op_name(op));
  const char *name = lathe_op_name(op);
  if (!out) return LATHE_INVALID("%s: out is NULL", name);
  lathe_value_t ops[2] = {lhs, rhs};
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, op, ops, 2, &n));
  LATHE_RETURN_IF_ERROR(lathe_infer_broadcast(name, &n->in[0]->shape, &n->in[1]->shape, &n->shape));
  /* Complex's domain is Float32 and Float64: the other floats get a message of their own */
  if (op == LATHE_OP_COMPLEX && lathe_dtype_is_float(n->shape.dtype) && !lathe_op_accepts_dtype(op, n->shape.dtype))
    return LATHE_INVALID("Complex: operands must be Float32 or Float64, got %s", lathe_dtype_name(n->shape.dtype));
  LATHE_RETURN_IF_ERROR(check_dtype(op, "operands", &n->in[0]->shape));
  if (op == LATHE_OP_COMPLEX) {
    lathe_dtype dt = n->shape.dtype;
    n->shape.dtype = dt == LATHE_DTYPE_FLOAT32 ? LATHE_DTYPE_COMPLEX64 : LATHE_DTYPE_COMPLEX128;
  } else if (k == LATHE_KIND_COMPARE) {
    n->shape.dtype = LATHE_DTYPE_BOOL;
  }
  return lathe_node_commit(n, out);
}

/* Named wrappers (lathe_add, lathe_abs, ...), generated from the op table's SIG column. */
#define DEF_U(ENUM, c_name)                                                                  \
  lathe_status_t lathe_##c_name(lathe_function_t fn, lathe_value_t x, lathe_value_t *out) {  \
    return lathe_unary(fn, LATHE_OP_##ENUM, x, out);                                          \
  }
#define DEF_B(ENUM, c_name)                                                                                     \
  lathe_status_t lathe_##c_name(lathe_function_t fn, lathe_value_t lhs, lathe_value_t rhs, lathe_value_t *out) { \
    return lathe_binary(fn, LATHE_OP_##ENUM, lhs, rhs, out);                                                     \
  }
#define DEF_X(ENUM, c_name)
#define LATHE_OP(ENUM, GoName, c_name, n, KIND, SIG, FLAGS) DEF_##SIG(ENUM, c_name)
#include "lathe_ops.def"
#undef LATHE_OP

/* ---- dtype changes ---- */
lathe_status_t lathe_convert_dtype(lathe_function_t fn, lathe_value_t x, lathe_dtype dtype, lathe_value_t *out) {
  lathe_node *n;
  if (!out) return LATHE_INVALID("ConvertDType: out is NULL");
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_CONVERT_DTYPE, &x, 1, &n));
  if (!lathe_dtype_is_valid(dtype)) return LATHE_INVALID("ConvertDType: invalid target dtype %d", (int)dtype);
  n->shape = n->in[0]->shape;
  n->shape.dtype = dtype;
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_bitcast(lathe_function_t fn, lathe_value_t x, lathe_dtype dtype, lathe_value_t *out) {
  lathe_node *n;
  if (!out) return LATHE_INVALID("Bitcast: out is NULL");
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_BITCAST, &x, 1, &n));
  if (!lathe_dtype_is_valid(dtype)) return LATHE_INVALID("Bitcast: invalid target dtype %d", (int)dtype);
  const lathe_shape *s = &n->in[0]->shape;
  char buf[LATHE_SHAPE_STR_MAX];
  int from = lathe_dtype_bits(s->dtype), to = lathe_dtype_bits(dtype);
  n->shape = *s;
  n->shape.dtype = dtype;
  if (to < from) { /* narrower: a new last axis */
    if (s->rank >= LATHE_MAX_RANK)
      return LATHE_INVALID("Bitcast: %s to %s would exceed rank %d", lathe_shape_str(s, buf, sizeof buf),
                           lathe_dtype_name(dtype), LATHE_MAX_RANK);
    n->shape.dims[s->rank] = from / to;
    n->shape.axis_names[s->rank] = NULL;
    n->shape.rank = s->rank + 1;
  } else if (to > from) { /* wider: the last axis is consumed */
    int64_t ratio = to / from;
    if (s->rank == 0)
      return LATHE_INVALID("Bitcast: a scalar %s cannot become the wider %s (needs a last axis of size %lld)",
                           lathe_dtype_name(s->dtype), lathe_dtype_name(dtype), (long long)ratio);
    int64_t last = s->dims[s->rank - 1];
    if (last == -1)
      return LATHE_INVALID("Bitcast: cannot collapse the dynamic last axis of %s", lathe_shape_str(s, buf, sizeof buf));
    if (last != ratio)
      return LATHE_INVALID("Bitcast: %s to %s needs a last axis of size %d/%d = %lld, got %lld",
                           lathe_shape_str(s, buf, sizeof buf), lathe_dtype_name(dtype), to, from, (long long)ratio,
                           (long long)last);
    n->shape.rank = s->rank - 1;
    n->shape.dims[s->rank - 1] = 0;
    n->shape.axis_names[s->rank - 1] = NULL;
  }
  return lathe_node_commit(n, out);
}

/* ---- selection ---- */
static bool same_dims(const lathe_shape *a, const lathe_shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (!lathe_same_axis(a, i, b, i)) return false; /* dynamic axes: the same name too */
  return true;
}

/* compute v0.1.11+: the three operands broadcast together (GoMLX leaves it to the backend;
 * masked attention's Bool[1,h,1,k] mask against Float32[b,h,q,k] scores). The node keeps its
 * operands as they are: every device reads size-1 axes and scalars with stride 0, as for the
 * binary ops, so nothing is materialised. */
lathe_status_t lathe_where(lathe_function_t fn, lathe_value_t cond, lathe_value_t on_true, lathe_value_t on_false,
                           lathe_value_t *out) {
  lathe_value_t ops[3] = {cond, on_true, on_false};
  lathe_node *n;
  if (!out) return LATHE_INVALID("Where: out is NULL");
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_WHERE, ops, 3, &n));
  const lathe_shape *c = &n->in[0]->shape, *t = &n->in[1]->shape, *f = &n->in[2]->shape;
  char b1[LATHE_SHAPE_STR_MAX], b2[LATHE_SHAPE_STR_MAX];
  if (!lathe_op_accepts_dtype(LATHE_OP_WHERE, c->dtype))
    return LATHE_INVALID("Where: condition must be Bool, got %s", lathe_shape_str(c, b1, sizeof b1));
  if (t->dtype != f->dtype)
    return LATHE_INVALID("Where: on_true and on_false must have the same dtype, got %s and %s",
                         lathe_shape_str(t, b1, sizeof b1), lathe_shape_str(f, b2, sizeof b2));
  static const char *const what[3] = {"condition", "on_true", "on_false"};
  const lathe_shape *s[3] = {c, t, f};
  LATHE_RETURN_IF_ERROR(lathe_infer_broadcast_n("Where", what, s, 3, &n->shape));
  n->shape.dtype = t->dtype;
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_clamp(lathe_function_t fn, lathe_value_t min, lathe_value_t x, lathe_value_t max,
                           lathe_value_t *out) {
  lathe_value_t ops[3] = {min, x, max};
  lathe_node *n;
  if (!out) return LATHE_INVALID("Clamp: out is NULL");
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_CLAMP, ops, 3, &n));
  const lathe_shape *lo = &n->in[0]->shape, *v = &n->in[1]->shape, *hi = &n->in[2]->shape;
  char b1[LATHE_SHAPE_STR_MAX], b2[LATHE_SHAPE_STR_MAX], b3[LATHE_SHAPE_STR_MAX];
  if (lo->dtype != v->dtype || hi->dtype != v->dtype)
    return LATHE_INVALID("Clamp: min, x and max must have the same dtype, got %s, %s and %s",
                         lathe_shape_str(lo, b1, sizeof b1), lathe_shape_str(v, b2, sizeof b2),
                         lathe_shape_str(hi, b3, sizeof b3));
  LATHE_RETURN_IF_ERROR(check_dtype(LATHE_OP_CLAMP, "x", v));
  if ((lo->rank && !same_dims(lo, v)) || (hi->rank && !same_dims(hi, v)))
    return LATHE_INVALID("Clamp: min %s and max %s must be scalars or have the shape of x %s",
                         lathe_shape_str(lo, b1, sizeof b1), lathe_shape_str(hi, b3, sizeof b3),
                         lathe_shape_str(v, b2, sizeof b2));
  n->shape = *v;
  return lathe_node_commit(n, out);
}
