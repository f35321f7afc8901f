/* test_cuda.c -- lathe:cuda where there may be no GPU: the error that names what is missing,
 * plain "lathe" falling back to the CPU, and every kernel source of every CUDA family compiled
 * by NVRTC for Hopper (sm_90) and Ampere (sm_80) -- NVRTC needs no GPU, so a code generation
 * error is caught here (LATHE_NVRTC_LIBRARY names libnvrtc.so when it is not on the library
 * path; scripts/test.sh installs it from the nvidia-cuda-nvrtc wheel). */
#include "cuda/cuda.h"
#include "cuda_testing.h"
#include "testing.h"

TEST(cuda_unavailable_or_usable) {
  lathe_backend_t b = NULL;
  lathe_status_t st = lathe_backend_new("lathe:cuda", &b);
  if (st) {
    CHECK(lathe_status_code_of(st) == LATHE_STATUS_UNAVAILABLE && strstr(lathe_status_message(st), "lathe:cuda"),
          "no usable GPU: UNAVAILABLE naming lathe:cuda, got %s: %s", lathe_status_code_name(lathe_status_code_of(st)),
          lathe_status_message(st));
    printf("note: lathe:cuda here: %s\n", lathe_status_message(st));
    lathe_status_free(st);
    /* plain lathe takes the next device */
    CHECK_OK(lathe_backend_new("lathe", &b));
    if (b) CHECK(strncmp(lathe_backend_config(b), "lathe:cpu", 9) == 0, "plain lathe falls back to %s", lathe_backend_config(b));
  } else {
    CHECK(lathe_backend_num_devices(b) >= 1, "a usable GPU");
    printf("note: %s\n", lathe_backend_description(b));
  }
  lathe_backend_free(b);
  CHECK_ERR(lathe_backend_new("lathe:cuda,bogus=1", &b), INVALID_ARGUMENT, "known options: device=N, tf32=0|1, fuse=0|1");
}

typedef struct {
  int compiled, cc;
} compile_ctx;

static void compile_one(void *vctx, const char *label, const char *source) {
  compile_ctx *c = vctx;
  void *cubin = NULL;
  size_t size = 0;
  lathe_status_t st = lathe_cuda_compile_source(source, c->cc, &cubin, &size);
  CHECK(st == NULL && size > 0, "NVRTC sm_%d: %s: %s", c->cc, label, lathe_status_message(st));
  lathe_status_free(st);
  free(cubin);
  c->compiled++;
}

TEST(cuda_kernels_compile_with_nvrtc) {
  const lcu_api *api;
  lathe_status_t st = lathe_cuda_load_nvrtc(&api);
  if (st) {
    char why[512];
    snprintf(why, sizeof why, "%s", lathe_status_message(st));
    lathe_status_free(st);
    SKIP("no NVRTC: %s", why);
  }
  int ccs[] = {90, 80};
  for (int i = 0; i < 2; i++) {
    compile_ctx c = {0, ccs[i]};
    lathe_cuda_each_source(compile_one, &c);
    printf("note: NVRTC compiled %d kernel sources for sm_%d\n", c.compiled, ccs[i]);
    CHECK(c.compiled > 0, "some sources");
  }
  /* a broken source gives NVRTC's log in the error */
  void *cubin = NULL;
  size_t size = 0;
  CHECK_ERR(lathe_cuda_compile_source("extern \"C\" __global__ void k() { undefined_thing(); }", 90, &cubin, &size),
            INTERNAL, "undefined_thing");
  free(cubin);
}

/* ---- on a GPU: graphs run on lathe:cuda and on lathe:cpu must agree ---- */
TEST(cuda_smoke) {
  if (!gpu()) SKIP("no usable GPU");
  lathe_function_t fn;
  /* a fused chain with scalars and a row broadcast, a transpose, an iota and a reshape */
  lathe_builder_t b = tst_builder("smoke", &fn);
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 37, 129), ms = TST_SHAPE(LATHE_DTYPE_FLOAT32, 37);
  lathe_value_t x = tst_param(fn, "x", xs), m = tst_param(fn, "m", ms), mb, t, u, v, y, tr, io, outs[3];
  int axis = 0, perm[2] = {1, 0};
  float half = 0.5f;
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  lathe_value_t c;
  CHECK_OK(lathe_constant(fn, &s0, &half, sizeof half, &c));
  CHECK_OK(lathe_broadcast_in_dim(fn, m, &xs, &axis, 1, &mb));
  CHECK_OK(lathe_sub(fn, x, mb, &t));
  CHECK_OK(lathe_mul(fn, t, c, &u));
  CHECK_OK(lathe_tanh(fn, u, &v));
  CHECK_OK(lathe_max(fn, v, x, &y));
  CHECK_OK(lathe_transpose(fn, y, perm, 2, &tr));
  lathe_shape is = TST_SHAPE(LATHE_DTYPE_INT32, 4, 5);
  CHECK_OK(lathe_iota(fn, &is, 1, &io));
  outs[0] = y, outs[1] = tr, outs[2] = io;
  CHECK_OK(lathe_function_return(fn, outs, 3));
  float *xv = malloc(sizeof(float) * 37 * 129), mv[37];
  tst_fill(xv, LATHE_DTYPE_FLOAT32, 37 * 129, 1);
  tst_fill(mv, LATHE_DTYPE_FLOAT32, 37, 2);
  const void *ins[2] = {xv, mv};
  agree("chain+transpose+iota", b, ins, 2, 1e-5);
  free(xv);
  lathe_builder_free(b);
  /* every elementwise op and dtype the GPU supports is in the conformance run (test_ops -b) */
}

/* Parameter and Constant are bound by the executor, so they are capabilities for every dtype
 * (GoMLX's compliance suite skips whole tests when Constant is missing). */
TEST(cuda_leaf_capabilities) {
  for (int d = 0; d < tst_n_all_dtypes; d++) {
    lathe_dtype dt = tst_all_dtypes[d];
    CHECK(lathe_cuda_supports_op(LATHE_OP_PARAMETER, dt) && lathe_cuda_supports_op(LATHE_OP_CONSTANT, dt),
          "Parameter and Constant of %s", lathe_dtype_name(dt));
    /* Iota as on lathe:cpu, sub-byte integers included (made in bytes, then packed) */
    CHECK(lathe_cuda_supports_op(LATHE_OP_IOTA, dt) == lathe_backend_supports_op(tst_backend(), LATHE_OP_IOTA, dt),
          "Iota of %s", lathe_dtype_name(dt));
  }
}
