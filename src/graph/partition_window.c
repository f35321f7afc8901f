/* partition_window.c -- the AutoSharding partitioner's rules for the ops whose windows slide
 * (ConvGeneral, ReduceWindow, SelectAndScatter) and the halo exchange that lets the axes they
 * slide along stay split: each device extends its shard with the last `left` elements of the
 * previous shard and the first `right` of the next (a CollectivePermute each way) and runs the op
 * on that, padded along the axis only by what falls between dilated inputs; the shards at the
 * ends receive the padding value instead. docs/ARCHITECTURE.md "Halo exchange" states when an
 * axis qualifies. */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "partition_impl.h"

/* One axis of a window op: input size, window extent (dilations included), stride, padding,
 * input dilation, output size. */
typedef struct {
  int64_t size, extent, stride, lo, hi, in_dil, out;
} slide;

/* How one shard of a split axis computes its outputs: with `left` elements of the previous shard
 * before its own and `right` of the next after them (right < 0: its own last -right dropped), and
 * the op's padding along the axis then (lo, hi) (less than the input dilation: holes, not data).
 * width > 0: the shards' outputs step over other lengths than their inputs ("valid" windows), so
 * shard k reads the `width` elements of that extended operand from base + k * step on. dil > 1:
 * an input-dilated convolution whose outputs do not step over its dilated shard, made one without
 * input dilation by dilating each shard (its d - 1 trailing holes included) before the halos. */
typedef struct {
  int64_t left, right, lo, hi;
  int64_t width, base, step;
  int64_t dil; /* > 1: the shard is dilated here first (holes between and after its elements) */
} halo_plan;

/* Whether axis w split into n shards can be computed shard by shard, each shard's outputs reading
 * its own inputs and a halo from the neighbours (at most a shard each). That holds where the
 * outputs of a shard step over exactly that shard, input dilation included (out * stride ==
 * size * in_dil, a shard's dilated span a multiple of the stride): "same" padding of any stride
 * dividing the shard, and a strided convolution's input gradient (input-dilated). */
static bool halo_fits(const slide *w, int64_t n, halo_plan *h) {
  if (n < 2 || w->size % n || w->in_dil < 1 || w->lo < 0 || w->hi < 0) return false;
  int64_t L = w->size / n, span = L * w->in_dil;
  if (span % w->stride || w->out * w->stride != w->size * w->in_dil) return false;
  /* the last dilated position a shard's outputs read, from its first element's */
  int64_t last = span - w->stride - w->lo + w->extent - 1;
  if (last < 0) return false;
  h->left = w->lo / w->in_dil, h->lo = w->lo - h->left * w->in_dil;
  h->right = last / w->in_dil - (L - 1), h->hi = last - last / w->in_dil * w->in_dil;
  return h->left <= L && h->right <= L && L + h->right > 0;
}

/* Whether axis w split into n shards of L can be computed shard by shard where shard k's outputs
 * read `width` elements (of the padded axis, no input dilation) from k * per - lo on: its
 * neighbours' halos then cover every shard's reads (each at most a shard), and a dynamic slice
 * picks them (the end shards' halos stand for the padding). That covers "valid" windows, whose
 * outputs are fewer than their inputs, and their gradients. */
static bool reads_fit(const slide *w, int64_t n, int64_t per, int64_t width, halo_plan *h) {
  if (n < 2 || w->size % n || w->in_dil != 1 || w->lo < 0) return false; /* hi only ends the last reads */
  int64_t L = w->size / n, first = -w->lo, last = (n - 1) * (per - L) - w->lo; /* reads' starts, own start 0 */
  int64_t lo_rel = first < last ? first : last, hi_rel = first < last ? last : first;
  *h = (halo_plan){.left = lo_rel < 0 ? -lo_rel : 0, .right = hi_rel + width - L > 0 ? hi_rel + width - L : 0};
  h->width = width, h->step = per - L, h->base = h->left - w->lo;
  int64_t reach = (h->step < 0 ? -h->step : h->step) * n + (h->base < 0 ? -h->base : h->base);
  return h->left <= L && h->right <= L && reach <= INT32_MAX; /* offsets are Int32 values */
}

/* Whether a convolution whose input axis (w) and kernel taps (size taps, dilation kd) are both
 * split into n shards alike can sum its outputs over the shards: shard k's taps read inputs that
 * start at its own first element (taps / n * kd == the input shard), with a halo, and its outputs
 * (all w->out of them) are partial sums. This is a convolution's kernel gradient with the spatial
 * axes split: the output gradient as kernel. */
static bool taps_fit(const slide *w, int64_t taps, int64_t kd, int64_t n, halo_plan *h) {
  if (n < 2 || w->size % n || taps % n || w->in_dil != 1 || w->lo < 0 || w->hi < 0) return false;
  int64_t L = w->size / n;
  if (taps / n * kd != L) /* a "valid" convolution's kernel gradient: shards read from k * taps / n on */
    return reads_fit(w, n, taps / n * kd, (w->out - 1) * w->stride + (taps / n - 1) * kd + 1, h);
  memset(h, 0, sizeof *h);
  h->left = w->lo, h->right = (w->out - 1) * w->stride - kd - w->lo + 1, h->lo = h->hi = 0;
  return h->left <= L && h->right <= L && L + h->right > 0;
}

/* halo_fits, else reads_fit for outputs split like the inputs (n shards of out / n); with input
 * dilation (conv: a convolution, which may dilate its shards itself), reads_fit over the dilated
 * axis. */
static bool window_fits(const slide *w, int64_t n, bool conv, halo_plan *h) {
  memset(h, 0, sizeof *h);
  if (halo_fits(w, n, h)) return true;
  if (n < 2 || w->out % n || w->hi < 0 || (w->in_dil > 1 && !conv)) return false;
  slide dw = *w;
  dw.size *= w->in_dil, dw.hi -= w->in_dil - 1, dw.in_dil = 1;
  if (!reads_fit(&dw, n, w->out / n * w->stride, (w->out / n - 1) * w->stride + w->extent, h)) return false;
  h->dil = w->in_dil;
  return true;
}

/* Whether a halo exchange of dtype dt can run here (CollectivePermute offered; whole bytes). */
static bool can_exchange(const part *p, lathe_dtype dt) {
  return !lathe_dtype_is_packed(dt) && lathe_backend_supports_op(p->src->backend, LATHE_OP_COLLECTIVE_PERMUTE, dt);
}

/* piece sent along axis a of s to the next shard of its group (forward) or the previous one; the
 * shard that receives nothing (the first, or the last) gets edge (a scalar; NULL: zeros). */
static lathe_status_t shift(part *p, lathe_node *piece, const spec *s, int a, bool forward, lathe_node *edge,
                            lathe_node **out) {
  int R = p->src->n_replicas, *g = malloc(sizeof(int) * 4 * (size_t)R);
  if (!g) return LATHE_OOM("Partition");
  int *sizes = g + R, *pairs = g + 2 * R, n_pairs = 0;
  int n = lathe_part_groups(p, s->mesh, s->axes[a], s->n_axes[a], g, sizes), G = sizes[0];
  for (int q = 0; q < n; q++)
    for (int k = 0; k + 1 < G; k++) {
      int from = g[q * G + k], to = g[q * G + k + 1];
      pairs[2 * n_pairs] = forward ? from : to, pairs[2 * n_pairs + 1] = forward ? to : from, n_pairs++;
    }
  lathe_status_t st = lathe_part_permute(p, piece, pairs, n_pairs, out);
  free(g);
  LATHE_RETURN_IF_ERROR(st);
  if (!edge) return NULL;
  lathe_node *idx, *end, *at_end;
  LATHE_RETURN_IF_ERROR(lathe_part_shard_offset(p, s, a, 1, &idx));
  LATHE_RETURN_IF_ERROR(lathe_part_int_const(p, forward ? 0 : G - 1, &end));
  LATHE_RETURN_IF_ERROR(lathe_equal(p->fn, idx, end, &at_end));
  return lathe_where(p->fn, at_end, edge, *out, out);
}

/* v (local, split along axis a by s) extended with its halo: `left` elements of the previous
 * shard before it, `right` of the next after it (right < 0: its last -right dropped). */
static lathe_status_t halo(part *p, lathe_node *v, const spec *s, int a, int64_t left, int64_t right, lathe_node *edge,
                           lathe_node **out) {
  int r = v->shape.rank, n = 0;
  int64_t L = v->shape.dims[a], st[LATHE_MAX_RANK] = {0}, lim[LATHE_MAX_RANK];
  for (int d = 0; d < r; d++) lim[d] = v->shape.dims[d];
  lathe_node *pieces[3], *t;
  if (left > 0) {
    st[a] = L - left;
    LATHE_RETURN_IF_ERROR(lathe_slice(p->fn, v, st, lim, NULL, r, &t));
    LATHE_RETURN_IF_ERROR(shift(p, t, s, a, true, edge, &pieces[n++]));
  }
  st[a] = 0, lim[a] = right < 0 ? L + right : L;
  if (right < 0) LATHE_RETURN_IF_ERROR(lathe_slice(p->fn, v, st, lim, NULL, r, &v));
  pieces[n++] = v;
  if (right > 0) {
    lim[a] = right;
    LATHE_RETURN_IF_ERROR(lathe_slice(p->fn, v, st, lim, NULL, r, &t));
    LATHE_RETURN_IF_ERROR(shift(p, t, s, a, false, edge, &pieces[n++]));
  }
  if (n == 1) {
    *out = pieces[0];
    return NULL;
  }
  return lathe_concatenate(p->fn, a, (lathe_value_t const *)pieces, n, out);
}

/* A scalar constant v of dtype dt (through Float64: v must be exact there and in dt). */
static lathe_status_t scalar(part *p, double v, lathe_dtype dt, lathe_node **out) {
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = LATHE_DTYPE_FLOAT64;
  lathe_node *k;
  LATHE_RETURN_IF_ERROR(lathe_constant(p->fn, &s, &v, sizeof v, &k));
  return lathe_convert_dtype(p->fn, k, dt, out);
}

/* An operand extended with its halos, kept so that the convolutions of a training step that read
 * one value alike (its forward pass and its kernel gradient) exchange its halos once. */
struct part_halo {
  int id;                         /* the source value */
  spec s;                         /* its sharding */
  lathe_op edge;                  /* what the end shards get: a reduction's identity (SUM: zeros) */
  int64_t lr[2 * LATHE_MAX_RANK]; /* left and right halo per axis (0, 0: none) */
  int64_t dil[LATHE_MAX_RANK];    /* per axis: the shard dilated first (0, 1: not) */
  lathe_node *v;
};

/* Source value sn under sharding s (s's split axes a with lr[2a] or lr[2a + 1] nonzero) extended
 * with its halos, once per (value, sharding, halos, edge). */
static lathe_status_t halos_of(part *p, const lathe_node *sn, const spec *s, const int64_t *lr, const int64_t *dil,
                               lathe_op red, lathe_node *edge, lathe_node **out) {
  int r = sn->shape.rank;
  bool any = false;
  int64_t dl[LATHE_MAX_RANK];
  for (int a = 0; a < r; a++) dl[a] = dil && dil[a] > 1 ? dil[a] : 1, any |= dl[a] > 1;
  for (int a = 0; a < 2 * r; a++) any |= lr[a] != 0;
  if (!any) return lathe_part_get(p, sn, s, out); /* cached there already */
  for (int i = 0; i < p->n_halos; i++) {
    const struct part_halo *h = &p->halos[i];
    if (h->id == sn->id && h->edge == red && spec_eq(&h->s, s) && !memcmp(h->lr, lr, sizeof(int64_t) * 2 * (size_t)r) &&
        !memcmp(h->dil, dl, sizeof(int64_t) * (size_t)r)) {
      *out = h->v;
      return NULL;
    }
  }
  lathe_node *v;
  LATHE_RETURN_IF_ERROR(lathe_part_get(p, sn, s, &v));
  for (int a = 0; a < r; a++) {
    if (dl[a] <= 1) continue;
    lathe_node *zero;
    lathe_pad_axis pa[LATHE_MAX_RANK];
    memset(pa, 0, sizeof pa);
    pa[a].interior = pa[a].end = dl[a] - 1; /* the trailing holes keep the shards' dilated spans apart */
    LATHE_RETURN_IF_ERROR(scalar(p, 0, v->shape.dtype, &zero));
    LATHE_RETURN_IF_ERROR(lathe_pad(p->fn, v, zero, pa, r, &v));
  }
  for (int a = 0; a < r; a++)
    if (lr[2 * a] || lr[2 * a + 1]) LATHE_RETURN_IF_ERROR(halo(p, v, s, a, lr[2 * a], lr[2 * a + 1], edge, &v));
  if (p->n_halos == p->cap_halos) {
    int cap = p->cap_halos ? 2 * p->cap_halos : 8;
    struct part_halo *g = realloc(p->halos, sizeof *g * (size_t)cap);
    if (!g) return LATHE_OOM("Partition");
    p->halos = g, p->cap_halos = cap;
  }
  struct part_halo *h = &p->halos[p->n_halos++];
  memset(h, 0, sizeof *h);
  h->id = sn->id, h->s = *s, h->edge = red, h->v = v;
  memcpy(h->lr, lr, sizeof(int64_t) * 2 * (size_t)r);
  memcpy(h->dil, dl, sizeof(int64_t) * (size_t)r);
  *out = v;
  return NULL;
}

/* v (extended by its halos) cut to what this shard's windows read, along the axes whose plans
 * (plan[a], NULL: none) read from a shard-dependent offset; starts (rank entries) receives where
 * the cut starts (untouched, and *out = v, where no axis does). */
static lathe_status_t reads_of(part *p, lathe_node *v, const spec *s, const halo_plan *const *plan, lathe_node **starts,
                               lathe_node **out) {
  int r = v->shape.rank;
  int64_t sizes[LATHE_MAX_RANK];
  bool any = false;
  for (int a = 0; a < r; a++) any |= plan[a] && plan[a]->width > 0;
  if (!any) {
    *out = v;
    return NULL;
  }
  for (int a = 0; a < r; a++) {
    sizes[a] = v->shape.dims[a];
    if (!plan[a] || plan[a]->width <= 0) {
      LATHE_RETURN_IF_ERROR(lathe_part_int_const(p, 0, &starts[a]));
      continue;
    }
    lathe_node *base;
    LATHE_RETURN_IF_ERROR(lathe_part_shard_offset(p, s, a, plan[a]->step, &starts[a]));
    LATHE_RETURN_IF_ERROR(lathe_part_int_const(p, (int32_t)plan[a]->base, &base));
    LATHE_RETURN_IF_ERROR(lathe_add(p->fn, starts[a], base, &starts[a]));
    sizes[a] = plan[a]->width;
  }
  return lathe_dynamic_slice(p->fn, v, (lathe_value_t const *)starts, r, sizes, r, out);
}

/* The value ReduceWindow's padding takes (its reduction's identity) as a scalar of dtype dt, where
 * the zeros a shift gives the end shards are not it; *out NULL: zeros are. false: not built here
 * (8-bit floats and complex numbers under Max/Min, whose extremes are not infinities). With p
 * NULL it only answers. */
static bool window_edge(part *p, lathe_op red, lathe_dtype dt, lathe_node **out, lathe_status_t *st) {
  *out = NULL, *st = NULL;
  lathe_dtype_class c = lathe_dtype_class_of(dt);
  bool max = red == LATHE_OP_REDUCE_MAX, min = red == LATHE_OP_REDUCE_MIN;
  bool wide_float = dt == LATHE_DTYPE_FLOAT16 || dt == LATHE_DTYPE_BFLOAT16 || dt == LATHE_DTYPE_FLOAT32 ||
                    dt == LATHE_DTYPE_FLOAT64;
  if (red == LATHE_OP_REDUCE_SUM || (max && (c == LATHE_CLASS_BOOL || c == LATHE_CLASS_UINT))) return true;
  bool sint = c == LATHE_CLASS_SINT, uint = c == LATHE_CLASS_UINT, prod = red == LATHE_OP_REDUCE_PRODUCT;
  if (!(c == LATHE_CLASS_BOOL || prod || sint || uint || ((max || min) && wide_float))) return false;
  if (!p) return true;
  lathe_shape s;
  memset(&s, 0, sizeof s);
  if (c == LATHE_CLASS_BOOL) { /* Min: logical and */
    bool one = true;
    s.dtype = dt;
    *st = lathe_constant(p->fn, &s, &one, 1, out);
    return true;
  }
  if (!(sint || uint) || prod) { /* 1, or a float's infinity */
    *st = scalar(p, prod ? 1 : max ? -INFINITY : INFINITY, dt, out);
    return true;
  }
  int bits = lathe_dtype_bits(dt); /* integers' extremes, exact in 64 bits */
  uint64_t i = uint ? LATHE_UINT_MAX(bits) : max ? (uint64_t)LATHE_SINT_MIN(bits) : (uint64_t)LATHE_SINT_MAX(bits);
  s.dtype = uint ? LATHE_DTYPE_UINT64 : LATHE_DTYPE_INT64;
  lathe_node *k;
  *st = lathe_constant(p->fn, &s, &i, sizeof i, &k);
  if (!*st) *st = lathe_convert_dtype(p->fn, k, dt, out);
  return true;
}

/* ---- SelectAndScatter across shards ----
 * Its windows select among a halo like ReduceWindow's, but scatter into it too: each shard runs
 * the op on its extended operand and sends the parts of its result that fall on the halos back
 * to their owners, who add them (fold). The end shards' halos stand for padding, which the op
 * never selects: padding there must lose every comparison, a real infinity (or the extreme
 * integer) included, so the operand is widened first, its infinities becoming the wide type's
 * largest finite values, and the padding is the wide type's infinity (or extreme). */

/* The dtype a SelectAndScatter of dt widens to for a halo exchange; LATHE_DTYPE_INVALID: none
 * (Float64, 64-bit integers, 8-bit floats: the axis is gathered instead). */
static lathe_dtype sas_wide(const part *p, lathe_op op, lathe_dtype dt) {
  lathe_dtype w;
  switch (dt) {
    case LATHE_DTYPE_FLOAT16:
    case LATHE_DTYPE_BFLOAT16: w = LATHE_DTYPE_FLOAT32; break;
    case LATHE_DTYPE_FLOAT32: w = LATHE_DTYPE_FLOAT64; break;
    case LATHE_DTYPE_INT8: case LATHE_DTYPE_INT16: case LATHE_DTYPE_INT32:
    case LATHE_DTYPE_UINT8: case LATHE_DTYPE_UINT16: case LATHE_DTYPE_UINT32: w = LATHE_DTYPE_INT64; break;
    default: return LATHE_DTYPE_INVALID;
  }
  bool ok = (op == LATHE_OP_SELECT_AND_SCATTER_MAX || op == LATHE_OP_SELECT_AND_SCATTER_MIN) &&
            lathe_backend_supports_op(p->src->backend, op, w) && can_exchange(p, w);
  return ok ? w : LATHE_DTYPE_INVALID;
}

/* halo()'s inverse for results: v (axis a of left + L + right elements) folded to its L, the
 * first `left` added into the previous shard's last elements and the last `right` into the next
 * shard's first (the end shards receive zeros). */
static lathe_status_t fold(part *p, lathe_node *v, const spec *s, int a, int64_t left, int64_t right, lathe_node **out) {
  int r = v->shape.rank;
  int64_t E = v->shape.dims[a], L = E - left - right, st[LATHE_MAX_RANK] = {0}, lim[LATHE_MAX_RANK];
  for (int d = 0; d < r; d++) lim[d] = v->shape.dims[d];
  lathe_node *mid, *t, *zero;
  st[a] = left, lim[a] = left + L;
  LATHE_RETURN_IF_ERROR(lathe_slice(p->fn, v, st, lim, NULL, r, &mid));
  LATHE_RETURN_IF_ERROR(scalar(p, 0, v->shape.dtype, &zero));
  for (int side = 0; side < 2; side++) {
    int64_t k = side ? right : left;
    if (k <= 0) continue;
    st[a] = side ? left + L : 0, lim[a] = side ? E : left;
    LATHE_RETURN_IF_ERROR(lathe_slice(p->fn, v, st, lim, NULL, r, &t));
    /* the left part goes to the previous shard (added at its end), the right to the next */
    LATHE_RETURN_IF_ERROR(shift(p, t, s, a, side == 1, NULL, &t));
    lathe_pad_axis pa[LATHE_MAX_RANK];
    memset(pa, 0, sizeof pa);
    pa[a].start = side ? 0 : L - k, pa[a].end = side ? L - k : 0;
    LATHE_RETURN_IF_ERROR(lathe_pad(p->fn, t, zero, pa, r, &t));
    LATHE_RETURN_IF_ERROR(lathe_add(p->fn, mid, t, &mid));
  }
  *out = mid;
  return NULL;
}

/* SelectAndScatter sn with the operand's and source's split `in`, kept[a] the halo plan of each
 * split axis a (some with halos), through dtype wide. */
static lathe_status_t sas_exchange(part *p, const lathe_node *sn, const spec *in, const halo_plan *const *kept,
                                   lathe_dtype wide) {
  int r = sn->shape.rank;
  lathe_dtype dt = sn->shape.dtype;
  bool max = sn->op == LATHE_OP_SELECT_AND_SCATTER_MAX;
  lathe_node *x, *src, *edge, *v;
  LATHE_RETURN_IF_ERROR(lathe_part_get(p, sn->in[0], in, &x));
  LATHE_RETURN_IF_ERROR(lathe_part_get(p, sn->in[1], in, &src));
  LATHE_RETURN_IF_ERROR(lathe_convert_dtype(p->fn, x, wide, &x));
  if (lathe_dtype_class_of(dt) == LATHE_CLASS_FLOAT || lathe_dtype_class_of(dt) == LATHE_CLASS_HALF) {
    lathe_node *inf, *big, *is_inf;
    double top = wide == LATHE_DTYPE_FLOAT32 ? FLT_MAX : DBL_MAX;
    LATHE_RETURN_IF_ERROR(scalar(p, max ? -INFINITY : INFINITY, wide, &inf));
    LATHE_RETURN_IF_ERROR(scalar(p, max ? -top : top, wide, &big));
    LATHE_RETURN_IF_ERROR(lathe_equal(p->fn, x, inf, &is_inf));
    LATHE_RETURN_IF_ERROR(lathe_where(p->fn, is_inf, big, x, &x));
  }
  lathe_status_t es = NULL;
  window_edge(p, max ? LATHE_OP_REDUCE_MAX : LATHE_OP_REDUCE_MIN, wide, &edge, &es);
  LATHE_RETURN_IF_ERROR(es);
  lathe_ilist d = lathe_attr_window_dims(sn), st = lathe_attr_window_strides(sn), pd = lathe_attr_window_paddings(sn);
  lathe_padding pads[LATHE_MAX_RANK];
  for (int a = 0; a < r; a++) {
    pads[a].low = pd.v[2 * a], pads[a].high = pd.v[2 * a + 1];
    if (!kept[a]) continue;
    pads[a].low = kept[a]->lo, pads[a].high = kept[a]->hi;
    int64_t right = kept[a]->right > 0 ? kept[a]->right : 0; /* never reached: no cut */
    if (kept[a]->left > 0 || right > 0) LATHE_RETURN_IF_ERROR(halo(p, x, in, a, kept[a]->left, right, edge, &x));
  }
  /* "valid" windows read (and scatter into) a part of the extended operand that moves with the shard */
  lathe_node *ext = x, *starts[LATHE_MAX_RANK];
  LATHE_RETURN_IF_ERROR(reads_of(p, ext, in, kept, starts, &x));
  LATHE_RETURN_IF_ERROR(lathe_convert_dtype(p->fn, src, wide, &src));
  lathe_window_params wp = {.window_dims = d.v, .n_window_dims = r, .strides = st.v, .n_strides = r, .paddings = pads,
                            .n_paddings = r};
  LATHE_RETURN_IF_ERROR(lathe_select_and_scatter(p->fn, sn->op, x, src, &wp, &v));
  if (x != ext) { /* written back where it was read, zeros around it */
    lathe_node *zero;
    LATHE_RETURN_IF_ERROR(scalar(p, 0, wide, &zero));
    LATHE_RETURN_IF_ERROR(lathe_broadcast_in_dim(p->fn, zero, &ext->shape, NULL, 0, &zero));
    LATHE_RETURN_IF_ERROR(lathe_dynamic_update_slice(p->fn, zero, v, (lathe_value_t const *)starts, r, &v));
  }
  for (int a = r - 1; a >= 0; a--) /* the corners travel twice, like the halos that brought them */
    if (kept[a] && (kept[a]->left > 0 || kept[a]->right > 0))
      LATHE_RETURN_IF_ERROR(fold(p, v, in, a, kept[a]->left, kept[a]->right > 0 ? kept[a]->right : 0, &v));
  LATHE_RETURN_IF_ERROR(lathe_convert_dtype(p->fn, v, dt, &v));
  lathe_part_set(p, sn, v, in);
  return NULL;
}

/* v's padding list: the node's, with the pairs where plan[] is set replaced by their local
 * padding (pair i of the list: input spatial axis i of a convolution, axis i of a window op). */
static lathe_status_t repad(lathe_node *v, lathe_ilist pad, const halo_plan *const *plan, bool conv) {
  int64_t pads[2 * LATHE_MAX_RANK];
  for (int i = 0; i < pad.n && i < 2 * LATHE_MAX_RANK; i++)
    pads[i] = !plan[i / 2] ? pad.v[i] : i % 2 ? plan[i / 2]->hi : plan[i / 2]->lo;
  return conv ? lathe_attr_set_conv_general_paddings(v, pads, pad.n) : lathe_attr_set_window_paddings(v, pads, pad.n);
}

/* ConvGeneral: the input's batch split and the kernel's output-channel split carry to the result's
 * batch and channel axes; input channels split alike on both sides give partial sums. A split
 * spatial axis keeps its split on the result, with a halo from the neighbouring shards, where
 * halo_fits ("same" padding of any stride, a strided convolution's input gradient), or gives
 * partial sums where the kernel's taps are split alike (taps_fit: the kernel gradient); else it is
 * gathered. With channel groups the channel splits are not kept; batch groups gather everything. */
lathe_status_t lathe_part_rule_conv(part *p, const lathe_node *sn) {
  if (lathe_attr_conv_general_batch_group_count(sn) > 1) return lathe_part_fallback(p, sn);
  const lathe_node *x = sn->in[0], *k = sn->in[1];
  const spec *X = own(p, x->id), *K = own(p, k->id);
  int ib = (int)lathe_attr_conv_general_input_batch(sn), ic = (int)lathe_attr_conv_general_input_channels(sn);
  int kic = (int)lathe_attr_conv_general_kernel_input_channels(sn), koc = (int)lathe_attr_conv_general_kernel_output_channels(sn);
  int ob = (int)lathe_attr_conv_general_output_batch(sn), oc = (int)lathe_attr_conv_general_output_channels(sn);
  lathe_ilist isp = lathe_attr_conv_general_input_spatial(sn), ksp = lathe_attr_conv_general_kernel_spatial(sn);
  lathe_ilist osp = lathe_attr_conv_general_output_spatial(sn), str = lathe_attr_conv_general_strides(sn);
  lathe_ilist pad = lathe_attr_conv_general_paddings(sn), idl = lathe_attr_conv_general_input_dilations(sn);
  lathe_ilist kdl = lathe_attr_conv_general_kernel_dilations(sn);
  bool grouped = lathe_attr_conv_general_channel_group_count(sn) > 1;
  spec nx = replicated_spec(x->shape.rank), nk = replicated_spec(k->shape.rank), rs = replicated_spec(sn->shape.rank);
  spec used = replicated_spec(LATHE_MAX_RANK);
  int slot = 0, ax[LATHE_MAX_MESH_RANK], n_ax = 0;
  if (!grouped && X->n_axes[ic] && axis_eq(X, ic, K, kic) && try_copy_axis(&used, slot, X, ic)) {
    copy_axis(&nx, ic, X, ic), copy_axis(&nk, kic, X, ic), slot++;
    for (int q = 0; q < X->n_axes[ic]; q++) ax[n_ax++] = X->axes[ic][q];
  }
  if (X->n_axes[ib] && try_copy_axis(&used, slot, X, ib)) copy_axis(&nx, ib, X, ib), copy_axis(&rs, ob, X, ib), slot++;
  halo_plan plan[LATHE_MAX_RANK];
  const halo_plan *at[LATHE_MAX_RANK] = {NULL}; /* per spatial axis: its plan, where kept split */
  for (int i = 0; i < isp.n && slot < LATHE_MAX_RANK; i++) {
    int ia = (int)isp.v[i], ka = (int)ksp.v[i], oa = (int)osp.v[i];
    if (!X->n_axes[ia]) continue;
    int64_t n = parts(p, X, ia), taps = k->shape.dims[ka];
    slide w = {x->shape.dims[ia], (taps - 1) * kdl.v[i] + 1, str.v[i], pad.v[2 * i], pad.v[2 * i + 1], idl.v[i],
               sn->shape.dims[oa]};
    bool summed = axis_eq(X, ia, K, ka);
    halo_plan *h = &plan[i];
    if (!(summed ? taps_fit(&w, taps, kdl.v[i], n, h) : window_fits(&w, n, true, h)) ||
        ((h->left > 0 || h->right > 0) && !can_exchange(p, x->shape.dtype)) || !try_copy_axis(&used, slot, X, ia))
      continue;
    copy_axis(&nx, ia, X, ia), slot++, at[i] = h;
    if (summed) {
      copy_axis(&nk, ka, X, ia);
      for (int q = 0; q < X->n_axes[ia]; q++) ax[n_ax++] = X->axes[ia][q];
    } else {
      copy_axis(&rs, oa, X, ia);
    }
  }
  if (!grouped && K->n_axes[koc] && slot < LATHE_MAX_RANK && try_copy_axis(&used, slot, K, koc))
    copy_axis(&nk, koc, K, koc), copy_axis(&rs, oc, K, koc), slot++;
  lathe_node *ops[2], *v;
  int64_t lr[2 * LATHE_MAX_RANK] = {0};
  const halo_plan *by_axis[LATHE_MAX_RANK] = {NULL};
  for (int i = 0; i < isp.n; i++)
    if (at[i]) lr[2 * isp.v[i]] = at[i]->left, lr[2 * isp.v[i] + 1] = at[i]->right, by_axis[isp.v[i]] = at[i];
  int64_t dil[LATHE_MAX_RANK] = {0};
  for (int a = 0; a < x->shape.rank; a++) dil[a] = by_axis[a] ? by_axis[a]->dil : 0;
  LATHE_RETURN_IF_ERROR(halos_of(p, x, &nx, lr, dil, LATHE_OP_REDUCE_SUM, NULL, &ops[0]));
  lathe_node *starts[LATHE_MAX_RANK];
  LATHE_RETURN_IF_ERROR(reads_of(p, ops[0], &nx, by_axis, starts, &ops[0]));
  LATHE_RETURN_IF_ERROR(lathe_part_get(p, k, &nk, &ops[1]));
  LATHE_RETURN_IF_ERROR(lathe_part_emit_ops(p, sn, ops, &rs, &v));
  LATHE_RETURN_IF_ERROR(repad(v, pad, at, true));
  int64_t idv[LATHE_MAX_RANK];
  for (int i = 0; i < idl.n && i < LATHE_MAX_RANK; i++) idv[i] = at[i] && at[i]->dil > 1 ? 1 : idl.v[i];
  LATHE_RETURN_IF_ERROR(lathe_attr_set_conv_general_input_dilations(v, idv, idl.n));
  if (n_ax) return lathe_part_combine(p, sn, v, rs, LATHE_OP_REDUCE_SUM, X->mesh, ax, n_ax);
  lathe_part_set(p, sn, v, &rs);
  return NULL;
}

/* ReduceWindow (every reduction) and SelectAndScatter: a split axis keeps its split where
 * halo_fits -- an axis whose window is one element (a CNN's batch and channels under pooling),
 * windows that tile their shard (a 2x2 max pool of stride 2: no communication), or windows that
 * overlap their neighbours' shards ("same" pooling: a halo, the end shards getting the
 * reduction's identity; SelectAndScatter also folds its result's halos back, sas_exchange) --;
 * the other axes are gathered. The split is the operand's, else SelectAndScatter's source's,
 * else the consumers'. */
lathe_status_t lathe_part_rule_window(part *p, const lathe_node *sn) {
  int r = sn->in[0]->shape.rank;
  lathe_ilist d = lathe_attr_window_dims(sn), st = lathe_attr_window_strides(sn), pd = lathe_attr_window_paddings(sn);
  lathe_ilist id = lathe_attr_window_input_dilations(sn), wd = lathe_attr_window_window_dilations(sn);
  if (d.n != r || st.n != r || id.n != r || wd.n != r || pd.n != 2 * r || sn->shape.rank != r)
    return LATHE_INVALID("%s: window attributes (%d dims, %d strides, %d paddings) do not fit an operand of rank %d",
                         lathe_op_name(sn->op), d.n, st.n, pd.n / 2, r);
  const lathe_node *x = sn->in[0];
  bool sas = sn->op != LATHE_OP_REDUCE_WINDOW;
  lathe_op red = sas ? LATHE_OP_REDUCE_SUM : lathe_attr_window_reduction(sn);
  const int64_t *out = sas ? sn->in[1]->shape.dims : sn->shape.dims;
  lathe_node *edge = NULL;
  lathe_status_t es = NULL;
  bool has_edge = !sas && window_edge(NULL, red, x->shape.dtype, &edge, &es), exchange = false;
  lathe_dtype wide = sas ? sas_wide(p, sn->op, x->shape.dtype) : LATHE_DTYPE_INVALID;
  halo_plan plan[LATHE_MAX_RANK];
  spec in = replicated_spec(r);
  for (int c = 0; c <= sn->n_operands && replicated(&in); c++) {
    if (c == sn->n_operands && !p->hinted[sn->id]) break;
    in = c < sn->n_operands ? *own(p, sn->in[c]->id) : p->hint[sn->id];
    for (int a = 0; a < r; a++) {
      slide w = {x->shape.dims[a], (d.v[a] - 1) * wd.v[a] + 1, st.v[a], pd.v[2 * a], pd.v[2 * a + 1], id.v[a], out[a]};
      const halo_plan *h = &plan[a];
      if (!in.n_axes[a] || (window_fits(&w, parts(p, &in, a), false, &plan[a]) &&
                            (h->left <= 0 && h->right <= 0 && !(sas && h->width > 0) ? true
                             : sas                         ? wide != LATHE_DTYPE_INVALID
                                                           : has_edge && can_exchange(p, x->shape.dtype))))
        continue;
      clear_axis(&in, a);
    }
  }
  if (replicated(&in)) return lathe_part_fallback(p, sn);
  lathe_node *ops[2], *v;
  const halo_plan *kept[LATHE_MAX_RANK] = {NULL};
  int64_t lr[2 * LATHE_MAX_RANK] = {0};
  for (int a = 0; a < r; a++) {
    if (!in.n_axes[a]) continue;
    kept[a] = &plan[a];
    exchange |= plan[a].left > 0 || plan[a].right > 0 || (sas && plan[a].width > 0);
    /* SelectAndScatter's windows never reach its last -right elements: no cut, its result keeps them */
    if (!sas) lr[2 * a] = plan[a].left, lr[2 * a + 1] = plan[a].right;
  }
  if (sas && exchange) return sas_exchange(p, sn, &in, kept, wide);
  if (exchange && window_edge(p, red, x->shape.dtype, &edge, &es)) LATHE_RETURN_IF_ERROR(es);
  LATHE_RETURN_IF_ERROR(halos_of(p, x, &in, lr, NULL, red, edge, &ops[0]));
  lathe_node *starts[LATHE_MAX_RANK];
  LATHE_RETURN_IF_ERROR(reads_of(p, ops[0], &in, kept, starts, &ops[0]));
  if (sas) LATHE_RETURN_IF_ERROR(lathe_part_get(p, sn->in[1], &in, &ops[1]));
  LATHE_RETURN_IF_ERROR(lathe_part_emit_ops(p, sn, ops, &in, &v));
  LATHE_RETURN_IF_ERROR(repad(v, pd, kept, false));
  lathe_part_set(p, sn, v, &in);
  return NULL;
}
