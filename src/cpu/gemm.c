/* gemm.c -- lathe's own packed Float32 (and BFloat16) matrix product.
 *
 * Goto/BLIS structure, with every thread sharing one packed copy of each operand:
 *  1. A is packed into micro-panels of MR rows, [MR][k] per block of KC values of k (rows KA
 *     apart); B into micro-panels of NR columns, [k][NR]. Rows and columns past the edge are zeros. The panels
 *     are packing tasks for the pool (one parallel_for), so packing is not repeated per thread.
 *  2. c is cut into tiles of about MC x NC; each tile is a task (a second parallel_for) that walks
 *     the k blocks in order, and in each, B micro-panels (kept in L1 across the A panels of the
 *     tile) against A micro-panels (the tile's A block stays in L2). The first k block stores,
 *     later ones add: every element of c sums its k blocks in the same order for any thread count.
 * The micro-kernel keeps an MR x NR block of c in vector registers; it is chosen at run time by
 * cpuid (__builtin_cpu_supports), each compiled for its ISA with target attributes, so the engine
 * itself needs no -march. */
#include "gemm.h"

#include <pthread.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define LATHE_GEMM_X86 1
#include <immintrin.h>
#endif

/* A micro-kernel: c[mr x nr] (= or +=) a[MR][kc] . b[kc][NR] (A's rows KA apart, whatever kc is,
 * so that the kernel addresses them with constant offsets from one pointer); mr <= MR and nr <= NR
 * select the part of the register block that is stored. */
typedef void (*kern_fn)(int64_t kc, const void *a, const void *b, float *c, int64_t ldc, int mr, int nr, bool acc);

typedef struct kern {
  const char *isa;
  int mr, nr;
  kern_fn f;
  kern_fn by[15]; /* by[r], 1 <= r <= mr: the kernel for a panel of r rows (f, or a shorter one) */
} kern;

/* KC: the block of k. KA: the distance between A's packed rows, a cache line more than KC so
 * that the rows of a panel do not all fall in the same L1 set. */
enum { KC = 256, KA = KC + 16 };
enum { NR_MAX = 32 }; /* the widest kernel's NR */
/* Products with few rows keep all of them in one tile row, so each B panel is used by one tile
 * only: that tile packs it into an L1 buffer just before use, instead of a shared pass writing
 * all of B out and reading it back (for a weight matrix times a few hundred rows, B's memory
 * traffic is most of the product's time). Up to M_STREAM_ALWAYS rows always; up to M_STREAM
 * when B has panels enough for 3 tiles per thread (the tiles then split only B's columns).
 * Measured on 2 threads (docs/BENCHMARKS.md): 128..1024 rows x 768..3072 gain 5-25%. */
enum { M_STREAM_ALWAYS = 256, M_STREAM = 1024 };
/* Tiles of c: about MC x NC (A's block of a tile stays in L2; MC/MR B micro-panels in L1). */
enum { MC = 112, NC = 512 };

#ifdef LATHE_GEMM_X86
/* ---- AVX-512: 14 x 32 (28 zmm accumulators, two B vectors, one broadcast) ---- */
#define R14(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
#define Z512(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = _mm512_setzero_ps();
#define F512(r)                                     \
  if (r < ROWS_) {                                  \
    __m512 ar = _mm512_set1_ps(a[r * KA + q]);      \
    c##r##0 = _mm512_fmadd_ps(ar, b0, c##r##0);      \
    c##r##1 = _mm512_fmadd_ps(ar, b1, c##r##1);      \
  }
#define S512(r)                                                                              \
  if (r < ROWS_ && r < mr) {                                                                 \
    float *cr = c + (int64_t)r * ldc;                                                        \
    if (acc) {                                                                               \
      c##r##0 = _mm512_add_ps(c##r##0, _mm512_maskz_loadu_ps(m0, cr));                       \
      c##r##1 = _mm512_add_ps(c##r##1, _mm512_maskz_loadu_ps(m1, cr + 16));                  \
    }                                                                                        \
    _mm512_mask_storeu_ps(cr, m0, c##r##0);                                                  \
    _mm512_mask_storeu_ps(cr + 16, m1, c##r##1);                                             \
  }
/* The kernel for up to ROWS rows of the panel (mr <= ROWS): a partial last panel of A runs a
 * shorter one instead of multiplying zero rows. Every element is the same chain of fused
 * multiply-adds in any of them, so results do not depend on which one computes it. */
#define KERN512(NAME, ROWS)                                                                        \
  __attribute__((target("avx512f"))) static void NAME(int64_t kc, const void *va, const void *vb, float *c, \
                                                      int64_t ldc, int mr, int nr, bool acc) {     \
    enum { ROWS_ = ROWS };                                                                         \
    const float *a = va, *b = vb;                                                                  \
    R14(Z512)                                                                                      \
    for (int64_t q = 0; q < kc; q++) {                                                             \
      __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);                                 \
      R14(F512)                                                                                    \
      b += 32;                                                                                     \
    }                                                                                              \
    __mmask16 m0 = (__mmask16)(nr >= 16 ? 0xffff : (1u << nr) - 1);                                \
    __mmask16 m1 = (__mmask16)(nr >= 32 ? 0xffff : nr > 16 ? (1u << (nr - 16)) - 1 : 0);           \
    R14(S512)                                                                                      \
  }
KERN512(kern_avx512, 14)
KERN512(kern_avx512_r8, 8)
KERN512(kern_avx512_r4, 4)
KERN512(kern_avx512_r2, 2)

/* ---- AVX512-BF16: 14 x 32 with vdpbf16ps. A's rows hold BFloat16 values in k order, so one 32-bit
 * broadcast is the pair (k, k+1) of a row; B's panels hold, per pair of k, each column's pair. ---- */
__attribute__((target("avx512f,avx512bf16"))) static void kern_bf16(int64_t kc, const void *va, const void *vb,
                                                                     float *c, int64_t ldc, int mr, int nr, bool acc) {
  enum { ROWS_ = 14 };
  const uint16_t *a = va, *b = vb;
  R14(Z512)
#define FBF(r)                                                                      \
  {                                                                                 \
    uint32_t w;                                                                     \
    memcpy(&w, a + r * KA + 2 * q, sizeof w);                                       \
    __m512bh ar = (__m512bh)_mm512_set1_epi32((int)w);                              \
    c##r##0 = _mm512_dpbf16_ps(c##r##0, ar, b0);                                    \
    c##r##1 = _mm512_dpbf16_ps(c##r##1, ar, b1);                                    \
  }
  for (int64_t q = 0, pairs = (kc + 1) / 2; q < pairs; q++) {
    __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 32);
    R14(FBF)
    b += 64;
  }
  __mmask16 m0 = (__mmask16)(nr >= 16 ? 0xffff : (1u << nr) - 1);
  __mmask16 m1 = (__mmask16)(nr >= 32 ? 0xffff : nr > 16 ? (1u << (nr - 16)) - 1 : 0);
  R14(S512)
}

/* ---- AVX2 + FMA: 6 x 16 (12 ymm accumulators) ---- */
#define R6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define Z256(r) __m256 c##r##0 = _mm256_setzero_ps(), c##r##1 = _mm256_setzero_ps();
#define F256(r)                                      \
  if (r < ROWS_) {                                   \
    __m256 ar = _mm256_broadcast_ss(a + r * KA + q); \
    c##r##0 = _mm256_fmadd_ps(ar, b0, c##r##0);       \
    c##r##1 = _mm256_fmadd_ps(ar, b1, c##r##1);       \
  }
#define S256(r)                                                  \
  if (r < ROWS_ && r < mr) {                                     \
    float *cr = c + (int64_t)r * ldc;                            \
    if (acc) {                                                   \
      c##r##0 = _mm256_add_ps(c##r##0, _mm256_loadu_ps(cr));     \
      c##r##1 = _mm256_add_ps(c##r##1, _mm256_loadu_ps(cr + 8)); \
    }                                                            \
    _mm256_storeu_ps(cr, c##r##0);                               \
    _mm256_storeu_ps(cr + 8, c##r##1);                           \
  }
#define T256(r) _mm256_store_ps(t[r], c##r##0), _mm256_store_ps(t[r] + 8, c##r##1);
#define KERN256(NAME, ROWS)                                                                        \
  __attribute__((target("avx2,fma"))) static void NAME(int64_t kc, const void *va, const void *vb, float *c, \
                                                       int64_t ldc, int mr, int nr, bool acc) {    \
    enum { ROWS_ = ROWS };                                                                         \
    const float *a = va, *b = vb;                                                                  \
    R6(Z256)                                                                                       \
    for (int64_t q = 0; q < kc; q++) {                                                             \
      __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);                                   \
      R6(F256)                                                                                     \
      b += 16;                                                                                     \
    }                                                                                              \
    if (nr == 16) {                                                                                \
      R6(S256)                                                                                     \
      return;                                                                                      \
    }                                                                                              \
    _Alignas(32) float t[6][16];                                                                   \
    R6(T256)                                                                                       \
    for (int r = 0; r < mr; r++)                                                                   \
      for (int j = 0; j < nr; j++) c[r * ldc + j] = acc ? c[r * ldc + j] + t[r][j] : t[r][j];      \
  }
KERN256(kern_avx2, 6)
KERN256(kern_avx2_r4, 4)
KERN256(kern_avx2_r2, 2)

static const kern k_avx512 = {"avx512", 14, 32, kern_avx512,
                              {NULL, kern_avx512_r2, kern_avx512_r2, kern_avx512_r4, kern_avx512_r4, kern_avx512_r8,
                               kern_avx512_r8, kern_avx512_r8, kern_avx512_r8, kern_avx512, kern_avx512, kern_avx512,
                               kern_avx512, kern_avx512, kern_avx512}};
static const kern k_avx2 = {"avx2", 6, 16, kern_avx2, {NULL, kern_avx2_r2, kern_avx2_r2, kern_avx2_r4, kern_avx2_r4, kern_avx2, kern_avx2}};
static const kern k_bf16 = {"avx512bf16", 14, 32, kern_bf16,
                            {NULL, kern_bf16, kern_bf16, kern_bf16, kern_bf16, kern_bf16, kern_bf16, kern_bf16,
                             kern_bf16, kern_bf16, kern_bf16, kern_bf16, kern_bf16, kern_bf16, kern_bf16}};
#endif

/* dst[c*dld + r] = src[r*sld + c] for r < rows, c < cols: a transposing copy, for operands whose
 * packed panels run across their contiguous axis (A read column-major, B read row-major by
 * columns: the backward products' x^T.dy and dy.W^T). */
static void transpose_scalar(const float *src, int64_t sld, float *dst, int64_t dld, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) dst[c * dld + r] = src[r * sld + c];
}

#ifdef LATHE_GEMM_X86
/* The same in 8 x 8 blocks transposed in AVX registers; a block at an edge loads and stores only
 * its valid lanes (masked), so no element outside either matrix is touched. */
__attribute__((target("avx2"))) static void transpose_avx2(const float *src, int64_t sld, float *dst, int64_t dld,
                                                            int64_t rows, int64_t cols) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t r0 = 0; r0 < rows; r0 += 8) {
    int h = rows - r0 < 8 ? (int)(rows - r0) : 8;
    __m256i hm = _mm256_cmpgt_epi32(_mm256_set1_epi32(h), lane);
    for (int64_t c0 = 0; c0 < cols; c0 += 8) {
      int w = cols - c0 < 8 ? (int)(cols - c0) : 8;
      const float *s = src + r0 * sld + c0;
      __m256 x[8];
      if (w == 8) {
        for (int i = 0; i < 8; i++) x[i] = i < h ? _mm256_loadu_ps(s + i * sld) : _mm256_setzero_ps();
      } else {
        __m256i wm = _mm256_cmpgt_epi32(_mm256_set1_epi32(w), lane);
        for (int i = 0; i < 8; i++) x[i] = i < h ? _mm256_maskload_ps(s + i * sld, wm) : _mm256_setzero_ps();
      }
      __m256 t0 = _mm256_unpacklo_ps(x[0], x[1]), t1 = _mm256_unpackhi_ps(x[0], x[1]);
      __m256 t2 = _mm256_unpacklo_ps(x[2], x[3]), t3 = _mm256_unpackhi_ps(x[2], x[3]);
      __m256 t4 = _mm256_unpacklo_ps(x[4], x[5]), t5 = _mm256_unpackhi_ps(x[4], x[5]);
      __m256 t6 = _mm256_unpacklo_ps(x[6], x[7]), t7 = _mm256_unpackhi_ps(x[6], x[7]);
      __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
      __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
      __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
      __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
      __m256 y[8] = {_mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20),
                     _mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20),
                     _mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31),
                     _mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31)};
      float *d = dst + c0 * dld + r0;
      if (h == 8)
        for (int i = 0; i < w; i++) _mm256_storeu_ps(d + i * dld, y[i]);
      else
        for (int i = 0; i < w; i++) _mm256_maskstore_ps(d + i * dld, hm, y[i]);
    }
  }
}
#endif

#ifdef LATHE_GEMM_X86
/* dst[q*nr + j] = src[q*sld + j] for q < rows and j < nr, nr 16 or 32 (a whole B panel of
 * row-major B): vector loads and aligned stores inline, instead of a library memcpy per row. */
__attribute__((target("avx512f"))) static void copy_rows_avx512(const float *src, int64_t sld, float *dst, int nr,
                                                                 int64_t rows) {
  for (int64_t q = 0; q < rows; q++, src += sld, dst += nr)
    for (int j = 0; j < nr; j += 16) _mm512_store_ps(dst + j, _mm512_loadu_ps(src + j));
}
__attribute__((target("avx2"))) static void copy_rows_avx2(const float *src, int64_t sld, float *dst, int nr,
                                                            int64_t rows) {
  for (int64_t q = 0; q < rows; q++, src += sld, dst += nr)
    for (int j = 0; j < nr; j += 8) _mm256_store_ps(dst + j, _mm256_loadu_ps(src + j));
}
#endif

typedef void (*transpose_fn)(const float *src, int64_t sld, float *dst, int64_t dld, int64_t rows, int64_t cols);
static transpose_fn transpose_f32 = transpose_scalar; /* set with the kernel (pick_kernel) */

static transpose_fn pick_transpose(void) {
#ifdef LATHE_GEMM_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) return transpose_avx2;
#endif
  return transpose_scalar;
}

/* The best kernel this CPU runs. */
static const kern *pick(void) {
#ifdef LATHE_GEMM_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return &k_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &k_avx2;
#endif
  return NULL;
}

static pthread_once_t pick_once = PTHREAD_ONCE_INIT;
static const kern *best;
static _Atomic(const kern *) forced; /* test hook: a kernel in place of the best one */
static atomic_bool is_forced;
static void pick_kernel(void) {
  best = pick();
  transpose_f32 = pick_transpose();
}

static const kern *kernel(void) {
  pthread_once(&pick_once, pick_kernel);
  return atomic_load(&is_forced) ? atomic_load(&forced) : best;
}

const char *lathe_gemm_isa(void) {
  const kern *k = kernel();
  return k ? k->isa : NULL;
}

bool lathe_gemm_force_isa(const char *isa) {
  pthread_once(&pick_once, pick_kernel);
  if (!isa) {
    atomic_store(&is_forced, false);
    return true;
  }
  const kern *k = NULL;
  if (strcmp(isa, "none") != 0) {
#ifdef LATHE_GEMM_X86
    if (!strcmp(isa, "avx512") && best == &k_avx512) k = &k_avx512;
    if (!strcmp(isa, "avx2") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) k = &k_avx2;
#endif
    if (!k) return false;
  }
  atomic_store(&forced, k);
  atomic_store(&is_forced, true);
  return true;
}

/* ---- packing ---- */

typedef struct gemm {
  const kern *kn;
  bool bf16;                /* BFloat16 operands (2-byte elements, k padded to pairs) */
  int64_t m, n, k, kcs;     /* kcs: the k block (KC, or k when smaller) */
  int64_t kcp;              /* kcs rounded up to the kernel's step (pairs for BFloat16) */
  int64_t npc, npm, npn;    /* k blocks, MR panels, NR panels */
  const void *a, *b;
  int64_t ars, aks, brs, bcs;
  float *c;
  int64_t ldc;
  const lathe_gemm_epilogue *ep; /* or NULL */
  char *pa, *pb;            /* packed panels: [pc][panel]; A [MR][KA], B [kcp][NR] */
  int64_t mcp, ncp, tm, tn; /* tiles: MR panels x NR panels each; tile rows x columns */
  bool stream_b;            /* one tile row: each tile packs its own B panels as it uses them */
} gemm;

static size_t esz(const gemm *g) { return g->bf16 ? 2 : 4; }
static int64_t kc_of(const gemm *g, int64_t pc) { return g->k - pc * g->kcs < g->kcs ? g->k - pc * g->kcs : g->kcs; }

/* A's panel: rows of k values, KA apart; past the edge and the last odd k, zeros. */
#define PACK_A(T)                                                                                    \
  static void pack_a_##T(const gemm *g, int64_t pc, int64_t ip) {                                    \
    int MR = g->kn->mr;                                                                              \
    int64_t k0 = pc * g->kcs, kc = kc_of(g, pc), kp = g->bf16 ? (kc + 1) / 2 * 2 : kc;               \
    int64_t i0 = ip * MR;                                                                            \
    int rows = g->m - i0 < MR ? (int)(g->m - i0) : MR;                                               \
    T *d = (T *)g->pa + (pc * g->npm + ip) * MR * KA;                                                \
    const T *s = (const T *)g->a + i0 * g->ars + k0 * g->aks;                                        \
    if (g->aks == 1) {                                                                               \
      for (int r = 0; r < rows; r++) memcpy(d + r * KA, s + r * g->ars, sizeof(T) * (size_t)kc);     \
    } else if (PACK_A_T_##T) {                                                                       \
      transpose_f32((const float *)s, g->aks, (float *)d, KA, kc, rows);                             \
    } else {                                                                                         \
      for (int64_t q = 0; q < kc; q++) {                                                             \
        const T *sq = s + q * g->aks;                                                                \
        for (int r = 0; r < rows; r++) d[r * KA + q] = sq[r * g->ars];                               \
      }                                                                                              \
    }                                                                                                \
    for (int r = 0; r < rows; r++)                                                                   \
      for (int64_t q = kc; q < kp; q++) d[r * KA + q] = 0;                                           \
    for (int r = rows; r < MR; r++) memset(d + r * KA, 0, sizeof(T) * (size_t)kp);                   \
  }
/* A column-major (rows of A contiguous in the source's columns): a transposing copy, Float32 only */
#define PACK_A_T_float (g->ars == 1)
#define PACK_A_T_uint16_t false
PACK_A(float)
PACK_A(uint16_t)

/* B's panel, Float32: [k][NR]. */
static void pack_b_float(const gemm *g, int64_t pc, int64_t jp, void *dst) {
  int NR = g->kn->nr;
  int64_t k0 = pc * g->kcs, kc = kc_of(g, pc), j0 = jp * NR;
  int cols = g->n - j0 < NR ? (int)(g->n - j0) : NR;
  float *d = dst;
  const float *s = (const float *)g->b + k0 * g->brs + j0 * g->bcs;
  if (g->bcs == 1) {
#ifdef LATHE_GEMM_X86
    if (cols == NR && NR == 32) return copy_rows_avx512(s, g->brs, d, NR, kc);
    if (cols == NR && NR == 16) return copy_rows_avx2(s, g->brs, d, NR, kc);
#endif
    for (int64_t q = 0; q < kc; q++) {
      memcpy(d + q * NR, s + q * g->brs, sizeof(float) * (size_t)cols);
      for (int j = cols; j < NR; j++) d[q * NR + j] = 0;
    }
    return;
  }
  if (g->brs == 1) {
    transpose_f32(s, g->bcs, d, NR, cols, kc);
  } else {
    for (int j = 0; j < cols; j++) {
      const float *sj = s + j * g->bcs;
      for (int64_t q = 0; q < kc; q++) d[q * NR + j] = sj[q * g->brs];
    }
  }
  if (cols < NR)
    for (int64_t q = 0; q < kc; q++)
      for (int j = cols; j < NR; j++) d[q * NR + j] = 0;
}

/* B's panel, BFloat16: [k/2][NR][2], the pair (k, k+1) of each column together. */
static void pack_b_uint16_t(const gemm *g, int64_t pc, int64_t jp, void *dst) {
  int NR = g->kn->nr;
  int64_t k0 = pc * g->kcs, kc = kc_of(g, pc), j0 = jp * NR;
  int cols = g->n - j0 < NR ? (int)(g->n - j0) : NR;
  uint16_t *d = dst;
  const uint16_t *s = (const uint16_t *)g->b + k0 * g->brs + j0 * g->bcs;
  for (int64_t q = 0; q < kc; q += 2) {
    uint16_t *dq = d + q * NR;
    const uint16_t *s0 = s + q * g->brs, *s1 = s0 + g->brs;
    bool two = q + 1 < kc;
    for (int j = 0; j < cols; j++) dq[2 * j] = s0[j * g->bcs], dq[2 * j + 1] = two ? s1[j * g->bcs] : 0;
    for (int j = cols; j < NR; j++) dq[2 * j] = dq[2 * j + 1] = 0;
  }
}

static void pack_b(const gemm *g, int64_t pc, int64_t jp, void *dst) {
  if (g->bf16) pack_b_uint16_t(g, pc, jp, dst);
  else pack_b_float(g, pc, jp, dst);
}

static void pack_tasks(void *vg, int64_t t0, int64_t t1) {
  const gemm *g = vg;
  int64_t na = g->npc * g->npm;
  for (int64_t t = t0; t < t1; t++) {
    if (t < na) {
      if (g->bf16) pack_a_uint16_t(g, t / g->npm, t % g->npm);
      else pack_a_float(g, t / g->npm, t % g->npm);
    } else {
      int64_t pc = (t - na) / g->npn, jp = (t - na) % g->npn;
      pack_b(g, pc, jp, g->pb + (size_t)((pc * g->npn + jp) * g->kn->nr * g->kcp) * esz(g));
    }
  }
}

/* Prefetches into L2 part `part` of `parts` of the source lines of B's panel (pc, jp) (B row- or
 * column-major), so that packing that panel next finds them there: the stream_b loop spreads these
 * over the kernel calls of the panel before, which overlaps B's memory traffic with computing. */
static void prefetch_b(const gemm *g, int64_t pc, int64_t jp, int64_t part, int64_t parts) {
  int64_t NR = g->kn->nr, es = (int64_t)esz(g);
  int64_t k0 = pc * g->kcs, kc = kc_of(g, pc), j0 = jp * NR, cols = g->n - j0 < NR ? g->n - j0 : NR;
  int64_t rows, bytes, stride;
  if (g->bcs == 1) rows = kc, bytes = cols * es, stride = g->brs * es;
  else if (g->brs == 1) rows = cols, bytes = kc * es, stride = g->bcs * es;
  else return;
  const char *s = (const char *)g->b + (k0 * g->brs + j0 * g->bcs) * es;
  for (int64_t r = rows * part / parts, r1 = rows * (part + 1) / parts; r < r1; r++) {
    const char *p = s + r * stride;
    for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 2);
    __builtin_prefetch(p + bytes - 1, 0, 2); /* the last line, when p is not 64-byte aligned */
  }
}

static void tile_tasks(void *vg, int64_t t0, int64_t t1) {
  const gemm *g = vg;
  int MR = g->kn->mr, NR = g->kn->nr;
  size_t es = esz(g);
  kern_fn f = g->kn->f;
  _Alignas(64) char bbuf[KC * NR_MAX * 4]; /* B's panel when packed here (stream_b) */
  for (int64_t t = t0; t < t1; t++) {
    int64_t ti = t / g->tn, tj = t % g->tn;
    int64_t ip0 = ti * g->mcp, ip1 = ip0 + g->mcp < g->npm ? ip0 + g->mcp : g->npm;
    int64_t jp0 = tj * g->ncp, jp1 = jp0 + g->ncp < g->npn ? jp0 + g->ncp : g->npn;
    /* A last panel of 1 or 2 rows runs with the full one before it as two halves (8 + 8 rows
     * of 16 on AVX-512, 4 + 4 of 8 on AVX2): the 2-row kernel has 4 accumulators, too few to
     * hide the multiply-add latency, and runs at half speed. A's panels lie one after another,
     * KA apart row by row, so the second half reads across the panel boundary. Each element is
     * still the same chain of multiply-adds. */
    bool merge = !g->bf16 && ip1 - ip0 >= 2 && ip1 == g->npm && g->m - (ip1 - 1) * MR <= 2;
    for (int64_t pc = 0; pc < g->npc; pc++) {
      int64_t kc = kc_of(g, pc);
      for (int64_t jp = jp0; jp < jp1; jp++) {
        const char *pb;
        if (g->stream_b) {
          pack_b(g, pc, jp, bbuf);
          pb = bbuf;
        } else {
          pb = g->pb + (size_t)((pc * g->npn + jp) * NR * g->kcp) * es;
        }
        int nr = g->n - jp * NR < NR ? (int)(g->n - jp * NR) : NR;
        /* the panel this tile packs next (stream_b) */
        int64_t pcn = jp + 1 < jp1 ? pc : pc + 1, jpn = jp + 1 < jp1 ? jp + 1 : jp0;
        bool pre = g->stream_b && pcn < g->npc;
        for (int64_t ip = ip0; ip < ip1 - (merge ? 2 : 0); ip++) {
          int mr = g->m - ip * MR < MR ? (int)(g->m - ip * MR) : MR;
          if (pre) prefetch_b(g, pcn, jpn, ip - ip0, ip1 - ip0);
          (mr == MR ? f : g->kn->by[mr])(kc, g->pa + (size_t)((pc * g->npm + ip) * MR * KA) * es, pb, g->c + ip * MR * g->ldc + jp * NR, g->ldc, mr,
            nr, pc > 0);
        }
        if (merge) { /* the last full panel and the short one after it, as two halves */
          int64_t ip = ip1 - 2;
          int rows = MR + (int)(g->m - (ip + 1) * MR), h1 = (rows + 1) / 2, h2 = rows - h1;
          const char *pa = g->pa + (size_t)((pc * g->npm + ip) * MR * KA) * es;
          float *c = g->c + ip * MR * g->ldc + jp * NR;
          if (pre) prefetch_b(g, pcn, jpn, ip + 1 - ip0, ip1 - ip0);
          g->kn->by[h1](kc, pa, pb, c, g->ldc, h1, nr, pc > 0);
          g->kn->by[h2](kc, pa + (size_t)h1 * KA * es, pb, c + h1 * g->ldc, g->ldc, h2, nr, pc > 0);
        }
        if (g->ep && pc == g->npc - 1) { /* the column panel of the tile is final and in L1 */
          int64_t i0 = ip0 * MR, i1 = ip1 * MR < g->m ? ip1 * MR : g->m;
          g->ep->fn(g->ep->ctx, g->c + i0 * g->ldc + jp * NR, g->ldc, i0, jp * NR, i1 - i0, nr);
        }
      }
    }
  }
}

enum { SMALL_PACK = 16384 }; /* bytes of packed operands that go on the stack */

/* Below this many multiply-adds a product runs on the caller's thread. */
#define GEMM_PARALLEL_WORK (1 << 20)

static lathe_status_t run(gemm *g, lathe_pool *pool) {
  const kern *kn = g->kn;
  int64_t m = g->m, n = g->n, k = g->k;
  if (m <= 0 || n <= 0) return NULL;
  if (k <= 0) {
    for (int64_t i = 0; i < m; i++) memset(g->c + i * g->ldc, 0, sizeof(float) * (size_t)n);
    if (g->ep) g->ep->fn(g->ep->ctx, g->c, g->ldc, 0, 0, m, n);
    return NULL;
  }
  g->kcs = k < KC ? k : KC;
  g->kcp = g->bf16 ? (g->kcs + 1) / 2 * 2 : g->kcs;
  g->npc = (k + KC - 1) / KC;
  g->npm = (m + kn->mr - 1) / kn->mr;
  g->npn = (n + kn->nr - 1) / kn->nr;
  double work = (double)m * (double)n * (double)k;
  int threads = work < GEMM_PARALLEL_WORK ? 1 : lathe_pool_threads(pool);
  g->stream_b = g->npn > 1 && (m <= M_STREAM_ALWAYS || (m <= M_STREAM && g->npn >= 3 * threads));
  /* A's panels take a multiple of 64 bytes (MR * KA * 4 or 2 is one): B's start aligned, and the
   * kernels load B aligned. Small products pack on the stack; larger ones into blocks from the
   * device's cache of warm pages (a fresh mapping would fault in every page on each run). */
  size_t es = esz(g), na = (size_t)(g->npc * g->npm * kn->mr * KA) * es;
  size_t nb = g->stream_b ? 0 : (size_t)(g->npc * g->npn * kn->nr * g->kcp) * es;
  na = (na + 63) / 64 * 64;
  _Alignas(64) char small[SMALL_PACK];
  size_t bytes = na + nb;
  char *buf = bytes <= SMALL_PACK ? small : lathe_cpu_mem_alloc(bytes);
  if (!buf) return LATHE_OOM("DotGeneral");
  g->pa = buf;
  g->pb = buf + na;
  /* Tiles of about MC x NC, smaller when that leaves threads without work. */
  g->mcp = g->stream_b ? g->npm : (MC + kn->mr - 1) / kn->mr;
  g->ncp = NC / kn->nr;
  for (;;) {
    g->tm = (g->npm + g->mcp - 1) / g->mcp;
    g->tn = (g->npn + g->ncp - 1) / g->ncp;
    if (threads == 1 || g->tm * g->tn >= 3 * threads) break;
    if (g->ncp > (g->stream_b ? 1 : 4)) g->ncp = (g->ncp + 1) / 2;
    else if (g->mcp > 1 && !g->stream_b) g->mcp = (g->mcp + 1) / 2;
    else break;
  }
  int64_t packs = g->npc * (g->npm + (g->stream_b ? 0 : g->npn));
  if (threads == 1) {
    pack_tasks(g, 0, packs);
    tile_tasks(g, 0, g->tm * g->tn);
  } else {
    lathe_parallel_for(pool, packs, 1 + (int64_t)(16384 / (g->kcs * kn->mr)), pack_tasks, g);
    lathe_parallel_for(pool, g->tm * g->tn, 1, tile_tasks, g);
  }
  if (buf != small) lathe_cpu_mem_free(buf, bytes);
  return NULL;
}

lathe_status_t lathe_gemm_f32_ep(lathe_pool *pool, int64_t m, int64_t n, int64_t k, const float *a, int64_t ars,
                                 int64_t aks, const float *b, int64_t brs, int64_t bcs, float *c, int64_t ldc,
                                 const lathe_gemm_epilogue *ep) {
  const kern *kn = kernel();
  if (!kn) return lathe_status_new(LATHE_STATUS_INTERNAL, "DotGeneral: no gemm kernel for this CPU");
  gemm g = {.kn = kn, .m = m, .n = n, .k = k, .a = a, .b = b, .ars = ars, .aks = aks, .brs = brs, .bcs = bcs,
            .c = c, .ldc = ldc, .ep = ep};
  return run(&g, pool);
}

lathe_status_t lathe_gemm_f32(lathe_pool *pool, int64_t m, int64_t n, int64_t k, const float *a, int64_t ars,
                              int64_t aks, const float *b, int64_t brs, int64_t bcs, float *c, int64_t ldc) {
  return lathe_gemm_f32_ep(pool, m, n, k, a, ars, aks, b, brs, bcs, c, ldc, NULL);
}

/* ---- BFloat16 ---- */
static pthread_once_t bf16_once = PTHREAD_ONCE_INIT;
static bool bf16_cpu;
static void bf16_check(void) {
#ifdef LATHE_GEMM_X86
  __builtin_cpu_init();
  bf16_cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#endif
}

bool lathe_gemm_bf16_available(void) {
  pthread_once(&bf16_once, bf16_check);
  /* forcing another kernel (tests) turns the BFloat16 one off too */
  return bf16_cpu && !atomic_load(&is_forced);
}

lathe_status_t lathe_gemm_bf16(lathe_pool *pool, int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t ars,
                               int64_t aks, const uint16_t *b, int64_t brs, int64_t bcs, float *c, int64_t ldc) {
#ifdef LATHE_GEMM_X86
  if (lathe_gemm_bf16_available()) {
    gemm g = {.kn = &k_bf16, .bf16 = true, .m = m, .n = n, .k = k, .a = a, .b = b, .ars = ars, .aks = aks,
              .brs = brs, .bcs = bcs, .c = c, .ldc = ldc};
    return run(&g, pool);
  }
#endif
  return lathe_status_new(LATHE_STATUS_UNIMPLEMENTED, "DotGeneral: no BFloat16 gemm kernel for this CPU");
}
