/* select.c -- Where and Clamp (the SELECT kind): the SELECT rows of src/graph/ew.def
 * instantiated for every byte-sized dtype of their class. Where moves storage bits (NaN
 * payloads survive); Clamp is Min(Max(min, x), max), so a NaN anywhere gives NaN. Operands
 * broadcast through the elementwise driver (scalars have step 0). */
#include "../graph/ew_helpers.h"
#include "elementwise.h"

#define SEL_UNARY(...)
#define SEL_BINARY(...)
#define SEL_COMPARE(...)
#define SEL_SELECT(...) __VA_ARGS__
#define SEL_CONVERT(...)

/* The first operand's dtype: Where's condition is Bool. */
#define SEL_D0_WHERE(D) BOOL
#define SEL_D0_CLAMP(D) D

#define SEL_DEF(D, OP, RULE, EXPR) \
  LATHE_EW_ROW3(sel_##OP##_##D, LATHE_EW_MODE_##RULE, D, LATHE_EW_OUT_##RULE(D), SEL_D0_##OP(D), EXPR)
#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR) SEL_##KIND(LATHE_DD_EACH_##CLASS(SEL_DEF, OP, RULE, EXPR))
#include "../graph/ew.def"
#undef LATHE_EW

/* Indexed by the result's dtype. */
static const lathe_ew_fn sel_table[LATHE_OP_COUNT][LATHE_DD_COUNT] = {
#define SEL_ENTRY(D, OP, RULE, EXPR) [LATHE_OP_##OP][LATHE_DDI_##D] = sel_##OP##_##D,
#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR) SEL_##KIND(LATHE_DD_EACH_##CLASS(SEL_ENTRY, OP, RULE, EXPR))
#include "../graph/ew.def"
#undef LATHE_EW
};

static lathe_ew_fn lookup(lathe_op op, lathe_dtype dt) {
  int d = lathe_dd_index(dt);
  if ((int)op < 0 || op >= LATHE_OP_COUNT || d < 0) return NULL;
  return sel_table[op][d];
}

/* dtype is the first operand's: Bool for Where, whose values may have any dtype. */
bool lathe_cpu_supports_select(lathe_op op, lathe_dtype dtype) {
  if (op == LATHE_OP_WHERE) return dtype == LATHE_DTYPE_BOOL;
  return lookup(op, dtype) != NULL;
}

lathe_status_t lathe_cpu_run_select(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                    lathe_tensor **out) {
  lathe_dtype dt = out[0]->shape.dtype;
  lathe_ew_fn_ctx c = {lookup(n->op, dt), lathe_dtype_bits(n->shape.dtype)};
  if (!c.fn) return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  return lathe_ew_run(ex, n, in, 3, out[0], lathe_ew_fn_row, &c);
}
