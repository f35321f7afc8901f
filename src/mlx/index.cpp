/* index.cpp -- Gather and Scatter in XLA's general form through mx::gather / mx::scatter_*:
 * index vectors are moved to the last axis and split into one index array per mapped operand
 * axis; windows become MLX slices (full operand rank, size 1 at collapsed / inserted axes), and
 * the results are reshaped and transposed into the requested layout. Gather clamps each start
 * to [0, dim - size]; Scatter skips windows that do not fit, by giving them the combiner's
 * identity at start 0 (MLX does not check bounds). DynamicSlice and DynamicUpdateSlice use MLX's
 * slices with start arrays. */
#include <algorithm>

#include "mlx.h"

namespace lathe_mlx {
namespace {

/* Indices as Int64, as lathe:cpu reads them (Uint64 beyond Int64's range saturates). */
mx::array index_i64(const mx::array &x) {
  if (x.dtype() == mx::uint64) return mx::astype(mx::minimum(x, scalar_u((uint64_t)INT64_MAX, mx::uint64)), mx::int64);
  return mx::astype(x, mx::int64);
}

/* The index vectors of idx on its last axis (index_vector_axis moved there, or added). */
mx::array vectors_last(const mx::array &idx, int ivd) {
  if (ivd == (int)idx.ndim()) return mx::expand_dims(idx, -1);
  return mx::moveaxis(idx, ivd, -1);
}

mx::array component(const mx::array &vec, int k) {
  return index_i64(mx::squeeze(mx::slice(vec, [&] {
    mx::Shape b(vec.ndim(), 0);
    b.back() = k;
    return b;
  }(), [&] {
    mx::Shape e = vec.shape();
    e.back() = k + 1;
    return e;
  }()), -1));
}

mx::array gather(const lathe_node *n, const mx::array &x, const mx::array &idx) {
  int ivd = (int)lathe_attr_gather_index_vector_axis(n);
  std::vector<int> offset_axes = ints(lathe_attr_gather_offset_output_axes(n)),
                   collapsed = ints(lathe_attr_gather_collapsed_slice_axes(n)),
                   map = ints(lathe_attr_gather_start_index_map(n));
  lathe_ilist ss = lathe_attr_gather_slice_sizes(n);
  int r = (int)x.ndim();
  mx::Shape sizes(r);
  for (int a = 0; a < r; a++) sizes[a] = ss.v[a] < 0 ? x.shape(a) : (int)ss.v[a];
  mx::array vec = vectors_last(idx, ivd);
  mx::Shape batch(vec.shape().begin(), vec.shape().end() - 1);
  int nb = (int)batch.size();
  /* the output shape, to answer empty results without asking MLX */
  int R = nb + r - (int)collapsed.size();
  mx::Shape out(R);
  {
    int t = 0, b = 0;
    std::vector<int> offs;
    for (int a = 0; a < r; a++)
      if (std::find(collapsed.begin(), collapsed.end(), a) == collapsed.end()) offs.push_back(sizes[a]);
    for (int j = 0; j < R; j++)
      out[j] = std::find(offset_axes.begin(), offset_axes.end(), j) != offset_axes.end() ? offs[t++] : batch[b++];
  }
  size_t total = 1;
  for (int v : out) total *= (size_t)v;
  if (total == 0 || x.size() == 0) return mx::zeros(out, x.dtype());
  mx::array g = x;
  if (map.empty()) { /* every window starts at 0 */
    mx::array s = mx::slice(x, mx::Shape(r, 0), sizes);
    mx::Shape bs = batch;
    bs.insert(bs.end(), sizes.begin(), sizes.end());
    mx::Shape rs(nb, 1);
    rs.insert(rs.end(), sizes.begin(), sizes.end());
    g = mx::broadcast_to(mx::reshape(s, rs), bs);
  } else {
    Arrays starts;
    for (int k = 0; k < (int)map.size(); k++) {
      int a = map[k];
      starts.push_back(mx::clip(component(vec, k), scalar_i(0, mx::int64), scalar_i(x.shape(a) - sizes[a], mx::int64)));
    }
    g = mx::gather(x, starts, map, sizes); /* [batch..., sizes...] */
  }
  std::vector<int> sq;
  for (int a : collapsed) sq.push_back(nb + a);
  if (!sq.empty()) g = mx::squeeze(g, sq);
  /* offset axes go to offset_output_axes, batch axes fill the others in order */
  std::vector<int> perm(R);
  int t = 0, b = 0;
  for (int j = 0; j < R; j++)
    perm[j] = std::find(offset_axes.begin(), offset_axes.end(), j) != offset_axes.end() ? nb + t++ : b++;
  return mx::transpose(g, perm);
}

mx::array scatter(const lathe_node *n, const mx::array &x, const mx::array &idx, const mx::array &upd) {
  int ivd = (int)lathe_attr_scatter_index_vector_axis(n);
  std::vector<int> window_axes = ints(lathe_attr_scatter_update_window_axes(n)),
                   inserted = ints(lathe_attr_scatter_inserted_window_axes(n)),
                   map = ints(lathe_attr_scatter_scatter_axes_to_operand_axes(n));
  int r = (int)x.ndim();
  if (x.size() == 0 || upd.size() == 0) return x;
  mx::array vec = vectors_last(idx, ivd);
  /* updates as [scatter axes..., window axes...], the window at full operand rank */
  std::vector<int> perm;
  for (int a = 0; a < (int)upd.ndim(); a++)
    if (std::find(window_axes.begin(), window_axes.end(), a) == window_axes.end()) perm.push_back(a);
  int nb = (int)perm.size();
  perm.insert(perm.end(), window_axes.begin(), window_axes.end());
  mx::array u = mx::transpose(upd, perm);
  mx::Shape us(u.shape().begin(), u.shape().begin() + nb), win(r);
  for (int a = 0, w = 0; a < r; a++)
    win[a] = std::find(inserted.begin(), inserted.end(), a) != inserted.end() ? 1 : upd.shape(window_axes[w++]);
  us.insert(us.end(), win.begin(), win.end());
  u = mx::reshape(u, us);
  lathe_op op = n->op == LATHE_OP_SCATTER_SUM ? LATHE_OP_REDUCE_SUM : n->op == LATHE_OP_SCATTER_MAX ? LATHE_OP_REDUCE_MAX
                                                                                                    : LATHE_OP_REDUCE_MIN;
  if (map.empty()) { /* every window starts at 0: combine them all there */
    std::vector<int> baxes;
    for (int a = 0; a < nb; a++) baxes.push_back(a);
    mx::array w = reduce(op, u, baxes);
    mx::array cur = mx::slice(x, mx::Shape(r, 0), win);
    mx::array c = op == LATHE_OP_REDUCE_SUM ? mx::add(cur, w) : op == LATHE_OP_REDUCE_MAX ? mx::maximum(cur, w) : mx::minimum(cur, w);
    return mx::slice_update(x, c, mx::Shape(r, 0), win);
  }
  Arrays starts;
  mx::array ok = mx::array(true);
  for (int k = 0; k < (int)map.size(); k++) {
    mx::array s = component(vec, k);
    int a = map[k];
    ok = mx::logical_and(ok, mx::logical_and(mx::greater_equal(s, scalar_i(0, mx::int64)),
                                             mx::less_equal(s, scalar_i(x.shape(a) - win[a], mx::int64))));
    starts.push_back(s);
  }
  for (auto &s : starts) s = mx::where(ok, s, scalar_i(0, mx::int64));
  mx::Shape okb = ok.shape();
  okb.insert(okb.end(), r, 1);
  u = mx::where(mx::reshape(ok, okb), u, reduce_identity(op, u.dtype()));
  if (n->op == LATHE_OP_SCATTER_SUM) return mx::scatter_add(x, starts, u, map);
  mx::array res = n->op == LATHE_OP_SCATTER_MAX ? mx::scatter_max(x, starts, u, map) : mx::scatter_min(x, starts, u, map);
  if (!mx::issubdtype(x.dtype(), mx::inexact)) return res;
  /* a NaN sticks: in the operand, or from any update that reaches the position */
  mx::array hit = mx::scatter_max(mx::zeros(x.shape(), mx::uint8), starts, mx::astype(mx::isnan(u), mx::uint8), map);
  return mx::where(mx::logical_or(mx::isnan(x), mx::astype(hit, mx::bool_)), scalar_f(NAN, x.dtype()), res);
}

/* Starts -- one scalar per axis, or one vector of them -- clamped to [0, dim - size], as one Int32
 * array for MLX's dynamic slices. */
mx::array clamped_starts(const Arrays &in, size_t first, const mx::array &x, const mx::Shape &sizes) {
  int r = (int)x.ndim();
  bool vector = r > 0 && in[first].ndim() == 1;
  mx::Shape lo(r, 0), hi(r);
  for (int a = 0; a < r; a++) hi[a] = x.shape(a) - sizes[a];
  mx::array s = vector ? index_i64(in[first]) : [&] {
    Arrays v;
    for (int a = 0; a < r; a++) v.push_back(index_i64(in[first + (size_t)a]));
    return mx::stack(v);
  }();
  mx::array his = mx::array(hi.begin(), {r}, mx::int32);
  return mx::astype(mx::clip(s, scalar_i(0, mx::int64), mx::astype(his, mx::int64)), mx::int32);
}

std::vector<int> all_axes(int r) {
  std::vector<int> v(r);
  for (int i = 0; i < r; i++) v[i] = i;
  return v;
}

}  // namespace

mx::array lower_index(Env &, const lathe_node *n, const Arrays &in) {
  const mx::array &x = in[0];
  switch (n->op) {
    case LATHE_OP_GATHER: return gather(n, x, in[1]);
    case LATHE_OP_SCATTER_SUM:
    case LATHE_OP_SCATTER_MAX:
    case LATHE_OP_SCATTER_MIN:
      return scatter(n, x, in[1], in[2]);
    case LATHE_OP_DYNAMIC_SLICE: {
      lathe_ilist d = lathe_attr_dynamic_slice_slice_dims(n);
      mx::Shape sizes(d.n);
      for (int a = 0; a < d.n; a++) {
        sizes[a] = d.v[a] < 0 ? x.shape(a) : (int)d.v[a];
        if (sizes[a] > x.shape(a)) /* only dynamic axes bound inconsistently get here */
          MLX_INVALID("DynamicSlice: slice size %d against operand axis %d of size %d: dynamic axes bound to "
                      "inconsistent sizes", sizes[a], a, x.shape(a));
      }
      if (x.ndim() == 0) return x;
      bool empty = x.size() == 0;
      for (int v : sizes) empty |= v == 0;
      if (empty) return mx::zeros(sizes, x.dtype());
      return mx::slice(x, clamped_starts(in, 1, x, sizes), all_axes((int)x.ndim()), sizes);
    }
    case LATHE_OP_DYNAMIC_UPDATE_SLICE: {
      const mx::array &u = in[1];
      for (int a = 0; a < (int)x.ndim(); a++)
        if (u.shape(a) > x.shape(a))
          MLX_INVALID("DynamicUpdateSlice: update size %d against operand axis %d of size %d: dynamic axes bound to "
                      "inconsistent sizes", u.shape(a), a, x.shape(a));
      if (x.ndim() == 0) return u;
      if (u.size() == 0 || x.size() == 0) return x;
      return mx::slice_update(x, u, clamped_starts(in, 2, x, u.shape()), all_axes((int)x.ndim()));
    }
    default: MLX_INTERNAL("mlx: %s is not an index op", lathe_op_name(n->op));
  }
}

}  // namespace lathe_mlx
