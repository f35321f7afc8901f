/* reduce.cpp -- the REDUCE family: sums and products wrap at the operand's width (MLX widens
 * small integers; the result is narrowed back), halves accumulate in Float32, Max/Min propagate
 * NaN, reductions over empty axes give the identity, bitwise reductions go bit by bit, and
 * ArgMinMax takes the first extreme with NaN first of all. CumSum is mx::cumsum, its sums
 * wrapping and accumulating as the reductions' do. */
#include <cmath>
#include <limits>

#include "mlx.h"

namespace lathe_mlx {

mx::array reduce_identity(lathe_op op, mx::Dtype dt) {
  bool flt = mx::issubdtype(dt, mx::inexact), sint = mx::issubdtype(dt, mx::signedinteger);
  int bits = (int)dt.size() * 8;
  switch (op) {
    case LATHE_OP_REDUCE_SUM:
    case LATHE_OP_REDUCE_BITWISE_OR:
    case LATHE_OP_REDUCE_BITWISE_XOR:
    case LATHE_OP_REDUCE_LOGICAL_OR:
    case LATHE_OP_REDUCE_LOGICAL_XOR:
      return scalar_i(0, dt);
    case LATHE_OP_REDUCE_PRODUCT:
    case LATHE_OP_REDUCE_LOGICAL_AND:
      return scalar_i(1, dt);
    case LATHE_OP_REDUCE_BITWISE_AND:
      return scalar_i(-1, dt);
    case LATHE_OP_REDUCE_MAX:
      if (flt) return scalar_f(-INFINITY, dt);
      if (dt == mx::bool_) return scalar_i(0, dt);
      return sint ? scalar_i(bits == 64 ? INT64_MIN : -(int64_t)(UINT64_C(1) << (bits - 1)), dt) : scalar_u(0, dt);
    case LATHE_OP_REDUCE_MIN:
      if (flt) return scalar_f(INFINITY, dt);
      if (dt == mx::bool_) return scalar_i(1, dt);
      return sint ? scalar_i(bits == 64 ? INT64_MAX : (int64_t)((UINT64_C(1) << (bits - 1)) - 1), dt)
                  : scalar_u(UINT64_MAX, dt);
    default: MLX_INTERNAL("mlx: %s has no identity", lathe_op_name(op));
  }
}

/* MLX has no bitwise reductions: the reduced axes go last as one axis, padded with the identity
 * to a power of two, then halves are combined pairwise (log2 n elementwise steps). A small graph,
 * where reducing bit by bit made one kernel of hundreds of ops for MLX's GPU compiler. */
static mx::array bitwise_reduce(lathe_op op, const mx::array &x, const std::vector<int> &axes) {
  std::vector<int> perm;
  mx::Shape kept;
  for (int i = 0; i < (int)x.ndim(); i++)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) perm.push_back(i), kept.push_back(x.shape(i));
  int64_t n = 1;
  for (int a : axes) perm.push_back(a), n *= x.shape(a);
  int64_t p2 = 1;
  while (p2 < n) p2 *= 2;
  mx::Shape flat = kept;
  flat.push_back((int)n);
  mx::array v = mx::reshape(mx::transpose(x, perm), flat);
  int last = (int)kept.size();
  if (p2 > n) {
    std::vector<std::pair<int, int>> pad(flat.size(), {0, 0});
    pad[(size_t)last] = {0, (int)(p2 - n)};
    v = mx::pad(v, pad, reduce_identity(op, x.dtype()));
  }
  for (int64_t h = p2 / 2; h >= 1; h /= 2) {
    mx::Shape lo(flat.size(), 0), mid = v.shape(), hi = v.shape();
    mid[(size_t)last] = (int)h;
    mx::Shape mid0(flat.size(), 0);
    mid0[(size_t)last] = (int)h;
    mx::array a = mx::slice(v, lo, mid), b = mx::slice(v, mid0, hi);
    v = op == LATHE_OP_REDUCE_BITWISE_AND  ? mx::bitwise_and(a, b)
        : op == LATHE_OP_REDUCE_BITWISE_OR ? mx::bitwise_or(a, b)
                                            : mx::bitwise_xor(a, b);
  }
  return mx::reshape(v, kept);
}

mx::array reduce(lathe_op op, const mx::array &x, const std::vector<int> &axes) {
  if (axes.empty()) return x;
  mx::Dtype dt = x.dtype();
  bool empty = false;
  for (int a : axes) empty |= x.shape(a) == 0;
  if (empty) { /* the identity, in the kept axes' shape */
    mx::Shape s;
    for (int i = 0; i < (int)x.ndim(); i++)
      if (std::find(axes.begin(), axes.end(), i) == axes.end()) s.push_back(x.shape(i));
    return mx::full(s, reduce_identity(op, dt));
  }
  bool half = dt == mx::float16 || dt == mx::bfloat16;
  switch (op) {
    case LATHE_OP_REDUCE_SUM:
      return mx::astype(mx::sum(half ? mx::astype(x, mx::float32) : x, axes), dt);
    case LATHE_OP_REDUCE_PRODUCT:
      return mx::astype(mx::prod(half ? mx::astype(x, mx::float32) : x, axes), dt);
    case LATHE_OP_REDUCE_MAX: return mx::max(x, axes);
    case LATHE_OP_REDUCE_MIN: return mx::min(x, axes);
    case LATHE_OP_REDUCE_BITWISE_AND:
    case LATHE_OP_REDUCE_BITWISE_OR:
    case LATHE_OP_REDUCE_BITWISE_XOR:
      return bitwise_reduce(op, x, axes);
    case LATHE_OP_REDUCE_LOGICAL_AND: return mx::all(x, axes);
    case LATHE_OP_REDUCE_LOGICAL_OR: return mx::any(x, axes);
    case LATHE_OP_REDUCE_LOGICAL_XOR:
      return mx::astype(mx::bitwise_and(mx::sum(mx::astype(x, mx::uint32), axes), scalar_u(1, mx::uint32)), mx::bool_);
    default: MLX_INTERNAL("mlx: %s is not a reduction", lathe_op_name(op));
  }
}

mx::array lower_reduce(Env &, const lathe_node *n, const Arrays &in) {
  const mx::array &x = in[0];
  if (n->op != LATHE_OP_ARG_MIN_MAX) return reduce(n->op, x, ints(lathe_attr_reduce_axes(n)));
  int axis = (int)lathe_attr_arg_min_max_axis(n);
  mx::Dtype out = mx_dtype(n->shape.dtype);
  if (x.size() == 0) { /* MLX refuses empty arg reductions; the indices are 0 */
    mx::Shape s = x.shape();
    s.erase(s.begin() + axis);
    return mx::zeros(s, out);
  }
  /* MLX's argmin/argmax take the first extreme, and a NaN counts as the extreme of both */
  mx::array i = lathe_attr_arg_min_max_is_min(n) ? mx::argmin(x, axis) : mx::argmax(x, axis);
  return mx::astype(i, out);
}

mx::array lower_scan(Env &, const lathe_node *n, const Arrays &in) {
  const mx::array &x = in[0];
  if (n->op != LATHE_OP_CUM_SUM) MLX_UNIMPL("%s: not implemented on mlx", lathe_op_name(n->op));
  if (x.size() == 0) return x;
  mx::Dtype dt = x.dtype();
  bool half = dt == mx::float16 || dt == mx::bfloat16;
  mx::array s = mx::cumsum(half ? mx::astype(x, mx::float32) : x, (int)lathe_attr_cum_sum_axis(n),
                           lathe_attr_cum_sum_reverse(n), !lathe_attr_cum_sum_exclusive(n));
  return mx::astype(s, dt);
}

}  // namespace lathe_mlx
