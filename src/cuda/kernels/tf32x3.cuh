/* tf32x3.cuh -- a Float32 operand split for products as three TF32 products (gemm.c, option
 * tf32x3=1): x = hi + lo, hi = x rounded to TF32 (10 mantissa bits, to nearest, ties away, as
 * cvt.rna.tf32.f32 rounds), lo = x - hi (exact in Float32) rounded to TF32 as well, so that the
 * tensor cores take both as they are. lo is within 2^-11 of |x| and its rounding within 2^-11 of
 * lo: hi + lo is x within about 2^-22 |x|. A value whose hi would overflow (within half a TF32
 * step of Float32's largest) keeps its truncation as hi; inf and NaN are their own hi, lo 0.
 *
 * lt_split_tf32(x, out, batches, lines, lines2, len, len2, lstride, each, bs, ls, es, at0, at1, at2):
 * element e of line l of batch b, x[b*bs + l*ls + e*es], goes to o = b*each + l*lstride + e, its hi
 * to out[o + at0] and out[o + at1], its lo to out[o + at2] (gemm.c's [lo | hi | hi] and
 * [hi ; lo ; hi] along k); lines from lines to lines2 and elements from len to len2 are 0 (both
 * sizes rounded up to 16 bytes). */
LT_DEV float lt_tf32_rna(float v) {
  uint32_t u;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(v));
  return __uint_as_float(u);
}
extern "C" __global__ void lt_split_tf32(const float *__restrict__ x, float *__restrict__ out, int64_t batches, int64_t lines,
                                         int64_t lines2, int64_t len, int64_t len2, int64_t lstride, int64_t each, int64_t bs,
                                         int64_t ls, int64_t es, int64_t at0, int64_t at1, int64_t at2) {
  const int64_t n = batches * lines2 * len2;
  LT_LOOP(i, n) {
    const int64_t e = i % len2, q = i / len2, l = q % lines2, b = q / lines2;
    const float v = e < len && l < lines ? x[b * bs + l * ls + e * es] : 0.0f;
    float h = v, r = 0.0f;
    if (isfinite(v)) {
      h = lt_tf32_rna(v);
      if (!isfinite(h)) h = __uint_as_float(__float_as_uint(v) & 0xffffe000u);
      r = lt_tf32_rna(v - h);
    }
    const int64_t o = b * each + l * lstride + e;
    out[o + at0] = h;
    out[o + at1] = h;
    out[o + at2] = r;
  }
}
