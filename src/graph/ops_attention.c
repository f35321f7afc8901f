/* ops_attention.c -- builders of the fused attention ops: FusedScaledDotProductAttention, its
 * VJP, and FusedAttentionQKVProjection. Rules follow GoMLX's compute/fused_ops.go and the checks
 * of its Go backend (internal/gobackend/fusedops).
 *
 * SDPA and its VJP attributes: i[0] = layout, i[1] = causal, i[2] = has mask, i[3] = has the
 * two seq-len operands, i[4] = has bias; f[0] = scale as given (0: 1/sqrt(headDim), resolved by
 * the kernel so a dynamic headDim works). Operands: query, key, value, then for the VJP output,
 * logsumexp, dOutput, then the optional mask, querySeqLen, keyValueSeqLen, bias in that order.
 * QKV projection attributes: i[0] = query dim, i[1] = key/value dim, i[2..4] = has biasQ/K/V. */
#include <math.h>

#include "graph.h"

/* Equal sizes; a dynamic axis equals only a dynamic axis of the same name. */
static bool same_dim(const lathe_shape *a, int i, const lathe_shape *b, int j) {
  if (a->dims[i] != b->dims[j]) return false;
  if (a->dims[i] >= 0) return true;
  return a->axis_names[i] && b->axis_names[j] && strcmp(a->axis_names[i], b->axis_names[j]) == 0;
}

typedef struct {
  int seq_axis, heads_axis;
  lathe_shape score; /* [batch, heads, seq, kvLen] of the query's dtype, axis names carried */
} geom;

/* mask / bias: rank 2 is [seq, kvLen]; rank 4 follows the scores, which GoMLX's attention.Core
 * orders by layout for the mask ([batch, heads, seq, kvLen] for BHSD, [batch, seq, heads, kvLen]
 * for BSHD) while the config documents the bias as [batch, heads, seq, kvLen] always. Each axis
 * is 1 (broadcast) or equal. GoMLX's own Go backend reads rank 3 as [batch, seq, kvLen] where
 * broadcasting reads [heads, seq, kvLen], and reads a BSHD rank-4 bias as [batch, seq, heads,
 * kvLen]: where those readings differ the op is UNIMPLEMENTED (GoMLX then falls back to its
 * decomposition, which defines the answer) rather than guessing. */
static lathe_status_t check_broadcast(const char *op, const char *what, const lathe_shape *s, const geom *g,
                                      bool seq_before_heads) {
  char a[LATHE_SHAPE_STR_MAX], b[LATHE_SHAPE_STR_MAX];
  if (s->rank < 2 || s->rank > 4)
    return LATHE_INVALID("%s: %s must have rank 2, 3 or 4, got %s", op, what, lathe_shape_str(s, a, sizeof a));
  lathe_shape want = g->score; /* in the operand's own axis order */
  if (seq_before_heads && s->rank == 4) {
    want.dims[1] = g->score.dims[2], want.axis_names[1] = g->score.axis_names[2];
    want.dims[2] = g->score.dims[1], want.axis_names[2] = g->score.axis_names[1];
  }
  int off = 4 - s->rank;
  bool ambiguous = s->rank == 3 && s->dims[0] != 1 && (same_dim(s, 0, &want, 0) || same_dim(s, 0, &want, 1));
  for (int i = ambiguous ? 1 : 0; i < s->rank; i++)
    if (s->dims[i] != 1 && !same_dim(s, i, &want, off + i))
      return LATHE_INVALID("%s: %s %s does not broadcast to the scores %s (%s): axis %d", op, what,
                           lathe_shape_str(s, a, sizeof a), lathe_shape_str(&want, b, sizeof b),
                           seq_before_heads && s->rank == 4 ? "[batch, seq, heads, kvLen]" : "[batch, heads, seq, kvLen]", i);
  if (ambiguous)
    return LATHE_UNIMPL("%s: a rank-3 %s %s with a leading axis other than 1 is ambiguous ([heads, seq, kvLen] or "
                        "[batch, seq, kvLen]); give it rank 4", op, what, lathe_shape_str(s, a, sizeof a));
  return NULL;
}

static lathe_status_t check_sdpa(const char *op, lathe_value_t q, lathe_value_t k, lathe_value_t v,
                                 lathe_attention_layout layout, const lathe_attention_config *cfg, geom *g) {
  char a[LATHE_SHAPE_STR_MAX], b[LATHE_SHAPE_STR_MAX];
  if (layout != LATHE_ATTENTION_LAYOUT_BHSD && layout != LATHE_ATTENTION_LAYOUT_BSHD)
    return LATHE_INVALID("%s: unknown axes layout %d (BHSD = 0, BSHD = 1)", op, (int)layout);
  const lathe_shape *qs = &q->shape, *ks = &k->shape, *vs = &v->shape;
  if (!lathe_dtype_is_float(qs->dtype))
    return LATHE_INVALID("%s: query must be a float (Float16, BFloat16, Float32, Float64), got %s", op,
                         lathe_dtype_name(qs->dtype));
  if (ks->dtype != qs->dtype || vs->dtype != qs->dtype)
    return LATHE_INVALID("%s: query, key and value must share one dtype, got %s, %s and %s", op,
                         lathe_dtype_name(qs->dtype), lathe_dtype_name(ks->dtype), lathe_dtype_name(vs->dtype));
  if (qs->rank != 4 || ks->rank != 4 || vs->rank != 4)
    return LATHE_INVALID("%s: query, key and value must have rank 4, got ranks %d, %d and %d", op, qs->rank, ks->rank,
                         vs->rank);
  for (int i = 0; i < 4; i++)
    if (!same_dim(ks, i, vs, i))
      return LATHE_INVALID("%s: key %s and value %s must have the same shape", op, lathe_shape_str(ks, a, sizeof a),
                           lathe_shape_str(vs, b, sizeof b));
  int sa = layout == LATHE_ATTENTION_LAYOUT_BHSD ? 2 : 1, ha = 3 - sa;
  g->seq_axis = sa;
  g->heads_axis = ha;
  if (!same_dim(qs, 0, ks, 0))
    return LATHE_INVALID("%s: query has batch %lld, key %lld", op, (long long)qs->dims[0], (long long)ks->dims[0]);
  if (!same_dim(qs, 3, ks, 3))
    return LATHE_INVALID("%s: query has headDim %lld, key and value %lld", op, (long long)qs->dims[3], (long long)ks->dims[3]);
  int64_t h = qs->dims[ha], hkv = ks->dims[ha];
  if (!same_dim(qs, ha, ks, ha) && (h <= 0 || hkv <= 0 || h % hkv != 0))
    return LATHE_INVALID("%s: numHeads (%lld) must be a positive multiple of numKVHeads (%lld) (layout %s, heads axis %d)",
                         op, (long long)h, (long long)hkv, layout == LATHE_ATTENTION_LAYOUT_BHSD ? "BHSD" : "BSHD", ha);
  if (h == 0) return LATHE_INVALID("%s: numHeads must be positive, got 0", op);
  g->score = *qs;
  g->score.dims[1] = qs->dims[ha];
  g->score.axis_names[1] = qs->axis_names[ha];
  g->score.dims[2] = qs->dims[sa];
  g->score.axis_names[2] = qs->axis_names[sa];
  g->score.dims[3] = ks->dims[sa];
  g->score.axis_names[3] = ks->axis_names[sa];
  if (!cfg) return NULL;
  if (!isfinite(cfg->scale)) return LATHE_INVALID("%s: scale must be finite, got %g", op, cfg->scale);
  if (cfg->mask) {
    const lathe_shape *ms = &cfg->mask->shape;
    if (ms->dtype != LATHE_DTYPE_BOOL && ms->dtype != qs->dtype)
      return LATHE_INVALID("%s: mask must be Bool or the query's dtype %s, got %s", op, lathe_dtype_name(qs->dtype),
                           lathe_dtype_name(ms->dtype));
    LATHE_RETURN_IF_ERROR(check_broadcast(op, "mask", ms, g, layout == LATHE_ATTENTION_LAYOUT_BSHD));
  }
  if (cfg->bias) {
    const lathe_shape *bs = &cfg->bias->shape;
    if (bs->dtype != qs->dtype)
      return LATHE_INVALID("%s: bias must have the query's dtype %s, got %s", op, lathe_dtype_name(qs->dtype),
                           lathe_dtype_name(bs->dtype));
    LATHE_RETURN_IF_ERROR(check_broadcast(op, "bias", bs, g, false));
    if (layout == LATHE_ATTENTION_LAYOUT_BSHD && bs->rank == 4 && (bs->dims[1] != 1 || bs->dims[2] != 1))
      return LATHE_UNIMPL("%s: a BSHD rank-4 bias with heads or seq axes is read differently by GoMLX's backends "
                          "([batch, heads, seq, kvLen] or [batch, seq, heads, kvLen]); not fused", op);
  }
  if (!cfg->query_seq_len != !cfg->key_value_seq_len)
    return LATHE_INVALID("%s: QuerySeqLen and KeyValueSeqLen must both be set or both be NULL", op);
  lathe_value_t lens[2] = {cfg->query_seq_len, cfg->key_value_seq_len};
  const char *names[2] = {"QuerySeqLen", "KeyValueSeqLen"};
  for (int i = 0; i < 2 && lens[0]; i++) {
    const lathe_shape *ls = &lens[i]->shape;
    if (ls->dtype != LATHE_DTYPE_INT32 || ls->rank != 1 || !same_dim(ls, 0, qs, 0))
      return LATHE_INVALID("%s: %s must be Int32[batch] with batch %lld, got %s", op, names[i], (long long)qs->dims[0],
                           lathe_shape_str(ls, a, sizeof a));
  }
  return NULL;
}

/* Appends the config's optional operands and sets the shared attributes. */
static int config_operands(const lathe_attention_config *cfg, lathe_value_t *ops, int n) {
  if (!cfg) return n;
  if (cfg->mask) ops[n++] = cfg->mask;
  if (cfg->query_seq_len) ops[n++] = cfg->query_seq_len;
  if (cfg->key_value_seq_len) ops[n++] = cfg->key_value_seq_len;
  if (cfg->bias) ops[n++] = cfg->bias;
  return n;
}

static void config_attrs(lathe_node *n, lathe_attention_layout layout, const lathe_attention_config *cfg) {
  lathe_attr_set_sdpa_layout(n, layout);
  if (!cfg) return;
  lathe_attr_set_sdpa_causal(n, cfg->causal);
  lathe_attr_set_sdpa_has_mask(n, cfg->mask != NULL);
  lathe_attr_set_sdpa_has_seq_lens(n, cfg->query_seq_len != NULL);
  lathe_attr_set_sdpa_has_bias(n, cfg->bias != NULL);
  lathe_attr_set_sdpa_scale(n, cfg->scale);
}

static lathe_shape lse_shape(const geom *g) {
  lathe_shape s = g->score;
  s.rank = 3;
  s.dtype = g->score.dtype == LATHE_DTYPE_FLOAT64 ? LATHE_DTYPE_FLOAT64 : LATHE_DTYPE_FLOAT32;
  s.dims[3] = 0;
  s.axis_names[3] = NULL;
  return s;
}

lathe_status_t lathe_fused_scaled_dot_product_attention(lathe_function_t fn, lathe_value_t query, lathe_value_t key,
                                                        lathe_value_t value, lathe_attention_layout layout,
                                                        const lathe_attention_config *config,
                                                        lathe_value_t *out_values) {
  const char *op = "FusedScaledDotProductAttention";
  lathe_value_t ops[7] = {query, key, value};
  int n_ops = config_operands(config, ops, 3);
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION, ops, n_ops, &n));
  geom g;
  LATHE_RETURN_IF_ERROR(check_sdpa(op, query, key, value, layout, config, &g));
  config_attrs(n, layout, config);
  lathe_shape outs[2] = {query->shape, lse_shape(&g)};
  LATHE_RETURN_IF_ERROR(lathe_node_set_outputs(n, outs, 2));
  return lathe_node_commit_multi(n, out_values);
}

lathe_status_t lathe_fused_scaled_dot_product_attention_vjp(lathe_function_t fn, lathe_value_t query, lathe_value_t key,
                                                            lathe_value_t value, lathe_attention_layout layout,
                                                            const lathe_attention_config *config, lathe_value_t output,
                                                            const lathe_value_t *states, int n_states,
                                                            lathe_value_t d_output, lathe_value_t *out_values) {
  const char *op = "FusedScaledDotProductAttentionVJP";
  if (n_states != 1 || !states)
    return LATHE_INVALID("%s: takes the 1 state FusedScaledDotProductAttention returned (its logsumexp), got %d", op,
                         states ? n_states : 0);
  lathe_value_t ops[10] = {query, key, value, output, states[0], d_output};
  int n_ops = config_operands(config, ops, 6);
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION_VJP, ops, n_ops, &n));
  geom g;
  LATHE_RETURN_IF_ERROR(check_sdpa(op, query, key, value, layout, config, &g));
  char a[LATHE_SHAPE_STR_MAX], b[LATHE_SHAPE_STR_MAX];
  const lathe_value_t like_q[2] = {output, d_output};
  const char *names[2] = {"output", "dOutput"};
  for (int i = 0; i < 2; i++) {
    bool ok = like_q[i]->shape.dtype == query->shape.dtype && like_q[i]->shape.rank == 4;
    for (int d = 0; ok && d < 4; d++) ok = same_dim(&like_q[i]->shape, d, &query->shape, d);
    if (!ok)
      return LATHE_INVALID("%s: %s %s must have the query's shape %s", op, names[i],
                           lathe_shape_str(&like_q[i]->shape, a, sizeof a), lathe_shape_str(&query->shape, b, sizeof b));
  }
  lathe_shape want = lse_shape(&g);
  const lathe_shape *ls = &states[0]->shape;
  bool ok = ls->dtype == want.dtype && ls->rank == 3;
  for (int d = 0; ok && d < 3; d++) ok = same_dim(ls, d, &want, d);
  if (!ok)
    return LATHE_INVALID("%s: state %s is not the logsumexp the forward returns, %s", op, lathe_shape_str(ls, a, sizeof a),
                         lathe_shape_str(&want, b, sizeof b));
  config_attrs(n, layout, config);
  lathe_shape outs[3] = {query->shape, key->shape, value->shape};
  LATHE_RETURN_IF_ERROR(lathe_node_set_outputs(n, outs, 3));
  return lathe_node_commit_multi(n, out_values);
}

lathe_status_t lathe_fused_attention_qkv_projection(lathe_function_t fn, lathe_value_t x, lathe_value_t w_qkv,
                                                    lathe_value_t bias_q, lathe_value_t bias_k, lathe_value_t bias_v,
                                                    int64_t query_dim, int64_t key_value_dim,
                                                    lathe_value_t *out_values) {
  const char *op = "FusedAttentionQKVProjection";
  lathe_value_t ops[5] = {x, w_qkv};
  int n_ops = 2;
  lathe_value_t biases[3] = {bias_q, bias_k, bias_v};
  for (int i = 0; i < 3; i++)
    if (biases[i]) ops[n_ops++] = biases[i];
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_FUSED_ATTENTION_QKV_PROJECTION, ops, n_ops, &n));
  const lathe_shape *xs = &x->shape, *ws = &w_qkv->shape;
  char a[LATHE_SHAPE_STR_MAX], b[LATHE_SHAPE_STR_MAX];
  if (!lathe_dtype_is_float(xs->dtype))
    return LATHE_INVALID("%s: x must be a float (Float16, BFloat16, Float32, Float64), got %s", op,
                         lathe_dtype_name(xs->dtype));
  if (xs->rank < 1) return LATHE_INVALID("%s: x must have rank >= 1 ([batch..., inFeatures]), got a scalar", op);
  if (query_dim <= 0 || key_value_dim <= 0 || key_value_dim > (INT64_MAX / 4) || query_dim > INT64_MAX / 2)
    return LATHE_INVALID("%s: queryDim and keyValueDim must be positive, got %lld and %lld", op, (long long)query_dim,
                         (long long)key_value_dim);
  int64_t total = query_dim + 2 * key_value_dim;
  if (ws->dtype != xs->dtype || ws->rank != 2 || !same_dim(ws, 0, xs, xs->rank - 1) || ws->dims[1] != total)
    return LATHE_INVALID("%s: wQKV %s must be %s[inFeatures = %lld, queryDim + 2*keyValueDim = %lld] for x %s", op,
                         lathe_shape_str(ws, a, sizeof a), lathe_dtype_name(xs->dtype), (long long)xs->dims[xs->rank - 1],
                         (long long)total, lathe_shape_str(xs, b, sizeof b));
  const char *bnames[3] = {"biasQ", "biasK", "biasV"};
  for (int i = 0; i < 3; i++) {
    if (!biases[i]) continue;
    const lathe_shape *bs = &biases[i]->shape;
    int64_t want = i == 0 ? query_dim : key_value_dim;
    if (bs->dtype != xs->dtype || bs->rank != 1 || bs->dims[0] != want)
      return LATHE_INVALID("%s: %s %s must be %s[%lld]", op, bnames[i], lathe_shape_str(bs, a, sizeof a),
                           lathe_dtype_name(xs->dtype), (long long)want);
  }
  lathe_attr_set_fused_attention_qkv_projection_query_dim(n, query_dim);
  lathe_attr_set_fused_attention_qkv_projection_key_value_dim(n, key_value_dim);
  lathe_attr_set_fused_attention_qkv_projection_has_bias_q(n, biases[0] != NULL);
  lathe_attr_set_fused_attention_qkv_projection_has_bias_k(n, biases[1] != NULL);
  lathe_attr_set_fused_attention_qkv_projection_has_bias_v(n, biases[2] != NULL);
  lathe_shape outs[3] = {*xs, *xs, *xs};
  for (int i = 0; i < 3; i++) {
    outs[i].dims[xs->rank - 1] = i == 0 ? query_dim : key_value_dim;
    outs[i].axis_names[xs->rank - 1] = NULL;
  }
  LATHE_RETURN_IF_ERROR(lathe_node_set_outputs(n, outs, 3));
  return lathe_node_commit_multi(n, out_values);
}
