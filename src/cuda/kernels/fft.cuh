LT_DEV lt_c128 lt_ld(const float *p, int64_t i) { return lt_c128((double)p[i], 0.0); }
LT_DEV lt_c128 lt_ld(const double *p, int64_t i) { return lt_c128(p[i], 0.0); }
LT_DEV lt_c128 lt_ld(const lt_c64 *p, int64_t i) { return lt_c128((double)p[i].re, (double)p[i].im); }
LT_DEV lt_c128 lt_ld(const lt_c128 *p, int64_t i) { return p[i]; }
LT_DEV void lt_st(float *p, int64_t i, lt_c128 v) { p[i] = (float)v.re; }
LT_DEV void lt_st(double *p, int64_t i, lt_c128 v) { p[i] = v.re; }
LT_DEV void lt_st(lt_c64 *p, int64_t i, lt_c128 v) { p[i] = lt_c64((float)v.re, (float)v.im); }
LT_DEV void lt_st(lt_c128 *p, int64_t i, lt_c128 v) { p[i] = v; }
/* out = in * scale, between any two of the four types (a real output keeps the real part) */
template <typename I, typename O> __device__ void cvt(const I *in, O *out, int64_t n, double scale) {
  LT_LOOP(i, n) { lt_c128 v = lt_ld(in, i); lt_st(out, i, lt_c128(v.re * scale, v.im * scale)); }
}
/* A half spectrum [..., n0, n1, h] (h = nlast/2+1) made Hermitian over the transformed axes,
 * scaled: the DC and Nyquist columns become (X[k] + conj(X[-k]))/2, k negated over n0, n1. */
template <typename I> __device__ void herm(const I *in, lt_c128 *out, int64_t n, int64_t h, int64_t nlast,
                                          int64_t n0, int64_t n1, double scale) {
  LT_LOOP(i, n) {
    int64_t c = i % h;
    lt_c128 v = lt_ld(in, i);
    if (c == 0 || 2 * c == nlast) {
      int64_t r = i / h, k1 = r % n1; r /= n1;
      int64_t k0 = r % n0; r /= n0;
      lt_c128 w = lt_ld(in, ((r * n0 + (k0 ? n0 - k0 : 0)) * n1 + (k1 ? n1 - k1 : 0)) * h + c);
      v = lt_c128(0.5 * v.re + 0.5 * w.re, 0.5 * v.im - 0.5 * w.im);
    }
    out[i] = lt_c128(v.re * scale, v.im * scale);
  }
}
#define LT_CVT(a, A, b, B) extern "C" __global__ void lt_fft_cvt_##a##_##b(const A *i, B *o, int64_t n, double s) { cvt(i, o, n, s); }
#define LT_CVT4(a, A) LT_CVT(a, A, f32, float) LT_CVT(a, A, f64, double) LT_CVT(a, A, c64, lt_c64) LT_CVT(a, A, c128, lt_c128)
LT_CVT4(f32, float) LT_CVT4(f64, double) LT_CVT4(c64, lt_c64) LT_CVT4(c128, lt_c128)
#define LT_HERM(a, A) extern "C" __global__ void lt_fft_herm_##a(const A *i, lt_c128 *o, int64_t n, int64_t h, \
    int64_t nl, int64_t n0, int64_t n1, double s) { herm(i, o, n, h, nl, n0, n1, s); }
LT_HERM(c64, lt_c64) LT_HERM(c128, lt_c128)
