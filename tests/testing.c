/* testing.c -- the implementation of tests/testing.h (compiled into each test runner). */
#include "testing.h"

#include <stdint.h>

#include "core/core.h"

int tst_passed, tst_failed, tst_skipped;
const char *tst_current = "";

typedef struct {
  const char *name;
  tst_fn fn;
} tst_entry;
static tst_entry *tests;
static int n_tests, cap_tests;

void tst_register(const char *name, tst_fn fn) {
  if (n_tests == cap_tests) {
    cap_tests = cap_tests ? cap_tests * 2 : 64;
    tests = realloc(tests, sizeof *tests * (size_t)cap_tests);
    if (!tests) abort();
  }
  tests[n_tests++] = (tst_entry){name, fn};
}

static lathe_backend_t backend;
static void free_backend(void) { lathe_backend_free(backend); }

lathe_backend_t tst_backend(void) {
  if (!backend) {
    const char *cfg = getenv("LATHE_TEST_BACKEND");
    lathe_status_t st = lathe_backend_new(cfg ? cfg : "lathe:cpu", &backend);
    if (st) {
      fprintf(stdout, "cannot create backend: %s\n", lathe_status_message(st));
      exit(1);
    }
    atexit(free_backend);
  }
  return backend;
}

lathe_shape tst_shape(lathe_dtype dt, int rank, const int64_t *dims) {
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = dt;
  s.rank = rank;
  for (int i = 0; i < rank; i++) s.dims[i] = dims[i];
  return s;
}

lathe_shape tst_shape0(lathe_dtype dt) { return tst_shape(dt, 0, NULL); }

void *tst_alloc_for(const lathe_shape *s) {
  int64_t n = lathe_shape_byte_size(s);
  return calloc((size_t)(n > 0 ? n : 1), 1);
}

#define GUARD 64
#define GUARD_BYTE 0xA5

void tst_free_output(void *p) {
  if (p) free((unsigned char *)p - GUARD);
}

lathe_status_t tst_run(lathe_builder_t b, const void *const *in_data, int n_in, void **out_data, int n_out,
                       lathe_shape *out_shapes) {
  lathe_executable_t e = NULL;
  lathe_buffer_t in[64] = {0}, out[64] = {0};
  lathe_status_t st = NULL;
  for (int k = 0; k < n_out; k++) out_data[k] = NULL;
  if (n_in > 64 || n_out > 64) return lathe_status_new(LATHE_STATUS_INVALID_ARGUMENT, "tst_run: too many");
  if ((st = lathe_builder_compile(b, &e))) return st;
  for (int i = 0; i < n_in && !st; i++) {
    lathe_shape s;
    if ((st = lathe_executable_input_shape(e, i, &s))) break;
    st = lathe_buffer_from_host(tst_backend(), 0, &s, in_data[i], (size_t)lathe_shape_byte_size(&s), &in[i]);
  }
  if (!st) st = lathe_executable_execute(e, in, NULL, n_in, 0, out, n_out);
  for (int k = 0; k < n_out && !st; k++) {
    lathe_shape s;
    if ((st = lathe_buffer_shape(out[k], &s))) break;
    if (out_shapes) out_shapes[k] = s;
    size_t nb = (size_t)lathe_shape_byte_size(&s);
    unsigned char *raw = malloc(nb + 2 * GUARD);
    if (!raw) abort();
    memset(raw, GUARD_BYTE, nb + 2 * GUARD);
    out_data[k] = raw + GUARD;
    st = lathe_buffer_to_host(out[k], raw + GUARD, nb);
    bool ok = true;
    for (int g = 0; g < GUARD; g++) ok &= raw[g] == GUARD_BYTE && raw[GUARD + nb + g] == GUARD_BYTE;
    CHECK(ok, "output %d: guard bytes overwritten", k);
  }
  for (int i = 0; i < n_in; i++) lathe_buffer_free(in[i]);
  for (int k = 0; k < n_out; k++) lathe_buffer_free(out[k]);
  lathe_executable_free(e);
  if (st)
    for (int k = 0; k < n_out; k++) tst_free_output(out_data[k]), out_data[k] = NULL;
  return st;
}

double tst_get(const void *d, lathe_dtype dt, int64_t i) {
  switch (dt) {
    case LATHE_DTYPE_BOOL: return ((const uint8_t *)d)[i] != 0;
    case LATHE_DTYPE_INT8: return ((const int8_t *)d)[i];
    case LATHE_DTYPE_INT16: return ((const int16_t *)d)[i];
    case LATHE_DTYPE_INT32: return ((const int32_t *)d)[i];
    case LATHE_DTYPE_INT64: return (double)((const int64_t *)d)[i];
    case LATHE_DTYPE_UINT8: return ((const uint8_t *)d)[i];
    case LATHE_DTYPE_UINT16: return ((const uint16_t *)d)[i];
    case LATHE_DTYPE_UINT32: return ((const uint32_t *)d)[i];
    case LATHE_DTYPE_UINT64: return (double)((const uint64_t *)d)[i];
    case LATHE_DTYPE_FLOAT16: return lathe_f16_to_f32(((const uint16_t *)d)[i]);
    case LATHE_DTYPE_BFLOAT16: return lathe_bf16_to_f32(((const uint16_t *)d)[i]);
    case LATHE_DTYPE_FLOAT32: return ((const float *)d)[i];
    case LATHE_DTYPE_FLOAT64: return ((const double *)d)[i];
    case LATHE_DTYPE_COMPLEX64: return ((const float *)d)[2 * i];
    case LATHE_DTYPE_COMPLEX128: return ((const double *)d)[2 * i];
    default: {
      int bits = lathe_dtype_bits(dt);
      const uint8_t *p = d;
      int64_t bit = i * bits;
      unsigned v = (p[bit >> 3] >> (bit & 7)) & ((1u << bits) - 1);
      if (lathe_dtype_class_of(dt) == LATHE_CLASS_SINT && (v >> (bits - 1))) return (double)((int)v - (1 << bits));
      return v;
    }
  }
}

double tst_get_imag(const void *d, lathe_dtype dt, int64_t i) {
  if (dt == LATHE_DTYPE_COMPLEX64) return ((const float *)d)[2 * i + 1];
  if (dt == LATHE_DTYPE_COMPLEX128) return ((const double *)d)[2 * i + 1];
  return 0;
}

void tst_set_complex(void *d, lathe_dtype dt, int64_t i, double re, double im) {
  if (dt == LATHE_DTYPE_COMPLEX64) {
    ((float *)d)[2 * i] = (float)re;
    ((float *)d)[2 * i + 1] = (float)im;
  } else if (dt == LATHE_DTYPE_COMPLEX128) {
    ((double *)d)[2 * i] = re;
    ((double *)d)[2 * i + 1] = im;
  } else {
    tst_set(d, dt, i, re);
  }
}

void tst_set(void *d, lathe_dtype dt, int64_t i, double v) {
  switch (dt) {
    case LATHE_DTYPE_BOOL: ((uint8_t *)d)[i] = v != 0; break;
    case LATHE_DTYPE_INT8: ((int8_t *)d)[i] = (int8_t)v; break;
    case LATHE_DTYPE_INT16: ((int16_t *)d)[i] = (int16_t)v; break;
    case LATHE_DTYPE_INT32: ((int32_t *)d)[i] = (int32_t)v; break;
    case LATHE_DTYPE_INT64: ((int64_t *)d)[i] = (int64_t)v; break;
    case LATHE_DTYPE_UINT8: ((uint8_t *)d)[i] = (uint8_t)v; break;
    case LATHE_DTYPE_UINT16: ((uint16_t *)d)[i] = (uint16_t)v; break;
    case LATHE_DTYPE_UINT32: ((uint32_t *)d)[i] = (uint32_t)v; break;
    case LATHE_DTYPE_UINT64: ((uint64_t *)d)[i] = (uint64_t)v; break;
    case LATHE_DTYPE_FLOAT16: ((uint16_t *)d)[i] = lathe_f32_to_f16((float)v); break;
    case LATHE_DTYPE_BFLOAT16: ((uint16_t *)d)[i] = lathe_f32_to_bf16((float)v); break;
    case LATHE_DTYPE_FLOAT32: ((float *)d)[i] = (float)v; break;
    case LATHE_DTYPE_FLOAT64: ((double *)d)[i] = v; break;
    case LATHE_DTYPE_COMPLEX64:
    case LATHE_DTYPE_COMPLEX128: tst_set_complex(d, dt, i, v, 0); break;
    default: {
      int bits = lathe_dtype_bits(dt);
      uint8_t *p = d;
      int64_t bit = i * bits;
      unsigned mask = ((1u << bits) - 1) << (bit & 7);
      p[bit >> 3] = (uint8_t)((p[bit >> 3] & ~mask) | (((unsigned)(int)v << (bit & 7)) & mask));
    }
  }
}

void tst_fill(void *d, lathe_dtype dt, int64_t n, unsigned seed) {
  uint32_t x = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    double u = (x % 20001u) / 10000.0 - 1.0; /* [-1, 1] */
    lathe_dtype_class c = lathe_dtype_class_of(dt);
    int bits = lathe_dtype_bits(dt);
    double v;
    if (c == LATHE_CLASS_BOOL) v = x & 1;
    else if (c == LATHE_CLASS_UINT) v = bits < 8 ? x % (1u << bits) : x % 100;
    else if (c == LATHE_CLASS_SINT) v = bits < 8 ? (double)((int)(x % (1u << bits)) - (1 << (bits - 1))) : (double)((int)(x % 101) - 50);
    else v = u * 4;
    if (c == LATHE_CLASS_COMPLEX) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      tst_set_complex(d, dt, i, v, ((x % 20001u) / 10000.0 - 1.0) * 4);
    } else {
      tst_set(d, dt, i, v);
    }
  }
}

double tst_tol(lathe_dtype dt) {
  switch (dt) {
    case LATHE_DTYPE_FLOAT32:
    case LATHE_DTYPE_COMPLEX64: return 1e-5;
    case LATHE_DTYPE_FLOAT64:
    case LATHE_DTYPE_COMPLEX128: return 1e-12;
    case LATHE_DTYPE_FLOAT16: return 2e-3;
    case LATHE_DTYPE_BFLOAT16: return 1.6e-2;
    default: return 0;
  }
}

static bool close_enough(double g, double w, double tol) {
  if (isnan(w) || isnan(g)) return isnan(w) && isnan(g);
  if (isinf(w) || isinf(g)) return g == w;
  return fabs(g - w) <= tol * (1 + fabs(w));
}

void tst_expect_close(const char *label, const void *got, const void *want, lathe_dtype dt, int64_t n, double tol) {
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double g = tst_get(got, dt, i), w = tst_get(want, dt, i);
    double gi = tst_get_imag(got, dt, i), wi = tst_get_imag(want, dt, i);
    if (!close_enough(g, w, tol) || !close_enough(gi, wi, tol)) {
      if (bad < 3)
        fprintf(stdout, "  %s: element %lld: got %.17g%+.17gi, want %.17g%+.17gi\n", label, (long long)i, g, gi, w, wi);
      bad++;
    }
  }
  CHECK(bad == 0, "%s (%s, %lld elements): %d mismatches", label, lathe_dtype_name(dt), (long long)n, bad);
}

int64_t tst_numel(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int a = 0; a < rank; a++) n *= dims[a];
  return n;
}

int64_t tst_ravel(int rank, const int64_t *dims, const int64_t *c) {
  int64_t f = 0;
  for (int a = 0; a < rank; a++) f = f * dims[a] + c[a];
  return f;
}

void tst_unravel(int64_t i, int rank, const int64_t *dims, int64_t *c) {
  for (int a = rank - 1; a >= 0; a--) {
    c[a] = dims[a] ? i % dims[a] : 0;
    i = dims[a] ? i / dims[a] : 0;
  }
}

int64_t tst_wrap_int(lathe_dtype dt, uint64_t v) {
  if (dt == LATHE_DTYPE_BOOL) return v != 0;
  int bits = lathe_dtype_bits(dt);
  if (bits <= 0 || bits >= 64) return (int64_t)v;
  uint64_t m = (UINT64_C(1) << bits) - 1;
  v &= m;
  if (lathe_dtype_class_of(dt) == LATHE_CLASS_SINT && (v >> (bits - 1))) v |= ~m;
  return (int64_t)v;
}

double tst_wrap_value(lathe_dtype dt, uint64_t v) {
  if (dt == LATHE_DTYPE_UINT64) return (double)v;
  return (double)tst_wrap_int(dt, v);
}

void tst_set_int(void *d, lathe_dtype dt, int64_t i, uint64_t v) {
  int64_t w = tst_wrap_int(dt, v);
  switch (lathe_dtype_bits(dt)) {
    case 8: ((uint8_t *)d)[i] = (uint8_t)w; break;
    case 16: ((uint16_t *)d)[i] = (uint16_t)w; break;
    case 32: ((uint32_t *)d)[i] = (uint32_t)w; break;
    case 64: ((uint64_t *)d)[i] = (uint64_t)w; break;
    default: tst_set(d, dt, i, (double)w);
  }
}

int64_t tst_get_int(const void *d, lathe_dtype dt, int64_t i) {
  switch (dt) {
    case LATHE_DTYPE_INT64: return ((const int64_t *)d)[i];
    case LATHE_DTYPE_UINT64: return (int64_t)((const uint64_t *)d)[i];
    default: return (int64_t)tst_get(d, dt, i);
  }
}

lathe_builder_t tst_builder(const char *name, lathe_function_t *main_fn) {
  lathe_builder_t b = NULL;
  lathe_status_t st = lathe_builder_new(tst_backend(), name, &b);
  CHECK(st == NULL, "%s: builder: %s", name, lathe_status_message(st));
  lathe_status_free(st);
  if (main_fn) *main_fn = b ? lathe_builder_main(b) : NULL;
  return b;
}

lathe_value_t tst_param(lathe_function_t fn, const char *name, lathe_shape s) {
  lathe_value_t v = NULL;
  lathe_status_t st = lathe_parameter(fn, name, &s, &v);
  CHECK(st == NULL, "parameter %s: %s", name ? name : "(unnamed)", lathe_status_message(st));
  lathe_status_free(st);
  return v;
}

bool tst_built(const char *label, lathe_status_t st, lathe_builder_t b) {
  CHECK(st == NULL, "%s: build: %s", label, lathe_status_message(st));
  if (!st) return true;
  lathe_status_free(st);
  lathe_builder_free(b);
  return false;
}

void tst_expect_shape_and_return(const char *label, lathe_function_t fn, lathe_value_t y, const lathe_shape *want) {
  lathe_shape got;
  memset(&got, 0, sizeof got);
  CHECK_OK(lathe_value_shape(y, &got));
  CHECK(lathe_shape_equal(&got, want), "%s: inferred shape (rank %d)", label, got.rank);
  CHECK_OK(lathe_function_return(fn, &y, 1));
}

void tst_run_expect(const char *label, lathe_builder_t b, const void *const *ins, int n_in, const void *want,
                    lathe_dtype dt, int64_t n, double tol) {
  void *got = NULL;
  lathe_status_t st = tst_run(b, ins, n_in, &got, 1, NULL);
  CHECK(st == NULL, "%s: run: %s", label, lathe_status_message(st));
  lathe_status_free(st);
  if (got) tst_expect_close(label, got, want, dt, n, tol);
  tst_free_output(got);
}

double tst_activation_ref(double v, lathe_activation a) {
  switch (a) {
    case LATHE_ACTIVATION_GELU: return 0.5 * v * (1 + erf(v / sqrt(2.0)));
    case LATHE_ACTIVATION_RELU: return v < 0 ? 0 : v;
    case LATHE_ACTIVATION_SILU: return v / (1 + exp(-v));
    case LATHE_ACTIVATION_HARD_SWISH: return v * fmin(fmax(v / 6 + 0.5, 0), 1);
    case LATHE_ACTIVATION_TANH: return tanh(v);
    default: return v;
  }
}

const lathe_dtype tst_all_dtypes[] = {
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) LATHE_DTYPE_##ENUM,
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
};
const int tst_n_all_dtypes = (int)(sizeof tst_all_dtypes / sizeof tst_all_dtypes[0]);

int tst_main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  for (int i = 0; i < n_tests; i++) {
    if (filter && !strstr(tests[i].name, filter)) continue;
    tst_current = tests[i].name;
    int f0 = tst_failed;
    tests[i].fn();
    if (getenv("LATHE_TEST_VERBOSE")) printf("%s %s\n", tst_failed == f0 ? "ok  " : "FAIL", tests[i].name);
  }
  printf("%d passed, %d failed, %d skipped\n", tst_passed, tst_failed, tst_skipped);
  return tst_failed ? 1 : 0;
}

/* Under AddressSanitizer an allocation beyond its maximum aborts by default; the tests ask for
 * tensors of valid but unobtainable sizes on purpose, and expect RESOURCE_EXHAUSTED. */
const char *__asan_default_options(void);
__attribute__((used)) const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
