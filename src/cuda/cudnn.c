/* cudnn.c -- ConvGeneral through cuDNN 9's convolution API, where libcudnn.so.9 is present.
 *
 * A ConvGeneral is offered to cuDNN in two readings: as a forward convolution (input, kernel,
 * output), and, where the shapes allow, as the kernel gradient of a forward convolution
 * (GoMLX's gradient of a kernel is a ConvGeneral whose "input" is the forward input with batch
 * and channels swapped, whose "kernel" is the output gradient and whose strides and kernel
 * dilations are the forward dilations and strides): cuDNN's backward-filter algorithms are built
 * for that shape, its forward ones are not. The first time a configuration (dtype, math mode,
 * every size, stride and parameter) runs on a device, cuDNN measures its algorithms for each
 * reading (cudnnFind...Ex, on the execution's stream, with a bounded workspace), lathe's own path
 * is timed with CUDA events, and the fastest is remembered: for the device's lifetime, and on disk
 * beside the kernel cache (one file per cuDNN version and GPU model), so that a later process
 * skips the measuring. Views that
 * cuDNN cannot take as they lie (a tensor neither NCHW- nor NHWC-packed; every GoMLX kernel,
 * which is HWIO) are copied into NHWC-packed scratch first, and a result computed into scratch is
 * copied to the output's layout. Math: Float32 with FMA only (exact products, as lathe's default),
 * TF32 tensor cores with tf32=1; Float16/BFloat16 with Float32 accumulation; Float64 as it is.
 * Not offered: input dilation, batch groups, negative padding, other dtypes, more than three
 * spatial axes (lathe's own path takes those). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"

enum { ND = 2 + LT_CONV_MAX_SP, KEYN = 5 + 6 * ND + 4 * LT_CONV_MAX_SP };
enum { WAY_OWN, WAY_FWD, WAY_BWD_FILTER };
/* cuDNN's workspace while measuring and running (an algorithm that needs more is not chosen) */
#define WS_MAX ((size_t)256 << 20)

typedef struct cudnn_choice {
  struct cudnn_choice *next;
  int64_t key[KEYN];
  int way, algo, math;
  size_t ws;
} cudnn_choice;

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
  if (d->dnn_state == 1 && d->dnn) api->cudnnDestroy(d->dnn);
  d->dnn = NULL;
  d->dnn_state = 0;
  for (cudnn_choice *c = d->dnn_choices, *next; c; c = next) next = c->next, free(c);
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

/* GPU time of one run of lathe's own path (after an untimed one, which compiles its kernels). */
static lathe_status_t time_own(lathe_cuda_exec *ex, lathe_status_t (*own)(void *), void *ctx, float *ms) {
  const lcu_api *api = lathe_cuda_exec_api(ex);
  lcuStream s = lathe_cuda_exec_stream(ex);
  LATHE_RETURN_IF_ERROR(own(ctx));
  lcuEvent e[2] = {NULL, NULL};
  lathe_status_t st = lathe_cuda_error(api, api->cuEventCreate(&e[0], 0), "ConvGeneral: cuEventCreate");
  if (!st) st = lathe_cuda_error(api, api->cuEventCreate(&e[1], 0), "ConvGeneral: cuEventCreate");
  if (!st) st = lathe_cuda_error(api, api->cuEventRecord(e[0], s), "ConvGeneral: cuEventRecord");
  if (!st) st = own(ctx);
  if (!st) st = lathe_cuda_error(api, api->cuEventRecord(e[1], s), "ConvGeneral: cuEventRecord");
  if (!st) st = lathe_cuda_error(api, api->cuEventSynchronize(e[1]), "ConvGeneral: cuEventSynchronize");
  if (!st) st = lathe_cuda_error(api, api->cuEventElapsedTime(ms, e[0], e[1]), "ConvGeneral: cuEventElapsedTime");
  for (int i = 0; i < 2; i++)
    if (e[i]) api->cuEventDestroy(e[i]);
  return st;
}

/* ---- the choices on disk ----
 * One file per cuDNN version and GPU model in the kernel cache's folder: the records of every
 * configuration measured, rewritten whole (atomically) when one is added. A file of the wrong
 * size, or a record that does not make sense, is ignored (then measured again). */
typedef struct choice_rec {
  int64_t key[KEYN];
  int32_t way, algo, math, pad;
  uint64_t ws;
} choice_rec;

static bool choices_path(const cuda_dev *d, char *dir, size_t dcap, char *path, size_t pcap) {
  if (!lathe_cuda_cache_dir(dir, dcap)) return false;
  uint64_t h = 1469598103934665603ull; /* FNV-1a of the GPU's description */
  for (const char *c = d->description; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
  int n = snprintf(path, pcap, "%s/cudnn-%zu-%016llx.choices", dir, d->cu->api->cudnnGetVersion(), (unsigned long long)h);
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
      c->way = r->way, c->algo = r->algo, c->math = r->math, c->ws = r->ws;
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
  }
  lathe_cuda_write_file(dir, path, recs, n * sizeof *recs);
  free(recs);
}

/* The device's handle, made once (with the choices on disk); false when cuDNN is missing or
 * refuses (then never again). */
static bool have_handle(cuda_dev *d) {
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
  bool tf32 = d->cu->tf32;
  int type, compute = LCUDNN_DATA_FLOAT, math = LCUDNN_DEFAULT_MATH;
  switch (c->dt) {
    case LATHE_DTYPE_FLOAT32: type = LCUDNN_DATA_FLOAT, math = tf32 ? LCUDNN_DEFAULT_MATH : LCUDNN_FMA_MATH; break;
    case LATHE_DTYPE_FLOAT16: type = LCUDNN_DATA_HALF; break;
    case LATHE_DTYPE_BFLOAT16: type = LCUDNN_DATA_BFLOAT16; break;
    case LATHE_DTYPE_FLOAT64: type = compute = LCUDNN_DATA_DOUBLE; break;
    default: return NULL;
  }
  dnn_reading r[2];
  int nr;
  if (!d->cu->cudnn || !(nr = readings(c, r)) || !have_handle(d)) return NULL;
  int64_t key[KEYN];
  make_key(c, tf32, key);
  pthread_mutex_lock(&d->dnn_mu);
  cudnn_choice *ch = d->dnn_choices;
  while (ch && memcmp(ch->key, key, sizeof key) != 0) ch = ch->next;
  cudnn_choice got = ch ? *ch : (cudnn_choice){0};
  pthread_mutex_unlock(&d->dnn_mu);
  if (!ch && lathe_cuda_exec_capturing(ex)) /* measuring needs the GPU to run: not inside a graph's capture */
    return lathe_status_new(LATHE_STATUS_UNIMPLEMENTED, "ConvGeneral: cuDNN's algorithms are measured outside a CUDA graph");
  if (!ch) { /* measure every reading, and lathe's own path */
    got.way = WAY_OWN;
    float best_ms = 0;
    for (int i = 0; i < nr; i++) {
      lcudnnAlgoPerf p;
      LATHE_RETURN_IF_ERROR(run_reading(ex, c, &r[i], type, compute, math, true, 0, 0, &p));
      if (p.status == LCUDNN_STATUS_SUCCESS && (got.way == WAY_OWN || p.time < best_ms))
        got.way = r[i].way, got.algo = p.algo, got.math = p.mathType, got.ws = p.memory, best_ms = p.time;
    }
    if (got.way != WAY_OWN) {
      float own_ms;
      LATHE_RETURN_IF_ERROR(time_own(ex, own, own_ctx, &own_ms));
      if (own_ms < best_ms) got.way = WAY_OWN;
    }
    cudnn_choice *n = malloc(sizeof *n);
    if (!n) return LATHE_OOM("ConvGeneral");
    *n = got;
    memcpy(n->key, key, sizeof key);
    pthread_mutex_lock(&d->dnn_mu);
    n->next = d->dnn_choices, d->dnn_choices = n;
    choices_save(d);
    pthread_mutex_unlock(&d->dnn_mu);
  }
  dnn_reading *use = NULL;
  for (int i = 0; i < nr; i++)
    if (r[i].way == got.way) use = &r[i];
  if (!use) return NULL; /* lathe's own path (or a remembered reading these shapes no longer allow) */
  /* the algorithm's math mode as measured (FMA stays FMA; tensor-op modes only where allowed) */
  int m = c->dt == LATHE_DTYPE_FLOAT32 && !tf32 ? LCUDNN_FMA_MATH : got.math;
  lathe_status_t st = run_reading(ex, c, use, type, compute, m, false, got.algo, got.ws, NULL);
  if (st && lathe_status_code_of(st) == LATHE_STATUS_INTERNAL && ch) {
    /* a remembered algorithm cuDNN now refuses (a stale file): lathe's own path from now on */
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
