/* ops_fused.c -- builders of the fused ops: FusedSoftmax, FusedGelu, FusedLayerNorm, FusedDense.
 * The result shapes follow GoMLX's fused op definitions (compute/fused_ops.go). */
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

/* Attributes: i[0] = activation, i[1] = layout, i[2] = has bias. */
lathe_status_t lathe_fused_dense(lathe_function_t fn, lathe_value_t x, lathe_value_t weight, lathe_value_t bias,
                                 lathe_activation activation, lathe_dense_layout layout, lathe_value_t *out) {
  const char *op = "FusedDense";
  lathe_value_t operands[3] = {x, weight, bias};
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_FUSED_DENSE, operands, bias ? 3 : 2, &n));
  LATHE_RETURN_IF_ERROR(check_float(op, x));
  const lathe_shape *xs = &x->shape, *ws = &weight->shape;
  if ((int)activation < LATHE_ACTIVATION_NONE || activation > LATHE_ACTIVATION_TANH)
    return LATHE_INVALID("%s: unknown activation %d", op, (int)activation);
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
  lathe_attr_set_fused_dense_activation(n, activation);
  lathe_attr_set_fused_dense_layout(n, layout);
  lathe_attr_set_fused_dense_has_bias(n, bias != NULL);
  n->shape = s;
  return lathe_node_commit(n, out);
}
