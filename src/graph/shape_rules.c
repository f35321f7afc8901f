/* shape_rules.c -- shape rules shared by the op families: GoMLX's implicit broadcasting and
 * axis checks. */
#include <ctype.h>

#include "graph.h"

static bool name_eq(const char *a, const char *b) {
  if (!a || !*a || !b || !*b) return true; /* an unnamed axis unifies with anything */
  return !lathe_axis_anonymous(a) && strcmp(a, b) == 0; /* "?" with nothing (compute's UnifyAxisName) */
}

static const char *name_or(const char *a, const char *b) { return a && *a ? a : b; }

/* The operands' shapes for an error message: "A and B", or with labels
 * "condition A, on_true B and on_false C". */
static const char *shapes_str(const char *const *what, const lathe_shape *const *s, int n, char *buf, size_t cap) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < n && k < cap; i++) {
    char one[LATHE_SHAPE_STR_MAX];
    const char *sep = i == 0 ? "" : i == n - 1 ? " and " : ", ";
    int w = snprintf(buf + k, cap - k, "%s%s%s%s", sep, what ? what[i] : "", what ? " " : "",
                     lathe_shape_str(s[i], one, sizeof one));
    if (w < 0) break;
    k += (size_t)w;
  }
  return buf;
}

/* GoMLX's implicit broadcasting (BinaryOp, Where): scalars take the others' shape; the other
 * operands have equal ranks, and on each axis every size is equal or 1. A dynamic axis (-1)
 * broadcasts with 1 (specialisation makes it static before a kernel runs, and mlx:dynamic's
 * operations broadcast at run time), or matches another dynamic axis of the same name; never a
 * static size other than 1, which the binding might contradict. Axis names are unified. The
 * result takes the first operand's dtype; the callers check dtypes. */
lathe_status_t lathe_infer_broadcast_n(const char *op, const char *const *what, const lathe_shape *const *s, int n,
                                       lathe_shape *out) {
  char all[4 * LATHE_SHAPE_STR_MAX];
  int first = -1;
  for (int k = 0; k < n; k++)
    if (s[k]->rank) {
      if (first < 0) first = k;
      else if (s[k]->rank != s[first]->rank)
        return LATHE_INVALID("%s: operands must have the same rank or be scalars, got %s", op,
                             shapes_str(what, s, n, all, sizeof all));
    }
  lathe_shape o = *s[first < 0 ? 0 : first];
  o.dtype = s[0]->dtype;
  for (int k = first + 1; first >= 0 && k < n; k++) {
    const lathe_shape *b = s[k];
    if (!b->rank) continue;
    for (int i = 0; i < o.rank; i++) {
      int64_t x = o.dims[i], y = b->dims[i];
      const char *nx = o.axis_names[i], *ny = b->axis_names[i];
      if (x == 1 && y != 1) {
        o.dims[i] = y;
        o.axis_names[i] = ny;
        continue;
      }
      if (y == 1 || x == y) {
        if (x == -1 && y == -1 && !name_eq(nx, ny))
          return LATHE_INVALID("%s: axis %d is dynamic in two operands but named \"%s\" and \"%s\": %s", op, i, nx, ny,
                               shapes_str(what, s, n, all, sizeof all));
        if (x != 1 && y != 1 && !name_eq(nx, ny))
          return LATHE_INVALID("%s: axis %d has conflicting names \"%s\" and \"%s\": %s", op, i, nx, ny,
                               shapes_str(what, s, n, all, sizeof all));
        o.axis_names[i] = y == 1 && x != 1 ? nx : name_or(nx, ny);
        continue;
      }
      if (x == -1 || y == -1)
        return LATHE_INVALID("%s: axis %d is dynamic in one operand and %lld in another, which cannot broadcast: %s", op,
                             i, (long long)(x == -1 ? y : x), shapes_str(what, s, n, all, sizeof all));
      return LATHE_INVALID("%s: axis %d has sizes %lld and %lld, which cannot broadcast: %s", op, i, (long long)x,
                           (long long)y, shapes_str(what, s, n, all, sizeof all));
    }
  }
  *out = o;
  return NULL;
}

lathe_status_t lathe_infer_broadcast(const char *op, const lathe_shape *a, const lathe_shape *b, lathe_shape *out) {
  char sa[LATHE_SHAPE_STR_MAX], sb[LATHE_SHAPE_STR_MAX];
  if (a->dtype != b->dtype)
    return LATHE_INVALID("%s: operands must have the same dtype, got %s and %s", op, lathe_shape_str(a, sa, sizeof sa),
                         lathe_shape_str(b, sb, sizeof sb));
  const lathe_shape *s[2] = {a, b};
  return lathe_infer_broadcast_n(op, NULL, s, 2, out);
}

bool lathe_axis_anonymous(const char *name) { return name && strcmp(name, LATHE_ANONYMOUS_AXIS) == 0; }

bool lathe_same_axis(const lathe_shape *a, int i, const lathe_shape *b, int j) {
  if (a->dims[i] != b->dims[j]) return false;
  if (a->dims[i] >= 0) return true;
  /* "?" pairs with nothing: its size is unknown even relative to another "?" */
  const char *na = a->axis_names[i], *nb = b->axis_names[j];
  return na && nb && !lathe_axis_anonymous(na) && strcmp(na, nb) == 0;
}

/* A part of a symbolic name that reads as an integer (strconv.Atoi's form, as compute parses it). */
static bool parse_int_part(const char *p, size_t len, int64_t *out) {
  size_t k = 0;
  bool neg = false;
  if (k < len && (p[k] == '-' || p[k] == '+')) neg = p[k++] == '-';
  if (k == len) return false;
  int64_t v = 0;
  for (; k < len; k++) {
    if (p[k] < '0' || p[k] > '9') return false;
    if (v > (INT64_MAX - (p[k] - '0')) / 10) return false;
    v = v * 10 + (p[k] - '0');
  }
  *out = neg ? -v : v;
  return true;
}

lathe_status_t lathe_axis_resolve(const char *op, int axis, const char *name, lathe_axis_get_fn get, const void *ctx,
                                  int64_t *out) {
  if (!name || !*name) return LATHE_INVALID("%s: dynamic axis %d has no name, so no input binds it", op, axis);
  if (lathe_axis_anonymous(name))
    return LATHE_INVALID("%s: dynamic axis %d is anonymous (\"?\"): its size cannot be resolved from the inputs", op, axis);
  int64_t bound = get(ctx, name);
  if (name[0] != LATHE_SYMBOLIC_AXIS_PREFIX) {
    if (bound < 0) return LATHE_INVALID("%s: dynamic axis %d (\"%s\") is not bound by the inputs", op, axis, name);
    *out = bound;
    return NULL;
  }
  int64_t total = 0;
  for (const char *p = name + 1;;) {
    const char *end = strchr(p, '+');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    while (len && isspace((unsigned char)*p)) p++, len--;
    while (len && isspace((unsigned char)p[len - 1])) len--;
    char part[256];
    if (!len || len >= sizeof part)
      return LATHE_INVALID("%s: dynamic axis %d has a malformed symbolic name \"%s\"", op, axis, name);
    memcpy(part, p, len);
    part[len] = 0;
    if (lathe_axis_anonymous(part))
      return LATHE_INVALID("%s: dynamic axis %d (\"%s\") has an anonymous part (\"?\"): its size cannot be resolved", op,
                           axis, name);
    int64_t v;
    if (!parse_int_part(part, len, &v) && (v = get(ctx, part)) < 0)
      return LATHE_INVALID("%s: dynamic axis %d (\"%s\"): part \"%s\" is not bound by the inputs", op, axis, name, part);
    if (lathe_add_overflow(total, v, &total))
      return LATHE_INVALID("%s: dynamic axis %d (\"%s\"): its parts add up beyond the size limit", op, axis, name);
    if (!end) break;
    p = end + 1;
  }
  if (total < 0) return LATHE_INVALID("%s: dynamic axis %d (\"%s\") resolves to a negative size %lld", op, axis, name, (long long)total);
  if (bound >= 0 && bound != total)
    return LATHE_INVALID("%s: dynamic axis %d (\"%s\") is bound to %lld by the inputs, but its parts add up to %lld", op,
                         axis, name, (long long)bound, (long long)total);
  *out = total;
  return NULL;
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
