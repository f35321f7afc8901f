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
 *   LATHE_CPLX(D)       the complex dtype ENUM of a real one (FLOAT32 -> COMPLEX64)
 *   lathe_ut_D, lathe_uw_D, lathe_rt_D   the types UT, UW, RT of ew.def's dialect (ew.h)
 *
 * Per-class tables (src/graph/ew.def) are instantiated for every byte-sized dtype of a class
 * through LATHE_DD_EACH_<CLASS>(X, ...), which expands X(D, ...) for each; LATHE_DD_EACH_TO_<CLASS>
 * is the same list for a loop inside such a loop. Tables by dtype use the dense index of the
 * byte-sized dtypes in [0, LATHE_DD_COUNT): LATHE_DDI_<D>, or lathe_dd_index(dt) at run time.
 *
 * Complex arithmetic uses C99/C11 _Complex (standard in gcc and clang); storage is binary
 * compatible with lathe_c64 / lathe_c128 (C guarantees the {re, im} array layout). Only
 * keywords are used here, so including this header does not pull <complex.h>'s `I` macro. */
#ifndef LATHE_DTYPE_DISPATCH_H
#define LATHE_DTYPE_DISPATCH_H

#include <string.h>

#include "cpu.h"
#include "../graph/ew.h"

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
#define LATHE_CPLX(D) LATHE_DD_CPLX_OF_##D
#define LATHE_DD_CPLX_OF_FLOAT32 COMPLEX64
#define LATHE_DD_CPLX_OF_FLOAT64 COMPLEX128

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
                       typedef LATHE_EW_UT_##ct lathe_ut_##ENUM;              \
                       typedef LATHE_EW_UW_##ct lathe_uw_##ENUM;              \
                       typedef LATHE_EW_RT_##ct lathe_rt_##ENUM;              \
                       LATHE_DD_LOADFN_##CLASS(ENUM))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

#define LATHE_S(D) lathe_s_##D
#define LATHE_C(D) lathe_c_##D
#define LATHE_LD(D, p, i) lathe_ld_##D((p), (i))
#define LATHE_ST(D, p, i, v) lathe_st_##D((p), (i), (v))

/* The byte-sized dtypes of each class (checked against lathe_dtypes.def below). */
#define LATHE_DD_EACH_BOOL(X, ...) X(BOOL, __VA_ARGS__)
#define LATHE_DD_EACH_SINT(X, ...) X(INT8, __VA_ARGS__) X(INT16, __VA_ARGS__) X(INT32, __VA_ARGS__) X(INT64, __VA_ARGS__)
#define LATHE_DD_EACH_UINT(X, ...) \
  X(UINT8, __VA_ARGS__) X(UINT16, __VA_ARGS__) X(UINT32, __VA_ARGS__) X(UINT64, __VA_ARGS__)
#define LATHE_DD_EACH_FLOAT(X, ...) X(FLOAT32, __VA_ARGS__) X(FLOAT64, __VA_ARGS__)
#define LATHE_DD_EACH_HALF(X, ...) X(FLOAT16, __VA_ARGS__) X(BFLOAT16, __VA_ARGS__)
#define LATHE_DD_EACH_COMPLEX(X, ...) X(COMPLEX64, __VA_ARGS__) X(COMPLEX128, __VA_ARGS__)
/* The same lists again: a macro does not expand inside its own expansion. */
#define LATHE_DD_EACH_TO_BOOL(X, ...) X(BOOL, __VA_ARGS__)
#define LATHE_DD_EACH_TO_SINT(X, ...) \
  X(INT8, __VA_ARGS__) X(INT16, __VA_ARGS__) X(INT32, __VA_ARGS__) X(INT64, __VA_ARGS__)
#define LATHE_DD_EACH_TO_UINT(X, ...) \
  X(UINT8, __VA_ARGS__) X(UINT16, __VA_ARGS__) X(UINT32, __VA_ARGS__) X(UINT64, __VA_ARGS__)
#define LATHE_DD_EACH_TO_FLOAT(X, ...) X(FLOAT32, __VA_ARGS__) X(FLOAT64, __VA_ARGS__)
#define LATHE_DD_EACH_TO_HALF(X, ...) X(FLOAT16, __VA_ARGS__) X(BFLOAT16, __VA_ARGS__)
#define LATHE_DD_EACH_TO_COMPLEX(X, ...) X(COMPLEX64, __VA_ARGS__) X(COMPLEX128, __VA_ARGS__)

/* Dense indices of the byte-sized dtypes, in table order. */
enum {
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(LATHE_DDI_##ENUM, )
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
  LATHE_DD_COUNT
};
/* -1 for invalid and sub-byte dtypes. */
static inline int lathe_dd_index(lathe_dtype dt) {
  switch (dt) {
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(case LATHE_DTYPE_##ENUM: return LATHE_DDI_##ENUM;)
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
    default: return -1;
  }
}

/* Every listed dtype has the list's class, each list names every byte-sized dtype once. */
enum {
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) lathe_dd_class_##ENUM = LATHE_CLASS_##CLASS,
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
};
#define LATHE_DD_CHECK(D, C) _Static_assert((int)lathe_dd_class_##D == (int)LATHE_CLASS_##C, #D " is not of class " #C);
#define LATHE_DD_COUNT1(D, C) +1
#define LATHE_DD_CHECK_CLASS(C)                                                                  \
  LATHE_DD_EACH_##C(LATHE_DD_CHECK, C) LATHE_DD_EACH_TO_##C(LATHE_DD_CHECK, C)                   \
  _Static_assert(0 LATHE_DD_EACH_##C(LATHE_DD_COUNT1, C) == 0 LATHE_DD_EACH_TO_##C(LATHE_DD_COUNT1, C), \
                "LATHE_DD_EACH_" #C " and LATHE_DD_EACH_TO_" #C " differ");
LATHE_DD_CHECK_CLASS(BOOL)
LATHE_DD_CHECK_CLASS(SINT)
LATHE_DD_CHECK_CLASS(UINT)
LATHE_DD_CHECK_CLASS(FLOAT)
LATHE_DD_CHECK_CLASS(HALF)
LATHE_DD_CHECK_CLASS(COMPLEX)
_Static_assert(0 LATHE_DD_EACH_BOOL(LATHE_DD_COUNT1, ) LATHE_DD_EACH_SINT(LATHE_DD_COUNT1, )
                  LATHE_DD_EACH_UINT(LATHE_DD_COUNT1, ) LATHE_DD_EACH_FLOAT(LATHE_DD_COUNT1, )
                      LATHE_DD_EACH_HALF(LATHE_DD_COUNT1, ) LATHE_DD_EACH_COMPLEX(LATHE_DD_COUNT1, ) ==
                  LATHE_DD_COUNT,
              "the LATHE_DD_EACH_<CLASS> lists miss a byte-sized dtype");
#undef LATHE_DD_CHECK
#undef LATHE_DD_COUNT1
#undef LATHE_DD_CHECK_CLASS

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
