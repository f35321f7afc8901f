/* ops_conv.c -- the builder and shape rule of ConvGeneral, after GoMLX's
 * shapeinference.ConvGeneral, plus the one rule GoMLX leaves to its graph layer: input and
 * kernel share a dtype. Attributes (op_attrs.def, conv_general) are all normalised: defaults
 * filled in, so kernels and CSE see one form. */
#include "graph.h"

static const char *const OP = "ConvGeneral";
/* Bound on strides, dilations and paddings, so size arithmetic cannot overflow int64. */
#define LATHE_MAX_WINDOW_ATTR ((int64_t)1 << 32)

/* Checks that the role axes {a, b} + spatial cover [0, rank) exactly once; what names the operand. */
static lathe_status_t check_roles(const char *what, const char *na, int a, const char *nb, int b, const int *sp,
                                  int n_sp, int rank) {
  if (n_sp != rank - 2)
    return LATHE_INVALID("%s: %s spatial axes list has %d entries, but there are %d spatial axes (rank %d)", OP, what,
                         n_sp, rank - 2, rank);
  if (n_sp > 0 && !sp) return LATHE_INVALID("%s: %s spatial axes list is NULL", OP, what);
  int all[LATHE_MAX_RANK + 2];
  all[0] = a, all[1] = b;
  for (int i = 0; i < n_sp; i++) all[i + 2] = sp[i];
  for (int i = 0; i < rank; i++) {
    if (all[i] < 0 || all[i] >= rank) {
      if (i < 2)
        return LATHE_INVALID("%s: %s %s axis %d is out of range [0, %d)", OP, what, i ? nb : na, all[i], rank);
      return LATHE_INVALID("%s: %s spatial axis %d is out of range [0, %d)", OP, what, all[i], rank);
    }
    for (int j = 0; j < i; j++)
      if (all[j] == all[i])
        return LATHE_INVALID("%s: duplicate %s axes configuration: %s=%d, %s=%d and spatial axes all name axis %d "
                             "more than once", OP, what, na, a, nb, b, all[i]);
  }
  return NULL;
}

/* Reads an optional per-spatial-axis list into dst with default def; names it in errors. */
static lathe_status_t opt_list(const char *what, const int64_t *v, int n, int ns, int64_t def, int64_t *dst) {
  if (n < 0) return LATHE_INVALID("%s: %s has negative length %d", OP, what, n);
  if (n != 0 && n != ns)
    return LATHE_INVALID("%s: %s has %d entries; it must be empty or have one per spatial axis (%d)", OP, what, n, ns);
  if (n && !v) return LATHE_INVALID("%s: %s is NULL but has %d entries", OP, what, n);
  for (int i = 0; i < ns; i++) {
    dst[i] = n ? v[i] : def;
    if (dst[i] < 1) return LATHE_INVALID("%s: %s[%d]=%lld must be >= 1", OP, what, i, (long long)dst[i]);
    if (dst[i] > LATHE_MAX_WINDOW_ATTR)
      return LATHE_INVALID("%s: %s[%d]=%lld is too large", OP, what, i, (long long)dst[i]);
  }
  return NULL;
}

lathe_status_t lathe_conv_general(lathe_function_t fn, lathe_value_t input, lathe_value_t kernel,
                                  const lathe_conv_axes *axes, const lathe_conv_params *params, lathe_value_t *out) {
  lathe_value_t ops[2] = {input, kernel};
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_CONV_GENERAL, ops, 2, &n));
  if (!axes) return LATHE_INVALID("%s: axes configuration is NULL", OP);
  static const lathe_conv_params no_params;
  if (!params) params = &no_params;
  const lathe_shape *is = &input->shape, *ks = &kernel->shape;
  char b1[LATHE_SHAPE_STR_MAX], b2[LATHE_SHAPE_STR_MAX];
  int rank = is->rank, ns = rank - 2;
  if (rank < 3)
    return LATHE_INVALID("%s: input needs rank >= 3 (batch, channels and spatial axes, in any order), got %s", OP,
                         lathe_shape_str(is, b1, sizeof b1));
  if (ks->rank != rank)
    return LATHE_INVALID("%s: input %s and kernel %s have different ranks", OP, lathe_shape_str(is, b1, sizeof b1),
                         lathe_shape_str(ks, b2, sizeof b2));
  if (is->dtype != ks->dtype)
    return LATHE_INVALID("%s: input dtype %s and kernel dtype %s differ", OP, lathe_dtype_name(is->dtype),
                         lathe_dtype_name(ks->dtype));
  if (is->dtype == LATHE_DTYPE_BOOL || lathe_dtype_is_complex(is->dtype))
    return LATHE_INVALID("%s: dtype %s is not a real number type", OP, lathe_dtype_name(is->dtype));
  LATHE_RETURN_IF_ERROR(check_roles("input", "batch", axes->input_batch, "channels", axes->input_channels,
                                    axes->input_spatial, axes->n_input_spatial, rank));
  LATHE_RETURN_IF_ERROR(check_roles("kernel", "input channels", axes->kernel_input_channels, "output channels",
                                    axes->kernel_output_channels, axes->kernel_spatial, axes->n_kernel_spatial, rank));
  LATHE_RETURN_IF_ERROR(check_roles("output", "batch", axes->output_batch, "channels", axes->output_channels,
                                    axes->output_spatial, axes->n_output_spatial, rank));

  int64_t strides[LATHE_MAX_RANK], idil[LATHE_MAX_RANK], kdil[LATHE_MAX_RANK], pads[2 * LATHE_MAX_RANK];
  LATHE_RETURN_IF_ERROR(opt_list("strides", params->strides, params->n_strides, ns, 1, strides));
  if (params->n_paddings != 0 && params->n_paddings != ns)
    return LATHE_INVALID("%s: paddings has %d entries; it must be empty or have one per spatial axis (%d)", OP,
                         params->n_paddings, ns);
  if (params->n_paddings && !params->paddings) return LATHE_INVALID("%s: paddings is NULL", OP);
  for (int i = 0; i < ns; i++) {
    pads[2 * i] = params->n_paddings ? params->paddings[i].low : 0;
    pads[2 * i + 1] = params->n_paddings ? params->paddings[i].high : 0;
    if (pads[2 * i] < -LATHE_MAX_WINDOW_ATTR || pads[2 * i] > LATHE_MAX_WINDOW_ATTR ||
        pads[2 * i + 1] < -LATHE_MAX_WINDOW_ATTR || pads[2 * i + 1] > LATHE_MAX_WINDOW_ATTR)
      return LATHE_INVALID("%s: paddings[%d]=[%lld, %lld] is too large", OP, i, (long long)pads[2 * i],
                           (long long)pads[2 * i + 1]);
  }
  LATHE_RETURN_IF_ERROR(opt_list("input_dilations", params->input_dilations, params->n_input_dilations, ns, 1, idil));
  LATHE_RETURN_IF_ERROR(opt_list("kernel_dilations", params->kernel_dilations, params->n_kernel_dilations, ns, 1, kdil));

  int64_t cgc = params->channel_group_count, bgc = params->batch_group_count;
  if (cgc < 0) return LATHE_INVALID("%s: channel_group_count=%lld must be >= 1 (or 0: none)", OP, (long long)cgc);
  if (bgc < 0) return LATHE_INVALID("%s: batch_group_count=%lld must be >= 1 (or 0: none)", OP, (long long)bgc);
  if (cgc == 0) cgc = 1;
  if (bgc == 0) bgc = 1;
  if (cgc > 1 && bgc > 1)
    return LATHE_INVALID("%s: at most one of channel_group_count (%lld) and batch_group_count (%lld) may be > 1", OP,
                         (long long)cgc, (long long)bgc);
  int64_t in_ch = is->dims[axes->input_channels], out_ch = ks->dims[axes->kernel_output_channels];
  int64_t k_in_ch = ks->dims[axes->kernel_input_channels], in_batch = is->dims[axes->input_batch];
  if (out_ch < 0 || k_in_ch < 0)
    return LATHE_INVALID("%s: kernel %s has a dynamic channels axis", OP, lathe_shape_str(ks, b1, sizeof b1));
  /* the kernel's channels are static: a dynamic input channels axis could be bound to another size */
  if (in_ch < 0)
    return LATHE_INVALID("%s: input %s has a dynamic channels axis", OP, lathe_shape_str(is, b1, sizeof b1));
  if (in_ch != -1 && in_ch % cgc != 0)
    return LATHE_INVALID("%s: input channels %lld must be divisible by channel_group_count %lld", OP, (long long)in_ch,
                         (long long)cgc);
  if (out_ch % cgc != 0)
    return LATHE_INVALID("%s: kernel output channels %lld must be divisible by channel_group_count %lld", OP,
                         (long long)out_ch, (long long)cgc);
  if (in_ch != -1 && in_ch / cgc != k_in_ch) /* in_ch % cgc == 0 here; k_in_ch * cgc could overflow */
    return LATHE_INVALID("%s: input channels (%lld) must equal kernel input channels (%lld) * channel_group_count "
                         "(%lld); input %s, kernel %s", OP, (long long)in_ch, (long long)k_in_ch, (long long)cgc,
                         lathe_shape_str(is, b1, sizeof b1), lathe_shape_str(ks, b2, sizeof b2));
  /* the result's batch axis would keep the input's name but need 1/bgc of its size */
  if (in_batch == -1 && bgc > 1)
    return LATHE_INVALID("%s: batch_group_count %lld needs a static input batch axis, got %s", OP, (long long)bgc,
                         lathe_shape_str(is, b1, sizeof b1));
  if (in_batch != -1 && in_batch % bgc != 0)
    return LATHE_INVALID("%s: input batch %lld must be divisible by batch_group_count %lld", OP, (long long)in_batch,
                         (long long)bgc);
  if (out_ch % bgc != 0)
    return LATHE_INVALID("%s: output channels %lld must be divisible by batch_group_count %lld", OP, (long long)out_ch,
                         (long long)bgc);

  /* The result keeps the input's axis names by role (batch to batch, spatial i to spatial i). */
  lathe_shape os;
  memset(&os, 0, sizeof os);
  os.dtype = is->dtype;
  os.rank = rank;
  os.dims[axes->output_batch] = in_batch == -1 ? -1 : in_batch / bgc;
  os.axis_names[axes->output_batch] = is->axis_names[axes->input_batch];
  os.dims[axes->output_channels] = out_ch;
  os.axis_names[axes->output_channels] = is->axis_names[axes->input_channels];
  for (int i = 0; i < ns; i++) {
    int ia = axes->input_spatial[i], oa = axes->output_spatial[i];
    int64_t d = is->dims[ia], kd = ks->dims[axes->kernel_spatial[i]];
    os.axis_names[oa] = is->axis_names[ia];
    if (kd < 0) return LATHE_INVALID("%s: kernel %s has a dynamic spatial axis", OP, lathe_shape_str(ks, b1, sizeof b1));
    if (d == -1) {
      if (kd != 1 || strides[i] != 1 || pads[2 * i] || pads[2 * i + 1] || idil[i] != 1 || kdil[i] != 1)
        return LATHE_INVALID("%s: spatial axis %d (\"%s\") is dynamic; a convolution that changes its size is not "
                             "supported", OP, ia, is->axis_names[ia] ? is->axis_names[ia] : "");
      os.dims[oa] = -1;
      continue;
    }
    /* Dilated sizes stay below the size limit (paddings are bounded too), so the kernel's
     * positions fit in int64. */
    int64_t eff_in, eff_k;
    if (lathe_mul_overflow(d - 1, idil[i], &eff_in) || lathe_mul_overflow(kd - 1, kdil[i], &eff_k) ||
        eff_in >= LATHE_MAX_TENSOR_SIZE || eff_k >= LATHE_MAX_TENSOR_SIZE)
      return LATHE_INVALID("%s: the dilated sizes of spatial axis %d (input %lld, input dilation %lld, kernel %lld, "
                           "kernel dilation %lld) exceed the size limit", OP, i, (long long)d, (long long)idil[i],
                           (long long)kd, (long long)kdil[i]);
    eff_in += 1, eff_k += 1;
    int64_t padded = eff_in + pads[2 * i] + pads[2 * i + 1];
    if (eff_k > padded)
      return LATHE_INVALID("%s: effective kernel size %lld of spatial axis %d (input axis %d) is larger than the "
                           "padded effective input size %lld (input %lld, input dilation %lld, kernel %lld, kernel "
                           "dilation %lld, padding [%lld, %lld])", OP, (long long)eff_k, i, ia, (long long)padded,
                           (long long)d, (long long)idil[i], (long long)kd, (long long)kdil[i],
                           (long long)pads[2 * i], (long long)pads[2 * i + 1]);
    os.dims[oa] = (padded - eff_k) / strides[i] + 1;
  }

  n->shape = os;
  lathe_attr_set_conv_general_input_batch(n, axes->input_batch);
  lathe_attr_set_conv_general_input_channels(n, axes->input_channels);
  lathe_attr_set_conv_general_kernel_input_channels(n, axes->kernel_input_channels);
  lathe_attr_set_conv_general_kernel_output_channels(n, axes->kernel_output_channels);
  lathe_attr_set_conv_general_output_batch(n, axes->output_batch);
  lathe_attr_set_conv_general_output_channels(n, axes->output_channels);
  lathe_attr_set_conv_general_channel_group_count(n, cgc);
  lathe_attr_set_conv_general_batch_group_count(n, bgc);
  LATHE_RETURN_IF_ERROR(lathe_attr_set_conv_general_input_spatial_int(n, axes->input_spatial, ns));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_conv_general_kernel_spatial_int(n, axes->kernel_spatial, ns));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_conv_general_output_spatial_int(n, axes->output_spatial, ns));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_conv_general_strides(n, strides, ns));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_conv_general_paddings(n, pads, 2 * ns));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_conv_general_input_dilations(n, idil, ns));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_conv_general_kernel_dilations(n, kdil, ns));
  return lathe_node_commit(n, out);
}
