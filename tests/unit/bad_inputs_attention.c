/* bad_inputs_attention.c -- FusedScaledDotProductAttention, its VJP and
 * FusedAttentionQKVProjection reject bad dtypes, shapes, configs and states with a status that
 * names the op and the mismatch (UNIMPLEMENTED where GoMLX's backends disagree on a meaning),
 * and a rejected op leaves no node. */
#include "graph/graph.h"
#include "testing.h"

#define F32 LATHE_DTYPE_FLOAT32
#define SDPA "FusedScaledDotProductAttention"
#define VJP "FusedScaledDotProductAttentionVJP"
#define QKV "FusedAttentionQKVProjection"

TEST(bad_sdpa) {
  lathe_function_t m;
  lathe_builder_t b = tst_builder("bad_sdpa", &m);
  /* BHSD: batch 2, 4 query heads, 2 kv heads, seq 5, kvLen 6, headDim 3 */
  lathe_value_t q = tst_param(m, NULL, TST_SHAPE(F32, 2, 4, 5, 3)), k = tst_param(m, NULL, TST_SHAPE(F32, 2, 2, 6, 3));
  lathe_value_t v = tst_param(m, NULL, TST_SHAPE(F32, 2, 2, 6, 3));
  lathe_value_t qi = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_INT32, 2, 4, 5, 3)), k64 = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_FLOAT64, 2, 2, 6, 3));
  lathe_value_t q3 = tst_param(m, NULL, TST_SHAPE(F32, 2, 5, 3)), v7 = tst_param(m, NULL, TST_SHAPE(F32, 2, 2, 7, 3));
  lathe_value_t qb3 = tst_param(m, NULL, TST_SHAPE(F32, 3, 4, 5, 3)), qd4 = tst_param(m, NULL, TST_SHAPE(F32, 2, 4, 5, 4));
  lathe_value_t qh3 = tst_param(m, NULL, TST_SHAPE(F32, 2, 3, 5, 3));
  lathe_value_t mi = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_INT32, 5, 6)), m56 = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_BOOL, 5, 7));
  lathe_value_t m1 = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_BOOL, 6)), m3 = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_BOOL, 2, 5, 6));
  lathe_value_t b64 = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_FLOAT64, 5, 6)), b4 = tst_param(m, NULL, TST_SHAPE(F32, 1, 4, 5, 6));
  lathe_value_t len = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_INT32, 2)), len64 = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_INT64, 2));
  lathe_value_t len3 = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_INT32, 3));
  lathe_value_t qs = tst_param(m, NULL, TST_SHAPE(F32, 2, 5, 4, 3)), ks = tst_param(m, NULL, TST_SHAPE(F32, 2, 6, 2, 3));
  lathe_value_t outs[3] = {0};
  int before = m->n_nodes;

  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, q, k, v, (lathe_attention_layout)7, NULL, outs), INVALID_ARGUMENT,
            SDPA ": unknown axes layout 7");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, qi, k, v, 0, NULL, outs), INVALID_ARGUMENT,
            SDPA ": query must be a float");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, q, k64, v, 0, NULL, outs), INVALID_ARGUMENT,
            SDPA ": query, key and value must share one dtype, got Float32, Float64 and Float32");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, q3, k, v, 0, NULL, outs), INVALID_ARGUMENT,
            SDPA ": query, key and value must have rank 4, got ranks 3, 4 and 4");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, q, k, v7, 0, NULL, outs), INVALID_ARGUMENT,
            SDPA ": key Float32[2,2,6,3] and value Float32[2,2,7,3] must have the same shape");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, qb3, k, v, 0, NULL, outs), INVALID_ARGUMENT,
            SDPA ": query has batch 3, key 2");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, qd4, k, v, 0, NULL, outs), INVALID_ARGUMENT,
            SDPA ": query has headDim 4, key and value 3");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, qh3, k, v, 0, NULL, outs), INVALID_ARGUMENT,
            SDPA ": numHeads (3) must be a positive multiple of numKVHeads (2)");
  /* the same tensors read as BSHD: heads are axis 2 (5 and 6), not a multiple */
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, q, k, v, LATHE_ATTENTION_LAYOUT_BSHD, NULL, outs), INVALID_ARGUMENT,
            SDPA ": numHeads (5) must be a positive multiple of numKVHeads (6) (layout BSHD");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, q, k, v, 0, &(lathe_attention_config){.scale = NAN}, outs),
            INVALID_ARGUMENT, SDPA ": scale must be finite");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, q, k, v, 0, &(lathe_attention_config){.mask = mi}, outs),
            INVALID_ARGUMENT, SDPA ": mask must be Bool or the query's dtype Float32, got Int32");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, q, k, v, 0, &(lathe_attention_config){.mask = m56}, outs),
            INVALID_ARGUMENT, SDPA ": mask Bool[5,7] does not broadcast to the scores");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, q, k, v, 0, &(lathe_attention_config){.mask = m1}, outs),
            INVALID_ARGUMENT, SDPA ": mask must have rank 2, 3 or 4, got Bool[6]");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, q, k, v, 0, &(lathe_attention_config){.bias = b64}, outs),
            INVALID_ARGUMENT, SDPA ": bias must have the query's dtype Float32, got Float64");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, q, k, v, 0, &(lathe_attention_config){.query_seq_len = len}, outs),
            INVALID_ARGUMENT, SDPA ": QuerySeqLen and KeyValueSeqLen must both be set or both be NULL");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(
                m, q, k, v, 0, &(lathe_attention_config){.query_seq_len = len64, .key_value_seq_len = len}, outs),
            INVALID_ARGUMENT, SDPA ": QuerySeqLen must be Int32[batch] with batch 2, got Int64[2]");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(
                m, q, k, v, 0, &(lathe_attention_config){.query_seq_len = len, .key_value_seq_len = len3}, outs),
            INVALID_ARGUMENT, SDPA ": KeyValueSeqLen must be Int32[batch] with batch 2, got Int32[3]");
  /* readings on which GoMLX's backends disagree: not fused */
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, q, k, v, 0, &(lathe_attention_config){.mask = m3}, outs),
            UNIMPLEMENTED, SDPA ": a rank-3 mask Bool[2,5,6] with a leading axis other than 1 is ambiguous");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, qs, ks, ks, LATHE_ATTENTION_LAYOUT_BSHD,
                                                     &(lathe_attention_config){.bias = b4}, outs),
            UNIMPLEMENTED, SDPA ": a BSHD rank-4 bias with heads or seq axes");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, NULL, k, v, 0, NULL, outs), INVALID_ARGUMENT, SDPA);
  CHECK_ERR(lathe_fused_scaled_dot_product_attention(m, q, k, v, 0, NULL, NULL), INVALID_ARGUMENT, SDPA ": output array is NULL");
  CHECK(m->n_nodes == before, "rejected ops left %d nodes", m->n_nodes - before);

  /* the good call, then its VJP with bad states and gradients */
  lathe_value_t fw[2];
  CHECK_OK(lathe_fused_scaled_dot_product_attention(m, q, k, v, 0, &(lathe_attention_config){.causal = true}, fw));
  lathe_shape lse;
  CHECK_OK(lathe_value_shape(fw[1], &lse));
  lathe_shape want_lse = TST_SHAPE(F32, 2, 4, 5);
  CHECK(lathe_shape_equal(&lse, &want_lse), "logsumexp shape");
  lathe_value_t lse64 = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_FLOAT64, 2, 4, 5)), lse_bad = tst_param(m, NULL, TST_SHAPE(F32, 2, 2, 5));
  lathe_value_t states2[2] = {fw[1], fw[1]};
  before = m->n_nodes;
  CHECK_ERR(lathe_fused_scaled_dot_product_attention_vjp(m, q, k, v, 0, NULL, fw[0], states2, 2, q, outs), INVALID_ARGUMENT,
            VJP ": takes the 1 state FusedScaledDotProductAttention returned (its logsumexp), got 2");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention_vjp(m, q, k, v, 0, NULL, fw[0], NULL, 1, q, outs), INVALID_ARGUMENT,
            VJP ": takes the 1 state");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention_vjp(m, q, k, v, 0, NULL, fw[0], &lse64, 1, q, outs), INVALID_ARGUMENT,
            VJP ": state Float64[2,4,5] is not the logsumexp the forward returns, Float32[2,4,5]");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention_vjp(m, q, k, v, 0, NULL, fw[0], &lse_bad, 1, q, outs), INVALID_ARGUMENT,
            VJP ": state Float32[2,2,5] is not the logsumexp");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention_vjp(m, q, k, v, 0, NULL, fw[0], &fw[1], 1, qd4, outs), INVALID_ARGUMENT,
            VJP ": dOutput Float32[2,4,5,4] must have the query's shape Float32[2,4,5,3]");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention_vjp(m, q, k, v, 0, NULL, qi, &fw[1], 1, q, outs), INVALID_ARGUMENT,
            VJP ": output Int32[2,4,5,3] must have the query's shape");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention_vjp(m, q, k, v7, 0, NULL, fw[0], &fw[1], 1, q, outs), INVALID_ARGUMENT,
            VJP ": key Float32[2,2,6,3] and value Float32[2,2,7,3] must have the same shape");
  CHECK_ERR(lathe_fused_scaled_dot_product_attention_vjp(m, q, k, v, 0, NULL, fw[0], &fw[1], 1, NULL, outs), INVALID_ARGUMENT,
            VJP);
  CHECK(m->n_nodes == before, "rejected VJPs left %d nodes", m->n_nodes - before);
  CHECK_OK(lathe_fused_scaled_dot_product_attention_vjp(m, q, k, v, 0, &(lathe_attention_config){.causal = true}, fw[0], &fw[1],
                                                        1, q, outs));
  lathe_builder_free(b);
}

TEST(bad_qkv_projection) {
  lathe_function_t m;
  lathe_builder_t b = tst_builder("bad_qkv", &m);
  lathe_value_t x = tst_param(m, NULL, TST_SHAPE(F32, 3, 5)), w = tst_param(m, NULL, TST_SHAPE(F32, 5, 10)), xi = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_INT32, 3, 5));
  lathe_value_t w4 = tst_param(m, NULL, TST_SHAPE(F32, 4, 10)), w9 = tst_param(m, NULL, TST_SHAPE(F32, 5, 9)), w3 = tst_param(m, NULL, TST_SHAPE(F32, 5, 10, 1));
  lathe_value_t s = tst_param(m, NULL, tst_shape0(F32)), bq = tst_param(m, NULL, TST_SHAPE(F32, 4)), bk = tst_param(m, NULL, TST_SHAPE(F32, 3));
  lathe_value_t bk64 = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_FLOAT64, 3)), outs[3];
  int before = m->n_nodes;
  CHECK_ERR(lathe_fused_attention_qkv_projection(m, xi, w, NULL, NULL, NULL, 4, 3, outs), INVALID_ARGUMENT,
            QKV ": x must be a float");
  CHECK_ERR(lathe_fused_attention_qkv_projection(m, s, w, NULL, NULL, NULL, 4, 3, outs), INVALID_ARGUMENT,
            QKV ": x must have rank >= 1");
  CHECK_ERR(lathe_fused_attention_qkv_projection(m, x, w4, NULL, NULL, NULL, 4, 3, outs), INVALID_ARGUMENT,
            QKV ": wQKV Float32[4,10] must be Float32[inFeatures = 5, queryDim + 2*keyValueDim = 10]");
  CHECK_ERR(lathe_fused_attention_qkv_projection(m, x, w9, NULL, NULL, NULL, 4, 3, outs), INVALID_ARGUMENT,
            QKV ": wQKV Float32[5,9] must be");
  CHECK_ERR(lathe_fused_attention_qkv_projection(m, x, w3, NULL, NULL, NULL, 4, 3, outs), INVALID_ARGUMENT,
            QKV ": wQKV Float32[5,10,1] must be");
  CHECK_ERR(lathe_fused_attention_qkv_projection(m, x, w, NULL, NULL, NULL, 0, 5, outs), INVALID_ARGUMENT,
            QKV ": queryDim and keyValueDim must be positive, got 0 and 5");
  CHECK_ERR(lathe_fused_attention_qkv_projection(m, x, w, NULL, NULL, NULL, 12, -1, outs), INVALID_ARGUMENT,
            QKV ": queryDim and keyValueDim must be positive");
  CHECK_ERR(lathe_fused_attention_qkv_projection(m, x, w, bk, NULL, NULL, 4, 3, outs), INVALID_ARGUMENT,
            QKV ": biasQ Float32[3] must be Float32[4]");
  CHECK_ERR(lathe_fused_attention_qkv_projection(m, x, w, bq, bq, NULL, 4, 3, outs), INVALID_ARGUMENT,
            QKV ": biasK Float32[4] must be Float32[3]");
  CHECK_ERR(lathe_fused_attention_qkv_projection(m, x, w, NULL, NULL, bk64, 4, 3, outs), INVALID_ARGUMENT,
            QKV ": biasV Float64[3] must be Float32[3]");
  CHECK_ERR(lathe_fused_attention_qkv_projection(m, x, NULL, NULL, NULL, NULL, 4, 3, outs), INVALID_ARGUMENT, QKV);
  CHECK_ERR(lathe_fused_attention_qkv_projection(m, x, w, NULL, NULL, NULL, 4, 3, NULL), INVALID_ARGUMENT,
            QKV ": output array is NULL");
  CHECK(m->n_nodes == before, "rejected ops left %d nodes", m->n_nodes - before);
  CHECK_OK(lathe_fused_attention_qkv_projection(m, x, w, bq, bk, bk, 4, 3, outs));
  lathe_builder_free(b);
}

TEST(attention_capabilities) {
  const lathe_op ops[3] = {LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION, LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION_VJP,
                           LATHE_OP_FUSED_ATTENTION_QKV_PROJECTION};
  for (int o = 0; o < 3; o++)
    for (int d = 0; d < tst_n_all_dtypes; d++) {
      lathe_dtype dt = tst_all_dtypes[d];
      bool want = dt == F32 || dt == LATHE_DTYPE_FLOAT64 || dt == LATHE_DTYPE_FLOAT16 || dt == LATHE_DTYPE_BFLOAT16;
      CHECK(lathe_backend_supports_op(tst_backend(), ops[o], dt) == want, "%s on %s: supports_op should be %d",
            lathe_op_name(ops[o]), lathe_dtype_name(dt), want);
    }
}
