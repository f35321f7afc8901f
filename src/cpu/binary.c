/* binary.c -- elementwise ops of two operands with broadcasting (the BINARY kind): the BINARY
 * rows of src/graph/ew.def (which states the integer, shift and NaN semantics) instantiated for
 * every byte-sized dtype of their class. */
#include "../graph/ew_helpers.h"
#include "elementwise.h"

#define BI_UNARY(...)
#define BI_BINARY(...) __VA_ARGS__
#define BI_COMPARE(...)
#define BI_SELECT(...)
#define BI_CONVERT(...)

#define BI_DEF(D, OP, RULE, EXPR) \
  LATHE_EW_ROW2(bi_##OP##_##D, LATHE_EW_MODE_##RULE, D, LATHE_EW_OUT_##RULE(D), EXPR)
#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR) BI_##KIND(LATHE_DD_EACH_##CLASS(BI_DEF, OP, RULE, EXPR))
#include "../graph/ew.def"
#undef LATHE_EW

static const lathe_ew_fn bi_table[LATHE_OP_COUNT][LATHE_DD_COUNT] = {
#define BI_ENTRY(D, OP, RULE, EXPR) [LATHE_OP_##OP][LATHE_DDI_##D] = bi_##OP##_##D,
#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR) BI_##KIND(LATHE_DD_EACH_##CLASS(BI_ENTRY, OP, RULE, EXPR))
#include "../graph/ew.def"
#undef LATHE_EW
};

static lathe_ew_fn lookup(lathe_op op, lathe_dtype dt) {
  int d = lathe_dd_index(dt);
  if ((int)op < 0 || op >= LATHE_OP_COUNT || d < 0) return NULL;
  return bi_table[op][d];
}

bool lathe_cpu_supports_binary(lathe_op op, lathe_dtype dtype) { return lookup(op, dtype) != NULL; }

lathe_status_t lathe_cpu_run_binary(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                    lathe_tensor **out) {
  lathe_dtype dt = lathe_ew_in_shape(n, 0).dtype;
  lathe_ew_fn_ctx c = {lookup(n->op, dt), lathe_dtype_bits(n->in[0]->shape.dtype)};
  if (!c.fn) return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  return lathe_ew_run(ex, n, in, 2, out[0], lathe_ew_fn_row, &c);
}
