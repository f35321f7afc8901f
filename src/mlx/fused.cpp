/* fused.cpp -- the fused ops as MLX expressions (mx::compile fuses their elementwise parts):
 * Softmax, Gelu, LayerNorm, Dense and its VJP, Activation and its VJP, the attention QKV projection, and scaled dot-product
 * attention with its VJP, with lathe:cpu's semantics: halves compute in Float32, LayerNorm's
 * statistics in Float64 on the CPU, attention rows that see no key give zeros and a logsumexp of
 * -inf, query rows past query_seq_len give zeros, grouped-query heads share kv heads. The
 * quantized fused ops are not lowered (MLX's quantization formats are not GoMLX's). */
#include <algorithm>
#include <cmath>

#include "mlx.h"

namespace lathe_mlx {
namespace {

/* The compute dtype of a float dtype: Float32 for halves. */
mx::Dtype compute_t(mx::Dtype dt) { return dt == mx::float64 ? mx::float64 : mx::float32; }

mx::array gelu(const mx::array &v, bool exact) {
  mx::Dtype t = v.dtype();
  mx::array half = scalar_f(0.5, t), one = scalar_f(1, t);
  if (exact) return mx::multiply(mx::multiply(v, half), mx::add(one, erf_(mx::multiply(v, scalar_f(0.70710678118654752440, t)))));
  mx::array inner = mx::multiply(scalar_f(0.79788456080286535588, t),
                                 mx::add(v, mx::multiply(scalar_f(0.044715, t), mx::multiply(v, mx::multiply(v, v)))));
  return mx::multiply(mx::multiply(v, half), mx::add(one, mx::tanh(inner)));
}

/* The activations of src/graph/ew.def's LATHE_ACT rows, written again over arrays (the rows are C
 * expressions with ?:, which arrays cannot take): every row has a case in the three switches, and
 * the count below fails the build when a row is added. */
static_assert(LATHE_ACT_COUNT == 12, "a LATHE_ACT row was added to ew.def: add it to fused.cpp's switches");
constexpr double kSeluScale = 1.0507009873554804934, kSeluScaleAlpha = 1.7580993408473768599;

mx::array sigmoid_(const mx::array &v) {
  mx::Dtype t = v.dtype();
  return mx::divide(scalar_f(1, t), mx::add(scalar_f(1, t), exp_(mx::negative(v))));
}

/* f(v); a GLU activation gives its gate's function */
mx::array activation(const mx::array &v, lathe_activation a) {
  mx::Dtype t = v.dtype();
  auto c = [&](double x) { return scalar_f(x, t); };
  switch (a) {
    case LATHE_ACTIVATION_NONE: return v;
    case LATHE_ACTIVATION_GELU: return gelu(v, true);
    case LATHE_ACTIVATION_RELU: return mx::where(mx::less(v, c(0)), c(0), v);
    case LATHE_ACTIVATION_SWIGLU:
    case LATHE_ACTIVATION_SILU: return mx::divide(v, mx::add(c(1), exp_(mx::negative(v))));
    case LATHE_ACTIVATION_HARD_SWISH: {
      mx::array s = mx::add(mx::multiply(v, c(1.0 / 6.0)), c(0.5));
      s = mx::where(mx::less(s, c(0)), c(0), mx::where(mx::greater(s, c(1)), c(1), s));
      return mx::multiply(v, s);
    }
    case LATHE_ACTIVATION_TANH: return mx::tanh(v);
    case LATHE_ACTIVATION_SIGMOID: return sigmoid_(v);
    case LATHE_ACTIVATION_HARD_SIGMOID: {
      mx::array s = mx::add(mx::multiply(v, c(0.2)), c(0.5));
      return mx::where(mx::less(s, c(0)), c(0), mx::where(mx::greater(s, c(1)), c(1), s));
    }
    case LATHE_ACTIVATION_LEAKY_RELU: return mx::where(mx::greater_equal(v, c(0)), v, mx::multiply(c(0.3), v));
    case LATHE_ACTIVATION_SELU:
      return mx::where(mx::greater(v, c(0)), mx::multiply(c(kSeluScale), v), mx::multiply(c(kSeluScaleAlpha), mx::expm1(v)));
    case LATHE_ACTIVATION_GELU_APPROXIMATE: return gelu(v, false);
  }
  MLX_UNIMPL("activation %d: not implemented on mlx", (int)a);
}

/* dx from x and g (a GLU activation: its gate's derivative) */
mx::array activation_vjp_x(const mx::array &x, const mx::array &g, lathe_activation a) {
  mx::Dtype t = x.dtype();
  auto c = [&](double v) { return scalar_f(v, t); };
  switch (a) {
    case LATHE_ACTIVATION_NONE: return g;
    case LATHE_ACTIVATION_GELU: {
      mx::array cdf = mx::multiply(c(0.5), mx::add(c(1), erf_(mx::multiply(x, c(0.70710678118654752440)))));
      mx::array pdf = mx::multiply(c(0.39894228040143267794), exp_(mx::multiply(c(-0.5), mx::multiply(x, x))));
      return mx::multiply(g, mx::add(cdf, mx::multiply(x, pdf)));
    }
    case LATHE_ACTIVATION_RELU: return mx::where(mx::greater(x, c(0)), g, c(0));
    case LATHE_ACTIVATION_SWIGLU:
    case LATHE_ACTIVATION_SILU: {
      mx::array s = sigmoid_(x);
      return mx::multiply(g, mx::multiply(s, mx::add(c(1), mx::multiply(x, mx::subtract(c(1), s)))));
    }
    case LATHE_ACTIVATION_HARD_SWISH:
      return mx::where(mx::less_equal(x, c(-3)), c(0),
                       mx::where(mx::greater_equal(x, c(3)), g, mx::multiply(g, mx::add(mx::multiply(x, c(1.0 / 3.0)), c(0.5)))));
    case LATHE_ACTIVATION_TANH: {
      mx::array th = mx::tanh(x);
      return mx::multiply(g, mx::subtract(c(1), mx::multiply(th, th)));
    }
    case LATHE_ACTIVATION_SIGMOID: {
      mx::array s = sigmoid_(x);
      return mx::multiply(mx::multiply(g, s), mx::subtract(c(1), s));
    }
    case LATHE_ACTIVATION_HARD_SIGMOID:
      return mx::where(mx::logical_and(mx::greater(x, c(-2.5)), mx::less(x, c(2.5))), mx::multiply(g, c(0.2)), c(0));
    case LATHE_ACTIVATION_LEAKY_RELU: return mx::where(mx::greater_equal(x, c(0)), g, mx::multiply(g, c(0.3)));
    case LATHE_ACTIVATION_SELU:
      return mx::where(mx::greater(x, c(0)), mx::multiply(g, c(kSeluScale)), mx::multiply(mx::multiply(g, c(kSeluScaleAlpha)), exp_(x)));
    case LATHE_ACTIVATION_GELU_APPROXIMATE: {
      mx::array x2 = mx::multiply(x, x);
      mx::array th = mx::tanh(mx::multiply(c(0.79788456080286535588), mx::add(x, mx::multiply(c(0.044715), mx::multiply(x, x2)))));
      mx::array up = mx::multiply(c(0.79788456080286535588), mx::add(c(1), mx::multiply(c(0.134145), x2)));
      mx::array d = mx::add(mx::multiply(c(0.5), mx::add(c(1), th)),
                            mx::multiply(mx::multiply(mx::multiply(c(0.5), x), mx::subtract(c(1), mx::multiply(th, th))), up));
      return mx::multiply(g, d);
    }
  }
  MLX_UNIMPL("activation %d: not implemented on mlx", (int)a);
}

/* dx from y and g (activations whose derivative follows from y) */
mx::array activation_vjp_y(const mx::array &y, const mx::array &g, lathe_activation a) {
  mx::Dtype t = y.dtype();
  auto c = [&](double v) { return scalar_f(v, t); };
  switch (a) {
    case LATHE_ACTIVATION_NONE: return g;
    case LATHE_ACTIVATION_RELU: return mx::where(mx::greater(y, c(0)), g, c(0));
    case LATHE_ACTIVATION_TANH: return mx::multiply(g, mx::subtract(c(1), mx::multiply(y, y)));
    case LATHE_ACTIVATION_SIGMOID: return mx::multiply(mx::multiply(g, y), mx::subtract(c(1), y));
    case LATHE_ACTIVATION_HARD_SIGMOID:
      return mx::where(mx::logical_and(mx::greater(y, c(0)), mx::less(y, c(1))), mx::multiply(g, c(0.2)), c(0));
    case LATHE_ACTIVATION_LEAKY_RELU: return mx::where(mx::greater_equal(y, c(0)), g, mx::multiply(g, c(0.3)));
    case LATHE_ACTIVATION_SELU:
      return mx::where(mx::greater(y, c(0)), mx::multiply(g, c(kSeluScale)), mx::multiply(g, mx::add(y, c(kSeluScaleAlpha))));
    case LATHE_ACTIVATION_GELU:
    case LATHE_ACTIVATION_SILU:
    case LATHE_ACTIVATION_HARD_SWISH:
    case LATHE_ACTIVATION_GELU_APPROXIMATE:
    case LATHE_ACTIVATION_SWIGLU: break; /* builders never ask */
  }
  MLX_UNIMPL("activation %d: no derivative from y", (int)a);
}

mx::array fused_activation(const lathe_node *n, const Arrays &in) {
  lathe_activation a = lathe_attr_fused_activation_activation(n);
  mx::Dtype dt = in[0].dtype();
  mx::array x = mx::astype(in[0], compute_t(dt));
  if (lathe_act_form_of(a) != LATHE_ACT_FORM_GLU) return mx::astype(activation(x, a), dt);
  std::vector<mx::array> gv = mx::split(x, 2, -1);
  return mx::astype(mx::multiply(activation(gv[0], a), gv[1]), dt);
}

mx::array fused_activation_vjp(const lathe_node *n, const Arrays &in) {
  lathe_activation a = lathe_attr_fused_activation_vjp_activation(n);
  bool has_y = lathe_attr_fused_activation_vjp_has_y(n), has_x = lathe_attr_fused_activation_vjp_has_x(n);
  mx::Dtype dt = in.back().dtype(), ct = compute_t(dt);
  mx::array g = mx::astype(in.back(), ct);
  lathe_act_form form = lathe_act_form_of(a);
  if (has_y && form == LATHE_ACT_FORM_Y) return mx::astype(activation_vjp_y(mx::astype(in[0], ct), g, a), dt); /* as lathe:cpu */
  mx::array x = mx::astype(in[has_y ? 1 : 0], ct);
  (void)has_x;
  if (form != LATHE_ACT_FORM_GLU) return mx::astype(activation_vjp_x(x, g, a), dt);
  std::vector<mx::array> gv = mx::split(x, 2, -1);
  mx::array dgate = activation_vjp_x(gv[0], mx::multiply(g, gv[1]), a), dval = mx::multiply(g, activation(gv[0], a));
  return mx::astype(mx::concatenate({dgate, dval}, -1), dt);
}

mx::array fused_softmax(const mx::array &x0, int axis) {
  mx::Dtype dt = x0.dtype();
  if (x0.shape(axis) == 0) return x0;
  mx::array x = mx::astype(x0, compute_t(dt));
  mx::array e = exp_(mx::subtract(x, mx::max(x, axis, true))); /* a NaN anywhere gives NaN */
  return mx::astype(mx::divide(e, mx::sum(e, axis, true)), dt);
}

mx::array layer_norm(Env &env, const lathe_node *n, const Arrays &in) {
  const mx::array &x0 = in[0];
  mx::Dtype dt = x0.dtype(), ct = compute_t(dt), st = env.opt->gpu ? ct : mx::float64;
  std::vector<int> axes = ints(lathe_attr_fused_layer_norm_axes(n));
  mx::array x = mx::astype(x0, ct);
  mx::array xs = mx::astype(x0, st);
  mx::array mean = mx::mean(xs, axes, true);
  mx::array var = mx::mean(mx::square(mx::subtract(xs, mean)), axes, true);
  mx::array inv = mx::astype(mx::rsqrt(mx::add(var, scalar_f(lathe_attr_fused_layer_norm_epsilon(n), st))), ct);
  mx::array v = mx::multiply(mx::subtract(x, mx::astype(mean, ct)), inv);
  /* gamma and beta hold the normalised axes in the order given: moved to x's order to broadcast */
  std::vector<int> order(axes.size());
  for (size_t i = 0; i < axes.size(); i++) order[i] = (int)i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return axes[a] < axes[b]; });
  mx::Shape given, bshape(x.ndim(), 1);
  for (int a : axes) given.push_back(x.shape(a)), bshape[a] = x.shape(a);
  auto param = [&](const mx::array &p) { return mx::reshape(mx::transpose(mx::reshape(mx::astype(p, ct), given), order), bshape); };
  size_t k = 1;
  if (lathe_attr_fused_layer_norm_has_gamma(n)) v = mx::multiply(v, param(in[k++]));
  if (lathe_attr_fused_layer_norm_has_beta(n)) v = mx::add(v, param(in[k]));
  return mx::astype(v, dt);
}

mx::array dense(const lathe_node *n, const Arrays &in) {
  const mx::array &x0 = in[0], &w0 = in[1];
  mx::Dtype dt = x0.dtype(), ct = compute_t(dt);
  int K = x0.shape(-1);
  bool oi = lathe_attr_fused_dense_layout(n) == LATHE_DENSE_OUTPUTS_INPUT;
  mx::Shape outs = oi ? mx::Shape(w0.shape().begin(), w0.shape().end() - 1) : mx::Shape(w0.shape().begin() + 1, w0.shape().end());
  int N = 1;
  for (int v : outs) N *= v;
  int M = K ? (int)(x0.size() / K) : 1;
  for (int i = 0; !K && i < (int)x0.ndim() - 1; i++) M *= x0.shape(i);
  mx::array x = mx::reshape(mx::astype(x0, ct), {M, K});
  mx::array w = oi ? mx::transpose(mx::reshape(mx::astype(w0, ct), {N, K})) : mx::reshape(mx::astype(w0, ct), {K, N});
  mx::array y = mx::matmul(x, w);
  if (lathe_attr_fused_dense_has_bias(n)) y = mx::add(y, mx::reshape(mx::astype(in[2], ct), {N}));
  y = activation(y, lathe_attr_fused_dense_activation(n));
  mx::Shape s(x0.shape().begin(), x0.shape().end() - 1);
  s.insert(s.end(), outs.begin(), outs.end());
  return mx::astype(mx::reshape(y, s), dt);
}

/* dz = act'(y) g; dx = dz . w', dWeight = x' . dz (as weight's layout), dBias = the sums of dz's rows */
Arrays dense_vjp(const lathe_node *n, const Arrays &in) {
  bool hb = lathe_attr_fused_dense_vjp_has_bias(n), oi = lathe_attr_fused_dense_vjp_layout(n) == LATHE_DENSE_OUTPUTS_INPUT;
  const mx::array &x0 = in[0], &w0 = in[1], &y0 = in[hb ? 3 : 2], &g0 = in[hb ? 4 : 3];
  mx::Dtype dt = x0.dtype(), ct = compute_t(dt);
  int K = x0.shape(-1), M = 1, N = 1;
  for (int i = 0; i < (int)x0.ndim() - 1; i++) M *= x0.shape(i);
  for (int i = (int)x0.ndim() - 1; i < (int)y0.ndim(); i++) N *= y0.shape(i);
  mx::array dz = activation_vjp_y(mx::reshape(mx::astype(y0, ct), {M, N}), mx::reshape(mx::astype(g0, ct), {M, N}),
                                  lathe_attr_fused_dense_vjp_activation(n));
  mx::array x = mx::reshape(mx::astype(x0, ct), {M, K});
  mx::array w = oi ? mx::reshape(mx::astype(w0, ct), {N, K}) : mx::transpose(mx::reshape(mx::astype(w0, ct), {K, N})); /* [N, K] */
  mx::array dx = mx::matmul(dz, w);
  mx::array dw = oi ? mx::matmul(mx::transpose(dz), x) : mx::matmul(mx::transpose(x), dz);
  Arrays out = {mx::astype(mx::reshape(dx, x0.shape()), dt), mx::astype(mx::reshape(dw, w0.shape()), dt)};
  if (hb) out.push_back(mx::astype(mx::reshape(mx::sum(dz, 0), in[2].shape()), dt));
  return out;
}

Arrays qkv_projection(const lathe_node *n, const Arrays &in) {
  const mx::array &x0 = in[0];
  mx::Dtype dt = x0.dtype(), ct = compute_t(dt);
  int qd = (int)lathe_attr_fused_attention_qkv_projection_query_dim(n),
      kvd = (int)lathe_attr_fused_attention_qkv_projection_key_value_dim(n), K = x0.shape(-1);
  int M = 1;
  for (int i = 0; i < (int)x0.ndim() - 1; i++) M *= x0.shape(i);
  mx::array y = mx::matmul(mx::reshape(mx::astype(x0, ct), {M, K}), mx::astype(in[1], ct));
  bool has[3] = {lathe_attr_fused_attention_qkv_projection_has_bias_q(n), lathe_attr_fused_attention_qkv_projection_has_bias_k(n),
                 lathe_attr_fused_attention_qkv_projection_has_bias_v(n)};
  int width[3] = {qd, kvd, kvd}, col = 0;
  size_t k = 2;
  Arrays out;
  for (int i = 0; i < 3; i++) {
    mx::array p = mx::slice(y, {0, col}, {y.shape(0), col + width[i]});
    col += width[i];
    if (has[i]) p = mx::add(p, mx::astype(in[k++], ct));
    mx::Shape s(x0.shape().begin(), x0.shape().end() - 1);
    s.push_back(width[i]);
    out.push_back(mx::astype(mx::reshape(p, s), dt));
  }
  return out;
}

/* ---- attention ---- */

struct Attention {
  bool bshd, causal, has_mask, has_lens, has_bias;
  double scale;
  mx::Dtype dt = mx::float32, ct = mx::float32;
  int B, H, Hkv, S, Skv, D;
  std::optional<mx::array> mask, qlen, kvlen, bias;

  /* q, k, v in their layout; optional operands start at in[first] */
  Attention(const lathe_node *n, const Arrays &in, size_t first) {
    bshd = lathe_attr_sdpa_layout(n) == LATHE_ATTENTION_LAYOUT_BSHD;
    causal = lathe_attr_sdpa_causal(n);
    has_mask = lathe_attr_sdpa_has_mask(n);
    has_lens = lathe_attr_sdpa_has_seq_lens(n);
    has_bias = lathe_attr_sdpa_has_bias(n);
    dt = in[0].dtype();
    ct = compute_t(dt);
    B = in[0].shape(0);
    H = in[0].shape(bshd ? 2 : 1);
    S = in[0].shape(bshd ? 1 : 2);
    D = in[0].shape(3);
    Hkv = in[1].shape(bshd ? 2 : 1);
    Skv = in[1].shape(bshd ? 1 : 2);
    scale = lathe_attr_sdpa_scale(n);
    if (scale == 0) scale = D ? 1 / std::sqrt((double)D) : 1;
    size_t k = first;
    if (has_mask) mask = scores_layout(in[k++]);
    if (has_lens) qlen = in[k++], kvlen = in[k++];
    if (has_bias) bias = scores_layout(in[k]);
  }
  /* a mask or bias as [batch or 1, heads or 1, seq or 1, kvLen or 1]: rank 3 has a leading 1,
   * rank 4 follows the layout (a BSHD bias may only broadcast over heads and seq, the builder
   * checks, so reading it as [batch, seq, heads, kvLen] is the same) */
  mx::array scores_layout(const mx::array &m) const {
    if (m.ndim() == 2) return mx::reshape(m, {1, 1, m.shape(0), m.shape(1)});
    if (m.ndim() == 3) return mx::expand_dims(m, 0);
    return bshd ? mx::transpose(m, {0, 2, 1, 3}) : m;
  }
  /* q/k/v (or their gradients) as [batch, heads, seq, dim] in the compute dtype, and back */
  mx::array bhsd(const mx::array &x) const { return mx::astype(bshd ? mx::transpose(x, {0, 2, 1, 3}) : x, ct); }
  mx::array layout(const mx::array &x) const { return mx::astype(bshd ? mx::transpose(x, {0, 2, 1, 3}) : x, dt); }
  /* kv heads repeated for the query heads that read them (head h reads h / (H / Hkv)) */
  mx::array rep(const mx::array &x) const { return H == Hkv ? x : mx::repeat(x, H / Hkv, 1); }
  /* kv-head gradients: the sum over each group's query heads */
  mx::array unrep(const mx::array &x) const {
    if (H == Hkv) return x;
    return mx::sum(mx::reshape(x, {B, Hkv, H / Hkv, x.shape(2), x.shape(3)}), 2);
  }
  /* the logits [B, H, S, Skv]: -inf where a bool mask, causality or the kv length hide a key */
  mx::array logits(const mx::array &q, const mx::array &kr) const {
    mx::array s = mx::multiply(mx::matmul(q, mx::swapaxes(kr, -1, -2)), scalar_f(scale, ct));
    if (bias) s = mx::add(s, mx::astype(*bias, ct));
    mx::array ninf = scalar_f(-INFINITY, ct);
    if (mask) s = mask->dtype() == mx::bool_ ? mx::where(*mask, s, ninf) : mx::add(s, mx::astype(*mask, ct));
    mx::array j = mx::reshape(mx::arange(0.0, (double)Skv, 1.0, mx::int32), {1, 1, 1, Skv});
    if (causal) s = mx::where(mx::less_equal(j, mx::reshape(mx::arange(0.0, (double)S, 1.0, mx::int32), {1, 1, S, 1})), s, ninf);
    if (kvlen) s = mx::where(mx::less(j, mx::reshape(mx::astype(*kvlen, mx::int32), {B, 1, 1, 1})), s, ninf);
    return s;
  }
  /* [B, 1, S, 1]: whether the query row is within query_seq_len */
  std::optional<mx::array> rows() const {
    if (!qlen) return std::nullopt;
    mx::array i = mx::reshape(mx::arange(0.0, (double)S, 1.0, mx::int32), {1, 1, S, 1});
    return mx::less(i, mx::reshape(mx::astype(*qlen, mx::int32), {B, 1, 1, 1}));
  }
};

Arrays attention(const lathe_node *n, const Arrays &in) {
  Attention a(n, in, 3);
  mx::Dtype lt = a.dt == mx::float64 ? mx::float64 : mx::float32;
  if (a.Skv == 0) /* no keys: every row sees none */
    return {mx::zeros(in[0].shape(), a.dt), mx::full({a.B, a.H, a.S}, scalar_f(-INFINITY, lt))};
  mx::array q = a.bhsd(in[0]), k = a.rep(a.bhsd(in[1])), v = a.rep(a.bhsd(in[2]));
  mx::array s = a.logits(q, k);
  mx::array m = mx::max(s, -1, true);
  mx::array seen = mx::greater(m, scalar_f(-INFINITY, a.ct));
  mx::array ms = mx::where(seen, m, scalar_f(0, a.ct));
  mx::array e = exp_(mx::subtract(s, ms));
  mx::array l = mx::sum(e, -1, true);
  mx::array inv = mx::where(mx::greater(l, scalar_f(0, a.ct)), mx::reciprocal(l), scalar_f(0, a.ct));
  mx::array o = mx::multiply(mx::matmul(e, v), inv);
  mx::array lse = mx::where(mx::greater(l, scalar_f(0, a.ct)), mx::add(ms, mx::log(l)), scalar_f(-INFINITY, a.ct));
  if (auto r = a.rows()) {
    o = mx::where(*r, o, scalar_f(0, a.ct));
    lse = mx::where(*r, lse, scalar_f(-INFINITY, a.ct));
  }
  return {a.layout(o), mx::astype(mx::squeeze(lse, -1), lt)};
}

Arrays attention_vjp(const lathe_node *n, const Arrays &in) {
  /* query, key, value, output, logsumexp, d_output, then the optional operands */
  Attention a(n, in, 6);
  if (a.Skv == 0) return {mx::zeros(in[0].shape(), a.dt), mx::zeros(in[1].shape(), a.dt), mx::zeros(in[2].shape(), a.dt)};
  mx::array q = a.bhsd(in[0]), k = a.rep(a.bhsd(in[1])), v = a.rep(a.bhsd(in[2]));
  mx::array o = a.bhsd(in[3]), dout = a.bhsd(in[5]);
  mx::array lse = mx::expand_dims(mx::astype(in[4], a.ct), -1);
  mx::array s = a.logits(q, k);
  mx::array seen = mx::greater(lse, scalar_f(-INFINITY, a.ct));
  mx::array p = mx::where(seen, exp_(mx::subtract(s, mx::where(seen, lse, scalar_f(0, a.ct)))), scalar_f(0, a.ct));
  if (auto r = a.rows()) p = mx::where(*r, p, scalar_f(0, a.ct));
  mx::array delta = mx::sum(mx::multiply(o, dout), -1, true);
  mx::array dp = mx::matmul(dout, mx::swapaxes(v, -1, -2));
  mx::array ds = mx::multiply(mx::multiply(p, mx::subtract(dp, delta)), scalar_f(a.scale, a.ct));
  mx::array dq = mx::matmul(ds, k);
  mx::array dk = a.unrep(mx::matmul(mx::swapaxes(ds, -1, -2), q));
  mx::array dv = a.unrep(mx::matmul(mx::swapaxes(p, -1, -2), dout));
  return {a.layout(dq), a.layout(dk), a.layout(dv)};
}

}  // namespace

Arrays lower_fused(Env &env, const lathe_node *n, const Arrays &in) {
  switch (n->op) {
    case LATHE_OP_FUSED_SOFTMAX: return {fused_softmax(in[0], (int)lathe_attr_fused_softmax_axis(n))};
    case LATHE_OP_FUSED_GELU: {
      mx::Dtype dt = in[0].dtype();
      return {mx::astype(gelu(mx::astype(in[0], compute_t(dt)), lathe_attr_fused_gelu_exact(n)), dt)};
    }
    case LATHE_OP_FUSED_LAYER_NORM: return {layer_norm(env, n, in)};
    case LATHE_OP_FUSED_DENSE: return {dense(n, in)};
    case LATHE_OP_FUSED_DENSE_VJP: return dense_vjp(n, in);
    case LATHE_OP_FUSED_ACTIVATION: return {fused_activation(n, in)};
    case LATHE_OP_FUSED_ACTIVATION_VJP: return {fused_activation_vjp(n, in)};
    case LATHE_OP_FUSED_ATTENTION_QKV_PROJECTION: return qkv_projection(n, in);
    case LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION: return attention(n, in);
    case LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION_VJP: return attention_vjp(n, in);
    default: MLX_UNIMPL("%s: not implemented on mlx", lathe_op_name(n->op));
  }
}

}  // namespace lathe_mlx
