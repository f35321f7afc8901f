/* bad_inputs_conv.c -- ConvGeneral, ReduceWindow and SelectAndScatter* reject bad shapes, axes,
 * dtypes and attributes with INVALID_ARGUMENT naming the op, and leave no node behind. */
#include "graph/graph.h"
#include "testing.h"

typedef struct fixture {
  lathe_builder_t b;
  lathe_function_t fn;
} fixture;

static lathe_value_t param(fixture *f, lathe_shape s) { return tst_param(f->fn, NULL, s); }

static fixture open_fixture(void) {
  fixture f;
  f.b = tst_builder("bad", &f.fn);
  return f;
}

/* NHWC input / HWIO kernel axes. */
static const int nhwc_sp[2] = {1, 2}, hwio_sp[2] = {0, 1};
static lathe_conv_axes nhwc(void) { return (lathe_conv_axes){0, 3, nhwc_sp, 2, 2, 3, hwio_sp, 2, 0, 3, nhwc_sp, 2}; }

#define F32 LATHE_DTYPE_FLOAT32

TEST(bad_conv_shapes_and_axes) {
  fixture f = open_fixture();
  lathe_value_t x = param(&f, TST_SHAPE(F32, 2, 5, 5, 3)), k = param(&f, TST_SHAPE(F32, 3, 3, 3, 4)), y;
  lathe_conv_axes ax = nhwc();
  int before = f.fn->n_nodes;

  lathe_value_t x2 = param(&f, TST_SHAPE(F32, 5, 3));
  before = f.fn->n_nodes;
  CHECK_ERR(lathe_conv_general(f.fn, x2, k, &ax, NULL, &y), INVALID_ARGUMENT, "ConvGeneral: input needs rank >= 3");
  lathe_value_t k3 = param(&f, TST_SHAPE(F32, 3, 3, 4));
  before = f.fn->n_nodes;
  CHECK_ERR(lathe_conv_general(f.fn, x, k3, &ax, NULL, &y), INVALID_ARGUMENT, "different ranks");
  lathe_value_t kd = param(&f, TST_SHAPE(LATHE_DTYPE_FLOAT64, 3, 3, 3, 4));
  before = f.fn->n_nodes;
  CHECK_ERR(lathe_conv_general(f.fn, x, kd, &ax, NULL, &y), INVALID_ARGUMENT, "ConvGeneral: input dtype Float32");
  lathe_value_t xb = param(&f, TST_SHAPE(LATHE_DTYPE_BOOL, 2, 5, 5, 3)), kb = param(&f, TST_SHAPE(LATHE_DTYPE_BOOL, 3, 3, 3, 4));
  before = f.fn->n_nodes;
  CHECK_ERR(lathe_conv_general(f.fn, xb, kb, &ax, NULL, &y), INVALID_ARGUMENT, "ConvGeneral: dtype Bool");
  CHECK_ERR(lathe_conv_general(f.fn, x, k, NULL, NULL, &y), INVALID_ARGUMENT, "ConvGeneral: axes");

  int dup[2] = {1, 1};
  lathe_conv_axes a = ax;
  a.input_spatial = dup;
  CHECK_ERR(lathe_conv_general(f.fn, x, k, &a, NULL, &y), INVALID_ARGUMENT, "ConvGeneral: duplicate input axes");
  int oob[2] = {0, 7};
  a = ax;
  a.kernel_spatial = oob;
  CHECK_ERR(lathe_conv_general(f.fn, x, k, &a, NULL, &y), INVALID_ARGUMENT, "ConvGeneral: kernel spatial axis 7");
  a = ax;
  a.n_output_spatial = 1;
  CHECK_ERR(lathe_conv_general(f.fn, x, k, &a, NULL, &y), INVALID_ARGUMENT, "ConvGeneral: output spatial axes list");
  a = ax;
  a.input_batch = -1;
  CHECK_ERR(lathe_conv_general(f.fn, x, k, &a, NULL, &y), INVALID_ARGUMENT, "ConvGeneral: input batch axis -1");
  CHECK(f.fn->n_nodes == before, "failed builders leave no node (%d -> %d)", before, f.fn->n_nodes);
  lathe_builder_free(f.b);
}

TEST(bad_conv_attributes) {
  fixture f = open_fixture();
  lathe_value_t x = param(&f, TST_SHAPE(F32, 2, 5, 5, 6)), k = param(&f, TST_SHAPE(F32, 3, 3, 3, 4)), y;
  lathe_conv_axes ax = nhwc();
  int64_t s1[1] = {1}, s0[2] = {1, 0}, one[2] = {1, 1};
  lathe_conv_params p = {.strides = s1, .n_strides = 1};
  CHECK_ERR(lathe_conv_general(f.fn, x, k, &ax, &p, &y), INVALID_ARGUMENT, "ConvGeneral: strides has 1 entries");
  p = (lathe_conv_params){.strides = s0, .n_strides = 2};
  CHECK_ERR(lathe_conv_general(f.fn, x, k, &ax, &p, &y), INVALID_ARGUMENT, "ConvGeneral: strides[1]=0 must be >= 1");
  p = (lathe_conv_params){.input_dilations = s0, .n_input_dilations = 2};
  CHECK_ERR(lathe_conv_general(f.fn, x, k, &ax, &p, &y), INVALID_ARGUMENT, "ConvGeneral: input_dilations[1]=0");
  p = (lathe_conv_params){.kernel_dilations = s0, .n_kernel_dilations = 2};
  CHECK_ERR(lathe_conv_general(f.fn, x, k, &ax, &p, &y), INVALID_ARGUMENT, "ConvGeneral: kernel_dilations[1]=0");
  lathe_padding pads[1] = {{1, 1}};
  p = (lathe_conv_params){.paddings = pads, .n_paddings = 1};
  CHECK_ERR(lathe_conv_general(f.fn, x, k, &ax, &p, &y), INVALID_ARGUMENT, "ConvGeneral: paddings has 1 entries");
  /* input channels 6 != kernel input channels 3 (no groups) */
  p = (lathe_conv_params){.strides = one, .n_strides = 2};
  CHECK_ERR(lathe_conv_general(f.fn, x, k, &ax, &p, &y), INVALID_ARGUMENT, "ConvGeneral: input channels (6)");
  p = (lathe_conv_params){.channel_group_count = 2, .batch_group_count = 2};
  CHECK_ERR(lathe_conv_general(f.fn, x, k, &ax, &p, &y), INVALID_ARGUMENT, "ConvGeneral: at most one of");
  p = (lathe_conv_params){.channel_group_count = -1};
  CHECK_ERR(lathe_conv_general(f.fn, x, k, &ax, &p, &y), INVALID_ARGUMENT, "ConvGeneral: channel_group_count=-1");
  /* 4 output channels are not divisible by 3 channel groups (6 = 2 * 3 would fit the input) */
  lathe_value_t k2 = param(&f, TST_SHAPE(F32, 3, 3, 2, 4));
  p = (lathe_conv_params){.channel_group_count = 3};
  CHECK_ERR(lathe_conv_general(f.fn, x, k2, &ax, &p, &y), INVALID_ARGUMENT,
            "ConvGeneral: kernel output channels 4 must be divisible by channel_group_count 3");
  lathe_value_t k6 = param(&f, TST_SHAPE(F32, 3, 3, 6, 4));
  p = (lathe_conv_params){.batch_group_count = 3};
  CHECK_ERR(lathe_conv_general(f.fn, x, k6, &ax, &p, &y), INVALID_ARGUMENT,
            "ConvGeneral: input batch 2 must be divisible by batch_group_count 3");
  lathe_value_t k7 = param(&f, TST_SHAPE(F32, 7, 3, 6, 4));
  CHECK_ERR(lathe_conv_general(f.fn, x, k7, &ax, NULL, &y), INVALID_ARGUMENT, "ConvGeneral: effective kernel size 7");
  lathe_padding neg[2] = {{-2, -2}, {0, 0}};
  p = (lathe_conv_params){.paddings = neg, .n_paddings = 2};
  CHECK_ERR(lathe_conv_general(f.fn, x, k6, &ax, &p, &y), INVALID_ARGUMENT, "larger than the padded effective input");
  /* a good one still builds */
  CHECK_OK(lathe_conv_general(f.fn, x, k6, &ax, NULL, &y));
  lathe_builder_free(f.b);
}

TEST(bad_reduce_window) {
  fixture f = open_fixture();
  lathe_value_t x = param(&f, TST_SHAPE(F32, 4, 6)), y;
  int before = f.fn->n_nodes;
  int64_t w2[2] = {2, 2}, w1[1] = {2}, w0[2] = {0, 2}, big[2] = {5, 2};
  lathe_window_params p = {.window_dims = w2, .n_window_dims = 2};
  CHECK_ERR(lathe_reduce_window(f.fn, LATHE_OP_REDUCE_BITWISE_AND, x, &p, &y), INVALID_ARGUMENT,
            "ReduceWindow: reduction must be");
  p = (lathe_window_params){.window_dims = w1, .n_window_dims = 1};
  CHECK_ERR(lathe_reduce_window(f.fn, LATHE_OP_REDUCE_SUM, x, &p, &y), INVALID_ARGUMENT,
            "ReduceWindow: window_dims has 1 entries, but the operand has rank 2");
  p = (lathe_window_params){.window_dims = w0, .n_window_dims = 2};
  CHECK_ERR(lathe_reduce_window(f.fn, LATHE_OP_REDUCE_SUM, x, &p, &y), INVALID_ARGUMENT,
            "ReduceWindow: window_dims[0]=0 must be >= 1");
  p = (lathe_window_params){.window_dims = big, .n_window_dims = 2};
  CHECK_ERR(lathe_reduce_window(f.fn, LATHE_OP_REDUCE_MAX, x, &p, &y), INVALID_ARGUMENT,
            "ReduceWindow: effective window size 5 of axis 0");
  lathe_padding neg[2] = {{0, 0}, {-1, 0}};
  p = (lathe_window_params){.window_dims = w2, .n_window_dims = 2, .paddings = neg, .n_paddings = 2};
  CHECK_ERR(lathe_reduce_window(f.fn, LATHE_OP_REDUCE_MIN, x, &p, &y), INVALID_ARGUMENT,
            "ReduceWindow: paddings[1]=[-1, 0] must be non-negative");
  p = (lathe_window_params){.window_dims = w2, .n_window_dims = 2, .strides = w0, .n_strides = 2};
  CHECK_ERR(lathe_reduce_window(f.fn, LATHE_OP_REDUCE_SUM, x, &p, &y), INVALID_ARGUMENT,
            "ReduceWindow: strides[0]=0");
  p = (lathe_window_params){.window_dims = w2, .n_window_dims = 2, .window_dilations = w0, .n_window_dilations = 2};
  CHECK_ERR(lathe_reduce_window(f.fn, LATHE_OP_REDUCE_SUM, x, &p, &y), INVALID_ARGUMENT,
            "ReduceWindow: window_dilations[0]=0");
  lathe_value_t c = param(&f, TST_SHAPE(LATHE_DTYPE_COMPLEX64, 4, 6));
  before = f.fn->n_nodes;
  p = (lathe_window_params){.window_dims = w2, .n_window_dims = 2};
  CHECK_ERR(lathe_reduce_window(f.fn, LATHE_OP_REDUCE_SUM, c, &p, &y), INVALID_ARGUMENT,
            "ReduceWindow: dtype Complex64 is not supported");
  CHECK_ERR(lathe_reduce_window(f.fn, LATHE_OP_REDUCE_SUM, NULL, &p, &y), INVALID_ARGUMENT, "ReduceWindow");
  CHECK(f.fn->n_nodes == before, "failed builders leave no node");
  lathe_value_t bo = param(&f, TST_SHAPE(LATHE_DTYPE_BOOL, 4, 6));
  before = f.fn->n_nodes;
  CHECK_ERR(lathe_reduce_window(f.fn, LATHE_OP_REDUCE_SUM, bo, &p, &y), INVALID_ARGUMENT,
            "ReduceWindow: Bool takes ReduceMax or ReduceMin only, got ReduceSum");
  CHECK_ERR(lathe_reduce_window(f.fn, LATHE_OP_REDUCE_PRODUCT, bo, &p, &y), INVALID_ARGUMENT,
            "ReduceWindow: Bool takes ReduceMax or ReduceMin only, got ReduceProduct");
  CHECK(f.fn->n_nodes == before, "failed builders leave no node");
  CHECK_OK(lathe_reduce_window(f.fn, LATHE_OP_REDUCE_MIN, bo, &p, &y));
  CHECK_OK(lathe_reduce_window(f.fn, LATHE_OP_REDUCE_SUM, x, &p, &y));
  lathe_shape s;
  CHECK_OK(lathe_value_shape(y, &s));
  CHECK(s.rank == 2 && s.dims[0] == 2 && s.dims[1] == 3, "strides default to the window: [%lld %lld]",
        (long long)s.dims[0], (long long)s.dims[1]);
  lathe_builder_free(f.b);
}

TEST(bad_select_and_scatter) {
  fixture f = open_fixture();
  lathe_value_t x = param(&f, TST_SHAPE(F32, 4, 6)), src = param(&f, TST_SHAPE(F32, 2, 3));
  lathe_value_t bad = param(&f, TST_SHAPE(F32, 3, 3)), srcd = param(&f, TST_SHAPE(LATHE_DTYPE_FLOAT64, 2, 3)), y;
  int64_t w2[2] = {2, 2};
  lathe_window_params p = {.window_dims = w2, .n_window_dims = 2};
  CHECK_ERR(lathe_select_and_scatter(f.fn, LATHE_OP_SELECT_AND_SCATTER_MAX, x, bad, &p, &y), INVALID_ARGUMENT,
            "SelectAndScatterMax: source shape Float32[3,3] does not match");
  CHECK_ERR(lathe_select_and_scatter(f.fn, LATHE_OP_SELECT_AND_SCATTER_MIN, x, srcd, &p, &y), INVALID_ARGUMENT,
            "SelectAndScatterMin: operand dtype Float32 does not match source dtype Float64");
  lathe_window_params pd = p;
  pd.window_dilations = w2, pd.n_window_dilations = 2;
  CHECK_ERR(lathe_select_and_scatter(f.fn, LATHE_OP_SELECT_AND_SCATTER_MAX, x, src, &pd, &y), INVALID_ARGUMENT,
            "SelectAndScatterMax: takes no input or window dilations");
  lathe_padding neg[2] = {{0, -1}, {0, 0}};
  pd = p;
  pd.paddings = neg, pd.n_paddings = 2;
  CHECK_ERR(lathe_select_and_scatter(f.fn, LATHE_OP_SELECT_AND_SCATTER_MAX, x, src, &pd, &y), INVALID_ARGUMENT,
            "SelectAndScatterMax: paddings[0]=[0, -1]");
  CHECK_ERR(lathe_select_and_scatter(f.fn, LATHE_OP_REDUCE_MAX, x, src, &p, &y), INVALID_ARGUMENT,
            "SelectAndScatter: op must be");
  CHECK_ERR(lathe_select_and_scatter(f.fn, LATHE_OP_SELECT_AND_SCATTER_SUM, x, src, &p, &y), UNIMPLEMENTED,
            "SelectAndScatterSum");
  CHECK_OK(lathe_select_and_scatter(f.fn, LATHE_OP_SELECT_AND_SCATTER_MAX, x, src, &p, &y));
  lathe_builder_free(f.b);
}
