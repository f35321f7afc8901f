/* fusion.c -- elementwise fusion against the unfused interpreter: random chains of elementwise
 * ops (scalars mixed in, intermediates returned as extra outputs so some values escape the
 * fused run, inputs donated so results land in dying operands) over tensors of several tiles,
 * run on lathe:cpu (or -b's backend) and lathe:cpu,fuse=0; the results must be bit-identical. */
#include "testing.h"

static uint32_t seed;
static uint32_t next(void) {
  seed ^= seed << 13, seed ^= seed >> 17, seed ^= seed << 5;
  return seed;
}

/* Builds a chain of n_ops ops over params a, b (Float32 of shape s) on backend be; returns the
 * compiled executable (outputs: the last value, then up to two intermediates). */
static lathe_executable_t build_chain(lathe_backend_t be, const lathe_shape *s, int n_ops, uint32_t chain_seed, int *n_out) {
  seed = chain_seed;
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "chain", &b));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_value_t vals[64], outs[3];
  int n = 0, n_o = 1;
  CHECK_OK(lathe_parameter(fn, "a", s, &vals[n++]));
  CHECK_OK(lathe_parameter(fn, "b", s, &vals[n++]));
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  float half = 0.5f;
  lathe_value_t c;
  CHECK_OK(lathe_constant(fn, &s0, &half, sizeof half, &c));
  for (int k = 0; k < n_ops; k++) {
    lathe_value_t x = vals[n - 1 - next() % (n < 3 ? n : 3)], y = vals[next() % n], r = NULL;
    switch (next() % 9) {
      case 0: CHECK_OK(lathe_add(fn, x, y, &r)); break;
      case 1: CHECK_OK(lathe_mul(fn, x, c, &r)); break;
      case 2: CHECK_OK(lathe_sub(fn, x, y, &r)); break;
      case 3: CHECK_OK(lathe_max(fn, x, y, &r)); break;
      case 4: CHECK_OK(lathe_tanh(fn, x, &r)); break;
      case 5: CHECK_OK(lathe_neg(fn, x, &r)); break;
      case 6: {
        lathe_value_t cond;
        CHECK_OK(lathe_greater_than(fn, x, y, &cond));
        CHECK_OK(lathe_where(fn, cond, x, c, &r));
        break;
      }
      case 7: {
        lathe_value_t d;
        CHECK_OK(lathe_convert_dtype(fn, x, LATHE_DTYPE_FLOAT64, &d));
        CHECK_OK(lathe_exp(fn, d, &d));
        CHECK_OK(lathe_convert_dtype(fn, d, LATHE_DTYPE_FLOAT32, &r));
        break;
      }
      default: CHECK_OK(lathe_abs(fn, x, &r)); break;
    }
    if (!r) break;
    vals[n++] = r;
    if (n_o < 3 && next() % 5 == 0) outs[n_o++] = r; /* an intermediate escapes */
  }
  outs[0] = vals[n - 1];
  if (be == tst_backend()) tst_row_graph(b); /* the row under test (-o) */
  CHECK_OK(lathe_function_return(fn, outs, n_o));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  *n_out = n_o;
  return e;
}

static void run_chain(lathe_backend_t be, lathe_executable_t e, const lathe_shape *s, const float *a, const float *b,
                      int n_out, float **got) {
  size_t nb = (size_t)lathe_shape_byte_size(s);
  lathe_buffer_t in[2], out[3] = {0};
  CHECK_OK(lathe_buffer_from_host(be, 0, s, a, nb, &in[0]));
  CHECK_OK(lathe_buffer_from_host(be, 0, s, b, nb, &in[1]));
  bool donate[2] = {true, true};
  CHECK_OK(lathe_executable_execute(e, in, donate, 2, 0, out, n_out));
  for (int k = 0; k < n_out; k++) {
    lathe_shape os;
    got[k] = NULL;
    if (!out[k] || lathe_buffer_shape(out[k], &os)) continue;
    got[k] = malloc((size_t)lathe_shape_byte_size(&os));
    CHECK_OK(lathe_buffer_to_host(out[k], got[k], (size_t)lathe_shape_byte_size(&os)));
    lathe_buffer_free(out[k]);
  }
  lathe_buffer_free(in[0]);
  lathe_buffer_free(in[1]);
}

TEST(fusion_matches_unfused) {
  lathe_backend_t unfused;
  CHECK_OK(lathe_backend_new("lathe:cpu,fuse=0", &unfused));
  const int64_t sizes[][2] = {{3, 5000}, {1, 4096}, {2, 3}, {7, 9001}};
  for (int si = 0; si < 4; si++) {
    lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, sizes[si][0], sizes[si][1]);
    int64_t n = lathe_shape_num_elements(&s);
    float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
    tst_fill(a, LATHE_DTYPE_FLOAT32, n, 1 + (unsigned)si);
    tst_fill(b, LATHE_DTYPE_FLOAT32, n, 7 + (unsigned)si);
    for (uint32_t cs = 1; cs <= 12; cs++) {
      int n_out = 0, n_out2 = 0;
      tst_row_begin();
      lathe_executable_t ef = build_chain(tst_backend(), &s, 2 + (int)cs % 9, cs * 2654435761u, &n_out);
      lathe_executable_t eu = build_chain(unfused, &s, 2 + (int)cs % 9, cs * 2654435761u, &n_out2);
      if (!ef || !eu) {
        lathe_executable_free(ef);
        lathe_executable_free(eu);
        continue;
      }
      float *gf[3], *gu[3];
      run_chain(tst_backend(), ef, &s, a, b, n_out, gf);
      run_chain(unfused, eu, &s, a, b, n_out2, gu);
      for (int k = 0; k < n_out; k++) {
        CHECK(gf[k] && gu[k] && memcmp(gf[k], gu[k], sizeof(float) * (size_t)n) == 0,
              "chain %u on %lldx%lld: output %d differs from the unfused run", cs, (long long)s.dims[0],
              (long long)s.dims[1], k);
        free(gf[k]);
        free(gu[k]);
      }
      lathe_executable_free(ef);
      lathe_executable_free(eu);
    }
    free(a);
    free(b);
  }
  lathe_backend_free(unfused);
}

TEST(fusion_option) {
  lathe_backend_t be = NULL;
  CHECK_OK(lathe_backend_new("lathe:cpu,threads=2,fuse=0", &be));
  if (be) CHECK(strcmp(lathe_backend_config(be), "lathe:cpu,threads=2,fuse=0") == 0, "config %s", lathe_backend_config(be));
  lathe_backend_free(be);
  CHECK_ERR(lathe_backend_new("lathe:cpu,fuse=2", &be), INVALID_ARGUMENT, "fuse=0|1");
}
