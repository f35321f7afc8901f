/* bad_inputs_numeric.c -- the NUMERIC family's builders reject bad shapes, dtypes and attributes
 * with INVALID_ARGUMENT naming the op, leave no node behind, and capabilities say what runs. */
#include "graph/graph.h"
#include "testing.h"

typedef struct fixture {
  lathe_builder_t b;
  lathe_function_t fn;
} fixture;

static fixture fx_new(void) {
  fixture f = {0};
  f.b = tst_builder("bad_numeric", &f.fn);
  return f;
}

static lathe_value_t param(fixture *f, lathe_shape s) { return tst_param(f->fn, NULL, s); }

TEST(bad_rng_bit_generator) {
  fixture f = fx_new();
  lathe_value_t st = param(&f, TST_SHAPE(LATHE_DTYPE_UINT64, 3));
  lathe_value_t st_i64 = param(&f, TST_SHAPE(LATHE_DTYPE_INT64, 3));
  lathe_value_t st_2 = param(&f, TST_SHAPE(LATHE_DTYPE_UINT64, 2));
  lathe_value_t outs[2];
  lathe_shape u32 = TST_SHAPE(LATHE_DTYPE_UINT32, 4);
  int before = f.fn->n_nodes;
  CHECK_ERR(lathe_rng_bit_generator(f.fn, st_i64, &u32, outs), INVALID_ARGUMENT, "RNGBitGenerator: state must be shaped Uint64[3]");
  CHECK_ERR(lathe_rng_bit_generator(f.fn, st_2, &u32, outs), INVALID_ARGUMENT, "RNGBitGenerator");
  lathe_shape bad = TST_SHAPE(LATHE_DTYPE_BOOL, 4);
  CHECK_ERR(lathe_rng_bit_generator(f.fn, st, &bad, outs), INVALID_ARGUMENT, "RNGBitGenerator: values must be");
  bad = TST_SHAPE(LATHE_DTYPE_COMPLEX64, 4);
  CHECK_ERR(lathe_rng_bit_generator(f.fn, st, &bad, outs), INVALID_ARGUMENT, "RNGBitGenerator");
  bad = TST_SHAPE(LATHE_DTYPE_UINT32, 4, -1);
  bad.axis_names[1] = "batch"; /* no parameter has a "batch" axis */
  CHECK_ERR(lathe_rng_bit_generator(f.fn, st, &bad, outs), INVALID_ARGUMENT,
            "RNGBitGenerator: values shape axis 1 has size -1 (\"batch\"); it must be static, or dynamic with the name "
            "of a parameter's axis");
  bad.axis_names[1] = NULL;
  CHECK_ERR(lathe_rng_bit_generator(f.fn, st, &bad, outs), INVALID_ARGUMENT, "values shape axis 1 has size -1;");
  bad.dims[1] = -2;
  CHECK_ERR(lathe_rng_bit_generator(f.fn, st, &bad, outs), INVALID_ARGUMENT, "values shape axis 1 has size -2");
  bad = u32;
  bad.dtype = (lathe_dtype)77;
  CHECK_ERR(lathe_rng_bit_generator(f.fn, st, &bad, outs), INVALID_ARGUMENT, "RNGBitGenerator: invalid dtype");
  CHECK_ERR(lathe_rng_bit_generator(f.fn, st, NULL, outs), INVALID_ARGUMENT, "RNGBitGenerator");
  CHECK_ERR(lathe_rng_bit_generator(f.fn, st, &u32, NULL), INVALID_ARGUMENT, "RNGBitGenerator");
  CHECK_ERR(lathe_rng_bit_generator(f.fn, NULL, &u32, outs), INVALID_ARGUMENT, "RNGBitGenerator");
  CHECK(f.fn->n_nodes == before, "failed builders added %d nodes", f.fn->n_nodes - before);
  CHECK_OK(lathe_rng_bit_generator(f.fn, st, &u32, outs));
  lathe_shape s;
  CHECK_OK(lathe_value_shape(outs[1], &s));
  CHECK(lathe_shape_equal(&s, &u32), "values shape");
  lathe_shape xb = TST_SHAPE(LATHE_DTYPE_FLOAT32, -1);
  xb.axis_names[0] = "batch";
  param(&f, xb);
  bad = TST_SHAPE(LATHE_DTYPE_UINT32, 4, -1);
  bad.axis_names[1] = "batch";
  CHECK_OK(lathe_rng_bit_generator(f.fn, st, &bad, outs)); /* now a parameter binds "batch" */
  lathe_builder_free(f.b);
}

TEST(bad_fft) {
  fixture f = fx_new();
  lathe_value_t c = param(&f, TST_SHAPE(LATHE_DTYPE_COMPLEX64, 2, 8));
  lathe_value_t r = param(&f, TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 8));
  lathe_value_t r16 = param(&f, TST_SHAPE(LATHE_DTYPE_FLOAT16, 8));
  lathe_value_t h = param(&f, TST_SHAPE(LATHE_DTYPE_COMPLEX128, 2, 5));
  lathe_value_t y;
  int64_t l8[] = {8}, l28[] = {2, 8}, l4[] = {1, 1, 2, 8}, l0[] = {0}, l7[] = {7}, l9[] = {9}, l3_8[] = {3, 8};
  int before = f.fn->n_nodes;
  CHECK_ERR(lathe_fft(f.fn, c, LATHE_FFT_TYPE_FORWARD, l8, 0, &y), INVALID_ARGUMENT, "FFT: FFTForward supports 1 to 3");
  CHECK_ERR(lathe_fft(f.fn, c, LATHE_FFT_TYPE_FORWARD, l4, 4, &y), INVALID_ARGUMENT, "FFT");
  CHECK_ERR(lathe_fft(f.fn, c, LATHE_FFT_TYPE_FORWARD, NULL, 1, &y), INVALID_ARGUMENT, "FFT: fft_length is NULL");
  CHECK_ERR(lathe_fft(f.fn, r16, LATHE_FFT_TYPE_FORWARD, l28, 2, &y), INVALID_ARGUMENT, "rank >= 2");
  CHECK_ERR(lathe_fft(f.fn, c, LATHE_FFT_TYPE_FORWARD, l0, 1, &y), INVALID_ARGUMENT, "must be positive");
  CHECK_ERR(lathe_fft(f.fn, r, LATHE_FFT_TYPE_FORWARD, l8, 1, &y), INVALID_ARGUMENT, "FFT: FFTForward requires a Complex64");
  CHECK_ERR(lathe_fft(f.fn, c, LATHE_FFT_TYPE_FORWARD_REAL, l8, 1, &y), INVALID_ARGUMENT, "FFTForwardReal requires a Float32");
  CHECK_ERR(lathe_fft(f.fn, r16, LATHE_FFT_TYPE_FORWARD_REAL, l8, 1, &y), INVALID_ARGUMENT, "Float16");
  CHECK_ERR(lathe_fft(f.fn, r, LATHE_FFT_TYPE_INVERSE_REAL, l8, 1, &y), INVALID_ARGUMENT, "FFTInverseReal requires a Complex");
  CHECK_ERR(lathe_fft(f.fn, c, LATHE_FFT_TYPE_INVERSE, l7, 1, &y), INVALID_ARGUMENT, "fft_length[0]=7");
  CHECK_ERR(lathe_fft(f.fn, r, LATHE_FFT_TYPE_FORWARD_REAL, l3_8, 2, &y), INVALID_ARGUMENT, "FFT");
  CHECK_ERR(lathe_fft(f.fn, h, LATHE_FFT_TYPE_INVERSE_REAL, l7, 1, &y), INVALID_ARGUMENT, "fft_length[0]/2+1=4");
  CHECK_ERR(lathe_fft(f.fn, c, (lathe_fft_type)7, l8, 1, &y), INVALID_ARGUMENT, "FFT: invalid FFT type 7");
  CHECK_ERR(lathe_fft(f.fn, c, LATHE_FFT_TYPE_FORWARD, l8, 1, NULL), INVALID_ARGUMENT, "FFT");
  CHECK(f.fn->n_nodes == before, "failed builders added %d nodes", f.fn->n_nodes - before);
  /* valid ones and their shapes: IRFFT accepts both even and odd lengths with the same half */
  lathe_shape s;
  CHECK_OK(lathe_fft(f.fn, h, LATHE_FFT_TYPE_INVERSE_REAL, l8, 1, &y));
  CHECK_OK(lathe_value_shape(y, &s));
  CHECK(s.dtype == LATHE_DTYPE_FLOAT64 && s.dims[1] == 8, "IRFFT shape");
  CHECK_OK(lathe_fft(f.fn, h, LATHE_FFT_TYPE_INVERSE_REAL, l9, 1, &y));
  CHECK_OK(lathe_value_shape(y, &s));
  CHECK(s.dims[1] == 9, "IRFFT odd shape");
  CHECK_OK(lathe_fft(f.fn, r, LATHE_FFT_TYPE_FORWARD_REAL, l28, 2, &y));
  CHECK_OK(lathe_value_shape(y, &s));
  CHECK(s.dtype == LATHE_DTYPE_COMPLEX64 && s.dims[0] == 2 && s.dims[1] == 5, "RFFT shape");
  lathe_builder_free(f.b);
}

TEST(bad_batch_norm) {
  fixture f = fx_new();
  lathe_value_t x = param(&f, TST_SHAPE(LATHE_DTYPE_FLOAT32, 4, 3, 2));
  lathe_value_t xi = param(&f, TST_SHAPE(LATHE_DTYPE_INT32, 4, 3));
  lathe_value_t x0 = param(&f, tst_shape0(LATHE_DTYPE_FLOAT32));
  lathe_value_t v3 = param(&f, TST_SHAPE(LATHE_DTYPE_FLOAT32, 3));
  lathe_value_t v4 = param(&f, TST_SHAPE(LATHE_DTYPE_FLOAT32, 4));
  lathe_value_t v3d = param(&f, TST_SHAPE(LATHE_DTYPE_FLOAT64, 3));
  lathe_value_t v31 = param(&f, TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 1));
  lathe_value_t gbad = param(&f, TST_SHAPE(LATHE_DTYPE_FLOAT32, 4, 3, 3));
  lathe_value_t y, outs[3];
  int before = f.fn->n_nodes;
  CHECK_ERR(lathe_batch_norm_for_inference(f.fn, xi, v3, v3, v3, v3, 1e-3f, 1, &y), INVALID_ARGUMENT,
            "BatchNormForInference: operand must be a float dtype");
  CHECK_ERR(lathe_batch_norm_for_inference(f.fn, x, v3, v3, v3, v3, 1e-3f, 3, &y), INVALID_ARGUMENT,
            "BatchNormForInference: feature_axis 3 out of range");
  CHECK_ERR(lathe_batch_norm_for_inference(f.fn, x, v3, v3, v3, v3, 1e-3f, -1, &y), INVALID_ARGUMENT, "feature_axis -1");
  CHECK_ERR(lathe_batch_norm_for_inference(f.fn, x, v3, v3, v4, v3, 1e-3f, 1, &y), INVALID_ARGUMENT,
            "BatchNormForInference: mean must be shaped [3]");
  CHECK_ERR(lathe_batch_norm_for_inference(f.fn, x, v3, v3d, v3, v3, 1e-3f, 1, &y), INVALID_ARGUMENT,
            "BatchNormForInference: offset dtype Float64");
  CHECK_ERR(lathe_batch_norm_for_inference(f.fn, x, v31, v3, v3, v3, 1e-3f, 1, &y), INVALID_ARGUMENT, "scale must be");
  CHECK_ERR(lathe_batch_norm_for_inference(f.fn, x, v3, v3, v3, v3, NAN, 1, &y), INVALID_ARGUMENT, "epsilon");
  CHECK_ERR(lathe_batch_norm_for_inference(f.fn, x, v3, v3, v3, v3, -1.f, 1, &y), INVALID_ARGUMENT, "epsilon");
  CHECK_ERR(lathe_batch_norm_for_inference(f.fn, x, v3, v3, v3, NULL, 1e-3f, 1, &y), INVALID_ARGUMENT,
            "BatchNormForInference");
  CHECK_ERR(lathe_batch_norm_for_inference(f.fn, x, v3, v3, v3, v3, 1e-3f, 1, NULL), INVALID_ARGUMENT,
            "BatchNormForInference: out is NULL");
  CHECK_ERR(lathe_batch_norm_for_training(f.fn, x0, v3, v3, 1e-3f, 0, outs), INVALID_ARGUMENT,
            "BatchNormForTraining: operand must have rank >= 1");
  CHECK_ERR(lathe_batch_norm_for_training(f.fn, x, v4, v3, 1e-3f, 1, outs), INVALID_ARGUMENT,
            "BatchNormForTraining: scale must be shaped [3]");
  CHECK_ERR(lathe_batch_norm_for_training(f.fn, x, v3, v3, 1e-3f, 1, NULL), INVALID_ARGUMENT, "BatchNormForTraining");
  CHECK_ERR(lathe_batch_norm_gradient(f.fn, x, v3, v3, v3, gbad, 1e-3f, 1, outs), INVALID_ARGUMENT,
            "BatchNormGradient: grad_output");
  CHECK_ERR(lathe_batch_norm_gradient(f.fn, x, v3, v3, v4, x, 1e-3f, 1, outs), INVALID_ARGUMENT,
            "BatchNormGradient: variance must be shaped [3]");
  CHECK_ERR(lathe_batch_norm_gradient(f.fn, x, v3, v3, v3, x, 1e-3f, 1, NULL), INVALID_ARGUMENT, "BatchNormGradient");
  CHECK(f.fn->n_nodes == before, "failed builders added %d nodes", f.fn->n_nodes - before);
  /* a value of another builder */
  fixture g = fx_new();
  lathe_value_t other = param(&g, TST_SHAPE(LATHE_DTYPE_FLOAT32, 3));
  CHECK_ERR(lathe_batch_norm_for_training(f.fn, x, other, v3, 1e-3f, 1, outs), INVALID_ARGUMENT,
            "BatchNormForTraining: operand 1 belongs to another builder");
  lathe_builder_free(g.b);
  /* valid: shapes of the results */
  CHECK_OK(lathe_batch_norm_for_training(f.fn, x, v3, v3, 0.f, 1, outs));
  lathe_shape s;
  CHECK_OK(lathe_value_shape(outs[1], &s));
  CHECK(s.rank == 1 && s.dims[0] == 3 && s.dtype == LATHE_DTYPE_FLOAT32, "batch mean shape");
  CHECK_OK(lathe_batch_norm_gradient(f.fn, x, v3, v3, v3, x, 1e-3f, 1, outs));
  CHECK_OK(lathe_value_shape(outs[0], &s));
  CHECK(s.rank == 3 && s.dims[2] == 2, "grad operand shape");
  lathe_builder_free(f.b);
}

TEST(numeric_capabilities) {
  lathe_backend_t be = tst_backend();
  CHECK(lathe_backend_supports_op(be, LATHE_OP_RNG_BIT_GENERATOR, LATHE_DTYPE_UINT64), "RNG on Uint64 state");
  CHECK(!lathe_backend_supports_op(be, LATHE_OP_RNG_BIT_GENERATOR, LATHE_DTYPE_INT64), "RNG on Int64 state");
  static const lathe_dtype fft_ok[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_COMPLEX64,
                                       LATHE_DTYPE_COMPLEX128};
  for (int i = 0; i < 4; i++) CHECK(lathe_backend_supports_op(be, LATHE_OP_FFT, fft_ok[i]), "FFT %d", i);
  CHECK(!lathe_backend_supports_op(be, LATHE_OP_FFT, LATHE_DTYPE_INT32), "FFT Int32");
  CHECK(!lathe_backend_supports_op(be, LATHE_OP_FFT, LATHE_DTYPE_FLOAT16), "FFT Float16");
  static const lathe_op bn[] = {LATHE_OP_BATCH_NORM_FOR_INFERENCE, LATHE_OP_BATCH_NORM_FOR_TRAINING,
                                LATHE_OP_BATCH_NORM_GRADIENT};
  for (int i = 0; i < 3; i++) {
    CHECK(lathe_backend_supports_op(be, bn[i], LATHE_DTYPE_FLOAT16), "%s Float16", lathe_op_name(bn[i]));
    CHECK(lathe_backend_supports_op(be, bn[i], LATHE_DTYPE_BFLOAT16), "%s BFloat16", lathe_op_name(bn[i]));
    CHECK(!lathe_backend_supports_op(be, bn[i], LATHE_DTYPE_INT8), "%s Int8", lathe_op_name(bn[i]));
    CHECK(!lathe_backend_supports_op(be, bn[i], LATHE_DTYPE_COMPLEX64), "%s Complex64", lathe_op_name(bn[i]));
  }
}
