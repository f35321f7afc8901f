/* unary.c -- elementwise ops of one operand (the UNARY kind): the UNARY rows of
 * src/graph/ew.def instantiated for every byte-sized dtype of their class. Sub-byte integers
 * arrive widened to 8 bits, with their true width in `bits` (BitCount, Clz mask to it). */
#include "../graph/ew_helpers.h"
#include "elementwise.h"

#define UN_UNARY(...) __VA_ARGS__
#define UN_BINARY(...)
#define UN_COMPARE(...)
#define UN_SELECT(...)
#define UN_CONVERT(...)

#define UN_DEF(D, OP, RULE, EXPR) \
  LATHE_EW_ROW1(un_##OP##_##D, LATHE_EW_MODE_##RULE, D, LATHE_EW_OUT_##RULE(D), EXPR)
#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR) UN_##KIND(LATHE_DD_EACH_##CLASS(UN_DEF, OP, RULE, EXPR))
#include "../graph/ew.def"
#undef LATHE_EW

static const lathe_ew_fn un_table[LATHE_OP_COUNT][LATHE_DD_COUNT] = {
#define UN_ENTRY(D, OP, RULE, EXPR) [LATHE_OP_##OP][LATHE_DDI_##D] = un_##OP##_##D,
#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR) UN_##KIND(LATHE_DD_EACH_##CLASS(UN_ENTRY, OP, RULE, EXPR))
#include "../graph/ew.def"
#undef LATHE_EW
};

static lathe_ew_fn lookup(lathe_op op, lathe_dtype dt) {
  int d = lathe_dd_index(dt);
  if ((int)op < 0 || op >= LATHE_OP_COUNT || d < 0) return NULL;
  return un_table[op][d];
}

bool lathe_cpu_supports_unary(lathe_op op, lathe_dtype dtype) { return lookup(op, dtype) != NULL; }

typedef struct {
  lathe_ew_fn fn;
  const char *in;
  char *out;
  size_t in_es, out_es;
  int bits;
} un_ctx;

static void un_chunk(void *c, int64_t begin, int64_t end) {
  const un_ctx *u = c;
  const void *in = u->in + (size_t)begin * u->in_es;
  static const int step[1] = {1};
  u->fn(&in, step, u->out + (size_t)begin * u->out_es, end - begin, u->bits);
}

lathe_status_t lathe_cpu_run_unary(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                   lathe_tensor **out) {
  lathe_dtype dt = lathe_ew_in_shape(n, 0).dtype;
  lathe_ew_fn fn = lookup(n->op, dt);
  if (!fn) return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  if (n->op == LATHE_OP_IDENTITY) { /* the row moves bits: a copy does the same */
    if (out[0]->data != in[0]->data && out[0]->nbytes) memcpy(out[0]->data, in[0]->data, out[0]->nbytes);
    return NULL;
  }
  un_ctx c = {fn, in[0]->data, out[0]->data, lathe_dd_esize(dt), lathe_dd_esize(out[0]->shape.dtype),
              lathe_dtype_bits(n->in[0]->shape.dtype)};
  lathe_ew_parallel(ex, lathe_shape_size(&out[0]->shape), un_chunk, &c);
  return NULL;
}
