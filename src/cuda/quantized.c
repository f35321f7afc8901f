/* quantized.c -- FusedQuantizedDense and QuantizedEmbeddingLookup on the GPU.
 *
 * FusedQuantizedDense: a decode kernel turns a panel of output features of the quantized
 * weights into Float32 (Linear/NF4 as [K, panel] from the codes, read packed for 2- and 4-bit
 * dtypes, times the per-block scale plus zero point; GGML as [panel, K] from llama.cpp's block
 * layouts), cuBLASLt multiplies x by it into the panel's output columns, and one pass adds the
 * bias and applies the activation. Panels bound the decoded weights' memory. Few rows of x
 * (single-token inference) take a product kernel that reads the quantized weights directly
 * instead, each weight once.
 * QuantizedEmbeddingLookup decodes one value per thread; an index outside [0, vocab) fails the
 * execution with INVALID_ARGUMENT (the execution's error flag), as lathe:cpu's check does. */
#include <stdio.h>

#include "gemm.h"
#include "kernels/zkernels.h"

static const char quant_src[] = LT_CUH_QUANTIZED;

/* Host image of lt_q. */
typedef struct q_args {
  int64_t k, n, j0, nb, bs, blocks, row_bytes, m;
  int64_t bits, sgn, nf4, skind, has_zp, gt, vpb, bpb, act;
} q_args;

/* The family's kernel text, made once (kernels are found by its address: lathe_cuda_kernel_lasting). */
static const char *source;
static pthread_once_t source_once = PTHREAD_ONCE_INIT;
static void make_source(void) {
  lt_text t = {0};
  lt_put(&t, "%s%s", lathe_cuda_activation_source(), quant_src);
  if (!t.oom) source = t.s;
}

const char *lathe_cuda_quantized_text(void) {
  pthread_once(&source_once, make_source);
  return source;
}

static lathe_status_t q_kernel(lathe_cuda_exec *ex, const char *name, lcuFunction *f) {
  pthread_once(&source_once, make_source);
  if (!source) return LATHE_OOM("lathe:cuda: codegen");
  return lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), source, name, f);
}

void lathe_cuda_sources_quantized(lathe_cuda_source_fn fn, void *ctx) {
  lt_text t = {0};
  lt_put(&t, "%s%s", lathe_cuda_activation_source(), quant_src);
  if (!t.oom) fn(ctx, "quantized", t.s);
  free(t.s);
}

enum { SMALL_M = 8, PANEL_BUDGET = 256 << 20 };

static lathe_status_t run_dense(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  int scheme = (int)lathe_attr_quantized_scheme(n);
  q_args q;
  memset(&q, 0, sizeof q);
  q.k = lathe_attr_quantized_in_features(n);
  q.n = lathe_attr_quantized_out_features(n);
  q.m = q.k ? lathe_shape_size(&in[0]->shape) / q.k : lathe_shape_size(&out[0]->shape) / (q.n ? q.n : 1);
  q.act = lathe_attr_quantized_activation(n);
  q.gt = -1;
  lcuDeviceptr x = lathe_cuda_ptr(in[0]), w = lathe_cuda_ptr(in[1]), y = lathe_cuda_ptr(out[0]), scale = 0, zp = 0, bias = 0;
  int next = 2;
  if (scheme == LATHE_QUANT_GGML) {
    lathe_ggml_type gt = lathe_attr_quantized_ggml_type(n);
    q.gt = gt;
    q.vpb = lathe_ggml_block_values(gt);
    q.bpb = lathe_ggml_block_bytes(gt);
    q.row_bytes = in[1]->shape.dims[1];
  } else {
    lathe_dtype wdt = in[1]->shape.dtype, sdt = in[2]->shape.dtype;
    q.bits = lathe_dtype_bits(wdt);
    q.sgn = lathe_dtype_class_of(wdt) == LATHE_CLASS_SINT;
    q.nf4 = scheme == LATHE_QUANT_NF4;
    q.bs = lathe_attr_quantized_block_size(n);
    q.blocks = in[2]->shape.dims[1];
    q.skind = sdt == LATHE_DTYPE_FLOAT32 ? 0 : sdt == LATHE_DTYPE_FLOAT16 ? 1 : 2;
    scale = lathe_cuda_ptr(in[next++]);
    if (lathe_attr_quantized_has_zero_point(n)) zp = lathe_cuda_ptr(in[next++]), q.has_zp = 1;
  }
  if (lathe_attr_quantized_has_bias(n)) bias = lathe_cuda_ptr(in[next]);
  if (!q.m || !q.n) return NULL;
  lcuFunction f;
  if (q.m <= SMALL_M) {
    LATHE_RETURN_IF_ERROR(q_kernel(ex, "lt_q_gemv", &f));
    void *args[] = {&x, &w, &scale, &zp, &bias, &y, &q};
    int64_t blocks = (q.n + 31) / 32;
    return lathe_cuda_launch(ex, f, (unsigned)(blocks < 65535 * 8 ? blocks : 65535 * 8), 256, 0, args);
  }
  int64_t nb = PANEL_BUDGET / 4 / (q.k ? q.k : 1);
  nb = nb < 64 ? 64 : nb;
  nb = nb > q.n ? q.n : nb;
  lcuDeviceptr wf;
  LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_FLOAT32, q.k * nb, &wf, NULL));
  bool ggml = scheme == LATHE_QUANT_GGML;
  LATHE_RETURN_IF_ERROR(q_kernel(ex, ggml ? "lt_q_decode_ggml" : "lt_q_decode_linear", &f));
  for (int64_t j0 = 0; j0 < q.n; j0 += nb) {
    q.j0 = j0;
    q.nb = q.n - j0 < nb ? q.n - j0 : nb;
    if (q.k) {
      unsigned b, th;
      lathe_cuda_grid(q.k * q.nb, &b, &th);
      if (ggml) {
        void *args[] = {&w, &wf, &q};
        LATHE_RETURN_IF_ERROR(lathe_cuda_launch(ex, f, b, th, 0, args));
      } else {
        void *args[] = {&w, &scale, &zp, &wf, &q};
        LATHE_RETURN_IF_ERROR(lathe_cuda_launch(ex, f, b, th, 0, args));
      }
    }
    lt_gemm g = {.ab = LATHE_DTYPE_FLOAT32, .d = LATHE_DTYPE_FLOAT32, .batch = 1, .m = q.m, .n = q.nb, .k = q.k};
    g.a = (lt_mat){x, q.k, 1, 0};
    g.b = ggml ? (lt_mat){wf, 1, q.k, 0} : (lt_mat){wf, q.nb, 1, 0};
    g.c = (lt_mat){y + (lcuDeviceptr)((size_t)j0 * 4), q.n, 1, 0};
    LATHE_RETURN_IF_ERROR(lathe_cuda_gemm(ex, &g));
  }
  return lathe_cuda_dense_epilogue(ex, LATHE_DTYPE_FLOAT32, y, q.n, y, bias, q.m, q.n, (int)q.act);
}

static lathe_status_t run_lookup(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  int64_t k = lathe_attr_quantized_in_features(n), count = lathe_shape_size(&in[1]->shape);
  int64_t vocab = in[0]->shape.dims[0], rb = in[0]->shape.dims[1];
  if (!count || !k) return NULL;
  lathe_ggml_type gt = lathe_attr_quantized_ggml_type(n);
  int igt = gt, vpb = lathe_ggml_block_values(gt), bpb = lathe_ggml_block_bytes(gt);
  char msg[160], name[48];
  snprintf(msg, sizeof msg, "QuantizedEmbeddingLookup: an index is out of range [0, %lld)", (long long)vocab);
  lcuDeviceptr flag;
  uint32_t code;
  LATHE_RETURN_IF_ERROR(lathe_cuda_exec_error_flag(ex, msg, &flag, &code));
  snprintf(name, sizeof name, "lt_q_lookup_%s", lathe_dtype_name(in[1]->shape.dtype));
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(q_kernel(ex, name, &f));
  lcuDeviceptr d = lathe_cuda_ptr(in[0]), idx = lathe_cuda_ptr(in[1]), y = lathe_cuda_ptr(out[0]);
  unsigned ucode = code;
  void *args[] = {&d, &idx, &y, &count, &k, &vocab, &rb, &igt, &vpb, &bpb, &flag, &ucode};
  unsigned b, th;
  lathe_cuda_grid(count * k, &b, &th);
  return lathe_cuda_launch(ex, f, b, th, 0, args);
}

lathe_status_t lathe_cuda_run_quantized(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                        lathe_tensor **out) {
  switch (n->op) {
    case LATHE_OP_FUSED_QUANTIZED_DENSE: return run_dense(ex, n, in, out);
    case LATHE_OP_QUANTIZED_EMBEDDING_LOOKUP: return run_lookup(ex, n, in, out);
    default: return LATHE_UNIMPL("%s: not a quantized op", lathe_op_name(n->op));
  }
}
