/* partition_rules.c -- the AutoSharding partitioner's propagation rules, one per op family: each
 * decides the sharding its operands must arrive in and its result's, and emits the op on local
 * shapes (partition.c reshards the operands); ops without a rule take the fallback (operands
 * gathered, counted), and RNGBitGenerator runs whole by design (counted too).
 * docs/ARCHITECTURE.md "Partitioning" describes every rule. */
#include "ew.h"
#include "partition_impl.h"

/* ---- rules: each decides the operands' and the result's shardings ---- */

/* Records sn as run whole on every device: counted, its op name listed once. */
static void count_whole(part *p, const lathe_node *sn) {
  part_stats *t = p->stats;
  t->fallbacks++;
  const char *name = lathe_op_name(sn->op);
  size_t at = strlen(t->fallback_ops), len = strlen(name);
  bool listed = false;
  for (const char *f = t->fallback_ops; (f = strstr(f, name)); f += len)
    listed |= (f == t->fallback_ops || f[-1] == ' ') && (f[len] == ',' || f[len] == 0);
  if (!listed && at + len + 3 < sizeof t->fallback_ops)
    snprintf(t->fallback_ops + at, sizeof t->fallback_ops - at, "%s%s", at ? ", " : "", name);
}

/* sn run whole on every device on replicated operands, its results replicated; counted where
 * that gathers a split operand, or always where `always`. */
static lathe_status_t run_whole(part *p, const lathe_node *sn, bool always) {
  spec *need = p->need;
  bool gathered = false;
  for (int i = 0; i < sn->n_operands; i++) {
    need[i] = replicated_spec(sn->in[i]->shape.rank);
    gathered |= !replicated(own(p, sn->in[i]->id));
  }
  if (gathered || always) count_whole(p, sn);
  lathe_node *out;
  if (sn->multi) {
    for (int i = 0; i < sn->n_out; i++) p->rs[i] = replicated_spec(sn->out_shapes[i].rank);
    return lathe_part_emit_multi(p, sn, need, p->rs);
  }
  spec rs = replicated_spec(sn->shape.rank);
  return lathe_part_emit_with(p, sn, need, &rs, &out);
}

lathe_status_t lathe_part_fallback(part *p, const lathe_node *sn) { return run_whole(p, sn, false); }

/* Elementwise (with GoMLX broadcasting: equal ranks with size-1 axes, or scalars): the result takes
 * the sharding of one operand of its rank, or the consumers', the one whose choice moves the fewest
 * bytes; axis `gathered` (-1: none) is left whole (Concatenate's). */
static lathe_status_t weigh_operands(part *p, const lathe_node *sn, int gathered) {
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
      if (x->shape.dims[a] != sn->shape.dims[a] || a == gathered) clear_axis(&cand, a);
      else np *= parts(p, &cand, a);
    double cost = 0;
    for (int i = 0; i < n; i++) {
      const lathe_node *y = sn->in[i];
      spec t = cand;
      if (y->shape.rank != r) t = replicated_spec(y->shape.rank);
      for (int a = 0; y->shape.rank == r && a < r; a++)
        if (y->shape.dims[a] != sn->shape.dims[a]) clear_axis(&t, a);
      cost += lathe_part_reshard_cost(p, y, &t);
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
  return lathe_part_emit_with(p, sn, need, &best, &out);
}

static lathe_status_t rule_elementwise(part *p, const lathe_node *sn) { return weigh_operands(p, sn, -1); }

/* Partial results *v (sharding *rs, split nowhere over the mesh axes ax[0..n_ax) of mesh m, of
 * global dims) combined over those axes: a ReduceScatter where the consumers' wish h (the backward
 * hint, or NULL) splits an axis over exactly those mesh axes -- each device then receives only its
 * slice, half the bytes of an AllReduce and no slice after it --, else an AllReduce. *v and *rs
 * become the combined value and its sharding. */
static lathe_status_t combine_into(part *p, const spec *h, const int64_t *dims, lathe_node **v, spec *rs, lathe_op op,
                                   int m, const int *ax, int n_ax) {
  for (int b = 0; h && b < rs->rank; b++) {
    if (rs->n_axes[b] || h->n_axes[b] != n_ax || h->mesh != m) continue;
    bool same = true;
    for (int k = 0; k < n_ax; k++) {
      bool in = false;
      for (int q = 0; q < n_ax; q++) in |= h->axes[b][k] == ax[q];
      same &= in;
    }
    if (!same || dims[b] % parts(p, h, b)) continue;
    int R = p->src->n_replicas, *groups = malloc(sizeof(int) * 2 * (size_t)R);
    if (!groups) return LATHE_OOM("Partition");
    int n = lathe_part_groups(p, m, h->axes[b], n_ax, groups, groups + R);
    lathe_status_t st = lathe_reduce_scatter(p->fn, *v, b, op, groups, groups + R, n, v);
    free(groups);
    LATHE_RETURN_IF_ERROR(st);
    p->stats->collectives++;
    copy_axis(rs, b, h, b);
    return NULL;
  }
  return lathe_part_all_reduce(p, *v, op, m, ax, n_ax, v);
}

lathe_status_t lathe_part_combine(part *p, const lathe_node *sn, lathe_node *v, spec rs, lathe_op op, int m, const int *ax,
                                  int n_ax) {
  LATHE_RETURN_IF_ERROR(combine_into(p, p->hinted[sn->id] ? &p->hint[sn->id] : NULL, sn->shape.dims, &v, &rs, op, m, ax, n_ax));
  lathe_part_set(p, sn, v, &rs);
  return NULL;
}

/* The consumers' wish for result i of multi-result sn: the hint of the TUPLE_ELEMENT that reads
 * it (NULL: none, or not hinted). */
static const spec *result_hint(const part *p, const lathe_node *sn, int i) {
  const lathe_function *fn = sn->fn;
  for (int k = 0; k < fn->n_nodes; k++) {
    const lathe_node *t = fn->nodes[k];
    if (t->op == LATHE_OP_TUPLE_ELEMENT && t->in[0] == sn && lathe_attr_tuple_element_index(t) == i)
      return p->hinted[t->id] ? &p->hint[t->id] : NULL;
  }
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
  LATHE_RETURN_IF_ERROR(lathe_part_emit_with(p, sn, &in, &rs, &v));
  return n_ax ? lathe_part_combine(p, sn, v, rs, sn->op, in.mesh, ax, n_ax) : NULL;
}

static lathe_status_t rule_transpose(part *p, const lathe_node *sn) {
  spec in = *own(p, sn->in[0]->id), rs = replicated_spec(sn->shape.rank);
  lathe_ilist perm = lathe_attr_transpose_permutation(sn);
  if (replicated(&in) && p->hinted[sn->id]) /* open: the consumers' sharding, sliced locally */
    for (int i = 0; i < perm.n; i++) copy_axis(&in, (int)perm.v[i], &p->hint[sn->id], i);
  for (int i = 0; i < perm.n; i++) copy_axis(&rs, i, &in, (int)perm.v[i]);
  lathe_node *out;
  return lathe_part_emit_with(p, sn, &in, &rs, &out);
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
  return lathe_part_emit_with(p, sn, &in, &rs, &out);
}

/* The result axis of a Reshape from xs to os that a split of operand axis a into n shards keeps:
 * the one that starts at the same element (equal products of the axes before them; size-1 result
 * axes there passed over) where both axes divide by n -- then both shards are the same contiguous
 * block; -1: none. The backward pass maps a result axis's split back through it (n = 1). */
static int reshape_axis(const lathe_shape *xs, const lathe_shape *os, int a, int64_t n) {
  int64_t pin = 1, pout = 1;
  for (int q = 0; q < a; q++) pin *= xs->dims[q];
  int b = 0;
  while (b < os->rank && pout < pin) pout *= os->dims[b++];
  while (b < os->rank && pout == pin && os->dims[b] == 1 && xs->dims[a] != 1) b++; /* size-1 axes first */
  return b < os->rank && pout == pin && os->dims[b] % n == 0 && xs->dims[a] % n == 0 ? b : -1;
}

/* Reshape: a sharded operand axis keeps its split on reshape_axis; other sharded axes are gathered
 * first. */
static lathe_status_t rule_reshape(part *p, const lathe_node *sn) {
  const lathe_shape *xs = &sn->in[0]->shape, *os = &sn->shape;
  spec in = *own(p, sn->in[0]->id), rs = replicated_spec(os->rank);
  for (int a = 0; a < xs->rank; a++) {
    if (!in.n_axes[a]) continue;
    int b = reshape_axis(xs, os, a, parts(p, &in, a));
    if (b >= 0) copy_axis(&rs, b, &in, a);
    else clear_axis(&in, a);
  }
  lathe_node *out;
  return lathe_part_emit_with(p, sn, &in, &rs, &out);
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
  LATHE_RETURN_IF_ERROR(lathe_part_get(p, x, &in, &v));
  LATHE_RETURN_IF_ERROR(lathe_slice(p->fn, v, starts, limits, strides, x->shape.rank, &out));
  lathe_part_set(p, sn, out, &in);
  return NULL;
}

static lathe_status_t rule_pad(part *p, const lathe_node *sn) {
  const lathe_node *x = sn->in[0];
  spec need[2] = {*own(p, x->id), replicated_spec(sn->in[1]->shape.rank)};
  lathe_ilist lo = lathe_attr_pad_start(sn), hi = lathe_attr_pad_end(sn), in = lathe_attr_pad_interior(sn);
  for (int a = 0; a < x->shape.rank; a++)
    if (lo.v[a] || hi.v[a] || in.v[a]) clear_axis(&need[0], a);
  lathe_node *out;
  return lathe_part_emit_with(p, sn, need, &need[0], &out);
}

/* Concatenate: every operand takes one operand's sharding, or the consumers', the concatenated
 * axis gathered (rule_elementwise's choice). */
static lathe_status_t rule_concatenate(part *p, const lathe_node *sn) {
  return weigh_operands(p, sn, (int)lathe_attr_concatenate_axis(sn));
}

/* Whether a contraction sn keeps the split of contracting axis a of operand x (sharded S) when the
 * other side's is whole: partial sums (an AllReduce of the result) move fewer bytes than gathering
 * x, so the other side is sliced to match. */
static bool sum_cheaper(const part *p, const lathe_node *sn, const lathe_node *x, const spec *S, int a) {
  lathe_shape ls;
  local_shape(p, S, &x->shape, &ls);
  double G = (double)parts(p, S, a);
  return 2.0 * (double)lathe_shape_byte_size(&sn->shape) * (G - 1) / G < (double)lathe_shape_byte_size(&ls) * (G - 1);
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
  for (int k = 0; k < lc.n; k++) {
    int a = (int)lc.v[k], b = (int)rc.v[k];
    spec pick = replicated_spec(1);
    if (L->n_axes[a] && axis_eq(L, a, R, b)) copy_axis(&pick, 0, L, a);
    else if (L->n_axes[a] || R->n_axes[b]) { /* one side (or two different) splits */
      const spec *S = L->n_axes[a] ? L : R;
      int sa = L->n_axes[a] ? a : b;
      if (sum_cheaper(p, sn, L->n_axes[a] ? l : r, S, sa)) copy_axis(&pick, 0, S, sa);
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
  LATHE_RETURN_IF_ERROR(lathe_part_emit_with(p, sn, need, &rs, &v));
  return n_ax ? lathe_part_combine(p, sn, v, rs, LATHE_OP_REDUCE_SUM, mesh, ax, n_ax) : NULL;
}

/* FusedDense, activation(x @ w + bias): x's batch axes keep their split and w's output axes theirs
 * (the bias takes the same), as DotGeneral's free axes; the contracting axis split alike on both
 * sides (or on one side, sliced on the other, where the AllReduce moves fewer bytes than the
 * gather) gives partial sums: the op then runs without bias and activation, the sums are combined,
 * and the bias and activation follow on the result. */
static lathe_status_t rule_fused_dense(part *p, const lathe_node *sn) {
  const lathe_node *x = sn->in[0], *w = sn->in[1];
  bool has_bias = lathe_attr_fused_dense_has_bias(sn);
  lathe_dense_layout layout = (lathe_dense_layout)lathe_attr_fused_dense_layout(sn);
  lathe_activation act = (lathe_activation)lathe_attr_fused_dense_activation(sn);
  const spec *X = own(p, x->id), *W = own(p, w->id);
  int xr = x->shape.rank, wr = w->shape.rank, r = sn->shape.rank, nb = xr - 1;
  int xin = xr - 1, win = layout == LATHE_DENSE_INPUT_OUTPUTS ? 0 : wr - 1, wout = layout == LATHE_DENSE_INPUT_OUTPUTS ? 1 : 0;
  spec nx = replicated_spec(xr), nw = replicated_spec(wr), rs = replicated_spec(r), used = replicated_spec(LATHE_MAX_RANK);
  int slot = 0, ax[LATHE_MAX_MESH_RANK], n_ax = 0, mesh = -1;
  spec pick = replicated_spec(1);
  if (X->n_axes[xin] && axis_eq(X, xin, W, win)) copy_axis(&pick, 0, X, xin);
  else if (X->n_axes[xin] || W->n_axes[win]) { /* one side splits */
    const spec *S = X->n_axes[xin] ? X : W;
    int sa = X->n_axes[xin] ? xin : win;
    if (sum_cheaper(p, sn, X->n_axes[xin] ? x : w, S, sa)) copy_axis(&pick, 0, S, sa);
  }
  if (pick.n_axes[0] && try_copy_axis(&used, slot, &pick, 0)) {
    copy_axis(&nx, xin, &pick, 0), copy_axis(&nw, win, &pick, 0);
    for (int q = 0; q < pick.n_axes[0]; q++) ax[n_ax++] = pick.axes[0][q];
    mesh = pick.mesh, slot++;
  }
  for (int a = 0; a < nb; a++)
    if (X->n_axes[a] && (mesh < 0 || mesh == X->mesh) && try_copy_axis(&used, slot, X, a))
      copy_axis(&nx, a, X, a), copy_axis(&rs, a, X, a), mesh = X->mesh, slot++;
  for (int k = 0; k < wr - 1; k++)
    if (W->n_axes[wout + k] && (mesh < 0 || mesh == W->mesh) && slot < LATHE_MAX_RANK && try_copy_axis(&used, slot, W, wout + k))
      copy_axis(&nw, wout + k, W, wout + k), copy_axis(&rs, nb + k, W, wout + k), mesh = W->mesh, slot++;
  spec nbias = replicated_spec(has_bias ? sn->in[2]->shape.rank : 0);
  for (int k = 0; has_bias && k < wr - 1; k++) copy_axis(&nbias, k, &rs, nb + k);
  spec need[3] = {nx, nw, nbias};
  lathe_node *v;
  if (!n_ax) return lathe_part_emit_with(p, sn, need, &rs, &v);
  if (!has_bias && act == LATHE_ACTIVATION_NONE) {
    LATHE_RETURN_IF_ERROR(lathe_part_emit_with(p, sn, need, &rs, &v));
    return lathe_part_combine(p, sn, v, rs, LATHE_OP_REDUCE_SUM, mesh, ax, n_ax);
  }
  lathe_node *lx, *lw;
  LATHE_RETURN_IF_ERROR(lathe_part_get(p, x, &nx, &lx));
  LATHE_RETURN_IF_ERROR(lathe_part_get(p, w, &nw, &lw));
  LATHE_RETURN_IF_ERROR(lathe_fused_dense(p->fn, lx, lw, NULL, LATHE_ACTIVATION_NONE, layout, &v));
  LATHE_RETURN_IF_ERROR(lathe_part_all_reduce(p, v, LATHE_OP_REDUCE_SUM, mesh, ax, n_ax, &v));
  if (has_bias) {
    lathe_node *lb;
    LATHE_RETURN_IF_ERROR(lathe_part_get(p, sn->in[2], &nbias, &lb));
    int bax[LATHE_MAX_RANK];
    for (int k = 0; k < wr - 1; k++) bax[k] = nb + k;
    lathe_shape ls;
    local_shape(p, &rs, &sn->shape, &ls);
    LATHE_RETURN_IF_ERROR(lathe_broadcast_in_dim(p->fn, lb, &ls, bax, wr - 1, &lb));
    LATHE_RETURN_IF_ERROR(lathe_add(p->fn, v, lb, &v));
  }
  if (act != LATHE_ACTIVATION_NONE) LATHE_RETURN_IF_ERROR(lathe_fused_activation(p->fn, v, act, &v));
  lathe_part_set(p, sn, v, &rs);
  return NULL;
}

/* The mesh axes a rule has taken so far (one mesh, each mesh axis once). */
typedef struct {
  spec used;
  int slot, mesh;
} taken;

/* Takes the split of axis a of s where it is on the same mesh and uses no mesh axis taken. */
static bool take(taken *t, const spec *s, int a) {
  if (!s->n_axes[a] || (t->mesh >= 0 && t->mesh != s->mesh) || t->slot >= LATHE_MAX_RANK ||
      !try_copy_axis(&t->used, t->slot, s, a))
    return false;
  t->mesh = s->mesh, t->slot++;
  return true;
}

static void add_mesh_axes(int *ax, int *n, const spec *s, int a) {
  for (int k = 0; k < s->n_axes[a]; k++) ax[(*n)++] = s->axes[a][k];
}

/* FusedDenseVJP (x, weight[, bias], y, dOutput -> dx, dWeight[, dBias]), FusedDense's gradients:
 * dz = dOutput * activation'(y) elementwise, dx = dz . weight' (a sum over the output features),
 * dWeight = x' . dz and dBias = the sum of dz's rows (sums over the batch). So a batch axis split
 * on x (else on dOutput, else on y) stays split on x, y, dOutput and dx, and makes dWeight and dBias
 * partial sums (AllReduce); an output-feature axis split on the weight (else on the bias: a
 * Megatron column split) stays split on the weight, the bias, y, dOutput, dWeight and dBias, and
 * makes dx a partial sum (AllReduce); the input-feature axis split on x (else on the weight: a row
 * split) stays split on both and on dx and dWeight, with nothing to sum. Other splits (y and
 * dOutput split along the output features with the weight whole) are gathered; nothing left
 * split: the fallback. A partial sum whose readers want it split over the summed mesh axes is
 * ReduceScattered instead of AllReduced. */
static lathe_status_t rule_dense_vjp(part *p, const lathe_node *sn) {
  bool has_bias = lathe_attr_fused_dense_vjp_has_bias(sn);
  bool io = lathe_attr_fused_dense_vjp_layout(sn) == LATHE_DENSE_INPUT_OUTPUTS;
  int n_in = has_bias ? 5 : 4;
  if (sn->n_operands != n_in || sn->n_out != n_in - 2)
    return LATHE_INVALID("FusedDenseVJP: %d operands and %d results (has_bias %d)", sn->n_operands, sn->n_out, has_bias);
  const lathe_node *x = sn->in[0], *w = sn->in[1], *y = sn->in[n_in - 2], *g = sn->in[n_in - 1];
  int xr = x->shape.rank, wr = w->shape.rank, nb = xr - 1, win = io ? 0 : wr - 1, wout = io ? 1 : 0;
  if (xr < 1 || wr < 1 || g->shape.rank != nb + wr - 1 || y->shape.rank != g->shape.rank)
    return LATHE_INVALID("FusedDenseVJP: x of rank %d, weight of rank %d, dOutput of rank %d", xr, wr, g->shape.rank);
  const spec *X = own(p, x->id), *W = own(p, w->id), *G = own(p, g->id), *Y = own(p, y->id);
  const spec *B = has_bias ? own(p, sn->in[2]->id) : NULL;
  spec nx = replicated_spec(xr), nw = replicated_spec(wr), ng = replicated_spec(g->shape.rank), nbias = replicated_spec(wr - 1);
  taken t = {replicated_spec(LATHE_MAX_RANK), 0, -1};
  int bax[LATHE_MAX_MESH_RANK], n_b = 0, oax[LATHE_MAX_MESH_RANK], n_o = 0;
  for (int a = 0; a < nb; a++) {
    const spec *S = X->n_axes[a] ? X : G->n_axes[a] ? G : Y;
    if (take(&t, S, a)) copy_axis(&nx, a, S, a), copy_axis(&ng, a, S, a), add_mesh_axes(bax, &n_b, S, a);
  }
  for (int k = 0; k < wr - 1; k++) {
    bool from_w = W->n_axes[wout + k] || !has_bias;
    const spec *S = from_w ? W : B;
    int sa = from_w ? wout + k : k;
    if (!take(&t, S, sa)) continue;
    copy_axis(&nw, wout + k, S, sa), copy_axis(&ng, nb + k, S, sa), copy_axis(&nbias, k, S, sa);
    add_mesh_axes(oax, &n_o, S, sa);
  }
  bool from_x = X->n_axes[nb];
  const spec *F = from_x ? X : W;
  int fa = from_x ? nb : win;
  if (take(&t, F, fa)) copy_axis(&nx, nb, F, fa), copy_axis(&nw, win, F, fa);
  if (replicated(&nx) && replicated(&nw) && replicated(&ng)) return lathe_part_fallback(p, sn);
  spec *need = p->need;
  need[0] = nx, need[1] = nw, need[n_in - 2] = ng, need[n_in - 1] = ng;
  p->rs[0] = nx, p->rs[1] = nw;
  if (has_bias) need[2] = nbias, p->rs[2] = nbias;
  LATHE_RETURN_IF_ERROR(lathe_part_emit_multi(p, sn, need, p->rs));
  /* the partial sums, combined where the TUPLE_ELEMENTs will read them: ReduceScattered where
   * their readers want them split over the summed mesh axes (dWeight of FSDP-style sharded
   * weights), else AllReduced */
  lathe_node **res = p->tuples[sn->id];
  spec *rsp = &p->res[p->res_at[sn->id]];
  for (int i = n_o ? 0 : 1; i < (n_b ? sn->n_out : 1); i++) {
    const int *ax = i == 0 ? oax : bax;
    LATHE_RETURN_IF_ERROR(combine_into(p, result_hint(p, sn, i), sn->out_shapes[i].dims, &res[i], &rsp[i],
                                       LATHE_OP_REDUCE_SUM, t.mesh, ax, i == 0 ? n_o : n_b));
  }
  return NULL;
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
    return lathe_part_emit_with(p, sn, need, &in, &out);
  }
  lathe_node **ops = p->ops, *out;
  for (int i = 0; i < sn->n_operands; i++) LATHE_RETURN_IF_ERROR(lathe_part_get(p, sn->in[i], &need[i], &ops[i]));
  lathe_shape ls;
  local_shape(p, &in, &sn->shape, &ls);
  LATHE_RETURN_IF_ERROR(lathe_dynamic_slice(p->fn, ops[0], ops + 1, sn->n_operands - 1, ls.dims, ls.rank, &out));
  lathe_part_set(p, sn, out, &in);
  return NULL;
}

static bool listed(lathe_ilist l, int a) {
  for (int k = 0; k < l.n; k++)
    if (l.v[k] == a) return true;
  return false;
}

/* Gather's axes as result axes: ix_res[a] for indices axis a (its batch axes, in order, are the
 * result axes that are not offset axes; -1: the index vector axis), x_res[a] for operand axis a
 * where it keeps a split (neither indexed nor collapsed, and sliced whole: its offset axis; else
 * -1). rule_gather and the backward hints read these. */
static void gather_axes(const lathe_node *sn, int *ix_res, int *x_res) {
  const lathe_node *x = sn->in[0], *ix = sn->in[1];
  int iva = (int)lathe_attr_gather_index_vector_axis(sn);
  lathe_ilist off = lathe_attr_gather_offset_output_axes(sn), col = lathe_attr_gather_collapsed_slice_axes(sn);
  lathe_ilist map = lathe_attr_gather_start_index_map(sn), sizes = lathe_attr_gather_slice_sizes(sn);
  for (int a = 0, b = 0; a < ix->shape.rank; a++) {
    ix_res[a] = -1;
    if (a == iva) continue;
    while (b < sn->shape.rank && listed(off, b)) b++;
    if (b < sn->shape.rank) ix_res[a] = b++;
  }
  for (int a = 0, j = 0; a < x->shape.rank; a++) {
    x_res[a] = -1;
    if (listed(col, a) || j >= off.n) continue;
    int b = (int)off.v[j++];
    if (!listed(map, a) && sizes.v[a] == x->shape.dims[a]) x_res[a] = b;
  }
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
  int slot = 0, ix_res[LATHE_MAX_RANK], x_res[LATHE_MAX_RANK];
  gather_axes(sn, ix_res, x_res);
  for (int a = 0; a < ix->shape.rank; a++)
    if (ix_res[a] >= 0 && I->n_axes[a] && try_copy_axis(&used, slot, I, a))
      copy_axis(&ni, a, I, a), copy_axis(&rs, ix_res[a], I, a), slot++;
  for (int a = 0; a < x->shape.rank; a++)
    if (x_res[a] >= 0 && X->n_axes[a] && slot < LATHE_MAX_RANK && try_copy_axis(&used, slot, X, a))
      copy_axis(&nx, a, X, a), copy_axis(&rs, x_res[a], X, a), slot++;
  lathe_node *v, *iv, *out;
  LATHE_RETURN_IF_ERROR(lathe_part_get(p, x, &nx, &v));
  LATHE_RETURN_IF_ERROR(lathe_part_get(p, ix, &ni, &iv));
  int o[LATHE_MAX_RANK], c[LATHE_MAX_RANK], m[LATHE_MAX_RANK];
  int64_t ls[LATHE_MAX_RANK];
  for (int k = 0; k < off.n; k++) o[k] = (int)off.v[k];
  for (int k = 0; k < col.n; k++) c[k] = (int)col.v[k];
  for (int k = 0; k < map.n && k < LATHE_MAX_RANK; k++) m[k] = (int)map.v[k];
  for (int a = 0; a < sizes.n; a++) ls[a] = nx.n_axes[a] ? sizes.v[a] / parts(p, &nx, a) : sizes.v[a];
  LATHE_RETURN_IF_ERROR(lathe_gather(p->fn, v, iv, iva, o, off.n, c, col.n, m, map.n, ls, sizes.n,
                                     lathe_attr_gather_indices_are_sorted(sn), &out));
  lathe_part_set(p, sn, out, &rs);
  return NULL;
}

/* The updates' axis over each operand axis of scatter sn that keeps a split (neither indexed nor
 * inserted, and covered whole by the update windows); -1 for the others. rule_scatter and the
 * backward hints read it. */
static void scatter_windows(const lathe_node *sn, int *window_of) {
  const lathe_node *x = sn->in[0], *up = sn->in[2];
  lathe_ilist win = lathe_attr_scatter_update_window_axes(sn), ins = lathe_attr_scatter_inserted_window_axes(sn);
  lathe_ilist map = lathe_attr_scatter_scatter_axes_to_operand_axes(sn);
  for (int a = 0, j = 0; a < x->shape.rank; a++) {
    window_of[a] = -1;
    if (listed(ins, a) || j >= win.n) continue;
    int u = (int)win.v[j++];
    if (!listed(map, a) && up->shape.dims[u] == x->shape.dims[a]) window_of[a] = u;
  }
}

/* ScatterSum/Max/Min (an embedding's gradient): an operand axis that is neither indexed nor
 * inserted, and that the update windows cover whole, keeps its split, and the updates' window axis
 * takes it; indices and the updates' other axes are replicated. The split comes from the operand,
 * else from the consumers (the backward hint), else from the updates. */
static lathe_status_t rule_scatter(part *p, const lathe_node *sn) {
  const lathe_node *x = sn->in[0], *ix = sn->in[1], *up = sn->in[2];
  int window_of[LATHE_MAX_RANK];
  scatter_windows(sn, window_of);
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
  return lathe_part_emit_with(p, sn, need, &in, &out);
}

/* The axes of its first operand an op of rule_axis_local works along. */
static void axis_local_along(const lathe_node *sn, bool *along) {
  lathe_ilist list = {NULL, 0};
  switch (sn->op) {
    case LATHE_OP_REVERSE: list = lathe_attr_reverse_axes(sn); break;
    case LATHE_OP_FUSED_LAYER_NORM: list = lathe_attr_fused_layer_norm_axes(sn); break;
    case LATHE_OP_CUM_SUM: along[lathe_attr_cum_sum_axis(sn)] = true; break;
    case LATHE_OP_ARG_MIN_MAX: along[lathe_attr_arg_min_max_axis(sn)] = true; break;
    case LATHE_OP_FUSED_SOFTMAX: along[lathe_attr_fused_softmax_axis(sn)] = true; break;
    case LATHE_OP_FUSED_QUANTIZED_DENSE: along[sn->in[0]->shape.rank - 1] = true; break; /* K becomes N */
    default: break;
  }
  for (int k = 0; k < list.n; k++) along[list.v[k]] = true;
}

/* Ops that work along some axes of their first operand independently of its other axes: those
 * axes are gathered, the rest keep their split (or take the consumers' where the operand is
 * replicated). Reverse, CumSum, FusedSoftmax, FusedLayerNorm (its gamma and beta, over the
 * normalised axes, replicated), FusedActivation (an axis it resizes, as SwiGLU's, gathered),
 * FusedQuantizedDense (the batch axes of x; its weights, scales and bias replicated); ArgMinMax
 * also drops its axis. */
static lathe_status_t rule_axis_local(part *p, const lathe_node *sn) {
  const lathe_node *x = sn->in[0];
  bool drop = sn->op == LATHE_OP_ARG_MIN_MAX;
  spec in = *own(p, x->id), *need = p->need;
  if (replicated(&in) && !drop && p->hinted[sn->id]) in = p->hint[sn->id];
  bool along[LATHE_MAX_RANK] = {false};
  axis_local_along(sn, along);
  for (int a = 0; a < x->shape.rank; a++)
    if (along[a] || (!drop && x->shape.dims[a] != sn->shape.dims[a])) clear_axis(&in, a);
  spec rs = replicated_spec(sn->shape.rank);
  for (int a = 0, b = 0; a < x->shape.rank; a++)
    if (!drop || !along[a]) copy_axis(&rs, b++, &in, a);
  need[0] = in;
  for (int i = 1; i < sn->n_operands; i++) need[i] = replicated_spec(sn->in[i]->shape.rank);
  lathe_node *out;
  return lathe_part_emit_with(p, sn, need, &rs, &out);
}

/* An op whose result depends, along the axes where along[a], on neighbouring elements of its
 * operands, and along the others only on the element at the same position (operands and result
 * alike in rank and in those axes' sizes): those axes keep a split -- the first operand's, else
 * the next's, else the consumers' where every operand is replicated -- and the axes along[] are
 * gathered (FFT, a gated FusedActivationVJP). Nothing left split: the fallback. */
static lathe_status_t rule_local_except(part *p, const lathe_node *sn, const bool *along) {
  int r = sn->shape.rank, n = sn->n_operands;
  spec in = replicated_spec(r);
  bool split = false;
  for (int c = 0; c < n && replicated(&in); c++) {
    in = *own(p, sn->in[c]->id);
    split |= !replicated(&in);
    for (int a = 0; a < r; a++)
      if (along[a]) clear_axis(&in, a);
  }
  if (!split && p->hinted[sn->id]) {
    in = p->hint[sn->id];
    for (int a = 0; a < r; a++)
      if (along[a]) clear_axis(&in, a);
  }
  if (replicated(&in)) return lathe_part_fallback(p, sn);
  spec *need = p->need;
  for (int i = 0; i < n; i++) need[i] = in;
  lathe_node *out;
  return lathe_part_emit_with(p, sn, need, &in, &out);
}

/* FFT transforms its trailing fft_length axes, each position of the leading axes on its own:
 * the leading axes keep their split, the transformed ones are gathered. */
static lathe_status_t rule_fft(part *p, const lathe_node *sn) {
  int r = sn->in[0]->shape.rank, n = lathe_attr_fft_length(sn).n;
  if (n < 1 || n > r || sn->shape.rank != r)
    return LATHE_INVALID("FFT: a transform over %d axes of an operand of rank %d", n, r);
  bool along[LATHE_MAX_RANK] = {false};
  for (int a = r - n; a < r; a++) along[a] = true;
  return rule_local_except(p, sn, along);
}

/* Iota: computed locally in the consumers' sharding where that leaves the counted axis whole
 * (the other axes' values do not depend on the offset); else replicated. */
static lathe_status_t rule_iota(part *p, const lathe_node *sn) {
  spec rs = replicated_spec(sn->shape.rank);
  if (p->hinted[sn->id] && !p->hint[sn->id].n_axes[lathe_attr_iota_axis(sn)]) rs = p->hint[sn->id];
  lathe_node *out;
  return lathe_part_emit_with(p, sn, NULL, &rs, &out);
}

/* FusedScaledDotProductAttention and its VJP: every (batch, head) pair is an attention of its own,
 * so the batch axis and the heads axis may stay split while the sequence and head-dim axes (each
 * row's softmax runs over all keys) are gathered. Heads split only where the query heads and the
 * KV heads both divide by the shards: then each device's query heads read its own KV heads (a
 * GQA group never straddles devices). The split is one operand's (batch, heads) pair, the one
 * whose reshards move the fewest bytes. Masks and bias take it on their batch and heads axes
 * (broadcast axes of size 1 stay replicated), the sequence lengths on their batch axis. Results:
 * the output and the gradients like query, key and value; the logsumexp [batch, heads, seq]
 * alike. Nothing left split: the fallback. */
typedef struct {
  int heads_axis, n_main, mask; /* n_main: operands with batch and heads (q, k, v[, out, lse, dOut]); mask: index or -1 */
  bool bshd;
} attn_form;

/* Operand i's sharding under bh (rank 2: [batch, heads]). */
static spec attn_need(const attn_form *f, const lathe_node *sn, int i, const spec *bh) {
  const lathe_shape *s = &sn->in[i]->shape;
  spec t = replicated_spec(s->rank);
  bool vjp = sn->op == LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION_VJP;
  if (i < f->n_main) { /* the VJP's operand 4 is the logsumexp [batch, heads, seq] */
    copy_axis(&t, 0, bh, 0);
    copy_axis(&t, vjp && i == 4 ? 1 : f->heads_axis, bh, 1);
  } else if (s->rank == 1) { /* QuerySeqLen, KeyValueSeqLen: Int32 [batch] */
    copy_axis(&t, 0, bh, 0);
  } else if (s->rank == 4) { /* mask or bias in the scores' order; a BSHD mask is [batch, seq, heads, kvLen] */
    int h = i == f->mask && f->bshd ? 2 : 1;
    if (s->dims[0] != 1) copy_axis(&t, 0, bh, 0);
    if (s->dims[h] != 1) copy_axis(&t, h, bh, 1);
  } /* rank 2 and 3 ([seq, kvLen], [1, seq, kvLen]) broadcast over batch and heads: replicated */
  return t;
}

static lathe_status_t rule_attention(part *p, const lathe_node *sn) {
  bool vjp = sn->op == LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION_VJP;
  attn_form f = {.bshd = lathe_attr_sdpa_layout(sn) == LATHE_ATTENTION_LAYOUT_BSHD, .n_main = vjp ? 6 : 3, .mask = -1};
  f.heads_axis = f.bshd ? 2 : 1;
  if (lathe_attr_sdpa_has_mask(sn)) f.mask = f.n_main;
  const lathe_node *q = sn->in[0], *k = sn->in[1];
  int64_t heads = q->shape.dims[f.heads_axis], kv_heads = k->shape.dims[f.heads_axis], batch = q->shape.dims[0];
  spec best = replicated_spec(2);
  double best_cost = -1;
  int64_t best_parts = 0;
  for (int c = -1; c < f.n_main; c++) { /* -1: everything gathered */
    spec bh = replicated_spec(2);
    if (c >= 0) {
      const spec *x = own(p, sn->in[c]->id);
      copy_axis(&bh, 0, x, 0);
      copy_axis(&bh, 1, x, vjp && c == 4 ? 1 : f.heads_axis);
      if (batch % parts(p, &bh, 0)) clear_axis(&bh, 0);
      if (heads % parts(p, &bh, 1) || kv_heads % parts(p, &bh, 1)) clear_axis(&bh, 1);
    }
    double cost = 0;
    for (int i = 0; i < sn->n_operands; i++) {
      spec t = attn_need(&f, sn, i, &bh);
      cost += lathe_part_reshard_cost(p, sn->in[i], &t);
    }
    int64_t np = parts(p, &bh, 0) * parts(p, &bh, 1);
    if (best_cost < 0 || cost < best_cost || (cost == best_cost && np > best_parts))
      best = bh, best_cost = cost, best_parts = np;
  }
  if (replicated(&best)) return lathe_part_fallback(p, sn);
  spec *need = p->need;
  for (int i = 0; i < sn->n_operands; i++) need[i] = attn_need(&f, sn, i, &best);
  for (int i = 0; i < sn->n_out; i++) p->rs[i] = need[i]; /* output (and dQuery, dKey, dValue) like q, k, v */
  if (!vjp) { /* the logsumexp: [batch, heads, seq] */
    p->rs[1] = replicated_spec(3);
    copy_axis(&p->rs[1], 0, &best, 0);
    copy_axis(&p->rs[1], 1, &best, 1);
  }
  return lathe_part_emit_multi(p, sn, need, p->rs);
}

/* Batch normalisation works per feature: the feature axis keeps its split (from the operand, else
 * from a per-feature vector or grad_output), the vectors and the statistics take it, and each
 * device normalises its features exactly as the whole run does. BatchNormForInference is
 * elementwise besides, so the operand's other axes keep their split too; training and gradient
 * reduce over the other axes, which are gathered (a split batch would need an AllReduce of the
 * statistics inside the op). Nothing left split: the fallback. */
static lathe_status_t rule_batch_norm(part *p, const lathe_node *sn) {
  const lathe_node *x = sn->in[0];
  int fa = (int)lathe_attr_batch_norm_feature_axis(sn), n = sn->n_operands;
  bool inference = sn->op == LATHE_OP_BATCH_NORM_FOR_INFERENCE;
  spec in = *own(p, x->id), f = replicated_spec(1); /* f: the feature split */
  copy_axis(&f, 0, &in, fa);
  for (int i = 1; i < n && !f.n_axes[0]; i++) {
    const spec *s = own(p, sn->in[i]->id);
    int a = sn->in[i]->shape.rank == 1 ? 0 : fa; /* the vectors, or BatchNormGradient's grad_output */
    if (s->n_axes[a]) copy_axis(&f, 0, s, a);
  }
  if (!inference) in = replicated_spec(x->shape.rank);
  if (!try_copy_axis(&in, fa, &f, 0)) clear_axis(&in, fa);
  if (replicated(&in)) return lathe_part_fallback(p, sn);
  spec vec = replicated_spec(1), *need = p->need;
  copy_axis(&vec, 0, &in, fa);
  for (int i = 0; i < n; i++) need[i] = sn->in[i]->shape.rank == 1 ? vec : in;
  lathe_node *out;
  if (inference) return lathe_part_emit_with(p, sn, need, &in, &out);
  p->rs[0] = in, p->rs[1] = vec, p->rs[2] = vec;
  return lathe_part_emit_multi(p, sn, need, p->rs);
}

/* FusedAttentionQKVProjection, x [batch..., in] . wQKV split into query, key and value: each row
 * of x is projected on its own, so x's batch axes keep their split and the three results take
 * it; the input-feature axis, wQKV and the biases are gathered (the query/key/value columns
 * share wQKV's one axis). Nothing left split: the fallback. */
static lathe_status_t rule_qkv_projection(part *p, const lathe_node *sn) {
  const lathe_node *x = sn->in[0];
  spec in = *own(p, x->id), *need = p->need;
  clear_axis(&in, x->shape.rank - 1);
  if (replicated(&in)) return lathe_part_fallback(p, sn);
  need[0] = in;
  for (int i = 1; i < sn->n_operands; i++) need[i] = replicated_spec(sn->in[i]->shape.rank);
  for (int i = 0; i < sn->n_out; i++) p->rs[i] = in;
  return lathe_part_emit_multi(p, sn, need, p->rs);
}

/* Bitcast: the axes both sides have keep their split; the axis a width change adds or drops is
 * replicated, and with a packed (sub-byte) dtype on either side the last shared axis too (a
 * shard's bytes must hold whole values). */
static lathe_status_t rule_bitcast(part *p, const lathe_node *sn) {
  const lathe_node *x = sn->in[0];
  int rx = x->shape.rank, ro = sn->shape.rank, r = rx < ro ? rx : ro;
  if (lathe_dtype_is_packed(x->shape.dtype) || lathe_dtype_is_packed(sn->shape.dtype)) r--;
  spec in = *own(p, x->id), rs = replicated_spec(ro);
  for (int a = r < 0 ? 0 : r; a < rx; a++) clear_axis(&in, a);
  for (int a = 0; a < r; a++) copy_axis(&rs, a, &in, a);
  p->need[0] = in;
  lathe_node *out;
  return lathe_part_emit_with(p, sn, p->need, &rs, &out);
}

/* QuantizedEmbeddingLookup: the result [indices' axes but the last..., K] follows the indices'
 * split (their last axis, of size 1, replicated); the table is replicated. */
static lathe_status_t rule_embedding_lookup(part *p, const lathe_node *sn) {
  const lathe_node *idx = sn->in[1];
  int ri = idx->shape.rank;
  spec in = *own(p, idx->id), rs = replicated_spec(sn->shape.rank);
  if (replicated(&in) && p->hinted[sn->id])
    for (int a = 0; a < ri - 1; a++) copy_axis(&in, a, &p->hint[sn->id], a);
  clear_axis(&in, ri - 1);
  for (int a = 0; a < ri - 1; a++) copy_axis(&rs, a, &in, a);
  p->need[0] = replicated_spec(sn->in[0]->shape.rank), p->need[1] = in;
  lathe_node *out;
  return lathe_part_emit_with(p, sn, p->need, &rs, &out);
}

/* OptimizationBarrier: each result is its operand, in the operand's sharding; SchedulingBarrier:
 * its result is its first operand, in that one's sharding (the others only ordered before it). */
static lathe_status_t rule_barrier(part *p, const lathe_node *sn) {
  for (int i = 0; i < sn->n_operands; i++) p->need[i] = p->rs[i] = *own(p, sn->in[i]->id);
  if (sn->multi) return lathe_part_emit_multi(p, sn, p->need, p->rs);
  lathe_node *out;
  return lathe_part_emit_with(p, sn, p->need, &p->rs[0], &out);
}

/* Whether a While's state element (source operand x, now in sharding s) should take r, the
 * sharding the body's result comes out in: it does where resharding x's initial value to r once
 * costs no more than resharding it to s plus one iteration's reshard of the result from r to s
 * (the loop runs at least once, most often many times); on a tie, unless r splits less (a split
 * state over a replicated result, both free: the body slices it). */
static bool follow_body(const part *p, const lathe_node *x, const spec *s, const spec *r) {
  double take = lathe_part_reshard_cost(p, x, r),
         keep = lathe_part_reshard_cost(p, x, s) + lathe_part_reshard_bytes(p, &x->shape, r, s);
  int64_t nr = 1, ns = 1;
  for (int a = 0; a < s->rank; a++) nr *= parts(p, r, a), ns *= parts(p, s, a);
  return take < keep || (take == keep && nr >= ns);
}

/* While: cond and body partitioned like main on the state's local shapes, cond's predicate
 * replicated, the body's results resharded to the state's shardings at its end. The state starts
 * in its operands' shardings and follows the body's results (follow_body), re-propagated through
 * dry runs of the body until no sharding changes: a replicated state the body computes split is
 * sliced once before the loop, not gathered every iteration. Without a fixed point within
 * WHILE_ROUNDS dry runs (a body whose preference oscillates) the operands' shardings stay. */
#define WHILE_ROUNDS 4
static lathe_status_t rule_while(part *p, const lathe_node *sn) {
  int n = sn->n_operands;
  spec *st = malloc(sizeof *st * 3 * (size_t)n), *r = st + n, *init = st + 2 * n;
  if (!st) return LATHE_OOM("Partition");
  for (int i = 0; i < n; i++) st[i] = init[i] = *own(p, sn->in[i]->id);
  const lathe_function *body = lathe_attr_while_body(sn);
  lathe_status_t e = NULL;
  bool moved = true;
  for (int round = 0; moved && !e && round < WHILE_ROUNDS; round++) {
    memcpy(r, st, sizeof *st * (size_t)n);
    e = lathe_part_function(p, body, st, r, PART_OUT_DRY, NULL);
    moved = false;
    for (int i = 0; !e && i < n; i++)
      if (!spec_eq(&r[i], &st[i]) && follow_body(p, sn->in[i], &st[i], &r[i])) st[i] = r[i], moved = true;
  }
  if (moved) memcpy(st, init, sizeof *st * (size_t)n);
  memcpy(r, st, sizeof *st * (size_t)n);
  spec pred = replicated_spec(0);
  lathe_function *fns[LATHE_MAX_SUBFNS] = {NULL};
  if (!e) e = lathe_part_function(p, lathe_attr_while_cond(sn), st, &pred, PART_OUT_FIXED, &fns[0]);
  if (!e) e = lathe_part_function(p, body, st, r, PART_OUT_FIXED, &fns[1]);
  if (!e) e = lathe_part_emit_control(p, sn, st, st, fns);
  free(st);
  return e;
}

/* If: the predicate replicated; the true branch partitioned first, its results in their own
 * shardings, which the false branch's results are resharded to. */
static lathe_status_t rule_if(part *p, const lathe_node *sn) {
  int n = sn->n_out;
  spec *rs = malloc(sizeof *rs * (size_t)(n + 1));
  if (!rs) return LATHE_OOM("Partition");
  spec pred = replicated_spec(0);
  lathe_function *fns[LATHE_MAX_SUBFNS] = {NULL};
  lathe_status_t e = lathe_part_function(p, lathe_attr_if_true_branch(sn), NULL, rs, PART_OUT_OWN, &fns[0]);
  if (!e) e = lathe_part_function(p, lathe_attr_if_false_branch(sn), NULL, rs, PART_OUT_FIXED, &fns[1]);
  if (!e) e = lathe_part_emit_control(p, sn, &pred, rs, fns);
  free(rs);
  return e;
}

/* Call: the callee partitioned for this call site, its parameters in the arguments' shardings, its
 * results in their own. */
static lathe_status_t rule_call(part *p, const lathe_node *sn) {
  int n = sn->n_operands;
  spec *in = malloc(sizeof *in * (size_t)(n + sn->n_out + 1));
  if (!in) return LATHE_OOM("Partition");
  for (int i = 0; i < n; i++) in[i] = *own(p, sn->in[i]->id);
  lathe_function *fns[LATHE_MAX_SUBFNS] = {NULL};
  lathe_status_t e = lathe_part_function(p, lathe_attr_call_callee(sn), in, in + n, PART_OUT_OWN, &fns[0]);
  if (!e) e = lathe_part_emit_control(p, sn, in, in + n, fns);
  free(in);
  return e;
}

static lathe_status_t rule_control(part *p, const lathe_node *sn);

/* Sort: every operand and result split alike along the other axes (each device sorts its rows);
 * the sorted axis gathered. The comparator, on scalars, is copied as partitioned. */
static lathe_status_t rule_sort(part *p, const lathe_node *sn) {
  int n = sn->n_operands, axis = (int)lathe_attr_sort_axis(sn), r = sn->in[0]->shape.rank;
  spec s = replicated_spec(r);
  for (int c = 0; c < n && replicated(&s); c++) {
    s = *own(p, sn->in[c]->id);
    clear_axis(&s, axis);
  }
  if (replicated(&s)) return rule_control(p, sn);
  const lathe_function *cmp = lathe_attr_sort_comparator(sn);
  spec *in = malloc(sizeof *in * (size_t)(cmp->n_params + 1));
  if (!in) return LATHE_OOM("Partition");
  for (int i = 0; i < cmp->n_params; i++) in[i] = replicated_spec(0);
  spec pred = replicated_spec(0);
  lathe_function *fns[LATHE_MAX_SUBFNS] = {NULL};
  lathe_status_t e = lathe_part_function(p, cmp, in, &pred, PART_OUT_FIXED, &fns[0]);
  free(in);
  for (int i = 0; i < n; i++) p->need[i] = p->rs[i] = s;
  return e ? e : lathe_part_emit_control(p, sn, p->need, p->rs, fns);
}

/* Sort along its only split axes runs whole on every device, its comparator copied as it is, on
 * replicated operands and captured values; counted where that gathers a split one. */
static lathe_status_t rule_control(part *p, const lathe_node *sn) {
  bool gathered;
  LATHE_RETURN_IF_ERROR(lathe_part_emit_whole(p, sn, &gathered));
  if (gathered) count_whole(p, sn);
  return NULL;
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

enum { LATHE_MAX_OPERANDS_HINTED = 16 }; /* operand and variant index pairs: 8 operands sliced at most */
static lathe_status_t dispatch(part *p, const lathe_node *sn);

/* Whether sn's rule takes its consumers' wish itself: elementwise ops, Transpose, BroadcastInDim
 * and the scatters from their result's hint, Concatenate weighing it with its operands. */
static bool weighs_hint(const lathe_node *sn) {
  switch (sn->op) {
    case LATHE_OP_TRANSPOSE: case LATHE_OP_BROADCAST_IN_DIM: case LATHE_OP_CONCATENATE: case LATHE_OP_SCATTER_SUM:
    case LATHE_OP_SCATTER_MAX: case LATHE_OP_SCATTER_MIN:
      return true;
    default: return lathe_op_has(sn->op, LATHE_OPF_EW);
  }
}

/* A hinted op's replicated operand arrives sliced to the split the hint asks of it (free: each
 * device cuts its own block), so that the op itself is computed split rather than whole and
 * sliced after: the slice stands as the operand's own sharding while sn's rule runs. */
lathe_status_t lathe_part_node(part *p, const lathe_node *sn) {
  int swapped[LATHE_MAX_OPERANDS_HINTED], ns = 0;
  lathe_status_t st = NULL;
  if (p->hinted[sn->id] && !sn->multi && !weighs_hint(sn))
    for (int i = 0; i < sn->n_operands && ns < LATHE_MAX_OPERANDS_HINTED; i++) {
      const lathe_node *x = sn->in[i];
      bool twice = false; /* an operand read twice (dot(w, w)) stays whole for both reads */
      for (int j = 0; j < sn->n_operands; j++) twice |= j != i && sn->in[j] == x;
      spec t;
      if (twice || x->fn != p->sfn || !replicated(own(p, x->id)) || !lathe_part_operand_hint(p, sn, i, &p->hint[sn->id], &t))
        continue;
      lathe_node *v;
      if ((st = lathe_part_get(p, x, &t, &v))) break;
      int k = 0;
      while (k < p->n_vars[x->id] && !spec_eq(&p->vars[x->id][k].s, &t)) k++;
      if (k == p->n_vars[x->id]) continue; /* no room to keep the slice: stays whole */
      variant w = p->vars[x->id][0];
      p->vars[x->id][0] = p->vars[x->id][k];
      p->vars[x->id][k] = w;
      swapped[ns++] = i, swapped[ns++] = k;
    }
  if (!st) st = dispatch(p, sn);
  for (int j = ns - 2; j >= 0; j -= 2) { /* the whole value is the operand's own again */
    int id = sn->in[swapped[j]]->id, k = swapped[j + 1];
    variant w = p->vars[id][0];
    p->vars[id][0] = p->vars[id][k];
    p->vars[id][k] = w;
  }
  return st;
}

static lathe_status_t dispatch(part *p, const lathe_node *sn) {
  if (sn->op == LATHE_OP_TUPLE_ELEMENT) {
    int id = sn->in[0]->id, i = (int)lathe_attr_tuple_element_index(sn);
    lathe_part_set(p, sn, p->tuples[id][i], &p->res[p->res_at[id] + i]);
    return NULL;
  }
  if (sn->multi) switch (sn->op) {
      case LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION: case LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION_VJP:
        return rule_attention(p, sn);
      case LATHE_OP_BATCH_NORM_FOR_TRAINING: case LATHE_OP_BATCH_NORM_GRADIENT: return rule_batch_norm(p, sn);
      case LATHE_OP_FUSED_ATTENTION_QKV_PROJECTION: return rule_qkv_projection(p, sn);
      case LATHE_OP_FUSED_DENSE_VJP: return rule_dense_vjp(p, sn);
      /* RNGBitGenerator runs whole on every device, always counted: its values are the Philox
       * stream of the state's counter in row-major order, so the op run on a shard's local shape
       * would give every device the stream's first values (the same on each, and not the whole
       * run's shard). A split would need each device's counter advanced to its shard's first
       * block, which only a contiguous shard (a split leading axis) has; lathe does not do that. The
       * consumers slice the whole values to their split, so results match the unpartitioned run. */
      case LATHE_OP_RNG_BIT_GENERATOR: return run_whole(p, sn, true);
      case LATHE_OP_OPTIMIZATION_BARRIER: return rule_barrier(p, sn);
      case LATHE_OP_WHILE: return rule_while(p, sn);
      case LATHE_OP_IF: return rule_if(p, sn);
      case LATHE_OP_CALL: return rule_call(p, sn);
      case LATHE_OP_SORT: return rule_sort(p, sn);
      default: return lathe_part_fallback(p, sn);
    }
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
    case LATHE_OP_CONV_GENERAL: return lathe_part_rule_conv(p, sn);
    case LATHE_OP_REDUCE_WINDOW: case LATHE_OP_SELECT_AND_SCATTER_MAX: case LATHE_OP_SELECT_AND_SCATTER_MIN:
    case LATHE_OP_SELECT_AND_SCATTER_SUM:
      return lathe_part_rule_window(p, sn);
    case LATHE_OP_FFT: return rule_fft(p, sn);
    case LATHE_OP_SCATTER_SUM: case LATHE_OP_SCATTER_MAX: case LATHE_OP_SCATTER_MIN: return rule_scatter(p, sn);
    case LATHE_OP_GATHER: return lathe_attr_gather_start_index_map(sn).n <= LATHE_MAX_RANK ? rule_gather(p, sn) : lathe_part_fallback(p, sn);
    case LATHE_OP_DYNAMIC_SLICE: case LATHE_OP_DYNAMIC_UPDATE_SLICE: return rule_dynamic_slice(p, sn);
    case LATHE_OP_REVERSE: case LATHE_OP_CUM_SUM: case LATHE_OP_ARG_MIN_MAX: case LATHE_OP_FUSED_SOFTMAX:
    case LATHE_OP_FUSED_LAYER_NORM: case LATHE_OP_FUSED_ACTIVATION: case LATHE_OP_FUSED_QUANTIZED_DENSE:
      return rule_axis_local(p, sn);
    case LATHE_OP_BITCAST: return rule_bitcast(p, sn);
    case LATHE_OP_SCHEDULING_BARRIER: return rule_barrier(p, sn);
    case LATHE_OP_QUANTIZED_EMBEDDING_LOOKUP: return rule_embedding_lookup(p, sn);
    case LATHE_OP_FUSED_DENSE: return rule_fused_dense(p, sn);
    case LATHE_OP_BATCH_NORM_FOR_INFERENCE: return rule_batch_norm(p, sn);
    case LATHE_OP_FUSED_ACTIVATION_VJP: { /* elementwise, but for a gated one's halved last axis (gathered) */
      if (lathe_act_form_of((lathe_activation)lathe_attr_fused_activation_vjp_activation(sn)) != LATHE_ACT_FORM_GLU)
        return rule_elementwise(p, sn);
      bool along[LATHE_MAX_RANK] = {false};
      along[sn->shape.rank - 1] = true;
      return rule_local_except(p, sn, along);
    }
    default: return lathe_part_fallback(p, sn); /* constants too: replicated, sliced where needed */
  }
}


/* Clears t's axes (a hint for one operand of contraction sn) split over a mesh axis that the rule
 * takes first for the other operand o's contracting axes con[]: as far as the backward pass knows
 * o (a parameter's or capture's fixed sharding, else the hint its later readers left), split there
 * and kept (sum_cheaper). The rule would move the hinted split away again (an AllToAll). */
static void drop_taken(const part *p, const lathe_node *sn, const lathe_node *o, const bool *con, spec *t) {
  const spec *S = p->n_vars[o->id] ? own(p, o->id) : p->hinted[o->id] ? &p->hint[o->id] : NULL;
  spec taken = replicated_spec(o->shape.rank);
  for (int c = 0; S && c < o->shape.rank; c++)
    if (con[c] && S->n_axes[c] && sum_cheaper(p, sn, o, S, c)) copy_axis(&taken, c, S, c);
  for (int a = 0; a < t->rank; a++)
    for (int k = 0; k < t->n_axes[a]; k++)
      if (uses(&taken, t->mesh, t->axes[a][k], -1)) clear_axis(t, a);
}

/* The backward pass's step (partition.c): rules run in reverse. For operand i of sn, whose consumers
 * want it split as h, from[a] names the result axis whose split operand axis a would carry to the
 * result under sn's rule (-1: none), so a hint never asks for a split the rule would gather.
 * Multi-result ops, While, If and Call and the windows pass none. */
bool lathe_part_operand_hint(const part *p, const lathe_node *sn, int i, const spec *h, spec *t) {
  const lathe_shape *xs = &sn->in[i]->shape, *os = &sn->shape;
  int r = xs->rank, from[LATHE_MAX_RANK];
  bool along[LATHE_MAX_RANK] = {false}, same = false; /* same: from[a] = a, unless along[a] or resized */
  const lathe_node *other = NULL; /* a contraction's other operand, its contracting axes con[] */
  bool con[LATHE_MAX_RANK] = {false};
  for (int a = 0; a < r; a++) from[a] = -1;
  if (lathe_op_has(sn->op, LATHE_OPF_EW)) same = true;
  else if (is_reduce(sn->op)) { /* kept axes, in order */
    lathe_ilist ax = lathe_attr_reduce_axes(sn);
    for (int a = 0, b = 0; a < r; a++)
      if (!listed(ax, a)) from[a] = b++;
  } else switch (sn->op) {
      case LATHE_OP_TRANSPOSE: {
        lathe_ilist perm = lathe_attr_transpose_permutation(sn);
        for (int b = 0; b < perm.n; b++) from[perm.v[b]] = b;
        break;
      }
      case LATHE_OP_BROADCAST_IN_DIM: {
        lathe_ilist ax = lathe_attr_broadcast_in_dim_axes(sn);
        for (int a = 0; a < ax.n; a++)
          if (xs->dims[a] == os->dims[ax.v[a]]) from[a] = (int)ax.v[a];
        break;
      }
      case LATHE_OP_RESHAPE:
        for (int a = 0; a < r; a++) from[a] = reshape_axis(xs, os, a, 1); /* divisibility below */
        break;
      case LATHE_OP_SLICE: same = true; break; /* an axis keeps its size only where taken whole */
      case LATHE_OP_PAD: {
        lathe_ilist lo = lathe_attr_pad_start(sn), hi = lathe_attr_pad_end(sn), in = lathe_attr_pad_interior(sn);
        for (int a = 0; a < r; a++) along[a] = lo.v[a] || hi.v[a] || in.v[a];
        same = i == 0; /* not the padding value */
        break;
      }
      case LATHE_OP_CONCATENATE: along[lathe_attr_concatenate_axis(sn)] = same = true; break;
      case LATHE_OP_DYNAMIC_SLICE: same = i == 0; break; /* axes taken whole: not resized */
      case LATHE_OP_DYNAMIC_UPDATE_SLICE: /* operand and update, on the axes the update covers whole */
        for (int a = 0; a < r; a++) along[a] = sn->in[1]->shape.dims[a] != os->dims[a];
        same = i <= 1;
        break;
      case LATHE_OP_REVERSE: case LATHE_OP_CUM_SUM: case LATHE_OP_ARG_MIN_MAX: case LATHE_OP_FUSED_SOFTMAX:
      case LATHE_OP_FUSED_LAYER_NORM: case LATHE_OP_FUSED_ACTIVATION: case LATHE_OP_FUSED_QUANTIZED_DENSE:
        if (i) break;
        axis_local_along(sn, along);
        same = sn->op != LATHE_OP_ARG_MIN_MAX;
        for (int a = 0, b = 0; !same && a < r; a++) /* ArgMinMax drops its axis */
          if (!along[a]) from[a] = b++;
        break;
      case LATHE_OP_FFT: /* its trailing fft_length axes transformed */
        for (int a = 0; a < r; a++) along[a] = a >= r - lathe_attr_fft_length(sn).n;
        same = true;
        break;
      case LATHE_OP_FUSED_ACTIVATION_VJP: /* elementwise, but for a gated one's halved last axis */
        along[r - 1] = lathe_act_form_of((lathe_activation)lathe_attr_fused_activation_vjp_activation(sn)) == LATHE_ACT_FORM_GLU;
        same = true;
        break;
      case LATHE_OP_DOT_GENERAL: { /* result: batch, lhs free, rhs free */
        lathe_ilist c = i ? lathe_attr_dot_general_rhs_contracting(sn) : lathe_attr_dot_general_lhs_contracting(sn);
        lathe_ilist bt = i ? lathe_attr_dot_general_rhs_batch(sn) : lathe_attr_dot_general_lhs_batch(sn);
        const lathe_node *l = sn->in[0];
        int out = bt.n + (i ? l->shape.rank - bt.n - lathe_attr_dot_general_lhs_contracting(sn).n : 0);
        for (int k = 0; k < bt.n; k++) from[bt.v[k]] = k;
        for (int a = 0; a < r; a++)
          if (!listed(c, a) && !listed(bt, a)) from[a] = out++;
        other = sn->in[1 - i];
        lathe_ilist oc = i ? lathe_attr_dot_general_lhs_contracting(sn) : lathe_attr_dot_general_rhs_contracting(sn);
        for (int k = 0; k < oc.n; k++) con[oc.v[k]] = true;
        break;
      }
      case LATHE_OP_FUSED_DENSE: { /* result: x's batch axes, then the weight's outputs (the bias's axes) */
        int nb = sn->in[0]->shape.rank - 1;
        int wout = lathe_attr_fused_dense_layout(sn) == LATHE_DENSE_INPUT_OUTPUTS ? 1 : 0;
        if (i == 0)
          for (int a = 0; a < nb; a++) from[a] = a;
        for (int k = 0; i == 1 && k < r - 1; k++) from[wout + k] = nb + k;
        for (int k = 0; i == 2 && k < r; k++) from[k] = nb + k;
        other = sn->in[i ? 0 : 1]; /* the bias follows the weight */
        con[i ? nb : lathe_attr_fused_dense_layout(sn) == LATHE_DENSE_INPUT_OUTPUTS ? 0 : other->shape.rank - 1] = true;
        break;
      }
      case LATHE_OP_CONV_GENERAL: /* input batch, kernel output channels (not with groups) */
        if (lathe_attr_conv_general_batch_group_count(sn) > 1) break;
        if (i == 0) from[lathe_attr_conv_general_input_batch(sn)] = (int)lathe_attr_conv_general_output_batch(sn);
        if (i == 1 && lathe_attr_conv_general_channel_group_count(sn) == 1)
          from[lathe_attr_conv_general_kernel_output_channels(sn)] = (int)lathe_attr_conv_general_output_channels(sn);
        break;
      case LATHE_OP_GATHER: { /* rule_gather's axes: the indices' batch axes, the operand's kept ones */
        int ix_res[LATHE_MAX_RANK], x_res[LATHE_MAX_RANK];
        gather_axes(sn, ix_res, x_res);
        if (i <= 1) memcpy(from, i ? ix_res : x_res, sizeof(int) * (size_t)r);
        break;
      }
      case LATHE_OP_SCATTER_SUM: case LATHE_OP_SCATTER_MAX: case LATHE_OP_SCATTER_MIN: { /* rule_scatter's */
        int window_of[LATHE_MAX_RANK];
        scatter_windows(sn, window_of);
        for (int a = 0; i != 1 && a < sn->in[0]->shape.rank; a++)
          if (window_of[a] >= 0) from[i ? window_of[a] : a] = a;
        break;
      }
      default: break;
    }
  for (int a = 0; same && r == os->rank && a < r; a++)
    if (!along[a] && xs->dims[a] == os->dims[a]) from[a] = a;
  *t = replicated_spec(r);
  for (int a = 0; a < r; a++) {
    int b = from[a];
    if (b < 0 || !h->n_axes[b]) continue;
    int64_t n = parts(p, h, b);
    if (xs->dims[a] % n == 0 && os->dims[b] % n == 0) copy_axis(t, a, h, b);
  }
  if (other) drop_taken(p, sn, other, con, t);
  return !replicated(t);
}
