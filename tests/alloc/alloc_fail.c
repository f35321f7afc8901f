/* alloc_fail.c -- every allocation of a whole scenario, failed in turn.
 *
 * The program interposes malloc, calloc, realloc, free, posix_memalign, aligned_alloc and
 * memalign (forwarding to glibc's __libc_* entry points). A scenario -- create a backend, build
 * two graphs of several op kinds (elementwise and fused runs, DotGeneral, Transpose, ReduceSum,
 * Concatenate, Gather, While, Sort, Call and If with closures, a dynamic axis, packed Int4,
 * Iota, BroadcastInDim, FusedSoftmax, ReduceWindow, ScatterSum, ConvGeneral), compile, upload
 * (from host, shared, CopyToDevice), execute (with a donated input; twice), download and check,
 * free everything -- is run once to count its allocations N; then,
 * for k = 1..N, it runs again with the k-th allocation failing (once). Each run must end with OK
 * and the right results, or with RESOURCE_EXHAUSTED; never crash. Every allocation it made must
 * be freed by then (the interposer keeps the live set), and when the backend was created, a
 * second, normal run on that same backend must give the right results.
 *
 * Counted allocations: those made on the main thread, from code of this executable (lathe is
 * linked statically), while armed. Excluded, as they cannot be attributed to lathe: OpenBLAS's
 * (a shared library, with its own buffers and threads; its first-use setup is done before
 * counting) and glibc's internal ones (qsort's scratch, which falls back without it; pthread).
 * The backend runs with threads=1, so kernels run on the main thread and the order of
 * allocations, hence k, is deterministic.
 *
 * Prints "N passed, N failed" like the other runners; ALLOC_FAIL_VERBOSE=1 prints each k,
 * ALLOC_FAIL_ONLY=k runs that one (under gdb, for a backtrace). Under valgrind, keep the
 * interposer: valgrind --soname-synonyms=somalloc=nouserintercepts build/alloc_fail. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lathe.h"

/* ---- the interposer ---- */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t n);
extern char __executable_start[], etext[];

static _Thread_local bool on_main;
static atomic_bool armed;
static long n_counted, fail_at = -1, n_failed;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

#define MAX_LIVE 65536
static void *live[MAX_LIVE];
static size_t live_size[MAX_LIVE];
static int n_live, overflowed;

static bool counted(const void *caller) {
  return atomic_load(&armed) && on_main && (const char *)caller >= __executable_start && (const char *)caller < etext;
}

/* Whether this counted allocation is the one to fail. */
static bool fail_now(void) {
  pthread_mutex_lock(&mu);
  bool f = ++n_counted == fail_at;
  n_failed += f;
  pthread_mutex_unlock(&mu);
  return f;
}

static void track(void *p, size_t n) {
  if (!p) return;
  pthread_mutex_lock(&mu);
  if (n_live < MAX_LIVE) live[n_live] = p, live_size[n_live++] = n;
  else overflowed = 1;
  pthread_mutex_unlock(&mu);
}

/* Forgets p; freed memory is scribbled over so that a use after free shows in the results. */
static void untrack(void *p) {
  if (!p) return;
  pthread_mutex_lock(&mu);
  for (int i = n_live - 1; i >= 0; i--)
    if (live[i] == p) {
      memset(p, 0xdb, live_size[i]);
      live[i] = live[n_live - 1], live_size[i] = live_size[n_live - 1];
      n_live--;
      break;
    }
  pthread_mutex_unlock(&mu);
}

void *malloc(size_t n) {
  if (!counted(__builtin_return_address(0))) return __libc_malloc(n);
  if (fail_now()) return NULL;
  void *p = __libc_malloc(n);
  track(p, n);
  return p;
}

void *calloc(size_t n, size_t size) {
  if (!counted(__builtin_return_address(0))) return __libc_calloc(n, size);
  if (fail_now()) return NULL;
  void *p = __libc_calloc(n, size);
  track(p, n * size);
  return p;
}

void *realloc(void *old, size_t n) {
  if (!counted(__builtin_return_address(0))) {
    untrack(old); /* no longer ours to account for: realloc may move it */
    return __libc_realloc(old, n);
  }
  if (fail_now()) return NULL;
  untrack(old);
  void *p = __libc_realloc(old, n);
  track(p, n);
  return p;
}

void free(void *p) {
  untrack(p);
  __libc_free(p);
}

void *aligned_alloc(size_t align, size_t n) {
  if (!counted(__builtin_return_address(0))) return __libc_memalign(align, n);
  if (fail_now()) return NULL;
  void *p = __libc_memalign(align, n);
  track(p, n);
  return p;
}

void *memalign(size_t align, size_t n) {
  if (!counted(__builtin_return_address(0))) return __libc_memalign(align, n);
  if (fail_now()) return NULL;
  void *p = __libc_memalign(align, n);
  track(p, n);
  return p;
}

int posix_memalign(void **out, size_t align, size_t n) {
  bool c = counted(__builtin_return_address(0));
  if (c && fail_now()) return 12; /* ENOMEM */
  void *p = __libc_memalign(align, n);
  if (!p) return 12;
  if (c) track(p, n);
  *out = p;
  return 0;
}

/* ---- the scenario ---- */
static const float X[4][3] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}};
static const float Y[3][2] = {{1, 0}, {0, 1}, {1, 1}};
static const int32_t IDX[2] = {3, 1};
/* Expected: Transpose(Dot(x, y)); Concatenate(ReduceSum(x, 1) twice); -(g + g) for the gathered
 * rows 3 and 1; and ReduceSum(x, 1) doubled three times by a While. */
static const float T_WANT[2][4] = {{4, 10, 16, 22}, {5, 11, 17, 23}};
static const float C_WANT[8] = {6, 15, 24, 33, 6, 15, 24, 33};
static const float N_WANT[2][3] = {{-20, -22, -24}, {-8, -10, -12}};
static const float W_WANT[4] = {48, 120, 192, 264};

#define TRY(expr)            \
  do {                       \
    if (!st) st = (expr);    \
  } while (0)

static lathe_shape shape(lathe_dtype dt, int rank, int64_t d0, int64_t d1) {
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = dt, s.rank = rank, s.dims[0] = d0, s.dims[1] = d1;
  return s;
}

/* The While's closures: cond k < 3; body (k + 1, v + v). */
static lathe_status_t build_while(lathe_function_t fn, lathe_value_t v, lathe_value_t *out) {
  lathe_status_t st = NULL;
  lathe_shape ks = shape(LATHE_DTYPE_INT32, 0, 0, 0), vs = shape(LATHE_DTYPE_FLOAT32, 1, 4, 0);
  lathe_function_t cond = NULL, body = NULL;
  lathe_value_t k0 = NULL, ck = NULL, cv = NULL, lim = NULL, lt = NULL, bk = NULL, bv = NULL, one = NULL, k1 = NULL,
                v1 = NULL, res[2] = {NULL, NULL};
  int32_t zero = 0, three = 3, uno = 1;
  int n_out = 0;
  TRY(lathe_constant(fn, &ks, &zero, 4, &k0));
  TRY(lathe_function_closure(fn, &cond));
  TRY(lathe_parameter(cond, "k", &ks, &ck));
  TRY(lathe_parameter(cond, "v", &vs, &cv));
  TRY(lathe_constant(cond, &ks, &three, 4, &lim));
  TRY(lathe_less_than(cond, ck, lim, &lt));
  TRY(lathe_function_return(cond, &lt, 1));
  TRY(lathe_function_closure(fn, &body));
  TRY(lathe_parameter(body, "k", &ks, &bk));
  TRY(lathe_parameter(body, "v", &vs, &bv));
  TRY(lathe_constant(body, &ks, &uno, 4, &one));
  TRY(lathe_add(body, bk, one, &k1));
  TRY(lathe_add(body, bv, bv, &v1));
  lathe_value_t next[2] = {k1, v1}, state[2] = {k0, v};
  TRY(lathe_function_return(body, next, 2));
  TRY(lathe_while(fn, cond, body, state, 2, res, 2, &n_out));
  if (!st) *out = res[1];
  return st;
}

static lathe_status_t build(lathe_backend_t be, lathe_executable_t *out) {
  lathe_status_t st = NULL;
  lathe_builder_t b = NULL;
  TRY(lathe_builder_new(be, "alloc_fail", &b));
  lathe_function_t fn = st ? NULL : lathe_builder_main(b);
  lathe_shape xs = shape(LATHE_DTYPE_FLOAT32, 2, 4, 3), ys = shape(LATHE_DTYPE_FLOAT32, 2, 3, 2),
              is = shape(LATHE_DTYPE_INT32, 1, 2, 0);
  lathe_value_t x = NULL, y = NULL, i = NULL, d = NULL, t = NULL, r = NULL, c = NULL, g = NULL, gg = NULL, n = NULL,
                wv = NULL;
  TRY(lathe_parameter(fn, "x", &xs, &x));
  TRY(lathe_parameter(fn, "y", &ys, &y));
  TRY(lathe_parameter(fn, "i", &is, &i));
  TRY(lathe_dot_general(fn, x, (const int[]){1}, 1, NULL, 0, y, (const int[]){0}, 1, NULL, 0, NULL, &d));
  TRY(lathe_transpose(fn, d, (const int[]){1, 0}, 2, &t));
  TRY(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, x, (const int[]){1}, 1, &r));
  lathe_value_t rr[2] = {r, r};
  TRY(lathe_concatenate(fn, 0, rr, 2, &c));
  TRY(lathe_gather(fn, x, i, 1, (const int[]){1}, 1, (const int[]){0}, 1, (const int[]){0}, 1, (const int64_t[]){1, 3},
                   2, false, &g));
  TRY(lathe_add(fn, g, g, &gg));
  TRY(lathe_neg(fn, gg, &n));
  TRY(build_while(fn, r, &wv));
  lathe_value_t outs[4] = {t, c, n, wv};
  TRY(lathe_function_return(fn, outs, 4));
  TRY(lathe_builder_compile(b, out));
  lathe_builder_free(b); /* the executable keeps what it needs */
  return st;
}

/* A second graph with a dynamic axis (specialised at execution) and more op kinds:
 *   a: Float32[batch, 4], q: Int4[4] (packed), ix: Int32[3, 1]
 *   s = a + BroadcastInDim(ConvertDType(Iota(Int32[4])));  sorted = Sort(s, axis 1, descending)
 *   out0 = FusedSoftmax(sorted, 1);  out1 = ReduceWindow(max, sorted, window [1, 2])
 *   sc = ScatterSum(ConvertDType(q), ix, [1, 2, 3]);  sq = Call(x -> x * x, sc)
 *   out2 = If(true, -sq, sq);  out3 = ConvGeneral(Reshape(ConvertDType(q), [1, 1, 4]), [1, 1]) */
static const float A[2][4] = {{0, 5, 1, 2}, {3, 3, 3, 3}};
static const uint8_t Q[2] = {0xE1, 0xC3}; /* Int4 {1, -2, 3, -4} */
static const int32_t IX[3] = {0, 2, 0};
static const float SORTED[2][4] = {{6, 5, 3, 0}, {6, 5, 4, 3}};
static const float RW_WANT[2][2] = {{6, 3}, {6, 4}};
static const float IF_WANT[4] = {-25, -4, -25, -16};
static const float CONV_WANT[3] = {-1, 1, -1};

static lathe_status_t closure_of(lathe_function_t fn, int n_params, lathe_dtype dt, lathe_function_t *out,
                                 lathe_value_t *params) {
  lathe_status_t st = lathe_function_closure(fn, out);
  lathe_shape s = shape(dt, 0, 0, 0);
  for (int i = 0; i < n_params; i++) TRY(lathe_parameter(*out, NULL, &s, &params[i]));
  return st;
}

static lathe_status_t build2(lathe_backend_t be, lathe_executable_t *out) {
  lathe_status_t st = NULL;
  lathe_builder_t b = NULL;
  TRY(lathe_builder_new(be, "alloc_fail_2", &b));
  lathe_function_t fn = st ? NULL : lathe_builder_main(b), cmp = NULL, sqf = NULL, tb = NULL, fb = NULL;
  lathe_shape as = shape(LATHE_DTYPE_FLOAT32, 2, -1, 4), qs = shape(LATHE_DTYPE_INT4, 1, 4, 0),
              xs = shape(LATHE_DTYPE_INT32, 2, 3, 1), i4 = shape(LATHE_DTYPE_INT32, 1, 4, 0),
              f4 = shape(LATHE_DTYPE_FLOAT32, 1, 4, 0), f3 = shape(LATHE_DTYPE_FLOAT32, 1, 3, 0),
              ks = shape(LATHE_DTYPE_FLOAT32, 2, 1, 1), bs = shape(LATHE_DTYPE_BOOL, 0, 0, 0);
  as.axis_names[0] = "batch";
  ks.rank = 3, ks.dims[2] = 2;
  lathe_shape bcast = as;
  lathe_value_t a = NULL, q = NULL, ix = NULL, io = NULL, iof = NULL, bc = NULL, sum = NULL, cp[2] = {NULL, NULL},
                gt = NULL, sorted = NULL, sm = NULL, rw = NULL, qf = NULL, upd = NULL, sc = NULL, xp = NULL, xx = NULL,
                sq = NULL, pred = NULL, nsq = NULL, ifr = NULL, q3 = NULL, ker = NULL, conv = NULL;
  const float ones[2] = {1, 1}, u[3] = {1, 2, 3};
  const uint8_t yes = 1;
  int n_out = 0;
  TRY(lathe_parameter(fn, "a", &as, &a));
  TRY(lathe_parameter(fn, "q", &qs, &q));
  TRY(lathe_parameter(fn, "ix", &xs, &ix));
  TRY(lathe_iota(fn, &i4, 0, &io));
  TRY(lathe_convert_dtype(fn, io, LATHE_DTYPE_FLOAT32, &iof));
  TRY(lathe_broadcast_in_dim(fn, iof, &bcast, (const int[]){1}, 1, &bc));
  TRY(lathe_add(fn, a, bc, &sum));
  TRY(closure_of(fn, 2, LATHE_DTYPE_FLOAT32, &cmp, cp));
  TRY(lathe_greater_than(cmp, cp[0], cp[1], &gt));
  TRY(lathe_function_return(cmp, &gt, 1));
  TRY(lathe_sort(fn, cmp, 1, true, &sum, 1, &sorted));
  TRY(lathe_fused_softmax(fn, sorted, 1, &sm));
  lathe_window_params wp = {(const int64_t[]){1, 2}, 2, NULL, 0, NULL, 0, NULL, 0, NULL, 0};
  TRY(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, sorted, &wp, &rw));
  TRY(lathe_convert_dtype(fn, q, LATHE_DTYPE_FLOAT32, &qf));
  TRY(lathe_constant(fn, &f3, u, sizeof u, &upd));
  TRY(lathe_scatter_sum(fn, qf, ix, upd, 1, NULL, 0, (const int[]){0}, 1, (const int[]){0}, 1, false, false, &sc));
  TRY(lathe_function_closure(fn, &sqf));
  TRY(lathe_parameter(sqf, "x", &f4, &xp));
  TRY(lathe_mul(sqf, xp, xp, &xx));
  TRY(lathe_function_return(sqf, &xx, 1));
  TRY(lathe_call(fn, sqf, &sc, 1, &sq, 1, &n_out));
  TRY(lathe_constant(fn, &bs, &yes, 1, &pred));
  TRY(lathe_function_closure(fn, &tb));
  TRY(lathe_neg(tb, sq, &nsq));
  TRY(lathe_function_return(tb, &nsq, 1));
  TRY(lathe_function_closure(fn, &fb));
  TRY(lathe_function_return(fb, &sq, 1));
  TRY(lathe_if(fn, pred, tb, fb, &ifr, 1, &n_out));
  TRY(lathe_reshape(fn, qf, (const int64_t[]){1, 1, 4}, 3, &q3));
  TRY(lathe_constant(fn, &ks, ones, sizeof ones, &ker));
  lathe_conv_axes ax = {0, 1, (const int[]){2}, 1, 1, 0, (const int[]){2}, 1, 0, 1, (const int[]){2}, 1};
  TRY(lathe_conv_general(fn, q3, ker, &ax, NULL, &conv));
  lathe_value_t outs[4] = {sm, rw, ifr, conv};
  TRY(lathe_function_return(fn, outs, 4));
  TRY(lathe_builder_compile(b, out));
  lathe_builder_free(b);
  return st;
}

static bool same(const float *got, const float *want, int n) {
  for (int k = 0; k < n; k++)
    if (got[k] != want[k]) return false;
  return true;
}

/* One run; *be is created when NULL (and left to the caller). *right tells whether the results
 * were checked and right. Everything else made here is freed on every path. */
/* The configuration of the backend the scenario creates (fused and unfused elementwise runs). */
static const char *config;

static lathe_status_t scenario(lathe_backend_t *be, bool *right) {
  lathe_status_t st = NULL;
  *right = false;
  if (!*be) TRY(lathe_backend_new(config, be));
  lathe_executable_t e = NULL;
  lathe_buffer_t in[3] = {NULL, NULL, NULL}, out[4] = {NULL, NULL, NULL, NULL};
  TRY(build(*be, &e));
  lathe_shape xs = shape(LATHE_DTYPE_FLOAT32, 2, 4, 3), ys = shape(LATHE_DTYPE_FLOAT32, 2, 3, 2),
              is = shape(LATHE_DTYPE_INT32, 1, 2, 0);
  void *ydata = NULL;
  TRY(lathe_buffer_from_host(*be, 0, &xs, X, sizeof X, &in[0]));
  TRY(lathe_buffer_new_shared(*be, 0, &ys, &in[1], &ydata));
  if (!st) memcpy(ydata, Y, sizeof Y);
  TRY(lathe_buffer_from_host(*be, 0, &is, IDX, sizeof IDX, &in[2]));
  const bool donate[3] = {true, false, false};
  TRY(lathe_executable_execute(e, in, donate, 3, 0, out, 4));
  float t[8], c[8], n[6], w[4];
  TRY(lathe_buffer_to_host(out[0], t, sizeof t));
  TRY(lathe_buffer_to_host(out[1], c, sizeof c));
  TRY(lathe_buffer_to_host(out[2], n, sizeof n));
  TRY(lathe_buffer_to_host(out[3], w, sizeof w));
  if (!st) *right = same(t, &T_WANT[0][0], 8) && same(c, C_WANT, 8) && same(n, &N_WANT[0][0], 6) && same(w, W_WANT, 4);
  for (int k = 0; k < 4; k++) lathe_buffer_free(out[k]), out[k] = NULL;
  for (int k = 0; k < 3; k++) lathe_buffer_free(in[k]), in[k] = NULL;
  lathe_executable_free(e);
  e = NULL;

  /* The second graph, run twice (the second run finds its specialisation cached), the
   * second time on a copy of the first input made with CopyToDevice. */
  lathe_shape as = shape(LATHE_DTYPE_FLOAT32, 2, 2, 4), qs = shape(LATHE_DTYPE_INT4, 1, 4, 0),
              xs2 = shape(LATHE_DTYPE_INT32, 2, 3, 1);
  TRY(build2(*be, &e));
  TRY(lathe_buffer_from_host(*be, 0, &as, A, sizeof A, &in[0]));
  TRY(lathe_buffer_from_host(*be, 0, &qs, Q, sizeof Q, &in[1]));
  TRY(lathe_buffer_from_host(*be, 0, &xs2, IX, sizeof IX, &in[2]));
  bool right2 = true;
  for (int run = 0; run < 2; run++) {
    float sm[8], rw[4], ifr[4], conv[3];
    TRY(lathe_executable_execute(e, in, NULL, 3, 0, out, 4));
    TRY(lathe_buffer_to_host(out[0], sm, sizeof sm));
    TRY(lathe_buffer_to_host(out[1], rw, sizeof rw));
    TRY(lathe_buffer_to_host(out[2], ifr, sizeof ifr));
    TRY(lathe_buffer_to_host(out[3], conv, sizeof conv));
    if (!st) {
      for (int r = 0; r < 2; r++) {
        float den = 0;
        for (int j = 0; j < 4; j++) den += expf(SORTED[r][j] - SORTED[r][0]);
        for (int j = 0; j < 4; j++) right2 &= fabsf(sm[r * 4 + j] - expf(SORTED[r][j] - SORTED[r][0]) / den) < 1e-6f;
      }
      right2 &= same(rw, &RW_WANT[0][0], 4) && same(ifr, IF_WANT, 4) && same(conv, CONV_WANT, 3);
    }
    for (int k = 0; k < 4; k++) lathe_buffer_free(out[k]), out[k] = NULL;
    lathe_buffer_t copy = NULL;
    TRY(lathe_buffer_copy_to_device(in[0], 0, &copy));
    lathe_buffer_free(in[0]);
    in[0] = copy;
  }
  *right = *right && right2;
  for (int k = 0; k < 3; k++) lathe_buffer_free(in[k]);
  lathe_executable_free(e);
  return st;
}


/* Counts the scenario's allocations on config, then fails each in turn. */
static void run_config(bool verbose, int *passed, int *failed) {
  /* Warm-up (OpenBLAS's first-use setup), then the count. */
  lathe_backend_t be = NULL;
  bool right;
  lathe_status_t st = scenario(&be, &right);
  lathe_backend_free(be);
  if (st || !right) {
    printf("FAIL %s: warm-up run: %s\n", config, st ? lathe_status_message(st) : "wrong results");
    lathe_status_free(st);
    (*failed)++;
    return;
  }
  be = NULL;
  n_counted = 0, n_live = 0, fail_at = -1;
  atomic_store(&armed, true);
  st = scenario(&be, &right);
  lathe_backend_free(be);
  atomic_store(&armed, false);
  long total = n_counted;
  if (st || !right || n_live || overflowed || total == 0) {
    printf("FAIL %s: counting run (%ld allocations seen): %s, %d allocations live after it\n", config,
           total, st ? lathe_status_message(st) : right ? "ok" : "wrong results", n_live);
    (*failed)++;
  } else {
    (*passed)++;
  }
  lathe_status_free(st);
  const char *only = getenv("ALLOC_FAIL_ONLY"); /* one k, to debug it */
  for (long k = only ? atol(only) : 1; k <= total && (!only || k == atol(only)); k++) {
    be = NULL;
    n_counted = 0, n_live = 0, n_failed = 0, fail_at = k;
    atomic_store(&armed, true);
    st = scenario(&be, &right);
    fail_at = -1;
    lathe_status_t again = NULL;
    bool right_again = true;
    if (be) again = scenario(&be, &right_again);
    lathe_backend_free(be);
    /* the statuses are the last counted allocations: keep their text, free them, count */
    char msg[512], msg_again[256];
    lathe_status_code code = lathe_status_code_of(st);
    snprintf(msg, sizeof msg, "%s", lathe_status_message(st));
    snprintf(msg_again, sizeof msg_again, "%s", lathe_status_message(again));
    bool again_failed = again != NULL;
    lathe_status_free(st);
    lathe_status_free(again);
    atomic_store(&armed, false);
    const char *why = NULL;
    if (code != LATHE_STATUS_OK && code != LATHE_STATUS_RESOURCE_EXHAUSTED) why = "a status other than RESOURCE_EXHAUSTED";
    else if (code == LATHE_STATUS_OK && !right) why = "OK with wrong results";
    else if (be && (again_failed || !right_again)) why = "the backend did not run the graph right afterwards";
    else if (n_live || overflowed) why = "allocations leaked";
    else if (!n_failed) why = "the allocation to fail was not reached";
    if (why) {
      printf("FAIL %s k=%ld of %ld: %s (status %s: %s; after: %s; %d live)\n", config, k, total, why,
             lathe_status_code_name(code), msg, msg_again, n_live);
      (*failed)++;
    } else {
      if (verbose) printf("ok %s k=%ld: %s\n", config, k, code ? msg : "OK (absorbed)");
      (*passed)++;
    }
  }
  printf("alloc_fail: %s: %ld allocations in the scenario, each failed once\n", config, total);
}

int main(void) {
  on_main = true;
  setvbuf(stdout, NULL, _IOLBF, 0);
  bool verbose = getenv("ALLOC_FAIL_VERBOSE") != NULL;
  int passed = 0, failed = 0;
  static const char *const configs[] = {"lathe:cpu,threads=1", "lathe:cpu,threads=1,fuse=0"};
  for (int c = 0; c < 2; c++) {
    config = configs[c];
    run_config(verbose, &passed, &failed);
  }
  printf("%d passed, %d failed, 0 skipped\n", passed, failed);
  return failed ? 1 : 0;
}
