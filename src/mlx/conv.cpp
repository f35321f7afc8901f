/* conv.cpp -- ConvGeneral. MLX's conv_general takes [batch, spatial..., channels] inputs with
 * 1 to 3 spatial axes, float16/bfloat16/float32, non-negative padding, and channel groups in 1-D
 * and 2-D only; those convolutions go to it. The rest -- any spatial rank (0 or more than 3),
 * channel groups in 3-D and beyond, batch groups, negative padding, Float64 and integers
 * (exact, wrapping as lathe:cpu) -- is decomposed: the input is dilated and padded explicitly,
 * its patches are a strided view [batch, out..., kernel..., channels] (im2col without a gather),
 * and DotGeneral contracts them with the kernel, groups as a batch axis of the product.
 * Holes (padding and input-dilation positions) must contribute nothing even under a NaN or an
 * infinite kernel value, as XLA and MLX's own convolution compute it, but the explicit zeros
 * times Inf give NaN: a float decomposition with holes therefore keeps the kernel's spatial axes
 * as batch axes of the product (one partial sum per kernel position), replaces the partial sums
 * of the holes by zeros (a mask known at build time) and sums the kernel positions after. */
#include "mlx.h"

namespace lathe_mlx {
namespace {

struct Conv {
  int D;
  int ib, ic, koc, kic, ob, oc;
  std::vector<int> is, ks, os, stride, kdil, idil, lo, hi;
  int G, BG;
};

Conv attrs(const lathe_node *n) {
  Conv c;
  c.ib = (int)lathe_attr_conv_general_input_batch(n);
  c.ic = (int)lathe_attr_conv_general_input_channels(n);
  c.koc = (int)lathe_attr_conv_general_kernel_output_channels(n);
  c.kic = (int)lathe_attr_conv_general_kernel_input_channels(n);
  c.ob = (int)lathe_attr_conv_general_output_batch(n);
  c.oc = (int)lathe_attr_conv_general_output_channels(n);
  c.is = ints(lathe_attr_conv_general_input_spatial(n));
  c.ks = ints(lathe_attr_conv_general_kernel_spatial(n));
  c.os = ints(lathe_attr_conv_general_output_spatial(n));
  c.stride = ints(lathe_attr_conv_general_strides(n));
  c.kdil = ints(lathe_attr_conv_general_kernel_dilations(n));
  c.idil = ints(lathe_attr_conv_general_input_dilations(n));
  std::vector<int> p = ints(lathe_attr_conv_general_paddings(n));
  c.D = (int)c.is.size();
  for (int d = 0; d < c.D; d++) c.lo.push_back(p[2 * d]), c.hi.push_back(p[2 * d + 1]);
  c.G = (int)lathe_attr_conv_general_channel_group_count(n);
  c.BG = (int)lathe_attr_conv_general_batch_group_count(n);
  return c;
}

/* Axis d+1 of x dilated (dil-1 zeros between elements) and padded (negative: cropped). */
mx::array dilate_pad(mx::array x, int axis, int dil, int lo, int hi) {
  mx::array zero = scalar_i(0, x.dtype());
  int n = x.shape(axis);
  if (dil > 1 && n > 1) {
    mx::array e = mx::pad(mx::expand_dims(x, axis + 1), std::vector<int>{axis + 1}, mx::Shape{0}, mx::Shape{dil - 1}, zero);
    mx::Shape s = x.shape();
    s[axis] = n * dil;
    e = mx::reshape(e, s);
    mx::Shape b(s.size(), 0), l = s;
    l[axis] = (n - 1) * dil + 1;
    x = mx::slice(e, b, l);
  }
  mx::Shape b(x.ndim(), 0), l = x.shape();
  if (lo < 0) b[axis] = std::min(-lo, l[axis]);
  if (hi < 0) l[axis] = std::max(b[axis], l[axis] + hi);
  if (lo < 0 || hi < 0) x = mx::slice(x, b, l);
  if (lo > 0 || hi > 0)
    x = mx::pad(x, std::vector<int>{axis}, mx::Shape{std::max(lo, 0)}, mx::Shape{std::max(hi, 0)}, zero);
  return x;
}

/* x [N, S..., C], w [Cout, k..., Cin/G] -> [N', O..., Cout] by strided patches and DotGeneral. */
/* Whether output position o and kernel position k of spatial axis d fall on the input (not a hole). */
bool on_input(const Conv &c, int d, int in_dim, int o, int k) {
  int64_t pos = (int64_t)o * c.stride[d] + (int64_t)k * c.kdil[d] - c.lo[d];
  return pos >= 0 && pos % c.idil[d] == 0 && pos / c.idil[d] < in_dim;
}

/* r [..., k_0..k_{D-1} at kaxis.., ..., O_0..O_{D-1} at oaxis.., ...]: the partial sums of the holes
 * replaced by zeros, then summed over the kernel axes. */
mx::array drop_holes(const Conv &c, const std::vector<int> &in_dims, const std::vector<int> &O, const std::vector<int> &K,
                     mx::array r, int kaxis, int oaxis) {
  std::optional<mx::array> m;
  for (int d = 0; d < c.D; d++) {
    std::vector<uint8_t> v((size_t)K[d] * (size_t)O[d]);
    for (int k = 0; k < K[d]; k++)
      for (int o = 0; o < O[d]; o++) v[(size_t)k * O[d] + o] = on_input(c, d, in_dims[d], o, k);
    mx::Shape s(r.ndim(), 1);
    s[kaxis + d] = K[d], s[oaxis + d] = O[d];
    mx::array md = mx::astype(mx::array(v.data(), mx::Shape{K[d], O[d]}, mx::uint8), mx::bool_);
    /* r's kernel axes come before its output axes, as K before O in md */
    md = mx::reshape(md, s);
    m = m ? mx::logical_and(*m, md) : md;
  }
  std::vector<int> kax;
  for (int d = 0; d < c.D; d++) kax.push_back(kaxis + d);
  return mx::sum(mx::where(*m, r, scalar_f(0, r.dtype())), kax);
}

mx::array im2col_conv(const Conv &c, mx::array x, const mx::array &w, lathe_dtype acc, lathe_dtype out_dt) {
  int D = c.D;
  std::vector<int> in_dims;
  bool holes = false;
  for (int d = 0; d < D; d++) {
    in_dims.push_back(x.shape(d + 1));
    holes |= c.lo[d] > 0 || c.hi[d] > 0 || (c.idil[d] > 1 && x.shape(d + 1) > 1);
  }
  bool masked = holes && lathe_dtype_is_float(acc); /* integers have no NaN: zeros are exact */
  for (int d = 0; d < D; d++) x = dilate_pad(x, d + 1, c.idil[d], c.lo[d], c.hi[d]);
  x = mx::contiguous(x);
  int N = x.shape(0), C = x.shape(D + 1);
  mx::Shape shape{N};
  mx::Strides st(x.ndim());
  int64_t s = 1;
  for (int i = (int)x.ndim() - 1; i >= 0; i--) st[i] = s, s *= x.shape(i);
  mx::Strides pst{st[0]};
  std::vector<int> O(D), K(D);
  bool empty = N == 0 || C == 0;
  for (int d = 0; d < D; d++) {
    K[d] = w.shape(d + 1);
    int P = x.shape(d + 1), E = (K[d] - 1) * c.kdil[d] + 1;
    O[d] = P >= E && K[d] > 0 ? (P - E) / c.stride[d] + 1 : 0;
    shape.push_back(O[d]);
    pst.push_back(st[d + 1] * c.stride[d]);
    empty |= O[d] == 0 || K[d] == 0;
  }
  for (int d = 0; d < D; d++) shape.push_back(K[d]), pst.push_back(st[d + 1] * c.kdil[d]);
  shape.push_back(C);
  pst.push_back(st[D + 1]);
  int Cout = w.shape(0), NB = N / c.BG;
  if (empty) { /* nothing to gather: the sums are empty */
    mx::Shape os{NB};
    for (int d = 0; d < D; d++) os.push_back(O[d]);
    os.push_back(Cout);
    return mx::zeros(os, mx_dtype(out_dt));
  }
  mx::array p = mx::as_strided(x, shape, pst, 0);
  std::vector<int> lc, rc;
  if (c.G > 1 || c.BG > 1) {
    int G = c.G > 1 ? c.G : c.BG;
    mx::Shape ps, ws{G, Cout / G};
    int first = c.G > 1 ? 0 : 1; /* where the spatial axes of p start after the reshape */
    if (c.G > 1) {
      ps = shape;
      ps.back() = C / G;
      ps.insert(ps.end() - 1, G); /* [N, O..., k..., G, Cg] */
    } else {
      ps = shape;
      ps[0] = NB;
      ps.insert(ps.begin(), G); /* [BG, Nb, O..., k..., C] */
    }
    for (int d = 0; d < D; d++) ws.push_back(K[d]);
    ws.push_back(w.shape(D + 1));
    p = mx::reshape(p, ps);
    mx::array wg = mx::reshape(w, ws);
    int kstart = 1 + first + D; /* first kernel-spatial axis of p */
    for (int d = 0; d < D; d++) lc.push_back(kstart + d), rc.push_back(2 + d);
    int gaxis = c.G > 1 ? kstart + D : 0;
    lc.push_back(c.G > 1 ? kstart + D + 1 : kstart + D);
    rc.push_back(2 + D);
    std::vector<int> lb{gaxis}, rb{0};
    lb.insert(lb.end(), lc.begin(), lc.end() - 1);
    rb.insert(rb.end(), rc.begin(), rc.end() - 1);
    /* [G, N', O..., Cout/G]; masked: kernel positions as batch axes, [G, k..., N', O..., Cout/G] */
    mx::array r = masked ? convert(drop_holes(c, in_dims, O, K, dot_general(p, wg, {lc.back()}, lb, {rc.back()}, rb, acc, acc),
                                              1, 2 + D), out_dt)
                         : dot_general(p, wg, lc, {gaxis}, rc, {0}, acc, out_dt);
    std::vector<int> perm;
    for (int i = 1; i < (int)r.ndim() - 1; i++) perm.push_back(i);
    perm.push_back(0);
    perm.push_back((int)r.ndim() - 1);
    r = mx::transpose(r, perm);
    mx::Shape rs(r.shape().begin(), r.shape().end() - 2);
    rs.push_back(Cout);
    return mx::reshape(r, rs);
  }
  for (int d = 0; d < D; d++) lc.push_back(1 + D + d), rc.push_back(1 + d);
  if (masked) { /* [k..., N, O..., Cout] */
    mx::array r = dot_general(p, w, {1 + 2 * D}, lc, {1 + D}, rc, acc, acc);
    return convert(drop_holes(c, in_dims, O, K, r, 0, D + 1), out_dt);
  }
  lc.push_back(1 + 2 * D);
  rc.push_back(1 + D);
  return dot_general(p, w, lc, {}, rc, {}, acc, out_dt);
}

}  // namespace

mx::array lower_conv(Env &, const lathe_node *n, const Arrays &in) {
  Conv c = attrs(n);
  int D = c.D;
  std::vector<int> xp{c.ib}, wp{c.koc};
  for (int d = 0; d < D; d++) xp.push_back(c.is[d]), wp.push_back(c.ks[d]);
  xp.push_back(c.ic);
  wp.push_back(c.kic);
  mx::array x = mx::transpose(in[0], xp), w = mx::transpose(in[1], wp);
  lathe_dtype dt = n->shape.dtype;
  bool half = dt == LATHE_DTYPE_FLOAT16 || dt == LATHE_DTYPE_BFLOAT16;
  bool native = (half || dt == LATHE_DTYPE_FLOAT32) && D >= 1 && D <= 3 && c.BG == 1 && (c.G == 1 || D <= 2);
  for (int d = 0; d < D; d++) native &= c.lo[d] >= 0 && c.hi[d] >= 0;
  native &= x.size() > 0 && w.size() > 0 && lathe_shape_size(&n->shape) > 0; /* MLX divides by empty sizes */
  mx::array y = native ? mx::conv_general(x, w, c.stride, c.lo, c.hi, c.kdil, c.idil, c.G)
                       : im2col_conv(c, x, w, half ? LATHE_DTYPE_FLOAT32 : dt, dt);
  /* y is [batch, out spatial..., channels]: move each axis to where the output layout wants it */
  std::vector<int> perm(D + 2);
  perm[c.ob] = 0;
  perm[c.oc] = D + 1;
  for (int d = 0; d < D; d++) perm[c.os[d]] = d + 1;
  return mx::transpose(y, perm);
}

}  // namespace lathe_mlx
