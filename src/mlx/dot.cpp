/* dot.cpp -- DotGeneral: operands transposed to [batch, M, K] x [batch, K, N] and multiplied by
 * mx::matmul in the accumulator dtype (Float32 for halves). MLX multiplies floats only, so
 * integer products are exact sums of broadcast products in the accumulator dtype (wrapping at
 * its width, as lathe:cpu), computed in row blocks that bound the temporary. */
#include <algorithm>

#include "mlx.h"

namespace lathe_mlx {
namespace {

/* Axes of rank r not in a or b, increasing. */
std::vector<int> others(int r, const std::vector<int> &a, const std::vector<int> &b) {
  std::vector<int> o;
  for (int i = 0; i < r; i++)
    if (std::find(a.begin(), a.end(), i) == a.end() && std::find(b.begin(), b.end(), i) == b.end()) o.push_back(i);
  return o;
}

int64_t size_of(const mx::array &x, const std::vector<int> &axes) {
  int64_t p = 1;
  for (int a : axes) p *= x.shape(a);
  return p;
}

/* [B, M, K] x [B, K, N] -> [B, M, N] in an integer dtype, exactly. */
mx::array int_matmul(const mx::array &l, const mx::array &r) {
  int M = l.shape(1), K = l.shape(2), N = r.shape(2), B = l.shape(0);
  const int64_t limit = INT64_C(1) << 24; /* elements of one block's broadcast product */
  int64_t per_row = (int64_t)B * K * N;
  int rows = per_row ? (int)std::max<int64_t>(1, std::min<int64_t>(M, limit / per_row)) : M;
  mx::array rr = mx::expand_dims(r, 1); /* [B, 1, K, N] */
  Arrays parts;
  for (int m0 = 0; m0 < M || (M == 0 && parts.empty()); m0 += rows) {
    int m1 = std::min(M, m0 + rows);
    mx::array lb = mx::slice(l, {0, m0, 0}, {B, m1, K});
    mx::array p = mx::multiply(mx::expand_dims(lb, 3), rr); /* [B, m, K, N] */
    parts.push_back(mx::astype(mx::sum(p, 2), l.dtype()));
    if (M == 0) break;
  }
  return parts.size() == 1 ? parts[0] : mx::concatenate(parts, 1);
}

}  // namespace

mx::array dot_general(const mx::array &lhs, const mx::array &rhs, const std::vector<int> &lc, const std::vector<int> &lb,
                      const std::vector<int> &rc, const std::vector<int> &rb, lathe_dtype acc, lathe_dtype out) {
  std::vector<int> lx = others((int)lhs.ndim(), lc, lb), rx = others((int)rhs.ndim(), rc, rb);
  std::vector<int> lp = lb, rp = rb;
  lp.insert(lp.end(), lx.begin(), lx.end());
  lp.insert(lp.end(), lc.begin(), lc.end());
  rp.insert(rp.end(), rc.begin(), rc.end());
  rp.insert(rp.end(), rx.begin(), rx.end());
  int B = (int)size_of(lhs, lb), M = (int)size_of(lhs, lx), K = (int)size_of(lhs, lc), N = (int)size_of(rhs, rx);
  mx::Dtype at = mx_dtype(acc);
  bool ints = mx::issubdtype(at, mx::integer) || at == mx::bool_;
  /* identity permutations and a missing batch stay out of MLX's graph (each node costs a dispatch) */
  auto arrange = [](const mx::array &x, const std::vector<int> &perm, mx::Shape to) {
    bool identity = true;
    for (size_t i = 0; i < perm.size(); i++) identity &= perm[i] == (int)i;
    return mx::reshape(identity ? x : mx::transpose(x, perm), std::move(to));
  };
  mx::Shape s;
  for (int a : lb) s.push_back(lhs.shape(a));
  for (int a : lx) s.push_back(lhs.shape(a));
  for (int a : rx) s.push_back(rhs.shape(a));
  if (K == 0) return mx::zeros(s, mx_dtype(out)); /* empty sums, without MLX's kernels on empty operands */
  mx::array p = lb.empty() && !ints
                    ? mx::matmul(arrange(convert(lhs, acc), lp, {M, K}), arrange(convert(rhs, acc), rp, {K, N}))
                    : ints ? int_matmul(arrange(convert(lhs, acc), lp, {B, M, K}), arrange(convert(rhs, acc), rp, {B, K, N}))
                           : mx::matmul(arrange(convert(lhs, acc), lp, {B, M, K}), arrange(convert(rhs, acc), rp, {B, K, N}));
  return convert(mx::reshape(p, s), out);
}

mx::array lower_dot(Env &, const lathe_node *n, const Arrays &in) {
  return dot_general(in[0], in[1], ints(lathe_attr_dot_general_lhs_contracting(n)), ints(lathe_attr_dot_general_lhs_batch(n)),
                     ints(lathe_attr_dot_general_rhs_contracting(n)), ints(lathe_attr_dot_general_rhs_batch(n)),
                     lathe_attr_dot_general_accumulator(n), lathe_attr_dot_general_output(n));
}

}  // namespace lathe_mlx
