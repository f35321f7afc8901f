/* ops_control.c -- builders of the control-flow ops (Call, While, If, Sort) and the barriers
 * (OptimizationBarrier, SchedulingBarrier).
 *
 * Attributes: op_attrs.def -- the sub-functions (Call: callee; While: cond, body; If: true and
 * false branch; Sort: comparator, with axis and is_stable).
 * Values a sub-function captures become hidden inputs of the node (lathe_node_add_captures), so
 * they stay alive in the caller until the node has run. Captures are added only once every
 * check has passed, so a rejected op leaves no stray capture behind. */
#include "graph.h"

static const char *shape_str(const lathe_shape *s, char *buf) { return lathe_shape_str(s, buf, LATHE_SHAPE_STR_MAX); }

/* A sub-function is usable from fn when it has returned and is top-level (sees no caller
 * values) or a closure of fn or of one of fn's ancestors (its captures are visible in fn). */
static lathe_status_t check_sub(const char *op, lathe_function *fn, lathe_function *sub, const char *what) {
  if (!sub) return LATHE_INVALID("%s: %s is NULL", op, what);
  if (sub->builder != fn->builder) return LATHE_INVALID("%s: %s \"%s\" belongs to another builder", op, what, sub->name);
  if (sub == fn) return LATHE_INVALID("%s: %s \"%s\" is the calling function itself", op, what, sub->name);
  if (!sub->returned) return LATHE_INVALID("%s: %s \"%s\" has not returned yet (call Return first)", op, what, sub->name);
  if (!sub->parent) return NULL;
  for (lathe_function *f = fn; f; f = f->parent)
    if (f == sub->parent) return NULL;
  return LATHE_INVALID("%s: %s \"%s\" is a closure of \"%s\", which is not \"%s\" nor one of its parents", op, what,
                       sub->name, sub->parent->name, fn->name);
}

static lathe_status_t check_outs(const char *op, lathe_value_t *out_values, int needed, int max_outputs, int *out_n) {
  if (!out_n) return LATHE_INVALID("%s: out_n is NULL", op);
  if (needed > 0 && !out_values) return LATHE_INVALID("%s: out_values is NULL", op);
  if (needed > max_outputs)
    return LATHE_INVALID("%s: the op has %d results, out_values has room for %d", op, needed, max_outputs);
  return NULL;
}

/* Gives n the shapes of values[0..count) as its results. */
static lathe_status_t set_outputs_from(lathe_node *n, lathe_node *const *values, int count) {
  lathe_shape one;
  lathe_shape *shapes = count > 1 ? malloc(sizeof(lathe_shape) * (size_t)count) : &one;
  if (!shapes) return LATHE_OOM(lathe_op_name(n->op));
  memset(&one, 0, sizeof one);
  for (int i = 0; i < count; i++) shapes[i] = values[i]->shape;
  lathe_status_t st = lathe_node_set_outputs(n, shapes, count);
  if (shapes != &one) free(shapes);
  return st;
}

/* Checks that fn's parameters have the shapes of values (what: "cond", "body", ...). */
static lathe_status_t check_params(const char *op, const lathe_function *sub, const char *what, lathe_node *const *values,
                                   int n, const char *value_what) {
  if (sub->n_params != n)
    return LATHE_INVALID("%s: %s \"%s\" takes %d parameters, want %d (one per %s)", op, what, sub->name, sub->n_params,
                         n, value_what);
  for (int i = 0; i < n; i++)
    if (!lathe_same_shape(&sub->params[i]->shape, &values[i]->shape)) {
      char a[LATHE_SHAPE_STR_MAX], b[LATHE_SHAPE_STR_MAX];
      return LATHE_INVALID("%s: %s parameter %d has shape %s, %s %d is %s", op, what, i,
                           shape_str(&sub->params[i]->shape, a), value_what, i, shape_str(&values[i]->shape, b));
    }
  return NULL;
}

static lathe_status_t check_scalar_bool_output(const char *op, const lathe_function *sub, const char *what) {
  if (sub->n_outputs != 1)
    return LATHE_INVALID("%s: %s must return one scalar Bool, it returns %d values", op, what, sub->n_outputs);
  const lathe_shape *s = &sub->outputs[0]->shape;
  if (s->rank != 0 || s->dtype != LATHE_DTYPE_BOOL) {
    char a[LATHE_SHAPE_STR_MAX];
    return LATHE_INVALID("%s: %s must return a scalar Bool, it returns %s", op, what, shape_str(s, a));
  }
  return NULL;
}

/* Adds the captures of the node's sub-functions f0 and f1 (set as its attributes). */
static lathe_status_t finish(lathe_node *n, lathe_function *f0, lathe_function *f1, lathe_value_t *out_values,
                             int *out_n) {
  if (f0) LATHE_RETURN_IF_ERROR(lathe_node_add_captures(n, f0));
  if (f1 && f1 != f0) LATHE_RETURN_IF_ERROR(lathe_node_add_captures(n, f1));
  LATHE_RETURN_IF_ERROR(lathe_node_commit_multi(n, out_values));
  if (out_n) *out_n = n->n_out;
  return NULL;
}

lathe_status_t lathe_call(lathe_function_t fn, lathe_function_t callee, const lathe_value_t *inputs, int n_inputs,
                          lathe_value_t *out_values, int max_outputs, int *out_n) {
  LATHE_RETURN_IF_ERROR(lathe_check_fn("Call", fn));
  if (n_inputs < 0) return LATHE_INVALID("Call: negative number of inputs %d", n_inputs);
  LATHE_RETURN_IF_ERROR(check_sub("Call", fn, callee, "callee"));
  LATHE_RETURN_IF_ERROR(check_outs("Call", out_values, callee->n_outputs, max_outputs, out_n));
  if (callee->n_params != n_inputs)
    return LATHE_INVALID("Call: function \"%s\" takes %d parameters, got %d inputs", callee->name, callee->n_params,
                         n_inputs);
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_CALL, inputs, n_inputs, &n));
  for (int i = 0; i < n_inputs; i++)
    if (!lathe_same_shape(&n->in[i]->shape, &callee->params[i]->shape)) {
      char a[LATHE_SHAPE_STR_MAX], b[LATHE_SHAPE_STR_MAX];
      return LATHE_INVALID("Call: input %d has shape %s, parameter %d of \"%s\" is %s", i, shape_str(&n->in[i]->shape, a),
                           i, callee->name, shape_str(&callee->params[i]->shape, b));
    }
  LATHE_RETURN_IF_ERROR(set_outputs_from(n, callee->outputs, callee->n_outputs));
  lathe_attr_set_call_callee(n, callee);
  return finish(n, callee, NULL, out_values, out_n);
}

lathe_status_t lathe_while(lathe_function_t fn, lathe_function_t cond, lathe_function_t body,
                           const lathe_value_t *state, int n_state, lathe_value_t *out_values, int max_outputs,
                           int *out_n) {
  LATHE_RETURN_IF_ERROR(lathe_check_fn("While", fn));
  if (n_state < 1) return LATHE_INVALID("While: needs at least one state value, got %d", n_state);
  LATHE_RETURN_IF_ERROR(check_sub("While", fn, cond, "cond"));
  LATHE_RETURN_IF_ERROR(check_sub("While", fn, body, "body"));
  LATHE_RETURN_IF_ERROR(check_outs("While", out_values, n_state, max_outputs, out_n));
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_WHILE, state, n_state, &n));
  LATHE_RETURN_IF_ERROR(check_params("While", cond, "cond", n->in, n_state, "state"));
  LATHE_RETURN_IF_ERROR(check_scalar_bool_output("While", cond, "cond"));
  LATHE_RETURN_IF_ERROR(check_params("While", body, "body", n->in, n_state, "state"));
  if (body->n_outputs != n_state)
    return LATHE_INVALID("While: body \"%s\" returns %d values, the state has %d", body->name, body->n_outputs, n_state);
  for (int i = 0; i < n_state; i++)
    if (!lathe_same_shape(&body->outputs[i]->shape, &n->in[i]->shape)) {
      char a[LATHE_SHAPE_STR_MAX], b[LATHE_SHAPE_STR_MAX];
      return LATHE_INVALID("While: body output %d has shape %s, state %d is %s", i,
                           shape_str(&body->outputs[i]->shape, a), i, shape_str(&n->in[i]->shape, b));
    }
  LATHE_RETURN_IF_ERROR(set_outputs_from(n, n->in, n_state));
  lathe_attr_set_while_cond(n, cond);
  lathe_attr_set_while_body(n, body);
  return finish(n, cond, body, out_values, out_n);
}

lathe_status_t lathe_if(lathe_function_t fn, lathe_value_t pred, lathe_function_t true_branch,
                        lathe_function_t false_branch, lathe_value_t *out_values, int max_outputs, int *out_n) {
  LATHE_RETURN_IF_ERROR(lathe_check_fn("If", fn));
  LATHE_RETURN_IF_ERROR(check_sub("If", fn, true_branch, "true branch"));
  LATHE_RETURN_IF_ERROR(check_sub("If", fn, false_branch, "false branch"));
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_IF, &pred, 1, &n));
  char a[LATHE_SHAPE_STR_MAX], b[LATHE_SHAPE_STR_MAX];
  if (n->in[0]->shape.rank != 0 || n->in[0]->shape.dtype != LATHE_DTYPE_BOOL)
    return LATHE_INVALID("If: pred must be a scalar Bool, got %s", shape_str(&n->in[0]->shape, a));
  if (true_branch->n_params || false_branch->n_params)
    return LATHE_INVALID("If: branches take no parameters, the %s branch takes %d",
                         true_branch->n_params ? "true" : "false",
                         true_branch->n_params ? true_branch->n_params : false_branch->n_params);
  if (true_branch->n_outputs != false_branch->n_outputs)
    return LATHE_INVALID("If: the true branch returns %d values, the false branch %d", true_branch->n_outputs,
                         false_branch->n_outputs);
  for (int i = 0; i < true_branch->n_outputs; i++)
    if (!lathe_same_shape(&true_branch->outputs[i]->shape, &false_branch->outputs[i]->shape))
      return LATHE_INVALID("If: output %d of the true branch has shape %s, of the false branch %s", i,
                           shape_str(&true_branch->outputs[i]->shape, a), shape_str(&false_branch->outputs[i]->shape, b));
  LATHE_RETURN_IF_ERROR(check_outs("If", out_values, true_branch->n_outputs, max_outputs, out_n));
  LATHE_RETURN_IF_ERROR(set_outputs_from(n, true_branch->outputs, true_branch->n_outputs));
  lathe_attr_set_if_true_branch(n, true_branch);
  lathe_attr_set_if_false_branch(n, false_branch);
  return finish(n, true_branch, false_branch, out_values, out_n);
}

lathe_status_t lathe_sort(lathe_function_t fn, lathe_function_t comparator, int axis, bool is_stable,
                          const lathe_value_t *inputs, int n_inputs, lathe_value_t *out_values) {
  LATHE_RETURN_IF_ERROR(lathe_check_fn("Sort", fn));
  if (n_inputs < 1) return LATHE_INVALID("Sort: needs at least one input, got %d", n_inputs);
  if (!out_values) return LATHE_INVALID("Sort: out_values is NULL");
  LATHE_RETURN_IF_ERROR(check_sub("Sort", fn, comparator, "comparator"));
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_SORT, inputs, n_inputs, &n));
  char a[LATHE_SHAPE_STR_MAX], b[LATHE_SHAPE_STR_MAX];
  const lathe_shape *s0 = &n->in[0]->shape;
  for (int i = 1; i < n_inputs; i++) {
    const lathe_shape *si = &n->in[i]->shape;
    bool same = si->rank == s0->rank;
    for (int d = 0; same && d < s0->rank; d++) same = lathe_same_axis(si, d, s0, d);
    if (!same)
      return LATHE_INVALID("Sort: input %d has shape %s, input 0 has %s (all inputs need the same dimensions)", i,
                           shape_str(si, a), shape_str(s0, b));
  }
  int rank = s0->rank;
  if (axis < -rank || axis >= rank) return LATHE_INVALID("Sort: axis %d out of range for rank %d", axis, rank);
  if (axis < 0) axis += rank;
  if (comparator->n_params != 2 * n_inputs)
    return LATHE_INVALID("Sort: comparator takes %d parameters, want %d (lhs and rhs for each of %d inputs)",
                         comparator->n_params, 2 * n_inputs, n_inputs);
  for (int p = 0; p < 2 * n_inputs; p++) {
    const lathe_shape *ps = &comparator->params[p]->shape;
    lathe_dtype want = n->in[p / 2]->shape.dtype;
    if (ps->rank != 0 || ps->dtype != want)
      return LATHE_INVALID("Sort: comparator parameter %d (%s_%d) is %s, want a scalar %s", p, p % 2 ? "rhs" : "lhs",
                           p / 2, shape_str(ps, a), lathe_dtype_name(want));
  }
  LATHE_RETURN_IF_ERROR(check_scalar_bool_output("Sort", comparator, "comparator"));
  LATHE_RETURN_IF_ERROR(set_outputs_from(n, n->in, n_inputs));
  lathe_attr_set_sort_axis(n, axis);
  lathe_attr_set_sort_is_stable(n, is_stable);
  lathe_attr_set_sort_comparator(n, comparator);
  return finish(n, comparator, NULL, out_values, NULL);
}

/* ---- barriers ---- */

lathe_status_t lathe_optimization_barrier(lathe_function_t fn, const lathe_value_t *operands, int n,
                                          lathe_value_t *out_values) {
  LATHE_RETURN_IF_ERROR(lathe_check_fn("OptimizationBarrier", fn));
  if (n < 1) return LATHE_INVALID("OptimizationBarrier: needs at least one operand, got %d", n);
  if (!out_values) return LATHE_INVALID("OptimizationBarrier: out_values is NULL");
  lathe_node *node;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_OPTIMIZATION_BARRIER, operands, n, &node));
  LATHE_RETURN_IF_ERROR(set_outputs_from(node, node->in, n));
  return lathe_node_commit_multi(node, out_values);
}

lathe_status_t lathe_scheduling_barrier(lathe_function_t fn, lathe_value_t operand, const lathe_value_t *deps,
                                        int n_deps, lathe_value_t *out) {
  LATHE_RETURN_IF_ERROR(lathe_check_fn("SchedulingBarrier", fn));
  if (!out) return LATHE_INVALID("SchedulingBarrier: out is NULL");
  if (n_deps < 0 || (n_deps > 0 && !deps))
    return LATHE_INVALID("SchedulingBarrier: bad deps array (%d dependencies)", n_deps);
  lathe_value_t one[8];
  lathe_value_t *ops = n_deps < 8 ? one : malloc(sizeof(lathe_value_t) * ((size_t)n_deps + 1));
  if (!ops) return LATHE_OOM("SchedulingBarrier");
  ops[0] = operand;
  for (int i = 0; i < n_deps; i++) ops[i + 1] = deps[i];
  lathe_node *node;
  lathe_status_t st = lathe_node_new(fn, LATHE_OP_SCHEDULING_BARRIER, ops, n_deps + 1, &node);
  if (ops != one) free(ops);
  LATHE_RETURN_IF_ERROR(st);
  node->shape = node->in[0]->shape;
  return lathe_node_commit(node, out);
}

bool lathe_sort_comparator_order(const lathe_node *n, bool *desc, bool *total) {
  const lathe_function *c = lathe_attr_sort_comparator(n);
  if (c->n_outputs != 1) return false;
  const lathe_node *o = c->outputs[0];
  switch (o->op) {
    case LATHE_OP_LESS_THAN: *desc = false, *total = false; break;
    case LATHE_OP_GREATER_THAN: *desc = true, *total = false; break;
    case LATHE_OP_LESS_THAN_TOTAL_ORDER: *desc = false, *total = true; break;
    case LATHE_OP_GREATER_THAN_TOTAL_ORDER: *desc = true, *total = true; break;
    default: return false;
  }
  if (o->n_in != 2) return false;
  const lathe_node *a = o->in[0], *b = o->in[1];
  if (a->op != LATHE_OP_PARAMETER || b->op != LATHE_OP_PARAMETER || a->fn != c || b->fn != c) return false;
  if (a->param_index == 1 && b->param_index == 0) *desc = !*desc; /* rhs < lhs */
  else if (a->param_index != 0 || b->param_index != 1) return false;
  return true;
}
