/* isa_kernels.h -- the body of one ISA's kernel table (kernels.h): included by isa_<name>.c after
 * it defines
 *   LATHE_ISA_TABLE   the table's name (lathe_cpu_kernels_<name>)
 *   LATHE_ISA_ENUM    its lathe_cpu_isa
 *   LATHE_ISA_LEVEL   0 baseline, 1 AVX2, 2 AVX-512 (for the few explicit intrinsics)
 *   LATHE_ISA_TARGET  the compiler's target string (absent for the baseline).
 *
 * Every header comes first, with the build's default target, so that the helpers they define
 * inline into the kernels; then the target switches for the kernels themselves. GCC is asked for
 * its dynamic vectorisation cost model (at -O2 its default vectorises almost no loop that needs
 * an epilogue or a runtime alias check, which is every row kernel) and for -fno-trapping-math,
 * clang's default: lathe never reads floating-point exception flags, and with trapping math GCC
 * will not if-convert a select whose arms compute, so without AVX-512's masked operations it
 * vectorises few of the math loops. Neither changes a value. Floating-point contraction stays off
 * (no FMA: the Makefile passes -ffp-contract=off; cgo may not, but its -std=c11 makes off GCC's
 * default, and clang is told below). */
#if defined(__clang__)
/* first, so that the inline helpers of the headers below do not contract either: cgo cannot pass
 * -ffp-contract=off (not on its list of allowed flags), and clang's default contracts */
#pragma clang fp contract(off)
#elif defined(__GNUC__)
/* first as well: GCC does not inline a helper compiled with trapping math into a kernel without
 * it, so the headers' helpers (element loads and stores, ew.def's expressions) take the kernels'
 * options; only the target is switched after them */
#pragma GCC push_options
#pragma GCC optimize("vect-cost-model=dynamic", "no-trapping-math")
#endif
#include <math.h>

#include "../graph/ew_helpers.h"
#include "kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LATHE_ISA_X86 1
#endif

#define LATHE_ISA_PRAGMA_(x) _Pragma(#x)
#define LATHE_ISA_PRAGMA(x) LATHE_ISA_PRAGMA_(x)

#if defined(__clang__)
#ifdef LATHE_ISA_TARGET
LATHE_ISA_PRAGMA(clang attribute push(__attribute__((target(LATHE_ISA_TARGET))), apply_to = function))
#endif
#elif defined(__GNUC__)
#ifdef LATHE_ISA_TARGET
LATHE_ISA_PRAGMA(GCC target(LATHE_ISA_TARGET))
#endif
#endif

#include "ew_kernels.h"
#include "vmath.h"
#include "act_kernels.h"
#include "reduce_kernels.h"
#include "window_kernels.h"

/* Copies for the full-size results of large fusion regions: non-temporal stores, so a result
 * bigger than the caches does not first read every line it overwrites. */
static void isa_stream_copy(void *dst, const void *src, size_t n) {
#if defined(LATHE_ISA_X86) && LATHE_ISA_LEVEL >= 2
  for (size_t i = 0; i < n; i += 64) _mm512_stream_si512((void *)((char *)dst + i), _mm512_load_si512((const char *)src + i));
#elif defined(LATHE_ISA_X86) && LATHE_ISA_LEVEL >= 1
  for (size_t i = 0; i < n; i += 32)
    _mm256_stream_si256((__m256i *)((char *)dst + i), _mm256_load_si256((const __m256i *)((const char *)src + i)));
#elif defined(LATHE_ISA_X86)
  for (size_t i = 0; i < n; i += 16)
    _mm_stream_si128((__m128i *)((char *)dst + i), _mm_load_si128((const __m128i *)((const char *)src + i)));
#else
  memcpy(dst, src, n);
#endif
}

static void isa_stream_fence(void) {
#ifdef LATHE_ISA_X86
  _mm_sfence();
#endif
}

/* Later entries of .ew replace earlier ones (the vector math over ew.def's libm rows). */
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Winitializer-overrides"
#elif defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
#endif

const lathe_cpu_kernels LATHE_ISA_TABLE = {
    .isa = LATHE_ISA_ENUM,
    .ew =
        {
#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR) EWK_ENTRIES_##KIND(OP, CLASS, RULE, EXPR)
#include "../graph/ew.def"
#undef LATHE_EW
            VMK_ENTRIES
        },
    .cv =
        {
#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR) EWK_CV_ENTRIES_##KIND(OP, CLASS, RULE, EXPR)
#include "../graph/ew.def"
#undef LATHE_EW
        },
    .red =
        {
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) KT_##CLASS##_##bits(ENUM)
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
        },
    .arg =
        {
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) AT_##CLASS##_##bits(ENUM)
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
        },
    .win =
        {
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(WINK_E_##CLASS(ENUM))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
        },
    .stream_copy = isa_stream_copy,
    .stream_fence = isa_stream_fence,
#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR)
    .act_fwd =
        {
#define LATHE_ACT(E, NUM, FORM, FWD, VJP_X, VJP_Y) [NUM] = actk_fwd_##E,
#include "../graph/ew.def"
#undef LATHE_ACT
        },
    .act_vx =
        {
#define LATHE_ACT(E, NUM, FORM, FWD, VJP_X, VJP_Y) [NUM] = actk_vx_##E,
#include "../graph/ew.def"
#undef LATHE_ACT
        },
    .act_vy =
        {
#define LATHE_ACT(E, NUM, FORM, FWD, VJP_X, VJP_Y) [NUM] = actk_vy_rows_##E,
#include "../graph/ew.def"
#undef LATHE_ACT
        },
#undef LATHE_EW
};

#if defined(__clang__)
#pragma clang diagnostic pop
#elif defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#if defined(__clang__)
#ifdef LATHE_ISA_TARGET
#pragma clang attribute pop
#endif
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif
