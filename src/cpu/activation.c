/* activation.c -- ew.def's LATHE_ACT rows instantiated as row kernels (Float32 and Float64), one per
 * activation, so a row runs without a switch per element and the activations without libm calls
 * vectorise: the portable rows of the dense ops' epilogues and Float64. FusedActivation and its
 * VJP take Float32 rows from the ISA's table instead (act_kernels.h: vector math), Float16 and
 * BFloat16 through them in chunks of 256. The kernels of
 * FusedActivation, FusedActivationVJP (elementwise, or by rows for GLU) and FusedDenseVJP
 * (the derivative from y, then two products and a column sum). */
#include "../graph/ew_helpers.h"
#include "../graph/ew.h"
#include "activation.h"
#include "blas.h"
#include "gemm.h"
#include "kernels.h"

typedef void (*fwd32_fn)(const float *x, float *y, int64_t n);
typedef void (*fwd64_fn)(const double *x, double *y, int64_t n);
typedef void (*vjp32_fn)(const float *a, const float *g, float *d, int64_t n);
typedef void (*vjp64_fn)(const double *a, const double *g, double *d, int64_t n);

/* Loops over plain pointers: y may be x (the dense epilogues work in place). */
#define ACT_ROWS(E, SUF, TY, FWD, VJP_Y)                                      \
  static void fwd_##E##_##SUF(const TY *xs, TY *ys, int64_t n) {                     \
    typedef TY T;                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                \
      T x = xs[i];                                                                   \
      ys[i] = (T)(FWD);                                                              \
    }                                                                                \
  }                                                                                  \
  static void vy_##E##_##SUF(const TY *ys, const TY *gs, TY *d, int64_t n) {         \
    typedef TY T;                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                \
      T y = ys[i], g = gs[i];                                                        \
      (void)y;                                                                       \
      (void)g;                                                                       \
      d[i] = (T)(VJP_Y);                                                             \
    }                                                                                \
  }
/* Float64's derivatives from x (Float32's come from the ISA's table) */
#define ACT_VX64(E, VJP_X)                                                        \
  static void vx_##E##_f64(const double *xs, const double *gs, double *d, int64_t n) { \
    typedef double T;                                                             \
    for (int64_t i = 0; i < n; i++) {                                             \
      T x = xs[i], g = gs[i];                                                     \
      (void)x;                                                                    \
      d[i] = (T)(VJP_X);                                                          \
    }                                                                             \
  }
#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR)
#define LATHE_ACT(E, NUM, FORM, FWD, VJP_X, VJP_Y) \
  ACT_ROWS(E, f32, float, FWD, VJP_Y)              \
  ACT_ROWS(E, f64, double, FWD, VJP_Y)             \
  ACT_VX64(E, VJP_X)
#include "../graph/ew.def"
#undef LATHE_ACT

static const fwd32_fn fwd32[LATHE_ACT_COUNT] = {
#define LATHE_ACT(E, NUM, FORM, FWD, VJP_X, VJP_Y) [NUM] = fwd_##E##_f32,
#include "../graph/ew.def"
#undef LATHE_ACT
};
static const fwd64_fn fwd64[LATHE_ACT_COUNT] = {
#define LATHE_ACT(E, NUM, FORM, FWD, VJP_X, VJP_Y) [NUM] = fwd_##E##_f64,
#include "../graph/ew.def"
#undef LATHE_ACT
};
static const vjp64_fn vx64[LATHE_ACT_COUNT] = {
#define LATHE_ACT(E, NUM, FORM, FWD, VJP_X, VJP_Y) [NUM] = vx_##E##_f64,
#include "../graph/ew.def"
#undef LATHE_ACT
};
static const vjp32_fn vy32[LATHE_ACT_COUNT] = {
#define LATHE_ACT(E, NUM, FORM, FWD, VJP_X, VJP_Y) [NUM] = vy_##E##_f32,
#include "../graph/ew.def"
#undef LATHE_ACT
};
static const vjp64_fn vy64[LATHE_ACT_COUNT] = {
#define LATHE_ACT(E, NUM, FORM, FWD, VJP_X, VJP_Y) [NUM] = vy_##E##_f64,
#include "../graph/ew.def"
#undef LATHE_ACT
};
#undef LATHE_EW

void lathe_cpu_act_f32(int act, const float *x, float *y, int64_t n) {
  if (act == LATHE_ACTIVATION_NONE) {
    if (x != y) memmove(y, x, sizeof(float) * (size_t)n);
    return;
  }
  fwd32[act](x, y, n);
}
void lathe_cpu_act_f64(int act, const double *x, double *y, int64_t n) {
  if (act == LATHE_ACTIVATION_NONE) {
    if (x != y) memmove(y, x, sizeof(double) * (size_t)n);
    return;
  }
  fwd64[act](x, y, n);
}

bool lathe_cpu_supports_activation(lathe_op op, lathe_dtype dt) {
  return (op == LATHE_OP_FUSED_ACTIVATION || op == LATHE_OP_FUSED_ACTIVATION_VJP || op == LATHE_OP_FUSED_DENSE_VJP) &&
         lathe_dtype_is_float(dt);
}

/* ---- chunks: Float32 compute of Float16 / BFloat16 / Float32 storage ---- */
#define CH 256
static inline const float *load32(lathe_dtype dt, const void *p, int64_t off, float *buf, int64_t n) {
  if (dt == LATHE_DTYPE_FLOAT32) return (const float *)p + off;
  lathe_halves_to_f32(dt, (const uint16_t *)p + off, buf, n);
  return buf;
}
static inline float *dst32(lathe_dtype dt, void *p, int64_t off, float *buf) {
  return dt == LATHE_DTYPE_FLOAT32 ? (float *)p + off : buf;
}
static inline void store32(lathe_dtype dt, void *p, int64_t off, const float *buf, int64_t n) {
  if (dt != LATHE_DTYPE_FLOAT32) lathe_f32_to_halves(dt, buf, (uint16_t *)p + off, n);
}

typedef struct {
  int act;
  lathe_dtype dt;
  const lathe_cpu_kernels *kt; /* Float32 rows with the ISA's vector math */
  const void *a, *g; /* forward: a = x; VJP: a = y (from_y) or x, g = dOutput */
  void *out;
  bool from_y;
  int64_t h; /* GLU: the output's last axis (half of x's) */
} act_job;

static void fwd_range(void *vc, int64_t b, int64_t e) {
  const act_job *j = vc;
  if (j->dt == LATHE_DTYPE_FLOAT64) {
    lathe_cpu_act_f64(j->act, (const double *)j->a + b, (double *)j->out + b, e - b);
    return;
  }
  float xb[CH], yb[CH];
  for (int64_t i = b; i < e; i += CH) {
    int64_t n = e - i < CH ? e - i : CH;
    float *y = dst32(j->dt, j->out, i, yb);
    j->kt->act_fwd[j->act](load32(j->dt, j->a, i, xb, n), y, n);
    store32(j->dt, j->out, i, y, n);
  }
}

static void vjp_range(void *vc, int64_t b, int64_t e) {
  const act_job *j = vc;
  if (j->dt == LATHE_DTYPE_FLOAT64) {
    (j->from_y ? vy64 : vx64)[j->act]((const double *)j->a + b, (const double *)j->g + b, (double *)j->out + b, e - b);
    return;
  }
  vjp32_fn f = (j->from_y ? j->kt->act_vy : j->kt->act_vx)[j->act];
  float ab[CH], gb[CH], db[CH];
  for (int64_t i = b; i < e; i += CH) {
    int64_t n = e - i < CH ? e - i : CH;
    float *d = dst32(j->dt, j->out, i, db);
    f(load32(j->dt, j->a, i, ab, n), load32(j->dt, j->g, i, gb, n), d, n);
    store32(j->dt, j->out, i, d, n);
  }
}

/* ---- region tiles ---- */
/* n elements of a (or its one element, step 0) as Float32 / Float64 */
static const float *tile32(lathe_dtype dt, const void *a, int step, int64_t off, float *buf, int64_t n) {
  if (step) return load32(dt, a, off, buf, n);
  float one;
  float v = *load32(dt, a, 0, &one, 1);
  for (int64_t i = 0; i < n; i++) buf[i] = v;
  return buf;
}
static const double *tile64(const void *a, int step, int64_t off, double *buf, int64_t n) {
  if (step) return (const double *)a + off;
  for (int64_t i = 0; i < n; i++) buf[i] = *(const double *)a;
  return buf;
}

void lathe_cpu_act_tile(const lathe_cpu_kernels *kt, lathe_dtype dt, int mode, int act, const void *a, int a_step,
                        const void *g, int g_step, void *out, int64_t n) {
  for (int64_t i = 0; i < n; i += CH) {
    int64_t m = n - i < CH ? n - i : CH;
    if (dt == LATHE_DTYPE_FLOAT64) {
      double ab[CH], gb[CH];
      const double *av = tile64(a, a_step, i, ab, m);
      double *o = (double *)out + i;
      if (mode == 1) lathe_cpu_act_f64(act, av, o, m);
      else (mode == 3 ? vy64 : vx64)[act](av, tile64(g, g_step, i, gb, m), o, m);
      continue;
    }
    float ab[CH], gb[CH], ob[CH];
    const float *av = tile32(dt, a, a_step, i, ab, m);
    float *o = dst32(dt, out, i, ob);
    if (mode == 1) kt->act_fwd[act](av, o, m);
    else (mode == 3 ? kt->act_vy : kt->act_vx)[act](av, tile32(dt, g, g_step, i, gb, m), o, m);
    store32(dt, out, i, o, m);
  }
}

/* GLU rows [b, e): x row [gate | value] of 2h, y row of h; y = f(gate) * value. */
#define GLU_KERNELS(SUF, TY, FWD_T, VX_T, LOAD, DST, STORE)                                       \
  static void glu_fwd_##SUF(void *vc, int64_t b, int64_t e) {                                     \
    const act_job *j = vc;                                                                        \
    TY gb[CH], vb[CH], yb[CH];                                                                    \
    for (int64_t r = b; r < e; r++)                                                               \
      for (int64_t c = 0; c < j->h; c += CH) {                                                    \
        int64_t n = j->h - c < CH ? j->h - c : CH, xo = r * 2 * j->h + c, yo = r * j->h + c;      \
        const TY *gate = LOAD(j->dt, j->a, xo, gb, n), *val = LOAD(j->dt, j->a, xo + j->h, vb, n); \
        TY *y = DST(j->dt, j->out, yo, yb);                                                       \
        FWD_T[j->act](gate, y, n);                                                                \
        for (int64_t i = 0; i < n; i++) y[i] *= val[i];                                           \
        STORE(j->dt, j->out, yo, y, n);                                                           \
      }                                                                                           \
  }                                                                                               \
  /* dgate = g * value * f'(gate), dvalue = g * f(gate) */                                        \
  static void glu_vjp_##SUF(void *vc, int64_t b, int64_t e) {                                     \
    const act_job *j = vc;                                                                        \
    TY gb[CH], vb[CH], ob[CH], t[CH], dg[CH], dv[CH];                                             \
    for (int64_t r = b; r < e; r++)                                                               \
      for (int64_t c = 0; c < j->h; c += CH) {                                                    \
        int64_t n = j->h - c < CH ? j->h - c : CH, xo = r * 2 * j->h + c, go = r * j->h + c;      \
        const TY *gate = LOAD(j->dt, j->a, xo, gb, n), *val = LOAD(j->dt, j->a, xo + j->h, vb, n); \
        const TY *g = LOAD(j->dt, j->g, go, ob, n);                                               \
        for (int64_t i = 0; i < n; i++) t[i] = g[i] * val[i];                                     \
        VX_T[j->act](gate, t, dg, n);                                                             \
        FWD_T[j->act](gate, dv, n);                                                               \
        for (int64_t i = 0; i < n; i++) dv[i] *= g[i];                                            \
        STORE_ALL(SUF, j, xo, dg, n);                                                             \
        STORE_ALL(SUF, j, xo + j->h, dv, n);                                                      \
      }                                                                                           \
  }
static inline const double *load64(lathe_dtype dt, const void *p, int64_t off, double *buf, int64_t n) {
  (void)dt, (void)buf, (void)n;
  return (const double *)p + off;
}
static inline double *dst64(lathe_dtype dt, void *p, int64_t off, double *buf) {
  (void)dt, (void)buf;
  return (double *)p + off;
}
static inline void store64(lathe_dtype dt, void *p, int64_t off, const double *buf, int64_t n) {
  (void)dt, (void)p, (void)off, (void)buf, (void)n;
}
static inline void store_all32(const act_job *j, int64_t off, const float *v, int64_t n) {
  if (j->dt == LATHE_DTYPE_FLOAT32)
    memcpy((float *)j->out + off, v, sizeof(float) * (size_t)n);
  else
    lathe_f32_to_halves(j->dt, v, (uint16_t *)j->out + off, n);
}
static inline void store_all64(const act_job *j, int64_t off, const double *v, int64_t n) {
  memcpy((double *)j->out + off, v, sizeof(double) * (size_t)n);
}
#define STORE_ALL(SUF, j, off, v, n) store_all##SUF(j, off, v, n)
GLU_KERNELS(32, float, j->kt->act_fwd, j->kt->act_vx, load32, dst32, store32)
GLU_KERNELS(64, double, fwd64, vx64, load64, dst64, store64)

/* ---- FusedDenseVJP, in Float32 or Float64 (halves widened around it) ---- */
typedef struct {
  lathe_dtype dt; /* FLOAT32 or FLOAT64 */
  size_t es;
  int act;
  const void *x, *w, *y, *g;
  void *dz, *dx, *dw, *db;
  int64_t m, k, nn;
  bool io;
} dvjp_ctx;

static void dvjp_dz(void *vc, int64_t b, int64_t e) {
  const dvjp_ctx *c = vc;
  if (c->dt == LATHE_DTYPE_FLOAT64)
    vy64[c->act]((const double *)c->y + b, (const double *)c->g + b, (double *)c->dz + b, e - b);
  else
    vy32[c->act]((const float *)c->y + b, (const float *)c->g + b, (float *)c->dz + b, e - b);
}
/* dx rows [b, e) = dz rows . weight' (io: weight is [k, nn], used transposed) */
static void dvjp_dx(void *vc, int64_t b, int64_t e) {
  const dvjp_ctx *c = vc;
  lathe_blas_mat wm = c->io ? (lathe_blas_mat){true, c->nn} : (lathe_blas_mat){false, c->k};
  lathe_blas_gemm(c->dt, e - b, c->k, c->nn, (const char *)c->dz + (size_t)(b * c->nn) * c->es,
                  (lathe_blas_mat){false, c->nn}, c->w, wm, (char *)c->dx + (size_t)(b * c->k) * c->es, c->k);
}
/* dWeight rows [b, e): io: x' . dz ([k, nn]); oi: dz' . x ([nn, k]) */
static void dvjp_dw(void *vc, int64_t b, int64_t e) {
  const dvjp_ctx *c = vc;
  if (c->io)
    lathe_blas_gemm(c->dt, e - b, c->nn, c->m, (const char *)c->x + (size_t)b * c->es, (lathe_blas_mat){true, c->k},
                    c->dz, (lathe_blas_mat){false, c->nn}, (char *)c->dw + (size_t)(b * c->nn) * c->es, c->nn);
  else
    lathe_blas_gemm(c->dt, e - b, c->k, c->m, (const char *)c->dz + (size_t)b * c->es, (lathe_blas_mat){true, c->nn},
                    c->x, (lathe_blas_mat){false, c->k}, (char *)c->dw + (size_t)(b * c->k) * c->es, c->k);
}
/* dBias columns [b, e): sums over the rows of dz, in row order */
static void dvjp_db(void *vc, int64_t b, int64_t e) {
  const dvjp_ctx *c = vc;
  if (c->dt == LATHE_DTYPE_FLOAT64) {
    double *db = (double *)c->db;
    for (int64_t j = b; j < e; j++) db[j] = 0;
    for (int64_t r = 0; r < c->m; r++)
      for (int64_t j = b; j < e; j++) db[j] += ((const double *)c->dz)[r * c->nn + j];
  } else {
    float *db = (float *)c->db;
    for (int64_t j = b; j < e; j++) db[j] = 0;
    for (int64_t r = 0; r < c->m; r++)
      for (int64_t j = b; j < e; j++) db[j] += ((const float *)c->dz)[r * c->nn + j];
  }
}

static lathe_status_t dense_vjp(lathe_pool *pool, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  bool has_bias = lathe_attr_fused_dense_vjp_has_bias(n);
  const lathe_shape *xs = &in[0]->shape;
  dvjp_ctx c = {.dt = xs->dtype, .es = xs->dtype == LATHE_DTYPE_FLOAT64 ? 8 : 4, .act = (int)lathe_attr_fused_dense_vjp_activation(n),
                .x = in[0]->data, .w = in[1]->data, .y = in[has_bias ? 3 : 2]->data, .g = in[has_bias ? 4 : 3]->data,
                .dx = out[0]->data, .dw = out[1]->data, .db = has_bias ? out[2]->data : NULL,
                .io = lathe_attr_fused_dense_vjp_layout(n) == LATHE_DENSE_INPUT_OUTPUTS};
  c.k = xs->dims[xs->rank - 1];
  c.m = lathe_dims_product(xs->dims, 0, xs->rank - 1);
  const lathe_shape *ys = &in[has_bias ? 3 : 2]->shape;
  c.nn = lathe_dims_product(ys->dims, xs->rank - 1, ys->rank);
  if (!lathe_blas_fits(c.m, c.nn, c.k, (lathe_blas_mat){true, c.k}, (lathe_blas_mat){true, c.nn}, c.nn > c.k ? c.nn : c.k))
    return LATHE_UNIMPL("FusedDenseVJP: matrices too large for BLAS's int arguments");
  memset(c.dx, 0, out[0]->nbytes);
  memset(c.dw, 0, out[1]->nbytes);
  if (c.db) memset(c.db, 0, out[2]->nbytes);
  if (!c.m || !c.nn) return NULL; /* empty sums */
  /* no activation: the products read d_output itself */
  bool own_dz = c.act != LATHE_ACTIVATION_NONE;
  c.dz = own_dz ? malloc(c.es * (size_t)(c.m * c.nn)) : (void *)c.g;
  if (!c.dz) return LATHE_OOM("FusedDenseVJP");
  if (own_dz) lathe_parallel_for(pool, c.m * c.nn, 16384, dvjp_dz, &c);
  lathe_status_t st = NULL;
  if (c.k && c.dt == LATHE_DTYPE_FLOAT32 && lathe_blas_own_f32()) {
    /* Float32 products on lathe's packed kernels, as DotGeneral's (where BLAS's are slower) */
    const float *dz = c.dz, *x = c.x, *w = c.w;
    st = lathe_gemm_f32(pool, c.m, c.k, c.nn, dz, c.nn, 1, w, c.io ? 1 : c.k, c.io ? c.nn : 1, c.dx, c.k);
    if (!st && c.io) st = lathe_gemm_f32(pool, c.k, c.nn, c.m, x, 1, c.k, dz, c.nn, 1, c.dw, c.nn);
    else if (!st) st = lathe_gemm_f32(pool, c.nn, c.k, c.m, dz, 1, c.nn, x, c.k, 1, c.dw, c.k);
  } else if (c.k) {
    lathe_parallel_for(pool, c.m, 1 + (1 << 18) / (c.k * c.nn + 1), dvjp_dx, &c);
    int64_t rows = c.io ? c.k : c.nn, cols = c.io ? c.nn : c.k;
    lathe_parallel_for(pool, rows, 1 + (1 << 18) / (c.m * cols + 1), dvjp_dw, &c);
  }
  if (c.db && !st) lathe_parallel_for(pool, c.nn, 1 + (1 << 16) / (c.m + 1), dvjp_db, &c);
  if (own_dz) free(c.dz);
  return st;
}

lathe_status_t lathe_cpu_run_activation(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  lathe_pool *pool = lathe_cpu_exec_pool(ex);
  lathe_dtype dt = out[0]->shape.dtype;
  if (n->op == LATHE_OP_FUSED_DENSE_VJP) {
    if (dt == LATHE_DTYPE_FLOAT32 || dt == LATHE_DTYPE_FLOAT64) return dense_vjp(pool, n, in, out);
    /* Float16 / BFloat16: in Float32, rounded once at the end */
    lathe_tensor *win[5] = {0}, *wout[3] = {0};
    lathe_status_t st = NULL;
    for (int i = 0; i < n->n_operands && !st; i++) st = lathe_cpu_widen_half(in[i], &win[i]);
    for (int i = 0; i < n->n_out && !st; i++) {
      lathe_shape s = out[i]->shape;
      s.dtype = LATHE_DTYPE_FLOAT32;
      st = lathe_cpu_tensor_new(&s, &wout[i]);
    }
    if (!st) st = dense_vjp(pool, n, win, wout);
    for (int i = 0; i < n->n_out && !st; i++) lathe_cpu_narrow_half(wout[i], out[i]);
    for (int i = 0; i < 5; i++) lathe_tensor_release(win[i]);
    for (int i = 0; i < 3; i++) lathe_tensor_release(wout[i]);
    return st;
  }
  bool vjp = n->op == LATHE_OP_FUSED_ACTIVATION_VJP;
  act_job j = {.dt = dt, .kt = lathe_cpu_exec_kernels(ex), .out = out[0]->data};
  if (vjp) {
    j.act = (int)lathe_attr_fused_activation_vjp_activation(n);
    bool has_y = lathe_attr_fused_activation_vjp_has_y(n), has_x = lathe_attr_fused_activation_vjp_has_x(n);
    /* y's derivative where the activation has one and y is given, as GoMLX's Go backend */
    j.from_y = has_y && lathe_act_form_of((lathe_activation)j.act) == LATHE_ACT_FORM_Y;
    j.a = j.from_y ? in[0]->data : in[has_y ? 1 : 0]->data;
    j.g = in[(has_y ? 1 : 0) + (has_x ? 1 : 0)]->data;
  } else {
    j.act = (int)lathe_attr_fused_activation_activation(n);
    j.a = in[0]->data;
  }
  if (lathe_act_form_of((lathe_activation)j.act) == LATHE_ACT_FORM_GLU) {
    const lathe_shape *xs = vjp ? &out[0]->shape : &in[0]->shape;
    j.h = xs->rank ? xs->dims[xs->rank - 1] / 2 : 0;
    int64_t rows = j.h ? lathe_shape_size(xs) / (2 * j.h) : 0;
    bool f64 = dt == LATHE_DTYPE_FLOAT64;
    if (rows) lathe_parallel_for(pool, rows, 1 + 16384 / j.h, vjp ? (f64 ? glu_vjp_64 : glu_vjp_32) : (f64 ? glu_fwd_64 : glu_fwd_32), &j);
    return NULL;
  }
  lathe_parallel_for(pool, lathe_shape_size(&out[0]->shape), 16384, vjp ? vjp_range : fwd_range, &j);
  return NULL;
}
