/* test_gemm.c -- lathe's own gemm (src/cpu/gemm.c) and the choice between it and BLAS (blas.c). */
#include <math.h>

#include "cpu/blas.h"
#include "cpu/gemm.h"
#include "testing.h"

/* OpenBLAS's core names map to their kernels' vector widths; unknown names count as generic. */
TEST(blas_core_widths) {
  CHECK(lathe_blas_core_bits("Prescott") == 128, "Prescott");
  CHECK(lathe_blas_core_bits("Core2") == 128, "Core2");
  CHECK(lathe_blas_core_bits("generic") == 128, "generic");
  CHECK(lathe_blas_core_bits("Sandybridge") == 256, "Sandybridge");
  CHECK(lathe_blas_core_bits("Haswell") == 256, "Haswell");
  CHECK(lathe_blas_core_bits("ZEN") == 256, "Zen");
  CHECK(lathe_blas_core_bits("SkylakeX") == 512, "SkylakeX");
  CHECK(lathe_blas_core_bits("CooperLake") == 512, "CooperLake");
  CHECK(lathe_blas_core_bits(NULL) == 128, "NULL");
  CHECK(strcmp(lathe_blas_core(), "") != 0, "core name");
}

/* Products go to lathe's kernels whenever OpenBLAS runs narrower ones than the CPU has (a generic
 * fallback), and never to a kernel the CPU lacks. */
TEST(blas_generic_routes_to_own_kernels) {
  const char *isa = lathe_gemm_isa();
  printf("  OpenBLAS core %s (%d-bit), lathe kernels %s, generic %d, own f32 %d, bf16 %d\n", lathe_blas_core(),
         lathe_blas_core_bits(lathe_blas_core()), isa ? isa : "none", lathe_blas_generic(), lathe_blas_own_f32(),
         lathe_gemm_bf16_available());
  if (lathe_blas_generic() && isa) CHECK(lathe_blas_own_f32(), "generic BLAS must route to lathe's kernels");
  if (!isa) CHECK(!lathe_blas_own_f32(), "no kernel: BLAS");
  lathe_gemm_route was = lathe_blas_set_route(LATHE_GEMM_BLAS);
  CHECK(!lathe_blas_own_f32(), "forced BLAS");
  lathe_blas_set_route(LATHE_GEMM_OWN);
  CHECK(lathe_blas_own_f32() == (isa != NULL), "forced own");
  lathe_blas_set_route(was);
  CHECK(!lathe_gemm_force_isa("sse9"), "unknown isa");
}

/* Strided operands, edges of every register block and k block, against a double reference; the
 * result does not depend on the number of threads (same bits with 1 and 3 threads). */
TEST(gemm_f32_strides_and_threads) {
  if (!lathe_gemm_available()) {
    tst_skipf(tst_current, "no gemm kernel for this CPU");
    return;
  }
  lathe_pool *p1 = NULL, *p3 = NULL;
  CHECK_OK(lathe_pool_new(1, &p1));
  CHECK_OK(lathe_pool_new(3, &p3));
  const int64_t shapes[][3] = {{1, 1, 1}, {13, 31, 7}, {29, 65, 257}, {100, 97, 600}, {150, 200, 300}, {270, 100, 300}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
    float *c1 = malloc(sizeof(float) * (size_t)(m * n)), *c3 = malloc(sizeof(float) * (size_t)(m * n));
    uint16_t *ah = malloc(2 * (size_t)(m * k)), *bh = malloc(2 * (size_t)(k * n));
    for (int64_t i = 0; i < m * k; i++) a[i] = (float)((i * 7919) % 23) / 8 - 1.25f;
    for (int64_t i = 0; i < k * n; i++) b[i] = (float)((i * 104729) % 19) / 4 - 2.0f;
    for (int64_t i = 0; i < m * k; i++) ah[i] = lathe_f32_to_bf16(a[i]);
    for (int64_t i = 0; i < k * n; i++) bh[i] = lathe_f32_to_bf16(b[i]);
    /* A column-major (k x m), B row-major (k x n) */
    CHECK_OK(lathe_gemm_f32(p1, m, n, k, a, 1, m, b, n, 1, c1, n));
    CHECK_OK(lathe_gemm_f32(p3, m, n, k, a, 1, m, b, n, 1, c3, n));
    int bad = 0;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double want = 0, mag = 0;
        for (int64_t q = 0; q < k; q++) want += (double)a[q * m + i] * b[q * n + j], mag += fabs((double)a[q * m + i] * b[q * n + j]);
        if (fabs(c1[i * n + j] - want) > 2e-6 * mag + 1e-30) bad++;
      }
    CHECK(bad == 0, "%lldx%lldx%lld: %d elements off", (long long)m, (long long)n, (long long)k, bad);
    CHECK(memcmp(c1, c3, sizeof(float) * (size_t)(m * n)) == 0, "%lldx%lldx%lld: threads change the bits", (long long)m,
          (long long)n, (long long)k);
    if (lathe_gemm_bf16_available()) {
      /* A row-major (m x k), B column-major (n x k); the values are exact in BFloat16 */
      for (int64_t i = 0; i < m; i++)
        for (int64_t q = 0; q < k; q++) ah[i * k + q] = lathe_f32_to_bf16(a[q * m + i]);
      for (int64_t j = 0; j < n; j++)
        for (int64_t q = 0; q < k; q++) bh[j * k + q] = lathe_f32_to_bf16(b[q * n + j]);
      CHECK_OK(lathe_gemm_bf16(p3, m, n, k, ah, k, 1, bh, 1, k, c3, n));
      bad = 0;
      for (int64_t i = 0; i < m * n; i++) bad += fabsf(c3[i] - c1[i]) > 1e-5f * (1 + fabsf(c1[i]));
      CHECK(bad == 0, "bf16 %lldx%lldx%lld: %d elements off", (long long)m, (long long)n, (long long)k, bad);
    }
    free(a), free(b), free(c1), free(c3), free(ah), free(bh);
  }
  lathe_pool_free(p1);
  lathe_pool_free(p3);
}

/* Packing copies values, so every layout of the operands gives the same bits: A row-major,
 * column-major (a transposing pack) or strided both ways, times B row-major, column-major or
 * strided, at shapes that leave partial register blocks, transpose blocks and k blocks. */
TEST(gemm_f32_layouts_same_bits) {
  if (!lathe_gemm_available()) {
    tst_skipf(tst_current, "no gemm kernel for this CPU");
    return;
  }
  lathe_pool *p2 = NULL;
  CHECK_OK(lathe_pool_new(2, &p2));
  const int64_t shapes[][3] = {{1, 1, 1}, {5, 3, 9}, {14, 32, 8}, {15, 33, 17}, {29, 65, 257}, {100, 97, 600}, {64, 1024, 300}, {300, 70, 270}, {400, 300, 100}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    /* each operand stored three ways: row-major, column-major, and row-major inside a matrix twice as wide */
    float *ar = malloc(sizeof(float) * (size_t)(m * k)), *ac = malloc(sizeof(float) * (size_t)(m * k));
    float *as = malloc(sizeof(float) * (size_t)(2 * m * k));
    float *br = malloc(sizeof(float) * (size_t)(k * n)), *bc = malloc(sizeof(float) * (size_t)(k * n));
    float *bs = malloc(sizeof(float) * (size_t)(2 * k * n));
    float *c0 = malloc(sizeof(float) * (size_t)(m * n)), *c1 = malloc(sizeof(float) * (size_t)(m * n));
    for (int64_t i = 0; i < m; i++)
      for (int64_t q = 0; q < k; q++) {
        float v = (float)(((i * 131 + q * 7919) % 41) - 20) / 16;
        ar[i * k + q] = ac[q * m + i] = as[i * 2 * k + 2 * q] = v;
        as[i * 2 * k + 2 * q + 1] = NAN;
      }
    for (int64_t q = 0; q < k; q++)
      for (int64_t j = 0; j < n; j++) {
        float v = (float)(((q * 104729 + j * 31) % 37) - 18) / 8;
        br[q * n + j] = bc[j * k + q] = bs[q * 2 * n + 2 * j] = v;
        bs[q * 2 * n + 2 * j + 1] = NAN;
      }
    CHECK_OK(lathe_gemm_f32(p2, m, n, k, ar, k, 1, br, n, 1, c0, n));
    const float *A[3] = {ar, ac, as}, *B[3] = {br, bc, bs};
    const int64_t ars[3] = {k, 1, 2 * k}, aks[3] = {1, m, 2}, brs[3] = {n, 1, 2 * n}, bcs[3] = {1, k, 2};
    for (int la = 0; la < 3; la++)
      for (int lb = 0; lb < 3; lb++) {
        if (!la && !lb) continue;
        memset(c1, 0xff, sizeof(float) * (size_t)(m * n));
        CHECK_OK(lathe_gemm_f32(p2, m, n, k, A[la], ars[la], aks[la], B[lb], brs[lb], bcs[lb], c1, n));
        CHECK(memcmp(c0, c1, sizeof(float) * (size_t)(m * n)) == 0, "%lldx%lldx%lld: layouts A%d B%d change the bits",
              (long long)m, (long long)n, (long long)k, la, lb);
      }
    free(ar), free(ac), free(as), free(br), free(bc), free(bs), free(c0), free(c1);
  }
  lathe_pool_free(p2);
}

/* A partial last panel of A runs a kernel for fewer rows (one of 1 or 2 rows, with the full panel
 * before it, as two halves across the panel boundary): every row count gives the bits of the
 * same rows computed inside full panels, on each kernel this CPU has. */
TEST(gemm_f32_partial_panels_same_bits) {
  if (!lathe_gemm_available()) {
    tst_skipf(tst_current, "no gemm kernel for this CPU");
    return;
  }
  const char *isas[] = {"avx512", "avx2"};
  const int64_t M = 30, n = 40, k = 300; /* two k blocks, a partial column panel */
  float *a = malloc(sizeof(float) * (size_t)(M * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
  float *full = malloc(sizeof(float) * (size_t)(M * n)), *part = malloc(sizeof(float) * (size_t)(M * n));
  for (int64_t i = 0; i < M * k; i++) a[i] = (float)((i * 7919) % 29) / 7 - 2;
  for (int64_t i = 0; i < k * n; i++) b[i] = (float)((i * 104729) % 31) / 5 - 3;
  for (size_t s = 0; s < sizeof isas / sizeof *isas; s++) {
    if (!lathe_gemm_force_isa(isas[s])) continue;
    CHECK_OK(lathe_gemm_f32(NULL, M, n, k, a, k, 1, b, n, 1, full, n));
    for (int64_t m = 1; m < M; m++) {
      CHECK_OK(lathe_gemm_f32(NULL, m, n, k, a, k, 1, b, n, 1, part, n));
      CHECK(memcmp(full, part, sizeof(float) * (size_t)(m * n)) == 0, "%s: %lld rows change the bits", isas[s],
            (long long)m);
    }
  }
  lathe_gemm_force_isa(NULL);
  free(a), free(b), free(full), free(part);
}
