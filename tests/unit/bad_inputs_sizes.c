/* bad_inputs_sizes.c -- the size limit (LATHE_MAX_TENSOR_SIZE: fewer than 2^62 elements and 2^62
 * bytes, size-0 axes counted as 1): shapes beyond it are INVALID_ARGUMENT where they are declared
 * (parameter, constant, buffer, op result, specialised dynamic axes), naming the op; a valid
 * shape whose memory cannot be had is RESOURCE_EXHAUSTED at execution, and the backend stays
 * usable. Plus the two rules that used to be accepted silently: BroadcastInDim with decreasing
 * axes, and two parameters of one function with the same name. */
#include "graph/graph.h"
#include "testing.h"

#define P(k) ((int64_t)1 << (k))

/* A fresh builder and function; NULL when creation failed (a CHECK says so). */
static lathe_builder_t fresh(lathe_function_t *fn) { return tst_builder("sizes", fn); }

TEST(sizes_core_helpers) {
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, P(40), P(40));
  CHECK(lathe_shape_num_elements(&s) == -1, "num_elements beyond the limit is -1");
  CHECK(lathe_shape_byte_size(&s) == -1, "byte_size beyond the limit is -1");
  CHECK(lathe_shape_size(&s) == INT64_MAX, "internal size saturates, got %lld", (long long)lathe_shape_size(&s));
  lathe_shape z = TST_SHAPE(LATHE_DTYPE_FLOAT32, 0, P(40), P(40));
  CHECK(lathe_shape_size(&z) == 0, "a zero axis gives size 0 even when the others overflow");
  CHECK(lathe_shape_byte_size(&z) == -1, "size-0 axes count as 1 for the limit");
  lathe_shape ok = TST_SHAPE(LATHE_DTYPE_FLOAT32, P(20), P(20), P(19));
  CHECK(lathe_shape_byte_size(&ok) == P(61), "Float32 2^59 elements is 2^61 bytes");
  lathe_shape edge = TST_SHAPE(LATHE_DTYPE_INT8, P(62) - 1);
  CHECK(lathe_shape_byte_size(&edge) == P(62) - 1, "2^62-1 bytes is within the limit");
  edge.dims[0] = P(62);
  CHECK(lathe_shape_byte_size(&edge) == -1, "2^62 elements is beyond the limit");
  lathe_shape c = TST_SHAPE(LATHE_DTYPE_COMPLEX128, P(58));
  CHECK(lathe_shape_byte_size(&c) == -1, "Complex128 2^58 elements is 2^62 bytes: beyond");
  lathe_shape i4 = TST_SHAPE(LATHE_DTYPE_INT4, 7);
  CHECK(lathe_shape_byte_size(&i4) == 4, "packed Int4[7] takes 4 bytes");
  CHECK(lathe_dtype_bytes_for(LATHE_DTYPE_COMPLEX128, INT64_MAX / 2) == INT64_MAX, "bytes_for saturates");
  CHECK(lathe_dtype_bytes_for(LATHE_DTYPE_INT1, 17) == 3, "Int1 17 elements: 3 bytes");
  lathe_shape bad_rank = s;
  bad_rank.rank = 40;
  CHECK(lathe_shape_num_elements(&bad_rank) == -1 && !lathe_shape_is_dynamic(&bad_rank), "rank out of range");
  CHECK_ERR(lathe_check_shape_size("Op", "shape", &s), INVALID_ARGUMENT, "Op: shape Float32[1099511627776,1099511627776]");
}

TEST(sizes_parameters_and_constants) {
  lathe_function_t fn;
  lathe_builder_t b = fresh(&fn);
  if (!b) return;
  lathe_value_t v = NULL;
  lathe_shape a = TST_SHAPE(LATHE_DTYPE_FLOAT32, P(31), P(31)), c = TST_SHAPE(LATHE_DTYPE_FLOAT32, P(40), P(40));
  CHECK_ERR(lathe_parameter(fn, "a", &a, &v), INVALID_ARGUMENT, "Parameter: shape Float32[2147483648,2147483648] exceeds");
  CHECK_ERR(lathe_parameter(fn, "c", &c, &v), INVALID_ARGUMENT, "Parameter");
  /* a zero axis does not make huge others acceptable */
  lathe_shape z = TST_SHAPE(LATHE_DTYPE_FLOAT32, 0, P(40), P(40));
  CHECK_ERR(lathe_parameter(fn, "z", &z, &v), INVALID_ARGUMENT, "size limit");
  /* dynamic axes count as 1 until bound */
  lathe_shape d = TST_SHAPE(LATHE_DTYPE_FLOAT32, -1, P(61));
  d.axis_names[0] = "batch";
  CHECK_ERR(lathe_parameter(fn, "d", &d, &v), INVALID_ARGUMENT, "Parameter");
  CHECK_ERR(lathe_constant(fn, &c, "x", 1, &v), INVALID_ARGUMENT, "Constant: shape");
  CHECK(fn->n_params == 0 && fn->n_nodes == 0, "failed calls left nothing behind");
  /* the largest shapes within the limit are accepted (they are only shapes until executed) */
  lathe_shape big = TST_SHAPE(LATHE_DTYPE_FLOAT32, P(29), P(29), P(1));
  CHECK_OK(lathe_parameter(fn, "big", &big, &v));
  lathe_builder_free(b);
}

TEST(sizes_parameter_names_are_unique) {
  lathe_function_t fn, cl;
  lathe_builder_t b = fresh(&fn);
  if (!b) return;
  lathe_value_t v = NULL, w = NULL;
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2);
  CHECK_OK(lathe_parameter(fn, "x", &s, &v));
  CHECK_ERR(lathe_parameter(fn, "x", &s, &w), INVALID_ARGUMENT, "Parameter: function \"main\" already has a parameter named \"x\"");
  CHECK(fn->n_params == 1, "the duplicate left no parameter");
  /* default names skip names already taken */
  CHECK_OK(lathe_parameter(fn, "p2", &s, &w));
  CHECK_OK(lathe_parameter(fn, NULL, &s, &w));
  CHECK(w && strcmp(w->name, "p2") != 0, "default name %s must not repeat p2", w ? w->name : "?");
  CHECK_ERR(lathe_parameter(fn, w ? w->name : "", &s, &v), INVALID_ARGUMENT, "already has a parameter");
  /* another function may reuse a name */
  CHECK_OK(lathe_function_closure(fn, &cl));
  CHECK_OK(lathe_parameter(cl, "x", &s, &w));
  lathe_builder_free(b);
}

TEST(sizes_broadcast_in_dim) {
  lathe_function_t fn;
  lathe_builder_t b = fresh(&fn);
  if (!b) return;
  lathe_value_t x = NULL, s = NULL, out = NULL;
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 2), ss = tst_shape0(LATHE_DTYPE_FLOAT32);
  CHECK_OK(lathe_parameter(fn, "x", &xs, &x));
  CHECK_OK(lathe_parameter(fn, "s", &ss, &s));
  int n0 = fn->n_nodes;
  lathe_shape to = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 4, 3);
  CHECK_ERR(lathe_broadcast_in_dim(fn, x, &to, (const int[]){2, 0}, 2, &out), INVALID_ARGUMENT,
            "BroadcastInDim: broadcast_axes must be increasing");
  /* [2^61, 8] Float32 used to pass and raise SIGFPE at execution */
  lathe_shape huge = TST_SHAPE(LATHE_DTYPE_FLOAT32, P(61), 8);
  CHECK_ERR(lathe_broadcast_in_dim(fn, s, &huge, NULL, 0, &out), INVALID_ARGUMENT,
            "BroadcastInDim: result shape Float32[2305843009213693952,8] exceeds the size limit");
  lathe_shape huge0 = TST_SHAPE(LATHE_DTYPE_FLOAT32, P(40), 0, P(40));
  CHECK_ERR(lathe_broadcast_in_dim(fn, s, &huge0, NULL, 0, &out), INVALID_ARGUMENT, "BroadcastInDim");
  CHECK(fn->n_nodes == n0, "failed builders left %d nodes", fn->n_nodes - n0);
  lathe_shape inc = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 4, 2);
  CHECK_OK(lathe_broadcast_in_dim(fn, x, &inc, (const int[]){0, 2}, 2, &out));
  lathe_builder_free(b);
}

TEST(sizes_iota_executed) {
  lathe_function_t fn;
  lathe_builder_t b = fresh(&fn);
  if (!b) return;
  lathe_value_t out = NULL;
  lathe_shape s62 = TST_SHAPE(LATHE_DTYPE_INT8, P(62));
  CHECK_ERR(lathe_iota(fn, &s62, 0, &out), INVALID_ARGUMENT, "Iota: result shape Int8[4611686018427387904]");
  lathe_shape f = TST_SHAPE(LATHE_DTYPE_FLOAT32, P(61));
  CHECK_ERR(lathe_iota(fn, &f, 0, &out), INVALID_ARGUMENT, "Iota");
  /* within the limit but far beyond memory: RESOURCE_EXHAUSTED when executed */
  lathe_shape big = TST_SHAPE(LATHE_DTYPE_INT8, P(61));
  CHECK_OK(lathe_iota(fn, &big, 0, &out));
  if (out) {
    CHECK_OK(lathe_function_return(fn, &out, 1));
    void *got = NULL;
    CHECK_ERR(tst_run(b, NULL, 0, &got, 1, NULL), RESOURCE_EXHAUSTED, "executing Iota");
    tst_free_output(got);
  }
  lathe_builder_free(b);
}

/* Float32 [2^20, 2^20, 2^10] (4 PiB) is a valid shape: executing a graph that makes it fails (in
 * the fused region Broadcast+Neg, or in BroadcastInDim unfused)
 * with RESOURCE_EXHAUSTED, and the same backend keeps running graphs, that one included. */
TEST(sizes_allocation_failure_keeps_backend_usable) {
  lathe_function_t fn;
  lathe_builder_t b = fresh(&fn);
  if (!b) return;
  lathe_value_t s = NULL, big = NULL, neg = NULL;
  lathe_shape ss = tst_shape0(LATHE_DTYPE_FLOAT32), bs = TST_SHAPE(LATHE_DTYPE_FLOAT32, P(20), P(20), P(10));
  CHECK_OK(lathe_parameter(fn, "s", &ss, &s));
  CHECK_OK(lathe_broadcast_in_dim(fn, s, &bs, NULL, 0, &big));
  CHECK_OK(lathe_neg(fn, big, &neg));
  if (!neg) {
    lathe_builder_free(b);
    return;
  }
  CHECK_OK(lathe_function_return(fn, &neg, 1));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  float one = 1;
  lathe_buffer_t in = NULL, out = NULL;
  CHECK_OK(lathe_buffer_from_host(tst_backend(), 0, &ss, &one, sizeof one, &in));
  for (int rep = 0; e && in && rep < 2; rep++) {
    CHECK_ERR(lathe_executable_execute(e, &in, NULL, 1, 0, &out, 1), RESOURCE_EXHAUSTED, "out of memory allocating 4503599627370496 bytes");
    CHECK(!lathe_buffer_is_donated(in), "a failed run leaves a kept input alone");
    /* a small graph on the same backend */
    lathe_function_t fn2;
    lathe_builder_t b2 = fresh(&fn2);
    lathe_value_t x = NULL, y = NULL;
    lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3);
    x = tst_param(fn2, "x", xs);
    CHECK_OK(lathe_neg(fn2, x, &y));
    if (y) {
      CHECK_OK(lathe_function_return(fn2, &y, 1));
      const float xin[3] = {1, -2, 3}, want[3] = {-1, 2, -3};
      const void *ins[1] = {xin};
      tst_run_expect("after RESOURCE_EXHAUSTED", b2, ins, 1, want, LATHE_DTYPE_FLOAT32, 3, 0);
    }
    lathe_builder_free(b2);
  }
  /* a donated input is consumed even when the run fails */
  if (e && in) {
    bool donate = true;
    CHECK_ERR(lathe_executable_execute(e, &in, &donate, 1, 0, &out, 1), RESOURCE_EXHAUSTED, "out of memory allocating 4503599627370496 bytes");
  }
  lathe_buffer_free(in);
  lathe_executable_free(e);
  lathe_builder_free(b);
}

TEST(sizes_buffers) {
  lathe_backend_t be = tst_backend();
  lathe_buffer_t buf = NULL;
  void *data = NULL;
  float one = 1;
  lathe_shape a = TST_SHAPE(LATHE_DTYPE_FLOAT32, P(32), P(32));
  /* empty data for Float32 [2^32, 2^32] used to be accepted (its byte size wrapped to 0) */
  CHECK_ERR(lathe_buffer_from_host(be, 0, &a, NULL, 0, &buf), INVALID_ARGUMENT,
            "BufferFromHost: shape Float32[4294967296,4294967296] exceeds the size limit");
  lathe_shape c = TST_SHAPE(LATHE_DTYPE_FLOAT32, P(40), P(40));
  CHECK_ERR(lathe_buffer_from_host(be, 0, &c, &one, sizeof one, &buf), INVALID_ARGUMENT, "BufferFromHost: shape");
  lathe_shape d = TST_SHAPE(LATHE_DTYPE_FLOAT32, P(31), P(31));
  CHECK_ERR(lathe_buffer_from_host(be, 0, &d, NULL, 0, &buf), INVALID_ARGUMENT, "size limit");
  CHECK_ERR(lathe_buffer_new_shared(be, 0, &d, &buf, &data), INVALID_ARGUMENT, "NewSharedBuffer");
  /* valid, but no memory for it */
  lathe_shape big = TST_SHAPE(LATHE_DTYPE_FLOAT32, P(20), P(20), P(10));
  CHECK_ERR(lathe_buffer_new_shared(be, 0, &big, &buf, &data), RESOURCE_EXHAUSTED, "out of memory");
  CHECK(buf == NULL, "no buffer on failure");
  /* and so Neg on such a buffer cannot be reached: the parameter is refused too */
  lathe_function_t fn;
  lathe_builder_t b = fresh(&fn);
  if (!b) return;
  lathe_value_t v = NULL;
  CHECK_ERR(lathe_parameter(fn, "x", &d, &v), INVALID_ARGUMENT, "Parameter");
  lathe_builder_free(b);
}

/* Every builder whose result size is computed from its operands and attributes. */
TEST(sizes_op_results) {
  lathe_function_t fn;
  lathe_builder_t b = fresh(&fn);
  if (!b) return;
  lathe_value_t x = NULL, y = NULL, i8 = NULL, f64 = NULL, sc = NULL, out = NULL, vals[3];
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, P(29), P(29)), ys = TST_SHAPE(LATHE_DTYPE_FLOAT32, P(29), P(29));
  lathe_shape i8s = TST_SHAPE(LATHE_DTYPE_INT8, P(59)), f64s = TST_SHAPE(LATHE_DTYPE_FLOAT64, P(58));
  lathe_shape scs = tst_shape0(LATHE_DTYPE_FLOAT32);
  CHECK_OK(lathe_parameter(fn, "x", &xs, &x));
  CHECK_OK(lathe_parameter(fn, "y", &ys, &y));
  CHECK_OK(lathe_parameter(fn, "i8", &i8s, &i8));
  CHECK_OK(lathe_parameter(fn, "f64", &f64s, &f64));
  CHECK_OK(lathe_parameter(fn, "s", &scs, &sc));
  int n0 = fn->n_nodes;
  /* Reshape: a target whose product overflows used to compare equal after wrapping */
  CHECK_ERR(lathe_reshape(fn, x, (const int64_t[]){P(40), P(40), 0}, 3, &out), INVALID_ARGUMENT, "Reshape: target shape");
  CHECK_ERR(lathe_reshape(fn, x, (const int64_t[]){P(62), P(62), P(4)}, 3, &out), INVALID_ARGUMENT, "Reshape");
  /* DotGeneral: [2^29, 2^29] x [2^29, 2^29] with nothing contracted is 2^116 elements */
  CHECK_ERR(lathe_dot_general(fn, x, NULL, 0, NULL, 0, y, NULL, 0, NULL, 0, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: result shape");
  /* ConvertDtype Int8 -> Complex128 multiplies the bytes by 16; Bitcast to Int1 the elements by 64 */
  CHECK_ERR(lathe_convert_dtype(fn, i8, LATHE_DTYPE_COMPLEX128, &out), INVALID_ARGUMENT, "ConvertDType: result shape");
  CHECK_ERR(lathe_bitcast(fn, f64, LATHE_DTYPE_INT1, &out), INVALID_ARGUMENT, "Bitcast: result shape");
  /* Concatenate: sizes that add up beyond int64 */
  lathe_value_t cats[4] = {i8, i8, i8, i8};
  lathe_shape i8b = TST_SHAPE(LATHE_DTYPE_INT8, P(61));
  lathe_value_t big = NULL;
  CHECK_OK(lathe_parameter(fn, "big", &i8b, &big));
  n0 = fn->n_nodes;
  lathe_value_t cat_big[5] = {big, big, big, big, big};
  CHECK_ERR(lathe_concatenate(fn, 0, cat_big, 5, &out), INVALID_ARGUMENT, "Concatenate");
  CHECK_OK(lathe_concatenate(fn, 0, cats, 4, &out)); /* 2^61 Int8: within */
  n0 = fn->n_nodes;
  /* Pad: start/end/interior that overflow */
  lathe_pad_axis pa = {INT64_MAX, INT64_MAX, 0}, pi = {0, 0, INT64_MAX / 2}, pw = {P(61), P(61), 0};
  lathe_value_t z8 = NULL, s8 = NULL;
  lathe_shape s8s = tst_shape0(LATHE_DTYPE_INT8);
  CHECK_OK(lathe_parameter(fn, "s8", &s8s, &s8));
  lathe_shape z3 = TST_SHAPE(LATHE_DTYPE_INT8, 3);
  CHECK_OK(lathe_parameter(fn, "z8", &z3, &z8));
  n0 = fn->n_nodes;
  CHECK_ERR(lathe_pad(fn, z8, s8, &pa, 1, &out), INVALID_ARGUMENT, "Pad");
  CHECK_ERR(lathe_pad(fn, z8, s8, &pi, 1, &out), INVALID_ARGUMENT, "Pad");
  CHECK_ERR(lathe_pad(fn, z8, s8, &pw, 1, &out), INVALID_ARGUMENT, "Pad");
  /* Slice: a huge stride is fine (one element) */
  CHECK_OK(lathe_slice(fn, z8, (const int64_t[]){1}, (const int64_t[]){3}, (const int64_t[]){INT64_MAX}, 1, &out));
  if (out) CHECK(out->shape.dims[0] == 1, "Slice [1:3:huge] has 1 element, got %lld", (long long)out->shape.dims[0]);
  n0 = fn->n_nodes;
  /* Gather: batch axes of the indices times the slice */
  lathe_value_t idx = NULL;
  lathe_shape is = TST_SHAPE(LATHE_DTYPE_INT32, P(40), 1);
  CHECK_OK(lathe_parameter(fn, "idx", &is, &idx));
  n0 = fn->n_nodes;
  CHECK_ERR(lathe_gather(fn, x, idx, 1, (const int[]){1, 2}, 2, NULL, 0, (const int[]){0}, 1,
                         (const int64_t[]){P(29), P(29)}, 2, false, &out),
            INVALID_ARGUMENT, "Gather: result shape");
  /* RNGBitGenerator and Iota take their shape as an argument */
  lathe_value_t state = NULL;
  lathe_shape sts = TST_SHAPE(LATHE_DTYPE_UINT64, 3);
  CHECK_OK(lathe_parameter(fn, "state", &sts, &state));
  n0 = fn->n_nodes;
  lathe_shape r = TST_SHAPE(LATHE_DTYPE_UINT8, P(31), P(31));
  CHECK_ERR(lathe_rng_bit_generator(fn, state, &r, vals), INVALID_ARGUMENT, "RNGBitGenerator: result 1 shape");
  /* FFT: FORWARD_REAL of Float32 [2^60 - 1] (just below 2^62 bytes) is Complex64 [2^59]: 2^62 bytes */
  lathe_value_t fx = NULL;
  lathe_shape fxs = TST_SHAPE(LATHE_DTYPE_FLOAT32, P(60) - 1);
  CHECK_OK(lathe_parameter(fn, "fx", &fxs, &fx));
  n0 = fn->n_nodes;
  CHECK_ERR(lathe_fft(fn, fx, LATHE_FFT_TYPE_FORWARD_REAL, (const int64_t[]){P(60) - 1}, 1, &out), INVALID_ARGUMENT,
            "FFT: result shape Complex64[576460752303423488] exceeds");
  CHECK(fn->n_nodes == n0, "failed builders left %d nodes", fn->n_nodes - n0);
  lathe_builder_free(b);
}

TEST(sizes_windows_and_quantized) {
  lathe_function_t fn;
  lathe_builder_t b = fresh(&fn);
  if (!b) return;
  lathe_value_t in = NULL, k = NULL, x = NULL, w = NULL, out = NULL;
  lathe_shape ins = TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, 1, P(40)), ks = TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, 1, 2);
  CHECK_OK(lathe_parameter(fn, "in", &ins, &in));
  CHECK_OK(lathe_parameter(fn, "k", &ks, &k));
  int n0 = fn->n_nodes;
  /* ConvGeneral: (2^40 - 1) * 2^32 input dilation used to overflow */
  lathe_conv_axes ax = {.input_batch = 0, .input_channels = 1, .input_spatial = (const int[]){2}, .n_input_spatial = 1,
                        .kernel_input_channels = 0, .kernel_output_channels = 1, .kernel_spatial = (const int[]){2},
                        .n_kernel_spatial = 1, .output_batch = 0, .output_channels = 1,
                        .output_spatial = (const int[]){2}, .n_output_spatial = 1};
  lathe_conv_params cp = {.input_dilations = (const int64_t[]){P(32)}, .n_input_dilations = 1};
  CHECK_ERR(lathe_conv_general(fn, in, k, &ax, &cp, &out), INVALID_ARGUMENT, "ConvGeneral: the dilated sizes");
  /* ReduceWindow: the same with window dilations */
  lathe_window_params wp = {.input_dilations = (const int64_t[]){1, 1, P(32)}, .n_input_dilations = 3};
  CHECK_ERR(lathe_reduce_window(fn, LATHE_OP_REDUCE_SUM, in, &wp, &out), INVALID_ARGUMENT, "ReduceWindow: the dilated sizes");
  /* FusedQuantizedDense GGML: bytes per row whose value count overflows */
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, 256), ws = TST_SHAPE(LATHE_DTYPE_UINT8, 1, 84 * P(55));
  CHECK_OK(lathe_parameter(fn, "x", &xs, &x));
  CHECK_OK(lathe_parameter(fn, "w", &ws, &w));
  n0 = fn->n_nodes;
  lathe_quantization q = {.scheme = LATHE_QUANT_GGML, .ggml_type = LATHE_GGML_Q2_K};
  CHECK_ERR(lathe_fused_quantized_dense(fn, x, w, &q, NULL, NULL, NULL, LATHE_ACTIVATION_NONE, &out), INVALID_ARGUMENT,
            "FusedQuantizedDense");
  /* DynamicReshape: static sizes whose product overflows */
  lathe_dim_spec dims[3] = {{P(40), NULL, NULL}, {P(40), NULL, NULL}, {0, NULL, NULL}};
  CHECK_ERR(lathe_dynamic_reshape(fn, x, dims, 3, &out), INVALID_ARGUMENT, "DynamicReshape");
  CHECK(fn->n_nodes == n0, "failed builders left %d nodes", fn->n_nodes - n0);
  lathe_builder_free(b);
}

/* A dynamic axis counts as 1 at build time; bound at execution, the result shapes are checked
 * again: Int8 [batch] broadcast to [batch, 2^49] is 2^62 elements when batch = 2^13. */
TEST(sizes_specialisation) {
  lathe_function_t fn;
  lathe_builder_t b = fresh(&fn);
  if (!b) return;
  lathe_value_t x = NULL, out = NULL;
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_INT8, -1);
  xs.axis_names[0] = "batch";
  CHECK_OK(lathe_parameter(fn, "x", &xs, &x));
  lathe_shape to = TST_SHAPE(LATHE_DTYPE_INT8, -1, P(49));
  to.axis_names[0] = "batch";
  CHECK_OK(lathe_broadcast_in_dim(fn, x, &to, (const int[]){0}, 1, &out));
  if (!out) {
    lathe_builder_free(b);
    return;
  }
  CHECK_OK(lathe_function_return(fn, &out, 1));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_shape bound = TST_SHAPE(LATHE_DTYPE_INT8, P(13));
  lathe_buffer_t in = NULL, res = NULL;
  void *data = NULL;
  CHECK_OK(lathe_buffer_new_shared(tst_backend(), 0, &bound, &in, &data));
  if (e && in) {
    CHECK_ERR(lathe_executable_execute(e, &in, NULL, 1, 0, &res, 1), INVALID_ARGUMENT,
              "BroadcastInDim: result shape Int8[8192,562949953421312] exceeds the size limit");
    /* a small binding of the same executable: 2 x 2^49 bytes is valid, but beyond any address space */
    lathe_buffer_t small = NULL;
    lathe_shape two = TST_SHAPE(LATHE_DTYPE_INT8, 2);
    CHECK_OK(lathe_buffer_new_shared(tst_backend(), 0, &two, &small, &data));
    if (small) CHECK_ERR(lathe_executable_execute(e, &small, NULL, 1, 0, &res, 1), RESOURCE_EXHAUSTED, "executing BroadcastInDim");
    lathe_buffer_free(small);
  }
  lathe_buffer_free(in);
  lathe_executable_free(e);
  lathe_builder_free(b);
}

/* Kernels with attributes far beyond the sizes they touch: a Slice stride, a Pad interior, and a
 * convolution whose sums are empty over a huge window, executed. */
TEST(sizes_huge_attributes_executed) {
  lathe_function_t fn;
  lathe_builder_t b = fresh(&fn);
  if (!b) return;
  lathe_value_t x = NULL, f = NULL, sl = NULL, pd = NULL, outs[2];
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_INT8, 3), fs = tst_shape0(LATHE_DTYPE_INT8);
  x = tst_param(fn, "x", xs);
  f = tst_param(fn, "f", fs);
  CHECK_OK(lathe_slice(fn, x, (const int64_t[]){1}, (const int64_t[]){3}, (const int64_t[]){INT64_MAX}, 1, &sl));
  lathe_pad_axis pa = {1, 1, P(61)};
  CHECK_OK(lathe_pad(fn, sl, f, &pa, 1, &pd));
  if (!pd) {
    lathe_builder_free(b);
    return;
  }
  outs[0] = sl, outs[1] = pd;
  CHECK_OK(lathe_function_return(fn, outs, 2));
  const int8_t xin[3] = {5, 6, 7}, fill = -1;
  const void *ins[2] = {xin, &fill};
  void *got[2] = {NULL, NULL};
  lathe_shape gs[2];
  CHECK_OK(tst_run(b, ins, 2, got, 2, gs));
  if (got[0] && got[1]) {
    const int8_t *s = got[0], *p = got[1];
    CHECK(gs[0].dims[0] == 1 && s[0] == 6, "Slice [1:3:INT64_MAX] of {5,6,7} is {6}");
    CHECK(gs[1].dims[0] == 3 && p[0] == -1 && p[1] == 6 && p[2] == -1, "Pad of one element with a huge interior");
  }
  tst_free_output(got[0]);
  tst_free_output(got[1]);
  lathe_builder_free(b);

  /* ConvGeneral: no input channels, so every sum is empty (zeros), over a 2^20-wide window */
  b = fresh(&fn);
  if (!b) return;
  lathe_value_t in = NULL, k = NULL, conv = NULL;
  lathe_shape is = TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, 0, P(20)), ks = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 0, P(20));
  in = tst_param(fn, "in", is);
  k = tst_param(fn, "k", ks);
  lathe_conv_axes ax = {.input_batch = 0, .input_channels = 1, .input_spatial = (const int[]){2}, .n_input_spatial = 1,
                        .kernel_input_channels = 1, .kernel_output_channels = 0, .kernel_spatial = (const int[]){2},
                        .n_kernel_spatial = 1, .output_batch = 0, .output_channels = 1,
                        .output_spatial = (const int[]){2}, .n_output_spatial = 1};
  CHECK_OK(lathe_conv_general(fn, in, k, &ax, NULL, &conv));
  if (conv) {
    CHECK_OK(lathe_function_return(fn, &conv, 1));
    const float none = 0, want[2] = {0, 0};
    const void *cins[2] = {&none, &none};
    tst_run_expect("ConvGeneral with empty sums", b, cins, 2, want, LATHE_DTYPE_FLOAT32, 2, 0);
  }
  lathe_builder_free(b);
}

/* Attention whose dynamic heads axis is bound to 0 (H = Hkv = 0) is valid and empty: it used to
 * divide by zero. */
TEST(sizes_attention_without_heads_executed) {
  lathe_function_t fn;
  lathe_builder_t b = fresh(&fn);
  if (!b) return;
  lathe_shape qs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, -1, 2, 4), ks = TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, -1, 3, 4);
  qs.axis_names[1] = ks.axis_names[1] = "h";
  lathe_value_t q = tst_param(fn, "q", qs), k = tst_param(fn, "k", ks), v = tst_param(fn, "v", ks);
  lathe_value_t outs[2] = {NULL, NULL};
  CHECK_OK(lathe_fused_scaled_dot_product_attention(fn, q, k, v, LATHE_ATTENTION_LAYOUT_BHSD, NULL, outs));
  if (outs[0]) {
    CHECK_OK(lathe_function_return(fn, outs, 2));
    lathe_executable_t e = NULL;
    CHECK_OK(lathe_builder_compile(b, &e));
    lathe_shape q0 = TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, 0, 2, 4), k0 = TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, 0, 3, 4);
    lathe_buffer_t in[3] = {NULL, NULL, NULL}, out[2] = {NULL, NULL};
    const float none = 0;
    CHECK_OK(lathe_buffer_from_host(tst_backend(), 0, &q0, &none, 0, &in[0]));
    CHECK_OK(lathe_buffer_from_host(tst_backend(), 0, &k0, &none, 0, &in[1]));
    CHECK_OK(lathe_buffer_from_host(tst_backend(), 0, &k0, &none, 0, &in[2]));
    if (e && in[0] && in[1] && in[2]) {
      CHECK_OK(lathe_executable_execute(e, in, NULL, 3, 0, out, 2));
      lathe_shape os;
      if (out[1]) {
        CHECK_OK(lathe_buffer_shape(out[1], &os));
        CHECK(os.rank == 3 && os.dims[1] == 0, "empty logsumexp [1, 0, 2]");
      }
    }
    for (int i = 0; i < 3; i++) lathe_buffer_free(in[i]);
    for (int i = 0; i < 2; i++) lathe_buffer_free(out[i]);
    lathe_executable_free(e);
  }
  lathe_builder_free(b);
}
