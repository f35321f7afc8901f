/* supports.cpp -- what the MLX device runs: dtypes MLX has, and the ops lowered here for them.
 *
 * An op is supported when its semantics are defined for the dtype -- an elementwise op's domain
 * in ew.def (lathe_op_domain), for the other ops lathe:cpu, the reference -- and this device
 * lowers it faithfully; the rest is UNIMPLEMENTED at compile, absent from capabilities, and
 * listed in docs/LIMITATIONS.md. */
#include "mlx.h"

namespace lathe_mlx {

bool dtype_supported(lathe_dtype dt, const Options &) {
  switch (dt) {
    case LATHE_DTYPE_BOOL:
    case LATHE_DTYPE_INT8:
    case LATHE_DTYPE_INT16:
    case LATHE_DTYPE_INT32:
    case LATHE_DTYPE_INT64:
    case LATHE_DTYPE_UINT8:
    case LATHE_DTYPE_UINT16:
    case LATHE_DTYPE_UINT32:
    case LATHE_DTYPE_UINT64:
    case LATHE_DTYPE_FLOAT16:
    case LATHE_DTYPE_BFLOAT16:
    case LATHE_DTYPE_FLOAT32:
    case LATHE_DTYPE_COMPLEX64:
    case LATHE_DTYPE_FLOAT64: /* MLX computes it on the CPU only: on a GPU, on its CPU stream (cpu_step) */
      return true;
    default: /* Complex128 and the packed sub-byte integers: MLX has no such dtypes */
      return false;
  }
}

mx::Dtype mx_dtype(lathe_dtype dt) {
  switch (dt) {
    case LATHE_DTYPE_BOOL: return mx::bool_;
    case LATHE_DTYPE_INT8: return mx::int8;
    case LATHE_DTYPE_INT16: return mx::int16;
    case LATHE_DTYPE_INT32: return mx::int32;
    case LATHE_DTYPE_INT64: return mx::int64;
    case LATHE_DTYPE_UINT8: return mx::uint8;
    case LATHE_DTYPE_UINT16: return mx::uint16;
    case LATHE_DTYPE_UINT32: return mx::uint32;
    case LATHE_DTYPE_UINT64: return mx::uint64;
    case LATHE_DTYPE_FLOAT16: return mx::float16;
    case LATHE_DTYPE_BFLOAT16: return mx::bfloat16;
    case LATHE_DTYPE_FLOAT32: return mx::float32;
    case LATHE_DTYPE_FLOAT64: return mx::float64;
    case LATHE_DTYPE_COMPLEX64: return mx::complex64;
    default: MLX_UNIMPL("mlx: dtype %s is not supported (MLX has no such dtype)", lathe_dtype_name(dt));
  }
}

/* Ops this device lowers, beyond what the dtype allows. */
static bool lowered(lathe_op op, lathe_dtype dt) {
  bool cplx = lathe_dtype_is_complex(dt);
  switch (lathe_op_kind_of(op)) {
    case LATHE_KIND_LEAF:
    case LATHE_KIND_UNARY:
    case LATHE_KIND_CONVERT:
    case LATHE_KIND_BINARY:
    case LATHE_KIND_COMPARE:
    case LATHE_KIND_SELECT:
    case LATHE_KIND_REDUCE:
    case LATHE_KIND_SCAN:
    case LATHE_KIND_LAYOUT:
    case LATHE_KIND_BARRIER:
    case LATHE_KIND_DYNSHAPE:
      return true;
    case LATHE_KIND_DOT:
      return true;
    case LATHE_KIND_CONV: /* integers: exact products through DotGeneral (conv.cpp) */
      return !cplx;
    case LATHE_KIND_WINDOW:
      return op != LATHE_OP_SELECT_AND_SCATTER_SUM && !cplx;
    case LATHE_KIND_INDEX:
      return true;
    case LATHE_KIND_CONTROL:
      return true;
    case LATHE_KIND_NUMERIC:
      if (op == LATHE_OP_FFT) return dt == LATHE_DTYPE_COMPLEX64 || dt == LATHE_DTYPE_FLOAT32;
      return true;
    case LATHE_KIND_FUSED:
      /* quantized weights: MLX's quantization formats are not GoMLX's */
      return op != LATHE_OP_FUSED_QUANTIZED_DENSE && op != LATHE_OP_QUANTIZED_EMBEDDING_LOOKUP;
    default: /* collectives: one device */
      return false;
  }
}

/* MLX's GPU scatter has no 8-byte element types (mx::scatter_* throws), apart from Complex64
 * sums; Scatter and SelectAndScatter are lowered through it (index.cpp, window.cpp). The others
 * run on the CPU stream (cpu_step). */
static bool gpu_lowered(lathe_op op, lathe_dtype dt) {
  bool wide = lathe_dtype_bits(dt) == 64;
  switch (op) {
    case LATHE_OP_SCATTER_SUM: return !wide || dt == LATHE_DTYPE_COMPLEX64;
    case LATHE_OP_SCATTER_MAX:
    case LATHE_OP_SCATTER_MIN:
    case LATHE_OP_SELECT_AND_SCATTER_MAX:
    case LATHE_OP_SELECT_AND_SCATTER_MIN: return !wide;
    default: return true;
  }
}

bool op_supported(lathe_op op, lathe_dtype dt, const Options &opt) {
  if ((int)op < 0 || op >= LATHE_OP_COUNT) return false;
  if (lathe_op_kind_of(op) == LATHE_KIND_INTERNAL) return true;
  bool defined = lathe_op_domain_classes(op) ? lathe_op_domain(op, dt) == LATHE_DOMAIN_DEFINED
                                             : lathe_cpu_supports_op(op, dt);
  return dtype_supported(dt, opt) && defined && lowered(op, dt);
}

/* The dtype an op is looked up by: its first operand's, or its first result's. */
static lathe_dtype op_dtype(const lathe_node *n) {
  return n->n_operands ? n->in[0]->shape.dtype : (n->multi ? n->out_shapes[0].dtype : n->shape.dtype);
}

/* Calls f on every dtype n computes with: its operands', its results', and those DotGeneral's
 * attributes name (the only op whose attributes name dtypes it computes in). */
template <class F> static void each_dtype(const lathe_node *n, F f) {
  for (int i = 0; i < n->n_operands; i++) f(n->in[i]->shape.dtype);
  if (n->multi)
    for (int r = 0; r < n->n_out; r++) f(n->out_shapes[r].dtype);
  else
    f(n->shape.dtype);
  if (n->op == LATHE_OP_DOT_GENERAL)
    for (lathe_dtype a : {lathe_attr_dot_general_accumulator(n), lathe_attr_dot_general_output(n)})
      if (a != LATHE_DTYPE_INVALID) f(a);
}

bool cpu_step(const lathe_node *n, const Options &opt) {
  if (!opt.gpu || n->op == LATHE_OP_CALL || n->op == LATHE_OP_WHILE || n->op == LATHE_OP_IF) return false;
  bool f64 = false;
  each_dtype(n, [&](lathe_dtype dt) { f64 |= dt == LATHE_DTYPE_FLOAT64; });
  return f64 || !gpu_lowered(n->op, op_dtype(n));
}

void check_node(const lathe_node *n, const Options &opt) {
  each_dtype(n, [&](lathe_dtype dt) {
    if (!dtype_supported(dt, opt))
      MLX_UNIMPL("%s: dtype %s is not supported on mlx", lathe_op_name(n->op), lathe_dtype_name(dt));
  });
  lathe_op_kind k = lathe_op_kind_of(n->op);
  if (k == LATHE_KIND_INTERNAL || n->op == LATHE_OP_PARAMETER || n->op == LATHE_OP_CONSTANT) return;
  lathe_dtype dt = op_dtype(n);
  if (!op_supported(n->op, dt, opt))
    MLX_UNIMPL("%s: not implemented on mlx for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
}

}  // namespace lathe_mlx
