/* shape_rules.c -- shape rules shared by the op families: GoMLX's implicit broadcasting and
 * axis checks. */
#include "graph.h"

static bool name_eq(const char *a, const char *b) {
  if (!a || !*a || !b || !*b) return true; /* an unnamed axis unifies with anything */
  return strcmp(a, b) == 0;
}

static const char *name_or(const char *a, const char *b) { return a && *a ? a : b; }

/* GoMLX's BinaryOp rule: equal dtypes; a scalar operand takes the other's shape; otherwise
 * equal ranks where each axis matches or one side is 1. A dynamic axis (-1) broadcasts with
 * 1, or matches another dynamic axis of the same name. Axis names are unified. */
lathe_status_t lathe_infer_broadcast(const char *op, const lathe_shape *a, const lathe_shape *b, lathe_shape *out) {
  char sa[LATHE_SHAPE_STR_MAX], sb[LATHE_SHAPE_STR_MAX];
  if (a->dtype != b->dtype)
    return LATHE_INVALID("%s: operands must have the same dtype, got %s and %s", op, lathe_shape_str(a, sa, sizeof sa),
                         lathe_shape_str(b, sb, sizeof sb));
  if (a->rank == 0) {
    *out = *b;
    return NULL;
  }
  if (b->rank == 0) {
    *out = *a;
    return NULL;
  }
  if (a->rank != b->rank)
    return LATHE_INVALID("%s: operands must have the same rank or be scalars, got %s and %s", op,
                         lathe_shape_str(a, sa, sizeof sa), lathe_shape_str(b, sb, sizeof sb));
  lathe_shape o = *a;
  for (int i = 0; i < a->rank; i++) {
    int64_t x = a->dims[i], y = b->dims[i];
    const char *nx = a->axis_names[i], *ny = b->axis_names[i];
    if (x == 1 && y != 1) {
      o.dims[i] = y;
      o.axis_names[i] = ny;
      continue;
    }
    if (y == 1 || x == y) {
      if (x == -1 && y == -1 && !name_eq(nx, ny))
        return LATHE_INVALID("%s: axis %d is dynamic in both operands but named \"%s\" and \"%s\": %s and %s", op, i,
                             nx, ny, lathe_shape_str(a, sa, sizeof sa), lathe_shape_str(b, sb, sizeof sb));
      if (x != 1 && y != 1 && !name_eq(nx, ny))
        return LATHE_INVALID("%s: axis %d has conflicting names \"%s\" and \"%s\": %s and %s", op, i, nx, ny,
                             lathe_shape_str(a, sa, sizeof sa), lathe_shape_str(b, sb, sizeof sb));
      o.axis_names[i] = y == 1 && x != 1 ? nx : name_or(nx, ny);
      continue;
    }
    if (x == -1 || y == -1)
      return LATHE_INVALID("%s: axis %d is dynamic in one operand and %lld in the other, which cannot broadcast: %s and %s",
                           op, i, (long long)(x == -1 ? y : x), lathe_shape_str(a, sa, sizeof sa),
                           lathe_shape_str(b, sb, sizeof sb));
    return LATHE_INVALID("%s: axis %d has sizes %lld and %lld, which cannot broadcast: %s and %s", op, i, (long long)x,
                         (long long)y, lathe_shape_str(a, sa, sizeof sa), lathe_shape_str(b, sb, sizeof sb));
  }
  *out = o;
  return NULL;
}

bool lathe_same_axis(const lathe_shape *a, int i, const lathe_shape *b, int j) {
  if (a->dims[i] != b->dims[j]) return false;
  if (a->dims[i] >= 0) return true;
  return a->axis_names[i] && b->axis_names[j] && strcmp(a->axis_names[i], b->axis_names[j]) == 0;
}

bool lathe_same_shape(const lathe_shape *a, const lathe_shape *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (!lathe_same_axis(a, i, b, i)) return false;
  return true;
}

lathe_status_t lathe_check_axis(const char *op, const char *what, int64_t axis, int rank) {
  if (axis < 0 || axis >= rank)
    return LATHE_INVALID("%s: %s %lld is out of range for rank %d (valid: 0..%d)", op, what, (long long)axis, rank,
                         rank - 1);
  return NULL;
}
