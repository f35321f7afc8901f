/* leaf.c -- the LEAF family on the CPU. Parameters and constants are bound by the interpreter
 * itself; Iota is the one leaf computed here. Leaves run on packed (sub-byte) tensors as they
 * are, so Iota writes Int4/Uint2/... elements directly, wrapping like a conversion would. */
#include "cpu.h"

typedef struct iota_job {
  void *data;
  lathe_dtype dt;
  int64_t len, inner; /* the iota axis' size, and the elements after it */
} iota_job;

/* One typed fill per dtype class: element i holds (i / inner) % len. */
#define IOTA_FILL(NAME, T, CONV)                                       \
  static void NAME(void *ctx, int64_t lo, int64_t hi) {                \
    const iota_job *j = ctx;                                           \
    T *d = j->data;                                                    \
    for (int64_t i = lo; i < hi; i++) d[i] = CONV((i / j->inner) % j->len); \
  }
static inline uint16_t cv_FLOAT16(int64_t v) { return lathe_f32_to_f16((float)v); }
static inline uint16_t cv_BFLOAT16(int64_t v) { return lathe_f32_to_bf16((float)v); }

#define IOTA_SINT(E, T) static inline T cv_##E(int64_t v) { return (T)(uint64_t)v; } IOTA_FILL(iota_##E, T, cv_##E)
#define IOTA_UINT IOTA_SINT
#define IOTA_FLOAT(E, T) static inline T cv_##E(int64_t v) { return (T)v; } IOTA_FILL(iota_##E, T, cv_##E)
#define IOTA_HALF(E, T) IOTA_FILL(iota_##E, uint16_t, cv_##E)
#define IOTA_COMPLEX(E, T) static inline T cv_##E(int64_t v) { return (T){(double)v, 0}; } IOTA_FILL(iota_##E, T, cv_##E)
#define IOTA_NONE(E, T)
#define IOTA_BOOL_8 IOTA_NONE
#define IOTA_SINT_8 IOTA_SINT
#define IOTA_SINT_16 IOTA_SINT
#define IOTA_SINT_32 IOTA_SINT
#define IOTA_SINT_64 IOTA_SINT
#define IOTA_SINT_4 IOTA_NONE
#define IOTA_SINT_2 IOTA_NONE
#define IOTA_SINT_1 IOTA_NONE
#define IOTA_UINT_8 IOTA_UINT
#define IOTA_UINT_16 IOTA_UINT
#define IOTA_UINT_32 IOTA_UINT
#define IOTA_UINT_64 IOTA_UINT
#define IOTA_UINT_4 IOTA_NONE
#define IOTA_UINT_2 IOTA_NONE
#define IOTA_UINT_1 IOTA_NONE
#define IOTA_FLOAT_32 IOTA_FLOAT
#define IOTA_FLOAT_64 IOTA_FLOAT
#define IOTA_HALF_16 IOTA_HALF
#define IOTA_COMPLEX_64 IOTA_COMPLEX
#define IOTA_COMPLEX_128 IOTA_COMPLEX
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) IOTA_##CLASS##_##bits(ENUM, compute_t)
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

/* Sub-byte integers: element-wise packed stores (not split across threads: bytes are shared). */
static void iota_packed(void *ctx, int64_t lo, int64_t hi) {
  const iota_job *j = ctx;
  for (int64_t i = lo; i < hi; i++) lathe_store_packed(j->data, j->dt, i, (i / j->inner) % j->len);
}

#define IT_YES(E) [LATHE_DTYPE_##E] = iota_##E,
#define IT_NO(E)
#define IT_PACKED(E) [LATHE_DTYPE_##E] = iota_packed,
#define ITB_BOOL_8 IT_NO
#define ITB_SINT_8 IT_YES
#define ITB_SINT_16 IT_YES
#define ITB_SINT_32 IT_YES
#define ITB_SINT_64 IT_YES
#define ITB_SINT_4 IT_PACKED
#define ITB_SINT_2 IT_PACKED
#define ITB_SINT_1 IT_PACKED
#define ITB_UINT_8 IT_YES
#define ITB_UINT_16 IT_YES
#define ITB_UINT_32 IT_YES
#define ITB_UINT_64 IT_YES
#define ITB_UINT_4 IT_PACKED
#define ITB_UINT_2 IT_PACKED
#define ITB_UINT_1 IT_PACKED
#define ITB_FLOAT_32 IT_YES
#define ITB_FLOAT_64 IT_YES
#define ITB_HALF_16 IT_YES
#define ITB_COMPLEX_64 IT_YES
#define ITB_COMPLEX_128 IT_YES
static const lathe_range_fn iota_fns[LATHE_DTYPE_LIMIT] = {
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) ITB_##CLASS##_##bits(ENUM)
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
};

bool lathe_cpu_supports_leaf(lathe_op op, lathe_dtype dtype) {
  if (!lathe_dtype_is_valid(dtype)) return false;
  switch (op) {
    case LATHE_OP_PARAMETER:
    case LATHE_OP_CONSTANT: return true; /* bound by the interpreter */
    case LATHE_OP_IOTA: return iota_fns[dtype] != NULL;
    default: return false;
  }
}

lathe_status_t lathe_cpu_run_leaf(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  (void)in;
  if (n->op != LATHE_OP_IOTA) return lathe_status_new(LATHE_STATUS_INTERNAL, "%s: not run by the leaf family", lathe_op_name(n->op));
  lathe_tensor *o = out[0];
  const lathe_shape *s = &o->shape;
  int axis = (int)lathe_attr_iota_axis(n);
  iota_job j = {.data = o->data, .dt = s->dtype, .len = s->dims[axis], .inner = lathe_dims_product(s->dims, axis + 1, s->rank)};
  int64_t total = lathe_shape_size(s);
  lathe_range_fn fn = iota_fns[s->dtype];
  if (!fn) return LATHE_UNIMPL("Iota: not implemented on lathe:cpu for %s", lathe_dtype_name(s->dtype));
  if (!total) return NULL;
  if (fn == iota_packed) fn(&j, 0, total);
  else lathe_parallel_for(lathe_cpu_exec_pool(ex), total, 1 << 16, fn, &j);
  return NULL;
}
