__device__ const float lt_nf4[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
    -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
    0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,
    0.7229568362236023f, 1.0f};
__device__ const float lt_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
LT_DEV float lt_h(const uint8_t *p) { return lt_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }
/* Q4_K/Q5_K: 6-bit scale and min j of the 12 packed bytes s */
LT_DEV void lt_k4(const uint8_t *s, int j, int *sc, int *mn) {
  if (j < 4) { *sc = s[j] & 63; *mn = s[j + 4] & 63; }
  else { *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4; *mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4; }
}
/* value v of a GGML block b of type t (llama.cpp's layouts; the CPU's decoders value by value) */
LT_DEV float lt_ggml(int t, const uint8_t *b, int v) {
  switch (t) {
    case 0: { int q = v < 16 ? (b[2 + v] & 15) : (b[2 + v - 16] >> 4); return lt_h(b) * (float)(q - 8); }
    case 1: return lt_h(b) * (float)(int8_t)b[2 + v];
    case 2: { int q = v < 16 ? (b[2 + v] & 15) : (b[2 + v - 16] >> 4); return lt_h(b) * lt_iq4nl[q]; }
    case 3: {
      int h = v >> 7, j = (v >> 5) & 3, s = (v >> 4) & 1, l = v & 15, is = 8 * h + 2 * j + s;
      float dl = lt_h(b + 80) * (float)(b[is] & 15), ml = lt_h(b + 82) * (float)(b[is] >> 4);
      return dl * (float)((b[16 + 32 * h + 16 * s + l] >> (2 * j)) & 3) - ml;
    }
    case 4: {
      const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
      int h = v >> 7, j = (v >> 5) & 3, s = (v >> 4) & 1, l = v & 15, is = 8 * h + 2 * j + s;
      int lo = is < 8 ? sc[is] & 15 : sc[is - 8] >> 4, hi = (sc[8 + is % 4] >> (2 * (is / 4))) & 3;
      float dl = lt_h(b + 108) * (float)((lo | hi << 4) - 32);
      int bit = 4 * h + j;
      return dl * (float)(((qs[32 * h + 16 * s + l] >> (2 * j)) & 3) - ((hm[16 * s + l] >> bit) & 1 ? 0 : 4));
    }
    case 5:
    case 6: {
      int c = v >> 6, hf = (v >> 5) & 1, l = v & 31, sc, mn;
      lt_k4(b + 4, 2 * c + hf, &sc, &mn);
      float dl = lt_h(b) * (float)sc, ml = lt_h(b + 2) * (float)mn;
      const uint8_t *qs = b + (t == 5 ? 16 : 48);
      int q = (qs[32 * c + l] >> (4 * hf)) & 15;
      if (t == 6) q |= ((b[16 + l] >> (2 * c + hf)) & 1) << 4;
      return dl * (float)q - ml;
    }
    default: {
      int h = v >> 7, g = (v >> 5) & 3, hf = (v >> 4) & 1, l = v & 15;
      const uint8_t *ql = b + 64 * h + 32 * (g & 1) + 16 * hf, *qh = b + 128 + 32 * h + 16 * hf;
      float dl = lt_h(b + 208) * (float)(int8_t)b[192 + 8 * h + 2 * g + hf];
      return dl * (float)((((ql[l] >> (4 * (g >> 1))) & 15) | ((qh[l] >> (2 * g)) & 3) << 4) - 32);
    }
  }
}
/* Linear/NF4 code at flat index at of the [K, N] codes: bits 2, 4 (packed, low bits first) or 8 */
LT_DEV float lt_code(const uint8_t *w, int64_t at, int bits, int sgn, int nf4) {
  int raw;
  if (bits == 8) raw = w[at];
  else { int per = 8 / bits; raw = (w[at / per] >> (at % per * bits)) & ((1 << bits) - 1); }
  int q = sgn && (raw >> (bits - 1)) ? raw - (1 << bits) : raw;
  return nf4 ? lt_nf4[q & 15] : (float)q;
}
/* scale / zero point element i: Float32 (kind 0), Float16 (1) or BFloat16 (2) */
LT_DEV float lt_sc(const void *p, int kind, int64_t i) {
  if (kind == 0) return ((const float *)p)[i];
  uint16_t h = ((const uint16_t *)p)[i];
  return kind == 1 ? lt_f16_to_f32(h) : lt_bf16_to_f32(h);
}
struct lt_q {
  int64_t k, n, j0, nb, bs, blocks, row_bytes, m;
  int64_t bits, sgn, nf4, skind, has_zp, gt, vpb, bpb, act;
};
LT_DEV float lt_deq(const uint8_t *w, const void *scale, const void *zp, const lt_q &q, int64_t kk, int64_t j) {
  int64_t bi = kk * q.blocks + j / q.bs;
  float v = lt_code(w, kk * q.n + j, (int)q.bits, (int)q.sgn, (int)q.nf4) * lt_sc(scale, (int)q.skind, bi);
  return q.has_zp ? v + lt_sc(zp, (int)q.skind, bi) : v;
}
/* Linear/NF4: wf[kk][j - j0] for the panel [j0, j0 + nb) */
extern "C" __global__ void lt_q_decode_linear(const uint8_t *w, const void *scale, const void *zp, float *wf, const __grid_constant__ lt_q q) {
  LT_LOOP(e, q.k * q.nb) {
    int64_t kk = e / q.nb, j = q.j0 + e % q.nb;
    wf[e] = lt_deq(w, scale, zp, q, kk, j);
  }
}
/* GGML: wf[j - j0][kk], rows of row_bytes per output feature */
extern "C" __global__ void lt_q_decode_ggml(const uint8_t *w, float *wf, const __grid_constant__ lt_q q) {
  LT_LOOP(e, q.k * q.nb) {
    int64_t kk = e % q.k, j = q.j0 + e / q.k;
    wf[e] = lt_ggml((int)q.gt, w + j * q.row_bytes + kk / q.vpb * q.bpb, (int)(kk % q.vpb));
  }
}
/* few rows (m <= 8): y[r, j] = act(sum_kk x[r, kk] w(kk, j) + bias[j]); a block of 256 threads
 * takes 32 outputs, its 8 warps split K and meet in shared memory */
extern "C" __global__ void __launch_bounds__(256) lt_q_gemv(const float *x, const uint8_t *w, const void *scale,
                                                           const void *zp, const float *bias, float *y, const __grid_constant__ lt_q q) {
  __shared__ float part[8][8][33];
  int lane = threadIdx.x & 31, slice = threadIdx.x >> 5;
  for (int64_t j0 = (int64_t)blockIdx.x * 32; j0 < q.n; j0 += (int64_t)gridDim.x * 32) {
    int64_t j = j0 + lane;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (q.gt < 0) {
      for (int64_t kk = slice; j < q.n && kk < q.k; kk += 8) {
        float wv = lt_deq(w, scale, zp, q, kk, j);
        for (int r = 0; r < 8; r++) if (r < q.m) acc[r] += x[r * q.k + kk] * wv;
      }
    } else {
      for (int64_t kk = slice; j < q.n && kk < q.k; kk += 8) {
        float wv = lt_ggml((int)q.gt, w + j * q.row_bytes + kk / q.vpb * q.bpb, (int)(kk % q.vpb));
        for (int r = 0; r < 8; r++) if (r < q.m) acc[r] += x[r * q.k + kk] * wv;
      }
    }
    for (int r = 0; r < 8; r++) part[slice][r][lane] = acc[r];
    __syncthreads();
    if (slice == 0 && j < q.n)
      for (int r = 0; r < q.m && r < 8; r++) {
        float s = 0;
        for (int sl = 0; sl < 8; sl++) s += part[sl][r][lane];
        if (bias) s += bias[j];
        y[r * q.n + j] = lt_act(s, (int)q.act);
      }
    __syncthreads();
  }
}
/* lookup: y[i, v] = value v of row idx[i]; an index out of range sets the error flag */
template <typename I> LT_DEV int64_t lt_row_of(I v) { return (int64_t)v; }
LT_DEV int64_t lt_row_of(uint64_t v) { return v > 0x7fffffffffffffffull ? -1 : (int64_t)v; }
template <typename I> __device__ void lookup(const uint8_t *data, const I *idx, float *y, int64_t count, int64_t k,
                                            int64_t vocab, int64_t row_bytes, int gt, int vpb, int bpb,
                                            unsigned *flag, unsigned code) {
  LT_LOOP(e, count * k) {
    int64_t i = e / k, v = e % k;
    int64_t row = lt_row_of(idx[i]);
    if (row < 0 || row >= vocab) {
      if (v == 0) atomicOr(flag, code);
      y[e] = 0;
      continue;
    }
    y[e] = lt_ggml(gt, data + row * row_bytes + v / vpb * bpb, (int)(v % vpb));
  }
}
#define LT_LOOKUP(name, I)                                                                            \
  extern "C" __global__ void lt_q_lookup_##name(const uint8_t *d, const I *idx, float *y, int64_t c, int64_t k, \
      int64_t vocab, int64_t rb, int gt, int vpb, int bpb, unsigned *flag, unsigned code) {               \
    lookup(d, idx, y, c, k, vocab, rb, gt, vpb, bpb, flag, code); }
LT_LOOKUP(Int8, int8_t) LT_LOOKUP(Int16, int16_t) LT_LOOKUP(Int32, int32_t) LT_LOOKUP(Int64, int64_t)
LT_LOOKUP(Uint8, uint8_t) LT_LOOKUP(Uint16, uint16_t) LT_LOOKUP(Uint32, uint32_t) LT_LOOKUP(Uint64, uint64_t)
