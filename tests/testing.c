/* testing.c -- the implementation of tests/testing.h (compiled into each test runner). */
#include "testing.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "graph/graph.h"

int tst_passed, tst_failed, tst_skipped;
const char *tst_current = "";

typedef struct {
  const char *name;
  tst_fn fn;
} tst_entry;
static tst_entry *tests;
static int n_tests, cap_tests;

void tst_register(const char *name, tst_fn fn) {
  if (n_tests == cap_tests) {
    cap_tests = cap_tests ? cap_tests * 2 : 64;
    tests = realloc(tests, sizeof *tests * (size_t)cap_tests);
    if (!tests) abort();
  }
  tests[n_tests++] = (tst_entry){name, fn};
}

/* ---- the run's options and the current row (all under mu: rows may run on several threads) ---- */
typedef enum { ROW_PENDING, ROW_ON, ROW_OFF } row_state;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  bool filter;                 /* -o given */
  bool want[LATHE_OP_COUNT];   /* -o's ops */
  const char *config;          /* -b CONFIG */
  lathe_backend_t ref;         /* -b: the reference lathe:cpu */
  bool exact;                  /* -e: floats compared with tolerance 0 */
  row_state state;
  bool declared;               /* tst_rows_of is in force */
  row_state declared_state;
  lathe_op declared_op;
  int pend_passed, pend_failed, pend_skipped; /* cases of a pending row, counted if it is selected */
  char *pend_log;
  size_t pend_len, pend_cap;
  long rows_ran[LATHE_OP_COUNT], rows_skipped[LATHE_OP_COUNT];
  long compared, mismatched, unsupported;
} R;

/* Where a case of the current row goes: counted now (1), dropped (0), kept with the pending row (2).
 * Without -o a row never waits: its cases count unless the device under test skipped it. */
static int route(void) {
  if (R.state == ROW_OFF) return 0;
  return R.state == ROW_PENDING && R.filter ? 2 : 1;
}

static void vemit(int where, const char *fmt, va_list ap) {
  if (where == 1) {
    vfprintf(stdout, fmt, ap);
    return;
  }
  va_list aq;
  va_copy(aq, ap);
  int n = vsnprintf(NULL, 0, fmt, aq);
  va_end(aq);
  if (n < 0) return;
  if (R.pend_len + (size_t)n + 1 > R.pend_cap) {
    R.pend_cap = (R.pend_len + (size_t)n + 1) * 2;
    R.pend_log = realloc(R.pend_log, R.pend_cap);
    if (!R.pend_log) abort();
  }
  vsnprintf(R.pend_log + R.pend_len, (size_t)n + 1, fmt, ap);
  R.pend_len += (size_t)n;
}

static void emit(int where, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vemit(where, fmt, ap);
  va_end(ap);
}

void tst_pass(void) {
  pthread_mutex_lock(&mu);
  int w = route();
  if (w == 1) tst_passed++;
  else if (w == 2) R.pend_passed++;
  pthread_mutex_unlock(&mu);
}

void tst_fail(const char *file, int line, const char *fmt, ...) {
  pthread_mutex_lock(&mu);
  int w = route();
  if (w) {
    if (w == 1) tst_failed++;
    else R.pend_failed++;
    emit(w, "FAIL %s (%s:%d): ", tst_current, file, line);
    va_list ap;
    va_start(ap, fmt);
    vemit(w, fmt, ap);
    va_end(ap);
    emit(w, "\n");
  }
  pthread_mutex_unlock(&mu);
}

void tst_skipf(const char *who, const char *fmt, ...) {
  pthread_mutex_lock(&mu);
  int w = route();
  if (w) {
    if (w == 1) tst_skipped++;
    else R.pend_skipped++;
    emit(w, "SKIP %s: ", who);
    va_list ap;
    va_start(ap, fmt);
    vemit(w, fmt, ap);
    va_end(ap);
    emit(w, "\n");
  }
  pthread_mutex_unlock(&mu);
}

void tst_log(const char *fmt, ...) {
  pthread_mutex_lock(&mu);
  int w = route();
  if (w) {
    va_list ap;
    va_start(ap, fmt);
    vemit(w, fmt, ap);
    va_end(ap);
    emit(w, "\n");
  }
  pthread_mutex_unlock(&mu);
}

/* Ends a pending row: its cases count when it was selected, else they are dropped. Under mu. */
static void settle(bool selected) {
  if (R.state != ROW_PENDING) return;
  if (selected) {
    tst_passed += R.pend_passed, tst_failed += R.pend_failed, tst_skipped += R.pend_skipped;
    if (R.pend_len) fwrite(R.pend_log, 1, R.pend_len, stdout);
  }
  R.pend_passed = R.pend_failed = R.pend_skipped = 0;
  R.pend_len = 0;
}

void tst_row_begin(void) {
  pthread_mutex_lock(&mu);
  settle(false); /* under -o, a row that compiled no graph is no row of the selected ops */
  R.state = R.declared ? R.declared_state : ROW_PENDING;
  pthread_mutex_unlock(&mu);
}

bool tst_rows_of(lathe_op op) {
  pthread_mutex_lock(&mu);
  bool sel = !R.filter || ((unsigned)op < LATHE_OP_COUNT && R.want[op]);
  settle(false);
  R.declared = true;
  R.declared_op = op;
  R.declared_state = R.state = sel ? ROW_ON : ROW_OFF;
  pthread_mutex_unlock(&mu);
  return sel;
}

/* The ops of a builder's graph (every function), and their names for messages. */
typedef struct {
  bool has[LATHE_OP_COUNT];
  char names[96];
} graph_ops;

static void ops_of(lathe_builder_t b, graph_ops *g) {
  memset(g, 0, sizeof *g);
  for (int f = 0; b && f < b->n_fns; f++)
    for (int i = 0; i < b->fns[f]->n_nodes; i++) {
      lathe_op op = b->fns[f]->nodes[i]->op;
      if ((unsigned)op < LATHE_OP_COUNT) g->has[op] = true;
    }
  size_t len = 0;
  for (int op = 0; op < LATHE_OP_COUNT; op++) {
    if (!g->has[op] || op == LATHE_OP_PARAMETER || lathe_op_kind_of((lathe_op)op) == LATHE_KIND_INTERNAL) continue;
    const char *name = lathe_op_name((lathe_op)op);
    if (len + strlen(name) + 5 >= sizeof g->names) {
      snprintf(g->names + len, sizeof g->names - len, ",...");
      break;
    }
    len += (size_t)snprintf(g->names + len, sizeof g->names - len, "%s%s", len ? "," : "", name);
  }
  if (!len) snprintf(g->names, sizeof g->names, "Parameter");
}

/* Decides the current row from its graph (unless tst_rows_of declared it); returns whether it
 * counts. Under mu. */
static bool decide(const graph_ops *g) {
  if (R.declared) return R.declared_state == ROW_ON;
  bool sel = !R.filter;
  for (int op = 0; op < LATHE_OP_COUNT && !sel; op++) sel = g->has[op] && R.want[op];
  settle(sel);
  R.state = sel ? ROW_ON : ROW_OFF;
  return sel;
}

/* Counts one run (or skip) of a row for each selected op it uses. Under mu. */
static void count_row(const graph_ops *g, bool skipped) {
  for (int op = 0; op < LATHE_OP_COUNT; op++)
    if (R.want[op] && (g->has[op] || (R.declared && (int)R.declared_op == op)))
      (skipped ? R.rows_skipped : R.rows_ran)[op]++;
}

bool tst_row_graph(lathe_builder_t b) {
  graph_ops g;
  ops_of(b, &g);
  pthread_mutex_lock(&mu);
  bool sel = decide(&g);
  if (sel) count_row(&g, false);
  pthread_mutex_unlock(&mu);
  return sel;
}

static lathe_backend_t backend;
static void free_backends(void) {
  lathe_backend_free(backend);
  lathe_backend_free(R.ref);
}

bool tst_backend_is_cpu(void) { return !R.config || strncmp(R.config, "lathe:cpu", 9) == 0; }
bool tst_tf32_products(void) { return R.config && strstr(R.config, "tf32=1"); }

lathe_backend_t tst_backend(void) {
  if (!backend) {
    const char *cfg = R.config ? R.config : "lathe:cpu";
    lathe_status_t st = lathe_backend_new(cfg, &backend);
    if (st) {
      fprintf(stdout, "cannot create backend %s: %s\n", cfg, lathe_status_message(st));
      exit(1);
    }
    atexit(free_backends);
  }
  return backend;
}

lathe_backend_t tst_backend_variant(const char *options) {
  static lathe_backend_t variants[8];
  static char keys[8][64];
  static int n;
  for (int i = 0; i < n; i++)
    if (!strcmp(keys[i], options)) return variants[i];
  if (n == 8) return NULL;
  char cfg[256];
  const char *base = lathe_backend_config(tst_backend());
  snprintf(cfg, sizeof cfg, "%s,%s", base, options);
  lathe_status_t st = lathe_backend_new(cfg, &variants[n]);
  if (st) {
    fprintf(stdout, "cannot create backend %s: %s\n", cfg, lathe_status_message(st));
    lathe_status_free(st);
    return NULL;
  }
  snprintf(keys[n], sizeof keys[n], "%s", options);
  return variants[n++];
}

lathe_shape tst_shape(lathe_dtype dt, int rank, const int64_t *dims) {
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = dt;
  s.rank = rank;
  for (int i = 0; i < rank; i++) s.dims[i] = dims[i];
  return s;
}

lathe_shape tst_shape0(lathe_dtype dt) { return tst_shape(dt, 0, NULL); }

void *tst_alloc_for(const lathe_shape *s) {
  int64_t n = lathe_shape_byte_size(s);
  return calloc((size_t)(n > 0 ? n : 1), 1);
}

#define GUARD 64
#define GUARD_BYTE 0xA5

/* ---- running rows on the backend under test and the reference ---- */
struct tst_exec {
  lathe_executable_t dev; /* on tst_backend(); NULL: the row runs on the reference only */
  lathe_executable_t ref; /* -b: on the reference; NULL: nothing to compare with */
  bool counted;           /* a row of the selected ops */
  graph_ops ops;
};

lathe_executable_t tst_exec_executable(const tst_exec *x) { return x ? x->dev : NULL; }

void tst_exec_free(tst_exec *x) {
  if (!x) return;
  lathe_executable_free(x->dev);
  lathe_executable_free(x->ref);
  free(x);
}

/* A failure that belongs to a compared row, counted whatever row is current. */
static void ref_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ref_fail(const char *fmt, ...) {
  pthread_mutex_lock(&mu);
  tst_failed++;
  R.mismatched++;
  printf("FAIL %s (reference): %s vs lathe:cpu: ", tst_current, R.config);
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  putchar('\n');
  pthread_mutex_unlock(&mu);
}

/* CONFIG cannot run the row while the reference can: a counted skip; the rest of the row's
 * cases are dropped and its outputs come from the reference. */
static void device_skip(tst_exec *x, lathe_status_t st) {
  tst_skipf(tst_current, "%s cannot run %s: %s", R.config, x->ops.names, lathe_status_message(st));
  pthread_mutex_lock(&mu);
  R.unsupported++;
  if (x->counted) count_row(&x->ops, true);
  R.state = ROW_OFF;
  pthread_mutex_unlock(&mu);
  lathe_executable_free(x->dev);
  x->dev = NULL;
}

lathe_status_t tst_compile(lathe_builder_t b, tst_exec **out) {
  *out = NULL;
  tst_exec *x = calloc(1, sizeof *x);
  if (!x) abort();
  ops_of(b, &x->ops);
  pthread_mutex_lock(&mu);
  bool sel = decide(&x->ops), on_device = sel || !R.ref; /* a dropped row runs on the reference */
  x->counted = sel && R.filter;
  pthread_mutex_unlock(&mu);
  lathe_status_t st = NULL, st_ref = NULL;
  if (on_device) st = lathe_builder_compile_for(b, tst_backend(), &x->dev);
  if (R.ref) st_ref = lathe_builder_compile_for(b, R.ref, &x->ref);
  if (on_device && R.ref) {
    lathe_status_code c = lathe_status_code_of(st), cr = lathe_status_code_of(st_ref);
    if (c == LATHE_STATUS_UNIMPLEMENTED && !st_ref) {
      device_skip(x, st);
      lathe_status_free(st);
      st = NULL;
    } else if (c == LATHE_STATUS_OK && cr == LATHE_STATUS_UNIMPLEMENTED) {
      tst_skipf(tst_current, "lathe:cpu cannot run %s, no reference to compare with: %s", x->ops.names,
                lathe_status_message(st_ref));
    } else if (c != cr) {
      ref_fail("%s: compile: %s (%s), lathe:cpu: %s (%s)", x->ops.names, lathe_status_code_name(c),
               lathe_status_message(st), lathe_status_code_name(cr), lathe_status_message(st_ref));
    }
  }
  if (on_device) {
    lathe_status_free(st_ref);
    if (st_ref) lathe_executable_free(x->ref), x->ref = NULL;
  } else {
    st = st_ref;
  }
  if (st) {
    tst_exec_free(x);
    return st;
  }
  *out = x;
  return NULL;
}

/* Uploads the inputs to be and runs e; on failure no output is left. */
static lathe_status_t run_on(lathe_executable_t e, lathe_backend_t be, const lathe_shape *shapes,
                             const void *const *in_data, int n_in, lathe_buffer_t *outs, int n_out) {
  lathe_buffer_t in[64] = {0};
  lathe_status_t st = NULL;
  for (int k = 0; k < n_out; k++) outs[k] = NULL;
  if (n_in > 64) return lathe_status_new(LATHE_STATUS_INVALID_ARGUMENT, "tst_run: too many");
  for (int i = 0; i < n_in && !st; i++) {
    lathe_shape s;
    if (shapes) s = shapes[i];
    else if ((st = lathe_executable_input_shape(e, i, &s))) break;
    st = lathe_buffer_from_host(be, 0, &s, in_data[i], (size_t)lathe_shape_byte_size(&s), &in[i]);
  }
  if (!st) st = lathe_executable_execute(e, in, NULL, n_in, 0, outs, n_out);
  for (int i = 0; i < n_in; i++) lathe_buffer_free(in[i]);
  if (st)
    for (int k = 0; k < n_out; k++) lathe_buffer_free(outs[k]), outs[k] = NULL;
  return st;
}

/* Waits for every output; the first error of the work that computes them (NULL: none). */
static lathe_status_t wait_all(lathe_buffer_t *outs, int n) {
  lathe_status_t st = NULL;
  for (int k = 0; k < n && !st; k++)
    if (outs[k]) st = lathe_buffer_wait(outs[k]);
  return st;
}

/* Runs x on the backend under test (or on the reference alone) into outs; when the reference
 * ran it too, ref_outs holds its outputs for comparison (else all NULL). */
static lathe_status_t run_pair(tst_exec *x, const lathe_shape *shapes, const void *const *in_data, int n_in,
                               lathe_buffer_t *outs, lathe_buffer_t *ref_outs, int n_out) {
  for (int k = 0; k < n_out; k++) ref_outs[k] = NULL;
  if (!x->dev) return run_on(x->ref, R.ref, shapes, in_data, n_in, outs, n_out);
  lathe_status_t st = run_on(x->dev, tst_backend(), shapes, in_data, n_in, outs, n_out);
  if (x->ref) {
    lathe_status_t st_ref = run_on(x->ref, R.ref, shapes, in_data, n_in, ref_outs, n_out);
    /* An asynchronous device reports errors of the work when its outputs are waited for. */
    lathe_status_t done = st ? NULL : wait_all(outs, n_out), done_ref = st_ref ? NULL : wait_all(ref_outs, n_out);
    lathe_status_t e = st ? st : done, e_ref = st_ref ? st_ref : done_ref;
    lathe_status_code c = lathe_status_code_of(e), cr = lathe_status_code_of(e_ref);
    if (c == LATHE_STATUS_UNIMPLEMENTED && !e_ref) {
      device_skip(x, e);
      lathe_status_free(st), lathe_status_free(done);
      for (int k = 0; k < n_out; k++) lathe_buffer_free(outs[k]), outs[k] = ref_outs[k], ref_outs[k] = NULL;
      return NULL;
    }
    if (c != cr)
      ref_fail("%s: run: %s (%s), lathe:cpu: %s (%s)", x->ops.names, lathe_status_code_name(c),
               lathe_status_message(e), lathe_status_code_name(cr), lathe_status_message(e_ref));
    if (e || e_ref)
      for (int k = 0; k < n_out; k++) lathe_buffer_free(ref_outs[k]), ref_outs[k] = NULL; /* nothing to compare */
    lathe_status_free(done), lathe_status_free(done_ref), lathe_status_free(st_ref);
  }
  if (x->counted) {
    pthread_mutex_lock(&mu);
    count_row(&x->ops, false);
    pthread_mutex_unlock(&mu);
  }
  return st;
}

static bool close_enough(double g, double w, double tol) {
  if (isnan(w) || isnan(g)) return isnan(w) && isnan(g);
  if (isinf(w) || isinf(g)) return g == w;
  return fabs(g - w) <= tol * (1 + fabs(w));
}

/* A complex value: each part within tol, or (as numpy's allclose) the complex difference within
 * tol of the modulus, so a part that is small beside the other is not held to its own scale. */
static bool close_complex(double g, double gi, double w, double wi, double tol) {
  if (close_enough(g, w, tol) && close_enough(gi, wi, tol)) return true;
  if (!isfinite(g) || !isfinite(gi) || !isfinite(w) || !isfinite(wi)) return false;
  return hypot(g - w, gi - wi) <= tol * (1 + hypot(w, wi));
}

/* Compares output k of a row with the reference's: integers and Bool bit-exact, floats and
 * complex values within tol (close_complex), NaN positions equal. */
/* Under a configuration whose Float32 products may use TF32 tensor cores (tf32=1: operands
 * rounded to 10 mantissa bits), Float32 results are held to TF32's tolerance, not to the
 * tighter one a row states for exact Float32. Each product then errs by about 2^-11 of its own
 * size, and a sum whose terms cancel keeps those errors at the terms' scale, not the result's
 * (seen on the H200: 0.272 for 0.251 in a 40x40 grouped convolution), so the bound is 5e-2. */
static double with_tf32(lathe_dtype dt, double tol) {
  bool f32 = dt == LATHE_DTYPE_FLOAT32 || dt == LATHE_DTYPE_COMPLEX64;
  return f32 && R.config && strstr(R.config, "tf32=1") && tol < 5e-2 ? 5e-2 : tol;
}

static void ref_compare(const char *ops, int k, const lathe_shape *s, const void *got, const void *want, double tol) {
  tol = with_tf32(s->dtype, tol);
  lathe_dtype dt = s->dtype;
  int64_t n = lathe_shape_size(s), bad = 0, first = -1;
  bool exact = !lathe_dtype_is_float(dt) && !lathe_dtype_is_complex(dt);
  if (R.exact) tol = 0;
  int bits = lathe_dtype_bits(dt);
  size_t esz = (size_t)bits / 8;
  for (int64_t i = 0; i < n; i++) {
    bool ok;
    if (exact && esz) ok = memcmp((const char *)got + (size_t)i * esz, (const char *)want + (size_t)i * esz, esz) == 0;
    else if (exact) ok = tst_get_int(got, dt, i) == tst_get_int(want, dt, i);
    else ok = close_complex(tst_get(got, dt, i), tst_get_imag(got, dt, i), tst_get(want, dt, i),
                            tst_get_imag(want, dt, i), tol);
    if (!ok && !bad++) first = i;
  }
  pthread_mutex_lock(&mu);
  R.compared++;
  pthread_mutex_unlock(&mu);
  if (!bad) return;
  char sb[LATHE_SHAPE_STR_MAX];
  if (exact)
    ref_fail("%s output %d (%s): %lld of %lld elements differ, first at %lld: got %lld, want %lld", ops, k,
             lathe_shape_str(s, sb, sizeof sb), (long long)bad, (long long)n, (long long)first,
             (long long)tst_get_int(got, dt, first), (long long)tst_get_int(want, dt, first));
  else if (lathe_dtype_is_complex(dt))
    ref_fail("%s output %d (%s): %lld of %lld elements differ beyond %g, first at %lld: got %.9g%+.9gi, want %.9g%+.9gi",
             ops, k, lathe_shape_str(s, sb, sizeof sb), (long long)bad, (long long)n, tol, (long long)first,
             tst_get(got, dt, first), tst_get_imag(got, dt, first), tst_get(want, dt, first),
             tst_get_imag(want, dt, first));
  else
    ref_fail("%s output %d (%s): %lld of %lld elements differ beyond %g, first at %lld: got %.9g, want %.9g", ops, k,
             lathe_shape_str(s, sb, sizeof sb), (long long)bad, (long long)n, tol, (long long)first,
             tst_get(got, dt, first), tst_get(want, dt, first));
}

/* Downloads b into fresh memory (size from its shape); NULL and a failure when it cannot. */
static void *download(lathe_buffer_t b, lathe_shape *s, const char *ops, int k) {
  lathe_status_t st = lathe_buffer_shape(b, s);
  void *p = NULL;
  if (!st) {
    p = malloc((size_t)lathe_shape_byte_size(s) + 1);
    if (!p) abort();
    st = lathe_buffer_to_host(b, p, (size_t)lathe_shape_byte_size(s));
  }
  if (st) {
    ref_fail("%s output %d: download: %s", ops, k, lathe_status_message(st));
    free(p), p = NULL;
  }
  lathe_status_free(st);
  return p;
}

/* Outputs of tst_run waiting for their comparison with the reference (main thread only). */
typedef struct {
  const void *got;
  void *want;
  lathe_shape shape;
  int k;
  char ops[96];
} ref_pending;
static ref_pending *pend_cmp;
static int n_pend_cmp, cap_pend_cmp;

static void compare_pending(int i, double tol, bool use_tol) {
  ref_pending p = pend_cmp[i];
  pend_cmp[i] = pend_cmp[--n_pend_cmp];
  ref_compare(p.ops, p.k, &p.shape, p.got, p.want, use_tol ? tol : tst_tol(p.shape.dtype));
  free(p.want);
}

void tst_expect_tol(const void *got, double tol) {
  for (int i = 0; got && i < n_pend_cmp; i++)
    if (pend_cmp[i].got == got) return compare_pending(i, tol, true);
}

void tst_free_output(void *p) {
  if (!p) return;
  for (int i = 0; i < n_pend_cmp; i++)
    if (pend_cmp[i].got == p) {
      compare_pending(i, 0, false);
      break;
    }
  free((unsigned char *)p - GUARD);
}

lathe_status_t tst_exec_run(tst_exec *x, const lathe_shape *shapes, const void *const *in_data, int n_in,
                            lathe_buffer_t *outs, int n_out) {
  lathe_buffer_t ref[64];
  if (n_out > 64) return lathe_status_new(LATHE_STATUS_INVALID_ARGUMENT, "tst_exec_run: too many");
  lathe_status_t st = run_pair(x, shapes, in_data, n_in, outs, ref, n_out);
  for (int k = 0; k < n_out; k++) {
    if (!st && ref[k]) {
      lathe_shape gs, ws;
      void *got = download(outs[k], &gs, x->ops.names, k), *want = download(ref[k], &ws, x->ops.names, k);
      if (got && want && !lathe_shape_equal(&gs, &ws)) ref_fail("%s output %d: shapes differ", x->ops.names, k);
      else if (got && want) ref_compare(x->ops.names, k, &gs, got, want, tst_tol(gs.dtype));
      free(got), free(want);
    }
    lathe_buffer_free(ref[k]);
  }
  return st;
}

lathe_status_t tst_run(lathe_builder_t b, const void *const *in_data, int n_in, void **out_data, int n_out,
                       lathe_shape *out_shapes) {
  tst_exec *x = NULL;
  lathe_buffer_t out[64] = {0}, ref[64] = {0};
  lathe_status_t st = NULL;
  for (int k = 0; k < n_out; k++) out_data[k] = NULL;
  if (n_in > 64 || n_out > 64) return lathe_status_new(LATHE_STATUS_INVALID_ARGUMENT, "tst_run: too many");
  if ((st = tst_compile(b, &x))) return st;
  st = run_pair(x, NULL, in_data, n_in, out, ref, n_out);
  for (int k = 0; k < n_out && !st; k++) {
    lathe_shape s;
    if ((st = lathe_buffer_shape(out[k], &s))) break;
    if (out_shapes) out_shapes[k] = s;
    size_t nb = (size_t)lathe_shape_byte_size(&s);
    unsigned char *raw = malloc(nb + 2 * GUARD);
    if (!raw) abort();
    memset(raw, GUARD_BYTE, nb + 2 * GUARD);
    out_data[k] = raw + GUARD;
    st = lathe_buffer_to_host(out[k], raw + GUARD, nb);
    bool ok = true;
    for (int g = 0; g < GUARD; g++) ok &= raw[g] == GUARD_BYTE && raw[GUARD + nb + g] == GUARD_BYTE;
    CHECK(ok, "output %d: guard bytes overwritten", k);
  }
  /* Each output waits for the tolerance the test states for it (tst_expect_tol). */
  for (int k = 0; k < n_out && !st; k++) {
    if (!ref[k]) continue;
    ref_pending p = {.got = out_data[k], .k = k};
    snprintf(p.ops, sizeof p.ops, "%s", x->ops.names);
    lathe_shape gs;
    lathe_buffer_shape(out[k], &gs);
    if (!(p.want = download(ref[k], &p.shape, x->ops.names, k))) continue;
    if (!lathe_shape_equal(&gs, &p.shape)) {
      ref_fail("%s output %d: shapes differ", x->ops.names, k);
      free(p.want);
      continue;
    }
    if (n_pend_cmp == cap_pend_cmp) {
      cap_pend_cmp = cap_pend_cmp ? 2 * cap_pend_cmp : 16;
      pend_cmp = realloc(pend_cmp, sizeof *pend_cmp * (size_t)cap_pend_cmp);
      if (!pend_cmp) abort();
    }
    pend_cmp[n_pend_cmp++] = p;
  }
  for (int k = 0; k < n_out; k++) lathe_buffer_free(out[k]), lathe_buffer_free(ref[k]);
  tst_exec_free(x);
  if (st)
    for (int k = 0; k < n_out; k++) tst_free_output(out_data[k]), out_data[k] = NULL;
  return st;
}

double tst_get(const void *d, lathe_dtype dt, int64_t i) {
  switch (dt) {
    case LATHE_DTYPE_BOOL: return ((const uint8_t *)d)[i] != 0;
    case LATHE_DTYPE_INT8: return ((const int8_t *)d)[i];
    case LATHE_DTYPE_INT16: return ((const int16_t *)d)[i];
    case LATHE_DTYPE_INT32: return ((const int32_t *)d)[i];
    case LATHE_DTYPE_INT64: return (double)((const int64_t *)d)[i];
    case LATHE_DTYPE_UINT8: return ((const uint8_t *)d)[i];
    case LATHE_DTYPE_UINT16: return ((const uint16_t *)d)[i];
    case LATHE_DTYPE_UINT32: return ((const uint32_t *)d)[i];
    case LATHE_DTYPE_UINT64: return (double)((const uint64_t *)d)[i];
    case LATHE_DTYPE_FLOAT16: return lathe_f16_to_f32(((const uint16_t *)d)[i]);
    case LATHE_DTYPE_BFLOAT16: return lathe_bf16_to_f32(((const uint16_t *)d)[i]);
    case LATHE_DTYPE_FLOAT32: return ((const float *)d)[i];
    case LATHE_DTYPE_FLOAT64: return ((const double *)d)[i];
    case LATHE_DTYPE_COMPLEX64: return ((const float *)d)[2 * i];
    case LATHE_DTYPE_COMPLEX128: return ((const double *)d)[2 * i];
    default: {
      int bits = lathe_dtype_bits(dt);
      const uint8_t *p = d;
      int64_t bit = i * bits;
      unsigned v = (p[bit >> 3] >> (bit & 7)) & ((1u << bits) - 1);
      if (lathe_dtype_class_of(dt) == LATHE_CLASS_SINT && (v >> (bits - 1))) return (double)((int)v - (1 << bits));
      return v;
    }
  }
}

double tst_get_imag(const void *d, lathe_dtype dt, int64_t i) {
  if (dt == LATHE_DTYPE_COMPLEX64) return ((const float *)d)[2 * i + 1];
  if (dt == LATHE_DTYPE_COMPLEX128) return ((const double *)d)[2 * i + 1];
  return 0;
}

void tst_set_complex(void *d, lathe_dtype dt, int64_t i, double re, double im) {
  if (dt == LATHE_DTYPE_COMPLEX64) {
    ((float *)d)[2 * i] = (float)re;
    ((float *)d)[2 * i + 1] = (float)im;
  } else if (dt == LATHE_DTYPE_COMPLEX128) {
    ((double *)d)[2 * i] = re;
    ((double *)d)[2 * i + 1] = im;
  } else {
    tst_set(d, dt, i, re);
  }
}

/* Doubles to integers as x86-64's conversions give them (out of range or NaN: the "integer
 * indefinite" INT_MIN, then truncation to narrower types), written without C's undefined casts, so
 * that the expected values are the same under every compiler and under UBSan. */
static int64_t x86_i64(double v) { return v >= -0x1p63 && v < 0x1p63 ? (int64_t)v : INT64_MIN; }
static int32_t x86_i32(double v) { return v > -0x1p31 - 1 && v < 0x1p31 ? (int32_t)v : INT32_MIN; }
static uint64_t x86_u64(double v) { return v < 0x1p63 ? (uint64_t)x86_i64(v) : v < 0x1p64 ? (uint64_t)v : 0; }

void tst_set(void *d, lathe_dtype dt, int64_t i, double v) {
  switch (dt) {
    case LATHE_DTYPE_BOOL: ((uint8_t *)d)[i] = v != 0; break;
    case LATHE_DTYPE_INT8: ((int8_t *)d)[i] = (int8_t)x86_i32(v); break;
    case LATHE_DTYPE_INT16: ((int16_t *)d)[i] = (int16_t)x86_i32(v); break;
    case LATHE_DTYPE_INT32: ((int32_t *)d)[i] = x86_i32(v); break;
    case LATHE_DTYPE_INT64: ((int64_t *)d)[i] = x86_i64(v); break;
    case LATHE_DTYPE_UINT8: ((uint8_t *)d)[i] = (uint8_t)x86_i32(v); break;
    case LATHE_DTYPE_UINT16: ((uint16_t *)d)[i] = (uint16_t)x86_i32(v); break;
    case LATHE_DTYPE_UINT32: ((uint32_t *)d)[i] = (uint32_t)x86_i64(v); break;
    case LATHE_DTYPE_UINT64: ((uint64_t *)d)[i] = x86_u64(v); break;
    case LATHE_DTYPE_FLOAT16: ((uint16_t *)d)[i] = lathe_f32_to_f16((float)v); break;
    case LATHE_DTYPE_BFLOAT16: ((uint16_t *)d)[i] = lathe_f32_to_bf16((float)v); break;
    case LATHE_DTYPE_FLOAT32: ((float *)d)[i] = (float)v; break;
    case LATHE_DTYPE_FLOAT64: ((double *)d)[i] = v; break;
    case LATHE_DTYPE_COMPLEX64:
    case LATHE_DTYPE_COMPLEX128: tst_set_complex(d, dt, i, v, 0); break;
    default: {
      int bits = lathe_dtype_bits(dt);
      uint8_t *p = d;
      int64_t bit = i * bits;
      unsigned mask = ((1u << bits) - 1) << (bit & 7);
      p[bit >> 3] = (uint8_t)((p[bit >> 3] & ~mask) | (((unsigned)x86_i32(v) << (bit & 7)) & mask));
    }
  }
}

void tst_fill(void *d, lathe_dtype dt, int64_t n, unsigned seed) {
  uint32_t x = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    double u = (x % 20001u) / 10000.0 - 1.0; /* [-1, 1] */
    lathe_dtype_class c = lathe_dtype_class_of(dt);
    int bits = lathe_dtype_bits(dt);
    double v;
    if (c == LATHE_CLASS_BOOL) v = x & 1;
    else if (c == LATHE_CLASS_UINT) v = bits < 8 ? x % (1u << bits) : x % 100;
    else if (c == LATHE_CLASS_SINT) v = bits < 8 ? (double)((int)(x % (1u << bits)) - (1 << (bits - 1))) : (double)((int)(x % 101) - 50);
    else v = u * 4;
    if (c == LATHE_CLASS_COMPLEX) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      tst_set_complex(d, dt, i, v, ((x % 20001u) / 10000.0 - 1.0) * 4);
    } else {
      tst_set(d, dt, i, v);
    }
  }
}

double tst_tol(lathe_dtype dt) {
  switch (dt) {
    case LATHE_DTYPE_FLOAT32:
    case LATHE_DTYPE_COMPLEX64: return 1e-5;
    case LATHE_DTYPE_FLOAT64:
    case LATHE_DTYPE_COMPLEX128: return 1e-12;
    case LATHE_DTYPE_FLOAT16: return 2e-3;
    case LATHE_DTYPE_BFLOAT16: return 1.6e-2;
    default: return 0;
  }
}

void tst_expect_close(const char *label, const void *got, const void *want, lathe_dtype dt, int64_t n, double tol) {
  tst_expect_tol(got, tol);
  if (!R.exact) tol = with_tf32(dt, tol);
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double g = tst_get(got, dt, i), w = tst_get(want, dt, i);
    double gi = tst_get_imag(got, dt, i), wi = tst_get_imag(want, dt, i);
    if (!close_complex(g, gi, w, wi, tol)) {
      if (bad < 3)
        tst_log("  %s: element %lld: got %.17g%+.17gi, want %.17g%+.17gi", label, (long long)i, g, gi, w, wi);
      bad++;
    }
  }
  CHECK(bad == 0, "%s (%s, %lld elements): %d mismatches", label, lathe_dtype_name(dt), (long long)n, bad);
}

int64_t tst_numel(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int a = 0; a < rank; a++) n *= dims[a];
  return n;
}

int64_t tst_ravel(int rank, const int64_t *dims, const int64_t *c) {
  int64_t f = 0;
  for (int a = 0; a < rank; a++) f = f * dims[a] + c[a];
  return f;
}

void tst_unravel(int64_t i, int rank, const int64_t *dims, int64_t *c) {
  for (int a = rank - 1; a >= 0; a--) {
    c[a] = dims[a] ? i % dims[a] : 0;
    i = dims[a] ? i / dims[a] : 0;
  }
}

int64_t tst_wrap_int(lathe_dtype dt, uint64_t v) {
  if (dt == LATHE_DTYPE_BOOL) return v != 0;
  int bits = lathe_dtype_bits(dt);
  if (bits <= 0 || bits >= 64) return (int64_t)v;
  uint64_t m = (UINT64_C(1) << bits) - 1;
  v &= m;
  if (lathe_dtype_class_of(dt) == LATHE_CLASS_SINT && (v >> (bits - 1))) v |= ~m;
  return (int64_t)v;
}

double tst_wrap_value(lathe_dtype dt, uint64_t v) {
  if (dt == LATHE_DTYPE_UINT64) return (double)v;
  return (double)tst_wrap_int(dt, v);
}

void tst_set_int(void *d, lathe_dtype dt, int64_t i, uint64_t v) {
  int64_t w = tst_wrap_int(dt, v);
  switch (lathe_dtype_bits(dt)) {
    case 8: ((uint8_t *)d)[i] = (uint8_t)w; break;
    case 16: ((uint16_t *)d)[i] = (uint16_t)w; break;
    case 32: ((uint32_t *)d)[i] = (uint32_t)w; break;
    case 64: ((uint64_t *)d)[i] = (uint64_t)w; break;
    default: tst_set(d, dt, i, (double)w);
  }
}

int64_t tst_get_int(const void *d, lathe_dtype dt, int64_t i) {
  switch (dt) {
    case LATHE_DTYPE_INT64: return ((const int64_t *)d)[i];
    case LATHE_DTYPE_UINT64: return (int64_t)((const uint64_t *)d)[i];
    default: return (int64_t)tst_get(d, dt, i);
  }
}

lathe_status_t tst_builder_new(const char *name, lathe_builder_t *out) {
  tst_row_begin();
  return lathe_builder_new(tst_backend(), name, out);
}

lathe_builder_t tst_builder(const char *name, lathe_function_t *main_fn) {
  lathe_builder_t b = NULL;
  lathe_status_t st = tst_builder_new(name, &b);
  CHECK(st == NULL, "%s: builder: %s", name, lathe_status_message(st));
  lathe_status_free(st);
  if (main_fn) *main_fn = b ? lathe_builder_main(b) : NULL;
  return b;
}

lathe_value_t tst_param(lathe_function_t fn, const char *name, lathe_shape s) {
  lathe_value_t v = NULL;
  lathe_status_t st = lathe_parameter(fn, name, &s, &v);
  CHECK(st == NULL, "parameter %s: %s", name ? name : "(unnamed)", lathe_status_message(st));
  lathe_status_free(st);
  return v;
}

bool tst_built(const char *label, lathe_status_t st, lathe_builder_t b) {
  CHECK(st == NULL, "%s: build: %s", label, lathe_status_message(st));
  if (!st) return true;
  lathe_status_free(st);
  lathe_builder_free(b);
  return false;
}

void tst_expect_shape_and_return(const char *label, lathe_function_t fn, lathe_value_t y, const lathe_shape *want) {
  lathe_shape got;
  memset(&got, 0, sizeof got);
  CHECK_OK(lathe_value_shape(y, &got));
  CHECK(lathe_shape_equal(&got, want), "%s: inferred shape (rank %d)", label, got.rank);
  CHECK_OK(lathe_function_return(fn, &y, 1));
}

void tst_run_expect(const char *label, lathe_builder_t b, const void *const *ins, int n_in, const void *want,
                    lathe_dtype dt, int64_t n, double tol) {
  void *got = NULL;
  lathe_status_t st = tst_run(b, ins, n_in, &got, 1, NULL);
  CHECK(st == NULL, "%s: run: %s", label, lathe_status_message(st));
  lathe_status_free(st);
  if (got) tst_expect_close(label, got, want, dt, n, tol);
  tst_free_output(got);
}

/* ew.def's LATHE_ACT rows in double: the references of the activation rows. */
#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR)
double tst_activation_ref(double x, lathe_activation a) {
  typedef double T;
  switch ((int)a) {
#define LATHE_ACT(E, NUM, FORM, FWD, VJP_X, VJP_Y) \
  case NUM: return (T)(FWD);
#include "graph/ew.def"
#undef LATHE_ACT
    default: return x;
  }
}
double tst_activation_vjp_ref(double v, double g, lathe_activation a, bool from_y) {
  typedef double T;
  double x = v, y = v;
  (void)x, (void)y;
  switch ((int)a) {
#define LATHE_ACT(E, NUM, FORM, FWD, VJP_X, VJP_Y) \
  case NUM: return from_y ? (T)(VJP_Y) : (T)(VJP_X);
#include "graph/ew.def"
#undef LATHE_ACT
    default: return g;
  }
}
#undef LATHE_EW

const lathe_dtype tst_all_dtypes[] = {
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) LATHE_DTYPE_##ENUM,
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
};
const int tst_n_all_dtypes = (int)(sizeof tst_all_dtypes / sizeof tst_all_dtypes[0]);

static int usage(const char *prog, const char *why) {
  fprintf(stderr, "%s: %s\nusage: %s [-l] [-j N] [-o OP[,OP...]] [-b CONFIG [-e]] [NAME]\n"
                  "  -l         list the tests' names and exit\n"
                  "  -j N       run the tests in N processes, each taking the next test (one summary)\n"
                  "  -o OP      run only the rows whose graph uses OP (GoMLX op names, e.g. Clz, DotGeneral)\n"
                  "  -b CONFIG  run every row on backend CONFIG and compare its outputs with lathe:cpu\n"
                  "  -e         with -b: floats must equal the reference's exactly (NaN positions alike)\n"
                  "  NAME       run only the tests whose name contains NAME (=NAME: exactly NAME)\n",
          prog, why, prog);
  return 2;
}

/* Selects the ops of a comma-separated list; an unknown name is an error that lists the known ones. */
static int select_ops(const char *prog, const char *list) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", list);
  int n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    lathe_op op = lathe_op_from_name(tok);
    if (op == LATHE_OP_COUNT || lathe_op_kind_of(op) == LATHE_KIND_INTERNAL) {
      fprintf(stderr, "%s: -o: unknown op \"%s\"; the ops are:", prog, tok);
      for (int k = 0; k < LATHE_OP_COUNT; k++)
        if (lathe_op_kind_of((lathe_op)k) != LATHE_KIND_INTERNAL) fprintf(stderr, " %s", lathe_op_name((lathe_op)k));
      fputc('\n', stderr);
      return 2;
    }
    R.want[op] = true;
    n++;
  }
  if (!n) return usage(prog, "-o needs an op name");
  R.filter = true;
  return 0;
}

/* A run's counts: one process's, or (-j) the sum of its processes'. */
typedef struct {
  int passed, failed, skipped;
  long compared, mismatched, unsupported;
  long rows_ran[LATHE_OP_COUNT], rows_skipped[LATHE_OP_COUNT];
  char config[256]; /* -b or -o: the device under test's config as it names itself */
} tally;

static void tally_mine(tally *t) {
  memset(t, 0, sizeof *t);
  t->passed = tst_passed, t->failed = tst_failed, t->skipped = tst_skipped;
  t->compared = R.compared, t->mismatched = R.mismatched, t->unsupported = R.unsupported;
  memcpy(t->rows_ran, R.rows_ran, sizeof t->rows_ran);
  memcpy(t->rows_skipped, R.rows_skipped, sizeof t->rows_skipped);
  if (R.config || R.filter) snprintf(t->config, sizeof t->config, "%s", lathe_backend_config(tst_backend()));
}

static void tally_add(tally *to, const tally *t) {
  to->passed += t->passed, to->failed += t->failed, to->skipped += t->skipped;
  to->compared += t->compared, to->mismatched += t->mismatched, to->unsupported += t->unsupported;
  for (int op = 0; op < LATHE_OP_COUNT; op++) to->rows_ran[op] += t->rows_ran[op], to->rows_skipped[op] += t->rows_skipped[op];
  if (!to->config[0]) memcpy(to->config, t->config, sizeof to->config);
}

/* The summary lines; the run's status. */
static int report(const tally *t, bool filtered, int rc) {
  for (int op = 0; op < LATHE_OP_COUNT; op++) {
    if (!R.want[op]) continue;
    printf("-o %s: %ld rows ran on %s, %ld skipped (unsupported)\n", lathe_op_name((lathe_op)op), t->rows_ran[op], t->config,
           t->rows_skipped[op]);
    if (!t->rows_ran[op] && !t->rows_skipped[op]) {
      printf("FAIL: no conformance row%s uses %s\n", filtered ? " of the tests selected" : "", lathe_op_name((lathe_op)op));
      rc = 1;
    }
  }
  if (R.config)
    printf("-b %s: %ld outputs compared with lathe:cpu, %ld mismatches; %ld rows unsupported (skipped)\n", t->config,
           t->compared, t->mismatched, t->unsupported);
  printf("%d passed, %d failed, %d skipped\n", t->passed, t->failed, t->skipped);
  return t->failed ? 1 : rc;
}

static bool selected(int i, const char *filter) {
  return !filter || (filter[0] == '=' ? !strcmp(tests[i].name, filter + 1) : strstr(tests[i].name, filter) != NULL);
}

/* Runs the selected tests: all of them in order, or (next) each one whose index this process
 * takes from the counter its siblings share. */
static int run_tests(const char *filter, _Atomic int *next) {
  if (R.config) {
    tst_backend(); /* a bad CONFIG ends the run here */
    lathe_status_t st = lathe_backend_new("lathe:cpu", &R.ref);
    if (st) {
      fprintf(stdout, "cannot create the reference lathe:cpu: %s\n", lathe_status_message(st));
      return 1;
    }
  }
  for (int k = 0; k < n_tests; k++) {
    int i = next ? atomic_fetch_add(next, 1) : k;
    if (i >= n_tests) break;
    if (!selected(i, filter)) continue;
    tst_current = tests[i].name;
    pthread_mutex_lock(&mu);
    R.declared = false;
    R.state = ROW_PENDING;
    pthread_mutex_unlock(&mu);
    int f0 = tst_failed;
    tests[i].fn();
    while (n_pend_cmp) compare_pending(n_pend_cmp - 1, 0, false);
    pthread_mutex_lock(&mu);
    settle(false);
    pthread_mutex_unlock(&mu);
    if (getenv("LATHE_TEST_VERBOSE")) printf("%s %s\n", tst_failed == f0 ? "ok  " : "FAIL", tests[i].name);
  }
  return 0;
}

/* -j N: N processes forked before any backend exists (a backend's threads would not survive a
 * fork), each taking the next test from a counter in shared memory, so a long test does not hold
 * the others back; each sends its counts through a pipe, and the parent prints one summary. A
 * process that dies is a failure named by its signal or status. */
static int run_forked(const char *filter, int jobs) {
  _Atomic int *next = mmap(NULL, sizeof *next, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (next == MAP_FAILED) {
    printf("FAIL: -j: no shared memory for the test counter\n");
    return 1;
  }
  atomic_init(next, 0);
  fflush(stdout);
  pid_t pid[64];
  int fd[64], rc = 0;
  for (int j = 0; j < jobs; j++) {
    int p[2];
    if (pipe(p)) {
      printf("FAIL: -j: no pipe for process %d\n", j);
      jobs = j, rc = 1;
      break;
    }
    pid[j] = fork();
    if (pid[j] == 0) {
      close(p[0]);
      setvbuf(stdout, NULL, _IOLBF, 0); /* whole lines from each process */
      int crc = run_tests(filter, next);
      tally t;
      tally_mine(&t);
      ssize_t w = write(p[1], &t, sizeof t);
      free(R.pend_log);
      free(pend_cmp);
      exit(crc || w != (ssize_t)sizeof t ? 1 : 0); /* exit, not _exit: LeakSanitizer checks at exit */
    }
    close(p[1]);
    fd[j] = p[0];
    if (pid[j] < 0) {
      printf("FAIL: -j: could not fork process %d\n", j);
      close(fd[j]);
      jobs = j, rc = 1;
      break;
    }
  }
  tally sum;
  memset(&sum, 0, sizeof sum);
  for (int j = 0; j < jobs; j++) {
    tally t;
    size_t got = 0;
    for (ssize_t r; got < sizeof t && (r = read(fd[j], (char *)&t + got, sizeof t - got)) != 0;)
      if (r > 0) got += (size_t)r;
      else if (errno != EINTR) break;
    close(fd[j]);
    int status = 0;
    while (waitpid(pid[j], &status, 0) < 0 && errno == EINTR) {
    }
    if (got == sizeof t) tally_add(&sum, &t);
    if (WIFSIGNALED(status)) printf("FAIL: test process %d ended by signal %d\n", j, WTERMSIG(status));
    else if (got != sizeof t) printf("FAIL: test process %d ended (status %d) without its counts\n", j, WEXITSTATUS(status));
    else if (WEXITSTATUS(status)) printf("FAIL: test process %d exited with status %d\n", j, WEXITSTATUS(status));
    if (!WIFEXITED(status) || WEXITSTATUS(status) || got != sizeof t) rc = 1;
  }
  munmap((void *)next, sizeof *next);
  if (!sum.config[0] && R.config) snprintf(sum.config, sizeof sum.config, "%s", R.config); /* no process reported */
  return report(&sum, filter != NULL, rc);
}

int tst_main(int argc, char **argv) {
  const char *filter = NULL, *prog = argc > 0 ? argv[0] : "test";
  int jobs = 1;
  R.config = getenv("LATHE_TEST_BACKEND");
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if ((!strcmp(a, "-o") || !strcmp(a, "-b") || !strcmp(a, "-j")) && i + 1 >= argc) return usage(prog, "missing argument");
    if (!strcmp(a, "-o")) {
      int rc = select_ops(prog, argv[++i]);
      if (rc) return rc;
    } else if (!strcmp(a, "-b")) {
      R.config = argv[++i];
    } else if (!strcmp(a, "-j")) {
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (*end || v < 1 || v > 64) return usage(prog, "-j takes 1 to 64 processes");
      jobs = (int)v;
    } else if (!strcmp(a, "-e")) {
      R.exact = true;
    } else if (!strcmp(a, "-l")) {
      for (int k = 0; k < n_tests; k++) printf("%s\n", tests[k].name);
      return 0;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      return usage(prog, "help");
    } else if (a[0] == '-' || filter) {
      return usage(prog, "bad argument");
    } else {
      filter = a;
    }
  }
  if (jobs > 1) return run_forked(filter, jobs);
  int rc = run_tests(filter, NULL);
  if (rc) return rc;
  tally t;
  tally_mine(&t);
  rc = report(&t, filter != NULL, 0);
  free(R.pend_log);
  free(pend_cmp);
  return rc;
}

/* Under AddressSanitizer an allocation beyond its maximum aborts by default; the tests ask for
 * tensors of valid but unobtainable sizes on purpose, and expect RESOURCE_EXHAUSTED. */
const char *__asan_default_options(void);
__attribute__((used)) const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* ---- ROWS region graphs (tst_rows_graph) ---- */
lathe_value_t tst_reduce_keep(lathe_function_t fn, lathe_op op, lathe_value_t v, int axis, const lathe_shape *kept) {
  lathe_value_t r = NULL, out = NULL;
  CHECK_OK(lathe_reduce(fn, op, v, &axis, 1, &r));
  CHECK_OK(lathe_reshape(fn, r, kept->dims, kept->rank, &out));
  return out;
}

lathe_value_t tst_broadcast_same_rank(lathe_function_t fn, lathe_value_t v, const lathe_shape *to) {
  int axes[LATHE_MAX_RANK];
  for (int a = 0; a < to->rank; a++) axes[a] = a;
  lathe_value_t out = NULL;
  CHECK_OK(lathe_broadcast_in_dim(fn, v, to, axes, to->rank, &out));
  return out;
}

lathe_builder_t tst_rows_graph(lathe_backend_t be, lathe_dtype dt, int which, int64_t n) {
  lathe_builder_t b = NULL;
  CHECK_OK(lathe_builder_new(be, "rows", &b));
  if (!b) return NULL;
  lathe_function_t fn = lathe_builder_main(b);
  lathe_value_t y = NULL, t = NULL, e = NULL, c = NULL;
  if (which == 0) { /* layer norm: y = (x - mean) * rsqrt(var + eps) * gamma */
    lathe_shape xs = TST_SHAPE(dt, 6, n), ks = TST_SHAPE(dt, 6, 1), gs = TST_SHAPE(dt, n);
    lathe_value_t x = tst_param(fn, "x", xs), gamma = tst_param(fn, "g", gs), k, mean, var, gb, outs[2];
    double inv = 1.0 / (double)n, eps = 1e-5;
    CHECK_OK(lathe_constant(fn, &(lathe_shape){.dtype = LATHE_DTYPE_FLOAT64}, &inv, sizeof inv, &k));
    CHECK_OK(lathe_convert_dtype(fn, k, dt, &k));
    CHECK_OK(lathe_mul(fn, tst_reduce_keep(fn, LATHE_OP_REDUCE_SUM, x, 1, &ks), k, &mean));
    CHECK_OK(lathe_sub(fn, x, tst_broadcast_same_rank(fn, mean, &xs), &c));
    CHECK_OK(lathe_mul(fn, c, c, &t));
    CHECK_OK(lathe_mul(fn, tst_reduce_keep(fn, LATHE_OP_REDUCE_SUM, t, 1, &ks), k, &var));
    CHECK_OK(lathe_constant(fn, &(lathe_shape){.dtype = LATHE_DTYPE_FLOAT64}, &eps, sizeof eps, &e));
    CHECK_OK(lathe_convert_dtype(fn, e, dt, &e));
    CHECK_OK(lathe_add(fn, var, e, &var));
    CHECK_OK(lathe_rsqrt(fn, var, &var));
    int ax = 1;
    CHECK_OK(lathe_broadcast_in_dim(fn, gamma, &xs, &ax, 1, &gb));
    CHECK_OK(lathe_mul(fn, c, tst_broadcast_same_rank(fn, var, &xs), &y));
    CHECK_OK(lathe_mul(fn, y, gb, &y));
    outs[0] = y, outs[1] = var;
    CHECK_OK(lathe_function_return(fn, outs, 2));
  } else if (which == 2) { /* a lone reduction over 1200 rows: rsqrt(mean((x * g)^2) + eps) */
    lathe_shape xs = TST_SHAPE(dt, 1200, n), ks = TST_SHAPE(dt, 1200, 1), gs = TST_SHAPE(dt, n);
    lathe_value_t x = tst_param(fn, "x", xs), gamma = tst_param(fn, "g", gs), gb, k;
    double inv = 1.0 / (double)n;
    int ax = 1;
    CHECK_OK(lathe_broadcast_in_dim(fn, gamma, &xs, &ax, 1, &gb));
    CHECK_OK(lathe_mul(fn, x, gb, &t));
    CHECK_OK(lathe_mul(fn, t, t, &t));
    CHECK_OK(lathe_constant(fn, &(lathe_shape){.dtype = LATHE_DTYPE_FLOAT64}, &inv, sizeof inv, &k));
    CHECK_OK(lathe_convert_dtype(fn, k, dt, &k));
    CHECK_OK(lathe_mul(fn, tst_reduce_keep(fn, LATHE_OP_REDUCE_SUM, t, 1, &ks), k, &y));
    CHECK_OK(lathe_rsqrt(fn, y, &y));
    CHECK_OK(lathe_function_return(fn, &y, 1));
  } else if (which == 3) { /* a language model's loss: softmax cross-entropy per row of x [1200, n] against
                             * labels l [1200, 1] (one-hot by Equal with an Iota) and its gradient */
    lathe_shape xs = TST_SHAPE(dt, 1200, n), ks = TST_SHAPE(dt, 1200, 1), ls = TST_SHAPE(LATHE_DTYPE_INT32, 1200, 1),
                is = TST_SHAPE(LATHE_DTYPE_INT32, 1, n);
    lathe_value_t x = tst_param(fn, "x", xs), l = tst_param(fn, "l", ls), io, oh, lg, lsm, outs[2];
    CHECK_OK(lathe_iota(fn, &is, 1, &io));
    CHECK_OK(lathe_equal(fn, l, io, &oh));
    CHECK_OK(lathe_convert_dtype(fn, oh, dt, &oh));
    CHECK_OK(lathe_sub(fn, x, tst_broadcast_same_rank(fn, tst_reduce_keep(fn, LATHE_OP_REDUCE_MAX, x, 1, &ks), &xs), &c));
    CHECK_OK(lathe_exp(fn, c, &e));
    lathe_value_t s = tst_reduce_keep(fn, LATHE_OP_REDUCE_SUM, e, 1, &ks);
    CHECK_OK(lathe_log(fn, s, &lg));
    CHECK_OK(lathe_sub(fn, c, tst_broadcast_same_rank(fn, lg, &xs), &lsm));
    CHECK_OK(lathe_mul(fn, oh, lsm, &t));
    CHECK_OK(lathe_neg(fn, t, &t));
    outs[0] = tst_reduce_keep(fn, LATHE_OP_REDUCE_SUM, t, 1, &ks);
    /* d loss / d x = exp(c) * sum(one-hot) / s - one-hot */
    CHECK_OK(lathe_div(fn, tst_reduce_keep(fn, LATHE_OP_REDUCE_SUM, oh, 1, &ks), s, &t));
    CHECK_OK(lathe_mul(fn, e, tst_broadcast_same_rank(fn, t, &xs), &y));
    CHECK_OK(lathe_sub(fn, y, oh, &outs[1]));
    CHECK_OK(lathe_function_return(fn, outs, 2));
  } else if (which == 4) { /* GoMLX's MaskedSoftmax of scaled scores s [2, 4, n, n] under a causal mask
                             * from two Iotas, [1, 1, n, n], that Where and the binary ops broadcast */
    lathe_shape ss = TST_SHAPE(dt, 2, 4, n, n), is = TST_SHAPE(LATHE_DTYPE_INT64, n, n), ks = TST_SHAPE(dt, 2, 4, n, 1);
    int64_t md[4] = {1, 1, n, n};
    lathe_value_t x = tst_param(fn, "s", ss), rows_i, cols_i, mask, low, zero, sc;
    double lowest = -3.0e38, nil = 0, scale = 0.125;
    CHECK_OK(lathe_iota(fn, &is, 0, &rows_i));
    CHECK_OK(lathe_iota(fn, &is, 1, &cols_i));
    CHECK_OK(lathe_less_or_equal(fn, cols_i, rows_i, &mask));
    CHECK_OK(lathe_reshape(fn, mask, md, 4, &mask));
    lathe_shape f64 = {.dtype = LATHE_DTYPE_FLOAT64};
    CHECK_OK(lathe_constant(fn, &f64, &lowest, sizeof lowest, &low));
    CHECK_OK(lathe_convert_dtype(fn, low, dt, &low));
    CHECK_OK(lathe_constant(fn, &f64, &nil, sizeof nil, &zero));
    CHECK_OK(lathe_convert_dtype(fn, zero, dt, &zero));
    CHECK_OK(lathe_constant(fn, &f64, &scale, sizeof scale, &sc));
    CHECK_OK(lathe_convert_dtype(fn, sc, dt, &sc));
    CHECK_OK(lathe_mul(fn, x, sc, &t));
    CHECK_OK(lathe_where(fn, mask, t, low, &e));
    CHECK_OK(lathe_sub(fn, t, tst_reduce_keep(fn, LATHE_OP_REDUCE_MAX, e, 3, &ks), &c));
    CHECK_OK(lathe_where(fn, mask, c, zero, &c));
    CHECK_OK(lathe_exp(fn, c, &c));
    CHECK_OK(lathe_where(fn, mask, c, zero, &c));
    CHECK_OK(lathe_div(fn, c, tst_reduce_keep(fn, LATHE_OP_REDUCE_SUM, c, 3, &ks), &y));
    CHECK_OK(lathe_where(fn, mask, y, zero, &y));
    CHECK_OK(lathe_function_return(fn, &y, 1));
  } else { /* masked softmax over [2, 3, n], the mask [2, 1, n] */
    lathe_shape ss = TST_SHAPE(dt, 2, 3, n), ms = TST_SHAPE(dt, 2, 1, n), rs = TST_SHAPE(dt, 2, 3, 1);
    lathe_value_t x = tst_param(fn, "s", ss), mask = tst_param(fn, "m", ms), mb;
    int axes[3] = {0, 1, 2};
    CHECK_OK(lathe_broadcast_in_dim(fn, mask, &ss, axes, 3, &mb));
    CHECK_OK(lathe_add(fn, x, mb, &t));
    CHECK_OK(lathe_sub(fn, t, tst_broadcast_same_rank(fn, tst_reduce_keep(fn, LATHE_OP_REDUCE_MAX, t, 2, &rs), &ss), &e));
    CHECK_OK(lathe_exp(fn, e, &e));
    CHECK_OK(lathe_div(fn, e, tst_broadcast_same_rank(fn, tst_reduce_keep(fn, LATHE_OP_REDUCE_SUM, e, 2, &rs), &ss), &y));
    CHECK_OK(lathe_function_return(fn, &y, 1));
  }
  return b;
}

int tst_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0};
  socklen_t l = sizeof a;
  int port = -1;
  if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof a) && !getsockname(fd, (struct sockaddr *)&a, &l)) port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

/* tests/ops/fusion.c's column reductions with elementwise work before them (tst_colred_graph). */
lathe_builder_t tst_colred_graph(lathe_backend_t be, lathe_dtype dt, int64_t c) {
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "colred", &b));
  if (!b) return NULL;
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape sx = TST_SHAPE(dt, 4, 96, c), sy = TST_SHAPE(LATHE_DTYPE_FLOAT32, 4, 96, c), sg = TST_SHAPE(dt, c),
              sw = TST_SHAPE(dt, 4, 96, 1), s0 = tst_shape0(dt);
  lathe_value_t x, y, g, w, t, u, gb, o[4];
  const int red[] = {0, 1};
  CHECK_OK(lathe_parameter(fn, "x", &sx, &x));
  CHECK_OK(lathe_parameter(fn, "y", &sy, &y));
  CHECK_OK(lathe_parameter(fn, "g", &sg, &g));
  CHECK_OK(lathe_parameter(fn, "w", &sw, &w));
  CHECK_OK(lathe_convert_dtype(fn, x, LATHE_DTYPE_FLOAT32, &t));
  CHECK_OK(lathe_mul(fn, t, y, &t));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, t, red, 2, &o[0]));
  CHECK_OK(lathe_broadcast_in_dim(fn, g, &sx, (int[]){2}, 1, &gb));
  CHECK_OK(lathe_mul(fn, x, gb, &t));
  CHECK_OK(lathe_add(fn, x, t, &o[2]));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, o[2], red, 2, &o[1]));
  double half = 0.5;
  char hb[8];
  tst_set(hb, dt, 0, half);
  CHECK_OK(lathe_constant(fn, &s0, hb, (size_t)lathe_dtype_bits(dt) / 8, &u));
  CHECK_OK(lathe_mul(fn, x, w, &t));
  CHECK_OK(lathe_sub(fn, t, u, &t));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_MAX, t, red, 2, &o[3]));
  if (be == tst_backend()) tst_row_graph(b);
  CHECK_OK(lathe_function_return(fn, o, 4));
  return b;
}
