/* numeric.c -- the CPU NUMERIC family: capabilities, dispatch to rng.c / fft.c / batchnorm.c,
 * and the float row conversions those kernels share (instantiated from the dtype table). */
#include "numeric.h"

/* ---- row conversions, one pair per float/complex dtype of lathe_dtypes.def ---- */
static inline double half_load_FLOAT16(uint16_t h) { return lathe_f16_to_f32(h); }
static inline double half_load_BFLOAT16(uint16_t h) { return lathe_bf16_to_f32(h); }
static inline uint16_t half_store_FLOAT16(double v) { return lathe_f32_to_f16((float)v); }
static inline uint16_t half_store_BFLOAT16(double v) { return lathe_f32_to_bf16((float)v); }

#define IO_FLOAT(ENUM, T)                                                     \
  static void load_##ENUM(const void *src, int64_t n, double *dst) {          \
    const T *s = src;                                                         \
    for (int64_t i = 0; i < n; i++) dst[i] = (double)s[i];                    \
  }                                                                           \
  static void store_##ENUM(const double *src, int64_t n, void *dst) {         \
    T *d = dst;                                                               \
    for (int64_t i = 0; i < n; i++) d[i] = (T)src[i];                         \
  }
#define IO_HALF(ENUM, T) /* stored as 16-bit patterns */                      \
  static void load_##ENUM(const void *src, int64_t n, double *dst) {          \
    const uint16_t *s = src;                                                  \
    for (int64_t i = 0; i < n; i++) dst[i] = half_load_##ENUM(s[i]);          \
  }                                                                           \
  static void store_##ENUM(const double *src, int64_t n, void *dst) {         \
    uint16_t *d = dst;                                                        \
    for (int64_t i = 0; i < n; i++) d[i] = half_store_##ENUM(src[i]);         \
  }
#define IO_COMPLEX(ENUM, T)                                                   \
  static void cload_##ENUM(const void *src, int64_t n, lathe_c128 *dst) {     \
    const T *s = src;                                                         \
    for (int64_t i = 0; i < n; i++) dst[i].re = s[i].re, dst[i].im = s[i].im; \
  }                                                                           \
  static void cstore_##ENUM(const lathe_c128 *src, int64_t n, void *dst) {    \
    T *d = dst;                                                               \
    for (int64_t i = 0; i < n; i++) {                                         \
      d[i].re = src[i].re; /* narrows to Complex64's float implicitly */      \
      d[i].im = src[i].im;                                                    \
    }                                                                         \
  }
#define IO_BOOL(ENUM, T)
#define IO_SINT(ENUM, T)
#define IO_UINT(ENUM, T)
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) IO_##CLASS(ENUM, compute_t)
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

#define CASE_REAL_FLOAT(ENUM, f) case LATHE_DTYPE_##ENUM: return f##_##ENUM;
#define CASE_REAL_HALF CASE_REAL_FLOAT
#define CASE_REAL_BOOL(ENUM, f)
#define CASE_REAL_SINT(ENUM, f)
#define CASE_REAL_UINT(ENUM, f)
#define CASE_REAL_COMPLEX(ENUM, f)
#define CASE_CPLX_COMPLEX(ENUM, f) case LATHE_DTYPE_##ENUM: return f##_##ENUM;
#define CASE_CPLX_FLOAT(ENUM, f)
#define CASE_CPLX_HALF(ENUM, f)
#define CASE_CPLX_BOOL(ENUM, f)
#define CASE_CPLX_SINT(ENUM, f)
#define CASE_CPLX_UINT(ENUM, f)

lathe_num_load_fn lathe_num_real_loader(lathe_dtype dt) {
  switch (dt) {
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) CASE_REAL_##CLASS(ENUM, load)
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
    default: return NULL;
  }
}

lathe_num_store_fn lathe_num_real_storer(lathe_dtype dt) {
  switch (dt) {
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) CASE_REAL_##CLASS(ENUM, store)
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
    default: return NULL;
  }
}

lathe_num_cload_fn lathe_num_complex_loader(lathe_dtype dt) {
  switch (dt) {
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) CASE_CPLX_##CLASS(ENUM, cload)
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
    default: return NULL;
  }
}

lathe_num_cstore_fn lathe_num_complex_storer(lathe_dtype dt) {
  switch (dt) {
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) CASE_CPLX_##CLASS(ENUM, cstore)
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
    default: return NULL;
  }
}

/* ---- family entry points ---- */
bool lathe_cpu_supports_numeric(lathe_op op, lathe_dtype dtype) {
  switch (op) {
    case LATHE_OP_RNG_BIT_GENERATOR: /* dtype: the state's */
      return dtype == LATHE_DTYPE_UINT64;
    case LATHE_OP_FFT:
      return dtype == LATHE_DTYPE_FLOAT32 || dtype == LATHE_DTYPE_FLOAT64 || dtype == LATHE_DTYPE_COMPLEX64 ||
             dtype == LATHE_DTYPE_COMPLEX128;
    case LATHE_OP_BATCH_NORM_FOR_INFERENCE:
    case LATHE_OP_BATCH_NORM_FOR_TRAINING:
    case LATHE_OP_BATCH_NORM_GRADIENT:
      return lathe_dtype_is_float(dtype);
    default:
      return false;
  }
}

lathe_status_t lathe_cpu_run_numeric(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                     lathe_tensor **out) {
  switch (n->op) {
    case LATHE_OP_RNG_BIT_GENERATOR: return lathe_cpu_rng_bit_generator(ex, n, in, out);
    case LATHE_OP_FFT: return lathe_cpu_fft(ex, n, in, out);
    case LATHE_OP_BATCH_NORM_FOR_INFERENCE:
    case LATHE_OP_BATCH_NORM_FOR_TRAINING:
    case LATHE_OP_BATCH_NORM_GRADIENT: return lathe_cpu_batch_norm(ex, n, in, out);
    default: return LATHE_UNIMPL("%s: not a NUMERIC op on lathe:cpu", lathe_op_name(n->op));
  }
}
