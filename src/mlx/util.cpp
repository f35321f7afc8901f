/* util.cpp -- errors, shapes of one run, and the small array helpers the lowerings share. */
#include <cstdio>
#include <cstring>

#include "mlx.h"

namespace lathe_mlx {

void fail(lathe_status_code code, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  throw Error(code, buf);
}

lathe_status_t status_of_exception(const char *where) {
  try {
    throw;
  } catch (const Error &e) {
    return lathe_status_new(e.code, "%s", e.msg.c_str());
  } catch (const std::bad_alloc &) {
    return lathe_status_new(LATHE_STATUS_RESOURCE_EXHAUSTED, "%s: out of memory", where);
  } catch (const std::invalid_argument &e) {
    /* MLX reports misuse and unsupported combinations this way: a lowering here gave it
     * something it rejects, which the compile-time checks should have caught */
    return lathe_status_new(LATHE_STATUS_INTERNAL, "%s: MLX rejected the call: %s", where, e.what());
  } catch (const std::exception &e) {
    return lathe_status_new(LATHE_STATUS_INTERNAL, "%s: MLX: %s", where, e.what());
  } catch (...) {
    return lathe_status_new(LATHE_STATUS_INTERNAL, "%s: unknown exception", where);
  }
}

void eval_arrays(const std::vector<mx::array> &a, const std::optional<mx::Stream> &cpu_stream) {
  if (!cpu_stream) {
    mx::eval(a);
    return;
  }
  std::vector<mx::array> f64, rest;
  for (const auto &x : a) (x.dtype() == mx::float64 ? f64 : rest).push_back(x);
  if (!rest.empty()) mx::eval(rest);
  if (!f64.empty()) {
    mx::StreamContext on(*cpu_stream);
    mx::eval(f64);
  }
}

std::recursive_mutex &mlx_lock() {
  static std::recursive_mutex mu;
  return mu;
}

static int64_t bound(const void *b, const char *name) {
  for (const auto &p : static_cast<const Binding *>(b)->v)
    if (p.first == name) return p.second;
  return -1;
}

int64_t Binding::get(const char *name) const {
  if (!name) return -1;
  int64_t size = -1;
  /* a plain name, or a symbolic sum ("=128+seq", Concatenate's); unresolvable: -1, the callers say so */
  lathe_status_t st = lathe_axis_resolve("mlx", 0, name, bound, this, &size);
  lathe_status_free(st);
  return st ? -1 : size;
}

void Binding::set(const char *name, int64_t size) {
  if (name && get(name) < 0) v.emplace_back(name, size);
}

mx::Shape mx_shape(const int64_t *dims, int rank) {
  mx::Shape s(rank);
  for (int i = 0; i < rank; i++) {
    if (dims[i] > INT32_MAX) MLX_UNIMPL("mlx: axis of size %lld exceeds MLX's 32-bit dimensions", (long long)dims[i]);
    s[i] = (int32_t)dims[i];
  }
  return s;
}

mx::Shape shape_of(const Env &env, const lathe_shape &s) {
  int64_t d[LATHE_MAX_RANK];
  for (int i = 0; i < s.rank; i++) {
    d[i] = s.dims[i];
    if (d[i] >= 0) continue;
    d[i] = env.bind ? env.bind->get(s.axis_names[i]) : -1;
    if (d[i] < 0)
      MLX_INVALID("mlx: dynamic axis %d (\"%s\") is not bound by the inputs", i, s.axis_names[i] ? s.axis_names[i] : "");
  }
  return mx_shape(d, s.rank);
}

std::vector<int> ints(lathe_ilist l) {
  std::vector<int> v(l.n);
  for (int i = 0; i < l.n; i++) v[i] = (int)l.v[i];
  return v;
}

mx::array array_from_bytes(const void *src, size_t nbytes, const mx::Shape &shape, mx::Dtype dt) {
  mx::allocator::Data d = mx::allocator::malloc(nbytes ? nbytes : 1);
  if (!d.buffer().ptr()) throw std::bad_alloc();
  if (nbytes) std::memcpy(d.buffer().raw_ptr(), src, nbytes);
  return mx::array(std::move(d), shape, dt);
}

mx::array scalar_i(int64_t v, mx::Dtype dt) { return mx::astype(mx::array(v, mx::int64), dt); }
mx::array scalar_u(uint64_t v, mx::Dtype dt) { return mx::astype(mx::array(v, mx::uint64), dt); }
mx::array scalar_f(double v, mx::Dtype dt) {
  if (dt == mx::float64) return mx::array(v, mx::float64);
  return mx::astype(mx::array((float)v, mx::float32), dt);
}

mx::Dtype uint_of(mx::Dtype dt) {
  switch (dt.size()) {
    case 1: return mx::uint8;
    case 2: return mx::uint16;
    case 4: return mx::uint32;
    default: return mx::uint64;
  }
}

mx::Dtype sint_of(mx::Dtype dt) {
  switch (dt.size()) {
    case 1: return mx::int8;
    case 2: return mx::int16;
    case 4: return mx::int32;
    default: return mx::int64;
  }
}

mx::array total_order_key(const mx::array &x) {
  /* negative floats (sign bit set) get their magnitude bits flipped, so that the keys compare as
   * signed integers in IEEE totalOrder: -NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN */
  mx::Dtype it = sint_of(x.dtype());
  mx::array i = mx::view(x, it);
  int bits = (int)it.size() * 8;
  mx::array mag = scalar_i(bits == 64 ? INT64_MAX : (int64_t)((UINT64_C(1) << (bits - 1)) - 1), it);
  return mx::where(mx::less(i, scalar_i(0, it)), mx::bitwise_xor(i, mag), i);
}

/* ---- Float64 math at double precision ---- */

static bool f64(const mx::array &x) { return x.dtype() == mx::float64; }
static mx::array d(double v) { return mx::array(v, mx::float64); }

mx::array exp_(const mx::array &x) {
  if (!f64(x)) return mx::exp(x);
  /* e^x = expm1(x) + 1, and 1 / (expm1(-x) + 1) for x < 0, where the first would cancel */
  mx::array neg = mx::less(x, d(0));
  mx::array e = mx::expm1(mx::where(neg, mx::negative(x), x));
  mx::array p = mx::add(e, d(1));
  return mx::where(neg, mx::reciprocal(p), p);
}

/* sin and cos from t = tan(x/2): 2t/(1+t^2), (1-t^2)/(1+t^2); with u = 1/t where |t| > 1 */
static void sin_cos(const mx::array &x, mx::array *s, mx::array *c) {
  mx::array t = mx::tan(mx::multiply(x, d(0.5)));
  mx::array big = mx::greater(mx::abs(t), d(1));
  mx::array u = mx::where(big, mx::reciprocal(t), t), u2 = mx::square(u);
  mx::array den = mx::add(u2, d(1));
  if (s) *s = mx::divide(mx::multiply(d(2), u), den);
  if (c) *c = mx::divide(mx::where(big, mx::subtract(u2, d(1)), mx::subtract(d(1), u2)), den);
}

mx::array sin_(const mx::array &x) {
  if (!f64(x)) return mx::sin(x);
  mx::array s = x;
  sin_cos(x, &s, nullptr);
  return s;
}

mx::array cos_(const mx::array &x) {
  if (!f64(x)) return mx::cos(x);
  mx::array c = x;
  sin_cos(x, nullptr, &c);
  return c;
}

/* MLX's erf is accurate only in absolute terms (relative error 6e-2 at 1e-6) and gives erf(+0) =
 * -0: below |x| = 1 the Taylor series 2/sqrt(pi) x sum (-1)^n x^2n / (n! (2n+1)) in Float32 (12
 * terms: the first left out is under 1e-9), which keeps the zero's sign; MLX's beyond, where its
 * absolute error is a few ulp. Halves compute in Float32 and round once. */
mx::array erf_small(const mx::array &x) {
  mx::array xf = mx::astype(x, mx::float32), z = mx::square(xf);
  auto f = [](double v) { return scalar_f(v, mx::float32); };
  static const double fact_odd[] = {1, 3, 10, 42, 216, 1320, 9360, 75600, 685440, 6894720, 76204800, 918086400};
  mx::array p = f(-1.0 / fact_odd[11]); /* Horner in z = x^2, coefficient n: (-1)^n / fact_odd[n] */
  for (int n = 10; n >= 0; n--) p = mx::add(f((n % 2 ? -1.0 : 1.0) / fact_odd[n]), mx::multiply(z, p));
  mx::array series = mx::multiply(mx::multiply(f(1.1283791670955126), xf), p);
  mx::array r = mx::where(mx::less(mx::abs(xf), f(1)), series, mx::erf(xf));
  return mx::astype(r, x.dtype());
}

mx::array erf_(const mx::array &x) {
  if (!f64(x)) return erf_small(x);
  mx::array a = mx::abs(x);
  /* |x| < 3: erf = 2/sqrt(pi) e^(-x^2) sum 2^n x^(2n+1) / (1*3*...*(2n+1)), all terms positive */
  mx::array s = mx::minimum(a, d(3)), s2 = mx::multiply(d(2), mx::square(s));
  mx::array t = s, sum = s;
  for (int k = 1; k < 80; k++) {
    t = mx::multiply(t, mx::divide(s2, d(2.0 * k + 1)));
    sum = mx::add(sum, t);
  }
  mx::array series = mx::multiply(mx::multiply(d(1.1283791670955126), exp_(mx::negative(mx::square(s)))), sum);
  /* |x| >= 3: 1 - erfc, erfc = e^(-x^2) / (sqrt(pi) (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))) */
  mx::array c = mx::maximum(a, d(3)), f = c;
  for (int k = 60; k >= 1; k--) f = mx::add(c, mx::divide(d(k / 2.0), f));
  mx::array tail = mx::subtract(d(1), mx::divide(exp_(mx::negative(mx::square(c))), mx::multiply(d(1.7724538509055160), f)));
  mx::array r = mx::where(mx::less(a, d(3)), series, tail);
  return mx::where(mx::less(x, d(0)), mx::negative(r), mx::where(mx::isnan(x), x, r));
}

mx::array logistic_(const mx::array &x) {
  if (!f64(x)) return mx::sigmoid(x);
  return mx::reciprocal(mx::add(d(1), exp_(mx::negative(x))));
}

}  // namespace lathe_mlx
