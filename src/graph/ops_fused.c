/* ops_fused.c -- builders of the fused ops: FusedSoftmax, FusedGelu, FusedLayerNorm, FusedDense
 * and its VJP, FusedActivation and its VJP. The result shapes follow GoMLX's fused op definitions
 * (compute's ops_fused.go and shapeinference); activations are ew.def's LATHE_ACT rows. */
#include "ew.h"
#include "graph.h"

static lathe_status_t check_float(const char *op, lathe_value_t x) {
  if (!lathe_dtype_is_float(x->shape.dtype))
    return LATHE_INVALID("%s: operand must be a float (Float16, BFloat16, Float32, Float64), got %s", op,
                         lathe_dtype_name(x->shape.dtype));
  return NULL;
}

lathe_status_t lathe_fused_softmax(lathe_function_t fn, lathe_value_t x, int axis, lathe_value_t *out) {
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_FUSED_SOFTMAX, &x, 1, &n));
  LATHE_RETURN_IF_ERROR(check_float("FusedSoftmax", x));
  LATHE_RETURN_IF_ERROR(lathe_check_axis("FusedSoftmax", "axis", axis, x->shape.rank));
  lathe_attr_set_fused_softmax_axis(n, axis);
  n->shape = x->shape;
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_fused_gelu(lathe_function_t fn, lathe_value_t x, bool exact, lathe_value_t *out) {
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_FUSED_GELU, &x, 1, &n));
  LATHE_RETURN_IF_ERROR(check_float("FusedGelu", x));
  lathe_attr_set_fused_gelu_exact(n, exact);
  n->shape = x->shape;
  return lathe_node_commit(n, out);
}

/* Attributes: list 0 = axes as given; i[0] = has gamma, i[1] = has beta; f[0] = epsilon. */
lathe_status_t lathe_fused_layer_norm(lathe_function_t fn, lathe_value_t x, const int *axes, int n_axes, double epsilon,
                                      lathe_value_t gamma, lathe_value_t beta, lathe_value_t *out) {
  const char *op = "FusedLayerNorm";
  lathe_value_t operands[3] = {x};
  int n_ops = 1;
  if (gamma) operands[n_ops++] = gamma;
  if (beta) operands[n_ops++] = beta;
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_FUSED_LAYER_NORM, operands, n_ops, &n));
  LATHE_RETURN_IF_ERROR(check_float(op, x));
  if (n_axes < 1 || !axes) return LATHE_INVALID("%s: needs at least one axis", op);
  if (n_axes > x->shape.rank) return LATHE_INVALID("%s: %d axes for rank %d", op, n_axes, x->shape.rank);
  int64_t norm = 1;
  int ax[LATHE_MAX_RANK]; /* from the end when negative, as GoMLX's nn.LayerNorm passes them */
  bool seen[LATHE_MAX_RANK] = {0}, dyn_norm = false;
  for (int i = 0; i < n_axes; i++) {
    ax[i] = axes[i] < 0 && axes[i] >= -x->shape.rank ? axes[i] + x->shape.rank : axes[i];
    LATHE_RETURN_IF_ERROR(lathe_check_axis(op, "axis", ax[i], x->shape.rank));
    if (seen[ax[i]]) return LATHE_INVALID("%s: axis %d given twice", op, axes[i]);
    seen[ax[i]] = true;
    norm *= x->shape.dims[ax[i]];
    dyn_norm |= x->shape.dims[ax[i]] < 0;
  }
  /* gamma and beta are static: their size cannot follow a dynamic normalised axis */
  if (n_ops > 1 && dyn_norm)
    return LATHE_INVALID("%s: gamma and beta need static normalised axes, x is dynamic on one of them", op);
  if (!(epsilon >= 0)) return LATHE_INVALID("%s: epsilon must be >= 0, got %g", op, epsilon);
  for (int k = 1; k < n_ops; k++) {
    const lathe_shape *s = &operands[k]->shape;
    const char *what = operands[k] == gamma && k == 1 ? "gamma" : "beta";
    if (s->dtype != x->shape.dtype)
      return LATHE_INVALID("%s: %s has dtype %s, x has %s", op, what, lathe_dtype_name(s->dtype), lathe_dtype_name(x->shape.dtype));
    if (lathe_shape_size(s) != norm || lathe_shape_is_dynamic(s))
      return LATHE_INVALID("%s: %s has %lld elements, the normalised axes have %lld", op, what, (long long)lathe_shape_size(s),
                           (long long)norm);
  }
  LATHE_RETURN_IF_ERROR(lathe_attr_set_fused_layer_norm_axes_int(n, ax, n_axes));
  lathe_attr_set_fused_layer_norm_has_gamma(n, gamma != NULL);
  lathe_attr_set_fused_layer_norm_has_beta(n, beta != NULL);
  lathe_attr_set_fused_layer_norm_epsilon(n, epsilon);
  n->shape = x->shape;
  return lathe_node_commit(n, out);
}

/* The result shape of FusedDense (and the VJP's y), op naming the caller. */
static lathe_status_t dense_shape(const char *op, lathe_value_t x, lathe_value_t weight, lathe_value_t bias,
                                  lathe_activation activation, lathe_dense_layout layout, lathe_shape *out) {
  LATHE_RETURN_IF_ERROR(check_float(op, x));
  const lathe_shape *xs = &x->shape, *ws = &weight->shape;
  LATHE_RETURN_IF_ERROR(lathe_act_check(op, activation, true));
  if (layout != LATHE_DENSE_INPUT_OUTPUTS && layout != LATHE_DENSE_OUTPUTS_INPUT)
    return LATHE_INVALID("%s: unknown weight layout %d", op, (int)layout);
  if (ws->dtype != xs->dtype)
    return LATHE_INVALID("%s: weight has dtype %s, x has %s", op, lathe_dtype_name(ws->dtype), lathe_dtype_name(xs->dtype));
  if (xs->rank < 1 || ws->rank < 1) return LATHE_INVALID("%s: x and weight need rank >= 1", op);
  int64_t in = xs->dims[xs->rank - 1];
  int64_t w_in = layout == LATHE_DENSE_INPUT_OUTPUTS ? ws->dims[0] : ws->dims[ws->rank - 1];
  if (!lathe_same_axis(xs, xs->rank - 1, ws, layout == LATHE_DENSE_INPUT_OUTPUTS ? 0 : ws->rank - 1))
    return LATHE_INVALID("%s: x has %lld input features, weight %lld (a dynamic axis matches only itself)", op,
                         (long long)in, (long long)w_in);
  int n_out_axes = ws->rank - 1;
  if (xs->rank - 1 + n_out_axes > LATHE_MAX_RANK) return LATHE_INVALID("%s: result rank exceeds %d", op, LATHE_MAX_RANK);
  lathe_shape s = *xs;
  s.rank = xs->rank - 1 + n_out_axes;
  for (int i = 0; i < n_out_axes; i++) {
    int wa = layout == LATHE_DENSE_INPUT_OUTPUTS ? i + 1 : i;
    s.dims[xs->rank - 1 + i] = ws->dims[wa];
    s.axis_names[xs->rank - 1 + i] = ws->axis_names[wa];
  }
  if (bias) {
    const lathe_shape *bs = &bias->shape;
    bool ok = bs->dtype == xs->dtype && bs->rank == n_out_axes;
    for (int i = 0; ok && i < n_out_axes; i++) ok = lathe_same_axis(bs, i, &s, xs->rank - 1 + i);
    char a[LATHE_SHAPE_STR_MAX];
    if (!ok) return LATHE_INVALID("%s: bias has shape %s, expected the output features", op, lathe_shape_str(bs, a, sizeof a));
  }
  *out = s;
  return NULL;
}

/* Attributes: i[0] = activation, i[1] = layout, i[2] = has bias. */
lathe_status_t lathe_fused_dense(lathe_function_t fn, lathe_value_t x, lathe_value_t weight, lathe_value_t bias,
                                 lathe_activation activation, lathe_dense_layout layout, lathe_value_t *out) {
  const char *op = "FusedDense";
  lathe_value_t operands[3] = {x, weight, bias};
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_FUSED_DENSE, operands, bias ? 3 : 2, &n));
  lathe_shape s;
  LATHE_RETURN_IF_ERROR(dense_shape(op, x, weight, bias, activation, layout, &s));
  lathe_attr_set_fused_dense_activation(n, activation);
  lathe_attr_set_fused_dense_layout(n, layout);
  lathe_attr_set_fused_dense_has_bias(n, bias != NULL);
  n->shape = s;
  return lathe_node_commit(n, out);
}

/* Whether a and b have the same dims (a dynamic axis matches only the same name). */
static bool same_dims(const lathe_shape *a, const lathe_shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (!lathe_same_axis(a, i, b, i)) return false;
  return true;
}

static lathe_status_t check_like(const char *op, const char *what, lathe_value_t v, const char *ref_name,
                                 const lathe_shape *ref) {
  if (v->shape.dtype == ref->dtype && same_dims(&v->shape, ref)) return NULL;
  char a[LATHE_SHAPE_STR_MAX], b[LATHE_SHAPE_STR_MAX];
  return LATHE_INVALID("%s: %s has shape %s, %s has %s", op, what, lathe_shape_str(&v->shape, a, sizeof a), ref_name,
                       lathe_shape_str(ref, b, sizeof b));
}

/* Operands: x, weight, [bias], y, dOutput; results dx, dWeight[, dBias]. */
lathe_status_t lathe_fused_dense_vjp(lathe_function_t fn, lathe_value_t x, lathe_value_t weight, lathe_value_t bias,
                                     lathe_value_t y, lathe_value_t d_output, lathe_activation activation,
                                     lathe_dense_layout layout, lathe_value_t out[3]) {
  const char *op = "FusedDenseVJP";
  if (!out) return LATHE_INVALID("%s: out is NULL", op);
  out[0] = out[1] = out[2] = NULL;
  if (!y) return LATHE_INVALID("%s: y is NULL", op);
  if (!d_output) return LATHE_INVALID("%s: dOutput is NULL", op);
  lathe_value_t operands[5] = {x, weight};
  int n_ops = 2;
  if (bias) operands[n_ops++] = bias;
  operands[n_ops++] = y;
  operands[n_ops++] = d_output;
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_FUSED_DENSE_VJP, operands, n_ops, &n));
  lathe_shape s;
  LATHE_RETURN_IF_ERROR(dense_shape(op, x, weight, bias, activation, layout, &s));
  if (lathe_act_form_of(activation) != LATHE_ACT_FORM_Y)
    return LATHE_INVALID("%s: activation %s (%d) needs the pre-activation input: use FusedDense without activation, "
                         "then FusedActivation and its VJP",
                         op, lathe_act_name(activation), (int)activation);
  LATHE_RETURN_IF_ERROR(check_like(op, "y", y, "the forward result", &s));
  LATHE_RETURN_IF_ERROR(check_like(op, "dOutput", d_output, "the forward result", &s));
  lathe_attr_set_fused_dense_vjp_activation(n, activation);
  lathe_attr_set_fused_dense_vjp_layout(n, layout);
  lathe_attr_set_fused_dense_vjp_has_bias(n, bias != NULL);
  lathe_shape outs[3] = {x->shape, weight->shape, bias ? bias->shape : x->shape};
  LATHE_RETURN_IF_ERROR(lathe_node_set_outputs(n, outs, bias ? 3 : 2));
  return lathe_node_commit_multi(n, out);
}

/* Attributes: i[0] = activation. */
lathe_status_t lathe_fused_activation(lathe_function_t fn, lathe_value_t x, lathe_activation activation,
                                      lathe_value_t *out) {
  const char *op = "FusedActivation";
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_FUSED_ACTIVATION, &x, 1, &n));
  LATHE_RETURN_IF_ERROR(check_float(op, x));
  LATHE_RETURN_IF_ERROR(lathe_act_check(op, activation, false));
  lathe_shape s = x->shape;
  if (lathe_act_form_of(activation) == LATHE_ACT_FORM_GLU) {
    char a[LATHE_SHAPE_STR_MAX];
    if (s.rank < 1 || s.dims[s.rank - 1] < 0 || s.dims[s.rank - 1] % 2)
      return LATHE_INVALID("%s: %s needs a static, even last axis, x has shape %s", op, lathe_act_name(activation),
                           lathe_shape_str(&s, a, sizeof a));
    s.dims[s.rank - 1] /= 2;
  }
  lathe_attr_set_fused_activation_activation(n, activation);
  n->shape = s;
  return lathe_node_commit(n, out);
}

/* Operands: [y], [x], dOutput. Attributes: i[0] = activation, i[1] = has y, i[2] = has x. */
lathe_status_t lathe_fused_activation_vjp(lathe_function_t fn, lathe_value_t y, lathe_value_t x, lathe_value_t d_output,
                                          lathe_activation activation, lathe_value_t *out) {
  const char *op = "FusedActivationVJP";
  if (!d_output) return LATHE_INVALID("%s: dOutput is NULL", op);
  LATHE_RETURN_IF_ERROR(lathe_act_check(op, activation, false));
  lathe_act_form form = lathe_act_form_of(activation);
  if (form != LATHE_ACT_FORM_Y && !x)
    return LATHE_INVALID("%s: activation %s (%d) needs x, which is NULL", op, lathe_act_name(activation), (int)activation);
  if (!x && !y) return LATHE_INVALID("%s: y and x are both NULL: one is needed", op);
  lathe_value_t operands[3];
  int n_ops = 0;
  if (y) operands[n_ops++] = y;
  if (x) operands[n_ops++] = x;
  operands[n_ops++] = d_output;
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_FUSED_ACTIVATION_VJP, operands, n_ops, &n));
  LATHE_RETURN_IF_ERROR(check_float(op, d_output));
  lathe_shape s = x ? x->shape : y->shape;
  if (form == LATHE_ACT_FORM_GLU) {
    char a[LATHE_SHAPE_STR_MAX];
    if (s.rank < 1 || s.dims[s.rank - 1] < 0 || s.dims[s.rank - 1] % 2)
      return LATHE_INVALID("%s: %s needs a static, even last axis, x has shape %s", op, lathe_act_name(activation),
                           lathe_shape_str(&s, a, sizeof a));
    lathe_shape half = s;
    half.dims[s.rank - 1] /= 2;
    LATHE_RETURN_IF_ERROR(check_like(op, "dOutput", d_output, "x with its last axis halved", &half));
    if (y) LATHE_RETURN_IF_ERROR(check_like(op, "y", y, "x with its last axis halved", &half));
  } else {
    LATHE_RETURN_IF_ERROR(check_like(op, "dOutput", d_output, x ? "x" : "y", &s));
    if (y && x) LATHE_RETURN_IF_ERROR(check_like(op, "y", y, "x", &s));
  }
  lathe_attr_set_fused_activation_vjp_activation(n, activation);
  lathe_attr_set_fused_activation_vjp_has_y(n, y != NULL);
  lathe_attr_set_fused_activation_vjp_has_x(n, x != NULL);
  n->shape = s;
  return lathe_node_commit(n, out);
}
