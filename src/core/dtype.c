/* dtype.c -- the dtype table's run-time view, half-precision conversions and shape helpers. */
#include <math.h>
#include <stdio.h>

#include "core.h"

typedef struct {
  const char *name;
  int bits;
  lathe_dtype_class cls;
} dtype_info;

static const dtype_info dtype_table[LATHE_DTYPE_LIMIT] = {
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) [id] = {#GoName, bits, LATHE_CLASS_##CLASS},
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
};

static const dtype_info *info(lathe_dtype dt) {
  if ((int)dt <= 0 || (int)dt >= LATHE_DTYPE_LIMIT || !dtype_table[dt].name) return NULL;
  return &dtype_table[dt];
}

bool lathe_dtype_is_valid(lathe_dtype dt) { return info(dt) != NULL; }
const char *lathe_dtype_name(lathe_dtype dt) { return info(dt) ? info(dt)->name : "Invalid"; }
int lathe_dtype_bits(lathe_dtype dt) { return info(dt) ? info(dt)->bits : 0; }
lathe_dtype_class lathe_dtype_class_of(lathe_dtype dt) { return info(dt) ? info(dt)->cls : LATHE_CLASS_NONE; }

lathe_dtype lathe_dtype_real_of(lathe_dtype dt) {
  if (dt == LATHE_DTYPE_COMPLEX64) return LATHE_DTYPE_FLOAT32;
  if (dt == LATHE_DTYPE_COMPLEX128) return LATHE_DTYPE_FLOAT64;
  return dt;
}

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float lathe_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return u2f(sign | 0x7f800000 | (man << 13)); /* inf / nan */
  if (exp == 0) {                                               /* zero / subnormal */
    float v = ldexpf((float)man, -24);
    return sign ? -v : v;
  }
  return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t lathe_f32_to_f16(float f) {
  uint32_t u = f2u(f), sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff)); /* nan, stays nan */
  if (a >= 0x477ff000) return (uint16_t)(sign | 0x7c00);                     /* overflow -> inf */
  if (a < 0x38800000) {                                                      /* subnormal or zero */
    /* value / 2^-24 rounded to nearest even */
    float v = u2f(a) * 16777216.0f;
    float r = nearbyintf(v); /* default rounding mode: to nearest even */
    return (uint16_t)(sign | (uint32_t)r);
  }
  uint32_t e = ((a >> 23) - 112) << 10, m = (a >> 13) & 0x3ff;
  uint32_t h = e | m, rest = a & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

uint16_t lathe_f32_to_bf16(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40); /* quiet nan */
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

lathe_status_t lathe_shape_make(lathe_dtype dtype, int rank, const int64_t *dims, lathe_shape *out) {
  if (rank < 0 || rank > LATHE_MAX_RANK) return LATHE_INVALID("shape: rank %d out of range [0, %d]", rank, LATHE_MAX_RANK);
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = dtype;
  s.rank = rank;
  for (int i = 0; i < rank; i++) s.dims[i] = dims[i];
  *out = s;
  return NULL;
}

int64_t lathe_shape_size(const lathe_shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++)
    if (s->dims[i] <= 0) return 0;
  for (int i = 0; i < s->rank; i++)
    if (lathe_mul_overflow(n, s->dims[i], &n)) return INT64_MAX;
  return n;
}

/* The nominal size: zero and dynamic axes count as 1, so that no partial product of an
 * accepted shape's dims, zero-size or not, can overflow. */
bool lathe_shape_within_limit(const lathe_shape *s) {
  if (s->rank < 0 || s->rank > LATHE_MAX_RANK) return false;
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++)
    if (lathe_mul_overflow(n, s->dims[i] > 1 ? s->dims[i] : 1, &n)) return false;
  int64_t bytes = lathe_dtype_bytes_for(s->dtype, n);
  return n < LATHE_MAX_TENSOR_SIZE && bytes < LATHE_MAX_TENSOR_SIZE && (uint64_t)bytes <= (uint64_t)SIZE_MAX;
}

lathe_status_t lathe_check_shape_size(const char *op, const char *what, const lathe_shape *s) {
  if (lathe_shape_within_limit(s)) return NULL;
  char buf[LATHE_SHAPE_STR_MAX];
  return LATHE_INVALID("%s: %s %s exceeds the size limit: a tensor must have fewer than 2^62 elements and 2^62 bytes "
                       "(size-0 and dynamic axes counted as 1)", op, what, lathe_shape_str(s, buf, sizeof buf));
}

bool lathe_shape_is_dynamic(const lathe_shape *s) {
  for (int i = 0; i < s->rank && i < LATHE_MAX_RANK; i++)
    if (s->dims[i] < 0) return true;
  return false;
}

int64_t lathe_shape_num_elements(const lathe_shape *s) {
  /* beyond the size limit: -1 as for a dynamic shape; a wrapped count would look plausible */
  if (!s || !lathe_shape_within_limit(s) || lathe_shape_is_dynamic(s)) return -1;
  return lathe_shape_size(s);
}

int64_t lathe_shape_byte_size(const lathe_shape *s) {
  if (!s || !lathe_shape_within_limit(s) || lathe_shape_is_dynamic(s)) return -1;
  return lathe_dtype_bytes_for(s->dtype, lathe_shape_size(s));
}

bool lathe_shape_equal(const lathe_shape *a, const lathe_shape *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank && i < LATHE_MAX_RANK; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

char *lathe_shape_str(const lathe_shape *s, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "%s[", lathe_dtype_name(s->dtype));
  if (s->rank < 0 || s->rank > LATHE_MAX_RANK) { /* only in messages about that very mistake */
    if (k < n) snprintf(buf + k, n - k, "rank %d]", s->rank);
    return buf;
  }
  for (int i = 0; i < s->rank && k < n; i++) {
    if (s->dims[i] < 0)
      k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? "," : "", s->axis_names[i] ? s->axis_names[i] : "?");
    else
      k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)s->dims[i]);
  }
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

void lathe_shape_strides(const lathe_shape *s, int64_t *strides) {
  int64_t st = 1;
  for (int i = s->rank - 1; i >= 0; i--) {
    strides[i] = st;
    if (lathe_mul_overflow(st, s->dims[i], &st)) st = INT64_MAX;
  }
}

static const char *const op_names[LATHE_OP_COUNT] = {
#define LATHE_OP(ENUM, GoName, c_name, n, KIND, SIG, FLAGS) #GoName,
#include "lathe_ops.def"
#undef LATHE_OP
};

const char *lathe_op_name(lathe_op op) { return (int)op >= 0 && op < LATHE_OP_COUNT ? op_names[op] : "InvalidOp"; }

lathe_op lathe_op_from_name(const char *name) {
  if (!name) return LATHE_OP_COUNT;
  for (int i = 0; i < LATHE_OP_COUNT; i++)
    if (strcmp(op_names[i], name) == 0) return (lathe_op)i;
  return LATHE_OP_COUNT;
}
