/* ops_index.c -- builders and shape rules of the INDEX family: Gather, ScatterSum/Max/Min,
 * DynamicSlice, DynamicUpdateSlice. The rules follow GoMLX's shapeinference (XLA's general
 * gather/scatter), plus the XLA constraints GoMLX leaves to the backend (integer indices,
 * distinct axis lists, scatter batch sizes matching) because the kernels rely on them.
 *
 * Attributes: op_attrs.def, groups gather, scatter and dynamic_slice (DynamicUpdateSlice has none).
 * Operands: Gather (operand, start_indices); Scatter* (operand, indices, updates);
 * DynamicSlice (operand, start_0..start_{r-1}); DynamicUpdateSlice (operand, update, start_0..). */
#include "graph.h"

/* Checks that list (of len entries) holds distinct values in [0, limit); names list in errors. */
static lathe_status_t check_axis_list(const char *op, const char *what, const int *list, int len, int limit) {
  if (len < 0) return LATHE_INVALID("%s: %s has negative length %d", op, what, len);
  if (len > 0 && !list) return LATHE_INVALID("%s: %s is NULL but has %d entries", op, what, len);
  if (len > LATHE_MAX_RANK) return LATHE_INVALID("%s: %s has %d entries, more than the maximum rank %d", op, what, len, LATHE_MAX_RANK);
  for (int i = 0; i < len; i++) {
    if (list[i] < 0 || list[i] >= limit)
      return LATHE_INVALID("%s: %s[%d]=%d is out of range [0, %d)", op, what, i, list[i], limit);
    for (int j = 0; j < i; j++)
      if (list[j] == list[i]) return LATHE_INVALID("%s: %s lists axis %d twice", op, what, list[i]);
  }
  return NULL;
}

static bool in_list(const int *list, int len, int v) {
  for (int i = 0; i < len; i++)
    if (list[i] == v) return true;
  return false;
}

static lathe_status_t check_index_dtype(const char *op, const char *what, const lathe_shape *s) {
  if (!lathe_dtype_is_int(s->dtype))
    return LATHE_INVALID("%s: %s must have an integer dtype, got %s", op, what, lathe_dtype_name(s->dtype));
  return NULL;
}

/* Size of the index vector of an indices shape (1 when index_vector_axis == rank). */
static int64_t index_vector_size(const lathe_shape *idx, int iva) { return iva == idx->rank ? 1 : idx->dims[iva]; }

lathe_status_t lathe_gather(lathe_function_t fn, lathe_value_t operand, lathe_value_t start_indices,
                            int index_vector_axis, const int *offset_output_axes, int n_offset_output_axes,
                            const int *collapsed_slice_axes, int n_collapsed_slice_axes, const int *start_index_map,
                            int n_start_index_map, const int64_t *slice_sizes, int n_slice_sizes,
                            bool indices_are_sorted, lathe_value_t *out) {
  const char *op = "Gather";
  lathe_value_t ops[2] = {operand, start_indices};
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_GATHER, ops, 2, &n));
  const lathe_shape *os = &operand->shape, *is = &start_indices->shape;
  char b1[LATHE_SHAPE_STR_MAX], b2[LATHE_SHAPE_STR_MAX];
  if (os->rank == 0) return LATHE_INVALID("%s: requires a non-scalar operand, got %s", op, lathe_shape_str(os, b1, sizeof b1));
  LATHE_RETURN_IF_ERROR(check_index_dtype(op, "start_indices", is));
  LATHE_RETURN_IF_ERROR(check_axis_list(op, "collapsed_slice_axes", collapsed_slice_axes, n_collapsed_slice_axes, os->rank));
  if (n_slice_sizes != os->rank)
    return LATHE_INVALID("%s: slice_sizes has %d entries, but the operand %s has rank %d", op, n_slice_sizes,
                         lathe_shape_str(os, b1, sizeof b1), os->rank);
  if (n_slice_sizes > 0 && !slice_sizes) return LATHE_INVALID("%s: slice_sizes is NULL", op);
  int64_t sizes[LATHE_MAX_RANK];
  for (int a = 0; a < os->rank; a++) {
    int64_t s = slice_sizes[a], d = os->dims[a];
    if (s == -1 && d != -1) s = d; /* -1: the whole axis */
    if (s < -1)
      return LATHE_INVALID("%s: slice size %lld for axis %d is negative", op, (long long)slice_sizes[a], a);
    if (d != -1 && s > d)
      return LATHE_INVALID("%s: slice size %lld for axis %d is larger than the operand's dimension %lld", op,
                           (long long)s, a, (long long)d);
    sizes[a] = s;
  }
  for (int i = 0; i < n_collapsed_slice_axes; i++)
    if (sizes[collapsed_slice_axes[i]] != 1)
      return LATHE_INVALID("%s: collapsed slice axis %d must have slice size 1, got %lld", op, collapsed_slice_axes[i],
                           (long long)sizes[collapsed_slice_axes[i]]);
  if (os->rank != n_collapsed_slice_axes + n_offset_output_axes)
    return LATHE_INVALID("%s: collapsed_slice_axes (%d) + offset_output_axes (%d) must be the operand's rank (%d)", op,
                         n_collapsed_slice_axes, n_offset_output_axes, os->rank);
  if (index_vector_axis < 0 || index_vector_axis > is->rank)
    return LATHE_INVALID("%s: index_vector_axis=%d is out of range [0, %d] for start_indices %s", op, index_vector_axis,
                         is->rank, lathe_shape_str(is, b2, sizeof b2));
  int64_t nvec = index_vector_size(is, index_vector_axis);
  if (n_start_index_map != nvec)
    return LATHE_INVALID("%s: start_index_map has %d entries, but the index vector axis %d of start_indices %s has size %lld",
                         op, n_start_index_map, index_vector_axis, lathe_shape_str(is, b2, sizeof b2), (long long)nvec);
  LATHE_RETURN_IF_ERROR(check_axis_list(op, "start_index_map", start_index_map, n_start_index_map, os->rank));
  int batch_rank = index_vector_axis == is->rank ? is->rank : is->rank - 1;
  int out_rank = batch_rank + n_offset_output_axes;
  if (out_rank > LATHE_MAX_RANK)
    return LATHE_INVALID("%s: the result would have rank %d, more than %d", op, out_rank, LATHE_MAX_RANK);
  LATHE_RETURN_IF_ERROR(check_axis_list(op, "offset_output_axes", offset_output_axes, n_offset_output_axes, out_rank));

  /* Result: offset axes take the non-collapsed operand axes in order, the others take the
   * batch axes of start_indices in order. Names survive where the size is unchanged. */
  lathe_shape r;
  memset(&r, 0, sizeof r);
  r.dtype = os->dtype;
  r.rank = out_rank;
  int next_operand = 0, next_batch = 0;
  for (int axis = 0; axis < out_rank; axis++) {
    if (in_list(offset_output_axes, n_offset_output_axes, axis)) {
      while (in_list(collapsed_slice_axes, n_collapsed_slice_axes, next_operand)) next_operand++;
      r.dims[axis] = sizes[next_operand];
      if (sizes[next_operand] == os->dims[next_operand]) r.axis_names[axis] = os->axis_names[next_operand];
      next_operand++;
    } else {
      if (next_batch == index_vector_axis) next_batch++;
      r.dims[axis] = is->dims[next_batch];
      r.axis_names[axis] = is->axis_names[next_batch];
      next_batch++;
    }
  }
  n->shape = r;
  lathe_attr_set_gather_index_vector_axis(n, index_vector_axis);
  lathe_attr_set_gather_indices_are_sorted(n, indices_are_sorted);
  LATHE_RETURN_IF_ERROR(lathe_attr_set_gather_offset_output_axes_int(n, offset_output_axes, n_offset_output_axes));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_gather_collapsed_slice_axes_int(n, collapsed_slice_axes, n_collapsed_slice_axes));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_gather_start_index_map_int(n, start_index_map, n_start_index_map));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_gather_slice_sizes(n, sizes, os->rank));
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_scatter(lathe_function_t fn, lathe_op scatter_op, lathe_value_t operand, lathe_value_t indices,
                             lathe_value_t updates, int index_vector_axis, const int *update_window_axes, int n_update_window_axes,
                             const int *inserted_window_axes, int n_inserted_window_axes,
                             const int *scatter_axes_to_operand_axes, int n_scatter_axes, bool indices_are_sorted,
                             bool unique_indices, lathe_value_t *out) {
  if (scatter_op != LATHE_OP_SCATTER_SUM && scatter_op != LATHE_OP_SCATTER_MAX && scatter_op != LATHE_OP_SCATTER_MIN)
    return LATHE_INVALID("Scatter: op %s is not one of ScatterSum, ScatterMax, ScatterMin", lathe_op_name(scatter_op));
  const char *op = lathe_op_name(scatter_op);
  lathe_value_t ops[3] = {operand, indices, updates};
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, scatter_op, ops, 3, &n));
  const lathe_shape *os = &operand->shape, *is = &indices->shape, *us = &updates->shape;
  char b1[LATHE_SHAPE_STR_MAX], b2[LATHE_SHAPE_STR_MAX];
  if (os->dtype != us->dtype)
    return LATHE_INVALID("%s: operand %s and updates %s must have the same dtype", op, lathe_shape_str(os, b1, sizeof b1),
                         lathe_shape_str(us, b2, sizeof b2));
  LATHE_RETURN_IF_ERROR(check_index_dtype(op, "indices", is));
  if (index_vector_axis < 0 || index_vector_axis > is->rank)
    return LATHE_INVALID("%s: index_vector_axis=%d is out of range [0, %d] for indices %s", op, index_vector_axis,
                         is->rank, lathe_shape_str(is, b1, sizeof b1));
  int64_t nvec = index_vector_size(is, index_vector_axis);
  if (nvec != -1 && n_scatter_axes != nvec)
    return LATHE_INVALID("%s: scatter_axes_to_operand_axes has %d entries, but the index vector axis %d of indices %s has size %lld",
                         op, n_scatter_axes, index_vector_axis, lathe_shape_str(is, b1, sizeof b1), (long long)nvec);
  if (nvec == -1) return LATHE_INVALID("%s: the index vector axis %d of indices must not be dynamic", op, index_vector_axis);
  LATHE_RETURN_IF_ERROR(check_axis_list(op, "scatter_axes_to_operand_axes", scatter_axes_to_operand_axes, n_scatter_axes, os->rank));
  LATHE_RETURN_IF_ERROR(check_axis_list(op, "update_window_axes", update_window_axes, n_update_window_axes, us->rank));
  int batch_rank = index_vector_axis == is->rank ? is->rank : is->rank - 1;
  if (n_update_window_axes + batch_rank != us->rank)
    return LATHE_INVALID("%s: update_window_axes (%d) + batch axes of indices (%d) must be the rank of updates %s (%d)", op,
                         n_update_window_axes, batch_rank, lathe_shape_str(us, b1, sizeof b1), us->rank);
  if (n_update_window_axes + n_inserted_window_axes != os->rank)
    return LATHE_INVALID("%s: update_window_axes (%d) + inserted_window_axes (%d) must be the operand's rank (%d)", op,
                         n_update_window_axes, n_inserted_window_axes, os->rank);
  LATHE_RETURN_IF_ERROR(check_axis_list(op, "inserted_window_axes", inserted_window_axes, n_inserted_window_axes, os->rank));
  /* Window axes of updates map in order to the operand axes that are not inserted. */
  int oa = 0;
  for (int i = 0; i < n_update_window_axes; i++, oa++) {
    while (in_list(inserted_window_axes, n_inserted_window_axes, oa)) oa++;
    int64_t ud = us->dims[update_window_axes[i]], od = os->dims[oa];
    if (ud != -1 && od != -1 && ud > od)
      return LATHE_INVALID("%s: updates axis %d has size %lld, larger than operand axis %d (%lld): the window does not fit",
                           op, update_window_axes[i], (long long)ud, oa, (long long)od);
  }
  /* Batch axes of updates (the non-window ones, in order) pair with those of indices. */
  int ib = 0;
  for (int ua = 0; ua < us->rank; ua++) {
    if (in_list(update_window_axes, n_update_window_axes, ua)) continue;
    if (ib == index_vector_axis) ib++;
    int64_t ud = us->dims[ua], id = is->dims[ib];
    if (ud != id)
      return LATHE_INVALID("%s: updates batch axis %d has size %lld, but the matching indices axis %d has size %lld", op, ua,
                           (long long)ud, ib, (long long)id);
    ib++;
  }
  n->shape = *os;
  lathe_attr_set_scatter_index_vector_axis(n, index_vector_axis);
  lathe_attr_set_scatter_indices_are_sorted(n, indices_are_sorted);
  lathe_attr_set_scatter_unique_indices(n, unique_indices);
  LATHE_RETURN_IF_ERROR(lathe_attr_set_scatter_update_window_axes_int(n, update_window_axes, n_update_window_axes));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_scatter_inserted_window_axes_int(n, inserted_window_axes, n_inserted_window_axes));
  LATHE_RETURN_IF_ERROR(
      lathe_attr_set_scatter_scatter_axes_to_operand_axes_int(n, scatter_axes_to_operand_axes, n_scatter_axes));
  return lathe_node_commit(n, out);
}

#define SCATTER_WRAPPER(name, OP)                                                                                   \
  lathe_status_t lathe_##name(lathe_function_t fn, lathe_value_t operand, lathe_value_t indices, lathe_value_t updates, \
                              int index_vector_axis, const int *update_window_axes, int n_update_window_axes,        \
                              const int *inserted_window_axes, int n_inserted_window_axes,                           \
                              const int *scatter_axes_to_operand_axes, int n_scatter_axes, bool indices_are_sorted, \
                              bool unique_indices, lathe_value_t *out) {                                             \
    return lathe_scatter(fn, LATHE_OP_##OP, operand, indices, updates, index_vector_axis, update_window_axes,         \
                         n_update_window_axes, inserted_window_axes, n_inserted_window_axes,                         \
                         scatter_axes_to_operand_axes, n_scatter_axes, indices_are_sorted, unique_indices, out);     \
  }
SCATTER_WRAPPER(scatter_sum, SCATTER_SUM)
SCATTER_WRAPPER(scatter_max, SCATTER_MAX)
SCATTER_WRAPPER(scatter_min, SCATTER_MIN)
#undef SCATTER_WRAPPER

/* Operands of the dynamic ops: the leading values, then one start index per operand axis. */
static lathe_status_t dynamic_operands(const char *op, lathe_value_t *lead, int n_lead, const lathe_value_t *starts,
                                       int n_starts, lathe_value_t *all) {
  if (n_starts < 0 || n_starts > LATHE_MAX_RANK)
    return LATHE_INVALID("%s: %d start indices, expected one per operand axis (at most %d)", op, n_starts, LATHE_MAX_RANK);
  if (n_starts > 0 && !starts) return LATHE_INVALID("%s: start_indices is NULL", op);
  for (int i = 0; i < n_lead; i++) all[i] = lead[i];
  for (int i = 0; i < n_starts; i++) all[n_lead + i] = starts[i];
  return NULL;
}

/* Start indices are one integer scalar per operand axis, or (XLA's other form, which GoMLX's
 * graph tests use) a single 1-D integer value holding all of them. */
static lathe_status_t check_starts(const char *op, const lathe_node *n, int first, int rank) {
  char b[LATHE_SHAPE_STR_MAX];
  if (n->n_operands - first == 1 && n->in[first]->shape.rank == 1) {
    const lathe_shape *s = &n->in[first]->shape;
    if (!lathe_dtype_is_int(s->dtype) || s->dims[0] != rank)
      return LATHE_INVALID("%s: start indices %s must be an integer vector of length %d (one per operand axis)", op,
                           lathe_shape_str(s, b, sizeof b), rank);
    return NULL;
  }
  if (n->n_operands - first != rank)
    return LATHE_INVALID("%s: got %d start indices, the operand %s needs one per axis (%d)", op, n->n_operands - first,
                         lathe_shape_str(&n->in[0]->shape, b, sizeof b), rank);
  for (int i = first; i < n->n_operands; i++) {
    const lathe_shape *s = &n->in[i]->shape;
    if (s->rank != 0 || !lathe_dtype_is_int(s->dtype))
      return LATHE_INVALID("%s: start index %d must be an integer scalar, got %s", op, i - first,
                           lathe_shape_str(s, b, sizeof b));
  }
  return NULL;
}

lathe_status_t lathe_dynamic_slice(lathe_function_t fn, lathe_value_t operand, const lathe_value_t *start_indices,
                                   int n_start_indices, const int64_t *slice_dims, int n_slice_dims, lathe_value_t *out) {
  const char *op = "DynamicSlice";
  lathe_value_t all[LATHE_MAX_RANK + 1];
  LATHE_RETURN_IF_ERROR(dynamic_operands(op, &operand, 1, start_indices, n_start_indices, all));
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_DYNAMIC_SLICE, all, 1 + n_start_indices, &n));
  const lathe_shape *os = &operand->shape;
  char b[LATHE_SHAPE_STR_MAX];
  if (n_slice_dims != os->rank)
    return LATHE_INVALID("%s: slice_dims has %d entries, but the operand %s has rank %d", op, n_slice_dims,
                         lathe_shape_str(os, b, sizeof b), os->rank);
  if (n_slice_dims > 0 && !slice_dims) return LATHE_INVALID("%s: slice_dims is NULL", op);
  LATHE_RETURN_IF_ERROR(check_starts(op, n, 1, os->rank));
  lathe_shape r;
  memset(&r, 0, sizeof r);
  r.dtype = os->dtype;
  r.rank = os->rank;
  for (int a = 0; a < os->rank; a++) {
    int64_t s = slice_dims[a], d = os->dims[a];
    if (s < 0) return LATHE_INVALID("%s: slice size %lld for axis %d is negative", op, (long long)s, a);
    if (d != -1 && s > d)
      return LATHE_INVALID("%s: slice size %lld for axis %d is larger than the operand's dimension %lld", op, (long long)s,
                           a, (long long)d);
    r.dims[a] = s;
    if (s == d) r.axis_names[a] = os->axis_names[a];
  }
  n->shape = r;
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dynamic_slice_slice_dims(n, slice_dims, os->rank));
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_dynamic_update_slice(lathe_function_t fn, lathe_value_t operand, lathe_value_t update,
                                          const lathe_value_t *start_indices, int n_start_indices, lathe_value_t *out) {
  const char *op = "DynamicUpdateSlice";
  lathe_value_t all[LATHE_MAX_RANK + 2];
  lathe_value_t lead[2] = {operand, update};
  LATHE_RETURN_IF_ERROR(dynamic_operands(op, lead, 2, start_indices, n_start_indices, all));
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_DYNAMIC_UPDATE_SLICE, all, 2 + n_start_indices, &n));
  const lathe_shape *os = &operand->shape, *us = &update->shape;
  char b1[LATHE_SHAPE_STR_MAX], b2[LATHE_SHAPE_STR_MAX];
  if (os->dtype != us->dtype)
    return LATHE_INVALID("%s: operand %s and update %s must have the same dtype", op, lathe_shape_str(os, b1, sizeof b1),
                         lathe_shape_str(us, b2, sizeof b2));
  if (os->rank != us->rank)
    return LATHE_INVALID("%s: operand %s and update %s must have the same rank", op, lathe_shape_str(os, b1, sizeof b1),
                         lathe_shape_str(us, b2, sizeof b2));
  /* XLA requires the update to fit; the start clamp [0, dim - size] depends on it. */
  for (int a = 0; a < os->rank; a++)
    if (os->dims[a] != -1 && (us->dims[a] == -1 || us->dims[a] > os->dims[a]))
      return LATHE_INVALID("%s: update %s does not fit in operand %s along axis %d", op, lathe_shape_str(us, b2, sizeof b2),
                           lathe_shape_str(os, b1, sizeof b1), a);
  LATHE_RETURN_IF_ERROR(check_starts(op, n, 2, os->rank));
  n->shape = *os;
  return lathe_node_commit(n, out);
}
