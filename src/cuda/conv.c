/* conv.c -- ConvGeneral on the GPU: any number of spatial axes, any axis layout, strides,
 * negative padding, input and kernel dilation, channel and batch groups.
 *
 * Design: im2col on the fly + one strided-batched product per chunk of output rows. The output
 * rows (output batch x output spatial positions, R of them) are processed in chunks whose patch
 * matrix col[group][row][K] (K = kernel positions x kernel input channels, channel fastest)
 * fits a scratch budget; a gather kernel fills it (padding and dilation holes give zeros,
 * values converted to the compute type), and one product per chunk, batched over the groups,
 * multiplies it by the kernel packed once per run as [group][ocg][K]. Where the output's rows
 * and channels each walk memory with one stride (NHWC, NCHW and their relatives) the product
 * writes the output in place; otherwise a scatter kernel puts a chunk's results where they go.
 * Why not an own implicit-GEMM kernel: the products then run on cuBLASLt's tensor-core kernels
 * (Float16/BFloat16, and Float32 with tf32=1), which a hand-written NVRTC kernel would not
 * match; the gather costs one extra pass over K x rows values per chunk, bounded memory.
 * Where cuDNN is present (optional, opened at run time) and faster for a configuration, it runs
 * the convolution instead (cudnn.c: measured once per configuration, remembered); the fix-up
 * below follows either path.
 * Holes: padding and input-dilation positions contribute nothing, even under a NaN or infinite
 * kernel value (as XLA computes it), but the gather's zeros times Inf give NaN. So a float
 * convolution that has holes also runs, after the product, a check of the packed kernel for
 * non-finite values (one pass over the kernel, setting a flag) and a fix-up kernel over the output
 * that returns at once when the flag is clear, and otherwise sums each NaN output again directly,
 * skipping the holes (the only outputs a hole can have spoilt are NaN). Finite kernels keep the
 * tensor-core product and pay a memset, a pass over the kernel and an empty launch; all of it is
 * queued on the stream, with no host round trip.
 * Compute types as on the CPU: Float32 (and Float16/BFloat16 operands, multiplied as they are
 * with f32 sums, rounded once to the output) and Float64 through cuBLASLt; integers in 32- or
 * 64-bit unsigned arithmetic (lathe's tiled kernel), which wraps like the dtype. */
#include <stdio.h>

#include "gemm.h"
#include "kernels/zkernels.h"

enum { MAX_SP = LATHE_MAX_RANK - 2 };

/* The kernel argument (host image of the source's lt_conv; every field 8 bytes). */
typedef struct conv_args {
  int64_t ns, kic, K, S, rc, r0;
  int64_t in_sb, in_sc, cg_off, bg_off;
  int64_t out_sb, out_sc, ocg;
  int64_t osp[MAX_SP], ksp[MAX_SP], idim[MAX_SP], ist[MAX_SP], str[MAX_SP], kdil[MAX_SP], idil[MAX_SP], plo[MAX_SP],
      ost[MAX_SP];
} conv_args;

static const char conv_src[] = LT_CUH_CONV;

static lathe_dtype compute_of(lathe_dtype dt) {
  switch (dt) {
    case LATHE_DTYPE_FLOAT16:
    case LATHE_DTYPE_BFLOAT16:
    case LATHE_DTYPE_FLOAT32:
    case LATHE_DTYPE_FLOAT64: return dt;
    case LATHE_DTYPE_INT8:
    case LATHE_DTYPE_INT16:
    case LATHE_DTYPE_INT32:
    case LATHE_DTYPE_UINT8:
    case LATHE_DTYPE_UINT16:
    case LATHE_DTYPE_UINT32: return LATHE_DTYPE_UINT32;
    case LATHE_DTYPE_INT64:
    case LATHE_DTYPE_UINT64: return LATHE_DTYPE_UINT64;
    default: return LATHE_DTYPE_INVALID;
  }
}

bool lathe_cuda_supports_conv(lathe_op op, lathe_dtype dtype) {
  return op == LATHE_OP_CONV_GENERAL && compute_of(dtype) != LATHE_DTYPE_INVALID;
}

/* The conv module converting key[0] -> key[1], made once per pair. */
static char *conv_text(const void *key, size_t n) {
  (void)n;
  return lathe_cuda_cvt_text(key, 2, conv_src);
}
static const char *conv_source(lathe_dtype from, lathe_dtype to) {
  lathe_dtype path[2] = {from, to};
  return lathe_cuda_memo_text(conv_text, path, sizeof path);
}

/* Function `kernel` of the conv module converting from -> to. */
static lathe_status_t conv_kernel(lathe_cuda_exec *ex, const char *kernel, lathe_dtype from, lathe_dtype to, lcuFunction *f) {
  const char *src = conv_source(from, to);
  if (!src) return LATHE_OOM("ConvGeneral: codegen");
  return lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), src, kernel, f);
}

static lathe_status_t launch_conv(lathe_cuda_exec *ex, const char *kernel, lathe_dtype from, lathe_dtype to,
                                  lcuDeviceptr src, lcuDeviceptr dst, int64_t n, const conv_args *c) {
  if (n <= 0) return NULL;
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(conv_kernel(ex, kernel, from, to, &f));
  conv_args a = *c;
  void *args[] = {&src, &dst, &n, &a};
  unsigned b, th;
  lathe_cuda_grid(n, &b, &th);
  return lathe_cuda_launch(ex, f, b, th, 0, args);
}

/* lt_conv_nonfinite(w = a, flag = b, n) or lt_conv_fix(in = a, w = b, out = o, flag = f, n, c): a float dtype */
static lathe_status_t launch_fix(lathe_cuda_exec *ex, const char *kernel, lathe_dtype dt, lcuDeviceptr a,
                                 lcuDeviceptr b, lcuDeviceptr o, lcuDeviceptr f, int64_t n, const conv_args *c) {
  if (n <= 0) return NULL;
  lcuFunction fn;
  LATHE_RETURN_IF_ERROR(conv_kernel(ex, kernel, dt, dt, &fn));
  conv_args ca = *c;
  bool check = strcmp(kernel, "lt_conv_nonfinite") == 0;
  void *check_args[] = {&a, &b, &n}, *fix_args[] = {&a, &b, &o, &f, &n, &ca};
  unsigned blocks, th;
  lathe_cuda_grid(n, &blocks, &th);
  /* the fix almost always finds its flag clear and returns: a small grid (a grid-stride loop) keeps
   * that cheap (a full grid over the CNN's 1.6M outputs took 6 us just to return) */
  if (!check && blocks > 256) blocks = 256;
  return lathe_cuda_launch(ex, fn, blocks, th, 0, check ? check_args : fix_args);
}

void lathe_cuda_sources_conv(lathe_cuda_source_fn fn, void *ctx) {
  static const lathe_dtype pairs[][2] = {
      {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT32}, {LATHE_DTYPE_FLOAT16, LATHE_DTYPE_FLOAT16},
      {LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_BFLOAT16}, {LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT64},
      {LATHE_DTYPE_INT8, LATHE_DTYPE_UINT32}, {LATHE_DTYPE_UINT32, LATHE_DTYPE_INT8},
      {LATHE_DTYPE_INT64, LATHE_DTYPE_UINT64}, {LATHE_DTYPE_UINT64, LATHE_DTYPE_UINT64},
      {LATHE_DTYPE_UINT16, LATHE_DTYPE_UINT32}, {LATHE_DTYPE_UINT32, LATHE_DTYPE_INT16},
  };
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    const char *t = conv_source(pairs[i][0], pairs[i][1]);
    char label[64];
    snprintf(label, sizeof label, "conv %s -> %s", lathe_dtype_name(pairs[i][0]), lathe_dtype_name(pairs[i][1]));
    if (t) fn(ctx, label, t);
  }
  lathe_cuda_sources_gemm(fn, ctx);
}

/* The conv module's texts a convolution may launch: the pair of its im2col (operand to compute
 * type), of its scatter (compute to output type) and of the hole check and fix-up, where lathe's
 * own path or holes are expected (cuDNN is chosen by measurement at run time: a float
 * convolution without holes that then takes the own path compiles at that launch); the kernel's
 * packing (a move or a conversion); the tiled product of integers. */
void lathe_cuda_texts_conv(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) {
  if (n->op != LATHE_OP_CONV_GENERAL || n->n_operands < 2) return;
  lathe_dtype dt = n->in[0]->shape.dtype, ct = compute_of(dt), odt = n->shape.dtype;
  if (ct == LATHE_DTYPE_INVALID || !lathe_shape_size(&n->shape)) return;
  lathe_ilist pads = lathe_attr_conv_general_paddings(n), idil = lathe_attr_conv_general_input_dilations(n),
              isp = lathe_attr_conv_general_input_spatial(n);
  bool holes = false;
  for (int k = 0; k < isp.n; k++)
    holes |= pads.v[2 * k] > 0 || pads.v[2 * k + 1] > 0 || (idil.v[k] > 1 && n->in[0]->shape.dims[isp.v[k]] > 1);
  bool fl = lathe_dtype_is_float(dt), own = !fl || !d->cu->cudnn || isp.n > LT_CONV_MAX_SP;
  const char *t;
  if ((own || (holes && fl)) && (t = conv_source(dt, ct))) fn(ctx, t);
  if (own && ct != odt && (t = conv_source(ct, odt))) fn(ctx, t);
  lathe_dtype path[2] = {dt, ct};
  if (dt == ct) lathe_cuda_move_texts(lathe_dtype_bits(dt) / 8, fn, ctx); /* the kernel packed, cuDNN's staging */
  else if ((t = lathe_cuda_convert_text(path, 2))) fn(ctx, t);
  if (own && !fl) { /* integers multiply on the tiled kernel */
    lt_gemm g = {.ab = ct, .d = ct, .batch = 1, .m = 1, .n = 1, .k = 1};
    lathe_cuda_gemm_texts(&g, fn, ctx);
  }
}

/* Scratch budget for one chunk's patch matrix. */
enum { COL_BUDGET = 256 << 20 };

/* One ConvGeneral run: what both paths and the fix-up need. */
typedef struct conv_run {
  lathe_cuda_exec *ex;
  lathe_tensor *const *in;
  lathe_tensor **out;
  lathe_dtype dt, ct;
  conv_args c;
  int64_t G, oc, ocg, S, R, K, kst[LATHE_MAX_RANK], koc_ax, kic_ax, ksp_ax[MAX_SP];
  lcuDeviceptr wpack; /* the kernel as [group][ocg][K] of the compute type, once packed */
} conv_run;

/* The kernel as [group][ocg][K] of the compute type: axes (output channel, kernel spatial...,
 * input channel). */
static lathe_status_t pack_kernel(conv_run *r) {
  if (r->wpack) return NULL;
  const conv_args *c = &r->c;
  lathe_tensor *wt;
  LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(r->ex, r->ct, r->oc * r->K, &r->wpack, &wt));
  lt_dims_h wd;
  lt_strides_h ws;
  memset(&wd, 0, sizeof wd);
  memset(&ws, 0, sizeof ws);
  wd.d[wd.rank] = r->oc, ws.s[wd.rank++] = r->kst[r->koc_ax];
  for (int d = 0; d < c->ns; d++) wd.d[wd.rank] = c->ksp[d], ws.s[wd.rank++] = r->kst[r->ksp_ax[d]];
  wd.d[wd.rank] = c->kic, ws.s[wd.rank++] = r->kst[r->kic_ax];
  lathe_dtype path[2] = {r->dt, r->ct};
  if (r->dt == r->ct) return lathe_cuda_strided(r->ex, false, r->in[1], wt, r->oc * r->K, &wd, &ws, 0);
  return lathe_cuda_convert(r->ex, lathe_cuda_ptr(r->in[1]), r->wpack, path, 2, r->oc * r->K, &wd, &ws, 0);
}

/* lathe's own path: im2col chunks and one batched product each (file comment). */
static lathe_status_t own_path(void *ctx) {
  conv_run *r = ctx;
  lathe_cuda_exec *ex = r->ex;
  conv_args c = r->c;
  lathe_dtype dt = r->dt, ct = r->ct;
  const lathe_shape *os = &r->out[0]->shape;
  int64_t G = r->G, ocg = r->ocg, S = r->S, R = r->R, K = r->K, ob = R / S;
  int ns = (int)c.ns;
  LATHE_RETURN_IF_ERROR(pack_kernel(r));
  /* rows of a chunk as one stride of the output: all rows (merged), or rows within one batch */
  int64_t sst = 0;
  bool sp_merged = true;
  {
    int64_t inner_stride = 0, inner_dim = 0;
    bool any = false;
    for (int d = ns - 1; d >= 0 && sp_merged; d--) {
      if (c.osp[d] == 1) continue;
      if (any && c.ost[d] != inner_stride * inner_dim) sp_merged = false;
      if (!any) sst = c.ost[d];
      any = true, inner_stride = c.ost[d], inner_dim = c.osp[d];
    }
  }
  int64_t row_stride = sst;
  bool rows_merged = false;
  if (sp_merged) {
    if (S == 1) rows_merged = true, row_stride = c.out_sb;
    else if (ob == 1 || c.out_sb == S * sst) rows_merged = true;
  }
  bool same_bits = dt == ct || (lathe_dtype_is_int(dt) && lathe_dtype_bits(dt) == lathe_dtype_bits(ct));
  bool direct = sp_merged && same_bits && (lathe_dtype_is_int(dt) || lathe_cuda_gemm_viewable(S < 2 ? 2 : S, ocg, row_stride, c.out_sc) ||
                                           ocg <= 1);
  size_t es = (size_t)lathe_dtype_bits(ct) / 8;
  int64_t per_row = G * (K > 0 ? K : 1) * (int64_t)es;
  int64_t rc = COL_BUDGET / per_row;
  if (rc < 64) rc = 64;
  if (rc > R) rc = R;
  if (direct && !rows_merged && rc > S) rc = S; /* chunks stay within one batch */
  lcuDeviceptr col = 0, tile = 0;
  LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, ct, G * rc * K, &col, NULL));
  if (!direct) LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, ct, G * rc * ocg, &tile, NULL));
  size_t oes = (size_t)lathe_dtype_bits(lathe_dtype_widened(os->dtype)) / 8;
  for (int64_t r0 = 0; r0 < R;) {
    int64_t rows = R - r0 < rc ? R - r0 : rc;
    if (direct && !rows_merged) {
      int64_t left = S - r0 % S; /* to the end of this batch */
      if (rows > left) rows = left;
    }
    c.rc = rows, c.r0 = r0;
    LATHE_RETURN_IF_ERROR(launch_conv(ex, "lt_im2col", dt, ct, lathe_cuda_ptr(r->in[0]), col, G * rows * K, &c));
    lt_gemm g = {.ab = ct, .d = ct, .batch = G, .m = rows, .n = ocg, .k = K};
    g.a = (lt_mat){col, K, 1, rows * K};
    g.b = (lt_mat){r->wpack, 1, K, ocg * K};
    if (direct) {
      int64_t b = r0 / S, s = r0 % S, off = rows_merged ? r0 * row_stride : b * c.out_sb + s * sst;
      g.c = (lt_mat){lathe_cuda_ptr(r->out[0]) + (lcuDeviceptr)((size_t)off * oes), rows_merged ? row_stride : sst, c.out_sc,
                     ocg * c.out_sc};
      LATHE_RETURN_IF_ERROR(lathe_cuda_gemm(ex, &g));
    } else {
      g.c = (lt_mat){tile, ocg, 1, rows * ocg};
      LATHE_RETURN_IF_ERROR(lathe_cuda_gemm(ex, &g));
      LATHE_RETURN_IF_ERROR(launch_conv(ex, "lt_conv_scatter", ct, os->dtype, tile, lathe_cuda_ptr(r->out[0]), G * rows * ocg, &c));
    }
    r0 += rows;
  }
  return NULL;
}

/* The convolution as cuDNN's views (cudnn.c): input (batch, channels, spatial), kernel (output
 * channels, input channels, spatial), output (batch, channels, spatial). */
static void conv_views(const lathe_node *n, const conv_run *r, const int64_t *ist, const int64_t *ost, lt_conv_desc *v) {
  const lathe_shape *is = &r->in[0]->shape, *ks = &r->in[1]->shape, *os = &r->out[0]->shape;
  lathe_ilist isp = lathe_attr_conv_general_input_spatial(n), osp = lathe_attr_conv_general_output_spatial(n);
  int ns = (int)r->c.ns;
  memset(v, 0, sizeof *v);
  v->dt = r->dt, v->ns = ns, v->out = r->out[0];
  v->groups = lathe_attr_conv_general_channel_group_count(n), v->batch_groups = lathe_attr_conv_general_batch_group_count(n);
  v->xp = lathe_cuda_ptr(r->in[0]), v->wp = lathe_cuda_ptr(r->in[1]), v->yp = lathe_cuda_ptr(r->out[0]);
  int xa[2 + MAX_SP] = {(int)lathe_attr_conv_general_input_batch(n), (int)lathe_attr_conv_general_input_channels(n)};
  int wa[2 + MAX_SP] = {(int)r->koc_ax, (int)r->kic_ax};
  int ya[2 + MAX_SP] = {(int)lathe_attr_conv_general_output_batch(n), (int)lathe_attr_conv_general_output_channels(n)};
  for (int d = 0; d < ns && d < MAX_SP; d++) xa[2 + d] = (int)isp.v[d], wa[2 + d] = (int)r->ksp_ax[d], ya[2 + d] = (int)osp.v[d];
  lt_conv_view *vs[3] = {&v->x, &v->w, &v->y};
  const int *axes[3] = {xa, wa, ya};
  const lathe_shape *shapes[3] = {is, ks, os};
  const int64_t *strides[3] = {ist, r->kst, ost};
  for (int t = 0; t < 3; t++) {
    vs[t]->nd = 2 + (ns < LT_CONV_MAX_SP ? ns : LT_CONV_MAX_SP);
    for (int i = 0; i < vs[t]->nd; i++)
      vs[t]->axis[i] = axes[t][i], vs[t]->dim[i] = shapes[t]->dims[axes[t][i]], vs[t]->st[i] = strides[t][axes[t][i]];
  }
  for (int d = 0; d < ns && d < LT_CONV_MAX_SP; d++)
    v->str[d] = r->c.str[d], v->kdil[d] = r->c.kdil[d], v->idil[d] = r->c.idil[d], v->plo[d] = r->c.plo[d];
}

lathe_status_t lathe_cuda_run_conv(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                   lathe_tensor **out) {
  const lathe_shape *is = &in[0]->shape, *ks = &in[1]->shape, *os = &out[0]->shape;
  lathe_dtype dt = is->dtype, ct = compute_of(dt);
  if (ct == LATHE_DTYPE_INVALID) return LATHE_UNIMPL("ConvGeneral: not implemented on lathe:cuda for %s", lathe_dtype_name(dt));
  if (lathe_shape_size(os) == 0) return NULL;
  conv_run r;
  memset(&r, 0, sizeof r);
  r.ex = ex, r.in = in, r.out = out, r.dt = dt, r.ct = ct;
  int64_t ist[LATHE_MAX_RANK], ost[LATHE_MAX_RANK];
  lathe_cuda_row_strides(is, ist);
  lathe_cuda_row_strides(ks, r.kst);
  lathe_cuda_row_strides(os, ost);
  lathe_ilist isp = lathe_attr_conv_general_input_spatial(n), ksp_ax = lathe_attr_conv_general_kernel_spatial(n),
              osp_ax = lathe_attr_conv_general_output_spatial(n), strides = lathe_attr_conv_general_strides(n),
              pads = lathe_attr_conv_general_paddings(n), idil = lathe_attr_conv_general_input_dilations(n),
              kdil = lathe_attr_conv_general_kernel_dilations(n);
  int ns = isp.n;
  if (ns > MAX_SP) return LATHE_UNIMPL("ConvGeneral: %d spatial axes", ns);
  int64_t cgc = lathe_attr_conv_general_channel_group_count(n), bgc = lathe_attr_conv_general_batch_group_count(n);
  int64_t ob_ax = lathe_attr_conv_general_output_batch(n), oc_ax = lathe_attr_conv_general_output_channels(n);
  r.kic_ax = lathe_attr_conv_general_kernel_input_channels(n), r.koc_ax = lathe_attr_conv_general_kernel_output_channels(n);
  int64_t G = cgc > 1 ? cgc : bgc, ob = os->dims[ob_ax], oc = os->dims[oc_ax], ocg = oc / G;
  conv_args *c = &r.c;
  c->ns = ns;
  c->kic = ks->dims[r.kic_ax];
  c->in_sb = ist[lathe_attr_conv_general_input_batch(n)];
  c->in_sc = ist[lathe_attr_conv_general_input_channels(n)];
  c->cg_off = cgc > 1 ? c->kic * c->in_sc : 0;
  c->bg_off = bgc > 1 ? ob * c->in_sb : 0;
  c->out_sb = ost[ob_ax];
  c->out_sc = ost[oc_ax];
  c->ocg = ocg;
  int64_t kspat = 1, S = 1;
  bool holes = false;
  for (int d = 0; d < ns; d++) {
    r.ksp_ax[d] = ksp_ax.v[d];
    c->osp[d] = os->dims[osp_ax.v[d]];
    c->ksp[d] = ks->dims[ksp_ax.v[d]];
    c->idim[d] = is->dims[isp.v[d]];
    c->ist[d] = ist[isp.v[d]];
    c->str[d] = strides.v[d];
    c->kdil[d] = kdil.v[d];
    c->idil[d] = idil.v[d];
    c->plo[d] = pads.v[2 * d];
    holes |= pads.v[2 * d] > 0 || pads.v[2 * d + 1] > 0 || (idil.v[d] > 1 && c->idim[d] > 1);
    c->ost[d] = ost[osp_ax.v[d]];
    kspat *= c->ksp[d];
    S *= c->osp[d];
  }
  c->K = c->kic * kspat;
  c->S = S;
  r.G = G, r.oc = oc, r.ocg = ocg, r.S = S, r.R = ob * S, r.K = c->K;

  bool done = false;
  if (lathe_dtype_is_float(dt) && ns <= LT_CONV_MAX_SP) {
    lt_conv_desc v;
    conv_views(n, &r, ist, ost, &v);
    LATHE_RETURN_IF_ERROR(lathe_cuda_cudnn_conv(ex, &v, own_path, &r, &done));
  }
  if (!done) LATHE_RETURN_IF_ERROR(own_path(&r));
  if (holes && lathe_dtype_is_float(dt)) { /* non-finite kernel values under holes (file comment) */
    LATHE_RETURN_IF_ERROR(pack_kernel(&r));
    lcuDeviceptr flag;
    LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_UINT32, 1, &flag, NULL));
    LATHE_RETURN_IF_ERROR(lathe_cuda_zero(ex, flag, sizeof(uint32_t)));
    LATHE_RETURN_IF_ERROR(launch_fix(ex, "lt_conv_nonfinite", dt, r.wpack, flag, 0, 0, oc * r.K, c));
    c->rc = r.R, c->r0 = 0;
    LATHE_RETURN_IF_ERROR(launch_fix(ex, "lt_conv_fix", dt, lathe_cuda_ptr(in[0]), r.wpack, lathe_cuda_ptr(out[0]), flag,
                                     G * r.R * ocg, c));
  }
  return NULL;
}
