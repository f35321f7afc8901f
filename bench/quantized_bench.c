/* quantized_bench.c -- FusedQuantizedDense and QuantizedEmbeddingLookup against their
 * decomposition into standard ops (dequantize the whole weight matrix into Float32 with
 * ConvertDType/Bitcast/Slice/Gather/Mul..., then DotGeneral or Gather), both on lathe, in the
 * same run: median wall time of repeated executions and the ratio.
 *
 *   make bench && build/quantized_bench [config] [repeats] */
#include <math.h>
#include <stdint.h>

#include "bench.h"

/* Inputs valid for the workload: floats in [-1, 1), random bytes, small indices; every GGML
 * block (ggml_bpb bytes, its f16 scale first) gets a sane scale so no NaN or denormal slows it. */
static void fill_input(const lathe_shape *s, void *data, size_t nbytes, int ggml_bpb, int64_t index_limit) {
  unsigned x = 2463534242u;
  uint8_t *p = data;
  for (size_t i = 0; i < nbytes; i++) x ^= x << 13, x ^= x >> 17, x ^= x << 5, p[i] = (uint8_t)x;
  int64_t n = lathe_shape_num_elements(s);
  if (s->dtype == LATHE_DTYPE_FLOAT32)
    for (int64_t i = 0; i < n; i++) ((float *)data)[i] = (float)((i * 7919 % 1000) / 500.0 - 1.0);
  if (s->dtype == LATHE_DTYPE_INT32)
    for (int64_t i = 0; i < n; i++) ((int32_t *)data)[i] = (int32_t)((i * 7919) % index_limit);
  if (s->dtype == LATHE_DTYPE_UINT8 && ggml_bpb)
    for (size_t b = 0; b + (size_t)ggml_bpb <= nbytes; b += (size_t)ggml_bpb) p[b] = 0x00, p[b + 1] = 0x2c; /* 1/16 */
}

typedef struct {
  int ggml_bpb;
  int64_t index_limit;
} fill_ctx;

static void fill_cb(const lathe_shape *s, void *data, size_t nbytes, void *ctx) {
  fill_ctx *c = ctx;
  fill_input(s, data, nbytes, c->ggml_bpb, c->index_limit);
}

/* ---- small graph helpers ---- */
static lathe_shape shp(lathe_dtype dt, int rank, int64_t a, int64_t b, int64_t c) {
  lathe_shape s;
  int64_t d[3] = {a, b, c};
  TRY(lathe_shape_make(dt, rank, d, &s));
  return s;
}
static lathe_value_t par(lathe_function_t fn, const char *name, lathe_shape s) {
  lathe_value_t v;
  TRY(lathe_parameter(fn, name, &s, &v));
  return v;
}
static lathe_value_t bin(lathe_function_t fn, lathe_op op, lathe_value_t a, lathe_value_t b) {
  lathe_value_t out;
  TRY(lathe_binary(fn, op, a, b, &out));
  return out;
}
static lathe_value_t cvt(lathe_function_t fn, lathe_value_t v, lathe_dtype dt) {
  lathe_value_t out;
  TRY(lathe_convert_dtype(fn, v, dt, &out));
  return out;
}
static lathe_value_t reshape(lathe_function_t fn, lathe_value_t v, int rank, int64_t a, int64_t b, int64_t c) {
  int64_t d[3] = {a, b, c};
  lathe_value_t out;
  TRY(lathe_reshape(fn, v, d, rank, &out));
  return out;
}
static lathe_value_t bcast(lathe_function_t fn, lathe_value_t v, lathe_shape to, const int *axes, int n) {
  lathe_value_t out;
  TRY(lathe_broadcast_in_dim(fn, v, &to, axes, n, &out));
  return out;
}
static lathe_value_t slice3(lathe_function_t fn, lathe_value_t v, int64_t a, int64_t b, int64_t lo, int64_t hi) {
  int64_t st[3] = {0, 0, lo}, li[3] = {a, b, hi};
  lathe_value_t out;
  TRY(lathe_slice(fn, v, st, li, NULL, 3, &out));
  return out;
}
static lathe_value_t scalar(lathe_function_t fn, lathe_dtype dt, double v) {
  lathe_shape s = shp(dt, 0, 0, 0, 0);
  union {
    float f;
    uint8_t u;
  } u;
  if (dt == LATHE_DTYPE_FLOAT32) u.f = (float)v;
  else u.u = (uint8_t)v;
  lathe_value_t out;
  TRY(lathe_constant(fn, &s, &u, dt == LATHE_DTYPE_FLOAT32 ? 4 : 1, &out));
  return out;
}
static lathe_value_t matmul(lathe_function_t fn, lathe_value_t x, lathe_value_t w, int w_contract) {
  int c1 = 1;
  lathe_value_t out;
  TRY(lathe_dot_general(fn, x, &c1, 1, NULL, 0, w, &w_contract, 1, NULL, 0, NULL, &out));
  return out;
}

/* GGML Q8_0/Q4_0 rows [rows, nblk*bpb] -> Float32 [rows, nblk*32] with standard ops. */
static lathe_value_t ggml_dequant(lathe_function_t fn, lathe_value_t w, bool q4, int64_t rows, int64_t nblk) {
  int bpb = q4 ? 18 : 34;
  lathe_value_t blk = reshape(fn, w, 3, rows, nblk, bpb);
  lathe_value_t dh, q;
  TRY(lathe_bitcast(fn, slice3(fn, blk, rows, nblk, 0, 2), LATHE_DTYPE_FLOAT16, &dh));
  lathe_value_t d = cvt(fn, dh, LATHE_DTYPE_FLOAT32); /* [rows, nblk] */
  lathe_value_t qs = slice3(fn, blk, rows, nblk, 2, bpb);
  if (q4) {
    lathe_value_t lo = bin(fn, LATHE_OP_BITWISE_AND, qs, scalar(fn, LATHE_DTYPE_UINT8, 15));
    lathe_value_t hi = bin(fn, LATHE_OP_SHIFT_RIGHT_LOGICAL, qs, scalar(fn, LATHE_DTYPE_UINT8, 4));
    lathe_value_t both[2] = {lo, hi}, cat;
    TRY(lathe_concatenate(fn, 2, both, 2, &cat));
    q = bin(fn, LATHE_OP_SUB, cvt(fn, cat, LATHE_DTYPE_FLOAT32), scalar(fn, LATHE_DTYPE_FLOAT32, 8));
  } else {
    TRY(lathe_bitcast(fn, qs, LATHE_DTYPE_INT8, &q));
    q = cvt(fn, q, LATHE_DTYPE_FLOAT32);
  }
  int ax[2] = {0, 1};
  lathe_value_t v = bin(fn, LATHE_OP_MUL, q, bcast(fn, d, shp(LATHE_DTYPE_FLOAT32, 3, rows, nblk, 32), ax, 2));
  return reshape(fn, v, 2, rows, nblk * 32, 0);
}

enum { LINEAR_INT8, NF4_UINT4, GGML_Q8_0, GGML_Q4_0, LOOKUP_Q8_0 };
static const char *names[] = {"QDense Linear Int8", "QDense NF4 Uint4", "QDense GGML Q8_0", "QDense GGML Q4_0",
                              "QEmbLookup Q8_0"};

/* m rows of x (or m indices), k inputs, n outputs (or vocab for the lookup). */
static lathe_builder_t build(int which, bool fused, int64_t m, int64_t k, int64_t n) {
  lathe_builder_t b;
  TRY(lathe_builder_new(be, names[which], &b));
  lathe_function_t fn = lathe_builder_main(b);
  const lathe_dtype F = LATHE_DTYPE_FLOAT32;
  lathe_value_t y;
  const int64_t bs = 32;
  if (which == LOOKUP_Q8_0) {
    lathe_value_t data = par(fn, "data", shp(LATHE_DTYPE_UINT8, 2, n, k / 32 * 34, 0));
    lathe_value_t idx = par(fn, "idx", shp(LATHE_DTYPE_INT32, 2, m, 1, 0));
    lathe_quantization q = {.scheme = LATHE_QUANT_GGML, .ggml_type = LATHE_GGML_Q8_0};
    if (fused) TRY(lathe_quantized_embedding_lookup(fn, data, idx, &q, &y));
    else {
      lathe_value_t table = ggml_dequant(fn, data, false, n, k / 32);
      int offs = 1, coll = 0, map = 0;
      int64_t sizes[2] = {1, k};
      TRY(lathe_gather(fn, table, idx, 1, &offs, 1, &coll, 1, &map, 1, sizes, 2, false, &y));
    }
  } else {
    lathe_value_t x = par(fn, "x", shp(F, 2, m, k, 0)), bias;
    if (which == LINEAR_INT8 || which == NF4_UINT4) {
      lathe_dtype wdt = which == LINEAR_INT8 ? LATHE_DTYPE_INT8 : LATHE_DTYPE_UINT4;
      lathe_value_t w = par(fn, "w", shp(wdt, 2, k, n, 0)), s = par(fn, "scale", shp(F, 2, k, n / bs, 0));
      lathe_value_t zp = which == LINEAR_INT8 ? par(fn, "zp", shp(F, 2, k, n / bs, 0)) : NULL;
      bias = par(fn, "bias", shp(F, 1, n, 0, 0));
      lathe_quantization q = {.scheme = which == LINEAR_INT8 ? LATHE_QUANT_LINEAR : LATHE_QUANT_NF4, .block_axis = 1,
                              .block_size = bs};
      if (fused) TRY(lathe_fused_quantized_dense(fn, x, w, &q, s, zp, bias, LATHE_ACTIVATION_RELU, &y));
      else {
        lathe_value_t wf;
        if (which == LINEAR_INT8) wf = cvt(fn, w, F);
        else { /* NF4: look the nibbles up in the 16-entry table */
          lathe_shape ts = shp(F, 1, 16, 0, 0);
          lathe_value_t table, idx = reshape(fn, w, 3, k, n, 1);
          TRY(lathe_constant(fn, &ts, lathe_nf4_table, sizeof(float) * 16, &table));
          int coll = 0, map = 0;
          int64_t one = 1;
          TRY(lathe_gather(fn, table, idx, 2, NULL, 0, &coll, 1, &map, 1, &one, 1, false, &wf));
        }
        int ax[2] = {0, 1};
        lathe_shape full3 = shp(F, 3, k, n / bs, bs);
        lathe_value_t sf = reshape(fn, bcast(fn, s, full3, ax, 2), 2, k, n, 0);
        wf = bin(fn, LATHE_OP_MUL, wf, sf);
        if (zp) wf = bin(fn, LATHE_OP_ADD, wf, reshape(fn, bcast(fn, zp, full3, ax, 2), 2, k, n, 0));
        y = matmul(fn, x, wf, 0);
      }
    } else {
      bool q4 = which == GGML_Q4_0;
      lathe_value_t w = par(fn, "w", shp(LATHE_DTYPE_UINT8, 2, n, k / 32 * (q4 ? 18 : 34), 0));
      bias = par(fn, "bias", shp(F, 1, n, 0, 0));
      lathe_quantization q = {.scheme = LATHE_QUANT_GGML, .ggml_type = q4 ? LATHE_GGML_Q4_0 : LATHE_GGML_Q8_0};
      if (fused) TRY(lathe_fused_quantized_dense(fn, x, w, &q, NULL, NULL, bias, LATHE_ACTIVATION_RELU, &y));
      else y = matmul(fn, x, ggml_dequant(fn, w, q4, n, k / 32), 1);
    }
    if (!fused) {
      int ax1 = 1;
      y = bin(fn, LATHE_OP_ADD, y, bcast(fn, bias, shp(F, 2, m, n, 0), &ax1, 1));
      y = bin(fn, LATHE_OP_MAX, y, scalar(fn, F, 0));
    }
  }
  TRY(lathe_function_return(fn, &y, 1));
  return b;
}

int main(int argc, char **argv) {
  bench_init(argc, argv);
  printf("lathe quantized fused ops vs their decomposition on %s, median of %d runs\n\n", lathe_backend_description(be),
         repeats);
  printf("%-20s %-18s %14s %14s %8s\n", "op", "m x k x n", "decomposed ms", "fused ms", "ratio");
  const int64_t shapes[][3] = {{1, 2048, 2048}, {8, 2048, 2048}, {128, 1024, 1024}};
  for (int w = 0; w < 5; w++)
    for (int s = 0; s < 3; s++) {
      int64_t m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
      if (w == LOOKUP_Q8_0) m = s == 0 ? 1 : s == 1 ? 64 : 512, k = 1024, n = 16384; /* n = vocab */
      int bpb = w == GGML_Q4_0 ? 18 : w == GGML_Q8_0 || w == LOOKUP_Q8_0 ? 34 : 0;
      lathe_builder_t bd = build(w, false, m, k, n), bf = build(w, true, m, k, n);
      double td, tf;
      fill_ctx fc = {bpb, n};
      bench_time_pair(bd, bf, fill_cb, &fc, &td, &tf);
      char shape[48];
      snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)m, (long long)k, (long long)n);
      printf("%-20s %-18s %14.3f %14.3f %7.2fx\n", names[w], shape, td * 1e3, tf * 1e3, td / tf);
      lathe_builder_free(bd);
      lathe_builder_free(bf);
    }
  lathe_backend_free(be);
  return 0;
}
