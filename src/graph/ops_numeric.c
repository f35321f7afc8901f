/* ops_numeric.c -- builders and shape rules of the NUMERIC family: RNGBitGenerator, FFT and
 * the three BatchNorm ops. Rules follow XLA's shape inference (the one GoMLX's xla backend
 * reaches through StableHLO); where XLA leaves a case open (FFT lengths that differ from the
 * operand's sizes) lathe rejects it rather than guess.
 *
 * Attributes: op_attrs.def, groups fft and batch_norm. RNGBitGenerator has none (the value shape
 * is out_shapes[1]). */
#include <math.h>

#include "graph.h"

/* A dynamic size (-1) is compatible with anything: it is checked when the axis is bound. */
/* An axis of the given static length: a dynamic axis could be bound to anything else. */
static bool dim_ok(int64_t a, int64_t b) { return a == b; }

static const char *shape_s(const lathe_shape *s, char *buf) { return lathe_shape_str(s, buf, LATHE_SHAPE_STR_MAX); }

/* ---- RNGBitGenerator ---- */

lathe_status_t lathe_rng_bit_generator(lathe_function_t fn, lathe_value_t state, const lathe_shape *shape,
                                       lathe_value_t *out_values) {
  const char *op = "RNGBitGenerator";
  char b1[LATHE_SHAPE_STR_MAX];
  if (!out_values) return LATHE_INVALID("%s: out_values is NULL", op);
  if (!shape) return LATHE_INVALID("%s: shape is NULL", op);
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_RNG_BIT_GENERATOR, &state, 1, &n));
  const lathe_shape *st = &n->in[0]->shape;
  if (st->dtype != LATHE_DTYPE_UINT64 || st->rank != 1 || st->dims[0] != 3)
    return LATHE_INVALID("%s: state must be shaped Uint64[3] (key, counter low, counter high), got %s", op,
                         shape_s(st, b1));
  if (!lathe_dtype_is_valid(shape->dtype)) return LATHE_INVALID("%s: invalid dtype %d for the values", op, (int)shape->dtype);
  lathe_dtype_class c = lathe_dtype_class_of(shape->dtype);
  if (c == LATHE_CLASS_BOOL || c == LATHE_CLASS_COMPLEX)
    return LATHE_INVALID("%s: values must be an integer or float dtype, got %s", op, lathe_dtype_name(shape->dtype));
  if (shape->rank < 0 || shape->rank > LATHE_MAX_RANK)
    return LATHE_INVALID("%s: rank %d out of range [0, %d]", op, shape->rank, LATHE_MAX_RANK);
  /* A dynamic axis (GoMLX's sampling over a dynamic batch) must be named by a parameter, so that
   * each binding of the executable gives it a size. */
  for (int i = 0; i < shape->rank; i++)
    if (shape->dims[i] < -1 || (shape->dims[i] == -1 && !lathe_axis_name_known(fn, shape->axis_names[i])))
      return LATHE_INVALID("%s: values shape axis %d has size %lld%s%s%s; it must be static, or dynamic with the name "
                           "of a parameter's axis", op, i, (long long)shape->dims[i],
                           shape->axis_names[i] ? " (\"" : "", shape->axis_names[i] ? shape->axis_names[i] : "",
                           shape->axis_names[i] ? "\")" : "");
  lathe_shape outs[2];
  outs[0] = *st;
  outs[1] = *shape;
  LATHE_RETURN_IF_ERROR(lathe_node_set_outputs(n, outs, 2));
  return lathe_node_commit_multi(n, out_values);
}

/* ---- FFT ---- */

static const char *fft_type_name(lathe_fft_type t) {
  switch (t) {
    case LATHE_FFT_TYPE_FORWARD: return "FFTForward";
    case LATHE_FFT_TYPE_INVERSE: return "FFTInverse";
    case LATHE_FFT_TYPE_FORWARD_REAL: return "FFTForwardReal";
    case LATHE_FFT_TYPE_INVERSE_REAL: return "FFTInverseReal";
  }
  return "?";
}

lathe_status_t lathe_fft(lathe_function_t fn, lathe_value_t x, lathe_fft_type type, const int64_t *fft_length,
                         int n_fft_length, lathe_value_t *out) {
  const char *op = "FFT";
  char b1[LATHE_SHAPE_STR_MAX];
  if (!out) return LATHE_INVALID("%s: out is NULL", op);
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_FFT, &x, 1, &n));
  const lathe_shape *s = &n->in[0]->shape;
  if ((int)type < 0 || (int)type > 3) return LATHE_INVALID("%s: invalid FFT type %d", op, (int)type);
  const char *tn = fft_type_name(type);
  if (n_fft_length < 1 || n_fft_length > 3)
    return LATHE_INVALID("%s: %s supports 1 to 3 fft_length values, got %d", op, tn, n_fft_length);
  if (!fft_length) return LATHE_INVALID("%s: fft_length is NULL", op);
  if (n_fft_length > s->rank)
    return LATHE_INVALID("%s: %s over %d axes needs an operand of rank >= %d, got %s", op, tn, n_fft_length,
                         n_fft_length, shape_s(s, b1));
  for (int i = 0; i < n_fft_length; i++)
    if (fft_length[i] <= 0)
      return LATHE_INVALID("%s: fft_length[%d]=%lld must be positive", op, i, (long long)fft_length[i]);
  bool real_in = type == LATHE_FFT_TYPE_FORWARD_REAL;
  if (real_in && s->dtype != LATHE_DTYPE_FLOAT32 && s->dtype != LATHE_DTYPE_FLOAT64)
    return LATHE_INVALID("%s: %s requires a Float32 or Float64 operand, got %s", op, tn, lathe_dtype_name(s->dtype));
  if (!real_in && !lathe_dtype_is_complex(s->dtype))
    return LATHE_INVALID("%s: %s requires a Complex64 or Complex128 operand, got %s", op, tn,
                         lathe_dtype_name(s->dtype));
  int first = s->rank - n_fft_length, last = s->rank - 1;
  int n_exact = type == LATHE_FFT_TYPE_INVERSE_REAL ? n_fft_length - 1 : n_fft_length;
  for (int i = 0; i < n_exact; i++)
    if (!dim_ok(s->dims[first + i], fft_length[i]))
      return LATHE_INVALID("%s: %s needs operand axis %d of size fft_length[%d]=%lld, got %s", op, tn, first + i, i,
                           (long long)fft_length[i], shape_s(s, b1));
  int64_t nlast = fft_length[n_fft_length - 1];
  n->shape = *s;
  if (type == LATHE_FFT_TYPE_FORWARD_REAL) {
    n->shape.dtype = s->dtype == LATHE_DTYPE_FLOAT32 ? LATHE_DTYPE_COMPLEX64 : LATHE_DTYPE_COMPLEX128;
    n->shape.dims[last] = nlast / 2 + 1;
    n->shape.axis_names[last] = NULL;
  } else if (type == LATHE_FFT_TYPE_INVERSE_REAL) {
    if (!dim_ok(s->dims[last], nlast / 2 + 1))
      return LATHE_INVALID("%s: %s needs the last operand axis of size fft_length[%d]/2+1=%lld, got %s", op, tn,
                           n_fft_length - 1, (long long)(nlast / 2 + 1), shape_s(s, b1));
    n->shape.dtype = lathe_dtype_real_of(s->dtype);
    n->shape.dims[last] = nlast;
    n->shape.axis_names[last] = NULL;
  }
  lathe_attr_set_fft_type(n, type);
  LATHE_RETURN_IF_ERROR(lathe_attr_set_fft_length(n, fft_length, n_fft_length));
  return lathe_node_commit(n, out);
}

/* ---- BatchNorm ---- */

/* Checks operand/axis/epsilon and that each of the n_vec per-feature values is a vector of
 * operand's dtype and feature size. */
static lathe_status_t check_batch_norm(const lathe_node *n, float epsilon, int feature_axis, int first_vec,
                                       int n_vec, const char *const *vec_names) {
  const char *op = lathe_op_name(n->op);
  char b1[LATHE_SHAPE_STR_MAX], b2[LATHE_SHAPE_STR_MAX];
  const lathe_shape *x = &n->in[0]->shape;
  if (!lathe_dtype_is_float(x->dtype))
    return LATHE_INVALID("%s: operand must be a float dtype, got %s", op, shape_s(x, b1));
  if (x->rank < 1) return LATHE_INVALID("%s: operand must have rank >= 1, got %s", op, shape_s(x, b1));
  if (feature_axis < 0 || feature_axis >= x->rank)
    return LATHE_INVALID("%s: feature_axis %d out of range [0, %d) for operand %s", op, feature_axis, x->rank,
                         shape_s(x, b1));
  if (!isfinite(epsilon) || epsilon < 0)
    return LATHE_INVALID("%s: epsilon must be finite and >= 0, got %g", op, (double)epsilon);
  int64_t f = x->dims[feature_axis];
  for (int k = 0; k < n_vec; k++) {
    const lathe_shape *v = &n->in[first_vec + k]->shape;
    if (v->dtype != x->dtype)
      return LATHE_INVALID("%s: %s dtype %s differs from operand dtype %s", op, vec_names[k], lathe_dtype_name(v->dtype),
                           lathe_dtype_name(x->dtype));
    if (v->rank != 1 || !lathe_same_axis(v, 0, x, feature_axis))
      return LATHE_INVALID("%s: %s must be shaped [%lld] (the size of feature axis %d of operand %s), got %s", op,
                           vec_names[k], (long long)f, feature_axis, shape_s(x, b1), shape_s(v, b2));
  }
  return NULL;
}

/* Result shapes of the multi-result forms: operand's shape and twice the feature vector. */
static lathe_status_t batch_norm_outputs(lathe_node *n, int feature_axis) {
  const lathe_shape *x = &n->in[0]->shape;
  lathe_shape outs[3];
  outs[0] = *x;
  memset(&outs[1], 0, sizeof outs[1]);
  outs[1].dtype = x->dtype;
  outs[1].rank = 1;
  outs[1].dims[0] = x->dims[feature_axis];
  outs[1].axis_names[0] = x->axis_names[feature_axis];
  outs[2] = outs[1];
  return lathe_node_set_outputs(n, outs, 3);
}

lathe_status_t lathe_batch_norm_for_inference(lathe_function_t fn, lathe_value_t operand, lathe_value_t scale,
                                              lathe_value_t offset, lathe_value_t mean, lathe_value_t variance,
                                              float epsilon, int feature_axis, lathe_value_t *out) {
  static const char *const names[] = {"scale", "offset", "mean", "variance"};
  if (!out) return LATHE_INVALID("BatchNormForInference: out is NULL");
  lathe_value_t ops[5] = {operand, scale, offset, mean, variance};
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_BATCH_NORM_FOR_INFERENCE, ops, 5, &n));
  LATHE_RETURN_IF_ERROR(check_batch_norm(n, epsilon, feature_axis, 1, 4, names));
  n->shape = n->in[0]->shape;
  lathe_attr_set_batch_norm_feature_axis(n, feature_axis);
  lathe_attr_set_batch_norm_epsilon(n, epsilon);
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_batch_norm_for_training(lathe_function_t fn, lathe_value_t operand, lathe_value_t scale,
                                             lathe_value_t offset, float epsilon, int feature_axis,
                                             lathe_value_t *out_values) {
  static const char *const names[] = {"scale", "offset"};
  if (!out_values) return LATHE_INVALID("BatchNormForTraining: out_values is NULL");
  lathe_value_t ops[3] = {operand, scale, offset};
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_BATCH_NORM_FOR_TRAINING, ops, 3, &n));
  LATHE_RETURN_IF_ERROR(check_batch_norm(n, epsilon, feature_axis, 1, 2, names));
  lathe_attr_set_batch_norm_feature_axis(n, feature_axis);
  lathe_attr_set_batch_norm_epsilon(n, epsilon);
  LATHE_RETURN_IF_ERROR(batch_norm_outputs(n, feature_axis));
  return lathe_node_commit_multi(n, out_values);
}

lathe_status_t lathe_batch_norm_gradient(lathe_function_t fn, lathe_value_t operand, lathe_value_t scale,
                                         lathe_value_t mean, lathe_value_t variance, lathe_value_t grad_output,
                                         float epsilon, int feature_axis, lathe_value_t *out_values) {
  static const char *const names[] = {"scale", "mean", "variance"};
  char b1[LATHE_SHAPE_STR_MAX], b2[LATHE_SHAPE_STR_MAX];
  if (!out_values) return LATHE_INVALID("BatchNormGradient: out_values is NULL");
  lathe_value_t ops[5] = {operand, scale, mean, variance, grad_output};
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_BATCH_NORM_GRADIENT, ops, 5, &n));
  LATHE_RETURN_IF_ERROR(check_batch_norm(n, epsilon, feature_axis, 1, 3, names));
  const lathe_shape *x = &n->in[0]->shape, *g = &n->in[4]->shape;
  bool same = g->dtype == x->dtype && g->rank == x->rank;
  for (int i = 0; same && i < x->rank; i++) same = lathe_same_axis(g, i, x, i);
  if (!same)
    return LATHE_INVALID("BatchNormGradient: grad_output %s must have the operand's shape %s", shape_s(g, b1),
                         shape_s(x, b2));
  lathe_attr_set_batch_norm_feature_axis(n, feature_axis);
  lathe_attr_set_batch_norm_epsilon(n, epsilon);
  LATHE_RETURN_IF_ERROR(batch_norm_outputs(n, feature_axis));
  return lathe_node_commit_multi(n, out_values);
}
