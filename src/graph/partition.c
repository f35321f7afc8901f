/* partition.c -- the AutoSharding partitioner: the main function of an AutoSharding builder
 * rewritten into an SPMD program of local shapes (docs/ARCHITECTURE.md "Partitioning").
 *
 * A backward pass carries the outputs' shardings up through the ops whose rule would keep them
 * (hints: lathe_part_operand_hint). Then one forward pass over main's nodes in order decides each value's
 * sharding from its operands' and its hint (user specs on parameters are fixed) and emits the node
 * on local shapes, resharding operands to what the op's rule needs: AllGather (drop a mesh axis),
 * AllToAll (move one from an axis to another), DynamicSlice at the device's offset (add one; no
 * communication). Where shardings disagree the rule picks the one whose reshards move the fewest
 * bytes. Reductions and contractions over a sharded axis compute partial results and AllReduce
 * them (ReduceScatter where the hint wants the result split). Ops without a rule get replicated
 * operands and run whole on every device (a counted fallback), as RNGBitGenerator always does.
 * The outputs are resharded to their specs last. The sub-functions of While, If, Call and Sort go
 * through the same passes, each as a closure of its caller's copy (lathe_part_function). A device
 * learns its offsets from a hidden Int32 parameter, its mesh coordinates (lathe_partition_coords). */
#include "partition_impl.h"

/* Whether every sharded axis of s divides g evenly (uneven shards are padded: left whole). */
static bool even(const part *p, const spec *s, const lathe_shape *g) {
  for (int a = 0; a < s->rank; a++)
    if (g->dims[a] < 0 || g->dims[a] % parts(p, s, a)) return false;
  return true;
}

/* The user's sharding of rank `rank` (NULL: replicated), without mesh axes of size 1 (which
 * split nothing and would only add collectives of one member). */
static spec user_spec(const struct lathe_builder *b, const lathe_sharding_def *d, int rank) {
  spec s = replicated_spec(rank);
  if (!d) return s;
  s.mesh = d->mesh;
  for (int a = 0; a < d->rank && a < rank; a++)
    for (int k = 0; k < d->n_axes[a]; k++)
      if (b->meshes[d->mesh].sizes[d->axes[a][k]] > 1) s.axes[a][s.n_axes[a]++] = d->axes[a][k];
  return s;
}

/* ---- devices ---- */

static int position_of(const lathe_mesh_def *m, int index) {
  for (int i = 0; i < m->n_devices; i++)
    if (m->logical[i] == index) return i;
  return 0;
}

static void coords_of(const lathe_mesh_def *m, int pos, int64_t *c) {
  for (int j = m->rank - 1; j >= 0; j--) {
    c[j] = pos % m->sizes[j];
    pos /= (int)m->sizes[j];
  }
}

lathe_shape lathe_partition_coords_shape(const struct lathe_builder *src) {
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = LATHE_DTYPE_INT32;
  s.rank = 1;
  for (int m = 0; m < src->n_meshes; m++) s.dims[0] += src->meshes[m].rank;
  return s;
}

void lathe_partition_coords(const struct lathe_builder *src, int index, int32_t *out) {
  int at = 0;
  for (int m = 0; m < src->n_meshes; m++) {
    const lathe_mesh_def *mesh = &src->meshes[m];
    int64_t c[LATHE_MAX_MESH_RANK];
    coords_of(mesh, position_of(mesh, index), c);
    for (int j = 0; j < mesh->rank; j++) out[at++] = (int32_t)c[j];
  }
}

/* Replica groups of the devices that differ only along mesh axes ax[0..k) of mesh m, each group
 * in the row-major order of those axes as listed (a sharding's shard order). groups has room for
 * every device, sizes for every group. */
int lathe_part_groups(const part *p, int m, const int *ax, int k, int *groups, int *sizes) {
  const lathe_mesh_def *mesh = &p->src->meshes[m];
  int G = 1;
  for (int q = 0; q < k; q++) G *= (int)mesh->sizes[ax[q]];
  int n_groups = mesh->n_devices / G;
  for (int pos = 0; pos < mesh->n_devices; pos++) {
    int64_t c[LATHE_MAX_MESH_RANK];
    coords_of(mesh, pos, c);
    int64_t inner = 0, outer = 0;
    for (int q = 0; q < k; q++) inner = inner * mesh->sizes[ax[q]] + c[ax[q]];
    for (int j = 0; j < mesh->rank; j++) {
      bool in = false;
      for (int q = 0; q < k; q++) in |= ax[q] == j;
      if (!in) outer = outer * mesh->sizes[j] + c[j];
    }
    groups[outer * G + inner] = mesh->logical[pos];
  }
  for (int g = 0; g < n_groups; g++) sizes[g] = G;
  return n_groups;
}

/* ---- emission ---- */

lathe_status_t lathe_part_int_const(part *p, int32_t v, lathe_node **out) {
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = LATHE_DTYPE_INT32;
  return lathe_constant(p->fn, &s, &v, sizeof v, out);
}

/* The device's coordinate along axis j of mesh m, an Int32 scalar. */
static lathe_status_t coord(part *p, int m, int j, lathe_node **out) {
  if (!p->coord_val[m][j]) {
    int64_t at = p->coord_base[m] + j, lim = at + 1, one = 1;
    lathe_node *s;
    LATHE_RETURN_IF_ERROR(lathe_slice(p->fn, p->coords, &at, &lim, NULL, 1, &s));
    LATHE_RETURN_IF_ERROR(lathe_reshape(p->fn, s, &one, 0, &p->coord_val[m][j]));
  }
  *out = p->coord_val[m][j];
  return NULL;
}

lathe_status_t lathe_part_shard_offset(part *p, const spec *s, int a, int64_t local, lathe_node **out) {
  const lathe_mesh_def *mesh = &p->src->meshes[s->mesh];
  lathe_node *idx = NULL;
  for (int k = 0; k < s->n_axes[a]; k++) {
    int j = s->axes[a][k];
    lathe_node *c, *sz;
    LATHE_RETURN_IF_ERROR(coord(p, s->mesh, j, &c));
    if (!idx) {
      idx = c;
      continue;
    }
    LATHE_RETURN_IF_ERROR(lathe_part_int_const(p, (int32_t)mesh->sizes[j], &sz));
    LATHE_RETURN_IF_ERROR(lathe_mul(p->fn, idx, sz, &idx));
    LATHE_RETURN_IF_ERROR(lathe_add(p->fn, idx, c, &idx));
  }
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_part_int_const(p, (int32_t)local, &n));
  return lathe_mul(p->fn, idx, n, out);
}

static lathe_status_t all_gather(part *p, lathe_node *v, const spec *s, int a, lathe_node **out) {
  int R = p->src->n_replicas, *groups = malloc(sizeof(int) * 2 * (size_t)R);
  if (!groups) return LATHE_OOM("Partition");
  int n = lathe_part_groups(p, s->mesh, s->axes[a], s->n_axes[a], groups, groups + R);
  lathe_status_t st = lathe_all_gather(p->fn, v, a, groups, groups + R, n, out);
  free(groups);
  p->stats->collectives++;
  return st;
}

static lathe_status_t all_to_all(part *p, lathe_node *v, const spec *s, int from, int to, lathe_node **out) {
  int R = p->src->n_replicas, *groups = malloc(sizeof(int) * 2 * (size_t)R);
  if (!groups) return LATHE_OOM("Partition");
  int n = lathe_part_groups(p, s->mesh, s->axes[from], s->n_axes[from], groups, groups + R);
  lathe_status_t st = lathe_all_to_all(p->fn, v, to, from, groups, groups + R, n, out);
  free(groups);
  p->stats->collectives++;
  return st;
}

lathe_status_t lathe_part_permute(part *p, lathe_node *v, const int *pairs, int n_pairs, lathe_node **out) {
  LATHE_RETURN_IF_ERROR(lathe_collective_permute(p->fn, v, pairs, n_pairs, out));
  p->stats->collectives++;
  return NULL;
}

/* AllReduce(op) of v over the mesh axes ax[0..k) of mesh m. */
lathe_status_t lathe_part_all_reduce(part *p, lathe_node *v, lathe_op op, int m, const int *ax, int k, lathe_node **out) {
  int R = p->src->n_replicas, *groups = malloc(sizeof(int) * 2 * (size_t)R);
  if (!groups) return LATHE_OOM("Partition");
  int n = lathe_part_groups(p, m, ax, k, groups, groups + R);
  lathe_status_t st = lathe_all_reduce(p->fn, &v, 1, op, groups, groups + R, n, out);
  free(groups);
  p->stats->collectives++;
  return st;
}

/* The axis AllToAll can move the split of axis a of s to, for target t (or -1). */
static int all_to_all_target(const spec *s, const spec *t, int a) {
  for (int b = 0; b < s->rank; b++)
    if (b != a && !s->n_axes[b] && !t->n_axes[a] && axis_eq(s, a, t, b)) return b;
  return -1;
}

/* Whether t splits every axis into as many shards as s does, over other mesh axes somewhere: then
 * each device's shard under t is some device's shard under s (the same local shape). */
static bool permutes(const part *p, const spec *s, const spec *t) {
  if (replicated(s) || replicated(t) || s->mesh != t->mesh || spec_eq(s, t)) return false;
  for (int a = 0; a < s->rank; a++)
    if (parts(p, s, a) != parts(p, t, a)) return false;
  return true;
}

/* The shards device `pos` of mesh m holds under s, one index per value axis, as one number. */
static int64_t shard_combo(const lathe_mesh_def *mesh, const spec *s, int pos) {
  int64_t c[LATHE_MAX_MESH_RANK], combo = 0;
  coords_of(mesh, pos, c);
  for (int a = 0; a < s->rank; a++)
    for (int k = 0; k < s->n_axes[a]; k++) combo = combo * mesh->sizes[s->axes[a][k]] + c[s->axes[a][k]];
  return combo;
}

/* v (split by s) moved to t where permutes(): one CollectivePermute, each device sending its shard
 * to a device that wants it (itself first, where it holds what it wants). */
static lathe_status_t permute(part *p, lathe_node *v, const spec *s, const spec *t, lathe_node **out) {
  const lathe_mesh_def *mesh = &p->src->meshes[s->mesh];
  int N = mesh->n_devices, n_pairs = 0;
  int64_t *held = malloc(sizeof(int64_t) * 2 * (size_t)N);
  int *pairs = malloc(sizeof(int) * 2 * (size_t)N);
  bool *sent = calloc((size_t)N, 2 * sizeof(bool)), *got = sent + N;
  lathe_status_t st = NULL;
  if (!held || !pairs || !sent) st = LATHE_OOM("Partition");
  int64_t *want = held + N;
  for (int d = 0; !st && d < N; d++) held[d] = shard_combo(mesh, s, d), want[d] = shard_combo(mesh, t, d);
  for (int d = 0; !st && d < N; d++)
    if (held[d] == want[d]) sent[d] = got[d] = true;
  bool moved = false;
  for (int d = 0; !st && d < N; d++) {
    for (int e = 0; !got[d] && e < N; e++)
      if (!sent[e] && held[e] == want[d]) {
        pairs[2 * n_pairs] = mesh->logical[e], pairs[2 * n_pairs + 1] = mesh->logical[d], n_pairs++;
        sent[e] = got[d] = moved = true;
      }
    if (!got[d]) st = lathe_status_new(LATHE_STATUS_INTERNAL, "Partition: no device holds the shard device %d wants", mesh->logical[d]);
  }
  for (int d = 0; !st && moved && d < N; d++) /* the others keep theirs */
    if (held[d] == want[d]) pairs[2 * n_pairs] = pairs[2 * n_pairs + 1] = mesh->logical[d], n_pairs++;
  if (!st && moved) st = lathe_part_permute(p, v, pairs, n_pairs, &v);
  free(held);
  free(pairs);
  free(sent);
  *out = v;
  return st;
}

/* v (global shape g, sharded by s) resharded to t. */
static lathe_status_t reshard_value(part *p, lathe_node *v, spec s, const spec *t, const lathe_shape *g, lathe_node **out) {
  int rank = g->rank;
  if (permutes(p, &s, t)) return permute(p, v, &s, t, out);
  /* first drop what t does not share: move a mesh-axis list to the axis t puts it on, else gather */
  for (int a = 0; a < rank; a++) {
    if (!s.n_axes[a] || axis_eq(&s, a, t, a)) continue;
    int to = all_to_all_target(&s, t, a);
    if (to >= 0) {
      LATHE_RETURN_IF_ERROR(all_to_all(p, v, &s, a, to, &v));
      copy_axis(&s, to, &s, a);
    } else {
      LATHE_RETURN_IF_ERROR(all_gather(p, v, &s, a, &v));
    }
    clear_axis(&s, a);
  }
  /* then cut what t adds: this device's slice, no communication */
  bool cut = false;
  for (int a = 0; a < rank; a++) cut |= t->n_axes[a] && !s.n_axes[a];
  if (cut) {
    lathe_shape ls;
    local_shape(p, t, g, &ls);
    lathe_node *starts[LATHE_MAX_RANK], *zero = NULL;
    for (int a = 0; a < rank; a++) {
      if (t->n_axes[a] && !s.n_axes[a]) {
        LATHE_RETURN_IF_ERROR(lathe_part_shard_offset(p, t, a, ls.dims[a], &starts[a]));
      } else {
        if (!zero) LATHE_RETURN_IF_ERROR(lathe_part_int_const(p, 0, &zero));
        starts[a] = zero;
      }
    }
    /* axes t shares with s are local already: their slice is the whole local axis */
    LATHE_RETURN_IF_ERROR(lathe_dynamic_slice(p->fn, v, starts, rank, ls.dims, rank, &v));
  }
  *out = v;
  return NULL;
}

/* Source node id's value under sharding t (cached per sharding). */
lathe_status_t lathe_part_get(part *p, const lathe_node *sn, const spec *t, lathe_node **out) {
  int id = sn->id;
  for (int k = 0; k < p->n_vars[id]; k++)
    if (spec_eq(&p->vars[id][k].s, t) || (replicated(&p->vars[id][k].s) && replicated(t))) {
      *out = p->vars[id][k].v;
      return NULL;
    }
  /* a value already whole on every device (a cached variant) is sliced, which moves nothing */
  for (int k = 1; k < p->n_vars[id]; k++)
    if (replicated(&p->vars[id][k].s)) {
      LATHE_RETURN_IF_ERROR(reshard_value(p, p->vars[id][k].v, p->vars[id][k].s, t, &sn->shape, out));
      if (p->n_vars[id] < MAX_VARIANTS) p->vars[id][p->n_vars[id]++] = (variant){*t, *out};
      return NULL;
    }
  /* a reshard that gathers everything first shares that replicated value with other reshards */
  spec s = p->vars[id][0].s, m = s;
  lathe_node *v = p->vars[id][0].v;
  bool moves = false;
  for (int a = 0; a < m.rank; a++)
    if (m.n_axes[a] && !axis_eq(&m, a, t, a)) {
      moves |= all_to_all_target(&m, t, a) >= 0;
      clear_axis(&m, a);
    }
  if (!moves && replicated(&m) && !replicated(&s) && !replicated(t) && !permutes(p, &s, t)) {
    s = replicated_spec(s.rank);
    LATHE_RETURN_IF_ERROR(lathe_part_get(p, sn, &s, &v));
  }
  LATHE_RETURN_IF_ERROR(reshard_value(p, v, s, t, &sn->shape, out));
  if (p->n_vars[id] < MAX_VARIANTS) p->vars[id][p->n_vars[id]++] = (variant){*t, *out};
  return NULL;
}

void lathe_part_set(part *p, const lathe_node *sn, lathe_node *v, const spec *s) {
  p->vars[sn->id][0] = (variant){*s, v};
  p->n_vars[sn->id] = 1;
}

/* Bytes each device receives to turn source value sn from its sharding into t (slicing is free;
 * nothing where t or a whole copy is made already). */
double lathe_part_reshard_cost(const part *p, const lathe_node *sn, const spec *t) {
  for (int k = 1; k < p->n_vars[sn->id]; k++) /* made already, or sliced from a whole copy */
    if (spec_eq(&p->vars[sn->id][k].s, t) || replicated(&p->vars[sn->id][k].s)) return 0;
  return lathe_part_reshard_bytes(p, &sn->shape, own(p, sn->id), t);
}

double lathe_part_reshard_bytes(const part *p, const lathe_shape *g, const spec *s, const spec *t) {
  lathe_shape ls;
  local_shape(p, s, g, &ls);
  if (permutes(p, s, t)) return (double)lathe_shape_byte_size(&ls); /* at most one shard received */
  double G = 1;
  for (int a = 0; a < s->rank; a++)
    if (s->n_axes[a] && !axis_eq(s, a, t, a)) G *= (double)parts(p, s, a);
  return (double)lathe_shape_byte_size(&ls) * (G - 1);
}

/* A copy of source node sn on operands ops with result shape `shape` (sn's attributes, shared); a
 * multi-result sn gets result i's local shape under rs[i], and its results in p->tuples. */
static lathe_status_t emit(part *p, const lathe_node *sn, lathe_node **ops, const lathe_shape *shape, const spec *rs,
                           lathe_function *const *fns, lathe_node **out) {
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(p->fn, sn->op, (lathe_value_t const *)ops, sn->n_operands, &n));
  n->a = sn->a;
  for (int j = 0; fns && j < LATHE_MAX_SUBFNS; j++)
    if (sn->a.fn[j]) {
      n->a.fn[j] = fns[j];
      LATHE_RETURN_IF_ERROR(lathe_node_add_captures(n, fns[j]));
    }
  if (!sn->multi) {
    n->shape = *shape;
    return lathe_node_commit(n, out);
  }
  lathe_arena *arena = &p->dst->graph->arena;
  lathe_shape *ls = lathe_arena_alloc(arena, sizeof(lathe_shape) * (size_t)sn->n_out);
  lathe_node **vals = lathe_arena_alloc(arena, sizeof(lathe_node *) * (size_t)sn->n_out);
  if (!ls || !vals) return LATHE_OOM("Partition");
  for (int i = 0; i < sn->n_out; i++) local_shape(p, &rs[i], &sn->out_shapes[i], &ls[i]);
  LATHE_RETURN_IF_ERROR(lathe_node_set_outputs(n, ls, sn->n_out));
  LATHE_RETURN_IF_ERROR(lathe_node_commit_multi(n, vals));
  p->tuples[sn->id] = vals;
  *out = n;
  return NULL;
}

/* Emits sn on its operands resharded to need[i], with result sharding rs. */
lathe_status_t lathe_part_emit_ops(part *p, const lathe_node *sn, lathe_node **ops, const spec *rs, lathe_node **out) {
  lathe_shape ls;
  local_shape(p, rs, &sn->shape, &ls);
  return emit(p, sn, ops, &ls, NULL, NULL, out);
}

lathe_status_t lathe_part_emit_with(part *p, const lathe_node *sn, const spec *need, const spec *rs, lathe_node **out) {
  lathe_node **ops = p->ops;
  for (int i = 0; i < sn->n_operands; i++) LATHE_RETURN_IF_ERROR(lathe_part_get(p, sn->in[i], &need[i], &ops[i]));
  LATHE_RETURN_IF_ERROR(lathe_part_emit_ops(p, sn, ops, rs, out));
  lathe_part_set(p, sn, *out, rs);
  return NULL;
}

lathe_status_t lathe_part_emit_control(part *p, const lathe_node *sn, const spec *need, const spec *rs,
                                       lathe_function *const *fns) {
  lathe_node **ops = p->ops, *out;
  for (int i = 0; i < sn->n_operands; i++) LATHE_RETURN_IF_ERROR(lathe_part_get(p, sn->in[i], &need[i], &ops[i]));
  LATHE_RETURN_IF_ERROR(emit(p, sn, ops, NULL, rs, fns, &out));
  for (int i = 0; i < sn->n_out; i++) p->res[p->res_at[sn->id] + i] = rs[i];
  spec none = replicated_spec(0); /* the node itself is read only through its TUPLE_ELEMENTs */
  lathe_part_set(p, sn, out, &none);
  return NULL;
}

lathe_status_t lathe_part_emit_multi(part *p, const lathe_node *sn, const spec *need, const spec *rs) {
  return lathe_part_emit_control(p, sn, need, rs, NULL);
}

/* ---- sub-functions, copied whole ----
 * A control-flow op runs whole on every device: its sub-functions (and theirs) are copied into dst
 * node by node with their global shapes. A value a copy captures from a partitioned function (main,
 * or a sub-function of a partitioned control op) is that function's value gathered to replicated;
 * from a function being copied, that copy's. */
struct part_clone {
  const lathe_function *src;
  lathe_function *dst;
};

typedef struct clone_ctx {
  const lathe_function *src;
  lathe_function *dst;
  lathe_node **node;  /* per source node id */
  lathe_node ***tup;  /* per source multi-result node id: its results */
  const struct clone_ctx *parent;
} clone_ctx;

static lathe_status_t clone_fn(part *p, const lathe_function *src, const clone_ctx *parent, lathe_function **out);

/* dst's value for source value v, used in c's function: a capture stands for its ancestor's value */
static lathe_status_t clone_value(part *p, const clone_ctx *c, const lathe_node *v, lathe_node **out) {
  while (v->op == LATHE_OP_CAPTURE) v = v->captured;
  for (const clone_ctx *k = c; k; k = k->parent)
    if (k->src == v->fn) {
      *out = k->node[v->id];
      return *out ? NULL : lathe_status_new(LATHE_STATUS_INTERNAL, "Partition: a sub-function reads a value before it is made");
    }
  /* a value of a partitioned function: that function's, gathered there (once, outside any loop of ours) */
  part *a = part_of(p, v->fn);
  if (!a) return lathe_status_new(LATHE_STATUS_INTERNAL, "Partition: a captured value of another function");
  spec r = replicated_spec(v->shape.rank);
  return lathe_part_get(a, v, &r, out);
}

/* Source node sn (with sub-functions or not) copied into c's function on dst operands. */
static lathe_status_t clone_node(part *p, const clone_ctx *c, const lathe_node *sn, lathe_node *const *ops, lathe_node **out,
                                 lathe_node ***results) {
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(c->dst, sn->op, (lathe_value_t const *)ops, sn->n_operands, &n));
  n->a = sn->a;
  for (int j = 0; j < LATHE_MAX_SUBFNS; j++) {
    if (!sn->a.fn[j]) continue;
    if (j && sn->a.fn[j] == sn->a.fn[0]) n->a.fn[j] = n->a.fn[0];
    else LATHE_RETURN_IF_ERROR(clone_fn(p, sn->a.fn[j], c, &n->a.fn[j]));
    if (!j || n->a.fn[j] != n->a.fn[0]) LATHE_RETURN_IF_ERROR(lathe_node_add_captures(n, n->a.fn[j]));
  }
  if (!sn->multi) {
    n->shape = sn->shape;
    return lathe_node_commit(n, out);
  }
  lathe_node **vals = lathe_arena_alloc(&p->dst->graph->arena, sizeof(lathe_node *) * (size_t)sn->n_out);
  if (!vals) return LATHE_OOM("Partition");
  LATHE_RETURN_IF_ERROR(lathe_node_set_outputs(n, sn->out_shapes, sn->n_out));
  LATHE_RETURN_IF_ERROR(lathe_node_commit_multi(n, vals));
  *out = n, *results = vals;
  return NULL;
}

static lathe_status_t clone_body(part *p, clone_ctx *c) {
  const lathe_function *src = c->src;
  for (int i = 0; i < src->n_params; i++) {
    const lathe_node *sp = src->params[i];
    LATHE_RETURN_IF_ERROR(lathe_parameter(c->dst, sp->name, &sp->shape, &c->node[sp->id]));
  }
  lathe_node *ops[64], **many = NULL;
  lathe_status_t st = NULL;
  for (int k = 0; k < src->n_nodes && !st; k++) {
    const lathe_node *sn = src->nodes[k];
    if (sn->op == LATHE_OP_PARAMETER || sn->op == LATHE_OP_CAPTURE) continue;
    if (sn->op == LATHE_OP_TUPLE_ELEMENT) {
      lathe_node **r = c->tup[sn->in[0]->id];
      c->node[sn->id] = r ? r[lathe_attr_tuple_element_index(sn)] : NULL;
      continue;
    }
    lathe_node **o = ops;
    if (sn->n_operands > 64) {
      free(many);
      o = many = malloc(sizeof *many * (size_t)sn->n_operands);
      if (!many) {
        st = LATHE_OOM("Partition");
        break;
      }
    }
    for (int i = 0; i < sn->n_operands && !st; i++) st = clone_value(p, c, sn->in[i], &o[i]);
    if (!st) st = clone_node(p, c, sn, o, &c->node[sn->id], &c->tup[sn->id]);
  }
  free(many);
  LATHE_RETURN_IF_ERROR(st);
  lathe_node **outs = lathe_arena_alloc(&p->dst->graph->arena, sizeof(lathe_node *) * (size_t)(src->n_outputs + 1));
  if (!outs) return LATHE_OOM("Partition");
  for (int i = 0; i < src->n_outputs; i++) LATHE_RETURN_IF_ERROR(clone_value(p, c, src->outputs[i], &outs[i]));
  return lathe_function_return(c->dst, (lathe_value_t const *)outs, src->n_outputs);
}

static lathe_status_t clone_fn(part *p, const lathe_function *src, const clone_ctx *parent, lathe_function **out) {
  for (int i = 0; i < p->n_clones; i++)
    if (p->clones[i].src == src) {
      *out = p->clones[i].dst;
      return NULL;
    }
  lathe_function *dst = NULL;
  if (!src->parent) {
    LATHE_RETURN_IF_ERROR(lathe_builder_new_function(p->dst, src->name, &dst));
  } else {
    lathe_function *dp = src->parent == p->sfn ? p->fn : NULL;
    for (const clone_ctx *k = parent; k && !dp; k = k->parent)
      if (k->src == src->parent) dp = k->dst;
    if (!dp) return lathe_status_new(LATHE_STATUS_INTERNAL, "Partition: closure \"%s\" of a function not copied", src->name);
    LATHE_RETURN_IF_ERROR(lathe_function_closure(dp, &dst));
  }
  clone_ctx c = {src, dst, calloc((size_t)src->n_nodes + 1, sizeof(lathe_node *)),
                 calloc((size_t)src->n_nodes + 1, sizeof(lathe_node **)), parent};
  lathe_status_t st = c.node && c.tup ? clone_body(p, &c) : LATHE_OOM("Partition");
  free(c.node);
  free(c.tup);
  LATHE_RETURN_IF_ERROR(st);
  if (p->n_clones == p->cap_clones) {
    int cap = p->cap_clones ? 2 * p->cap_clones : 8;
    struct part_clone *g = realloc(p->clones, sizeof *g * (size_t)cap);
    if (!g) return LATHE_OOM("Partition");
    p->clones = g, p->cap_clones = cap;
  }
  p->clones[p->n_clones++] = (struct part_clone){src, dst};
  *out = dst;
  return NULL;
}

lathe_status_t lathe_part_emit_whole(part *p, const lathe_node *sn, bool *gathered) {
  *gathered = false;
  for (int i = 0; i < sn->n_in; i++) {
    const lathe_node *v = sn->in[i];
    *gathered |= !replicated(own(p, v->id)); /* operands, and the captured values (hidden inputs) */
  }
  clone_ctx top = {NULL, p->fn, NULL, NULL, NULL}; /* main's values come through lathe_part_get */
  lathe_node **ops = p->ops, *out, **vals = NULL;
  for (int i = 0; i < sn->n_operands; i++) {
    spec r = replicated_spec(sn->in[i]->shape.rank);
    LATHE_RETURN_IF_ERROR(lathe_part_get(p, sn->in[i], &r, &ops[i]));
  }
  LATHE_RETURN_IF_ERROR(clone_node(p, &top, sn, ops, &out, &vals));
  if (!sn->multi) {
    spec r = replicated_spec(sn->shape.rank);
    lathe_part_set(p, sn, out, &r);
    return NULL;
  }
  p->tuples[sn->id] = vals;
  for (int i = 0; i < sn->n_out; i++) p->res[p->res_at[sn->id] + i] = replicated_spec(sn->out_shapes[i].rank);
  spec none = replicated_spec(0);
  lathe_part_set(p, sn, out, &none);
  return NULL;
}

/* The backward pass: from the outputs' shardings, through every op whose rule would carry an
 * operand's split to its result (lathe_part_operand_hint: elementwise, layout, reductions,
 * contractions, convolutions' batch and output channels, ops along some axes, gathers and
 * scatters), the sharding each value's consumers want (the last consumer's, in program order). The forward pass weighs it with
 * the operands' (rule_elementwise) or takes it where the operands are replicated: an open value is
 * then computed split instead of whole and sliced; partial sums are ReduceScattered to it. */
static void hint(part *p, const lathe_node *n, const spec *s) {
  if (p->hinted[n->id] || replicated(s) || n->fn != p->sfn) return;
  p->hint[n->id] = *s;
  p->hinted[n->id] = true;
}

static void backward(part *p, const spec *outs) {
  const lathe_function *fn = p->sfn;
  for (int i = 0; outs && i < fn->n_outputs; i++) hint(p, fn->outputs[i], &outs[i]);
  for (int k = fn->n_nodes - 1; k >= 0; k--) {
    const lathe_node *n = fn->nodes[k];
    if (!p->hinted[n->id] || n->multi) continue;
    for (int i = 0; i < n->n_operands; i++) {
      spec t;
      if (lathe_part_operand_hint(p, n, i, &p->hint[n->id], &t)) hint(p, n->in[i], &t);
    }
  }
}

/* ---- the pass ---- */

static const char *why_whole(struct lathe_builder *src) {
  if (src->n_replicas < 2) return "one device";
  if (src->n_meshes > 16) return "more than 16 meshes";
  for (int i = 0; i < src->main_fn->n_params; i++)
    for (int a = 0; a < src->main_fn->params[i]->shape.rank; a++)
      if (src->main_fn->params[i]->shape.dims[a] < 0) return "dynamic axes";
  return NULL;
}

static bool uneven(const part *p) {
  const lathe_function *fn = p->src->main_fn;
  for (int i = 0; i < fn->n_params; i++) {
    spec s = user_spec(p->src, fn->params[i]->sharding, fn->params[i]->shape.rank);
    if (!even(p, &s, &fn->params[i]->shape)) return true;
  }
  for (int i = 0; i < fn->n_outputs; i++) {
    spec s = user_spec(p->src, p->src->output_shardings ? p->src->output_shardings[i] : NULL, fn->outputs[i]->shape.rank);
    if (!even(p, &s, &fn->outputs[i]->shape)) return true;
  }
  return false;
}

/* p's per-node tables for its source function p->sfn. */
static lathe_status_t part_alloc(part *p) {
  const lathe_function *fn = p->sfn;
  int n = fn->n_nodes + 1;
  p->vars = calloc((size_t)n, sizeof *p->vars);
  p->n_vars = calloc((size_t)n, sizeof *p->n_vars);
  p->tuples = calloc((size_t)n, sizeof *p->tuples);
  p->hint = calloc((size_t)n, sizeof *p->hint);
  p->hinted = calloc((size_t)n, sizeof *p->hinted);
  p->res_at = calloc((size_t)n, sizeof *p->res_at);
  int max_ops = 1, max_out = 1, n_res = 0;
  for (int k = 0; k < fn->n_nodes; k++) {
    const lathe_node *sn = fn->nodes[k];
    if (sn->n_operands > max_ops) max_ops = sn->n_operands;
    if (!sn->multi) continue;
    if (sn->n_out > max_out) max_out = sn->n_out;
    if (p->res_at) p->res_at[sn->id] = n_res;
    n_res += sn->n_out;
  }
  p->need = calloc((size_t)max_ops, sizeof *p->need);
  p->ops = calloc((size_t)max_ops, sizeof *p->ops);
  p->rs = calloc((size_t)max_out, sizeof *p->rs);
  p->res = calloc((size_t)(n_res ? n_res : 1), sizeof *p->res);
  bool ok = p->vars && p->n_vars && p->tuples && p->hint && p->hinted && p->need && p->ops && p->res_at && p->rs && p->res;
  return ok ? NULL : LATHE_OOM("Partition");
}

static void part_free(part *p) {
  free(p->vars);
  free(p->n_vars);
  free(p->tuples);
  free(p->hint);
  free(p->hinted);
  free(p->need);
  free(p->ops);
  free(p->res_at);
  free(p->rs);
  free(p->res);
  free(p->clones);
  free(p->halos);
}

/* p's source function's nodes partitioned in order (its parameters and captures already set). */
static lathe_status_t run_nodes(part *p) {
  const lathe_function *fn = p->sfn;
  for (int k = 0; k < fn->n_nodes; k++)
    if (fn->nodes[k]->op != LATHE_OP_PARAMETER && fn->nodes[k]->op != LATHE_OP_CAPTURE)
      LATHE_RETURN_IF_ERROR(lathe_part_node(p, fn->nodes[k]));
  return NULL;
}

/* Source parameter sp of p's function as a parameter of its copy, sharded by s (its local shape). */
static lathe_status_t add_param(part *p, const lathe_node *sp, const spec *s) {
  lathe_shape ls;
  local_shape(p, s, &sp->shape, &ls);
  lathe_node *v;
  LATHE_RETURN_IF_ERROR(lathe_parameter(p->fn, sp->name, &ls, &v));
  lathe_part_set(p, sp, v, s);
  return NULL;
}

/* p's copy returns its source function's outputs, output i resharded to outs[i]. */
static lathe_status_t return_outputs(part *p, const spec *outs) {
  const lathe_function *fn = p->sfn;
  lathe_node **vals = lathe_arena_alloc(&p->dst->graph->arena, sizeof(lathe_node *) * (size_t)(fn->n_outputs + 1));
  if (!vals) return LATHE_OOM("Partition");
  for (int i = 0; i < fn->n_outputs; i++) LATHE_RETURN_IF_ERROR(lathe_part_get(p, fn->outputs[i], &outs[i], &vals[i]));
  return lathe_function_return(p->fn, (lathe_value_t const *)vals, fn->n_outputs);
}

static lathe_status_t run(part *p) {
  struct lathe_builder *src = p->src;
  const lathe_function *fn = src->main_fn;
  LATHE_RETURN_IF_ERROR(lathe_builder_new(src->backend, src->name, &p->dst));
  LATHE_RETURN_IF_ERROR(lathe_builder_spmd(p->dst, src->n_replicas));
  /* the mesh names this process's devices: in a job each process partitions over its own */
  LATHE_RETURN_IF_ERROR(lathe_builder_collectives_in_process(p->dst, true));
  if (src->devices) LATHE_RETURN_IF_ERROR(lathe_builder_assign_devices(p->dst, src->devices, src->n_assigned));
  p->fn = p->dst->main_fn;
  for (int i = 0; i < fn->n_params; i++) {
    spec s = user_spec(src, fn->params[i]->sharding, fn->params[i]->shape.rank);
    LATHE_RETURN_IF_ERROR(add_param(p, fn->params[i], &s));
  }
  lathe_shape cs = lathe_partition_coords_shape(src);
  LATHE_RETURN_IF_ERROR(lathe_parameter(p->fn, "lathe.mesh_coordinates", &cs, &p->coords));
  for (int m = 0, at = 0; m < src->n_meshes; at += src->meshes[m++].rank) p->coord_base[m] = at;
  spec *outs = calloc((size_t)fn->n_outputs + 1, sizeof *outs);
  if (!outs) return LATHE_OOM("Partition");
  for (int i = 0; i < fn->n_outputs; i++)
    outs[i] = user_spec(src, src->output_shardings ? src->output_shardings[i] : NULL, fn->outputs[i]->shape.rank);
  backward(p, outs);
  lathe_status_t st = run_nodes(p);
  if (!st) st = return_outputs(p, outs);
  free(outs);
  LATHE_RETURN_IF_ERROR(st);
  p->dst->partitioned = true;
  p->dst->partition_fallbacks = p->stats->fallbacks;
  p->dst->partition_collectives = p->stats->collectives;
  p->dst->partition_fallback_ops = lathe_arena_strdup(&p->dst->graph->arena, p->stats->fallback_ops);
  if (!p->dst->partition_fallback_ops) return LATHE_OOM("Partition");
  return NULL;
}

/* q's parameters, captures, nodes and outputs (lathe_part_function). */
static lathe_status_t run_function(part *q, const spec *in, spec *out, part_outs outs) {
  const lathe_function *fn = q->sfn;
  LATHE_RETURN_IF_ERROR(part_alloc(q));
  for (int i = 0; i < fn->n_params; i++) LATHE_RETURN_IF_ERROR(add_param(q, fn->params[i], &in[i]));
  /* a captured value is its function's own (sharded as it is there; the copy captures it in turn) */
  for (int i = 0; i < fn->n_captures; i++) {
    const lathe_node *c = fn->captures[i], *v = c->captured;
    part *a = part_of(q->parent, v->fn);
    if (!a || !a->n_vars[v->id]) return lathe_status_new(LATHE_STATUS_INTERNAL, "Partition: \"%s\" captures a value not partitioned", fn->name);
    lathe_part_set(q, c, a->vars[v->id][0].v, own(a, v->id));
  }
  backward(q, outs == PART_OUT_OWN ? NULL : out);
  LATHE_RETURN_IF_ERROR(run_nodes(q));
  for (int i = 0; i < fn->n_outputs && outs != PART_OUT_FIXED; i++) out[i] = *own(q, fn->outputs[i]->id);
  return outs == PART_OUT_DRY ? NULL : return_outputs(q, out);
}

lathe_status_t lathe_part_function(part *p, const lathe_function *sfn, const spec *in, spec *out, part_outs outs,
                                   lathe_function **dst) {
  part q;
  part_stats uncounted = *p->stats;
  int n_fns = p->dst->n_fns;
  memset(&q, 0, sizeof q);
  q.src = p->src, q.dst = p->dst, q.sfn = sfn, q.parent = p, q.coords = p->coords;
  q.stats = outs == PART_OUT_DRY ? &uncounted : p->stats;
  memcpy(q.coord_base, p->coord_base, sizeof q.coord_base);
  lathe_status_t st = lathe_function_closure(p->fn, &q.fn);
  if (!st) st = run_function(&q, in, out, outs);
  part_free(&q);
  /* A dry run's copy (never returned, so no node reads it) and the closures made inside it leave
   * the builder; what it resharded in its ancestors' functions stays there, cached and counted. */
  if (outs == PART_OUT_DRY) p->dst->n_fns = n_fns, q.fn = NULL;
  if (dst) *dst = q.fn;
  return st;
}

lathe_status_t lathe_partition(struct lathe_builder *src, struct lathe_builder **out, lathe_partition_report *report) {
  *out = NULL;
  memset(report, 0, sizeof *report);
  if (src->distribution != LATHE_DIST_AUTO_SHARDING) {
    report->declined = "not an AutoSharding program";
    return NULL;
  }
  if ((report->declined = why_whole(src))) return NULL;
  part p;
  part_stats stats;
  memset(&p, 0, sizeof p);
  memset(&stats, 0, sizeof stats);
  p.src = src, p.stats = &stats;
  if (uneven(&p)) {
    report->declined = "a sharded axis does not divide by its shards (padded shards run whole)";
    return NULL;
  }
  p.sfn = src->main_fn;
  lathe_status_t st = part_alloc(&p);
  if (!st) st = run(&p);
  part_free(&p);
  if (st) {
    lathe_builder_free(p.dst);
    return lathe_status_annotate(st, "Partition");
  }
  report->fallbacks = stats.fallbacks;
  report->collectives = stats.collectives;
  *out = p.dst;
  return NULL;
}
