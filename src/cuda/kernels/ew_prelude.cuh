#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
#define INT32_MAX 2147483647
#define INT64_MAX 9223372036854775807LL
template <typename A> LT_DEV A lt_max(A a, A b) { return (a > b || a != a) ? a : b; }
template <typename A> LT_DEV A lt_min(A a, A b) { return (a < b || a != a) ? a : b; }
LT_DEV int32_t lt_key(float f) { int32_t i = __float_as_int(f); return i < 0 ? i ^ INT32_MAX : i; }
LT_DEV int64_t lt_key(double f) { int64_t i = __double_as_longlong(f); return i < 0 ? i ^ INT64_MAX : i; }
LT_DEV double lt_f64(float v) {
  double d = v; uint64_t u = (uint64_t)__double_as_longlong(d); u |= (uint64_t)(d != d) << 51;
  return __longlong_as_double((long long)u);
}
LT_DEV double lt_f64(double v) { return v; }
LT_DEV int lt_popcount(uint64_t v) { return __popcll(v); }
LT_DEV int lt_sigbits(uint64_t v) { return 64 - __clzll((long long)v); }
LT_DEV uint64_t lt_lowbits(uint64_t v, int bits) { return bits >= 64 ? v : v & (((uint64_t)1 << bits) - 1); }
LT_DEV uint64_t lt_ipow(uint64_t base, int64_t e) {
  uint64_t r = 1; while (e > 0) { if (e & 1) r *= base; base *= base; e >>= 1; } return r;
}
LT_DEV int64_t lt_f2s(double v, int bits) {
  double lim = ldexp(1.0, bits - 1);
  if (v != v) return 0;
  if (v >= lim) return (int64_t)(((uint64_t)1 << (bits - 1)) - 1);
  if (v <= -lim) return (int64_t)(0 - ((uint64_t)1 << (bits - 1)));
  return (int64_t)v;
}
LT_DEV uint64_t lt_f2u(double v, int bits) {
  if (v != v || v <= 0) return 0;
  if (v >= ldexp(1.0, bits)) return ~(uint64_t)0 >> (64 - bits);
  return (uint64_t)v;
}
/* complex: operators, parts, and math after glibc's formulas */
LT_DEV lt_c64 operator+(lt_c64 a, lt_c64 b) { return lt_c64(a.re + b.re, a.im + b.im); }
LT_DEV lt_c128 operator+(lt_c128 a, lt_c128 b) { return lt_c128(a.re + b.re, a.im + b.im); }
LT_DEV lt_c64 operator-(lt_c64 a, lt_c64 b) { return lt_c64(a.re - b.re, a.im - b.im); }
LT_DEV lt_c128 operator-(lt_c128 a, lt_c128 b) { return lt_c128(a.re - b.re, a.im - b.im); }
LT_DEV lt_c64 operator-(lt_c64 a) { return lt_c64(-a.re, -a.im); }
LT_DEV lt_c128 operator-(lt_c128 a) { return lt_c128(-a.re, -a.im); }
LT_DEV bool operator==(lt_c64 a, lt_c64 b) { return a.re == b.re && a.im == b.im; }
LT_DEV bool operator==(lt_c128 a, lt_c128 b) { return a.re == b.re && a.im == b.im; }
LT_DEV bool operator!=(lt_c64 a, lt_c64 b) { return !(a == b); }
LT_DEV bool operator!=(lt_c128 a, lt_c128 b) { return !(a == b); }
LT_DEV float lt_creal(lt_c64 z) { return z.re; }
LT_DEV double lt_creal(lt_c128 z) { return z.re; }
LT_DEV float lt_cimag(lt_c64 z) { return z.im; }
LT_DEV double lt_cimag(lt_c128 z) { return z.im; }
LT_DEV lt_c64 lt_conj(lt_c64 z) { return lt_c64(z.re, -z.im); }
LT_DEV lt_c128 lt_conj(lt_c128 z) { return lt_c128(z.re, -z.im); }
LT_DEV lt_c64 lt_cmk(float re, float im) { return lt_c64(re, im); }
LT_DEV lt_c128 lt_cmk(double re, double im) { return lt_c128(re, im); }
LT_DEV float lt_cabs(lt_c64 z) { return hypotf(z.re, z.im); }
LT_DEV double lt_cabs(lt_c128 z) { return hypot(z.re, z.im); }
/* C99 Annex G multiplication and division (libgcc's __mulsc3 / __divsc3) */
template <typename C, typename R> LT_DEV C lt_cmul_t(C z, C w) {
  R a = z.re, b = z.im, c = w.re, d = w.im, ac = a * c, bd = b * d, ad = a * d, bc = b * c;
  R x = ac - bd, y = ad + bc;
  if (isnan(x) && isnan(y)) {
    bool recalc = false;
    if (isinf(a) || isinf(b)) { a = copysign(isinf(a) ? (R)1 : (R)0, a); b = copysign(isinf(b) ? (R)1 : (R)0, b);
      if (isnan(c)) c = copysign((R)0, c); if (isnan(d)) d = copysign((R)0, d); recalc = true; }
    if (isinf(c) || isinf(d)) { c = copysign(isinf(c) ? (R)1 : (R)0, c); d = copysign(isinf(d) ? (R)1 : (R)0, d);
      if (isnan(a)) a = copysign((R)0, a); if (isnan(b)) b = copysign((R)0, b); recalc = true; }
    if (!recalc && (isinf(ac) || isinf(bd) || isinf(ad) || isinf(bc))) {
      if (isnan(a)) a = copysign((R)0, a); if (isnan(b)) b = copysign((R)0, b);
      if (isnan(c)) c = copysign((R)0, c); if (isnan(d)) d = copysign((R)0, d); recalc = true; }
    if (recalc) { R inf = (R)INFINITY; x = inf * (a * c - b * d); y = inf * (a * d + b * c); }
  }
  return C(x, y);
}
template <typename C, typename R> LT_DEV C lt_cdiv_t(C z, C w) {
  R a = z.re, b = z.im, c = w.re, d = w.im; int ilogbw = 0;
  R logbw = logb(fmax(fabs(c), fabs(d)));
  if (isfinite(logbw)) { ilogbw = (int)logbw; c = scalbn(c, -ilogbw); d = scalbn(d, -ilogbw); }
  R denom = c * c + d * d;
  R x = scalbn((a * c + b * d) / denom, -ilogbw), y = scalbn((b * c - a * d) / denom, -ilogbw);
  if (isnan(x) && isnan(y)) {
    R inf = (R)INFINITY;
    if (denom == 0 && (!isnan(a) || !isnan(b))) { x = copysign(inf, c) * a; y = copysign(inf, c) * b; }
    else if ((isinf(a) || isinf(b)) && isfinite(c) && isfinite(d)) {
      a = copysign(isinf(a) ? (R)1 : (R)0, a); b = copysign(isinf(b) ? (R)1 : (R)0, b);
      x = inf * (a * c + b * d); y = inf * (b * c - a * d); }
    else if (isinf(logbw) && logbw > 0 && isfinite(a) && isfinite(b)) {
      c = copysign(isinf(c) ? (R)1 : (R)0, c); d = copysign(isinf(d) ? (R)1 : (R)0, d);
      x = (R)0 * (a * c + b * d); y = (R)0 * (b * c - a * d); }
  }
  return C(x, y);
}
LT_DEV lt_c64 lt_cmul(lt_c64 a, lt_c64 b) { return lt_cmul_t<lt_c64, float>(a, b); }
LT_DEV lt_c128 lt_cmul(lt_c128 a, lt_c128 b) { return lt_cmul_t<lt_c128, double>(a, b); }
LT_DEV lt_c64 lt_cdiv(lt_c64 a, lt_c64 b) { return lt_cdiv_t<lt_c64, float>(a, b); }
LT_DEV lt_c128 lt_cdiv(lt_c128 a, lt_c128 b) { return lt_cdiv_t<lt_c128, double>(a, b); }
template <typename C, typename R> LT_DEV C lt_cexp_t(C z) {
  R x = z.re, y = z.im;
  /* C99 Annex G's special values */
  if (isinf(x) && x < 0 && !isfinite(y)) return C((R)0, copysign((R)0, y));
  if (isinf(x) && x > 0 && !isfinite(y)) return C(x, isnan(y) ? y : (R)NAN);
  if (isnan(x) && y == 0) return C(x, y);
  if (y == 0) return C(exp(x), y);
  R e = exp(x), s, c; sincos(y, &s, &c);
  return C(e * c, e * s);
}
LT_DEV lt_c64 lt_cexp(lt_c64 z) { return lt_cexp_t<lt_c64, float>(z); }
LT_DEV lt_c128 lt_cexp(lt_c128 z) { return lt_cexp_t<lt_c128, double>(z); }
LT_DEV lt_c64 lt_clog(lt_c64 z) { return lt_c64(logf(hypotf(z.re, z.im)), atan2f(z.im, z.re)); }
LT_DEV lt_c128 lt_clog(lt_c128 z) { return lt_c128(log(hypot(z.re, z.im)), atan2(z.im, z.re)); }
template <typename C, typename R> LT_DEV C lt_csqrt_t(C z) {
  R x = z.re, y = z.im;
  if (isinf(y)) return C((R)INFINITY, y);
  if (x == 0 && y == 0) return C((R)0, y);
  R t = sqrt((fabs(x) + hypot(x, y)) * (R)0.5);
  if (x >= 0) return C(t, y / (2 * t));
  return C(fabs(y) / (2 * t), copysign(t, y));
}
LT_DEV lt_c64 lt_csqrt(lt_c64 z) { return lt_csqrt_t<lt_c64, float>(z); }
LT_DEV lt_c128 lt_csqrt(lt_c128 z) { return lt_csqrt_t<lt_c128, double>(z); }
LT_DEV lt_c64 lt_csin(lt_c64 z) { return lt_c64(sinf(z.re) * coshf(z.im), cosf(z.re) * sinhf(z.im)); }
LT_DEV lt_c128 lt_csin(lt_c128 z) { return lt_c128(sin(z.re) * cosh(z.im), cos(z.re) * sinh(z.im)); }
LT_DEV lt_c64 lt_ccos(lt_c64 z) { return lt_c64(cosf(z.re) * coshf(z.im), -sinf(z.re) * sinhf(z.im)); }
LT_DEV lt_c128 lt_ccos(lt_c128 z) { return lt_c128(cos(z.re) * cosh(z.im), -sin(z.re) * sinh(z.im)); }
template <typename C, typename R> LT_DEV C lt_ctanh_t(C z) {
  R x = z.re, y = z.im;
  if (fabs(x) > (R)20) { R s, c; sincos(y, &s, &c); return C(copysign((R)1, x), (R)4 * s * c * exp(-2 * fabs(x))); }
  R t = tan(y), b = (R)1 + t * t, s = sinh(x), r = sqrt((R)1 + s * s), d = (R)1 + b * s * s;
  return C(b * r * s / d, t / d);
}
LT_DEV lt_c64 lt_ctanh(lt_c64 z) { return lt_ctanh_t<lt_c64, float>(z); }
LT_DEV lt_c128 lt_ctanh(lt_c128 z) { return lt_ctanh_t<lt_c128, double>(z); }
LT_DEV lt_c64 lt_cpow(lt_c64 a, lt_c64 b) { return lt_cexp(lt_cmul(b, lt_clog(a))); }
LT_DEV lt_c128 lt_cpow(lt_c128 a, lt_c128 b) { return lt_cexp(lt_cmul(b, lt_clog(a))); }
LT_DEV lt_c128 lt_cexpm1(lt_c128 z) {
  double x = z.re, y = z.im, s = sin(y / 2);
  return lt_c128(expm1(x) * cos(y) - 2 * s * s, exp(x) * sin(y));
}
LT_DEV lt_c128 lt_clog1p(lt_c128 z) {
  double x = z.re, y = z.im;
  if (fabs(x) > 0.5 || fabs(y) > 0.5) return lt_clog(lt_c128(1 + x, y));
  return lt_c128(0.5 * log1p(x * (2 + x) + y * y), atan2(y, 1 + x));
}
LT_DEV lt_c128 lt_csign(lt_c128 z) { double a = hypot(z.re, z.im); return a == 0 ? z : lt_c128(z.re / a, z.im / a); }
LT_DEV int lt_cisfinite(lt_c128 z) { return isfinite(z.re) && isfinite(z.im); }
LT_DEV int lt_cisnan(lt_c128 z) { return isnan(z.re) || isnan(z.im); }
/* lt_div32 and lt_udiv: the prelude */
