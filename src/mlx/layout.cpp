/* layout.cpp -- data movement (Reshape, Transpose, BroadcastInDim, Concatenate, Slice, Pad,
 * Reverse), Iota, the dynamic-shape ops and barriers, and lower(): the dispatch of one op to its
 * family. Transpose, BroadcastInDim and Slice give MLX views (strided, no copy). */
#include <algorithm>

#include "mlx.h"

namespace lathe_mlx {
namespace {

mx::array iota(Env &env, const lathe_node *n) {
  mx::Shape s = shape_of(env, n->shape);
  int axis = (int)lathe_attr_iota_axis(n);
  mx::Dtype dt = mx_dtype(n->shape.dtype);
  mx::array r = mx::astype(mx::arange(0.0, (double)s[axis], 1.0, mx::int64), dt);
  mx::Shape rs(s.size(), 1);
  rs[axis] = s[axis];
  return mx::broadcast_to(mx::reshape(r, rs), s);
}

mx::array broadcast_in_dim(Env &env, const lathe_node *n, const mx::array &x) {
  mx::Shape out = shape_of(env, n->shape);
  lathe_ilist axes = lathe_attr_broadcast_in_dim_axes(n);
  /* x's axes in the order they take in the output, then size-1 axes between them */
  std::vector<int> perm(axes.n);
  for (int i = 0; i < axes.n; i++) perm[i] = i;
  std::sort(perm.begin(), perm.end(), [&](int a, int b) { return axes.v[a] < axes.v[b]; });
  mx::Shape rs(out.size(), 1);
  for (int i = 0; i < axes.n; i++) rs[axes.v[i]] = x.shape(i);
  return mx::broadcast_to(mx::reshape(mx::transpose(x, perm), rs), out);
}

mx::array slice(const lathe_node *n, const mx::array &x) {
  lathe_ilist st = lathe_attr_slice_starts(n), li = lathe_attr_slice_limits(n), sd = lathe_attr_slice_strides(n);
  mx::Shape a(st.n), b(st.n), k(st.n);
  for (int i = 0; i < st.n; i++) {
    a[i] = (int)st.v[i];
    b[i] = li.v[i] < 0 ? x.shape(i) : (int)li.v[i]; /* -1: all of a dynamic axis */
    k[i] = (int)sd.v[i];
  }
  return mx::slice(x, a, b, k);
}

mx::array pad(const lathe_node *n, mx::array x, const mx::array &fill) {
  lathe_ilist lo = lathe_attr_pad_start(n), hi = lathe_attr_pad_end(n), in = lathe_attr_pad_interior(n);
  for (int a = 0; a < in.n; a++) { /* interior: each element followed by k fill values, the last one's cut */
    int k = (int)in.v[a], d = x.shape(a);
    if (k == 0 || d <= 1) continue;
    mx::array e = mx::expand_dims(x, a + 1);
    e = mx::pad(e, std::vector<int>{a + 1}, mx::Shape{0}, mx::Shape{k}, fill);
    mx::Shape s = x.shape();
    s[a] = d * (k + 1);
    e = mx::reshape(e, s);
    mx::Shape b(s.size(), 0), l = s;
    l[a] = d + (d - 1) * k;
    x = mx::slice(e, b, l);
  }
  std::vector<int> axes;
  mx::Shape plo, phi, cb(x.ndim(), 0), ce = x.shape();
  bool crop = false;
  for (int a = 0; a < lo.n; a++) {
    if (lo.v[a] > 0 || hi.v[a] > 0) {
      axes.push_back(a);
      plo.push_back(lo.v[a] > 0 ? (int)lo.v[a] : 0);
      phi.push_back(hi.v[a] > 0 ? (int)hi.v[a] : 0);
    }
    if (lo.v[a] < 0) cb[a] = (int)-lo.v[a], crop = true;
    if (hi.v[a] < 0) ce[a] += (int)hi.v[a], crop = true;
  }
  if (crop) { /* negative padding crops, before padding the other side */
    for (int a = 0; a < (int)x.ndim(); a++) ce[a] = std::max(ce[a], cb[a]);
    x = mx::slice(x, cb, ce);
  }
  if (!axes.empty()) x = mx::pad(x, axes, plo, phi, fill);
  return x;
}

mx::array dynshape(Env &env, const lathe_node *n, const Arrays &in) {
  const mx::array &x = in[0];
  switch (n->op) {
    case LATHE_OP_DYNAMIC_SHAPE: {
      std::vector<int64_t> d(x.shape().begin(), x.shape().end()); /* sizes are Int64 */
      return mx::array(d.begin(), mx::Shape{(int)d.size()}, mx::int64);
    }
    case LATHE_OP_DYNAMIC_DIMENSION_SIZE:
      return mx::array((int64_t)x.shape((int)lathe_attr_dynamic_dimension_size_axis(n)), mx::int64);
    default: { /* DynamicReshape: static and bound sizes, the inferred axis from the element count */
      const lathe_shape &s = n->shape;
      int inferred = (int)lathe_attr_dynamic_reshape_inferred(n);
      lathe_ilist value_of = lathe_attr_dynamic_reshape_value_of(n);
      int64_t known = 1;
      std::vector<int64_t> d(s.rank);
      for (int i = 0; i < s.rank; i++) {
        d[i] = s.dims[i] >= 0 ? s.dims[i] : env.bind ? env.bind->get(s.axis_names[i]) : -1;
        if (i == inferred) d[i] = -1;
        if (d[i] < 0 && value_of.v[i] >= 0) { /* sized by a value: read it (a host step) */
          mx::array v = in[(size_t)value_of.v[i]];
          mx::eval(v);
          d[i] = mx::astype(v, mx::int64).item<int64_t>();
        }
        if (d[i] < 0 && inferred < 0) inferred = i;
        if (d[i] >= 0) known *= d[i];
      }
      if (inferred >= 0) {
        if (known == 0 || (int64_t)x.size() % known)
          MLX_INVALID("DynamicReshape: cannot infer axis %d: %zu elements over a static product of %lld", inferred, x.size(),
                      (long long)known);
        d[inferred] = (int64_t)x.size() / known;
      }
      for (int i = 0; i < s.rank; i++) {
        if (value_of.v[i] >= 0) { /* a size value must agree with the resolved size */
          mx::array v = in[(size_t)value_of.v[i]];
          mx::eval(v);
          int64_t want = mx::astype(v, mx::int64).item<int64_t>();
          if (want != d[i])
            MLX_INVALID("DynamicReshape: axis %d (\"%s\") has size %lld from its value, but the operand's %zu elements "
                        "resolve it to %lld", i, s.axis_names[i] ? s.axis_names[i] : "", (long long)want, x.size(),
                        (long long)d[i]);
        }
        if (env.bind && s.axis_names[i]) env.bind->set(s.axis_names[i], d[i]);
      }
      int64_t total = 1;
      for (int64_t v : d) total *= v;
      if (total != (int64_t)x.size())
        MLX_INVALID("DynamicReshape: operand has %zu elements, the resolved target %lld", x.size(), (long long)total);
      mx::Shape out = mx_shape(d.data(), s.rank);
      return mx::reshape(x, out);
    }
  }
}

}  // namespace

mx::array lower_layout(Env &env, const lathe_node *n, const Arrays &in) {
  const mx::array &x = in[0];
  switch (n->op) {
    case LATHE_OP_RESHAPE: return mx::reshape(x, shape_of(env, n->shape));
    case LATHE_OP_TRANSPOSE: return mx::transpose(x, ints(lathe_attr_transpose_permutation(n)));
    case LATHE_OP_BROADCAST_IN_DIM: return broadcast_in_dim(env, n, x);
    case LATHE_OP_CONCATENATE: return in.size() == 1 ? x : mx::concatenate(in, (int)lathe_attr_concatenate_axis(n));
    case LATHE_OP_SLICE: return slice(n, x);
    case LATHE_OP_PAD: return pad(n, x, in[1]);
    case LATHE_OP_REVERSE: {
      std::vector<int> axes = ints(lathe_attr_reverse_axes(n));
      return axes.empty() ? x : mx::flip(x, axes);
    }
    default: MLX_INTERNAL("mlx: %s is not a layout op", lathe_op_name(n->op));
  }
}

mx::array lower_dynshape(Env &env, const lathe_node *n, const Arrays &in) { return dynshape(env, n, in); }

Arrays lower(Env &env, const lathe_node *n, const Arrays &in) {
  switch (lathe_op_kind_of(n->op)) {
    case LATHE_KIND_LEAF:
      if (n->op == LATHE_OP_IOTA) return {iota(env, n)};
      break;
    case LATHE_KIND_UNARY:
    case LATHE_KIND_BINARY:
    case LATHE_KIND_COMPARE:
    case LATHE_KIND_SELECT:
    case LATHE_KIND_CONVERT:
      return {lower_elementwise(env, n, in)};
    case LATHE_KIND_REDUCE: return {lower_reduce(env, n, in)};
    case LATHE_KIND_SCAN: return {lower_scan(env, n, in)};
    case LATHE_KIND_LAYOUT: return {lower_layout(env, n, in)};
    case LATHE_KIND_DOT: return {lower_dot(env, n, in)};
    case LATHE_KIND_CONV: return {lower_conv(env, n, in)};
    case LATHE_KIND_WINDOW: return {lower_window(env, n, in)};
    case LATHE_KIND_INDEX: return {lower_index(env, n, in)};
    case LATHE_KIND_NUMERIC: return lower_numeric(env, n, in);
    case LATHE_KIND_FUSED: return lower_fused(env, n, in);
    case LATHE_KIND_DYNSHAPE: return {lower_dynshape(env, n, in)};
    case LATHE_KIND_BARRIER:
      /* values pass through unchanged; MLX's lazy graph keeps the order its data needs */
      if (n->op == LATHE_OP_SCHEDULING_BARRIER) return {in[0]};
      return in;
    default:
      break;
  }
  MLX_UNIMPL("%s: not implemented on mlx", lathe_op_name(n->op));
}

}  // namespace lathe_mlx
