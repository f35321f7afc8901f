/* test_collectives.c -- AllGather, ReduceScatter, AllToAll and CollectivePermute on
 * lathe:cpu,devices=N, row by row against their definitions (a reference computed here element by
 * element): dtypes, group layouts (every replica, both axes of a 2x2 mesh, singletons, groups
 * listed out of order), every axis; across the processes of a job (this binary run as two
 * processes, through the Gloo plugin); and the errors of bad groups, pairs, axes and sizes. */
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "testing.h"

typedef struct {
  lathe_op op;
  int axis, axis2; /* AllGather, ReduceScatter: axis; AllToAll: split, concat */
  lathe_op red;    /* ReduceScatter */
  const int *groups, *sizes;
  int n_groups;
  const int *pairs; /* CollectivePermute */
  int n_pairs;
  bool in_process; /* built with lathe_builder_collectives_in_process: groups of this process only */
} coll;

static const char *const KIND[] = {"AllGather", "ReduceScatter", "AllToAll", "CollectivePermute"};
static const char *kind(const coll *c) {
  return c->op == LATHE_OP_ALL_GATHER ? KIND[0] : c->op == LATHE_OP_REDUCE_SCATTER ? KIND[1]
       : c->op == LATHE_OP_ALL_TO_ALL ? KIND[2] : KIND[3];
}

static lathe_status_t build(lathe_function_t fn, const coll *c, lathe_value_t x, lathe_value_t *y) {
  switch (c->op) {
    case LATHE_OP_ALL_GATHER: return lathe_all_gather(fn, x, c->axis, c->groups, c->sizes, c->n_groups, y);
    case LATHE_OP_REDUCE_SCATTER:
      return lathe_reduce_scatter(fn, x, c->axis, c->red, c->groups, c->sizes, c->n_groups, y);
    case LATHE_OP_ALL_TO_ALL: return lathe_all_to_all(fn, x, c->axis, c->axis2, c->groups, c->sizes, c->n_groups, y);
    default: return lathe_collective_permute(fn, x, c->pairs, c->n_pairs, y);
  }
}

/* Element i of global replica r's operand: small integers, exact in every dtype and under every
 * reduction of up to 4 of them. */
static double val(const coll *c, lathe_dtype dt, int r, int64_t i) {
  if (dt == LATHE_DTYPE_BOOL) return (double)((r + i) % 2);
  if (c->op == LATHE_OP_REDUCE_SCATTER && c->red == LATHE_OP_REDUCE_PRODUCT) return (double)(1 + (r * 5 + i * 3) % 3);
  int v = (int)((r * 10 + i * 7) % 23);
  bool sign = lathe_dtype_class_of(dt) != LATHE_CLASS_UINT;
  return (double)(sign ? v - 9 : v);
}

/* The reference: what the replica at position k of group `members` (global replica indices, G of
 * them; self: its global index) computes, operand dims id, result dims od. */
static void reference(const coll *c, lathe_dtype dt, int rank, const int64_t *id, const int64_t *od, const int *members,
                      int G, int k, int perm_source, void *want) {
  int64_t n = tst_numel(rank, od), oc[LATHE_MAX_RANK], ic[LATHE_MAX_RANK];
  for (int64_t o = 0; o < n; o++) {
    tst_unravel(o, rank, od, oc);
    memcpy(ic, oc, sizeof ic);
    double re = 0, im = 0;
    if (c->op == LATHE_OP_ALL_GATHER) {
      int j = (int)(oc[c->axis] / id[c->axis]);
      ic[c->axis] %= id[c->axis];
      re = val(c, dt, members[j], tst_ravel(rank, id, ic));
      im = lathe_dtype_is_complex(dt) ? members[j] : 0;
    } else if (c->op == LATHE_OP_REDUCE_SCATTER) {
      ic[c->axis] += k * od[c->axis];
      for (int q = 0; q < G; q++) {
        double x = val(c, dt, members[q], tst_ravel(rank, id, ic));
        re = q == 0                               ? x
           : c->red == LATHE_OP_REDUCE_SUM     ? re + x
           : c->red == LATHE_OP_REDUCE_PRODUCT ? re * x
           : c->red == LATHE_OP_REDUCE_MAX     ? (x > re ? x : re)
                                                 : (x < re ? x : re);
        im += lathe_dtype_is_complex(dt) ? members[q] : 0; /* complex rows are sums */
      }
    } else if (c->op == LATHE_OP_ALL_TO_ALL) {
      int64_t part_c = od[c->axis2] / G, part_s = id[c->axis] / G;
      int j = (int)(oc[c->axis2] / part_c);
      ic[c->axis2] %= part_c;
      ic[c->axis] += k * part_s;
      re = val(c, dt, members[j], tst_ravel(rank, id, ic));
      im = lathe_dtype_is_complex(dt) ? members[j] : 0;
    } else if (perm_source >= 0) {
      re = val(c, dt, perm_source, o);
      im = lathe_dtype_is_complex(dt) ? perm_source : 0;
    }
    tst_set_complex(want, dt, o, re, im);
  }
}

/* Local replica r's group members (local indices) and its position; returns the size. */
static int local_group(const coll *c, int n_replicas, int r, int *members, int *k) {
  int m = n_replicas;
  for (int q = 0; q < n_replicas; q++) members[q] = q;
  for (int g = 0, at = 0; g < c->n_groups; at += c->sizes[g++])
    for (int q = 0; q < c->sizes[g]; q++)
      if (c->groups[at + q] == r) {
        m = c->sizes[g];
        memcpy(members, c->groups + at, sizeof(int) * (size_t)m);
      }
  for (*k = 0; members[*k] != r; ++*k) {}
  return m;
}

/* Runs c on backend be of n devices in process p of P (outside a job: 0 of 1), operand dims id of
 * rank `rank`, and checks every local replica's result against the reference. */
static void run_row(lathe_backend_t be, int n, int p, int P, const coll *c, lathe_dtype dt, int rank, const int64_t *id) {
  char label[160];
  int at = snprintf(label, sizeof label, "%s %s [", kind(c), lathe_dtype_name(dt));
  for (int a = 0; a < rank; a++) at += snprintf(label + at, sizeof label - (size_t)at, "%s%lld", a ? "," : "", (long long)id[a]);
  snprintf(label + at, sizeof label - (size_t)at, "] axes %d,%d groups %d on %d x %d", c->axis, c->axis2, c->n_groups, P, n);
  lathe_builder_t b;
  tst_row_begin(); /* a conformance row of its op (-o AllGather, ...) */
  CHECK_OK(lathe_builder_new(be, "collective", &b));
  CHECK_OK(lathe_builder_spmd(b, n));
  CHECK_OK(lathe_builder_collectives_in_process(b, c->in_process));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape s = tst_shape(dt, rank, id);
  lathe_value_t x, y = NULL;
  CHECK_OK(lathe_parameter(fn, "x", &s, &x));
  lathe_status_t st = build(fn, c, x, &y);
  CHECK(!st, "%s: %s", label, lathe_status_message(st));
  lathe_status_free(st);
  lathe_executable_t e = NULL;
  if (y) CHECK_OK(lathe_function_return(fn, &y, 1));
  if (y && tst_row_graph(b)) CHECK_OK(lathe_builder_compile(b, &e));
  lathe_shape os;
  if (y) CHECK_OK(lathe_value_shape(y, &os));
  lathe_builder_free(b);
  if (!e) return;
  lathe_buffer_t in[8] = {0}, out[8] = {0};
  for (int r = 0; r < n; r++) {
    void *v = tst_alloc_for(&s);
    int global = p * n + r;
    for (int64_t i = 0; i < tst_numel(rank, id); i++)
      tst_set_complex(v, dt, i, val(c, dt, global, i), lathe_dtype_is_complex(dt) ? global : 0);
    CHECK_OK(lathe_buffer_from_host(be, r, &s, v, (size_t)lathe_shape_byte_size(&s), &in[r]));
    free(v);
  }
  CHECK_OK(lathe_executable_execute(e, in, NULL, n, 0, out, n));
  int Pg = c->in_process ? 1 : P, pg = c->in_process ? 0 : p; /* the processes a group spans, this one's place */
  for (int r = 0; r < n && out[r]; r++) {
    int local[8], members[64], k = 0, m = local_group(c, n, r, local, &k);
    for (int q = 0; q < Pg; q++)
      for (int l = 0; l < m; l++) members[q * m + l] = (c->in_process ? p : q) * n + local[l];
    int src = -1;
    for (int i = 0; i < c->n_pairs; i++)
      if (c->pairs[2 * i + 1] == r) src = p * n + c->pairs[2 * i];
    void *got = tst_alloc_for(&os), *want = tst_alloc_for(&os);
    reference(c, dt, rank, id, os.dims, members, Pg * m, pg * m + k, src, want);
    CHECK_OK(lathe_buffer_to_host(out[r], got, (size_t)lathe_shape_byte_size(&os)));
    char l2[200];
    snprintf(l2, sizeof l2, "%s, replica %d of process %d", label, r, p);
    tst_expect_close(l2, got, want, dt, tst_numel(os.rank, os.dims), 0);
    free(got);
    free(want);
  }
  for (int r = 0; r < n; r++) lathe_buffer_free(in[r]), lathe_buffer_free(out[r]);
  lathe_executable_free(e);
}

#define DIMS(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

/* groups of a 2x2 mesh of devices 0..3 (row-major): along its second axis, along its first, and
 * the first listed out of order; every device alone */
static const int ROWS[] = {0, 1, 2, 3}, COLS[] = {0, 2, 1, 3}, ROWS_REV[] = {3, 2, 1, 0}, SINGLE[] = {0, 1, 2, 3};
static const int TWO[] = {2, 2}, ONES[] = {1, 1, 1, 1};

/* The rows every process runs: n devices (2 or 4). */
static void rows(lathe_backend_t be, int n, int p, int P) {
  const lathe_dtype F32 = LATHE_DTYPE_FLOAT32;
  /* AllGather */
  run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_GATHER, .axis = 0}, F32, DIMS(3, 2));
  run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_GATHER, .axis = 1}, LATHE_DTYPE_INT8, DIMS(2, 3));
  run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_GATHER, .axis = 0}, LATHE_DTYPE_FLOAT16, DIMS(5));
  if (n == 4) {
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_GATHER, .axis = 1, .groups = ROWS, .sizes = TWO, .n_groups = 2}, LATHE_DTYPE_INT64, DIMS(2, 3));
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_GATHER, .axis = 0, .groups = COLS, .sizes = TWO, .n_groups = 2}, LATHE_DTYPE_BFLOAT16,
            DIMS(2, 3, 2));
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_GATHER, .axis = 2, .groups = COLS, .sizes = TWO, .n_groups = 2}, LATHE_DTYPE_BOOL, DIMS(2, 1, 3));
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_GATHER, .axis = 1, .groups = ROWS_REV, .sizes = TWO, .n_groups = 2}, LATHE_DTYPE_COMPLEX64,
            DIMS(2, 2));
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_GATHER, .axis = 0, .groups = SINGLE, .sizes = ONES, .n_groups = 4}, LATHE_DTYPE_UINT16,
            DIMS(3));
  }
  /* ReduceScatter */
  run_row(be, n, p, P, &(coll){.op = LATHE_OP_REDUCE_SCATTER, .axis = 0, .red = LATHE_OP_REDUCE_SUM}, F32, DIMS(4 * n, 3));
  run_row(be, n, p, P, &(coll){.op = LATHE_OP_REDUCE_SCATTER, .axis = 1, .red = LATHE_OP_REDUCE_MAX}, LATHE_DTYPE_FLOAT16, DIMS(2, 2 * n * P, 3));
  run_row(be, n, p, P, &(coll){.op = LATHE_OP_REDUCE_SCATTER, .axis = 2, .red = LATHE_OP_REDUCE_MIN}, LATHE_DTYPE_INT16, DIMS(3, 2, n * P));
  run_row(be, n, p, P, &(coll){.op = LATHE_OP_REDUCE_SCATTER, .axis = 0, .red = LATHE_OP_REDUCE_SUM}, LATHE_DTYPE_COMPLEX128, DIMS(n * P));
  if (n == 4) {
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_REDUCE_SCATTER, .axis = 1, .red = LATHE_OP_REDUCE_SUM, .groups = ROWS, .sizes = TWO, .n_groups = 2},
            LATHE_DTYPE_INT32, DIMS(3, 4 * P));
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_REDUCE_SCATTER, .axis = 0, .red = LATHE_OP_REDUCE_PRODUCT, .groups = COLS, .sizes = TWO, .n_groups = 2},
            LATHE_DTYPE_FLOAT64, DIMS(2 * P, 3));
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_REDUCE_SCATTER, .axis = 1, .red = LATHE_OP_REDUCE_MAX, .groups = ROWS_REV, .sizes = TWO, .n_groups = 2},
            LATHE_DTYPE_UINT8, DIMS(2, 2 * P, 2));
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_REDUCE_SCATTER, .axis = 0, .red = LATHE_OP_REDUCE_SUM, .groups = SINGLE, .sizes = ONES, .n_groups = 4},
            LATHE_DTYPE_BFLOAT16, DIMS(3 * P));
  }
  /* AllToAll */
  run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_TO_ALL, .axis = 0, .axis2 = 0}, F32, DIMS(2 * n * P, 3));
  run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_TO_ALL, .axis = 0, .axis2 = 1}, LATHE_DTYPE_INT16, DIMS(n * P, 3));
  run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_TO_ALL, .axis = 2, .axis2 = 0}, LATHE_DTYPE_COMPLEX64, DIMS(2, 3, n * P));
  if (n == 4) {
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_TO_ALL, .axis = 1, .axis2 = 0, .groups = COLS, .sizes = TWO, .n_groups = 2}, LATHE_DTYPE_FLOAT64,
            DIMS(3, 4 * P, 2));
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_TO_ALL, .axis = 2, .axis2 = 1, .groups = ROWS, .sizes = TWO, .n_groups = 2}, LATHE_DTYPE_BOOL,
            DIMS(2, 3, 2 * P));
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_TO_ALL, .axis = 1, .axis2 = 2, .groups = ROWS_REV, .sizes = TWO, .n_groups = 2}, LATHE_DTYPE_UINT32,
            DIMS(2, 2 * P, 3));
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_TO_ALL, .axis = 0, .axis2 = 1, .groups = SINGLE, .sizes = ONES, .n_groups = 4}, LATHE_DTYPE_INT8,
            DIMS(P, 2));
  }
  /* CollectivePermute: a ring, a swap leaving the others zero, a self pair */
  if (n == 4) {
    static const int ring[] = {0, 1, 1, 2, 2, 3, 3, 0}, swap[] = {0, 2, 2, 0}, self[] = {1, 1, 0, 3};
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_COLLECTIVE_PERMUTE, .pairs = ring, .n_pairs = 4}, F32, DIMS(2, 3));
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_COLLECTIVE_PERMUTE, .pairs = swap, .n_pairs = 2}, LATHE_DTYPE_INT8, DIMS(5));
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_COLLECTIVE_PERMUTE, .pairs = self, .n_pairs = 2}, LATHE_DTYPE_BOOL, DIMS(2, 2));
  } else {
    static const int swap[] = {0, 1, 1, 0}, one[] = {1, 0};
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_COLLECTIVE_PERMUTE, .pairs = swap, .n_pairs = 2}, LATHE_DTYPE_FLOAT16, 0, (int64_t[]){0});
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_COLLECTIVE_PERMUTE, .pairs = one, .n_pairs = 1}, LATHE_DTYPE_COMPLEX128, DIMS(3));
  }
  /* groups kept inside each process (in a job: not extended across it; outside: the same as above) */
  run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_GATHER, .axis = 0, .in_process = true}, F32, DIMS(3, 2));
  run_row(be, n, p, P, &(coll){.op = LATHE_OP_REDUCE_SCATTER, .axis = 1, .red = LATHE_OP_REDUCE_SUM, .in_process = true}, LATHE_DTYPE_INT32,
          DIMS(2, 2 * n));
  run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_TO_ALL, .axis = 0, .axis2 = 1, .in_process = true}, LATHE_DTYPE_FLOAT64, DIMS(n, 3));
  if (n == 4)
    run_row(be, n, p, P, &(coll){.op = LATHE_OP_ALL_GATHER, .axis = 1, .groups = COLS, .sizes = TWO, .n_groups = 2, .in_process = true},
            LATHE_DTYPE_INT8, DIMS(2, 3));
}

static lathe_backend_t backend_n(const char *extra, int n) {
  char cfg[256];
  snprintf(cfg, sizeof cfg, "lathe:cpu,devices=%d%s", n, extra);
  lathe_backend_t b = NULL;
  CHECK_OK(lathe_backend_new(cfg, &b));
  return b;
}

static void job_in_process(lathe_backend_t be, int n, int p, int P);

TEST(collectives_in_one_process) {
  for (int n = 2; n <= 4; n += 2) {
    lathe_backend_t be = backend_n("", n);
    if (!be) return;
    rows(be, n, 0, 1);
    job_in_process(be, n, 0, 1);
    lathe_backend_free(be);
  }
}

/* A value through AllToAll and back (the axes swapped) is itself; AllGather then ReduceScatter
 * (sum) of the same axis is G times it; in one program, with the AllReduce between. */
TEST(collectives_composed) {
  lathe_backend_t be = backend_n("", 4);
  if (!be) return;
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "composed", &b));
  CHECK_OK(lathe_builder_spmd(b, 4));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 4, 6);
  lathe_value_t x, a = NULL, a2 = NULL, g = NULL, rs = NULL, ys[2];
  CHECK_OK(lathe_parameter(fn, "x", &s, &x));
  CHECK_OK(lathe_all_to_all(fn, x, 0, 1, COLS, TWO, 2, &a));
  CHECK_OK(lathe_all_to_all(fn, a, 1, 0, COLS, TWO, 2, &a2));
  CHECK_OK(lathe_all_gather(fn, a2, 1, NULL, NULL, 0, &g));
  CHECK_OK(lathe_reduce_scatter(fn, g, 1, LATHE_OP_REDUCE_SUM, NULL, NULL, 0, &rs));
  ys[0] = a2;
  CHECK_OK(lathe_all_reduce(fn, &rs, 1, LATHE_OP_REDUCE_MAX, ROWS, TWO, 2, &ys[1]));
  CHECK_OK(lathe_function_return(fn, ys, 2));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  if (!e) return;
  float v[4][24];
  lathe_buffer_t in[4], out[8] = {0};
  for (int r = 0; r < 4; r++) {
    for (int i = 0; i < 24; i++) v[r][i] = (float)(r * 100 + i);
    CHECK_OK(lathe_buffer_from_host(be, r, &s, v[r], sizeof v[r], &in[r]));
  }
  CHECK_OK(lathe_executable_execute(e, in, NULL, 4, 0, out, 8));
  for (int r = 0; r < 4; r++) {
    float got[24], got2[24];
    CHECK_OK(lathe_buffer_to_host(out[2 * r], got, sizeof got));
    CHECK_OK(lathe_buffer_to_host(out[2 * r + 1], got2, sizeof got2));
    int peer = r ^ 1; /* the other member of r's ROWS group: the max of both replicas' 4x */
    for (int i = 0; i < 24; i++) {
      CHECK(got[i] == v[r][i], "AllToAll and back, replica %d element %d: %g, want %g", r, i, got[i], v[r][i]);
      float want = 4 * (v[r][i] > v[peer][i] ? v[r][i] : v[peer][i]);
      CHECK(got2[i] == want, "AllGather, ReduceScatter, AllReduce, replica %d element %d: %g, want %g", r, i, got2[i], want);
    }
  }
  for (int r = 0; r < 4; r++) lathe_buffer_free(in[r]), lathe_buffer_free(out[2 * r]), lathe_buffer_free(out[2 * r + 1]);
  lathe_executable_free(e);
  lathe_backend_free(be);
}

TEST(collectives_capabilities) {
  lathe_backend_t be = backend_n("", 2);
  if (!be) return;
  const lathe_op ops[] = {LATHE_OP_ALL_GATHER, LATHE_OP_REDUCE_SCATTER, LATHE_OP_ALL_TO_ALL, LATHE_OP_COLLECTIVE_PERMUTE};
  for (int o = 0; o < 4; o++) {
    CHECK(lathe_backend_supports_op(be, ops[o], LATHE_DTYPE_FLOAT32), "%s Float32 on lathe:cpu", lathe_op_name(ops[o]));
  }
  CHECK(!lathe_backend_supports_op(be, LATHE_OP_REDUCE_SCATTER, LATHE_DTYPE_BOOL), "ReduceScatter of Bool is not offered");
  CHECK(lathe_backend_supports_op(be, LATHE_OP_ALL_GATHER, LATHE_DTYPE_BOOL), "AllGather of Bool");
  lathe_backend_free(be);
}

TEST(collectives_errors) {
  lathe_backend_t be = backend_n("", 4);
  if (!be) return;
  lathe_builder_t b;
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 4, 6);
  lathe_value_t x, y;
  /* outside SPMD */
  CHECK_OK(lathe_builder_new(be, "plain", &b));
  lathe_function_t fn = lathe_builder_main(b);
  CHECK_OK(lathe_parameter(fn, "x", &s, &x));
  CHECK_ERR(lathe_all_gather(fn, x, 0, NULL, NULL, 0, &y), INVALID_ARGUMENT, "AllGather: only in an SPMD program");
  CHECK_ERR(lathe_collective_permute(fn, x, NULL, 0, &y), INVALID_ARGUMENT, "CollectivePermute: only in an SPMD program");
  lathe_builder_free(b);

  CHECK_OK(lathe_builder_new(be, "bad", &b));
  CHECK_OK(lathe_builder_spmd(b, 4));
  fn = lathe_builder_main(b);
  CHECK_OK(lathe_parameter(fn, "x", &s, &x));
  static const int uneven[] = {0, 1, 2, 3}, three_one[] = {3, 1};
  CHECK_ERR(lathe_all_gather(fn, x, 0, uneven, three_one, 2, &y), INVALID_ARGUMENT,
            "AllGather: replica group 1 has 1 replicas, group 0 has 3: groups must have one size");
  static const int twice[] = {0, 1, 1, 3};
  CHECK_ERR(lathe_reduce_scatter(fn, x, 0, LATHE_OP_REDUCE_SUM, twice, TWO, 2, &y), INVALID_ARGUMENT,
            "ReduceScatter: replica 1 is in two groups");
  static const int outside[] = {0, 1, 2, 4};
  CHECK_ERR(lathe_all_to_all(fn, x, 0, 1, outside, TWO, 2, &y), INVALID_ARGUMENT, "AllToAll: replica 4 out of range [0, 4)");
  static const int some[] = {0, 1}, two[] = {2};
  CHECK_ERR(lathe_all_gather(fn, x, 0, some, two, 1, &y), INVALID_ARGUMENT, "AllGather: replica 2 is in no group");
  CHECK_ERR(lathe_all_gather(fn, x, 2, NULL, NULL, 0, &y), INVALID_ARGUMENT, "AllGather: axis 2 is out of range for rank 2");
  CHECK_ERR(lathe_reduce_scatter(fn, x, 1, LATHE_OP_REDUCE_SUM, NULL, NULL, 0, &y), INVALID_ARGUMENT,
            "ReduceScatter: axis 1 has size 6, which does not divide into 4 equal parts");
  CHECK_ERR(lathe_reduce_scatter(fn, x, 0, LATHE_OP_ABS, NULL, NULL, 0, &y), INVALID_ARGUMENT, "ReduceScatter: reduction must be");
  CHECK_ERR(lathe_all_to_all(fn, x, 1, 0, NULL, NULL, 0, &y), INVALID_ARGUMENT,
            "AllToAll: split axis 1 has size 6, which does not divide into 4 equal parts");
  CHECK_ERR(lathe_all_to_all(fn, x, 0, -1, NULL, NULL, 0, &y), INVALID_ARGUMENT, "AllToAll: concat axis -1 is out of range");
  static const int dup_target[] = {0, 1, 2, 1}, bad_source[] = {5, 0};
  CHECK_ERR(lathe_collective_permute(fn, x, dup_target, 2, &y), INVALID_ARGUMENT,
            "CollectivePermute: replica 1 is the target of two pairs");
  CHECK_ERR(lathe_collective_permute(fn, x, bad_source, 1, &y), INVALID_ARGUMENT,
            "CollectivePermute: pair 0 names source replica 5, out of range [0, 4)");
  lathe_shape sb = TST_SHAPE(LATHE_DTYPE_BOOL, 4), s4 = TST_SHAPE(LATHE_DTYPE_INT4, 4);
  lathe_value_t xb, x4;
  CHECK_OK(lathe_parameter(fn, "b", &sb, &xb));
  CHECK_OK(lathe_parameter(fn, "q", &s4, &x4));
  CHECK_ERR(lathe_reduce_scatter(fn, xb, 0, LATHE_OP_REDUCE_SUM, NULL, NULL, 0, &y), INVALID_ARGUMENT,
            "ReduceScatter: ReduceSum of Bool");
  CHECK_ERR(lathe_all_gather(fn, x4, 0, NULL, NULL, 0, &y), UNIMPLEMENTED, "AllGather: packed Int4");
  /* the same groups make one valid program */
  CHECK_OK(lathe_all_gather(fn, x, 1, COLS, TWO, 2, &y));
  lathe_shape ys;
  CHECK_OK(lathe_value_shape(y, &ys));
  CHECK(ys.rank == 2 && ys.dims[0] == 4 && ys.dims[1] == 12, "AllGather over groups of 2 on axis 1 of [4,6]: [%lld,%lld]",
        (long long)ys.dims[0], (long long)ys.dims[1]);
  lathe_builder_free(b);
  lathe_backend_free(be);
}

/* ---- across the processes of a job: this binary run as process 0 and 1 (two devices each) ---- */

/* In process p of P (n devices each): an AllReduce across the job beside one kept in the process,
 * and an AutoSharding program, partitioned over this process's devices alone (its AllReduce and
 * AllGather in-process), which computes on this process's data as one process would. */
static void job_in_process(lathe_backend_t be, int n, int p, int P) {
  lathe_builder_t b;
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3);
  lathe_value_t x, y[2];
  CHECK_OK(lathe_builder_new(be, "in-process", &b));
  CHECK_OK(lathe_builder_spmd(b, n));
  lathe_function_t fn = lathe_builder_main(b);
  CHECK_OK(lathe_parameter(fn, "x", &s, &x));
  CHECK_OK(lathe_all_reduce(fn, &x, 1, LATHE_OP_REDUCE_SUM, NULL, NULL, 0, &y[0]));
  CHECK_OK(lathe_builder_collectives_in_process(b, true));
  CHECK_OK(lathe_all_reduce(fn, &x, 1, LATHE_OP_REDUCE_SUM, NULL, NULL, 0, &y[1]));
  CHECK_OK(lathe_function_return(fn, y, 2));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  lathe_buffer_t in[4] = {0}, out[8] = {0};
  for (int r = 0; e && r < n; r++) {
    float v[3];
    for (int i = 0; i < 3; i++) v[i] = (float)((p * n + r) * 10 + i);
    CHECK_OK(lathe_buffer_from_host(be, r, &s, v, sizeof v, &in[r]));
  }
  if (e) CHECK_OK(lathe_executable_execute(e, in, NULL, n, 0, out, 2 * n));
  for (int r = 0; e && r < n; r++)
    for (int k = 0; k < 2 && out[2 * r + k]; k++) {
      float got[3];
      CHECK_OK(lathe_buffer_to_host(out[2 * r + k], got, sizeof got));
      for (int i = 0; i < 3; i++) {
        double want = 0;
        for (int g = k ? p * n : 0; g < (k ? p * n + n : P * n); g++) want += g * 10 + i;
        CHECK(got[i] == want, "process %d replica %d, AllReduce %s: element %d is %g, want %g", p, r,
              k ? "in the process" : "across the job", i, got[i], want);
      }
    }
  for (int r = 0; r < n; r++) lathe_buffer_free(in[r]), lathe_buffer_free(out[2 * r]), lathe_buffer_free(out[2 * r + 1]);
  lathe_executable_free(e);

  /* AutoSharding over this process's n devices: x [2n, 3] split by rows, its column sums and its
   * rows doubled returned replicated (an AllReduce and an AllGather the partitioner inserts) */
  const int sizes[1] = {n};
  const char *names[1] = {"x"};
  lathe_mesh mesh = {"m", 1, sizes, names, NULL};
  const char *const split[1] = {"x"};
  lathe_sharding rows_split = {"m", 2, {split}, {1}};
  lathe_shape gs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2 * n, 3), ls = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 3);
  CHECK_OK(lathe_builder_new(be, "auto", &b));
  CHECK_OK(lathe_builder_auto_sharding(b, &mesh, 1));
  fn = lathe_builder_main(b);
  lathe_value_t two, z[2];
  CHECK_OK(lathe_parameter_sharded(fn, "x", &gs, &rows_split, &x));
  int axis0[1] = {0};
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, x, axis0, 1, &z[0]));
  float f2 = 2;
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  CHECK_OK(lathe_constant(fn, &s0, &f2, sizeof f2, &two));
  CHECK_OK(lathe_mul(fn, x, two, &z[1]));
  const lathe_sharding *outs[2] = {NULL, NULL};
  CHECK_OK(lathe_function_return_sharded(fn, z, outs, 2));
  e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  if (!e) return;
  lathe_executable_stats st;
  CHECK_OK(lathe_executable_get_stats(e, &st));
  CHECK(st.partitioned && st.partition_fallbacks == 0, "process %d: AutoSharding in a job: partitioned %d (%s), %d fallbacks", p,
        st.partitioned, st.partition_declined ? st.partition_declined : "-", st.partition_fallbacks);
  float g[4 * 2 * 3];
  for (int i = 0; i < 2 * n * 3; i++) g[i] = (float)(p * 100 + i); /* this process's global x */
  for (int r = 0; r < n; r++) CHECK_OK(lathe_buffer_from_host(be, r, &ls, g + r * 6, 6 * sizeof(float), &in[r]));
  CHECK_OK(lathe_executable_execute(e, in, NULL, n, 0, out, 2 * n));
  for (int r = 0; r < n; r++) {
    float sum[3], dbl[4 * 2 * 3];
    CHECK_OK(lathe_buffer_to_host(out[2 * r], sum, sizeof sum));
    CHECK_OK(lathe_buffer_to_host(out[2 * r + 1], dbl, sizeof(float) * 2 * (size_t)n * 3));
    for (int j = 0; j < 3; j++) {
      double want = 0;
      for (int i = 0; i < 2 * n; i++) want += g[i * 3 + j];
      CHECK(sum[j] == want, "process %d replica %d: column sum %d is %g, want %g", p, r, j, sum[j], want);
    }
    for (int i = 0; i < 2 * n * 3; i++)
      CHECK(dbl[i] == 2 * g[i], "process %d replica %d: doubled element %d is %g, want %g", p, r, i, dbl[i], 2 * g[i]);
  }
  for (int r = 0; r < n; r++) lathe_buffer_free(in[r]), lathe_buffer_free(out[2 * r]), lathe_buffer_free(out[2 * r + 1]);
  lathe_executable_free(e);
}

static const char *child_var = "LATHE_COLLECTIVES_CHILD"; /* "PORT,PROCESS" */

/* One process of the job when child_var is set; otherwise nothing. Exits with the failure count. */
TEST(collectives_job_child) {
  const char *spec = getenv(child_var);
  if (!spec) return;
  int port = 0, p = 0;
  if (sscanf(spec, "%d,%d", &port, &p) != 2) return;
  char extra[160];
  snprintf(extra, sizeof extra, ",coordinator=127.0.0.1:%d,processes=2,process=%d,token=collectives,timeout=60", port, p);
  lathe_backend_t be = backend_n(extra, 2);
  if (be) {
    rows(be, 2, p, 2);
    job_in_process(be, 2, p, 2);
    lathe_backend_free(be);
  }
  printf("process %d: %d passed, %d failed\n", p, tst_passed, tst_failed);
  fflush(stdout);
  _exit(tst_failed ? 1 : 0);
}

TEST(collectives_across_processes) {
  if (getenv(child_var)) return;
  const char *plugin = getenv("LATHE_GLOO_LIBRARY");
  char path[512], abs_path[PATH_MAX];
  if (!plugin) {
    snprintf(path, sizeof path, "build/liblathe_gloo.so");
    if (access(path, R_OK)) SKIP("no Gloo plugin (apt-get install libgloo-dev; make build/liblathe_gloo.so; or set LATHE_GLOO_LIBRARY)");
    plugin = realpath(path, abs_path);
  }
  int port = tst_free_port();
  pid_t pid[2];
  for (int p = 0; p < 2; p++) {
    pid[p] = fork();
    if (pid[p] == 0) {
      char spec[32];
      snprintf(spec, sizeof spec, "%d,%d", port, p);
      setenv(child_var, spec, 1);
      setenv("LATHE_GLOO_LIBRARY", plugin, 1);
      execl("/proc/self/exe", "test_unit", "=collectives_job_child", (char *)NULL);
      _exit(127);
    }
  }
  for (int p = 0; p < 2; p++) {
    int status = 0;
    CHECK(pid[p] > 0 && waitpid(pid[p], &status, 0) == pid[p] && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "process %d of the job: exit status %d (its own output above says which rows failed)", p,
          WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
}

/* A dynamic axis the op does not resize is bound at execution; one it resizes is UNIMPLEMENTED. */
TEST(collectives_dynamic_axes) {
  lathe_backend_t be = backend_n("", 2);
  if (!be) return;
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "dynamic", &b));
  CHECK_OK(lathe_builder_spmd(b, 2));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, 4);
  s.dims[0] = -1, s.axis_names[0] = "batch";
  lathe_value_t x, y = NULL, bad;
  CHECK_OK(lathe_parameter(fn, "x", &s, &x));
  CHECK_ERR(lathe_all_gather(fn, x, 0, NULL, NULL, 0, &bad), UNIMPLEMENTED, "AllGather: axis 0 has a dynamic size (\"batch\")");
  CHECK_ERR(lathe_all_to_all(fn, x, 1, 0, NULL, NULL, 0, &bad), UNIMPLEMENTED, "AllToAll: concat axis 0 has a dynamic size");
  CHECK_OK(lathe_reduce_scatter(fn, x, 1, LATHE_OP_REDUCE_SUM, NULL, NULL, 0, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  if (!e) return;
  lathe_shape in_s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 4);
  float v[2][12];
  lathe_buffer_t in[2], out[2] = {0};
  for (int r = 0; r < 2; r++) {
    for (int i = 0; i < 12; i++) v[r][i] = (float)(r * 100 + i);
    CHECK_OK(lathe_buffer_from_host(be, r, &in_s, v[r], sizeof v[r], &in[r]));
  }
  CHECK_OK(lathe_executable_execute(e, in, NULL, 2, 0, out, 2));
  for (int r = 0; r < 2 && out[r]; r++) {
    float got[6];
    CHECK_OK(lathe_buffer_to_host(out[r], got, sizeof got));
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 2; j++) {
        float want = v[0][i * 4 + r * 2 + j] + v[1][i * 4 + r * 2 + j];
        CHECK(got[i * 2 + j] == want, "ReduceScatter over a bound batch of 3, replica %d [%d,%d]: %g, want %g", r, i, j,
              got[i * 2 + j], want);
      }
  }
  for (int r = 0; r < 2; r++) lathe_buffer_free(in[r]), lathe_buffer_free(out[r]);
  lathe_executable_free(e);
  lathe_backend_free(be);
}

/* Collectives inside a While body (a closure): 3 iterations of x = AllGather(ReduceScatter(x))
 * over the groups {0,2},{1,3}, then a CollectivePermute ring: each step doubles the group sum. */
TEST(collectives_in_while) {
  lathe_backend_t be = backend_n("", 4);
  if (!be) return;
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "loop", &b));
  CHECK_OK(lathe_builder_spmd(b, 4));
  lathe_function_t fn = lathe_builder_main(b), cond, body;
  lathe_shape si = tst_shape0(LATHE_DTYPE_INT32), sx = TST_SHAPE(LATHE_DTYPE_FLOAT32, 4, 3);
  lathe_value_t i0, x, st[2], out[2], ci, cx, lim, lt, bi, bx, one, ni, rs, ag, pm;
  int n_out = 0, zero = 0, three = 3, onev = 1;
  CHECK_OK(lathe_parameter(fn, "x", &sx, &x));
  CHECK_OK(lathe_constant(fn, &si, &zero, sizeof zero, &i0));
  CHECK_OK(lathe_function_closure(fn, &cond));
  CHECK_OK(lathe_parameter(cond, "i", &si, &ci));
  CHECK_OK(lathe_parameter(cond, "x", &sx, &cx));
  CHECK_OK(lathe_constant(cond, &si, &three, sizeof three, &lim));
  CHECK_OK(lathe_less_than(cond, ci, lim, &lt));
  CHECK_OK(lathe_function_return(cond, &lt, 1));
  CHECK_OK(lathe_function_closure(fn, &body));
  CHECK_OK(lathe_parameter(body, "i", &si, &bi));
  CHECK_OK(lathe_parameter(body, "x", &sx, &bx));
  CHECK_OK(lathe_constant(body, &si, &onev, sizeof onev, &one));
  CHECK_OK(lathe_add(body, bi, one, &ni));
  CHECK_OK(lathe_reduce_scatter(body, bx, 0, LATHE_OP_REDUCE_SUM, COLS, TWO, 2, &rs));
  CHECK_OK(lathe_all_gather(body, rs, 0, COLS, TWO, 2, &ag));
  CHECK_OK(lathe_function_return(body, (lathe_value_t[]){ni, ag}, 2));
  st[0] = i0, st[1] = x;
  CHECK_OK(lathe_while(fn, cond, body, st, 2, out, 2, &n_out));
  static const int ring[] = {0, 1, 1, 2, 2, 3, 3, 0};
  CHECK_OK(lathe_collective_permute(fn, out[1], ring, 4, &pm));
  CHECK_OK(lathe_function_return(fn, &pm, 1));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  if (!e) return;
  float v[4][12];
  lathe_buffer_t in[4], res[4] = {0};
  for (int r = 0; r < 4; r++) {
    for (int k = 0; k < 12; k++) v[r][k] = (float)(r * 20 + k);
    CHECK_OK(lathe_buffer_from_host(be, r, &sx, v[r], sizeof v[r], &in[r]));
  }
  CHECK_OK(lathe_executable_execute(e, in, NULL, 4, 0, res, 4));
  for (int r = 0; r < 4 && res[r]; r++) {
    float got[12];
    int src = (r + 3) % 4, peer = src ^ 2; /* the ring's source, and its group's other member */
    CHECK_OK(lathe_buffer_to_host(res[r], got, sizeof got));
    for (int k = 0; k < 12; k++) {
      float want = 4 * (v[src][k] + v[peer][k]);
      CHECK(got[k] == want, "replica %d element %d: %g, want %g", r, k, got[k], want);
    }
  }
  for (int r = 0; r < 4; r++) lathe_buffer_free(in[r]), lathe_buffer_free(res[r]);
  lathe_executable_free(e);
  lathe_backend_free(be);
}
