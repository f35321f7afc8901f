/* ops_window.c -- builders and shape rules of the WINDOW family: ReduceWindow and
 * SelectAndScatterMax/Min, after GoMLX's shapeinference.ReduceWindow / SelectAndScatter.
 *
 * Attributes: op_attrs.def, group window (normalised: one entry per operand axis, defaults
 * filled in).
 * Operands: ReduceWindow (x); SelectAndScatter* (operand, source). */
#include "graph.h"

#define MAX_ATTR ((int64_t)1 << 32) /* bound that keeps size arithmetic inside int64 */

typedef struct window {
  int64_t dims[LATHE_MAX_RANK], strides[LATHE_MAX_RANK], idil[LATHE_MAX_RANK], wdil[LATHE_MAX_RANK];
  int64_t pads[2 * LATHE_MAX_RANK];
} window;

static lathe_status_t opt_list(const char *op, const char *what, const int64_t *v, int n, int rank, const int64_t *def,
                               int64_t *dst) {
  if (n < 0) return LATHE_INVALID("%s: %s has negative length %d", op, what, n);
  if (n != 0 && n != rank)
    return LATHE_INVALID("%s: %s has %d entries, but the operand has rank %d", op, what, n, rank);
  if (n && !v) return LATHE_INVALID("%s: %s is NULL but has %d entries", op, what, n);
  for (int i = 0; i < rank; i++) {
    dst[i] = n ? v[i] : (def ? def[i] : 1);
    if (dst[i] < 1) return LATHE_INVALID("%s: %s[%d]=%lld must be >= 1", op, what, i, (long long)dst[i]);
    if (dst[i] > MAX_ATTR) return LATHE_INVALID("%s: %s[%d]=%lld is too large", op, what, i, (long long)dst[i]);
  }
  return NULL;
}

/* Normalises params for an operand of shape xs and infers the reduced shape into *rs. */
static lathe_status_t infer_window(const char *op, const lathe_shape *xs, const lathe_window_params *p, window *w,
                                   lathe_shape *rs) {
  static const lathe_window_params none;
  if (!p) p = &none;
  int rank = xs->rank;
  char b1[LATHE_SHAPE_STR_MAX];
  LATHE_RETURN_IF_ERROR(opt_list(op, "window_dims", p->window_dims, p->n_window_dims, rank, NULL, w->dims));
  LATHE_RETURN_IF_ERROR(opt_list(op, "strides", p->strides, p->n_strides, rank, w->dims, w->strides));
  if (p->n_paddings != 0 && p->n_paddings != rank)
    return LATHE_INVALID("%s: paddings has %d entries, but the operand has rank %d", op, p->n_paddings, rank);
  if (p->n_paddings && !p->paddings) return LATHE_INVALID("%s: paddings is NULL", op);
  LATHE_RETURN_IF_ERROR(opt_list(op, "input_dilations", p->input_dilations, p->n_input_dilations, rank, NULL, w->idil));
  LATHE_RETURN_IF_ERROR(
      opt_list(op, "window_dilations", p->window_dilations, p->n_window_dilations, rank, NULL, w->wdil));
  *rs = *xs;
  for (int i = 0; i < rank; i++) {
    int64_t lo = p->n_paddings ? p->paddings[i].low : 0, hi = p->n_paddings ? p->paddings[i].high : 0;
    if (lo < 0 || hi < 0)
      return LATHE_INVALID("%s: paddings[%d]=[%lld, %lld] must be non-negative for operand %s", op, i, (long long)lo,
                           (long long)hi, lathe_shape_str(xs, b1, sizeof b1));
    if (lo > MAX_ATTR || hi > MAX_ATTR)
      return LATHE_INVALID("%s: paddings[%d]=[%lld, %lld] is too large", op, i, (long long)lo, (long long)hi);
    w->pads[2 * i] = lo, w->pads[2 * i + 1] = hi;
    int64_t d = xs->dims[i];
    if (d == -1) {
      if (w->dims[i] != 1 || w->strides[i] != 1 || lo || hi || w->idil[i] != 1 || w->wdil[i] != 1)
        return LATHE_INVALID("%s: axis %d (\"%s\") is dynamic; a window that changes its size is not supported", op,
                             i, xs->axis_names[i] ? xs->axis_names[i] : "");
      continue;
    }
    /* Dilated sizes stay below the size limit (paddings are bounded too), so the kernels'
     * positions fit in int64. */
    int64_t eff_in, eff_w;
    if (lathe_mul_overflow(d - 1, w->idil[i], &eff_in) || lathe_mul_overflow(w->dims[i] - 1, w->wdil[i], &eff_w) ||
        eff_in >= LATHE_MAX_TENSOR_SIZE || eff_w >= LATHE_MAX_TENSOR_SIZE)
      return LATHE_INVALID("%s: the dilated sizes of axis %d (input %lld, input dilation %lld, window %lld, window "
                           "dilation %lld) exceed the size limit for operand %s", op, i, (long long)d,
                           (long long)w->idil[i], (long long)w->dims[i], (long long)w->wdil[i],
                           lathe_shape_str(xs, b1, sizeof b1));
    eff_in += 1, eff_w += 1;
    int64_t padded = eff_in + lo + hi;
    if (eff_w > padded)
      return LATHE_INVALID("%s: effective window size %lld of axis %d is larger than the padded effective input size "
                           "%lld (input %lld, input dilation %lld, window %lld, window dilation %lld, padding [%lld, "
                           "%lld]) for operand %s", op, (long long)eff_w, i, (long long)padded, (long long)d,
                           (long long)w->idil[i], (long long)w->dims[i], (long long)w->wdil[i], (long long)lo,
                           (long long)hi, lathe_shape_str(xs, b1, sizeof b1));
    rs->dims[i] = (padded - eff_w) / w->strides[i] + 1;
  }
  return NULL;
}

static lathe_status_t set_window_attrs(lathe_node *n, const window *w, int rank) {
  LATHE_RETURN_IF_ERROR(lathe_attr_set_window_dims(n, w->dims, rank));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_window_strides(n, w->strides, rank));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_window_input_dilations(n, w->idil, rank));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_window_window_dilations(n, w->wdil, rank));
  return lathe_attr_set_window_paddings(n, w->pads, 2 * rank);
}

static bool real_number_dtype(lathe_dtype dt) { return lathe_dtype_is_int(dt) || lathe_dtype_is_float(dt); }

lathe_status_t lathe_reduce_window(lathe_function_t fn, lathe_op reduction, lathe_value_t x,
                                   const lathe_window_params *params, lathe_value_t *out) {
  const char *op = "ReduceWindow";
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_REDUCE_WINDOW, &x, 1, &n));
  if (reduction != LATHE_OP_REDUCE_SUM && reduction != LATHE_OP_REDUCE_PRODUCT && reduction != LATHE_OP_REDUCE_MAX &&
      reduction != LATHE_OP_REDUCE_MIN)
    return LATHE_INVALID("%s: reduction must be ReduceSum, ReduceProduct, ReduceMax or ReduceMin, got %s", op,
                         lathe_op_name(reduction));
  /* Bool windows take Max (any) and Min (all): GoMLX's DropBlock min-pools a mask. */
  if (x->shape.dtype == LATHE_DTYPE_BOOL) {
    if (reduction != LATHE_OP_REDUCE_MAX && reduction != LATHE_OP_REDUCE_MIN)
      return LATHE_INVALID("%s: Bool takes ReduceMax or ReduceMin only, got %s", op, lathe_op_name(reduction));
  } else if (!real_number_dtype(x->shape.dtype)) {
    return LATHE_INVALID("%s: dtype %s is not supported (integers, floats, and Bool with ReduceMax/ReduceMin)", op,
                         lathe_dtype_name(x->shape.dtype));
  }
  window w;
  LATHE_RETURN_IF_ERROR(infer_window(op, &x->shape, params, &w, &n->shape));
  lathe_attr_set_window_reduction(n, reduction);
  LATHE_RETURN_IF_ERROR(set_window_attrs(n, &w, x->shape.rank));
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_select_and_scatter(lathe_function_t fn, lathe_op op_type, lathe_value_t operand,
                                        lathe_value_t source, const lathe_window_params *params,
                                        lathe_value_t *out) {
  if (op_type == LATHE_OP_SELECT_AND_SCATTER_SUM)
    return LATHE_UNIMPL("SelectAndScatterSum: GoMLX's compute API defines no builder for it (deprecated there)");
  if (op_type != LATHE_OP_SELECT_AND_SCATTER_MAX && op_type != LATHE_OP_SELECT_AND_SCATTER_MIN)
    return LATHE_INVALID("SelectAndScatter: op must be SelectAndScatterMax or SelectAndScatterMin, got %s",
                         lathe_op_name(op_type));
  const char *op = lathe_op_name(op_type);
  lathe_value_t ops[2] = {operand, source};
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, op_type, ops, 2, &n));
  const lathe_shape *xs = &operand->shape, *ss = &source->shape;
  char b1[LATHE_SHAPE_STR_MAX], b2[LATHE_SHAPE_STR_MAX], b3[LATHE_SHAPE_STR_MAX];
  if (xs->dtype != ss->dtype)
    return LATHE_INVALID("%s: operand dtype %s does not match source dtype %s", op, lathe_dtype_name(xs->dtype),
                         lathe_dtype_name(ss->dtype));
  if (!real_number_dtype(xs->dtype))
    return LATHE_INVALID("%s: dtype %s is not supported (integers and floats only)", op, lathe_dtype_name(xs->dtype));
  if (params && (params->n_input_dilations || params->n_window_dilations))
    return LATHE_INVALID("%s: takes no input or window dilations", op);
  window w;
  lathe_shape want;
  LATHE_RETURN_IF_ERROR(infer_window(op, xs, params, &w, &want));
  bool same = ss->rank == want.rank;
  for (int i = 0; same && i < want.rank; i++) same = lathe_same_axis(ss, i, &want, i); /* names too */
  if (!same)
    return LATHE_INVALID("%s: source shape %s does not match the windows' shape %s for operand %s", op,
                         lathe_shape_str(ss, b1, sizeof b1), lathe_shape_str(&want, b2, sizeof b2),
                         lathe_shape_str(xs, b3, sizeof b3));
  n->shape = *xs;
  LATHE_RETURN_IF_ERROR(set_window_attrs(n, &w, xs->rank));
  return lathe_node_commit(n, out);
}
