/* ew.h -- elementwise semantics as source text (ew_source.c), and the dialect's type names.
 *
 * src/graph/ew.def holds one expression per elementwise op and dtype class; the CPU
 * instantiates it as its kernels, and a device that generates code (CUDA) emits it through
 * lathe_ew_source, with its own version of the helper prelude (ew_helpers.h states the
 * contract), so both compute the same bits. */
#ifndef LATHE_GRAPH_EW_H
#define LATHE_GRAPH_EW_H

#include "../core/core.h"

/* The dialect's types, by the compute-type column `ct` of lathe_dtypes.def:
 *   LATHE_EW_T_<ct>   T   (complex: lt_c64 / lt_c128 of the helper prelude)
 *   LATHE_EW_UT_<ct>  UT  the unsigned integer type as wide as T (complex: as its parts)
 *   LATHE_EW_UW_<ct>  UW  the unsigned type that wrapping arithmetic computes in
 *   LATHE_EW_RT_<ct>  RT  the real type */
#define LATHE_EW_T_uint8_t uint8_t
#define LATHE_EW_T_uint16_t uint16_t
#define LATHE_EW_T_uint32_t uint32_t
#define LATHE_EW_T_uint64_t uint64_t
#define LATHE_EW_T_int8_t int8_t
#define LATHE_EW_T_int16_t int16_t
#define LATHE_EW_T_int32_t int32_t
#define LATHE_EW_T_int64_t int64_t
#define LATHE_EW_T_float float
#define LATHE_EW_T_double double
#define LATHE_EW_T_lathe_c64 lt_c64
#define LATHE_EW_T_lathe_c128 lt_c128

#define LATHE_EW_UT_uint8_t uint8_t
#define LATHE_EW_UT_uint16_t uint16_t
#define LATHE_EW_UT_uint32_t uint32_t
#define LATHE_EW_UT_uint64_t uint64_t
#define LATHE_EW_UT_int8_t uint8_t
#define LATHE_EW_UT_int16_t uint16_t
#define LATHE_EW_UT_int32_t uint32_t
#define LATHE_EW_UT_int64_t uint64_t
#define LATHE_EW_UT_float uint32_t
#define LATHE_EW_UT_double uint64_t
#define LATHE_EW_UT_lathe_c64 uint32_t
#define LATHE_EW_UT_lathe_c128 uint64_t

/* 8- and 16-bit values promote to int: they wrap in unsigned (int) instead. */
#define LATHE_EW_UW_uint8_t unsigned
#define LATHE_EW_UW_uint16_t unsigned
#define LATHE_EW_UW_uint32_t uint32_t
#define LATHE_EW_UW_uint64_t uint64_t
#define LATHE_EW_UW_int8_t unsigned
#define LATHE_EW_UW_int16_t unsigned
#define LATHE_EW_UW_int32_t uint32_t
#define LATHE_EW_UW_int64_t uint64_t
#define LATHE_EW_UW_float uint32_t
#define LATHE_EW_UW_double uint64_t
#define LATHE_EW_UW_lathe_c64 uint32_t
#define LATHE_EW_UW_lathe_c128 uint64_t

#define LATHE_EW_RT_uint8_t uint8_t
#define LATHE_EW_RT_uint16_t uint16_t
#define LATHE_EW_RT_uint32_t uint32_t
#define LATHE_EW_RT_uint64_t uint64_t
#define LATHE_EW_RT_int8_t int8_t
#define LATHE_EW_RT_int16_t int16_t
#define LATHE_EW_RT_int32_t int32_t
#define LATHE_EW_RT_int64_t int64_t
#define LATHE_EW_RT_float float
#define LATHE_EW_RT_double double
#define LATHE_EW_RT_lathe_c64 float
#define LATHE_EW_RT_lathe_c128 double

/* Whether ew.def defines op for operands of dtype dt (sub-byte dtypes count as their class;
 * Where: dt is the values' dtype; ConvertDType: from dt to `to`, which other ops ignore). */
bool lathe_ew_defined(lathe_op op, lathe_dtype dt, lathe_dtype to);

/* Writes into buf (capacity cap bytes, always NUL-terminated when cap > 0) the C source of the
 * element function of op on operands of dtype dt (for ConvertDType: from dt to `to`):
 *
 *   static inline float lt_ew_ADD_FLOAT32(float x, float y) {
 *     typedef float T; ... const int BITS = 32;
 *     return (OT)(<the expression of ew.def>);
 *   }
 *
 * named lt_ew_<OP>_<DTYPE> (ConvertDType: lt_ew_CONVERT_DTYPE_<FROM>_<TO>), with the operands'
 * and result's compute types (Where's condition is uint8_t; complex types are lt_c64 /
 * lt_c128). The text compiles after a helper prelude (lathe_ew_prelude_c for C). *out_len (may
 * be NULL) receives the source's length without the NUL, also when buf is too small.
 * Errors: INVALID_ARGUMENT for an op that is not elementwise or an invalid dtype,
 * UNIMPLEMENTED when ew.def has no expression for the combination, RESOURCE_EXHAUSTED when
 * the source does not fit in cap bytes. */
lathe_status_t lathe_ew_source(lathe_op op, lathe_dtype dt, lathe_dtype to, char *buf, size_t cap, size_t *out_len);

/* ---- activations: ew.def's LATHE_ACT rows (activation.c) ---- */
typedef enum lathe_act_form { LATHE_ACT_FORM_Y, LATHE_ACT_FORM_X, LATHE_ACT_FORM_GLU } lathe_act_form;
enum {
  LATHE_ACT_COUNT = 0
#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR)
#define LATHE_ACT(ENUM, NUM, FORM, FWD, VJP_X, VJP_Y) +1
#include "ew.def"
#undef LATHE_ACT
#undef LATHE_EW
};
/* Whether act is a row of the table; its form (Y: the derivative follows from y; X: it needs x;
 * GLU: gated, halves the last axis) and its name (the row's ENUM). */
bool lathe_act_valid(int act);
lathe_act_form lathe_act_form_of(lathe_activation act);
const char *lathe_act_name(lathe_activation act);
/* INVALID_ARGUMENT naming op for an unknown activation, or (dense) a GLU one. */
lathe_status_t lathe_act_check(const char *op, lathe_activation act, bool dense);
/* CUDA C++ text of lt_act(x, act), lt_act_vjp_x(x, g, act) and lt_act_vjp_y(y, g, act), templates
 * over T (float, double) after the device prelude (static storage). */
const char *lathe_act_source_cuda(void);

/* The C helper prelude: includes, the complex types, the C spellings of the generic helpers
 * and the text of ew_helpers.h's helper functions (static storage). */
const char *lathe_ew_prelude_c(void);

#endif
