/* bad_inputs_quantized.c -- FusedQuantizedDense and QuantizedEmbeddingLookup reject bad
 * dtypes, shapes, schemes and attributes with a status naming the op and the mismatch, and a
 * rejected op leaves no node. */
#include "graph/graph.h"
#include "testing.h"

#define F32 LATHE_DTYPE_FLOAT32
#define U8 LATHE_DTYPE_UINT8

TEST(bad_fused_quantized_dense) {
  lathe_function_t m;
  lathe_builder_t b = tst_builder("bad_qdense", &m);
  lathe_value_t x = tst_param(m, NULL, TST_SHAPE(F32, 3, 8)), x64 = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_FLOAT64, 3, 8));
  lathe_value_t xs = tst_param(m, NULL, tst_shape0(F32)), x32 = tst_param(m, NULL, TST_SHAPE(F32, 2, 32));
  lathe_value_t w = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_INT8, 8, 6)), wf = tst_param(m, NULL, TST_SHAPE(F32, 8, 6));
  lathe_value_t w16 = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_INT16, 8, 6)), wk = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_INT4, 7, 6));
  lathe_value_t s = tst_param(m, NULL, TST_SHAPE(F32, 8, 2)), sbad = tst_param(m, NULL, TST_SHAPE(F32, 8, 3));
  lathe_value_t si = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_INT32, 8, 2)), s16 = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_FLOAT16, 8, 2));
  lathe_value_t bias = tst_param(m, NULL, TST_SHAPE(F32, 6)), bias_bad = tst_param(m, NULL, TST_SHAPE(F32, 5));
  lathe_value_t g = tst_param(m, NULL, TST_SHAPE(U8, 6, 34)), g_odd = tst_param(m, NULL, TST_SHAPE(U8, 6, 35)), g_i8 = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_INT8, 6, 34));
  lathe_quantization lin = {.scheme = LATHE_QUANT_LINEAR, .block_axis = 1, .block_size = 3};
  lathe_quantization nf4 = {.scheme = LATHE_QUANT_NF4, .block_axis = 1, .block_size = 3};
  lathe_quantization q80 = {.scheme = LATHE_QUANT_GGML, .ggml_type = LATHE_GGML_Q8_0};
  lathe_value_t out = NULL;
  int before = m->n_nodes;
  const lathe_activation none = LATHE_ACTIVATION_NONE;

  CHECK_ERR(lathe_fused_quantized_dense(m, x, w, NULL, s, NULL, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: quantization is NULL");
  CHECK_ERR(lathe_fused_quantized_dense(m, x64, w, &lin, s, NULL, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: x must be Float32, got Float64");
  CHECK_ERR(lathe_fused_quantized_dense(m, xs, w, &lin, s, NULL, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: x must have rank >= 1");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, w, &lin, s, NULL, NULL, (lathe_activation)99, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: unknown activation 99");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, w, &lin, s, NULL, NULL, LATHE_ACTIVATION_SWIGLU, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: activation SWIGLU (11) changes the output's last axis");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, w, &(lathe_quantization){.scheme = (lathe_quant_scheme)5}, s, NULL, NULL,
                                        none, &out),
            INVALID_ARGUMENT, "FusedQuantizedDense: unknown quantization scheme 5");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, wf, &lin, s, NULL, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: Linear weights must be Int2, Int4, Int8, Uint2, Uint4 or Uint8, got Float32");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, w16, &nf4, s, NULL, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: NF4 weights must be");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, wk, &lin, s, NULL, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: Linear weights must be [8, N] (K from x), got Int4[7,6]");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, w, &(lathe_quantization){LATHE_QUANT_LINEAR, 0, 0, 3}, s, NULL, NULL, none,
                                        &out),
            INVALID_ARGUMENT, "FusedQuantizedDense: block_axis must be 1 (the output features), got 0");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, w, &(lathe_quantization){LATHE_QUANT_LINEAR, 0, 1, 0}, s, NULL, NULL, none,
                                        &out),
            INVALID_ARGUMENT, "FusedQuantizedDense: block_size must be >= 1, got 0");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, w, &lin, NULL, NULL, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: the Linear scheme needs a scale");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, w, &lin, sbad, NULL, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: scale must be [8, 2] (K, ceil(N / block_size)), got Float32[8,3]");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, w, &lin, si, NULL, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: scale must be Float32, Float16 or BFloat16, got Int32");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, w, &nf4, s, s, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: the NF4 scheme takes no zero point");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, w, &lin, s, sbad, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: zero_point must be [8, 2]");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, w, &lin, s, s16, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: zero_point has dtype Float16, scale has Float32");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, w, &lin, s, NULL, bias_bad, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: bias must be Float32 [6] (N), got Float32[5]");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, w, &lin, s, NULL, s, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: bias must be Float32 [6]");
  /* GGML */
  CHECK_ERR(lathe_fused_quantized_dense(m, x32, g_i8, &q80, NULL, NULL, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: GGML weights must be Uint8 [N, bytes per row], got Int8[6,34]");
  CHECK_ERR(lathe_fused_quantized_dense(m, x32, g_odd, &q80, NULL, NULL, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: 35 bytes per row is not a multiple of the 34 bytes of a Q8_0 block");
  CHECK_ERR(lathe_fused_quantized_dense(m, x, g, &q80, NULL, NULL, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: x has K=8 input features, the Q8_0 weights hold 32 per row");
  CHECK_ERR(lathe_fused_quantized_dense(m, x32, g, &q80, s, NULL, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: the GGML scheme keeps its scales in the blocks");
  CHECK_ERR(lathe_fused_quantized_dense(m, x32, g, &(lathe_quantization){.scheme = LATHE_QUANT_GGML, .ggml_type = 8}, NULL,
                                        NULL, NULL, none, &out),
            INVALID_ARGUMENT, "FusedQuantizedDense: unknown GGML type 8");
  CHECK_ERR(lathe_fused_quantized_dense(m, x32, g, &q80, NULL, NULL, bias_bad, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense: bias must be Float32 [6] (N)");
  /* handles */
  CHECK_ERR(lathe_fused_quantized_dense(m, NULL, w, &lin, s, NULL, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense");
  CHECK_ERR(lathe_fused_quantized_dense(NULL, x, w, &lin, s, NULL, NULL, none, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense");
  CHECK(m->n_nodes == before, "rejected FusedQuantizedDense left %d nodes", m->n_nodes - before);

  /* the good forms still build */
  CHECK_OK(lathe_fused_quantized_dense(m, x, w, &lin, s, s, bias, LATHE_ACTIVATION_GELU, &out));
  CHECK_OK(lathe_fused_quantized_dense(m, x, w, &nf4, s16, NULL, NULL, none, &out));
  CHECK_OK(lathe_fused_quantized_dense(m, x32, g, &q80, NULL, NULL, bias, none, &out));
  lathe_builder_free(b);
}

TEST(bad_quantized_embedding_lookup) {
  lathe_function_t m;
  lathe_builder_t b = tst_builder("bad_qlookup", &m);
  lathe_value_t d = tst_param(m, NULL, TST_SHAPE(U8, 10, 36)), d_odd = tst_param(m, NULL, TST_SHAPE(U8, 10, 35));
  lathe_value_t d_f = tst_param(m, NULL, TST_SHAPE(F32, 10, 36)), d_r3 = tst_param(m, NULL, TST_SHAPE(U8, 2, 10, 36));
  lathe_value_t ix = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_INT32, 4, 1)), ix_f = tst_param(m, NULL, TST_SHAPE(F32, 4, 1));
  lathe_value_t ix_2 = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_INT32, 4, 2)), ix_s = tst_param(m, NULL, tst_shape0(LATHE_DTYPE_INT32));
  lathe_quantization q40 = {.scheme = LATHE_QUANT_GGML, .ggml_type = LATHE_GGML_Q4_0};
  lathe_value_t out = NULL;
  int before = m->n_nodes;

  CHECK_ERR(lathe_quantized_embedding_lookup(m, d, ix, NULL, &out), INVALID_ARGUMENT,
            "QuantizedEmbeddingLookup: quantization is NULL");
  CHECK_ERR(lathe_quantized_embedding_lookup(m, d, ix, &(lathe_quantization){.scheme = LATHE_QUANT_LINEAR}, &out),
            UNIMPLEMENTED, "QuantizedEmbeddingLookup: only the GGML scheme is supported, got Linear");
  CHECK_ERR(lathe_quantized_embedding_lookup(m, d, ix, &(lathe_quantization){.scheme = LATHE_QUANT_NF4}, &out),
            UNIMPLEMENTED, "got NF4");
  CHECK_ERR(lathe_quantized_embedding_lookup(m, d, ix, &(lathe_quantization){.scheme = (lathe_quant_scheme)-1}, &out),
            INVALID_ARGUMENT, "QuantizedEmbeddingLookup: unknown quantization scheme -1");
  CHECK_ERR(lathe_quantized_embedding_lookup(m, d_f, ix, &q40, &out), INVALID_ARGUMENT,
            "QuantizedEmbeddingLookup: data must be Uint8 [vocab, bytes per row], got Float32[10,36]");
  CHECK_ERR(lathe_quantized_embedding_lookup(m, d_r3, ix, &q40, &out), INVALID_ARGUMENT,
            "QuantizedEmbeddingLookup: data must be Uint8 [vocab, bytes per row], got Uint8[2,10,36]");
  CHECK_ERR(lathe_quantized_embedding_lookup(m, d, ix_f, &q40, &out), INVALID_ARGUMENT,
            "QuantizedEmbeddingLookup: indices must have an integer dtype, got Float32");
  CHECK_ERR(lathe_quantized_embedding_lookup(m, d, ix_2, &q40, &out), INVALID_ARGUMENT,
            "QuantizedEmbeddingLookup: indices' last axis must have size 1, got Int32[4,2]");
  CHECK_ERR(lathe_quantized_embedding_lookup(m, d, ix_s, &q40, &out), INVALID_ARGUMENT,
            "QuantizedEmbeddingLookup: indices' last axis must have size 1");
  CHECK_ERR(lathe_quantized_embedding_lookup(m, d_odd, ix, &q40, &out), INVALID_ARGUMENT,
            "QuantizedEmbeddingLookup: 35 bytes per row is not a multiple of the 18 bytes of a Q4_0 block");
  CHECK_ERR(lathe_quantized_embedding_lookup(m, d, ix, &(lathe_quantization){.scheme = LATHE_QUANT_GGML, .ggml_type = -3},
                                             &out),
            INVALID_ARGUMENT, "QuantizedEmbeddingLookup: unknown GGML type -3");
  CHECK_ERR(lathe_quantized_embedding_lookup(m, d, NULL, &q40, &out), INVALID_ARGUMENT, "QuantizedEmbeddingLookup");
  CHECK(m->n_nodes == before, "rejected QuantizedEmbeddingLookup left %d nodes", m->n_nodes - before);

  CHECK_OK(lathe_quantized_embedding_lookup(m, d, ix, &q40, &out));
  lathe_shape ys;
  CHECK_OK(lathe_value_shape(out, &ys));
  CHECK(ys.dtype == F32 && ys.rank == 2 && ys.dims[0] == 4 && ys.dims[1] == 64, "lookup result shape Float32[4,64]");
  lathe_builder_free(b);
}
