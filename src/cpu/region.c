/* region.c -- fusion regions on the CPU, tile by tile. A LOOP region's iteration space is cut
 * into TILE-element ranges split over the pool; for each range every member's kernel runs on
 * 1-D views through stand-in nodes of shape [len]. Members whose values stay inside the region
 * live in per-thread tile buffers; only escaping members are written at full size. Inputs read
 * with broadcasting are gathered into a tile first. A REDUCE region runs its prologue, the
 * reduction and its epilogue in turn through the region's internal slots. */
#include <pthread.h>

#include "exec.h"

enum { TILE = 4096 };

static size_t esz(lathe_dtype dt) { return (size_t)lathe_dtype_bits(dt) / 8; }

/* A tensor struct over len elements of dtype dt at element off of base (a view: no reference). */
static lathe_tensor view(lathe_dtype dt, void *base, int64_t off, int64_t len) {
  lathe_tensor v;
  memset(&v, 0, sizeof v);
  v.flags = LATHE_TENSOR_VIEW;
  v.shape.dtype = dt;
  v.shape.rank = 1;
  v.shape.dims[0] = len;
  v.data = (unsigned char *)base + (size_t)off * esz(dt);
  v.nbytes = (size_t)len * esz(dt);
  return v;
}

typedef struct {
  lathe_cpu_exec *ex;
  const lathe_pregion *g;
  lathe_tensor **in;   /* per region input: its tensor */
  lathe_tensor **full; /* per member: its full-size result if it escapes */
  int64_t total;
  pthread_mutex_t mu;
  lathe_status_t err;
} run_ctx;

/* Copies elements [off, off+len) of the iteration space, read through strides, into dst. */
static void gather(const run_ctx *c, const lathe_pinput *pi, const lathe_tensor *src, int64_t off, int64_t len,
                   void *dst) {
  const lathe_shape *it = &c->g->shape;
  int r = it->rank;
  int64_t idx[LATHE_MAX_RANK];
  lathe_unflatten(off, it->dims, r, idx);
  size_t es = esz(src->shape.dtype);
  int64_t base = 0;
  for (int d = 0; d < r; d++) base += idx[d] * pi->strides[d];
  const unsigned char *s = src->data;
  unsigned char *o = dst;
  int64_t inner = it->dims[r - 1], step = pi->strides[r - 1];
  for (int64_t k = 0; k < len;) {
    int64_t run = inner - idx[r - 1];
    if (run > len - k) run = len - k;
    if (step == 1) {
      memcpy(o + (size_t)k * es, s + (size_t)base * es, (size_t)run * es);
    } else {
      for (int64_t j = 0; j < run; j++) memcpy(o + (size_t)(k + j) * es, s + (size_t)(base + j * step) * es, es);
    }
    k += run;
    /* next row: move the odometer past the innermost axis */
    base += run * step;
    idx[r - 1] += run;
    for (int d = r - 1; d > 0 && idx[d] == it->dims[d]; d--) {
      base -= idx[d] * pi->strides[d];
      idx[d] = 0;
      idx[d - 1]++;
      base += pi->strides[d - 1];
    }
  }
}

static void run_tiles(void *vc, int64_t tb, int64_t te) {
  run_ctx *c = vc;
  const lathe_pregion *g = c->g;
  int m = g->n_members;
  lathe_node *fake = calloc((size_t)m * (1 + LATHE_PMEMBER_MAX_IN), sizeof(lathe_node));
  lathe_node **fake_in = calloc((size_t)m * LATHE_PMEMBER_MAX_IN, sizeof(lathe_node *));
  void **scratch = calloc((size_t)m, sizeof(void *));
  void **gathered = calloc((size_t)g->n_inputs + 1, sizeof(void *));
  lathe_tensor *tiles = calloc((size_t)m, sizeof(lathe_tensor));                      /* each member's tile */
  lathe_tensor *in_tiles = calloc((size_t)g->n_inputs + 1, sizeof(lathe_tensor));    /* each input's tile */
  bool ok = fake && fake_in && scratch && gathered && tiles && in_tiles;
  for (int k = 0; ok && k < g->n_inputs; k++)
    if (g->inputs[k].access == LATHE_PACCESS_STRIDED)
      ok = (gathered[k] = lathe_aligned_alloc(TILE * esz(c->in[k]->shape.dtype))) != NULL;
  for (int i = 0; ok && i < m; i++) {
    const lathe_pmember *mb = &g->members[i];
    if (mb->out_slot < 0 && !mb->identity) ok = (scratch[i] = lathe_aligned_alloc(TILE * esz(mb->node->shape.dtype))) != NULL;
    /* stand-ins: the member with shape [len], its operands likewise (scalars stay scalars) */
    lathe_node *f = &fake[i * (1 + LATHE_PMEMBER_MAX_IN)];
    *f = *mb->node;
    f->in = &fake_in[i * LATHE_PMEMBER_MAX_IN];
    f->shape.rank = 1;
    for (int k = 0; k < mb->n_in; k++) {
      f->in[k] = &fake[i * (1 + LATHE_PMEMBER_MAX_IN) + 1 + k];
      *f->in[k] = *mb->node->in[k];
      bool scalar = mb->in[k] < 0 && g->inputs[-mb->in[k] - 1].access == LATHE_PACCESS_SCALAR;
      if (!scalar) f->in[k]->shape.rank = 1;
    }
  }
  lathe_status_t err = ok ? NULL : LATHE_OOM("fused region");
  for (int64_t t = tb; t < te && !err; t++) {
    int64_t off = t * TILE, len = c->total - off < TILE ? c->total - off : TILE;
    for (int k = 0; k < g->n_inputs; k++) {
      const lathe_pinput *pi = &g->inputs[k];
      lathe_tensor *src = c->in[k];
      if (pi->access == LATHE_PACCESS_SCALAR) continue;
      if (pi->access == LATHE_PACCESS_FULL) {
        in_tiles[k] = view(src->shape.dtype, src->data, off, len);
      } else {
        gather(c, pi, src, off, len, gathered[k]);
        in_tiles[k] = view(src->shape.dtype, gathered[k], 0, len);
      }
    }
    for (int i = 0; i < m && !err; i++) {
      const lathe_pmember *mb = &g->members[i];
      if (mb->identity) { /* a broadcast: its tile is its operand's */
        int src = mb->in[0];
        tiles[i] = src >= 0 ? tiles[src] : in_tiles[-src - 1];
        if (mb->out_slot >= 0 && tiles[i].nbytes)
          memcpy((unsigned char *)c->full[i]->data + (size_t)off * esz(mb->node->shape.dtype), tiles[i].data, tiles[i].nbytes);
        continue;
      }
      lathe_node *f = &fake[i * (1 + LATHE_PMEMBER_MAX_IN)];
      f->shape.dims[0] = len;
      lathe_tensor *in_p[LATHE_PMEMBER_MAX_IN], *out_p;
      lathe_tensor in_v[LATHE_PMEMBER_MAX_IN];
      for (int k = 0; k < mb->n_in; k++) {
        int src = mb->in[k];
        if (src < 0 && g->inputs[-src - 1].access == LATHE_PACCESS_SCALAR) {
          in_p[k] = c->in[-src - 1];
          continue;
        }
        f->in[k]->shape.dims[0] = len;
        in_v[k] = src >= 0 ? tiles[src] : in_tiles[-src - 1];
        in_p[k] = &in_v[k];
      }
      tiles[i] = mb->out_slot >= 0 ? view(mb->node->shape.dtype, c->full[i]->data, off, len)
                                   : view(mb->node->shape.dtype, scratch[i], 0, len);
      out_p = &tiles[i];
      err = lathe_cpu_run_kernel(c->ex, f, in_p, &out_p);
    }
  }
  for (int i = 0; scratch && i < m; i++) lathe_aligned_free(scratch[i]);
  for (int k = 0; gathered && k < g->n_inputs; k++) lathe_aligned_free(gathered[k]);
  free(scratch);
  free(gathered);
  free(tiles);
  free(in_tiles);
  free(fake_in);
  free(fake);
  if (err) {
    pthread_mutex_lock(&c->mu);
    if (!c->err) c->err = err;
    else lathe_status_free(err);
    pthread_mutex_unlock(&c->mu);
  }
}

/* Whether the region reads input k (or its slot through another input) after member m. */
static bool read_after(const lathe_pregion *g, int k, int m) {
  for (int i = 0; i < g->n_inputs; i++)
    if (i != k && g->inputs[i].slot == g->inputs[k].slot) return true;
  for (int j = m + 1; j < g->n_members; j++)
    for (int q = 0; q < g->members[j].n_in; q++)
      if (g->members[j].in[q] == -(k + 1)) return true;
  return false;
}

/* Runs LOOP region g at step position pos: inputs from vals, escaping members into vals. */
static lathe_status_t run_loop(lathe_cpu_exec *ex, int pos, const lathe_pregion *g, bool in_place) {
  frame *fr = ex->cur;
  const lathe_pfunc *pf = fr->f->pf;
  run_ctx c = {.ex = ex, .g = g, .total = lathe_shape_size(&g->shape)};
  enum { STACK = 16 };
  lathe_tensor *in_s[STACK], *full_s[STACK];
  c.in = g->n_inputs <= STACK ? in_s : calloc((size_t)g->n_inputs, sizeof(lathe_tensor *));
  c.full = g->n_members <= STACK ? full_s : calloc((size_t)g->n_members, sizeof(lathe_tensor *));
  if (!c.in || !c.full) {
    if (c.in != in_s) free(c.in);
    if (c.full != full_s) free(c.full);
    return LATHE_OOM("fused region");
  }
  memset(c.full, 0, sizeof(lathe_tensor *) * (size_t)g->n_members);
  for (int k = 0; k < g->n_inputs; k++) c.in[k] = fr->vals[g->inputs[k].slot];
  lathe_status_t st = NULL;
  /* Full-size results of escaping members: the planned arena view, or the memory of a full input
   * that dies here, that nothing else holds and that no later member reads (every earlier reader
   * has read a tile before the member writes it), or fresh memory. */
  for (int i = 0; i < g->n_members && !st; i++) {
    const lathe_pmember *mb = &g->members[i];
    if (mb->out_slot < 0) continue;
    const lathe_pslot *sl = &pf->slots[mb->out_slot];
    if (sl->offset < 0 && in_place)
      for (int k = 0; k < g->n_inputs && !c.full[i]; k++) {
        lathe_tensor *t = c.in[k];
        if (g->inputs[k].access != LATHE_PACCESS_FULL || pf->slots[g->inputs[k].slot].last_use != pos ||
            (t->flags & LATHE_TENSOR_VIEW) || atomic_load(&t->refs) != 1 || !lathe_shape_equal(&t->shape, &sl->shape) ||
            read_after(g, k, i))
          continue;
        bool taken = false;
        for (int j = 0; j < i; j++) taken |= c.full[j] == t;
        if (!taken) c.full[i] = lathe_tensor_retain(t);
      }
    if (!c.full[i]) st = lathe_cpu_result_tensor(ex, mb->out_slot, &c.full[i]);
  }
  if (!st && c.total > 0) {
    pthread_mutex_init(&c.mu, NULL);
    int64_t n_tiles = (c.total + TILE - 1) / TILE;
    lathe_parallel_for(lathe_cpu_exec_pool(ex), n_tiles, 8, run_tiles, &c);
    pthread_mutex_destroy(&c.mu);
    st = c.err;
  }
  for (int i = 0; i < g->n_members; i++) {
    const lathe_pmember *mb = &g->members[i];
    if (!c.full[i]) continue;
    if (!st && !fr->vals[mb->out_slot]) fr->vals[mb->out_slot] = c.full[i];
    else lathe_tensor_release(c.full[i]);
  }
  if (c.in != in_s) free(c.in);
  if (c.full != full_s) free(c.full);
  return st;
}

/* The reduction of a REDUCE region, run as a step of its own on the region's internal slots. */
static lathe_status_t run_reduce(lathe_cpu_exec *ex, const lathe_pregion *g) {
  frame *fr = ex->cur;
  lathe_tensor *in = fr->vals[g->reduce_in], *out = NULL;
  if (!in) return lathe_status_new(LATHE_STATUS_INTERNAL, "fused reduction: operand not computed");
  LATHE_RETURN_IF_ERROR(lathe_cpu_result_tensor(ex, g->reduce_out, &out));
  lathe_status_t st = lathe_cpu_run_kernel(ex, g->reduce, &in, &out);
  if (st) {
    lathe_tensor_release(out);
    return st;
  }
  fr->vals[g->reduce_out] = out;
  return NULL;
}

lathe_status_t lathe_cpu_run_region(lathe_cpu_exec *ex, int pos, const lathe_pstep *sp) {
  const lathe_pfunc *pf = ex->cur->f->pf;
  const lathe_pregion *g = &pf->regions[sp->region];
  lathe_status_t st;
  if (g->kind == LATHE_PREGION_LOOP) {
    st = run_loop(ex, pos, g, true);
  } else {
    /* the parts run one after the other, so an operand the prologue lets die may still be
     * read by the epilogue: no reuse in place inside a REDUCE region */
    st = g->prologue >= 0 ? run_loop(ex, pos, &pf->regions[g->prologue], false) : NULL;
    if (!st) st = run_reduce(ex, g);
    if (!st && g->epilogue >= 0) st = run_loop(ex, pos, &pf->regions[g->epilogue], false);
  }
  if (st)
    st = lathe_status_annotate(st, "executing a fused region ending in %s (node %d of \"%s\")", lathe_op_name(sp->node->op),
                               sp->node->id, pf->fn->name);
  return st;
}
