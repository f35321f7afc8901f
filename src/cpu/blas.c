/* blas.c -- gemm through OpenBLAS's cblas.
 *
 * Threading: OpenBLAS is set to one thread, once, before lathe's first gemm. All parallelism
 * comes from the lathe pool, which splits big products into blocks (see dot.c). Letting OpenBLAS
 * thread as well would put two pools of spinning workers on the same cores (oversubscription
 * whenever several executions or batched products run at once) and would ignore the backend's
 * threads=N option. The setting is process-wide: a host program that also calls OpenBLAS gets
 * single-threaded OpenBLAS too. */
#include "blas.h"

#include <cblas.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void single_thread(void) { openblas_set_num_threads(1); }

static atomic_bool enabled = true;

bool lathe_blas_set_enabled(bool on) { return atomic_exchange(&enabled, on); }

bool lathe_blas_has(lathe_dtype dt) {
  return atomic_load(&enabled) && (dt == LATHE_DTYPE_FLOAT32 || dt == LATHE_DTYPE_FLOAT64 || dt == LATHE_DTYPE_COMPLEX64 ||
         dt == LATHE_DTYPE_COMPLEX128);
}

static int64_t max1(int64_t v) { return v > 1 ? v : 1; }

bool lathe_blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, lathe_blas_mat *out) {
  /* row-major as stored: unit column stride, rows at least cols apart */
  if ((cols <= 1 || cs == 1) && (rows <= 1 || rs >= max1(cols))) {
    *out = (lathe_blas_mat){.trans = false, .ld = rows <= 1 ? max1(cols) : rs};
    return true;
  }
  /* column-major as stored: the transpose is row-major */
  if ((rows <= 1 || rs == 1) && (cols <= 1 || cs >= max1(rows))) {
    *out = (lathe_blas_mat){.trans = true, .ld = cols <= 1 ? max1(rows) : cs};
    return true;
  }
  return false;
}

bool lathe_blas_fits(int64_t m, int64_t n, int64_t k, lathe_blas_mat a, lathe_blas_mat b, int64_t ldc) {
  return m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && a.ld <= INT_MAX && b.ld <= INT_MAX && ldc <= INT_MAX;
}

void lathe_blas_gemm(lathe_dtype dt, int64_t m, int64_t n, int64_t k, const void *a, lathe_blas_mat am,
                     const void *b, lathe_blas_mat bm, void *c, int64_t ldc) {
  pthread_once(&once, single_thread);
  enum CBLAS_TRANSPOSE ta = am.trans ? CblasTrans : CblasNoTrans, tb = bm.trans ? CblasTrans : CblasNoTrans;
  int M = (int)m, N = (int)n, K = (int)k, lda = (int)am.ld, ldb = (int)bm.ld, LDC = (int)ldc;
  switch (dt) {
    case LATHE_DTYPE_FLOAT32:
      cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, LDC);
      break;
    case LATHE_DTYPE_FLOAT64:
      cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, a, lda, b, ldb, 0.0, c, LDC);
      break;
    case LATHE_DTYPE_COMPLEX64: {
      const float one[2] = {1, 0}, zero[2] = {0, 0};
      cblas_cgemm(CblasRowMajor, ta, tb, M, N, K, one, a, lda, b, ldb, zero, c, LDC);
      break;
    }
    case LATHE_DTYPE_COMPLEX128: {
      const double one[2] = {1, 0}, zero[2] = {0, 0};
      cblas_zgemm(CblasRowMajor, ta, tb, M, N, K, one, a, lda, b, ldb, zero, c, LDC);
      break;
    }
    default:
      break; /* callers check lathe_blas_has */
  }
}
