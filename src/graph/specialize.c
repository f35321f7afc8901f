/* specialize.c -- dynamic shapes: a copy of a builder's functions with every dynamic axis
 * resolved from a binding of axis names to sizes. Nodes are shallow copies (attribute lists and
 * constants stay in the original graph, which the caller keeps alive); shapes, operand arrays,
 * captures and sub-function references are remapped to the copy.
 *
 * The dynamic-size ops (DynamicReshape, DynamicBroadcastInDim, DynamicIota, DynamicPad) get their
 * size values here: folded on the host (fold.c) from the resolved shapes and constants, or given
 * by the caller after a first run computed them. Each is then lowered to its static op (Reshape,
 * BroadcastInDim, Iota, Pad), so no device runs a dynamic-size op. A value that depends on tensor
 * contents and is not known yet leaves its op pending (and everything computed from it): the copy
 * then returns the values still needed instead of the program's outputs. */
#include "graph.h"

#define MAX_BOUND 512

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

static int64_t get_bound(const void *b, const char *name) { return lookup(b, name); }

static lathe_status_t resolve(const char *op, lathe_shape *s, const binding *b) {
  for (int i = 0; i < s->rank; i++) {
    if (s->dims[i] >= 0) continue;
    /* a plain name, or a symbolic sum such as Concatenate's "=128+seq" */
    LATHE_RETURN_IF_ERROR(lathe_axis_resolve(op, i, s->axis_names[i], get_bound, b, &s->dims[i]));
  }
  /* Axes counted as 1 at build time now have their sizes: the size limit again. */
  return lathe_check_shape_size(op, "result shape", s);
}

bool lathe_node_lowered_by_specialization(const lathe_node *n) {
  return n->op == LATHE_OP_DYNAMIC_BROADCAST_IN_DIM || n->op == LATHE_OP_DYNAMIC_IOTA || n->op == LATHE_OP_DYNAMIC_PAD ||
         (n->op == LATHE_OP_DYNAMIC_RESHAPE && n->n_operands > 1);
}

lathe_op lathe_op_lowered_form(lathe_op op) {
  switch (op) {
    case LATHE_OP_DYNAMIC_BROADCAST_IN_DIM: return LATHE_OP_BROADCAST_IN_DIM;
    case LATHE_OP_DYNAMIC_IOTA: return LATHE_OP_IOTA;
    case LATHE_OP_DYNAMIC_PAD: return LATHE_OP_PAD;
    default: return op;
  }
}

typedef struct {
  struct lathe_builder *src, *dst;
  lathe_node ***node_map; /* per source function index: source node id -> copy */
  bool **pending;         /* per function index: node id -> its shape waits on a size value */
  binding *bd;
  const lathe_size_values *known;
  int *needed, n_needed;
} cloner;

static int fn_index(const struct lathe_builder *b, const lathe_function *fn) {
  for (int i = 0; i < b->n_fns; i++)
    if (b->fns[i] == fn) return i;
  return -1;
}

static lathe_fold_status fold_lookup(lathe_fold_ctx *fc, const lathe_node *n, lathe_folded *out) {
  cloner *c = fc->user;
  int fi = fn_index(c->dst, n->fn);
  if (fi < 0) return LATHE_FOLD_NO;
  if (fi == 0 && c->known)
    for (int k = 0; k < c->known->n; k++)
      if (c->known->ids[k] == n->id) {
        out->dtype = n->shape.dtype;
        out->n = 1;
        out->v[0] = c->known->values[k];
        return LATHE_FOLD_OK;
      }
  return c->pending[fi][n->id] ? LATHE_FOLD_PENDING : LATHE_FOLD_UNKNOWN;
}

/* The size value of operand k of n (what: its role, for messages). *ok false: not known yet (n
 * stays pending; a value the device must compute is added to the needed list). */
static lathe_status_t size_value(cloner *c, const lathe_node *n, int k, const char *what, int axis, int64_t *out, bool *ok) {
  const char *op = lathe_op_name(n->op);
  lathe_fold_ctx fc = {fold_lookup, c, 256};
  lathe_folded f;
  lathe_fold_status fs = lathe_fold_value(&fc, n->in[k], &f);
  *ok = fs == LATHE_FOLD_OK;
  if (fs == LATHE_FOLD_OK) {
    if (lathe_dtype_class_of(f.dtype) == LATHE_CLASS_UINT && f.v[0] < 0)
      return LATHE_INVALID("%s: the %s of axis %d, %llu, is beyond the size limit", op, what, axis, (unsigned long long)f.v[0]);
    *out = f.v[0];
    return NULL;
  }
  if (fs == LATHE_FOLD_PENDING) return NULL;
  if (n->fn != c->dst->main_fn || n->in[k]->op == LATHE_OP_CAPTURE)
    return LATHE_UNIMPL("%s: the %s of axis %d depends on tensor contents inside a closure (While, If, Sort or Call "
                        "body); only the main function's can be computed first", op, what, axis);
  for (int j = 0; j < c->n_needed; j++)
    if (c->needed[j] == n->in[k]->id) return NULL;
  if (c->n_needed < LATHE_MAX_SIZE_VALUES) c->needed[c->n_needed++] = n->in[k]->id;
  return NULL;
}

/* Binds axis i of s (sized now) for the nodes after it, or checks it against the binding. */
static lathe_status_t bind_axis(const char *op, binding *b, const lathe_shape *s, int i, bool from_value) {
  const char *name = s->axis_names[i];
  if (!name) return NULL;
  int64_t had = lookup(b, name);
  if (had >= 0 && had != s->dims[i])
    return LATHE_INVALID("%s: axis %d (\"%s\") has size %lld%s, but \"%s\" is bound to %lld", op, i, name, (long long)s->dims[i],
                         from_value ? " from its value" : "", name, (long long)had);
  if (had >= 0) return NULL;
  if (b->n == MAX_BOUND) return LATHE_INVALID("%s: too many dynamic axis names", op);
  b->names[b->n] = name;
  b->sizes[b->n++] = s->dims[i];
  return NULL;
}

/* Result dims of DynamicReshape, DynamicBroadcastInDim and DynamicIota: static, from a value,
 * bound by name, or (reshape) the one inferred from the element count. */
static lathe_status_t resolve_dims(cloner *c, lathe_node *n, lathe_ilist sizes, lathe_ilist value_of, int inferred, bool *ok) {
  const char *op = lathe_op_name(n->op);
  lathe_shape *s = &n->shape;
  *ok = true;
  for (int i = 0; i < s->rank; i++) {
    if (i == inferred) continue;
    if (sizes.v[i] >= 0) {
      s->dims[i] = sizes.v[i];
    } else if (value_of.v[i] >= 0) {
      bool got;
      int64_t v = 0;
      LATHE_RETURN_IF_ERROR(size_value(c, n, (int)value_of.v[i], "size value", i, &v, &got));
      if (!got) {
        *ok = false;
        continue;
      }
      if (v < 0) return LATHE_INVALID("%s: axis %d (\"%s\") has negative size %lld from its value", op, i, s->axis_names[i], (long long)v);
      if (v >= LATHE_MAX_TENSOR_SIZE)
        return LATHE_INVALID("%s: axis %d (\"%s\") has size %lld from its value, beyond the size limit", op, i, s->axis_names[i], (long long)v);
      s->dims[i] = v;
    } else {
      LATHE_RETURN_IF_ERROR(lathe_axis_resolve(op, i, s->axis_names[i], get_bound, c->bd, &s->dims[i]));
    }
  }
  if (!*ok) {
    for (int i = 0; i < s->rank; i++) s->dims[i] = sizes.v[i]; /* stays dynamic until the values are read */
    return NULL;
  }
  if (inferred >= 0) {
    int64_t known = 1, total = lathe_shape_size(&n->in[0]->shape);
    for (int i = 0; i < s->rank; i++)
      if (i != inferred && lathe_mul_overflow(known, s->dims[i], &known))
        return LATHE_INVALID("%s: the resolved dimensions multiply beyond the size limit", op);
    if (known == 0 || total % known)
      return LATHE_INVALID("%s: cannot infer axis %d: %lld elements over a product of %lld", op, inferred, (long long)total, (long long)known);
    s->dims[inferred] = total / known;
  }
  LATHE_RETURN_IF_ERROR(lathe_check_shape_size(op, "result shape", s));
  for (int i = 0; i < s->rank; i++) LATHE_RETURN_IF_ERROR(bind_axis(op, c->bd, s, i, value_of.v[i] >= 0));
  return NULL;
}

/* DynamicPad's amounts (static or values) and result dims. */
static lathe_status_t resolve_pad(cloner *c, lathe_node *n, int64_t amt[3][LATHE_MAX_RANK], bool *ok) {
  const char *op = "DynamicPad";
  const lathe_shape *xs = &n->in[0]->shape;
  lathe_shape *s = &n->shape;
  const lathe_ilist st[3] = {lathe_attr_dynamic_pad_start(n), lathe_attr_dynamic_pad_end(n), lathe_attr_dynamic_pad_interior(n)};
  const lathe_ilist of[3] = {lathe_attr_dynamic_pad_start_of(n), lathe_attr_dynamic_pad_end_of(n), lathe_attr_dynamic_pad_interior_of(n)};
  static const char *const what[3] = {"start padding", "end padding", "interior padding"};
  *ok = true;
  for (int a = 0; a < xs->rank; a++)
    for (int k = 0; k < 3; k++) {
      amt[k][a] = st[k].v[a];
      if (of[k].v[a] < 0) continue;
      bool got;
      LATHE_RETURN_IF_ERROR(size_value(c, n, (int)of[k].v[a], what[k], a, &amt[k][a], &got));
      if (!got) *ok = false;
    }
  if (!*ok) return NULL;
  for (int a = 0; a < xs->rank; a++) {
    int64_t d = xs->dims[a], lo = amt[0][a], hi = amt[1][a], in = amt[2][a], od, holes = 0;
    if (in < 0) return LATHE_INVALID("%s: interior padding of axis %d is negative (%lld)", op, a, (long long)in);
    if (lo <= -LATHE_MAX_TENSOR_SIZE || lo >= LATHE_MAX_TENSOR_SIZE || hi <= -LATHE_MAX_TENSOR_SIZE ||
        hi >= LATHE_MAX_TENSOR_SIZE || in >= LATHE_MAX_TENSOR_SIZE ||
        (d > 0 && lathe_mul_overflow(d - 1, in, &holes)) || lathe_add_overflow(d + lo, hi, &od) || lathe_add_overflow(od, holes, &od))
      return LATHE_INVALID("%s: axis %d of size %lld with padding [%lld, %lld, interior %lld] exceeds the size limit", op, a,
                           (long long)d, (long long)lo, (long long)hi, (long long)in);
    if (od < 0)
      return LATHE_INVALID("%s: axis %d of size %lld with padding [%lld, %lld, interior %lld] would get negative size %lld", op,
                           a, (long long)d, (long long)lo, (long long)hi, (long long)in, (long long)od);
    s->dims[a] = od;
  }
  LATHE_RETURN_IF_ERROR(lathe_check_shape_size(op, "result shape", s));
  for (int a = 0; a < s->rank; a++)
    if (s->axis_names[a] && (xs->dims[a] != s->dims[a] || !xs->axis_names[a] || strcmp(xs->axis_names[a], s->axis_names[a])))
      LATHE_RETURN_IF_ERROR(bind_axis(op, c->bd, s, a, true));
  return NULL;
}

/* Resolves a dynamic-size op and lowers it to its static op (or marks it pending). */
static lathe_status_t resolve_sized(cloner *c, lathe_node *n, bool *ok) {
  switch (n->op) {
    case LATHE_OP_DYNAMIC_RESHAPE:
      LATHE_RETURN_IF_ERROR(resolve_dims(c, n, lathe_attr_dynamic_reshape_sizes(n), lathe_attr_dynamic_reshape_value_of(n),
                                         (int)lathe_attr_dynamic_reshape_inferred(n), ok));
      if (*ok && lathe_shape_size(&n->shape) != lathe_shape_size(&n->in[0]->shape))
        return LATHE_INVALID("DynamicReshape: operand has %lld elements, the resolved target %lld",
                             (long long)lathe_shape_size(&n->in[0]->shape), (long long)lathe_shape_size(&n->shape));
      if (*ok) n->op = LATHE_OP_RESHAPE, n->n_operands = n->n_in = 1;
      return NULL;
    case LATHE_OP_DYNAMIC_BROADCAST_IN_DIM: {
      LATHE_RETURN_IF_ERROR(resolve_dims(c, n, lathe_attr_dynamic_broadcast_in_dim_sizes(n),
                                         lathe_attr_dynamic_broadcast_in_dim_value_of(n), -1, ok));
      if (!*ok) return NULL;
      lathe_ilist axes = lathe_attr_dynamic_broadcast_in_dim_axes(n);
      const lathe_shape *xs = &n->in[0]->shape;
      for (int i = 0; i < axes.n; i++) {
        int64_t in_d = xs->dims[i], out_d = n->shape.dims[axes.v[i]];
        if (in_d != 1 && in_d != out_d)
          return LATHE_INVALID("DynamicBroadcastInDim: operand axis %d has size %lld, result axis %lld has size %lld: they "
                               "must be equal or the operand's 1", i, (long long)in_d, (long long)axes.v[i], (long long)out_d);
      }
      n->op = LATHE_OP_BROADCAST_IN_DIM, n->n_operands = n->n_in = 1; /* axes: list slot 0, shared */
      return NULL;
    }
    case LATHE_OP_DYNAMIC_IOTA:
      LATHE_RETURN_IF_ERROR(resolve_dims(c, n, lathe_attr_dynamic_iota_sizes(n), lathe_attr_dynamic_iota_value_of(n), -1, ok));
      if (*ok) n->op = LATHE_OP_IOTA, n->n_operands = n->n_in = 0, n->in = NULL; /* axis: int slot 0, shared */
      return NULL;
    case LATHE_OP_DYNAMIC_PAD: {
      int64_t amt[3][LATHE_MAX_RANK];
      LATHE_RETURN_IF_ERROR(resolve_pad(c, n, amt, ok));
      if (!*ok) return NULL;
      int rank = n->in[0]->shape.rank;
      n->op = LATHE_OP_PAD, n->n_operands = n->n_in = 2; /* the copy's own lists, in the copy's arena */
      LATHE_RETURN_IF_ERROR(lathe_attr_set_pad_start(n, amt[0], rank));
      LATHE_RETURN_IF_ERROR(lathe_attr_set_pad_end(n, amt[1], rank));
      return lathe_attr_set_pad_interior(n, amt[2], rank);
    }
    default: return lathe_status_new(LATHE_STATUS_INTERNAL, "%s: not a dynamic-size op", lathe_op_name(n->op));
  }
}


static lathe_node *mapped(cloner *c, const lathe_node *n) {
  int fi = fn_index(c->src, n->fn);
  return fi < 0 ? NULL : c->node_map[fi][n->id];
}

lathe_status_t lathe_builder_specialize(struct lathe_builder *src, const char *const *names, const int64_t *sizes, int n_bound,
                                        const lathe_size_values *known, int *out_needed, int *out_n_needed,
                                        struct lathe_builder **out) {
  *out_n_needed = 0;
  binding *bd = malloc(sizeof *bd);
  if (!bd) return LATHE_OOM("Specialize");
  if (n_bound > MAX_BOUND) {
    free(bd);
    return LATHE_INVALID("Specialize: too many dynamic axis names");
  }
  bd->n = n_bound;
  for (int i = 0; i < n_bound; i++) bd->names[i] = names[i], bd->sizes[i] = sizes[i];
  struct lathe_builder *dst = calloc(1, sizeof *dst);
  lathe_graph *g = calloc(1, sizeof *g);
  lathe_node ***map = calloc((size_t)src->n_fns, sizeof *map);
  bool **pending = calloc((size_t)src->n_fns, sizeof *pending);
  lathe_status_t st = (!dst || !g || !map || !pending) ? LATHE_OOM("Specialize") : NULL;
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
    pending[i] = calloc((size_t)sf->n_nodes + 1, sizeof(bool));
    if (!df || !map[i] || !pending[i]) {
      st = LATHE_OOM("Specialize");
      break;
    }
    *df = *sf;
    df->builder = dst;
    dst->fns[i] = df;
  }
  if (!st) dst->main_fn = dst->fns[0];
  int needed[LATHE_MAX_SIZE_VALUES], n_pending = 0;
  cloner c = {src, dst, map, pending, bd, known, needed, 0};
  for (int i = 0; !st && i < src->n_fns; i++) {
    lathe_function *df = dst->fns[i];
    const lathe_function *sf = src->fns[i];
    bool fn_pending = false;
    if (sf->parent) df->parent = dst->fns[fn_index(src, sf->parent)];
    df->nodes = lathe_arena_alloc(a, sizeof(lathe_node *) * (size_t)(sf->n_nodes + 1));
    df->params = lathe_arena_alloc(a, sizeof(lathe_node *) * (size_t)(sf->n_params + 1));
    df->captures = lathe_arena_alloc(a, sizeof(lathe_node *) * (size_t)(sf->n_captures + 1));
    df->outputs = lathe_arena_alloc(a, sizeof(lathe_node *) * (size_t)(sf->n_outputs + LATHE_MAX_SIZE_VALUES + 1));
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
      map[i][k] = dn;
      df->nodes[k] = dn;
      const char *op = lathe_op_name(sn->op);
      bool waits = false; /* on a size value not known yet */
      if (sn->n_in) {
        dn->in = lathe_arena_alloc(a, sizeof(lathe_node *) * (size_t)sn->n_in);
        if (!dn->in) st = LATHE_OOM(op);
        for (int j = 0; !st && j < sn->n_in; j++) {
          dn->in[j] = c.node_map[i][sn->in[j]->id];
          waits |= pending[i][sn->in[j]->id];
        }
      }
      if (!st && sn->captured) {
        dn->captured = mapped(&c, sn->captured);
        waits |= pending[fn_index(dst, dn->captured->fn)][dn->captured->id];
      }
      for (int j = 0; j < LATHE_MAX_SUBFNS; j++)
        if (sn->a.fn[j]) dn->a.fn[j] = dst->fns[fn_index(src, sn->a.fn[j])];
      if (st || waits) {
      } else if (sn->multi) {
        dn->out_shapes = lathe_arena_alloc(a, sizeof(lathe_shape) * (size_t)sn->n_out);
        if (!dn->out_shapes) st = LATHE_OOM(op);
        for (int j = 0; !st && j < sn->n_out; j++) {
          dn->out_shapes[j] = sn->out_shapes[j];
          st = resolve(op, &dn->out_shapes[j], bd);
        }
      } else if (lathe_node_lowered_by_specialization(sn) || sn->op == LATHE_OP_DYNAMIC_RESHAPE) {
        bool ok = true;
        st = resolve_sized(&c, dn, &ok);
        waits = !ok;
      } else {
        st = resolve(op, &dn->shape, bd);
      }
      pending[i][k] = waits;
      n_pending += waits;
      fn_pending |= waits;
    }
    for (int k = 0; !st && k < sf->n_params; k++) df->params[k] = map[i][sf->params[k]->id];
    for (int k = 0; !st && k < sf->n_captures; k++) df->captures[k] = map[i][sf->captures[k]->id];
    for (int k = 0; !st && k < sf->n_outputs; k++) df->outputs[k] = map[i][sf->outputs[k]->id];
    /* a body waiting on a value belongs to a call that waits too: not part of the first run */
    if (i > 0 && fn_pending) df->returned = false;
  }
  if (!st && n_pending && !c.n_needed)
    st = lathe_status_new(LATHE_STATUS_INTERNAL, "Specialize: sizes wait on values none of which can be computed");
  if (!st && c.n_needed) { /* the first run: the main function returns the size values */
    lathe_function *m = dst->main_fn;
    for (int k = 0; k < c.n_needed; k++) m->outputs[k] = map[0][needed[k]], out_needed[k] = needed[k];
    m->n_outputs = c.n_needed;
    *out_n_needed = c.n_needed;
  }
  if (map)
    for (int i = 0; i < src->n_fns; i++) free(map[i]);
  if (pending)
    for (int i = 0; i < src->n_fns; i++) free(pending[i]);
  free(map);
  free(pending);
  free(bd);
  if (st) {
    if (g) lathe_graph_release(g);
    else free(g);
    if (dst) lathe_backend_release(dst->backend);
    free(dst);
    *out_n_needed = 0;
    return st;
  }
  *out = dst;
  return NULL;
}
