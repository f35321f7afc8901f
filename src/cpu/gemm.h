/* gemm.h -- lathe's own packed matrix product (Float32), with micro-kernels for the CPU it runs on.
 *
 * c[i*ldc + j] = sum_k A(i,k) * B(k,j), where A(i,k) = a[i*ars + k*aks] and B(k,j) = b[k*brs + j*bcs]
 * (element strides, any sign-free layout: row-major, column-major or strided). Both operands are
 * packed once into panels that every thread shares, then the pool computes tiles of c; the sum
 * over k runs in the same order whatever the thread count, so results do not depend on threads.
 * Kernels are picked at run time from cpuid (AVX-512F, else AVX2+FMA); lathe_gemm_available says
 * whether this CPU has one. Float16/BFloat16 operands go through lathe_gemm_f32 after conversion,
 * or through lathe_gemm_bf16 (AVX512-BF16's vdpbf16ps) where the CPU has it. */
#ifndef LATHE_GEMM_H
#define LATHE_GEMM_H

#include "cpu.h"

/* The micro-kernel family in use: "avx512", "avx2" or NULL (no kernel for this CPU). */
const char *lathe_gemm_isa(void);
static inline bool lathe_gemm_available(void) { return lathe_gemm_isa() != NULL; }
/* Test and benchmark hook, process-wide: "avx512", "avx2" (false if this CPU lacks it) or "none"
 * replace the kernel chosen by cpuid; NULL restores it. */
bool lathe_gemm_force_isa(const char *isa);

/* The product above, Float32 in and out, for a CPU with lathe_gemm_available(). pool may be NULL
 * (the caller's thread only). Pointers are borrowed; c must not overlap a or b. Fails only with
 * RESOURCE_EXHAUSTED when the packed copies cannot be allocated (c is then unspecified). */
lathe_status_t lathe_gemm_f32(lathe_pool *pool, int64_t m, int64_t n, int64_t k, const float *a, int64_t ars,
                              int64_t aks, const float *b, int64_t brs, int64_t bcs, float *c, int64_t ldc);

/* Work applied to each finished block of c (all of k summed), while it is in cache: rows
 * [i0, i0 + rows) and columns [j0, j0 + cols) of c, which starts at c[i0*ldc + j0]. Blocks do not
 * overlap and together cover c once; they may run on any thread, in any order. */
typedef struct lathe_gemm_epilogue {
  void (*fn)(void *ctx, float *c, int64_t ldc, int64_t i0, int64_t j0, int64_t rows, int64_t cols);
  void *ctx;
} lathe_gemm_epilogue;

/* lathe_gemm_f32, then ep (which may be NULL) on every block of c. */
lathe_status_t lathe_gemm_f32_ep(lathe_pool *pool, int64_t m, int64_t n, int64_t k, const float *a, int64_t ars,
                                 int64_t aks, const float *b, int64_t brs, int64_t bcs, float *c, int64_t ldc,
                                 const lathe_gemm_epilogue *ep);

/* Whether lathe_gemm_bf16 runs on this CPU (AVX512-BF16). */
bool lathe_gemm_bf16_available(void);
/* The same product with BFloat16 operands (raw bits) and Float32 results: each product of two
 * BFloat16 values is exact in Float32 and the sums are Float32 (vdpbf16ps adds pairs of products;
 * it treats subnormal inputs as zero and rounds to nearest even whatever MXCSR says). */
lathe_status_t lathe_gemm_bf16(lathe_pool *pool, int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t ars,
                               int64_t aks, const uint16_t *b, int64_t brs, int64_t bcs, float *c, int64_t ldc);

#endif
