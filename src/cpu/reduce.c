/* reduce.c -- the REDUCE family on the CPU: Reduce{Sum,Product,Max,Min}, ReduceBitwise{And,Or,Xor},
 * ReduceLogical{And,Or,Xor} and ArgMinMax.
 *
 * A reduction first collapses the operand's axes into alternating groups of kept and reduced
 * axes (size-1 axes dropped, neighbours of the same kind merged), then walks the operand in
 * memory order, combining each element into an accumulator at its output position. The
 * innermost group is a contiguous run: a kept run combines element-wise into a run of
 * accumulators (vectorisable), a reduced run folds into one accumulator. Threads split the
 * first kept group, whose output range is contiguous; a full reduction splits its one run into
 * parts fixed by the size alone, so results do not depend on the thread count.
 *
 * The kernels (reduce_kernels.h, one instance per ISA) are instantiated per (dtype, op) from
 * lathe_dtypes.def. Integers wrap (arithmetic is done unsigned); Float16/BFloat16 accumulate in
 * float; Max/Min propagate NaN. */
#include "kernels.h"

enum { MAX_PARTS = 64, PART_MIN = 1 << 15 };

static int column_of(lathe_op op) {
  switch (op) {
    case LATHE_OP_REDUCE_SUM: return LATHE_RED_SUM;
    case LATHE_OP_REDUCE_PRODUCT: return LATHE_RED_PROD;
    case LATHE_OP_REDUCE_MAX: return LATHE_RED_MAX;
    case LATHE_OP_REDUCE_MIN: return LATHE_RED_MIN;
    case LATHE_OP_REDUCE_BITWISE_AND: return LATHE_RED_AND;
    case LATHE_OP_REDUCE_BITWISE_OR: return LATHE_RED_OR;
    case LATHE_OP_REDUCE_BITWISE_XOR: return LATHE_RED_XOR;
    case LATHE_OP_REDUCE_LOGICAL_AND: return LATHE_RED_LAND;
    case LATHE_OP_REDUCE_LOGICAL_OR: return LATHE_RED_LOR;
    case LATHE_OP_REDUCE_LOGICAL_XOR: return LATHE_RED_LXOR;
    default: return -1;
  }
}

/* The kernel for (op, dtype) in table k, or NULL. */
static const lathe_red_kernel *kernel_for(const lathe_cpu_kernels *k, lathe_op op, lathe_dtype dt) {
  int c = column_of(op);
  if (c < 0 || (int)dt <= 0 || dt >= LATHE_DTYPE_LIMIT) return NULL;
  return k->red[dt][c];
}

static bool is_byte_int(lathe_dtype dt) { return lathe_dtype_is_int(dt) && !lathe_dtype_is_packed(dt); }

/* Writes index v as element i of an integer tensor of dtype dt (byte-sized; wraps). */
static void store_index(void *data, lathe_dtype dt, int64_t i, int64_t v) {
  switch (lathe_dtype_bits(dt)) {
    case 8: ((uint8_t *)data)[i] = (uint8_t)v; break;
    case 16: ((uint16_t *)data)[i] = (uint16_t)v; break;
    case 32: ((uint32_t *)data)[i] = (uint32_t)v; break;
    default: ((uint64_t *)data)[i] = (uint64_t)v; break;
  }
}

static lathe_status_t run_arg_min_max(lathe_cpu_exec *ex, const lathe_node *n, const lathe_tensor *x, lathe_tensor *out) {
  int axis = (int)lathe_attr_arg_min_max_axis(n);
  lathe_arg_job j = {.pre = 1, .post = 1, .len = x->shape.dims[axis], .in = x->data};
  j.is_min = lathe_attr_arg_min_max_is_min(n);
  for (int a = 0; a < axis; a++) j.pre *= x->shape.dims[a];
  for (int a = axis + 1; a < x->shape.rank; a++) j.post *= x->shape.dims[a];
  int64_t m = j.pre * j.post;
  if (!m) return NULL;
  lathe_range_fn fn = lathe_cpu_exec_kernels(ex)->arg[x->shape.dtype];
  if (!fn) return LATHE_UNIMPL("ArgMinMax: not implemented on lathe:cpu for %s", lathe_dtype_name(x->shape.dtype));
  lathe_dtype odt = out->shape.dtype;
  /* Int64 results are written in place; narrower ones go through a scratch array. */
  j.idx = odt == LATHE_DTYPE_INT64 || odt == LATHE_DTYPE_UINT64 ? out->data : malloc(sizeof(int64_t) * (size_t)m);
  if (!j.idx) return LATHE_OOM("ArgMinMax");
  int64_t tiles = (j.post + LATHE_ARG_TILE - 1) / LATHE_ARG_TILE, per_item = j.len * (j.post < LATHE_ARG_TILE ? j.post : LATHE_ARG_TILE);
  lathe_parallel_for(lathe_cpu_exec_pool(ex), j.pre * tiles, 32768 / (per_item ? per_item : 1) + 1, fn, &j);
  if ((void *)j.idx != out->data) {
    for (int64_t i = 0; i < m; i++) store_index(out->data, odt, i, j.idx[i]);
    free(j.idx);
  }
  return NULL;
}

/* ---- the family entry points ---- */
bool lathe_cpu_supports_reduce(lathe_op op, lathe_dtype dtype) {
  if (!lathe_dtype_is_valid(dtype)) return false;
  const lathe_cpu_kernels *k = lathe_cpu_kernels_of(LATHE_CPU_ISA_BASELINE);
  if (op == LATHE_OP_ARG_MIN_MAX) return k->arg[dtype] != NULL;
  return kernel_for(k, op, dtype) != NULL;
}

static lathe_status_t run_reduce(lathe_cpu_exec *ex, const lathe_node *n, const lathe_tensor *x, lathe_tensor *out) {
  const lathe_shape *xs = &x->shape;
  const lathe_red_kernel *k = kernel_for(lathe_cpu_exec_kernels(ex), n->op, xs->dtype);
  if (!k) return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(xs->dtype));
  int64_t on = lathe_shape_size(&out->shape), xn = lathe_shape_size(xs);
  if (!on) return NULL;
  lathe_red_job j = {.in = x->data, .out = out->data, .p = -1};
  if (!xn) {
    k->fill(&j, on);
    /* Sub-byte integers run widened to 8 bits: Max/Min identities are those of the narrow type. */
    lathe_dtype orig = n->in[0]->shape.dtype;
    if (lathe_dtype_is_packed(orig) && (n->op == LATHE_OP_REDUCE_MAX || n->op == LATHE_OP_REDUCE_MIN)) {
      int bits = lathe_dtype_bits(orig);
      bool sint = lathe_dtype_class_of(orig) == LATHE_CLASS_SINT;
      int64_t v = n->op == LATHE_OP_REDUCE_MAX ? (sint ? LATHE_SINT_MIN(bits) : 0)
                                               : (sint ? LATHE_SINT_MAX(bits) : (int64_t)LATHE_UINT_MAX(bits));
      memset(out->data, (int)(v & 0xff), (size_t)on);
    }
    return NULL;
  }
  /* Collapse: drop size-1 axes, merge neighbours of the same kind. */
  bool red[LATHE_MAX_RANK] = {false};
  lathe_ilist axes = lathe_attr_reduce_axes(n);
  for (int i = 0; i < axes.n; i++) red[axes.v[i]] = true;
  for (int a = 0; a < xs->rank; a++) {
    if (xs->dims[a] == 1) continue;
    if (j.g && j.red[j.g - 1] == red[a]) {
      j.dims[j.g - 1] *= xs->dims[a];
    } else {
      j.dims[j.g] = xs->dims[a];
      j.red[j.g++] = red[a];
    }
  }
  if (j.g == 0 || (j.g == 1 && !j.red[0])) { /* nothing is reduced: a copy */
    memcpy(out->data, x->data, out->nbytes);
    return NULL;
  }
  int64_t is = 1, os = 1;
  for (int g = j.g - 1; g >= 0; g--) {
    j.is[g] = is;
    is *= j.dims[g];
    j.os[g] = j.red[g] ? 0 : os;
    if (!j.red[g]) os *= j.dims[g];
  }
  for (int g = 0; g < j.g && j.p < 0; g++)
    if (!j.red[g]) j.p = g;
  lathe_pool *pool = lathe_cpu_exec_pool(ex);
  if (j.p < 0) { /* a full reduction of one contiguous run */
    _Alignas(16) unsigned char partials[MAX_PARTS * 16];
    j.parts = xn / PART_MIN < 1 ? 1 : xn / PART_MIN > MAX_PARTS ? MAX_PARTS : xn / PART_MIN;
    j.partials = partials;
    lathe_parallel_for(pool, j.parts, 1, k->part, &j);
    k->finish(&j);
    return NULL;
  }
  bool own_acc = k->acc_size != (size_t)(lathe_dtype_bits(out->shape.dtype) / 8);
  j.acc = own_acc ? malloc(k->acc_size * (size_t)on) : out->data;
  if (!j.acc) return LATHE_OOM(lathe_op_name(n->op));
  int64_t work_per = xn / j.dims[j.p], grain = 32768 / (work_per ? work_per : 1) + 1;
  if (j.p == j.g - 1) {
    /* The split group is the contiguous kept run (a sum over leading axes, such as a bias
     * gradient): every chunk walks all the reduced rows, so chunks take whole cache lines of each
     * row and there are at most as many as threads, or the rows are read once per chunk. */
    int64_t line = 64 / (lathe_dtype_bits(xs->dtype) / 8 ? lathe_dtype_bits(xs->dtype) / 8 : 1);
    int threads = lathe_pool_threads(pool);
    int64_t per = (j.dims[j.p] + threads - 1) / threads;
    per = (per + line - 1) / line * line;
    if (grain < per) grain = per;
  }
  lathe_parallel_for(pool, j.dims[j.p], grain, k->chunk, &j);
  if (own_acc) free(j.acc);
  return NULL;
}

lathe_status_t lathe_cpu_run_reduce(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  if (n->op == LATHE_OP_ARG_MIN_MAX) {
    if (!is_byte_int(out[0]->shape.dtype))
      return LATHE_UNIMPL("ArgMinMax: output dtype %s not implemented on lathe:cpu", lathe_dtype_name(out[0]->shape.dtype));
    return run_arg_min_max(ex, n, in[0], out[0]);
  }
  return run_reduce(ex, n, in[0], out[0]);
}
