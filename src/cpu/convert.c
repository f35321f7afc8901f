/* convert.c -- ConvertDType between every pair of dtypes, and Bitcast.
 *
 * ConvertDType is the CONVERT rows of src/graph/ew.def (one per source and target class, which
 * state the semantics: wrapping, truncation with saturation, NaN to 0, ...) instantiated for
 * every pair of byte-sized dtypes once per ISA (ew_kernels.h). Sub-byte dtypes arrive widened to
 * 8 bits (the interpreter narrows the result); `obits` carries the target's true width for
 * saturation. DotGeneral reaches its accumulator and output dtypes through the same functions
 * (lathe_cpu_convert_fn: every ISA's table converts to the same bits, so it takes the CPU's best).
 * Bitcast reinterprets the bytes: the packed layout of lathe_dtypes.def is little-endian, so
 * every Bitcast is a copy of the bytes. */
#include "kernels.h"

lathe_ew_convert_fn lathe_cpu_convert_fn(lathe_dtype from, lathe_dtype to) {
  return lathe_cpu_convert_fn_of(lathe_cpu_kernels_of(lathe_cpu_isa_detect()), from, to);
}

lathe_ew_convert_fn lathe_cpu_convert_fn_of(const lathe_cpu_kernels *k, lathe_dtype from, lathe_dtype to) {
  int f = lathe_dd_index(from), t = lathe_dd_index(to);
  return f < 0 || t < 0 ? NULL : k->cv[f][t];
}

bool lathe_cpu_supports_convert(lathe_op op, lathe_dtype dtype) {
  if (op == LATHE_OP_BITCAST) return lathe_dtype_is_valid(dtype);
  return op == LATHE_OP_CONVERT_DTYPE && lathe_dd_index(dtype) >= 0;
}

typedef struct {
  lathe_ew_convert_fn fn;
  const char *in;
  char *out;
  size_t in_es, out_es;
  int bits, obits; /* the source's and the target's true widths */
} cv_ctx;

static void cv_range(void *ctx, int64_t begin, int64_t end) {
  const cv_ctx *c = ctx;
  c->fn(c->in + (size_t)begin * c->in_es, c->out + (size_t)begin * c->out_es, end - begin, c->bits, c->obits);
}

lathe_status_t lathe_cpu_run_convert(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                     lathe_tensor **out) {
  if (n->op == LATHE_OP_BITCAST) {
    size_t nb = in[0]->nbytes < out[0]->nbytes ? in[0]->nbytes : out[0]->nbytes;
    if (nb && out[0]->data != in[0]->data) memcpy(out[0]->data, in[0]->data, nb);
    return NULL;
  }
  lathe_dtype from = lathe_ew_in_shape(n, 0).dtype, to = out[0]->shape.dtype;
  lathe_ew_convert_fn fn = lathe_cpu_convert_fn_of(lathe_cpu_exec_kernels(ex), from, to);
  if (!fn)
    return LATHE_UNIMPL("ConvertDType: not implemented on lathe:cpu from %s to %s", lathe_dtype_name(from),
                        lathe_dtype_name(to));
  cv_ctx c = {fn,
              in[0]->data,
              out[0]->data,
              lathe_dd_esize(from),
              lathe_dd_esize(to),
              lathe_dtype_bits(n->in[0]->shape.dtype),
              lathe_dtype_bits(n->shape.dtype)};
  lathe_ew_parallel(ex, lathe_shape_size(&out[0]->shape), cv_range, &c);
  return NULL;
}
