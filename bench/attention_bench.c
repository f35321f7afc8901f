/* attention_bench.c -- the fused attention ops against their decomposition into standard lathe
 * ops, both measured in the same run: median wall time of repeated executions and the ratio.
 *
 *   make BUILD=build-attn bench && build-attn/attention_bench [config] [repeats]
 *
 * Decompositions (what GoMLX builds when a backend lacks the fused op):
 *   SDPA:  scores = DotGeneral(q, k) * scale (+ mask), softmax by ReduceMax/Sub/Exp/ReduceSum/
 *          Div, DotGeneral(probabilities, v) (+ Transpose back for BSHD).
 *   VJP:   autodiff of that with the probabilities kept from the forward (an input here): dV =
 *          P^T dO, dP = dO V^T, dS = P (dP - rowsum(dP P)) scale, dQ = dS K, dK = dS^T Q. The
 *          fused VJP gets output and logsumexp instead and recomputes P block by block.
 *   QKV:   DotGeneral(x, w), three Slices, three broadcast bias Adds. */
#include <math.h>

#include "bench.h"

static lathe_shape f32(int rank, const int64_t *dims) {
  lathe_shape s;
  TRY(lathe_shape_make(LATHE_DTYPE_FLOAT32, rank, dims, &s));
  return s;
}
#define F32S(...) f32((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

static lathe_value_t param(lathe_function_t fn, lathe_shape s) {
  lathe_value_t v;
  TRY(lathe_parameter(fn, NULL, &s, &v));
  return v;
}

static lathe_value_t scalar(lathe_function_t fn, float v) {
  lathe_shape s = f32(0, (int64_t[]){0});
  lathe_value_t out;
  TRY(lathe_constant(fn, &s, &v, sizeof v, &out));
  return out;
}

static lathe_value_t bin(lathe_function_t fn, lathe_op op, lathe_value_t a, lathe_value_t b) {
  lathe_value_t out;
  TRY(lathe_binary(fn, op, a, b, &out));
  return out;
}

static lathe_value_t dot(lathe_function_t fn, lathe_value_t a, int ca, int ba0, int ba1, lathe_value_t b, int cb, int bb0,
                         int bb1) {
  lathe_value_t out;
  int la[2] = {ba0, ba1}, lb[2] = {bb0, bb1};
  TRY(lathe_dot_general(fn, a, &ca, 1, la, 2, b, &cb, 1, lb, 2, NULL, &out));
  return out;
}

/* x [B, H, S] back to [B, H, S, K] */
static lathe_value_t expand_last(lathe_function_t fn, lathe_value_t x, lathe_value_t like) {
  lathe_shape s;
  TRY(lathe_value_shape(like, &s));
  lathe_value_t out;
  TRY(lathe_broadcast_in_dim(fn, x, &s, (int[]){0, 1, 2}, 3, &out));
  return out;
}

static lathe_value_t reduce_last(lathe_function_t fn, lathe_op op, lathe_value_t x) {
  lathe_value_t out;
  TRY(lathe_reduce(fn, op, x, (int[]){3}, 1, &out));
  return out;
}

typedef struct {
  int64_t B, H, S, D;
  bool bshd, mask;
} cfg;

/* softmax(q k^T scale + mask) as [B, H, S, Skv] */
static lathe_value_t probabilities(lathe_function_t fn, const cfg *c, lathe_value_t q, lathe_value_t k, lathe_value_t mask) {
  int sa = c->bshd ? 1 : 2, ha = 3 - sa;
  lathe_value_t s = bin(fn, LATHE_OP_MUL, dot(fn, q, 3, 0, ha, k, 3, 0, ha), scalar(fn, 1.0f / sqrtf((float)c->D)));
  if (mask) {
    lathe_shape ss;
    TRY(lathe_value_shape(s, &ss));
    lathe_value_t mb;
    TRY(lathe_broadcast_in_dim(fn, mask, &ss, (int[]){2, 3}, 2, &mb));
    s = bin(fn, LATHE_OP_ADD, s, mb);
  }
  lathe_value_t e;
  TRY(lathe_unary(fn, LATHE_OP_EXP, bin(fn, LATHE_OP_SUB, s, expand_last(fn, reduce_last(fn, LATHE_OP_REDUCE_MAX, s), s)), &e));
  return bin(fn, LATHE_OP_DIV, e, expand_last(fn, reduce_last(fn, LATHE_OP_REDUCE_SUM, e), e));
}

/* [B, H, S, D] to the layout */
static lathe_value_t to_layout(lathe_function_t fn, const cfg *c, lathe_value_t x) {
  if (!c->bshd) return x;
  lathe_value_t out;
  TRY(lathe_transpose(fn, x, (int[]){0, 2, 1, 3}, 4, &out));
  return out;
}

static lathe_builder_t build_sdpa(const cfg *c, bool fused) {
  lathe_builder_t b;
  TRY(lathe_builder_new(be, "sdpa", &b));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape qs = c->bshd ? F32S(c->B, c->S, c->H, c->D) : F32S(c->B, c->H, c->S, c->D);
  lathe_value_t q = param(fn, qs), k = param(fn, qs), v = param(fn, qs), mask = NULL, res[2];
  if (c->mask) mask = param(fn, F32S(c->S, c->S));
  int sa = c->bshd ? 1 : 2, ha = 3 - sa;
  if (fused) {
    lathe_attention_config ac = {.mask = mask};
    TRY(lathe_fused_scaled_dot_product_attention(fn, q, k, v, (lathe_attention_layout)c->bshd, &ac, res));
  } else {
    res[0] = to_layout(fn, c, dot(fn, probabilities(fn, c, q, k, mask), 3, 0, 1, v, sa, 0, ha));
  }
  TRY(lathe_function_return(fn, res, 1));
  return b;
}

static lathe_builder_t build_vjp(const cfg *c, bool fused) {
  lathe_builder_t b;
  TRY(lathe_builder_new(be, "sdpa_vjp", &b));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape qs = c->bshd ? F32S(c->B, c->S, c->H, c->D) : F32S(c->B, c->H, c->S, c->D);
  lathe_value_t q = param(fn, qs), k = param(fn, qs), v = param(fn, qs), dout = param(fn, qs), res[3];
  int sa = c->bshd ? 1 : 2, ha = 3 - sa;
  if (fused) {
    lathe_value_t out = param(fn, qs), lse = param(fn, F32S(c->B, c->H, c->S));
    TRY(lathe_fused_scaled_dot_product_attention_vjp(fn, q, k, v, (lathe_attention_layout)c->bshd, NULL, out, &lse, 1, dout, res));
  } else {
    lathe_value_t p = param(fn, F32S(c->B, c->H, c->S, c->S)); /* kept from the forward */
    lathe_value_t dv = dot(fn, p, 2, 0, 1, dout, sa, 0, ha);   /* [B, H, Skv, D] */
    lathe_value_t dp = dot(fn, dout, 3, 0, ha, v, 3, 0, ha);   /* [B, H, S, Skv] */
    lathe_value_t delta = expand_last(fn, reduce_last(fn, LATHE_OP_REDUCE_SUM, bin(fn, LATHE_OP_MUL, dp, p)), dp);
    lathe_value_t ds = bin(fn, LATHE_OP_MUL, bin(fn, LATHE_OP_MUL, p, bin(fn, LATHE_OP_SUB, dp, delta)),
                           scalar(fn, 1.0f / sqrtf((float)c->D)));
    res[0] = to_layout(fn, c, dot(fn, ds, 3, 0, 1, k, sa, 0, ha));
    res[1] = to_layout(fn, c, dot(fn, ds, 2, 0, 1, q, sa, 0, ha));
    res[2] = to_layout(fn, c, dv);
  }
  TRY(lathe_function_return(fn, res, 3));
  return b;
}

static lathe_builder_t build_qkv(int64_t rows, int64_t in, int64_t qd, int64_t kvd, bool fused) {
  lathe_builder_t b;
  TRY(lathe_builder_new(be, "qkv", &b));
  lathe_function_t fn = lathe_builder_main(b);
  int64_t total = qd + 2 * kvd;
  lathe_value_t x = param(fn, F32S(rows, in)), w = param(fn, F32S(in, total)), res[3];
  lathe_value_t bias[3] = {param(fn, F32S(qd)), param(fn, F32S(kvd)), param(fn, F32S(kvd))};
  if (fused) {
    TRY(lathe_fused_attention_qkv_projection(fn, x, w, bias[0], bias[1], bias[2], qd, kvd, res));
  } else {
    lathe_value_t y;
    int c1 = 1, c0 = 0;
    TRY(lathe_dot_general(fn, x, &c1, 1, NULL, 0, w, &c0, 1, NULL, 0, NULL, &y));
    int64_t starts[3] = {0, qd, qd + kvd}, widths[3] = {qd, kvd, kvd};
    for (int o = 0; o < 3; o++) {
      lathe_value_t part, bb;
      TRY(lathe_slice(fn, y, (int64_t[]){0, starts[o]}, (int64_t[]){rows, starts[o] + widths[o]}, NULL, 2, &part));
      lathe_shape ps = F32S(rows, widths[o]);
      TRY(lathe_broadcast_in_dim(fn, bias[o], &ps, (int[]){1}, 1, &bb));
      res[o] = bin(fn, LATHE_OP_ADD, part, bb);
    }
  }
  TRY(lathe_function_return(fn, res, 3));
  return b;
}

static void row(const char *name, const char *shape, lathe_builder_t bd, lathe_builder_t bf) {
  double td, tf;
  bench_time_pair(bd, bf, NULL, NULL, &td, &tf);
  printf("%-34s %-22s %14.3f %14.3f %7.2fx\n", name, shape, td * 1e3, tf * 1e3, td / tf);
  fflush(stdout);
  lathe_builder_free(bd);
  lathe_builder_free(bf);
}

int main(int argc, char **argv) {
  bench_init(argc, argv);
  printf("lathe fused attention vs its decomposition on %s, Float32, median of %d runs\n\n", lathe_backend_description(be),
         repeats);
  printf("%-34s %-22s %14s %14s %8s\n", "op", "shape", "decomposed ms", "fused ms", "ratio");
  const cfg cfgs[] = {
      {4, 8, 128, 64, false, false}, {4, 8, 128, 64, true, false}, {4, 8, 128, 64, false, true},
      {1, 8, 512, 64, false, false}, {1, 8, 512, 64, true, true},  {8, 12, 64, 32, true, false},
  };
  char shape[64], name[64];
  for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
    const cfg *c = &cfgs[i];
    snprintf(shape, sizeof shape, "B%lld H%lld S%lld D%lld", (long long)c->B, (long long)c->H, (long long)c->S, (long long)c->D);
    snprintf(name, sizeof name, "FusedSDPA %s%s", c->bshd ? "BSHD" : "BHSD", c->mask ? " +mask" : "");
    row(name, shape, build_sdpa(c, false), build_sdpa(c, true));
  }
  for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
    const cfg *c = &cfgs[i];
    if (c->mask) continue;
    snprintf(shape, sizeof shape, "B%lld H%lld S%lld D%lld", (long long)c->B, (long long)c->H, (long long)c->S, (long long)c->D);
    snprintf(name, sizeof name, "FusedSDPAVJP %s", c->bshd ? "BSHD" : "BHSD");
    row(name, shape, build_vjp(c, false), build_vjp(c, true));
  }
  const int64_t qkv[][4] = {{2048, 384, 384, 384}, {512, 768, 768, 128}, {8, 1024, 1024, 256}};
  for (size_t i = 0; i < sizeof qkv / sizeof qkv[0]; i++) {
    snprintf(shape, sizeof shape, "%lldx%lld q%lld kv%lld", (long long)qkv[i][0], (long long)qkv[i][1], (long long)qkv[i][2],
             (long long)qkv[i][3]);
    row("FusedAttentionQKVProjection", shape, build_qkv(qkv[i][0], qkv[i][1], qkv[i][2], qkv[i][3], false),
        build_qkv(qkv[i][0], qkv[i][1], qkv[i][2], qkv[i][3], true));
  }
  lathe_backend_free(be);
  return 0;
}
