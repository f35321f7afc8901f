/* fold.c -- host evaluation of small integer values at specialisation: the size values of the
 * dynamic-size ops (DynamicReshape, DynamicBroadcastInDim, DynamicIota, DynamicPad) when they follow
 * from resolved shapes and constants. Only what it can compute exactly as src/graph/ew.def defines
 * it (wrapping Add/Sub/Mul/Neg/Abs, Div and Rem with their x/0 and MIN/-1 rules, Max, Min,
 * integer ConvertDType) over byte-sized integers and Bool; anything else is left to the device. */
#include "graph.h"

static bool foldable_dtype(lathe_dtype dt) {
  return dt == LATHE_DTYPE_BOOL || (lathe_dtype_is_int(dt) && !lathe_dtype_is_packed(dt));
}

/* v reduced to dt's width: sign-extended for signed types, zero-extended (as bits) otherwise. */
static int64_t wrap(lathe_dtype dt, uint64_t v) {
  if (dt == LATHE_DTYPE_BOOL) return v != 0;
  int bits = lathe_dtype_bits(dt);
  if (bits < 64) {
    v &= (UINT64_C(1) << bits) - 1;
    if (lathe_dtype_class_of(dt) == LATHE_CLASS_SINT && (v >> (bits - 1)) & 1) v |= ~((UINT64_C(1) << bits) - 1);
  }
  return (int64_t)v;
}

static int64_t load(const void *p, lathe_dtype dt, int64_t i) {
  switch (lathe_dtype_bits(dt)) {
    case 8: return wrap(dt, ((const uint8_t *)p)[i]);
    case 16: return wrap(dt, ((const uint16_t *)p)[i]);
    case 32: return wrap(dt, ((const uint32_t *)p)[i]);
    default: return wrap(dt, ((const uint64_t *)p)[i]);
  }
}

static int64_t binary(lathe_op op, lathe_dtype dt, int64_t x, int64_t y) {
  bool sgn = lathe_dtype_class_of(dt) == LATHE_CLASS_SINT;
  uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
  switch (op) {
    case LATHE_OP_ADD: return wrap(dt, ux + uy);
    case LATHE_OP_SUB: return wrap(dt, ux - uy);
    case LATHE_OP_MUL: return wrap(dt, ux * uy);
    case LATHE_OP_DIV:
      if (y == 0) return wrap(dt, UINT64_MAX);
      if (sgn) return y == -1 ? wrap(dt, 0 - ux) : wrap(dt, (uint64_t)(x / y));
      return wrap(dt, ux / uy);
    case LATHE_OP_REM:
      if (y == 0) return x;
      if (sgn) return y == -1 ? 0 : wrap(dt, (uint64_t)(x % y));
      return wrap(dt, ux % uy);
    case LATHE_OP_MAX: return sgn ? (x > y ? x : y) : (ux > uy ? x : y);
    default: return sgn ? (x < y ? x : y) : (ux < uy ? x : y); /* MIN */
  }
}

lathe_fold_status lathe_fold_value(lathe_fold_ctx *c, const lathe_node *n, lathe_folded *out) {
  if (c->budget-- <= 0) return LATHE_FOLD_NO; /* a deep expression: the device computes it */
  lathe_fold_status st = c->lookup(c, n, out);
  if (st != LATHE_FOLD_UNKNOWN) return st;
  const lathe_shape *s = &n->shape;
  if (n->multi || !foldable_dtype(s->dtype) || lathe_shape_is_dynamic(s)) return LATHE_FOLD_NO;
  int64_t count = lathe_shape_num_elements(s);
  if (count < 0 || count > LATHE_FOLD_MAX) return LATHE_FOLD_NO;
  out->dtype = s->dtype;
  out->n = (int)count;
  lathe_folded a, b;
#define OPERAND(k, dst)                                                 \
  do {                                                                  \
    lathe_fold_status s_ = lathe_fold_value(c, n->in[k], &(dst));      \
    if (s_ != LATHE_FOLD_OK) return s_;                                 \
  } while (0)
  switch (n->op) {
    case LATHE_OP_CAPTURE: return lathe_fold_value(c, n->captured, out);
    case LATHE_OP_CONSTANT: {
      lathe_bytes v = lathe_attr_constant_value(n);
      for (int i = 0; i < out->n; i++) out->v[i] = load(v.data, s->dtype, i);
      return LATHE_FOLD_OK;
    }
    case LATHE_OP_DYNAMIC_DIMENSION_SIZE:
    case LATHE_OP_DYNAMIC_SHAPE: {
      const lathe_shape *xs = &n->in[0]->shape;
      if (lathe_shape_is_dynamic(xs)) return LATHE_FOLD_PENDING; /* sized by a value not read yet */
      if (n->op == LATHE_OP_DYNAMIC_SHAPE)
        for (int i = 0; i < xs->rank; i++) out->v[i] = wrap(s->dtype, (uint64_t)xs->dims[i]);
      else
        out->v[0] = wrap(s->dtype, (uint64_t)xs->dims[lathe_attr_dynamic_dimension_size_axis(n)]);
      return LATHE_FOLD_OK;
    }
    case LATHE_OP_IDENTITY:
    case LATHE_OP_RESHAPE:
      OPERAND(0, a);
      if (a.n != out->n) return LATHE_FOLD_NO;
      memcpy(out->v, a.v, sizeof(int64_t) * (size_t)a.n);
      return LATHE_FOLD_OK;
    case LATHE_OP_BROADCAST_IN_DIM:
      OPERAND(0, a);
      if (a.n != 1 && a.n != out->n) return LATHE_FOLD_NO; /* a scalar's broadcast, or a reshape */
      for (int i = 0; i < out->n; i++) out->v[i] = a.v[a.n == 1 ? 0 : i];
      return LATHE_FOLD_OK;
    case LATHE_OP_CONVERT_DTYPE:
      OPERAND(0, a);
      for (int i = 0; i < out->n; i++)
        out->v[i] = s->dtype == LATHE_DTYPE_BOOL ? a.v[i] != 0 : wrap(s->dtype, (uint64_t)a.v[i]);
      return LATHE_FOLD_OK;
    case LATHE_OP_SLICE: {
      if (s->rank != 1) return LATHE_FOLD_NO;
      OPERAND(0, a);
      int64_t start = lathe_attr_slice_starts(n).v[0], stride = lathe_attr_slice_strides(n).v[0];
      for (int i = 0; i < out->n; i++) out->v[i] = a.v[start + i * stride];
      return LATHE_FOLD_OK;
    }
    case LATHE_OP_CONCATENATE: {
      if (s->rank != 1) return LATHE_FOLD_NO;
      int k = 0;
      for (int j = 0; j < n->n_operands; j++) {
        OPERAND(j, a);
        if (k + a.n > out->n) return LATHE_FOLD_NO;
        memcpy(out->v + k, a.v, sizeof(int64_t) * (size_t)a.n);
        k += a.n;
      }
      return k == out->n ? LATHE_FOLD_OK : LATHE_FOLD_NO;
    }
    case LATHE_OP_NEG:
    case LATHE_OP_ABS:
      if (lathe_dtype_class_of(s->dtype) != LATHE_CLASS_SINT) return LATHE_FOLD_NO;
      OPERAND(0, a);
      for (int i = 0; i < out->n; i++)
        out->v[i] = n->op == LATHE_OP_NEG || a.v[i] < 0 ? wrap(s->dtype, 0 - (uint64_t)a.v[i]) : a.v[i];
      return LATHE_FOLD_OK;
    case LATHE_OP_ADD:
    case LATHE_OP_SUB:
    case LATHE_OP_MUL:
    case LATHE_OP_DIV:
    case LATHE_OP_REM:
    case LATHE_OP_MAX:
    case LATHE_OP_MIN:
      if (s->dtype == LATHE_DTYPE_BOOL) return LATHE_FOLD_NO;
      OPERAND(0, a);
      OPERAND(1, b);
      if ((a.n != 1 && a.n != out->n) || (b.n != 1 && b.n != out->n)) return LATHE_FOLD_NO;
      for (int i = 0; i < out->n; i++) out->v[i] = binary(n->op, s->dtype, a.v[a.n == 1 ? 0 : i], b.v[b.n == 1 ? 0 : i]);
      return LATHE_FOLD_OK;
    default: return LATHE_FOLD_NO;
  }
#undef OPERAND
}
