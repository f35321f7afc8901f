/* numeric.cpp -- RNGBitGenerator (Philox4x32-10 in XLA's state layout, as lathe:cpu: the same
 * seed gives the same bits), FFT (MLX's fftn family; Complex64 and Float32), and the three
 * BatchNorm ops, computed in Float64 on the CPU as lathe:cpu does (Float32 on a GPU). */
#include <cmath>

#include "mlx.h"

namespace lathe_mlx {
namespace {

const uint64_t M32 = 0xffffffffull;

mx::array u64(uint64_t v) { return mx::array(v, mx::uint64); }
mx::array lo32(const mx::array &x) { return mx::bitwise_and(x, u64(M32)); }
mx::array hi32(const mx::array &x) { return mx::right_shift(x, u64(32)); }

Arrays rng(Env &env, const lathe_node *n, const mx::array &state) {
  const lathe_shape &vs = n->out_shapes[1];
  mx::Shape shape = shape_of(env, vs); /* an axis may be dynamic, named by a parameter */
  mx::Dtype vt = mx_dtype(vs.dtype);
  int bytes = (int)vt.size();
  int64_t count = 1;
  for (int d : shape) count *= d;
  int64_t blocks = bytes == 8 ? (count + 1) / 2 : (count + 3) / 4;
  mx::array key = mx::reshape(mx::slice(state, {0}, {1}), {}), lo = mx::reshape(mx::slice(state, {1}, {2}), {}),
            hi = mx::reshape(mx::slice(state, {2}, {3}), {});
  mx::array b = mx::arange(0.0, (double)blocks, 1.0, mx::uint64);
  mx::array a = mx::add(lo, b), h = mx::add(hi, mx::astype(mx::less(a, lo), mx::uint64));
  mx::array c0 = lo32(a), c1 = hi32(a), c2 = lo32(h), c3 = hi32(h);
  mx::array k0 = lo32(key), k1 = hi32(key);
  for (int r = 0; r < 10; r++) {
    if (r) k0 = lo32(mx::add(k0, u64(0x9E3779B9u))), k1 = lo32(mx::add(k1, u64(0xBB67AE85u)));
    mx::array p0 = mx::multiply(u64(0xD2511F53u), c0), p1 = mx::multiply(u64(0xCD9E8D57u), c2);
    mx::array n0 = mx::bitwise_xor(mx::bitwise_xor(hi32(p1), c1), k0), n2 = mx::bitwise_xor(mx::bitwise_xor(hi32(p0), c3), k1);
    c0 = n0, c1 = lo32(p1), c2 = n2, c3 = lo32(p0);
  }
  /* 64-bit values: (w0 | w1 << 32), (w2 | w3 << 32) */
  mx::array words = bytes == 8 ? mx::stack({mx::bitwise_or(c0, mx::left_shift(c1, u64(32))),
                                            mx::bitwise_or(c2, mx::left_shift(c3, u64(32)))}, -1)
                               : mx::stack({c0, c1, c2, c3}, -1);
  words = mx::slice(mx::reshape(words, {-1}), {0}, {(int)count});
  /* narrower dtypes keep the low bits of one 32-bit word per element */
  mx::array v = mx::view(mx::astype(words, uint_of(vt)), vt);
  mx::array nlo = mx::add(lo, u64((uint64_t)blocks));
  mx::array nstate = mx::stack({key, nlo, mx::add(hi, mx::astype(mx::less(nlo, lo), mx::uint64))});
  return {nstate, mx::reshape(v, shape)};
}

/* ---- FFT ----
 * lathe:cpu transforms in double; MLX's FFT computes in Float32, a few float ulps away on long
 * multi-axis transforms. On the CPU, axes up to DFT_MAX long are transformed as DFT products in
 * Float64 (twiddles computed here in double), so results carry only the final rounding as
 * lathe:cpu's do; longer axes, and the GPU, use MLX's FFT. */
const int DFT_MAX = 1024;

/* A complex value as Float64 parts. */
struct Cx {
  mx::array re, im;
};

/* cos and sin(sign 2 pi j k / n) for j < rows, k < cols: [rows, cols] Float64. The unit circle's
 * symmetries hold exactly (index n - m is the conjugate of m; quarter turns are exact), so real
 * inputs give exactly Hermitian spectra (X[n-k] = conj(X[k]), a real DC and Nyquist bin). */
std::pair<mx::array, mx::array> twiddles(int n, int rows, int cols, double sign) {
  std::vector<double> tc((size_t)n), ts((size_t)n);
  for (int m = 0; m <= n / 2; m++) {
    double c, s;
    if ((int64_t)4 * m % n == 0) { /* 0, a quarter, a half turn */
      int q = (int)((int64_t)4 * m / n);
      c = q == 0 ? 1 : q == 2 ? -1 : 0;
      s = q == 1 ? 1 : 0;
    } else {
      double a = 2 * M_PI * m / n;
      c = std::cos(a), s = std::sin(a);
    }
    tc[(size_t)m] = c, ts[(size_t)m] = sign * s;
    if (m > 0 && m < n - m) tc[(size_t)(n - m)] = c, ts[(size_t)(n - m)] = -sign * s;
  }
  std::vector<double> c((size_t)rows * cols), s((size_t)rows * cols);
  for (int j = 0; j < rows; j++)
    for (int k = 0; k < cols; k++) {
      size_t m = (size_t)(((int64_t)j * k) % n);
      c[(size_t)j * cols + k] = tc[m], s[(size_t)j * cols + k] = ts[m];
    }
  return {mx::array(c.begin(), {rows, cols}, mx::float64), mx::array(s.begin(), {rows, cols}, mx::float64)};
}

/* The complex DFT of axis `axis` (length n): y_k = sum_j x_j e^(sign 2 pi i jk/n). */
Cx dft_axis(const Cx &x, int axis, int n, double sign) {
  auto [c, s] = twiddles(n, n, n, sign);
  mx::array re = mx::moveaxis(x.re, axis, -1), im = mx::moveaxis(x.im, axis, -1);
  mx::array yr = mx::subtract(mx::matmul(re, c), mx::matmul(im, s)), yi = mx::add(mx::matmul(re, s), mx::matmul(im, c));
  return {mx::moveaxis(yr, -1, axis), mx::moveaxis(yi, -1, axis)};
}

mx::array fft_f64(lathe_fft_type type, const mx::array &x, const std::vector<int> &axes, const mx::Shape &lens) {
  int k = (int)axes.size(), last = axes.back(), nl = lens.back();
  auto scale = [](Cx v, int n, bool inv) {
    if (inv) v.re = mx::divide(v.re, mx::array((double)n, mx::float64)), v.im = mx::divide(v.im, mx::array((double)n, mx::float64));
    return v;
  };
  switch (type) {
    case LATHE_FFT_TYPE_FORWARD:
    case LATHE_FFT_TYPE_INVERSE: {
      bool inv = type == LATHE_FFT_TYPE_INVERSE;
      Cx v{mx::astype(mx::real(x), mx::float64), mx::astype(mx::imag(x), mx::float64)};
      for (int i = 0; i < k; i++) v = scale(dft_axis(v, axes[i], lens[i], inv ? 1 : -1), lens[i], inv);
      return complex_of(v.re, v.im);
    }
    case LATHE_FFT_TYPE_FORWARD_REAL: { /* the last axis real -> n/2+1, then the others */
      auto [c, s] = twiddles(nl, nl, nl / 2 + 1, -1);
      mx::array re = mx::moveaxis(mx::astype(x, mx::float64), last, -1);
      Cx v{mx::moveaxis(mx::matmul(re, c), -1, last), mx::moveaxis(mx::matmul(re, s), -1, last)};
      for (int i = 0; i < k - 1; i++) v = dft_axis(v, axes[i], lens[i], -1);
      return complex_of(v.re, v.im);
    }
    default: { /* the leading axes inverse, then the last axis rebuilt Hermitian: real output */
      Cx v{mx::astype(mx::real(x), mx::float64), mx::astype(mx::imag(x), mx::float64)};
      for (int i = 0; i < k - 1; i++) v = scale(dft_axis(v, axes[i], lens[i], 1), lens[i], true);
      int half = nl / 2 + 1;
      /* x_m = (1/n) sum_j Re(X_j e^(2 pi i jm/n)) over the full spectrum, X_j = conj(X_(n-j)) for j >= half */
      mx::array re = mx::moveaxis(v.re, last, -1), im = mx::moveaxis(v.im, last, -1);
      if (nl > half) {
        mx::Shape b(re.ndim(), 0), e = re.shape();
        b.back() = 1, e.back() = nl - half + 1;
        mx::array rr = mx::flip(mx::slice(re, b, e), -1), ri = mx::flip(mx::slice(im, b, e), -1);
        re = mx::concatenate({re, rr}, -1), im = mx::concatenate({im, mx::negative(ri)}, -1);
      }
      auto [c, s] = twiddles(nl, nl, nl, 1);
      mx::array out = mx::divide(mx::subtract(mx::matmul(re, c), mx::matmul(im, s)), mx::array((double)nl, mx::float64));
      return mx::astype(mx::moveaxis(out, -1, last), mx::float32);
    }
  }
}

mx::array fft(Env &env, const lathe_node *n, const mx::array &x) {
  lathe_ilist len = lathe_attr_fft_length(n);
  int r = (int)x.ndim();
  std::vector<int> axes;
  mx::Shape lens;
  bool small = !env.opt->gpu;
  for (int i = 0; i < len.n; i++) {
    axes.push_back(r - len.n + i), lens.push_back((int)len.v[i]);
    small &= len.v[i] <= DFT_MAX;
  }
  lathe_fft_type type = lathe_attr_fft_type(n);
  if (small) return fft_f64(type, x, axes, lens);
  switch (type) {
    case LATHE_FFT_TYPE_FORWARD: return mx::fft::fftn(x, lens, axes);
    case LATHE_FFT_TYPE_INVERSE: return mx::fft::ifftn(x, lens, axes);
    case LATHE_FFT_TYPE_FORWARD_REAL: return mx::fft::rfftn(x, lens, axes);
    default: return mx::fft::irfftn(x, lens, axes);
  }
}

/* Operand viewed around its feature axis: per-feature vectors reshape to broadcast. */
struct BN {
  int axis;
  double eps;
  mx::Dtype ct = mx::float64;
  std::vector<int> red;
  mx::Shape fshape;
  BN(const lathe_node *n, const mx::array &x, bool gpu) {
    axis = (int)lathe_attr_batch_norm_feature_axis(n);
    eps = lathe_attr_batch_norm_epsilon(n);
    ct = gpu ? mx::float32 : mx::float64;
    fshape = mx::Shape(x.ndim(), 1);
    fshape[axis] = x.shape(axis);
    for (int i = 0; i < (int)x.ndim(); i++)
      if (i != axis) red.push_back(i);
  }
  mx::array f(const mx::array &v) const { return mx::reshape(mx::astype(v, ct), fshape); }
  /* sum / count: 0/0 = NaN over no elements, as lathe:cpu */
  mx::array mean(const mx::array &v) const {
    double count = 1;
    for (int a : red) count *= v.shape(a);
    return mx::divide(mx::sum(v, red, true), scalar_f(count, ct));
  }
  mx::array inv(const mx::array &var) const { return mx::rsqrt(mx::add(var, scalar_f(eps, ct))); }
};

Arrays batch_norm(Env &env, const lathe_node *n, const Arrays &in) {
  const mx::array &x0 = in[0];
  BN bn(n, x0, env.opt->gpu);
  mx::Dtype dt = x0.dtype();
  mx::array x = mx::astype(x0, bn.ct);
  auto back = [&](const mx::array &v) { return mx::astype(v, dt); };
  auto vec = [&](const mx::array &v) { return mx::astype(mx::reshape(v, {(int)v.size()}), dt); };
  switch (n->op) {
    case LATHE_OP_BATCH_NORM_FOR_INFERENCE: { /* operand, scale, offset, mean, variance */
      mx::array p = mx::multiply(bn.f(in[1]), bn.inv(bn.f(in[4])));
      return {back(mx::add(mx::multiply(p, mx::subtract(x, bn.f(in[3]))), bn.f(in[2])))};
    }
    case LATHE_OP_BATCH_NORM_FOR_TRAINING: { /* operand, scale, offset */
      mx::array m = bn.mean(x);
      mx::array d = mx::subtract(x, m);
      mx::array var = bn.mean(mx::square(d));
      mx::array y = mx::add(mx::multiply(mx::multiply(bn.f(in[1]), bn.inv(var)), d), bn.f(in[2]));
      return {back(y), vec(m), vec(var)};
    }
    default: { /* gradient: operand, scale, mean, variance, grad_output */
      mx::array inv = bn.inv(bn.f(in[3])), dy = mx::astype(in[4], bn.ct);
      mx::array xhat = mx::multiply(mx::subtract(x, bn.f(in[2])), inv);
      mx::array g_off = mx::sum(dy, bn.red, true), g_scale = mx::sum(mx::multiply(dy, xhat), bn.red, true);
      double count = x.size() ? (double)x.size() / x.shape(bn.axis) : 1;
      /* dx = scale*inv * (dy - mean(dy) - xhat * mean(dy*xhat)) */
      mx::array dx = mx::multiply(mx::multiply(bn.f(in[1]), inv),
                                  mx::subtract(mx::subtract(dy, mx::divide(g_off, scalar_f(count, bn.ct))),
                                               mx::multiply(xhat, mx::divide(g_scale, scalar_f(count, bn.ct)))));
      return {back(dx), vec(g_scale), vec(g_off)};
    }
  }
}

}  // namespace

Arrays lower_numeric(Env &env, const lathe_node *n, const Arrays &in) {
  switch (n->op) {
    case LATHE_OP_RNG_BIT_GENERATOR: return rng(env, n, in[0]);
    case LATHE_OP_FFT: return {fft(env, n, in[0])};
    default: return batch_norm(env, n, in);
  }
}

}  // namespace lathe_mlx
