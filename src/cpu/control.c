/* control.c -- Sort on the CPU; Call, While and If are the executor's (src/exec/control.c).
 *
 * These kernels run sub-functions through lathe_cpu_exec_call and set each out[k] to a tensor
 * they own a reference to (the executor does not pre-allocate results of CONTROL nodes).
 * Sub-byte dtypes arrive packed (CONTROL ops are not widened), so Sort moves elements with the
 * packed helpers of cpu.h.
 *
 * Sort has two paths that must agree:
 *  - the comparator path (the reference): a stable merge sort over indices that evaluates the
 *    comparator closure per comparison, reusing 2n scalar input tensors;
 *  - the native path, taken when the comparator is exactly LessThan / GreaterThan (or their
 *    TotalOrder forms) of its first two parameters: keys are mapped to uint64 so that unsigned
 *    order is the requested order, then sorted stably, rows in parallel. Plain LessThan treats
 *    every NaN as larger than +Inf and -0 as equal to +0 (NaNs last ascending, first
 *    descending, like jnp.sort); the TotalOrder forms order -NaN < -Inf < ... < -0 < +0 < ...
 *    < +Inf < +NaN. (A plain LessThan comparator leaves NaNs unordered, so the comparator path
 *    may place them anywhere; the native path picks this one deterministic placement.) */
#include <stdatomic.h>

#include "cpu.h"
#include "exec.h"

bool lathe_cpu_supports_control(lathe_op op, lathe_dtype dtype) {
  switch (op) {
    case LATHE_OP_CALL:
    case LATHE_OP_WHILE:
    case LATHE_OP_IF:
    case LATHE_OP_SORT:
      return lathe_dtype_is_valid(dtype);
    default:
      return false;
  }
}

static bool read_bool(const lathe_tensor *t) { return ((const uint8_t *)t->data)[0] != 0; }

/* ---- Sort: shared pieces ---- */

/* A stable bottom-up merge sort of a[0..n) with scratch tmp[0..n). LESS(ctx, x, y) is true when
 * x goes strictly before y; runs of SORT_RUN are insertion-sorted first, and merges of halves
 * that are already in order are skipped (this saves comparator calls on sorted data). */
#define SORT_RUN 16
#define DEFINE_MERGE_SORT(name, T, CTX, LESS)                                                \
  static void name(T *a, T *tmp, int64_t n, CTX ctx) {                                       \
    for (int64_t s = 0; s < n; s += SORT_RUN) {                                              \
      int64_t e = s + SORT_RUN < n ? s + SORT_RUN : n;                                       \
      for (int64_t i = s + 1; i < e; i++) {                                                  \
        T x = a[i];                                                                          \
        int64_t j = i;                                                                       \
        for (; j > s && LESS(ctx, x, a[j - 1]); j--) a[j] = a[j - 1];                        \
        a[j] = x;                                                                            \
      }                                                                                      \
    }                                                                                        \
    T *src = a, *dst = tmp;                                                                  \
    for (int64_t w = SORT_RUN; w < n; w *= 2) {                                              \
      for (int64_t lo = 0; lo < n; lo += 2 * w) {                                            \
        int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;         \
        int64_t i = lo, j = mid, k = lo;                                                     \
        if (mid < hi && LESS(ctx, src[mid], src[mid - 1]))                                   \
          while (i < mid && j < hi) dst[k++] = LESS(ctx, src[j], src[i]) ? src[j++] : src[i++]; \
        while (i < mid) dst[k++] = src[i++];                                                 \
        while (j < hi) dst[k++] = src[j++];                                                  \
      }                                                                                      \
      T *t = src;                                                                            \
      src = dst;                                                                             \
      dst = t;                                                                               \
    }                                                                                        \
    if (src != a) memcpy(a, src, sizeof(T) * (size_t)n);                                     \
  }

/* Element i of a row starting at base with stride inner. */
static inline int64_t row_elem(int64_t base, int64_t inner, int64_t k) { return base + k * inner; }

/* dst's row at base receives src's row permuted: dst[k] = src[perm[k]]. */
#define PERMUTE_AS(T)                                                                     \
  do {                                                                                    \
    const T *s_ = src->data;                                                              \
    T *d_ = dst->data;                                                                    \
    for (int64_t k = 0; k < m; k++) d_[row_elem(base, inner, k)] = s_[row_elem(base, inner, perm[k])]; \
  } while (0)
static void permute_row(lathe_tensor *dst, const lathe_tensor *src, int64_t base, int64_t inner, const int64_t *perm,
                        int64_t m) {
  lathe_dtype dt = src->shape.dtype;
  switch (lathe_dtype_bits(dt)) {
    case 8: PERMUTE_AS(uint8_t); break;
    case 16: PERMUTE_AS(uint16_t); break;
    case 32: PERMUTE_AS(uint32_t); break;
    case 64: PERMUTE_AS(uint64_t); break;
    case 128: PERMUTE_AS(lathe_c128); break;
    default: /* packed */
      for (int64_t k = 0; k < m; k++)
        lathe_store_packed(dst->data, dt, row_elem(base, inner, k),
                           lathe_load_packed(src->data, dt, row_elem(base, inner, perm[k])));
  }
}
#undef PERMUTE_AS

/* Copies element si of src into element di of dst (same dtype). */
static void copy_elem(void *dst, int64_t di, const void *src, int64_t si, lathe_dtype dt) {
  int bits = lathe_dtype_bits(dt);
  if (bits < 8) {
    lathe_store_packed(dst, dt, di, lathe_load_packed(src, dt, si));
    return;
  }
  size_t b = (size_t)bits / 8;
  memcpy((uint8_t *)dst + (size_t)di * b, (const uint8_t *)src + (size_t)si * b, b);
}

/* ---- Sort: the native path ---- */

typedef struct sort_item {
  uint64_t key;
  int64_t idx;
} sort_item;

#define ITEM_LESS(ctx, x, y) ((x).key < (y).key)
DEFINE_MERGE_SORT(merge_sort_items, sort_item, const void *, ITEM_LESS)

/* Long rows: a stable LSD radix sort by bytes of the key. One pass counts every byte; bytes on
 * which all keys agree (the high bytes of narrow ints, the zero low bytes of widened floats)
 * cost no pass. */
enum { RADIX_MIN = 512 };
static void sort_items(sort_item *a, sort_item *tmp, int64_t n) {
  if (n < RADIX_MIN) {
    merge_sort_items(a, tmp, n, NULL);
    return;
  }
  int64_t count[8][256];
  memset(count, 0, sizeof count);
  for (int64_t i = 0; i < n; i++)
    for (int d = 0; d < 8; d++) count[d][(a[i].key >> (8 * d)) & 255]++;
  sort_item *src = a, *dst = tmp;
  for (int d = 0; d < 8; d++) {
    if (count[d][(a[0].key >> (8 * d)) & 255] == n) continue;
    int64_t pos[256], sum = 0;
    for (int v = 0; v < 256; v++) pos[v] = sum, sum += count[d][v];
    for (int64_t i = 0; i < n; i++) dst[pos[(src[i].key >> (8 * d)) & 255]++] = src[i];
    sort_item *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, sizeof(sort_item) * (size_t)n);
}

/* Maps a real value to a key whose unsigned order is IEEE totalOrder; without total, NaNs
 * become one +NaN (after +Inf) and -0 becomes +0 first. Doubles hold every float type exactly. */
static inline uint64_t float_key(double d, bool total) {
  uint64_t b;
  if (!total && d != d) b = 0x7ff8000000000000ull;
  else {
    if (!total && d == 0) d = 0.0;
    memcpy(&b, &d, sizeof b);
  }
  return (b >> 63) ? ~b : b | (1ull << 63);
}
static inline uint64_t sint_key(int64_t v) { return (uint64_t)v ^ (1ull << 63); }

#define HALF_TO_F32_FLOAT16 lathe_f16_to_f32
#define HALF_TO_F32_BFLOAT16 lathe_bf16_to_f32
#define KEY_BOOL(ENUM, T, bits, p, i, total) ((uint64_t)((const uint8_t *)(p))[i])
#define KEY_SINT(ENUM, T, bits, p, i, total) \
  sint_key((bits) < 8 ? lathe_load_packed(p, LATHE_DTYPE_##ENUM, i) : (int64_t)((const T *)(p))[i])
#define KEY_UINT(ENUM, T, bits, p, i, total) \
  ((bits) < 8 ? (uint64_t)lathe_load_packed(p, LATHE_DTYPE_##ENUM, i) : (uint64_t)((const T *)(p))[i])
#define KEY_FLOAT(ENUM, T, bits, p, i, total) float_key((double)((const T *)(p))[i], total)
#define KEY_HALF(ENUM, T, bits, p, i, total) float_key((double)HALF_TO_F32_##ENUM(((const uint16_t *)(p))[i]), total)
#define KEY_COMPLEX(ENUM, T, bits, p, i, total) ((void)(p), (void)(i), 0ull) /* complex takes the comparator path */

/* keys_<DTYPE>: fills it[k] = {key of row element k (xor flip), k}. */
typedef void (*keys_fn)(const void *p, int64_t base, int64_t inner, int64_t m, bool total, uint64_t flip, sort_item *it);
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS)                                            \
  static void keys_##ENUM(const void *p, int64_t base, int64_t inner, int64_t m, bool total, uint64_t flip,    \
                          sort_item *it) {                                                               \
    for (int64_t k = 0; k < m; k++) {                                                                    \
      int64_t i = row_elem(base, inner, k);                                                              \
      it[k].key = KEY_##CLASS(ENUM, compute_t, bits, p, i, total) ^ flip;                                \
      it[k].idx = k;                                                                                     \
    }                                                                                                    \
  }
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

static keys_fn keys_for(lathe_dtype dt) {
  switch (dt) {
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) \
  case LATHE_DTYPE_##ENUM: return LATHE_CLASS_##CLASS == LATHE_CLASS_COMPLEX ? NULL : keys_##ENUM;
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
    default: return NULL;
  }
}

typedef struct native_ctx {
  lathe_tensor *const *in;
  lathe_tensor **out;
  int n_in;
  int64_t m, inner;
  keys_fn keys;
  bool total;
  uint64_t flip;
  atomic_int failed;
} native_ctx;

static void native_rows(void *vctx, int64_t r0, int64_t r1) {
  native_ctx *c = vctx;
  int64_t m = c->m, inner = c->inner;
  sort_item *it = malloc(sizeof(sort_item) * 2 * (size_t)m);
  int64_t *perm = malloc(sizeof(int64_t) * (size_t)m);
  if (!it || !perm) {
    atomic_store(&c->failed, 1);
  } else {
    for (int64_t r = r0; r < r1; r++) {
      int64_t base = (r / inner) * m * inner + r % inner;
      c->keys(c->in[0]->data, base, inner, m, c->total, c->flip, it);
      sort_items(it, it + m, m);
      for (int64_t k = 0; k < m; k++) perm[k] = it[k].idx;
      for (int t = 0; t < c->n_in; t++) permute_row(c->out[t], c->in[t], base, inner, perm, m);
    }
  }
  free(it);
  free(perm);
}

/* ---- Sort: the comparator path ---- */

typedef struct cmp_ctx {
  lathe_cpu_exec *ex;
  const lathe_function *fn;
  lathe_tensor *const *in;
  int n_in;
  lathe_tensor **scalars; /* lhs_0, rhs_0, lhs_1, rhs_1, ... */
  int64_t base, inner;
  lathe_status_t st; /* the first comparator failure; later comparisons are skipped */
} cmp_ctx;

static bool cmp_less(cmp_ctx *c, int64_t a, int64_t b) {
  if (c->st) return false;
  for (int t = 0; t < c->n_in; t++) {
    lathe_dtype dt = c->in[t]->shape.dtype;
    copy_elem(c->scalars[2 * t]->data, 0, c->in[t]->data, row_elem(c->base, c->inner, a), dt);
    copy_elem(c->scalars[2 * t + 1]->data, 0, c->in[t]->data, row_elem(c->base, c->inner, b), dt);
  }
  lathe_tensor *r = NULL;
  if ((c->st = lathe_cpu_exec_call(c->ex, c->fn, c->scalars, 2 * c->n_in, &r))) return false;
  bool v = read_bool(r);
  lathe_tensor_release(r);
  return v;
}

#define IDX_LESS(ctx, x, y) cmp_less(ctx, x, y)
DEFINE_MERGE_SORT(sort_indices, int64_t, cmp_ctx *, IDX_LESS)

static lathe_status_t sort_with_comparator(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                           lathe_tensor **out, int64_t rows, int64_t m, int64_t inner) {
  int ni = n->n_operands;
  cmp_ctx c = {.ex = ex, .fn = lathe_attr_sort_comparator(n), .in = in, .n_in = ni, .inner = inner};
  c.scalars = calloc(2 * (size_t)ni, sizeof *c.scalars);
  int64_t *idx = malloc(sizeof(int64_t) * 2 * (size_t)m);
  lathe_status_t st = (!c.scalars || !idx) ? LATHE_OOM("Sort") : NULL;
  for (int p = 0; !st && p < 2 * ni; p++) {
    lathe_shape s;
    memset(&s, 0, sizeof s);
    s.dtype = in[p / 2]->shape.dtype;
    if (!(st = lathe_cpu_tensor_new(&s, &c.scalars[p]))) memset(c.scalars[p]->data, 0, c.scalars[p]->nbytes);
  }
  for (int64_t r = 0; !st && r < rows; r++) {
    c.base = (r / inner) * m * inner + r % inner;
    for (int64_t k = 0; k < m; k++) idx[k] = k;
    sort_indices(idx, idx + m, m, &c);
    if ((st = c.st)) break;
    for (int t = 0; t < ni; t++) permute_row(out[t], in[t], c.base, inner, idx, m);
  }
  for (int p = 0; c.scalars && p < 2 * ni; p++) lathe_tensor_release(c.scalars[p]);
  free(c.scalars);
  free(idx);
  return st;
}

static lathe_status_t run_sort(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  int ni = n->n_operands, axis = (int)lathe_attr_sort_axis(n);
  const lathe_shape *s = &in[0]->shape;
  int64_t outer = lathe_dims_product(s->dims, 0, axis), inner = lathe_dims_product(s->dims, axis + 1, s->rank);
  int64_t m = s->dims[axis];
  int64_t rows = outer * inner;
  lathe_status_t st = NULL;
  bool packed = false;
  for (int t = 0; t < ni && !st; t++) {
    st = lathe_cpu_tensor_new(&in[t]->shape, &out[t]);
    packed |= lathe_dtype_is_packed(in[t]->shape.dtype);
    if (!st && (m <= 1 || rows == 0 || lathe_dtype_is_packed(in[t]->shape.dtype)))
      memcpy(out[t]->data, in[t]->data, in[t]->nbytes); /* also clears packed tail bits */
  }
  if (st || m <= 1 || rows == 0) goto done;
  bool desc, total;
  keys_fn keys = keys_for(in[0]->shape.dtype);
  if (keys && lathe_sort_comparator_order(n, &desc, &total)) {
    native_ctx c = {.in = in, .out = out, .n_in = ni, .m = m, .inner = inner, .keys = keys, .total = total,
                    .flip = desc ? ~0ull : 0};
    atomic_init(&c.failed, 0);
    /* rows share bytes of packed tensors, so those sort on one thread */
    if (packed) native_rows(&c, 0, rows);
    else lathe_parallel_for(lathe_cpu_exec_pool(ex), rows, m >= 32768 ? 1 : 32768 / m, native_rows, &c);
    if (atomic_load(&c.failed)) st = LATHE_OOM("Sort");
  } else {
    st = sort_with_comparator(ex, n, in, out, rows, m, inner);
  }
done:
  if (st)
    for (int t = 0; t < ni; t++) lathe_tensor_release(out[t]), out[t] = NULL;
  return st;
}

lathe_status_t lathe_cpu_run_control(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                     lathe_tensor **out) {
  switch (n->op) {
    case LATHE_OP_SORT:
      return run_sort(ex, n, in, out);
    default: /* Call, While, If: the executor's */
      return lathe_exec_control(&ex->x, n, in, out);
  }
}
