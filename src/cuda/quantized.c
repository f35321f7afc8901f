/* quantized.c -- FusedQuantizedDense and QuantizedEmbeddingLookup on the GPU.
 *
 * FusedQuantizedDense: a decode kernel turns a panel of output features of the quantized
 * weights into Float32 (Linear/NF4 as [K, panel] from the codes, read packed for 2- and 4-bit
 * dtypes, times the per-block scale plus zero point; GGML as [panel, K] from llama.cpp's block
 * layouts), cuBLASLt multiplies x by it into the panel's output columns, and one pass adds the
 * bias and applies the activation. Panels bound the decoded weights' memory. Few rows of x
 * (single-token inference) take a product kernel that reads the quantized weights directly
 * instead, each weight once.
 * QuantizedEmbeddingLookup decodes one value per thread; an index outside [0, vocab) fails the
 * execution with INVALID_ARGUMENT (the execution's error flag), as lathe:cpu's check does. */
#include <stdio.h>

#include "gemm.h"

static const char quant_src[] =
    "__device__ const float lt_nf4[16] = {\n"
    "    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,\n"
    "    -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,\n"
    "    0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,\n"
    "    0.7229568362236023f, 1.0f};\n"
    "__device__ const float lt_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};\n"
    "LT_DEV float lt_h(const uint8_t *p) { return lt_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }\n"
    "/* Q4_K/Q5_K: 6-bit scale and min j of the 12 packed bytes s */\n"
    "LT_DEV void lt_k4(const uint8_t *s, int j, int *sc, int *mn) {\n"
    "  if (j < 4) { *sc = s[j] & 63; *mn = s[j + 4] & 63; }\n"
    "  else { *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4; *mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4; }\n"
    "}\n"
    "/* value v of a GGML block b of type t (llama.cpp's layouts; the CPU's decoders value by value) */\n"
    "LT_DEV float lt_ggml(int t, const uint8_t *b, int v) {\n"
    "  switch (t) {\n"
    "    case 0: { int q = v < 16 ? (b[2 + v] & 15) : (b[2 + v - 16] >> 4); return lt_h(b) * (float)(q - 8); }\n"
    "    case 1: return lt_h(b) * (float)(int8_t)b[2 + v];\n"
    "    case 2: { int q = v < 16 ? (b[2 + v] & 15) : (b[2 + v - 16] >> 4); return lt_h(b) * lt_iq4nl[q]; }\n"
    "    case 3: {\n"
    "      int h = v >> 7, j = (v >> 5) & 3, s = (v >> 4) & 1, l = v & 15, is = 8 * h + 2 * j + s;\n"
    "      float dl = lt_h(b + 80) * (float)(b[is] & 15), ml = lt_h(b + 82) * (float)(b[is] >> 4);\n"
    "      return dl * (float)((b[16 + 32 * h + 16 * s + l] >> (2 * j)) & 3) - ml;\n"
    "    }\n"
    "    case 4: {\n"
    "      const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;\n"
    "      int h = v >> 7, j = (v >> 5) & 3, s = (v >> 4) & 1, l = v & 15, is = 8 * h + 2 * j + s;\n"
    "      int lo = is < 8 ? sc[is] & 15 : sc[is - 8] >> 4, hi = (sc[8 + is % 4] >> (2 * (is / 4))) & 3;\n"
    "      float dl = lt_h(b + 108) * (float)((lo | hi << 4) - 32);\n"
    "      int bit = 4 * h + j;\n"
    "      return dl * (float)(((qs[32 * h + 16 * s + l] >> (2 * j)) & 3) - ((hm[16 * s + l] >> bit) & 1 ? 0 : 4));\n"
    "    }\n"
    "    case 5:\n"
    "    case 6: {\n"
    "      int c = v >> 6, hf = (v >> 5) & 1, l = v & 31, sc, mn;\n"
    "      lt_k4(b + 4, 2 * c + hf, &sc, &mn);\n"
    "      float dl = lt_h(b) * (float)sc, ml = lt_h(b + 2) * (float)mn;\n"
    "      const uint8_t *qs = b + (t == 5 ? 16 : 48);\n"
    "      int q = (qs[32 * c + l] >> (4 * hf)) & 15;\n"
    "      if (t == 6) q |= ((b[16 + l] >> (2 * c + hf)) & 1) << 4;\n"
    "      return dl * (float)q - ml;\n"
    "    }\n"
    "    default: {\n"
    "      int h = v >> 7, g = (v >> 5) & 3, hf = (v >> 4) & 1, l = v & 15;\n"
    "      const uint8_t *ql = b + 64 * h + 32 * (g & 1) + 16 * hf, *qh = b + 128 + 32 * h + 16 * hf;\n"
    "      float dl = lt_h(b + 208) * (float)(int8_t)b[192 + 8 * h + 2 * g + hf];\n"
    "      return dl * (float)((((ql[l] >> (4 * (g >> 1))) & 15) | ((qh[l] >> (2 * g)) & 3) << 4) - 32);\n"
    "    }\n"
    "  }\n"
    "}\n"
    "/* Linear/NF4 code at flat index at of the [K, N] codes: bits 2, 4 (packed, low bits first) or 8 */\n"
    "LT_DEV float lt_code(const uint8_t *w, int64_t at, int bits, int sgn, int nf4) {\n"
    "  int raw;\n"
    "  if (bits == 8) raw = w[at];\n"
    "  else { int per = 8 / bits; raw = (w[at / per] >> (at % per * bits)) & ((1 << bits) - 1); }\n"
    "  int q = sgn && (raw >> (bits - 1)) ? raw - (1 << bits) : raw;\n"
    "  return nf4 ? lt_nf4[q & 15] : (float)q;\n"
    "}\n"
    "/* scale / zero point element i: Float32 (kind 0), Float16 (1) or BFloat16 (2) */\n"
    "LT_DEV float lt_sc(const void *p, int kind, int64_t i) {\n"
    "  if (kind == 0) return ((const float *)p)[i];\n"
    "  uint16_t h = ((const uint16_t *)p)[i];\n"
    "  return kind == 1 ? lt_f16_to_f32(h) : lt_bf16_to_f32(h);\n"
    "}\n"
    "struct lt_q {\n"
    "  int64_t k, n, j0, nb, bs, blocks, row_bytes, m;\n"
    "  int64_t bits, sgn, nf4, skind, has_zp, gt, vpb, bpb, act;\n"
    "};\n"
    "LT_DEV float lt_deq(const uint8_t *w, const void *scale, const void *zp, const lt_q &q, int64_t kk, int64_t j) {\n"
    "  int64_t bi = kk * q.blocks + j / q.bs;\n"
    "  float v = lt_code(w, kk * q.n + j, (int)q.bits, (int)q.sgn, (int)q.nf4) * lt_sc(scale, (int)q.skind, bi);\n"
    "  return q.has_zp ? v + lt_sc(zp, (int)q.skind, bi) : v;\n"
    "}\n"
    "/* Linear/NF4: wf[kk][j - j0] for the panel [j0, j0 + nb) */\n"
    "extern \"C\" __global__ void lt_q_decode_linear(const uint8_t *w, const void *scale, const void *zp, float *wf, const __grid_constant__ lt_q q) {\n"
    "  LT_LOOP(e, q.k * q.nb) {\n"
    "    int64_t kk = e / q.nb, j = q.j0 + e % q.nb;\n"
    "    wf[e] = lt_deq(w, scale, zp, q, kk, j);\n"
    "  }\n"
    "}\n"
    "/* GGML: wf[j - j0][kk], rows of row_bytes per output feature */\n"
    "extern \"C\" __global__ void lt_q_decode_ggml(const uint8_t *w, float *wf, const __grid_constant__ lt_q q) {\n"
    "  LT_LOOP(e, q.k * q.nb) {\n"
    "    int64_t kk = e % q.k, j = q.j0 + e / q.k;\n"
    "    wf[e] = lt_ggml((int)q.gt, w + j * q.row_bytes + kk / q.vpb * q.bpb, (int)(kk % q.vpb));\n"
    "  }\n"
    "}\n"
    "/* few rows (m <= 8): y[r, j] = act(sum_kk x[r, kk] w(kk, j) + bias[j]); a block of 256 threads\n"
    " * takes 32 outputs, its 8 warps split K and meet in shared memory */\n"
    "extern \"C\" __global__ void __launch_bounds__(256) lt_q_gemv(const float *x, const uint8_t *w, const void *scale,\n"
    "                                                           const void *zp, const float *bias, float *y, const __grid_constant__ lt_q q) {\n"
    "  __shared__ float part[8][8][33];\n"
    "  int lane = threadIdx.x & 31, slice = threadIdx.x >> 5;\n"
    "  for (int64_t j0 = (int64_t)blockIdx.x * 32; j0 < q.n; j0 += (int64_t)gridDim.x * 32) {\n"
    "    int64_t j = j0 + lane;\n"
    "    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};\n"
    "    if (q.gt < 0) {\n"
    "      for (int64_t kk = slice; j < q.n && kk < q.k; kk += 8) {\n"
    "        float wv = lt_deq(w, scale, zp, q, kk, j);\n"
    "        for (int r = 0; r < 8; r++) if (r < q.m) acc[r] += x[r * q.k + kk] * wv;\n"
    "      }\n"
    "    } else {\n"
    "      for (int64_t kk = slice; j < q.n && kk < q.k; kk += 8) {\n"
    "        float wv = lt_ggml((int)q.gt, w + j * q.row_bytes + kk / q.vpb * q.bpb, (int)(kk % q.vpb));\n"
    "        for (int r = 0; r < 8; r++) if (r < q.m) acc[r] += x[r * q.k + kk] * wv;\n"
    "      }\n"
    "    }\n"
    "    for (int r = 0; r < 8; r++) part[slice][r][lane] = acc[r];\n"
    "    __syncthreads();\n"
    "    if (slice == 0 && j < q.n)\n"
    "      for (int r = 0; r < q.m && r < 8; r++) {\n"
    "        float s = 0;\n"
    "        for (int sl = 0; sl < 8; sl++) s += part[sl][r][lane];\n"
    "        if (bias) s += bias[j];\n"
    "        y[r * q.n + j] = lt_act(s, (int)q.act);\n"
    "      }\n"
    "    __syncthreads();\n"
    "  }\n"
    "}\n"
    "/* lookup: y[i, v] = value v of row idx[i]; an index out of range sets the error flag */\n"
    "template <typename I> LT_DEV int64_t lt_row_of(I v) { return (int64_t)v; }\n"
    "LT_DEV int64_t lt_row_of(uint64_t v) { return v > 0x7fffffffffffffffull ? -1 : (int64_t)v; }\n"
    "template <typename I> __device__ void lookup(const uint8_t *data, const I *idx, float *y, int64_t count, int64_t k,\n"
    "                                            int64_t vocab, int64_t row_bytes, int gt, int vpb, int bpb,\n"
    "                                            unsigned *flag, unsigned code) {\n"
    "  LT_LOOP(e, count * k) {\n"
    "    int64_t i = e / k, v = e % k;\n"
    "    int64_t row = lt_row_of(idx[i]);\n"
    "    if (row < 0 || row >= vocab) {\n"
    "      if (v == 0) atomicOr(flag, code);\n"
    "      y[e] = 0;\n"
    "      continue;\n"
    "    }\n"
    "    y[e] = lt_ggml(gt, data + row * row_bytes + v / vpb * bpb, (int)(v % vpb));\n"
    "  }\n"
    "}\n"
    "#define LT_LOOKUP(name, I)                                                                            \\\n"
    "  extern \"C\" __global__ void lt_q_lookup_##name(const uint8_t *d, const I *idx, float *y, int64_t c, int64_t k, \\\n"
    "      int64_t vocab, int64_t rb, int gt, int vpb, int bpb, unsigned *flag, unsigned code) {               \\\n"
    "    lookup(d, idx, y, c, k, vocab, rb, gt, vpb, bpb, flag, code); }\n"
    "LT_LOOKUP(Int8, int8_t) LT_LOOKUP(Int16, int16_t) LT_LOOKUP(Int32, int32_t) LT_LOOKUP(Int64, int64_t)\n"
    "LT_LOOKUP(Uint8, uint8_t) LT_LOOKUP(Uint16, uint16_t) LT_LOOKUP(Uint32, uint32_t) LT_LOOKUP(Uint64, uint64_t)\n";

/* Host image of lt_q. */
typedef struct q_args {
  int64_t k, n, j0, nb, bs, blocks, row_bytes, m;
  int64_t bits, sgn, nf4, skind, has_zp, gt, vpb, bpb, act;
} q_args;

static lathe_status_t q_kernel(lathe_cuda_exec *ex, const char *name, lcuFunction *f) {
  static const char *source;
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&mu);
  if (!source) {
    lt_text t = {0};
    lt_put(&t, "%s%s", lathe_cuda_activation_source(), quant_src);
    if (!t.oom) source = t.s;
  }
  pthread_mutex_unlock(&mu);
  if (!source) return LATHE_OOM("lathe:cuda: codegen");
  return lathe_cuda_kernel(lathe_cuda_exec_dev(ex), source, name, f);
}

void lathe_cuda_sources_quantized(lathe_cuda_source_fn fn, void *ctx) {
  lt_text t = {0};
  lt_put(&t, "%s%s", lathe_cuda_activation_source(), quant_src);
  if (!t.oom) fn(ctx, "quantized", t.s);
  free(t.s);
}

enum { SMALL_M = 8, PANEL_BUDGET = 256 << 20 };

static lathe_status_t run_dense(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  int scheme = (int)lathe_attr_quantized_scheme(n);
  q_args q;
  memset(&q, 0, sizeof q);
  q.k = lathe_attr_quantized_in_features(n);
  q.n = lathe_attr_quantized_out_features(n);
  q.m = q.k ? lathe_shape_size(&in[0]->shape) / q.k : lathe_shape_size(&out[0]->shape) / (q.n ? q.n : 1);
  q.act = lathe_attr_quantized_activation(n);
  q.gt = -1;
  lcuDeviceptr x = lathe_cuda_ptr(in[0]), w = lathe_cuda_ptr(in[1]), y = lathe_cuda_ptr(out[0]), scale = 0, zp = 0, bias = 0;
  int next = 2;
  if (scheme == LATHE_QUANT_GGML) {
    lathe_ggml_type gt = lathe_attr_quantized_ggml_type(n);
    q.gt = gt;
    q.vpb = lathe_ggml_block_values(gt);
    q.bpb = lathe_ggml_block_bytes(gt);
    q.row_bytes = in[1]->shape.dims[1];
  } else {
    lathe_dtype wdt = in[1]->shape.dtype, sdt = in[2]->shape.dtype;
    q.bits = lathe_dtype_bits(wdt);
    q.sgn = lathe_dtype_class_of(wdt) == LATHE_CLASS_SINT;
    q.nf4 = scheme == LATHE_QUANT_NF4;
    q.bs = lathe_attr_quantized_block_size(n);
    q.blocks = in[2]->shape.dims[1];
    q.skind = sdt == LATHE_DTYPE_FLOAT32 ? 0 : sdt == LATHE_DTYPE_FLOAT16 ? 1 : 2;
    scale = lathe_cuda_ptr(in[next++]);
    if (lathe_attr_quantized_has_zero_point(n)) zp = lathe_cuda_ptr(in[next++]), q.has_zp = 1;
  }
  if (lathe_attr_quantized_has_bias(n)) bias = lathe_cuda_ptr(in[next]);
  if (!q.m || !q.n) return NULL;
  lcuFunction f;
  if (q.m <= SMALL_M) {
    LATHE_RETURN_IF_ERROR(q_kernel(ex, "lt_q_gemv", &f));
    void *args[] = {&x, &w, &scale, &zp, &bias, &y, &q};
    int64_t blocks = (q.n + 31) / 32;
    return lathe_cuda_launch(ex, f, (unsigned)(blocks < 65535 * 8 ? blocks : 65535 * 8), 256, 0, args);
  }
  int64_t nb = PANEL_BUDGET / 4 / (q.k ? q.k : 1);
  nb = nb < 64 ? 64 : nb;
  nb = nb > q.n ? q.n : nb;
  lcuDeviceptr wf;
  LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_FLOAT32, q.k * nb, &wf, NULL));
  bool ggml = scheme == LATHE_QUANT_GGML;
  LATHE_RETURN_IF_ERROR(q_kernel(ex, ggml ? "lt_q_decode_ggml" : "lt_q_decode_linear", &f));
  for (int64_t j0 = 0; j0 < q.n; j0 += nb) {
    q.j0 = j0;
    q.nb = q.n - j0 < nb ? q.n - j0 : nb;
    if (q.k) {
      unsigned b, th;
      lathe_cuda_grid(q.k * q.nb, &b, &th);
      if (ggml) {
        void *args[] = {&w, &wf, &q};
        LATHE_RETURN_IF_ERROR(lathe_cuda_launch(ex, f, b, th, 0, args));
      } else {
        void *args[] = {&w, &scale, &zp, &wf, &q};
        LATHE_RETURN_IF_ERROR(lathe_cuda_launch(ex, f, b, th, 0, args));
      }
    }
    lt_gemm g = {.ab = LATHE_DTYPE_FLOAT32, .d = LATHE_DTYPE_FLOAT32, .batch = 1, .m = q.m, .n = q.nb, .k = q.k};
    g.a = (lt_mat){x, q.k, 1, 0};
    g.b = ggml ? (lt_mat){wf, 1, q.k, 0} : (lt_mat){wf, q.nb, 1, 0};
    g.c = (lt_mat){y + (lcuDeviceptr)((size_t)j0 * 4), q.n, 1, 0};
    LATHE_RETURN_IF_ERROR(lathe_cuda_gemm(ex, &g));
  }
  return lathe_cuda_dense_epilogue(ex, LATHE_DTYPE_FLOAT32, y, y, bias, q.m, q.n, (int)q.act);
}

static lathe_status_t run_lookup(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  int64_t k = lathe_attr_quantized_in_features(n), count = lathe_shape_size(&in[1]->shape);
  int64_t vocab = in[0]->shape.dims[0], rb = in[0]->shape.dims[1];
  if (!count || !k) return NULL;
  lathe_ggml_type gt = lathe_attr_quantized_ggml_type(n);
  int igt = gt, vpb = lathe_ggml_block_values(gt), bpb = lathe_ggml_block_bytes(gt);
  char msg[160], name[48];
  snprintf(msg, sizeof msg, "QuantizedEmbeddingLookup: an index is out of range [0, %lld)", (long long)vocab);
  lcuDeviceptr flag;
  uint32_t code;
  LATHE_RETURN_IF_ERROR(lathe_cuda_exec_error_flag(ex, msg, &flag, &code));
  snprintf(name, sizeof name, "lt_q_lookup_%s", lathe_dtype_name(in[1]->shape.dtype));
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(q_kernel(ex, name, &f));
  lcuDeviceptr d = lathe_cuda_ptr(in[0]), idx = lathe_cuda_ptr(in[1]), y = lathe_cuda_ptr(out[0]);
  unsigned ucode = code;
  void *args[] = {&d, &idx, &y, &count, &k, &vocab, &rb, &igt, &vpb, &bpb, &flag, &ucode};
  unsigned b, th;
  lathe_cuda_grid(count * k, &b, &th);
  return lathe_cuda_launch(ex, f, b, th, 0, args);
}

lathe_status_t lathe_cuda_run_quantized(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                        lathe_tensor **out) {
  switch (n->op) {
    case LATHE_OP_FUSED_QUANTIZED_DENSE: return run_dense(ex, n, in, out);
    case LATHE_OP_QUANTIZED_EMBEDDING_LOOKUP: return run_lookup(ex, n, in, out);
    default: return LATHE_UNIMPL("%s: not a quantized op", lathe_op_name(n->op));
  }
}
