/* dtype_dispatch.h -- per-dtype kernel instantiation from include/lathe_dtypes.def.
 *
 * Kernels are written once as macros over a dtype ENUM (FLOAT32, INT8, ...) and instantiated
 * for every byte-sized dtype by including the dtype table:
 *
 *   #define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(MY_INST_##CLASS(ENUM))
 *   #include "lathe_dtypes.def"
 *   #undef LATHE_DTYPE
 *
 * LATHE_DD_KEEP_<bits> drops the sub-byte dtypes (the interpreter widens them to Int8/Uint8
 * before kernels run, except for Bitcast), and the family defines MY_INST_<CLASS> for the
 * classes it supports (and empty ones for the rest). For every byte-sized dtype this header
 * provides:
 *
 *   LATHE_S(D)          storage type (Float16/BFloat16: uint16_t; complex: _Complex, same layout
 *                       as lathe_c64 / lathe_c128)
 *   LATHE_C(D)          compute type (Float16/BFloat16: float; complex: float/double _Complex)
 *   LATHE_LD(D, p, i)   element i of storage array p (const void *) as the compute type
 *   LATHE_ST(D, p, i, v) stores compute value v into element i of p (void *)
 *   LATHE_REAL(D)       the real dtype ENUM of a complex ENUM (COMPLEX64 -> FLOAT32)
 *
 * Complex arithmetic uses C99/C11 _Complex (standard in gcc and clang); storage is binary
 * compatible with lathe_c64 / lathe_c128 (C guarantees the {re, im} array layout). Only
 * keywords are used here, so including this header does not pull <complex.h>'s `I` macro. */
#ifndef LATHE_DTYPE_DISPATCH_H
#define LATHE_DTYPE_DISPATCH_H

#include <string.h>

#include "cpu.h"

#ifdef __STDC_NO_COMPLEX__
#error "lathe needs C11 complex types (_Complex)"
#endif

/* Keep only byte-sized dtypes. */
#define LATHE_DD_KEEP_1(...)
#define LATHE_DD_KEEP_2(...)
#define LATHE_DD_KEEP_4(...)
#define LATHE_DD_KEEP_8(...) __VA_ARGS__
#define LATHE_DD_KEEP_16(...) __VA_ARGS__
#define LATHE_DD_KEEP_32(...) __VA_ARGS__
#define LATHE_DD_KEEP_64(...) __VA_ARGS__
#define LATHE_DD_KEEP_128(...) __VA_ARGS__

/* Storage and compute types by class. */
#define LATHE_DD_STORAGE_BOOL(D, ct) ct
#define LATHE_DD_STORAGE_SINT(D, ct) ct
#define LATHE_DD_STORAGE_UINT(D, ct) ct
#define LATHE_DD_STORAGE_FLOAT(D, ct) ct
#define LATHE_DD_STORAGE_HALF(D, ct) uint16_t
#define LATHE_DD_STORAGE_COMPLEX(D, ct) LATHE_DD_CPLX_##ct
#define LATHE_DD_COMPUTE_BOOL(D, ct) ct
#define LATHE_DD_COMPUTE_SINT(D, ct) ct
#define LATHE_DD_COMPUTE_UINT(D, ct) ct
#define LATHE_DD_COMPUTE_FLOAT(D, ct) ct
#define LATHE_DD_COMPUTE_HALF(D, ct) ct
#define LATHE_DD_COMPUTE_COMPLEX(D, ct) LATHE_DD_CPLX_##ct
#define LATHE_DD_CPLX_lathe_c64 float _Complex
#define LATHE_DD_CPLX_lathe_c128 double _Complex

/* Half conversions by dtype. */
#define LATHE_DD_H2F_FLOAT16 lathe_f16_to_f32
#define LATHE_DD_H2F_BFLOAT16 lathe_bf16_to_f32
#define LATHE_DD_F2H_FLOAT16 lathe_f32_to_f16
#define LATHE_DD_F2H_BFLOAT16 lathe_f32_to_bf16

#define LATHE_REAL(D) LATHE_DD_REAL_##D
#define LATHE_DD_REAL_COMPLEX64 FLOAT32
#define LATHE_DD_REAL_COMPLEX128 FLOAT64

/* Loads and stores by class. */
#define LATHE_DD_LOADFN_PLAIN(D)                                                         \
  static inline lathe_c_##D lathe_ld_##D(const void *p, int64_t i) { return ((const lathe_s_##D *)p)[i]; } \
  static inline void lathe_st_##D(void *p, int64_t i, lathe_c_##D v) { ((lathe_s_##D *)p)[i] = v; }
#define LATHE_DD_LOADFN_BOOL(D) LATHE_DD_LOADFN_PLAIN(D)
#define LATHE_DD_LOADFN_SINT(D) LATHE_DD_LOADFN_PLAIN(D)
#define LATHE_DD_LOADFN_UINT(D) LATHE_DD_LOADFN_PLAIN(D)
#define LATHE_DD_LOADFN_FLOAT(D) LATHE_DD_LOADFN_PLAIN(D)
#define LATHE_DD_LOADFN_HALF(D)                                                          \
  static inline float lathe_ld_##D(const void *p, int64_t i) { return LATHE_DD_H2F_##D(((const uint16_t *)p)[i]); } \
  static inline void lathe_st_##D(void *p, int64_t i, float v) { ((uint16_t *)p)[i] = LATHE_DD_F2H_##D(v); }
#define LATHE_DD_LOADFN_COMPLEX(D)                                                       \
  static inline lathe_c_##D lathe_ld_##D(const void *p, int64_t i) {                     \
    lathe_c_##D z;                                                                        \
    memcpy(&z, (const char *)p + (size_t)i * sizeof z, sizeof z);                        \
    return z;                                                                             \
  }                                                                                       \
  static inline void lathe_st_##D(void *p, int64_t i, lathe_c_##D v) {                   \
    memcpy((char *)p + (size_t)i * sizeof v, &v, sizeof v);                               \
  }

#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS)                \
  LATHE_DD_KEEP_##bits(typedef LATHE_DD_STORAGE_##CLASS(ENUM, ct) lathe_s_##ENUM; \
                       typedef LATHE_DD_COMPUTE_##CLASS(ENUM, ct) lathe_c_##ENUM; \
                       LATHE_DD_LOADFN_##CLASS(ENUM))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

#define LATHE_S(D) lathe_s_##D
#define LATHE_C(D) lathe_c_##D
#define LATHE_LD(D, p, i) lathe_ld_##D((p), (i))
#define LATHE_ST(D, p, i, v) lathe_st_##D((p), (i), (v))

/* Unsigned types of a width, for wrapping integer arithmetic without signed-overflow UB
 * (8 and 16 bits compute in unsigned int, since uint16_t * uint16_t promotes to int). */
#define LATHE_DD_UWIDE_8 unsigned
#define LATHE_DD_UWIDE_16 unsigned
#define LATHE_DD_UWIDE_32 uint32_t
#define LATHE_DD_UWIDE_64 uint64_t
#define LATHE_DD_UNSIGNED_8 uint8_t
#define LATHE_DD_UNSIGNED_16 uint16_t
#define LATHE_DD_UNSIGNED_32 uint32_t
#define LATHE_DD_UNSIGNED_64 uint64_t

/* Element i of an integer tensor as int64 (indices, sizes); uint64 values past INT64_MAX
 * saturate. Other dtypes give 0 (the builder admits only integers). */
static inline int64_t lathe_load_index(const void *p, lathe_dtype dt, int64_t i) {
  switch (dt) {
#define LATHE_DD_IDX_SINT(D) \
  case LATHE_DTYPE_##D: return (int64_t)LATHE_LD(D, p, i);
#define LATHE_DD_IDX_UINT(D)                                 \
  case LATHE_DTYPE_##D: {                                    \
    uint64_t v = (uint64_t)LATHE_LD(D, p, i);                \
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v; \
  }
#define LATHE_DD_IDX_BOOL(D)
#define LATHE_DD_IDX_FLOAT(D)
#define LATHE_DD_IDX_HALF(D)
#define LATHE_DD_IDX_COMPLEX(D)
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(LATHE_DD_IDX_##CLASS(ENUM))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
    default: return 0;
  }
}

/* Element size in bytes of a byte-sized dtype. */
static inline size_t lathe_dd_esize(lathe_dtype dt) { return (size_t)lathe_dtype_bits(dt) / 8; }

#endif
