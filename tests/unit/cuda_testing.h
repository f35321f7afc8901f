/* cuda_testing.h -- GPU-vs-CPU checks for the lathe:cuda tests (tests/unit/test_cuda*.c): the
 * shared lathe:cuda backend (NULL without a usable GPU: the tests SKIP), and agree(), which runs
 * one builder's graph on lathe:cuda and on lathe:cpu with the same inputs and compares every
 * output. */
#ifndef LATHE_CUDA_TESTING_H
#define LATHE_CUDA_TESTING_H

#include "testing.h"

/* *b made from config on the first call (NULL when it cannot be), kept for the process. */
static inline lathe_backend_t gpu_once(const char *config, lathe_backend_t *b, bool *tried) {
  if (!*tried) {
    *tried = true;
    lathe_status_free(lathe_backend_new(config, b));
  }
  return *b;
}

static inline lathe_backend_t gpu(void) {
  static lathe_backend_t b;
  static bool tried;
  /* LATHE_TEST_CUDA: another configuration for the tests that take the default one (to try
   * options before they become defaults) */
  const char *c = getenv("LATHE_TEST_CUDA");
  return gpu_once(c && *c ? c : "lathe:cuda", &b, &tried);
}

/* lathe:cuda,tf32=1: Float32 products on TF32 tensor cores (and the kernels only it runs). */
static inline lathe_backend_t gpu_tf32(void) {
  static lathe_backend_t b;
  static bool tried;
  return gpu_once("lathe:cuda,tf32=1", &b, &tried);
}

/* Compares outputs go (GPU) with co (CPU), each read back (bit-exact for integers, tolerance for
 * floats); labels name them "<label> output k". */
static inline void agree_outputs(const char *label, lathe_buffer_t *go, lathe_buffer_t *co, int n_out, double tol) {
  for (int k = 0; k < n_out && go[k] && co[k]; k++) {
    lathe_shape s;
    CHECK_OK(lathe_buffer_shape(co[k], &s));
    size_t nb = (size_t)lathe_shape_byte_size(&s);
    void *a = tst_alloc_for(&s), *c = tst_alloc_for(&s);
    lathe_status_t r = lathe_buffer_to_host(go[k], a, nb);
    CHECK(!r, "%s: GPU read back: %s", label, lathe_status_message(r));
    lathe_status_free(r);
    CHECK_OK(lathe_buffer_to_host(co[k], c, nb));
    char l2[192];
    snprintf(l2, sizeof l2, "%s output %d", label, k);
    tst_expect_close(l2, a, c, s.dtype, lathe_shape_num_elements(&s), tol);
    free(a);
    free(c);
  }
}

/* Runs b's graph on GPU backend g and on the CPU with the same inputs (Float32 unless given) and
 * compares every output (bit-exact for integers, tolerance for floats). */
static inline void agree_on(lathe_backend_t g, const char *label, lathe_builder_t b, const void *const *ins, int n_in,
                            double tol) {
  lathe_executable_t eg = NULL, ec = NULL;
  CHECK_OK(lathe_builder_compile_for(b, g, &eg));
  CHECK_OK(lathe_builder_compile_for(b, tst_backend(), &ec));
  if (!eg || !ec) {
    lathe_executable_free(eg);
    lathe_executable_free(ec);
    return;
  }
  int n_out = lathe_executable_num_outputs(ec);
  lathe_buffer_t gi[8] = {0}, ci[8] = {0}, go[8] = {0}, co[8] = {0};
  for (int i = 0; i < n_in; i++) {
    lathe_shape s;
    CHECK_OK(lathe_executable_input_shape(ec, i, &s));
    size_t nb = (size_t)lathe_shape_byte_size(&s);
    CHECK_OK(lathe_buffer_from_host(g, 0, &s, ins[i], nb, &gi[i]));
    CHECK_OK(lathe_buffer_from_host(tst_backend(), 0, &s, ins[i], nb, &ci[i]));
  }
  lathe_status_t st = lathe_executable_execute(eg, gi, NULL, n_in, 0, go, n_out);
  CHECK(!st, "%s: GPU run: %s", label, lathe_status_message(st));
  lathe_status_free(st);
  CHECK_OK(lathe_executable_execute(ec, ci, NULL, n_in, 0, co, n_out));
  agree_outputs(label, go, co, n_out, tol);
  for (int i = 0; i < 8; i++) {
    lathe_buffer_free(gi[i]);
    lathe_buffer_free(ci[i]);
    lathe_buffer_free(go[i]);
    lathe_buffer_free(co[i]);
  }
  lathe_executable_free(eg);
  lathe_executable_free(ec);
}

static inline void agree(const char *label, lathe_builder_t b, const void *const *ins, int n_in, double tol) {
  agree_on(gpu(), label, b, ins, n_in, tol);
}

#endif
