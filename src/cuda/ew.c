/* ew.c -- elementwise ops and fusion regions on the GPU, generated from the one table of
 * elementwise semantics (src/graph/ew.def through lathe_ew_source): each op's element function
 * is the same expression the CPU kernels compile, over this file's CUDA prelude of the lt_*
 * helpers (the contract is in src/graph/ew_helpers.h). A kernel is generated per step or region
 * shape of the code -- ops, dtypes and how each input is read (whole, scalar, strided) -- never
 * per size: sizes and strides are arguments, so a new batch size reuses the kernel. */
#include <stdio.h>

#include "../graph/ew.h"
#include "cuda.h"

/* ---- the CUDA helper prelude (C++ overloads where C has generic macros) ---- */
static const char ew_prelude[] =
    "#define INFINITY __int_as_float(0x7f800000)\n"
    "#define NAN __int_as_float(0x7fffffff)\n"
    "#define INT32_MAX 2147483647\n"
    "#define INT64_MAX 9223372036854775807LL\n"
    "template <typename A> LT_DEV A lt_max(A a, A b) { return (a > b || a != a) ? a : b; }\n"
    "template <typename A> LT_DEV A lt_min(A a, A b) { return (a < b || a != a) ? a : b; }\n"
    "LT_DEV int32_t lt_key(float f) { int32_t i = __float_as_int(f); return i < 0 ? i ^ INT32_MAX : i; }\n"
    "LT_DEV int64_t lt_key(double f) { int64_t i = __double_as_longlong(f); return i < 0 ? i ^ INT64_MAX : i; }\n"
    "LT_DEV double lt_f64(float v) {\n"
    "  double d = v; uint64_t u = (uint64_t)__double_as_longlong(d); u |= (uint64_t)(d != d) << 51;\n"
    "  return __longlong_as_double((long long)u);\n"
    "}\n"
    "LT_DEV double lt_f64(double v) { return v; }\n"
    "LT_DEV int lt_popcount(uint64_t v) { return __popcll(v); }\n"
    "LT_DEV int lt_sigbits(uint64_t v) { return 64 - __clzll((long long)v); }\n"
    "LT_DEV uint64_t lt_lowbits(uint64_t v, int bits) { return bits >= 64 ? v : v & (((uint64_t)1 << bits) - 1); }\n"
    "LT_DEV uint64_t lt_ipow(uint64_t base, int64_t e) {\n"
    "  uint64_t r = 1; while (e > 0) { if (e & 1) r *= base; base *= base; e >>= 1; } return r;\n"
    "}\n"
    "LT_DEV int64_t lt_f2s(double v, int bits) {\n"
    "  double lim = ldexp(1.0, bits - 1);\n"
    "  if (v != v) return 0;\n"
    "  if (v >= lim) return (int64_t)(((uint64_t)1 << (bits - 1)) - 1);\n"
    "  if (v <= -lim) return (int64_t)(0 - ((uint64_t)1 << (bits - 1)));\n"
    "  return (int64_t)v;\n"
    "}\n"
    "LT_DEV uint64_t lt_f2u(double v, int bits) {\n"
    "  if (v != v || v <= 0) return 0;\n"
    "  if (v >= ldexp(1.0, bits)) return ~(uint64_t)0 >> (64 - bits);\n"
    "  return (uint64_t)v;\n"
    "}\n"
    "/* complex: operators, parts, and math after glibc's formulas */\n"
    "LT_DEV lt_c64 operator+(lt_c64 a, lt_c64 b) { return lt_c64(a.re + b.re, a.im + b.im); }\n"
    "LT_DEV lt_c128 operator+(lt_c128 a, lt_c128 b) { return lt_c128(a.re + b.re, a.im + b.im); }\n"
    "LT_DEV lt_c64 operator-(lt_c64 a, lt_c64 b) { return lt_c64(a.re - b.re, a.im - b.im); }\n"
    "LT_DEV lt_c128 operator-(lt_c128 a, lt_c128 b) { return lt_c128(a.re - b.re, a.im - b.im); }\n"
    "LT_DEV lt_c64 operator-(lt_c64 a) { return lt_c64(-a.re, -a.im); }\n"
    "LT_DEV lt_c128 operator-(lt_c128 a) { return lt_c128(-a.re, -a.im); }\n"
    "LT_DEV bool operator==(lt_c64 a, lt_c64 b) { return a.re == b.re && a.im == b.im; }\n"
    "LT_DEV bool operator==(lt_c128 a, lt_c128 b) { return a.re == b.re && a.im == b.im; }\n"
    "LT_DEV bool operator!=(lt_c64 a, lt_c64 b) { return !(a == b); }\n"
    "LT_DEV bool operator!=(lt_c128 a, lt_c128 b) { return !(a == b); }\n"
    "LT_DEV float lt_creal(lt_c64 z) { return z.re; }\n"
    "LT_DEV double lt_creal(lt_c128 z) { return z.re; }\n"
    "LT_DEV float lt_cimag(lt_c64 z) { return z.im; }\n"
    "LT_DEV double lt_cimag(lt_c128 z) { return z.im; }\n"
    "LT_DEV lt_c64 lt_conj(lt_c64 z) { return lt_c64(z.re, -z.im); }\n"
    "LT_DEV lt_c128 lt_conj(lt_c128 z) { return lt_c128(z.re, -z.im); }\n"
    "LT_DEV lt_c64 lt_cmk(float re, float im) { return lt_c64(re, im); }\n"
    "LT_DEV lt_c128 lt_cmk(double re, double im) { return lt_c128(re, im); }\n"
    "LT_DEV float lt_cabs(lt_c64 z) { return hypotf(z.re, z.im); }\n"
    "LT_DEV double lt_cabs(lt_c128 z) { return hypot(z.re, z.im); }\n"
    "/* C99 Annex G multiplication and division (libgcc's __mulsc3 / __divsc3) */\n"
    "template <typename C, typename R> LT_DEV C lt_cmul_t(C z, C w) {\n"
    "  R a = z.re, b = z.im, c = w.re, d = w.im, ac = a * c, bd = b * d, ad = a * d, bc = b * c;\n"
    "  R x = ac - bd, y = ad + bc;\n"
    "  if (isnan(x) && isnan(y)) {\n"
    "    bool recalc = false;\n"
    "    if (isinf(a) || isinf(b)) { a = copysign(isinf(a) ? (R)1 : (R)0, a); b = copysign(isinf(b) ? (R)1 : (R)0, b);\n"
    "      if (isnan(c)) c = copysign((R)0, c); if (isnan(d)) d = copysign((R)0, d); recalc = true; }\n"
    "    if (isinf(c) || isinf(d)) { c = copysign(isinf(c) ? (R)1 : (R)0, c); d = copysign(isinf(d) ? (R)1 : (R)0, d);\n"
    "      if (isnan(a)) a = copysign((R)0, a); if (isnan(b)) b = copysign((R)0, b); recalc = true; }\n"
    "    if (!recalc && (isinf(ac) || isinf(bd) || isinf(ad) || isinf(bc))) {\n"
    "      if (isnan(a)) a = copysign((R)0, a); if (isnan(b)) b = copysign((R)0, b);\n"
    "      if (isnan(c)) c = copysign((R)0, c); if (isnan(d)) d = copysign((R)0, d); recalc = true; }\n"
    "    if (recalc) { R inf = (R)INFINITY; x = inf * (a * c - b * d); y = inf * (a * d + b * c); }\n"
    "  }\n"
    "  return C(x, y);\n"
    "}\n"
    "template <typename C, typename R> LT_DEV C lt_cdiv_t(C z, C w) {\n"
    "  R a = z.re, b = z.im, c = w.re, d = w.im; int ilogbw = 0;\n"
    "  R logbw = logb(fmax(fabs(c), fabs(d)));\n"
    "  if (isfinite(logbw)) { ilogbw = (int)logbw; c = scalbn(c, -ilogbw); d = scalbn(d, -ilogbw); }\n"
    "  R denom = c * c + d * d;\n"
    "  R x = scalbn((a * c + b * d) / denom, -ilogbw), y = scalbn((b * c - a * d) / denom, -ilogbw);\n"
    "  if (isnan(x) && isnan(y)) {\n"
    "    R inf = (R)INFINITY;\n"
    "    if (denom == 0 && (!isnan(a) || !isnan(b))) { x = copysign(inf, c) * a; y = copysign(inf, c) * b; }\n"
    "    else if ((isinf(a) || isinf(b)) && isfinite(c) && isfinite(d)) {\n"
    "      a = copysign(isinf(a) ? (R)1 : (R)0, a); b = copysign(isinf(b) ? (R)1 : (R)0, b);\n"
    "      x = inf * (a * c + b * d); y = inf * (b * c - a * d); }\n"
    "    else if (isinf(logbw) && logbw > 0 && isfinite(a) && isfinite(b)) {\n"
    "      c = copysign(isinf(c) ? (R)1 : (R)0, c); d = copysign(isinf(d) ? (R)1 : (R)0, d);\n"
    "      x = (R)0 * (a * c + b * d); y = (R)0 * (b * c - a * d); }\n"
    "  }\n"
    "  return C(x, y);\n"
    "}\n"
    "LT_DEV lt_c64 lt_cmul(lt_c64 a, lt_c64 b) { return lt_cmul_t<lt_c64, float>(a, b); }\n"
    "LT_DEV lt_c128 lt_cmul(lt_c128 a, lt_c128 b) { return lt_cmul_t<lt_c128, double>(a, b); }\n"
    "LT_DEV lt_c64 lt_cdiv(lt_c64 a, lt_c64 b) { return lt_cdiv_t<lt_c64, float>(a, b); }\n"
    "LT_DEV lt_c128 lt_cdiv(lt_c128 a, lt_c128 b) { return lt_cdiv_t<lt_c128, double>(a, b); }\n"
    "template <typename C, typename R> LT_DEV C lt_cexp_t(C z) {\n"
    "  R x = z.re, y = z.im;\n"
    "  /* C99 Annex G's special values */\n"
    "  if (isinf(x) && x < 0 && !isfinite(y)) return C((R)0, copysign((R)0, y));\n"
    "  if (isinf(x) && x > 0 && !isfinite(y)) return C(x, isnan(y) ? y : (R)NAN);\n"
    "  if (isnan(x) && y == 0) return C(x, y);\n"
    "  if (y == 0) return C(exp(x), y);\n"
    "  R e = exp(x), s, c; sincos(y, &s, &c);\n"
    "  return C(e * c, e * s);\n"
    "}\n"
    "LT_DEV lt_c64 lt_cexp(lt_c64 z) { return lt_cexp_t<lt_c64, float>(z); }\n"
    "LT_DEV lt_c128 lt_cexp(lt_c128 z) { return lt_cexp_t<lt_c128, double>(z); }\n"
    "LT_DEV lt_c64 lt_clog(lt_c64 z) { return lt_c64(logf(hypotf(z.re, z.im)), atan2f(z.im, z.re)); }\n"
    "LT_DEV lt_c128 lt_clog(lt_c128 z) { return lt_c128(log(hypot(z.re, z.im)), atan2(z.im, z.re)); }\n"
    "template <typename C, typename R> LT_DEV C lt_csqrt_t(C z) {\n"
    "  R x = z.re, y = z.im;\n"
    "  if (isinf(y)) return C((R)INFINITY, y);\n"
    "  if (x == 0 && y == 0) return C((R)0, y);\n"
    "  R t = sqrt((fabs(x) + hypot(x, y)) * (R)0.5);\n"
    "  if (x >= 0) return C(t, y / (2 * t));\n"
    "  return C(fabs(y) / (2 * t), copysign(t, y));\n"
    "}\n"
    "LT_DEV lt_c64 lt_csqrt(lt_c64 z) { return lt_csqrt_t<lt_c64, float>(z); }\n"
    "LT_DEV lt_c128 lt_csqrt(lt_c128 z) { return lt_csqrt_t<lt_c128, double>(z); }\n"
    "LT_DEV lt_c64 lt_csin(lt_c64 z) { return lt_c64(sinf(z.re) * coshf(z.im), cosf(z.re) * sinhf(z.im)); }\n"
    "LT_DEV lt_c128 lt_csin(lt_c128 z) { return lt_c128(sin(z.re) * cosh(z.im), cos(z.re) * sinh(z.im)); }\n"
    "LT_DEV lt_c64 lt_ccos(lt_c64 z) { return lt_c64(cosf(z.re) * coshf(z.im), -sinf(z.re) * sinhf(z.im)); }\n"
    "LT_DEV lt_c128 lt_ccos(lt_c128 z) { return lt_c128(cos(z.re) * cosh(z.im), -sin(z.re) * sinh(z.im)); }\n"
    "template <typename C, typename R> LT_DEV C lt_ctanh_t(C z) {\n"
    "  R x = z.re, y = z.im;\n"
    "  if (fabs(x) > (R)20) { R s, c; sincos(y, &s, &c); return C(copysign((R)1, x), (R)4 * s * c * exp(-2 * fabs(x))); }\n"
    "  R t = tan(y), b = (R)1 + t * t, s = sinh(x), r = sqrt((R)1 + s * s), d = (R)1 + b * s * s;\n"
    "  return C(b * r * s / d, t / d);\n"
    "}\n"
    "LT_DEV lt_c64 lt_ctanh(lt_c64 z) { return lt_ctanh_t<lt_c64, float>(z); }\n"
    "LT_DEV lt_c128 lt_ctanh(lt_c128 z) { return lt_ctanh_t<lt_c128, double>(z); }\n"
    "LT_DEV lt_c64 lt_cpow(lt_c64 a, lt_c64 b) { return lt_cexp(lt_cmul(b, lt_clog(a))); }\n"
    "LT_DEV lt_c128 lt_cpow(lt_c128 a, lt_c128 b) { return lt_cexp(lt_cmul(b, lt_clog(a))); }\n"
    "LT_DEV lt_c128 lt_cexpm1(lt_c128 z) {\n"
    "  double x = z.re, y = z.im, s = sin(y / 2);\n"
    "  return lt_c128(expm1(x) * cos(y) - 2 * s * s, exp(x) * sin(y));\n"
    "}\n"
    "LT_DEV lt_c128 lt_clog1p(lt_c128 z) {\n"
    "  double x = z.re, y = z.im;\n"
    "  if (fabs(x) > 0.5 || fabs(y) > 0.5) return lt_clog(lt_c128(1 + x, y));\n"
    "  return lt_c128(0.5 * log1p(x * (2 + x) + y * y), atan2(y, 1 + x));\n"
    "}\n"
    "LT_DEV lt_c128 lt_csign(lt_c128 z) { double a = hypot(z.re, z.im); return a == 0 ? z : lt_c128(z.re / a, z.im / a); }\n"
    "LT_DEV int lt_cisfinite(lt_c128 z) { return isfinite(z.re) && isfinite(z.im); }\n"
    "LT_DEV int lt_cisnan(lt_c128 z) { return isnan(z.re) || isnan(z.im); }\n";

const char *lathe_cuda_ew_prelude(void) { return ew_prelude; }

/* Storage (S) and compute (T) types per dtype, and the loads and stores between them. Sub-byte
 * integers never reach a kernel here (the executor widens them). */
static const char *storage_of(lathe_dtype dt) {
  switch (dt) {
    case LATHE_DTYPE_BOOL: return "uint8_t";
    case LATHE_DTYPE_INT8: return "int8_t";
    case LATHE_DTYPE_INT16: return "int16_t";
    case LATHE_DTYPE_INT32: return "int32_t";
    case LATHE_DTYPE_INT64: return "int64_t";
    case LATHE_DTYPE_UINT8: return "uint8_t";
    case LATHE_DTYPE_UINT16: return "uint16_t";
    case LATHE_DTYPE_UINT32: return "uint32_t";
    case LATHE_DTYPE_UINT64: return "uint64_t";
    case LATHE_DTYPE_FLOAT16:
    case LATHE_DTYPE_BFLOAT16: return "uint16_t";
    case LATHE_DTYPE_FLOAT32: return "float";
    case LATHE_DTYPE_FLOAT64: return "double";
    case LATHE_DTYPE_COMPLEX64: return "lt_c64";
    case LATHE_DTYPE_COMPLEX128: return "lt_c128";
    default: return NULL;
  }
}

/* Sub-byte integers are stored widened to 8 bits around kernels. */
static lathe_dtype widened(lathe_dtype dt) {
  if (!lathe_dtype_is_packed(dt)) return dt;
  return lathe_dtype_class_of(dt) == LATHE_CLASS_SINT ? LATHE_DTYPE_INT8 : LATHE_DTYPE_UINT8;
}

static const char *compute_of(lathe_dtype dt) {
  return dt == LATHE_DTYPE_FLOAT16 || dt == LATHE_DTYPE_BFLOAT16 ? "float" : storage_of(dt);
}

/* The expression loading element `idx` of pointer `p` of dtype dt, as its compute type. */
static void load_expr(char *buf, size_t cap, lathe_dtype dt, const char *p, const char *idx) {
  if (dt == LATHE_DTYPE_FLOAT16) snprintf(buf, cap, "lt_f16_to_f32(%s[%s])", p, idx);
  else if (dt == LATHE_DTYPE_BFLOAT16) snprintf(buf, cap, "lt_bf16_to_f32(%s[%s])", p, idx);
  else snprintf(buf, cap, "%s[%s]", p, idx);
}

static void store_stmt(char *buf, size_t cap, lathe_dtype dt, const char *p, const char *idx, const char *v) {
  if (dt == LATHE_DTYPE_FLOAT16) snprintf(buf, cap, "%s[%s] = lt_f32_to_f16(%s);", p, idx, v);
  else if (dt == LATHE_DTYPE_BFLOAT16) snprintf(buf, cap, "%s[%s] = lt_f32_to_bf16(%s);", p, idx, v);
  else snprintf(buf, cap, "%s[%s] = %s;", p, idx, v);
}

/* The element function of node n (an op of ew.def) into t; its name into name. */
static lathe_status_t element_fn(lt_text *t, const lathe_node *n, char *name, size_t name_cap) {
  /* sub-byte dtypes as they are: their element functions compute widened, with the true BITS */
  lathe_dtype dt = n->in[n->op == LATHE_OP_WHERE ? 1 : 0]->shape.dtype, to = n->shape.dtype;
  size_t len = 0;
  lathe_status_t st = lathe_ew_source(n->op, dt, to, NULL, 0, &len);
  if (st && lathe_status_code_of(st) != LATHE_STATUS_RESOURCE_EXHAUSTED) return st;
  lathe_status_free(st);
  char *src = malloc(len + 1);
  if (!src) return LATHE_OOM("lathe:cuda: codegen");
  st = lathe_ew_source(n->op, dt, to, src, len + 1, NULL);
  if (!st) {
    /* "static inline <type> <name>(" : the name is the token before the parenthesis */
    const char *paren = strchr(src, '(');
    const char *start = paren;
    while (start > src && start[-1] != ' ') start--;
    snprintf(name, name_cap, "%.*s", (int)(paren - start), start);
    lt_put(t, "%s\n", src);
  }
  free(src);
  return st;
}

/* ---- kernels for a step or a region ----
 * Both are a list of members over one iteration space: a single elementwise op is a region of
 * one member whose operands are all inputs. */
typedef struct {
  const lathe_node *node;
  int n_in;
  int in[LATHE_PMEMBER_MAX_IN]; /* >= 0 member, < 0 input -(k+1) */
  int out;                      /* output index, or -1 */
  bool identity;
} gen_member;

typedef struct {
  lathe_dtype dtype;
  int access; /* LATHE_PACCESS_* */
} gen_input;

/* Generates the kernel `lt_fused` computing members over inputs, writing outputs. Arguments:
 * (int64_t n, lt_dims dims, S *out0.., const S *in0, lt_strides s0, ...). */
static lathe_status_t gen_kernel(lt_text *t, const gen_member *m, int n_members, const gen_input *in, int n_inputs,
                                 int n_outputs) {
  char names[64][96];
  if (n_members > 64) return LATHE_UNIMPL("lathe:cuda: a fused region of %d members", n_members);
  for (int i = 0; i < n_members; i++) {
    names[i][0] = 0;
    if (m[i].identity) continue;
    bool dup = false;
    for (int j = 0; j < i && !dup; j++)
      if (!m[j].identity && m[j].node->op == m[i].node->op && m[j].node->shape.dtype == m[i].node->shape.dtype &&
          m[j].node->in[m[j].node->op == LATHE_OP_WHERE ? 1 : 0]->shape.dtype ==
              m[i].node->in[m[i].node->op == LATHE_OP_WHERE ? 1 : 0]->shape.dtype) {
        memcpy(names[i], names[j], sizeof names[i]);
        dup = true;
      }
    if (!dup) LATHE_RETURN_IF_ERROR(element_fn(t, m[i].node, names[i], sizeof names[i]));
  }
  lt_put(t, "extern \"C\" __global__ void lt_fused(int64_t n, lt_dims dims");
  for (int k = 0; k < n_outputs; k++) {
    lathe_dtype odt = LATHE_DTYPE_INVALID;
    for (int i = 0; i < n_members; i++)
      if (m[i].out == k) odt = widened(m[i].node->shape.dtype);
    lt_put(t, ", %s *o%d", storage_of(odt), k);
  }
  for (int k = 0; k < n_inputs; k++) lt_put(t, ", const %s *i%d, lt_strides s%d", storage_of(in[k].dtype), k, k);
  lt_put(t, ") {\n  LT_LOOP(e, n) {\n");
  char ld[160], idx[64], st[256], v[32];
  for (int k = 0; k < n_inputs; k++) {
    if (in[k].access == LATHE_PACCESS_FULL) snprintf(idx, sizeof idx, "e");
    else if (in[k].access == LATHE_PACCESS_SCALAR) snprintf(idx, sizeof idx, "0");
    else snprintf(idx, sizeof idx, "lt_offset(e, dims, s%d)", k);
    char p[16];
    snprintf(p, sizeof p, "i%d", k);
    load_expr(ld, sizeof ld, in[k].dtype, p, idx);
    lt_put(t, "    %s x%d = %s;\n", compute_of(in[k].dtype), k, ld);
  }
  for (int i = 0; i < n_members; i++) {
    if (m[i].identity) {
      int s = m[i].in[0];
      if (s >= 0) lt_put(t, "    auto v%d = v%d;\n", i, s);
      else lt_put(t, "    auto v%d = x%d;\n", i, -s - 1);
    } else {
      lt_put(t, "    auto v%d = %s(", i, names[i]);
      for (int k = 0; k < m[i].n_in; k++) {
        int s = m[i].in[k];
        if (s >= 0) lt_put(t, "%sv%d", k ? ", " : "", s);
        else lt_put(t, "%sx%d", k ? ", " : "", -s - 1);
      }
      lt_put(t, ");\n");
      /* a Float16/BFloat16 value is stored between ops when unfused: round it alike */
      lathe_dtype od = m[i].node->shape.dtype;
      if (od == LATHE_DTYPE_FLOAT16) lt_put(t, "    v%d = lt_f16_to_f32(lt_f32_to_f16(v%d));\n", i, i);
      if (od == LATHE_DTYPE_BFLOAT16) lt_put(t, "    v%d = lt_bf16_to_f32(lt_f32_to_bf16(v%d));\n", i, i);
    }
    if (m[i].out >= 0) {
      char p[16];
      snprintf(p, sizeof p, "o%d", m[i].out);
      snprintf(v, sizeof v, "v%d", i);
      store_stmt(st, sizeof st, widened(m[i].node->shape.dtype), p, "e", v);
      lt_put(t, "    %s\n", st);
    }
  }
  lt_put(t, "  }\n}\n");
  return t->oom ? LATHE_OOM("lathe:cuda: codegen") : NULL;
}

/* Strides of an input read over the iteration dims (the program's, or implicit broadcasting). */
static lt_strides_h strides_h(const int64_t *s, int rank) {
  lt_strides_h h;
  memset(&h, 0, sizeof h);
  for (int a = 0; a < rank; a++) h.s[a] = s[a];
  return h;
}

/* Launches the generated kernel over iteration shape `it`. */
static lathe_status_t launch_fused(lathe_cuda_exec *ex, const char *source, const lathe_shape *it, lathe_tensor **outs,
                                   int n_outputs, lathe_tensor *const *ins, const lt_strides_h *strides, int n_inputs) {
  int64_t n = lathe_shape_size(it);
  if (n == 0) return NULL;
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel(lathe_cuda_exec_dev(ex), source, "lt_fused", &f));
  lt_dims_h dims;
  memset(&dims, 0, sizeof dims);
  dims.rank = it->rank ? it->rank : 1;
  for (int a = 0; a < it->rank; a++) dims.d[a] = it->dims[a];
  if (!it->rank) dims.d[0] = 1;
  enum { MAXA = 2 + 2 * 64 };
  void *args[MAXA];
  lcuDeviceptr ptrs[64];
  lt_strides_h st[64];
  if (n_outputs + n_inputs > 64) return LATHE_UNIMPL("lathe:cuda: a fused region with %d values", n_outputs + n_inputs);
  int a = 0, p = 0;
  args[a++] = &n;
  args[a++] = &dims;
  for (int k = 0; k < n_outputs; k++) {
    ptrs[p] = lathe_cuda_ptr(outs[k]);
    args[a++] = &ptrs[p++];
  }
  for (int k = 0; k < n_inputs; k++) {
    ptrs[p] = lathe_cuda_ptr(ins[k]);
    args[a++] = &ptrs[p++];
    st[k] = strides[k];
    args[a++] = &st[k];
  }
  unsigned b, th;
  lathe_cuda_grid(n, &b, &th);
  return lathe_cuda_launch(ex, f, b, th, 0, args);
}

/* ---- single elementwise ops ---- */
static bool ew_supported(lathe_op op, lathe_dtype dt) {
  if (op == LATHE_OP_BITCAST) return lathe_dtype_is_valid(dt);
  if (!storage_of(dt)) return false;
  if (op == LATHE_OP_CONVERT_DTYPE) { /* every target the CPU converts to */
    for (int t = 1; t < LATHE_DTYPE_LIMIT; t++)
      if (lathe_dtype_is_valid((lathe_dtype)t) && lathe_ew_defined(op, dt, (lathe_dtype)t)) return true;
    return false;
  }
  return lathe_ew_defined(op, dt, dt);
}

static lathe_status_t run_ew(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  if (n->op == LATHE_OP_BITCAST) return lathe_cuda_copy(ex, in[0], out[0]); /* the same bytes, another shape */
  const lathe_shape *it = &out[0]->shape;
  gen_member m = {.node = n, .n_in = n->n_operands, .out = 0};
  gen_input gi[LATHE_PMEMBER_MAX_IN];
  lt_strides_h st[LATHE_PMEMBER_MAX_IN];
  for (int k = 0; k < n->n_operands; k++) {
    const lathe_shape *s = &in[k]->shape;
    m.in[k] = -(k + 1);
    gi[k].dtype = s->dtype;
    int64_t str[LATHE_MAX_RANK] = {0};
    if (s->rank == 0) {
      gi[k].access = LATHE_PACCESS_SCALAR;
    } else if (lathe_shape_size(s) == lathe_shape_size(it) && s->rank == it->rank) {
      gi[k].access = LATHE_PACCESS_FULL;
    } else { /* implicit size-1 broadcasting */
      gi[k].access = LATHE_PACCESS_STRIDED;
      int64_t acc = 1;
      for (int a = s->rank - 1; a >= 0; a--) {
        str[a] = s->dims[a] == 1 && it->dims[a] != 1 ? 0 : acc;
        acc *= s->dims[a];
      }
    }
    st[k] = strides_h(str, s->rank);
  }
  lt_text t = {0};
  lt_put(&t, "%s", ew_prelude);
  lathe_status_t err = gen_kernel(&t, &m, 1, gi, n->n_operands, 1);
  if (!err) err = launch_fused(ex, t.s, it, out, 1, in, st, n->n_operands);
  free(t.s);
  return err;
}

#define EW_FAMILY(K)                                                                                          \
  bool lathe_cuda_supports_##K(lathe_op op, lathe_dtype dtype) { return ew_supported(op, dtype); }            \
  lathe_status_t lathe_cuda_run_##K(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in,         \
                                    lathe_tensor **out) {                                                     \
    return run_ew(ex, n, in, out);                                                                            \
  }
EW_FAMILY(unary)
EW_FAMILY(binary)
EW_FAMILY(compare)
EW_FAMILY(select)
EW_FAMILY(convert)

/* ---- fusion regions ---- */
lathe_status_t lathe_cuda_region_loop(lathe_cuda_exec *ex, const lathe_pregion *g, lathe_tensor **vals,
                                      lathe_status_t (*result)(lathe_cuda_exec *, int slot, lathe_tensor **)) {
  gen_member m[64];
  gen_input gi[64 * LATHE_PMEMBER_MAX_IN];
  lt_strides_h st[64 * LATHE_PMEMBER_MAX_IN];
  lathe_tensor *ins[64 * LATHE_PMEMBER_MAX_IN], *outs[64];
  if (g->n_members > 64 || g->n_inputs > 64) return LATHE_UNIMPL("lathe:cuda: a fused region of %d members", g->n_members);
  int n_out = 0;
  for (int i = 0; i < g->n_members; i++) {
    const lathe_pmember *pm = &g->members[i];
    m[i] = (gen_member){.node = pm->node, .n_in = pm->n_in, .identity = pm->identity, .out = -1};
    for (int k = 0; k < pm->n_in; k++) m[i].in[k] = pm->in[k];
    if (pm->out_slot >= 0) m[i].out = n_out++;
  }
  for (int k = 0; k < g->n_inputs; k++) {
    ins[k] = vals[g->inputs[k].slot];
    if (!ins[k]) return lathe_status_new(LATHE_STATUS_INTERNAL, "lathe:cuda: a region input is not computed");
    gi[k].dtype = ins[k]->shape.dtype;
    gi[k].access = g->inputs[k].access;
    st[k] = strides_h(g->inputs[k].strides, g->shape.rank);
  }
  lathe_status_t err = NULL;
  int made = 0;
  for (int i = 0; i < g->n_members && !err; i++)
    if (g->members[i].out_slot >= 0) {
      err = result(ex, g->members[i].out_slot, &outs[made]);
      if (!err) made++;
    }
  lt_text t = {0};
  lt_put(&t, "%s", ew_prelude);
  if (!err) err = gen_kernel(&t, m, g->n_members, gi, g->n_inputs, n_out);
  if (!err) err = launch_fused(ex, t.s, &g->shape, outs, n_out, ins, st, g->n_inputs);
  free(t.s);
  made = 0;
  for (int i = 0; i < g->n_members; i++) {
    if (g->members[i].out_slot < 0) continue;
    if (!err && !vals[g->members[i].out_slot]) vals[g->members[i].out_slot] = outs[made];
    else if (made < n_out && outs[made]) lathe_tensor_release(outs[made]);
    made++;
  }
  return err;
}

/* ---- sources for the NVRTC test: one kernel per (op, dtype) that ew.def defines, grouped in
 * namespaces so that one program holds every dtype of an op ---- */
static void each_ew_source(lathe_cuda_source_fn fn, void *ctx, lathe_op_kind kind) {
  for (int op = 0; op < LATHE_OP_COUNT; op++) {
    if (lathe_op_kind_of((lathe_op)op) != kind || op == LATHE_OP_BITCAST) continue;
    lt_text t = {0};
    lt_put(&t, "%s", ew_prelude);
    int count = 0;
    for (int d = 1; d < LATHE_DTYPE_LIMIT; d++) {
      lathe_dtype dt = (lathe_dtype)d;
      if (!lathe_dtype_is_valid(dt) || !storage_of(dt)) continue;
      for (int o = 1; o < LATHE_DTYPE_LIMIT; o++) {
        lathe_dtype to = (lathe_dtype)o;
        if (op != LATHE_OP_CONVERT_DTYPE && to != dt) continue;
        if (!lathe_dtype_is_valid(to) || !storage_of(to) || !lathe_ew_defined((lathe_op)op, dt, to)) continue;
        /* a node for the generator: operands of dt (Where: a Bool condition), result of the
         * rule's dtype as the builder would infer it */
        lathe_node x, c, node;
        lathe_node *ins[3] = {&x, &x, &x};
        memset(&x, 0, sizeof x);
        memset(&c, 0, sizeof c);
        memset(&node, 0, sizeof node);
        x.shape.dtype = dt;
        c.shape.dtype = LATHE_DTYPE_BOOL;
        if (op == LATHE_OP_WHERE) ins[0] = &c;
        node.op = (lathe_op)op;
        node.in = ins;
        node.n_operands = node.n_in = lathe_op_kind_of((lathe_op)op) == LATHE_KIND_SELECT ? 3
                                      : (kind == LATHE_KIND_BINARY || kind == LATHE_KIND_COMPARE) ? 2 : 1;
        lathe_dtype od = to;
        if (kind == LATHE_KIND_COMPARE) od = LATHE_DTYPE_BOOL;
        else if ((op == LATHE_OP_ABS || op == LATHE_OP_REAL || op == LATHE_OP_IMAG) && lathe_dtype_is_complex(dt))
          od = lathe_dtype_real_of(dt);
        else if (op == LATHE_OP_IS_FINITE || op == LATHE_OP_IS_NAN) od = LATHE_DTYPE_BOOL;
        else if (op == LATHE_OP_COMPLEX) od = dt == LATHE_DTYPE_FLOAT64 ? LATHE_DTYPE_COMPLEX128 : LATHE_DTYPE_COMPLEX64;
        node.shape.dtype = od;
        node.shape.rank = 1;
        gen_member m = {.node = &node, .n_in = node.n_operands, .out = 0, .in = {-1, -2, -3}};
        gen_input gi[3] = {{ins[0]->shape.dtype, LATHE_PACCESS_FULL}, {dt, LATHE_PACCESS_STRIDED}, {dt, LATHE_PACCESS_SCALAR}};
        lt_put(&t, "namespace n%d {\n", count);
        lathe_status_t st = gen_kernel(&t, &m, 1, gi, node.n_operands, 1);
        lt_put(&t, "}\n");
        lathe_status_free(st);
        count++;
      }
    }
    if (count && t.s && !t.oom) {
      /* every namespace declares extern "C" lt_fused: give each its own name */
      lt_text u = {0};
      int ns = 0;
      for (const char *p = t.s; *p;) {
        const char *hit = strstr(p, "void lt_fused(");
        if (!hit) {
          lt_put(&u, "%s", p);
          break;
        }
        lt_put(&u, "%.*svoid lt_fused_%d(", (int)(hit - p), p, ns++);
        p = hit + strlen("void lt_fused(");
      }
      char label[64];
      snprintf(label, sizeof label, "elementwise %s", lathe_op_name((lathe_op)op));
      if (!u.oom) fn(ctx, label, u.s);
      free(u.s);
    }
    free(t.s);
  }
}

void lathe_cuda_sources_unary(lathe_cuda_source_fn fn, void *ctx) { each_ew_source(fn, ctx, LATHE_KIND_UNARY); }
void lathe_cuda_sources_binary(lathe_cuda_source_fn fn, void *ctx) { each_ew_source(fn, ctx, LATHE_KIND_BINARY); }
void lathe_cuda_sources_compare(lathe_cuda_source_fn fn, void *ctx) { each_ew_source(fn, ctx, LATHE_KIND_COMPARE); }
void lathe_cuda_sources_select(lathe_cuda_source_fn fn, void *ctx) { each_ew_source(fn, ctx, LATHE_KIND_SELECT); }
void lathe_cuda_sources_convert(lathe_cuda_source_fn fn, void *ctx) { each_ew_source(fn, ctx, LATHE_KIND_CONVERT); }
