/* builder.c -- builders, functions, node creation and closure captures. */
#include "graph.h"

/* ---- arena ---- */
struct lathe_arena_chunk {
  lathe_arena_chunk *next;
  size_t used, cap;
  _Alignas(64) unsigned char mem[];
};

void *lathe_arena_alloc(lathe_arena *a, size_t n) {
  n = (n + 63) & ~(size_t)63;
  lathe_arena_chunk *c = a->head;
  if (!c || c->cap - c->used < n) {
    size_t cap = n > 65536 ? n : 65536;
    c = lathe_aligned_alloc(sizeof *c + cap);
    if (!c) return NULL;
    c->used = 0;
    c->cap = cap;
    c->next = a->head;
    a->head = c;
  }
  void *p = c->mem + c->used;
  c->used += n;
  memset(p, 0, n);
  return p;
}

char *lathe_arena_strdup(lathe_arena *a, const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = lathe_arena_alloc(a, n);
  if (d) memcpy(d, s, n);
  return d;
}

void lathe_arena_free(lathe_arena *a) {
  while (a->head) {
    lathe_arena_chunk *n = a->head->next;
    lathe_aligned_free(a->head);
    a->head = n;
  }
}

void lathe_graph_retain(lathe_graph *g) { atomic_fetch_add(&g->refs, 1); }

void lathe_graph_release(lathe_graph *g) {
  if (!g || atomic_fetch_sub(&g->refs, 1) != 1) return;
  lathe_arena_free(&g->arena);
  free(g);
}

/* Growable arrays of pointers live in malloc (they grow), freed with the builder's graph via
 * the arena copy made at compile; simpler: keep them in the arena and copy on growth. */
static lathe_status_t grow(lathe_arena *a, void ***arr, int *cap, int need, const char *what) {
  if (need <= *cap) return NULL;
  int nc = *cap ? *cap * 2 : 16;
  while (nc < need) nc *= 2;
  void **na = lathe_arena_alloc(a, sizeof(void *) * (size_t)nc);
  if (!na) return LATHE_OOM(what);
  if (*cap) memcpy(na, *arr, sizeof(void *) * (size_t)*cap);
  *arr = na;
  *cap = nc;
  return NULL;
}

/* ---- builders and functions ---- */
static lathe_status_t function_new(lathe_builder_t b, const char *name, lathe_function *parent,
                                   lathe_function **out) {
  lathe_arena *a = &b->graph->arena;
  lathe_function *fn = lathe_arena_alloc(a, sizeof *fn);
  if (!fn) return LATHE_OOM("Builder");
  fn->builder = b;
  fn->parent = parent;
  fn->name = lathe_arena_strdup(a, name);
  if (!fn->name) return LATHE_OOM("Builder");
  LATHE_RETURN_IF_ERROR(grow(a, (void ***)&b->fns, &b->cap_fns, b->n_fns + 1, "Builder"));
  b->fns[b->n_fns++] = fn;
  *out = fn;
  return NULL;
}

lathe_status_t lathe_builder_new(lathe_backend_t backend, const char *name, lathe_builder_t *out_builder) {
  if (!backend) return LATHE_INVALID("Builder: backend is NULL");
  if (!out_builder) return LATHE_INVALID("Builder: out_builder is NULL");
  lathe_builder_t b = calloc(1, sizeof *b);
  lathe_graph *g = calloc(1, sizeof *g);
  if (!b || !g) {
    free(b);
    free(g);
    return LATHE_OOM("Builder");
  }
  atomic_init(&g->refs, 1);
  b->graph = g;
  b->backend = lathe_backend_retain(backend);
  b->assigned_device = -1;
  b->n_replicas = 1;
  b->name = lathe_arena_strdup(&g->arena, name ? name : "");
  lathe_status_t st = b->name ? function_new(b, "main", NULL, &b->main_fn) : LATHE_OOM("Builder");
  if (st) {
    lathe_builder_free(b);
    return st;
  }
  *out_builder = b;
  return NULL;
}

void lathe_builder_free(lathe_builder_t b) {
  if (!b) return;
  lathe_graph_release(b->graph);
  lathe_backend_release(b->backend);
  free(b);
}

const char *lathe_builder_name(lathe_builder_t b) { return b ? b->name : ""; }
lathe_function_t lathe_builder_main(lathe_builder_t b) { return b ? b->main_fn : NULL; }

lathe_status_t lathe_builder_new_function(lathe_builder_t b, const char *name, lathe_function_t *out_fn) {
  if (!b) return LATHE_INVALID("NewFunction: builder is NULL");
  if (!name || !*name) return LATHE_INVALID("NewFunction: a function needs a name");
  if (!out_fn) return LATHE_INVALID("NewFunction: out_fn is NULL");
  for (int i = 0; i < b->n_fns; i++)
    if (!b->fns[i]->parent && strcmp(b->fns[i]->name, name) == 0)
      return LATHE_INVALID("NewFunction: a function named \"%s\" already exists", name);
  return function_new(b, name, NULL, out_fn);
}

lathe_status_t lathe_function_closure(lathe_function_t parent, lathe_function_t *out_fn) {
  if (!parent) return LATHE_INVALID("Closure: parent function is NULL");
  if (!out_fn) return LATHE_INVALID("Closure: out_fn is NULL");
  char name[256];
  snprintf(name, sizeof name, "%s/closure#%d", parent->name, parent->builder->n_fns);
  return function_new(parent->builder, name, parent, out_fn);
}

const char *lathe_function_name(lathe_function_t fn) { return fn ? fn->name : ""; }
lathe_function_t lathe_function_parent(lathe_function_t fn) { return fn ? fn->parent : NULL; }
lathe_function_t lathe_value_function(lathe_value_t v) { return v ? v->fn : NULL; }

lathe_status_t lathe_check_fn(const char *op, lathe_function_t fn) {
  if (!fn) return LATHE_INVALID("%s: function is NULL", op);
  if (fn->returned) return LATHE_INVALID("%s: function \"%s\" has already returned", op, fn->name);
  return NULL;
}

static bool is_ancestor(lathe_function *anc, lathe_function *fn) {
  for (lathe_function *f = fn->parent; f; f = f->parent)
    if (f == anc) return true;
  return false;
}

lathe_status_t lathe_check_value(const char *op, lathe_function *fn, lathe_value_t v, const char *what) {
  if (!v) return LATHE_INVALID("%s: %s is NULL", op, what);
  if (v->multi) return LATHE_INVALID("%s: %s is a multi-result op, not a value", op, what);
  if (v->fn->builder != fn->builder) return LATHE_INVALID("%s: %s belongs to another builder", op, what);
  if (v->fn != fn && !is_ancestor(v->fn, fn))
    return LATHE_INVALID("%s: %s belongs to function \"%s\", which is neither \"%s\" nor one of its parents", op,
                         what, v->fn->name, fn->name);
  return NULL;
}

static lathe_status_t append_node(lathe_function *fn, lathe_node *n) {
  LATHE_RETURN_IF_ERROR(grow(&fn->builder->graph->arena, (void ***)&fn->nodes, &fn->cap_nodes, fn->n_nodes + 1, "Builder"));
  n->id = fn->n_nodes;
  n->fn = fn;
  fn->nodes[fn->n_nodes++] = n;
  return NULL;
}

/* The value v as seen from fn: itself, or fn's CAPTURE node of it (created once). */
static lathe_status_t use_value(lathe_function *fn, lathe_value_t v, lathe_value_t *out) {
  if (v->fn == fn) {
    *out = v;
    return NULL;
  }
  for (int i = 0; i < fn->n_captures; i++)
    if (fn->captures[i]->captured == v) {
      *out = fn->captures[i];
      return NULL;
    }
  lathe_node *c = lathe_arena_alloc(&fn->builder->graph->arena, sizeof *c);
  if (!c) return LATHE_OOM("Capture");
  c->op = LATHE_OP_CAPTURE;
  c->captured = v;
  c->shape = v->shape;
  c->n_out = 1;
  LATHE_RETURN_IF_ERROR(append_node(fn, c));
  LATHE_RETURN_IF_ERROR(grow(&fn->builder->graph->arena, (void ***)&fn->captures, &fn->cap_captures,
                             fn->n_captures + 1, "Capture"));
  fn->captures[fn->n_captures++] = c;
  *out = c;
  return NULL;
}

lathe_status_t lathe_node_new(lathe_function *fn, lathe_op op, lathe_value_t const *operands, int n_operands,
                              lathe_node **out) {
  const char *name = lathe_op_name(op);
  LATHE_RETURN_IF_ERROR(lathe_check_fn(name, fn));
  if (!out) return LATHE_INVALID("%s: internal: node pointer is NULL", name);
  if (n_operands > 0 && !operands) return LATHE_INVALID("%s: operands array is NULL", name);
  for (int i = 0; i < n_operands; i++) {
    char what[32];
    snprintf(what, sizeof what, "operand %d", i);
    LATHE_RETURN_IF_ERROR(lathe_check_value(name, fn, operands[i], what));
  }
  lathe_arena *a = &fn->builder->graph->arena;
  lathe_node *n = lathe_arena_alloc(a, sizeof *n);
  if (!n) return LATHE_OOM(name);
  n->op = op;
  n->fn = fn;
  n->n_out = 1;
  n->n_operands = n->n_in = n_operands;
  if (n_operands) {
    n->in = lathe_arena_alloc(a, sizeof(lathe_node *) * (size_t)n_operands);
    if (!n->in) return LATHE_OOM(name);
    for (int i = 0; i < n_operands; i++) LATHE_RETURN_IF_ERROR(use_value(fn, operands[i], &n->in[i]));
  }
  n->id = -1; /* appended at commit, so a failed op leaves no node behind */
  *out = n;
  return NULL;
}

lathe_status_t lathe_node_set_outputs(lathe_node *n, const lathe_shape *shapes, int n_out) {
  n->out_shapes = lathe_arena_alloc(&n->fn->builder->graph->arena, sizeof(lathe_shape) * (size_t)(n_out ? n_out : 1));
  if (!n->out_shapes) return LATHE_OOM(lathe_op_name(n->op));
  memcpy(n->out_shapes, shapes, sizeof(lathe_shape) * (size_t)n_out);
  n->n_out = n_out;
  n->multi = true;
  memset(&n->shape, 0, sizeof n->shape);
  return NULL;
}

lathe_status_t lathe_node_add_captures(lathe_node *n, lathe_function *sub) {
  if (!sub->n_captures) return NULL;
  lathe_arena *a = &n->fn->builder->graph->arena;
  lathe_node **in = lathe_arena_alloc(a, sizeof(lathe_node *) * (size_t)(n->n_in + sub->n_captures));
  if (!in) return LATHE_OOM(lathe_op_name(n->op));
  if (n->n_in) memcpy(in, n->in, sizeof(lathe_node *) * (size_t)n->n_in);
  int k = n->n_in;
  for (int i = 0; i < sub->n_captures; i++) {
    lathe_node *v = sub->captures[i]->captured;
    if (v->fn != n->fn && !is_ancestor(v->fn, n->fn))
      return LATHE_INVALID("%s: function \"%s\" captures a value of \"%s\", which is not visible from \"%s\"",
                           lathe_op_name(n->op), sub->name, v->fn->name, n->fn->name);
    LATHE_RETURN_IF_ERROR(use_value(n->fn, v, &in[k++]));
  }
  n->in = in;
  n->n_in = k;
  return NULL;
}

static lathe_status_t intern_names(lathe_node *n, lathe_shape *s) {
  for (int i = 0; i < s->rank; i++)
    if (s->axis_names[i]) {
      s->axis_names[i] = lathe_arena_strdup(&n->fn->builder->graph->arena, s->axis_names[i]);
      if (!s->axis_names[i]) return LATHE_OOM(lathe_op_name(n->op));
    }
  return NULL;
}

lathe_status_t lathe_node_commit(lathe_node *n, lathe_value_t *out) {
  if (!out) return LATHE_INVALID("%s: output pointer is NULL", lathe_op_name(n->op));
  /* Every op's result shape passes here: the one place the size limit is enforced for them. */
  LATHE_RETURN_IF_ERROR(lathe_check_shape_size(lathe_op_name(n->op), "result shape", &n->shape));
  LATHE_RETURN_IF_ERROR(intern_names(n, &n->shape));
  LATHE_RETURN_IF_ERROR(append_node(n->fn, n));
  *out = n;
  return NULL;
}

lathe_status_t lathe_node_commit_multi(lathe_node *n, lathe_value_t *out_values) {
  if (!out_values) return LATHE_INVALID("%s: output array is NULL", lathe_op_name(n->op));
  for (int i = 0; i < n->n_out; i++) {
    char what[32];
    snprintf(what, sizeof what, "result %d shape", i);
    LATHE_RETURN_IF_ERROR(lathe_check_shape_size(lathe_op_name(n->op), what, &n->out_shapes[i]));
  }
  for (int i = 0; i < n->n_out; i++) LATHE_RETURN_IF_ERROR(intern_names(n, &n->out_shapes[i]));
  LATHE_RETURN_IF_ERROR(append_node(n->fn, n));
  lathe_arena *a = &n->fn->builder->graph->arena;
  for (int i = 0; i < n->n_out; i++) {
    lathe_node *t = lathe_arena_alloc(a, sizeof *t);
    if (!t) return LATHE_OOM(lathe_op_name(n->op));
    t->op = LATHE_OP_TUPLE_ELEMENT;
    t->n_out = 1;
    t->n_operands = t->n_in = 1;
    t->in = lathe_arena_alloc(a, sizeof(lathe_node *));
    if (!t->in) return LATHE_OOM(lathe_op_name(n->op));
    t->in[0] = n;
    lathe_attr_set_tuple_element_index(t, i);
    t->shape = n->out_shapes[i];
    LATHE_RETURN_IF_ERROR(append_node(n->fn, t));
    out_values[i] = t;
  }
  return NULL;
}

/* ---- parameters, constants, return ---- */
static lathe_status_t check_shape(const char *op, const lathe_shape *s, bool allow_dynamic) {
  if (!s) return LATHE_INVALID("%s: shape is NULL", op);
  if (!lathe_dtype_is_valid(s->dtype)) return LATHE_INVALID("%s: invalid dtype %d", op, (int)s->dtype);
  if (s->rank < 0 || s->rank > LATHE_MAX_RANK) return LATHE_INVALID("%s: rank %d out of range [0, %d]", op, s->rank, LATHE_MAX_RANK);
  for (int i = 0; i < s->rank; i++) {
    if (s->dims[i] == -1 && allow_dynamic) {
      if (!s->axis_names[i] || !*s->axis_names[i])
        return LATHE_INVALID("%s: dynamic axis %d needs a name", op, i);
    } else if (s->dims[i] < 0) {
      return LATHE_INVALID("%s: axis %d has negative size %lld", op, i, (long long)s->dims[i]);
    }
  }
  return lathe_check_shape_size(op, "shape", s);
}

static bool param_name_taken(const lathe_function *fn, const char *name) {
  for (int i = 0; i < fn->n_params; i++)
    if (strcmp(fn->params[i]->name, name) == 0) return true;
  return false;
}

lathe_status_t lathe_parameter(lathe_function_t fn, const char *name, const lathe_shape *shape, lathe_value_t *out) {
  LATHE_RETURN_IF_ERROR(check_shape("Parameter", shape, true));
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_PARAMETER, NULL, 0, &n));
  /* Inputs are matched by position, but callers (and error messages) name them: one name, one
   * parameter. A default name skips those already taken. */
  if (name && *name && param_name_taken(fn, name))
    return LATHE_INVALID("Parameter: function \"%s\" already has a parameter named \"%s\"", fn->name, name);
  n->shape = *shape;
  char def[32];
  for (int k = fn->n_params; snprintf(def, sizeof def, "p%d", k), param_name_taken(fn, def); k++) {}
  n->name = lathe_arena_strdup(&fn->builder->graph->arena, name && *name ? name : def);
  if (!n->name) return LATHE_OOM("Parameter");
  n->param_index = fn->n_params;
  LATHE_RETURN_IF_ERROR(grow(&fn->builder->graph->arena, (void ***)&fn->params, &fn->cap_params, fn->n_params + 1, "Parameter"));
  LATHE_RETURN_IF_ERROR(lathe_node_commit(n, out));
  fn->params[fn->n_params++] = n;
  return NULL;
}

lathe_status_t lathe_constant(lathe_function_t fn, const lathe_shape *shape, const void *data, size_t nbytes,
                              lathe_value_t *out) {
  LATHE_RETURN_IF_ERROR(check_shape("Constant", shape, false));
  int64_t want = lathe_shape_byte_size(shape);
  if ((int64_t)nbytes != want)
    return LATHE_INVALID("Constant: got %zu bytes, shape needs %lld", nbytes, (long long)want);
  if (nbytes && !data) return LATHE_INVALID("Constant: data is NULL");
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_CONSTANT, NULL, 0, &n));
  n->shape = *shape;
  LATHE_RETURN_IF_ERROR(lathe_attr_set_constant_value(n, data, nbytes));
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_value_shape(lathe_value_t v, lathe_shape *out_shape) {
  if (!v) return LATHE_INVALID("Shape: value is NULL");
  if (!out_shape) return LATHE_INVALID("Shape: out_shape is NULL");
  if (v->multi) return LATHE_INVALID("Shape: %s has several results", lathe_op_name(v->op));
  *out_shape = v->shape;
  return NULL;
}

lathe_status_t lathe_function_return(lathe_function_t fn, const lathe_value_t *outputs, int n_outputs) {
  LATHE_RETURN_IF_ERROR(lathe_check_fn("Return", fn));
  if (n_outputs < 0 || (n_outputs > 0 && !outputs)) return LATHE_INVALID("Return: bad outputs array");
  lathe_arena *a = &fn->builder->graph->arena;
  lathe_node **outs = lathe_arena_alloc(a, sizeof(lathe_node *) * (size_t)(n_outputs ? n_outputs : 1));
  if (!outs) return LATHE_OOM("Return");
  for (int i = 0; i < n_outputs; i++) {
    char what[32];
    snprintf(what, sizeof what, "output %d", i);
    LATHE_RETURN_IF_ERROR(lathe_check_value("Return", fn, outputs[i], what));
    LATHE_RETURN_IF_ERROR(use_value(fn, outputs[i], &outs[i]));
  }
  fn->outputs = outs;
  fn->n_outputs = n_outputs;
  fn->returned = true;
  return NULL;
}
