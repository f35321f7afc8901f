/* test_cuda.c -- lathe:cuda where there may be no GPU: the error that names what is missing,
 * plain "lathe" falling back to the CPU, and every kernel source of every CUDA family compiled
 * by NVRTC for Hopper (sm_90) and Ampere (sm_80) -- NVRTC needs no GPU, so a code generation
 * error is caught here (LATHE_NVRTC_LIBRARY names libnvrtc.so when it is not on the library
 * path; scripts/test.sh installs it from the nvidia-cuda-nvrtc wheel; LATHE_TEST_CUBIN_DIR=DIR keeps
 * every cubin there, to read registers, stack and SASS offline with cuobjdump). With LATHE_TEST_NVRTC=0 the
 * kernel texts are still made, but not compiled: NVRTC inside a sanitizer's process takes many
 * minutes and the gcc run compiles them already. */
#include <ctype.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>
#include <math.h>

#include "cuda/cuda.h"
#include "graph/program.h"
#include "cuda_testing.h"
#include "testing.h"

TEST(cuda_unavailable_or_usable) {
  lathe_backend_t b = NULL;
  lathe_status_t st = lathe_backend_new("lathe:cuda", &b);
  if (st) {
    CHECK(lathe_status_code_of(st) == LATHE_STATUS_UNAVAILABLE && strstr(lathe_status_message(st), "lathe:cuda"),
          "no usable GPU: UNAVAILABLE naming lathe:cuda, got %s: %s", lathe_status_code_name(lathe_status_code_of(st)),
          lathe_status_message(st));
    printf("note: lathe:cuda here: %s\n", lathe_status_message(st));
    lathe_status_free(st);
    /* plain lathe takes the next device */
    CHECK_OK(lathe_backend_new("lathe", &b));
    if (b) CHECK(strncmp(lathe_backend_config(b), "lathe:cpu", 9) == 0, "plain lathe falls back to %s", lathe_backend_config(b));
  } else {
    CHECK(lathe_backend_num_devices(b) >= 1, "a usable GPU");
    printf("note: %s\n", lathe_backend_description(b));
  }
  lathe_backend_free(b);
  CHECK_ERR(lathe_backend_new("lathe:cuda,bogus=1", &b), INVALID_ARGUMENT, "known options: device=N, tf32=0|1, fuse=0|1, cudnn=0|1");
}

typedef struct {
  int compiled, cc;
} compile_ctx;

/* NVRTC for these tests: lathe_cuda_load_nvrtc, unless LATHE_TEST_NVRTC=0 leaves it out. */
static lathe_status_t test_nvrtc(const lcu_api **api) {
  const char *e = getenv("LATHE_TEST_NVRTC");
  if (e && !strcmp(e, "0")) return lathe_status_new(LATHE_STATUS_UNAVAILABLE, "NVRTC left out (LATHE_TEST_NVRTC=0)");
  return lathe_cuda_load_nvrtc(api);
}

/* Without NVRTC: the texts are made (their generators run) and must not be empty. */
static void make_one(void *vctx, const char *label, const char *source) {
  compile_ctx *c = vctx;
  CHECK(source && *source, "%s: an empty kernel text", label);
  c->compiled++;
}

/* Every kernel text, copied out of lathe_cuda_each_source, then compiled for each architecture by
 * as many threads as there are cores (NVRTC compiles programs concurrently; it is most of this
 * test's time). */
typedef struct {
  char **label, **text;
  int n, cap;
  int ccs[2];
  _Atomic int next;
  lathe_status_t *st; /* per (text, architecture) */
  const char *keep;   /* LATHE_TEST_CUBIN_DIR: where each cubin is written, for reading offline */
} compile_jobs;

static void collect_one(void *vctx, const char *label, const char *source) {
  compile_jobs *j = vctx;
  if (j->n == j->cap) {
    j->cap = j->cap ? 2 * j->cap : 256;
    j->label = realloc(j->label, sizeof(char *) * (size_t)j->cap);
    j->text = realloc(j->text, sizeof(char *) * (size_t)j->cap);
  }
  j->label[j->n] = strdup(label), j->text[j->n] = strdup(source);
  j->n++;
}

static void *compile_worker(void *arg) {
  compile_jobs *j = arg;
  for (int k; (k = atomic_fetch_add(&j->next, 1)) < 2 * j->n;) {
    void *cubin = NULL;
    size_t size = 0;
    j->st[k] = lathe_cuda_compile_source(j->text[k / 2], j->ccs[k % 2], &cubin, &size);
    if (!j->st[k] && !size) j->st[k] = lathe_status_new(LATHE_STATUS_INTERNAL, "an empty cubin");
    if (!j->st[k] && j->keep) { /* NNN-sm_XY-<label>.cubin, the label's spaces and symbols as '_' */
      char path[1024];
      int at = snprintf(path, sizeof path, "%s/%03d-sm_%d-", j->keep, k / 2, j->ccs[k % 2]);
      for (const char *c = j->label[k / 2]; *c && at < (int)sizeof path - 8; c++)
        path[at++] = isalnum((unsigned char)*c) ? *c : '_';
      snprintf(path + at, sizeof path - (size_t)at, ".cubin");
      FILE *f = fopen(path, "wb");
      if (!f || fwrite(cubin, 1, size, f) != size) j->st[k] = lathe_status_new(LATHE_STATUS_INTERNAL, "cannot write %s", path);
      if (f) fclose(f);
    }
    free(cubin);
  }
  return NULL;
}

TEST(cuda_kernels_compile_with_nvrtc) {
  const lcu_api *api;
  lathe_status_t st = test_nvrtc(&api);
  if (st) {
    char why[512];
    snprintf(why, sizeof why, "%s", lathe_status_message(st));
    lathe_status_free(st);
    compile_ctx c = {0, 90};
    lathe_cuda_each_source(make_one, &c);
    SKIP("no NVRTC (%d kernel texts made, not compiled): %s", c.compiled, why);
  }
  compile_jobs j = {.ccs = {90, 80}, .keep = getenv("LATHE_TEST_CUBIN_DIR")};
  lathe_cuda_each_source(collect_one, &j);
  j.st = calloc((size_t)(2 * j.n + 1), sizeof *j.st);
  enum { MAX_THREADS = 8 };
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int nt = cores < 1 ? 1 : cores > MAX_THREADS ? MAX_THREADS : (int)cores;
  pthread_t t[MAX_THREADS];
  for (int i = 0; i < nt; i++) CHECK(pthread_create(&t[i], NULL, compile_worker, &j) == 0, "thread %d", i);
  for (int i = 0; i < nt; i++) pthread_join(t[i], NULL);
  int ok[2] = {0, 0};
  for (int k = 0; k < 2 * j.n; k++) {
    CHECK(!j.st[k], "NVRTC sm_%d: %s: %s", j.ccs[k % 2], j.label[k / 2], lathe_status_message(j.st[k]));
    ok[k % 2] += !j.st[k];
    lathe_status_free(j.st[k]);
  }
  for (int i = 0; i < 2; i++) printf("note: NVRTC compiled %d kernel sources for sm_%d (%d threads)\n", ok[i], j.ccs[i], nt);
  CHECK(j.n > 0, "some sources");
  for (int k = 0; k < j.n; k++) free(j.label[k]), free(j.text[k]);
  free(j.label), free(j.text), free(j.st);
  /* a broken source gives NVRTC's log in the error */
  void *cubin = NULL;
  size_t size = 0;
  CHECK_ERR(lathe_cuda_compile_source("extern \"C\" __global__ void k() { undefined_thing(); }", 90, &cubin, &size),
            INTERNAL, "undefined_thing");
  free(cubin);
}

/* Builds rows graph `which` (tst_rows_graph) of dtype dt and rows of n under opt, makes each ROWS
 * region's kernel and compiles it with NVRTC (when nvrtc) for sm; counts the ROWS regions, the
 * reductions in them, the kernels that walk rows in chunks, and the kernels made and compiled. */
typedef struct {
  int regions, reds, chunked, made, compiled;
  int shifted, iota; /* with rows_shift=1 and rows_iota=1: kernels in shifted groups, with a computed Iota */
  int full; /* steps writing a value the size of the graph's first parameter */
} rows_made;

static rows_made rows_kernels(const lathe_program_options *opt, lathe_dtype dt, int which, int64_t n, bool nvrtc, int sm) {
  rows_made m = {0};
  lathe_cuda cu;
  memset(&cu, 0, sizeof cu);
  lathe_builder_t b = tst_rows_graph(tst_backend(), dt, which, n);
  lathe_program *p = NULL;
  CHECK_OK(lathe_program_build(b, opt, &p));
  const lathe_pfunc *pf = p ? lathe_program_main(p) : NULL;
  for (int k = 0; pf && pf->n_params && k < pf->n_steps; k++)
    for (int o = 0; o < pf->steps[k].n_out; o++)
      m.full += lathe_shape_size(&pf->slots[pf->steps[k].out[o]].shape) == lathe_shape_size(&pf->slots[pf->params[0]].shape);
  for (int r = 0; pf && r < pf->n_regions; r++) {
    if (pf->regions[r].kind != LATHE_PREGION_ROWS) continue;
    m.regions++;
    for (int k = 0; k < pf->regions[r].n_members; k++)
      m.reds += lathe_op_kind_of(pf->regions[r].members[k].node->op) == LATHE_KIND_REDUCE;
    /* as they are by default, then with rows_shift=1 and rows_iota=1 */
    for (int v = 0; v < 2; v++) {
      cu.rows_shift = cu.rows_iota = v == 1;
      lathe_cuda_ewk *k = NULL;
      CHECK_OK(lathe_cuda_ewk_region(&cu, pf, &pf->regions[r], &k));
      const char *src = k ? lathe_cuda_ewk_source(k) : NULL;
      m.made += v == 0 && k != NULL;
      m.chunked += v == 0 && src && strstr(src, "for (int ch_ = 0; ch_ < ") != NULL;
      m.shifted += v == 1 && src && strstr(src, " - sh_") != NULL;
      m.iota += v == 1 && src && strstr(src, ") * c1);") != NULL;
      if (src && nvrtc) {
        void *cubin = NULL;
        size_t size = 0;
        lathe_status_t cs = lathe_cuda_compile_source(src, sm, &cubin, &size);
        CHECK(cs == NULL, "NVRTC: rows kernel %s graph %d n %lld (variant %d): %s", lathe_dtype_name(dt), which, (long long)n, v,
              lathe_status_message(cs));
        m.compiled += cs == NULL;
        lathe_status_free(cs);
        free(cubin);
      }
      lathe_cuda_ewk_free(k);
    }
  }
  lathe_program_free(p);
  lathe_builder_free(b);
  return m;
}

static const lathe_dtype rows_dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT64};
/* lathe:cuda's program options for ROWS regions (device.c's, with rows_long) */
static const lathe_program_options rows_opt = {.fuse = true, .plan_memory = true, .alignment = 256,
                                               .rows_max = LATHE_CUDA_ROWS_MAX, .rows_lone = 1056,
                                               .rows_long = LATHE_CUDA_ROWS_LONG_MAX};

/* Whether NVRTC loads here (test_nvrtc). */
static bool have_nvrtc(void) {
  const lcu_api *api;
  lathe_status_t st = test_nvrtc(&api);
  lathe_status_free(st);
  return st == NULL;
}

/* ROWS regions (rows.c) made from real programs and compiled by NVRTC: a layer norm with a
 * gamma broadcast along the rows, a masked softmax whose mask is broadcast over heads (row
 * offsets by axis), in every float dtype and in rows from 64 to 5000 elements (groups of 32
 * to 1024 threads). Their values are checked on a GPU by the conformance run (tests/ops). */
TEST(cuda_rows_kernels_compile) {
  bool nvrtc = have_nvrtc();
  int64_t ns[] = {64, 1000, 5000};
  lathe_program_options opt = rows_opt;
  opt.rows_long = 0;
  int made = 0, compiled = 0;
  for (int d = 0; d < 4; d++)
    for (int which = 0; which < 3; which++)
      for (int ni = 0; ni < 3; ni++) {
        rows_made m = rows_kernels(&opt, rows_dts[d], which, ns[ni], nvrtc, d % 2 ? 80 : 90);
        CHECK(m.regions == 1, "%s graph %d n %lld: one ROWS region, got %d", lathe_dtype_name(rows_dts[d]), which,
              (long long)ns[ni], m.regions);
        CHECK(m.chunked == 0, "%s graph %d n %lld: rows in registers", lathe_dtype_name(rows_dts[d]), which, (long long)ns[ni]);
        made += m.made, compiled += m.compiled;
      }
  printf("note: %d ROWS kernels made, %d compiled by NVRTC%s\n", made, compiled, nvrtc ? "" : " (no NVRTC here)");
}

/* The attention GoMLX builds when the fused op is not taken: its MaskedSoftmax of scaled scores
 * (graph 4: the scale, four Wheres under a causal mask from two Iotas, max, exponentials, sum,
 * division) is one ROWS region -- one kernel -- for rows of 64 to 1024 keys, in every float
 * dtype, compiled by NVRTC. Values: tests/ops fusion_masked_softmax. */
TEST(cuda_masked_softmax_one_kernel) {
  bool nvrtc = have_nvrtc();
  const int64_t ns[] = {64, 1024};
  int compiled = 0;
  for (int d = 0; d < 4; d++)
    for (int i = 0; i < 2; i++) {
      rows_made m = rows_kernels(&rows_opt, rows_dts[d], 4, ns[i], nvrtc, 90);
      CHECK(m.regions == 1 && m.reds == 2, "%s n %lld: one ROWS region with both reductions, got %d regions, %d reductions",
            lathe_dtype_name(rows_dts[d]), (long long)ns[i], m.regions, m.reds);
      /* and nothing else writes a scores-sized value: the region is the only such step */
      CHECK(m.full == 1, "%s n %lld: one step writes a scores-sized value, got %d", lathe_dtype_name(rows_dts[d]),
            (long long)ns[i], m.full);
      compiled += m.compiled;
    }
  printf("note: %d masked-softmax kernels compiled by NVRTC%s\n", compiled, nvrtc ? "" : " (no NVRTC here)");
}

/* Rows longer than the registers hold (rows_long): a language model's loss and gradient (graph 3:
 * four reductions at three levels) and a lone reduction (graph 2), over 1200 rows, each one ROWS
 * region whose kernel walks the row in chunks; compiled by NVRTC in every float dtype. Without
 * rows_long no ROWS region forms over such rows. Their values: tests/ops fusion_long_rows. */
TEST(cuda_long_rows_kernels_compile) {
  bool nvrtc = have_nvrtc();
  lathe_program_options opt = rows_opt, short_rows = rows_opt;
  short_rows.rows_long = 0;
  int compiled = 0;
  for (int d = 0; d < 4; d++)
    for (int which = 2; which <= 3; which++) {
      const char *dn = lathe_dtype_name(rows_dts[d]);
      int64_t n = which == 3 ? 50257 : 9000;
      rows_made m = rows_kernels(&opt, rows_dts[d], which, n, nvrtc, 90);
      CHECK(m.regions == 1 && m.chunked == 1, "%s graph %d: one ROWS region walking rows in chunks, got %d (%d)", dn, which,
            m.regions, m.chunked);
      CHECK(m.reds == (which == 3 ? 4 : 1), "%s graph %d: %d reductions in it", dn, which, m.reds);
      CHECK(m.shifted == (n % 4 ? 1 : 0), "%s graph %d n %lld: %d kernels in shifted groups", dn, which, (long long)n, m.shifted);
      CHECK(m.iota == (which == 3), "%s graph %d: %d kernels computing the one-hot's Iota", dn, which, m.iota);
      compiled += m.compiled;
      m = rows_kernels(&short_rows, rows_dts[d], which, n, false, 90);
      CHECK(m.regions == 0, "%s graph %d: %d ROWS regions without rows_long", dn, which, m.regions);
    }
  printf("note: %d long-row kernels compiled by NVRTC%s\n", compiled, nvrtc ? "" : " (no NVRTC here)");
}

/* REDUCE regions of column reductions (reduce_fused.c) made from tst_colred_graph: in every float
 * dtype, with columns a multiple of 4 each of the three reductions with work before it is one
 * fused kernel (compiled by NVRTC when present), with 66 columns none is, nor with reduce_fuse
 * off. Their values are checked on a GPU by the conformance rows (fusion_column_reductions). */
TEST(cuda_fused_column_reductions_compile) {
  bool nvrtc = have_nvrtc();
  int compiled = 0;
  for (int d = 0; d < 4; d++)
    for (int ci = 0; ci < 3; ci++) {
      int64_t c = ci == 0 ? 768 : ci == 1 ? 100 : 66;
      lathe_builder_t b = tst_colred_graph(tst_backend(), rows_dts[d], c);
      lathe_program *p = NULL;
      CHECK_OK(lathe_program_build(b, &rows_opt, &p));
      const lathe_pfunc *pf = p ? lathe_program_main(p) : NULL;
      int reduces = 0, fused = 0;
      for (int off = 0; off < 2; off++) {
        lathe_cuda cu;
        memset(&cu, 0, sizeof cu);
        cu.reduce_fuse = !off;
        for (int r = 0; pf && r < pf->n_regions; r++) {
          if (pf->regions[r].kind != LATHE_PREGION_REDUCE || pf->regions[r].prologue < 0) continue;
          reduces += !off;
          lathe_cuda_ewk *k = NULL;
          CHECK_OK(lathe_cuda_ewk_region(&cu, pf, &pf->regions[r], &k));
          fused += k != NULL;
          if (k && nvrtc) {
            void *cubin = NULL;
            size_t size = 0;
            lathe_status_t cs = lathe_cuda_compile_source(lathe_cuda_ewk_source(k), 90, &cubin, &size);
            CHECK(cs == NULL, "NVRTC: fused column reduction %s c %lld: %s", lathe_dtype_name(rows_dts[d]), (long long)c,
                  lathe_status_message(cs));
            compiled += cs == NULL;
            lathe_status_free(cs);
            free(cubin);
          }
          lathe_cuda_ewk_free(k);
        }
      }
      CHECK(reduces == 3, "%s c %lld: %d REDUCE regions with a prologue, want 3", lathe_dtype_name(rows_dts[d]), (long long)c, reduces);
      CHECK(fused == (c % 4 ? 0 : reduces), "%s c %lld: %d fused kernels of %d", lathe_dtype_name(rows_dts[d]), (long long)c, fused,
            reduces);
      lathe_program_free(p);
      lathe_builder_free(b);
    }
  printf("note: %d fused column-reduction kernels compiled by NVRTC%s\n", compiled, nvrtc ? "" : " (no NVRTC here)");
}

/* Where's operands broadcasting together (compute v0.1.11+), in generated kernels: one Where step
 * whose three operands each have 1s on other axes, in dtypes of every width and class; a LOOP
 * region where Where reads a broadcast mask and a scalar; and a masked softmax (a ROWS region)
 * whose Bool[1,h,1,k] mask is broadcast over batch and query rows. Compiled by NVRTC when present;
 * their values are checked on a GPU by the conformance rows (tests/ops/elementwise.c). */
static void where_compile(const char *label, lathe_cuda_ewk *k, bool nvrtc, int *compiled) {
  if (!k || !nvrtc) return;
  void *cubin = NULL;
  size_t size = 0;
  lathe_status_t cs = lathe_cuda_compile_source(lathe_cuda_ewk_source(k), 90, &cubin, &size);
  CHECK(cs == NULL, "NVRTC: %s: %s", label, lathe_status_message(cs));
  *compiled += cs == NULL;
  lathe_status_free(cs);
  free(cubin);
}

TEST(cuda_where_broadcast_kernels_compile) {
  const lcu_api *api;
  lathe_status_t st = test_nvrtc(&api);
  bool nvrtc = st == NULL;
  lathe_status_free(st);
  lathe_cuda cu;
  memset(&cu, 0, sizeof cu);
  int made = 0, compiled = 0;
  const lathe_dtype dts[] = {LATHE_DTYPE_BOOL, LATHE_DTYPE_INT8, LATHE_DTYPE_UINT16, LATHE_DTYPE_INT64, LATHE_DTYPE_FLOAT16,
                             LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_COMPLEX64,
                             LATHE_DTYPE_COMPLEX128};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    lathe_function_t fn;
    lathe_builder_t b = tst_builder("where step", &fn);
    lathe_value_t c = tst_param(fn, "c", TST_SHAPE(LATHE_DTYPE_BOOL, 2, 1, 4, 1));
    lathe_value_t t = tst_param(fn, "t", TST_SHAPE(dts[d], 1, 3, 1, 5)), f = tst_param(fn, "f", TST_SHAPE(dts[d], 2, 3, 4, 1)), w = NULL;
    CHECK_OK(lathe_where(fn, c, t, f, &w));
    if (w) {
      const lathe_node *n = w;
      const lathe_shape *in[3] = {&n->in[0]->shape, &n->in[1]->shape, &n->in[2]->shape};
      lathe_cuda_ewk *k = NULL;
      CHECK_OK(lathe_cuda_ewk_step(&cu, n, in, &n->shape, &k));
      int rank = 0, access[3] = {-1, -1, -1};
      int64_t dims[LATHE_MAX_RANK];
      bool idx32, vec;
      if (k) lathe_cuda_ewk_describe(k, &rank, dims, &idx32, &vec, access);
      CHECK(k && rank == 4 && access[0] == LATHE_PACCESS_STRIDED && access[1] == LATHE_PACCESS_STRIDED &&
                access[2] == LATHE_PACCESS_STRIDED,
            "Where step %s: rank %d, access %d %d %d", lathe_dtype_name(dts[d]), rank, access[0], access[1], access[2]);
      char label[64];
      snprintf(label, sizeof label, "Where step %s", lathe_dtype_name(dts[d]));
      where_compile(label, k, nvrtc, &compiled);
      made += k != NULL;
      lathe_cuda_ewk_free(k);
    }
    lathe_builder_free(b);
  }
  /* regions: a LOOP (Where of a broadcast mask, x * 2 and a scalar, then + x) and a masked softmax */
  lathe_program_options opt = {.fuse = true, .plan_memory = true, .alignment = 256, .rows_max = LATHE_CUDA_ROWS_MAX, .rows_lone = 1056};
  for (int which = 0; which < 2; which++) {
    lathe_function_t fn;
    lathe_builder_t b = tst_builder("where regions", &fn);
    lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 8, 4, 64), ks = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 8, 4, 1);
    lathe_value_t x = tst_param(fn, "x", xs), m = tst_param(fn, "m", TST_SHAPE(LATHE_DTYPE_BOOL, 1, 8, 1, 64));
    lathe_value_t two, fill, y, w, e, y2 = NULL;
    float tv = 2, fv = -1e9f;
    lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
    CHECK_OK(lathe_constant(fn, &s0, &tv, sizeof tv, &two));
    CHECK_OK(lathe_constant(fn, &s0, &fv, sizeof fv, &fill));
    CHECK_OK(lathe_mul(fn, x, two, &y));
    CHECK_OK(lathe_where(fn, m, y, fill, &w));
    if (which == 0) {
      CHECK_OK(lathe_add(fn, w, x, &y2));
    } else {
      CHECK_OK(lathe_sub(fn, w, tst_reduce_keep(fn, LATHE_OP_REDUCE_MAX, w, 3, &ks), &e));
      CHECK_OK(lathe_exp(fn, e, &e));
      CHECK_OK(lathe_div(fn, e, tst_reduce_keep(fn, LATHE_OP_REDUCE_SUM, e, 3, &ks), &y2));
    }
    CHECK_OK(lathe_function_return(fn, &y2, 1));
    lathe_program *p = NULL;
    CHECK_OK(lathe_program_build(b, &opt, &p));
    const lathe_pfunc *pf = p ? lathe_program_main(p) : NULL;
    int want = which ? LATHE_PREGION_ROWS : LATHE_PREGION_LOOP, regions = 0;
    for (int r = 0; pf && r < pf->n_regions; r++) {
      if ((int)pf->regions[r].kind != want) continue;
      regions++;
      lathe_cuda_ewk *k = NULL;
      CHECK_OK(lathe_cuda_ewk_region(&cu, pf, &pf->regions[r], &k));
      where_compile(which ? "Where in a ROWS region" : "Where in a LOOP region", k, nvrtc, &compiled);
      made += k != NULL;
      lathe_cuda_ewk_free(k);
    }
    CHECK(regions == 1, "graph %d: one %s region with the Where, got %d", which, which ? "ROWS" : "LOOP", regions);
    lathe_program_free(p);
    lathe_builder_free(b);
  }
  printf("note: %d Where kernels made, %d compiled by NVRTC%s\n", made, compiled, nvrtc ? "" : " (no NVRTC here)");
}

/* The symbol names of an ELF file (a cubin), one per line into buf. */
static void elf_symbols(const void *elf, size_t size, char *buf, size_t cap) {
  buf[0] = 0;
  const Elf64_Ehdr *eh = elf;
  if (size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > size) return;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)((const char *)elf + eh->e_shoff);
  size_t n = 0;
  for (int i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Sym *sym = (const Elf64_Sym *)((const char *)elf + sh[i].sh_offset);
    const char *str = (const char *)elf + sh[sh[i].sh_link].sh_offset;
    for (size_t k = 0; k < sh[i].sh_size / sizeof *sym; k++)
      if (sym[k].st_name) n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s\n", str + sym[k].st_name);
  }
}

/* Generated kernels of LOOP regions with broadcasts and ROWS regions, in three float dtypes,
 * made twice to check that a text and its name are the same each time. */
static int batch_kernels(lathe_cuda_ewk **ks, int max) {
  lathe_program_options opt = {.fuse = true, .plan_memory = true, .alignment = 256, .rows_max = LATHE_CUDA_ROWS_MAX, .rows_lone = 1056};
  lathe_cuda cu;
  memset(&cu, 0, sizeof cu);
  lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT16};
  int nk = 0;
  for (int d = 0; d < 3; d++)
    for (int which = 0; which < 5; which++) {
      lathe_builder_t b = NULL;
      if (which < 3) {
        b = tst_rows_graph(tst_backend(), dts[d], which, 1000);
      } else { /* LOOP: y = max(x * x + bias, 0) and tanh(y) - x; which 4 with x transposed */
        lathe_function_t fn;
        b = tst_builder("batch loop", &fn);
        lathe_shape xs = TST_SHAPE(dts[d], 64, 1000), bs = TST_SHAPE(dts[d], 1000);
        lathe_value_t x = tst_param(fn, "x", which == 3 ? xs : TST_SHAPE(dts[d], 1000, 64)), bias = tst_param(fn, "b", bs);
        lathe_value_t bb, sq, y, z, zero, zb, outs[2];
        int ax = 1, perm[] = {1, 0};
        float zf = 0;
        if (which == 4) CHECK_OK(lathe_transpose(fn, x, perm, 2, &x));
        CHECK_OK(lathe_broadcast_in_dim(fn, bias, &xs, &ax, 1, &bb));
        CHECK_OK(lathe_constant(fn, &(lathe_shape){.dtype = LATHE_DTYPE_FLOAT32}, &zf, sizeof zf, &zero));
        CHECK_OK(lathe_convert_dtype(fn, zero, dts[d], &zero));
        CHECK_OK(lathe_mul(fn, x, x, &sq));
        CHECK_OK(lathe_add(fn, sq, bb, &y));
        CHECK_OK(lathe_broadcast_in_dim(fn, zero, &xs, NULL, 0, &zb)); /* GoMLX's Relu: Max against a broadcast zero */
        CHECK_OK(lathe_max(fn, y, zb, &y));
        CHECK_OK(lathe_tanh(fn, y, &z));
        CHECK_OK(lathe_sub(fn, z, x, &z));
        outs[0] = y, outs[1] = z;
        CHECK_OK(lathe_function_return(fn, outs, 2));
      }
      lathe_program *p = NULL;
      CHECK_OK(lathe_program_build(b, &opt, &p));
      const lathe_pfunc *pf = p ? lathe_program_main(p) : NULL;
      for (int r = 0; pf && r < pf->n_regions && nk < max; r++) {
        if (pf->regions[r].kind == LATHE_PREGION_REDUCE) continue;
        lathe_cuda_ewk *k = NULL, *again = NULL;
        CHECK_OK(lathe_cuda_ewk_region(&cu, pf, &pf->regions[r], &k));
        CHECK_OK(lathe_cuda_ewk_region(&cu, pf, &pf->regions[r], &again));
        if (!k || !again) {
          lathe_cuda_ewk_free(k);
          lathe_cuda_ewk_free(again);
          continue;
        }
        const char *nm = lathe_cuda_ewk_name(k);
        CHECK(strlen(nm) == 25 && !strncmp(nm, "lt_fused_", 9) && strspn(nm + 9, "0123456789abcdef") == 16, "name %s", nm);
        CHECK(!strcmp(nm, lathe_cuda_ewk_name(again)) && !strcmp(lathe_cuda_ewk_source(k), lathe_cuda_ewk_source(again)),
              "the same region, the same text and name");
        CHECK(strstr(lathe_cuda_ewk_source(k), nm) && !strstr(lathe_cuda_ewk_source(k), LATHE_CUDA_EWK_ANON), "the name in the text");
        lathe_cuda_ewk_free(again);
        ks[nk++] = k;
      }
      lathe_program_free(p);
      lathe_builder_free(b);
    }
  return nk;
}

/* A plan's generated kernels compiled as one NVRTC program (lathe_cuda_kernels_batch): each
 * kernel named lt_fused_<hash of its text>, the same for the same text and different for
 * different ones, and the batch's cubin holding every name as a symbol (what the driver looks
 * up). */
TEST(cuda_kernels_batch) {
  enum { MAXK = 64 };
  lathe_cuda_ewk *ks[MAXK];
  int nk = batch_kernels(ks, MAXK);
  CHECK(nk >= 15, "kernels made: %d", nk);
  int distinct = 0;
  for (int i = 0; i < nk; i++) {
    bool seen = false;
    for (int j = 0; j < i && !seen; j++) {
      bool same_text = !strcmp(lathe_cuda_ewk_source(ks[i]), lathe_cuda_ewk_source(ks[j]));
      bool same_name = !strcmp(lathe_cuda_ewk_name(ks[i]), lathe_cuda_ewk_name(ks[j]));
      CHECK(same_text == same_name, "kernels %d and %d: one name for one text", i, j);
      seen = same_text;
    }
    distinct += !seen;
  }
  const lcu_api *api;
  lathe_status_t st = test_nvrtc(&api);
  if (st) {
    lathe_status_free(st);
    for (int i = 0; i < nk; i++) lathe_cuda_ewk_free(ks[i]);
    SKIP("no NVRTC: %d kernels named, %d distinct", nk, distinct);
  }
  const char *src[MAXK];
  int nb = 0;
  for (int i = 0; i < nk; i++) {
    bool seen = false;
    for (int j = 0; j < nb && !seen; j++) seen = src[j] == lathe_cuda_ewk_source(ks[i]) || !strcmp(src[j], lathe_cuda_ewk_source(ks[i]));
    if (!seen) src[nb++] = lathe_cuda_ewk_source(ks[i]);
  }
  char *text = lathe_cuda_batch_text(nb, src, strlen(lathe_cuda_ew_prelude()));
  CHECK(text != NULL, "batch text");
  void *cubin = NULL;
  size_t size = 0;
  CHECK_OK(lathe_cuda_compile_source(text ? text : "", 90, &cubin, &size));
  char *syms = malloc(1 << 20);
  if (cubin && syms) {
    elf_symbols(cubin, size, syms, 1 << 20);
    for (int i = 0; i < nk; i++) {
      char line[40];
      snprintf(line, sizeof line, "\n%s\n", lathe_cuda_ewk_name(ks[i]));
      CHECK(strstr(syms, line) != NULL, "kernel %d's %s among the batch cubin's symbols", i, lathe_cuda_ewk_name(ks[i]));
    }
  }
  printf("note: %d kernels (%d distinct) compiled as one program: %zu bytes of cubin\n", nk, nb, size);
  free(syms);
  free(cubin);
  free(text);
  for (int i = 0; i < nk; i++) lathe_cuda_ewk_free(ks[i]);
}

/* ---- a driver of symbols alone: a module is its cubin's symbol names, a function the place of
 * its name there (the batch and disk-cache logic tested without a GPU) ---- */
static int fake_loads, fake_live;
static lcuResult fake_ok_ctx(lcuContext c) {
  (void)c;
  return LCU_SUCCESS;
}
static lcuResult fake_error_string(lcuResult r, const char **s) {
  (void)r;
  *s = "fake driver error";
  return LCU_SUCCESS;
}
static lcuResult fake_load(lcuModule *m, const void *image) {
  char *syms = malloc(1 << 20);
  if (!syms) return 2;
  syms[0] = '\n';
  elf_symbols(image, 1 << 30, syms + 1, (1 << 20) - 1);
  if (!syms[1]) { /* not an ELF cubin: what the driver says of a damaged image */
    free(syms);
    return 200;
  }
  fake_loads++, fake_live++;
  *m = (lcuModule)syms;
  return LCU_SUCCESS;
}
static lcuResult fake_unload(lcuModule m) {
  free(m);
  fake_live--;
  return LCU_SUCCESS;
}
static lcuResult fake_function(lcuFunction *f, lcuModule m, const char *name) {
  char line[64];
  snprintf(line, sizeof line, "\n%s\n", name);
  const char *at = strstr((const char *)m, line);
  if (!at) return 500; /* not found */
  *f = (lcuFunction)(at + 1);
  return LCU_SUCCESS;
}

/* The cache directory's files: how many, and how many distinct inodes among them. */
static void cache_files(const char *dir, int *files, int *inodes) {
  ino_t seen[256];
  *files = *inodes = 0;
  DIR *dp = opendir(dir);
  for (struct dirent *e; dp && (e = readdir(dp));) {
    char path[600];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (stat(path, &sb) || !S_ISREG(sb.st_mode)) continue;
    (*files)++;
    bool dup = false;
    for (int i = 0; i < *inodes && !dup; i++) dup = seen[i] == sb.st_ino;
    if (!dup && *inodes < 256) seen[(*inodes)++] = sb.st_ino;
  }
  if (dp) closedir(dp);
}

/* One round of lathe_cuda_kernels_batch over n members on a fresh table of dev (twice when `again`:
 * the second call finds them in the table): every member's function found, then the loads so far
 * and the cache directory's files and inodes as wanted, and every module unloaded with the table. */
static void batch_round(cuda_dev *dev, const char *dir, int n, const char *const *src, const char *const *names, size_t prefix,
                        bool again, int loads, int files, int inodes, const char *what) {
  lcuFunction out[64];
  int nf, ni;
  CHECK_OK(lathe_cuda_modules_init(&dev->modules));
  for (int round = 0; round < (again ? 2 : 1); round++) {
    CHECK_OK(lathe_cuda_kernels_batch(dev, n, src, names, prefix, out));
    for (int i = 0; i < n; i++)
      CHECK(out[i] && !strncmp((const char *)out[i], names[i], 25), "%s: member %d's function", what, i);
  }
  cache_files(dir, &nf, &ni);
  CHECK(fake_loads == loads && nf == files && ni == inodes, "%s: %d loads, %d files, %d inodes (want %d, %d, %d)", what,
        fake_loads, nf, ni, loads, files, inodes);
  lathe_cuda_modules_destroy(dev);
  CHECK(fake_live == 0, "%s: every module unloaded once: %d live", what, fake_live);
}

/* lathe_cuda_kernels_batch over a driver of symbols and a real disk cache: the missing members
 * compiled as one program whose cubin is cached once and linked under each member; a fresh
 * table loading a shared file once; a damaged batch compiled afresh; a batch that NVRTC refuses
 * compiled member by member, the error naming the broken one; every module unloaded once. */
TEST(cuda_kernels_batch_cache) {
  const lcu_api *nv;
  lathe_status_t st = test_nvrtc(&nv);
  if (st) {
    lathe_status_free(st);
    SKIP("no NVRTC");
  }
  enum { MAXK = 64 };
  lathe_cuda_ewk *ks[MAXK];
  int nk = batch_kernels(ks, MAXK), nb = 0;
  const char *src[MAXK], *names[MAXK];
  for (int i = 0; i < nk; i++) {
    bool seen = false;
    for (int j = 0; j < nb && !seen; j++) seen = !strcmp(src[j], lathe_cuda_ewk_source(ks[i]));
    if (!seen) src[nb] = lathe_cuda_ewk_source(ks[i]), names[nb++] = lathe_cuda_ewk_name(ks[i]);
  }
  CHECK(nb >= 8, "distinct kernels: %d", nb);
  char dir[] = "/tmp/lathe_batch_XXXXXX";
  const char *old = getenv("LATHE_CUDA_CACHE_DIR");
  char *saved = old ? strdup(old) : NULL;
  if (nb < 8 || !mkdtemp(dir)) goto done;
  setenv("LATHE_CUDA_CACHE_DIR", dir, 1);
  lcu_api api;
  memset(&api, 0, sizeof api);
  api.cuCtxSetCurrent = fake_ok_ctx;
  api.cuGetErrorString = fake_error_string;
  api.cuModuleLoadData = fake_load;
  api.cuModuleUnload = fake_unload;
  api.cuModuleGetFunction = fake_function;
  lathe_cuda cu;
  cuda_dev dev;
  memset(&cu, 0, sizeof cu);
  memset(&dev, 0, sizeof dev);
  cu.api = &api, cu.n_devices = 1, cu.devs = &dev;
  dev.cu = &cu, dev.cc = 90;
  size_t prefix = strlen(lathe_cuda_ew_prelude());
  lcuFunction out[MAXK];
  int half = nb / 2;
  /* 1: the first half compiled as one program, cached once, linked under each member; a second
   * call finds them in the table */
  batch_round(&dev, dir, half, src, names, prefix, true, 1, half + 1, 1, "one batch");
  /* 2: a fresh table: the first half from disk (one file, loaded once), the rest compiled */
  batch_round(&dev, dir, nb, src, names, prefix, false, 3, nb + 2, 2, "disk and a second batch");
  /* 3: one file damaged (and so every link to it: one batch): that batch compiled afresh */
  {
    char path[600] = "";
    DIR *dp = opendir(dir);
    for (struct dirent *e; dp && (e = readdir(dp)) && !path[0];)
      if (e->d_name[0] != '.') snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (dp) closedir(dp);
    FILE *f = path[0] ? fopen(path, "r+b") : NULL;
    CHECK(f != NULL, "a cache file to damage");
    if (f) {
      fputs("not a cubin", f);
      fclose(f);
    }
  }
  batch_round(&dev, dir, nb, src, names, prefix, false, 5, nb + 2, 2, "damaged batch recompiled");

  /* 4: NVRTC refuses the batch: the good member compiled alone, the error from the broken one */
  {
    size_t n0 = strlen(src[0]);
    char *good = malloc(n0 + 32), *bad = malloc(n0 + 64);
    if (good && bad) {
      snprintf(good, n0 + 32, "%s\n// another text\n", src[0]);
      snprintf(bad, n0 + 64, "%.*snamespace { undefined_thing_here x; }\n", (int)prefix, src[0]);
      const char *bs[2] = {good, bad}, *bn[2] = {names[0], "lt_nothing"};
      CHECK_OK(lathe_cuda_modules_init(&dev.modules));
      st = lathe_cuda_kernels_batch(&dev, 2, bs, bn, prefix, out);
      CHECK(st && strstr(lathe_status_message(st), "undefined_thing_here"), "the broken member's error: %s",
            st ? lathe_status_message(st) : "none");
      lathe_status_free(st);
      CHECK(out[0] != NULL, "the good member compiled alone");
      lathe_cuda_modules_destroy(&dev);
      CHECK(fake_live == 0, "%d live", fake_live);
    }
    free(good);
    free(bad);
  }
  { /* the cache directory goes */
    DIR *dp = opendir(dir);
    for (struct dirent *e; dp && (e = readdir(dp));) {
      char path[600];
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      if (e->d_name[0] != '.') remove(path);
    }
    if (dp) closedir(dp);
    rmdir(dir);
  }
done:
  if (saved) setenv("LATHE_CUDA_CACHE_DIR", saved, 1);
  else unsetenv("LATHE_CUDA_CACHE_DIR");
  free(saved);
  for (int i = 0; i < nk; i++) lathe_cuda_ewk_free(ks[i]);
}

/* The multiply-high division that collapsed elementwise kernels use for 31-bit indices: exact
 * for every divisor at the edges and at random. */
TEST(cuda_index_division) {
  uint32_t ds[] = {1, 2, 3, 5, 7, 10, 127, 128, 129, 1000, 65535, 65536, 65537, 1u << 20, 3u << 20, 0x7fffffffu, 0x40000001u};
  uint32_t ns[] = {0, 1, 2, 3, 127, 128, 129, 65535, 65536, 1u << 30, 0x7ffffffeu, 0x7fffffffu};
  int bad = 0;
  for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++)
    for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) bad += lathe_cuda_udiv_host(ns[j], ds[i]) != ns[j] / ds[i];
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 200000; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint32_t d = (uint32_t)(x >> 33) >> (x & 31);
    uint32_t n = (uint32_t)x & 0x7fffffffu;
    if (d == 0) d = 1;
    bad += lathe_cuda_udiv_host(n, d) != n / d;
    bad += lathe_cuda_udiv_host(n - n % d, d) != n / d; /* exact multiples */
  }
  CHECK(bad == 0, "%d wrong quotients", bad);
}

/* The strided copy's index simplification (no GPU needed): on random layouts (permuted, with
 * broadcast and spread axes, offsets, misaligned pointers), every byte of every element moves
 * from and to where the unsimplified index puts it, and a widened element is aligned. */
static int64_t strided_offset(int64_t i, const lt_dims_h *d, const lt_strides_h *s) {
  int64_t o = 0;
  for (int a = d->rank - 1; a >= 0; a--) o += (i % d->d[a]) * s->s[a], i /= d->d[a];
  return o;
}

static uint64_t next_random(uint64_t *x) {
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

TEST(cuda_strided_simplify) {
  uint64_t x = 0x2545f4914f6cdd1dull;
#define RND() next_random(&x)
  int bad = 0, widened = 0, merged = 0;
  for (int t = 0; t < 20000 && !bad; t++) {
    lt_dims_h d;
    lt_strides_h s;
    memset(&d, 0, sizeof d), memset(&s, 0, sizeof s);
    d.rank = (int)(RND() % 5);
    int w0 = 1 << (RND() % 5), perm[4] = {0, 1, 2, 3};
    int64_t n = 1;
    for (int a = 0; a < d.rank; a++) {
      bool any = RND() % 3 != 0;
      d.d[a] = any ? 1 + (int64_t)(RND() % 6) : 2 * (1 + (int64_t)(RND() % 4));
      n *= d.d[a];
    }
    for (int a = d.rank - 1; a > 0; a--) {
      int j = (int)(RND() % (uint64_t)(a + 1)), p = perm[a];
      perm[a] = perm[j], perm[j] = p;
    }
    int64_t run = 1;
    for (int k = d.rank - 1; k >= 0; k--) s.s[perm[k]] = run, run *= d.d[perm[k]];
    for (int a = 0; a < d.rank; a++) {
      uint64_t r = RND() % 8;
      if (r == 0) s.s[a] = 0;      /* broadcast */
      else if (r == 1) s.s[a] *= 2; /* spread out */
    }
    int64_t base = (int64_t)(RND() % 4);
    if (RND() % 2) base *= 4;
    lcuDeviceptr sp = 256 * (1 + RND() % 100);
    if (RND() % 2) sp += (lcuDeviceptr)w0 * (RND() % 4);
    lcuDeviceptr pp = 256 * (1 + RND() % 100);
    lt_dims_h d2 = d;
    lt_strides_h s2 = s;
    int64_t b2 = base;
    int w = w0;
    lathe_cuda_strided_simplify(&d2, &s2, n, &b2, &w, sp, pp);
    int f = w / w0;
    widened += f > 1, merged += d2.rank < d.rank;
    for (int64_t i = 0; i < n && !bad; i++) {
      int64_t j = i / f, k = i % f, at = b2 + strided_offset(j, &d2, &s2);
      if ((base + strided_offset(i, &d, &s)) * w0 != at * w + k * w0) bad = 1;
      if (f > 1 && ((sp + (lcuDeviceptr)(at * w)) % (lcuDeviceptr)w || (pp + (lcuDeviceptr)(j * w)) % (lcuDeviceptr)w)) bad = 2;
    }
    if (bad) CHECK(false, "layout %d: %s (rank %d, width %d, factor %d)", t, bad == 1 ? "bytes moved" : "misaligned", d.rank, w0, f);
  }
#undef RND
  CHECK(widened > 1000 && merged > 1000, "only %d widened and %d merged layouts were tried", widened, merged);
}

/* lathe_cuda_dims32 (no GPU needed): where it accepts a layout, every offset stays in [0, 2^31)
 * and the multiply-high divisions give the 64-bit index's offsets; large spans fall back. */
static int64_t offset32(uint32_t i, const lt_dims32_h *g) {
  int64_t off = 0;
  for (int a = g->rank - 1; a > 0; a--) {
    uint32_t q = (uint32_t)(((uint64_t)i * g->q[a].m >> 32) + i) >> g->q[a].s;
    off += (int64_t)(i - q * g->q[a].d) * g->s[a];
    i = q;
  }
  return off + (int64_t)i * g->s[0];
}

TEST(cuda_dims32) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  int accepted = 0, refused = 0;
  for (int t = 0; t < 4000; t++) {
    lt_dims_h d;
    lt_strides_h s;
    memset(&d, 0, sizeof d), memset(&s, 0, sizeof s);
    d.rank = 1 + (int)(next_random(&x) % 4);
    int64_t n = 1, base = 0;
    for (int a = 0; a < d.rank; a++) {
      d.d[a] = 1 + (int64_t)(next_random(&x) % 7);
      s.s[a] = (int64_t)(next_random(&x) % 9) - 3;
      if (next_random(&x) % 8 == 0) s.s[a] *= (int64_t)1 << 28; /* spans past 2^31 */
      n *= d.d[a];
      if (s.s[a] < 0) base -= (d.d[a] - 1) * s.s[a];
    }
    lt_dims32_h g;
    if (!lathe_cuda_dims32(&d, &s, n, base, &g)) {
      refused++;
      continue;
    }
    accepted++;
    for (int64_t i = 0; i < n; i++) {
      int64_t want = base + strided_offset(i, &d, &s), got = base + offset32((uint32_t)i, &g);
      if (want != got || want < 0 || want > INT32_MAX) {
        CHECK(false, "layout %d, index %lld: offset %lld, 32-bit %lld", t, (long long)i, (long long)want, (long long)got);
        return;
      }
    }
  }
  CHECK(accepted > 1000 && refused > 100, "%d accepted and %d refused layouts", accepted, refused);
}

/* lathe_cuda_texts_of (no GPU needed): the texts a plan compiles ahead for a step are the ones
 * its family's launch takes, found by content among the labelled texts of
 * lathe_cuda_each_source. */
typedef struct {
  const char *texts[16];
  char labels[16][96];
  int n;
} texts_ctx;

static void add_expected(void *vctx, const char *source) {
  texts_ctx *c = vctx;
  for (int i = 0; i < c->n; i++)
    if (c->texts[i] == source) return;
  if (c->n < 16) c->texts[c->n++] = source;
}

static void label_texts(void *vctx, const char *label, const char *source) {
  texts_ctx *c = vctx;
  for (int i = 0; i < c->n; i++)
    if (!c->labels[i][0] && !strcmp(c->texts[i], source)) snprintf(c->labels[i], sizeof c->labels[i], "%s", label);
}

/* The labels of n's texts on a device of capability cc, joined by "; " into buf. */
static const char *texts_of(lathe_value_t n, int cc, bool tf32, char *buf, size_t cap) {
  lathe_cuda cu;
  cuda_dev d;
  memset(&cu, 0, sizeof cu), memset(&d, 0, sizeof d);
  cu.tf32 = tf32, cu.flash = true, cu.cudnn = true;
  d.cu = &cu, d.cc = cc;
  texts_ctx c;
  memset(&c, 0, sizeof c);
  if (n->op == LATHE_OP_TUPLE_ELEMENT) n = n->in[0]; /* a result of a multi-result op */
  lathe_cuda_texts_of(&d, n, add_expected, &c);
  lathe_cuda_each_source(label_texts, &c);
  buf[0] = 0;
  for (int i = 0; i < c.n; i++) {
    size_t k = strlen(buf);
    snprintf(buf + k, cap - k, "%s%s", i ? "; " : "", c.labels[i][0] ? c.labels[i] : "(a text of no family)");
  }
  return buf;
}

TEST(cuda_plan_texts) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("plan texts", &fn);
  lathe_value_t x = tst_param(fn, "x", TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 8, 8, 3));
  lathe_value_t q = tst_param(fn, "q", TST_SHAPE(LATHE_DTYPE_BFLOAT16, 2, 64, 4, 64));
  lathe_value_t k = tst_param(fn, "k", TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 3, 3, 5));
  lathe_value_t m = tst_param(fn, "m", TST_SHAPE(LATHE_DTYPE_INT32, 6, 7));
  lathe_value_t rw, att[2], ln, tr, sum, conv, dot, io;
  int64_t win[] = {1, 2, 2, 1};
  lathe_window_params wp = {.window_dims = win, .n_window_dims = 4};
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, x, &wp, &rw));
  lathe_attention_config ac = {.causal = true};
  CHECK_OK(lathe_fused_scaled_dot_product_attention(fn, q, q, q, LATHE_ATTENTION_LAYOUT_BSHD, &ac, att));
  int last = 3, perm[] = {0, 3, 1, 2}, sp[] = {1, 2}, ksp[] = {0, 1}, red[] = {1, 2}, con[] = {1}, none[] = {0};
  CHECK_OK(lathe_fused_layer_norm(fn, x, &last, 1, 1e-5, NULL, NULL, &ln));
  CHECK_OK(lathe_transpose(fn, x, perm, 4, &tr));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, x, red, 2, &sum));
  lathe_conv_axes ca = {0, 3, sp, 2, 2, 3, ksp, 2, 0, 3, sp, 2};
  lathe_padding pad[] = {{1, 1}, {1, 1}};
  lathe_conv_params cp = {.paddings = pad, .n_paddings = 2};
  CHECK_OK(lathe_conv_general(fn, x, k, &ca, &cp, &conv));
  CHECK_OK(lathe_dot_general(fn, m, con, 1, none, 0, m, con, 1, none, 0, NULL, &dot));
  lathe_shape is = TST_SHAPE(LATHE_DTYPE_INT64, 4, 5);
  CHECK_OK(lathe_iota(fn, &is, 1, &io));
  char buf[1024];
  struct {
    lathe_value_t v;
    int cc;
    bool tf32;
    const char *want;
  } rows[] = {
      {rw, 90, false, "window Float32"},
      {att[0], 90, false, "attention (streaming) D64 plain BFloat16"},
      {att[0], 75, false, "attention Float32"}, /* no mma.sync: the row kernels, on widened copies */
      {ln, 90, false, "fused layer norm Float32"},
      {tr, 90, false, "layout 4 bytes; layout 16 bytes"},
      {sum, 90, false, "reduce sum Float32"},
      {conv, 90, false, "conv Float32 -> Float32; layout 4 bytes; layout 16 bytes"},
      {dot, 90, false, "gemm tiled"},
      {io, 90, false, "iota Int64"},
      {x, 90, false, ""},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const char *got = texts_of(rows[i].v, rows[i].cc, rows[i].tf32, buf, sizeof buf);
    bool ok = !strncmp(got, rows[i].want, strlen(rows[i].want)) && (rows[i].want[0] || !got[0]);
    CHECK(ok, "row %zu (sm_%d): texts \"%s\", want \"%s\" first", i, rows[i].cc, got, rows[i].want);
  }
  lathe_builder_free(b);
}

/* How an elementwise kernel reads its inputs after collapsing (no GPU needed): a broadcast
 * zero is a scalar, a row broadcast two axes in vector groups, a size-1 axis gone. */
static void geometry(const int64_t *xd, int xr, const int64_t *yd, int yr, const int64_t *od, int orank, int *rank,
                     int64_t *dims, bool *idx32, bool *vec, int *access) {
  lathe_cuda cu;
  memset(&cu, 0, sizeof cu);
  lathe_node x, y, n;
  memset(&x, 0, sizeof x), memset(&y, 0, sizeof y), memset(&n, 0, sizeof n);
  lathe_node *ins[2] = {&x, &y};
  CHECK_OK(lathe_shape_make(LATHE_DTYPE_FLOAT32, xr, xd, &x.shape));
  CHECK_OK(lathe_shape_make(LATHE_DTYPE_FLOAT32, yr, yd, &y.shape));
  CHECK_OK(lathe_shape_make(LATHE_DTYPE_FLOAT32, orank, od, &n.shape));
  n.op = LATHE_OP_ADD;
  n.in = ins;
  n.n_operands = n.n_in = 2;
  const lathe_shape *in[2] = {&x.shape, &y.shape};
  lathe_cuda_ewk *k = NULL;
  CHECK_OK(lathe_cuda_ewk_step(&cu, &n, in, &n.shape, &k));
  if (k) lathe_cuda_ewk_describe(k, rank, dims, idx32, vec, access);
  lathe_cuda_ewk_free(k);
}

TEST(cuda_ew_geometry) {
  int rank = -1, access[2] = {-1, -1};
  int64_t dims[LATHE_MAX_RANK];
  bool idx32 = false, vec = false;
  int64_t o[] = {8, 1, 16}, row[] = {1, 1, 16}, one[] = {1, 1, 1}, col[] = {8, 1, 1}, odd[] = {8, 1, 15}, orow[] = {1, 1, 15};
  geometry(o, 3, row, 3, o, 3, &rank, dims, &idx32, &vec, access);
  CHECK(rank == 2 && dims[0] == 8 && dims[1] == 16 && idx32 && vec && access[0] == LATHE_PACCESS_FULL &&
            access[1] == LATHE_PACCESS_STRIDED,
        "row broadcast: rank %d, vec %d, access %d %d", rank, vec, access[0], access[1]);
  geometry(o, 3, one, 3, o, 3, &rank, dims, &idx32, &vec, access);
  CHECK(rank == 1 && dims[0] == 128 && vec && access[1] == LATHE_PACCESS_SCALAR, "broadcast zero: rank %d, access %d", rank,
        access[1]);
  geometry(o, 3, col, 3, o, 3, &rank, dims, &idx32, &vec, access);
  CHECK(rank == 2 && vec && access[1] == LATHE_PACCESS_STRIDED, "column broadcast: rank %d vec %d", rank, vec);
  geometry(odd, 3, orow, 3, odd, 3, &rank, dims, &idx32, &vec, access);
  CHECK(rank == 2 && !vec, "rows of 15 make no vector groups: rank %d vec %d", rank, vec);
}

/* ---- on a GPU: graphs run on lathe:cuda and on lathe:cpu must agree ---- */
TEST(cuda_smoke) {
  if (!gpu()) SKIP("no usable GPU");
  lathe_function_t fn;
  /* a fused chain with scalars and a row broadcast, a transpose, an iota and a reshape */
  lathe_builder_t b = tst_builder("smoke", &fn);
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 37, 129), ms = TST_SHAPE(LATHE_DTYPE_FLOAT32, 37);
  lathe_value_t x = tst_param(fn, "x", xs), m = tst_param(fn, "m", ms), mb, t, u, v, y, tr, io, outs[3];
  int axis = 0, perm[2] = {1, 0};
  float half = 0.5f;
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  lathe_value_t c;
  CHECK_OK(lathe_constant(fn, &s0, &half, sizeof half, &c));
  CHECK_OK(lathe_broadcast_in_dim(fn, m, &xs, &axis, 1, &mb));
  CHECK_OK(lathe_sub(fn, x, mb, &t));
  CHECK_OK(lathe_mul(fn, t, c, &u));
  CHECK_OK(lathe_tanh(fn, u, &v));
  CHECK_OK(lathe_max(fn, v, x, &y));
  CHECK_OK(lathe_transpose(fn, y, perm, 2, &tr));
  lathe_shape is = TST_SHAPE(LATHE_DTYPE_INT32, 4, 5);
  CHECK_OK(lathe_iota(fn, &is, 1, &io));
  outs[0] = y, outs[1] = tr, outs[2] = io;
  CHECK_OK(lathe_function_return(fn, outs, 3));
  float *xv = malloc(sizeof(float) * 37 * 129), mv[37];
  tst_fill(xv, LATHE_DTYPE_FLOAT32, 37 * 129, 1);
  tst_fill(mv, LATHE_DTYPE_FLOAT32, 37, 2);
  const void *ins[2] = {xv, mv};
  agree("chain+transpose+iota", b, ins, 2, 1e-5);
  free(xv);
  lathe_builder_free(b);
  /* every elementwise op and dtype the GPU supports is in the conformance run (test_ops -b) */
}

/* Parameter and Constant are bound by the executor, so they are capabilities for every dtype
 * (GoMLX's compliance suite skips whole tests when Constant is missing). */
TEST(cuda_leaf_capabilities) {
  for (int d = 0; d < tst_n_all_dtypes; d++) {
    lathe_dtype dt = tst_all_dtypes[d];
    CHECK(lathe_cuda_supports_op(LATHE_OP_PARAMETER, dt) && lathe_cuda_supports_op(LATHE_OP_CONSTANT, dt),
          "Parameter and Constant of %s", lathe_dtype_name(dt));
    /* Iota as on lathe:cpu, sub-byte integers included (made in bytes, then packed) */
    CHECK(lathe_cuda_supports_op(LATHE_OP_IOTA, dt) == lathe_backend_supports_op(tst_backend(), LATHE_OP_IOTA, dt),
          "Iota of %s", lathe_dtype_name(dt));
  }
}

/* Transfers around executions: small uploads are queued and small reads ordered after their
 * writer on the GPU; an output or input dropped while its writer runs is freed only once the
 * writer is done, so the next allocation of its size never shares memory with pending work. */
/* The caching allocator's counters: a buffer shows in current and peak, and leaves current (to
 * the cache) when freed. */
TEST(cuda_memory_stats) {
  if (!gpu()) SKIP("no usable GPU");
  enum { N = 1 << 20 };
  lathe_memory_stats s0, s1, s2;
  CHECK_OK(lathe_backend_memory_stats(gpu(), 0, &s0));
  CHECK(!s0.process_wide && s0.peak_bytes >= s0.current_bytes, "stats before");
  lathe_shape sh = TST_SHAPE(LATHE_DTYPE_FLOAT32, N);
  float *host = calloc(N, sizeof(float));
  lathe_buffer_t buf = NULL;
  CHECK_OK(lathe_buffer_from_host(gpu(), 0, &sh, host, sizeof(float) * N, &buf));
  CHECK_OK(lathe_buffer_to_host(buf, host, sizeof(float) * N)); /* the upload is done */
  CHECK_OK(lathe_backend_memory_stats(gpu(), 0, &s1));
  CHECK(s1.current_bytes - s0.current_bytes >= 4 * N, "a 4 MiB buffer counted: %lld -> %lld",
        (long long)s0.current_bytes, (long long)s1.current_bytes);
  CHECK(s1.peak_bytes >= s1.current_bytes && s1.n_allocs > s0.n_allocs, "peak and count");
  lathe_buffer_free(buf);
  CHECK_OK(lathe_backend_memory_stats(gpu(), 0, &s2));
  CHECK(s1.current_bytes - s2.current_bytes >= 4 * N && s2.cached_bytes >= 4 * N, "freed into the cache: %lld -> %lld",
        (long long)s1.current_bytes, (long long)s2.current_bytes);
  CHECK_OK(lathe_backend_memory_reset_peak(gpu(), 0));
  CHECK_OK(lathe_backend_memory_stats(gpu(), 0, &s2));
  CHECK(s2.peak_bytes == s2.current_bytes, "reset peak: %lld", (long long)s2.peak_bytes);
  CHECK_ERR(lathe_backend_memory_stats(gpu(), 9, &s2), INVALID_ARGUMENT, "device 9");
  free(host);
}

TEST(cuda_transfers) {
  if (!gpu()) SKIP("no usable GPU");
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("neg_chain", &fn);
  enum { N = 1 << 20, SMALL = 256 };
  lathe_shape big = TST_SHAPE(LATHE_DTYPE_FLOAT32, N), small = TST_SHAPE(LATHE_DTYPE_FLOAT32, SMALL);
  lathe_value_t x = tst_param(fn, "x", big), y = x;
  for (int k = 0; k < 8; k++) {
    CHECK_OK(lathe_tanh(fn, y, &y));
    CHECK_OK(lathe_neg(fn, y, &y));
  }
  CHECK_OK(lathe_neg(fn, y, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  lathe_executable_t big_e = NULL, small_e = NULL;
  CHECK_OK(lathe_builder_compile_for(b, gpu(), &big_e));
  lathe_builder_free(b);
  b = tst_builder("neg", &fn);
  x = tst_param(fn, "x", small);
  CHECK_OK(lathe_neg(fn, x, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  CHECK_OK(lathe_builder_compile_for(b, gpu(), &small_e));
  lathe_builder_free(b);
  float *host = malloc(sizeof(float) * N), *back = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) host[i] = (float)(i % 1000) / 1000.0f;
  for (int round = 0; round < 50 && big_e && small_e; round++) {
    /* a long execution whose result is dropped unread, then a small upload, run and read */
    lathe_buffer_t bin = NULL, bout = NULL, sin = NULL, sout = NULL;
    CHECK_OK(lathe_buffer_from_host(gpu(), 0, &big, host, sizeof(float) * N, &bin));
    CHECK_OK(lathe_executable_execute(big_e, &bin, NULL, 1, 0, &bout, 1));
    lathe_buffer_free(bin);
    lathe_buffer_free(bout);
    float sv[SMALL], sb[SMALL];
    for (int i = 0; i < SMALL; i++) sv[i] = (float)(round * SMALL + i);
    CHECK_OK(lathe_buffer_from_host(gpu(), 0, &small, sv, sizeof sv, &sin));
    memset(sv, 0, sizeof sv); /* the upload took its own copy */
    CHECK_OK(lathe_executable_execute(small_e, &sin, NULL, 1, 0, &sout, 1));
    if (round % 2) { /* the input read back while (maybe) still queued */
      CHECK_OK(lathe_buffer_to_host(sin, sb, sizeof sb));
      CHECK(sb[7] == (float)(round * SMALL + 7), "round %d: upload read back %g", round, sb[7]);
    }
    lathe_buffer_free(sin);
    CHECK_OK(lathe_buffer_to_host(sout, sb, sizeof sb));
    int bad = 0;
    for (int i = 0; i < SMALL; i++) bad += sb[i] != -(float)(round * SMALL + i);
    CHECK(!bad, "round %d: %d of %d small results wrong", round, bad, SMALL);
    lathe_buffer_free(sout);
    /* the big result again, read this time: memory freed above must not be written under it */
    CHECK_OK(lathe_buffer_from_host(gpu(), 0, &big, host, sizeof(float) * N, &bin));
    CHECK_OK(lathe_executable_execute(big_e, &bin, NULL, 1, 0, &bout, 1));
    lathe_buffer_free(bin);
    CHECK_OK(lathe_buffer_to_host(bout, back, sizeof(float) * N));
    float want = host[999];
    for (int k = 0; k < 8; k++) want = -tanhf(want);
    CHECK(fabsf(back[999] + want) < 1e-5f, "round %d: big result %g, want %g", round, back[999], -want);
    lathe_buffer_free(bout);
  }
  free(host);
  free(back);
  lathe_executable_free(big_e);
  lathe_executable_free(small_e);
}

/* An optimizer-like update as one LOOP region, m' = 0.9 m + g, v' = 0.9 v + g g,
 * p' = p - 0.01 m' rsqrt(v' + 1): with in_place=1 the donated p, m and v hold p', m' and v' (the
 * step's peak stays within a tensor of what is in use after it), without it the results take new
 * memory; the values are lathe:cpu's either way. */
static void loop_update(lathe_backend_t g, bool in_place) {
  enum { N = 1 << 20 };
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, N), s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("in_place", &fn);
  lathe_value_t p = tst_param(fn, "p", s), m = tst_param(fn, "m", s), v = tst_param(fn, "v", s), gr = tst_param(fn, "g", s);
  float c9 = 0.9f, c1 = 1, lr = 0.01f;
  lathe_value_t k9, k1, klr, t, m2, v2, u, w, p2;
  CHECK_OK(lathe_constant(fn, &s0, &c9, 4, &k9));
  CHECK_OK(lathe_constant(fn, &s0, &c1, 4, &k1));
  CHECK_OK(lathe_constant(fn, &s0, &lr, 4, &klr));
  CHECK_OK(lathe_binary(fn, LATHE_OP_MUL, m, k9, &t));
  CHECK_OK(lathe_binary(fn, LATHE_OP_ADD, t, gr, &m2));
  CHECK_OK(lathe_binary(fn, LATHE_OP_MUL, gr, gr, &t));
  CHECK_OK(lathe_binary(fn, LATHE_OP_MUL, v, k9, &u));
  CHECK_OK(lathe_binary(fn, LATHE_OP_ADD, u, t, &v2));
  CHECK_OK(lathe_binary(fn, LATHE_OP_ADD, v2, k1, &u));
  CHECK_OK(lathe_unary(fn, LATHE_OP_RSQRT, u, &w));
  CHECK_OK(lathe_binary(fn, LATHE_OP_MUL, m2, w, &u));
  CHECK_OK(lathe_binary(fn, LATHE_OP_MUL, u, klr, &w));
  CHECK_OK(lathe_binary(fn, LATHE_OP_SUB, p, w, &p2));
  lathe_value_t outs[3] = {p2, m2, v2};
  CHECK_OK(lathe_function_return(fn, outs, 3));
  lathe_executable_t eg = NULL, ec = NULL;
  CHECK_OK(lathe_builder_compile_for(b, g, &eg));
  CHECK_OK(lathe_builder_compile(b, &ec));
  lathe_builder_free(b);
  if (!eg || !ec) return;
  lathe_buffer_t gi[4] = {0}, ci[4] = {0}, go[3] = {0}, co[3] = {0};
  float *h = malloc(sizeof(float) * N);
  for (int i = 0; i < 4; i++) {
    tst_fill(h, LATHE_DTYPE_FLOAT32, N, (unsigned)(i + 3));
    if (i == 2)
      for (int j = 0; j < N; j++) h[j] = fabsf(h[j]); /* v >= 0 */
    CHECK_OK(lathe_buffer_from_host(g, 0, &s, h, sizeof(float) * N, &gi[i]));
    CHECK_OK(lathe_buffer_from_host(tst_backend(), 0, &s, h, sizeof(float) * N, &ci[i]));
  }
  free(h);
  bool donate[4] = {true, true, true, false};
  CHECK_OK(lathe_buffer_wait(gi[3]));
  CHECK_OK(lathe_backend_memory_reset_peak(g, 0));
  CHECK_OK(lathe_executable_execute(eg, gi, donate, 4, 0, go, 3));
  CHECK_OK(lathe_executable_execute(ec, ci, NULL, 4, 0, co, 3));
  for (int k = 0; k < 3; k++) CHECK_OK(lathe_buffer_wait(go[k]));
  lathe_memory_stats ms;
  CHECK_OK(lathe_backend_memory_stats(g, 0, &ms));
  int64_t extra = ms.peak_bytes - ms.current_bytes, one = (int64_t)sizeof(float) * N;
  if (in_place) CHECK(extra < one, "in_place=1: the step's peak is %lld bytes over what is in use after it", (long long)extra);
  else CHECK(extra >= 3 * one, "in_place=0: the results took new memory (peak %lld bytes over)", (long long)extra);
  agree_outputs(in_place ? "in_place=1" : "in_place=0", go, co, 3, 1e-6);
  for (int k = 0; k < 3; k++) lathe_buffer_free(go[k]), lathe_buffer_free(co[k]);
  for (int i = 0; i < 4; i++) lathe_buffer_free(ci[i]);
  lathe_buffer_free(gi[3]);
  lathe_executable_free(eg);
  lathe_executable_free(ec);
}

TEST(cuda_loop_update_in_place) {
  static lathe_backend_t ip, off;
  static bool tried, tried_off;
  if (!gpu() || !gpu_once("lathe:cuda,in_place=1", &ip, &tried) || !gpu_once("lathe:cuda,in_place=0", &off, &tried_off))
    SKIP("no usable GPU");
  loop_update(ip, true);
  loop_update(off, false);
}
