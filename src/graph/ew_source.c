/* ew_source.c -- elementwise semantics as source text (ew.h): the element function of an op and
 * dtype, whose expression is ew.def's row stringified (the CPU kernels compile the same
 * tokens, so the two cannot drift apart), and the C helper prelude, whose functions are
 * ew_helpers.h's, stringified too. */
#include "ew.h"

#include "ew_helpers.h"
#include "graph.h"

typedef enum ew_rule {
  EW_SAME, EW_PICK, EW_BOOL, EW_REAL, EW_CPLX,
  EW_TO_BOOL, EW_TO_SINT, EW_TO_UINT, EW_TO_FLOAT, EW_TO_HALF, EW_TO_COMPLEX,
} ew_rule;

typedef struct ew_row {
  lathe_op op;
  const char *op_enum; /* "ADD" */
  lathe_op_kind kind;
  lathe_dtype_class cls;
  ew_rule rule;
  const char *expr;
} ew_row;

static const ew_row rows[] = {
#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR) \
  {LATHE_OP_##OP, #OP, LATHE_KIND_##KIND, LATHE_CLASS_##CLASS, EW_##RULE, #EXPR},
#include "ew.def"
#undef LATHE_EW
};

/* The dialect's types of every dtype (sub-byte integers compute as int8_t / uint8_t). */
typedef struct ew_types {
  const char *name, *t, *ut, *uw, *rt;
  int bits;
} ew_types;
#define EW_STR(x) EW_STR_(x)
#define EW_STR_(x) #x
static const ew_types types[LATHE_DTYPE_LIMIT] = {
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS)                                                      \
  [LATHE_DTYPE_##ENUM] = {#ENUM, EW_STR(LATHE_EW_T_##ct), EW_STR(LATHE_EW_UT_##ct), EW_STR(LATHE_EW_UW_##ct), \
                          EW_STR(LATHE_EW_RT_##ct), bits},
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
};

static bool dtype_ok(lathe_dtype dt) { return (int)dt > 0 && (int)dt < LATHE_DTYPE_LIMIT && types[dt].name; }

static const ew_rule to_rule[] = {
    [LATHE_CLASS_BOOL] = EW_TO_BOOL,   [LATHE_CLASS_SINT] = EW_TO_SINT, [LATHE_CLASS_UINT] = EW_TO_UINT,
    [LATHE_CLASS_FLOAT] = EW_TO_FLOAT, [LATHE_CLASS_HALF] = EW_TO_HALF, [LATHE_CLASS_COMPLEX] = EW_TO_COMPLEX,
};

/* The row for op on dt (and `to` for ConvertDType); NULL when there is none. */
static const ew_row *find(lathe_op op, lathe_dtype dt, lathe_dtype to) {
  if (!dtype_ok(dt)) return NULL;
  lathe_dtype_class c = lathe_dtype_class_of(dt);
  bool convert = op == LATHE_OP_CONVERT_DTYPE;
  if (convert && !dtype_ok(to)) return NULL;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    if (rows[i].op == op && rows[i].cls == c && (!convert || rows[i].rule == to_rule[lathe_dtype_class_of(to)]))
      return &rows[i];
  return NULL;
}

bool lathe_ew_defined(lathe_op op, lathe_dtype dt, lathe_dtype to) { return find(op, dt, to) != NULL; }

lathe_status_t lathe_ew_source(lathe_op op, lathe_dtype dt, lathe_dtype to, char *buf, size_t cap, size_t *out_len) {
  if (out_len) *out_len = 0;
  if ((int)op < 0 || op >= LATHE_OP_COUNT) return LATHE_INVALID("ew_source: unknown op %d", (int)op);
  const char *name = lathe_op_name(op);
  lathe_op_kind kind = lathe_op_kind_of(op);
  if (kind != LATHE_KIND_UNARY && kind != LATHE_KIND_BINARY && kind != LATHE_KIND_COMPARE &&
      kind != LATHE_KIND_SELECT && op != LATHE_OP_CONVERT_DTYPE)
    return LATHE_INVALID("ew_source: %s is not an elementwise op", name);
  if (!dtype_ok(dt)) return LATHE_INVALID("ew_source: %s: invalid dtype %d", name, (int)dt);
  bool convert = op == LATHE_OP_CONVERT_DTYPE;
  if (convert && !dtype_ok(to)) return LATHE_INVALID("ew_source: %s: invalid target dtype %d", name, (int)to);
  const ew_row *r = find(op, dt, to);
  if (!r) {
    if (convert)
      return LATHE_UNIMPL("ew_source: %s has no expression from %s to %s", name, lathe_dtype_name(dt),
                          lathe_dtype_name(to));
    return LATHE_UNIMPL("ew_source: %s has no expression for %s", name, lathe_dtype_name(dt));
  }

  lathe_dtype odt = dt;
  switch (r->rule) {
    case EW_BOOL: odt = LATHE_DTYPE_BOOL; break;
    case EW_REAL: odt = lathe_dtype_real_of(dt); break;
    case EW_CPLX: odt = dt == LATHE_DTYPE_FLOAT64 ? LATHE_DTYPE_COMPLEX128 : LATHE_DTYPE_COMPLEX64; break;
    case EW_SAME:
    case EW_PICK: break;
    default: odt = to; break; /* ConvertDType */
  }
  const ew_types *t = &types[dt], *o = &types[odt];
  int arity = r->kind == LATHE_KIND_SELECT ? 3 : r->kind == LATHE_KIND_BINARY || r->kind == LATHE_KIND_COMPARE ? 2 : 1;
  /* Where's condition is Bool. */
  const char *t0 = r->kind == LATHE_KIND_SELECT && r->rule == EW_PICK ? types[LATHE_DTYPE_BOOL].t : t->t;
  char fname[64], params[160], obits[40] = "";
  if (convert)
    snprintf(fname, sizeof fname, "lt_ew_%s_%s_%s", r->op_enum, t->name, o->name);
  else
    snprintf(fname, sizeof fname, "lt_ew_%s_%s", r->op_enum, t->name);
  if (arity == 1)
    snprintf(params, sizeof params, "%s x", t0);
  else if (arity == 2)
    snprintf(params, sizeof params, "%s x, %s y", t0, t->t);
  else
    snprintf(params, sizeof params, "%s x, %s y, %s z", t0, t->t, t->t);
  if (convert) snprintf(obits, sizeof obits, "  const int OBITS = %d;\n", o->bits);
  int n = snprintf(buf, cap,
                   "static inline %s %s(%s) {\n"
                   "  typedef %s T;\n"
                   "  typedef %s UT;\n"
                   "  typedef %s UW;\n"
                   "  typedef %s RT;\n"
                   "  typedef %s OT;\n"
                   "  const int BITS = %d;\n"
                   "%s"
                   "  return (OT)(%s);\n"
                   "}\n",
                   o->t, fname, params, t->t, t->ut, t->uw, t->rt, o->t, t->bits, obits, r->expr);
  if (n < 0) return lathe_status_new(LATHE_STATUS_INTERNAL, "ew_source: %s: formatting failed", name);
  if (out_len) *out_len = (size_t)n;
  if ((size_t)n >= cap)
    return lathe_status_new(LATHE_STATUS_RESOURCE_EXHAUSTED, "ew_source: %s: the source needs %d bytes, the buffer has %zu",
                            name, n + 1, cap);
  return NULL;
}

/* The C spellings of the generic helpers: the lines of ew_helpers.h that a C compiler needs
 * before its functions (the test checks they match). */
static const char prelude_c[] =
    "/* lathe elementwise helpers for C: src/graph/ew_helpers.h */\n"
    "#include <stdint.h>\n"
    "#include <string.h>\n"
    "#include <tgmath.h>\n"
    "typedef float _Complex lt_c64;\n"
    "typedef double _Complex lt_c128;\n"
    "#define lt_max(a, b) (((a) > (b) || (a) != (a)) ? (a) : (b))\n"
    "#define lt_min(a, b) (((a) < (b) || (a) != (a)) ? (a) : (b))\n"
    "#define lt_key(f) _Generic((f), float: lt_key_f32, default: lt_key_f64)(f)\n"
    "#define lt_f64(v) _Generic((v), float: lt_f64_f32, default: lt_f64_f64)(v)\n"
    "#define lt_cmk(re, im) _Generic((re), float: lt_cmk_c64, default: lt_cmk_c128)((re), (im))\n"
    "#define lt_cabs(z) fabs(z)\n"
    "#define lt_creal(z) creal(z)\n"
    "#define lt_cimag(z) cimag(z)\n"
    "#define lt_conj(z) conj(z)\n"
    "#define lt_csqrt(z) sqrt(z)\n"
    "#define lt_cexp(z) exp(z)\n"
    "#define lt_clog(z) log(z)\n"
    "#define lt_csin(z) sin(z)\n"
    "#define lt_ccos(z) cos(z)\n"
    "#define lt_ctanh(z) tanh(z)\n"
    "#define lt_cpow(a, b) pow(a, b)\n"
    "#define lt_cmul(a, b) ((a) * (b))\n"
    "#define lt_cdiv(a, b) ((a) / (b))\n"
/* ... then every helper function, as ew_helpers.h writes it (one line each). */
#define LT_EW_HELPERS_AS_TEXT
#define LT_EW_HELPER(...) #__VA_ARGS__ "\n"
#include "ew_helpers.h"
#undef LT_EW_HELPER
#undef LT_EW_HELPERS_AS_TEXT
    ;

const char *lathe_ew_prelude_c(void) { return prelude_c; }
