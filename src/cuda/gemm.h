/* gemm.h -- what the DOT, CONV and FUSED families of lathe:cuda share (gemm.c):
 *  - conversion kernels generated from ew.def's ConvertDType expressions, so a value reaches an
 *    accumulator or output dtype exactly as lathe:cpu converts it;
 *  - strided-batched matrix products: cuBLASLt for the float dtypes, lathe's own tiled kernel
 *    for integers (wrapping arithmetic), small products (k summed in order, as on the CPU) and
 *    wherever cuBLASLt cannot take the layout;
 *  - block-wide reductions and scratch memory helpers.
 * Pointers are device pointers; element offsets and strides count elements, not bytes. */
#ifndef LATHE_CUDA_GEMM_H
#define LATHE_CUDA_GEMM_H

#include "cuda.h"


/* The C type a dtype is stored as in kernels (sub-byte integers: their widened 8-bit type),
 * and the type it computes in (Float16/BFloat16: float). NULL for an invalid dtype. */
const char *lathe_cuda_storage_type(lathe_dtype dt);
const char *lathe_cuda_compute_type(lathe_dtype dt);

/* Appends to t ew.c's helper prelude and the conversion along path[0] -> ... -> path[n_path-1]
 * with ConvertDType's semantics (steps between equal dtypes are skipped; an intermediate
 * Float16/BFloat16 is rounded as storing it would). It defines
 *   typedef <storage of path[0]> lt_si; typedef <storage of the last, widened> lt_so;
 *   typedef <compute types> lt_ci, lt_co;
 *   lt_ci lt_ld(const lt_si *p, int64_t i);   lt_co lt_cv(lt_ci x);
 *   void lt_st(lt_so *p, int64_t i, lt_co v);
 * Sub-byte destinations keep their true width (the value wraps to it). */
lathe_status_t lathe_cuda_cvt_source(lt_text *t, const lathe_dtype *path, int n_path);
/* A new text (malloc'd; NULL when a dtype has no kernel type or memory runs out): the conversion
 * along path, then `kernels`, which use it. */
char *lathe_cuda_cvt_text(const lathe_dtype *path, int n_path, const char *kernels);
/* lathe_cuda_convert's text of a path (lasting: made once per path), or NULL. */
const char *lathe_cuda_convert_text(const lathe_dtype *path, int n_path);

/* Scratch device memory of n elements of dt for the step being run: valid until the step is done
 * (then later steps' scratch may reuse it: one stream runs them in order); memory is given back
 * when the execution's stream is done. *out_t (may be NULL) receives the tensor, borrowed; only
 * scratch asked for without it reuses an earlier step's memory. */
lathe_status_t lathe_cuda_scratch(lathe_cuda_exec *ex, lathe_dtype dt, int64_t n, lcuDeviceptr *out,
                                  lathe_tensor **out_t);
/* Zeroes nbytes at p on the execution's stream. */
lathe_status_t lathe_cuda_zero(lathe_cuda_exec *ex, lcuDeviceptr p, size_t nbytes);
/* Row-major strides of a shape. */
void lathe_cuda_row_strides(const lathe_shape *s, int64_t *st);

/* out[i] = convert(in[base + offset(i)]) for i < n: offset(i) from dims/strides as in
 * lathe_cuda_strided (NULL dims: contiguous, offset(i) = i), converted along path. */
lathe_status_t lathe_cuda_convert(lathe_cuda_exec *ex, lcuDeviceptr in, lcuDeviceptr out, const lathe_dtype *path,
                                  int n_path, int64_t n, const lt_dims_h *dims, const lt_strides_h *strides, int64_t base);

/* ---- matrix products ----
 * A matrix of a batch: element (b, i, j) at p + b * bs + i * rs + j * cs (elements of its dtype). */
typedef struct lt_mat {
  lcuDeviceptr p;
  int64_t rs, cs, bs;
} lt_mat;

/* d[b] = a[b] . b[b] (m x k times k x n), or d[b] += a[b] . b[b] with accumulate, for b < batch.
 * ab: the operands' dtype; d: the result's. cuBLASLt computes Float32 (TF32 only when the
 * backend's tf32 option is on), Float16/BFloat16 (f32 accumulation; d Float32 or ab),
 * Float64, Complex64, Complex128 (d = ab). Uint32/Uint64 (d = ab) run lathe's tiled kernel in
 * wrapping arithmetic, as do products of at most 64K multiply-adds and any product cuBLASLt
 * cannot lay out or has no algorithm for.
 * k = 0 gives zeros (or leaves d as it is when accumulating). */
typedef struct lt_gemm {
  lathe_dtype ab, d;
  int64_t batch, m, n, k;
  lt_mat a, b, c; /* c: the result d */
  bool accumulate;
  bool c_room; /* c has rows up to m and lines up to n rounded up to 16 bytes of ab (a scratch
                * accumulator): a staged product may write that padding (gemm.c) */
  lcuDeviceptr bias; /* lathe_cuda_gemm_bias only: n values of d added to every row of the
                      * result (0: none) */
  bool tf32;         /* Float32 on TF32 tensor cores even without the backend's tf32 option (the
                      * parts of a tf32x3 product, gemm.c) */
  bool ab_room;      /* a and b have rows and lines up to m, n, k rounded up to 16 bytes of ab,
                      * zeros past them, lines on 16 bytes (tf32x3's split operands): a staged
                      * product reads them in place */
} lt_gemm;
lathe_status_t lathe_cuda_gemm(lathe_cuda_exec *ex, const lt_gemm *g);
/* The same with g->bias added in cuBLASLt's epilogue, to the Float32 sums before the result is
 * rounded into d (one rounding, as lathe:cpu's FusedDense). *done false: cuBLASLt cannot take
 * the product with its bias here (no algorithm for it, a batch, a product small enough for the
 * tiled kernel, a column-major result, a bias off 16 bytes, an accumulating product); nothing
 * was queued, and the caller adds the bias itself. Without a bias, lathe_cuda_gemm. */
lathe_status_t lathe_cuda_gemm_bias(lathe_cuda_exec *ex, const lt_gemm *g, bool *done);
/* Passes fn the lasting text lathe_cuda_gemm will launch for g's dtypes and sizes (its tiled
 * kernel), if any. */
void lathe_cuda_gemm_texts(const lt_gemm *g, lathe_cuda_text_fn fn, void *ctx);
/* Whether a product of ab operands and these sizes is one that stages misaligned matrices in
 * padded lines (gemm_pad on, tensor cores: halves, or Float32 with tf32 or tf32x3, every size >= 64). */
bool lathe_cuda_gemm_stages(lathe_cuda_exec *ex, lathe_dtype ab, int64_t m, int64_t n, int64_t k);
/* Whether cuBLASLt reads a rows x cols matrix of strides rs, cs in place (one of them unit). */
bool lathe_cuda_gemm_viewable(int64_t rows, int64_t cols, int64_t rs, int64_t cs);

/* The CUDA source of the block reductions the fused kernels use (after the prelude):
 *   T lt_row_sum(T v, int tpr, T *smem), T lt_row_max(T v, int tpr, T *smem)
 * combine v over the tpr threads of a row: tpr a power of two; tpr <= 32 rows are aligned
 * groups of lanes of a warp, tpr > 32 is the whole block (blockDim.x == tpr). smem holds 32
 * values of T. Every thread of the row gets the result. Max propagates NaN. */
const char *lathe_cuda_reduce_source(void);
/* CUDA source of typed element access for the fused kernels: storage types lt_f16s / lt_bf16s
 * (16-bit patterns), lt_ct<S>::T (the compute type: float for halves), lt_g(p, i) loads as the
 * compute type, lt_s(p, i, v) stores (rounding halves), lt_exp / lt_log / lt_erf / lt_tanh /
 * lt_sqrt for float and double, lt_inf<T>(). */
const char *lathe_cuda_access_source(void);
/* Threads per row (a power of two, 1..1024) for rows of len elements, and blocks x threads to
 * cover rows with them. */
int lathe_cuda_row_threads(int64_t len);
/* Values per lane (4, 8, 16 or 32) of a warp-per-row kernel that keeps a row of len elements in
 * registers; 0 past 1024, where the row kernels with a thread group per row take it. */
int lathe_cuda_warp_values(int64_t len);
void lathe_cuda_row_grid(int64_t rows, int tpr, unsigned *blocks, unsigned *threads);

/* Sources of gemm.c for the NVRTC compile test. */
void lathe_cuda_sources_gemm(lathe_cuda_source_fn fn, void *ctx);

/* ---- convolutions through cuDNN (cudnn.c) ----
 * A ConvGeneral as views of its three tensors: the input as (batch, channels, spatial...), the
 * kernel as (output channels, input channels, spatial...), the output as (batch, channels,
 * spatial...); each view axis with its size, its stride in elements and the tensor axis it is. */
enum { LT_CONV_MAX_SP = 3 };
typedef struct lt_conv_view {
  int nd; /* 2 + spatial axes */
  int64_t dim[2 + LT_CONV_MAX_SP], st[2 + LT_CONV_MAX_SP];
  int axis[2 + LT_CONV_MAX_SP];
} lt_conv_view;
typedef struct lt_conv_desc {
  lathe_dtype dt;
  int ns;
  lt_conv_view x, w, y;
  const lathe_tensor *out; /* the output tensor (its shape: where a packed result is copied to) */
  int64_t str[LT_CONV_MAX_SP], kdil[LT_CONV_MAX_SP], idil[LT_CONV_MAX_SP], plo[LT_CONV_MAX_SP];
  int64_t groups, batch_groups;
  lcuDeviceptr xp, wp, yp;
} lt_conv_desc;
/* Runs the convolution with cuDNN where that is present, allowed (option cudnn, on by default),
 * able and faster: the first time a configuration is seen, cuDNN's algorithms (as a forward
 * convolution and, where the shapes allow, as the kernel gradient of one) are measured against
 * lathe's own path, own(own_ctx) (which may write the output), and the choice is remembered per
 * device. *done false: nothing was run, the caller runs its own path. */
lathe_status_t lathe_cuda_cudnn_conv(lathe_cuda_exec *ex, const lt_conv_desc *c, lathe_status_t (*own)(void *),
                                     void *own_ctx, bool *done);

/* ---- attention through cuDNN's fused SDPA (cudnn_sdpa.c) ----
 * One FusedScaledDotProductAttention (vjp false: o and lse from q, k and v) or its VJP (dq, dk
 * and dv from q, k, v, o, lse and dout) of Float16/BFloat16 tensors: strides in elements over
 * [batch, heads, seq, head] of the query (the output, dOutput and dQuery share them) and of the
 * key (the value, dKey and dValue share them; Hkv heads, each serving H / Hkv query heads in
 * turn); lse is [batch, heads, seq] Float32. bias (0: none) is added to the scaled scores: an
 * additive mask or bias of dtype bdt, dims bdim over [batch, heads, seq, kv] (1 where it
 * broadcasts) at strides bst. */
typedef struct lt_sdpa_desc {
  lathe_dtype dt, bdt;
  int64_t B, H, Hkv, S, Skv, D;
  int64_t qst[4], kst[4], bdim[4], bst[4];
  bool causal;
  float scale;
  lcuDeviceptr q, k, v, o, lse, dout, dq, dk, dv, bias;
} lt_sdpa_desc;
/* Runs s with cuDNN's fused attention where option cudnn_sdpa allows, cuDNN is present and takes
 * the form, and its plan measured faster than lathe's own kernels, own(own_ctx) (which write the
 * same outputs): measured the first time a form and shape is seen, remembered per device. *done
 * false: nothing ran, the caller runs its own kernels. */
lathe_status_t lathe_cuda_cudnn_sdpa(lathe_cuda_exec *ex, const lt_sdpa_desc *s, bool vjp, lathe_status_t (*own)(void *),
                                     void *own_ctx, bool *done);
/* Whether cuDNN's fused attention could take s (dtype, head size, heads, bias, alignment; not
 * whether the installed cuDNN has an engine for it). */
bool lathe_cuda_sdpa_form(const lt_sdpa_desc *s);
/* Tests: builds and finalizes s's operation graph with api's cuDNN functions on handle h (a
 * stand-in's, where no GPU is), then destroys it; the first failing call's status. */
lcudnnStatus lathe_cuda_sdpa_graph_check(const lcu_api *api, lcudnnHandle h, const lt_sdpa_desc *s, bool vjp);

/* ---- the FUSED family's parts (attention.c, quantized.c) ---- */
bool lathe_cuda_attention_op(lathe_op op);
lathe_status_t lathe_cuda_run_attention(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                        lathe_tensor **out);
void lathe_cuda_sources_attention(lathe_cuda_source_fn fn, void *ctx);
void lathe_cuda_texts_attention(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx);
/* The lasting texts of the quantized ops (quantized.c) and of the dense epilogue for dt (fused.c). */
const char *lathe_cuda_quantized_text(void);
const char *lathe_cuda_dense_epilogue_text(lathe_dtype dt);
lathe_status_t lathe_cuda_run_quantized(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                        lathe_tensor **out);
void lathe_cuda_sources_quantized(lathe_cuda_source_fn fn, void *ctx);
/* y[r, j] = act(acc[r * lda + j] + bias[j]) for a contiguous [m, n] result: acc of dtype acc_dt
 * (Float32 for half outputs, else out_dt) with rows lda apart, y of out_dt (may be acc itself,
 * then lda == n), bias of out_dt (0: none). */
lathe_status_t lathe_cuda_dense_epilogue(lathe_cuda_exec *ex, lathe_dtype out_dt, lcuDeviceptr acc, int64_t lda, lcuDeviceptr y,
                                         lcuDeviceptr bias, int64_t m, int64_t n, int act);

/* The activation of FusedDense / FusedQuantizedDense as CUDA source: `T lt_act(T v, int act)`
 * for T float and double (LATHE_ACTIVATION_* values), exact GELU. */
const char *lathe_cuda_activation_source(void);

#endif
