/* fft.c -- FFT on the GPU through cuFFT (libcufft, opened at run time: without it the op is
 * UNIMPLEMENTED). lathe:cpu computes every FFT in double and rounds once at the end; so does
 * this: Complex64/Float32 operands are widened to Complex128/Float64, transformed with cuFFT's
 * double-precision plans (Z2Z, D2Z, Z2D) over the innermost axes (one plan for all of them, a
 * batch for the rest), and narrowed. Inverse transforms are scaled by 1/N before transforming.
 *
 * Real inverse (Z2D): lathe:cpu completes each last-axis line of the half spectrum to Hermitian
 * symmetry after the inverse over the leading axes (as numpy's irfftn), so the imaginary parts of
 * its self-conjugate bins do not count. cuFFT's C2R is defined only for input that is Hermitian
 * over all transformed axes, so the DC and Nyquist columns are first replaced by their Hermitian
 * parts, (X[k] + conj(X[-k]))/2 with k negated over the leading transformed axes: the inverse of
 * the result is exactly lathe:cpu's (the other columns are unchanged).
 *
 * Length-1 axes are identities and are left out of the plans; a real transform whose last
 * length is 1 is a complex one over the other axes. Plans are cached per device and shape (cuFFT
 * plans are costly to make); they hold no work area: each run gives one from the execution's
 * scratch memory, and a mutex makes "set stream, set work area, execute" one step, so one plan
 * serves executions on several streams at once. */
#include "numeric.h"
#include "kernels/zkernels.h"

/* ---- kernels: conversions to and from the double work arrays, the Hermitian fix-up ---- */
static const char fft_src[] = LT_CUH_FFT;

void lathe_cuda_sources_fft(lathe_cuda_source_fn fn, void *ctx) { fn(ctx, "fft", fft_src); }
const char *lathe_cuda_fft_text(void) { return fft_src; }

static const char *tname(lathe_dtype dt) {
  switch (dt) {
    case LATHE_DTYPE_FLOAT32: return "f32";
    case LATHE_DTYPE_FLOAT64: return "f64";
    case LATHE_DTYPE_COMPLEX64: return "c64";
    default: return "c128";
  }
}

/* dst[i] = src[i] * scale for n elements (dtypes as the tensors'). */
static lathe_status_t convert(lathe_cuda_exec *ex, const lathe_tensor *src, lathe_tensor *dst, int64_t n, double scale) {
  if (src == dst && scale == 1.0) return NULL;
  char name[40];
  snprintf(name, sizeof name, "lt_fft_cvt_%s_%s", tname(src->shape.dtype), tname(dst->shape.dtype));
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), fft_src, name, &f));
  lcuDeviceptr ps = lathe_cuda_ptr(src), pd = lathe_cuda_ptr(dst);
  void *args[] = {&ps, &pd, &n, &scale};
  unsigned b, t;
  lathe_cuda_grid(n, &b, &t);
  return lathe_cuda_launch(ex, f, b, t, 0, args);
}

static lathe_status_t hermitian(lathe_cuda_exec *ex, const lathe_tensor *src, lathe_tensor *dst, int64_t n, int64_t h,
                                int64_t nlast, int64_t n0, int64_t n1, double scale) {
  char name[40];
  snprintf(name, sizeof name, "lt_fft_herm_%s", tname(src->shape.dtype));
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), fft_src, name, &f));
  lcuDeviceptr ps = lathe_cuda_ptr(src), pd = lathe_cuda_ptr(dst);
  void *args[] = {&ps, &pd, &n, &h, &nlast, &n0, &n1, &scale};
  unsigned b, t;
  lathe_cuda_grid(n, &b, &t);
  return lathe_cuda_launch(ex, f, b, t, 0, args);
}

/* ---- cuFFT plans ---- */
static lathe_status_t cufft_error(lcufftResult r, const char *what) {
  static const char *const names[] = {"SUCCESS",        "INVALID_PLAN", "ALLOC_FAILED", "INVALID_TYPE", "INVALID_VALUE",
                                      "INTERNAL_ERROR", "EXEC_FAILED",  "SETUP_FAILED", "INVALID_SIZE", "UNALIGNED_DATA"};
  if (r == LCUFFT_SUCCESS) return NULL;
  lathe_status_code code = r == LCUFFT_ALLOC_FAILED ? LATHE_STATUS_RESOURCE_EXHAUSTED : LATHE_STATUS_INTERNAL;
  return lathe_status_new(code, "FFT: %s: cuFFT error %d (%s)", what, r,
                          r >= 0 && r < (int)(sizeof names / sizeof names[0]) ? names[r] : "unknown");
}

typedef struct fft_plan {
  struct fft_plan *next;
  const cuda_dev *d;
  int type, rank;
  long long n[3], batch;
  lcufftHandle h;
  size_t work; /* bytes of work area each run needs */
} fft_plan;

enum { MAX_PLANS = 128 }; /* beyond: a plan per run, destroyed after it */

static pthread_mutex_t plans_mu = PTHREAD_MUTEX_INITIALIZER;
static fft_plan *plans; /* every device's */
static int n_plans;

static lathe_status_t plan_make(const lcu_api *api, fft_plan *p) {
  LATHE_RETURN_IF_ERROR(cufft_error(api->cufftCreate(&p->h), "cufftCreate"));
  long long n[3] = {p->n[0], p->n[1], p->n[2]};
  size_t work = 0;
  lcufftResult r = api->cufftSetAutoAllocation(p->h, 0);
  if (r == LCUFFT_SUCCESS) r = api->cufftMakePlanMany64(p->h, p->rank, n, NULL, 1, 0, NULL, 1, 0, p->type, p->batch, &work);
  if (r != LCUFFT_SUCCESS) {
    api->cufftDestroy(p->h);
    return cufft_error(r, "making a plan");
  }
  p->work = work;
  return NULL;
}

/* The cached plan for key (made and cached on first use), or *transient set and a plan the caller
 * destroys after the run when the cache is full. */
static lathe_status_t plan_get(const lcu_api *api, const fft_plan *key, fft_plan **out, fft_plan *transient) {
  pthread_mutex_lock(&plans_mu);
  fft_plan *p = plans;
  while (p && !(p->d == key->d && p->type == key->type && p->rank == key->rank && p->batch == key->batch &&
                !memcmp(p->n, key->n, sizeof p->n)))
    p = p->next;
  lathe_status_t st = NULL;
  if (!p) {
    p = n_plans < MAX_PLANS ? malloc(sizeof *p) : transient;
    if (!p) p = transient;
    *p = *key;
    st = plan_make(api, p);
    if (!st && p != transient) {
      p->next = plans;
      plans = p;
      n_plans++;
    } else if (st && p != transient) {
      free(p);
    }
  }
  pthread_mutex_unlock(&plans_mu);
  *out = st ? NULL : p;
  return st;
}

void lathe_cuda_fft_release(cuda_dev *d) {
  pthread_mutex_lock(&plans_mu);
  for (fft_plan **pp = &plans; *pp;) {
    fft_plan *p = *pp;
    if (p->d != d) {
      pp = &p->next;
      continue;
    }
    *pp = p->next;
    d->cu->api->cufftDestroy(p->h);
    free(p);
    n_plans--;
  }
  pthread_mutex_unlock(&plans_mu);
}

/* One cuFFT transform of `type` over rank lengths n (row-major, innermost last) for batch
 * contiguous problems, src -> dst, on the execution's stream. */
static lathe_status_t transform(lathe_cuda_exec *ex, int type, int rank, const long long *n, long long batch,
                                const lathe_tensor *src, lathe_tensor *dst, int direction) {
  const lcu_api *api = lathe_cuda_exec_api(ex);
  fft_plan key = {.d = lathe_cuda_exec_dev(ex), .type = type, .rank = rank, .batch = batch}, spare, *p;
  for (int i = 0; i < rank; i++) key.n[i] = n[i];
  LATHE_RETURN_IF_ERROR(plan_get(api, &key, &p, &spare));
  lathe_tensor *work = NULL;
  lathe_status_t st = p->work ? lathe_cuda_numeric_scratch(ex, LATHE_DTYPE_UINT8, (int64_t)p->work, &work) : NULL;
  void *in = (void *)(uintptr_t)lathe_cuda_ptr(src), *out = (void *)(uintptr_t)lathe_cuda_ptr(dst);
  pthread_mutex_lock(&plans_mu);
  if (!st) st = cufft_error(api->cufftSetStream(p->h, lathe_cuda_exec_stream(ex)), "cufftSetStream");
  if (!st && work) st = cufft_error(api->cufftSetWorkArea(p->h, (void *)(uintptr_t)lathe_cuda_ptr(work)), "cufftSetWorkArea");
  if (!st) {
    lcufftResult r = type == LCUFFT_Z2Z   ? api->cufftExecZ2Z(p->h, in, out, direction)
                     : type == LCUFFT_D2Z ? api->cufftExecD2Z(p->h, in, out)
                                          : api->cufftExecZ2D(p->h, in, out);
    st = cufft_error(r, "executing a plan");
  }
  pthread_mutex_unlock(&plans_mu);
  if (p == &spare) { /* its kernels must finish before it goes */
    api->cuStreamSynchronize(lathe_cuda_exec_stream(ex));
    api->cufftDestroy(p->h);
  }
  return st;
}

/* ---- the op ---- */
lathe_status_t lathe_cuda_fft(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  lathe_fft_type type = lathe_attr_fft_type(n);
  lathe_ilist length = lathe_attr_fft_length(n);
  const lathe_tensor *x = in[0];
  lathe_tensor *y = out[0];
  int64_t nx = lathe_shape_size(&x->shape), ny = lathe_shape_size(&y->shape);
  if (nx == 0 || ny == 0) return NULL;
  int k = length.n, r = 0;
  long long lens[3]; /* the plan's lengths: those other than 1 */
  int64_t total = 1, nlast = length.v[k - 1];
  for (int i = 0; i < k; i++) {
    total *= length.v[i];
    if (length.v[i] != 1) lens[r++] = length.v[i];
  }
  bool inverse = type == LATHE_FFT_TYPE_INVERSE || type == LATHE_FFT_TYPE_INVERSE_REAL;
  double scale = inverse ? 1.0 / (double)total : 1.0;
  lathe_tensor *w = NULL, *rw = NULL;
  lathe_status_t st = NULL;
  if (type == LATHE_FFT_TYPE_FORWARD || type == LATHE_FFT_TYPE_INVERSE ||
      (type == LATHE_FFT_TYPE_FORWARD_REAL && nlast == 1)) { /* complex work array: y itself when Complex128 */
    if (y->shape.dtype == LATHE_DTYPE_COMPLEX128) w = y;
    else st = lathe_cuda_numeric_scratch(ex, LATHE_DTYPE_COMPLEX128, ny, &w);
    if (!st) st = convert(ex, x, w, nx, scale);
    if (!st && r) st = transform(ex, LCUFFT_Z2Z, r, lens, nx / total, w, w, inverse ? LCUFFT_INVERSE : LCUFFT_FORWARD);
    if (!st) st = convert(ex, w, y, ny, 1.0);
    return st;
  }
  if (type == LATHE_FFT_TYPE_FORWARD_REAL) { /* real (Float64) work in, complex out */
    st = lathe_cuda_numeric_scratch(ex, LATHE_DTYPE_FLOAT64, nx, &rw);
    if (!st) st = convert(ex, x, rw, nx, 1.0);
    if (!st && y->shape.dtype == LATHE_DTYPE_COMPLEX128) w = y;
    else if (!st) st = lathe_cuda_numeric_scratch(ex, LATHE_DTYPE_COMPLEX128, ny, &w);
    if (!st) st = transform(ex, LCUFFT_D2Z, r, lens, nx / total, rw, w, LCUFFT_FORWARD);
    if (!st) st = convert(ex, w, y, ny, 1.0);
    return st;
  }
  /* INVERSE_REAL: the Hermitian, scaled copy of x (cuFFT's C2R also overwrites its input) */
  int64_t n1 = k >= 2 ? length.v[k - 2] : 1, n0 = k >= 3 ? length.v[k - 3] : 1;
  st = lathe_cuda_numeric_scratch(ex, LATHE_DTYPE_COMPLEX128, nx, &w);
  if (!st) st = hermitian(ex, x, w, nx, nlast / 2 + 1, nlast, n0, n1, scale);
  if (nlast == 1) { /* a complex inverse over the other axes; its result is real */
    if (!st && r) st = transform(ex, LCUFFT_Z2Z, r, lens, nx / total, w, w, LCUFFT_INVERSE);
    if (!st) st = convert(ex, w, y, ny, 1.0);
    return st;
  }
  if (!st && y->shape.dtype == LATHE_DTYPE_FLOAT64) rw = y;
  else if (!st) st = lathe_cuda_numeric_scratch(ex, LATHE_DTYPE_FLOAT64, ny, &rw);
  if (!st) st = transform(ex, LCUFFT_Z2D, r, lens, ny / total, w, rw, LCUFFT_INVERSE);
  if (!st) st = convert(ex, rw, y, ny, 1.0);
  return st;
}
