/* ops_dot.c -- DotGeneral: validation and shape inference (GoMLX shapeinference.DotGeneral).
 * Attributes: op_attrs.def, dot_general; both dtypes are resolved (never INVALID). */
#include "graph.h"

#define OP "DotGeneral"

/* Checks one side's axis lists: in range, and no axis used twice (contracting and batch share
 * the "used" set, as an axis cannot be both). */
static lathe_status_t check_side(const char *side, const lathe_shape *s, const int *contr, int n_c,
                                 const int *batch, int n_b, bool used[LATHE_MAX_RANK]) {
  const int *lists[2] = {contr, batch};
  const int lens[2] = {n_c, n_b};
  const char *kinds[2] = {"contracting", "batch"};
  for (int l = 0; l < 2; l++) {
    if (lens[l] < 0) return LATHE_INVALID(OP ": %s %s axes count is negative (%d)", side, kinds[l], lens[l]);
    if (lens[l] > 0 && !lists[l]) return LATHE_INVALID(OP ": %s %s axes is NULL but has %d elements", side, kinds[l], lens[l]);
    for (int i = 0; i < lens[l]; i++) {
      int a = lists[l][i];
      if (a < 0 || a >= s->rank)
        return LATHE_INVALID(OP ": %s %s axis %d out of range for rank %d", side, kinds[l], a, s->rank);
      if (used[a]) return LATHE_INVALID(OP ": %s axis %d used more than once in contracting/batch axes", side, a);
      used[a] = true;
    }
  }
  return NULL;
}

static bool name_eq(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* Sizes of paired (contracting or batch) axes must agree; two dynamic axes must share a name. */
static lathe_status_t check_pairs(const char *kind, const lathe_shape *l, const int *la, const lathe_shape *r,
                                  const int *ra, int n) {
  for (int i = 0; i < n; i++) {
    int64_t ld = l->dims[la[i]], rd = r->dims[ra[i]];
    if (ld == -1 && rd == -1) {
      if (!name_eq(l->axis_names[la[i]], r->axis_names[ra[i]]))
        return LATHE_INVALID(OP ": lhs %s axis %d is dynamic \"%s\" but rhs %s axis %d is dynamic \"%s\"", kind, la[i],
                             l->axis_names[la[i]] ? l->axis_names[la[i]] : "", kind, ra[i],
                             r->axis_names[ra[i]] ? r->axis_names[ra[i]] : "");
    } else if (ld != -1 && rd != -1 && ld != rd) {
      return LATHE_INVALID(OP ": lhs %s axis %d has size %lld, rhs %s axis %d has size %lld", kind, la[i],
                           (long long)ld, kind, ra[i], (long long)rd);
    }
  }
  return NULL;
}

/* The dtype an operand dtype accumulates in when none is given. */
static lathe_dtype default_accumulator(lathe_dtype dt) {
  if (lathe_dtype_class_of(dt) == LATHE_CLASS_HALF) return LATHE_DTYPE_FLOAT32;
  return lathe_dtype_widened(dt);
}

static lathe_status_t check_config_dtype(const char *what, lathe_dtype dt) {
  if (dt == LATHE_DTYPE_INVALID) return NULL;
  if (!lathe_dtype_is_valid(dt)) return LATHE_INVALID(OP ": %s dtype %d is not a known dtype", what, (int)dt);
  if (dt == LATHE_DTYPE_BOOL) return LATHE_INVALID(OP ": %s dtype Bool is not numeric", what);
  return NULL;
}

/* v's Float16 or BFloat16 operand when v is that operand widened to Float32 in v's function;
 * NULL otherwise. */
static lathe_value_t widened_half(lathe_function_t fn, lathe_value_t v) {
  if (!v || v->fn != fn || v->op != LATHE_OP_CONVERT_DTYPE || v->shape.dtype != LATHE_DTYPE_FLOAT32) return NULL;
  lathe_dtype from = v->in[0]->shape.dtype;
  return from == LATHE_DTYPE_FLOAT16 || from == LATHE_DTYPE_BFLOAT16 ? v->in[0] : NULL;
}

lathe_status_t lathe_dot_general(lathe_function_t fn, lathe_value_t lhs, const int *lhs_contracting, int n_lc,
                                 const int *lhs_batch, int n_lb, lathe_value_t rhs, const int *rhs_contracting,
                                 int n_rc, const int *rhs_batch, int n_rb, const lathe_dot_config *config,
                                 lathe_value_t *out) {
  lathe_value_t ops[2] = {lhs, rhs};
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_check_fn(OP, fn));
  if (!out) return LATHE_INVALID(OP ": output pointer is NULL");
  /* A Float32 product of two halves widened to Float32 (GoMLX's gradient of a half product)
   * multiplies the halves with a Float32 accumulator instead: widening is exact, so every
   * product and Float32 sum is the same, while the device reads half the bytes and may use its
   * half-precision tensor cores (lathe:cuda's exact Float32 products cannot). The converts die
   * unless something else reads them. */
  lathe_value_t lh = widened_half(fn, lhs), rh = widened_half(fn, rhs);
  lathe_dtype want_acc = config ? config->accumulator_dtype : LATHE_DTYPE_INVALID;
  lathe_dtype want_out = config ? config->output_dtype : LATHE_DTYPE_INVALID;
  if (lh && rh && lh->shape.dtype == rh->shape.dtype &&
      (want_acc == LATHE_DTYPE_INVALID || want_acc == LATHE_DTYPE_FLOAT32) &&
      (want_out == LATHE_DTYPE_INVALID || want_out == LATHE_DTYPE_FLOAT32)) {
    const lathe_dot_config f32 = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT32};
    return lathe_dot_general(fn, lh, lhs_contracting, n_lc, lhs_batch, n_lb, rh, rhs_contracting, n_rc, rhs_batch,
                             n_rb, &f32, out);
  }
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_DOT_GENERAL, ops, 2, &n));
  const lathe_shape *l = &lhs->shape, *r = &rhs->shape;
  lathe_dtype dt = l->dtype;
  if (l->dtype != r->dtype)
    return LATHE_INVALID(OP ": lhs and rhs must have the same dtype, got lhs %s and rhs %s", lathe_dtype_name(l->dtype),
                         lathe_dtype_name(r->dtype));
  if (dt == LATHE_DTYPE_BOOL) return LATHE_INVALID(OP ": Bool operands are not supported (not numeric)");
  if (n_lc != n_rc)
    return LATHE_INVALID(OP ": lhs has %d contracting axes but rhs has %d", n_lc, n_rc);
  if (n_lb != n_rb) return LATHE_INVALID(OP ": lhs has %d batch axes but rhs has %d", n_lb, n_rb);

  bool lused[LATHE_MAX_RANK] = {0}, rused[LATHE_MAX_RANK] = {0};
  LATHE_RETURN_IF_ERROR(check_side("lhs", l, lhs_contracting, n_lc, lhs_batch, n_lb, lused));
  LATHE_RETURN_IF_ERROR(check_side("rhs", r, rhs_contracting, n_rc, rhs_batch, n_rb, rused));
  LATHE_RETURN_IF_ERROR(check_pairs("contracting", l, lhs_contracting, r, rhs_contracting, n_lc));
  LATHE_RETURN_IF_ERROR(check_pairs("batch", l, lhs_batch, r, rhs_batch, n_lb));

  lathe_dtype acc = config ? config->accumulator_dtype : LATHE_DTYPE_INVALID;
  lathe_dtype odt = config ? config->output_dtype : LATHE_DTYPE_INVALID;
  LATHE_RETURN_IF_ERROR(check_config_dtype("accumulator", acc));
  LATHE_RETURN_IF_ERROR(check_config_dtype("output", odt));
  if (acc != LATHE_DTYPE_INVALID && lathe_dtype_is_packed(acc))
    return LATHE_INVALID(OP ": accumulator dtype %s is not supported (sub-byte)", lathe_dtype_name(acc));
  if (acc == LATHE_DTYPE_INVALID) acc = default_accumulator(dt);
  if (odt == LATHE_DTYPE_INVALID) odt = dt;
  /* Dropping imaginary parts silently would be a trap: ask for Real() explicitly instead. */
  if (lathe_dtype_is_complex(dt) && !lathe_dtype_is_complex(acc))
    return LATHE_INVALID(OP ": accumulator dtype %s cannot hold %s operands", lathe_dtype_name(acc), lathe_dtype_name(dt));
  if (lathe_dtype_is_complex(acc) && !lathe_dtype_is_complex(odt))
    return LATHE_INVALID(OP ": output dtype %s cannot hold a %s accumulator", lathe_dtype_name(odt), lathe_dtype_name(acc));

  int rank = n_lb + (l->rank - n_lb - n_lc) + (r->rank - n_rb - n_rc);
  if (rank > LATHE_MAX_RANK)
    return LATHE_INVALID(OP ": result rank %d exceeds the maximum rank %d", rank, LATHE_MAX_RANK);
  lathe_shape s = {.dtype = odt, .rank = rank};
  int k = 0;
  for (int i = 0; i < n_lb; i++, k++) {
    int la = lhs_batch[i], ra = rhs_batch[i];
    bool ldyn = l->dims[la] == -1, rdyn = r->dims[ra] == -1;
    s.dims[k] = ldyn || rdyn ? -1 : l->dims[la];
    s.axis_names[k] = ldyn ? l->axis_names[la] : rdyn ? r->axis_names[ra] : (l->axis_names[la] ? l->axis_names[la] : r->axis_names[ra]);
  }
  for (int a = 0; a < l->rank; a++)
    if (!lused[a]) s.dims[k] = l->dims[a], s.axis_names[k++] = l->axis_names[a];
  for (int a = 0; a < r->rank; a++)
    if (!rused[a]) s.dims[k] = r->dims[a], s.axis_names[k++] = r->axis_names[a];

  LATHE_RETURN_IF_ERROR(lathe_attr_set_dot_general_lhs_contracting_int(n, lhs_contracting, n_lc));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dot_general_lhs_batch_int(n, lhs_batch, n_lb));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dot_general_rhs_contracting_int(n, rhs_contracting, n_rc));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dot_general_rhs_batch_int(n, rhs_batch, n_rb));
  lathe_attr_set_dot_general_accumulator(n, acc);
  lathe_attr_set_dot_general_output(n, odt);
  n->shape = s;
  return lathe_node_commit(n, out);
}
