/* cudnn.c -- ConvGeneral through cuDNN 9's convolution API, where libcudnn.so.9 is present.
 *
 * A ConvGeneral is offered to cuDNN in two readings: as a forward convolution (input, kernel,
 * output), and, where the shapes allow, as the kernel gradient of a forward convolution
 * (GoMLX's gradient of a kernel is a ConvGeneral whose "input" is the forward input with batch
 * and channels swapped, whose "kernel" is the output gradient and whose strides and kernel
 * dilations are the forward dilations and strides): cuDNN's backward-filter algorithms are built
 * for that shape, its forward ones are not. The first time a configuration (dtype, math mode,
 * every size, stride and parameter) runs on a device, each reading's engines are timed through
 * cuDNN's graph API (below; the legacy cudnnFind...Ex only where that offers none), on the
 * execution's stream with a bounded workspace, lathe's own path is timed with CUDA events, and the
 * fastest is remembered: for the device's lifetime, and on disk beside the kernel cache (one file
 * per cuDNN version and GPU model), so that a later process skips the measuring. Views that cuDNN
 * cannot take as they lie (a tensor neither NCHW- nor NHWC-packed; every GoMLX kernel,
 * which is HWIO) are copied into NHWC-packed scratch first, and a result computed into scratch is
 * copied to the output's layout. Math: Float32 with FMA only (exact products, as lathe's default),
 * TF32 tensor cores with tf32=1; Float16/BFloat16 with Float32 accumulation; Float64 as it is.
 * Not offered: input dilation, batch groups, negative padding, other dtypes, more than three
 * spatial axes (lathe's own path takes those). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnn.h"

enum { ND = 2 + LT_CONV_MAX_SP, KEYN = 5 + 6 * ND + 4 * LT_CONV_MAX_SP };
enum { WAY_OWN, WAY_FWD, WAY_BWD_FILTER };
#define WS_MAX LATHE_DNN_WS_MAX

typedef struct cudnn_choice {
  struct cudnn_choice *next;
  int64_t key[KEYN];
  int way, algo, math; /* math MATH_GRAPH: algo is a place in the graph API's heuristics list */
  int64_t index;       /* then the engine's global index, */
  struct dnn_plan *g;  /* and its plan, made on first use */
  size_t ws;
} cudnn_choice;
static void plan_free(const lcu_api *api, struct dnn_plan *p);

/* One operand as cuDNN sees it: the tensor's view, where its data is, the packed layout cuDNN is
 * told, and whether it goes through NHWC-packed scratch to have it. */
typedef struct dnn_operand {
  lt_conv_view v;
  lcuDeviceptr p;
  int format; /* LCUDNN_TENSOR_NCHW or _NHWC */
  bool scratch;
} dnn_operand;

typedef struct dnn_reading {
  int way;
  dnn_operand a, b, c; /* forward: x, w, y; kernel gradient: x, dy, dw */
  int pad[LT_CONV_MAX_SP], stride[LT_CONV_MAX_SP], dil[LT_CONV_MAX_SP];
  int groups;
} dnn_reading;

static lathe_status_t dnn_error(const lcu_api *api, lcudnnStatus s, const char *what) {
  if (s == LCUDNN_STATUS_SUCCESS) return NULL;
  return lathe_status_new(LATHE_STATUS_INTERNAL, "ConvGeneral: cuDNN %s failed: %s (status %d)", what,
                          api->cudnnGetErrorString(s), s);
}

void lathe_cuda_cudnn_release(cuda_dev *d) {
  const lcu_api *api = d->cu->api;
  lathe_cuda_sdpa_release(d);
  for (cudnn_choice *c = d->dnn_choices, *next; c; c = next) next = c->next, plan_free(api, c->g), free(c);
  if (d->dnn_state == 1 && d->dnn) api->cudnnDestroy(d->dnn);
  d->dnn = NULL;
  d->dnn_state = 0;
  d->dnn_choices = NULL;
  pthread_mutex_destroy(&d->dnn_mu);
}

/* The strides of dims (view order: N, C, spatial...) packed as NCHW (nhwc false) or NHWC. */
static void packed_strides(const int64_t *dim, int nd, bool nhwc, int64_t *st) {
  int64_t run = 1;
  if (nhwc) {
    st[1] = run, run *= dim[1];
    for (int i = nd - 1; i >= 2; i--) st[i] = run, run *= dim[i];
    st[0] = run;
  } else {
    for (int i = nd - 1; i >= 0; i--) st[i] = run, run *= dim[i];
  }
}

/* Whether v lies packed as NCHW or NHWC (the strides of size-1 axes do not matter). */
static bool packed_as(const lt_conv_view *v, bool nhwc) {
  int64_t st[ND];
  packed_strides(v->dim, v->nd, nhwc, st);
  for (int i = 0; i < v->nd; i++)
    if (v->dim[i] > 1 && v->st[i] != st[i]) return false;
  return true;
}

static bool fits_int(const lt_conv_view *v) {
  int64_t n = 1;
  for (int i = 0; i < v->nd; i++) n *= v->dim[i];
  return n < INT_MAX;
}

/* o for view v: as it lies when it is packed, else NHWC-packed scratch (made by stage_in / out). */
static void operand(dnn_operand *o, const lt_conv_view *v, lcuDeviceptr p) {
  memset(o, 0, sizeof *o);
  o->v = *v, o->p = p;
  if (packed_as(v, false)) o->format = LCUDNN_TENSOR_NCHW;
  else o->format = LCUDNN_TENSOR_NHWC, o->scratch = !packed_as(v, true);
}

static void swap01(lt_conv_view *v) {
  int64_t d = v->dim[0], s = v->st[0];
  int a = v->axis[0];
  v->dim[0] = v->dim[1], v->st[0] = v->st[1], v->axis[0] = v->axis[1];
  v->dim[1] = d, v->st[1] = s, v->axis[1] = a;
}

/* The readings of c that cuDNN may take (0, 1 or 2 of them). */
static int readings(const lt_conv_desc *c, dnn_reading *r) {
  int n = 0, ns = c->ns;
  if (c->batch_groups > 1 || ns < 1 || ns > LT_CONV_MAX_SP) return 0;
  if (!fits_int(&c->x) || !fits_int(&c->w) || !fits_int(&c->y)) return 0;
  int64_t ksp = 1, osp = 1;
  bool fwd = true, bwd = c->groups == 1;
  for (int d = 0; d < ns; d++) {
    if (c->idil[d] != 1 || c->plo[d] < 0 || c->plo[d] > INT_MAX / 4) return 0;
    int64_t in = c->x.dim[2 + d], k = c->w.dim[2 + d], o = c->y.dim[2 + d], p2 = 2 * c->plo[d];
    /* cuDNN pads both sides by plo: the result must have the output's size */
    int64_t span = in + p2 - c->kdil[d] * (k - 1) - 1;
    fwd &= span >= 0 && span / c->str[d] + 1 == o;
    span = in + p2 - c->str[d] * (o - 1) - 1;
    bwd &= span >= 0 && span / c->kdil[d] + 1 == k;
    ksp *= k, osp *= o;
  }
  if (fwd) {
    dnn_reading *f = &r[n++];
    memset(f, 0, sizeof *f);
    f->way = WAY_FWD;
    operand(&f->a, &c->x, c->xp), operand(&f->b, &c->w, c->wp), operand(&f->c, &c->y, c->yp);
    for (int d = 0; d < ns; d++) f->pad[d] = (int)c->plo[d], f->stride[d] = (int)c->str[d], f->dil[d] = (int)c->kdil[d];
    f->groups = (int)c->groups;
  }
  if (bwd && ksp > osp) { /* a kernel gradient's shape: the "kernel" spans more than the output */
    dnn_reading *b = &r[n++];
    memset(b, 0, sizeof *b);
    b->way = WAY_BWD_FILTER;
    lt_conv_view x = c->x, dy = c->w, dw = c->y;
    swap01(&x), swap01(&dy), swap01(&dw);
    operand(&b->a, &x, c->xp), operand(&b->b, &dy, c->wp), operand(&b->c, &dw, c->yp);
    for (int d = 0; d < ns; d++) b->pad[d] = (int)c->plo[d], b->stride[d] = (int)c->kdil[d], b->dil[d] = (int)c->str[d];
    b->groups = 1;
  }
  const lt_conv_view *v[3] = {&c->x, &c->w, &c->y};
  for (int t = 0; t < 3; t++)
    for (int i = 0; i < v[t]->nd; i++)
      if (v[t]->dim[i] == 0) return 0;
  return n;
}

static void make_key(const lt_conv_desc *c, bool tf32, int64_t *key) {
  int k = 0;
  memset(key, 0, sizeof(int64_t) * KEYN);
  key[k++] = c->dt, key[k++] = tf32, key[k++] = c->ns, key[k++] = c->groups, key[k++] = c->batch_groups;
  const lt_conv_view *v[3] = {&c->x, &c->w, &c->y};
  for (int t = 0; t < 3; t++)
    for (int i = 0; i < ND; i++) key[k++] = i < v[t]->nd ? v[t]->dim[i] : 0, key[k++] = i < v[t]->nd ? v[t]->st[i] : 0;
  for (int d = 0; d < LT_CONV_MAX_SP; d++)
    key[k++] = c->str[d], key[k++] = c->kdil[d], key[k++] = c->idil[d], key[k++] = c->plo[d];
}

/* Elements of the operand, and the gather that fills its NHWC-packed scratch (inputs). */
static int64_t count(const dnn_operand *o) {
  int64_t n = 1;
  for (int i = 0; i < o->v.nd; i++) n *= o->v.dim[i];
  return n;
}

static lathe_status_t stage_in(lathe_cuda_exec *ex, lathe_dtype dt, dnn_operand *o, lcuDeviceptr *p) {
  *p = o->p;
  if (!o->scratch) return NULL;
  int64_t n = count(o);
  LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, dt, n, p, NULL));
  lt_dims_h d;
  lt_strides_h s;
  memset(&d, 0, sizeof d);
  memset(&s, 0, sizeof s);
  /* NHWC order of the view: axis 0, the spatial axes, axis 1 */
  d.d[d.rank] = o->v.dim[0], s.s[d.rank++] = o->v.st[0];
  for (int i = 2; i < o->v.nd; i++) d.d[d.rank] = o->v.dim[i], s.s[d.rank++] = o->v.st[i];
  d.d[d.rank] = o->v.dim[1], s.s[d.rank++] = o->v.st[1];
  lathe_dtype path[2] = {dt, dt};
  return lathe_cuda_convert(ex, o->p, *p, path, 2, n, &d, &s, 0);
}

/* The result in NHWC-packed scratch copied to the output tensor (row-major). */
static lathe_status_t stage_out(lathe_cuda_exec *ex, const lt_conv_desc *c, const dnn_operand *o, lcuDeviceptr p) {
  if (!o->scratch) return NULL;
  const lathe_shape *os = &c->out->shape;
  lt_dims_h d;
  lt_strides_h s;
  int64_t st[ND];
  memset(&d, 0, sizeof d);
  memset(&s, 0, sizeof s);
  d.rank = os->rank;
  for (int a = 0; a < os->rank; a++) d.d[a] = os->dims[a];
  packed_strides(o->v.dim, o->v.nd, true, st);
  for (int i = 0; i < o->v.nd; i++) s.s[o->v.axis[i]] = st[i];
  lathe_dtype path[2] = {c->dt, c->dt};
  return lathe_cuda_convert(ex, p, lathe_cuda_ptr(c->out), path, 2, lathe_shape_size(os), &d, &s, 0);
}

/* cuDNN's descriptors of one reading. */
typedef struct dnn_descs {
  lcudnnTensorDesc a, c; /* forward: x, y; kernel gradient: x, dy (b's) */
  lcudnnFilterDesc f;    /* forward: w; kernel gradient: dw */
  lcudnnConvDesc conv;
} dnn_descs;

static void descs_free(const lcu_api *api, dnn_descs *d) {
  if (d->a) api->cudnnDestroyTensorDescriptor(d->a);
  if (d->c) api->cudnnDestroyTensorDescriptor(d->c);
  if (d->f) api->cudnnDestroyFilterDescriptor(d->f);
  if (d->conv) api->cudnnDestroyConvolutionDescriptor(d->conv);
  memset(d, 0, sizeof *d);
}

/* The operand's dims for cuDNN (one spatial axis as two, the second of size 1) and its packed
 * strides in its format. */
static int dnn_dims(const dnn_operand *o, int *dims, int *st) {
  int64_t d[ND + 1], s[ND + 1];
  int nd = o->v.nd;
  memcpy(d, o->v.dim, sizeof(int64_t) * (size_t)nd);
  if (nd == 3) d[nd++] = 1;
  packed_strides(d, nd, o->format == LCUDNN_TENSOR_NHWC, s);
  for (int i = 0; i < nd; i++) dims[i] = (int)d[i], st[i] = (int)s[i]; /* readings() checked they fit */
  return nd;
}

static lathe_status_t tensor_desc(const lcu_api *api, int type, const dnn_operand *o, lcudnnTensorDesc *out) {
  LATHE_RETURN_IF_ERROR(dnn_error(api, api->cudnnCreateTensorDescriptor(out), "cudnnCreateTensorDescriptor"));
  int dims[ND + 1], st[ND + 1], nd = dnn_dims(o, dims, st);
  return dnn_error(api, api->cudnnSetTensorNdDescriptor(*out, type, nd, dims, st), "cudnnSetTensorNdDescriptor");
}

static lathe_status_t filter_desc(const lcu_api *api, int type, const dnn_operand *o, lcudnnFilterDesc *out) {
  LATHE_RETURN_IF_ERROR(dnn_error(api, api->cudnnCreateFilterDescriptor(out), "cudnnCreateFilterDescriptor"));
  int dims[ND + 1], st[ND + 1], nd = dnn_dims(o, dims, st);
  return dnn_error(api, api->cudnnSetFilterNdDescriptor(*out, type, o->format, nd, dims), "cudnnSetFilterNdDescriptor");
}

static lathe_status_t descs_make(const lcu_api *api, const dnn_reading *r, int type, int compute, int math, int ns,
                                 dnn_descs *d) {
  memset(d, 0, sizeof *d);
  const dnn_operand *ten2 = r->way == WAY_FWD ? &r->c : &r->b, *filt = r->way == WAY_FWD ? &r->b : &r->c;
  lathe_status_t st = tensor_desc(api, type, &r->a, &d->a);
  if (!st) st = tensor_desc(api, type, ten2, &d->c);
  if (!st) st = filter_desc(api, type, filt, &d->f);
  if (!st) st = dnn_error(api, api->cudnnCreateConvolutionDescriptor(&d->conv), "cudnnCreateConvolutionDescriptor");
  int pad[3] = {0, 0, 0}, stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1}, n = ns < 2 ? 2 : ns;
  for (int i = 0; i < ns; i++) pad[i] = r->pad[i], stride[i] = r->stride[i], dil[i] = r->dil[i];
  if (!st)
    st = dnn_error(api, api->cudnnSetConvolutionNdDescriptor(d->conv, n, pad, stride, dil, LCUDNN_CROSS_CORRELATION, compute),
                   "cudnnSetConvolutionNdDescriptor");
  if (!st && r->groups > 1)
    st = dnn_error(api, api->cudnnSetConvolutionGroupCount(d->conv, r->groups), "cudnnSetConvolutionGroupCount");
  if (!st) st = dnn_error(api, api->cudnnSetConvolutionMathType(d->conv, math), "cudnnSetConvolutionMathType");
  if (st) descs_free(api, d);
  return st;
}

/* Stages the reading's inputs, runs it (algorithm algo, or measures its algorithms into *best /
 * *best_ms when find), and copies a staged result out. */
static lathe_status_t run_reading(lathe_cuda_exec *ex, const lt_conv_desc *c, dnn_reading *r, int type, int compute,
                                  int math, bool find, int algo, size_t ws_bytes, lcudnnAlgoPerf *best) {
  cuda_dev *dv = lathe_cuda_exec_dev(ex);
  const lcu_api *api = dv->cu->api;
  lcuDeviceptr a, b, cp = r->c.p, ws = 0;
  LATHE_RETURN_IF_ERROR(stage_in(ex, c->dt, &r->a, &a));
  LATHE_RETURN_IF_ERROR(stage_in(ex, c->dt, &r->b, &b));
  if (r->c.scratch) LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, c->dt, count(&r->c), &cp, NULL));
  if (find) ws_bytes = WS_MAX;
  if (ws_bytes) LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_UINT8, (int64_t)ws_bytes, &ws, NULL));
  dnn_descs d;
  LATHE_RETURN_IF_ERROR(descs_make(api, r, type, compute, math, c->ns, &d));
  double one = 1, zero = 0;
  float onef = 1, zerof = 0;
  const void *alpha = type == LCUDNN_DATA_DOUBLE ? (const void *)&one : (const void *)&onef;
  const void *beta = type == LCUDNN_DATA_DOUBLE ? (const void *)&zero : (const void *)&zerof;
  void *A = (void *)(uintptr_t)a, *B = (void *)(uintptr_t)b, *C = (void *)(uintptr_t)cp, *W = (void *)(uintptr_t)ws;
  lathe_status_t st = NULL;
  pthread_mutex_lock(&dv->dnn_mu);
  lcudnnStatus s = api->cudnnSetStream(dv->dnn, lathe_cuda_exec_stream(ex));
  if (s == LCUDNN_STATUS_SUCCESS && find) {
    lcudnnAlgoPerf perf[16];
    int got = 0;
    s = r->way == WAY_FWD
            ? api->cudnnFindConvolutionForwardAlgorithmEx(dv->dnn, d.a, A, d.f, B, d.conv, d.c, C, 16, &got, perf, W, ws_bytes)
            : api->cudnnFindConvolutionBackwardFilterAlgorithmEx(dv->dnn, d.a, A, d.c, B, d.conv, d.f, C, 16, &got, perf, W,
                                                                  ws_bytes);
    best->status = -1;
    for (int i = 0; s == LCUDNN_STATUS_SUCCESS && i < got; i++) /* sorted fastest first */
      if (perf[i].status == LCUDNN_STATUS_SUCCESS && perf[i].memory <= WS_MAX) {
        *best = perf[i];
        break;
      }
    if (s != LCUDNN_STATUS_SUCCESS) best->status = -1, s = LCUDNN_STATUS_SUCCESS; /* not this reading */
  } else if (s == LCUDNN_STATUS_SUCCESS) {
    s = r->way == WAY_FWD
            ? api->cudnnConvolutionForward(dv->dnn, alpha, d.a, A, d.f, B, d.conv, algo, W, ws_bytes, beta, d.c, C)
            : api->cudnnConvolutionBackwardFilter(dv->dnn, alpha, d.a, A, d.c, B, d.conv, algo, W, ws_bytes, beta, d.f, C);
  }
  pthread_mutex_unlock(&dv->dnn_mu);
  st = dnn_error(api, s, r->way == WAY_FWD ? "convolution forward" : "convolution backward filter");
  descs_free(api, &d);
  if (!st && !find) st = stage_out(ex, c, &r->c, cp);
  return st;
}

lathe_status_t lathe_cuda_time_runs(lathe_cuda_exec *ex, lathe_status_t (*fn)(void *), void *ctx, int reps, float *ms) {
  const lcu_api *api = lathe_cuda_exec_api(ex);
  lcuStream s = lathe_cuda_exec_stream(ex);
  LATHE_RETURN_IF_ERROR(fn(ctx));
  lcuEvent e[2] = {NULL, NULL};
  lathe_status_t st = lathe_cuda_error(api, api->cuEventCreate(&e[0], 0), "cuDNN timing: cuEventCreate");
  if (!st) st = lathe_cuda_error(api, api->cuEventCreate(&e[1], 0), "cuDNN timing: cuEventCreate");
  if (!st) st = lathe_cuda_error(api, api->cuEventRecord(e[0], s), "cuDNN timing: cuEventRecord");
  for (int i = 0; i < reps && !st; i++) st = fn(ctx);
  if (!st) st = lathe_cuda_error(api, api->cuEventRecord(e[1], s), "cuDNN timing: cuEventRecord");
  if (!st) st = lathe_cuda_error(api, api->cuEventSynchronize(e[1]), "cuDNN timing: cuEventSynchronize");
  if (!st) st = lathe_cuda_error(api, api->cuEventElapsedTime(ms, e[0], e[1]), "cuDNN timing: cuEventElapsedTime");
  if (!st) *ms /= (float)reps;
  for (int i = 0; i < 2; i++)
    if (e[i]) api->cuEventDestroy(e[i]);
  return st;
}

/* ---- cuDNN's graph (backend) API ----
 * The legacy calls above reach only some of cuDNN 9's engines: on an H200 the CNN's 3x3 forward
 * (NHWC, 32 -> 64 channels, batch 128 of 14x14) took 97 us with the best legacy algorithm, TF32
 * allowed or not, and 13 us (TF32) or 49 us (exact) with engines the graph API offers. A reading
 * becomes an operation graph of one convolution; of the engine configurations cuDNN's heuristics
 * list, the first GRAPH_TRY acceptable ones are timed and the fastest is kept as a finalized
 * execution plan. Acceptable: no runtime compilation (seconds of a first step), no inputs
 * converted down or sums in reduced precision, and for exact Float32 no tensor cores (TF32) and
 * none of the engines measured inexact (inexact_f32). On
 * disk a choice is its place in the heuristics' list (the same for one cuDNN version and GPU) and
 * the engine's global index, which must match when the plan is made again. */
/* GRAPH_LIST: the heuristics rank TF32 engines first; the CNN's exact Float32 ones came 29th and 32nd */
enum { GRAPH_TRY = 8, GRAPH_LIST = 64, MATH_GRAPH = -1 };
enum { GD_T0, GD_T1, GD_T2, GD_CONV, GD_OP, GD_GRAPH, GD_CFG, GD_PLAN, GD_N };

/* A reading's descriptors, its plan last; all kept while the plan lives. */
typedef struct dnn_plan {
  lcudnnBackendDesc d[GD_N];
  int64_t ws;
} dnn_plan;

static void plan_free(const lcu_api *api, dnn_plan *p) {
  if (!p) return;
  for (int i = GD_N - 1; i >= 0; i--)
    if (p->d[i]) api->cudnnBackendDestroyDescriptor(p->d[i]);
  free(p);
}

static lcudnnStatus g_tensor(const lcu_api *api, const dnn_operand *o, int type, int64_t uid, int64_t align,
                             lcudnnBackendDesc *t) {
  int dims[ND + 1], st[ND + 1], nd = dnn_dims(o, dims, st);
  int64_t d64[ND + 1], s64[ND + 1];
  for (int i = 0; i < nd; i++) d64[i] = dims[i], s64[i] = st[i];
  lcudnnStatus s = api->cudnnBackendCreateDescriptor(G_TENSOR, t);
  if (!s) s = api->cudnnBackendSetAttribute(*t, A_T_DATA_TYPE, G_T_DATA_TYPE, 1, &type);
  if (!s) s = api->cudnnBackendSetAttribute(*t, A_T_DIMS, G_T_INT64, nd, d64);
  if (!s) s = api->cudnnBackendSetAttribute(*t, A_T_STRIDES, G_T_INT64, nd, s64);
  if (!s) s = api->cudnnBackendSetAttribute(*t, A_T_UID, G_T_INT64, 1, &uid);
  if (!s) s = api->cudnnBackendSetAttribute(*t, A_T_ALIGN, G_T_INT64, 1, &align);
  return s ? s : api->cudnnBackendFinalize(*t);
}

/* The operation graph of reading r into p (tensors a, b, c are unique ids 1, 2, 3). */
static lcudnnStatus g_graph(cuda_dev *dv, const dnn_reading *r, int type, int compute, int ns, int64_t align, dnn_plan *p) {
  const lcu_api *api = dv->cu->api;
  const dnn_operand *o[3] = {&r->a, &r->b, &r->c};
  lcudnnStatus s = 0;
  for (int i = 0; i < 3 && !s; i++) s = g_tensor(api, o[i], type, i + 1, align, &p->d[GD_T0 + i]);
  int64_t sd = ns < 2 ? 2 : ns, pad[LT_CONV_MAX_SP], str[LT_CONV_MAX_SP], dil[LT_CONV_MAX_SP];
  for (int i = 0; i < sd; i++)
    pad[i] = i < ns ? r->pad[i] : 0, str[i] = i < ns ? r->stride[i] : 1, dil[i] = i < ns ? r->dil[i] : 1;
  int mode = LCUDNN_CROSS_CORRELATION;
  lcudnnBackendDesc cv = NULL, op = NULL, g = NULL;
  if (!s) s = api->cudnnBackendCreateDescriptor(G_CONVOLUTION, &p->d[GD_CONV]);
  if (!s) {
    cv = p->d[GD_CONV];
    s = api->cudnnBackendSetAttribute(cv, A_CONV_SPATIAL_DIMS, G_T_INT64, 1, &sd);
  }
  if (!s) s = api->cudnnBackendSetAttribute(cv, A_CONV_COMP_TYPE, G_T_DATA_TYPE, 1, &compute);
  if (!s) s = api->cudnnBackendSetAttribute(cv, A_CONV_MODE, G_T_CONV_MODE, 1, &mode);
  if (!s) s = api->cudnnBackendSetAttribute(cv, A_CONV_DILATIONS, G_T_INT64, sd, dil);
  if (!s) s = api->cudnnBackendSetAttribute(cv, A_CONV_STRIDES, G_T_INT64, sd, str);
  if (!s) s = api->cudnnBackendSetAttribute(cv, A_CONV_PRE_PAD, G_T_INT64, sd, pad);
  if (!s) s = api->cudnnBackendSetAttribute(cv, A_CONV_POST_PAD, G_T_INT64, sd, pad); /* readings pad symmetrically */
  if (!s) s = api->cudnnBackendFinalize(cv);
  bool fwd = r->way == WAY_FWD, dbl = type == LCUDNN_DATA_DOUBLE;
  float one_f = 1, zero_f = 0;
  double one_d = 1, zero_d = 0;
  int st = dbl ? G_T_DOUBLE : G_T_FLOAT;
  if (!s) s = api->cudnnBackendCreateDescriptor(fwd ? G_OP_FWD : G_OP_BWD_FILTER, &p->d[GD_OP]);
  if (!s) {
    op = p->d[GD_OP];
    s = api->cudnnBackendSetAttribute(op, fwd ? A_FWD_X : A_BWF_X, G_T_DESC, 1, &p->d[GD_T0]);
  }
  if (!s) s = api->cudnnBackendSetAttribute(op, fwd ? A_FWD_W : A_BWF_DY, G_T_DESC, 1, &p->d[GD_T1]);
  if (!s) s = api->cudnnBackendSetAttribute(op, fwd ? A_FWD_Y : A_BWF_DW, G_T_DESC, 1, &p->d[GD_T2]);
  if (!s) s = api->cudnnBackendSetAttribute(op, fwd ? A_FWD_CONV : A_BWF_CONV, G_T_DESC, 1, &cv);
  if (!s) s = api->cudnnBackendSetAttribute(op, fwd ? A_FWD_ALPHA : A_BWF_ALPHA, st, 1, dbl ? (void *)&one_d : (void *)&one_f);
  if (!s) s = api->cudnnBackendSetAttribute(op, fwd ? A_FWD_BETA : A_BWF_BETA, st, 1, dbl ? (void *)&zero_d : (void *)&zero_f);
  if (!s) s = api->cudnnBackendFinalize(op);
  if (!s) s = api->cudnnBackendCreateDescriptor(G_OPGRAPH, &p->d[GD_GRAPH]);
  if (!s) {
    g = p->d[GD_GRAPH];
    s = api->cudnnBackendSetAttribute(g, A_GRAPH_OPS, G_T_DESC, 1, &op);
  }
  if (!s) s = api->cudnnBackendSetAttribute(g, A_GRAPH_HANDLE, G_T_HANDLE, 1, &dv->dnn);
  return s ? s : api->cudnnBackendFinalize(g);
}

lcudnnStatus lathe_cuda_dnn_configs(const lcu_api *api, lcudnnBackendDesc graph, lcudnnBackendDesc *cfg, int cap,
                                    int64_t *n) {
  lcudnnBackendDesc h = NULL;
  int mode = HEUR_MODE_A;
  *n = 0;
  lcudnnStatus s = api->cudnnBackendCreateDescriptor(G_ENGINEHEUR, &h);
  if (!s) s = api->cudnnBackendSetAttribute(h, A_HEUR_GRAPH, G_T_DESC, 1, &graph);
  if (!s) s = api->cudnnBackendSetAttribute(h, A_HEUR_MODE, G_T_HEUR_MODE, 1, &mode);
  if (!s) s = api->cudnnBackendFinalize(h);
  for (int i = 0; i < cap && !s; i++) s = api->cudnnBackendCreateDescriptor(G_ENGINECFG, &cfg[i]);
  if (!s) s = api->cudnnBackendGetAttribute(h, A_HEUR_RESULTS, G_T_DESC, cap, n, cfg);
  if (h) api->cudnnBackendDestroyDescriptor(h);
  if (s) *n = 0;
  return s;
}

/* Engines that carry no numerical note yet round exact Float32 worse than direct sums: on cuDNN
 * 9.14 (H200) the kernel gradient's engine 17 was 1.4e-6 - 2.6e-6 of the largest value off a
 * double reference where the others were 0.8e-7 - 6e-7 (`bench/cudnn_engines.c -exact`), and it
 * failed a conformance row by 2e-4 when timing on a busy GPU picked it. Excluded for exact
 * Float32 only; a false exclusion costs speed, not results (it was the slower engine anyway). */
static const struct {
  int way;
  int64_t index;
} inexact_f32[] = {{WAY_BWD_FILTER, 17}};

/* Whether configuration cfg is acceptable for reading way (file comment); its engine's global
 * index in *index. */
static bool g_acceptable(const lcu_api *api, lcudnnBackendDesc cfg, int way, bool tensor_cores, int64_t *index) {
  lcudnnBackendDesc e = NULL;
  int notes[16], behavior[8];
  int64_t n = 0, nn = 0, nb = 0;
  lcudnnStatus s = api->cudnnBackendCreateDescriptor(G_ENGINE, &e);
  if (!s) s = api->cudnnBackendGetAttribute(cfg, A_CFG_ENGINE, G_T_DESC, 1, &n, &e);
  if (!s) s = api->cudnnBackendGetAttribute(e, A_ENGINE_INDEX, G_T_INT64, 1, &n, index);
  if (!s) s = api->cudnnBackendGetAttribute(e, A_ENGINE_NUMERICAL, G_T_NUMERICAL_NOTE, 16, &nn, notes);
  if (!s) s = api->cudnnBackendGetAttribute(e, A_ENGINE_BEHAVIOR, G_T_BEHAVIOR_NOTE, 8, &nb, behavior);
  if (e) api->cudnnBackendDestroyDescriptor(e);
  bool ok = !s;
  for (int64_t i = 0; ok && i < nn && i < 16; i++)
    ok = notes[i] != NOTE_DOWN_CONVERT && notes[i] != NOTE_REDUCED_REDUCTION && (tensor_cores || notes[i] != NOTE_TENSOR_CORE);
  for (int64_t i = 0; ok && i < nb && i < 8; i++) ok = behavior[i] != BEHAVIOR_RUNTIME_COMPILATION;
  for (size_t i = 0; ok && !tensor_cores && i < sizeof inexact_f32 / sizeof inexact_f32[0]; i++)
    ok = !(inexact_f32[i].way == way && inexact_f32[i].index == *index);
  return ok;
}

lcudnnStatus lathe_cuda_dnn_plan(cuda_dev *dv, lcudnnBackendDesc cfg, lcudnnBackendDesc *plan, int64_t *ws) {
  const lcu_api *api = dv->cu->api;
  lcudnnBackendDesc pl = NULL;
  int64_t n = 0;
  *plan = NULL;
  lcudnnStatus s = api->cudnnBackendCreateDescriptor(G_PLAN, &pl);
  if (!s) s = api->cudnnBackendSetAttribute(pl, A_PLAN_HANDLE, G_T_HANDLE, 1, &dv->dnn);
  if (!s) s = api->cudnnBackendSetAttribute(pl, A_PLAN_CFG, G_T_DESC, 1, &cfg);
  if (!s) s = api->cudnnBackendFinalize(pl);
  if (!s) s = api->cudnnBackendGetAttribute(pl, A_PLAN_WORKSPACE, G_T_INT64, 1, &n, ws);
  if (!s && (*ws < 0 || (size_t)*ws > WS_MAX)) s = -1;
  if (s && pl) api->cudnnBackendDestroyDescriptor(pl);
  if (!s) *plan = pl;
  return s;
}

static lcudnnStatus g_plan(cuda_dev *dv, dnn_plan *p, lcudnnBackendDesc cfg) {
  return lathe_cuda_dnn_plan(dv, cfg, &p->d[GD_PLAN], &p->ws);
}

lcudnnStatus lathe_cuda_dnn_execute(lathe_cuda_exec *ex, lcudnnBackendDesc plan, int n, const int64_t *uids, void **ptrs,
                                    lcuDeviceptr ws) {
  cuda_dev *dv = lathe_cuda_exec_dev(ex);
  const lcu_api *api = dv->cu->api;
  void *w = (void *)(uintptr_t)ws;
  lcudnnBackendDesc vp = NULL;
  lcudnnStatus s = api->cudnnBackendCreateDescriptor(G_VARIANT_PACK, &vp);
  if (!s) s = api->cudnnBackendSetAttribute(vp, A_VP_PTRS, G_T_VOID_PTR, n, ptrs);
  if (!s) s = api->cudnnBackendSetAttribute(vp, A_VP_UIDS, G_T_INT64, n, uids);
  if (!s) s = api->cudnnBackendSetAttribute(vp, A_VP_WORKSPACE, G_T_VOID_PTR, 1, &w);
  if (!s) s = api->cudnnBackendFinalize(vp);
  if (!s) {
    pthread_mutex_lock(&dv->dnn_mu);
    s = api->cudnnSetStream(dv->dnn, lathe_cuda_exec_stream(ex));
    if (!s) s = api->cudnnBackendExecute(dv->dnn, plan, vp);
    pthread_mutex_unlock(&dv->dnn_mu);
  }
  if (vp) api->cudnnBackendDestroyDescriptor(vp);
  return s;
}

typedef struct g_run {
  lathe_cuda_exec *ex;
  const lt_conv_desc *c;
  dnn_reading *r;
  dnn_plan *p;
} g_run;

/* Runs plan p on reading r: stages its inputs, executes, copies a staged result out. */
static lathe_status_t g_execute(void *arg) {
  g_run *g = arg;
  const lcu_api *api = lathe_cuda_exec_api(g->ex);
  lcuDeviceptr a, b, cp = g->r->c.p, ws = 0;
  LATHE_RETURN_IF_ERROR(stage_in(g->ex, g->c->dt, &g->r->a, &a));
  LATHE_RETURN_IF_ERROR(stage_in(g->ex, g->c->dt, &g->r->b, &b));
  if (g->r->c.scratch) LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(g->ex, g->c->dt, count(&g->r->c), &cp, NULL));
  if (g->p->ws) LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(g->ex, LATHE_DTYPE_UINT8, g->p->ws, &ws, NULL));
  void *ptr[3] = {(void *)(uintptr_t)a, (void *)(uintptr_t)b, (void *)(uintptr_t)cp};
  int64_t uid[3] = {1, 2, 3};
  LATHE_RETURN_IF_ERROR(dnn_error(api, lathe_cuda_dnn_execute(g->ex, g->p->d[GD_PLAN], 3, uid, ptr, ws), "graph API execution"));
  return stage_out(g->ex, g->c, &g->r->c, cp);
}

/* While dumping: a convolution's measured choice (the first time its configuration is seen). */
static void note_choice(lathe_cuda_exec *ex, const lt_conv_desc *c, const cudnn_choice *got, float best_ms, float own_ms) {
  char what[256];
  size_t at = 0;
  lathe_bufprintf(what, sizeof what, &at, "cuDNN %s ConvGeneral", lathe_dtype_name(c->dt));
  const lt_conv_view *views[3] = {&c->x, &c->w, &c->y};
  for (int v = 0; v < 3; v++) {
    lathe_bufprintf(what, sizeof what, &at, " %c[", "xwy"[v]);
    for (int a = 0; a < views[v]->nd; a++) lathe_bufprintf(what, sizeof what, &at, "%s%lld", a ? "," : "", (long long)views[v]->dim[a]);
    lathe_bufprintf(what, sizeof what, &at, "]");
  }
  const char *dir = lathe_cuda_exec_dump_dir(ex), *way = got->way == WAY_FWD ? "as a forward convolution" : "as a kernel gradient";
  if (got->way == WAY_OWN && own_ms < 0)
    lathe_profile_note(dir, LATHE_CUDA_LIBRARY_NOTES, "%s: lathe's own kernels (no cuDNN engine or algorithm ran it)", what);
  else if (got->way == WAY_OWN)
    lathe_profile_note(dir, LATHE_CUDA_LIBRARY_NOTES, "%s: lathe's own kernels, %.4f ms (cuDNN's best %.4f ms)", what, own_ms, best_ms);
  else if (got->math == MATH_GRAPH)
    lathe_profile_note(dir, LATHE_CUDA_LIBRARY_NOTES, "%s: graph-API engine %lld %s, %.4f ms (lathe's own %.4f ms), workspace %zu bytes",
                       what, (long long)got->index, way, best_ms, own_ms, got->ws);
  else
    lathe_profile_note(dir, LATHE_CUDA_LIBRARY_NOTES, "%s: algorithm %d (math %d) %s, %.4f ms (lathe's own %.4f ms), workspace %zu bytes",
                       what, got->algo, got->math, way, best_ms, own_ms, got->ws);
}

/* The fastest acceptable engine of reading r (file comment) as *best (NULL when none runs), its
 * place in the heuristics' list and global index, and its time. */
static lathe_status_t g_measure(lathe_cuda_exec *ex, const lt_conv_desc *c, dnn_reading *r, int type, int compute,
                                bool tensor_cores, int64_t align, dnn_plan **best, int *pos, int64_t *index, float *ms) {
  cuda_dev *dv = lathe_cuda_exec_dev(ex);
  const lcu_api *api = dv->cu->api;
  *best = NULL;
  dnn_plan base = {0};
  lcudnnBackendDesc cfg[GRAPH_LIST] = {0};
  int64_t n = 0;
  lathe_status_t st = NULL;
  if (!g_graph(dv, r, type, compute, c->ns, align, &base)) lathe_cuda_dnn_configs(api, base.d[GD_GRAPH], cfg, GRAPH_LIST, &n);
  for (int i = 0, tried = 0; i < n && tried < GRAPH_TRY && !st; i++) {
    int64_t gi = -1;
    dnn_plan *p = calloc(1, sizeof *p);
    if (!p) {
      st = LATHE_OOM("ConvGeneral");
      break;
    }
    if (!g_acceptable(api, cfg[i], r->way, tensor_cores, &gi) || g_plan(dv, p, cfg[i])) {
      plan_free(api, p);
      continue;
    }
    tried++;
    float t = 0;
    g_run run = {ex, c, r, p};
    lathe_status_t e = lathe_cuda_time_runs(ex, g_execute, &run, 3, &t);
    if (e && lathe_status_code_of(e) != LATHE_STATUS_INTERNAL) st = e; /* out of memory, say: not the engine's fault */
    else if (e) lathe_status_free(e);
    if (e || (*best && t >= *ms)) {
      plan_free(api, p);
      continue;
    }
    p->d[GD_CFG] = cfg[i], cfg[i] = NULL; /* the plan keeps its configuration */
    plan_free(api, *best);
    *best = p, *pos = i, *index = gi, *ms = t;
  }
  for (int i = 0; i < GRAPH_LIST; i++)
    if (cfg[i]) api->cudnnBackendDestroyDescriptor(cfg[i]);
  if (*best) /* the plan keeps the graph's descriptors too */
    for (int i = GD_T0; i <= GD_GRAPH; i++) (*best)->d[i] = base.d[i], base.d[i] = NULL;
  for (int i = 0; i < GD_N; i++)
    if (base.d[i]) api->cudnnBackendDestroyDescriptor(base.d[i]);
  if (st) plan_free(api, *best), *best = NULL;
  return st;
}

/* The plan of a remembered choice made again: the configuration at pos, whose engine must be index. */
static lathe_status_t g_remake(cuda_dev *dv, const lt_conv_desc *c, const dnn_reading *r, int type, int compute,
                               bool tensor_cores, int64_t align, int pos, int64_t index, dnn_plan **out) {
  const lcu_api *api = dv->cu->api;
  dnn_plan *p = calloc(1, sizeof *p);
  if (!p) return LATHE_OOM("ConvGeneral");
  lcudnnBackendDesc cfg[GRAPH_LIST] = {0};
  int64_t n = 0, gi = -1;
  lcudnnStatus s = g_graph(dv, r, type, compute, c->ns, align, p);
  if (!s) s = lathe_cuda_dnn_configs(api, p->d[GD_GRAPH], cfg, GRAPH_LIST, &n);
  if (!s) s = pos < n && g_acceptable(api, cfg[pos], r->way, tensor_cores, &gi) && gi == index ? g_plan(dv, p, cfg[pos]) : -1;
  if (!s) p->d[GD_CFG] = cfg[pos], cfg[pos] = NULL;
  for (int i = 0; i < GRAPH_LIST; i++)
    if (cfg[i]) api->cudnnBackendDestroyDescriptor(cfg[i]);
  if (s) {
    plan_free(api, p);
    return lathe_status_new(LATHE_STATUS_INTERNAL, "ConvGeneral: cuDNN no longer offers the remembered engine %lld",
                            (long long)index);
  }
  *out = p;
  return NULL;
}

/* ---- the choices on disk ----
 * One file per cuDNN version and GPU model in the kernel cache's folder: the records of every
 * configuration measured, rewritten whole (atomically) when one is added. A file of the wrong
 * size, or a record that does not make sense, is ignored (then measured again). The name carries
 * the rules' version (CHOICE_RULES), so choices made under older rules are measured again. */
enum { CHOICE_RULES = 2 }; /* 2: inexact_f32 */
typedef struct choice_rec {
  int64_t key[KEYN];
  int32_t way, algo, math, index; /* index: a graph-API choice's engine */
  uint64_t ws;
} choice_rec;

static bool choices_path(const cuda_dev *d, char *dir, size_t dcap, char *path, size_t pcap) {
  if (!lathe_cuda_cache_dir(dir, dcap)) return false;
  uint64_t h = 1469598103934665603ull; /* FNV-1a of the GPU's description */
  for (const char *c = d->description; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
  int n = snprintf(path, pcap, "%s/cudnn-%zu-%016llx.r%d.choices", dir, d->cu->api->cudnnGetVersion(), (unsigned long long)h,
                   (int)CHOICE_RULES);
  return n > 0 && (size_t)n < pcap;
}

static void choices_load(cuda_dev *d) {
  char dir[512], path[700];
  size_t n = 0;
  choice_rec *recs = choices_path(d, dir, sizeof dir, path, sizeof path) ? lathe_cuda_read_file(path, &n) : NULL;
  if (recs && n % sizeof(choice_rec) == 0)
    for (size_t i = 0; i < n / sizeof(choice_rec); i++) {
      const choice_rec *r = &recs[i];
      if (r->way < WAY_OWN || r->way > WAY_BWD_FILTER || r->algo < 0 || r->ws > WS_MAX) continue;
      cudnn_choice *c = malloc(sizeof *c);
      if (!c) break;
      memcpy(c->key, r->key, sizeof c->key);
      c->way = r->way, c->algo = r->algo, c->math = r->math, c->ws = r->ws, c->index = r->index, c->g = NULL;
      c->next = d->dnn_choices, d->dnn_choices = c;
    }
  free(recs);
}

/* With dnn_mu held. */
static void choices_save(cuda_dev *d) {
  char dir[512], path[700];
  if (!choices_path(d, dir, sizeof dir, path, sizeof path)) return;
  size_t n = 0;
  for (cudnn_choice *c = d->dnn_choices; c; c = c->next) n++;
  choice_rec *recs = calloc(n ? n : 1, sizeof *recs);
  if (!recs) return;
  size_t i = 0;
  for (cudnn_choice *c = d->dnn_choices; c; c = c->next, i++) {
    memcpy(recs[i].key, c->key, sizeof recs[i].key);
    recs[i].way = c->way, recs[i].algo = c->algo, recs[i].math = c->math, recs[i].ws = c->ws;
    recs[i].index = (int32_t)c->index;
  }
  lathe_cuda_write_file(dir, path, recs, n * sizeof *recs);
  free(recs);
}

bool lathe_cuda_dnn_ready(cuda_dev *d) {
  pthread_mutex_lock(&d->dnn_mu);
  if (d->dnn_state == 0) {
    const lcu_api *api;
    lathe_status_t st = lathe_cuda_load_cudnn(&api);
    d->dnn_state = !st && api->cudnnCreate(&d->dnn) == LCUDNN_STATUS_SUCCESS ? 1 : -1;
    lathe_status_free(st);
    if (d->dnn_state == 1) choices_load(d);
  }
  bool ok = d->dnn_state == 1;
  pthread_mutex_unlock(&d->dnn_mu);
  return ok;
}

lathe_status_t lathe_cuda_cudnn_conv(lathe_cuda_exec *ex, const lt_conv_desc *c, lathe_status_t (*own)(void *),
                                     void *own_ctx, bool *done) {
  *done = false;
  cuda_dev *d = lathe_cuda_exec_dev(ex);
  const lcu_api *api = d->cu->api;
  bool tf32 = d->cu->tf32;
  int type, compute = LCUDNN_DATA_FLOAT, math = LCUDNN_DEFAULT_MATH;
  switch (c->dt) {
    case LATHE_DTYPE_FLOAT32: type = LCUDNN_DATA_FLOAT, math = tf32 ? LCUDNN_DEFAULT_MATH : LCUDNN_FMA_MATH; break;
    case LATHE_DTYPE_FLOAT16: type = LCUDNN_DATA_HALF; break;
    case LATHE_DTYPE_BFLOAT16: type = LCUDNN_DATA_BFLOAT16; break;
    case LATHE_DTYPE_FLOAT64: type = compute = LCUDNN_DATA_DOUBLE; break;
    default: return NULL;
  }
  bool tensor_cores = c->dt != LATHE_DTYPE_FLOAT32 || tf32;
  dnn_reading r[2];
  int nr;
  if (!d->cu->cudnn || !(nr = readings(c, r)) || !lathe_cuda_dnn_ready(d)) return NULL;
  /* the graph API is told the pointers' alignment: part of the key, as a plan assumes it */
  int64_t align = 16;
  while (align > 1 && ((c->xp | c->wp | c->yp) & (lcuDeviceptr)(align - 1))) align /= 2;
  int64_t key[KEYN];
  make_key(c, tf32, key);
  key[1] |= align << 1;
  pthread_mutex_lock(&d->dnn_mu);
  cudnn_choice *ch = d->dnn_choices;
  while (ch && memcmp(ch->key, key, sizeof key) != 0) ch = ch->next;
  pthread_mutex_unlock(&d->dnn_mu);
  if (!ch && lathe_cuda_exec_capturing(ex)) /* measuring needs the GPU to run: not inside a graph's capture */
    return lathe_status_new(LATHE_STATUS_UNIMPLEMENTED, "ConvGeneral: cuDNN's algorithms are measured outside a CUDA graph");
  if (!ch) { /* measure every reading (the graph API's engines, else the legacy algorithms), and lathe's own path */
    lathe_trace *tr = lathe_cuda_exec_trace(ex);
    int64_t t0 = tr ? lathe_trace_now() : 0;
    cudnn_choice got = {.way = WAY_OWN};
    float best_ms = 0;
    for (int i = 0; i < nr; i++) {
      dnn_plan *gp;
      int pos = 0;
      int64_t index = 0;
      float ms = 0;
      lathe_status_t st = g_measure(ex, c, &r[i], type, compute, tensor_cores, align, &gp, &pos, &index, &ms);
      if (st) {
        plan_free(api, got.g);
        return st;
      }
      if (gp) {
        if (got.way != WAY_OWN && ms >= best_ms) {
          plan_free(api, gp);
          continue;
        }
        plan_free(api, got.g);
        got.way = r[i].way, got.algo = pos, got.math = MATH_GRAPH, got.index = index, got.g = gp;
        got.ws = (size_t)gp->ws, best_ms = ms;
        continue;
      }
      lcudnnAlgoPerf p;
      st = run_reading(ex, c, &r[i], type, compute, math, true, 0, 0, &p);
      if (st) {
        plan_free(api, got.g);
        return st;
      }
      if (p.status == LCUDNN_STATUS_SUCCESS && (got.way == WAY_OWN || p.time < best_ms)) {
        plan_free(api, got.g);
        got.way = r[i].way, got.algo = p.algo, got.math = p.mathType, got.ws = p.memory, got.g = NULL, best_ms = p.time;
      }
    }
    float own_ms = -1; /* not measured: nothing of cuDNN's ran */
    if (got.way != WAY_OWN) {
      lathe_status_t st = lathe_cuda_time_runs(ex, own, own_ctx, 1, &own_ms);
      if (st) {
        plan_free(api, got.g);
        return st;
      }
      if (own_ms < best_ms) plan_free(api, got.g), got.g = NULL, got.way = WAY_OWN;
    }
    if (lathe_cuda_exec_dump_dir(ex)) note_choice(ex, c, &got, best_ms, own_ms);
    if (tr) { /* the host's time of the search (it runs every candidate on the GPU and waits) */
      char args[64];
      snprintf(args, sizeof args, "\"dtype\":\"%s\",\"chosen\":\"%s\"", lathe_dtype_name(c->dt),
               got.way == WAY_OWN ? "lathe" : got.math == MATH_GRAPH ? "cuDNN graph engine" : "cuDNN algorithm");
      lathe_trace_complete(tr, "cuDNN engine search", "compile", t0, lathe_trace_now(), args);
    }
    cudnn_choice *n = malloc(sizeof *n);
    if (!n) {
      plan_free(api, got.g);
      return LATHE_OOM("ConvGeneral");
    }
    *n = got;
    memcpy(n->key, key, sizeof key);
    pthread_mutex_lock(&d->dnn_mu);
    n->next = d->dnn_choices, d->dnn_choices = n;
    choices_save(d);
    pthread_mutex_unlock(&d->dnn_mu);
    ch = n;
  }
  pthread_mutex_lock(&d->dnn_mu);
  cudnn_choice got = *ch;
  pthread_mutex_unlock(&d->dnn_mu);
  dnn_reading *use = NULL;
  for (int i = 0; i < nr; i++)
    if (r[i].way == got.way) use = &r[i];
  if (!use) return NULL; /* lathe's own path (or a remembered reading these shapes no longer allow) */
  lathe_status_t st;
  if (got.math == MATH_GRAPH) {
    st = NULL;
    if (!got.g) { /* remembered on disk: the plan made again, once */
      dnn_plan *p = NULL;
      st = g_remake(d, c, use, type, compute, tensor_cores, align, got.algo, got.index, &p);
      if (!st) {
        pthread_mutex_lock(&d->dnn_mu);
        if (ch->g) plan_free(api, p); /* another thread made it first */
        else ch->g = p;
        got.g = ch->g;
        pthread_mutex_unlock(&d->dnn_mu);
      }
    }
    if (!st) {
      g_run run = {ex, c, use, got.g};
      st = g_execute(&run);
    }
  } else {
    /* the algorithm's math mode as measured (FMA stays FMA; tensor-op modes only where allowed) */
    int m = c->dt == LATHE_DTYPE_FLOAT32 && !tf32 ? LCUDNN_FMA_MATH : got.math;
    st = run_reading(ex, c, use, type, compute, m, false, got.algo, got.ws, NULL);
  }
  if (st && lathe_status_code_of(st) == LATHE_STATUS_INTERNAL) {
    /* a remembered algorithm or engine cuDNN now refuses (a stale file): lathe's own path from now on */
    lathe_status_free(st);
    pthread_mutex_lock(&d->dnn_mu);
    ch->way = WAY_OWN;
    choices_save(d);
    pthread_mutex_unlock(&d->dnn_mu);
    return NULL;
  }
  LATHE_RETURN_IF_ERROR(st);
  *done = true;
  return NULL;
}
