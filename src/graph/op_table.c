/* op_table.c -- the op facts of include/lathe_ops.def: kind and flags per op.
 *
 * The FLAGS column is written with short names (EW|FUSE|...); they are defined here only, as
 * local enum constants, so they never reach another translation unit or the public header. */
#include "graph.h"

static const lathe_op_kind op_kinds[] = {
#define LATHE_OP(ENUM, GoName, c_name, n, KIND, SIG, FLAGS) [LATHE_OP_##ENUM] = LATHE_KIND_##KIND,
#include "lathe_ops.def"
#undef LATHE_OP
};
_Static_assert(sizeof op_kinds / sizeof op_kinds[0] == LATHE_OP_COUNT, "op table");

enum {
  NONE = 0,
  EW = LATHE_OPF_EW,
  FUSE = LATHE_OPF_FUSE,
  INPLACE = LATHE_OPF_INPLACE,
  CSE = LATHE_OPF_CSE,
  SIDE = LATHE_OPF_SIDE,
  PACKED = LATHE_OPF_PACKED,
};

static const uint32_t op_flags[] = {
#define LATHE_OP(ENUM, GoName, c_name, n, KIND, SIG, FLAGS) [LATHE_OP_##ENUM] = (uint32_t)(FLAGS),
#include "lathe_ops.def"
#undef LATHE_OP
};
_Static_assert(sizeof op_flags / sizeof op_flags[0] == LATHE_OP_COUNT, "op table");

lathe_op_kind lathe_op_kind_of(lathe_op op) { return (int)op >= 0 && op < LATHE_OP_COUNT ? op_kinds[op] : LATHE_KIND_INTERNAL; }

uint32_t lathe_op_flags(lathe_op op) { return (int)op >= 0 && op < LATHE_OP_COUNT ? op_flags[op] : 0; }

/* ---- dtype domains: ew.def's rows and UNDEFINED marks ---- */
typedef struct domain_row {
  lathe_op op;
  lathe_dtype_class cls;
  bool defined;
} domain_row;

static const domain_row domain_rows[] = {
#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR) {LATHE_OP_##OP, LATHE_CLASS_##CLASS, true},
#define LATHE_EW_UNDEFINED(OP, CLASS) {LATHE_OP_##OP, LATHE_CLASS_##CLASS, false},
#include "ew.def"
#undef LATHE_EW
#undef LATHE_EW_UNDEFINED
};

/* One scan of a few hundred rows per call: builders and capability queries, never kernels. */
static lathe_domain domain_of_class(lathe_op op, lathe_dtype_class c) {
  for (size_t i = 0; i < sizeof domain_rows / sizeof domain_rows[0]; i++) /* ConvertDType: any target's row */
    if (domain_rows[i].op == op && domain_rows[i].cls == c)
      return domain_rows[i].defined ? LATHE_DOMAIN_DEFINED : LATHE_DOMAIN_UNDEFINED;
  return LATHE_DOMAIN_NONE;
}

lathe_domain lathe_op_domain(lathe_op op, lathe_dtype dt) {
  if (!lathe_dtype_is_valid(dt)) return LATHE_DOMAIN_NONE;
  if (op == LATHE_OP_WHERE) /* dt is the condition's; the rows are the values' */
    return dt == LATHE_DTYPE_BOOL && lathe_op_domain_classes(op) ? LATHE_DOMAIN_DEFINED : LATHE_DOMAIN_NONE;
  return domain_of_class(op, lathe_dtype_class_of(dt));
}

unsigned lathe_op_domain_classes(lathe_op op) {
  unsigned m = 0;
  for (size_t i = 0; i < sizeof domain_rows / sizeof domain_rows[0]; i++)
    if (domain_rows[i].op == op) m |= 1u << domain_rows[i].cls;
  return m;
}
