/* dot.c -- conformance rows for DotGeneral: layouts (batch, contracting and cross axes in any
 * position), size 0 and 1, odd and threaded sizes, every dtype, accumulator / output dtypes,
 * against a reference written here (double precision; wrapping 64-bit arithmetic for integer
 * accumulators). */
#include "core/core.h"
#include "cpu/blas.h"
#include "cpu/gemm.h"
#include "graph/graph.h"
#include "testing.h"

typedef struct dot_spec {
  int64_t ld[8], rd[8];
  int lrank, rrank;
  int lc[4], lb[4], rc[4], rb[4];
  int nc, nb;
} dot_spec;

static bool is_int(lathe_dtype dt) {
  return dt != LATHE_DTYPE_BOOL && dt < LATHE_DTYPE_FLOAT16 ? true : dt >= LATHE_DTYPE_INT4;
}
static bool is_unsigned(lathe_dtype dt) {
  return (dt >= LATHE_DTYPE_UINT8 && dt <= LATHE_DTYPE_UINT64) || dt == LATHE_DTYPE_UINT4 || dt == LATHE_DTYPE_UINT2 ||
         dt == LATHE_DTYPE_UINT1;
}
static bool is_cplx(lathe_dtype dt) { return dt == LATHE_DTYPE_COMPLEX64 || dt == LATHE_DTYPE_COMPLEX128; }

/* The accumulator the builder resolves for operand dtype dt when none is given. */
static lathe_dtype default_acc(lathe_dtype dt) {
  if (dt == LATHE_DTYPE_FLOAT16 || dt == LATHE_DTYPE_BFLOAT16) return LATHE_DTYPE_FLOAT32;
  if (lathe_dtype_bits(dt) < 8) return is_unsigned(dt) ? LATHE_DTYPE_UINT8 : LATHE_DTYPE_INT8;
  return dt;
}

static double round_to(lathe_dtype dt, double v) {
  if (dt == LATHE_DTYPE_FLOAT32 || dt == LATHE_DTYPE_COMPLEX64) return (float)v;
  if (dt == LATHE_DTYPE_FLOAT16) return lathe_f16_to_f32(lathe_f32_to_f16((float)v));
  if (dt == LATHE_DTYPE_BFLOAT16) return lathe_bf16_to_f32(lathe_f32_to_bf16((float)v));
  return v;
}

/* Runs one DotGeneral and compares with the reference. acc/out may be INVALID (defaults). widen:
 * the operands are dt parameters widened to Float32 by ConvertDType first (the product is then
 * of Float32 operands; the builder multiplies the halves instead where that is exact). */
static void dot_case_widened(const char *label, lathe_dtype dt, const dot_spec *sp, lathe_dtype acc, lathe_dtype odt,
                             bool widen) {
  char lab[160];
  snprintf(lab, sizeof lab, "%s %s%s acc=%s out=%s", label, lathe_dtype_name(dt), widen ? "->Float32" : "",
           lathe_dtype_name(acc), lathe_dtype_name(odt));
  if (!lathe_backend_supports_op(tst_backend(), LATHE_OP_DOT_GENERAL, dt)) {
    tst_skipf(lab, "DotGeneral unsupported on this backend");
    return;
  }
  lathe_shape ls = tst_shape(dt, sp->lrank, sp->ld), rs = tst_shape(dt, sp->rrank, sp->rd);
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("dot", &fn);
  lathe_value_t x, y, z = NULL;
  x = tst_param(fn, "lhs", ls);
  y = tst_param(fn, "rhs", rs);
  if (widen) {
    CHECK_OK(lathe_convert_dtype(fn, x, LATHE_DTYPE_FLOAT32, &x));
    CHECK_OK(lathe_convert_dtype(fn, y, LATHE_DTYPE_FLOAT32, &y));
  }
  lathe_dot_config cfg = {acc, odt};
  lathe_status_t st = lathe_dot_general(fn, x, sp->lc, sp->nc, sp->lb, sp->nb, y, sp->rc, sp->nc, sp->rb, sp->nb, &cfg, &z);
  CHECK(st == NULL, "%s: build: %s", lab, lathe_status_message(st));
  lathe_dtype pdt = widen ? LATHE_DTYPE_FLOAT32 : dt; /* the product's operand dtype as written */
  if (z && widen) {
    /* multiplied as halves exactly when the product is Float32 throughout */
    bool f32 = (!acc || acc == LATHE_DTYPE_FLOAT32) && (!odt || odt == LATHE_DTYPE_FLOAT32);
    CHECK(z->in[0]->shape.dtype == (f32 ? dt : LATHE_DTYPE_FLOAT32) && z->in[1]->shape.dtype == z->in[0]->shape.dtype,
          "%s: the product reads %s operands", lab, lathe_dtype_name(z->in[0]->shape.dtype));
  }
  lathe_status_free(st);
  if (!z) {
    lathe_builder_free(b);
    return;
  }
  CHECK_OK(lathe_function_return(fn, &z, 1));
  lathe_shape os;
  CHECK_OK(lathe_value_shape(z, &os));
  lathe_dtype eacc = acc ? acc : default_acc(pdt), eout = odt ? odt : pdt;
  CHECK(os.dtype == eout, "%s: result dtype %s", lab, lathe_dtype_name(os.dtype));

  /* expected dims: batch, lhs cross, rhs cross */
  bool lused[8] = {0}, rused[8] = {0};
  int64_t kd[4];
  int64_t kn = 1;
  for (int i = 0; i < sp->nc; i++) lused[sp->lc[i]] = rused[sp->rc[i]] = true, kd[i] = sp->ld[sp->lc[i]], kn *= kd[i];
  for (int i = 0; i < sp->nb; i++) lused[sp->lb[i]] = rused[sp->rb[i]] = true;
  int lcross[8], rcross[8], nlx = 0, nrx = 0;
  for (int a = 0; a < sp->lrank; a++)
    if (!lused[a]) lcross[nlx++] = a;
  for (int a = 0; a < sp->rrank; a++)
    if (!rused[a]) rcross[nrx++] = a;
  int orank = sp->nb + nlx + nrx;
  int64_t od[16];
  for (int i = 0; i < sp->nb; i++) od[i] = sp->ld[sp->lb[i]];
  for (int i = 0; i < nlx; i++) od[sp->nb + i] = sp->ld[lcross[i]];
  for (int i = 0; i < nrx; i++) od[sp->nb + nlx + i] = sp->rd[rcross[i]];
  bool dims_ok = os.rank == orank;
  for (int i = 0; dims_ok && i < orank; i++) dims_ok = os.dims[i] == od[i];
  CHECK(dims_ok, "%s: result rank %d (want %d)", lab, os.rank, orank);

  int64_t nl = lathe_shape_num_elements(&ls), nr = lathe_shape_num_elements(&rs), no = lathe_shape_num_elements(&os);
  void *ld = tst_alloc_for(&ls), *rd = tst_alloc_for(&rs), *want = tst_alloc_for(&os), *got[1] = {NULL};
  double *tol = calloc((size_t)(no ? no : 1), sizeof(double));
  tst_fill(ld, dt, nl, 7u + (unsigned)nl);
  tst_fill(rd, dt, nr, 11u + (unsigned)nr);
  int64_t lst[8], rst[8];
  lst[sp->lrank - 1 < 0 ? 0 : sp->lrank - 1] = 1, rst[sp->rrank - 1 < 0 ? 0 : sp->rrank - 1] = 1;
  for (int a = sp->lrank - 2; a >= 0; a--) lst[a] = lst[a + 1] * sp->ld[a + 1];
  for (int a = sp->rrank - 2; a >= 0; a--) rst[a] = rst[a + 1] * sp->rd[a + 1];
  bool int_acc = is_int(eacc);
  /* TF32 (-b ...,tf32=1) rounds the operands of Float32 products (Float64 ones included when they
   * accumulate in Float32) to 10 mantissa bits: about 2^-10 of each term; halves fit exactly */
  bool tf32 = eacc == LATHE_DTYPE_FLOAT32 && (pdt == LATHE_DTYPE_FLOAT32 || pdt == LATHE_DTYPE_FLOAT64) && tst_tf32_products();
  double acc_tol = eacc == LATHE_DTYPE_FLOAT64 || eacc == LATHE_DTYPE_COMPLEX128 ? 1e-13 : tf32 ? 2e-3 : 2e-6;
  for (int64_t o = 0; o < no; o++) {
    int64_t idx[16], rem = o;
    for (int i = orank - 1; i >= 0; i--) idx[i] = rem % od[i], rem /= od[i];
    int64_t lbase = 0, rbase = 0;
    for (int i = 0; i < sp->nb; i++) lbase += idx[i] * lst[sp->lb[i]], rbase += idx[i] * rst[sp->rb[i]];
    for (int i = 0; i < nlx; i++) lbase += idx[sp->nb + i] * lst[lcross[i]];
    for (int i = 0; i < nrx; i++) rbase += idx[sp->nb + nlx + i] * rst[rcross[i]];
    double re = 0, im = 0, mag = 0;
    uint64_t isum = 0;
    for (int64_t k = 0; k < kn; k++) {
      int64_t lo = lbase, ro = rbase, kr = k;
      for (int i = sp->nc - 1; i >= 0; i--) {
        int64_t ki = kr % kd[i];
        kr /= kd[i];
        lo += ki * lst[sp->lc[i]], ro += ki * rst[sp->rc[i]];
      }
      double a = tst_get(ld, dt, lo), ai = tst_get_imag(ld, dt, lo);
      double c = tst_get(rd, dt, ro), ci = tst_get_imag(rd, dt, ro);
      if (int_acc) {
        isum += (uint64_t)tst_wrap_int(eacc, (uint64_t)(int64_t)a) * (uint64_t)tst_wrap_int(eacc, (uint64_t)(int64_t)c);
      } else {
        a = round_to(eacc, a), c = round_to(eacc, c), ai = round_to(eacc, ai), ci = round_to(eacc, ci);
        re += a * c - ai * ci, im += a * ci + ai * c;
        mag += fabs(a * c) + fabs(ai * ci) + fabs(a * ci) + fabs(ai * c);
      }
    }
    if (int_acc) {
      int64_t v = tst_wrap_int(eacc, isum);
      if (is_int(eout)) v = tst_wrap_int(eout, (uint64_t)v);
      re = (double)v;
    } else {
      re = round_to(eacc, re), im = round_to(eacc, im);
    }
    if (is_cplx(eout)) tst_set_complex(want, eout, o, re, im);
    else tst_set(want, eout, o, re);
    tol[o] = acc_tol * mag;
  }
  const void *ins[2] = {ld, rd};
  st = tst_run(b, ins, 2, got, 1, NULL);
  CHECK(st == NULL, "%s: run: %s", lab, lathe_status_message(st));
  if (!st) {
    double out_tol = is_int(eout) ? 0 : tst_tol(eout);
    int bad = 0;
    for (int64_t o = 0; o < no; o++) {
      double g = tst_get(got[0], eout, o), w = tst_get(want, eout, o);
      double gi = tst_get_imag(got[0], eout, o), wi = tst_get_imag(want, eout, o);
      double t = tol[o] + out_tol * (1 + fabs(w) + fabs(wi));
      if (!(fabs(g - w) <= t && fabs(gi - wi) <= t)) {
        if (bad++ < 3) printf("  %s: element %lld: got %.9g%+.9gi, want %.9g%+.9gi\n", lab, (long long)o, g, gi, w, wi);
      }
    }
    CHECK(bad == 0, "%s: %d of %lld elements differ", lab, bad, (long long)no);
    /* against another backend (-b): both within the error bound of the exact sum */
    double rel = 0;
    for (int64_t o = 0; o < no; o++) {
      double w = tst_get(want, eout, o), wi = tst_get_imag(want, eout, o);
      double m = is_cplx(eout) ? fmin(fabs(w), fabs(wi)) : fabs(w);
      double r = 2 * (tol[o] + out_tol * (1 + fabs(w) + fabs(wi))) / (1 + m);
      rel = r > rel ? r : rel;
    }
    tst_expect_tol(got[0], rel);
  }
  lathe_status_free(st);
  tst_free_output(got[0]);
  free(ld), free(rd), free(want), free(tol);
  lathe_builder_free(b);
}

static void dot_case(const char *label, lathe_dtype dt, const dot_spec *sp, lathe_dtype acc, lathe_dtype odt) {
  dot_case_widened(label, dt, sp, acc, odt, false);
}

#define D(...) {__VA_ARGS__}
#define SPEC(LD, RD, LC, LB, RC, RB, NC, NB) \
  (dot_spec) { .ld = D LD, .rd = D RD, .lrank = sizeof((int64_t[])D LD) / 8, .rrank = sizeof((int64_t[])D RD) / 8, \
               .lc = D LC, .lb = D LB, .rc = D RC, .rb = D RB, .nc = NC, .nb = NB }

/* A scalar operand has rank 0: SPEC cannot express it, so vectors are the smallest here. */
static const struct {
  const char *name;
  dot_spec s;
} layouts[] = {
    {"matmul 3x4 4x5", SPEC((3, 4), (4, 5), (1), (0), (0), (0), 1, 0)},
    {"vector dot", SPEC((7), (7), (0), (0), (0), (0), 1, 0)},
    {"batch axis not first", SPEC((4, 2, 3), (3, 2, 5), (2), (1), (0), (1), 1, 1)},
    {"two contracting axes", SPEC((2, 3, 4, 5), (5, 6, 3), (1, 3), (0), (2, 0), (0), 2, 0)},
    {"interleaved cross axes", SPEC((2, 3, 4, 5), (5, 2, 4, 7), (0), (2), (1), (2), 1, 1)},
    {"lhs transposed", SPEC((4, 3), (4, 5), (0), (0), (0), (0), 1, 0)},
    {"rhs transposed", SPEC((3, 4), (5, 4), (1), (0), (1), (0), 1, 0)},
    {"lhs cross split by contracting", SPEC((2, 4, 3), (4, 5), (1), (0), (0), (0), 1, 0)},
    {"outer product", SPEC((3), (4), (0), (0), (0), (0), 0, 0)},
    {"two batch axes swapped", SPEC((2, 3, 4, 5), (3, 5, 2, 6), (3), (0, 1), (1), (2, 0), 1, 2)},
};
#define N_LAYOUTS ((int)(sizeof layouts / sizeof layouts[0]))

TEST(dot_general_layouts_all_dtypes) {
  if (!tst_rows_of(LATHE_OP_DOT_GENERAL)) return;
  for (int d = 0; d < tst_n_all_dtypes; d++) {
    lathe_dtype dt = tst_all_dtypes[d];
    if (dt == LATHE_DTYPE_BOOL) {
      CHECK(!lathe_backend_supports_op(tst_backend(), LATHE_OP_DOT_GENERAL, dt), "Bool is not supported");
      tst_skipf(tst_current, "DotGeneral rejects Bool operands (not numeric)"); /* without leaving the loop */
      continue;
    }
    for (int i = 0; i < N_LAYOUTS; i++) dot_case(layouts[i].name, dt, &layouts[i].s, 0, 0);
  }
}

TEST(dot_general_sizes) {
  if (!tst_rows_of(LATHE_OP_DOT_GENERAL)) return;
  const lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_INT32, LATHE_DTYPE_FLOAT16,
                             LATHE_DTYPE_COMPLEX64};
  for (int d = 0; d < 5; d++) {
    lathe_dtype dt = dts[d];
    dot_spec s;
    s = SPEC((0, 4), (4, 5), (1), (0), (0), (0), 1, 0), dot_case("m=0", dt, &s, 0, 0);
    s = SPEC((3, 0), (0, 5), (1), (0), (0), (0), 1, 0), dot_case("k=0 gives zeros", dt, &s, 0, 0);
    s = SPEC((0, 3, 4), (0, 4, 2), (2), (0), (1), (0), 1, 1), dot_case("batch=0", dt, &s, 0, 0);
    s = SPEC((1, 1), (1, 1), (1), (0), (0), (0), 1, 0), dot_case("1x1x1", dt, &s, 0, 0);
    s = SPEC((3, 1, 4), (4, 1), (2), (0), (0), (0), 1, 0), dot_case("size-1 cross axes", dt, &s, 0, 0);
    s = SPEC((1, 3, 4), (1, 4, 2), (2), (0), (1), (0), 1, 1), dot_case("batch=1", dt, &s, 0, 0);
    s = SPEC((17, 9), (9, 33), (1), (0), (0), (0), 1, 0), dot_case("odd 17x9x33", dt, &s, 0, 0);
    s = SPEC((9, 17), (33, 9), (0), (0), (1), (0), 1, 0), dot_case("odd transposed", dt, &s, 0, 0);
  }
}

TEST(dot_general_threaded) {
  if (!tst_rows_of(LATHE_OP_DOT_GENERAL)) return;
  dot_spec s = SPEC((256, 256), (256, 256), (1), (0), (0), (0), 1, 0);
  dot_case("256^3", LATHE_DTYPE_FLOAT32, &s, 0, 0);
  dot_case("256^3", LATHE_DTYPE_FLOAT64, &s, 0, 0);
  dot_case("256^3", LATHE_DTYPE_INT32, &s, 0, 0);
  dot_case("256^3", LATHE_DTYPE_BFLOAT16, &s, 0, 0);
  s = SPEC((256, 256), (256, 256), (0), (0), (1), (0), 1, 0);
  dot_case("256^3 both transposed", LATHE_DTYPE_FLOAT32, &s, 0, 0);
  s = SPEC((3, 128, 64), (3, 64, 96), (2), (0), (1), (0), 1, 1);
  dot_case("3 batches split in panels", LATHE_DTYPE_FLOAT32, &s, 0, 0);
  dot_case("3 batches split in panels", LATHE_DTYPE_COMPLEX128, &s, 0, 0);
  s = SPEC((2, 700, 3), (2, 3, 900), (2), (0), (1), (0), 1, 1);
  dot_case("wide panels", LATHE_DTYPE_FLOAT32, &s, 0, 0);
  s = SPEC((64, 8, 8), (64, 8, 8), (2), (0), (1), (0), 1, 1);
  dot_case("64 small batches", LATHE_DTYPE_FLOAT32, &s, 0, 0);
  s = SPEC((8, 64, 64), (64, 8, 64), (2), (0), (0), (1), 1, 1);
  dot_case("batches packed", LATHE_DTYPE_FLOAT64, &s, 0, 0);
  dot_case("batches packed", LATHE_DTYPE_INT16, &s, 0, 0);
}

TEST(dot_general_accumulator_output) {
  if (!tst_rows_of(LATHE_OP_DOT_GENERAL)) return;
  dot_spec s = SPEC((4, 2, 3), (3, 2, 5), (2), (1), (0), (1), 1, 1);
  dot_spec big = SPEC((40, 70), (70, 50), (1), (0), (0), (0), 1, 0);
  const struct {
    lathe_dtype in, acc, out;
  } v[] = {
      {LATHE_DTYPE_FLOAT16, 0, LATHE_DTYPE_FLOAT32},
      {LATHE_DTYPE_BFLOAT16, 0, LATHE_DTYPE_FLOAT32},
      {LATHE_DTYPE_FLOAT16, LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT16},
      {LATHE_DTYPE_FLOAT16, LATHE_DTYPE_FLOAT16, 0}, /* a half accumulator: the operands packed, not read as Float32 */
      {LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT32},
      {LATHE_DTYPE_FLOAT16, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT64},
      {LATHE_DTYPE_INT8, LATHE_DTYPE_INT32, LATHE_DTYPE_INT32},
      {LATHE_DTYPE_INT8, LATHE_DTYPE_INT32, 0},
      {LATHE_DTYPE_INT8, LATHE_DTYPE_INT8, LATHE_DTYPE_INT32},
      {LATHE_DTYPE_UINT8, LATHE_DTYPE_UINT32, LATHE_DTYPE_UINT32},
      {LATHE_DTYPE_INT16, LATHE_DTYPE_INT64, LATHE_DTYPE_INT64},
      {LATHE_DTYPE_INT32, LATHE_DTYPE_INT8, LATHE_DTYPE_INT16},
      {LATHE_DTYPE_INT32, 0, LATHE_DTYPE_FLOAT32},
      {LATHE_DTYPE_INT8, LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT32},
      {LATHE_DTYPE_UINT16, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_INT64},
      {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT64},
      {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT32},
      {LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64},
      {LATHE_DTYPE_FLOAT32, 0, LATHE_DTYPE_BFLOAT16},
      {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_COMPLEX128},
      {LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_COMPLEX128, LATHE_DTYPE_COMPLEX64},
      {LATHE_DTYPE_INT4, LATHE_DTYPE_INT32, LATHE_DTYPE_INT32},
      {LATHE_DTYPE_UINT2, 0, LATHE_DTYPE_UINT16},
  };
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    dot_case("acc/out", v[i].in, &s, v[i].acc, v[i].out);
    dot_case("acc/out 40x70x50", v[i].in, &big, v[i].acc, v[i].out);
  }
}

/* GoMLX's gradient of a half product: both operands widened to Float32, then multiplied; the
 * builder multiplies the halves with a Float32 accumulator instead (same products and sums). Also
 * where it must not: a Float64 accumulator or a half result. */
TEST(dot_general_widened_halves) {
  if (!tst_rows_of(LATHE_OP_DOT_GENERAL)) return;
  const lathe_dtype halves[] = {LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT16};
  const struct {
    lathe_dtype acc, out;
  } cfg[] = {{0, 0}, {LATHE_DTYPE_FLOAT32, 0}, {LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT32}, {0, LATHE_DTYPE_BFLOAT16}};
  for (int h = 0; h < 2; h++) {
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++)
      for (int i = 0; i < N_LAYOUTS; i++) dot_case_widened("widened", halves[h], &layouts[i].s, cfg[c].acc, cfg[c].out, true);
    dot_spec big = SPEC((96, 130), (130, 72), (1), (0), (0), (0), 1, 0);
    dot_case_widened("widened 96x130x72", halves[h], &big, 0, 0, true);
  }
}

/* Products whose operands and result have rows (or columns) starting off 16 bytes (a vocabulary
 * of 50257), where cuBLASLt's TMA kernels cannot read them, and more than 512 of the other size.
 * Row-major and transposed operands, Float32 and BFloat16. */
TEST(dot_general_misaligned_rows) {
  if (!tst_rows_of(LATHE_OP_DOT_GENERAL)) return;
  dot_spec plain = SPEC((520, 515), (515, 517), (1), (0), (0), (0), 1, 0);
  dot_spec lt = SPEC((515, 521), (515, 517), (0), (0), (0), (0), 1, 0);
  dot_spec rt = SPEC((520, 515), (517, 515), (1), (0), (1), (0), 1, 0);
  dot_case("misaligned rows", LATHE_DTYPE_FLOAT32, &plain, 0, 0);
  dot_case("misaligned columns of lhs", LATHE_DTYPE_FLOAT32, &lt, 0, 0);
  dot_case("misaligned columns of rhs", LATHE_DTYPE_BFLOAT16, &rt, 0, LATHE_DTYPE_FLOAT32);
  /* a vocabulary's products at a size lathe:cuda stages in padded lines (gemm_pad): the logits'
   * gradients (k odd and both operands' lines off 16 bytes; a misaligned Float32 result), and an
   * odd inner size with aligned lines */
  dot_spec dx = SPEC((320, 1027), (320, 1027), (1), (0), (1), (0), 1, 0);
  dot_spec dw = SPEC((320, 320), (320, 1027), (0), (0), (0), (0), 1, 0);
  dot_spec odd_k = SPEC((1001, 320), (1001, 320), (0), (0), (0), (0), 1, 0);
  dot_case("vocabulary input gradient", LATHE_DTYPE_BFLOAT16, &dx, 0, 0);
  dot_case("vocabulary weight gradient", LATHE_DTYPE_BFLOAT16, &dw, 0, LATHE_DTYPE_FLOAT32);
  dot_case("odd inner size", LATHE_DTYPE_FLOAT16, &odd_k, 0, 0);
}

/* The same rows on lathe's own loops (what runs where BLAS cannot), for the float dtypes. */
TEST(dot_general_loops_without_blas) {
  if (!tst_rows_of(LATHE_OP_DOT_GENERAL)) return;
  const lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_COMPLEX128,
                             LATHE_DTYPE_FLOAT16};
  bool was = lathe_blas_set_enabled(false);
  for (int d = 0; d < 5; d++)
    for (int i = 0; i < N_LAYOUTS; i++) dot_case("no BLAS", dts[d], &layouts[i].s, 0, 0);
  dot_spec s = SPEC((17, 9), (33, 9), (1), (0), (1), (0), 1, 0);
  dot_case("no BLAS odd", LATHE_DTYPE_FLOAT32, &s, 0, 0);
  s = SPEC((0, 3, 4), (0, 4, 2), (2), (0), (1), (0), 1, 1);
  dot_case("no BLAS batch=0", LATHE_DTYPE_FLOAT64, &s, 0, 0);
  s = SPEC((200, 150), (150, 130), (1), (0), (0), (0), 1, 0);
  dot_case("no BLAS threaded", LATHE_DTYPE_FLOAT32, &s, 0, 0);
  dot_case("no BLAS threaded", LATHE_DTYPE_FLOAT16, &s, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT32);
  lathe_blas_set_enabled(was);
}

/* Float32 and BFloat16 rows on each engine this CPU can run: lathe's own kernels (each instruction
 * set in turn; BFloat16 converted to Float32), BLAS, and the automatic choice (where the CPU has
 * AVX512-BF16, BFloat16 products run on vdpbf16ps). Sizes cross the kernels' register blocks
 * (14 x 32 and 6 x 16), the k blocks of 256 and the threading threshold. */
TEST(dot_general_gemm_engines) {
  if (!tst_rows_of(LATHE_OP_DOT_GENERAL)) return;
  static const struct {
    const char *isa;
    lathe_gemm_route route;
  } engines[] = {{"avx512", LATHE_GEMM_OWN}, {"avx2", LATHE_GEMM_OWN}, {"blas", LATHE_GEMM_BLAS}, {"auto", LATHE_GEMM_AUTO}};
  static const dot_spec sizes[] = {
      SPEC((15, 33), (33, 31), (1), (0), (0), (0), 1, 0),       SPEC((29, 300), (300, 65), (1), (0), (0), (0), 1, 0),
      SPEC((300, 29), (65, 300), (0), (0), (1), (0), 1, 0),     SPEC((130, 520), (520, 97), (1), (0), (0), (0), 1, 0),
      SPEC((5, 40, 70), (5, 70, 3), (2), (0), (1), (0), 1, 1),  SPEC((128, 69), (69, 4), (1), (0), (0), (0), 1, 0),
      SPEC((2, 3, 33, 20), (2, 20, 3, 17), (3), (0, 1), (1), (0, 2), 1, 2),
  };
  for (size_t e = 0; e < sizeof engines / sizeof *engines; e++) {
    bool own = engines[e].route == LATHE_GEMM_OWN;
    if (own && !lathe_gemm_force_isa(engines[e].isa)) {
      tst_skipf(tst_current, "this CPU has no %s", engines[e].isa);
      continue;
    }
    lathe_gemm_route was = lathe_blas_set_route(engines[e].route);
    char lab[64];
    snprintf(lab, sizeof lab, "engine %s", engines[e].isa);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
      dot_case(lab, LATHE_DTYPE_FLOAT32, &sizes[i], 0, 0);
      dot_case(lab, LATHE_DTYPE_BFLOAT16, &sizes[i], 0, 0);
    }
    for (int i = 0; i < N_LAYOUTS; i++) {
      dot_case(lab, LATHE_DTYPE_FLOAT32, &layouts[i].s, 0, 0);
      dot_case(lab, LATHE_DTYPE_BFLOAT16, &layouts[i].s, LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT32);
    }
    lathe_blas_set_route(was);
    lathe_gemm_force_isa(NULL);
  }
}

/* Transpose(DotGeneral(x, y)) that swaps the two free groups compiles to DotGeneral(y, x)
 * (src/graph/program.c): the same values as the product transposed when the product is also
 * returned (then it is not folded) -- bit for bit where lathe's own loops or gemm sum. */
static void transposed_product_case(lathe_dtype dt) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("transposed_product", &fn);
  lathe_value_t x = tst_param(fn, "x", TST_SHAPE(dt, 3, 37, 70)), y = tst_param(fn, "y", TST_SHAPE(dt, 3, 70, 45)), d, t;
  int lc = 2, rc = 1, bt = 0, perm[3] = {0, 2, 1};
  CHECK_OK(lathe_dot_general(fn, x, &lc, 1, &bt, 1, y, &rc, 1, &bt, 1, NULL, &d));
  CHECK_OK(lathe_transpose(fn, d, perm, 3, &t));
  lathe_function_t fn2;
  lathe_builder_t b2 = tst_builder("transposed_product_kept", &fn2);
  lathe_value_t x2 = tst_param(fn2, "x", TST_SHAPE(dt, 3, 37, 70)), y2 = tst_param(fn2, "y", TST_SHAPE(dt, 3, 70, 45)), d2, t2;
  CHECK_OK(lathe_dot_general(fn2, x2, &lc, 1, &bt, 1, y2, &rc, 1, &bt, 1, NULL, &d2));
  CHECK_OK(lathe_transpose(fn2, d2, perm, 3, &t2));
  lathe_value_t both[2] = {t2, d2};
  CHECK_OK(lathe_function_return(fn, &t, 1));
  CHECK_OK(lathe_function_return(fn2, both, 2));
  size_t es = lathe_dtype_bits(dt) / 8;
  void *xd = malloc(3 * 37 * 70 * es), *yd = malloc(3 * 70 * 45 * es);
  tst_fill(xd, dt, 3 * 37 * 70, 11);
  tst_fill(yd, dt, 3 * 70 * 45, 12);
  const void *in[2] = {xd, yd};
  void *got[1] = {NULL}, *want[2] = {NULL, NULL};
  lathe_status_t st = tst_run(b, in, 2, got, 1, NULL);
  CHECK(st == NULL, "folded: %s", lathe_status_message(st));
  lathe_status_t st2 = tst_run(b2, in, 2, want, 2, NULL);
  CHECK(st2 == NULL, "kept: %s", lathe_status_message(st2));
  if (!st && !st2) {
    /* BLAS (and a GPU's library) may sum in another order */
    bool exact = lathe_dtype_is_int(dt) || (dt == LATHE_DTYPE_FLOAT32 && tst_backend_is_cpu());
    double tol = dt == LATHE_DTYPE_FLOAT64 ? 1e-12 : 1e-4; /* 70-term sums with cancellation: a few ulps of the largest term */
    if (exact) CHECK(memcmp(got[0], want[0], 3 * 45 * 37 * es) == 0, "%s: folded product differs", lathe_dtype_name(dt));
    else tst_expect_close("transposed product", got[0], want[0], dt, 3 * 45 * 37, tol);
    if (!lathe_dtype_is_int(dt)) /* against the reference under -b, likewise */
      for (int k = 0; k < 2; k++) tst_expect_tol(want[k], tol);
  }
  lathe_status_free(st);
  lathe_status_free(st2);
  tst_free_output(got[0]);
  tst_free_output(want[0]);
  tst_free_output(want[1]);
  free(xd);
  free(yd);
  lathe_builder_free(b);
  lathe_builder_free(b2);
}

TEST(dot_general_transposed_result) {
  if (!tst_rows_of(LATHE_OP_DOT_GENERAL) && !tst_rows_of(LATHE_OP_TRANSPOSE)) return;
  transposed_product_case(LATHE_DTYPE_FLOAT32);
  transposed_product_case(LATHE_DTYPE_FLOAT64);
  transposed_product_case(LATHE_DTYPE_INT32);
  transposed_product_case(LATHE_DTYPE_COMPLEX64);
}
