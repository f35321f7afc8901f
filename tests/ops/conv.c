/* conv.c -- conformance rows for ConvGeneral: 1-D, 2-D and 3-D spatial axes, NWC/NHWC/NCHW and
 * an unusual layout, strides, positive and negative padding, input and kernel dilation, channel
 * and batch groups, size-0 and size-1 axes, every dtype the op is meant for; compared against a
 * direct convolution loop written here (double for floats, exact wrapping for integers). Rows with
 * NaN and infinite kernel values check that padding and input-dilation holes contribute nothing
 * (0 * Inf is not summed), as XLA computes it, in the forward and in the gradients' shapes. */
#include <stdint.h>

#include "testing.h"

#define R LATHE_MAX_RANK

typedef struct conv_row {
  const char *label;
  int rank;
  int64_t in[8], ker[8];
  /* roles: input batch, channels, spatial...; kernel in, out, spatial...; output batch, channels, spatial... */
  int ib, ic, isp[6], kin, kout, ksp[6], ob, oc, osp[6];
  int64_t strides[6], idil[6], kdil[6];
  lathe_padding pads[6];
  bool has_strides, has_pads, has_idil, has_kdil;
  int64_t cgc, bgc;
  bool nonfinite; /* floats: +Inf, NaN and -Inf at kernel elements 0, 1 and the last (of 3 or more) */
  double tol;     /* > 0: floats' tolerance at least this (sums of thousands of terms that cancel) */
} conv_row;

static const lathe_dtype float_dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT16,
                                        LATHE_DTYPE_BFLOAT16};
static const lathe_dtype int_dts[] = {LATHE_DTYPE_INT8, LATHE_DTYPE_INT16, LATHE_DTYPE_INT32, LATHE_DTYPE_INT64,
                                      LATHE_DTYPE_UINT8, LATHE_DTYPE_UINT16, LATHE_DTYPE_UINT32, LATHE_DTYPE_UINT64,
                                      LATHE_DTYPE_INT4, LATHE_DTYPE_UINT2};

/* MLX's own convolution (which the mlx configurations use for Float32 and the halves, 1-3 spatial
 * axes, no batch groups, non-negative padding) pads with zeros and sums 0 * Inf: a known gap
 * (docs/LIMITATIONS.md), skipped and counted there. */
static bool mlx_sums_padding(bool pads, bool idil, lathe_dtype dt, int ns, int64_t bgc) {
  return pads && !idil && dt != LATHE_DTYPE_FLOAT64 && ns >= 1 && ns <= 3 && bgc <= 1 &&
         strncmp(lathe_backend_config(tst_backend()), "mlx", 3) == 0;
}

static void run_row(const conv_row *r, lathe_dtype dt) {
  char label[160];
  snprintf(label, sizeof label, "%s/%s", r->label, lathe_dtype_name(dt));
  if (!lathe_backend_supports_op(tst_backend(), LATHE_OP_CONV_GENERAL, dt))
    SKIP("%s: ConvGeneral unsupported for %s", label, lathe_dtype_name(dt));
  bool pos_pad = false, idil = false;
  for (int d = 0; d < r->rank - 2; d++)
    pos_pad |= r->has_pads && (r->pads[d].low > 0 || r->pads[d].high > 0), idil |= r->has_idil && r->idil[d] > 1;
  if (r->nonfinite && mlx_sums_padding(pos_pad, idil, dt, r->rank - 2, r->bgc))
    SKIP("%s: MLX's convolution sums NaN/Inf kernel values on padding (docs/LIMITATIONS.md)", label);
  int rank = r->rank, ns = rank - 2;
  bool is_int = dt != LATHE_DTYPE_FLOAT16 && dt != LATHE_DTYPE_BFLOAT16 && dt != LATHE_DTYPE_FLOAT32 &&
                dt != LATHE_DTYPE_FLOAT64;
  lathe_shape xs = tst_shape(dt, rank, r->in), ks = tst_shape(dt, rank, r->ker);
  int64_t G = r->cgc > 1 ? r->cgc : r->bgc > 1 ? r->bgc : 1;

  /* Expected output dims, from the formula. */
  int64_t od[R];
  od[r->ob] = r->in[r->ib] / (r->bgc > 1 ? r->bgc : 1);
  od[r->oc] = r->ker[r->kout];
  for (int d = 0; d < ns; d++) {
    int64_t st = r->has_strides ? r->strides[d] : 1, id = r->has_idil ? r->idil[d] : 1;
    int64_t kd = r->has_kdil ? r->kdil[d] : 1;
    int64_t lo = r->has_pads ? r->pads[d].low : 0, hi = r->has_pads ? r->pads[d].high : 0;
    int64_t padded = (r->in[r->isp[d]] - 1) * id + 1 + lo + hi, ek = (r->ker[r->ksp[d]] - 1) * kd + 1;
    od[r->osp[d]] = (padded - ek) / st + 1;
  }
  lathe_shape ys = tst_shape(dt, rank, od);

  lathe_function_t fn;
  lathe_builder_t b = tst_builder(label, &fn);
  lathe_value_t x = tst_param(fn, "x", xs), k = tst_param(fn, "k", ks), y = NULL;
  lathe_conv_axes ax = {r->ib, r->ic, r->isp, ns, r->kin, r->kout, r->ksp, ns, r->ob, r->oc, r->osp, ns};
  lathe_conv_params p = {r->has_strides ? r->strides : NULL, r->has_strides ? ns : 0,
                         r->has_pads ? r->pads : NULL, r->has_pads ? ns : 0,
                         r->has_idil ? r->idil : NULL, r->has_idil ? ns : 0,
                         r->has_kdil ? r->kdil : NULL, r->has_kdil ? ns : 0, r->cgc, r->bgc};
  if (!tst_built(label, lathe_conv_general(fn, x, k, &ax, &p, &y), b)) return;
  tst_expect_shape_and_return(label, fn, y, &ys);

  int64_t nx = lathe_shape_num_elements(&xs), nk = lathe_shape_num_elements(&ks), ny = lathe_shape_num_elements(&ys);
  void *xd = tst_alloc_for(&xs), *kd = tst_alloc_for(&ks), *want = tst_alloc_for(&ys);
  tst_fill(xd, dt, nx, 11 + (unsigned)rank);
  tst_fill(kd, dt, nk, 29 + (unsigned)nk);
  if (r->nonfinite && !is_int && nk >= 2) {
    tst_set(kd, dt, 0, INFINITY);
    tst_set(kd, dt, 1, NAN);
    if (nk > 2) tst_set(kd, dt, nk - 1, -INFINITY);
  }

  /* Direct convolution reference. */
  int64_t oc = od[r->oc], ocg = oc / G, kic = r->ker[r->kin], ob = od[r->ob];
  int64_t oi[R] = {0};
  int64_t kspd[R], kss = 1;
  for (int d = 0; d < ns; d++) kspd[d] = r->ker[r->ksp[d]], kss *= kspd[d];
  for (int64_t e = 0; e < ny; e++) {
    int64_t rem = e;
    for (int d = rank - 1; d >= 0; d--) oi[d] = rem % od[d], rem /= od[d];
    int64_t bo = oi[r->ob], o = oi[r->oc], g = o / ocg;
    int64_t bi = r->bgc > 1 ? g * ob + bo : bo;
    double acc = 0;
    uint64_t iacc = 0;
    for (int64_t c = 0; c < kic; c++) {
      int64_t cin = r->cgc > 1 ? g * kic + c : c;
      for (int64_t kk = 0; kk < kss; kk++) {
        int64_t kx[R], krem = kk, xi[R], ki[R];
        for (int d = ns - 1; d >= 0; d--) kx[d] = krem % kspd[d], krem /= kspd[d];
        bool ok = true;
        xi[r->ib] = bi, xi[r->ic] = cin;
        ki[r->kin] = c, ki[r->kout] = o;
        for (int d = 0; d < ns && ok; d++) {
          int64_t st_ = r->has_strides ? r->strides[d] : 1, id = r->has_idil ? r->idil[d] : 1;
          int64_t kdl = r->has_kdil ? r->kdil[d] : 1, lo = r->has_pads ? r->pads[d].low : 0;
          int64_t pos = oi[r->osp[d]] * st_ + kx[d] * kdl - lo;
          if (pos < 0 || pos % id != 0 || pos / id >= r->in[r->isp[d]]) ok = false;
          xi[r->isp[d]] = pos / id;
          ki[r->ksp[d]] = kx[d];
        }
        if (!ok) continue;
        double xv = tst_get(xd, dt, tst_ravel(rank, r->in, xi)), kv = tst_get(kd, dt, tst_ravel(rank, r->ker, ki));
        acc += xv * kv;
        if (is_int) iacc += (uint64_t)(int64_t)xv * (uint64_t)(int64_t)kv; /* a float row's inf has no integer */
      }
    }
    tst_set(want, dt, e, is_int ? tst_wrap_value(dt, iacc) : acc);
  }

  const void *ins[2] = {xd, kd};
  void *out[1];
  lathe_shape os[1];
  lathe_status_t st = tst_run(b, ins, 2, out, 1, os);
  CHECK(st == NULL, "%s: run: %s", label, lathe_status_message(st));
  if (!st) {
    CHECK(lathe_shape_equal(&os[0], &ys), "%s: output shape mismatch", label);
    /* f32 sums of many products: allow for float accumulation order. */
    double tol = dt == LATHE_DTYPE_FLOAT32 ? 1e-4 : tst_tol(dt);
    if (!is_int && r->tol > tol) tol = r->tol;
    tst_expect_close(label, out[0], want, dt, ny, tol);
    tst_free_output(out[0]);
  }
  lathe_status_free(st);
  free(xd);
  free(kd);
  free(want);
  lathe_builder_free(b);
}

static void run_floats(const conv_row *r) {
  for (size_t i = 0; i < sizeof float_dts / sizeof float_dts[0]; i++) run_row(r, float_dts[i]);
}
static void run_all(const conv_row *r) {
  run_floats(r);
  for (size_t i = 0; i < sizeof int_dts / sizeof int_dts[0]; i++) run_row(r, int_dts[i]);
}

TEST(conv_1d_nwc) {
  conv_row r = {.label = "1d_nwc", .rank = 3, .in = {2, 7, 3}, .ker = {3, 3, 4},
                .ib = 0, .ic = 2, .isp = {1}, .kin = 1, .kout = 2, .ksp = {0}, .ob = 0, .oc = 2, .osp = {1}};
  run_all(&r);
  conv_row s = r;
  s.label = "1d_nwc_stride2_pad";
  s.has_strides = s.has_pads = true;
  s.strides[0] = 2;
  s.pads[0] = (lathe_padding){2, 1};
  run_all(&s);
}

TEST(conv_2d_nhwc) {
  conv_row r = {.label = "2d_nhwc_hwio", .rank = 4, .in = {2, 5, 6, 3}, .ker = {3, 2, 3, 4},
                .ib = 0, .ic = 3, .isp = {1, 2}, .kin = 2, .kout = 3, .ksp = {0, 1}, .ob = 0, .oc = 3, .osp = {1, 2},
                .has_strides = true, .strides = {2, 1}, .has_pads = true, .pads = {{1, 1}, {0, 2}}};
  run_all(&r);
}

TEST(conv_2d_nchw_negative_padding) {
  conv_row r = {.label = "2d_nchw_oihw_negpad", .rank = 4, .in = {2, 3, 5, 6}, .ker = {4, 3, 3, 2},
                .ib = 0, .ic = 1, .isp = {2, 3}, .kin = 1, .kout = 0, .ksp = {2, 3}, .ob = 0, .oc = 1, .osp = {2, 3},
                .has_pads = true, .pads = {{-1, 0}, {1, -1}}};
  run_all(&r);
}

TEST(conv_2d_weird_layout) {
  /* input (H, C, W, N); kernel (O, KW, I, KH); output (W, N, H, C) */
  conv_row r = {.label = "2d_weird_layout", .rank = 4, .in = {5, 3, 6, 2}, .ker = {4, 2, 3, 3},
                .ib = 3, .ic = 1, .isp = {0, 2}, .kin = 2, .kout = 0, .ksp = {3, 1}, .ob = 1, .oc = 3, .osp = {2, 0},
                .has_strides = true, .strides = {1, 2}, .has_pads = true, .pads = {{1, 0}, {0, 1}}};
  run_floats(&r);
  run_row(&r, LATHE_DTYPE_INT32);
}

TEST(conv_dilations) {
  conv_row r = {.label = "2d_input_kernel_dilation", .rank = 4, .in = {1, 5, 4, 2}, .ker = {3, 2, 2, 3},
                .ib = 0, .ic = 3, .isp = {1, 2}, .kin = 2, .kout = 3, .ksp = {0, 1}, .ob = 0, .oc = 3, .osp = {1, 2},
                .has_idil = true, .idil = {2, 1}, .has_kdil = true, .kdil = {1, 2},
                .has_pads = true, .pads = {{1, 2}, {1, 1}}};
  run_all(&r);
  conv_row s = r;
  s.label = "2d_dilation_strides";
  s.has_strides = true;
  s.strides[0] = 2, s.strides[1] = 3;
  s.idil[1] = 3;
  run_floats(&s);
}

TEST(conv_3d) {
  conv_row r = {.label = "3d_ndhwc", .rank = 5, .in = {1, 4, 5, 3, 2}, .ker = {2, 3, 2, 2, 3},
                .ib = 0, .ic = 4, .isp = {1, 2, 3}, .kin = 3, .kout = 4, .ksp = {0, 1, 2}, .ob = 0, .oc = 4,
                .osp = {1, 2, 3}, .has_strides = true, .strides = {1, 2, 1}, .has_kdil = true, .kdil = {2, 1, 1},
                .has_pads = true, .pads = {{1, 1}, {0, 1}, {1, 0}}};
  run_all(&r);
}

TEST(conv_channel_groups) {
  conv_row r = {.label = "2d_channel_groups3", .rank = 4, .in = {2, 4, 5, 6}, .ker = {2, 2, 2, 6},
                .ib = 0, .ic = 3, .isp = {1, 2}, .kin = 2, .kout = 3, .ksp = {0, 1}, .ob = 0, .oc = 3, .osp = {1, 2},
                .cgc = 3};
  run_all(&r);
  conv_row s = {.label = "1d_ncw_depthwise", .rank = 3, .in = {2, 4, 9}, .ker = {4, 1, 3},
                .ib = 0, .ic = 1, .isp = {2}, .kin = 1, .kout = 0, .ksp = {2}, .ob = 0, .oc = 1, .osp = {2},
                .cgc = 4, .has_pads = true, .pads = {{1, 1}}};
  run_floats(&s);
}

TEST(conv_batch_groups) {
  conv_row r = {.label = "2d_batch_groups2", .rank = 4, .in = {4, 4, 4, 3}, .ker = {2, 2, 3, 4},
                .ib = 0, .ic = 3, .isp = {1, 2}, .kin = 2, .kout = 3, .ksp = {0, 1}, .ob = 0, .oc = 3, .osp = {1, 2},
                .bgc = 2};
  run_all(&r);
  conv_row s = r;
  s.label = "2d_batch_groups4_nchw_out";
  s.bgc = 4, s.ob = 0, s.oc = 1, s.osp[0] = 2, s.osp[1] = 3;
  run_floats(&s);
}

TEST(conv_small_and_empty) {
  conv_row one = {.label = "all_size1", .rank = 4, .in = {1, 1, 1, 1}, .ker = {1, 1, 1, 1},
                  .ib = 0, .ic = 3, .isp = {1, 2}, .kin = 2, .kout = 3, .ksp = {0, 1}, .ob = 0, .oc = 3,
                  .osp = {1, 2}};
  run_all(&one);
  conv_row pw = {.label = "pointwise_1x1", .rank = 4, .in = {3, 4, 5, 7}, .ker = {1, 1, 7, 5},
                 .ib = 0, .ic = 3, .isp = {1, 2}, .kin = 2, .kout = 3, .ksp = {0, 1}, .ob = 0, .oc = 3,
                 .osp = {1, 2}};
  run_floats(&pw);
  conv_row b0 = {.label = "batch0", .rank = 4, .in = {0, 4, 4, 2}, .ker = {2, 2, 2, 3},
                 .ib = 0, .ic = 3, .isp = {1, 2}, .kin = 2, .kout = 3, .ksp = {0, 1}, .ob = 0, .oc = 3,
                 .osp = {1, 2}};
  run_floats(&b0);
  conv_row c0 = {.label = "channels0", .rank = 4, .in = {1, 3, 3, 0}, .ker = {2, 2, 0, 3},
                 .ib = 0, .ic = 3, .isp = {1, 2}, .kin = 2, .kout = 3, .ksp = {0, 1}, .ob = 0, .oc = 3,
                 .osp = {1, 2}};
  run_floats(&c0);
  run_row(&c0, LATHE_DTYPE_INT32);
  conv_row pad_only = {.label = "window_in_padding", .rank = 3, .in = {1, 2, 1}, .ker = {2, 1, 2},
                       .ib = 0, .ic = 2, .isp = {1}, .kin = 1, .kout = 2, .ksp = {0}, .ob = 0, .oc = 2,
                       .osp = {1}, .has_pads = true, .pads = {{3, 3}}};
  run_floats(&pad_only);
}

TEST(conv_larger_tiled) {
  /* several tiles of output positions per batch, several threads */
  conv_row r = {.label = "2d_nhwc_40x40", .rank = 4, .in = {2, 40, 41, 8}, .ker = {3, 3, 8, 16},
                .ib = 0, .ic = 3, .isp = {1, 2}, .kin = 2, .kout = 3, .ksp = {0, 1}, .ob = 0, .oc = 3, .osp = {1, 2},
                .has_pads = true, .pads = {{1, 1}, {1, 1}}};
  run_row(&r, LATHE_DTYPE_FLOAT32);
  run_row(&r, LATHE_DTYPE_FLOAT64);
  run_row(&r, LATHE_DTYPE_BFLOAT16);
  conv_row s = r;
  s.label = "2d_nchw_40x40_groups";
  s.in[1] = 8, s.in[2] = 40, s.in[3] = 41, s.ic = 1, s.isp[0] = 2, s.isp[1] = 3;
  s.ker[2] = 4, s.cgc = 2, s.oc = 1, s.osp[0] = 2, s.osp[1] = 3;
  run_row(&s, LATHE_DTYPE_FLOAT32);
  run_row(&s, LATHE_DTYPE_INT16);
}

TEST(conv_kernel_gradient_nhwc) {
  /* a kernel's gradient as GoMLX writes it: the input's channels act as the batch (innermost
   * axis), its batch as the channels, the output gradient as the kernel; output (KH, KW, C, O) */
  conv_row r = {.label = "kernel_gradient_nhwc", .rank = 4, .in = {5, 9, 9, 6}, .ker = {5, 7, 7, 4},
                .ib = 3, .ic = 0, .isp = {1, 2}, .kin = 0, .kout = 3, .ksp = {1, 2}, .ob = 2, .oc = 3, .osp = {0, 1}};
  run_floats(&r);
  run_row(&r, LATHE_DTYPE_INT32);
  r.label = "kernel_gradient_nhwc_padded";
  r.has_pads = true, r.pads[0] = (lathe_padding){1, 1}, r.pads[1] = (lathe_padding){1, 1};
  r.ker[1] = 9, r.ker[2] = 9;
  run_floats(&r);
  /* a long sum (k = 4 x 64 x 64 on lathe:cpu's chunked product for Float32: 14 chunks in 8
   * parts), unpadded and "same", with infinities and NaN in the output gradient against the
   * padding; then the same with channels not innermost (NCHW: col built row by row). Terms of
   * up to 16 summed 16384 times cancel to values near 1: the tolerance is the sums' rounding
   * (2.6e-4 seen in Float32), where a chunk lost or added twice is off by several units */
  conv_row l = {.label = "kernel_gradient_nhwc_long", .rank = 4, .in = {4, 66, 66, 6}, .ker = {4, 64, 64, 5},
                .ib = 3, .ic = 0, .isp = {1, 2}, .kin = 0, .kout = 3, .ksp = {1, 2}, .ob = 2, .oc = 3, .osp = {0, 1},
                .tol = 2e-3};
  run_floats(&l);
  l.label = "kernel_gradient_nhwc_long_same";
  l.in[1] = l.in[2] = 64, l.has_pads = true, l.pads[0] = l.pads[1] = (lathe_padding){1, 1}, l.nonfinite = true;
  run_row(&l, LATHE_DTYPE_FLOAT32);
  run_row(&l, LATHE_DTYPE_FLOAT64);
  conv_row n = {.label = "kernel_gradient_nchw_long_same", .rank = 4, .in = {4, 6, 64, 64}, .ker = {4, 5, 64, 64},
                .ib = 1, .ic = 0, .isp = {2, 3}, .kin = 0, .kout = 1, .ksp = {2, 3}, .ob = 0, .oc = 1, .osp = {2, 3},
                .has_pads = true, .pads = {{1, 1}, {1, 1}}, .tol = 2e-3};
  run_row(&n, LATHE_DTYPE_FLOAT32);
  run_row(&n, LATHE_DTYPE_BFLOAT16);
}

TEST(conv_unsupported_dtypes_skip) {
  static const lathe_dtype no[] = {LATHE_DTYPE_BOOL, LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_COMPLEX128};
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
    CHECK(!lathe_backend_supports_op(tst_backend(), LATHE_OP_CONV_GENERAL, no[i]), "ConvGeneral %s must be unsupported",
          lathe_dtype_name(no[i]));
}

TEST(conv_nonfinite_kernel_holes) {
  /* x=[1,2], k=[1,+Inf], input dilation 2: [1,+Inf] (the hole under +Inf contributes nothing) */
  conv_row a = {.label = "nonfinite_idil_1d", .rank = 3, .in = {1, 2, 1}, .ker = {2, 1, 1},
                .ib = 0, .ic = 2, .isp = {1}, .kin = 1, .kout = 2, .ksp = {0}, .ob = 0, .oc = 2, .osp = {1},
                .has_idil = true, .idil = {2}, .nonfinite = true};
  run_floats(&a);
  lathe_dtype dt = LATHE_DTYPE_FLOAT32;
  for (int which = 0; which < 2; which++) {
    /* exact: x=[1,2], k=[1,+Inf], idil 2 -> [1,+Inf]; x=[1], k=[NaN,1], padding (1,0) -> [1] */
    const char *label = which ? "nonfinite_pad_exact" : "nonfinite_idil_exact";
    if (which && mlx_sums_padding(true, false, dt, 1, 1)) {
      tst_skipf(label, "MLX's convolution sums NaN/Inf kernel values on padding (docs/LIMITATIONS.md)");
      continue;
    }
    lathe_function_t fn;
    lathe_builder_t b = tst_builder(label, &fn);
    lathe_shape xs = TST_SHAPE(dt, 1, which ? 1 : 2, 1), ks = TST_SHAPE(dt, 2, 1, 1);
    lathe_value_t x = tst_param(fn, "x", xs), k = tst_param(fn, "k", ks), y = NULL;
    int isp[1] = {1}, ksp[1] = {0}, osp[1] = {1};
    int64_t idil[1] = {2};
    lathe_padding pad[1] = {{1, 0}};
    lathe_conv_axes ax = {0, 2, isp, 1, 1, 2, ksp, 1, 0, 2, osp, 1};
    lathe_conv_params p = {NULL, 0, which ? pad : NULL, which ? 1 : 0, which ? NULL : idil, which ? 0 : 1, NULL, 0, 1, 1};
    if (!tst_built(label, lathe_conv_general(fn, x, k, &ax, &p, &y), b)) continue;
    CHECK_OK(lathe_function_return(fn, &y, 1));
    float xv[2] = {1, 2}, kv[2] = {1, INFINITY}, kp[2] = {NAN, 1}, want_a[2] = {1, INFINITY}, want_b[1] = {1};
    const void *ins[2] = {xv, which ? kp : kv};
    tst_run_expect(label, b, ins, 2, which ? (const void *)want_b : want_a, dt, which ? 1 : 2, 0);
    lathe_builder_free(b);
  }
  conv_row pad = {.label = "nonfinite_pad_2d", .rank = 4, .in = {2, 5, 6, 3}, .ker = {3, 2, 3, 4},
                  .ib = 0, .ic = 3, .isp = {1, 2}, .kin = 2, .kout = 3, .ksp = {0, 1}, .ob = 0, .oc = 3,
                  .osp = {1, 2}, .has_pads = true, .pads = {{2, 1}, {1, 2}}, .nonfinite = true};
  run_floats(&pad);
  conv_row dil = {.label = "nonfinite_dilations_2d", .rank = 4, .in = {1, 5, 4, 2}, .ker = {3, 2, 2, 3},
                  .ib = 0, .ic = 3, .isp = {1, 2}, .kin = 2, .kout = 3, .ksp = {0, 1}, .ob = 0, .oc = 3,
                  .osp = {1, 2}, .has_idil = true, .idil = {2, 3}, .has_kdil = true, .kdil = {1, 2},
                  .has_pads = true, .pads = {{1, 2}, {1, 1}}, .nonfinite = true};
  run_floats(&dil);
  /* an input's gradient as GoMLX builds it (forward stride 2, padding 1, 3x3 kernel): the output
   * gradient dilated by the strides, padded by k-1-pad, the kernel reversed */
  conv_row ig = {.label = "nonfinite_input_gradient", .rank = 4, .in = {2, 4, 3, 5}, .ker = {3, 3, 4, 5},
                 .ib = 0, .ic = 3, .isp = {1, 2}, .kin = 3, .kout = 2, .ksp = {0, 1}, .ob = 0, .oc = 3,
                 .osp = {1, 2}, .has_idil = true, .idil = {2, 2}, .has_pads = true, .pads = {{1, 2}, {1, 2}},
                 .nonfinite = true};
  run_floats(&ig);
  /* a kernel's gradient (padded forward): the output gradient is the kernel */
  conv_row kg = {.label = "nonfinite_kernel_gradient", .rank = 4, .in = {3, 6, 6, 4}, .ker = {3, 6, 6, 5},
                 .ib = 3, .ic = 0, .isp = {1, 2}, .kin = 0, .kout = 3, .ksp = {1, 2}, .ob = 2, .oc = 3, .osp = {0, 1},
                 .has_pads = true, .pads = {{1, 1}, {1, 1}}, .nonfinite = true};
  run_floats(&kg);
  /* the big Float32 path (K > 256) */
  conv_row big = {.label = "nonfinite_pad_big", .rank = 4, .in = {2, 9, 10, 40}, .ker = {3, 3, 40, 8},
                  .ib = 0, .ic = 3, .isp = {1, 2}, .kin = 2, .kout = 3, .ksp = {0, 1}, .ob = 0, .oc = 3,
                  .osp = {1, 2}, .has_pads = true, .pads = {{1, 1}, {1, 1}}, .nonfinite = true};
  run_row(&big, LATHE_DTYPE_FLOAT32);
}
