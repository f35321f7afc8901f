/* bad_inputs_activation.c -- FusedActivation, FusedActivationVJP, FusedDense and FusedDenseVJP
 * reject unknown activations, SwiGLU where it cannot go, odd or dynamic last axes for SwiGLU,
 * a missing y or x, and mismatched shapes and dtypes, with a status naming the op; a rejected op
 * leaves no node. */
#include "graph/graph.h"
#include "testing.h"

#define F32 LATHE_DTYPE_FLOAT32
#define ACT "FusedActivation"
#define AVJP "FusedActivationVJP"
#define DVJP "FusedDenseVJP"

TEST(bad_fused_activation) {
  lathe_function_t m;
  lathe_builder_t b = tst_builder("bad_activation", &m);
  lathe_value_t x = tst_param(m, NULL, TST_SHAPE(F32, 3, 4)), x5 = tst_param(m, NULL, TST_SHAPE(F32, 3, 5));
  lathe_value_t xi = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_INT32, 3, 4)), s = tst_param(m, NULL, tst_shape0(F32));
  lathe_value_t x64 = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_FLOAT64, 3, 4)), h = tst_param(m, NULL, TST_SHAPE(F32, 3, 2));
  lathe_shape ds = TST_SHAPE(F32, -1, 4);
  ds.axis_names[0] = "batch";
  lathe_value_t dyn = tst_param(m, "dyn", ds);
  lathe_shape dl = TST_SHAPE(F32, 3, -1);
  dl.axis_names[1] = "features";
  lathe_value_t dynlast = tst_param(m, "dynlast", dl);
  lathe_value_t out = NULL;
  int before = m->n_nodes;

  CHECK_ERR(lathe_fused_activation(m, x, (lathe_activation)12, &out), INVALID_ARGUMENT, ACT ": unknown activation 12");
  CHECK_ERR(lathe_fused_activation(m, x, (lathe_activation)-1, &out), INVALID_ARGUMENT, ACT ": unknown activation -1");
  CHECK_ERR(lathe_fused_activation(m, xi, LATHE_ACTIVATION_RELU, &out), INVALID_ARGUMENT, ACT ": operand must be a float");
  CHECK_ERR(lathe_fused_activation(m, x5, LATHE_ACTIVATION_SWIGLU, &out), INVALID_ARGUMENT,
            ACT ": SWIGLU needs a static, even last axis, x has shape Float32[3,5]");
  CHECK_ERR(lathe_fused_activation(m, s, LATHE_ACTIVATION_SWIGLU, &out), INVALID_ARGUMENT, ACT ": SWIGLU needs");
  CHECK_ERR(lathe_fused_activation(m, dynlast, LATHE_ACTIVATION_SWIGLU, &out), INVALID_ARGUMENT, ACT ": SWIGLU needs");
  CHECK_ERR(lathe_fused_activation(m, NULL, LATHE_ACTIVATION_RELU, &out), INVALID_ARGUMENT, ACT);
  CHECK_ERR(lathe_fused_activation(NULL, x, LATHE_ACTIVATION_RELU, &out), INVALID_ARGUMENT, ACT);

  CHECK_ERR(lathe_fused_activation_vjp(m, x, NULL, x, (lathe_activation)40, &out), INVALID_ARGUMENT,
            AVJP ": unknown activation 40");
  CHECK_ERR(lathe_fused_activation_vjp(m, x, NULL, x, LATHE_ACTIVATION_SILU, &out), INVALID_ARGUMENT,
            AVJP ": activation SILU (3) needs x, which is NULL");
  CHECK_ERR(lathe_fused_activation_vjp(m, h, NULL, h, LATHE_ACTIVATION_SWIGLU, &out), INVALID_ARGUMENT,
            AVJP ": activation SWIGLU (11) needs x");
  CHECK_ERR(lathe_fused_activation_vjp(m, NULL, NULL, x, LATHE_ACTIVATION_RELU, &out), INVALID_ARGUMENT,
            AVJP ": y and x are both NULL");
  CHECK_ERR(lathe_fused_activation_vjp(m, x, NULL, NULL, LATHE_ACTIVATION_RELU, &out), INVALID_ARGUMENT,
            AVJP ": dOutput is NULL");
  CHECK_ERR(lathe_fused_activation_vjp(m, x, NULL, x5, LATHE_ACTIVATION_TANH, &out), INVALID_ARGUMENT,
            AVJP ": dOutput has shape Float32[3,5], y has Float32[3,4]");
  CHECK_ERR(lathe_fused_activation_vjp(m, x5, x, x, LATHE_ACTIVATION_TANH, &out), INVALID_ARGUMENT,
            AVJP ": y has shape Float32[3,5], x has Float32[3,4]");
  CHECK_ERR(lathe_fused_activation_vjp(m, NULL, x, x64, LATHE_ACTIVATION_GELU, &out), INVALID_ARGUMENT,
            AVJP ": dOutput has shape Float64[3,4], x has Float32[3,4]");
  CHECK_ERR(lathe_fused_activation_vjp(m, NULL, xi, xi, LATHE_ACTIVATION_GELU, &out), INVALID_ARGUMENT,
            AVJP ": operand must be a float");
  CHECK_ERR(lathe_fused_activation_vjp(m, NULL, x5, h, LATHE_ACTIVATION_SWIGLU, &out), INVALID_ARGUMENT,
            AVJP ": SWIGLU needs a static, even last axis, x has shape Float32[3,5]");
  CHECK_ERR(lathe_fused_activation_vjp(m, NULL, x, x, LATHE_ACTIVATION_SWIGLU, &out), INVALID_ARGUMENT,
            AVJP ": dOutput has shape Float32[3,4], x with its last axis halved has Float32[3,2]");
  CHECK_ERR(lathe_fused_activation_vjp(m, NULL, x, dyn, LATHE_ACTIVATION_GELU, &out), INVALID_ARGUMENT,
            AVJP ": dOutput has shape");
  CHECK(m->n_nodes == before, "rejected activations left %d nodes", m->n_nodes - before);

  /* the good forms build */
  CHECK_OK(lathe_fused_activation(m, x, LATHE_ACTIVATION_SWIGLU, &out));
  CHECK(out && out->shape.dims[1] == 2, "SwiGLU halves the last axis");
  CHECK_OK(lathe_fused_activation(m, dyn, LATHE_ACTIVATION_SWIGLU, &out));
  CHECK_OK(lathe_fused_activation_vjp(m, NULL, x, h, LATHE_ACTIVATION_SWIGLU, &out));
  CHECK_OK(lathe_fused_activation_vjp(m, x, NULL, x, LATHE_ACTIVATION_SELU, &out));
  CHECK_OK(lathe_fused_activation_vjp(m, NULL, x, x, LATHE_ACTIVATION_SELU, &out));
  CHECK_OK(lathe_fused_activation_vjp(m, x, x, x, LATHE_ACTIVATION_GELU_APPROXIMATE, &out));
  lathe_builder_free(b);
}

TEST(bad_fused_dense_vjp) {
  lathe_function_t m;
  lathe_builder_t b = tst_builder("bad_dense_vjp", &m);
  lathe_value_t x = tst_param(m, NULL, TST_SHAPE(F32, 3, 4)), w = tst_param(m, NULL, TST_SHAPE(F32, 4, 5));
  lathe_value_t bias = tst_param(m, NULL, TST_SHAPE(F32, 5)), y = tst_param(m, NULL, TST_SHAPE(F32, 3, 5));
  lathe_value_t y6 = tst_param(m, NULL, TST_SHAPE(F32, 3, 6)), y64 = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_FLOAT64, 3, 5));
  lathe_value_t w6 = tst_param(m, NULL, TST_SHAPE(F32, 6, 5));
  lathe_value_t outs[3] = {0};
  int before = m->n_nodes;
  const lathe_dense_layout io = LATHE_DENSE_INPUT_OUTPUTS;

  CHECK_ERR(lathe_fused_dense_vjp(m, x, w, bias, y, y, (lathe_activation)77, io, outs), INVALID_ARGUMENT,
            DVJP ": unknown activation 77");
  CHECK_ERR(lathe_fused_dense_vjp(m, x, w, bias, y, y, LATHE_ACTIVATION_SWIGLU, io, outs), INVALID_ARGUMENT,
            DVJP ": activation SWIGLU (11) changes the output's last axis");
  CHECK_ERR(lathe_fused_dense_vjp(m, x, w, bias, y, y, LATHE_ACTIVATION_GELU, io, outs), INVALID_ARGUMENT,
            DVJP ": activation GELU (1) needs the pre-activation input");
  CHECK_ERR(lathe_fused_dense_vjp(m, x, w, bias, y, y, LATHE_ACTIVATION_HARD_SWISH, io, outs), INVALID_ARGUMENT,
            DVJP ": activation HARD_SWISH (4) needs the pre-activation input");
  CHECK_ERR(lathe_fused_dense_vjp(m, x, w, bias, y, y, LATHE_ACTIVATION_RELU, (lathe_dense_layout)3, outs),
            INVALID_ARGUMENT, DVJP ": unknown weight layout 3");
  CHECK_ERR(lathe_fused_dense_vjp(m, x, w6, bias, y, y, LATHE_ACTIVATION_RELU, io, outs), INVALID_ARGUMENT,
            DVJP ": x has 4 input features, weight 6");
  CHECK_ERR(lathe_fused_dense_vjp(m, x, w, y, y, y, LATHE_ACTIVATION_RELU, io, outs), INVALID_ARGUMENT,
            DVJP ": bias has shape Float32[3,5], expected the output features");
  CHECK_ERR(lathe_fused_dense_vjp(m, x, w, bias, y6, y, LATHE_ACTIVATION_RELU, io, outs), INVALID_ARGUMENT,
            DVJP ": y has shape Float32[3,6], the forward result has Float32[3,5]");
  CHECK_ERR(lathe_fused_dense_vjp(m, x, w, bias, y, y64, LATHE_ACTIVATION_RELU, io, outs), INVALID_ARGUMENT,
            DVJP ": dOutput has shape Float64[3,5], the forward result has Float32[3,5]");
  CHECK_ERR(lathe_fused_dense_vjp(m, x, w, bias, NULL, y, LATHE_ACTIVATION_RELU, io, outs), INVALID_ARGUMENT,
            DVJP ": y is NULL");
  CHECK_ERR(lathe_fused_dense_vjp(m, x, w, bias, y, NULL, LATHE_ACTIVATION_RELU, io, outs), INVALID_ARGUMENT,
            DVJP ": dOutput is NULL");
  CHECK_ERR(lathe_fused_dense_vjp(m, NULL, w, bias, y, y, LATHE_ACTIVATION_RELU, io, outs), INVALID_ARGUMENT, DVJP);
  CHECK_ERR(lathe_fused_dense_vjp(m, x, w, bias, y, y, LATHE_ACTIVATION_RELU, io, NULL), INVALID_ARGUMENT, DVJP);
  CHECK_ERR(lathe_fused_dense(m, x, w, bias, LATHE_ACTIVATION_SWIGLU, io, &outs[0]), INVALID_ARGUMENT,
            "FusedDense: activation SWIGLU (11) changes the output's last axis");
  CHECK_ERR(lathe_fused_dense(m, x, w, bias, (lathe_activation)12, io, &outs[0]), INVALID_ARGUMENT,
            "FusedDense: unknown activation 12");
  CHECK(m->n_nodes == before, "rejected FusedDenseVJP left %d nodes", m->n_nodes - before);

  CHECK_OK(lathe_fused_dense_vjp(m, x, w, NULL, y, y, LATHE_ACTIVATION_LEAKY_RELU, io, outs));
  CHECK(outs[0] && outs[1] && !outs[2], "no bias: out[2] is NULL");
  CHECK_OK(lathe_fused_dense_vjp(m, x, w, bias, y, y, LATHE_ACTIVATION_HARD_SIGMOID, io, outs));
  CHECK(outs[2] && outs[2]->shape.dims[0] == 5, "dBias has bias's shape");
  lathe_builder_free(b);
}
