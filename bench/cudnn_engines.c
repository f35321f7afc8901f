/* cudnn_engines.c -- cuDNN's two APIs on one convolution: the best algorithm its legacy calls find
 * against the best engine its graph (backend) API's heuristics offer, for the forward and the
 * kernel gradient (backward filter), exact Float32 and TF32, each timed with CUDA events (median of
 * 7 rounds of 10 runs). lathe:cuda took the legacy calls until stop 35 and the graph API since
 * (src/cuda/cudnn.c, docs/BENCHMARKS.md); the graph side applies lathe's rules (the first 8
 * acceptable configurations of 64: no runtime compilation, no down-converted inputs or
 * reduced-precision sums, no tensor cores for exact Float32). NHWC tensors, KRSC kernel, padding
 * on both sides. No CUDA headers needed:
 *   gcc -O2 -o /tmp/cudnn_engines bench/cudnn_engines.c -ldl && /tmp/cudnn_engines [N H W C K R S PAD]
 * (default: the CNN's second convolution, 128 14 14 32 64 3 3 1)
 *   /tmp/cudnn_engines -exact [N H W C K R S PAD]: each legacy algorithm and each listed engine's
 *   error on random operands against a host reference, with the engine's numerical notes */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *desc;
typedef struct { /* cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionBwdFilterAlgoPerf_t */
  int algo, status;
  float time;
  size_t memory;
  int determinism, math, reserved[3];
} perf;

/* cudnn_graph.h's and cudnn_cnn.h's values */
enum { T_HANDLE = 0, T_DATA_TYPE = 1, T_INT64 = 3, T_FLOAT = 4, T_VOID_PTR = 6, T_CONV_MODE = 7, T_HEUR_MODE = 8,
       T_NOTE = 11, T_DESC = 15, T_BEHAVIOR = 19 };
enum { D_CONV = 1, D_ENGINE = 2, D_CFG = 3, D_HEUR = 4, D_PLAN = 5, D_OP_FWD = 10, D_OP_BWF = 11, D_GRAPH = 15,
       D_PACK = 16, D_TENSOR = 17 };
enum { FMA_MATH = 3, DEFAULT_MATH = 0, NHWC = 1, FLOAT = 0, CROSS_CORRELATION = 1, HEUR_A = 3 };

static struct {
  int (*create)(desc *), (*set_stream)(desc, desc);
  int (*tensor_create)(desc *), (*tensor_set)(desc, int, int, const int *, const int *);
  int (*filter_create)(desc *), (*filter_set)(desc, int, int, int, const int *);
  int (*conv_create)(desc *), (*conv_set)(desc, int, const int *, const int *, const int *, int, int);
  int (*conv_math)(desc, int);
  int (*find_fwd)(desc, desc, void *, desc, void *, desc, desc, void *, int, int *, perf *, void *, size_t);
  int (*find_bwf)(desc, desc, void *, desc, void *, desc, desc, void *, int, int *, perf *, void *, size_t);
  int (*fwd)(desc, const void *, desc, void *, desc, void *, desc, int, void *, size_t, const void *, desc, void *);
  int (*bwf)(desc, const void *, desc, void *, desc, void *, desc, int, void *, size_t, const void *, desc, void *);
  int (*b_create)(int, desc *), (*b_destroy)(desc), (*b_fin)(desc);
  int (*b_set)(desc, int, int, int64_t, const void *), (*b_get)(desc, int, int, int64_t, int64_t *, void *);
  int (*b_exec)(desc, desc, desc);
  size_t (*version)(void);
  int (*ev_create)(desc *, unsigned), (*ev_record)(desc, desc), (*ev_sync)(desc), (*ev_ms)(float *, desc, desc);
  int (*h2d)(unsigned long long, const void *, size_t), (*d2h)(void *, unsigned long long, size_t), (*sync)(void);
} A;

static desc dnn;
static void *px, *pw, *py, *pws;
static const size_t WS = (size_t)256 << 20;
static int64_t n_, h_, w_, c_, k_, r_, s_, pad_, oh_, ow_;

static int load(void) {
  void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL), *dn = dlopen("libcudnn.so.9", RTLD_NOW);
  if (!cu || !dn) return printf("cudnn_engines: cannot open %s\n", cu ? "libcudnn.so.9" : "libcuda.so.1"), -1;
  void **f[] = {(void **)&A.create, (void **)&A.set_stream, (void **)&A.tensor_create, (void **)&A.tensor_set,
                (void **)&A.filter_create, (void **)&A.filter_set, (void **)&A.conv_create, (void **)&A.conv_set,
                (void **)&A.conv_math, (void **)&A.find_fwd, (void **)&A.find_bwf, (void **)&A.fwd, (void **)&A.bwf,
                (void **)&A.b_create, (void **)&A.b_destroy, (void **)&A.b_fin, (void **)&A.b_set, (void **)&A.b_get,
                (void **)&A.b_exec, (void **)&A.version};
  const char *names[] = {"cudnnCreate", "cudnnSetStream", "cudnnCreateTensorDescriptor", "cudnnSetTensorNdDescriptor",
                         "cudnnCreateFilterDescriptor", "cudnnSetFilterNdDescriptor", "cudnnCreateConvolutionDescriptor",
                         "cudnnSetConvolutionNdDescriptor", "cudnnSetConvolutionMathType",
                         "cudnnFindConvolutionForwardAlgorithmEx", "cudnnFindConvolutionBackwardFilterAlgorithmEx",
                         "cudnnConvolutionForward", "cudnnConvolutionBackwardFilter", "cudnnBackendCreateDescriptor",
                         "cudnnBackendDestroyDescriptor", "cudnnBackendFinalize", "cudnnBackendSetAttribute",
                         "cudnnBackendGetAttribute", "cudnnBackendExecute", "cudnnGetVersion"};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (!(*f[i] = dlsym(dn, names[i]))) return printf("cudnn_engines: no %s\n", names[i]), -1;
  int (*init)(unsigned) = (int (*)(unsigned))dlsym(cu, "cuInit");
  int (*retain)(desc *, int) = (int (*)(desc *, int))dlsym(cu, "cuDevicePrimaryCtxRetain");
  int (*set_ctx)(desc) = (int (*)(desc))dlsym(cu, "cuCtxSetCurrent");
  int (*alloc)(unsigned long long *, size_t) = (int (*)(unsigned long long *, size_t))dlsym(cu, "cuMemAlloc_v2");
  A.ev_create = (int (*)(desc *, unsigned))dlsym(cu, "cuEventCreate");
  A.ev_record = (int (*)(desc, desc))dlsym(cu, "cuEventRecord");
  A.ev_sync = (int (*)(desc))dlsym(cu, "cuEventSynchronize");
  A.ev_ms = (int (*)(float *, desc, desc))dlsym(cu, "cuEventElapsedTime");
  A.h2d = (int (*)(unsigned long long, const void *, size_t))dlsym(cu, "cuMemcpyHtoD_v2");
  A.d2h = (int (*)(void *, unsigned long long, size_t))dlsym(cu, "cuMemcpyDtoH_v2");
  A.sync = (int (*)(void))dlsym(cu, "cuCtxSynchronize");
  desc ctx;
  if (!init || !retain || !set_ctx || !alloc || !A.ev_create || !A.h2d || !A.d2h || !A.sync || init(0) || retain(&ctx, 0) || set_ctx(ctx))
    return printf("cudnn_engines: no CUDA device\n"), -1;
  unsigned long long p[4];
  size_t bytes[4] = {(size_t)(n_ * h_ * w_ * c_ * 4), (size_t)(k_ * r_ * s_ * c_ * 4), (size_t)(n_ * oh_ * ow_ * k_ * 4), WS};
  for (int i = 0; i < 4; i++)
    if (alloc(&p[i], bytes[i])) return printf("cudnn_engines: out of device memory\n"), -1;
  px = (void *)(uintptr_t)p[0], pw = (void *)(uintptr_t)p[1], py = (void *)(uintptr_t)p[2], pws = (void *)(uintptr_t)p[3];
  return A.create(&dnn) ? printf("cudnn_engines: cudnnCreate failed\n"), -1 : 0;
}

/* median µs of one call of run(arg), 7 rounds of 10 after one untimed; -1 when it fails */
static float timed(int (*run)(void *), void *arg) {
  desc e0, e1;
  float t[7];
  if (run(arg) || A.ev_create(&e0, 0) || A.ev_create(&e1, 0)) return -1;
  for (int i = 0; i < 7; i++) {
    A.ev_record(e0, NULL);
    for (int k = 0; k < 10; k++)
      if (run(arg)) return -1;
    A.ev_record(e1, NULL);
    A.ev_sync(e1);
    A.ev_ms(&t[i], e0, e1);
  }
  for (int i = 1; i < 7; i++)
    for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
      float z = t[j];
      t[j] = t[j - 1], t[j - 1] = z;
    }
  return t[3] * 100; /* ms per 10 runs -> µs per run */
}

/* ---- the legacy calls ---- */
typedef struct { int bwf, algo; desc x, w, y, conv; } legacy;

static int legacy_run(void *arg) {
  legacy *l = arg;
  float one = 1, zero = 0;
  return l->bwf ? A.bwf(dnn, &one, l->x, px, l->y, py, l->conv, l->algo, pws, WS, &zero, l->w, pw)
                : A.fwd(dnn, &one, l->x, px, l->w, pw, l->conv, l->algo, pws, WS, &zero, l->y, py);
}

static int legacy_make(int bwf, int math, legacy *l) {
  int xd[4] = {(int)n_, (int)c_, (int)h_, (int)w_}, yd[4] = {(int)n_, (int)k_, (int)oh_, (int)ow_};
  int xs[4] = {(int)(h_ * w_ * c_), 1, (int)(w_ * c_), (int)c_}, ys[4] = {(int)(oh_ * ow_ * k_), 1, (int)(ow_ * k_), (int)k_};
  int wd[4] = {(int)k_, (int)c_, (int)r_, (int)s_}, pad[2] = {(int)pad_, (int)pad_}, one[2] = {1, 1};
  l->bwf = bwf;
  return A.tensor_create(&l->x) || A.tensor_create(&l->y) || A.filter_create(&l->w) || A.conv_create(&l->conv) ||
         A.tensor_set(l->x, FLOAT, 4, xd, xs) || A.tensor_set(l->y, FLOAT, 4, yd, ys) ||
         A.filter_set(l->w, FLOAT, NHWC, 4, wd) || A.conv_set(l->conv, 2, pad, one, one, CROSS_CORRELATION, FLOAT) ||
         A.conv_math(l->conv, math);
}

static float legacy_best(int bwf, int math, int *algo) {
  legacy l;
  int got = 0;
  if (legacy_make(bwf, math, &l)) return -1;
  perf p[16];
  int s = bwf ? A.find_bwf(dnn, l.x, px, l.y, py, l.conv, l.w, pw, 16, &got, p, pws, WS)
              : A.find_fwd(dnn, l.x, px, l.w, pw, l.conv, l.y, py, 16, &got, p, pws, WS);
  for (int i = 0; !s && i < got; i++) /* fastest first */
    if (p[i].status == 0 && p[i].memory <= WS) {
      l.algo = *algo = p[i].algo;
      return timed(legacy_run, &l);
    }
  return -1;
}

/* ---- the graph API ---- */
static desc tensor(int64_t uid, int64_t n, int64_t c, int64_t h, int64_t w) {
  desc t;
  int type = FLOAT;
  int64_t dims[4] = {n, c, h, w}, st[4] = {h * w * c, 1, w * c, c}, align = 16;
  if (A.b_create(D_TENSOR, &t) || A.b_set(t, 901, T_DATA_TYPE, 1, &type) || A.b_set(t, 902, T_INT64, 4, dims) ||
      A.b_set(t, 903, T_INT64, 4, st) || A.b_set(t, 906, T_INT64, 1, &uid) || A.b_set(t, 900, T_INT64, 1, &align) ||
      A.b_fin(t))
    return NULL;
  return t;
}

static desc op_graph(int bwf) {
  desc x = tensor(1, n_, c_, h_, w_), wt = tensor(2, k_, c_, r_, s_), y = tensor(3, n_, k_, oh_, ow_), cv, op, g;
  int64_t sd = 2, one[2] = {1, 1}, pad[2] = {pad_, pad_};
  int type = FLOAT, mode = CROSS_CORRELATION;
  float alpha = 1, beta = 0;
  if (!x || !wt || !y || A.b_create(D_CONV, &cv) || A.b_set(cv, 106, T_INT64, 1, &sd) ||
      A.b_set(cv, 100, T_DATA_TYPE, 1, &type) || A.b_set(cv, 101, T_CONV_MODE, 1, &mode) ||
      A.b_set(cv, 102, T_INT64, 2, one) || A.b_set(cv, 103, T_INT64, 2, one) || A.b_set(cv, 105, T_INT64, 2, pad) ||
      A.b_set(cv, 104, T_INT64, 2, pad) || A.b_fin(cv))
    return NULL;
  /* forward: X 704, W 703, Y 705, conv 702, alpha 700, beta 701; backward filter: X 716, DW 715, DY 717, ... */
  int base = bwf ? 712 : 700;
  if (A.b_create(bwf ? D_OP_BWF : D_OP_FWD, &op) || A.b_set(op, bwf ? 716 : 704, T_DESC, 1, &x) ||
      A.b_set(op, bwf ? 715 : 703, T_DESC, 1, &wt) || A.b_set(op, bwf ? 717 : 705, T_DESC, 1, &y) ||
      A.b_set(op, base + 2, T_DESC, 1, &cv) || A.b_set(op, base, T_FLOAT, 1, &alpha) ||
      A.b_set(op, base + 1, T_FLOAT, 1, &beta) || A.b_fin(op))
    return NULL;
  if (A.b_create(D_GRAPH, &g) || A.b_set(g, 801, T_DESC, 1, &op) || A.b_set(g, 800, T_HANDLE, 1, &dnn) || A.b_fin(g))
    return NULL;
  return g;
}

/* lathe's rule (src/cuda/cudnn.c): notes 0 tensor core, 1 down-converted inputs, 2 reduced-precision
 * reduction; behavior 0 runtime compilation; for exact Float32 not the kernel gradient's engine 17
 * (inexact_f32 there) */
static int acceptable(desc cfg, int bwf, int tensor_cores, int64_t *index) {
  desc e;
  int notes[16], behavior[8];
  int64_t n, nn = 0, nb = 0;
  if (A.b_create(D_ENGINE, &e) || A.b_get(cfg, 300, T_DESC, 1, &n, &e) || A.b_get(e, 1301, T_INT64, 1, &n, index) ||
      A.b_get(e, 1303, T_NOTE, 16, &nn, notes) || A.b_get(e, 1305, T_BEHAVIOR, 8, &nb, behavior))
    return 0;
  A.b_destroy(e);
  for (int64_t i = 0; i < nn && i < 16; i++)
    if (notes[i] == 1 || notes[i] == 2 || (notes[i] == 0 && !tensor_cores)) return 0;
  for (int64_t i = 0; i < nb && i < 8; i++)
    if (behavior[i] == 0) return 0;
  return tensor_cores || !bwf || *index != 17;
}

typedef struct { desc plan, pack; } graph_run;

static int graph_exec(void *arg) {
  graph_run *g = arg;
  return A.b_exec(dnn, g->plan, g->pack);
}

static float graph_best(int bwf, int tensor_cores, int64_t *engine, int *place) {
  desc g = op_graph(bwf), h, cfg[64];
  int mode = HEUR_A;
  int64_t n = 0;
  if (!g || A.b_create(D_HEUR, &h) || A.b_set(h, 201, T_DESC, 1, &g) || A.b_set(h, 200, T_HEUR_MODE, 1, &mode) ||
      A.b_fin(h))
    return -1;
  for (int i = 0; i < 64; i++)
    if (A.b_create(D_CFG, &cfg[i])) return -1;
  if (A.b_get(h, 202, T_DESC, 64, &n, cfg)) return -1;
  float best = -1;
  void *ptr[3] = {px, pw, py};
  int64_t uid[3] = {1, 2, 3};
  for (int i = 0, tried = 0; i < n && tried < 8; i++) {
    int64_t index = -1, ws = 0, k;
    graph_run run;
    if (!acceptable(cfg[i], bwf, tensor_cores, &index) || A.b_create(D_PLAN, &run.plan) ||
        A.b_set(run.plan, 400, T_HANDLE, 1, &dnn) || A.b_set(run.plan, 401, T_DESC, 1, &cfg[i]) || A.b_fin(run.plan) ||
        A.b_get(run.plan, 402, T_INT64, 1, &k, &ws) || ws < 0 || (size_t)ws > WS)
      continue;
    tried++;
    if (A.b_create(D_PACK, &run.pack) || A.b_set(run.pack, 1001, T_VOID_PTR, 3, ptr) ||
        A.b_set(run.pack, 1000, T_INT64, 3, uid) || A.b_set(run.pack, 1003, T_VOID_PTR, 1, &pws) || A.b_fin(run.pack))
      continue;
    float t = timed(graph_exec, &run);
    if (t >= 0 && (best < 0 || t < best)) best = t, *engine = index, *place = i;
  }
  return best;
}

/* ---- exactness: each legacy algorithm (FMA math) and each configuration the heuristics list,
 * run once on random operands, against a host reference in double: the largest error over the
 * largest reference value. Exact Float32 sums stay near 1e-7 of it; TF32 products or a result
 * rounded through 16 bits come to 1e-4 and more. */
static float *hin[2], *hout;
static double *ref;

static void random_fill(float *p, size_t n, uint64_t *st) {
  for (size_t i = 0; i < n; i++) {
    *st ^= *st << 13, *st ^= *st >> 7, *st ^= *st << 17;
    p[i] = (float)((double)(*st >> 11) / 9007199254740992.0 * 2 - 1);
  }
}

/* out = conv(x, w) (forward) or the kernel gradient of x and dy (in[1]) */
static void reference(int bwf) {
  size_t nw = (size_t)(k_ * r_ * s_ * c_), ny = (size_t)(n_ * oh_ * ow_ * k_);
  for (size_t i = 0; i < (bwf ? nw : ny); i++) ref[i] = 0;
  for (int64_t n = 0; n < n_; n++)
    for (int64_t oy = 0; oy < oh_; oy++)
      for (int64_t ox = 0; ox < ow_; ox++)
        for (int64_t k = 0; k < k_; k++)
          for (int64_t r = 0; r < r_; r++)
            for (int64_t s = 0; s < s_; s++) {
              int64_t iy = oy + r - pad_, ix = ox + s - pad_;
              if (iy < 0 || iy >= h_ || ix < 0 || ix >= w_) continue;
              for (int64_t c = 0; c < c_; c++) {
                double xv = hin[0][((n * h_ + iy) * w_ + ix) * c_ + c];
                size_t wi = (size_t)(((k * r_ + r) * s_ + s) * c_ + c), yi = (size_t)(((n * oh_ + oy) * ow_ + ox) * k_ + k);
                if (bwf) ref[wi] += xv * hin[1][yi];
                else ref[yi] += xv * hin[1][wi];
              }
            }
}

/* the output's error against the reference, -1 when the run failed */
static double out_error(int bwf, int failed) {
  size_t n = (size_t)(bwf ? k_ * r_ * s_ * c_ : n_ * oh_ * ow_ * k_);
  if (failed || A.sync() || A.d2h(hout, (unsigned long long)(uintptr_t)(bwf ? pw : py), n * 4)) return -1;
  double e = 0, m = 0;
  for (size_t i = 0; i < n; i++) {
    double d = hout[i] != hout[i] ? 1e30 : hout[i] - ref[i];
    e = d < 0 ? (-d > e ? -d : e) : (d > e ? d : e);
    m = ref[i] < 0 ? (-ref[i] > m ? -ref[i] : m) : (ref[i] > m ? ref[i] : m);
  }
  return m > 0 ? e / m : e;
}

static int clear_out(int bwf) {
  size_t n = (size_t)(bwf ? k_ * r_ * s_ * c_ : n_ * oh_ * ow_ * k_);
  for (size_t i = 0; i < n; i++) hout[i] = 0.f / 0.f;
  return A.h2d((unsigned long long)(uintptr_t)(bwf ? pw : py), hout, n * 4);
}

static void exactness(void) {
  size_t nx = (size_t)(n_ * h_ * w_ * c_), nw = (size_t)(k_ * r_ * s_ * c_), ny = (size_t)(n_ * oh_ * ow_ * k_);
  size_t big = nw > ny ? nw : ny;
  hin[0] = malloc(nx * 4), hin[1] = malloc(big * 4), hout = malloc(big * 4), ref = malloc(big * 8);
  if (!hin[0] || !hin[1] || !hout || !ref) return (void)printf("cudnn_engines: out of memory\n");
  static const char *note_names[] = {"tensor_core", "down_convert", "reduced_reduction", "fft", "nondeterministic",
                                     "winograd", "winograd_4x4", "winograd_6x6", "winograd_13x13", "strict_nan"};
  for (int bwf = 0; bwf < 2; bwf++) {
    uint64_t st = 0x9e3779b97f4a7c15ull;
    random_fill(hin[0], nx, &st);
    random_fill(hin[1], bwf ? ny : nw, &st);
    reference(bwf);
    if (A.h2d((unsigned long long)(uintptr_t)px, hin[0], nx * 4) ||
        A.h2d((unsigned long long)(uintptr_t)(bwf ? py : pw), hin[1], (bwf ? ny : nw) * 4))
      return (void)printf("cudnn_engines: upload failed\n");
    printf("\n%s, Float32: error / max |reference|\n", bwf ? "kernel gradient" : "forward");
    for (int algo = 0; algo < 8; algo++) {
      legacy l;
      if (legacy_make(bwf, FMA_MATH, &l)) break;
      l.algo = algo;
      clear_out(bwf);
      double e = out_error(bwf, legacy_run(&l));
      if (e >= 0) printf("  legacy algorithm %d (FMA math): %.2e\n", algo, e);
      else printf("  legacy algorithm %d (FMA math): refused\n", algo);
    }
    desc g = op_graph(bwf), h, cfg[64];
    int mode = HEUR_A;
    int64_t n = 0;
    if (!g || A.b_create(D_HEUR, &h) || A.b_set(h, 201, T_DESC, 1, &g) || A.b_set(h, 200, T_HEUR_MODE, 1, &mode) ||
        A.b_fin(h))
      continue;
    for (int i = 0; i < 64; i++)
      if (A.b_create(D_CFG, &cfg[i])) return;
    if (A.b_get(h, 202, T_DESC, 64, &n, cfg)) continue;
    void *ptr[3] = {px, pw, py}; /* uids 1, 2, 3: input, kernel (or its gradient), output (or its gradient) */
    int64_t uid[3] = {1, 2, 3};
    for (int i = 0; i < n; i++) {
      desc e, plan, pack;
      int notes[16], behavior[8];
      int64_t k, index = -1, nn = 0, nb = 0, ws = 0;
      if (A.b_create(D_ENGINE, &e) || A.b_get(cfg[i], 300, T_DESC, 1, &k, &e) || A.b_get(e, 1301, T_INT64, 1, &k, &index) ||
          A.b_get(e, 1303, T_NOTE, 16, &nn, notes) || A.b_get(e, 1305, T_BEHAVIOR, 8, &nb, behavior))
        continue;
      char ns[160] = "";
      size_t o = 0;
      for (int64_t j = 0; j < nn && j < 16 && o < sizeof ns - 24; j++)
        o += (size_t)snprintf(ns + o, sizeof ns - o, "%s%s", j ? "," : "",
                              notes[j] >= 0 && notes[j] < 10 ? note_names[notes[j]] : "other");
      for (int64_t j = 0; j < nb && j < 8 && o < sizeof ns - 24; j++)
        o += (size_t)snprintf(ns + o, sizeof ns - o, "%s%s", o ? "," : "", behavior[j] == 0 ? "runtime_compiled" : "behavior");
      if (behavior[0] == 0 && nb > 0) {
        printf("  place %2d engine %3lld [%s]: not run\n", i, (long long)index, ns);
        continue;
      }
      if (A.b_create(D_PLAN, &plan) || A.b_set(plan, 400, T_HANDLE, 1, &dnn) || A.b_set(plan, 401, T_DESC, 1, &cfg[i]) ||
          A.b_fin(plan) || A.b_get(plan, 402, T_INT64, 1, &k, &ws) || ws < 0 || (size_t)ws > WS) {
        printf("  place %2d engine %3lld [%s]: no plan\n", i, (long long)index, ns);
        continue;
      }
      if (A.b_create(D_PACK, &pack) || A.b_set(pack, 1001, T_VOID_PTR, 3, ptr) || A.b_set(pack, 1000, T_INT64, 3, uid) ||
          A.b_set(pack, 1003, T_VOID_PTR, 1, &pws) || A.b_fin(pack))
        continue;
      clear_out(bwf);
      double err = out_error(bwf, A.b_exec(dnn, plan, pack));
      printf("  place %2d engine %3lld [%s]: %.2e\n", i, (long long)index, ns, err);
      A.b_destroy(pack);
      A.b_destroy(plan);
    }
  }
}

int main(int argc, char **argv) {
  int64_t v[8] = {128, 14, 14, 32, 64, 3, 3, 1};
  int exact = argc > 1 && !strcmp(argv[1], "-exact");
  for (int i = 1 + exact; i < argc && i - exact <= 8; i++) v[i - 1 - exact] = atoll(argv[i]);
  n_ = v[0], h_ = v[1], w_ = v[2], c_ = v[3], k_ = v[4], r_ = v[5], s_ = v[6], pad_ = v[7];
  oh_ = h_ + 2 * pad_ - r_ + 1, ow_ = w_ + 2 * pad_ - s_ + 1;
  if (oh_ < 1 || ow_ < 1) return printf("cudnn_engines: the kernel is larger than the padded input\n"), 1;
  if (load()) return 1;
  if (exact) {
    printf("cuDNN %zu: exactness, NHWC input [%lld, %lld, %lld, %lld], KRSC kernel %lldx%lld %lld -> %lld, padding %lld\n",
           A.version(), (long long)n_, (long long)h_, (long long)w_, (long long)c_, (long long)r_, (long long)s_,
           (long long)c_, (long long)k_, (long long)pad_);
    exactness();
    return 0;
  }
  printf("cuDNN %zu: Float32 convolution, NHWC input [%lld, %lld, %lld, %lld], KRSC kernel %lldx%lld %lld -> %lld, padding %lld\n",
         A.version(), (long long)n_, (long long)h_, (long long)w_, (long long)c_, (long long)r_, (long long)s_,
         (long long)c_, (long long)k_, (long long)pad_);
  printf("median µs of 7 rounds of 10 runs (CUDA events)\n\n%-16s %-6s %22s %30s %14s\n", "convolution", "math",
         "legacy API (algorithm)", "graph API (engine, place)", "legacy / graph");
  for (int bwf = 0; bwf < 2; bwf++)
    for (int tf32 = 0; tf32 < 2; tf32++) {
      int algo = -1, place = -1;
      int64_t engine = -1;
      float l = legacy_best(bwf, tf32 ? DEFAULT_MATH : FMA_MATH, &algo), g = graph_best(bwf, tf32, &engine, &place);
      char ls[32] = "none", gs[40] = "none", rs[16] = "-";
      if (l >= 0) snprintf(ls, sizeof ls, "%.1f (%d)", l, algo);
      if (g >= 0) snprintf(gs, sizeof gs, "%.1f (%lld, %d)", g, (long long)engine, place);
      if (l > 0 && g > 0) snprintf(rs, sizeof rs, "%.2fx", l / g);
      printf("%-16s %-6s %22s %30s %14s\n", bwf ? "kernel gradient" : "forward", tf32 ? "TF32" : "exact", ls, gs, rs);
    }
  return 0;
}
