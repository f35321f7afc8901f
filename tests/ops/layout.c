/* layout.c -- conformance rows of the LAYOUT family (Reshape, Transpose, BroadcastInDim,
 * Concatenate, Slice, Pad, Reverse) and of Iota: every dtype (sub-byte ones included) x shapes
 * of rank 0..4 with size-0, size-1 and odd axes x non-default attributes (strided slices,
 * negative and interior padding, unsorted broadcast axes, every permutation), plus large
 * shapes that take the threaded and tiled paths. References are index loops in the test;
 * data movement must be exact. */
#include "core/core.h"
#include "testing.h"

/* ---- the op under test, as parameters + a description ---- */
typedef enum { T_RESHAPE, T_TRANSPOSE, T_BROADCAST, T_SLICE, T_PAD, T_REVERSE } kind;

typedef struct spec {
  kind k;
  int rank; /* of the operand */
  int64_t dims[LATHE_MAX_RANK];
  int out_rank; /* reshape and broadcast */
  int64_t out_dims[LATHE_MAX_RANK];
  int axes[LATHE_MAX_RANK]; /* permutation, broadcast axes, reversed axes */
  int n_axes;
  int64_t starts[LATHE_MAX_RANK], limits[LATHE_MAX_RANK], strides[LATHE_MAX_RANK];
  bool no_strides;
  lathe_pad_axis pad[LATHE_MAX_RANK];
} spec;

/* The operand element read by output coordinate c, or -1 for the fill value. */
static int64_t source_of(const spec *s, const lathe_shape *os, int64_t o) {
  int64_t c[LATHE_MAX_RANK], xc[LATHE_MAX_RANK];
  tst_unravel(o, os->rank, os->dims, c);
  switch (s->k) {
    case T_RESHAPE: return o;
    case T_TRANSPOSE:
      for (int a = 0; a < s->rank; a++) xc[s->axes[a]] = c[a];
      break;
    case T_BROADCAST:
      for (int i = 0; i < s->rank; i++) xc[i] = s->dims[i] == 1 ? 0 : c[s->axes[i]];
      break;
    case T_SLICE:
      for (int a = 0; a < s->rank; a++) xc[a] = s->starts[a] + c[a] * (s->no_strides ? 1 : s->strides[a]);
      break;
    case T_REVERSE:
      for (int a = 0; a < s->rank; a++) xc[a] = c[a];
      for (int i = 0; i < s->n_axes; i++) xc[s->axes[i]] = s->dims[s->axes[i]] - 1 - c[s->axes[i]];
      break;
    case T_PAD:
      for (int a = 0; a < s->rank; a++) {
        int64_t lo = a < s->n_axes ? s->pad[a].start : 0, step = a < s->n_axes ? s->pad[a].interior + 1 : 1;
        int64_t q = c[a] - lo;
        if (q < 0 || q % step || q / step >= s->dims[a]) return -1;
        xc[a] = q / step;
      }
      break;
  }
  return tst_ravel(s->rank, s->dims, xc);
}

static lathe_status_t build(const spec *s, lathe_function_t fn, lathe_value_t x, lathe_value_t fill, lathe_dtype dt,
                            lathe_value_t *out) {
  switch (s->k) {
    case T_RESHAPE: return lathe_reshape(fn, x, s->out_dims, s->out_rank, out);
    case T_TRANSPOSE: return lathe_transpose(fn, x, s->axes, s->rank, out);
    case T_BROADCAST: {
      lathe_shape os = tst_shape(dt, s->out_rank, s->out_dims);
      return lathe_broadcast_in_dim(fn, x, &os, s->axes, s->n_axes, out);
    }
    case T_SLICE: return lathe_slice(fn, x, s->starts, s->limits, s->no_strides ? NULL : s->strides, s->rank, out);
    case T_PAD: return lathe_pad(fn, x, fill, s->pad, s->n_axes, out);
    case T_REVERSE: return lathe_reverse(fn, x, s->axes, s->n_axes, out);
  }
  return NULL;
}

static const char *kind_name(kind k) {
  static const char *const names[] = {"Reshape", "Transpose", "BroadcastInDim", "Slice", "Pad", "Reverse"};
  return names[k];
}

static void copy_elem(void *dst, lathe_dtype dt, int64_t di, const void *src, int64_t si) {
  tst_set_complex(dst, dt, di, tst_get(src, dt, si), tst_get_imag(src, dt, si));
}

/* Runs spec s on dtype dt with pseudo-random data and compares exactly with the reference. */
static void check_spec(const spec *s, lathe_dtype dt, unsigned seed) {
  lathe_shape xs = tst_shape(dt, s->rank, s->dims), fs = tst_shape0(dt);
  char label[200], sb[LATHE_SHAPE_STR_MAX];
  snprintf(label, sizeof label, "%s %s", kind_name(s->k), lathe_shape_str(&xs, sb, sizeof sb));
  int64_t xn = lathe_shape_size(&xs);
  void *x = tst_alloc_for(&xs), *fill = tst_alloc_for(&fs);
  tst_fill(x, dt, xn, seed);
  tst_set_complex(fill, dt, 0, dt == LATHE_DTYPE_BOOL ? 1 : lathe_dtype_class_of(dt) == LATHE_CLASS_UINT ? 1 : -1, 0.5);
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("layout", &fn);
  lathe_value_t p = NULL, f = NULL, r = NULL;
  p = tst_param(fn, "x", xs);
  if (s->k == T_PAD) f = tst_param(fn, "fill", fs);
  lathe_status_t st = build(s, fn, p, f, dt, &r);
  CHECK(st == NULL, "%s: build: %s", label, lathe_status_message(st));
  lathe_status_free(st);
  void *got = NULL;
  lathe_shape os;
  if (r) {
    CHECK_OK(lathe_function_return(fn, &r, 1));
    const void *ins[2] = {x, fill};
    st = tst_run(b, ins, s->k == T_PAD ? 2 : 1, &got, 1, &os);
    if (lathe_status_code_of(st) == LATHE_STATUS_UNIMPLEMENTED) {
      tst_skipf(label, "%s", lathe_status_message(st));
    } else {
      CHECK(st == NULL, "%s: run: %s", label, lathe_status_message(st));
    }
    lathe_status_free(st);
  }
  if (got) {
    int64_t on = lathe_shape_size(&os);
    void *want = tst_alloc_for(&os);
    for (int64_t o = 0; o < on; o++) {
      int64_t src = source_of(s, &os, o);
      if (src < 0) copy_elem(want, dt, o, fill, 0);
      else copy_elem(want, dt, o, x, src);
    }
    tst_expect_close(label, got, want, dt, on, 0);
    free(want);
    tst_free_output(got);
  }
  lathe_builder_free(b);
  free(x);
  free(fill);
}

static void check_all_dtypes(const spec *s, unsigned seed) {
  for (int d = 0; d < tst_n_all_dtypes; d++) check_spec(s, tst_all_dtypes[d], seed + (unsigned)d);
}

#define DIMS(...) {__VA_ARGS__}

TEST(layout_reshape) {
  static const struct {
    int r;
    int64_t d[4];
    int orank;
    int64_t od[4];
  } cases[] = {{3, DIMS(2, 3, 4), 2, DIMS(4, 6)}, {3, DIMS(2, 3, 4), 1, DIMS(24)}, {0, DIMS(0), 2, DIMS(1, 1)},
               {2, DIMS(0, 3), 2, DIMS(3, 0)},   {1, DIMS(5), 1, DIMS(5)},          {2, DIMS(1, 1), 0, DIMS(0)},
               {2, DIMS(7, 9), 4, DIMS(3, 1, 21, 1)}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    spec s = {.k = T_RESHAPE, .rank = cases[i].r, .out_rank = cases[i].orank};
    memcpy(s.dims, cases[i].d, sizeof cases[i].d);
    memcpy(s.out_dims, cases[i].od, sizeof cases[i].od);
    check_all_dtypes(&s, (unsigned)i);
  }
}

TEST(layout_transpose) {
  /* every permutation of rank 3 */
  static const int perms3[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (int p = 0; p < 6; p++) {
    spec s = {.k = T_TRANSPOSE, .rank = 3, .dims = DIMS(2, 3, 5)};
    memcpy(s.axes, perms3[p], sizeof perms3[p]);
    check_all_dtypes(&s, (unsigned)p);
    spec z = s;
    z.dims[1] = 0; /* size 0 */
    check_spec(&z, LATHE_DTYPE_FLOAT32, 1);
    spec o = s;
    o.dims[0] = 1; /* size 1 */
    check_spec(&o, LATHE_DTYPE_INT16, 2);
  }
  static const struct {
    int r;
    int64_t d[4];
    int perm[4];
  } cases[] = {{0, DIMS(0), DIMS(0)},
               {1, DIMS(7), DIMS(0)},
               {2, DIMS(40, 37), DIMS(1, 0)},
               {3, DIMS(3, 33, 17), DIMS(0, 2, 1)},
               {4, DIMS(2, 3, 4, 5), DIMS(3, 2, 1, 0)},
               {4, DIMS(2, 3, 4, 5), DIMS(1, 0, 3, 2)},
               {4, DIMS(3, 1, 4, 9), DIMS(2, 0, 3, 1)}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    spec s = {.k = T_TRANSPOSE, .rank = cases[i].r};
    memcpy(s.dims, cases[i].d, sizeof cases[i].d);
    memcpy(s.axes, cases[i].perm, sizeof cases[i].perm);
    check_all_dtypes(&s, (unsigned)i);
  }
}

TEST(layout_broadcast_in_dim) {
  static const struct {
    int r;
    int64_t d[4];
    int orank;
    int64_t od[4];
    int axes[4];
  } cases[] = {
      {0, DIMS(0), 2, DIMS(3, 4), DIMS(0)},          {1, DIMS(3), 2, DIMS(2, 3), DIMS(1)},
      {1, DIMS(3), 2, DIMS(3, 2), DIMS(0)},          {2, DIMS(1, 4), 2, DIMS(3, 4), DIMS(0, 1)},
      {2, DIMS(2, 1), 3, DIMS(2, 5, 3), DIMS(0, 2)}, {2, DIMS(3, 2), 3, DIMS(3, 4, 2), DIMS(0, 2)},
      {1, DIMS(0), 2, DIMS(2, 0), DIMS(1)},          {1, DIMS(5), 1, DIMS(5), DIMS(0)},
      {1, DIMS(1), 4, DIMS(2, 3, 1, 5), DIMS(2)},    {0, DIMS(0), 0, DIMS(0), DIMS(0)},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    spec s = {.k = T_BROADCAST, .rank = cases[i].r, .out_rank = cases[i].orank, .n_axes = cases[i].r};
    memcpy(s.dims, cases[i].d, sizeof cases[i].d);
    memcpy(s.out_dims, cases[i].od, sizeof cases[i].od);
    memcpy(s.axes, cases[i].axes, sizeof cases[i].axes);
    check_all_dtypes(&s, (unsigned)i);
  }
}

TEST(layout_slice) {
  static const struct {
    int r;
    int64_t d[4], b[4], e[4], k[4];
    bool no_strides;
  } cases[] = {
      {1, DIMS(7), DIMS(1), DIMS(6), DIMS(2), false},
      {2, DIMS(5, 6), DIMS(1, 0), DIMS(4, 6), DIMS(2, 3), false},
      {3, DIMS(3, 4, 5), DIMS(0, 0, 0), DIMS(3, 4, 5), DIMS(1, 1, 1), true},
      {2, DIMS(4, 5), DIMS(2, 5), DIMS(2, 5), DIMS(1, 1), true}, /* empty */
      {4, DIMS(4, 5, 6, 3), DIMS(1, 0, 5, 1), DIMS(4, 5, 6, 3), DIMS(2, 4, 1, 5), false},
      {0, DIMS(0), DIMS(0), DIMS(0), DIMS(0), true},
      {2, DIMS(0, 3), DIMS(0, 1), DIMS(0, 3), DIMS(1, 1), true},
      {2, DIMS(9, 1), DIMS(8, 0), DIMS(9, 1), DIMS(7, 3), false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    spec s = {.k = T_SLICE, .rank = cases[i].r, .no_strides = cases[i].no_strides};
    memcpy(s.dims, cases[i].d, sizeof cases[i].d);
    memcpy(s.starts, cases[i].b, sizeof cases[i].b);
    memcpy(s.limits, cases[i].e, sizeof cases[i].e);
    memcpy(s.strides, cases[i].k, sizeof cases[i].k);
    check_all_dtypes(&s, (unsigned)i);
  }
}

TEST(layout_pad) {
  static const struct {
    int r;
    int64_t d[3];
    int n;
    lathe_pad_axis p[3];
  } cases[] = {
      {1, DIMS(3), 1, {{2, 1, 0}}},
      {1, DIMS(3), 1, {{-1, -1, 0}}},
      {2, DIMS(4, 3), 2, {{-1, 0, 1}, {2, -2, 2}}},
      {2, DIMS(4, 3), 1, {{1, 2, 0}}}, /* fewer axes than the rank */
      {1, DIMS(0), 1, {{2, 1, 3}}},
      {2, DIMS(2, 3), 2, {{-2, 0, 0}, {0, 1, 0}}}, /* an axis cropped away */
      {0, DIMS(0), 0, {{0, 0, 0}}},
      {3, DIMS(2, 3, 4), 3, {{1, 1, 1}, {-2, 3, 2}, {0, -3, 1}}},
      {1, DIMS(5), 1, {{-7, 4, 2}}}, /* cropping into interior padding */
      {2, DIMS(3, 1), 2, {{0, 0, 5}, {3, 3, 7}}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    spec s = {.k = T_PAD, .rank = cases[i].r, .n_axes = cases[i].n};
    memcpy(s.dims, cases[i].d, sizeof cases[i].d);
    memcpy(s.pad, cases[i].p, sizeof cases[i].p);
    check_all_dtypes(&s, (unsigned)i);
  }
}

TEST(layout_reverse) {
  for (int mask = 0; mask < 8; mask++) {
    spec s = {.k = T_REVERSE, .rank = 3, .dims = DIMS(2, 3, 5)};
    for (int a = 2; a >= 0; a--)
      if (mask >> a & 1) s.axes[s.n_axes++] = a;
    check_all_dtypes(&s, (unsigned)mask);
  }
  spec z = {.k = T_REVERSE, .rank = 2, .dims = DIMS(0, 3), .n_axes = 2, .axes = DIMS(0, 1)};
  check_all_dtypes(&z, 3);
  spec one = {.k = T_REVERSE, .rank = 1, .dims = DIMS(1), .n_axes = 1};
  check_all_dtypes(&one, 4);
  spec r4 = {.k = T_REVERSE, .rank = 4, .dims = DIMS(2, 1, 3, 4), .n_axes = 2, .axes = DIMS(3, 1)};
  check_all_dtypes(&r4, 5);
  spec r0 = {.k = T_REVERSE, .rank = 0};
  check_all_dtypes(&r0, 6);
}

/* Shapes large enough for threads and the tiled transpose. */
TEST(layout_large) {
  const lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_UINT8, LATHE_DTYPE_COMPLEX128, LATHE_DTYPE_FLOAT16};
  for (int d = 0; d < 4; d++) {
    spec t = {.k = T_TRANSPOSE, .rank = 2, .dims = DIMS(300, 701), .axes = DIMS(1, 0)};
    check_spec(&t, dts[d], 1);
    spec t3 = {.k = T_TRANSPOSE, .rank = 3, .dims = DIMS(20, 64, 130), .axes = DIMS(2, 1, 0)};
    check_spec(&t3, dts[d], 2);
    spec tb = {.k = T_TRANSPOSE, .rank = 3, .dims = DIMS(3, 100, 70), .axes = DIMS(0, 2, 1)}; /* tiled, 2 bands x 3 planes */
    check_spec(&tb, dts[d], 8);
    spec bc = {.k = T_BROADCAST, .rank = 1, .dims = DIMS(1000), .out_rank = 2, .out_dims = DIMS(300, 1000), .n_axes = 1, .axes = DIMS(1)};
    check_spec(&bc, dts[d], 3);
    spec bc0 = {.k = T_BROADCAST, .rank = 1, .dims = DIMS(1000), .out_rank = 2, .out_dims = DIMS(1000, 300), .n_axes = 1, .axes = DIMS(0)};
    check_spec(&bc0, dts[d], 4);
    spec rv = {.k = T_REVERSE, .rank = 2, .dims = DIMS(500, 301), .n_axes = 2, .axes = DIMS(0, 1)};
    check_spec(&rv, dts[d], 5);
    spec sl = {.k = T_SLICE, .rank = 2, .dims = DIMS(800, 600), .starts = DIMS(3, 1), .limits = DIMS(797, 600), .strides = DIMS(1, 2)};
    check_spec(&sl, dts[d], 6);
    spec pd = {.k = T_PAD, .rank = 2, .dims = DIMS(400, 300), .n_axes = 2, .pad = {{3, -2, 1}, {-5, 7, 0}}};
    check_spec(&pd, dts[d], 7);
  }
}

/* ---- Concatenate ---- */
static void check_concat(lathe_dtype dt, int rank, int axis, int n, const int64_t (*dims)[4], unsigned seed) {
  lathe_shape xs[8];
  void *xd[8];
  char label[120];
  snprintf(label, sizeof label, "Concatenate %s rank %d axis %d of %d", lathe_dtype_name(dt), rank, axis, n);
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("concat", &fn);
  lathe_value_t ps[8] = {0}, r = NULL;
  for (int k = 0; k < n; k++) {
    xs[k] = tst_shape(dt, rank, dims[k]);
    xd[k] = tst_alloc_for(&xs[k]);
    tst_fill(xd[k], dt, lathe_shape_size(&xs[k]), seed + (unsigned)k);
    ps[k] = tst_param(fn, NULL, xs[k]);
  }
  CHECK_OK(lathe_concatenate(fn, axis, ps, n, &r));
  void *got = NULL;
  lathe_shape os;
  if (r) {
    CHECK_OK(lathe_function_return(fn, &r, 1));
    CHECK_OK(tst_run(b, (const void *const *)xd, n, &got, 1, &os));
  }
  if (got) {
    int64_t on = lathe_shape_size(&os);
    void *want = tst_alloc_for(&os);
    for (int64_t o = 0; o < on; o++) {
      int64_t c[LATHE_MAX_RANK];
      tst_unravel(o, os.rank, os.dims, c);
      int k = 0;
      if (rank)
        while (c[axis] >= xs[k].dims[axis]) c[axis] -= xs[k].dims[axis], k++;
      copy_elem(want, dt, o, xd[k], tst_ravel(rank, xs[k].dims, c));
    }
    tst_expect_close(label, got, want, dt, on, 0);
    free(want);
    tst_free_output(got);
  }
  for (int k = 0; k < n; k++) free(xd[k]);
  lathe_builder_free(b);
}

TEST(layout_concatenate) {
  static const int64_t three[3][4] = {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}};
  for (int d = 0; d < tst_n_all_dtypes; d++) {
    lathe_dtype dt = tst_all_dtypes[d];
    for (int axis = 0; axis < 3; axis++) {
      int64_t dims[3][4];
      memcpy(dims, three, sizeof dims);
      dims[0][axis] = 1, dims[1][axis] = 0, dims[2][axis] = 5; /* one operand empty */
      check_concat(dt, 3, axis, 3, (const int64_t(*)[4])dims, (unsigned)(d + axis));
    }
    static const int64_t r1[4][4] = {{3}, {1}, {4}, {2}};
    check_concat(dt, 1, 0, 4, r1, (unsigned)d);
    static const int64_t single[1][4] = {{3, 5}};
    check_concat(dt, 2, 1, 1, single, (unsigned)d);
    static const int64_t r4[2][4] = {{2, 1, 3, 2}, {2, 1, 3, 7}};
    check_concat(dt, 4, 3, 2, r4, (unsigned)d);
  }
  static const int64_t big[2][4] = {{300, 500}, {300, 301}};
  check_concat(LATHE_DTYPE_FLOAT32, 2, 1, 2, big, 9);
}

/* ---- Iota ---- */
TEST(layout_iota) {
  static const struct {
    int r;
    int64_t d[4];
  } shapes[] = {{1, DIMS(5)}, {2, DIMS(3, 4)}, {3, DIMS(2, 3, 4)}, {2, DIMS(0, 3)}, {4, DIMS(2, 1, 3, 5)}, {1, DIMS(100)}};
  for (int d = 0; d < tst_n_all_dtypes; d++) {
    lathe_dtype dt = tst_all_dtypes[d];
    if (dt == LATHE_DTYPE_BOOL) continue;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
      for (int axis = 0; axis < shapes[si].r; axis++) {
        lathe_shape s = tst_shape(dt, shapes[si].r, shapes[si].d);
        char label[120], sb[LATHE_SHAPE_STR_MAX];
        snprintf(label, sizeof label, "Iota %s axis %d", lathe_shape_str(&s, sb, sizeof sb), axis);
        lathe_function_t fn;
        lathe_builder_t b = tst_builder("iota", &fn);
        lathe_value_t r = NULL;
        CHECK_OK(lathe_iota(fn, &s, axis, &r));
        void *got = NULL;
        if (r) {
          CHECK_OK(lathe_function_return(fn, &r, 1));
          CHECK_OK(tst_run(b, NULL, 0, &got, 1, NULL));
        }
        if (got) {
          int64_t n = lathe_shape_size(&s);
          void *want = tst_alloc_for(&s);
          for (int64_t i = 0; i < n; i++) {
            int64_t c[LATHE_MAX_RANK];
            tst_unravel(i, s.rank, s.dims, c);
            tst_set(want, dt, i, (double)c[axis]); /* sub-byte dtypes wrap in tst_set */
          }
          tst_expect_close(label, got, want, dt, n, 0);
          free(want);
          tst_free_output(got);
        }
        lathe_builder_free(b);
      }
  }
  /* large: threaded */
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 700, 300);
  lathe_builder_t b = NULL;
  CHECK_OK(tst_builder_new("iota", &b));
  lathe_value_t r = NULL;
  CHECK_OK(lathe_iota(lathe_builder_main(b), &s, 0, &r));
  CHECK_OK(lathe_function_return(lathe_builder_main(b), &r, 1));
  void *got = NULL;
  CHECK_OK(tst_run(b, NULL, 0, &got, 1, NULL));
  int bad = 0;
  for (int64_t i = 0; got && i < 700 * 300; i++) bad += ((float *)got)[i] != (float)(i / 300);
  CHECK(got && bad == 0, "large Iota: %d mismatches", bad);
  tst_free_output(got);
  lathe_builder_free(b);
}
