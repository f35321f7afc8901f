/* region.c -- fusion regions on the CPU, tile by tile. A LOOP region's iteration space is cut
 * into TILE-element ranges split over the pool; for each range every member's row kernel (from
 * the backend's ISA table, resolved once per run) computes its tile. Members whose values stay
 * inside the region live in per-thread tile buffers, reused once their last reader has run, so
 * a chain's tiles stay in the core's caches; only escaping members are written at full size --
 * straight into their result, or, when the result is larger than the caches, through a buffer
 * and non-temporal stores, so memory is read and written once. Inputs read with broadcasting are
 * gathered into a tile first. A REDUCE region runs its prologue, the reduction and its epilogue
 * in turn through the region's internal slots. */
#include <pthread.h>

#include "activation.h"
#include "exec.h"
#include "kernels.h"

/* TILE elements per step (a few KiB per buffer: a chain's live tiles fit in L1/L2). Results of
 * STREAM_MIN bytes or more are stored non-temporally (they cannot stay in a cache anyway). */
enum { TILE = 2048, MAX_ESIZE = 16 };
#define STREAM_MIN ((int64_t)8 << 20)

static size_t esz(lathe_dtype dt) { return (size_t)lathe_dtype_bits(dt) / 8; }

/* How a member computes its tile (resolved once per run from the ISA's table). */
typedef struct {
  lathe_ew_fn fn;         /* UNARY, BINARY, COMPARE, SELECT rows */
  lathe_ew_convert_fn cv; /* ConvertDType */
  int bits, obits;
  int step[LATHE_PMEMBER_MAX_IN]; /* 0 for a scalar operand, 1 for a tile */
  int act_mode, act, act_a, act_g; /* FusedActivation (1) and its VJP (2 from x, 3 from y): operands a, g */
  lathe_dtype act_dt;
  int buf;                /* the scratch buffer of its tile, -1: straight into its full result (or an alias) */
  size_t esize;           /* of its result */
} tile_op;

typedef struct {
  lathe_cpu_exec *ex;
  const lathe_pregion *g;
  const lathe_cpu_kernels *k;
  lathe_tensor **in;   /* per region input: its tensor */
  lathe_tensor **full; /* per member: its full-size result if it escapes */
  tile_op *ops;        /* per member */
  int n_bufs;          /* scratch tiles per thread */
  bool stream;         /* escaping members go through their buffer and non-temporal stores */
  int64_t total;
  pthread_mutex_t mu;
  lathe_status_t err;
} run_ctx;

/* Fills dst with len copies of the es-byte element at src. */
static void fill(void *dst, const unsigned char *src, size_t es, int64_t len) {
  switch (es) {
    case 1: memset(dst, *src, (size_t)len); return;
    case 2: {
      uint16_t v, *d = dst;
      memcpy(&v, src, 2);
      for (int64_t j = 0; j < len; j++) d[j] = v;
      return;
    }
    case 4: {
      uint32_t v, *d = dst;
      memcpy(&v, src, 4);
      for (int64_t j = 0; j < len; j++) d[j] = v;
      return;
    }
    case 8: {
      uint64_t v, *d = dst;
      memcpy(&v, src, 8);
      for (int64_t j = 0; j < len; j++) d[j] = v;
      return;
    }
    default:
      for (int64_t j = 0; j < len; j++) memcpy((unsigned char *)dst + (size_t)j * es, src, es);
  }
}

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
    } else if (step == 0) {
      fill(o + (size_t)k * es, s + (size_t)base * es, es, run);
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

/* Stores nbytes of a tile at dst: non-temporally for the 64-byte aligned whole lines. */
static void store_tile(const run_ctx *c, void *dst, const void *src, size_t nbytes) {
  if (!c->stream || ((uintptr_t)dst & 63)) {
    memcpy(dst, src, nbytes);
    return;
  }
  size_t body = nbytes & ~(size_t)63;
  if (body) c->k->stream_copy(dst, src, body);
  if (body < nbytes) memcpy((unsigned char *)dst + body, (const unsigned char *)src + body, nbytes - body);
}

static void run_tiles(void *vc, int64_t tb, int64_t te) {
  run_ctx *c = vc;
  const lathe_pregion *g = c->g;
  int m = g->n_members;
  enum { STACK = 16 };
  void *tiles_s[STACK], *gathered_s[STACK];
  void **tiles = m <= STACK ? tiles_s : malloc(sizeof(void *) * (size_t)m);
  void **gathered = g->n_inputs <= STACK ? gathered_s : malloc(sizeof(void *) * (size_t)g->n_inputs);
  int n_gathered = 0;
  for (int k = 0; k < g->n_inputs; k++) n_gathered += g->inputs[k].access == LATHE_PACCESS_STRIDED;
  unsigned char *mem = lathe_aligned_alloc((size_t)(c->n_bufs + n_gathered) * TILE * MAX_ESIZE);
  lathe_status_t err = tiles && gathered && mem ? NULL : LATHE_OOM("fused region");
  for (int k = 0, q = c->n_bufs; !err && k < g->n_inputs; k++)
    gathered[k] = g->inputs[k].access == LATHE_PACCESS_STRIDED ? mem + (size_t)(q++) * TILE * MAX_ESIZE : NULL;
  for (int64_t t = tb; t < te && !err; t++) {
    int64_t off = t * TILE, len = c->total - off < TILE ? c->total - off : TILE;
    for (int k = 0; k < g->n_inputs; k++)
      if (gathered[k]) gather(c, &g->inputs[k], c->in[k], off, len, gathered[k]);
    for (int i = 0; i < m; i++) {
      const lathe_pmember *mb = &g->members[i];
      const tile_op *op = &c->ops[i];
      const void *in[LATHE_PMEMBER_MAX_IN];
      for (int q = 0; q < mb->n_in; q++) {
        int src = mb->in[q];
        if (src >= 0) {
          in[q] = tiles[src];
          continue;
        }
        const lathe_pinput *pi = &g->inputs[-src - 1];
        const lathe_tensor *x = c->in[-src - 1];
        if (pi->access == LATHE_PACCESS_SCALAR) {
          in[q] = x->data;
        } else if (pi->access == LATHE_PACCESS_FULL) {
          in[q] = (const unsigned char *)x->data + (size_t)off * esz(x->shape.dtype);
        } else {
          in[q] = gathered[-src - 1];
        }
      }
      void *full = mb->out_slot >= 0 ? (unsigned char *)c->full[i]->data + (size_t)off * op->esize : NULL;
      if (mb->identity) { /* a broadcast: its tile is its operand's */
        tiles[i] = (void *)in[0];
        if (full && len) store_tile(c, full, in[0], (size_t)len * op->esize);
        continue;
      }
      void *out = op->buf >= 0 ? mem + (size_t)op->buf * TILE * MAX_ESIZE : full;
      if (op->act_mode)
        lathe_cpu_act_tile(c->k, op->act_dt, op->act_mode, op->act, in[op->act_a], op->step[op->act_a], in[op->act_g],
                           op->step[op->act_g], out, len);
      else if (op->cv) op->cv(in[0], out, len, op->bits, op->obits);
      else op->fn(in, op->step, out, len, op->bits);
      tiles[i] = out;
      if (full && out != full) store_tile(c, full, out, (size_t)len * op->esize);
    }
  }
  if (c->stream) c->k->stream_fence();
  lathe_aligned_free(mem);
  if (tiles != tiles_s) free(tiles);
  if (gathered != gathered_s) free(gathered);
  if (err) {
    pthread_mutex_lock(&c->mu);
    if (!c->err) c->err = err;
    else lathe_status_free(err);
    pthread_mutex_unlock(&c->mu);
  }
}

/* Resolves each member's kernel and gives the tiles that need one a scratch buffer: a buffer is
 * free again after the last member that reads it (broadcast members alias their operand's). */
static lathe_status_t plan_tiles(run_ctx *c) {
  const lathe_pregion *g = c->g;
  int m = g->n_members;
  int *last = malloc(sizeof(int) * (size_t)(2 * m + 1)), *owner = last + m; /* owner: the member whose buffer a tile is */
  int *free_bufs = malloc(sizeof(int) * (size_t)(m + 1));
  if (!last || !free_bufs) {
    free(last);
    free(free_bufs);
    return LATHE_OOM("fused region");
  }
  int n_free = 0;
  c->n_bufs = 0;
  for (int i = 0; i < m; i++) {
    const lathe_pmember *mb = &g->members[i];
    owner[i] = mb->identity && mb->in[0] >= 0 ? owner[mb->in[0]] : i;
    last[i] = -1;
    for (int q = 0; q < mb->n_in; q++)
      if (mb->in[q] >= 0) last[owner[mb->in[q]]] = i;
  }
  lathe_status_t st = NULL;
  for (int i = 0; i < m && !st; i++) {
    const lathe_pmember *mb = &g->members[i];
    const lathe_node *n = mb->node;
    tile_op *op = &c->ops[i];
    memset(op, 0, sizeof *op);
    op->buf = -1;
    op->esize = esz(n->shape.dtype);
    if (!mb->identity) {
      lathe_op_kind kind = lathe_op_kind_of(n->op);
      lathe_dtype dt = kind == LATHE_KIND_SELECT ? n->shape.dtype : n->in[0]->shape.dtype;
      op->bits = lathe_dtype_bits(dt);
      op->obits = lathe_dtype_bits(n->shape.dtype);
      if (n->op == LATHE_OP_CONVERT_DTYPE) op->cv = lathe_cpu_convert_fn_of(c->k, n->in[0]->shape.dtype, n->shape.dtype);
      else if (kind == LATHE_KIND_UNARY || kind == LATHE_KIND_BINARY || kind == LATHE_KIND_COMPARE || kind == LATHE_KIND_SELECT)
        op->fn = lathe_cpu_ew_fn(c->k, n->op, dt);
      else if (n->op == LATHE_OP_FUSED_ACTIVATION) {
        op->act_mode = 1, op->act = (int)lathe_attr_fused_activation_activation(n), op->act_dt = n->shape.dtype;
      } else if (n->op == LATHE_OP_FUSED_ACTIVATION_VJP) {
        /* y's derivative where the activation has one and y is given, as activation.c's kernel */
        bool has_y = lathe_attr_fused_activation_vjp_has_y(n);
        op->act = (int)lathe_attr_fused_activation_vjp_activation(n), op->act_dt = n->shape.dtype;
        op->act_mode = has_y && lathe_act_form_of((lathe_activation)op->act) == LATHE_ACT_FORM_Y ? 3 : 2;
        op->act_a = op->act_mode == 3 || !has_y ? 0 : 1, op->act_g = n->n_in - 1;
      }
      if (!op->fn && !op->cv && !op->act_mode)
        st = LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s in a fused region", lathe_op_name(n->op),
                          lathe_dtype_name(dt));
      for (int q = 0; q < mb->n_in; q++)
        op->step[q] = !(mb->in[q] < 0 && g->inputs[-mb->in[q] - 1].access == LATHE_PACCESS_SCALAR);
      if (mb->out_slot < 0 || c->stream) op->buf = n_free ? free_bufs[--n_free] : c->n_bufs++;
    }
    /* operands read for the last time here give their buffers back */
    for (int q = 0; q < mb->n_in; q++) {
      int src = mb->in[q] >= 0 ? owner[mb->in[q]] : -1;
      if (src < 0 || last[src] != i || c->ops[src].buf < 0) continue;
      bool dup = false;
      for (int r = 0; r < q; r++) dup |= mb->in[r] >= 0 && owner[mb->in[r]] == src;
      if (!dup) free_bufs[n_free++] = c->ops[src].buf;
    }
  }
  free(last);
  free(free_bufs);
  return st;
}

/* Runs LOOP region g at step position pos: inputs from vals, escaping members into vals. */
lathe_status_t lathe_cpu_run_loop(lathe_cpu_exec *ex, int pos, const lathe_pregion *g, bool in_place) {
  lathe_tensor **vals = lathe_exec_vals(&ex->x);
  run_ctx c = {.ex = ex, .g = g, .k = lathe_cpu_exec_kernels(ex), .total = lathe_shape_size(&g->shape)};
  enum { STACK = 16 };
  lathe_tensor *in_s[STACK], *full_s[STACK];
  tile_op ops_s[STACK];
  c.in = g->n_inputs <= STACK ? in_s : calloc((size_t)g->n_inputs, sizeof(lathe_tensor *));
  c.full = g->n_members <= STACK ? full_s : calloc((size_t)g->n_members, sizeof(lathe_tensor *));
  c.ops = g->n_members <= STACK ? ops_s : calloc((size_t)g->n_members, sizeof(tile_op));
  if (!c.in || !c.full || !c.ops) {
    if (c.in != in_s) free(c.in);
    if (c.full != full_s) free(c.full);
    if (c.ops != ops_s) free(c.ops);
    return LATHE_OOM("fused region");
  }
  memset(c.full, 0, sizeof(lathe_tensor *) * (size_t)g->n_members);
  for (int k = 0; k < g->n_inputs; k++) c.in[k] = vals[g->inputs[k].slot];
  for (int i = 0; i < g->n_members; i++)
    if (g->members[i].out_slot >= 0 &&
        c.total * (int64_t)esz(g->members[i].node->shape.dtype) >= STREAM_MIN)
      c.stream = true;
  lathe_status_t st = plan_tiles(&c);
  /* Full-size results of escaping members: the planned arena view, or the memory of a full input
   * that dies here, that nothing else holds and that no later member reads (every earlier reader
   * has read a tile before the member writes it), or fresh memory. */
  for (int i = 0; i < g->n_members && !st; i++) {
    const lathe_pmember *mb = &g->members[i];
    if (mb->out_slot < 0) continue;
    if (in_place) c.full[i] = lathe_exec_loop_in_place(&ex->x, pos, g, i, c.in, c.full, i);
    if (!c.full[i]) st = lathe_exec_result(&ex->x, mb->out_slot, &c.full[i]);
  }
  if (!st && c.total > 0) {
    pthread_mutex_init(&c.mu, NULL);
    int64_t n_tiles = (c.total + TILE - 1) / TILE;
    lathe_parallel_for(lathe_cpu_exec_pool(ex), n_tiles, (LATHE_EW_GRAIN + TILE - 1) / TILE, run_tiles, &c);
    pthread_mutex_destroy(&c.mu);
    st = c.err;
  }
  for (int i = 0; i < g->n_members; i++) {
    const lathe_pmember *mb = &g->members[i];
    if (!c.full[i]) continue;
    if (!st && !vals[mb->out_slot]) vals[mb->out_slot] = c.full[i];
    else lathe_tensor_release(c.full[i]);
  }
  if (c.in != in_s) free(c.in);
  if (c.full != full_s) free(c.full);
  if (c.ops != ops_s) free(c.ops);
  return st;
}
