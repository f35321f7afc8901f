/* test_cuda_fused.c -- the fused ops on lathe:cuda against lathe:cpu (SKIP without a GPU):
 * softmax (last, middle and first axes; short and long rows; NaN and -inf rows), gelu, layer norm
 * (trailing and scattered axes, with and without gamma/beta), dense (both weight layouts, every
 * activation), attention and its VJP (layouts, causal, masks, bias, GQA, sequence lengths),
 * the QKV projection, quantized dense (Linear/NF4 with packed sub-byte codes, GGML blocks; few
 * and many rows) and the quantized embedding lookup with its out-of-range error. */
#include <math.h>

#include "core/core.h"
#include "cuda_testing.h"

static const lathe_dtype floats[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT64};

static double tol_of(lathe_dtype dt) {
  switch (dt) {
    case LATHE_DTYPE_FLOAT32: return 1e-4;
    case LATHE_DTYPE_FLOAT64: return 1e-10;
    case LATHE_DTYPE_FLOAT16: return 1e-2;
    case LATHE_DTYPE_BFLOAT16: return 3e-2;
    default: return 0;
  }
}

/* Fills n elements of every parameter and runs agree(). */
static void run_agree(const char *label, lathe_builder_t b, const lathe_shape *shapes, int n_in, double tol) {
  void *ins[8] = {0};
  for (int i = 0; i < n_in; i++) {
    ins[i] = tst_alloc_for(&shapes[i]);
    tst_fill(ins[i], shapes[i].dtype, lathe_shape_num_elements(&shapes[i]), (unsigned)(11 + i));
  }
  agree(label, b, (const void *const *)ins, n_in, tol);
  for (int i = 0; i < n_in; i++) free(ins[i]);
}

TEST(cuda_fused_softmax_gelu) {
  if (!gpu()) SKIP("no usable GPU");
  static const struct {
    int rank, axis;
    int64_t d[3];
  } cases[] = {{2, 1, {7, 13}}, {3, 1, {3, 5, 4}}, {3, 0, {6, 2, 33}}, {2, 1, {3, 5000}}, {2, 1, {200, 1}},
               {1, 0, {1}}, {2, 0, {0, 4}}, {2, 1, {1000, 40}}};
  for (size_t f = 0; f < 4; f++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      lathe_dtype dt = floats[f];
      lathe_shape s = tst_shape(dt, cases[i].rank, cases[i].d);
      for (int op = 0; op < 3; op++) {
        char label[96];
        snprintf(label, sizeof label, "%s case %zu %s", op == 0 ? "softmax" : op == 1 ? "gelu exact" : "gelu tanh", i,
                 lathe_dtype_name(dt));
        lathe_function_t fn;
        lathe_builder_t b = tst_builder("cuda_fused", &fn);
        lathe_value_t x = tst_param(fn, "x", s), y = NULL;
        lathe_status_t st = op == 0 ? lathe_fused_softmax(fn, x, cases[i].axis, &y) : lathe_fused_gelu(fn, x, op == 1, &y);
        if (!tst_built(label, st, b)) continue;
        CHECK_OK(lathe_function_return(fn, &y, 1));
        run_agree(label, b, &s, 1, tol_of(dt));
        lathe_builder_free(b);
      }
    }
  /* rows with NaN and all -inf: the CPU's NaN rules */
  float xv[12] = {1, NAN, 2, 3, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 0, 1, INFINITY, 2};
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("cuda_softmax_nan", &fn);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 4);
  lathe_value_t x = tst_param(fn, "x", s), y;
  CHECK_OK(lathe_fused_softmax(fn, x, 1, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  const void *ins[1] = {xv};
  agree("softmax NaN/-inf rows", b, ins, 1, 1e-6);
  lathe_builder_free(b);
}

TEST(cuda_fused_layer_norm) {
  if (!gpu()) SKIP("no usable GPU");
  static const struct {
    int rank, n_axes;
    int64_t d[4];
    int axes[3];
  } cases[] = {{2, 1, {5, 300}, {1}}, {3, 2, {2, 3, 8}, {1, 2}}, {3, 2, {4, 3, 5}, {2, 0}}, {3, 1, {4, 6, 5}, {1}},
               {2, 1, {3, 4000}, {1}}, {2, 1, {64, 1}, {1}}};
  for (size_t f = 0; f < 4; f++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
      for (int gb = 0; gb < 4; gb++) {
        lathe_dtype dt = floats[f];
        char label[96];
        snprintf(label, sizeof label, "layer norm case %zu gamma=%d beta=%d %s", i, gb & 1, gb >> 1, lathe_dtype_name(dt));
        lathe_shape shapes[3];
        shapes[0] = tst_shape(dt, cases[i].rank, cases[i].d);
        int64_t norm = 1;
        for (int a = 0; a < cases[i].n_axes; a++) norm *= cases[i].d[cases[i].axes[a]];
        int n_in = 1;
        lathe_function_t fn;
        lathe_builder_t b = tst_builder("cuda_ln", &fn);
        lathe_value_t x = tst_param(fn, "x", shapes[0]), g = NULL, be = NULL, y = NULL;
        if (gb & 1) shapes[n_in] = TST_SHAPE(dt, norm), g = tst_param(fn, "gamma", shapes[n_in++]);
        if (gb & 2) shapes[n_in] = TST_SHAPE(dt, norm), be = tst_param(fn, "beta", shapes[n_in++]);
        lathe_status_t st = lathe_fused_layer_norm(fn, x, cases[i].axes, cases[i].n_axes, 1e-5, g, be, &y);
        if (!tst_built(label, st, b)) continue;
        CHECK_OK(lathe_function_return(fn, &y, 1));
        run_agree(label, b, shapes, n_in, tol_of(dt) * 10);
        lathe_builder_free(b);
      }
}

TEST(cuda_fused_dense) {
  if (!gpu()) SKIP("no usable GPU");
  for (size_t f = 0; f < 4; f++)
    for (int layout = 0; layout < 2; layout++)
      for (int act = 0; act <= LATHE_ACTIVATION_TANH; act++)
        for (int bias = 0; bias < 2; bias++) {
          lathe_dtype dt = floats[f];
          char label[96];
          snprintf(label, sizeof label, "dense layout %d act %d bias %d %s", layout, act, bias, lathe_dtype_name(dt));
          /* x [2, 3, 17], weight [17, 4, 5] or [4, 5, 17] */
          lathe_shape shapes[3] = {TST_SHAPE(dt, 2, 3, 17), layout == 0 ? TST_SHAPE(dt, 17, 4, 5) : TST_SHAPE(dt, 4, 5, 17),
                                   TST_SHAPE(dt, 4, 5)};
          lathe_function_t fn;
          lathe_builder_t b = tst_builder("cuda_dense", &fn);
          lathe_value_t x = tst_param(fn, "x", shapes[0]), w = tst_param(fn, "w", shapes[1]), bv = NULL, y = NULL;
          if (bias) bv = tst_param(fn, "b", shapes[2]);
          lathe_status_t st = lathe_fused_dense(fn, x, w, bv, (lathe_activation)act, (lathe_dense_layout)layout, &y);
          if (!tst_built(label, st, b)) continue;
          CHECK_OK(lathe_function_return(fn, &y, 1));
          run_agree(label, b, shapes, bias ? 3 : 2, tol_of(dt) * 10);
          lathe_builder_free(b);
        }
  /* an empty sum (K = 0) and a larger product */
  lathe_dtype dts[2] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_BFLOAT16};
  for (int i = 0; i < 2; i++) {
    lathe_shape shapes[3] = {TST_SHAPE(dts[i], 3, 0), TST_SHAPE(dts[i], 0, 6), TST_SHAPE(dts[i], 6)};
    lathe_function_t fn;
    lathe_builder_t b = tst_builder("cuda_dense0", &fn);
    lathe_value_t x = tst_param(fn, "x", shapes[0]), w = tst_param(fn, "w", shapes[1]), bv = tst_param(fn, "b", shapes[2]), y;
    CHECK_OK(lathe_fused_dense(fn, x, w, bv, LATHE_ACTIVATION_SILU, LATHE_DENSE_INPUT_OUTPUTS, &y));
    CHECK_OK(lathe_function_return(fn, &y, 1));
    run_agree("dense K=0", b, shapes, 3, tol_of(dts[i]));
    lathe_builder_free(b);
    lathe_shape big[2] = {TST_SHAPE(dts[i], 130, 300), TST_SHAPE(dts[i], 70, 300)};
    b = tst_builder("cuda_dense_big", &fn);
    x = tst_param(fn, "x", big[0]), w = tst_param(fn, "w", big[1]);
    CHECK_OK(lathe_fused_dense(fn, x, w, NULL, LATHE_ACTIVATION_GELU, LATHE_DENSE_OUTPUTS_INPUT, &y));
    CHECK_OK(lathe_function_return(fn, &y, 1));
    run_agree("dense big", b, big, 2, tol_of(dts[i]) * 10);
    lathe_builder_free(b);
  }
}

/* FusedDense without an activation: the bias in cuBLASLt's epilogue (dense_bias=1), against the
 * CPU and against the Float32-scratch path (dense_bias=0). x is scaled down (by 1/64, exactly) so
 * that the bias is a good part of each value: a bias lost, doubled or laid along the rows fails
 * even the halves' tolerance. Sizes: aligned; a vocabulary-like width of 201 (rows off 16 bytes:
 * staged on tensor cores, in row blocks with gemm_pad=1); 300 rows of 77. */
static void dense_bias_case(lathe_backend_t g, const char *cfg, lathe_dtype dt, int64_t m, int64_t k, int64_t n, bool io,
                            bool with_bias) {
  char label[160];
  snprintf(label, sizeof label, "dense bias %s %s [%lld x %lld x %lld] %s bias %d", cfg, lathe_dtype_name(dt), (long long)m,
           (long long)k, (long long)n, io ? "io" : "oi", with_bias);
  lathe_shape shapes[3] = {TST_SHAPE(dt, m, k), io ? TST_SHAPE(dt, k, n) : TST_SHAPE(dt, n, k), TST_SHAPE(dt, n)};
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("cuda_dense_bias", &fn);
  lathe_value_t x = tst_param(fn, "x", shapes[0]), w = tst_param(fn, "w", shapes[1]), bv = NULL, y = NULL;
  if (with_bias) bv = tst_param(fn, "b", shapes[2]);
  CHECK_OK(lathe_fused_dense(fn, x, w, bv, LATHE_ACTIVATION_NONE, io ? LATHE_DENSE_INPUT_OUTPUTS : LATHE_DENSE_OUTPUTS_INPUT, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  void *ins[3];
  for (int i = 0; i < 3; i++) {
    int64_t cnt = lathe_shape_num_elements(&shapes[i]);
    ins[i] = tst_alloc_for(&shapes[i]);
    tst_fill(ins[i], dt, cnt, (unsigned)(31 + i));
    for (int64_t j = 0; i == 0 && j < cnt; j++) tst_set(ins[i], dt, j, tst_get(ins[i], dt, j) / 64);
  }
  bool tf32 = strstr(cfg, "tf32=1") && dt == LATHE_DTYPE_FLOAT32;
  agree_on(g, label, b, (const void *const *)ins, with_bias ? 3 : 2, tf32 ? 5e-2 : tol_of(dt) * 10);
  for (int i = 0; i < 3; i++) free(ins[i]);
  lathe_builder_free(b);
}

TEST(cuda_fused_dense_bias) {
  if (!gpu()) SKIP("no usable GPU");
  static lathe_backend_t bk[2];
  static bool tried[2];
  const char *cfgs[4] = {"lathe:cuda", "lathe:cuda,tf32=1", "lathe:cuda,tf32=1,gemm_pad=1", "lathe:cuda,dense_bias=0"};
  lathe_backend_t backs[4] = {gpu(), gpu_tf32(), gpu_once(cfgs[2], &bk[0], &tried[0]), gpu_once(cfgs[3], &bk[1], &tried[1])};
  static const struct {
    int64_t m, k, n;
    bool io;
  } cases[] = {{256, 512, 256, true}, {2048, 512, 201, false}, {300, 64, 77, true}};
  for (int c = 0; c < 4; c++) {
    if (!backs[c]) {
      tst_log("  %s: no backend", cfgs[c]);
      continue;
    }
    for (size_t f = 0; f < 4; f++)
      for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int with_bias = 0; with_bias < 2; with_bias++)
          dense_bias_case(backs[c], cfgs[c], floats[f], cases[i].m, cases[i].k, cases[i].n, cases[i].io, with_bias);
  }
}

/* ---- attention ---- */
typedef struct {
  lathe_attention_layout layout;
  int64_t B, H, Hkv, S, Skv, D;
  bool causal, lens;
  int mask; /* 0 none, 1 Bool [S, Skv], 2 additive rank 4, 3 Bool rank 4 with a broadcast head axis */
  bool bias;
} acase;

static void attention_case(const char *name, lathe_dtype dt, const acase *c) {
  char label[160];
  snprintf(label, sizeof label, "%s %s", name, lathe_dtype_name(dt));
  bool bhsd = c->layout == LATHE_ATTENTION_LAYOUT_BHSD;
  lathe_shape shapes[8];
  int n = 0;
  shapes[n++] = bhsd ? TST_SHAPE(dt, c->B, c->H, c->S, c->D) : TST_SHAPE(dt, c->B, c->S, c->H, c->D);
  shapes[n++] = bhsd ? TST_SHAPE(dt, c->B, c->Hkv, c->Skv, c->D) : TST_SHAPE(dt, c->B, c->Skv, c->Hkv, c->D);
  shapes[n++] = shapes[1];
  shapes[n++] = shapes[0]; /* dOutput */
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("cuda_sdpa", &fn);
  lathe_value_t q = tst_param(fn, "q", shapes[0]), k = tst_param(fn, "k", shapes[1]), v = tst_param(fn, "v", shapes[2]);
  lathe_value_t dout = tst_param(fn, "dout", shapes[3]);
  lathe_attention_config cfg = {.scale = 0, .causal = c->causal};
  if (c->mask) {
    if (c->mask == 1) shapes[n] = TST_SHAPE(LATHE_DTYPE_BOOL, c->S, c->Skv);
    else if (c->mask == 2) shapes[n] = bhsd ? TST_SHAPE(dt, c->B, c->H, c->S, c->Skv) : TST_SHAPE(dt, c->B, c->S, c->H, c->Skv);
    else shapes[n] = bhsd ? TST_SHAPE(LATHE_DTYPE_BOOL, c->B, 1, c->S, c->Skv) : TST_SHAPE(LATHE_DTYPE_BOOL, c->B, c->S, 1, c->Skv);
    cfg.mask = tst_param(fn, "mask", shapes[n++]);
  }
  if (c->bias) {
    /* [1, heads, seq, kvLen]; BSHD takes a bias without heads (GoMLX's backends disagree there) */
    shapes[n] = bhsd ? TST_SHAPE(dt, 1, c->H, c->S, c->Skv) : TST_SHAPE(dt, c->S, c->Skv);
    cfg.bias = tst_param(fn, "bias", shapes[n++]);
  }
  int lens_at = -1;
  if (c->lens) {
    lens_at = n;
    shapes[n] = TST_SHAPE(LATHE_DTYPE_INT32, c->B);
    cfg.query_seq_len = tst_param(fn, "qlen", shapes[n++]);
    shapes[n] = TST_SHAPE(LATHE_DTYPE_INT32, c->B);
    cfg.key_value_seq_len = tst_param(fn, "kvlen", shapes[n++]);
  }
  lathe_value_t fwd[2], grads[3];
  lathe_status_t st = lathe_fused_scaled_dot_product_attention(fn, q, k, v, c->layout, &cfg, fwd);
  if (!st) st = lathe_fused_scaled_dot_product_attention_vjp(fn, q, k, v, c->layout, &cfg, fwd[0], &fwd[1], 1, dout, grads);
  if (!tst_built(label, st, b)) return;
  lathe_value_t outs[5] = {fwd[0], fwd[1], grads[0], grads[1], grads[2]};
  CHECK_OK(lathe_function_return(fn, outs, 5));
  void *ins[8] = {0};
  for (int i = 0; i < n; i++) {
    ins[i] = tst_alloc_for(&shapes[i]);
    tst_fill(ins[i], shapes[i].dtype, lathe_shape_num_elements(&shapes[i]), (unsigned)(21 + i));
  }
  if (c->lens) { /* lengths within and beyond the sizes, and zero */
    int32_t *ql = ins[lens_at], *kl = ins[lens_at + 1];
    for (int64_t i = 0; i < c->B; i++) ql[i] = (int32_t)((i * 3 + 1) % (c->S + 2)), kl[i] = (int32_t)((i * 5 + 2) % (c->Skv + 2));
  }
  /* halves run the streaming kernels (flash.cuh) where the GPU has them, Float32 the batched products */
  agree(label, b, (const void *const *)ins, n, tol_of(dt) * 20);
  /* tf32=1: Float32 streams too. It is held to TF32's bound, as the conformance table holds it
   * (tests/testing.c, with_tf32): the gradients' sums over 77-150 keys of terms that cancel erred
   * by up to 1.5e-2 on the H200 */
  if (dt != LATHE_DTYPE_FLOAT64 && gpu_tf32()) {
    char l2[192];
    snprintf(l2, sizeof l2, "%s tf32", label);
    agree_on(gpu_tf32(), l2, b, (const void *const *)ins, n, dt == LATHE_DTYPE_FLOAT32 ? 5e-2 : tol_of(dt) * 20);
  }
  /* tf32x3=1: Float32 streams with its products split in three, held to Float32's bound */
  static lathe_backend_t x3;
  static bool x3_tried;
  if (dt == LATHE_DTYPE_FLOAT32 && gpu_once("lathe:cuda,tf32x3=1", &x3, &x3_tried)) {
    char l2[192];
    snprintf(l2, sizeof l2, "%s tf32x3", label);
    agree_on(x3, l2, b, (const void *const *)ins, n, tol_of(dt) * 20);
  }
  for (int i = 0; i < n; i++) free(ins[i]);
  lathe_builder_free(b);
}

TEST(cuda_fused_attention) {
  if (!gpu()) SKIP("no usable GPU");
  const lathe_attention_layout BHSD = LATHE_ATTENTION_LAYOUT_BHSD, BSHD = LATHE_ATTENTION_LAYOUT_BSHD;
  const acase cases[] = {
      {BHSD, 2, 3, 3, 5, 7, 8, false, false, 0, false},
      {BSHD, 2, 3, 3, 5, 7, 8, true, false, 0, false},
      {BHSD, 3, 4, 2, 6, 6, 4, true, false, 1, false}, /* GQA, Bool mask [S, Skv] */
      {BSHD, 2, 6, 2, 4, 9, 5, false, false, 2, true}, /* GQA, additive mask, bias */
      {BSHD, 3, 2, 2, 5, 5, 3, false, true, 3, false}, /* lengths, Bool mask broadcast over heads */
      {BHSD, 4, 2, 1, 7, 3, 6, true, true, 0, true},
      {BHSD, 1, 1, 1, 1, 1, 1, false, false, 0, false},
      {BHSD, 2, 2, 2, 70, 130, 16, true, false, 0, false}, /* several 64-row tiles */
      {BSHD, 5, 4, 4, 3, 2, 2, false, false, 0, false},    /* more batches than heads */
      /* the streaming kernels' tiles (64 query rows, 64 keys) and head sizes 32, 64 and 128, with
       * 16-byte loads (D a multiple of 4) and without */
      {BSHD, 2, 4, 2, 130, 130, 64, true, false, 0, false},
      {BSHD, 2, 3, 3, 100, 77, 40, false, true, 2, true},
      {BHSD, 1, 2, 1, 65, 150, 128, false, false, 3, false},
      {BHSD, 2, 2, 2, 33, 70, 30, true, false, 1, false},
  };
  for (size_t f = 0; f < 4; f++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      char name[48];
      snprintf(name, sizeof name, "attention case %zu", i);
      attention_case(name, floats[f], &cases[i]);
    }
}

TEST(cuda_fused_qkv_projection) {
  if (!gpu()) SKIP("no usable GPU");
  for (size_t f = 0; f < 4; f++)
    for (int biases = 0; biases < 8; biases++) {
      lathe_dtype dt = floats[f];
      char label[96];
      snprintf(label, sizeof label, "qkv biases %d %s", biases, lathe_dtype_name(dt));
      int64_t qd = 12, kvd = 5, kin = 19;
      lathe_shape shapes[5] = {TST_SHAPE(dt, 2, 3, kin), TST_SHAPE(dt, kin, qd + 2 * kvd)};
      int n = 2;
      lathe_function_t fn;
      lathe_builder_t b = tst_builder("cuda_qkv", &fn);
      lathe_value_t x = tst_param(fn, "x", shapes[0]), w = tst_param(fn, "w", shapes[1]), bs[3] = {0}, outs[3];
      for (int i = 0; i < 3; i++)
        if (biases & (1 << i)) shapes[n] = TST_SHAPE(dt, i ? kvd : qd), bs[i] = tst_param(fn, i == 0 ? "bq" : i == 1 ? "bk" : "bv", shapes[n++]);
      lathe_status_t st = lathe_fused_attention_qkv_projection(fn, x, w, bs[0], bs[1], bs[2], qd, kvd, outs);
      if (!tst_built(label, st, b)) continue;
      CHECK_OK(lathe_function_return(fn, outs, 3));
      run_agree(label, b, shapes, n, tol_of(dt) * 10);
      lathe_builder_free(b);
    }
}

/* ---- quantized ---- */
/* GGML rows of random bytes whose f16 scales are small and finite. */
static void ggml_fill(lathe_ggml_type t, uint8_t *p, int64_t rows, int64_t row_bytes) {
  static const int scale_at[8][2] = {{0, -1}, {0, -1}, {0, -1}, {80, 82}, {108, -1}, {0, 2}, {0, 2}, {208, -1}};
  uint32_t x = 12345u + (uint32_t)t;
  for (int64_t i = 0; i < rows * row_bytes; i++) x ^= x << 13, x ^= x >> 17, x ^= x << 5, p[i] = (uint8_t)x;
  int bpb = lathe_ggml_block_bytes(t);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t blk = 0; blk < row_bytes / bpb; blk++)
      for (int s = 0; s < 2; s++) {
        if (scale_at[t][s] < 0) continue;
        uint16_t h = lathe_f32_to_f16(0.01f + 0.001f * (float)((r + blk + s) % 50));
        uint8_t *q = p + r * row_bytes + blk * bpb + scale_at[t][s];
        q[0] = (uint8_t)h, q[1] = (uint8_t)(h >> 8);
      }
}

TEST(cuda_quantized_dense) {
  if (!gpu()) SKIP("no usable GPU");
  /* Linear / NF4: codes of every width, scales of every dtype, zero point, bias, activation;
   * 3 rows (the direct kernel) and 40 rows (decode + product) */
  static const lathe_dtype codes[] = {LATHE_DTYPE_INT8, LATHE_DTYPE_UINT8, LATHE_DTYPE_INT4, LATHE_DTYPE_UINT4,
                                      LATHE_DTYPE_INT2, LATHE_DTYPE_UINT2};
  static const lathe_dtype sdts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16};
  for (size_t c = 0; c < sizeof codes / sizeof codes[0]; c++)
    for (int scheme = 0; scheme < 2; scheme++)
      for (int rows = 3; rows <= 40; rows += 37) {
        lathe_dtype sdt = sdts[(c + (size_t)rows) % 3];
        bool zp = scheme == 0 && (c % 2 == 0), bias = c % 3 != 1;
        int64_t K = 37, N = 45, bs = 8, blocks = (N + bs - 1) / bs;
        char label[128];
        snprintf(label, sizeof label, "quantized %s %s rows %d scale %s zp %d", scheme ? "NF4" : "Linear",
                 lathe_dtype_name(codes[c]), rows, lathe_dtype_name(sdt), zp);
        lathe_shape shapes[5] = {TST_SHAPE(LATHE_DTYPE_FLOAT32, rows, K), TST_SHAPE(codes[c], K, N), TST_SHAPE(sdt, K, blocks)};
        int n = 3;
        lathe_function_t fn;
        lathe_builder_t b = tst_builder("cuda_qdense", &fn);
        lathe_value_t x = tst_param(fn, "x", shapes[0]), w = tst_param(fn, "w", shapes[1]), s = tst_param(fn, "s", shapes[2]);
        lathe_value_t z = NULL, bv = NULL, y = NULL;
        if (zp) shapes[n] = TST_SHAPE(sdt, K, blocks), z = tst_param(fn, "zp", shapes[n++]);
        if (bias) shapes[n] = TST_SHAPE(LATHE_DTYPE_FLOAT32, N), bv = tst_param(fn, "bias", shapes[n++]);
        lathe_quantization q = {.scheme = scheme ? LATHE_QUANT_NF4 : LATHE_QUANT_LINEAR, .block_axis = 1, .block_size = bs};
        lathe_status_t st = lathe_fused_quantized_dense(fn, x, w, &q, s, z, bv, (lathe_activation)(c % 6), &y);
        if (!tst_built(label, st, b)) continue;
        CHECK_OK(lathe_function_return(fn, &y, 1));
        run_agree(label, b, shapes, n, 1e-4);
        lathe_builder_free(b);
      }
  /* GGML: every block type, few and many rows */
  for (int t = 0; t < 8; t++)
    for (int rows = 1; rows <= 33; rows += 32) {
      int vpb = lathe_ggml_block_values((lathe_ggml_type)t), bpb = lathe_ggml_block_bytes((lathe_ggml_type)t);
      int64_t K = 2 * vpb, N = 37, rb = 2 * bpb;
      char label[96];
      snprintf(label, sizeof label, "quantized GGML type %d rows %d", t, rows);
      lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, rows, K), ws = TST_SHAPE(LATHE_DTYPE_UINT8, N, rb);
      lathe_function_t fn;
      lathe_builder_t b = tst_builder("cuda_qggml", &fn);
      lathe_value_t x = tst_param(fn, "x", xs), w = tst_param(fn, "w", ws), y = NULL;
      lathe_quantization q = {.scheme = LATHE_QUANT_GGML, .ggml_type = (lathe_ggml_type)t};
      lathe_status_t st = lathe_fused_quantized_dense(fn, x, w, &q, NULL, NULL, NULL, LATHE_ACTIVATION_RELU, &y);
      if (!tst_built(label, st, b)) continue;
      CHECK_OK(lathe_function_return(fn, &y, 1));
      float *xv = tst_alloc_for(&xs);
      uint8_t *wv = tst_alloc_for(&ws);
      tst_fill(xv, LATHE_DTYPE_FLOAT32, rows * K, 31);
      ggml_fill((lathe_ggml_type)t, wv, N, rb);
      const void *ins[2] = {xv, wv};
      agree(label, b, ins, 2, 2e-3); /* K-quant weights reach ~100: f32 sums of 512 terms differ by ~1e-4 */
      free(xv);
      free(wv);
      lathe_builder_free(b);
    }
}

TEST(cuda_quantized_embedding_lookup) {
  if (!gpu()) SKIP("no usable GPU");
  static const lathe_dtype idts[] = {LATHE_DTYPE_INT32, LATHE_DTYPE_INT64, LATHE_DTYPE_UINT8, LATHE_DTYPE_INT8,
                                     LATHE_DTYPE_UINT64, LATHE_DTYPE_INT16, LATHE_DTYPE_UINT32, LATHE_DTYPE_UINT16};
  for (int t = 0; t < 8; t++) {
    int64_t vocab = 9, bpb = lathe_ggml_block_bytes((lathe_ggml_type)t), rb = 2 * bpb;
    lathe_dtype idt = idts[t];
    lathe_shape ds = TST_SHAPE(LATHE_DTYPE_UINT8, vocab, rb), is = TST_SHAPE(idt, 2, 3, 1);
    lathe_function_t fn;
    lathe_builder_t b = tst_builder("cuda_qlookup", &fn);
    lathe_value_t d = tst_param(fn, "d", ds), ix = tst_param(fn, "i", is), y;
    lathe_quantization q = {.scheme = LATHE_QUANT_GGML, .ggml_type = (lathe_ggml_type)t};
    CHECK_OK(lathe_quantized_embedding_lookup(fn, d, ix, &q, &y));
    CHECK_OK(lathe_function_return(fn, &y, 1));
    uint8_t *dv = tst_alloc_for(&ds);
    ggml_fill((lathe_ggml_type)t, dv, vocab, rb);
    void *iv = tst_alloc_for(&is);
    for (int i = 0; i < 6; i++) tst_set(iv, idt, i, (double)((i * 4 + t) % vocab));
    const void *ins[2] = {dv, iv};
    char label[64];
    snprintf(label, sizeof label, "lookup type %d %s", t, lathe_dtype_name(idt));
    agree(label, b, ins, 2, 1e-6);
    /* an index out of range fails the execution */
    tst_set(iv, idt, 4, (double)vocab);
    lathe_executable_t e = NULL;
    CHECK_OK(lathe_builder_compile_for(b, gpu(), &e));
    lathe_buffer_t bufs[2] = {0}, out = NULL;
    lathe_shape shp[2] = {ds, is};
    for (int i = 0; i < 2; i++)
      CHECK_OK(lathe_buffer_from_host(gpu(), 0, &shp[i], ins[i], (size_t)lathe_shape_byte_size(&shp[i]), &bufs[i]));
    lathe_status_t st = e ? lathe_executable_execute(e, bufs, NULL, 2, 0, &out, 1) : NULL;
    float tmp[6 * 512];
    if (!st && out) st = lathe_buffer_to_host(out, tmp, sizeof(float) * 6 * (size_t)(2 * lathe_ggml_block_values((lathe_ggml_type)t)));
    CHECK(st && lathe_status_code_of(st) == LATHE_STATUS_INVALID_ARGUMENT && strstr(lathe_status_message(st), "out of range [0, 9)"),
          "%s: an index out of range: want INVALID_ARGUMENT, got %s", label, st ? lathe_status_message(st) : "success");
    lathe_status_free(st);
    lathe_buffer_free(out);
    lathe_buffer_free(bufs[0]);
    lathe_buffer_free(bufs[1]);
    lathe_executable_free(e);
    free(dv);
    free(iv);
    lathe_builder_free(b);
  }
}
