/* test_core.c -- status objects, the dtype table, half conversions, shapes, backend configs,
 * buffers, and execution of graphs that need no kernel (parameters, constants, outputs). */
#include "core/core.h"
#include "runtime/runtime.h"
#include "testing.h"

TEST(status_basics) {
  lathe_status_t s = lathe_status_new(LATHE_STATUS_UNIMPLEMENTED, "Op %s: %d", "X", 3);
  CHECK(lathe_status_code_of(s) == LATHE_STATUS_UNIMPLEMENTED, "code");
  CHECK(strcmp(lathe_status_message(s), "Op X: 3") == 0, "message: %s", lathe_status_message(s));
  s = lathe_status_annotate(s, "ctx");
  CHECK(strcmp(lathe_status_message(s), "ctx: Op X: 3") == 0, "annotated: %s", lathe_status_message(s));
  lathe_status_free(s);
  lathe_status_free(NULL);
  CHECK(lathe_status_code_of(NULL) == LATHE_STATUS_OK && strcmp(lathe_status_message(NULL), "") == 0, "NULL is OK");
}

TEST(dtype_table) {
  CHECK(lathe_dtype_bits(LATHE_DTYPE_FLOAT32) == 32 && lathe_dtype_bits(LATHE_DTYPE_INT4) == 4, "bits");
  CHECK(lathe_dtype_bits(LATHE_DTYPE_COMPLEX128) == 128 && lathe_dtype_bits(LATHE_DTYPE_UINT1) == 1, "bits");
  CHECK(strcmp(lathe_dtype_name(LATHE_DTYPE_BFLOAT16), "BFloat16") == 0, "name");
  CHECK(!lathe_dtype_is_valid((lathe_dtype)16) && !lathe_dtype_is_valid((lathe_dtype)99), "FP8 ids are not (yet) valid");
  CHECK(tst_n_all_dtypes == 21, "21 dtypes, got %d", tst_n_all_dtypes);
  CHECK(lathe_op_from_name("DotGeneral") == LATHE_OP_DOT_GENERAL, "op by name");
  CHECK(lathe_op_from_name("Nope") == LATHE_OP_COUNT, "unknown op");
  CHECK(strcmp(lathe_op_name(LATHE_OP_ADD), "Add") == 0, "op name");
}

TEST(half_conversions) {
  const float vals[] = {0.f, -0.f, 1.f, -2.5f, 65504.f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
    CHECK(lathe_f16_to_f32(lathe_f32_to_f16(vals[i])) == vals[i], "f16 round trip %g", vals[i]);
  CHECK(lathe_f32_to_f16(1.0f) == 0x3c00, "f16 1.0");
  CHECK(lathe_f32_to_f16(65520.f) == 0x7c00, "f16 overflow to inf");
  CHECK(lathe_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00, "f16 ties to even (down)");
  CHECK(lathe_f32_to_f16(1.0f + 3.0f / 2048) == 0x3c02, "f16 ties to even (up)");
  CHECK(isnan(lathe_f16_to_f32(lathe_f32_to_f16(NAN))), "f16 nan");
  CHECK(lathe_f32_to_bf16(1.0f) == 0x3f80 && lathe_bf16_to_f32(0x3f80) == 1.0f, "bf16 1.0");
  CHECK(lathe_f32_to_bf16(1.00390625f) == 0x3f80, "bf16 ties to even");
  CHECK(isnan(lathe_bf16_to_f32(lathe_f32_to_bf16(NAN))), "bf16 nan");
}

TEST(shapes) {
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_INT4, 3, 5);
  CHECK(lathe_shape_num_elements(&s) == 15 && lathe_shape_byte_size(&s) == 8, "packed byte size %lld", (long long)lathe_shape_byte_size(&s));
  s.dims[0] = -1;
  s.axis_names[0] = "batch";
  CHECK(lathe_shape_is_dynamic(&s) && lathe_shape_num_elements(&s) == -1, "dynamic");
  lathe_shape big;
  int64_t dims[17] = {0};
  CHECK_ERR(lathe_shape_make(LATHE_DTYPE_FLOAT32, 17, dims, &big), INVALID_ARGUMENT, "rank");
}

TEST(backend_configs) {
  lathe_backend_t b = NULL;
  CHECK_OK(lathe_backend_new("lathe:cpu,threads=3", &b));
  if (b) CHECK(strcmp(lathe_backend_config(b), "lathe:cpu,threads=3") == 0, "config %s", lathe_backend_config(b));
  lathe_backend_free(b);
  b = NULL;
  CHECK_OK(lathe_backend_new("lathe", &b));
  lathe_backend_free(b);
  CHECK_ERR(lathe_backend_new("lathe:cpu,fast=1", &b), INVALID_ARGUMENT, "threads=N");
  CHECK_ERR(lathe_backend_new("lathe:cpu,threads=0", &b), INVALID_ARGUMENT, "threads");
  CHECK_ERR(lathe_backend_new("lathe:tpu", &b), INVALID_ARGUMENT, "known: cuda, cpu");
  CHECK_ERR(lathe_backend_new("xla", &b), INVALID_ARGUMENT, "unknown backend");
  CHECK_ERR(lathe_backend_new("lathe", NULL), INVALID_ARGUMENT, "out_backend");
}

/* Plain "lathe" with options resolves its device first, then checks the options against it. */
TEST(backend_option_routing) {
  lathe_backend_t b = NULL;
  lathe_status_t st = lathe_cuda_probe();
  bool gpu = st == NULL;
  lathe_status_free(st);
  st = lathe_backend_new("lathe:threads=2", &b);
  if (gpu) {
    CHECK(st && strstr(lathe_status_message(st), "picked lathe:cuda") &&
              strstr(lathe_status_message(st), "unknown option \"threads=2\""),
          "lathe:threads=2 with a GPU: %s", lathe_status_message(st));
  } else {
    CHECK(st == NULL, "lathe:threads=2 without a GPU picks the CPU: %s", lathe_status_message(st));
    if (b) CHECK(strcmp(lathe_backend_config(b), "lathe:cpu,threads=2") == 0, "config %s", lathe_backend_config(b));
    lathe_backend_free(b);
    b = NULL;
    /* a CPU option that does not parse names the device picked and why */
    CHECK_ERR(lathe_backend_new("lathe:threads=0", &b), INVALID_ARGUMENT, "picked lathe:cpu (lathe:cuda unavailable");
    CHECK_ERR(lathe_backend_new("lathe:bogus=1", &b), INVALID_ARGUMENT, "known options: threads=N, devices=N");
  }
  lathe_status_free(st);
  /* a space for a comma: the device's own message, naming the malformed part */
  CHECK_ERR(lathe_backend_new("lathe:cpu threads=2", &b), INVALID_ARGUMENT,
            "lathe:cpu: malformed option \" threads=2\" after the device name");
  CHECK_ERR(lathe_backend_new("lathe:cpu,threads=2 fuse=0", &b), INVALID_ARGUMENT, "separated by commas");
  CHECK_ERR(lathe_backend_new("lathe:cpu,isa=sse", &b), INVALID_ARGUMENT, "isa=auto|baseline|avx2|avx512");
  CHECK_ERR(lathe_backend_new("lathe:cpu,threads", &b), INVALID_ARGUMENT, "needs a value");
  CHECK_ERR(lathe_backend_new("lathe:cuda threads=2", &b), INVALID_ARGUMENT, "lathe:cuda: malformed option");
  CHECK_ERR(lathe_backend_new("lathe:gpu", &b), INVALID_ARGUMENT, "known: cuda, cpu");
  CHECK_ERR(lathe_backend_new("Lathe", &b), INVALID_ARGUMENT, "known: \"lathe\", \"lathe:cuda\", \"lathe:cpu\"");
  /* the options table, as the Go layer and the docs read it */
  lathe_option_info info;
  int n_cpu = 0, i = 0;
  for (; lathe_backend_option(i, &info); i++) {
    CHECK(info.name && *info.name && info.doc && *info.doc && info.def && *info.def, "option %d documented", i);
    if (!strcmp(info.config, "lathe:cpu")) n_cpu++;
  }
  CHECK(n_cpu == lathe_cpu_n_options && i >= lathe_cpu_n_options + lathe_cuda_n_options, "%d options, %d of lathe:cpu", i,
        n_cpu);
  CHECK(!lathe_backend_option(i, &info) && !lathe_backend_option(-1, &info), "past the last");
  /* the parser alone: values land at their spec's index */
  lathe_option_value v[LATHE_MAX_OPTIONS];
  CHECK_OK(lathe_options_parse("lathe:cpu", lathe_cpu_options, lathe_cpu_n_options, "isa=baseline,,threads=7", v));
  CHECK(v[0].set && v[0].value == 7 && !v[1].set && v[4].set && v[4].value == 1 && !strcmp(v[4].text, "baseline"),
        "parsed values");
}

TEST(buffers) {
  lathe_backend_t b = tst_backend();
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 3);
  float src[6] = {1, 2, 3, 4, 5, 6}, dst[6] = {0};
  lathe_buffer_t buf = NULL;
  CHECK_OK(lathe_buffer_from_host(b, 0, &s, src, sizeof src, &buf));
  CHECK_OK(lathe_buffer_to_host(buf, dst, sizeof dst));
  CHECK(memcmp(src, dst, sizeof src) == 0, "round trip");
  CHECK_ERR(lathe_buffer_to_host(buf, dst, 4), INVALID_ARGUMENT, "BufferToHost");
  CHECK_ERR(lathe_buffer_from_host(b, 0, &s, src, 8, &buf), INVALID_ARGUMENT, "BufferFromHost");
  CHECK_ERR(lathe_buffer_from_host(b, 1, &s, src, sizeof src, &buf), INVALID_ARGUMENT, "device 1");
  void *p = NULL;
  CHECK_OK(lathe_buffer_data(buf, &p));
  CHECK(p && ((uintptr_t)p % 64) == 0, "aligned shared data");
  lathe_buffer_t sh = NULL;
  CHECK_OK(lathe_buffer_new_shared(b, 0, &s, &sh, &p));
  if (sh) {
    ((float *)p)[5] = 42;
    CHECK_OK(lathe_buffer_to_host(sh, dst, sizeof dst));
    CHECK(dst[5] == 42, "shared write visible");
  }
  lathe_buffer_free(sh);
  lathe_buffer_free(buf);
  lathe_buffer_free(NULL);
}

/* main(x, y) = (y, const, x): no kernels involved. */
TEST(execute_passthrough_and_donation) {
  lathe_backend_t be = tst_backend();
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("passthrough", &fn);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_INT32, 2);
  lathe_value_t x, y, c;
  int32_t cv[2] = {7, 8};
  x = tst_param(fn, "x", s);
  y = tst_param(fn, "y", s);
  CHECK_OK(lathe_constant(fn, &s, cv, sizeof cv, &c));
  lathe_value_t outs[3] = {y, c, x};
  CHECK_OK(lathe_function_return(fn, outs, 3));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b); /* the executable keeps the graph alive */
  if (!e) return;
  int32_t xv[2] = {1, 2}, yv[2] = {3, 4}, got[2];
  lathe_buffer_t in[2], out[3] = {0};
  CHECK_OK(lathe_buffer_from_host(be, 0, &s, xv, sizeof xv, &in[0]));
  CHECK_OK(lathe_buffer_from_host(be, 0, &s, yv, sizeof yv, &in[1]));
  bool donate[2] = {true, false};
  CHECK_OK(lathe_executable_execute(e, in, donate, 2, 0, out, 3));
  CHECK(lathe_buffer_is_donated(in[0]) && !lathe_buffer_is_donated(in[1]), "donation marks the buffer");
  CHECK_OK(lathe_buffer_to_host(out[0], got, sizeof got));
  CHECK(got[0] == 3 && got[1] == 4, "out0");
  CHECK_OK(lathe_buffer_to_host(out[1], got, sizeof got));
  CHECK(got[0] == 7 && got[1] == 8, "out1 const");
  CHECK_OK(lathe_buffer_to_host(out[2], got, sizeof got));
  CHECK(got[0] == 1 && got[1] == 2, "out2");
  void *p1, *p2;
  CHECK_OK(lathe_buffer_data(out[0], &p1));
  CHECK_OK(lathe_buffer_data(in[1], &p2));
  CHECK(p1 != p2, "an output never shares memory with a live input");
  CHECK_ERR(lathe_buffer_to_host(in[0], got, sizeof got), FAILED_PRECONDITION, "donated");
  CHECK_ERR(lathe_executable_execute(e, in, NULL, 2, 0, out, 3), FAILED_PRECONDITION, "already donated");
  for (int k = 0; k < 3; k++) lathe_buffer_free(out[k]);
  lathe_buffer_free(in[0]);
  lathe_buffer_free(in[1]);
  lathe_executable_free(e);
}
