/* blas.c -- gemm through OpenBLAS's cblas, or through lathe's own kernels (gemm.c).
 *
 * Threading: OpenBLAS is set to one thread, once, before lathe's first gemm. All parallelism
 * comes from the lathe pool, which splits big products into blocks (see dot.c). Letting OpenBLAS
 * thread as well would put two pools of spinning workers on the same cores (oversubscription
 * whenever several executions or batched products run at once) and would ignore the backend's
 * threads=N option. The setting is process-wide: a host program that also calls OpenBLAS gets
 * single-threaded OpenBLAS too.
 *
 * Which kernels run Float32 products: OpenBLAS picks its kernels from the CPU model, once, when
 * it is loaded; an OpenBLAS that does not know the model falls back to generic kernels that are
 * 3-4x slower (Debian's 0.3.21 on some VMs), and lathe never sets OPENBLAS_CORETYPE to steer it.
 * So lathe compares the instruction set of OpenBLAS's core (openblas_get_corename) with what
 * cpuid says the CPU has, and uses its own kernels (gemm.c) when they are at least as wide as
 * OpenBLAS's: with AVX-512 they are its own kernels on every x86 CPU that has it (they measured
 * 1.2-2x OpenBLAS's Haswell core on a Zen 5 VM, docs/BENCHMARKS.md), and with AVX2 whenever
 * OpenBLAS's core is below AVX2. Other dtypes stay with BLAS. */
#include "blas.h"

#include <cblas.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <strings.h>

#include "gemm.h"

/* OpenBLAS's own entry point; weak so that another cblas links too (its core is then unknown). */
extern char *openblas_get_corename(void) __attribute__((weak));

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void single_thread(void) { openblas_set_num_threads(1); }

static atomic_bool enabled = true;

bool lathe_blas_set_enabled(bool on) { return atomic_exchange(&enabled, on); }

bool lathe_blas_has(lathe_dtype dt) {
  return atomic_load(&enabled) && (dt == LATHE_DTYPE_FLOAT32 || dt == LATHE_DTYPE_FLOAT64 || dt == LATHE_DTYPE_COMPLEX64 ||
         dt == LATHE_DTYPE_COMPLEX128);
}

/* ---- what OpenBLAS runs, against what the CPU has ---- */
enum { LVL_SSE, LVL_AVX, LVL_AVX2, LVL_AVX512 }; /* vector bits: 128 << level (AVX and AVX2: 256) */

const char *lathe_blas_core(void) {
  const char *name = openblas_get_corename ? openblas_get_corename() : NULL;
  return name && *name ? name : "unknown";
}

/* OpenBLAS's x86 cores by the widest vectors their sgemm kernels use (names as corename prints
 * them, case-insensitively); anything else counts as SSE-level (Prescott, Core2, Nehalem, Atom,
 * Barcelona, Opteron, generic, ...). */
static int core_level(const char *name) {
  static const char *const avx512[] = {"skylakex", "cooperlake", "sapphirerapids"};
  static const char *const avx2[] = {"haswell", "zen", "skylake", "broadwell"};
  static const char *const avx[] = {"sandybridge", "bulldozer", "piledriver", "steamroller", "excavator"};
  for (size_t i = 0; i < sizeof avx512 / sizeof *avx512; i++)
    if (!strcasecmp(name, avx512[i])) return LVL_AVX512;
  for (size_t i = 0; i < sizeof avx2 / sizeof *avx2; i++)
    if (!strcasecmp(name, avx2[i])) return LVL_AVX2;
  for (size_t i = 0; i < sizeof avx / sizeof *avx; i++)
    if (!strcasecmp(name, avx[i])) return LVL_AVX;
  return LVL_SSE;
}

static int cpu_level(void) {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return LVL_AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return LVL_AVX2;
  if (__builtin_cpu_supports("avx")) return LVL_AVX;
#endif
  return LVL_SSE;
}

int lathe_blas_core_bits(const char *core) {
  static const int bits[] = {128, 256, 256, 512};
  return bits[core_level(core ? core : "")];
}

bool lathe_blas_generic(void) { return core_level(lathe_blas_core()) < cpu_level(); }

static atomic_int route = LATHE_GEMM_AUTO;

lathe_gemm_route lathe_blas_set_route(lathe_gemm_route r) { return (lathe_gemm_route)atomic_exchange(&route, (int)r); }

bool lathe_blas_own_f32(void) {
  const char *isa = lathe_gemm_isa();
  if (!isa) return false;
  switch ((lathe_gemm_route)atomic_load(&route)) {
    case LATHE_GEMM_OWN: return true;
    case LATHE_GEMM_BLAS: return false;
    default: break;
  }
  int own = !strcmp(isa, "avx512") ? LVL_AVX512 : LVL_AVX2;
  return own >= core_level(lathe_blas_core());
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
      if (lathe_blas_own_f32()) {
        lathe_status_t st = lathe_gemm_f32(NULL, m, n, k, a, am.trans ? 1 : am.ld, am.trans ? am.ld : 1, b,
                                           bm.trans ? 1 : bm.ld, bm.trans ? bm.ld : 1, c, ldc);
        if (!st) break;
        lathe_status_free(st); /* no memory for the packed copies: OpenBLAS packs less */
      }
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
