/* specialize.c -- dynamic shapes: a copy of a builder's functions with every dynamic axis
 * resolved from a binding of axis names to sizes. Nodes are shallow copies (attribute lists and
 * constants stay in the original graph, which the caller keeps alive); shapes, operand arrays,
 * captures and sub-function references are remapped to the copy. */
#include "graph.h"

#define MAX_BOUND 256

typedef struct {
  const char *names[MAX_BOUND];
  int64_t sizes[MAX_BOUND];
  int n;
} binding;

static int64_t lookup(const binding *b, const char *name) {
  for (int k = 0; name && k < b->n; k++)
    if (strcmp(b->names[k], name) == 0) return b->sizes[k];
  return -1;
}

/* DynamicReshape's named axes: bound by name, or inferred from the element count -- the one
 * axis declared inferred, or the one axis whose size comes from a value computed at run time
 * (the element count fixes it; the kernel checks the value agrees). The names it resolves bind
 * for the nodes after it. */
static lathe_status_t resolve_reshape(lathe_node *n, binding *b) {
  lathe_shape *s = &n->shape;
  int inferred = (int)lathe_attr_dynamic_reshape_inferred(n), unresolved = 0;
  int64_t known = 1, total = lathe_shape_size(&n->in[0]->shape);
  for (int i = 0; i < s->rank; i++) {
    if (i == inferred) continue;
    if (s->dims[i] < 0) s->dims[i] = lookup(b, s->axis_names[i]);
    if (s->dims[i] < 0) {
      if (unresolved++ || inferred >= 0)
        return LATHE_UNIMPL("DynamicReshape: axes sized by values computed at run time can only be resolved when "
                            "one axis is left to infer from the element count (axis %d, \"%s\")", i, s->axis_names[i]);
      inferred = i;
      continue;
    }
    if (lathe_mul_overflow(known, s->dims[i], &known))
      return LATHE_INVALID("DynamicReshape: the resolved dimensions multiply beyond the size limit");
  }
  if (inferred >= 0) {
    if (known == 0 || total % known)
      return LATHE_INVALID("DynamicReshape: cannot infer axis %d: %lld elements over a static product of %lld", inferred,
                           (long long)total, (long long)known);
    s->dims[inferred] = total / known;
  }
  if (lathe_shape_size(s) != total)
    return LATHE_INVALID("DynamicReshape: operand has %lld elements, the resolved target %lld", (long long)total,
                         (long long)lathe_shape_size(s));
  for (int i = 0; i < s->rank; i++)
    if (s->axis_names[i] && lookup(b, s->axis_names[i]) < 0) {
      if (b->n == MAX_BOUND) return LATHE_INVALID("DynamicReshape: too many dynamic axis names");
      b->names[b->n] = s->axis_names[i];
      b->sizes[b->n++] = s->dims[i];
    }
  return NULL;
}

static lathe_status_t resolve(const char *op, lathe_shape *s, const binding *b) {
  for (int i = 0; i < s->rank; i++) {
    if (s->dims[i] >= 0) continue;
    const char *name = s->axis_names[i];
    int64_t v = lookup(b, name);
    if (v < 0)
      return LATHE_INVALID("%s: dynamic axis %d (\"%s\") is not bound by the inputs", op, i, name ? name : "unnamed");
    s->dims[i] = v;
  }
  /* Axes counted as 1 at build time now have their sizes: the size limit again. */
  return lathe_check_shape_size(op, "result shape", s);
}

typedef struct {
  struct lathe_builder *src, *dst;
  lathe_node ***node_map; /* per source function index: source node id -> copy */
} cloner;

static int fn_index(const struct lathe_builder *b, const lathe_function *fn) {
  for (int i = 0; i < b->n_fns; i++)
    if (b->fns[i] == fn) return i;
  return -1;
}

static lathe_node *mapped(cloner *c, const lathe_node *n) {
  int fi = fn_index(c->src, n->fn);
  return fi < 0 ? NULL : c->node_map[fi][n->id];
}

lathe_status_t lathe_builder_specialize(struct lathe_builder *src, const char *const *names, const int64_t *sizes, int n_bound,
                                        struct lathe_builder **out) {
  binding bd;
  if (n_bound > MAX_BOUND) return LATHE_INVALID("Specialize: too many dynamic axis names");
  bd.n = n_bound;
  for (int i = 0; i < n_bound; i++) bd.names[i] = names[i], bd.sizes[i] = sizes[i];
  struct lathe_builder *dst = calloc(1, sizeof *dst);
  lathe_graph *g = calloc(1, sizeof *g);
  lathe_node ***map = calloc((size_t)src->n_fns, sizeof *map);
  lathe_status_t st = (!dst || !g || !map) ? LATHE_OOM("Specialize") : NULL;
  if (g) atomic_init(&g->refs, 1); /* so that the failure path's release frees it */
  if (!st) {
    dst->graph = g;
    dst->backend = lathe_backend_retain(src->backend);
    dst->assigned_device = src->assigned_device;
    dst->name = src->name;
    dst->n_fns = dst->cap_fns = src->n_fns;
    dst->fns = lathe_arena_alloc(&g->arena, sizeof(lathe_function *) * (size_t)(src->n_fns + 1));
    if (!dst->fns) st = LATHE_OOM("Specialize");
  }
  lathe_arena *a = g ? &g->arena : NULL;
  /* Functions first, so sub-function references can be remapped. */
  for (int i = 0; !st && i < src->n_fns; i++) {
    const lathe_function *sf = src->fns[i];
    lathe_function *df = lathe_arena_alloc(a, sizeof *df);
    map[i] = calloc((size_t)sf->n_nodes + 1, sizeof(lathe_node *));
    if (!df || !map[i]) {
      st = LATHE_OOM("Specialize");
      break;
    }
    *df = *sf;
    df->builder = dst;
    dst->fns[i] = df;
  }
  cloner c = {src, dst, map};
  for (int i = 0; !st && i < src->n_fns; i++) {
    lathe_function *df = dst->fns[i];
    const lathe_function *sf = src->fns[i];
    if (sf->parent) df->parent = dst->fns[fn_index(src, sf->parent)];
    df->nodes = lathe_arena_alloc(a, sizeof(lathe_node *) * (size_t)(sf->n_nodes + 1));
    df->params = lathe_arena_alloc(a, sizeof(lathe_node *) * (size_t)(sf->n_params + 1));
    df->captures = lathe_arena_alloc(a, sizeof(lathe_node *) * (size_t)(sf->n_captures + 1));
    df->outputs = lathe_arena_alloc(a, sizeof(lathe_node *) * (size_t)(sf->n_outputs + 1));
    if (!df->nodes || !df->params || !df->captures || !df->outputs) {
      st = LATHE_OOM("Specialize");
      break;
    }
    df->cap_nodes = sf->n_nodes;
    df->cap_params = sf->n_params;
    df->cap_captures = sf->n_captures;
    /* Nodes in creation order: operands (and captured ancestors' nodes) are copied before use. */
    for (int k = 0; !st && k < sf->n_nodes; k++) {
      const lathe_node *sn = sf->nodes[k];
      lathe_node *dn = lathe_arena_alloc(a, sizeof *dn);
      if (!dn) {
        st = LATHE_OOM("Specialize");
        break;
      }
      *dn = *sn;
      dn->fn = df;
      const char *op = lathe_op_name(sn->op);
      if (sn->n_in) {
        dn->in = lathe_arena_alloc(a, sizeof(lathe_node *) * (size_t)sn->n_in);
        if (!dn->in) st = LATHE_OOM(op);
        for (int j = 0; !st && j < sn->n_in; j++) dn->in[j] = c.node_map[i][sn->in[j]->id];
      }
      if (!st && sn->captured) dn->captured = mapped(&c, sn->captured);
      for (int j = 0; j < LATHE_MAX_SUBFNS; j++)
        if (sn->a.fn[j]) dn->a.fn[j] = dst->fns[fn_index(src, sn->a.fn[j])];
      if (!st && sn->multi) {
        dn->out_shapes = lathe_arena_alloc(a, sizeof(lathe_shape) * (size_t)sn->n_out);
        if (!dn->out_shapes) st = LATHE_OOM(op);
        for (int j = 0; !st && j < sn->n_out; j++) {
          dn->out_shapes[j] = sn->out_shapes[j];
          st = resolve(op, &dn->out_shapes[j], &bd);
        }
      } else if (!st && sn->op == LATHE_OP_DYNAMIC_RESHAPE) {
        st = resolve_reshape(dn, &bd);
        if (!st) st = lathe_check_shape_size(op, "result shape", &dn->shape);
      } else if (!st) {
        st = resolve(op, &dn->shape, &bd);
      }
      map[i][k] = dn;
      df->nodes[k] = dn;
    }
    for (int k = 0; !st && k < sf->n_params; k++) df->params[k] = map[i][sf->params[k]->id];
    for (int k = 0; !st && k < sf->n_captures; k++) df->captures[k] = map[i][sf->captures[k]->id];
    for (int k = 0; !st && k < sf->n_outputs; k++) df->outputs[k] = map[i][sf->outputs[k]->id];
  }
  if (map)
    for (int i = 0; i < src->n_fns; i++) free(map[i]);
  free(map);
  if (st) {
    if (g) lathe_graph_release(g);
    else free(g);
    if (dst) lathe_backend_release(dst->backend);
    free(dst);
    return st;
  }
  dst->main_fn = dst->fns[0];
  *out = dst;
  return NULL;
}
