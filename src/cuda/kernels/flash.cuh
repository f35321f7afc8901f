/* Streaming attention (FlashAttention's scheme) on TF32 tensor cores (sm_80 and later): the
 * scores live in registers, a tile at a time, and never reach global memory. LT_FA_D, the head
 * size rounded up to 16, 32, 64 or 128, and LT_FA_T, the storage of the query, key, value, output
 * and their gradients but dQuery (0 Float32, 1 Float16, 2 BFloat16), are defined before this text
 * (one module per size, form and storage). Float16 and BFloat16 values are TF32 values exactly, so
 * for them only the probabilities and dS are rounded to TF32; Float32 operands are rounded too
 * (option tf32=1), or, with LT_FA_X3 (option tf32x3=1), kept whole and each product split in three. The geometry, masks and limits are attention.cuh's (lt_att, lt_logit).
 * Products are mma.sync m16n8k8 (TF32 operands, Float32 accumulation). A product whose A operand
 * is a warp's accumulator (probabilities, dS) reads it in place: the accumulator holds columns
 * 2t and 2t+1 where the A fragment wants t and t+4, so the B operand's rows are taken in that
 * same order and the sum over keys is unchanged. Exponentials are base 2 on logits scaled by
 * log2(e) (one MUFU instruction each); a kernel's MASKED form applies bias and masks through
 * lt_logit, the plain form (the common case) only the scale and the position limits. A text
 * holds one form (LT_FA_MASKED 0 or 1), so a model compiles only the kernels it runs. */
#define LT_LOG2E 1.4426950408889634f
#define LT_FA_BQ 64       /* forward: query rows of a block, 16 a warp */
#define LT_FA_BK 64       /* keys of a tile (the backward's block: 16 a warp) */
#define LT_FA_BQB 32      /* backward: query rows of a step */
#define LT_FA_P (LT_FA_D + 4) /* shared row pitch in words: fragment reads meet no bank twice */
#define LT_FA_PS 40       /* pitch of the backward's dS^T rows, for its transposed fragment reads */
#if LT_FA_T == 0
#define LT_FA_S float
#elif LT_FA_T == 1
#define LT_FA_S lt_f16s
#else
#define LT_FA_S lt_bf16s
#endif

LT_DEV uint32_t lt_tf32(float x) {
  uint32_t u;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
  return u;
}
LT_DEV void lt_mma1(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#if LT_FA_X3
/* tf32x3=1 (Float32 storage): operands travel as Float32 bits (lt_fa_op) and each product splits
 * them, x = hi + lo with both TF32 (lo of a non-finite x is 0), summing lo.hi + hi.lo + hi.hi on
 * the tensor cores: within 2^-19 of the sum of |a||b|, as gemm.c's tf32x3 products. */
LT_DEV uint32_t lt_fa_op(float x) { return __float_as_uint(x); }
LT_DEV void lt_split(uint32_t x, uint32_t &h, uint32_t &l) {
  float v = __uint_as_float(x);
  h = lt_tf32(v);
  l = lt_tf32(isfinite(v) ? v - __uint_as_float(h) : 0.f);
}
LT_DEV void lt_mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  uint32_t ah0, ah1, ah2, ah3, al0, al1, al2, al3, bh0, bh1, bl0, bl1;
  lt_split(a0, ah0, al0), lt_split(a1, ah1, al1), lt_split(a2, ah2, al2), lt_split(a3, ah3, al3);
  lt_split(b0, bh0, bl0), lt_split(b1, bh1, bl1);
  lt_mma1(c, al0, al1, al2, al3, bh0, bh1);
  lt_mma1(c, ah0, ah1, ah2, ah3, bl0, bl1);
  lt_mma1(c, ah0, ah1, ah2, ah3, bh0, bh1);
}
#else
/* operands rounded to TF32 where they enter shared memory or a fragment */
LT_DEV uint32_t lt_fa_op(float x) { return lt_tf32(x); }
LT_DEV void lt_mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  lt_mma1(c, a0, a1, a2, a3, b0, b1);
}
#endif
/* four 8x8 matrices of 16-bit values, lane L naming row L % 8 of matrix L / 8; a thread gets row g,
 * columns 2t and 2t + 1 of each. On 32-bit values: a matrix is 8 rows of 4, and a thread gets
 * row g, value t -- a TF32 fragment's layout. */
LT_DEV void lt_ldsm4(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, const uint32_t *p) {
  unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a));
}
LT_DEV float lt_quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
LT_DEV float lt_quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
/* Rows r0 .. r0 + R of a matrix (rows rs apart, D values each) into sh[r LT_FA_P + d] as TF32,
 * zero past row n and past D; vec: loads of 4 values (D, rs and the address multiples of 4). */
template <int R, typename S> LT_DEV void fa_load(uint32_t *sh, const S *src, int64_t r0, int64_t n, int64_t rs, int64_t D, bool vec) {
  if (vec) {
    for (int e = threadIdx.x; e < R * (LT_FA_D / 4); e += blockDim.x) {
      int r = e / (LT_FA_D / 4), d = e % (LT_FA_D / 4) * 4;
      float x0 = 0.f, x1 = 0.f, x2 = 0.f, x3 = 0.f;
      if (r0 + r < n && d < D) {
        lt_v4<S> x = *(const lt_v4<S> *)(src + (r0 + r) * rs + d);
        x0 = lt_g(x.v, 0), x1 = lt_g(x.v, 1), x2 = lt_g(x.v, 2), x3 = lt_g(x.v, 3);
      }
      *(uint4 *)(sh + r * LT_FA_P + d) = make_uint4(lt_fa_op(x0), lt_fa_op(x1), lt_fa_op(x2), lt_fa_op(x3));
    }
  } else {
    for (int e = threadIdx.x; e < R * LT_FA_D; e += blockDim.x) {
      int r = e / LT_FA_D, d = e % LT_FA_D;
      sh[r * LT_FA_P + d] = lt_fa_op(r0 + r < n && d < D ? lt_g(src, (r0 + r) * rs + d) : 0.f);
    }
  }
}

/* A forward block's rows: 64 query rows of one (batch, head); this thread's rows r0 and r1
 * (= r0 + 8) see keys below lim0 and lim1, and the block walks keys below kend (the limit grows
 * with the row). */
struct fa_rows {
  int64_t b, h, hk, r0, r1, lim0, lim1, kend;
};
LT_DEV fa_rows fa_rows_of(const lt_att &a, const int32_t *ql, const int32_t *kl, int w, int g) {
  fa_rows r;
  const int64_t tiles = (a.S + LT_FA_BQ - 1) / LT_FA_BQ, pair = blockIdx.x / tiles, qt0 = blockIdx.x % tiles * LT_FA_BQ;
  r.b = pair / a.H, r.h = pair % a.H, r.hk = r.h / a.group;
  r.r0 = qt0 + w * 16 + g, r.r1 = r.r0 + 8;
  const int64_t qlim = lt_qlim(a, ql, r.b);
  r.lim0 = r.r0 < qlim ? lt_kvlim(a, kl, r.b, r.r0) : 0, r.lim1 = r.r1 < qlim ? lt_kvlim(a, kl, r.b, r.r1) : 0;
  const int64_t last = (qt0 + LT_FA_BQ < qlim ? qt0 + LT_FA_BQ : qlim) - 1;
  r.kend = qt0 < qlim ? lt_kvlim(a, kl, r.b, last) : 0;
  return r;
}
/* 2^x on the MUFU unit, subnormal results flushed to zero (probabilities below 1e-38) */
LT_DEV float lt_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
/* One key tile of the online softmax: the scores s of keys kt.. (the accumulator layout: row r0
 * in elements 0-1, r1 in 2-3, columns 2t and 2t + 1 of each 8) become probabilities
 * e^(logit - running max), in log2 units; the running maxima m, sums l and the output
 * accumulators oa are rescaled to the new maxima. Keys a row cannot see give 0. */
template <bool MASKED>
LT_DEV void fa_softmax_tile(float (&s)[LT_FA_BK / 8][4], float (&oa)[LT_FA_D / 8][4], float &m0, float &m1, float &l0, float &l1,
                            const fa_rows &r, int64_t kt, int t, const lt_att &a, const float *am, const uint8_t *bm,
                            const float *bi) {
  const float sl2 = (float)a.scale * LT_LOG2E;
  float mx0 = -INFINITY, mx1 = -INFINITY;
  /* the tile's visible keys of each row: columns below v0 and v1 */
  const int v0 = (int)lt_clamp(r.lim0 - kt, 0, LT_FA_BK), v1 = (int)lt_clamp(r.lim1 - kt, 0, LT_FA_BK);
  if (!MASKED && v0 == LT_FA_BK && v1 == LT_FA_BK) { /* every key visible to both rows: no tests */
#pragma unroll
    for (int n = 0; n < LT_FA_BK / 8; n++) {
      s[n][0] *= sl2, s[n][1] *= sl2, s[n][2] *= sl2, s[n][3] *= sl2;
      mx0 = fmaxf(mx0, fmaxf(s[n][0], s[n][1])), mx1 = fmaxf(mx1, fmaxf(s[n][2], s[n][3]));
    }
  } else {
#pragma unroll
    for (int n = 0; n < LT_FA_BK / 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        int c = n * 8 + 2 * t + (e & 1);
        float x;
        if (MASKED) x = c < (e < 2 ? v0 : v1) ? lt_logit(a, s[n][e], am, bm, bi, r.b, r.h, e < 2 ? r.r0 : r.r1, kt + c) * LT_LOG2E : -INFINITY;
        else x = c < (e < 2 ? v0 : v1) ? s[n][e] * sl2 : -INFINITY;
        s[n][e] = x;
        if (e < 2) mx0 = fmaxf(mx0, x);
        else mx1 = fmaxf(mx1, x);
      }
  }
  const float n0 = fmaxf(m0, lt_quad_max(mx0)), n1 = fmaxf(m1, lt_quad_max(mx1));
  const float c0 = n0 == -INFINITY ? 1.f : lt_ex2(m0 - n0), c1 = n1 == -INFINITY ? 1.f : lt_ex2(m1 - n1);
  l0 *= c0, l1 *= c1, m0 = n0, m1 = n1;
#pragma unroll
  for (int dn = 0; dn < LT_FA_D / 8; dn++) oa[dn][0] *= c0, oa[dn][1] *= c0, oa[dn][2] *= c1, oa[dn][3] *= c1;
  /* a row with nothing visible yet has every score -inf: 2^(-inf - 0) = 0 */
  const float z0 = n0 == -INFINITY ? 0.f : n0, z1 = n1 == -INFINITY ? 0.f : n1;
#pragma unroll
  for (int n = 0; n < LT_FA_BK / 8; n++) {
    s[n][0] = lt_ex2(s[n][0] - z0), s[n][1] = lt_ex2(s[n][1] - z0);
    s[n][2] = lt_ex2(s[n][2] - z1), s[n][3] = lt_ex2(s[n][3] - z1);
    l0 += s[n][0] + s[n][1], l1 += s[n][2] + s[n][3];
  }
}
/* The block's output rows (the accumulators over the rows' sums) and logsumexp: 0 and -inf for
 * rows nothing is visible to, as att_softmax and the products make them. */
template <typename S>
LT_DEV void fa_finish(S *o, float *lse, float (&oa)[LT_FA_D / 8][4], float m0, float m1, float l0, float l1, const fa_rows &r,
                      int t, const lt_att &a) {
  l0 = lt_quad_sum(l0), l1 = lt_quad_sum(l1);
  const float i0 = l0 > 0.f ? 1.f / l0 : 0.f, i1 = l1 > 0.f ? 1.f / l1 : 0.f;
  S *op = o + r.b * a.qbs + r.h * a.qhs;
#pragma unroll
  for (int dn = 0; dn < LT_FA_D / 8; dn++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      int64_t row = e < 2 ? r.r0 : r.r1, d = dn * 8 + 2 * t + (e & 1);
      if (row < a.S && d < a.D) lt_s(op, row * a.qss + d, oa[dn][e] * (e < 2 ? i0 : i1));
    }
  if (t == 0) {
    float *lp = lse + (r.b * a.H + r.h) * a.S;
    if (r.r0 < a.S) lp[r.r0] = m0 > -INFINITY && l0 > 0.f ? m0 / LT_LOG2E + lt_log(l0) : -INFINITY;
    if (r.r1 < a.S) lp[r.r1] = m1 > -INFINITY && l1 > 0.f ? m1 / LT_LOG2E + lt_log(l1) : -INFINITY;
  }
}

/* Forward: a block per LT_FA_BQ query rows of one (batch, head); output and logsumexp as
 * att_softmax and the products make them (rows nothing is visible to: 0 and -inf). */
template <bool MASKED, typename S> __device__ void fa_fwd(const S *q, const S *k, const S *v, S *o, float *lse,
                                              const float *am, const uint8_t *bm, const float *bi, const int32_t *ql,
                                              const int32_t *kl, const lt_att &a) {
  extern __shared__ __align__(16) uint32_t fa_sh[];
  uint32_t *ks = fa_sh, *vs = fa_sh + LT_FA_BK * LT_FA_P;
  const int w = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  const fa_rows r = fa_rows_of(a, ql, kl, w, g);
  const S *qp = q + r.b * a.qbs + r.h * a.qhs, *kp = k + r.b * a.kbs + r.hk * a.khs, *vp = v + r.b * a.kbs + r.hk * a.khs;
  uint32_t qf[LT_FA_D / 8][4];
#pragma unroll
  for (int kk = 0; kk < LT_FA_D / 8; kk++) {
    int d0 = kk * 8 + t, d1 = d0 + 4;
    qf[kk][0] = lt_fa_op(r.r0 < a.S && d0 < a.D ? lt_g(qp, r.r0 * a.qss + d0) : 0.f);
    qf[kk][1] = lt_fa_op(r.r1 < a.S && d0 < a.D ? lt_g(qp, r.r1 * a.qss + d0) : 0.f);
    qf[kk][2] = lt_fa_op(r.r0 < a.S && d1 < a.D ? lt_g(qp, r.r0 * a.qss + d1) : 0.f);
    qf[kk][3] = lt_fa_op(r.r1 < a.S && d1 < a.D ? lt_g(qp, r.r1 * a.qss + d1) : 0.f);
  }
  float oa[LT_FA_D / 8][4];
#pragma unroll
  for (int dn = 0; dn < LT_FA_D / 8; dn++) oa[dn][0] = oa[dn][1] = oa[dn][2] = oa[dn][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f; /* running maxima (log2 units) and sums */
  for (int64_t kt = 0; kt < r.kend; kt += LT_FA_BK) {
    __syncthreads();
    fa_load<LT_FA_BK>(ks, kp, kt, a.Skv, a.kss, a.D, a.vec);
    fa_load<LT_FA_BK>(vs, vp, kt, a.Skv, a.kss, a.D, a.vec);
    __syncthreads();
    float s[LT_FA_BK / 8][4];
#pragma unroll
    for (int n = 0; n < LT_FA_BK / 8; n++) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < LT_FA_D / 8; kk++) {
        const uint32_t *kr = ks + (n * 8 + g) * LT_FA_P + kk * 8 + t;
        lt_mma(s[n], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], kr[0], kr[4]);
      }
    }
    fa_softmax_tile<MASKED>(s, oa, m0, m1, l0, l1, r, kt, t, a, am, bm, bi);
#pragma unroll
    for (int n = 0; n < LT_FA_BK / 8; n++) {
      uint32_t a0 = lt_fa_op(s[n][0]), a1 = lt_fa_op(s[n][2]), a2 = lt_fa_op(s[n][1]), a3 = lt_fa_op(s[n][3]);
#pragma unroll
      for (int dn = 0; dn < LT_FA_D / 8; dn++) {
        const uint32_t *vr = vs + (n * 8 + 2 * t) * LT_FA_P + dn * 8 + g;
        lt_mma(oa[dn], a0, a1, a2, a3, vr[0], vr[LT_FA_P]);
      }
    }
  }
  fa_finish(o, lse, oa, m0, m1, l0, l1, r, t, a);
}
#if LT_FA_T != 0
/* The forward on Float16/BFloat16 tensor cores (mma.sync m16n8k16 of the storage type, Float32
 * sums): twice TF32's rate and half its shared-memory traffic. Key and value tiles stay as stored
 * (16-bit rows) in shared memory, two of each: the next tile is copied in (cp.async) while this
 * one is multiplied -- ncu found a single-buffered version stalled on its loads 57% of the time.
 * Value fragments are read transposed by ldmatrix. Probabilities go to the P.V product rounded to
 * the storage type, as FlashAttention does; their sums stay Float32. A score accumulator's
 * registers are already the P fragment's (no shuffle). */
#define LT_FA_PH (LT_FA_D / 2 + 4) /* words of a tile row of D halves: fragment reads meet no bank twice */
#define LT_FA_TILE (LT_FA_BK * LT_FA_PH)
#if LT_FA_T == 1
#define LT_FA_MT "f16"
#else
#define LT_FA_MT "bf16"
#endif
LT_DEV void lt_mma16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." LT_FA_MT "." LT_FA_MT ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
/* two values rounded to the storage type (nearest, ties to even), lo in the low half */
LT_DEV uint32_t fh_pack(float lo, float hi) {
  uint32_t u;
  asm("cvt.rn." LT_FA_MT "x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo));
  return u;
}
/* Q[r][d] and Q[r][d + 1] as stored, zero outside the matrix */
LT_DEV uint32_t fh_pair(const LT_FA_S *p, int64_t r, int64_t d, const lt_att &a) {
  uint32_t lo = r < a.S && d < a.D ? p[r * a.qss + d].h : 0, hi = r < a.S && d + 1 < a.D ? p[r * a.qss + d + 1].h : 0;
  return lo | hi << 16;
}
/* Rows r0 .. r0 + LT_FA_BK (rows rs apart, D values each) as stored into sh, LT_FA_PH words a
 * row, zero past row n and past D (R rows: the forward's tiles by default). vec 2 (D, rs and the address multiples of 8): 16-byte cp.async
 * copies, waited for by fh_wait1; vec 1 (multiples of 4): 8-byte loads; else one value at a time. */
template <int R = LT_FA_BK>
LT_DEV void fh_tile(uint32_t *sh, const LT_FA_S *src, int64_t r0, int64_t n, int64_t rs, int64_t D, int64_t vec) {
  if (vec == 2) {
    for (int e = threadIdx.x; e < R * (LT_FA_D / 8); e += blockDim.x) {
      int r = e / (LT_FA_D / 8), d = e % (LT_FA_D / 8) * 8;
      bool in = r0 + r < n && d < D;
      unsigned dst = (unsigned)__cvta_generic_to_shared(sh + r * LT_FA_PH + d / 2);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(in ? src + (r0 + r) * rs + d : src),
                   "r"(in ? 16 : 0));
    }
  } else if (vec) {
    for (int e = threadIdx.x; e < R * (LT_FA_D / 4); e += blockDim.x) {
      int r = e / (LT_FA_D / 4), d = e % (LT_FA_D / 4) * 4;
      uint2 x = make_uint2(0u, 0u);
      if (r0 + r < n && d < D) x = *(const uint2 *)(src + (r0 + r) * rs + d);
      *(uint2 *)(sh + r * LT_FA_PH + d / 2) = x;
    }
  } else {
    uint16_t *s16 = (uint16_t *)sh;
    for (int e = threadIdx.x; e < R * LT_FA_D; e += blockDim.x) {
      int r = e / LT_FA_D, d = e % LT_FA_D;
      s16[r * 2 * LT_FA_PH + d] = r0 + r < n && d < D ? src[(r0 + r) * rs + d].h : (uint16_t)0;
    }
  }
}
LT_DEV void fh_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
LT_DEV void fh_wait1() { asm volatile("cp.async.wait_group 1;" ::: "memory"); } /* all but the newest group */
LT_DEV void fh_wait0() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }
/* lt_ldsm4 transposed: a thread gets column g, rows 2t and 2t + 1 of each matrix */
LT_DEV void fh_ldsm4t(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, const uint32_t *p) {
  unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(a));
}
template <bool MASKED> __device__ void fh_fwd(const LT_FA_S *q, const LT_FA_S *k, const LT_FA_S *v, LT_FA_S *o, float *lse,
                                              const float *am, const uint8_t *bm, const float *bi, const int32_t *ql,
                                              const int32_t *kl, const lt_att &a) {
  extern __shared__ __align__(16) uint32_t fa_sh[]; /* key tiles 0, 1, then value tiles 0, 1 */
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const fa_rows r = fa_rows_of(a, ql, kl, w, g);
  const LT_FA_S *qp = q + r.b * a.qbs + r.h * a.qhs, *kp = k + r.b * a.kbs + r.hk * a.khs, *vp = v + r.b * a.kbs + r.hk * a.khs;
  if (r.kend > 0) {
    fh_tile(fa_sh, kp, 0, a.Skv, a.kss, a.D, a.vec);
    fh_tile(fa_sh + 2 * LT_FA_TILE, vp, 0, a.Skv, a.kss, a.D, a.vec);
  }
  fh_commit();
  uint32_t qf[LT_FA_D / 16][4];
#pragma unroll
  for (int kk = 0; kk < LT_FA_D / 16; kk++) {
    int64_t d0 = kk * 16 + 2 * t, d1 = d0 + 8;
    qf[kk][0] = fh_pair(qp, r.r0, d0, a), qf[kk][1] = fh_pair(qp, r.r1, d0, a);
    qf[kk][2] = fh_pair(qp, r.r0, d1, a), qf[kk][3] = fh_pair(qp, r.r1, d1, a);
  }
  float oa[LT_FA_D / 8][4];
#pragma unroll
  for (int dn = 0; dn < LT_FA_D / 8; dn++) oa[dn][0] = oa[dn][1] = oa[dn][2] = oa[dn][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
  /* this lane's row of the value matrices ldmatrix reads: key (L / 8 & 1) 8 + L % 8, columns from
   * (L / 16) 8 */
  const int vrow = (lane >> 3 & 1) * 8 + (lane & 7), vcol = (lane >> 4) * 4;
  int buf = 0;
  for (int64_t kt = 0; kt < r.kend; kt += LT_FA_BK, buf ^= 1) {
    __syncthreads(); /* every warp is done with the other buffers: the next tiles go there */
    if (kt + LT_FA_BK < r.kend) {
      fh_tile(fa_sh + (buf ^ 1) * LT_FA_TILE, kp, kt + LT_FA_BK, a.Skv, a.kss, a.D, a.vec);
      fh_tile(fa_sh + (2 + (buf ^ 1)) * LT_FA_TILE, vp, kt + LT_FA_BK, a.Skv, a.kss, a.D, a.vec);
    }
    fh_commit();
    fh_wait1();
    __syncthreads();
    const uint32_t *ks = fa_sh + buf * LT_FA_TILE, *vs = fa_sh + (2 + buf) * LT_FA_TILE;
    float s[LT_FA_BK / 8][4];
#pragma unroll
    for (int n = 0; n < LT_FA_BK / 8; n++) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#if LT_FA_D >= 32
      /* one ldmatrix: the B fragments of two 16-wide steps over the head */
#pragma unroll
      for (int kk = 0; kk < LT_FA_D / 16; kk += 2) {
        uint32_t b0, b1, b2, b3;
        lt_ldsm4(b0, b1, b2, b3, ks + (n * 8 + (lane & 7)) * LT_FA_PH + kk * 8 + (lane >> 3) * 4);
        lt_mma16(s[n], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], b0, b1);
        lt_mma16(s[n], qf[kk + 1][0], qf[kk + 1][1], qf[kk + 1][2], qf[kk + 1][3], b2, b3);
      }
#else
      const uint32_t *kr = ks + (n * 8 + g) * LT_FA_PH + t;
      lt_mma16(s[n], qf[0][0], qf[0][1], qf[0][2], qf[0][3], kr[0], kr[4]);
#endif
    }
    fa_softmax_tile<MASKED>(s, oa, m0, m1, l0, l1, r, kt, t, a, am, bm, bi);
    /* P.V, 16 keys a step: score tiles 2j and 2j + 1 are the A fragment's columns 0-7 and 8-15;
     * one ldmatrix gives the B fragments of two 8-column value tiles */
#pragma unroll
    for (int j = 0; j < LT_FA_BK / 16; j++) {
      uint32_t a0 = fh_pack(s[2 * j][0], s[2 * j][1]), a1 = fh_pack(s[2 * j][2], s[2 * j][3]);
      uint32_t a2 = fh_pack(s[2 * j + 1][0], s[2 * j + 1][1]), a3 = fh_pack(s[2 * j + 1][2], s[2 * j + 1][3]);
#pragma unroll
      for (int dn = 0; dn < LT_FA_D / 8; dn += 2) {
        uint32_t b0, b1, b2, b3;
        fh_ldsm4t(b0, b1, b2, b3, vs + (j * 16 + vrow) * LT_FA_PH + dn * 4 + vcol);
        lt_mma16(oa[dn], a0, a1, a2, a3, b0, b1);
        lt_mma16(oa[dn + 1], a0, a1, a2, a3, b2, b3);
      }
    }
  }
  fa_finish(o, lse, oa, m0, m1, l0, l1, r, t, a);
}
#define LT_FA_FWD_BODY fh_fwd
#else
#define LT_FA_FWD_BODY fa_fwd
#endif
#define LT_FA_FWD(suffix, MASKED)                                                                                   \
  extern "C" __global__ void __launch_bounds__(128, LT_FA_D <= 32 ? 4 : 1) lt_att_flash_fwd##suffix(const LT_FA_S *q, \
      const LT_FA_S *k, const LT_FA_S *v, LT_FA_S *o, float *lse, const float *am, const uint8_t *bm, const float *bi, const int32_t *ql, \
      const int32_t *kl, const __grid_constant__ lt_att a) {                                                        \
    LT_FA_FWD_BODY<MASKED>(q, k, v, o, lse, am, bm, bi, ql, kl, a); }
#if LT_FA_MASKED
LT_FA_FWD(_masked, true)
#else
LT_FA_FWD(, false)
#endif

/* Backward: a block per LT_FA_BK keys of one (batch, kv head), over its query heads and all the
 * query rows that see them. A warp's 16 keys accumulate dK and dV in registers (written once, no
 * other block has them); dQ is added into zeroed Float32 memory (atomics: every key block adds to it).
 * P = e^(logit - lse), dS = P (dP - delta) scale, dV += P^T dO, dK += dS^T Q, dQ += dS K. */
template <bool MASKED, typename S> __device__ void fa_bwd(const S *q, const S *k, const S *v, const S *dout,
                                              const float *lse, const float *delta, float *dq, S *dk, S *dv,
                                              const float *am, const uint8_t *bm, const float *bi, const int32_t *ql,
                                              const int32_t *kl, const lt_att &a) {
  extern __shared__ __align__(16) uint32_t fa_sh[];
  uint32_t *ks = fa_sh, *vs = ks + LT_FA_BK * LT_FA_P, *qs = vs + LT_FA_BK * LT_FA_P, *dos = qs + LT_FA_BQB * LT_FA_P;
  uint32_t *dst = dos + LT_FA_BQB * LT_FA_P;
  float *ls = (float *)(dst + LT_FA_BK * LT_FA_PS), *dls = ls + LT_FA_BQB;
  const int w = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  const int64_t Hkv = a.H / a.group, tiles = (a.Skv + LT_FA_BK - 1) / LT_FA_BK;
  const int64_t pair = blockIdx.x / tiles, kt0 = blockIdx.x % tiles * LT_FA_BK, b = pair / Hkv, hk = pair % Hkv;
  const int64_t koff = b * a.kbs + hk * a.khs, j0 = kt0 + w * 16 + g, j1 = j0 + 8;
  const float scale = (float)a.scale, sl2 = scale * LT_LOG2E;
  fa_load<LT_FA_BK>(ks, k + koff, kt0, a.Skv, a.kss, a.D, a.vec);
  fa_load<LT_FA_BK>(vs, v + koff, kt0, a.Skv, a.kss, a.D, a.vec);
  float dka[LT_FA_D / 8][4], dva[LT_FA_D / 8][4];
#pragma unroll
  for (int dn = 0; dn < LT_FA_D / 8; dn++)
#pragma unroll
    for (int e = 0; e < 4; e++) dka[dn][e] = dva[dn][e] = 0.f;
  const int64_t qlim = lt_qlim(a, ql, b), kvmax = a.has_lens ? lt_clamp(kl[b], 0, a.Skv) : a.Skv;
  /* causal: rows before kt0 see none of the block's keys */
  const int64_t qstart = kt0 >= kvmax ? qlim : a.causal ? kt0 / LT_FA_BQB * LT_FA_BQB : 0;
  /* (an ldmatrix form of the S^T and dP^T fragment reads took 178 registers and 2 blocks an SM
   * instead of 168 and 3, and ran 386 us against 300 on the H200: the plain reads stay) */
  const uint32_t *kw = ks + (w * 16 + g) * LT_FA_P + t, *vw = vs + (w * 16 + g) * LT_FA_P + t;
  for (int64_t gi = 0; gi < a.group; gi++) {
    const int64_t h = hk * a.group + gi, qoff = b * a.qbs + h * a.qhs, roff = (b * a.H + h) * a.S;
    for (int64_t qt = qstart; qt < qlim; qt += LT_FA_BQB) {
      __syncthreads();
      fa_load<LT_FA_BQB>(qs, q + qoff, qt, a.S, a.qss, a.D, a.vec);
      fa_load<LT_FA_BQB>(dos, dout + qoff, qt, a.S, a.qss, a.D, a.vec);
      if (threadIdx.x < LT_FA_BQB) { /* the logsumexp in log2 units; +inf (P = 0) where nothing is visible */
        int64_t i = qt + threadIdx.x;
        float L = i < qlim ? lse[roff + i] : -INFINITY;
        ls[threadIdx.x] = L == -INFINITY ? INFINITY : L * LT_LOG2E;
        dls[threadIdx.x] = i < a.S ? delta[roff + i] : 0.f;
      }
      __syncthreads();
      /* S^T = K Q^T and dP^T = V dO^T: the warp's 16 keys by the step's query rows */
      float st[LT_FA_BQB / 8][4], dpt[LT_FA_BQB / 8][4];
#pragma unroll
      for (int n = 0; n < LT_FA_BQB / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) st[n][e] = dpt[n][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < LT_FA_D / 8; kk++) {
        const uint32_t *kr = kw + kk * 8, *vr = vw + kk * 8;
        uint32_t k0 = kr[0], k1 = kr[8 * LT_FA_P], k2 = kr[4], k3 = kr[8 * LT_FA_P + 4];
        uint32_t v0 = vr[0], v1 = vr[8 * LT_FA_P], v2 = vr[4], v3 = vr[8 * LT_FA_P + 4];
#pragma unroll
        for (int n = 0; n < LT_FA_BQB / 8; n++) {
          const uint32_t *qr = qs + (n * 8 + g) * LT_FA_P + kk * 8 + t, *dr = dos + (n * 8 + g) * LT_FA_P + kk * 8 + t;
          lt_mma(st[n], k0, k1, k2, k3, qr[0], qr[4]);
          lt_mma(dpt[n], v0, v1, v2, v3, dr[0], dr[4]);
        }
      }
#pragma unroll
      for (int n = 0; n < LT_FA_BQB / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          int c = n * 8 + 2 * t + (e & 1);
          int64_t i = qt + c, j = e < 2 ? j0 : j1;
          /* the logit only where the row and key exist: lt_logit reads the mask and bias there, and
           * past them it read memory that could hold a NaN (P = exp2(NaN - inf), and 0 * NaN in
           * dK and dV) */
          float P = 0.f;
          if (i < qlim && j < kvmax && (!a.causal || j <= i)) {
            float x = MASKED ? lt_logit(a, st[n][e], am, bm, bi, b, h, i, j) * LT_LOG2E : st[n][e] * sl2;
            P = lt_ex2(x - ls[c]);
          }
          st[n][e] = P;
          dpt[n][e] = P * (dpt[n][e] - dls[c]) * scale;
          dst[(w * 16 + g + (e >> 1) * 8) * LT_FA_PS + c] = lt_fa_op(dpt[n][e]);
        }
      /* dV += P^T dO, dK += dS^T Q (the query rows taken in the accumulators' order) */
#pragma unroll
      for (int n = 0; n < LT_FA_BQB / 8; n++) {
        uint32_t p0 = lt_fa_op(st[n][0]), p1 = lt_fa_op(st[n][2]), p2 = lt_fa_op(st[n][1]), p3 = lt_fa_op(st[n][3]);
        uint32_t s0 = lt_fa_op(dpt[n][0]), s1 = lt_fa_op(dpt[n][2]), s2 = lt_fa_op(dpt[n][1]), s3 = lt_fa_op(dpt[n][3]);
#pragma unroll
        for (int dn = 0; dn < LT_FA_D / 8; dn++) {
          const uint32_t *dr = dos + (n * 8 + 2 * t) * LT_FA_P + dn * 8 + g, *qr = qs + (n * 8 + 2 * t) * LT_FA_P + dn * 8 + g;
          lt_mma(dva[dn], p0, p1, p2, p3, dr[0], dr[LT_FA_P]);
          lt_mma(dka[dn], s0, s1, s2, s3, qr[0], qr[LT_FA_P]);
        }
      }
      __syncthreads();
      /* dQ += dS K: warp w makes query rows (w & 1) 16.. and half of the head's columns */
      const int mt = (w & 1) * 16;
      float dqa[LT_FA_D / 16][4];
#pragma unroll
      for (int dn = 0; dn < LT_FA_D / 16; dn++) dqa[dn][0] = dqa[dn][1] = dqa[dn][2] = dqa[dn][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < LT_FA_BK / 8; kk++) {
        const uint32_t *sr = dst + (kk * 8 + t) * LT_FA_PS + mt + g;
        uint32_t a0 = sr[0], a1 = sr[8], a2 = sr[4 * LT_FA_PS], a3 = sr[4 * LT_FA_PS + 8];
#pragma unroll
        for (int dn = 0; dn < LT_FA_D / 16; dn++) {
          const uint32_t *kr = ks + (kk * 8 + t) * LT_FA_P + ((w >> 1) * (LT_FA_D / 16) + dn) * 8 + g;
          lt_mma(dqa[dn], a0, a1, a2, a3, kr[0], kr[4 * LT_FA_P]);
        }
      }
#pragma unroll
      for (int dn = 0; dn < LT_FA_D / 16; dn++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          int64_t i = qt + mt + g + (e >> 1) * 8, d = ((w >> 1) * (LT_FA_D / 16) + dn) * 8 + 2 * t + (e & 1);
          if (i < a.S && d < a.D) atomicAdd(dq + qoff + i * a.qss + d, dqa[dn][e]);
        }
    }
  }
#pragma unroll
  for (int dn = 0; dn < LT_FA_D / 8; dn++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      int64_t j = e < 2 ? j0 : j1, d = dn * 8 + 2 * t + (e & 1);
      if (j < a.Skv && d < a.D) {
        lt_s(dk, koff + j * a.kss + d, dka[dn][e]);
        lt_s(dv, koff + j * a.kss + d, dva[dn][e]);
      }
    }
}
#if LT_FA_T != 0 && LT_FA_D >= 32
/* The backward on Float16/BFloat16 tensor cores (option half_bwd=1; heads of 32 or more): the
 * TF32 backward's blocks and steps, its products as mma.sync m16n8k16 of the storage type with
 * Float32 sums. Tiles stay as stored in shared memory; P and dS enter their products rounded to
 * the storage type, as FlashAttention does. dS is kept [query row][key] for dQ = dS K, whose
 * key fragments, like the value-side B operands (dO, Q), are read transposed by ldmatrix. */
#define LT_FA_PSH (LT_FA_BK / 2 + 4) /* words of a dS row (the block's keys as halves) */
template <bool MASKED> __device__ void fh_bwd(const LT_FA_S *q, const LT_FA_S *k, const LT_FA_S *v, const LT_FA_S *dout,
                                              const float *lse, const float *delta, float *dq, LT_FA_S *dk, LT_FA_S *dv,
                                              const float *am, const uint8_t *bm, const float *bi, const int32_t *ql,
                                              const int32_t *kl, const lt_att &a) {
  extern __shared__ __align__(16) uint32_t fa_sh[];
  uint32_t *ks = fa_sh, *vs = ks + LT_FA_BK * LT_FA_PH, *qs = vs + LT_FA_BK * LT_FA_PH, *dos = qs + LT_FA_BQB * LT_FA_PH;
  uint32_t *dss = dos + LT_FA_BQB * LT_FA_PH;
  float *ls = (float *)(dss + LT_FA_BQB * LT_FA_PSH), *dls = ls + LT_FA_BQB;
  uint16_t *ds16 = (uint16_t *)dss;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int64_t Hkv = a.H / a.group, tiles = (a.Skv + LT_FA_BK - 1) / LT_FA_BK;
  const int64_t pair = blockIdx.x / tiles, kt0 = blockIdx.x % tiles * LT_FA_BK, b = pair / Hkv, hk = pair % Hkv;
  const int64_t koff = b * a.kbs + hk * a.khs, j0 = kt0 + w * 16 + g, j1 = j0 + 8;
  const float scale = (float)a.scale, sl2 = scale * LT_LOG2E;
  fh_tile<LT_FA_BK>(ks, k + koff, kt0, a.Skv, a.kss, a.D, a.vec);
  fh_tile<LT_FA_BK>(vs, v + koff, kt0, a.Skv, a.kss, a.D, a.vec);
  fh_commit();
  float dka[LT_FA_D / 8][4], dva[LT_FA_D / 8][4];
#pragma unroll
  for (int dn = 0; dn < LT_FA_D / 8; dn++)
#pragma unroll
    for (int e = 0; e < 4; e++) dka[dn][e] = dva[dn][e] = 0.f;
  const int64_t qlim = lt_qlim(a, ql, b), kvmax = a.has_lens ? lt_clamp(kl[b], 0, a.Skv) : a.Skv;
  const int64_t qstart = kt0 >= kvmax ? qlim : a.causal ? kt0 / LT_FA_BQB * LT_FA_BQB : 0;
  /* the warp's 16 keys as A fragments; a lane's row and column of the transposed ldmatrix reads */
  const uint32_t *kw = ks + (w * 16 + g) * LT_FA_PH + t, *vw = vs + (w * 16 + g) * LT_FA_PH + t;
  const int trow = (lane >> 3 & 1) * 8 + (lane & 7), tcol = (lane >> 4) * 4;
  for (int64_t gi = 0; gi < a.group; gi++) {
    const int64_t h = hk * a.group + gi, qoff = b * a.qbs + h * a.qhs, roff = (b * a.H + h) * a.S;
    for (int64_t qt = qstart; qt < qlim; qt += LT_FA_BQB) {
      __syncthreads(); /* the last step's readers of qs, dos and dss are done */
      fh_tile<LT_FA_BQB>(qs, q + qoff, qt, a.S, a.qss, a.D, a.vec);
      fh_tile<LT_FA_BQB>(dos, dout + qoff, qt, a.S, a.qss, a.D, a.vec);
      fh_commit();
      if (threadIdx.x < LT_FA_BQB) { /* the logsumexp in log2 units; +inf (P = 0) where nothing is visible */
        int64_t i = qt + threadIdx.x;
        float L = i < qlim ? lse[roff + i] : -INFINITY;
        ls[threadIdx.x] = L == -INFINITY ? INFINITY : L * LT_LOG2E;
        dls[threadIdx.x] = i < a.S ? delta[roff + i] : 0.f;
      }
      fh_wait0();
      __syncthreads();
      /* S^T = K Q^T and dP^T = V dO^T: the warp's 16 keys by the step's query rows */
      float st[LT_FA_BQB / 8][4], dpt[LT_FA_BQB / 8][4];
#pragma unroll
      for (int n = 0; n < LT_FA_BQB / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) st[n][e] = dpt[n][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < LT_FA_D / 16; kk++) {
        const uint32_t *kr = kw + kk * 8, *vr = vw + kk * 8;
        uint32_t k0 = kr[0], k1 = kr[8 * LT_FA_PH], k2 = kr[4], k3 = kr[8 * LT_FA_PH + 4];
        uint32_t v0 = vr[0], v1 = vr[8 * LT_FA_PH], v2 = vr[4], v3 = vr[8 * LT_FA_PH + 4];
#pragma unroll
        for (int n = 0; n < LT_FA_BQB / 8; n++) {
          const uint32_t *qr = qs + (n * 8 + g) * LT_FA_PH + kk * 8 + t, *dr = dos + (n * 8 + g) * LT_FA_PH + kk * 8 + t;
          lt_mma16(st[n], k0, k1, k2, k3, qr[0], qr[4]);
          lt_mma16(dpt[n], v0, v1, v2, v3, dr[0], dr[4]);
        }
      }
#pragma unroll
      for (int n = 0; n < LT_FA_BQB / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          int c = n * 8 + 2 * t + (e & 1);
          int64_t i = qt + c, j = e < 2 ? j0 : j1;
          float P = 0.f; /* as in fa_bwd: the logit only where the row and the key exist */
          if (i < qlim && j < kvmax && (!a.causal || j <= i)) {
            float x = MASKED ? lt_logit(a, st[n][e], am, bm, bi, b, h, i, j) * LT_LOG2E : st[n][e] * sl2;
            P = lt_ex2(x - ls[c]);
          }
          st[n][e] = P;
          dpt[n][e] = P * (dpt[n][e] - dls[c]) * scale;
          ds16[c * 2 * LT_FA_PSH + w * 16 + g + (e >> 1) * 8] = (uint16_t)fh_pack(dpt[n][e], 0.f);
        }
      /* dV += P^T dO, dK += dS^T Q: score tiles 2j and 2j + 1 are the A fragment's 16 query rows */
#pragma unroll
      for (int j = 0; j < LT_FA_BQB / 16; j++) {
        uint32_t p0 = fh_pack(st[2 * j][0], st[2 * j][1]), p1 = fh_pack(st[2 * j][2], st[2 * j][3]);
        uint32_t p2 = fh_pack(st[2 * j + 1][0], st[2 * j + 1][1]), p3 = fh_pack(st[2 * j + 1][2], st[2 * j + 1][3]);
        uint32_t s0 = fh_pack(dpt[2 * j][0], dpt[2 * j][1]), s1 = fh_pack(dpt[2 * j][2], dpt[2 * j][3]);
        uint32_t s2 = fh_pack(dpt[2 * j + 1][0], dpt[2 * j + 1][1]), s3 = fh_pack(dpt[2 * j + 1][2], dpt[2 * j + 1][3]);
#pragma unroll
        for (int dn = 0; dn < LT_FA_D / 8; dn += 2) {
          uint32_t b0, b1, b2, b3;
          fh_ldsm4t(b0, b1, b2, b3, dos + (j * 16 + trow) * LT_FA_PH + dn * 4 + tcol);
          lt_mma16(dva[dn], p0, p1, p2, p3, b0, b1);
          lt_mma16(dva[dn + 1], p0, p1, p2, p3, b2, b3);
          fh_ldsm4t(b0, b1, b2, b3, qs + (j * 16 + trow) * LT_FA_PH + dn * 4 + tcol);
          lt_mma16(dka[dn], s0, s1, s2, s3, b0, b1);
          lt_mma16(dka[dn + 1], s0, s1, s2, s3, b2, b3);
        }
      }
      __syncthreads(); /* dS complete */
      /* dQ += dS K: warp w makes query rows (w & 1) 16.. and half of the head's columns */
      const int mt = (w & 1) * 16, d0 = (w >> 1) * (LT_FA_D / 16);
      float dqa[LT_FA_D / 16][4];
#pragma unroll
      for (int dn = 0; dn < LT_FA_D / 16; dn++) dqa[dn][0] = dqa[dn][1] = dqa[dn][2] = dqa[dn][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < LT_FA_BK / 16; kk++) {
        const uint32_t *sr = dss + (mt + g) * LT_FA_PSH + kk * 8 + t;
        uint32_t a0 = sr[0], a1 = sr[8 * LT_FA_PSH], a2 = sr[4], a3 = sr[8 * LT_FA_PSH + 4];
#pragma unroll
        for (int dn = 0; dn < LT_FA_D / 16; dn += 2) {
          uint32_t b0, b1, b2, b3;
          fh_ldsm4t(b0, b1, b2, b3, ks + (kk * 16 + trow) * LT_FA_PH + (d0 + dn) * 4 + tcol);
          lt_mma16(dqa[dn], a0, a1, a2, a3, b0, b1);
          lt_mma16(dqa[dn + 1], a0, a1, a2, a3, b2, b3);
        }
      }
#pragma unroll
      for (int dn = 0; dn < LT_FA_D / 16; dn++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          int64_t i = qt + mt + g + (e >> 1) * 8, d = (d0 + dn) * 8 + 2 * t + (e & 1);
          if (i < a.S && d < a.D) atomicAdd(dq + qoff + i * a.qss + d, dqa[dn][e]);
        }
    }
  }
#pragma unroll
  for (int dn = 0; dn < LT_FA_D / 8; dn++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      int64_t j = e < 2 ? j0 : j1, d = dn * 8 + 2 * t + (e & 1);
      if (j < a.Skv && d < a.D) {
        lt_s(dk, koff + j * a.kss + d, dka[dn][e]);
        lt_s(dv, koff + j * a.kss + d, dva[dn][e]);
      }
    }
}
#define LT_FA_BWD_H(suffix, MASKED)                                                                                   \
  extern "C" __global__ void __launch_bounds__(128) lt_att_flash_bwd_h##suffix(const LT_FA_S *q, const LT_FA_S *k,    \
      const LT_FA_S *v, const LT_FA_S *dout, const float *lse, const float *delta, float *dq, LT_FA_S *dk, LT_FA_S *dv, \
      const float *am, const uint8_t *bm, const float *bi, const int32_t *ql, const int32_t *kl,                      \
      const __grid_constant__ lt_att a) {                                                                             \
    fh_bwd<MASKED>(q, k, v, dout, lse, delta, dq, dk, dv, am, bm, bi, ql, kl, a); }
#if LT_FA_MASKED
LT_FA_BWD_H(_masked, true)
#else
LT_FA_BWD_H(, false)
#endif
#endif
#define LT_FA_BWD(suffix, MASKED)                                                                                     \
  extern "C" __global__ void __launch_bounds__(128) lt_att_flash_bwd##suffix(const LT_FA_S *q, const LT_FA_S *k,      \
      const LT_FA_S *v, const LT_FA_S *dout, const float *lse, const float *delta, float *dq, LT_FA_S *dk, LT_FA_S *dv, \
      const float *am, const uint8_t *bm, const float *bi, const int32_t *ql, const int32_t *kl,                      \
      const __grid_constant__ lt_att a) {                                                                             \
    fa_bwd<MASKED>(q, k, v, dout, lse, delta, dq, dk, dv, am, bm, bi, ql, kl, a); }
#if LT_FA_MASKED
LT_FA_BWD(_masked, true)
#else
LT_FA_BWD(, false)
#endif
/* delta = rowsum(dOutput * output), the backward's first step (attention.cuh's att_delta) */
extern "C" __global__ void lt_att_flash_delta(const LT_FA_S *o, const LT_FA_S *d, float *delta, const __grid_constant__ lt_att a,
                                              int64_t rows, int tpr) {
  att_delta(o, d, delta, a, rows, tpr);
}
