/* window.cpp -- ReduceWindow and SelectAndScatter{Max,Min} through strided views: the operand,
 * dilated and padded explicitly, is viewed as [out..., window...] (as_strided, no copy) and
 * reduced over the window axes. Padding and dilation holes hold the reduction's identity for
 * ReduceWindow; for SelectAndScatter a mask keeps them out of the selection, which takes the
 * first extreme of a window or, when it holds NaNs, its last NaN (as lathe:cpu), and the source
 * values are summed into the selected positions with a scatter-add. */
#include <cmath>

#include "mlx.h"

namespace lathe_mlx {
namespace {

/* x dilated (dil-1 fills between elements) and padded with fill, along every axis. */
mx::array dilate_pad_all(mx::array x, const std::vector<int> &dil, const std::vector<int> &pads, const mx::array &fill) {
  for (int a = 0; a < (int)x.ndim(); a++) {
    int n = x.shape(a), k = dil[a];
    if (k > 1 && n > 1) {
      mx::array e = mx::pad(mx::expand_dims(x, a + 1), std::vector<int>{a + 1}, mx::Shape{0}, mx::Shape{k - 1}, fill);
      mx::Shape s = x.shape();
      s[a] = n * k;
      e = mx::reshape(e, s);
      mx::Shape b(s.size(), 0), l = s;
      l[a] = (n - 1) * k + 1;
      x = mx::slice(e, b, l);
    }
    if (pads[2 * a] > 0 || pads[2 * a + 1] > 0)
      x = mx::pad(x, std::vector<int>{a}, mx::Shape{pads[2 * a]}, mx::Shape{pads[2 * a + 1]}, fill);
  }
  return x;
}

/* The windows of padded p as a view [out..., window...]; out receives the output dims. */
mx::array windows(const mx::array &p, const std::vector<int> &win, const std::vector<int> &stride,
                  const std::vector<int> &wdil, mx::Shape &out) {
  int r = (int)p.ndim();
  mx::Shape shape;
  mx::Strides st(r), vs;
  int64_t s = 1;
  for (int i = r - 1; i >= 0; i--) st[i] = s, s *= p.shape(i);
  out.clear();
  for (int d = 0; d < r; d++) {
    int E = (win[d] - 1) * wdil[d] + 1;
    out.push_back(p.shape(d) >= E ? (p.shape(d) - E) / stride[d] + 1 : 0);
    shape.push_back(out.back());
    vs.push_back(st[d] * stride[d]);
  }
  for (int d = 0; d < r; d++) shape.push_back(win[d]), vs.push_back(st[d] * wdil[d]);
  return mx::as_strided(mx::contiguous(p), shape, vs, 0);
}

bool has_zero(const mx::Shape &s) {
  for (int v : s)
    if (v == 0) return true;
  return false;
}

mx::array reduce_window(const lathe_node *n, const mx::array &x) {
  lathe_op op = lathe_attr_window_reduction(n);
  std::vector<int> win = ints(lathe_attr_window_dims(n)), stride = ints(lathe_attr_window_strides(n)),
                   idil = ints(lathe_attr_window_input_dilations(n)), wdil = ints(lathe_attr_window_window_dilations(n)),
                   pads = ints(lathe_attr_window_paddings(n));
  int r = (int)x.ndim();
  mx::array p = dilate_pad_all(x, idil, pads, reduce_identity(op, x.dtype()));
  mx::Shape out;
  if (has_zero(p.shape())) { /* no elements: every window is empty (or there is none) */
    for (int d = 0; d < r; d++) {
      int E = (win[d] - 1) * wdil[d] + 1;
      out.push_back(p.shape(d) >= E ? (p.shape(d) - E) / stride[d] + 1 : 0);
    }
    return mx::full(out, reduce_identity(op, x.dtype()));
  }
  mx::array v = windows(p, win, stride, wdil, out);
  if (has_zero(out)) return mx::zeros(out, x.dtype());
  std::vector<int> axes;
  for (int d = 0; d < r; d++) axes.push_back(r + d);
  return reduce(op, v, axes);
}

mx::array select_and_scatter(const lathe_node *n, const mx::array &x, const mx::array &src) {
  bool is_max = n->op == LATHE_OP_SELECT_AND_SCATTER_MAX;
  std::vector<int> win = ints(lathe_attr_window_dims(n)), stride = ints(lathe_attr_window_strides(n)),
                   pads = ints(lathe_attr_window_paddings(n)), ones(x.ndim(), 1);
  int r = (int)x.ndim();
  mx::Dtype dt = x.dtype();
  bool half = dt == mx::float16 || dt == mx::bfloat16;
  mx::Dtype acc_t = half ? mx::float32 : dt;
  if (x.size() == 0 || src.size() == 0) return mx::zeros(x.shape(), dt);
  mx::array p = dilate_pad_all(x, ones, pads, scalar_i(0, dt));
  mx::array valid = dilate_pad_all(mx::ones(x.shape(), mx::bool_), ones, pads, scalar_i(0, mx::bool_));
  mx::Shape out;
  mx::array v = windows(p, win, stride, ones, out), m = windows(valid, win, stride, ones, out);
  int wn = 1;
  for (int w : win) wn *= w;
  mx::Shape flat = out;
  flat.push_back(wn);
  v = mx::reshape(v, flat);
  m = mx::reshape(m, flat);
  /* the first extreme among real elements */
  mx::array extreme = is_max ? mx::max(mx::where(m, v, reduce_identity(LATHE_OP_REDUCE_MAX, dt)), -1, true)
                             : mx::min(mx::where(m, v, reduce_identity(LATHE_OP_REDUCE_MIN, dt)), -1, true);
  mx::array sel = mx::argmax(mx::logical_and(m, mx::equal(v, extreme)), -1);
  if (mx::issubdtype(dt, mx::inexact)) { /* the last NaN, when there is one */
    mx::array nan = mx::logical_and(m, mx::isnan(v));
    mx::array last = mx::subtract(scalar_i(wn - 1, mx::uint32), mx::argmax(mx::flip(nan, -1), -1));
    sel = mx::where(mx::any(nan, -1), last, sel);
  }
  mx::array any_valid = mx::any(m, -1);
  /* padded flat position of each source element's selection (a spare slot when none) */
  mx::array pos = mx::zeros(out, mx::int64);
  mx::array rem = mx::astype(sel, mx::int64);
  std::vector<int64_t> pst(r);
  int64_t s = 1;
  for (int d = r - 1; d >= 0; d--) pst[d] = s, s *= p.shape(d);
  int64_t wdiv = wn;
  for (int d = 0; d < r; d++) {
    wdiv /= win[d];
    mx::array wd = mx::floor_divide(rem, scalar_i(wdiv, mx::int64));
    rem = mx::remainder(rem, scalar_i(wdiv, mx::int64));
    mx::Shape rs(r, 1);
    rs[d] = out[d];
    mx::array od = mx::reshape(mx::arange(0.0, (double)out[d], 1.0, mx::int64), rs);
    mx::array coord = mx::add(mx::multiply(od, scalar_i(stride[d], mx::int64)), wd);
    pos = mx::add(pos, mx::multiply(coord, scalar_i(pst[d], mx::int64)));
  }
  pos = mx::where(any_valid, pos, scalar_i(s, mx::int64));
  mx::array acc = mx::zeros({(int)s + 1}, acc_t);
  mx::array upd = mx::reshape(mx::astype(src, acc_t), {(int)src.size(), 1});
  acc = mx::scatter_add(acc, {mx::reshape(pos, {(int)src.size()})}, upd, std::vector<int>{0});
  acc = mx::reshape(mx::slice(acc, {0}, {(int)s}), p.shape());
  mx::Shape b(r), e(r);
  for (int d = 0; d < r; d++) b[d] = pads[2 * d], e[d] = pads[2 * d] + x.shape(d);
  return mx::astype(mx::slice(acc, b, e), dt);
}

}  // namespace

mx::array lower_window(Env &, const lathe_node *n, const Arrays &in) {
  if (n->op == LATHE_OP_REDUCE_WINDOW) return reduce_window(n, in[0]);
  return select_and_scatter(n, in[0], in[1]);
}

}  // namespace lathe_mlx
