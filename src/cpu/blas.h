/* blas.h -- the one internal BLAS interface of the CPU device (OpenBLAS's cblas underneath).
 *
 * Matrices are row-major. A matrix of rows x cols whose element (i, j) sits at i*rs + j*cs
 * (element strides) is usable by BLAS when one of the strides is 1 (after ignoring axes of
 * size <= 1); lathe_blas_layout says how. */
#ifndef LATHE_BLAS_H
#define LATHE_BLAS_H

#include <stdbool.h>
#include <stdint.h>

#include "lathe.h"

/* How BLAS reads a strided matrix: trans=false means rows of length cols with leading
 * dimension ld; trans=true means the transpose is stored row-major with leading dimension ld. */
typedef struct lathe_blas_mat {
  bool trans;
  int64_t ld;
} lathe_blas_mat;

/* Whether dt has a BLAS gemm: Float32, Float64, Complex64, Complex128 (and BLAS is enabled). */
bool lathe_blas_has(lathe_dtype dt);
/* Test hook: with BLAS disabled, products of every dtype run on lathe's own loops, so the
 * conformance tests check those too. Process-wide; returns the previous setting. */
bool lathe_blas_set_enabled(bool enabled);
/* OpenBLAS's core ("Haswell", "SkylakeX", "Prescott", ...; "unknown" for another BLAS), and
 * whether its kernels are narrower than the CPU's vectors (a generic fallback). */
const char *lathe_blas_core(void);
bool lathe_blas_generic(void);
/* The vector width, in bits, of the sgemm kernels of an OpenBLAS core named core (128 for the
 * SSE-level and unknown ones). */
int lathe_blas_core_bits(const char *core);
/* Who runs Float32 products: AUTO decides by instruction sets (blas.c); OWN and BLAS force it
 * (tests and benchmarks). Process-wide; returns the previous setting. */
typedef enum lathe_gemm_route { LATHE_GEMM_AUTO, LATHE_GEMM_OWN, LATHE_GEMM_BLAS } lathe_gemm_route;
lathe_gemm_route lathe_blas_set_route(lathe_gemm_route r);
/* Whether Float32 products go to lathe's own kernels (gemm.h) rather than BLAS. */
bool lathe_blas_own_f32(void);
/* Fills *out and returns true if the rows x cols matrix with element strides (rs, cs) can be
 * passed to BLAS as it lies. */
bool lathe_blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, lathe_blas_mat *out);
/* Whether m, n, k and the leading dimensions fit BLAS's int arguments. */
bool lathe_blas_fits(int64_t m, int64_t n, int64_t k, lathe_blas_mat a, lathe_blas_mat b, int64_t ldc);
/* c[m x n] (leading dimension ldc) = a[m x k] . b[k x n], for dt with lathe_blas_has(dt).
 * Pointers are borrowed. Runs on the calling thread only: OpenBLAS's own threads are switched
 * off (see blas.c), so callers parallelise over blocks with the lathe pool. Float32 runs on
 * lathe's own kernels when lathe_blas_own_f32(). */
void lathe_blas_gemm(lathe_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, lathe_blas_mat am,
                     const void *b, lathe_blas_mat bm, void *c, int64_t ldc);

#endif
