/* fuzz_api.c -- a libFuzzer harness over the public C API (include/lathe.h).
 *
 * The input bytes are decoded into a sequence of builder calls on one builder: parameters and
 * constants with random shapes (huge, negative, dynamic and beyond-the-limit dims included),
 * every op family with random operands, axes and attributes, closures, Call/If/While/Sort,
 * Return; then Compile, buffers from host data (wrong sizes and shapes included), Execute with
 * random donation (twice: the second run meets donated buffers), and downloads. Every call must
 * return OK or a status of an expected code, never crash, leak or trip a sanitizer; a value that
 * builds must have a sane shape within the size limit. A failed execution must leave the backend
 * usable: a small reference graph runs after every input and must give its exact results.
 *
 * Built by `make fuzz` (clang -fsanitize=fuzzer,address,undefined) as build-fuzz/fuzz_api;
 * scripts/test.sh runs it for a minute from tests/fuzz/corpus. Any input replays with
 * `build-fuzz/fuzz_api FILE`. The first byte picks: in its low nibble, how many of the last
 * bytes steer the execution step (so that graphs and their runs mutate independently); bit 4,
 * the backend (fused or not); bit 5, a foreign builder's value among the operands; bit 6, the
 * "extremes" mode of sizes.
 *
 * What keeps it fast and safe: AddressSanitizer returns NULL for allocations over 64 MiB (the
 * engine answers RESOURCE_EXHAUSTED), host data is made only for inputs up to 1 MiB, and graphs
 * whose estimated work exceeds WORK_BUDGET, or that hold a While whose termination the harness
 * did not build itself, are compiled but not executed. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lathe.h"

const char *__asan_default_options(void);
__attribute__((used)) const char *__asan_default_options(void) {
  return "allocator_may_return_null=1:max_allocation_size_mb=64:malloc_limit_mb=0";
}

#define MAX_VALUES 48
#define MAX_FNS 8
#define MAX_PARAMS 4
#define WORK_BUDGET 4e6 /* estimated element operations per execution (ASan, coverage: ~1 us each) */
#define HOST_LIMIT (1 << 20)

/* ---- the input ---- */
typedef struct {
  const uint8_t *p;
  size_t n, i;
} input;

static uint8_t u8(input *in) { return in->i < in->n ? in->p[in->i++] : 0; }
static bool exhausted(const input *in) { return in->i >= in->n; }
/* An int in [lo, hi] (hi - lo < 256 gives one byte's worth of choice). */
static int in_range(input *in, int lo, int hi) { return hi <= lo ? lo : lo + (int)(u8(in) % (unsigned)(hi - lo + 1)); }
static bool coin(input *in) { return u8(in) & 1; }

/* Deterministic pseudo-random data, seeded from the input, for tensor contents. */
static uint64_t rng;
static uint64_t rnd(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

static const lathe_dtype dtypes[] = {
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) LATHE_DTYPE_##ENUM,
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
};
#define N_DTYPES (int)(sizeof dtypes / sizeof dtypes[0])

static lathe_dtype any_dtype(input *in) {
  uint8_t b = u8(in);
  if (b < 100) return LATHE_DTYPE_FLOAT32;
  if (b < 240) return dtypes[b % N_DTYPES];
  return (lathe_dtype)(b % 40 - 4); /* invalid ids too */
}

static const int64_t huge_dims[] = {
    (int64_t)1 << 20, ((int64_t)1 << 20) + 1, (int64_t)1 << 16, (int64_t)1 << 31, (int64_t)1 << 32,
    (int64_t)1 << 40, (int64_t)1 << 61, ((int64_t)1 << 62) - 1, (int64_t)1 << 62, INT64_MAX,
    (int64_t)3 << 59, 1000003, (int64_t)1 << 30, ((int64_t)1 << 31) - 1, (int64_t)1 << 48, 4096,
};

/* Mostly small sizes; sometimes dynamic, negative or huge. In the "extremes" mode (a bit of the
 * first byte) sizes are mostly 0, 1 or huge: empty tensors with huge axes are valid and cost no
 * memory, so they reach kernels that must not walk their nominal sizes. */
static bool extremes;
static int64_t any_dim(input *in) {
  uint8_t b = u8(in);
  if (extremes && b < 200) return b < 60 ? 0 : b < 90 ? 1 : b < 110 ? b % 6 : huge_dims[b % (sizeof huge_dims / sizeof huge_dims[0])];
  if (b < 170) return b % 6;
  if (b < 200) return 6 + b % 12;
  if (b < 212) return -1;
  if (b < 218) return b % 3 == 0 ? -2 : b % 3 == 1 ? INT64_MIN : -((int64_t)1 << 62);
  return huge_dims[b % (sizeof huge_dims / sizeof huge_dims[0])];
}

static const char *const axis_names[] = {"a", "b", "batch", "", NULL};

static lathe_shape any_shape(input *in) {
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = any_dtype(in);
  uint8_t r = u8(in);
  s.rank = r < 240 ? r % 5 : r < 250 ? r % LATHE_MAX_RANK : r == 250 ? LATHE_MAX_RANK + 1 : r == 251 ? -1 : LATHE_MAX_RANK;
  int rank = s.rank < 0 ? 0 : s.rank > LATHE_MAX_RANK ? LATHE_MAX_RANK : s.rank;
  for (int i = 0; i < rank; i++) {
    s.dims[i] = s.rank > 4 && u8(in) < 200 ? 1 : any_dim(in);
    if (s.dims[i] == -1 || u8(in) > 240) s.axis_names[i] = axis_names[in_range(in, 0, 4)];
  }
  return s;
}

/* ---- the world of one input ---- */
typedef struct {
  lathe_function_t fn;
  int parent;                         /* index, -1 for top level */
  lathe_value_t templates[MAX_PARAMS]; /* values whose shapes its parameters copied */
  lathe_value_t params[MAX_PARAMS];
  int n_params;
  bool returned;
  double work;
} fn_info;

typedef struct {
  lathe_backend_t be;
  lathe_builder_t b, other;
  lathe_value_t foreign;
  fn_info fns[MAX_FNS];
  int n_fns, cur;
  lathe_value_t vals[MAX_VALUES];
  int n_vals;
  bool no_exec;
  int ops_built;
} world;

static bool trace; /* FUZZ_API_TRACE=1: print every call that built */

static void fail(const char *what, int line, lathe_status_t st) {
  fprintf(stderr, "fuzz_api.c:%d: %s: %s: %s\n", line, what, lathe_status_code_name(lathe_status_code_of(st)),
          lathe_status_message(st));
  abort();
}

/* The element count for work estimates: dynamic axes count 8, and size-0 axes 1 (kernels may
 * walk the other axes of an empty tensor). */
static double elems(const lathe_shape *s) {
  double n = 1;
  for (int i = 0; i < s->rank && i < LATHE_MAX_RANK; i++) n *= s->dims[i] < 0 ? 8 : s->dims[i] ? (double)s->dims[i] : 1;
  return n;
}

static bool shape_of(lathe_value_t v, lathe_shape *s) {
  memset(s, 0, sizeof *s);
  lathe_status_t st = v ? lathe_value_shape(v, s) : NULL;
  if (st) {
    lathe_status_free(st);
    return false;
  }
  return v != NULL;
}

static int fn_index(const world *w, lathe_function_t f) {
  for (int i = 0; i < w->n_fns; i++)
    if (w->fns[i].fn == f) return i;
  return -1;
}

/* A value that built must have a sane shape within the size limit. */
static void check_value(lathe_value_t v, int line) {
  lathe_shape s;
  lathe_status_t st = lathe_value_shape(v, &s);
  if (st) fail("shape of a value that built", line, st);
  bool ok = lathe_dtype_is_valid(s.dtype) && s.rank >= 0 && s.rank <= LATHE_MAX_RANK;
  for (int i = 0; ok && i < s.rank; i++) ok = s.dims[i] >= -1 && (s.dims[i] >= 0 || (s.axis_names[i] && *s.axis_names[i]));
  if (ok && !lathe_shape_is_dynamic(&s)) ok = lathe_shape_byte_size(&s) >= 0;
  if (!ok) {
    fprintf(stderr, "fuzz_api.c:%d: a value built with an insane shape (%s, rank %d)\n", line,
            lathe_dtype_name(s.dtype), s.rank);
    abort();
  }
}

static void add_value(world *w, lathe_value_t v) {
  if (w->n_vals < MAX_VALUES) w->vals[w->n_vals++] = v;
  else w->vals[rnd() % MAX_VALUES] = v;
}

/* A builder call's status: OK (then its results join the pool and its work is counted) or an
 * error of a code a builder may return. */
static bool built(world *w, lathe_status_t st, int line, lathe_value_t *outs, int n_out, double work) {
  if (st) {
    lathe_status_code c = lathe_status_code_of(st);
    if ((c != LATHE_STATUS_INVALID_ARGUMENT && c != LATHE_STATUS_UNIMPLEMENTED && c != LATHE_STATUS_RESOURCE_EXHAUSTED) ||
        !*lathe_status_message(st))
      fail("builder call", line, st);
    lathe_status_free(st);
    return false;
  }
  int f = -1;
  if (trace) fprintf(stderr, "built at line %d: work %g:", line, work);
  for (int i = 0; i < n_out; i++) {
    if (trace && outs[i]) {
      lathe_shape s;
      char buf[256];
      size_t k = 0;
      if (!lathe_value_shape(outs[i], &s)) {
        k += (size_t)snprintf(buf, sizeof buf, " %s[", lathe_dtype_name(s.dtype));
        for (int d = 0; d < s.rank && k < sizeof buf; d++) k += (size_t)snprintf(buf + k, sizeof buf - k, "%lld,", (long long)s.dims[d]);
        if (k < sizeof buf) snprintf(buf + k, sizeof buf - k, "]");
        fprintf(stderr, "%s", buf);
      }
    }
    if (!outs[i]) {
      fprintf(stderr, "fuzz_api.c:%d: OK without a value\n", line);
      abort();
    }
    check_value(outs[i], line);
    add_value(w, outs[i]);
    f = fn_index(w, lathe_value_function(outs[i]));
  }
  if (f >= 0) w->fns[f].work += work;
  if (trace) fprintf(stderr, "\n");
  w->ops_built++;
  return true;
}
#define BUILT1(call, work) (out = NULL, built(w, (call), __LINE__, &out, 1, (work)))
#define BUILTN(call, n, work) built(w, (call), __LINE__, outs, (n), (work))

static lathe_value_t pick(world *w, input *in) {
  uint8_t b = u8(in);
  if (b == 255) return NULL;
  if (b == 254) return w->foreign;
  if (!w->n_vals) return NULL;
  return w->vals[w->n_vals - 1 - b % w->n_vals]; /* recent values are likelier */
}

/* An axis list for rank r: often valid (in order, reversed, or a prefix), sometimes not. */
static int any_axes(input *in, int *axes, int r) {
  int n = in_range(in, 0, r + 1 > LATHE_MAX_RANK ? LATHE_MAX_RANK : r + 1);
  uint8_t mode = u8(in) % 8;
  for (int i = 0; i < n; i++) {
    if (mode < 3) axes[i] = i;
    else if (mode == 3) axes[i] = n - 1 - i;
    else if (mode < 6) axes[i] = r ? (int)(u8(in) % (unsigned)r) : 0;
    else axes[i] = in_range(in, -2, r + 1);
  }
  return u8(in) == 255 ? -1 : n;
}

static void any_dims(input *in, int64_t *d, int n) {
  for (int i = 0; i < n; i++) d[i] = any_dim(in);
}

/* Host bytes for a shape (NULL when it has none or is too large), filled pseudo-randomly; index
 * dtypes get mostly small values so that gathers and slices hit their ranges. */
static void *host_data(const lathe_shape *s, int64_t *nbytes) {
  *nbytes = lathe_shape_byte_size(s);
  if (*nbytes < 0 || *nbytes > HOST_LIMIT) return NULL;
  uint8_t *d = malloc((size_t)*nbytes + 1);
  if (!d) return NULL;
  bool small = rnd() % 2;
  for (int64_t k = 0; k < *nbytes; k++) d[k] = small ? (uint8_t)(rnd() % 4) : (uint8_t)rnd();
  return d;
}

/* ---- the actions ---- */
static void act_parameter(world *w, input *in, lathe_function_t fn) {
  lathe_shape s = any_shape(in);
  char name[16];
  snprintf(name, sizeof name, "x%d", in_range(in, 0, 5));
  lathe_value_t out;
  BUILT1(lathe_parameter(fn, coin(in) ? name : NULL, &s, &out), 0);
}

static void act_constant(world *w, input *in, lathe_function_t fn) {
  lathe_shape s = any_shape(in);
  int64_t nb;
  void *d = host_data(&s, &nb);
  size_t n = nb < 0 ? (size_t)in_range(in, 0, 8) : (size_t)nb;
  uint8_t k = u8(in);
  if (k > 240) n += 1;
  if (k == 239 && n) n -= 1;
  uint8_t tiny[16] = {0};
  lathe_value_t out;
  BUILT1(lathe_constant(fn, &s, d ? d : (k & 1 ? tiny : NULL), d || n <= sizeof tiny ? n : 0, &out), 0);
  free(d);
}

static void act_elementwise(world *w, input *in, lathe_function_t fn) {
  lathe_value_t a = pick(w, in), b = pick(w, in), c = pick(w, in), out;
  lathe_shape s;
  double work = shape_of(a, &s) ? elems(&s) : 1;
  lathe_op op = (lathe_op)in_range(in, -1, LATHE_OP_COUNT);
  switch (u8(in) % 8) {
    case 0: BUILT1(lathe_unary(fn, op, a, &out), work); break;
    case 1: BUILT1(lathe_binary(fn, op, a, b, &out), 2 * work); break;
    case 2: BUILT1(lathe_convert_dtype(fn, a, any_dtype(in), &out), work); break;
    case 3: BUILT1(lathe_bitcast(fn, a, any_dtype(in), &out), work); break;
    case 4:
      if (s.rank && coin(in)) { /* operands that broadcast with a: its shape with 1s, new parameters */
        lathe_shape cs = s, fs = s;
        uint8_t m = u8(in);
        cs.dtype = LATHE_DTYPE_BOOL;
        for (int i = 0; i < s.rank; i++) {
          if (m >> (i % 4) & 1) cs.dims[i] = 1, cs.axis_names[i] = NULL;
          if (m >> (4 + i % 4) & 1) fs.dims[i] = 1, fs.axis_names[i] = NULL;
        }
        if (!BUILT1(lathe_parameter(fn, NULL, &cs, &out), 0)) break;
        b = out;
        if (coin(in) && BUILT1(lathe_parameter(fn, NULL, &fs, &out), 0)) c = out;
        BUILT1(lathe_where(fn, b, a, c, &out), 3 * work);
        break;
      }
      BUILT1(lathe_where(fn, a, b, c, &out), 3 * work);
      break;
    case 5: BUILT1(lathe_clamp(fn, a, b, c, &out), 3 * work); break;
    case 6: BUILT1(lathe_add(fn, a, b, &out), 2 * work); break;
    default: BUILT1(lathe_neg(fn, a, &out), work); break;
  }
}

static void act_reduce(world *w, input *in, lathe_function_t fn) {
  lathe_value_t x = pick(w, in), out;
  lathe_shape s;
  double work = shape_of(x, &s) ? elems(&s) : 1;
  int axes[LATHE_MAX_RANK + 1], n = any_axes(in, axes, s.rank);
  if (coin(in)) {
    lathe_op op = (lathe_op)in_range(in, LATHE_OP_REDUCE_SUM - 1, LATHE_OP_ARG_MIN_MAX + 1);
    BUILT1(lathe_reduce(fn, op, x, n < 0 ? NULL : axes, n < 0 ? 1 : n, &out), work);
  } else {
    BUILT1(lathe_arg_min_max(fn, x, in_range(in, -1, s.rank), any_dtype(in), coin(in), &out), work);
  }
}

static void act_layout(world *w, input *in, lathe_function_t fn) {
  lathe_value_t x = pick(w, in), y = pick(w, in), out;
  lathe_shape s;
  double work = shape_of(x, &s) ? elems(&s) : 1;
  int axes[LATHE_MAX_RANK + 1], n = any_axes(in, axes, s.rank);
  int64_t d0[LATHE_MAX_RANK + 1], d1[LATHE_MAX_RANK + 1], d2[LATHE_MAX_RANK + 1];
  switch (u8(in) % 9) {
    case 0: {
      int r = in_range(in, -1, 5);
      any_dims(in, d0, r < 0 ? 0 : r);
      if (coin(in) && r >= 0) { /* often a reshape that keeps the element count */
        for (int i = 0; i < r; i++) d0[i] = 1;
        double e = elems(&s);
        if (r) d0[r - 1] = e < 4e18 ? (int64_t)e : 1;
      }
      BUILT1(lathe_reshape(fn, x, d0, r, &out), work);
      break;
    }
    case 1: BUILT1(lathe_transpose(fn, x, axes, n < 0 ? 1 : n, &out), work); break;
    case 2: BUILT1(lathe_reverse(fn, x, axes, n < 0 ? 0 : n, &out), work); break;
    case 3: {
      lathe_shape t = any_shape(in);
      if (coin(in)) t.dtype = s.dtype;
      if (coin(in)) { /* keep x's dims on increasing axes, add some */
        t.rank = s.rank + in_range(in, 0, 2);
        if (t.rank > LATHE_MAX_RANK) t.rank = LATHE_MAX_RANK;
        for (int i = 0; i < t.rank; i++) t.dims[i] = i < s.rank ? s.dims[i] : any_dim(in), t.axis_names[i] = i < s.rank ? s.axis_names[i] : NULL;
        for (int i = 0; i < s.rank; i++) axes[i] = i;
        n = s.rank;
      }
      BUILT1(lathe_broadcast_in_dim(fn, x, coin(in) || u8(in) ? &t : NULL, n < 0 ? NULL : axes, n < 0 ? 1 : n, &out),
             elems(&t) > work ? elems(&t) : work);
      break;
    }
    case 4: {
      lathe_value_t ops[4] = {x, y, pick(w, in), x};
      BUILT1(lathe_concatenate(fn, in_range(in, -1, s.rank), ops, in_range(in, 0, 4), &out), 4 * work);
      break;
    }
    case 5: {
      for (int i = 0; i <= LATHE_MAX_RANK; i++) {
        int64_t d = i < s.rank ? s.dims[i] : 1;
        uint8_t m = u8(in);
        d0[i] = m < 128 ? 0 : m < 200 ? (d > 0 ? (int64_t)(rnd() % (uint64_t)d) : 0) : any_dim(in);
        d1[i] = m < 100 ? d : m < 200 ? d0[i] + (d > d0[i] ? (int64_t)(rnd() % (uint64_t)(d - d0[i] + 1)) : 0) : any_dim(in);
        d2[i] = m < 150 ? 1 : any_dim(in);
      }
      BUILT1(lathe_slice(fn, x, d0, d1, coin(in) ? NULL : d2, in_range(in, 0, 1) ? s.rank : in_range(in, -1, 17), &out), work);
      break;
    }
    case 6: {
      lathe_pad_axis p[LATHE_MAX_RANK + 1];
      for (int i = 0; i <= LATHE_MAX_RANK; i++) {
        uint8_t m = u8(in);
        p[i].start = m < 200 ? in_range(in, -2, 3) : any_dim(in);
        p[i].end = m < 200 ? in_range(in, -2, 3) : any_dim(in);
        p[i].interior = m < 220 ? in_range(in, 0, 2) : any_dim(in);
      }
      BUILT1(lathe_pad(fn, x, y, p, in_range(in, -1, s.rank + 1), &out), 4 * work);
      break;
    }
    case 7: {
      lathe_shape t = any_shape(in);
      BUILT1(lathe_iota(fn, u8(in) == 255 ? NULL : &t, in_range(in, -1, t.rank < 0 ? 0 : t.rank), &out), elems(&t));
      break;
    }
    default: {
      lathe_value_t starts[LATHE_MAX_RANK + 1];
      for (int i = 0; i <= LATHE_MAX_RANK; i++) starts[i] = pick(w, in), d0[i] = in_range(in, -1, 4);
      int r = coin(in) ? s.rank : in_range(in, -1, 17);
      if (coin(in)) BUILT1(lathe_dynamic_slice(fn, x, starts, r, d0, r, &out), work);
      else BUILT1(lathe_dynamic_update_slice(fn, x, y, starts, r, &out), work);
    }
  }
}

static double prod_axes(const lathe_shape *s, const int *axes, int n) {
  double p = 1;
  for (int i = 0; i < n; i++)
    if (axes[i] >= 0 && axes[i] < s->rank) p *= s->dims[axes[i]] < 0 ? 8 : s->dims[axes[i]] ? (double)s->dims[axes[i]] : 1;
  return p;
}

static void act_dot(world *w, input *in, lathe_function_t fn) {
  lathe_value_t l = pick(w, in), r = pick(w, in), out;
  lathe_shape ls, rs;
  shape_of(l, &ls), shape_of(r, &rs);
  int lc[LATHE_MAX_RANK + 1], lb[LATHE_MAX_RANK + 1], rc[LATHE_MAX_RANK + 1], rb[LATHE_MAX_RANK + 1];
  int nlc = in_range(in, 0, 2), nlb = in_range(in, 0, 1);
  for (int i = 0; i < 2; i++) {
    lc[i] = in_range(in, -1, ls.rank), rc[i] = in_range(in, -1, rs.rank);
    lb[i] = in_range(in, -1, ls.rank), rb[i] = in_range(in, -1, rs.rank);
  }
  if (coin(in)) { /* a plain matrix product when the ranks allow it */
    nlc = 1, nlb = 0, lc[0] = ls.rank - 1, rc[0] = 0;
  }
  lathe_dot_config cfg = {coin(in) ? LATHE_DTYPE_INVALID : any_dtype(in), coin(in) ? LATHE_DTYPE_INVALID : any_dtype(in)};
  double work = 1;
  bool ok = BUILT1(lathe_dot_general(fn, l, lc, nlc, lb, nlb, r, rc, coin(in) ? nlc : in_range(in, 0, 2), rb, nlb,
                                     coin(in) ? NULL : &cfg, &out),
                   0);
  if (ok) {
    lathe_shape os;
    shape_of(out, &os);
    work = elems(&os) * prod_axes(&ls, lc, nlc) + elems(&ls) + elems(&rs);
    w->fns[fn_index(w, fn)].work += work;
  }
}

static void act_conv_window(world *w, input *in, lathe_function_t fn) {
  lathe_value_t x = pick(w, in), k = pick(w, in), out;
  lathe_shape xs, ks;
  shape_of(x, &xs), shape_of(k, &ks);
  int ns = xs.rank - 2 < 0 ? 0 : xs.rank - 2;
  int64_t a0[LATHE_MAX_RANK + 1], a1[LATHE_MAX_RANK + 1], a2[LATHE_MAX_RANK + 1], a3[LATHE_MAX_RANK + 1];
  lathe_padding pads[LATHE_MAX_RANK + 1];
  for (int i = 0; i <= LATHE_MAX_RANK; i++) {
    uint8_t m = u8(in);
    a0[i] = m < 200 ? in_range(in, 1, 3) : any_dim(in);
    a1[i] = m < 210 ? in_range(in, 1, 2) : any_dim(in);
    a2[i] = m < 220 ? 1 : any_dim(in);
    a3[i] = m < 230 ? 1 : any_dim(in);
    pads[i].low = m < 180 ? in_range(in, 0, 2) : any_dim(in);
    pads[i].high = m < 180 ? in_range(in, 0, 2) : any_dim(in);
  }
  uint8_t kind = u8(in) % 3;
  if (kind == 0) {
    int sp[LATHE_MAX_RANK];
    for (int i = 0; i < LATHE_MAX_RANK; i++) sp[i] = i + 2;
    lathe_conv_axes ax = {0, 1, sp, ns, 1, 0, sp, ns, 0, 1, sp, ns};
    if (u8(in) > 200) ax.input_channels = in_range(in, -1, 3), ax.kernel_output_channels = in_range(in, -1, 3);
    lathe_conv_params p = {a1, coin(in) ? ns : 0, pads, coin(in) ? ns : 0, a2, coin(in) ? ns : 0, a3, coin(in) ? ns : 0,
                           u8(in) > 200 ? any_dim(in) : 0, u8(in) > 220 ? any_dim(in) : 0};
    if (BUILT1(lathe_conv_general(fn, x, k, u8(in) == 255 ? NULL : &ax, coin(in) ? NULL : &p, &out), 0)) {
      lathe_shape os;
      shape_of(out, &os);
      w->fns[fn_index(w, fn)].work += elems(&os) * (elems(&ks) + 4 * os.rank) + elems(&xs); /* im2col walks every axis */
    }
  } else {
    int r = xs.rank;
    lathe_window_params p = {a0, coin(in) ? r : 0, a1, coin(in) ? r : 0, a2, coin(in) ? r : 0, a3, coin(in) ? r : 0,
                             pads, coin(in) ? r : 0};
    double win = 1;
    for (int i = 0; i < r && i < LATHE_MAX_RANK; i++) win *= p.n_window_dims && a0[i] > 1 ? (double)a0[i] : 1;
    if (kind == 1) {
      lathe_op op = (lathe_op)in_range(in, LATHE_OP_REDUCE_SUM - 1, LATHE_OP_REDUCE_MIN + 1);
      BUILT1(lathe_reduce_window(fn, op, x, coin(in) ? NULL : &p, &out), (elems(&xs) + 1) * win * 4);
    } else {
      lathe_op op = (lathe_op)in_range(in, LATHE_OP_SELECT_AND_SCATTER_MAX, LATHE_OP_SELECT_AND_SCATTER_SUM + 1);
      BUILT1(lathe_select_and_scatter(fn, op, x, k, coin(in) ? NULL : &p, &out), (elems(&xs) + elems(&ks) + 1) * win * 4);
    }
  }
}

static void act_index(world *w, input *in, lathe_function_t fn) {
  lathe_value_t x = pick(w, in), idx = pick(w, in), upd = pick(w, in), out;
  lathe_shape xs, is;
  shape_of(x, &xs), shape_of(idx, &is);
  int a0[LATHE_MAX_RANK + 1], a1[LATHE_MAX_RANK + 1], a2[LATHE_MAX_RANK + 1];
  int n0 = any_axes(in, a0, xs.rank + is.rank), n1 = any_axes(in, a1, xs.rank), n2 = any_axes(in, a2, xs.rank);
  n0 = n0 < 0 ? 0 : n0, n1 = n1 < 0 ? 0 : n1, n2 = n2 < 0 ? 0 : n2;
  int iva = in_range(in, -1, is.rank + 1);
  if (coin(in)) { /* the common gather: index vectors last, whole rows */
    iva = is.rank > 0 ? is.rank - 1 : 0;
    n2 = is.rank > 0 && is.dims[is.rank - 1] >= 0 && is.dims[is.rank - 1] <= xs.rank ? (int)is.dims[is.rank - 1] : 1;
    for (int i = 0; i < n2; i++) a2[i] = i;
    n1 = n2;
    for (int i = 0; i < n1; i++) a1[i] = i;
    n0 = xs.rank - n1 < 0 ? 0 : xs.rank - n1;
    for (int i = 0; i < n0; i++) a0[i] = (is.rank > 0 ? is.rank - 1 : 0) + i;
  }
  int64_t sizes[LATHE_MAX_RANK + 1];
  for (int i = 0; i <= LATHE_MAX_RANK; i++) {
    int64_t d = i < xs.rank ? xs.dims[i] : 1;
    uint8_t m = u8(in);
    sizes[i] = m < 100 ? (i < n1 ? 1 : d) : m < 200 ? (d > 0 ? (int64_t)(rnd() % (uint64_t)(d + 1)) : d) : any_dim(in);
  }
  double work = elems(&xs) + elems(&is) * 4;
  if (coin(in)) {
    if (BUILT1(lathe_gather(fn, x, idx, iva, a0, n0, a1, n1, a2, n2, sizes, coin(in) ? xs.rank : in_range(in, -1, 17),
                            coin(in), &out),
               0)) {
      lathe_shape os;
      shape_of(out, &os);
      w->fns[fn_index(w, fn)].work += elems(&os) + work;
    }
  } else {
    lathe_op op = (lathe_op)in_range(in, LATHE_OP_SCATTER_SUM - 1, LATHE_OP_SCATTER_MIN + 1);
    lathe_shape us;
    shape_of(upd, &us);
    BUILT1(lathe_scatter(fn, op, x, idx, upd, iva, a0, n0, a1, n1, a2, n2, coin(in), coin(in), &out),
           work + elems(&us) * 4);
  }
}

static void act_numeric(world *w, input *in, lathe_function_t fn) {
  lathe_value_t x = pick(w, in), a = pick(w, in), b = pick(w, in), c = pick(w, in), d = pick(w, in), out, outs[3];
  lathe_shape xs;
  double work = shape_of(x, &xs) ? elems(&xs) : 1;
  float eps = u8(in) > 240 ? -1.0f : 1e-3f;
  int axis = in_range(in, -1, xs.rank);
  switch (u8(in) % 6) {
    case 0: {
      lathe_shape s = any_shape(in);
      BUILTN(lathe_rng_bit_generator(fn, x, u8(in) == 255 ? NULL : &s, outs), 2, elems(&s) * 2);
      break;
    }
    case 1: {
      int64_t len[4];
      int nl = in_range(in, 0, 4);
      for (int i = 0; i < 4; i++) {
        int ax = xs.rank - nl + i;
        len[i] = u8(in) < 200 && ax >= 0 && ax < xs.rank ? xs.dims[ax] : any_dim(in);
      }
      BUILT1(lathe_fft(fn, x, (lathe_fft_type)in_range(in, -1, 4), len, nl, &out), work * 64);
      break;
    }
    case 2: BUILT1(lathe_batch_norm_for_inference(fn, x, a, b, c, d, eps, axis, &out), work * 4); break;
    case 3: BUILTN(lathe_batch_norm_for_training(fn, x, a, b, eps, axis, outs), 3, work * 4); break;
    case 4: BUILTN(lathe_batch_norm_gradient(fn, x, a, b, c, d, eps, axis, outs), 3, work * 6); break;
    default: {
      /* per-feature vectors of the right shape, so that batch norm also builds */
      lathe_shape v;
      memset(&v, 0, sizeof v);
      v.dtype = xs.dtype, v.rank = 1, v.dims[0] = axis >= 0 && axis < xs.rank ? xs.dims[axis] : 1;
      int64_t nb;
      void *h = host_data(&v, &nb);
      if (h) BUILT1(lathe_constant(fn, &v, h, (size_t)nb, &out), 0);
      free(h);
    }
  }
}

static void act_fused(world *w, input *in, lathe_function_t fn) {
  lathe_value_t x = pick(w, in), y = pick(w, in), z = pick(w, in), out, outs[3];
  lathe_shape xs, ys;
  double work = shape_of(x, &xs) ? elems(&xs) : 1;
  shape_of(y, &ys);
  int axes[LATHE_MAX_RANK + 1], n = any_axes(in, axes, xs.rank);
  switch (u8(in) % 13) {
    case 0: BUILT1(lathe_fused_softmax(fn, x, in_range(in, -1, xs.rank), &out), work * 4); break;
    case 10: BUILT1(lathe_fused_activation(fn, x, (lathe_activation)in_range(in, -1, 12), &out), work * 4); break;
    case 11:
      BUILT1(lathe_fused_activation_vjp(fn, coin(in) ? NULL : x, coin(in) ? NULL : y, z,
                                        (lathe_activation)in_range(in, -1, 12), &out),
             work * 4);
      break;
    case 12: {
      lathe_value_t bias = coin(in) ? NULL : pick(w, in);
      BUILTN(lathe_fused_dense_vjp(fn, x, y, bias, z, pick(w, in), (lathe_activation)in_range(in, -1, 12),
                                   (lathe_dense_layout)in_range(in, -1, 2), outs),
             bias ? 3 : 2, 3 * work * elems(&ys) + 1);
      break;
    }
    case 1: BUILT1(lathe_fused_gelu(fn, x, coin(in), &out), work * 4); break;
    case 2:
      BUILT1(lathe_fused_layer_norm(fn, x, n < 0 ? NULL : axes, n < 0 ? 1 : n, u8(in) > 240 ? -1.0 : 1e-5,
                                    coin(in) ? NULL : y, coin(in) ? NULL : z, &out),
             work * 6);
      break;
    case 3:
      BUILT1(lathe_fused_dense(fn, x, y, coin(in) ? NULL : z, (lathe_activation)in_range(in, -1, 12),
                               (lathe_dense_layout)in_range(in, -1, 2), &out),
             work * elems(&ys) + 1);
      break;
    case 4: {
      lathe_quantization q = {(lathe_quant_scheme)in_range(in, -1, 3), (lathe_ggml_type)in_range(in, -1, 8),
                              in_range(in, 0, 2), any_dim(in)};
      lathe_value_t s = pick(w, in), zp = coin(in) ? NULL : pick(w, in), bias = coin(in) ? NULL : pick(w, in);
      BUILT1(lathe_fused_quantized_dense(fn, x, y, u8(in) == 255 ? NULL : &q, s, zp, bias,
                                         (lathe_activation)in_range(in, -1, 12), &out),
             work * elems(&ys) + 1);
      break;
    }
    case 5: {
      lathe_quantization q = {(lathe_quant_scheme)in_range(in, 0, 3), (lathe_ggml_type)in_range(in, -1, 8), 1, 1};
      BUILT1(lathe_quantized_embedding_lookup(fn, x, y, &q, &out), elems(&ys) * 512 + 1);
      break;
    }
    case 6:
    case 7: {
      lathe_attention_config cfg = {0};
      if (coin(in)) {
        cfg.scale = u8(in) > 200 ? INFINITY : 0.5;
        cfg.causal = coin(in);
        cfg.mask = coin(in) ? pick(w, in) : NULL;
        cfg.bias = coin(in) ? pick(w, in) : NULL;
        if (coin(in)) cfg.query_seq_len = pick(w, in), cfg.key_value_seq_len = pick(w, in);
      }
      lathe_attention_layout lay = (lathe_attention_layout)in_range(in, -1, 2);
      lathe_shape zs;
      shape_of(z, &zs);
      double aw = work * (elems(&ys) + 1) * 2;
      if (u8(in) % 2) {
        BUILTN(lathe_fused_scaled_dot_product_attention(fn, x, y, z, lay, coin(in) ? NULL : &cfg, outs), 2, aw);
      } else {
        lathe_value_t st[2] = {pick(w, in), pick(w, in)};
        BUILTN(lathe_fused_scaled_dot_product_attention_vjp(fn, x, y, z, lay, coin(in) ? NULL : &cfg, pick(w, in), st,
                                                             in_range(in, 0, 2), pick(w, in), outs),
               3, aw * 3);
      }
      break;
    }
    default: {
      int64_t qd = u8(in) < 200 ? in_range(in, 1, 4) : any_dim(in), kd = u8(in) < 200 ? in_range(in, 1, 4) : any_dim(in);
      BUILTN(lathe_fused_attention_qkv_projection(fn, x, y, coin(in) ? NULL : z, coin(in) ? NULL : pick(w, in),
                                                  coin(in) ? NULL : pick(w, in), qd, kd, outs),
             3, work * elems(&ys) + 1);
    }
  }
}

static void act_dynshape(world *w, input *in, lathe_function_t fn) {
  lathe_value_t x = pick(w, in), out, outs[4];
  lathe_shape xs;
  double work = shape_of(x, &xs) ? elems(&xs) : 1;
  switch (u8(in) % 5) {
    case 0: BUILT1(lathe_dynamic_shape(fn, x, &out), 1); break;
    case 1: BUILT1(lathe_dynamic_dimension_size(fn, x, in_range(in, -1, xs.rank), &out), 1); break;
    case 2: {
      lathe_dim_spec d[LATHE_MAX_RANK + 1];
      int n = in_range(in, -1, 5);
      for (int i = 0; i <= LATHE_MAX_RANK; i++) {
        uint8_t m = u8(in);
        d[i].name = m < 150 ? NULL : axis_names[m % 5];
        d[i].static_size = d[i].name && m < 250 ? 0 : any_dim(in);
        d[i].value = m > 200 ? pick(w, in) : NULL;
      }
      BUILT1(lathe_dynamic_reshape(fn, x, u8(in) == 255 ? NULL : d, n, &out), work);
      break;
    }
    case 3: {
      lathe_value_t ops[4] = {x, pick(w, in), pick(w, in), pick(w, in)};
      int n = in_range(in, -1, 4);
      BUILTN(lathe_optimization_barrier(fn, ops, n, outs), n < 0 ? 0 : n, 1);
      break;
    }
    default: {
      lathe_value_t deps[3] = {pick(w, in), pick(w, in), pick(w, in)};
      BUILT1(lathe_scheduling_barrier(fn, x, deps, in_range(in, -1, 3), &out), 1);
    }
  }
}

/* ---- functions and control flow ---- */
static int new_closure(world *w, input *in, int parent, int n_params, const lathe_value_t *templates) {
  if (w->n_fns >= MAX_FNS) return -1;
  lathe_function_t f = NULL;
  lathe_status_t st;
  if (parent < 0) {
    char name[16];
    snprintf(name, sizeof name, "f%d", in_range(in, 0, 3));
    st = lathe_builder_new_function(w->b, name, &f);
  } else {
    st = lathe_function_closure(w->fns[parent].fn, &f);
  }
  if (st) {
    if (lathe_status_code_of(st) != LATHE_STATUS_INVALID_ARGUMENT) fail("new function", __LINE__, st);
    lathe_status_free(st);
    return -1;
  }
  fn_info *fi = &w->fns[w->n_fns];
  memset(fi, 0, sizeof *fi);
  fi->fn = f, fi->parent = parent;
  for (int i = 0; i < n_params && i < MAX_PARAMS; i++) {
    lathe_shape s;
    if (!templates || !shape_of(templates[i], &s)) s = any_shape(in);
    lathe_value_t p = NULL;
    st = lathe_parameter(f, NULL, &s, &p);
    if (st) {
      if (lathe_status_code_of(st) != LATHE_STATUS_INVALID_ARGUMENT) fail("closure parameter", __LINE__, st);
      lathe_status_free(st);
      continue;
    }
    fi->templates[fi->n_params] = templates ? templates[i] : NULL;
    fi->params[fi->n_params++] = p;
    add_value(w, p);
  }
  return w->n_fns++;
}

static bool ret(world *w, int f, const lathe_value_t *vals, int n) {
  bool ok = built(w, lathe_function_return(w->fns[f].fn, vals, n), __LINE__, NULL, 0, 0);
  if (ok) w->fns[f].returned = true;
  return ok;
}

static void act_function(world *w, input *in) {
  lathe_value_t t[MAX_PARAMS] = {pick(w, in), pick(w, in), pick(w, in), pick(w, in)};
  switch (u8(in) % 4) {
    case 0: {
      int f = new_closure(w, in, coin(in) ? w->cur : -1, in_range(in, 0, MAX_PARAMS), t);
      if (f >= 0) w->cur = f;
      break;
    }
    case 1: w->cur = in_range(in, 0, w->n_fns - 1); break;
    default: {
      int n = in_range(in, 0, 3);
      if (ret(w, w->cur, t, n) && w->cur) w->cur = w->fns[w->cur].parent >= 0 ? w->fns[w->cur].parent : 0;
    }
  }
}

static double fn_work(const world *w, lathe_function_t f) {
  int i = fn_index(w, f);
  return i < 0 ? 0 : w->fns[i].work + 1;
}

static void act_control(world *w, input *in, lathe_function_t fn) {
  lathe_value_t outs[8];
  int n_out = 0;
  fn_info *callee = &w->fns[in_range(in, 0, w->n_fns - 1)];
  switch (u8(in) % 6) {
    case 0: { /* Call: with the callee's own templates most of the time */
      lathe_value_t ins[MAX_PARAMS];
      int n = coin(in) ? callee->n_params : in_range(in, 0, MAX_PARAMS);
      for (int i = 0; i < n; i++) ins[i] = i < callee->n_params && coin(in) ? callee->templates[i] : pick(w, in);
      built(w, lathe_call(fn, callee->fn, ins, n, outs, in_range(in, 0, 8), &n_out), __LINE__, NULL, 0,
            fn_work(w, callee->fn));
      break;
    }
    case 1: { /* If: two branches that return v and -v, or random ones */
      lathe_value_t pred = pick(w, in), v = pick(w, in);
      lathe_function_t tb = callee->fn, fb = w->fns[in_range(in, 0, w->n_fns - 1)].fn;
      if (coin(in)) {
        int ft = new_closure(w, in, fn_index(w, fn), 0, NULL), ff = ft >= 0 ? new_closure(w, in, fn_index(w, fn), 0, NULL) : -1;
        if (ff < 0) break;
        lathe_value_t nv = NULL;
        if (!built(w, lathe_neg(w->fns[ff].fn, v, &nv), __LINE__, &nv, 1, 1)) nv = v;
        ret(w, ft, &v, 1), ret(w, ff, &nv, 1);
        tb = w->fns[ft].fn, fb = w->fns[ff].fn;
        if (coin(in)) {
          lathe_shape bs = {.dtype = LATHE_DTYPE_BOOL};
          uint8_t flag = u8(in) & 1;
          if (!built(w, lathe_constant(fn, &bs, &flag, 1, &pred), __LINE__, &pred, 1, 0)) break;
        }
      }
      built(w, lathe_if(fn, pred, tb, fb, outs, in_range(in, 0, 8), &n_out), __LINE__, NULL, 0,
            fn_work(w, tb) + fn_work(w, fb));
      break;
    }
    case 2: { /* While counting i from 0 to k, the other states through Neg */
      int k = in_range(in, 0, 3), ns = in_range(in, 0, 2);
      lathe_value_t st[MAX_PARAMS] = {0}, lim = NULL, one = NULL, cmp = NULL, next[MAX_PARAMS];
      lathe_shape is = {.dtype = LATHE_DTYPE_INT32};
      int32_t zero = 0, kk = k, v1 = 1;
      if (!built(w, lathe_constant(fn, &is, &zero, 4, &st[0]), __LINE__, &st[0], 1, 0)) break;
      for (int i = 1; i <= ns; i++) st[i] = pick(w, in);
      int fc = new_closure(w, in, fn_index(w, fn), ns + 1, st);
      int fb = fc >= 0 ? new_closure(w, in, fn_index(w, fn), ns + 1, st) : -1;
      if (fb < 0 || w->fns[fc].n_params != ns + 1 || w->fns[fb].n_params != ns + 1) break;
      lathe_value_t cp0 = w->fns[fc].params[0], *bp = w->fns[fb].params;
      if (!built(w, lathe_constant(w->fns[fc].fn, &is, &kk, 4, &lim), __LINE__, &lim, 1, 0) ||
          !built(w, lathe_less_than(w->fns[fc].fn, cp0, lim, &cmp), __LINE__, &cmp, 1, 1) || !ret(w, fc, &cmp, 1))
        break;
      if (!built(w, lathe_constant(w->fns[fb].fn, &is, &v1, 4, &one), __LINE__, &one, 1, 0) ||
          !built(w, lathe_add(w->fns[fb].fn, bp[0], one, &next[0]), __LINE__, &next[0], 1, 1))
        break;
      for (int i = 1; i <= ns; i++) {
        lathe_shape s;
        shape_of(bp[i], &s);
        if (!coin(in) || !built(w, lathe_neg(w->fns[fb].fn, bp[i], &next[i]), __LINE__, &next[i], 1, elems(&s)))
          next[i] = bp[i];
      }
      if (!ret(w, fb, next, ns + 1)) break;
      built(w, lathe_while(fn, w->fns[fc].fn, w->fns[fb].fn, st, ns + 1, outs, 8, &n_out), __LINE__, NULL, 0,
            (k + 1) * (fn_work(w, w->fns[fc].fn) + fn_work(w, w->fns[fb].fn)));
      break;
    }
    case 3: { /* While with whatever functions: built or not, never executed */
      lathe_value_t st[3] = {pick(w, in), pick(w, in), pick(w, in)};
      if (built(w, lathe_while(fn, callee->fn, w->fns[in_range(in, 0, w->n_fns - 1)].fn, st, in_range(in, -1, 3), outs,
                               in_range(in, 0, 8), &n_out),
                __LINE__, NULL, 0, 0))
        w->no_exec = true;
      break;
    }
    default: { /* Sort: a plain comparator on the first input, or a random function */
      lathe_value_t ins[3] = {pick(w, in), pick(w, in), pick(w, in)};
      int n = in_range(in, 0, 3);
      lathe_function_t cmp_fn = callee->fn;
      lathe_shape s0;
      shape_of(ins[0], &s0);
      if (coin(in) && n > 0) {
        int fc = new_closure(w, in, fn_index(w, fn), 0, NULL);
        if (fc < 0) break;
        lathe_value_t p[6] = {0};
        int np = 0;
        for (int i = 0; i < 2 * n; i++) {
          lathe_shape ps, is;
          memset(&ps, 0, sizeof ps);
          ps.dtype = shape_of(ins[i / 2], &is) ? is.dtype : LATHE_DTYPE_FLOAT32;
          if (built(w, lathe_parameter(w->fns[fc].fn, NULL, &ps, &p[np]), __LINE__, &p[np], 1, 0)) np++;
        }
        lathe_value_t lt = NULL;
        lathe_op op = coin(in) ? LATHE_OP_LESS_THAN : LATHE_OP_GREATER_THAN_TOTAL_ORDER;
        if (np < 2 || !built(w, lathe_binary(w->fns[fc].fn, op, p[0], p[1], &lt), __LINE__, &lt, 1, 1) ||
            !ret(w, fc, &lt, 1))
          break;
        cmp_fn = w->fns[fc].fn;
      }
      double m = elems(&s0) + 2, p2 = 2;
      int lg = 1;
      while (p2 < m && lg < 2000) p2 *= 2, lg++;
      built(w, lathe_sort(fn, cmp_fn, in_range(in, -2, s0.rank), coin(in), ins, n, outs), __LINE__, NULL, 0,
            m * lg * (fn_work(w, cmp_fn) + 4));
    }
  }
  for (int i = 0; i < n_out && i < 8; i++) {
    check_value(outs[i], __LINE__);
    add_value(w, outs[i]);
  }
}

/* ---- execution ---- */
/* FUZZ_API_STATS=1 prints how far inputs get (built ops, compiles, runs) at exit. */
static struct {
  long inputs, ops, compiled, executed, ran;
} stats;
static void print_stats(void) {
  fprintf(stderr, "fuzz_api: %ld inputs, %ld ops built, %ld compiled, %ld executed, %ld runs OK\n", stats.inputs,
          stats.ops, stats.compiled, stats.executed, stats.ran);
}

static lathe_backend_t backends[2];
static lathe_executable_t reference[2]; /* Neg of Float32[3], one per backend */

static void check_exec(lathe_status_t st, int line) {
  if (!st) return;
  lathe_status_code c = lathe_status_code_of(st);
  if ((c != LATHE_STATUS_INVALID_ARGUMENT && c != LATHE_STATUS_UNIMPLEMENTED && c != LATHE_STATUS_RESOURCE_EXHAUSTED &&
       c != LATHE_STATUS_FAILED_PRECONDITION) ||
      !*lathe_status_message(st))
    fail("execution step", line, st);
  lathe_status_free(st);
}

/* The backend must still compute after whatever the input did. */
static void check_reference(int k) {
  const float x[3] = {1.5f, -2, 0};
  lathe_shape s = {.dtype = LATHE_DTYPE_FLOAT32, .rank = 1, .dims = {3}};
  lathe_buffer_t in = NULL, out = NULL;
  float got[3] = {0};
  lathe_status_t st = lathe_buffer_from_host(backends[k], 0, &s, x, sizeof x, &in);
  if (!st) st = lathe_executable_execute(reference[k], &in, NULL, 1, 0, &out, 1);
  if (!st) st = lathe_buffer_to_host(out, got, sizeof got);
  if (st) fail("the reference graph after the input", __LINE__, st);
  if (got[0] != -1.5f || got[1] != 2 || got[2] != 0) {
    fprintf(stderr, "fuzz_api.c: the reference graph gave wrong results after the input\n");
    abort();
  }
  lathe_buffer_free(in);
  lathe_buffer_free(out);
}

static void setup_once(void) {
  if (backends[0]) return;
  lathe_status_t st = lathe_backend_new("lathe:cpu,threads=2", &backends[0]);
  if (!st) st = lathe_backend_new("lathe:cpu,threads=1,fuse=0", &backends[1]);
  for (int k = 0; k < 2 && !st; k++) {
    lathe_builder_t b = NULL;
    lathe_value_t x = NULL, y = NULL;
    lathe_shape s = {.dtype = LATHE_DTYPE_FLOAT32, .rank = 1, .dims = {3}};
    st = lathe_builder_new(backends[k], "reference", &b);
    if (!st) st = lathe_parameter(lathe_builder_main(b), "x", &s, &x);
    if (!st) st = lathe_neg(lathe_builder_main(b), x, &y);
    if (!st) st = lathe_function_return(lathe_builder_main(b), &y, 1);
    if (!st) st = lathe_builder_compile(b, &reference[k]);
    lathe_builder_free(b);
  }
  if (st) fail("setup", __LINE__, st);
  if (getenv("FUZZ_API_STATS")) atexit(print_stats);
  trace = getenv("FUZZ_API_TRACE") != NULL;
}

static void execute(world *w, input *ex, lathe_executable_t e) {
  int n_in = lathe_executable_num_inputs(e), n_out = lathe_executable_num_outputs(e);
  lathe_buffer_t ins[16] = {0}, outs[16] = {0};
  bool donate[16] = {0};
  if (n_in > 16 || n_out > 15) return;
  /* one size per dynamic axis name, shared by the inputs (mostly) */
  int64_t bind[5];
  for (int k = 0; k < 5; k++) bind[k] = u8(ex) < 230 ? in_range(ex, 0, 5) : any_dim(ex);
  bool ok = true;
  for (int i = 0; i < n_in; i++) {
    lathe_shape s;
    lathe_status_t st = lathe_executable_input_shape(e, i, &s);
    if (st) fail("input shape", __LINE__, st);
    for (int a = 0; a < s.rank; a++)
      if (s.dims[a] < 0) {
        int k = 0;
        while (k < 4 && (!s.axis_names[a] || strcmp(s.axis_names[a], axis_names[k]) != 0)) k++;
        s.dims[a] = u8(ex) > 250 ? any_dim(ex) : bind[k];
      }
    if (u8(ex) > 250 && s.rank > 0 && s.dims[0] < INT64_MAX) s.dims[0] += 1; /* a wrong shape */
    int64_t nb;
    void *d = host_data(&s, &nb);
    uint8_t how = u8(ex);
    if (how > 240 && nb >= 0 && nb <= HOST_LIMIT && lathe_backend_has_shared_buffers(w->be)) {
      void *p = NULL;
      st = lathe_buffer_new_shared(w->be, 0, &s, &ins[i], &p);
      if (!st && d && nb) memcpy(p, d, (size_t)nb);
    } else {
      size_t n = nb < 0 ? 0 : (size_t)nb;
      if (how == 240) n += 1;
      st = lathe_buffer_from_host(w->be, 0, &s, d, d ? n : 0, &ins[i]);
    }
    free(d);
    if (st) ok = false;
    check_exec(st, __LINE__);
    donate[i] = u8(ex) > 200;
  }
  if (n_in > 1 && u8(ex) > 250) { /* the same buffer twice */
    lathe_buffer_free(ins[1]);
    ins[1] = ins[0], donate[1] = donate[0] = true;
  }
  for (int run = 0; ok && run < 2; run++) {
    int want = u8(ex) > 252 ? n_out + 1 : n_out;
    lathe_status_t st = lathe_executable_execute(e, ins, donate, n_in, 0, outs, want);
    stats.ran += !st;
    if (!st) {
      for (int k = 0; k < n_out; k++) {
        lathe_shape s;
        st = lathe_buffer_shape(outs[k], &s);
        if (st) fail("output shape", __LINE__, st);
        int64_t nb = lathe_shape_byte_size(&s);
        if (nb < 0) {
          fprintf(stderr, "fuzz_api.c: an output of an impossible size\n");
          abort();
        }
        void *h = malloc((size_t)nb + 1);
        if (h) {
          size_t n = (size_t)nb + (u8(ex) > 250);
          check_exec(lathe_buffer_to_host(outs[k], h, n), __LINE__);
        }
        free(h);
        if (u8(ex) > 250) {
          lathe_buffer_t c = NULL;
          check_exec(lathe_buffer_copy_to_device(outs[k], 0, &c), __LINE__);
          lathe_buffer_free(c);
        }
        lathe_buffer_free(outs[k]);
        outs[k] = NULL;
      }
    }
    check_exec(st, __LINE__);
  }
  if (n_in > 1 && ins[1] == ins[0]) ins[1] = NULL;
  for (int i = 0; i < n_in; i++) lathe_buffer_free(ins[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setup_once();
  if (size < 1) return 0;
  size_t tail = data[0] & 15;
  if (tail > size - 1) tail = size - 1;
  input in = {data + 1, size - 1 - tail, 0}, ex = {data + size - tail, tail, 0};
  rng = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < size; i++) rng = (rng ^ data[i]) * 0x100000001B3ull;
  rng |= 1;

  world w;
  memset(&w, 0, sizeof w);
  w.be = backends[(data[0] >> 4) & 1];
  extremes = data[0] & 0x40;
  lathe_status_t st = lathe_builder_new(w.be, "fuzz", &w.b);
  if (st) fail("builder", __LINE__, st);
  w.fns[0] = (fn_info){.fn = lathe_builder_main(w.b), .parent = -1};
  w.n_fns = 1;
  if (data[0] & 0x20) {
    lathe_function_t ofn;
    lathe_shape os = {.dtype = LATHE_DTYPE_FLOAT32};
    if ((st = lathe_builder_new(w.be, "other", &w.other)) ||
        (ofn = lathe_builder_main(w.other), st = lathe_parameter(ofn, "o", &os, &w.foreign)))
      fail("foreign builder", __LINE__, st);
  }
  for (int step = 0; step < 64 && !exhausted(&in); step++) {
    lathe_function_t fn = w.fns[w.cur].fn;
    switch (u8(&in) % 16) {
      case 0:
      case 1: act_parameter(&w, &in, fn); break;
      case 2: act_constant(&w, &in, fn); break;
      case 3:
      case 4: act_elementwise(&w, &in, fn); break;
      case 5: act_reduce(&w, &in, fn); break;
      case 6:
      case 7: act_layout(&w, &in, fn); break;
      case 8: act_dot(&w, &in, fn); break;
      case 9: act_conv_window(&w, &in, fn); break;
      case 10: act_index(&w, &in, fn); break;
      case 11: act_numeric(&w, &in, fn); break;
      case 12: act_fused(&w, &in, fn); break;
      case 13: act_dynshape(&w, &in, fn); break;
      case 14: act_function(&w, &in); break;
      default: act_control(&w, &in, fn); break;
    }
  }
  /* Closures left open return nothing (so that the graph can compile); main returns its most
   * recent values. */
  for (int i = 1; i < w.n_fns; i++)
    if (!w.fns[i].returned) ret(&w, i, NULL, 0);
  lathe_value_t res[3];
  int nr = 0;
  for (int i = w.n_vals - 1; i >= 0 && nr < 3; i--)
    if (lathe_value_function(w.vals[i]) == w.fns[0].fn) res[nr++] = w.vals[i];
  if (nr) built(&w, lathe_function_return(w.fns[0].fn, res, in_range(&ex, 1, nr)), __LINE__, NULL, 0, 0);
  lathe_executable_t e = NULL;
  st = lathe_builder_compile(w.b, &e);
  if (st) {
    lathe_status_code c = lathe_status_code_of(st);
    if (c != LATHE_STATUS_INVALID_ARGUMENT && c != LATHE_STATUS_UNIMPLEMENTED && c != LATHE_STATUS_RESOURCE_EXHAUSTED)
      fail("compile", __LINE__, st);
    lathe_status_free(st);
  }
  double work = w.fns[0].work;
  stats.inputs++, stats.ops += w.ops_built, stats.compiled += e != NULL;
  stats.executed += e && !w.no_exec && work < WORK_BUDGET;
  if (u8(&ex) & 1) lathe_builder_free(w.b), w.b = NULL; /* executables outlive their builder */
  if (trace) fprintf(stderr, "compiled: %d, estimated work %g%s\n", e != NULL, work, w.no_exec ? ", not run" : "");
  if (e && !w.no_exec && work < WORK_BUDGET) execute(&w, &ex, e);
  lathe_executable_free(e);
  lathe_builder_free(w.b);
  lathe_builder_free(w.other);
  check_reference((data[0] >> 4) & 1);
  return 0;
}
