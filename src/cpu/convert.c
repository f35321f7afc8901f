/* convert.c -- ConvertDType between every pair of dtypes, and Bitcast.
 *
 * Conversion goes through a small canonical buffer, so the 15x15 byte-sized pairs need only
 * one loader and one storer per dtype: the source is loaded into int64 (Bool, signed ints),
 * uint64 (unsigned ints), double (floats) or double complex, then stored as the target.
 * Semantics:
 *  - integer -> integer wraps (two's complement), as Go's conversions;
 *  - float -> integer truncates toward zero and saturates at the target's range (the target's
 *    true range for sub-byte ints); NaN gives 0 (Go leaves these cases to the hardware; this
 *    is XLA's rule);
 *  - anything -> Bool is "!= 0" (a NaN is true; complex: either part non-zero);
 *  - complex -> real takes the real part; real -> complex sets the imaginary part to 0.
 * Sub-byte dtypes arrive widened to 8 bits (the interpreter narrows the result).
 * Bitcast reinterprets the bytes: the packed layout of lathe_dtypes.def is little-endian, so
 * every Bitcast is a copy of the bytes. */
#include <math.h>

#include "dtype_dispatch.h"
#include "elementwise.h"

enum { CV_CHUNK = 256 };
typedef enum { K_I, K_U, K_F, K_C } cv_kind;
typedef struct {
  union {
    int64_t i[CV_CHUNK];
    uint64_t u[CV_CHUNK];
    double f[CV_CHUNK];
  };
  double im[CV_CHUNK]; /* K_C: the imaginary parts (real parts in f) */
} cv_buf;

static inline double cpart(double _Complex z, int k) {
  double p[2];
  memcpy(p, &z, sizeof p);
  return p[k];
}
static inline double _Complex mk_cd(double re, double im) {
  double p[2] = {re, im};
  double _Complex z;
  memcpy(&z, p, sizeof z);
  return z;
}

/* ---- loaders: elements [off, off+n) of the source into b; return the kind ---- */
#define LD_BOOL(D)                                                                                  \
  static cv_kind ld_##D(const void *in, int64_t off, int64_t n, cv_buf *b) {                        \
    for (int64_t i = 0; i < n; i++) b->i[i] = LATHE_LD(D, in, off + i) != 0;                        \
    return K_I;                                                                                     \
  }
#define LD_SINT(D)                                                                                  \
  static cv_kind ld_##D(const void *in, int64_t off, int64_t n, cv_buf *b) {                        \
    for (int64_t i = 0; i < n; i++) b->i[i] = LATHE_LD(D, in, off + i);                             \
    return K_I;                                                                                     \
  }
#define LD_UINT(D)                                                                                  \
  static cv_kind ld_##D(const void *in, int64_t off, int64_t n, cv_buf *b) {                        \
    for (int64_t i = 0; i < n; i++) b->u[i] = LATHE_LD(D, in, off + i);                             \
    return K_U;                                                                                     \
  }
#define LD_FLOAT(D)                                                                                 \
  static cv_kind ld_##D(const void *in, int64_t off, int64_t n, cv_buf *b) {                        \
    for (int64_t i = 0; i < n; i++) b->f[i] = LATHE_LD(D, in, off + i);                             \
    return K_F;                                                                                     \
  }
#define LD_HALF(D) LD_FLOAT(D)
#define LD_COMPLEX(D)                                                                               \
  static cv_kind ld_##D(const void *in, int64_t off, int64_t n, cv_buf *b) {                        \
    for (int64_t i = 0; i < n; i++) {                                                               \
      double _Complex z = LATHE_LD(D, in, off + i);                                                 \
      b->f[i] = cpart(z, 0);                                                                        \
      b->im[i] = cpart(z, 1);                                                                       \
    }                                                                                               \
    return K_C;                                                                                     \
  }

/* ---- storers: n canonical values of kind k into elements [off, off+n) of the target ---- */
static inline int64_t sat_signed(double v, int bits) {
  double lim = ldexp(1.0, bits - 1);
  if (v != v) return 0;
  if (v >= lim) return LATHE_SINT_MAX(bits);
  if (v <= -lim) return LATHE_SINT_MIN(bits);
  return (int64_t)v;
}
static inline uint64_t sat_unsigned(double v, int bits) {
  if (v != v || v <= 0) return 0;
  if (v >= ldexp(1.0, bits)) return LATHE_UINT_MAX(bits);
  return (uint64_t)v;
}

#define ST_INTLIKE(D, FROM_F)                                                                       \
  static void st_##D(cv_kind k, const cv_buf *b, void *out, int64_t off, int64_t n, int bits) {     \
    (void)bits;                                                                                     \
    switch (k) {                                                                                    \
      case K_I:                                                                                     \
        for (int64_t i = 0; i < n; i++) LATHE_ST(D, out, off + i, (LATHE_C(D))(uint64_t)b->i[i]);   \
        break;                                                                                      \
      case K_U:                                                                                     \
        for (int64_t i = 0; i < n; i++) LATHE_ST(D, out, off + i, (LATHE_C(D))b->u[i]);             \
        break;                                                                                      \
      case K_F:                                                                                     \
      case K_C:                                                                                     \
        for (int64_t i = 0; i < n; i++) LATHE_ST(D, out, off + i, (LATHE_C(D))FROM_F(b->f[i], bits)); \
        break;                                                                                      \
    }                                                                                               \
  }
#define ST_SINT(D) ST_INTLIKE(D, sat_signed)
#define ST_UINT(D) ST_INTLIKE(D, sat_unsigned)
#define ST_BOOL(D)                                                                                  \
  static void st_##D(cv_kind k, const cv_buf *b, void *out, int64_t off, int64_t n, int bits) {     \
    (void)bits;                                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                               \
      bool v = k == K_I ? b->i[i] != 0 : k == K_U ? b->u[i] != 0 : k == K_F ? b->f[i] != 0          \
                                                                 : (b->f[i] != 0 || b->im[i] != 0); \
      LATHE_ST(D, out, off + i, (uint8_t)v);                                                        \
    }                                                                                               \
  }
#define ST_FLOAT(D)                                                                                 \
  static void st_##D(cv_kind k, const cv_buf *b, void *out, int64_t off, int64_t n, int bits) {     \
    (void)bits;                                                                                     \
    switch (k) {                                                                                    \
      case K_I:                                                                                     \
        for (int64_t i = 0; i < n; i++) LATHE_ST(D, out, off + i, (LATHE_C(D))b->i[i]);             \
        break;                                                                                      \
      case K_U:                                                                                     \
        for (int64_t i = 0; i < n; i++) LATHE_ST(D, out, off + i, (LATHE_C(D))b->u[i]);             \
        break;                                                                                      \
      case K_F:                                                                                     \
      case K_C:                                                                                     \
        for (int64_t i = 0; i < n; i++) LATHE_ST(D, out, off + i, (LATHE_C(D))b->f[i]);             \
        break;                                                                                      \
    }                                                                                               \
  }
#define ST_HALF(D) ST_FLOAT(D)
#define ST_COMPLEX(D)                                                                               \
  static void st_##D(cv_kind k, const cv_buf *b, void *out, int64_t off, int64_t n, int bits) {     \
    (void)bits;                                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                               \
      double re = k == K_I ? (double)b->i[i] : k == K_U ? (double)b->u[i] : b->f[i];                \
      LATHE_ST(D, out, off + i, (LATHE_C(D))mk_cd(re, k == K_C ? b->im[i] : 0));                   \
    }                                                                                               \
  }

typedef cv_kind (*ld_fn)(const void *in, int64_t off, int64_t n, cv_buf *b);
typedef void (*st_fn)(cv_kind k, const cv_buf *b, void *out, int64_t off, int64_t n, int bits);

#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(LD_##CLASS(ENUM) ST_##CLASS(ENUM))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

static const ld_fn ld_table[LATHE_DTYPE_LIMIT] = {
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits([LATHE_DTYPE_##ENUM] = ld_##ENUM, )
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
};
static const st_fn st_table[LATHE_DTYPE_LIMIT] = {
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits([LATHE_DTYPE_##ENUM] = st_##ENUM, )
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
};

static bool byte_sized(lathe_dtype dt) { return (int)dt > 0 && (int)dt < LATHE_DTYPE_LIMIT && ld_table[dt]; }

bool lathe_cpu_supports_convert(lathe_op op, lathe_dtype dtype) {
  if (op == LATHE_OP_BITCAST) return lathe_dtype_is_valid(dtype);
  return op == LATHE_OP_CONVERT_DTYPE && byte_sized(dtype);
}

typedef struct {
  ld_fn ld;
  st_fn st;
  const void *in;
  void *out;
  int bits; /* the target's true width */
} cv_ctx;

static void cv_range(void *ctx, int64_t begin, int64_t end) {
  const cv_ctx *c = ctx;
  cv_buf b;
  for (int64_t off = begin; off < end; off += CV_CHUNK) {
    int64_t n = end - off < CV_CHUNK ? end - off : CV_CHUNK;
    cv_kind k = c->ld(c->in, off, n, &b);
    c->st(k, &b, c->out, off, n, c->bits);
  }
}

lathe_status_t lathe_cpu_run_convert(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                     lathe_tensor **out) {
  if (n->op == LATHE_OP_BITCAST) {
    size_t nb = in[0]->nbytes < out[0]->nbytes ? in[0]->nbytes : out[0]->nbytes;
    if (nb && out[0]->data != in[0]->data) memcpy(out[0]->data, in[0]->data, nb);
    return NULL;
  }
  lathe_dtype from = lathe_ew_in_shape(n, 0).dtype, to = out[0]->shape.dtype;
  if (!byte_sized(from) || !byte_sized(to))
    return LATHE_UNIMPL("ConvertDType: not implemented on lathe:cpu from %s to %s", lathe_dtype_name(from),
                        lathe_dtype_name(to));
  cv_ctx c = {ld_table[from], st_table[to], in[0]->data, out[0]->data, lathe_dtype_bits(n->shape.dtype)};
  lathe_ew_parallel(ex, lathe_shape_size(&out[0]->shape), cv_range, &c);
  return NULL;
}
