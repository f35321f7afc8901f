/* fusion.c -- elementwise fusion: a run of consecutive elementwise ops whose results share one
 * shape executes tile by tile. Each op's kernel runs on TILE-element slices through stand-in
 * nodes of shape [len]; values used only inside the run live in per-thread tile buffers, and
 * only escaping values (used later, or outputs) are written at full size. */
#include "fusion.h"

#include <pthread.h>

enum { TILE = 4096, MAX_OPERANDS = 3 };

/* Elementwise ops whose operands have the result's dims or are scalars, on byte-sized dtypes. */
static bool fusable(const lathe_node *n) {
  lathe_op_kind k = lathe_op_kind_of(n->op);
  if (!(k == LATHE_KIND_UNARY || k == LATHE_KIND_BINARY || k == LATHE_KIND_COMPARE || k == LATHE_KIND_SELECT ||
        n->op == LATHE_OP_CONVERT_DTYPE))
    return false;
  if (n->multi || n->shape.rank == 0 || lathe_dtype_is_packed(n->shape.dtype) || n->n_in > MAX_OPERANDS) return false;
  for (int i = 0; i < n->n_in; i++) {
    const lathe_shape *o = &n->in[i]->shape;
    if (lathe_dtype_is_packed(o->dtype)) return false;
    if (o->rank == 0) continue;
    if (o->rank != n->shape.rank) return false;
    for (int d = 0; d < o->rank; d++)
      if (o->dims[d] != n->shape.dims[d]) return false;
  }
  return true;
}

static bool same_dims(const lathe_shape *a, const lathe_shape *b) {
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

void lathe_fusion_plan_free(lathe_fusion_plan *p) {
  if (!p) return;
  for (int i = 0; i < p->n_groups; i++) free(p->groups[i].escapes);
  free(p->groups);
  free(p->group_at);
  memset(p, 0, sizeof *p);
}

static lathe_status_t close_group(const lathe_function *fn, const lathe_schedule *s, lathe_fusion_plan *p, int first,
                                  int last) {
  if (first < 0 || last - first < 1) return NULL;
  lathe_fusion_group g = {first, last, calloc((size_t)(last - first + 1), sizeof(bool))};
  lathe_fusion_group *ng = realloc(p->groups, sizeof *ng * (size_t)(p->n_groups + 1));
  if (!g.escapes || !ng) {
    free(g.escapes);
    if (ng) p->groups = ng;
    return LATHE_OOM("Compile");
  }
  p->groups = ng;
  for (int q = first; q <= last; q++) {
    int lu = s->last_use[fn->nodes[s->order[q]]->id];
    g.escapes[q - first] = lu > last; /* later consumers, or an output (last_use == n_order) */
  }
  p->group_at[first] = p->n_groups;
  p->groups[p->n_groups++] = g;
  return NULL;
}

lathe_status_t lathe_fusion_plan_build(const lathe_function *fn, const lathe_schedule *s, lathe_fusion_plan *out) {
  lathe_fusion_plan p = {0};
  p.group_at = malloc(sizeof(int) * (size_t)(s->n_order + 1));
  if (!p.group_at) return LATHE_OOM("Compile");
  for (int q = 0; q < s->n_order; q++) p.group_at[q] = -1;
  int first = -1;
  lathe_status_t st = NULL;
  for (int q = 0; q < s->n_order && !st; q++) {
    const lathe_node *n = fn->nodes[s->order[q]];
    if (fusable(n) && first >= 0 && same_dims(&n->shape, &fn->nodes[s->order[first]]->shape)) continue;
    st = close_group(fn, s, &p, first, q - 1);
    first = fusable(n) ? q : -1;
  }
  if (!st) st = close_group(fn, s, &p, first, s->n_order - 1);
  if (st) {
    lathe_fusion_plan_free(&p);
    return st;
  }
  *out = p;
  return NULL;
}

/* ---- execution ---- */
typedef struct {
  lathe_cpu_exec *ex;
  const lathe_function *fn;
  const lathe_schedule *s;
  const lathe_fusion_group *g;
  lathe_tensor **vals;
  lathe_tensor **full; /* per member: its full-size result if it escapes */
  int m;
  int64_t total;
  pthread_mutex_t mu;
  lathe_status_t err;
} run_ctx;

static int member_of(const run_ctx *c, int cid) {
  for (int j = 0; j < c->m; j++)
    if (c->s->order[c->g->first + j] == cid) return j;
  return -1;
}

static size_t esz(lathe_dtype dt) { return (size_t)lathe_dtype_bits(dt) / 8; }

/* A tensor struct over len elements of dtype dt at element off of base (a view: no reference). */
static lathe_tensor view(lathe_dtype dt, void *base, int64_t off, int64_t len) {
  lathe_tensor v;
  memset(&v, 0, sizeof v);
  v.shape.dtype = dt;
  v.shape.rank = 1;
  v.shape.dims[0] = len;
  v.data = (unsigned char *)base + (size_t)off * esz(dt);
  v.nbytes = (size_t)len * esz(dt);
  return v;
}

static void run_tiles(void *vc, int64_t tb, int64_t te) {
  run_ctx *c = vc;
  int m = c->m;
  lathe_node *fake = calloc((size_t)m * (1 + MAX_OPERANDS), sizeof(lathe_node));
  lathe_node **fake_in = calloc((size_t)m * MAX_OPERANDS, sizeof(lathe_node *));
  void **scratch = calloc((size_t)m, sizeof(void *));
  lathe_tensor *tiles = calloc((size_t)m, sizeof(lathe_tensor)); /* each member's result tile */
  bool ok = fake && fake_in && scratch && tiles;
  for (int i = 0; ok && i < m; i++) {
    const lathe_node *n = c->fn->nodes[c->s->order[c->g->first + i]];
    if (!c->g->escapes[i]) ok = (scratch[i] = lathe_aligned_alloc(TILE * esz(n->shape.dtype))) != NULL;
    /* stand-ins: the member with shape [len], its operands likewise (scalars stay scalars) */
    lathe_node *f = &fake[i * (1 + MAX_OPERANDS)];
    *f = *n;
    f->in = &fake_in[i * MAX_OPERANDS];
    for (int k = 0; k < n->n_in; k++) {
      f->in[k] = &fake[i * (1 + MAX_OPERANDS) + 1 + k];
      *f->in[k] = *n->in[k];
    }
  }
  lathe_status_t err = ok ? NULL : LATHE_OOM("fused elementwise run");
  for (int64_t t = tb; t < te && !err; t++) {
    int64_t off = t * TILE, len = c->total - off < TILE ? c->total - off : TILE;
    for (int i = 0; i < m && !err; i++) {
      const lathe_node *n = c->fn->nodes[c->s->order[c->g->first + i]];
      lathe_node *f = &fake[i * (1 + MAX_OPERANDS)];
      f->shape.dims[0] = len;
      f->shape.rank = 1;
      lathe_tensor in_v[MAX_OPERANDS], *in_p[MAX_OPERANDS], out_v, *out_p = &out_v;
      for (int k = 0; k < n->n_in; k++) {
        int cid = c->s->remap[n->in[k]->id], j = member_of(c, cid);
        lathe_tensor *src = j >= 0 ? NULL : c->vals[cid];
        if (src && src->shape.rank == 0) {
          in_p[k] = src;
          continue;
        }
        f->in[k]->shape.rank = 1;
        f->in[k]->shape.dims[0] = len;
        in_p[k] = &in_v[k];
        in_v[k] = j < 0 ? view(src->shape.dtype, src->data, off, len) : tiles[j];
      }
      out_v = c->g->escapes[i] ? view(n->shape.dtype, c->full[i]->data, off, len) : view(n->shape.dtype, scratch[i], 0, len);
      tiles[i] = out_v;
      err = lathe_cpu_run_kernel(c->ex, f, in_p, &out_p);
    }
  }
  for (int i = 0; scratch && i < m; i++) lathe_aligned_free(scratch[i]);
  free(scratch);
  free(tiles);
  free(fake_in);
  free(fake);
  if (err) {
    pthread_mutex_lock(&c->mu);
    if (!c->err) c->err = err;
    else lathe_status_free(err);
    pthread_mutex_unlock(&c->mu);
  }
}

lathe_status_t lathe_fusion_run(lathe_cpu_exec *ex, const lathe_function *fn, const lathe_schedule *s,
                                const lathe_fusion_group *g, lathe_tensor **vals) {
  run_ctx c = {.ex = ex, .fn = fn, .s = s, .g = g, .vals = vals, .m = g->last - g->first + 1};
  const lathe_node *head = fn->nodes[s->order[g->first]];
  c.total = lathe_shape_size(&head->shape);
  c.full = calloc((size_t)c.m, sizeof(lathe_tensor *));
  if (!c.full) return LATHE_OOM("fused elementwise run");
  lathe_status_t st = NULL;
  /* Full-size results of escaping members, reusing an operand that dies at that member when
   * nothing else holds it: every earlier reader has read the tile before the member writes it. */
  for (int i = 0; i < c.m && !st; i++) {
    if (!g->escapes[i]) continue;
    const lathe_node *n = fn->nodes[s->order[g->first + i]];
    for (int k = 0; k < n->n_in && !c.full[i]; k++) {
      int cid = s->remap[n->in[k]->id];
      lathe_tensor *t = member_of(&c, cid) < 0 ? vals[cid] : NULL;
      if (!t || s->last_use[cid] != g->first + i || atomic_load(&t->refs) != 1 || !lathe_shape_equal(&t->shape, &n->shape))
        continue;
      bool taken = false;
      for (int j = 0; j < i; j++) taken |= c.full[j] == t;
      if (!taken) c.full[i] = lathe_tensor_retain(t);
    }
    if (!c.full[i]) st = lathe_cpu_tensor_new(&n->shape, &c.full[i]);
  }
  if (!st) {
    pthread_mutex_init(&c.mu, NULL);
    int64_t n_tiles = (c.total + TILE - 1) / TILE;
    lathe_parallel_for(lathe_cpu_exec_pool(ex), n_tiles, 8, run_tiles, &c);
    pthread_mutex_destroy(&c.mu);
    st = c.err;
  }
  for (int i = 0; i < c.m; i++) {
    const lathe_node *n = fn->nodes[s->order[g->first + i]];
    if (!st && c.full[i]) vals[n->id] = c.full[i];
    else lathe_tensor_release(c.full[i]);
  }
  free(c.full);
  return st;
}
