/* elementwise.cpp -- UNARY, BINARY, COMPARE, SELECT and CONVERT ops as MLX expressions with
 * lathe:cpu's semantics (src/cpu/unary.c, binary.c, compare.c, select.c, convert.c):
 * integer division by zero and MIN/-1, C's remainder sign, shifts past the width, Pow with
 * negative exponents, Sign of -0 and NaN, and saturating float -> integer conversion are written
 * out where MLX's own ops differ (MLX follows NumPy: floor division, Python's remainder, C
 * behaviour for the rest). */
#include "mlx.h"

namespace lathe_mlx {
namespace {

bool is_sint(const mx::array &x) { return mx::issubdtype(x.dtype(), mx::signedinteger); }
bool is_uint(const mx::array &x) { return mx::issubdtype(x.dtype(), mx::unsignedinteger); }
bool is_int(const mx::array &x) { return mx::issubdtype(x.dtype(), mx::integer); }
bool is_cplx(const mx::array &x) { return x.dtype() == mx::complex64; }
int bits_of(const mx::array &x) { return (int)x.dtype().size() * 8; }

mx::array zero(const mx::array &x) { return scalar_i(0, x.dtype()); }
mx::array one(const mx::array &x) { return scalar_i(1, x.dtype()); }

/* Whether a float's sign bit is set (also for -0 and negative NaNs). */
mx::array sign_bit(const mx::array &x) { return mx::less(mx::view(x, sint_of(x.dtype())), scalar_i(0, sint_of(x.dtype()))); }

/* |x| of Complex64 as Float32, as hypot: MLX's abs casts its complex result with AsType, which
 * MLX's CUDA kernel compiler cannot fuse (no complex -> float conversion). Scaled by the larger
 * part so that squares neither overflow nor underflow; an infinite part gives +inf, even with NaN. */
mx::array cabs(const mx::array &x) {
  mx::array a = mx::abs(mx::real(x)), b = mx::abs(mx::imag(x));
  mx::array m = mx::maximum(a, b), n = mx::minimum(a, b), z = scalar_f(0, mx::float32);
  mx::array r = mx::where(mx::equal(m, z), z, mx::divide(n, m));
  mx::array h = mx::multiply(m, mx::sqrt(mx::add(scalar_f(1, mx::float32), mx::multiply(r, r))));
  return mx::where(mx::logical_or(mx::isinf(a), mx::isinf(b)), scalar_f(INFINITY, mx::float32), h);
}

/* Complex division as C99 Annex G (lathe:cpu's C division): where the quotient is NaN in both
 * parts, infinities and zero divisors are recovered (MLX's CUDA division gives NaN there). */
mx::array cdiv(const mx::array &x, const mx::array &y) {
  mx::array q = mx::divide(x, y);
  mx::array a = mx::real(x), b = mx::imag(x), c = mx::real(y), d = mx::imag(y);
  auto f = [](double v) { return scalar_f(v, mx::float32); };
  auto copysign = [](const mx::array &m, const mx::array &s) { return mx::where(sign_bit(s), mx::negative(m), m); };
  auto unit_inf = [&](const mx::array &v) { return copysign(mx::where(mx::isinf(v), f(1), f(0)), v); };
  auto fin = [](const mx::array &v) { return mx::isfinite(v); };
  mx::array both_nan = mx::logical_and(mx::isnan(mx::real(q)), mx::isnan(mx::imag(q)));
  /* a zero divisor: an infinity signed by the numerator */
  mx::array zero_den = mx::logical_and(mx::logical_and(mx::equal(c, f(0)), mx::equal(d, f(0))),
                                       mx::logical_or(mx::logical_not(mx::isnan(a)), mx::logical_not(mx::isnan(b))));
  mx::array inf_c = copysign(f(INFINITY), c);
  mx::array zr = mx::multiply(inf_c, a), zi = mx::multiply(inf_c, b);
  /* an infinite numerator over a finite divisor: infinities */
  mx::array num_inf = mx::logical_and(mx::logical_or(mx::isinf(a), mx::isinf(b)), mx::logical_and(fin(c), fin(d)));
  mx::array a1 = unit_inf(a), b1 = unit_inf(b);
  mx::array nr = mx::multiply(f(INFINITY), mx::add(mx::multiply(a1, c), mx::multiply(b1, d)));
  mx::array ni = mx::multiply(f(INFINITY), mx::subtract(mx::multiply(b1, c), mx::multiply(a1, d)));
  /* a finite numerator over an infinite divisor: signed zeros */
  mx::array den_inf = mx::logical_and(mx::logical_or(mx::isinf(c), mx::isinf(d)), mx::logical_and(fin(a), fin(b)));
  mx::array c1 = unit_inf(c), d1 = unit_inf(d);
  mx::array dr = mx::multiply(f(0), mx::add(mx::multiply(a, c1), mx::multiply(b, d1)));
  mx::array di = mx::multiply(f(0), mx::subtract(mx::multiply(b, c1), mx::multiply(a, d1)));
  mx::array re = mx::where(zero_den, zr, mx::where(num_inf, nr, mx::where(den_inf, dr, mx::real(q))));
  mx::array im = mx::where(zero_den, zi, mx::where(num_inf, ni, mx::where(den_inf, di, mx::imag(q))));
  return mx::where(both_nan, complex_of(re, im), q);
}

mx::array popcount(const mx::array &x) {
  mx::Dtype ut = uint_of(x.dtype());
  int bits = bits_of(x);
  mx::array v = mx::view(x, ut);
  auto k = [&](uint64_t c) { return scalar_u(c, ut); };
  v = mx::subtract(v, mx::bitwise_and(mx::right_shift(v, k(1)), k(0x5555555555555555ull)));
  v = mx::add(mx::bitwise_and(v, k(0x3333333333333333ull)), mx::bitwise_and(mx::right_shift(v, k(2)), k(0x3333333333333333ull)));
  v = mx::bitwise_and(mx::add(v, mx::right_shift(v, k(4))), k(0x0f0f0f0f0f0f0f0full));
  if (bits > 8) v = mx::right_shift(mx::multiply(v, k(0x0101010101010101ull)), k((uint64_t)bits - 8));
  return mx::astype(v, x.dtype());
}

mx::array count_leading_zeros(const mx::array &x) {
  mx::Dtype ut = uint_of(x.dtype());
  int bits = bits_of(x);
  mx::array v = mx::view(x, ut), n = mx::zeros(x.shape(), ut);
  for (int s = 32; s >= 1; s /= 2) {
    if (s >= bits) continue;
    mx::array hi = mx::right_shift(v, scalar_u((uint64_t)s, ut));
    mx::array has = mx::not_equal(hi, scalar_u(0, ut));
    n = mx::where(has, mx::add(n, scalar_u((uint64_t)s, ut)), n);
    v = mx::where(has, hi, v);
  }
  n = mx::add(n, v); /* v is now 0 or 1: the highest bit itself */
  return mx::astype(mx::subtract(scalar_u((uint64_t)bits, ut), n), x.dtype());
}

mx::array unary(lathe_op op, const mx::array &x) {
  switch (op) {
    case LATHE_OP_IDENTITY: return x;
    case LATHE_OP_ABS: return is_uint(x) ? x : is_cplx(x) ? cabs(x) : mx::abs(x);
    case LATHE_OP_NEG: return is_int(x) ? mx::subtract(zero(x), x) : mx::negative(x);
    case LATHE_OP_SIGN:
      if (is_cplx(x)) {
        mx::array a = mx::astype(cabs(x), mx::complex64);
        return mx::where(mx::equal(a, zero(a)), x, mx::divide(x, a));
      }
      if (is_int(x)) return mx::sign(x);
      /* Sign keeps -0, +0 and NaN as they are */
      return mx::where(mx::logical_or(mx::equal(x, zero(x)), mx::isnan(x)), x, mx::sign(x));
    case LATHE_OP_CEIL: return mx::ceil(x);
    case LATHE_OP_FLOOR: return mx::floor(x);
    case LATHE_OP_ROUND: return mx::round(x); /* half to even */
    case LATHE_OP_SQRT: return mx::sqrt(x);
    case LATHE_OP_RSQRT: return is_cplx(x) ? cdiv(one(x), mx::sqrt(x)) : mx::rsqrt(x);
    case LATHE_OP_EXP: return exp_(x);
    case LATHE_OP_EXPM1: return is_cplx(x) ? mx::subtract(mx::exp(x), one(x)) : mx::expm1(x);
    case LATHE_OP_LOG: return mx::log(x);
    case LATHE_OP_LOG1P: return mx::log1p(x);
    case LATHE_OP_LOGISTIC:
      if (is_cplx(x)) return cdiv(one(x), mx::add(one(x), mx::exp(mx::negative(x))));
      return logistic_(x);
    case LATHE_OP_TANH: return mx::tanh(x);
    case LATHE_OP_SIN: return sin_(x);
    case LATHE_OP_COS: return cos_(x);
    case LATHE_OP_ERF: return erf_(x);
    case LATHE_OP_IS_FINITE:
      if (is_cplx(x)) return mx::logical_and(mx::isfinite(mx::real(x)), mx::isfinite(mx::imag(x)));
      return mx::isfinite(x);
    case LATHE_OP_IS_NAN:
      if (is_int(x)) return mx::zeros(x.shape(), mx::bool_);
      if (is_cplx(x)) return mx::logical_or(mx::isnan(mx::real(x)), mx::isnan(mx::imag(x)));
      return mx::isnan(x);
    case LATHE_OP_LOGICAL_NOT: return mx::logical_not(x);
    case LATHE_OP_BITWISE_NOT: return mx::bitwise_invert(x);
    case LATHE_OP_BIT_COUNT: return popcount(x);
    case LATHE_OP_CLZ: return count_leading_zeros(x);
    case LATHE_OP_REAL: return is_cplx(x) ? mx::real(x) : x;
    case LATHE_OP_IMAG: return is_cplx(x) ? mx::imag(x) : mx::zeros_like(x);
    case LATHE_OP_CONJ: return is_cplx(x) ? mx::conjugate(x) : x;
    default: MLX_INTERNAL("mlx: %s is not a unary op", lathe_op_name(op));
  }
}

/* C's remainder (the dividend's sign) of integers, y != 0 and y != -1 (callers guard those). */
mx::array c_remainder(const mx::array &x, const mx::array &y) {
  mx::array r = mx::remainder(x, y); /* Python's: the divisor's sign */
  if (!is_sint(x)) return r;
  mx::array fix = mx::logical_and(mx::not_equal(r, zero(r)), mx::not_equal(mx::less(r, zero(r)), mx::less(x, zero(x))));
  return mx::where(fix, mx::subtract(r, y), r);
}

mx::array int_div(const mx::array &x, const mx::array &y) {
  /* x/0 = -1 (all bits set), MIN/-1 = MIN (wrapping negation); otherwise truncation */
  mx::array y0 = mx::equal(y, zero(y));
  mx::array ym1 = is_sint(y) ? mx::equal(y, scalar_i(-1, y.dtype())) : mx::zeros(y.shape(), mx::bool_);
  mx::array ys = mx::where(mx::logical_or(y0, ym1), one(y), y);
  mx::array q = mx::floor_divide(mx::subtract(x, c_remainder(x, ys)), ys); /* exact: trunc */
  q = mx::where(ym1, mx::subtract(zero(x), x), q);
  return mx::where(y0, scalar_i(-1, x.dtype()), q);
}

mx::array int_rem(const mx::array &x, const mx::array &y) {
  /* x%0 = x, MIN%-1 = 0 */
  mx::array y0 = mx::equal(y, zero(y));
  mx::array ym1 = is_sint(y) ? mx::equal(y, scalar_i(-1, y.dtype())) : mx::zeros(y.shape(), mx::bool_);
  mx::array ys = mx::where(mx::logical_or(y0, ym1), one(y), y);
  mx::array r = c_remainder(x, ys);
  r = mx::where(ym1, zero(x), r);
  return mx::where(y0, x, r);
}

mx::array float_rem(const mx::array &x, const mx::array &y) {
  /* fmod: |x| mod |y| (both non-negative, so Python's and C's agree) with x's sign */
  mx::array r = mx::remainder(mx::abs(x), mx::abs(y));
  return mx::where(sign_bit(x), mx::negative(r), r);
}

mx::array shift(lathe_op op, const mx::array &x, const mx::array &y) {
  int bits = bits_of(x);
  /* the amount counts as unsigned: negative amounts are past the width */
  mx::array past = mx::greater_equal(mx::view(y, uint_of(y.dtype())), scalar_u((uint64_t)bits, uint_of(y.dtype())));
  mx::array ys = mx::where(past, zero(y), y);
  switch (op) {
    case LATHE_OP_SHIFT_LEFT: return mx::where(past, zero(x), mx::left_shift(x, ys));
    case LATHE_OP_SHIFT_RIGHT_LOGICAL: {
      mx::Dtype ut = uint_of(x.dtype());
      mx::array r = mx::view(mx::right_shift(mx::view(x, ut), mx::astype(ys, ut)), x.dtype());
      return mx::where(past, zero(x), r);
    }
    default: { /* arithmetic: the sign fills (unsigned: a logical shift) */
      mx::array fill = is_sint(x) ? mx::where(mx::less(x, zero(x)), scalar_i(-1, x.dtype()), zero(x)) : zero(x);
      return mx::where(past, fill, mx::right_shift(x, ys));
    }
  }
}

mx::array binary(lathe_op op, const mx::array &x, const mx::array &y) {
  bool i = is_int(x);
  switch (op) {
    case LATHE_OP_ADD: return mx::add(x, y);
    case LATHE_OP_SUB: return mx::subtract(x, y);
    case LATHE_OP_MUL: return mx::multiply(x, y);
    case LATHE_OP_DIV: return i ? int_div(x, y) : is_cplx(x) ? cdiv(x, y) : mx::divide(x, y);
    case LATHE_OP_REM: return i ? int_rem(x, y) : float_rem(x, y);
    case LATHE_OP_POW:
      if (i) { /* by repeated squaring, wrapping; a negative exponent gives 1 */
        /* the exponent counts as Int64: Uint64 exponents from 2^63 on are negative */
        mx::array neg = y.dtype() == mx::uint64 ? mx::greater_equal(y, scalar_u(UINT64_C(1) << 63, mx::uint64))
                        : is_sint(y)            ? mx::less(y, zero(y))
                                                : mx::zeros(y.shape(), mx::bool_);
        return mx::where(neg, one(x), mx::power(x, mx::where(neg, zero(y), y)));
      }
      return mx::power(x, y);
    case LATHE_OP_MAX: return mx::maximum(x, y); /* NaN propagates; ties give y, as lathe:cpu */
    case LATHE_OP_MIN: return mx::minimum(x, y);
    case LATHE_OP_ATAN2: return mx::arctan2(x, y);
    case LATHE_OP_BITWISE_AND: return mx::bitwise_and(x, y);
    case LATHE_OP_BITWISE_OR: return mx::bitwise_or(x, y);
    case LATHE_OP_BITWISE_XOR: return mx::bitwise_xor(x, y);
    case LATHE_OP_LOGICAL_AND: return mx::logical_and(x, y);
    case LATHE_OP_LOGICAL_OR: return mx::logical_or(x, y);
    case LATHE_OP_LOGICAL_XOR: return mx::not_equal(mx::astype(x, mx::bool_), mx::astype(y, mx::bool_));
    case LATHE_OP_SHIFT_LEFT:
    case LATHE_OP_SHIFT_RIGHT_ARITHMETIC:
    case LATHE_OP_SHIFT_RIGHT_LOGICAL:
      return shift(op, x, y);
    case LATHE_OP_COMPLEX: return complex_of(x, y);
    default: MLX_INTERNAL("mlx: %s is not a binary op", lathe_op_name(op));
  }
}

mx::array compare(lathe_op op, mx::array x, mx::array y) {
  bool total = op >= LATHE_OP_EQUAL_TOTAL_ORDER && op <= LATHE_OP_LESS_OR_EQUAL_TOTAL_ORDER;
  if (total) {
    if (is_cplx(x)) { /* both parts, by their keys */
      mx::array eq = mx::logical_and(mx::equal(total_order_key(mx::real(x)), total_order_key(mx::real(y))),
                                     mx::equal(total_order_key(mx::imag(x)), total_order_key(mx::imag(y))));
      return op == LATHE_OP_EQUAL_TOTAL_ORDER ? eq : mx::logical_not(eq);
    }
    if (mx::issubdtype(x.dtype(), mx::floating)) x = total_order_key(x), y = total_order_key(y);
    op = (lathe_op)(op - LATHE_OP_EQUAL_TOTAL_ORDER + LATHE_OP_EQUAL);
  }
  switch (op) {
    case LATHE_OP_EQUAL: return mx::equal(x, y);
    case LATHE_OP_NOT_EQUAL: return mx::not_equal(x, y);
    case LATHE_OP_GREATER_THAN: return mx::greater(x, y);
    case LATHE_OP_GREATER_OR_EQUAL: return mx::greater_equal(x, y);
    case LATHE_OP_LESS_THAN: return mx::less(x, y);
    case LATHE_OP_LESS_OR_EQUAL: return mx::less_equal(x, y);
    default: MLX_INTERNAL("mlx: %s is not a comparison", lathe_op_name(op));
  }
}

}  // namespace

mx::array complex_of(const mx::array &re, const mx::array &im) {
  /* the parts interleaved and reinterpreted */
  auto parts = mx::broadcast_arrays({mx::astype(re, mx::float32), mx::astype(im, mx::float32)});
  return mx::squeeze(mx::view(mx::stack(parts, -1), mx::complex64), -1);
}

mx::array convert(const mx::array &x, lathe_dtype to) {
  mx::Dtype t = mx_dtype(to);
  if (x.dtype() == t) return x;
  if (t == mx::bool_) {
    if (is_cplx(x)) return mx::logical_or(mx::not_equal(mx::real(x), scalar_f(0, mx::float32)),
                                          mx::not_equal(mx::imag(x), scalar_f(0, mx::float32)));
    return mx::not_equal(x, zero(x)); /* NaN is true */
  }
  mx::array v = is_cplx(x) && t != mx::complex64 ? mx::real(x) : x;
  if (mx::issubdtype(v.dtype(), mx::floating) && mx::issubdtype(t, mx::integer)) {
    /* truncate toward zero, saturate at the target's range, NaN -> 0; the bounds are powers of
     * two, exact in every float dtype (or infinite in the halves, which then never reach them) */
    int bits = (int)t.size() * 8;
    bool s = mx::issubdtype(t, mx::signedinteger);
    double lo = s ? -std::ldexp(1.0, bits - 1) : 0.0, hi = std::ldexp(1.0, s ? bits - 1 : bits);
    mx::array vf = v.dtype() == mx::float64 ? v : mx::astype(v, mx::float32);
    mx::array nan = mx::isnan(vf), big = mx::greater_equal(vf, scalar_f(hi, vf.dtype())),
              small = mx::less_equal(vf, scalar_f(lo, vf.dtype()));
    mx::array safe = mx::where(mx::logical_or(nan, mx::logical_or(big, small)), scalar_f(0, vf.dtype()), vf);
    mx::array r = mx::astype(safe, t);
    mx::array maxv = s ? scalar_i(bits == 64 ? INT64_MAX : (int64_t)((UINT64_C(1) << (bits - 1)) - 1), t)
                       : scalar_u(bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1, t);
    mx::array minv = s ? scalar_i(bits == 64 ? INT64_MIN : -(int64_t)(UINT64_C(1) << (bits - 1)), t) : scalar_u(0, t);
    return mx::where(big, maxv, mx::where(small, minv, r));
  }
  return mx::astype(v, t);
}

mx::array lower_elementwise(Env &, const lathe_node *n, const Arrays &in) {
  switch (lathe_op_kind_of(n->op)) {
    case LATHE_KIND_UNARY: return unary(n->op, in[0]);
    case LATHE_KIND_BINARY: return binary(n->op, in[0], in[1]);
    case LATHE_KIND_COMPARE: return compare(n->op, in[0], in[1]);
    case LATHE_KIND_SELECT:
      if (n->op == LATHE_OP_WHERE) return mx::where(in[0], in[1], in[2]);
      /* Clamp(min, x, max) = Min(Max(min, x), max): a NaN anywhere gives NaN */
      return mx::minimum(mx::maximum(in[0], in[1]), in[2]);
    case LATHE_KIND_CONVERT:
      if (n->op == LATHE_OP_CONVERT_DTYPE) return convert(in[0], n->shape.dtype);
      {
        /* Bitcast: the same bytes. A narrower target gets a new last axis, a wider one loses it. */
        mx::Dtype t = mx_dtype(n->shape.dtype);
        const mx::array &x = in[0];
        if (t.size() == x.dtype().size()) return mx::view(x, t);
        if (t.size() < x.dtype().size()) return mx::view(mx::expand_dims(x, -1), t);
        return mx::squeeze(mx::view(x, t), -1);
      }
    default: MLX_INTERNAL("mlx: %s is not elementwise", lathe_op_name(n->op));
  }
}

}  // namespace lathe_mlx
