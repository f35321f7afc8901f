/* ops_quantized.c -- builders of FusedQuantizedDense and QuantizedEmbeddingLookup, and the
 * GGML block geometry. The rules follow GoMLX's compute/fused_ops.go and its go backend.
 *
 * Attributes (both ops): op_attrs.def, group quantized.
 * Operands: FusedQuantizedDense (x, weights, [scale], [zero_point], [bias]);
 * QuantizedEmbeddingLookup (data, indices). */
#include "ew.h"
#include "graph.h"

const float lathe_nf4_table[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
    -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
    0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,
    0.7229568362236023f, 1.0f,
};
const float lathe_iq4nl_table[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static const struct {
  const char *name;
  int values, bytes;
} ggml_types[] = {
    [LATHE_GGML_Q4_0] = {"Q4_0", 32, 18},  [LATHE_GGML_Q8_0] = {"Q8_0", 32, 34},
    [LATHE_GGML_IQ4_NL] = {"IQ4_NL", 32, 18}, [LATHE_GGML_Q2_K] = {"Q2_K", 256, 84},
    [LATHE_GGML_Q3_K] = {"Q3_K", 256, 110}, [LATHE_GGML_Q4_K] = {"Q4_K", 256, 144},
    [LATHE_GGML_Q5_K] = {"Q5_K", 256, 176}, [LATHE_GGML_Q6_K] = {"Q6_K", 256, 210},
};
#define N_GGML_TYPES ((int)(sizeof ggml_types / sizeof ggml_types[0]))

static bool ggml_known(lathe_ggml_type t) { return (int)t >= 0 && (int)t < N_GGML_TYPES; }
int lathe_ggml_block_values(lathe_ggml_type t) { return ggml_known(t) ? ggml_types[t].values : 0; }
int lathe_ggml_block_bytes(lathe_ggml_type t) { return ggml_known(t) ? ggml_types[t].bytes : 0; }
const char *lathe_ggml_type_name(lathe_ggml_type t) { return ggml_known(t) ? ggml_types[t].name : "unknown"; }

/* K of GGML rows of `bytes` bytes (static) of type t. */
static lathe_status_t ggml_k(const char *op, const lathe_quantization *q, int64_t bytes, int64_t *k) {
  if (!ggml_known(q->ggml_type)) return LATHE_INVALID("%s: unknown GGML type %d", op, (int)q->ggml_type);
  int bpb = ggml_types[q->ggml_type].bytes;
  if (bytes % bpb != 0)
    return LATHE_INVALID("%s: %lld bytes per row is not a multiple of the %d bytes of a %s block", op, (long long)bytes,
                         bpb, ggml_types[q->ggml_type].name);
  if (lathe_mul_overflow(bytes / bpb, ggml_types[q->ggml_type].values, k) || *k >= LATHE_MAX_TENSOR_SIZE)
    return LATHE_INVALID("%s: %lld bytes per row of %s blocks hold more values than the size limit allows", op,
                         (long long)bytes, ggml_types[q->ggml_type].name);
  return NULL;
}

static lathe_status_t check_static(const char *op, const char *what, const lathe_shape *s) {
  char buf[LATHE_SHAPE_STR_MAX];
  if (lathe_shape_is_dynamic(s))
    return LATHE_INVALID("%s: %s must have a static shape, got %s", op, what, lathe_shape_str(s, buf, sizeof buf));
  return NULL;
}

/* The per-block scale or zero point of Linear/NF4: a float [K, blocks]. */
static lathe_status_t check_scale(const char *op, const char *what, const lathe_shape *s, int64_t k, int64_t blocks) {
  char buf[LATHE_SHAPE_STR_MAX];
  if (s->dtype != LATHE_DTYPE_FLOAT32 && s->dtype != LATHE_DTYPE_FLOAT16 && s->dtype != LATHE_DTYPE_BFLOAT16)
    return LATHE_INVALID("%s: %s must be Float32, Float16 or BFloat16, got %s", op, what, lathe_dtype_name(s->dtype));
  if (s->rank != 2 || s->dims[0] != k || s->dims[1] != blocks)
    return LATHE_INVALID("%s: %s must be [%lld, %lld] (K, ceil(N / block_size)), got %s", op, what, (long long)k,
                         (long long)blocks, lathe_shape_str(s, buf, sizeof buf));
  return NULL;
}

static bool narrow_int(lathe_dtype dt) { return lathe_dtype_is_int(dt) && lathe_dtype_bits(dt) <= 8 && lathe_dtype_bits(dt) >= 2; }

lathe_status_t lathe_fused_quantized_dense(lathe_function_t fn, lathe_value_t x, lathe_value_t weights,
                                           const lathe_quantization *quant, lathe_value_t scale,
                                           lathe_value_t zero_point, lathe_value_t bias, lathe_activation activation,
                                           lathe_value_t *out) {
  const char *op = "FusedQuantizedDense";
  lathe_value_t operands[5] = {x, weights};
  int n_ops = 2;
  if (scale) operands[n_ops++] = scale;
  if (zero_point) operands[n_ops++] = zero_point;
  if (bias) operands[n_ops++] = bias;
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_FUSED_QUANTIZED_DENSE, operands, n_ops, &n));
  if (!quant) return LATHE_INVALID("%s: quantization is NULL", op);
  const lathe_shape *xs = &x->shape, *ws = &weights->shape;
  char buf[LATHE_SHAPE_STR_MAX];
  if (xs->dtype != LATHE_DTYPE_FLOAT32) return LATHE_INVALID("%s: x must be Float32, got %s", op, lathe_dtype_name(xs->dtype));
  if (xs->rank < 1) return LATHE_INVALID("%s: x must have rank >= 1 ([batch..., K]), got a scalar", op);
  int64_t k = xs->dims[xs->rank - 1], nf, wk;
  if (k < 0) return LATHE_INVALID("%s: x's last axis (K) must be static", op);
  LATHE_RETURN_IF_ERROR(lathe_act_check(op, activation, true));
  LATHE_RETURN_IF_ERROR(check_static(op, "weights", ws));
  switch (quant->scheme) {
    case LATHE_QUANT_LINEAR:
    case LATHE_QUANT_NF4: {
      const char *sch = quant->scheme == LATHE_QUANT_NF4 ? "NF4" : "Linear";
      if (!narrow_int(ws->dtype))
        return LATHE_INVALID("%s: %s weights must be Int2, Int4, Int8, Uint2, Uint4 or Uint8, got %s", op, sch,
                             lathe_dtype_name(ws->dtype));
      if (ws->rank != 2 || ws->dims[0] != k)
        return LATHE_INVALID("%s: %s weights must be [%lld, N] (K from x), got %s", op, sch, (long long)k,
                             lathe_shape_str(ws, buf, sizeof buf));
      if (quant->block_axis != 1)
        return LATHE_INVALID("%s: block_axis must be 1 (the output features), got %d", op, quant->block_axis);
      if (quant->block_size < 1) return LATHE_INVALID("%s: block_size must be >= 1, got %lld", op, (long long)quant->block_size);
      nf = ws->dims[1];
      wk = k;
      int64_t blocks = nf ? 1 + (nf - 1) / quant->block_size : 0;
      if (!scale) return LATHE_INVALID("%s: the %s scheme needs a scale", op, sch);
      LATHE_RETURN_IF_ERROR(check_scale(op, "scale", &scale->shape, k, blocks));
      if (zero_point) {
        if (quant->scheme == LATHE_QUANT_NF4) return LATHE_INVALID("%s: the NF4 scheme takes no zero point", op);
        LATHE_RETURN_IF_ERROR(check_scale(op, "zero_point", &zero_point->shape, k, blocks));
        if (zero_point->shape.dtype != scale->shape.dtype)
          return LATHE_INVALID("%s: zero_point has dtype %s, scale has %s", op, lathe_dtype_name(zero_point->shape.dtype),
                               lathe_dtype_name(scale->shape.dtype));
      }
      break;
    }
    case LATHE_QUANT_GGML:
      if (ws->dtype != LATHE_DTYPE_UINT8 || ws->rank != 2)
        return LATHE_INVALID("%s: GGML weights must be Uint8 [N, bytes per row], got %s", op,
                             lathe_shape_str(ws, buf, sizeof buf));
      if (scale || zero_point)
        return LATHE_INVALID("%s: the GGML scheme keeps its scales in the blocks: scale and zero_point must be NULL", op);
      LATHE_RETURN_IF_ERROR(ggml_k(op, quant, ws->dims[1], &wk));
      if (wk != k)
        return LATHE_INVALID("%s: x has K=%lld input features, the %s weights hold %lld per row", op, (long long)k,
                             lathe_ggml_type_name(quant->ggml_type), (long long)wk);
      nf = ws->dims[0];
      break;
    default:
      return LATHE_INVALID("%s: unknown quantization scheme %d", op, (int)quant->scheme);
  }
  if (bias && (bias->shape.dtype != LATHE_DTYPE_FLOAT32 || bias->shape.rank != 1 || bias->shape.dims[0] != nf))
    return LATHE_INVALID("%s: bias must be Float32 [%lld] (N), got %s", op, (long long)nf,
                         lathe_shape_str(&bias->shape, buf, sizeof buf));
  lathe_attr_set_quantized_scheme(n, quant->scheme);
  lathe_attr_set_quantized_ggml_type(n, quant->scheme == LATHE_QUANT_GGML ? quant->ggml_type : (lathe_ggml_type)0);
  lathe_attr_set_quantized_block_size(n, quant->scheme == LATHE_QUANT_GGML ? 0 : quant->block_size);
  lathe_attr_set_quantized_activation(n, activation);
  lathe_attr_set_quantized_has_zero_point(n, zero_point != NULL);
  lathe_attr_set_quantized_has_bias(n, bias != NULL);
  lathe_attr_set_quantized_in_features(n, k);
  lathe_attr_set_quantized_out_features(n, nf);
  n->shape = *xs;
  n->shape.dims[xs->rank - 1] = nf;
  n->shape.axis_names[xs->rank - 1] = quant->scheme == LATHE_QUANT_GGML ? ws->axis_names[0] : ws->axis_names[1];
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_quantized_embedding_lookup(lathe_function_t fn, lathe_value_t data, lathe_value_t indices,
                                                const lathe_quantization *quant, lathe_value_t *out) {
  const char *op = "QuantizedEmbeddingLookup";
  lathe_value_t operands[2] = {data, indices};
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_QUANTIZED_EMBEDDING_LOOKUP, operands, 2, &n));
  if (!quant) return LATHE_INVALID("%s: quantization is NULL", op);
  if (quant->scheme == LATHE_QUANT_LINEAR || quant->scheme == LATHE_QUANT_NF4)
    return LATHE_UNIMPL("%s: only the GGML scheme is supported, got %s", op,
                        quant->scheme == LATHE_QUANT_NF4 ? "NF4" : "Linear");
  if (quant->scheme != LATHE_QUANT_GGML) return LATHE_INVALID("%s: unknown quantization scheme %d", op, (int)quant->scheme);
  const lathe_shape *ds = &data->shape, *is = &indices->shape;
  char buf[LATHE_SHAPE_STR_MAX];
  if (ds->dtype != LATHE_DTYPE_UINT8 || ds->rank != 2)
    return LATHE_INVALID("%s: data must be Uint8 [vocab, bytes per row], got %s", op, lathe_shape_str(ds, buf, sizeof buf));
  LATHE_RETURN_IF_ERROR(check_static(op, "data", ds));
  if (!lathe_dtype_is_int(is->dtype))
    return LATHE_INVALID("%s: indices must have an integer dtype, got %s", op, lathe_dtype_name(is->dtype));
  if (is->rank < 1 || is->dims[is->rank - 1] != 1)
    return LATHE_INVALID("%s: indices' last axis must have size 1, got %s", op, lathe_shape_str(is, buf, sizeof buf));
  int64_t k;
  LATHE_RETURN_IF_ERROR(ggml_k(op, quant, ds->dims[1], &k));
  lathe_attr_set_quantized_scheme(n, LATHE_QUANT_GGML);
  lathe_attr_set_quantized_ggml_type(n, quant->ggml_type);
  lathe_attr_set_quantized_in_features(n, k);
  n->shape = *is;
  n->shape.dtype = LATHE_DTYPE_FLOAT32;
  n->shape.dims[is->rank - 1] = k;
  n->shape.axis_names[is->rank - 1] = NULL;
  return lathe_node_commit(n, out);
}
