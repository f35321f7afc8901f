/* mlp_train.c -- trains a 2-layer MLP classifier on a synthetic 3-class spiral through lathe's
 * C API alone: the forward pass, a hand-written backward pass and the SGD update are one
 * compiled graph; parameters are donated to each step, so they are updated in place.
 *
 *   build/mlp_train [config]      (config defaults to "lathe"; e.g. "lathe:cpu,threads=2") */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lathe.h"

enum { N = 600, D = 2, H = 64, C = 3, STEPS = 1500 };
static const float LR = 0.5f;

#define TRY(expr)                                                                                \
  do {                                                                                           \
    lathe_status_t st_ = (expr);                                                                 \
    if (st_) {                                                                                   \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, lathe_status_code_name(lathe_status_code_of(st_)), \
              lathe_status_message(st_));                                                        \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

static lathe_shape shape2(int64_t a, int64_t b) {
  lathe_shape s;
  int64_t d[2] = {a, b};
  TRY(lathe_shape_make(LATHE_DTYPE_FLOAT32, 2, d, &s));
  return s;
}
static lathe_shape shape1(int64_t a) {
  lathe_shape s;
  TRY(lathe_shape_make(LATHE_DTYPE_FLOAT32, 1, &a, &s));
  return s;
}

static lathe_value_t scalar(lathe_function_t fn, float v) {
  lathe_shape s;
  TRY(lathe_shape_make(LATHE_DTYPE_FLOAT32, 0, NULL, &s));
  lathe_value_t out;
  TRY(lathe_constant(fn, &s, &v, sizeof v, &out));
  return out;
}

/* a[m,k] x b[k,n]; ta/tb contract the other axis (a transposed / b transposed). */
static lathe_value_t matmul(lathe_function_t fn, lathe_value_t a, int ca, lathe_value_t b, int cb) {
  lathe_value_t out;
  TRY(lathe_dot_general(fn, a, &ca, 1, NULL, 0, b, &cb, 1, NULL, 0, NULL, &out));
  return out;
}

/* x[n, k] + bias[k] broadcast along rows. */
static lathe_value_t add_bias(lathe_function_t fn, lathe_value_t x, lathe_value_t bias) {
  lathe_shape xs;
  TRY(lathe_value_shape(x, &xs));
  int axis = 1;
  lathe_value_t bb, out;
  TRY(lathe_broadcast_in_dim(fn, bias, &xs, &axis, 1, &bb));
  TRY(lathe_add(fn, x, bb, &out));
  return out;
}

/* Row-wise x[n, k] op v[n] (v broadcast along columns). */
static lathe_value_t rowwise(lathe_function_t fn, lathe_op op, lathe_value_t x, lathe_value_t v) {
  lathe_shape xs;
  TRY(lathe_value_shape(x, &xs));
  int axis = 0;
  lathe_value_t vb, out;
  TRY(lathe_broadcast_in_dim(fn, v, &xs, &axis, 1, &vb));
  TRY(lathe_binary(fn, op, x, vb, &out));
  return out;
}

static lathe_value_t bin(lathe_function_t fn, lathe_op op, lathe_value_t a, lathe_value_t b) {
  lathe_value_t out;
  TRY(lathe_binary(fn, op, a, b, &out));
  return out;
}

static lathe_value_t reduce(lathe_function_t fn, lathe_op op, lathe_value_t x, int axis) {
  lathe_value_t out;
  TRY(lathe_reduce(fn, op, x, &axis, 1, &out));
  return out;
}

/* Forward pass to logits; also returns the hidden pre-activation and activation. */
static lathe_value_t forward(lathe_function_t fn, lathe_value_t x, lathe_value_t const p[4], lathe_value_t *pre,
                             lathe_value_t *hid) {
  *pre = add_bias(fn, matmul(fn, x, 1, p[0], 0), p[1]);
  *hid = bin(fn, LATHE_OP_MAX, *pre, scalar(fn, 0)); /* ReLU */
  return add_bias(fn, matmul(fn, *hid, 1, p[2], 0), p[3]);
}

static void spiral(float *x, int32_t *labels, float *onehot) {
  unsigned seed = 7;
  for (int i = 0; i < N; i++) {
    int c = i % C;
    float r = (float)(i / C) / (N / C);
    seed = seed * 1103515245u + 12345u;
    float noise = ((seed >> 16) % 1000 / 1000.0f - 0.5f) * 0.3f;
    float t = (float)c * 2.0944f + r * 4.0f + noise;
    x[i * D] = r * sinf(t);
    x[i * D + 1] = r * cosf(t);
    labels[i] = c;
    for (int k = 0; k < C; k++) onehot[i * C + k] = k == c;
  }
}

int main(int argc, char **argv) {
  const char *config = argc > 1 ? argv[1] : "lathe";
  lathe_backend_t be;
  TRY(lathe_backend_new(config, &be));
  printf("backend: %s (%s)\n", lathe_backend_config(be), lathe_backend_description(be));

  /* The training step: (W1, b1, W2, b2, x, y) -> (W1', b1', W2', b2', loss). */
  lathe_builder_t b;
  TRY(lathe_builder_new(be, "mlp_step", &b));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape pshapes[4] = {shape2(D, H), shape1(H), shape2(H, C), shape1(C)};
  const char *pnames[4] = {"w1", "b1", "w2", "b2"};
  lathe_value_t p[4], x, y, pre, hid;
  for (int i = 0; i < 4; i++) TRY(lathe_parameter(fn, pnames[i], &pshapes[i], &p[i]));
  lathe_shape xs = shape2(N, D), ys = shape2(N, C);
  TRY(lathe_parameter(fn, "x", &xs, &x));
  TRY(lathe_parameter(fn, "y", &ys, &y));
  lathe_value_t logits = forward(fn, x, p, &pre, &hid);
  /* softmax cross-entropy, stabilised by the row max */
  lathe_value_t shifted = rowwise(fn, LATHE_OP_SUB, logits, reduce(fn, LATHE_OP_REDUCE_MAX, logits, 1));
  lathe_value_t e, logsum, logp, tmp;
  TRY(lathe_exp(fn, shifted, &e));
  TRY(lathe_log(fn, reduce(fn, LATHE_OP_REDUCE_SUM, e, 1), &logsum));
  logp = rowwise(fn, LATHE_OP_SUB, shifted, logsum);
  int all[2] = {0, 1};
  TRY(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, bin(fn, LATHE_OP_MUL, y, logp), all, 2, &tmp));
  lathe_value_t loss = bin(fn, LATHE_OP_MUL, tmp, scalar(fn, -1.0f / N));
  /* backward: dlogits = (softmax - y) / N */
  lathe_value_t prob;
  TRY(lathe_exp(fn, logp, &prob));
  lathe_value_t dlogits = bin(fn, LATHE_OP_MUL, bin(fn, LATHE_OP_SUB, prob, y), scalar(fn, 1.0f / N));
  lathe_value_t g[4];
  g[2] = matmul(fn, hid, 0, dlogits, 0); /* hid^T dlogits */
  g[3] = reduce(fn, LATHE_OP_REDUCE_SUM, dlogits, 0);
  lathe_value_t dhid = matmul(fn, dlogits, 1, p[2], 1); /* dlogits W2^T */
  lathe_value_t active, zeros, dpre;
  TRY(lathe_greater_than(fn, pre, bin(fn, LATHE_OP_MUL, pre, scalar(fn, 0)), &active));
  TRY(lathe_sub(fn, dhid, dhid, &zeros));
  TRY(lathe_where(fn, active, dhid, zeros, &dpre));
  g[0] = matmul(fn, x, 0, dpre, 0);
  g[1] = reduce(fn, LATHE_OP_REDUCE_SUM, dpre, 0);
  lathe_value_t outs[5];
  for (int i = 0; i < 4; i++) outs[i] = bin(fn, LATHE_OP_SUB, p[i], bin(fn, LATHE_OP_MUL, g[i], scalar(fn, LR)));
  outs[4] = loss;
  TRY(lathe_function_return(fn, outs, 5));
  lathe_executable_t step;
  TRY(lathe_builder_compile(b, &step));
  lathe_builder_free(b);

  /* The prediction graph: (W1, b1, W2, b2, x) -> argmax class. */
  TRY(lathe_builder_new(be, "mlp_predict", &b));
  fn = lathe_builder_main(b);
  for (int i = 0; i < 4; i++) TRY(lathe_parameter(fn, pnames[i], &pshapes[i], &p[i]));
  TRY(lathe_parameter(fn, "x", &xs, &x));
  lathe_value_t cls;
  TRY(lathe_arg_min_max(fn, forward(fn, x, p, &pre, &hid), 1, LATHE_DTYPE_INT32, false, &cls));
  TRY(lathe_function_return(fn, &cls, 1));
  lathe_executable_t predict;
  TRY(lathe_builder_compile(b, &predict));
  lathe_builder_free(b);

  /* Data and initial parameters (uniform He-style init, fixed seed). */
  static float xd[N * D], yd[N * C];
  static int32_t labels[N], pred[N];
  spiral(xd, labels, yd);
  lathe_buffer_t bufs[6], out[5];
  unsigned seed = 42;
  for (int i = 0; i < 4; i++) {
    int64_t n = lathe_shape_num_elements(&pshapes[i]);
    float *init = calloc((size_t)n, sizeof(float));
    float scale = i % 2 ? 0.0f : sqrtf(6.0f / (float)pshapes[i].dims[0]);
    for (int64_t k = 0; k < n; k++) {
      seed = seed * 1103515245u + 12345u;
      init[k] = ((float)((seed >> 8) % 65536) / 65536.0f * 2 - 1) * scale;
    }
    TRY(lathe_buffer_from_host(be, 0, &pshapes[i], init, (size_t)n * sizeof(float), &bufs[i]));
    free(init);
  }
  TRY(lathe_buffer_from_host(be, 0, &xs, xd, sizeof xd, &bufs[4]));
  TRY(lathe_buffer_from_host(be, 0, &ys, yd, sizeof yd, &bufs[5]));
  bool donate[6] = {true, true, true, true, false, false};

  for (int s = 1; s <= STEPS; s++) {
    TRY(lathe_executable_execute(step, bufs, donate, 6, 0, out, 5));
    for (int i = 0; i < 4; i++) {
      lathe_buffer_free(bufs[i]); /* donated: only the handle is left */
      bufs[i] = out[i];
    }
    float l;
    TRY(lathe_buffer_to_host(out[4], &l, sizeof l));
    lathe_buffer_free(out[4]);
    if (s == 1 || s % 150 == 0) printf("step %4d  loss %.4f\n", s, l);
  }
  lathe_buffer_t cls_buf;
  TRY(lathe_executable_execute(predict, bufs, NULL, 5, 0, &cls_buf, 1));
  TRY(lathe_buffer_to_host(cls_buf, pred, sizeof pred));
  int correct = 0;
  for (int i = 0; i < N; i++) correct += pred[i] == labels[i];
  printf("accuracy %.1f%% (%d of %d; chance is %.1f%%)\n", 100.0 * correct / N, correct, N, 100.0 / C);
  lathe_buffer_free(cls_buf);
  for (int i = 0; i < 6; i++) lathe_buffer_free(bufs[i]);
  lathe_executable_free(step);
  lathe_executable_free(predict);
  lathe_backend_free(be);
  return correct * 2 > N ? 0 : 1;
}
