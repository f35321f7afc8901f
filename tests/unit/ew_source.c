/* ew_source.c -- the text path of elementwise semantics equals the compiled one.
 *
 * For every (op, dtype) that lathe:cpu runs elementwise (and every ConvertDType pair), the test
 * emits lathe_ew_source's element function into one C file after lathe_ew_prelude_c, with a
 * main() that applies each to fixed edge-case vectors (0, -1, MIN, MAX, NaN, +-Inf, -0,
 * subnormals, shift amounts past the width, big and negative values for conversions), compiles
 * it with the system C compiler ($CC, else cc), runs it, and compares its results bit for bit
 * with lathe:cpu's on the same vectors through the public API: bit for bit, except that two NaNs
 * are the same value (their sign and payload depend on the compiler, see same_value), and that
 * the Float32 ops of lathe:cpu's vector math may differ from libm by 2 ulp (vmath_op). Binary ops
 * see every pair of values, Clamp every triple of the first 12. */
#include <unistd.h>

#include "core/core.h"
#include "graph/ew.h"
#include "graph/graph.h"
#include "testing.h"

/* operand counts from the op table */
static const int op_operands[LATHE_OP_COUNT] = {
#define LATHE_OP(ENUM, GoName, c_name, n, KIND, SIG, FLAGS) n,
#include "lathe_ops.def"
#undef LATHE_OP
};

/* ---- growing byte buffers ---- */
typedef struct {
  char *p;
  size_t n, cap;
} sbuf;

static void sb_put(sbuf *b, const void *data, size_t n) {
  if (b->n + n + 1 > b->cap) {
    b->cap = (b->n + n + 1) * 2;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
  memcpy(b->p + b->n, data, n);
  b->n += n;
  b->p[b->n] = 0;
}
static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }
static void sb_printf(sbuf *b, const char *fmt, ...) LATHE_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof tmp) abort();
  sb_put(b, tmp, (size_t)n);
}
static void sb_align(sbuf *b, size_t a) {
  static const char zero[16];
  if (b->n % a) sb_put(b, zero, a - b->n % a);
}

/* ---- dtypes: compute types as the element functions see them ---- */
static const char *ctype_of(lathe_dtype dt) {
  switch (lathe_dtype_class_of(dt)) {
    case LATHE_CLASS_BOOL: return "uint8_t";
    case LATHE_CLASS_SINT:
    case LATHE_CLASS_UINT: {
      static const char *names[2][4] = {{"int8_t", "int16_t", "int32_t", "int64_t"},
                                        {"uint8_t", "uint16_t", "uint32_t", "uint64_t"}};
      int bits = lathe_dtype_bits(dt), w = bits <= 8 ? 0 : bits == 16 ? 1 : bits == 32 ? 2 : 3;
      return names[lathe_dtype_class_of(dt) == LATHE_CLASS_UINT][w];
    }
    case LATHE_CLASS_HALF: return "float";
    case LATHE_CLASS_FLOAT: return dt == LATHE_DTYPE_FLOAT64 ? "double" : "float";
    case LATHE_CLASS_COMPLEX: return dt == LATHE_DTYPE_COMPLEX128 ? "lt_c128" : "lt_c64";
    default: return "?";
  }
}
static size_t csize_of(const char *name) {
  if (strstr(name, "8_t")) return 1;
  if (strstr(name, "16_t")) return 2;
  if (strstr(name, "32_t") || !strcmp(name, "float")) return 4;
  if (!strcmp(name, "lt_c128")) return 16;
  return 8; /* int64_t, uint64_t, double, lt_c64 */
}

/* Element i of storage d (dtype dt) in its compute type, into out (csize bytes). */
static void load_compute(const void *d, lathe_dtype dt, int64_t i, void *out) {
  if (lathe_dtype_is_packed(dt)) {
    int8_t v = (int8_t)tst_get_int(d, dt, i);
    memcpy(out, &v, 1);
  } else if (dt == LATHE_DTYPE_FLOAT16 || dt == LATHE_DTYPE_BFLOAT16) {
    uint16_t h = ((const uint16_t *)d)[i];
    float f = dt == LATHE_DTYPE_FLOAT16 ? lathe_f16_to_f32(h) : lathe_bf16_to_f32(h);
    memcpy(out, &f, 4);
  } else {
    size_t es = (size_t)lathe_dtype_bits(dt) / 8;
    memcpy(out, (const char *)d + (size_t)i * es, es);
  }
}
/* Compute value v stored as element i of d: the storage conversions of the kernels. */
static void store_compute(void *d, lathe_dtype dt, int64_t i, const void *v) {
  if (lathe_dtype_is_packed(dt)) {
    int8_t x;
    memcpy(&x, v, 1);
    tst_set_int(d, dt, i, (uint64_t)(int64_t)x);
  } else if (dt == LATHE_DTYPE_FLOAT16 || dt == LATHE_DTYPE_BFLOAT16) {
    float f;
    memcpy(&f, v, 4);
    ((uint16_t *)d)[i] = dt == LATHE_DTYPE_FLOAT16 ? lathe_f32_to_f16(f) : lathe_f32_to_bf16(f);
  } else {
    size_t es = (size_t)lathe_dtype_bits(dt) / 8;
    memcpy((char *)d + (size_t)i * es, v, es);
  }
}
/* Element i of d as bits (packed elements sign- or zero-extended), for comparing. */
static void elem_bits(const void *d, lathe_dtype dt, int64_t i, uint64_t out[2]) {
  out[0] = out[1] = 0;
  if (lathe_dtype_is_packed(dt)) out[0] = (uint64_t)tst_get_int(d, dt, i);
  else memcpy(out, (const char *)d + (size_t)i * ((size_t)lathe_dtype_bits(dt) / 8), (size_t)lathe_dtype_bits(dt) / 8);
}
/* Whether bits a and b of one element of dtype dt are the same value: equal bits, or NaN in both
 * (per part for complex). NaN sign and payload are not part of the semantics: which NaN operand
 * propagates depends on the operand order a compiler picks (ew_helpers.h). */
static bool is_nan_bits(uint64_t v, int bits) {
  switch (bits) {
    case 16: return false;
    case 32: return (v & 0x7fffffffu) > 0x7f800000u;
    default: return (v & 0x7fffffffffffffffu) > 0x7ff0000000000000u;
  }
}
/* lathe:cpu computes these Float32 ops with its vector math (src/cpu/vmath.h, error bounds in
 * tests/unit/test_vmath.c): its results and libm's (the text's) may differ in the last bit or
 * two, while special values (NaN, infinities, zeros, overflow) stay libm's. */
static bool vmath_op(lathe_op op, lathe_dtype out) {
  if (out != LATHE_DTYPE_FLOAT32) return false;
  switch (op) {
    case LATHE_OP_EXP: case LATHE_OP_EXPM1: case LATHE_OP_LOG: case LATHE_OP_LOG1P: case LATHE_OP_TANH:
    case LATHE_OP_LOGISTIC: case LATHE_OP_ERF: case LATHE_OP_SIN: case LATHE_OP_COS: case LATHE_OP_POW: return true;
    default: return false;
  }
}
/* Floats a and b (bits) apart in units of the last place: their distance in the total order (a
 * large number when either is NaN or infinite). */
static int64_t f32_ulps(uint64_t a, uint64_t b) {
  if ((a & 0x7fffffffu) >= 0x7f800000u || (b & 0x7fffffffu) >= 0x7f800000u) return a == b ? 0 : INT64_MAX;
  int64_t ka = (a & 0x80000000u) ? -(int64_t)(a & 0x7fffffffu) : (int64_t)a;
  int64_t kb = (b & 0x80000000u) ? -(int64_t)(b & 0x7fffffffu) : (int64_t)b;
  return ka > kb ? ka - kb : kb - ka;
}

static bool same_value(lathe_dtype dt, const uint64_t a[2], const uint64_t b[2], bool *nan) {
  *nan = false;
  switch (dt) {
    case LATHE_DTYPE_FLOAT16:
    case LATHE_DTYPE_BFLOAT16: {
      unsigned inf = dt == LATHE_DTYPE_FLOAT16 ? 0x7c00 : 0x7f80;
      if ((a[0] & 0x7fff) > inf && (b[0] & 0x7fff) > inf) return *nan = true;
      return a[0] == b[0];
    }
    case LATHE_DTYPE_FLOAT32:
    case LATHE_DTYPE_FLOAT64:
      if (is_nan_bits(a[0], lathe_dtype_bits(dt)) && is_nan_bits(b[0], lathe_dtype_bits(dt))) return *nan = true;
      return a[0] == b[0];
    case LATHE_DTYPE_COMPLEX64: {
      bool same = true;
      for (int k = 0; k < 2; k++) {
        uint64_t x = a[0] >> (32 * k) & 0xffffffffu, y = b[0] >> (32 * k) & 0xffffffffu;
        if (is_nan_bits(x, 32) && is_nan_bits(y, 32)) *nan = true;
        else same &= x == y;
      }
      return same;
    }
    case LATHE_DTYPE_COMPLEX128: {
      bool same = true;
      for (int k = 0; k < 2; k++) {
        if (is_nan_bits(a[k], 64) && is_nan_bits(b[k], 64)) *nan = true;
        else same &= a[k] == b[k];
      }
      return same;
    }
    default: return a[0] == b[0] && a[1] == b[1];
  }
}

static void elem_copy(void *dst, int64_t di, const void *src, int64_t si, lathe_dtype dt) {
  if (lathe_dtype_is_packed(dt)) {
    tst_set_int(dst, dt, di, (uint64_t)tst_get_int(src, dt, si));
  } else {
    size_t es = (size_t)lathe_dtype_bits(dt) / 8;
    memcpy((char *)dst + (size_t)di * es, (const char *)src + (size_t)si * es, es);
  }
}

/* ---- the edge-case vectors, in storage ---- */
typedef struct {
  void *data;
  int n;
} vec;

static vec make_vec(lathe_dtype dt) {
  vec v = {calloc(64, 16), 0};
  if (!v.data) abort();
  int bits = lathe_dtype_bits(dt);
  switch (lathe_dtype_class_of(dt)) {
    case LATHE_CLASS_BOOL:
      ((uint8_t *)v.data)[0] = 0, ((uint8_t *)v.data)[1] = 1, v.n = 2;
      break;
    case LATHE_CLASS_SINT:
    case LATHE_CLASS_UINT: {
      uint64_t min = (uint64_t)1 << (bits - 1); /* MIN of signed; the middle of unsigned */
      const uint64_t vals[] = {0, 1, (uint64_t)-1, min, min - 1, 2, (uint64_t)-2, min + 1, min - 2,
                               (uint64_t)bits - 1, (uint64_t)bits, (uint64_t)bits + 1, 3, 7, (uint64_t)-7, 63, 64,
                               100, (uint64_t)-100, 0x5a5a5a5a5a5a5a5au, 0xa5c3f00f1e2d3c4bu};
      for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) tst_set_int(v.data, dt, v.n++, vals[k]);
      break;
    }
    case LATHE_CLASS_FLOAT:
    case LATHE_CLASS_HALF: {
      const double vals[] = {0.0,  -0.0, 1,     -1,    NAN,  -NAN,        INFINITY,    -INFINITY,     0.5,
                             -0.5, 1.5,  2.5,   -2.5,  3.7,  -3.7,        1e10,        2147483648.0,  -2147483904.0,
                             9.3e18, -9.3e18, 1.9e19, 255.5, -128.5, 300, 1e-7, 100, 0.1, 65504, 70000, 33,
                             16777217.0, 9007199254740993.0, 1e300, -1e-300};
      for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
        if (dt == LATHE_DTYPE_FLOAT64) ((double *)v.data)[v.n++] = vals[k];
        else if (dt == LATHE_DTYPE_FLOAT32) ((float *)v.data)[v.n++] = (float)vals[k];
        else tst_set(v.data, dt, v.n++, vals[k]); /* rounds to the half format */
      }
      /* signalling NaN, smallest and largest subnormals, smallest normal, largest finite */
      if (dt == LATHE_DTYPE_FLOAT64) {
        const uint64_t b[] = {0x7ff0000000000001u, 1, 0x000fffffffffffffu, 0x0010000000000000u, 0xffefffffffffffffu};
        memcpy((double *)v.data + v.n, b, sizeof b), v.n += 5;
      } else if (dt == LATHE_DTYPE_FLOAT32) {
        const uint32_t b[] = {0x7f800001u, 1, 0x007fffffu, 0x00800000u, 0xff7fffffu};
        memcpy((float *)v.data + v.n, b, sizeof b), v.n += 5;
      } else { /* no signalling NaN: Where and Identity move half bits, a float trip would quiet it */
        const uint16_t f16[] = {1, 0x03ff, 0x0400, 0xfbff, 0x7e01}, bf16[] = {1, 0x007f, 0x0080, 0xff7f, 0x7fc1};
        memcpy((uint16_t *)v.data + v.n, dt == LATHE_DTYPE_FLOAT16 ? f16 : bf16, sizeof f16), v.n += 5;
      }
      break;
    }
    case LATHE_CLASS_COMPLEX: {
      const double parts[][2] = {{0, 0},     {-0.0, 0},     {0, -0.0},     {1, 0},        {0, 1},
                                 {-1, 0.5},  {NAN, 0},      {0, NAN},      {INFINITY, 0}, {0, INFINITY},
                                 {-INFINITY, 1}, {INFINITY, NAN}, {1e10, -1e-10}, {3.7, -1.2}, {0.25, 0.3},
                                 {-0.4, 0.1}, {1e-40, 1},   {2.5, 2.5},    {1e30, 1e30},  {100, -50},
                                 {-3, 0},    {-1e-310, 2},  {1e300, -1e300}};
      for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
        tst_set_complex(v.data, dt, v.n++, parts[k][0], parts[k][1]);
      }
      /* a signalling NaN part */
      if (dt == LATHE_DTYPE_COMPLEX64) {
        const uint32_t b[2] = {0x7f800001u, 0x3f800000u};
        memcpy((float *)v.data + 2 * v.n++, b, 8);
      } else {
        const uint64_t b[2] = {0x3ff0000000000000u, 0x7ff0000000000001u};
        memcpy((double *)v.data + 2 * v.n++, b, 16);
      }
      break;
    }
    default: break;
  }
  return v;
}

/* ---- cases ---- */
typedef struct {
  lathe_op op;
  lathe_dtype dt, to; /* dt: the operands' (Where: the values'); to: ConvertDType's target */
  int arity;
  int64_t n;
  lathe_dtype in_dt[3];
  void *in[3];   /* storage, n elements each */
  void *want;    /* lathe:cpu's result (storage) */
  lathe_dtype out_dt;
  char fname[96], ot[16];
} ew_case;

/* Runs the case's op on lathe:cpu; false (with a failed CHECK) when it cannot. */
static bool run_cpu(ew_case *c) {
  char label[128];
  snprintf(label, sizeof label, "%s %s%s%s", lathe_op_name(c->op), lathe_dtype_name(c->dt),
           c->op == LATHE_OP_CONVERT_DTYPE ? " to " : "", c->op == LATHE_OP_CONVERT_DTYPE ? lathe_dtype_name(c->to) : "");
  lathe_function_t fn;
  lathe_builder_t b = tst_builder(label, &fn);
  if (!b) return false;
  lathe_value_t p[3], y = NULL;
  static const char *names[3] = {"x", "y", "z"};
  for (int k = 0; k < c->arity; k++) p[k] = tst_param(fn, names[k], TST_SHAPE(c->in_dt[k], c->n));
  lathe_status_t st;
  if (c->op == LATHE_OP_CONVERT_DTYPE) st = lathe_convert_dtype(fn, p[0], c->to, &y);
  else if (c->op == LATHE_OP_WHERE) st = lathe_where(fn, p[0], p[1], p[2], &y);
  else if (c->op == LATHE_OP_CLAMP) st = lathe_clamp(fn, p[0], p[1], p[2], &y);
  else if (c->arity == 1) st = lathe_unary(fn, c->op, p[0], &y);
  else st = lathe_binary(fn, c->op, p[0], p[1], &y);
  if (!st) st = lathe_function_return(fn, &y, 1);
  if (!tst_built(label, st, b)) return false;
  const void *ins[3] = {c->in[0], c->in[1], c->in[2]};
  lathe_shape os;
  void *out = NULL;
  st = tst_run(b, ins, c->arity, &out, 1, &os);
  CHECK(st == NULL, "%s: run: %s", label, lathe_status_message(st));
  lathe_status_free(st);
  lathe_builder_free(b);
  if (!out) return false;
  c->out_dt = os.dtype;
  size_t nb = (size_t)lathe_shape_byte_size(&os);
  c->want = malloc(nb + 1);
  if (!c->want) abort();
  memcpy(c->want, out, nb);
  tst_free_output(out);
  return true;
}

/* Fills the case's operands from the vectors: every value (unary, ConvertDType), every pair
 * (binary), every pair of values under an alternating condition (Where), every triple of the
 * first 12 values (Clamp). */
static void make_inputs(ew_case *c, const vec *vecs) {
  const vec *v = &vecs[c->dt];
  int64_t N = v->n, n;
  if (c->arity == 1) n = N;
  else if (c->op == LATHE_OP_CLAMP) n = (N < 12 ? N : 12) * (N < 12 ? N : 12) * (N < 12 ? N : 12);
  else n = N * N;
  c->n = n;
  for (int k = 0; k < c->arity; k++) {
    c->in_dt[k] = k == 0 && c->op == LATHE_OP_WHERE ? LATHE_DTYPE_BOOL : c->dt;
    c->in[k] = calloc((size_t)n + 1, 16);
    if (!c->in[k]) abort();
  }
  int64_t M = N < 12 ? N : 12;
  for (int64_t i = 0; i < n; i++) {
    if (c->arity == 1) {
      elem_copy(c->in[0], i, v->data, i, c->dt);
    } else if (c->op == LATHE_OP_WHERE) {
      ((uint8_t *)c->in[0])[i] = i % 3 != 0;
      elem_copy(c->in[1], i, v->data, i / N, c->dt);
      elem_copy(c->in[2], i, v->data, i % N, c->dt);
    } else if (c->op == LATHE_OP_CLAMP) {
      elem_copy(c->in[0], i, v->data, i / (M * M), c->dt);
      elem_copy(c->in[1], i, v->data, i / M % M, c->dt);
      elem_copy(c->in[2], i, v->data, i % M, c->dt);
    } else {
      elem_copy(c->in[0], i, v->data, i / N, c->dt);
      elem_copy(c->in[1], i, v->data, i % N, c->dt);
    }
  }
}

static bool is_ew_kind(lathe_op op) {
  lathe_op_kind k = lathe_op_kind_of(op);
  return k == LATHE_KIND_UNARY || k == LATHE_KIND_BINARY || k == LATHE_KIND_COMPARE || k == LATHE_KIND_SELECT;
}

static const char prog_main[] =
    "#include <stdio.h>\n#include <stdlib.h>\n"
    "static unsigned char *in_p;\nstatic FILE *out_f;\n"
    "static const void *take(size_t nb) { const void *p = in_p; in_p += (nb + 15) / 16 * 16; return p; }\n"
    "#define RUN(CALL, OT, N) { OT *r = malloc(sizeof(OT) * (N) + 1); for (long i = 0; i < (N); i++) r[i] = CALL; "
    "fwrite(r, sizeof(OT), (N), out_f); free(r); }\n"
    "#define RUN1(F, OT, T0, N) { const T0 *a = take(sizeof(T0) * (N)); RUN(F(a[i]), OT, N) }\n"
    "#define RUN2(F, OT, T0, T1, N) { const T0 *a = take(sizeof(T0) * (N)); const T1 *b = take(sizeof(T1) * (N)); "
    "RUN(F(a[i], b[i]), OT, N) }\n"
    "#define RUN3(F, OT, T0, T1, T2, N) { const T0 *a = take(sizeof(T0) * (N)); const T1 *b = take(sizeof(T1) * (N)); "
    "const T2 *c = take(sizeof(T2) * (N)); RUN(F(a[i], b[i], c[i]), OT, N) }\n"
    "int main(int argc, char **argv) {\n"
    "  if (argc != 3) return 2;\n"
    "  FILE *f = fopen(argv[1], \"rb\");\n"
    "  if (!f) return 3;\n"
    "  fseek(f, 0, SEEK_END); long sz = ftell(f); fseek(f, 0, SEEK_SET);\n"
    "  in_p = aligned_alloc(16, (size_t)(sz + 16) / 16 * 16);\n"
    "  if (!in_p || fread(in_p, 1, (size_t)sz, f) != (size_t)sz) return 4;\n"
    "  fclose(f);\n"
    "  out_f = fopen(argv[2], \"wb\");\n"
    "  if (!out_f) return 5;\n";

/* Whether a C compiler answers; *cc receives its name. */
static bool find_cc(const char **cc) {
  const char *env = getenv("CC");
  *cc = env && *env ? env : "cc";
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s --version >/dev/null 2>&1", *cc);
  return system(cmd) == 0;
}

static char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = malloc((size_t)(sz > 0 ? sz : 0) + 1);
  if (!p) abort();
  *n = fread(p, 1, (size_t)(sz > 0 ? sz : 0), f);
  p[*n] = 0;
  fclose(f);
  return p;
}

TEST(ew_text_matches_cpu) {
  const char *cc;
  if (!find_cc(&cc)) SKIP("no C compiler ($CC or cc) to compile the generated source");
  vec vecs[LATHE_DTYPE_LIMIT] = {{0}};
  for (int d = 0; d < tst_n_all_dtypes; d++) vecs[tst_all_dtypes[d]] = make_vec(tst_all_dtypes[d]);

  /* every (op, dtype) the CPU runs, and ew.def's rows are exactly those */
  int cap = 4096, n_cases = 0, per_kind[LATHE_KIND_COUNT] = {0};
  ew_case *cases = calloc((size_t)cap, sizeof *cases);
  if (!cases) abort();
  lathe_backend_t be = tst_backend();
  for (int d = 0; d < tst_n_all_dtypes; d++) {
    lathe_dtype dt = tst_all_dtypes[d];
    for (int o = 0; o < LATHE_OP_COUNT; o++) {
      lathe_op op = (lathe_op)o;
      bool convert = op == LATHE_OP_CONVERT_DTYPE;
      if (!is_ew_kind(op) && !convert) continue;
      for (int t = 0; t < (convert ? tst_n_all_dtypes : 1); t++) {
        lathe_dtype to = convert ? tst_all_dtypes[t] : LATHE_DTYPE_INVALID;
        bool cpu = lathe_backend_supports_op(be, op, op == LATHE_OP_WHERE ? LATHE_DTYPE_BOOL : dt);
        bool def = lathe_ew_defined(op, dt, to);
        CHECK(cpu == def, "%s on %s%s%s: lathe:cpu %s it but ew.def %s", lathe_op_name(op), lathe_dtype_name(dt),
              convert ? " to " : "", convert ? lathe_dtype_name(to) : "", cpu ? "runs" : "does not run",
              def ? "defines it" : "does not");
        if (!cpu || !def) continue;
        if (n_cases == cap) {
          cases = realloc(cases, sizeof *cases * (size_t)(cap *= 2));
          if (!cases) abort();
        }
        ew_case *c = &cases[n_cases];
        memset(c, 0, sizeof *c);
        c->op = op, c->dt = dt, c->to = to;
        c->arity = op_operands[op];
        make_inputs(c, vecs);
        if (run_cpu(c)) n_cases++, per_kind[lathe_op_kind_of(op)]++;
        else
          for (int k = 0; k < c->arity; k++) free(c->in[k]);
      }
    }
  }

  /* the program: prelude, element functions, main; its inputs in compute types */
  sbuf src = {0}, data = {0};
  sb_str(&src, lathe_ew_prelude_c());
  char fsrc[4096];
  for (int i = 0; i < n_cases; i++) {
    ew_case *c = &cases[i];
    size_t len;
    lathe_status_t st = lathe_ew_source(c->op, c->dt, c->to, fsrc, sizeof fsrc, &len);
    CHECK(st == NULL && len == strlen(fsrc), "lathe_ew_source(%s, %s): %s", lathe_op_name(c->op),
          lathe_dtype_name(c->dt), lathe_status_message(st));
    lathe_status_free(st);
    if (sscanf(fsrc, "static inline %15s %95[a-zA-Z0-9_](", c->ot, c->fname) != 2) c->fname[0] = 0;
    sb_str(&src, fsrc);
  }
  sb_str(&src, prog_main);
  for (int i = 0; i < n_cases; i++) {
    ew_case *c = &cases[i];
    if (!c->fname[0]) continue;
    const char *tn[3];
    for (int k = 0; k < c->arity; k++) {
      tn[k] = ctype_of(c->in_dt[k]);
      size_t cs = csize_of(tn[k]);
      unsigned char e[16];
      for (int64_t j = 0; j < c->n; j++) load_compute(c->in[k], c->in_dt[k], j, e), sb_put(&data, e, cs);
      sb_align(&data, 16);
    }
    if (c->arity == 1) sb_printf(&src, "  RUN1(%s, %s, %s, %lld)\n", c->fname, c->ot, tn[0], (long long)c->n);
    else if (c->arity == 2)
      sb_printf(&src, "  RUN2(%s, %s, %s, %s, %lld)\n", c->fname, c->ot, tn[0], tn[1], (long long)c->n);
    else
      sb_printf(&src, "  RUN3(%s, %s, %s, %s, %s, %lld)\n", c->fname, c->ot, tn[0], tn[1], tn[2], (long long)c->n);
  }
  sb_str(&src, "  return fclose(out_f) != 0;\n}\n");

  char dir[] = "/tmp/lathe_ew_XXXXXX", path[4][64], cmd[1024];
  CHECK(mkdtemp(dir) != NULL, "mkdtemp failed");
  const char *names[4] = {"ew.c", "ew.in", "ew.out", "ew"};
  for (int k = 0; k < 4; k++) snprintf(path[k], sizeof path[k], "%s/%s", dir, names[k]);
  FILE *f = fopen(path[0], "wb"), *g = fopen(path[1], "wb");
  CHECK(f && g, "cannot write into %s", dir);
  if (f) fwrite(src.p, 1, src.n, f), fclose(f);
  if (g) fwrite(data.p, 1, data.n, g), fclose(g);
  /* Unoptimised (fast to compile; the semantics must not depend on it); no -march, so no FMA,
   * and no contraction, as in lathe's build. */
  snprintf(cmd, sizeof cmd, "%s -std=c11 -O0 -ffp-contract=off -w -o %s %s -lm 2>&1", cc, path[3], path[0]);
  int rc = system(cmd);
  CHECK(rc == 0, "compiling the generated source with %s failed (%d): kept in %s", cc, rc, path[0]);
  if (rc == 0) {
    snprintf(cmd, sizeof cmd, "%s %s %s", path[3], path[1], path[2]);
    rc = system(cmd);
    CHECK(rc == 0, "running the generated program failed (%d)", rc);
  }
  size_t got_n = 0;
  char *got = rc == 0 ? read_file(path[2], &got_n) : NULL;

  /* compare bit for bit, in storage */
  size_t off = 0;
  long long values = 0, bad_total = 0, nans = 0;
  for (int i = 0; got && i < n_cases; i++) {
    ew_case *c = &cases[i];
    if (!c->fname[0]) continue;
    size_t os = csize_of(c->ot);
    if (off + os * (size_t)c->n > got_n) {
      CHECK(false, "the program's output is short at %s", c->fname);
      break;
    }
    void *mine = calloc((size_t)c->n + 1, 16);
    if (!mine) abort();
    for (int64_t j = 0; j < c->n; j++) store_compute(mine, c->out_dt, j, got + off + (size_t)j * os);
    off += os * (size_t)c->n;
    int64_t bad = 0, first = -1;
    for (int64_t j = 0; j < c->n; j++) {
      uint64_t a[2], b[2];
      bool nan;
      elem_bits(mine, c->out_dt, j, a);
      elem_bits(c->want, c->out_dt, j, b);
      if (!same_value(c->out_dt, a, b, &nan) && !(vmath_op(c->op, c->out_dt) && f32_ulps(a[0], b[0]) <= 2))
        bad++, first = first < 0 ? j : first;
      nans += nan;
    }
    if (bad) {
      uint64_t a[2], b[2], x[2] = {0, 0};
      elem_bits(mine, c->out_dt, first, a);
      elem_bits(c->want, c->out_dt, first, b);
      elem_bits(c->in[c->arity - 1], c->in_dt[c->arity - 1], first, x);
      CHECK(false, "%s: %lld of %lld values differ; first at %lld (last operand %016llx %016llx): text %016llx %016llx, lathe:cpu %016llx %016llx",
            c->fname, (long long)bad, (long long)c->n, (long long)first, (unsigned long long)x[1],
            (unsigned long long)x[0], (unsigned long long)a[1], (unsigned long long)a[0], (unsigned long long)b[1],
            (unsigned long long)b[0]);
    } else {
      CHECK(true, "matches");
    }
    values += c->n, bad_total += bad;
    free(mine);
  }
  CHECK(!got || off == got_n, "the program wrote %zu bytes, %zu expected", got_n, off);
  printf("ew_text_matches_cpu: %d element functions (%d unary, %d binary, %d compare, %d select, %d convert) "
         "compiled with %s and compared with lathe:cpu on %lld values (%lld NaN in both): %lld differ\n",
         n_cases, per_kind[LATHE_KIND_UNARY], per_kind[LATHE_KIND_BINARY], per_kind[LATHE_KIND_COMPARE],
         per_kind[LATHE_KIND_SELECT], per_kind[LATHE_KIND_CONVERT], cc, values, nans, bad_total);

  if (bad_total == 0 && got) {
    for (int k = 0; k < 4; k++) unlink(path[k]);
    rmdir(dir);
  }
  free(got);
  free(src.p);
  free(data.p);
  for (int i = 0; i < n_cases; i++) {
    for (int k = 0; k < cases[i].arity; k++) free(cases[i].in[k]);
    free(cases[i].want);
  }
  free(cases);
  for (int d = 0; d < LATHE_DTYPE_LIMIT; d++) free(vecs[d].data);
}

/* The C spellings of the generic helpers and the includes of ew_helpers.h are repeated in
 * the prelude text: every such line of the header must be there. */
TEST(ew_prelude_matches_helpers_h) {
  size_t n;
  char *h = read_file("src/graph/ew_helpers.h", &n);
  if (!h) SKIP("src/graph/ew_helpers.h not found from the working directory");
  const char *prelude = lathe_ew_prelude_c();
  int lines = 0;
  for (char *line = strtok(h, "\n"); line; line = strtok(NULL, "\n")) {
    if (strncmp(line, "#include <", 10) && strncmp(line, "typedef ", 8) && strncmp(line, "#define lt_", 11)) continue;

    char want[512];
    snprintf(want, sizeof want, "\n%s\n", line);
    CHECK(strstr(prelude, want) != NULL, "lathe_ew_prelude_c lacks the line \"%s\" of ew_helpers.h", line);
    lines++;
  }
  CHECK(lines >= 20, "only %d preamble lines found in ew_helpers.h", lines);
  /* and every helper function of the header */
  CHECK(strstr(prelude, "static inline int lt_popcount(uint64_t v) {") != NULL, "the helper functions are missing");
  CHECK(strstr(prelude, "static inline uint64_t lt_f2u(double v, int bits) {") != NULL, "lt_f2u is missing");
  free(h);
}

TEST(ew_source_errors) {
  char buf[1024];
  size_t len = 99;
  CHECK_ERR(lathe_ew_source(LATHE_OP_DOT_GENERAL, LATHE_DTYPE_FLOAT32, 0, buf, sizeof buf, &len), INVALID_ARGUMENT,
            "DotGeneral");
  CHECK(len == 0, "len %zu after an error", len);
  CHECK_ERR(lathe_ew_source(LATHE_OP_COUNT, LATHE_DTYPE_FLOAT32, 0, buf, sizeof buf, NULL), INVALID_ARGUMENT,
            "unknown op");
  CHECK_ERR(lathe_ew_source(LATHE_OP_ADD, (lathe_dtype)99, 0, buf, sizeof buf, NULL), INVALID_ARGUMENT, "Add");
  CHECK_ERR(lathe_ew_source(LATHE_OP_ABS, LATHE_DTYPE_BOOL, 0, buf, sizeof buf, NULL), UNIMPLEMENTED, "Abs");
  CHECK_ERR(lathe_ew_source(LATHE_OP_NEG, LATHE_DTYPE_UINT8, 0, buf, sizeof buf, NULL), UNIMPLEMENTED, "Uint8");
  CHECK_ERR(lathe_ew_source(LATHE_OP_CONVERT_DTYPE, LATHE_DTYPE_FLOAT32, (lathe_dtype)0, buf, sizeof buf, NULL),
            INVALID_ARGUMENT, "ConvertDType");
  CHECK(!lathe_ew_defined(LATHE_OP_ATAN2, LATHE_DTYPE_COMPLEX64, 0), "Atan2 of Complex64 is not defined");
  CHECK(lathe_ew_defined(LATHE_OP_CONVERT_DTYPE, LATHE_DTYPE_INT4, LATHE_DTYPE_BFLOAT16), "Int4 -> BFloat16");

  /* too small: the length needed comes back, the buffer holds a terminated prefix */
  CHECK_ERR(lathe_ew_source(LATHE_OP_ADD, LATHE_DTYPE_INT16, 0, buf, 16, &len), RESOURCE_EXHAUSTED, "Add");
  CHECK(len > 16 && strlen(buf) == 15, "len %zu, prefix %zu", len, strlen(buf));
  CHECK_ERR(lathe_ew_source(LATHE_OP_ADD, LATHE_DTYPE_INT16, 0, NULL, 0, &len), RESOURCE_EXHAUSTED, "Add");
  size_t need = len;
  CHECK_OK(lathe_ew_source(LATHE_OP_ADD, LATHE_DTYPE_INT16, 0, buf, need + 1, &len));
  CHECK(len == need && strlen(buf) == need, "len %zu, need %zu", len, need);
  CHECK(strstr(buf, "static inline int16_t lt_ew_ADD_INT16(int16_t x, int16_t y) {") &&
            strstr(buf, "typedef unsigned UW;") && strstr(buf, "return (OT)((UW)x + (UW)y);"),
        "unexpected source:\n%s", buf);
  CHECK_OK(lathe_ew_source(LATHE_OP_WHERE, LATHE_DTYPE_COMPLEX128, 0, buf, sizeof buf, NULL));
  CHECK(strstr(buf, "static inline lt_c128 lt_ew_WHERE_COMPLEX128(uint8_t x, lt_c128 y, lt_c128 z) {"), "%s", buf);
  CHECK_OK(lathe_ew_source(LATHE_OP_CONVERT_DTYPE, LATHE_DTYPE_FLOAT32, LATHE_DTYPE_INT4, buf, sizeof buf, NULL));
  CHECK(strstr(buf, "int8_t lt_ew_CONVERT_DTYPE_FLOAT32_INT4(float x)") && strstr(buf, "const int OBITS = 4;"), "%s",
        buf);
  CHECK_OK(lathe_ew_source(LATHE_OP_ABS, LATHE_DTYPE_COMPLEX64, 0, buf, sizeof buf, NULL));
  CHECK(strstr(buf, "static inline float lt_ew_ABS_COMPLEX64(lt_c64 x)"), "%s", buf);
}
