/* partition.c -- the AutoSharding partitioner: the main function of an AutoSharding builder
 * rewritten into an SPMD program of local shapes (docs/ARCHITECTURE.md "Partitioning").
 *
 * A backward pass carries the outputs' shardings up through elementwise ops, Transpose and
 * BroadcastInDim (hints). Then one forward pass over main's nodes in order decides each value's
 * sharding from its operands' and its hint (user specs on parameters are fixed) and emits the node
 * on local shapes, resharding operands to what the op's rule needs: AllGather (drop a mesh axis),
 * AllToAll (move one from an axis to another), DynamicSlice at the device's offset (add one; no
 * communication). Where shardings disagree the rule picks the one whose reshards move the fewest
 * bytes. Reductions and contractions over a sharded axis compute partial results and AllReduce
 * them (ReduceScatter where the hint wants the result split). Ops without a rule get replicated
 * operands and run whole on every device (a counted fallback). The outputs are resharded to their
 * specs last. A device learns its offsets from a hidden Int32 parameter, its mesh coordinates
 * (lathe_partition_coords). */
#include "partition.h"

typedef lathe_sharding_def spec; /* rank = the value's; n_axes[a] == 0: axis a replicated */

#define MAX_VARIANTS 4

typedef struct {
  spec s;
  lathe_node *v;
} variant;

typedef struct {
  struct lathe_builder *src;
  lathe_builder_t dst;
  lathe_function *fn;  /* dst's main */
  lathe_node *coords;  /* the hidden parameter */
  int coord_base[16];  /* offset of each mesh's coordinates in it */
  lathe_node *coord_val[16][LATHE_MAX_MESH_RANK];
  variant (*vars)[MAX_VARIANTS]; /* per source node id: the value under some shardings, [0] its own */
  int *n_vars;
  spec *hint;   /* per source node id: the sharding its consumers would take (outputs first), */
  bool *hinted; /* from the backward pass */
  lathe_node ***tuples; /* per source multi-result node id: its results in dst */
  spec *need;        /* scratch: the shardings a node's operands must arrive in */
  lathe_node **ops;  /* scratch: its operands in dst */
  int fallbacks, collectives;
  char fallback_ops[256]; /* the fallbacks' op names, each once */
} part;

/* ---- shardings ---- */

static bool replicated(const spec *s) {
  for (int a = 0; a < s->rank; a++)
    if (s->n_axes[a]) return false;
  return true;
}

static spec replicated_spec(int rank) {
  spec s;
  memset(&s, 0, sizeof s);
  s.rank = rank;
  return s;
}

static bool axis_eq(const spec *x, int a, const spec *y, int b) {
  if (x->n_axes[a] != y->n_axes[b]) return false;
  if (x->n_axes[a] && x->mesh != y->mesh) return false;
  for (int k = 0; k < x->n_axes[a]; k++)
    if (x->axes[a][k] != y->axes[b][k]) return false;
  return true;
}

static bool spec_eq(const spec *x, const spec *y) {
  if (x->rank != y->rank) return false;
  for (int a = 0; a < x->rank; a++)
    if (!axis_eq(x, a, y, a)) return false;
  return true;
}

static int64_t parts(const part *p, const spec *s, int a) {
  int64_t n = 1;
  for (int k = 0; k < s->n_axes[a]; k++) n *= p->src->meshes[s->mesh].sizes[s->axes[a][k]];
  return n;
}

static void clear_axis(spec *s, int a) { s->n_axes[a] = 0; }

static void copy_axis(spec *to, int b, const spec *from, int a) {
  to->n_axes[b] = from->n_axes[a];
  for (int k = 0; k < from->n_axes[a]; k++) to->axes[b][k] = from->axes[a][k];
  if (from->n_axes[a]) to->mesh = from->mesh;
}

/* Whether mesh axis j of mesh m is used by s on an axis other than `except`. */
static bool uses(const spec *s, int m, int j, int except) {
  for (int a = 0; a < s->rank; a++)
    for (int k = 0; a != except && k < s->n_axes[a]; k++)
      if (s->mesh == m && s->axes[a][k] == j) return true;
  return false;
}

/* Copies axis a of from into axis b of to unless it clashes (other mesh, or a mesh axis to uses). */
static bool try_copy_axis(spec *to, int b, const spec *from, int a) {
  if (!from->n_axes[a]) return true;
  if (!replicated(to) && to->mesh != from->mesh) return false;
  for (int k = 0; k < from->n_axes[a]; k++)
    if (uses(to, from->mesh, from->axes[a][k], b)) return false;
  copy_axis(to, b, from, a);
  return true;
}

static void local_shape(const part *p, const spec *s, const lathe_shape *g, lathe_shape *out) {
  *out = *g;
  for (int a = 0; a < s->rank && a < g->rank; a++) {
    int64_t n = parts(p, s, a);
    if (n > 1) out->dims[a] = g->dims[a] / n, out->axis_names[a] = NULL;
  }
}

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
static int groups_for(const part *p, int m, const int *ax, int k, int *groups, int *sizes) {
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

static lathe_status_t int_const(part *p, int32_t v, lathe_node **out) {
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

/* Where this device's shard of axis a under s starts: shard index (row-major over the mesh axes
 * as listed) times the shard's size. */
static lathe_status_t shard_offset(part *p, const spec *s, int a, int64_t local, lathe_node **out) {
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
    LATHE_RETURN_IF_ERROR(int_const(p, (int32_t)mesh->sizes[j], &sz));
    LATHE_RETURN_IF_ERROR(lathe_mul(p->fn, idx, sz, &idx));
    LATHE_RETURN_IF_ERROR(lathe_add(p->fn, idx, c, &idx));
  }
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(int_const(p, (int32_t)local, &n));
  return lathe_mul(p->fn, idx, n, out);
}

static lathe_status_t all_gather(part *p, lathe_node *v, const spec *s, int a, lathe_node **out) {
  int R = p->src->n_replicas, *groups = malloc(sizeof(int) * 2 * (size_t)R);
  if (!groups) return LATHE_OOM("Partition");
  int n = groups_for(p, s->mesh, s->axes[a], s->n_axes[a], groups, groups + R);
  lathe_status_t st = lathe_all_gather(p->fn, v, a, groups, groups + R, n, out);
  free(groups);
  p->collectives++;
  return st;
}

static lathe_status_t all_to_all(part *p, lathe_node *v, const spec *s, int from, int to, lathe_node **out) {
  int R = p->src->n_replicas, *groups = malloc(sizeof(int) * 2 * (size_t)R);
  if (!groups) return LATHE_OOM("Partition");
  int n = groups_for(p, s->mesh, s->axes[from], s->n_axes[from], groups, groups + R);
  lathe_status_t st = lathe_all_to_all(p->fn, v, to, from, groups, groups + R, n, out);
  free(groups);
  p->collectives++;
  return st;
}

/* AllReduce(op) of v over the mesh axes ax[0..k) of mesh m. */
static lathe_status_t all_reduce(part *p, lathe_node *v, lathe_op op, int m, const int *ax, int k, lathe_node **out) {
  int R = p->src->n_replicas, *groups = malloc(sizeof(int) * 2 * (size_t)R);
  if (!groups) return LATHE_OOM("Partition");
  int n = groups_for(p, m, ax, k, groups, groups + R);
  lathe_status_t st = lathe_all_reduce(p->fn, &v, 1, op, groups, groups + R, n, out);
  free(groups);
  p->collectives++;
  return st;
}

/* The axis AllToAll can move the split of axis a of s to, for target t (or -1). */
static int all_to_all_target(const spec *s, const spec *t, int a) {
  for (int b = 0; b < s->rank; b++)
    if (b != a && !s->n_axes[b] && !t->n_axes[a] && axis_eq(s, a, t, b)) return b;
  return -1;
}

/* v (global shape g, sharded by s) resharded to t. */
static lathe_status_t reshard_value(part *p, lathe_node *v, spec s, const spec *t, const lathe_shape *g, lathe_node **out) {
  int rank = g->rank;
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
        LATHE_RETURN_IF_ERROR(shard_offset(p, t, a, ls.dims[a], &starts[a]));
      } else {
        if (!zero) LATHE_RETURN_IF_ERROR(int_const(p, 0, &zero));
        starts[a] = zero;
      }
    }
    /* axes t shares with s are local already: their slice is the whole local axis */
    LATHE_RETURN_IF_ERROR(lathe_dynamic_slice(p->fn, v, starts, rank, ls.dims, rank, &v));
  }
  *out = v;
  return NULL;
}

static const spec *own(const part *p, int id) { return &p->vars[id][0].s; }

/* Source node id's value under sharding t (cached per sharding). */
static lathe_status_t get(part *p, const lathe_node *sn, const spec *t, lathe_node **out) {
  int id = sn->id;
  for (int k = 0; k < p->n_vars[id]; k++)
    if (spec_eq(&p->vars[id][k].s, t) || (replicated(&p->vars[id][k].s) && replicated(t))) {
      *out = p->vars[id][k].v;
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
  if (!moves && replicated(&m) && !replicated(&s) && !replicated(t)) {
    s = replicated_spec(s.rank);
    LATHE_RETURN_IF_ERROR(get(p, sn, &s, &v));
  }
  LATHE_RETURN_IF_ERROR(reshard_value(p, v, s, t, &sn->shape, out));
  if (p->n_vars[id] < MAX_VARIANTS) p->vars[id][p->n_vars[id]++] = (variant){*t, *out};
  return NULL;
}

static void set(part *p, const lathe_node *sn, lathe_node *v, const spec *s) {
  p->vars[sn->id][0] = (variant){*s, v};
  p->n_vars[sn->id] = 1;
}

/* Bytes each device receives to turn source value sn from its sharding into t (slicing is free). */
static double reshard_cost(const part *p, const lathe_node *sn, const spec *t) {
  const spec *s = own(p, sn->id);
  lathe_shape ls;
  local_shape(p, s, &sn->shape, &ls);
  double G = 1;
  for (int a = 0; a < s->rank; a++)
    if (s->n_axes[a] && !axis_eq(s, a, t, a)) G *= (double)parts(p, s, a);
  return (double)lathe_shape_byte_size(&ls) * (G - 1);
}

/* A copy of source node sn on operands ops with result shape `shape` (sn's attributes, shared). */
static lathe_status_t emit(part *p, const lathe_node *sn, lathe_node **ops, const lathe_shape *shape, lathe_node **out) {
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(p->fn, sn->op, (lathe_value_t const *)ops, sn->n_operands, &n));
  n->a = sn->a;
  if (!sn->multi) {
    n->shape = *shape;
    return lathe_node_commit(n, out);
  }
  LATHE_RETURN_IF_ERROR(lathe_node_set_outputs(n, sn->out_shapes, sn->n_out));
  lathe_node **vals = lathe_arena_alloc(&p->dst->graph->arena, sizeof(lathe_node *) * (size_t)sn->n_out);
  if (!vals) return LATHE_OOM("Partition");
  LATHE_RETURN_IF_ERROR(lathe_node_commit_multi(n, vals));
  p->tuples[sn->id] = vals;
  *out = n;
  return NULL;
}

/* Emits sn on its operands resharded to need[i], with result sharding rs. */
static lathe_status_t emit_with(part *p, const lathe_node *sn, const spec *need, const spec *rs, lathe_node **out) {
  lathe_node **ops = p->ops;
  for (int i = 0; i < sn->n_operands; i++) LATHE_RETURN_IF_ERROR(get(p, sn->in[i], &need[i], &ops[i]));
  lathe_shape ls;
  local_shape(p, rs, &sn->shape, &ls);
  LATHE_RETURN_IF_ERROR(emit(p, sn, ops, &ls, out));
  set(p, sn, *out, rs);
  return NULL;
}

/* ---- rules: each decides the operands' and the result's shardings ---- */

static lathe_status_t fallback(part *p, const lathe_node *sn) {
  spec *need = p->need;
  bool gathered = false;
  for (int i = 0; i < sn->n_operands; i++) {
    need[i] = replicated_spec(sn->in[i]->shape.rank);
    gathered |= !replicated(own(p, sn->in[i]->id));
  }
  p->fallbacks += gathered;
  const char *name = lathe_op_name(sn->op);
  size_t at = strlen(p->fallback_ops), len = strlen(name);
  bool listed = false;
  for (const char *f = p->fallback_ops; gathered && (f = strstr(f, name)); f += len)
    listed |= (f == p->fallback_ops || f[-1] == ' ') && (f[len] == ',' || f[len] == 0);
  if (gathered && !listed && at + len + 3 < sizeof p->fallback_ops)
    snprintf(p->fallback_ops + at, sizeof p->fallback_ops - at, "%s%s", at ? ", " : "", name);
  spec rs = replicated_spec(sn->multi ? 0 : sn->shape.rank);
  lathe_node *out;
  return emit_with(p, sn, need, &rs, &out);
}

/* Elementwise (with GoMLX broadcasting: equal ranks with size-1 axes, or scalars): the result takes
 * the sharding of one operand of its rank, the one whose choice moves the fewest bytes. */
static lathe_status_t rule_elementwise(part *p, const lathe_node *sn) {
  int r = sn->shape.rank, n = sn->n_operands;
  spec best = replicated_spec(r), *need = p->need;
  double best_cost = -1;
  int64_t best_parts = 0;
  for (int c = 0; c <= n; c++) { /* each operand's sharding, then the consumers' (backward) */
    const lathe_node *x = c < n ? sn->in[c] : sn;
    if (x->shape.rank != r || (c == n && !p->hinted[sn->id])) continue;
    spec cand = c < n ? *own(p, x->id) : p->hint[sn->id];
    int64_t np = 1;
    for (int a = 0; a < r; a++)
      if (x->shape.dims[a] != sn->shape.dims[a]) clear_axis(&cand, a);
      else np *= parts(p, &cand, a);
    double cost = 0;
    for (int i = 0; i < n; i++) {
      const lathe_node *y = sn->in[i];
      spec t = cand;
      if (y->shape.rank != r) t = replicated_spec(y->shape.rank);
      for (int a = 0; y->shape.rank == r && a < r; a++)
        if (y->shape.dims[a] != sn->shape.dims[a]) clear_axis(&t, a);
      cost += reshard_cost(p, y, &t);
    }
    if (best_cost < 0 || cost < best_cost || (cost == best_cost && np > best_parts))
      best = cand, best_cost = cost, best_parts = np;
  }
  for (int i = 0; i < n; i++) {
    const lathe_node *y = sn->in[i];
    need[i] = y->shape.rank == r ? best : replicated_spec(y->shape.rank);
    for (int a = 0; y->shape.rank == r && a < r; a++)
      if (y->shape.dims[a] != sn->shape.dims[a]) clear_axis(&need[i], a);
  }
  lathe_node *out;
  return emit_with(p, sn, need, &best, &out);
}

/* Partial results v of sn (sharding rs, split nowhere over the mesh axes ax[0..n_ax) of mesh m)
 * combined over those axes: a ReduceScatter where sn's consumers (the backward hint) want an axis
 * split over exactly those mesh axes -- each device then receives only its slice, half the bytes
 * of an AllReduce and no slice after it --, else an AllReduce. */
static lathe_status_t combine(part *p, const lathe_node *sn, lathe_node *v, spec rs, lathe_op op, int m, const int *ax,
                              int n_ax) {
  const spec *h = p->hinted[sn->id] ? &p->hint[sn->id] : NULL;
  for (int b = 0; h && b < rs.rank; b++) {
    if (rs.n_axes[b] || h->n_axes[b] != n_ax || h->mesh != m) continue;
    bool same = true;
    for (int k = 0; k < n_ax; k++) {
      bool in = false;
      for (int q = 0; q < n_ax; q++) in |= h->axes[b][k] == ax[q];
      same &= in;
    }
    if (!same || sn->shape.dims[b] % parts(p, h, b)) continue;
    int R = p->src->n_replicas, *groups = malloc(sizeof(int) * 2 * (size_t)R);
    if (!groups) return LATHE_OOM("Partition");
    int n = groups_for(p, m, h->axes[b], n_ax, groups, groups + R);
    lathe_status_t st = lathe_reduce_scatter(p->fn, v, b, op, groups, groups + R, n, &v);
    free(groups);
    LATHE_RETURN_IF_ERROR(st);
    p->collectives++;
    copy_axis(&rs, b, h, b);
    set(p, sn, v, &rs);
    return NULL;
  }
  LATHE_RETURN_IF_ERROR(all_reduce(p, v, op, m, ax, n_ax, &v));
  set(p, sn, v, &rs);
  return NULL;
}

static bool all_reducible(lathe_op op, lathe_dtype dt) {
  if (dt == LATHE_DTYPE_BOOL) return false;
  if (op == LATHE_OP_REDUCE_SUM || op == LATHE_OP_REDUCE_PRODUCT) return true;
  return (op == LATHE_OP_REDUCE_MAX || op == LATHE_OP_REDUCE_MIN) && !lathe_dtype_is_complex(dt);
}

/* Reductions: a reduced axis that is sharded gives partial results, then an AllReduce of them
 * (Sum, Product, Max, Min; the bitwise and logical ones gather the axis first). */
static lathe_status_t rule_reduce(part *p, const lathe_node *sn) {
  const lathe_node *x = sn->in[0];
  spec in = *own(p, x->id), rs = replicated_spec(sn->shape.rank);
  lathe_ilist axes = lathe_attr_reduce_axes(sn);
  bool reduced[LATHE_MAX_RANK] = {false};
  for (int k = 0; k < axes.n; k++) reduced[axes.v[k]] = true;
  bool ar = all_reducible(sn->op, sn->shape.dtype);
  int ax[LATHE_MAX_MESH_RANK], n_ax = 0;
  for (int a = 0; a < in.rank; a++) {
    if (!reduced[a] || !in.n_axes[a]) continue;
    if (!ar) {
      clear_axis(&in, a);
      continue;
    }
    for (int k = 0; k < in.n_axes[a]; k++) ax[n_ax++] = in.axes[a][k];
  }
  for (int a = 0, b = 0; a < in.rank; a++)
    if (!reduced[a]) copy_axis(&rs, b++, &in, a);
  lathe_node *v;
  LATHE_RETURN_IF_ERROR(emit_with(p, sn, &in, &rs, &v));
  return n_ax ? combine(p, sn, v, rs, sn->op, in.mesh, ax, n_ax) : NULL;
}

static lathe_status_t rule_transpose(part *p, const lathe_node *sn) {
  spec in = *own(p, sn->in[0]->id), rs = replicated_spec(sn->shape.rank);
  lathe_ilist perm = lathe_attr_transpose_permutation(sn);
  if (replicated(&in) && p->hinted[sn->id]) /* open: the consumers' sharding, sliced locally */
    for (int i = 0; i < perm.n; i++) copy_axis(&in, (int)perm.v[i], &p->hint[sn->id], i);
  for (int i = 0; i < perm.n; i++) copy_axis(&rs, i, &in, (int)perm.v[i]);
  lathe_node *out;
  return emit_with(p, sn, &in, &rs, &out);
}

/* BroadcastInDim: operand axis i keeps its sharding on result axis axes[i] (unless it broadcasts
 * from size 1); new axes are replicated. */
static lathe_status_t rule_broadcast(part *p, const lathe_node *sn) {
  const lathe_node *x = sn->in[0];
  spec in = *own(p, x->id), rs = replicated_spec(sn->shape.rank);
  lathe_ilist axes = lathe_attr_broadcast_in_dim_axes(sn);
  if (replicated(&in) && p->hinted[sn->id]) /* open: the consumers' sharding, sliced locally */
    for (int i = 0; i < axes.n; i++) copy_axis(&in, i, &p->hint[sn->id], (int)axes.v[i]);
  for (int i = 0; i < axes.n; i++) {
    if (x->shape.dims[i] != sn->shape.dims[axes.v[i]]) clear_axis(&in, i);
    copy_axis(&rs, (int)axes.v[i], &in, i);
  }
  lathe_node *out;
  return emit_with(p, sn, &in, &rs, &out);
}

/* Reshape: a sharded operand axis a keeps its split on the result axis b that starts at the same
 * element (equal products of the axes before them) and divides by the split; then both shards are
 * the same contiguous block. Other sharded axes are gathered first. */
static lathe_status_t rule_reshape(part *p, const lathe_node *sn) {
  const lathe_shape *xs = &sn->in[0]->shape, *os = &sn->shape;
  spec in = *own(p, sn->in[0]->id), rs = replicated_spec(os->rank);
  int64_t pin = 1;
  for (int a = 0; a < xs->rank; pin *= xs->dims[a], a++) {
    if (!in.n_axes[a]) continue;
    int64_t pout = 1, n = parts(p, &in, a);
    int b = 0;
    while (b < os->rank && pout < pin) pout *= os->dims[b++];
    while (b < os->rank && pout == pin && os->dims[b] == 1 && xs->dims[a] != 1) b++; /* size-1 axes first */
    if (b < os->rank && pout == pin && os->dims[b] % n == 0) copy_axis(&rs, b, &in, a);
    else clear_axis(&in, a);
  }
  lathe_node *out;
  return emit_with(p, sn, &in, &rs, &out);
}

/* Slice and Pad: axes the op changes are gathered; the rest keep their sharding. */
static lathe_status_t rule_slice(part *p, const lathe_node *sn) {
  const lathe_node *x = sn->in[0];
  spec in = *own(p, x->id);
  lathe_ilist st = lathe_attr_slice_starts(sn), li = lathe_attr_slice_limits(sn), sd = lathe_attr_slice_strides(sn);
  int64_t starts[LATHE_MAX_RANK], limits[LATHE_MAX_RANK], strides[LATHE_MAX_RANK];
  for (int a = 0; a < x->shape.rank; a++) {
    if (st.v[a] != 0 || li.v[a] != x->shape.dims[a] || sd.v[a] != 1) clear_axis(&in, a);
    starts[a] = st.v[a], limits[a] = li.v[a], strides[a] = sd.v[a];
    if (in.n_axes[a]) limits[a] = x->shape.dims[a] / parts(p, &in, a);
  }
  lathe_node *v, *out;
  LATHE_RETURN_IF_ERROR(get(p, x, &in, &v));
  LATHE_RETURN_IF_ERROR(lathe_slice(p->fn, v, starts, limits, strides, x->shape.rank, &out));
  set(p, sn, out, &in);
  return NULL;
}

static lathe_status_t rule_pad(part *p, const lathe_node *sn) {
  const lathe_node *x = sn->in[0];
  spec need[2] = {*own(p, x->id), replicated_spec(sn->in[1]->shape.rank)};
  lathe_ilist lo = lathe_attr_pad_start(sn), hi = lathe_attr_pad_end(sn), in = lathe_attr_pad_interior(sn);
  for (int a = 0; a < x->shape.rank; a++)
    if (lo.v[a] || hi.v[a] || in.v[a]) clear_axis(&need[0], a);
  lathe_node *out;
  return emit_with(p, sn, need, &need[0], &out);
}

/* Concatenate: every operand takes the first one's sharding, the concatenated axis gathered. */
static lathe_status_t rule_concatenate(part *p, const lathe_node *sn) {
  spec *need = p->need;
  spec t = *own(p, sn->in[0]->id);
  clear_axis(&t, (int)lathe_attr_concatenate_axis(sn));
  for (int i = 0; i < sn->n_operands; i++) need[i] = t;
  lathe_node *out;
  return emit_with(p, sn, need, &t, &out);
}

/* DotGeneral: batch axes keep a sharding both sides can take; a contracting pair sharded alike
 * gives partial sums and an AllReduce (one side sharded: the other is sliced to match when the
 * AllReduce of the result moves fewer bytes than gathering that side); free axes keep theirs
 * unless a mesh axis is taken. Result axes: batch, lhs free, rhs free. */
static lathe_status_t rule_dot(part *p, const lathe_node *sn) {
  const lathe_node *l = sn->in[0], *r = sn->in[1];
  const spec *L = own(p, l->id), *R = own(p, r->id);
  lathe_ilist lc = lathe_attr_dot_general_lhs_contracting(sn), lb = lathe_attr_dot_general_lhs_batch(sn);
  lathe_ilist rc = lathe_attr_dot_general_rhs_contracting(sn), rb = lathe_attr_dot_general_rhs_batch(sn);
  spec nl = replicated_spec(l->shape.rank), nr = replicated_spec(r->shape.rank), rs = replicated_spec(sn->shape.rank);
  /* `used` collects every mesh axis the dot's operands are split over (one mesh). */
  spec used = replicated_spec(LATHE_MAX_RANK);
  int slot = 0, ax[LATHE_MAX_MESH_RANK], n_ax = 0, mesh = -1;
  lathe_shape os;
  local_shape(p, &rs, &sn->shape, &os);
  for (int k = 0; k < lc.n; k++) {
    int a = (int)lc.v[k], b = (int)rc.v[k];
    spec pick = replicated_spec(1);
    if (L->n_axes[a] && axis_eq(L, a, R, b)) copy_axis(&pick, 0, L, a);
    else if (L->n_axes[a] || R->n_axes[b]) {
      /* one side (or two different) splits: partial sums when their AllReduce is cheaper */
      const spec *S = L->n_axes[a] ? L : R;
      int sa = L->n_axes[a] ? a : b;
      const lathe_node *sx = L->n_axes[a] ? l : r;
      lathe_shape ls;
      local_shape(p, S, &sx->shape, &ls);
      double G = (double)parts(p, S, sa);
      double gather = (double)lathe_shape_byte_size(&ls) * (G - 1), reduce = 2.0 * (double)lathe_shape_byte_size(&os) * (G - 1) / G;
      if (reduce < gather) copy_axis(&pick, 0, S, sa);
    }
    if (pick.n_axes[0] && (mesh < 0 || mesh == pick.mesh) && try_copy_axis(&used, slot, &pick, 0)) {
      copy_axis(&nl, a, &pick, 0), copy_axis(&nr, b, &pick, 0);
      for (int q = 0; q < pick.n_axes[0]; q++) ax[n_ax++] = pick.axes[0][q];
      mesh = pick.mesh, slot++;
    }
  }
  int out = 0;
  for (int k = 0; k < lb.n; k++, out++) {
    int a = (int)lb.v[k], b = (int)rb.v[k];
    const spec *S = L->n_axes[a] ? L : R;
    int sa = L->n_axes[a] ? a : b;
    if (S->n_axes[sa] && (mesh < 0 || mesh == S->mesh) && try_copy_axis(&used, slot, S, sa)) {
      copy_axis(&nl, a, S, sa), copy_axis(&nr, b, S, sa), copy_axis(&rs, out, S, sa);
      mesh = S->mesh, slot++;
    }
  }
  for (int side = 0; side < 2; side++) {
    const lathe_node *x = side ? r : l;
    const spec *S = side ? R : L;
    spec *N = side ? &nr : &nl;
    lathe_ilist c = side ? rc : lc, bt = side ? rb : lb;
    for (int a = 0; a < x->shape.rank; a++) {
      bool paired = false;
      for (int k = 0; k < c.n; k++) paired |= c.v[k] == a;
      for (int k = 0; k < bt.n; k++) paired |= bt.v[k] == a;
      if (paired) continue;
      if (S->n_axes[a] && (mesh < 0 || mesh == S->mesh) && slot < LATHE_MAX_RANK && try_copy_axis(&used, slot, S, a)) {
        copy_axis(N, a, S, a), copy_axis(&rs, out, S, a);
        mesh = S->mesh, slot++;
      }
      out++;
    }
  }
  spec need[2] = {nl, nr};
  lathe_node *v;
  LATHE_RETURN_IF_ERROR(emit_with(p, sn, need, &rs, &v));
  return n_ax ? combine(p, sn, v, rs, LATHE_OP_REDUCE_SUM, mesh, ax, n_ax) : NULL;
}

/* ConvGeneral: the input's batch split and the kernel's output-channel split carry to the result's
 * batch and channel axes; input channels split alike on both sides give partial sums and an
 * AllReduce; spatial axes (windows cross shard edges) are gathered. With channel groups only the
 * batch split is kept; batch groups gather everything. */
static lathe_status_t rule_conv(part *p, const lathe_node *sn) {
  if (lathe_attr_conv_general_batch_group_count(sn) > 1) return fallback(p, sn);
  const lathe_node *x = sn->in[0], *k = sn->in[1];
  const spec *X = own(p, x->id), *K = own(p, k->id);
  int ib = (int)lathe_attr_conv_general_input_batch(sn), ic = (int)lathe_attr_conv_general_input_channels(sn);
  int kic = (int)lathe_attr_conv_general_kernel_input_channels(sn), koc = (int)lathe_attr_conv_general_kernel_output_channels(sn);
  int ob = (int)lathe_attr_conv_general_output_batch(sn), oc = (int)lathe_attr_conv_general_output_channels(sn);
  bool grouped = lathe_attr_conv_general_channel_group_count(sn) > 1;
  spec nx = replicated_spec(x->shape.rank), nk = replicated_spec(k->shape.rank), rs = replicated_spec(sn->shape.rank);
  spec used = replicated_spec(LATHE_MAX_RANK);
  int slot = 0, ax[LATHE_MAX_MESH_RANK], n_ax = 0;
  if (!grouped && X->n_axes[ic] && axis_eq(X, ic, K, kic) && try_copy_axis(&used, slot, X, ic)) {
    copy_axis(&nx, ic, X, ic), copy_axis(&nk, kic, X, ic), slot++;
    for (int q = 0; q < X->n_axes[ic]; q++) ax[n_ax++] = X->axes[ic][q];
  }
  if (X->n_axes[ib] && try_copy_axis(&used, slot, X, ib)) copy_axis(&nx, ib, X, ib), copy_axis(&rs, ob, X, ib), slot++;
  if (!grouped && K->n_axes[koc] && try_copy_axis(&used, slot, K, koc))
    copy_axis(&nk, koc, K, koc), copy_axis(&rs, oc, K, koc), slot++;
  spec need[2] = {nx, nk};
  lathe_node *v;
  LATHE_RETURN_IF_ERROR(emit_with(p, sn, need, &rs, &v));
  return n_ax ? combine(p, sn, v, rs, LATHE_OP_REDUCE_SUM, X->mesh, ax, n_ax) : NULL;
}

/* DynamicSlice and DynamicUpdateSlice: an axis taken whole (slice or update as large as the
 * operand's axis: its start clamps to 0) keeps its split; the others are gathered. Start indices
 * are replicated. */
static lathe_status_t rule_dynamic_slice(part *p, const lathe_node *sn) {
  const lathe_node *x = sn->in[0];
  bool update = sn->op == LATHE_OP_DYNAMIC_UPDATE_SLICE;
  const lathe_shape *part_shape = update ? &sn->in[1]->shape : &sn->shape;
  spec in = *own(p, x->id);
  if (replicated(&in) && p->hinted[sn->id]) in = p->hint[sn->id];
  for (int a = 0; a < x->shape.rank; a++)
    if (part_shape->dims[a] != x->shape.dims[a]) clear_axis(&in, a);
  spec *need = p->need;
  need[0] = in;
  for (int i = 1; i < sn->n_operands; i++) need[i] = update && i == 1 ? in : replicated_spec(sn->in[i]->shape.rank);
  if (update) {
    lathe_node *out;
    return emit_with(p, sn, need, &in, &out);
  }
  lathe_node **ops = p->ops, *out;
  for (int i = 0; i < sn->n_operands; i++) LATHE_RETURN_IF_ERROR(get(p, sn->in[i], &need[i], &ops[i]));
  lathe_shape ls;
  local_shape(p, &in, &sn->shape, &ls);
  LATHE_RETURN_IF_ERROR(lathe_dynamic_slice(p->fn, ops[0], ops + 1, sn->n_operands - 1, ls.dims, ls.rank, &out));
  set(p, sn, out, &in);
  return NULL;
}

/* Gather (an embedding lookup): an operand axis neither indexed nor collapsed and sliced whole keeps
 * its split on the result axis it becomes; the indices' batch axes keep theirs on the result's
 * batch axes; the index vector axis and the other operand axes are gathered. */
static lathe_status_t rule_gather(part *p, const lathe_node *sn) {
  const lathe_node *x = sn->in[0], *ix = sn->in[1];
  const spec *X = own(p, x->id), *I = own(p, ix->id);
  int iva = (int)lathe_attr_gather_index_vector_axis(sn);
  lathe_ilist off = lathe_attr_gather_offset_output_axes(sn), col = lathe_attr_gather_collapsed_slice_axes(sn);
  lathe_ilist map = lathe_attr_gather_start_index_map(sn), sizes = lathe_attr_gather_slice_sizes(sn);
  spec nx = replicated_spec(x->shape.rank), ni = replicated_spec(ix->shape.rank), rs = replicated_spec(sn->shape.rank);
  spec used = replicated_spec(LATHE_MAX_RANK);
  int slot = 0;
  bool is_off[LATHE_MAX_RANK] = {false};
  for (int j = 0; j < off.n; j++) is_off[off.v[j]] = true;
  /* the indices' batch axes, in order, are the result axes that are not offset axes */
  for (int a = 0, r = 0; a < ix->shape.rank; a++) {
    if (a == iva) continue;
    while (r < sn->shape.rank && is_off[r]) r++;
    if (I->n_axes[a] && try_copy_axis(&used, slot, I, a)) copy_axis(&ni, a, I, a), copy_axis(&rs, r, I, a), slot++;
    r++;
  }
  for (int a = 0, j = 0; a < x->shape.rank; a++) {
    bool collapsed = false, indexed = false;
    for (int k = 0; k < col.n; k++) collapsed |= col.v[k] == a;
    for (int k = 0; k < map.n; k++) indexed |= map.v[k] == a;
    if (collapsed) continue;
    int r = (int)off.v[j++];
    if (!indexed && sizes.v[a] == x->shape.dims[a] && X->n_axes[a] && slot < LATHE_MAX_RANK && try_copy_axis(&used, slot, X, a))
      copy_axis(&nx, a, X, a), copy_axis(&rs, r, X, a), slot++;
  }
  lathe_node *v, *iv, *out;
  LATHE_RETURN_IF_ERROR(get(p, x, &nx, &v));
  LATHE_RETURN_IF_ERROR(get(p, ix, &ni, &iv));
  int o[LATHE_MAX_RANK], c[LATHE_MAX_RANK], m[LATHE_MAX_RANK];
  int64_t ls[LATHE_MAX_RANK];
  for (int k = 0; k < off.n; k++) o[k] = (int)off.v[k];
  for (int k = 0; k < col.n; k++) c[k] = (int)col.v[k];
  for (int k = 0; k < map.n && k < LATHE_MAX_RANK; k++) m[k] = (int)map.v[k];
  for (int a = 0; a < sizes.n; a++) ls[a] = nx.n_axes[a] ? sizes.v[a] / parts(p, &nx, a) : sizes.v[a];
  LATHE_RETURN_IF_ERROR(lathe_gather(p->fn, v, iv, iva, o, off.n, c, col.n, m, map.n, ls, sizes.n,
                                     lathe_attr_gather_indices_are_sorted(sn), &out));
  set(p, sn, out, &rs);
  return NULL;
}

/* ScatterSum/Max/Min (an embedding's gradient): an operand axis that is neither indexed nor
 * inserted, and that the update windows cover whole, keeps its split, and the updates' window axis
 * takes it; indices and the updates' other axes are replicated. The split comes from the operand,
 * else from the consumers (the backward hint), else from the updates. */
static lathe_status_t rule_scatter(part *p, const lathe_node *sn) {
  const lathe_node *x = sn->in[0], *ix = sn->in[1], *up = sn->in[2];
  lathe_ilist win = lathe_attr_scatter_update_window_axes(sn), ins = lathe_attr_scatter_inserted_window_axes(sn);
  lathe_ilist map = lathe_attr_scatter_scatter_axes_to_operand_axes(sn);
  int window_of[LATHE_MAX_RANK]; /* operand axis -> updates axis, or -1 where it cannot keep a split */
  for (int a = 0, j = 0; a < x->shape.rank; a++) {
    bool inserted = false, indexed = false;
    for (int k = 0; k < ins.n; k++) inserted |= ins.v[k] == a;
    for (int k = 0; k < map.n; k++) indexed |= map.v[k] == a;
    window_of[a] = -1;
    if (inserted) continue;
    int u = (int)win.v[j++];
    if (!indexed && up->shape.dims[u] == x->shape.dims[a]) window_of[a] = u;
  }
  spec cands[3] = {*own(p, x->id), p->hinted[sn->id] ? p->hint[sn->id] : replicated_spec(x->shape.rank),
                   replicated_spec(x->shape.rank)};
  const spec *U = own(p, up->id);
  for (int a = 0; a < x->shape.rank; a++)
    if (window_of[a] >= 0 && U->n_axes[window_of[a]]) try_copy_axis(&cands[2], a, U, window_of[a]);
  spec in = replicated_spec(x->shape.rank);
  for (int c = 0; c < 3 && replicated(&in); c++) {
    in = cands[c];
    for (int a = 0; a < x->shape.rank; a++)
      if (window_of[a] < 0) clear_axis(&in, a);
  }
  spec *need = p->need;
  need[0] = in;
  need[1] = replicated_spec(ix->shape.rank);
  need[2] = replicated_spec(up->shape.rank);
  for (int a = 0; a < x->shape.rank; a++)
    if (window_of[a] >= 0) copy_axis(&need[2], window_of[a], &in, a);
  lathe_node *out;
  return emit_with(p, sn, need, &in, &out);
}

/* Ops that work along some axes of their first operand independently of its other axes: those
 * axes are gathered, the rest keep their split (or take the consumers' where the operand is
 * replicated). Reverse, CumSum, FusedSoftmax, FusedLayerNorm (its gamma and beta, over the
 * normalised axes, replicated), FusedActivation (an axis it resizes, as SwiGLU's, gathered);
 * ArgMinMax also drops its axis. */
static lathe_status_t rule_axis_local(part *p, const lathe_node *sn) {
  const lathe_node *x = sn->in[0];
  bool drop = sn->op == LATHE_OP_ARG_MIN_MAX;
  spec in = *own(p, x->id), *need = p->need;
  if (replicated(&in) && !drop && p->hinted[sn->id]) in = p->hint[sn->id];
  bool along[LATHE_MAX_RANK] = {false};
  lathe_ilist list = {NULL, 0};
  switch (sn->op) {
    case LATHE_OP_REVERSE: list = lathe_attr_reverse_axes(sn); break;
    case LATHE_OP_FUSED_LAYER_NORM: list = lathe_attr_fused_layer_norm_axes(sn); break;
    case LATHE_OP_CUM_SUM: along[lathe_attr_cum_sum_axis(sn)] = true; break;
    case LATHE_OP_ARG_MIN_MAX: along[lathe_attr_arg_min_max_axis(sn)] = true; break;
    case LATHE_OP_FUSED_SOFTMAX: along[lathe_attr_fused_softmax_axis(sn)] = true; break;
    default: break;
  }
  for (int k = 0; k < list.n; k++) along[list.v[k]] = true;
  for (int a = 0; a < x->shape.rank; a++)
    if (along[a] || (!drop && x->shape.dims[a] != sn->shape.dims[a])) clear_axis(&in, a);
  spec rs = replicated_spec(sn->shape.rank);
  for (int a = 0, b = 0; a < x->shape.rank; a++)
    if (!drop || !along[a]) copy_axis(&rs, b++, &in, a);
  need[0] = in;
  for (int i = 1; i < sn->n_operands; i++) need[i] = replicated_spec(sn->in[i]->shape.rank);
  lathe_node *out;
  return emit_with(p, sn, need, &rs, &out);
}

/* Iota: computed locally in the consumers' sharding where that leaves the counted axis whole
 * (the other axes' values do not depend on the offset); else replicated. */
static lathe_status_t rule_iota(part *p, const lathe_node *sn) {
  spec rs = replicated_spec(sn->shape.rank);
  if (p->hinted[sn->id] && !p->hint[sn->id].n_axes[lathe_attr_iota_axis(sn)]) rs = p->hint[sn->id];
  lathe_node *out;
  return emit_with(p, sn, NULL, &rs, &out);
}

/* The backward pass: from the outputs' shardings, through the ops whose operands could take the
 * same split (elementwise, Transpose, BroadcastInDim), the sharding each value's consumers want.
 * The forward pass weighs it with the operands' (rule_elementwise) or takes it where the operands
 * are replicated: an open value is then computed split instead of whole and sliced. */
static void hint(part *p, const lathe_node *n, const spec *s) {
  if (p->hinted[n->id] || replicated(s) || n->fn != p->src->main_fn) return;
  p->hint[n->id] = *s;
  p->hinted[n->id] = true;
}

static void backward(part *p) {
  const lathe_function *fn = p->src->main_fn;
  for (int i = 0; i < fn->n_outputs; i++) {
    spec t = user_spec(p->src, p->src->output_shardings ? p->src->output_shardings[i] : NULL, fn->outputs[i]->shape.rank);
    hint(p, fn->outputs[i], &t);
  }
  for (int k = fn->n_nodes - 1; k >= 0; k--) {
    const lathe_node *n = fn->nodes[k];
    if (!p->hinted[n->id] || n->multi) continue;
    const spec *h = &p->hint[n->id];
    if (lathe_op_has(n->op, LATHE_OPF_EW)) {
      for (int i = 0; i < n->n_operands; i++) {
        const lathe_node *x = n->in[i];
        if (x->shape.rank != n->shape.rank) continue;
        spec t = *h;
        for (int a = 0; a < t.rank; a++)
          if (x->shape.dims[a] != n->shape.dims[a]) clear_axis(&t, a);
        hint(p, x, &t);
      }
    } else if (n->op == LATHE_OP_TRANSPOSE) {
      lathe_ilist perm = lathe_attr_transpose_permutation(n);
      spec t = replicated_spec(n->in[0]->shape.rank);
      for (int i = 0; i < perm.n; i++) copy_axis(&t, (int)perm.v[i], h, i);
      hint(p, n->in[0], &t);
    } else if (n->op == LATHE_OP_BROADCAST_IN_DIM) {
      lathe_ilist axes = lathe_attr_broadcast_in_dim_axes(n);
      spec t = replicated_spec(n->in[0]->shape.rank);
      for (int i = 0; i < axes.n; i++)
        if (n->in[0]->shape.dims[i] == n->shape.dims[axes.v[i]]) copy_axis(&t, i, h, (int)axes.v[i]);
      hint(p, n->in[0], &t);
    }
  }
}

static bool is_reduce(lathe_op op) {
  switch (op) {
    case LATHE_OP_REDUCE_SUM: case LATHE_OP_REDUCE_PRODUCT: case LATHE_OP_REDUCE_MAX: case LATHE_OP_REDUCE_MIN:
    case LATHE_OP_REDUCE_BITWISE_AND: case LATHE_OP_REDUCE_BITWISE_OR: case LATHE_OP_REDUCE_BITWISE_XOR:
    case LATHE_OP_REDUCE_LOGICAL_AND: case LATHE_OP_REDUCE_LOGICAL_OR: case LATHE_OP_REDUCE_LOGICAL_XOR:
      return true;
    default: return false;
  }
}

static lathe_status_t partition_node(part *p, const lathe_node *sn) {
  if (sn->op == LATHE_OP_TUPLE_ELEMENT) {
    lathe_node *v = p->tuples[sn->in[0]->id][lathe_attr_tuple_element_index(sn)];
    spec rs = replicated_spec(sn->shape.rank);
    set(p, sn, v, &rs);
    return NULL;
  }
  if (sn->multi) return fallback(p, sn);
  if (lathe_op_has(sn->op, LATHE_OPF_EW)) return rule_elementwise(p, sn);
  if (is_reduce(sn->op)) return rule_reduce(p, sn);
  switch (sn->op) {
    case LATHE_OP_TRANSPOSE: return rule_transpose(p, sn);
    case LATHE_OP_BROADCAST_IN_DIM: return rule_broadcast(p, sn);
    case LATHE_OP_RESHAPE: return rule_reshape(p, sn);
    case LATHE_OP_SLICE: return rule_slice(p, sn);
    case LATHE_OP_PAD: return rule_pad(p, sn);
    case LATHE_OP_CONCATENATE: return rule_concatenate(p, sn);
    case LATHE_OP_DOT_GENERAL: return rule_dot(p, sn);
    case LATHE_OP_IOTA: return rule_iota(p, sn);
    case LATHE_OP_CONV_GENERAL: return rule_conv(p, sn);
    case LATHE_OP_SCATTER_SUM: case LATHE_OP_SCATTER_MAX: case LATHE_OP_SCATTER_MIN: return rule_scatter(p, sn);
    case LATHE_OP_GATHER: return lathe_attr_gather_start_index_map(sn).n <= LATHE_MAX_RANK ? rule_gather(p, sn) : fallback(p, sn);
    case LATHE_OP_DYNAMIC_SLICE: case LATHE_OP_DYNAMIC_UPDATE_SLICE: return rule_dynamic_slice(p, sn);
    case LATHE_OP_REVERSE: case LATHE_OP_CUM_SUM: case LATHE_OP_ARG_MIN_MAX: case LATHE_OP_FUSED_SOFTMAX:
    case LATHE_OP_FUSED_LAYER_NORM: case LATHE_OP_FUSED_ACTIVATION:
      return rule_axis_local(p, sn);
    default: return fallback(p, sn); /* constants too: replicated, sliced where needed */
  }
}

/* ---- the pass ---- */

static const char *why_whole(struct lathe_builder *src) {
  if (src->n_replicas < 2) return "one device";
  if (src->n_fns > 1) return "the program has closures or called functions (While, If, Sort, Call)";
  if (lathe_collective_processes() > 1) return "the devices span several processes";
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

static lathe_status_t run(part *p) {
  struct lathe_builder *src = p->src;
  const lathe_function *fn = src->main_fn;
  LATHE_RETURN_IF_ERROR(lathe_builder_new(src->backend, src->name, &p->dst));
  LATHE_RETURN_IF_ERROR(lathe_builder_spmd(p->dst, src->n_replicas));
  if (src->devices) LATHE_RETURN_IF_ERROR(lathe_builder_assign_devices(p->dst, src->devices, src->n_assigned));
  p->fn = p->dst->main_fn;
  for (int i = 0; i < fn->n_params; i++) {
    const lathe_node *sp = fn->params[i];
    spec s = user_spec(src, sp->sharding, sp->shape.rank);
    lathe_shape ls;
    local_shape(p, &s, &sp->shape, &ls);
    lathe_node *v;
    LATHE_RETURN_IF_ERROR(lathe_parameter(p->fn, sp->name, &ls, &v));
    set(p, sp, v, &s);
  }
  lathe_shape cs = lathe_partition_coords_shape(src);
  LATHE_RETURN_IF_ERROR(lathe_parameter(p->fn, "lathe.mesh_coordinates", &cs, &p->coords));
  for (int m = 0, at = 0; m < src->n_meshes; at += src->meshes[m++].rank) p->coord_base[m] = at;
  backward(p);
  for (int k = 0; k < fn->n_nodes; k++)
    if (fn->nodes[k]->op != LATHE_OP_PARAMETER) LATHE_RETURN_IF_ERROR(partition_node(p, fn->nodes[k]));
  lathe_node **outs = lathe_arena_alloc(&p->dst->graph->arena, sizeof(lathe_node *) * (size_t)(fn->n_outputs + 1));
  if (!outs) return LATHE_OOM("Partition");
  for (int i = 0; i < fn->n_outputs; i++) {
    spec t = user_spec(src, src->output_shardings ? src->output_shardings[i] : NULL, fn->outputs[i]->shape.rank);
    LATHE_RETURN_IF_ERROR(get(p, fn->outputs[i], &t, &outs[i]));
  }
  LATHE_RETURN_IF_ERROR(lathe_function_return(p->fn, (lathe_value_t const *)outs, fn->n_outputs));
  p->dst->partitioned = true;
  p->dst->partition_fallbacks = p->fallbacks;
  p->dst->partition_collectives = p->collectives;
  p->dst->partition_fallback_ops = lathe_arena_strdup(&p->dst->graph->arena, p->fallback_ops);
  if (!p->dst->partition_fallback_ops) return LATHE_OOM("Partition");
  return NULL;
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
  memset(&p, 0, sizeof p);
  p.src = src;
  if (uneven(&p)) {
    report->declined = "a sharded axis does not divide by its shards (padded shards run whole)";
    return NULL;
  }
  int n = src->main_fn->n_nodes + 1;
  p.vars = calloc((size_t)n, sizeof *p.vars);
  p.n_vars = calloc((size_t)n, sizeof *p.n_vars);
  p.tuples = calloc((size_t)n, sizeof *p.tuples);
  p.hint = calloc((size_t)n, sizeof *p.hint);
  p.hinted = calloc((size_t)n, sizeof *p.hinted);
  int max_ops = 1;
  for (int k = 0; k < src->main_fn->n_nodes; k++)
    if (src->main_fn->nodes[k]->n_operands > max_ops) max_ops = src->main_fn->nodes[k]->n_operands;
  p.need = calloc((size_t)max_ops, sizeof *p.need);
  p.ops = calloc((size_t)max_ops, sizeof *p.ops);
  lathe_status_t st = (!p.vars || !p.n_vars || !p.tuples || !p.hint || !p.hinted || !p.need || !p.ops)
                          ? LATHE_OOM("Partition") : run(&p);
  free(p.vars);
  free(p.n_vars);
  free(p.tuples);
  free(p.hint);
  free(p.hinted);
  free(p.need);
  free(p.ops);
  if (st) {
    lathe_builder_free(p.dst);
    return lathe_status_annotate(st, "Partition");
  }
  report->fallbacks = p.fallbacks;
  report->collectives = p.collectives;
  *out = p.dst;
  return NULL;
}
