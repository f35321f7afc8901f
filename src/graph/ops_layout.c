/* ops_layout.c -- builders and shape inference of the data-movement ops (Reshape, Transpose,
 * BroadcastInDim, Concatenate, Slice, Pad, Reverse) and of Iota, after GoMLX's shapeinference.
 * Attributes: op_attrs.def (read by src/cpu/layout.c and leaf.c). */
#include <ctype.h>

#include "graph.h"

#define SHAPE_STR(s, buf) lathe_shape_str((s), (buf), sizeof(buf))

bool lathe_axis_name_known(const lathe_function *fn, const char *name) {
  if (!name) return false;
  for (; fn; fn = fn->parent)
    for (int p = 0; p < fn->n_params; p++) {
      const lathe_shape *s = &fn->params[p]->shape;
      for (int a = 0; a < s->rank; a++)
        if (s->dims[a] < 0 && s->axis_names[a] && strcmp(s->axis_names[a], name) == 0) return true;
    }
  return false;
}

static bool same_name(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : "") == 0; }

/* Checks that axes[0..n) are distinct and within [0, rank). */
static lathe_status_t check_axes(const char *op, const char *what, const int *axes, int n, const lathe_shape *x) {
  char buf[LATHE_SHAPE_STR_MAX];
  if (n < 0 || n > LATHE_MAX_RANK) return LATHE_INVALID("%s: %d %s given", op, n, what);
  if (n && !axes) return LATHE_INVALID("%s: %s array is NULL", op, what);
  for (int i = 0; i < n; i++) {
    if (axes[i] < 0 || axes[i] >= x->rank)
      return LATHE_INVALID("%s: %s[%d]=%d is out of range for operand %s of rank %d", op, what, i, axes[i],
                           SHAPE_STR(x, buf), x->rank);
    for (int j = 0; j < i; j++)
      if (axes[j] == axes[i]) return LATHE_INVALID("%s: %s repeat axis %d", op, what, axes[i]);
  }
  return NULL;
}

lathe_status_t lathe_reshape(lathe_function_t fn, lathe_value_t x, const int64_t *dims, int rank, lathe_value_t *out) {
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_RESHAPE, &x, 1, &n));
  char buf[LATHE_SHAPE_STR_MAX];
  const lathe_shape *xs = &x->shape;
  if (rank < 0 || rank > LATHE_MAX_RANK) return LATHE_INVALID("Reshape: rank %d out of range [0, %d]", rank, LATHE_MAX_RANK);
  if (rank && !dims) return LATHE_INVALID("Reshape: dims is NULL");
  int n_dyn_out = 0, n_dyn_in = 0;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < -1) return LATHE_INVALID("Reshape: dimension %d has negative size %lld", i, (long long)dims[i]);
    n_dyn_out += dims[i] == -1;
  }
  for (int i = 0; i < xs->rank; i++) n_dyn_in += xs->dims[i] < 0;
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = xs->dtype;
  s.rank = rank;
  for (int i = 0; i < rank; i++) s.dims[i] = dims[i];
  LATHE_RETURN_IF_ERROR(lathe_check_shape_size("Reshape", "target shape", &s));
  if (!n_dyn_in) {
    if (n_dyn_out) return LATHE_INVALID("Reshape: cannot reshape the static shape %s to dynamic dimensions", SHAPE_STR(xs, buf));
    if (lathe_shape_size(&s) != lathe_shape_size(xs)) {
      char ob[LATHE_SHAPE_STR_MAX];
      return LATHE_INVALID("Reshape: cannot reshape %s (%lld elements) to %s (%lld elements)", SHAPE_STR(xs, buf),
                           (long long)lathe_shape_size(xs), SHAPE_STR(&s, ob), (long long)lathe_shape_size(&s));
    }
  } else {
    /* Sizes are checked at run time; dynamic axes map to the input's dynamic axes in order. */
    if (n_dyn_in != n_dyn_out)
      return LATHE_INVALID("Reshape: operand %s has %d dynamic axes but the target dims have %d", SHAPE_STR(xs, buf),
                           n_dyn_in, n_dyn_out);
    int k = 0;
    for (int i = 0; i < rank; i++) {
      if (dims[i] != -1) continue;
      while (xs->dims[k] >= 0) k++;
      s.axis_names[i] = xs->axis_names[k++];
    }
    /* The dynamic axes map one to one, so the element counts agree under every binding only if
     * the static sizes multiply to the same (the kernel copies the result's size). */
    int64_t in_static = 1, out_static = 1;
    for (int i = 0; i < xs->rank; i++) in_static *= xs->dims[i] >= 0 ? xs->dims[i] : 1;
    for (int i = 0; i < rank; i++) out_static *= dims[i] >= 0 ? dims[i] : 1;
    if (in_static != out_static) {
      char ob[LATHE_SHAPE_STR_MAX];
      return LATHE_INVALID("Reshape: cannot reshape %s to %s: their static sizes multiply to %lld and %lld",
                           SHAPE_STR(xs, buf), SHAPE_STR(&s, ob), (long long)in_static, (long long)out_static);
    }
  }
  n->shape = s;
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_transpose(lathe_function_t fn, lathe_value_t x, const int *permutation, int rank,
                               lathe_value_t *out) {
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_TRANSPOSE, &x, 1, &n));
  char buf[LATHE_SHAPE_STR_MAX];
  const lathe_shape *xs = &x->shape;
  if (rank != xs->rank)
    return LATHE_INVALID("Transpose: the permutation has %d axes, operand %s has rank %d", rank, SHAPE_STR(xs, buf),
                         xs->rank);
  LATHE_RETURN_IF_ERROR(check_axes("Transpose", "permutation", permutation, rank, xs));
  /* A Transpose that keeps every axis in place is its operand, not a copy: GoMLX's gradients of
   * DotGeneral end in such (every dense layer's input gradient), a copy each on every device. */
  bool identity = true;
  for (int i = 0; i < rank; i++) identity &= permutation[i] == i;
  if (identity) {
    if (!out) return LATHE_INVALID("Transpose: output pointer is NULL");
    *out = n->in[0];
    return NULL;
  }
  n->shape = *xs;
  for (int i = 0; i < rank; i++) {
    n->shape.dims[i] = xs->dims[permutation[i]];
    n->shape.axis_names[i] = xs->axis_names[permutation[i]];
  }
  LATHE_RETURN_IF_ERROR(lathe_attr_set_transpose_permutation_int(n, permutation, rank));
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_broadcast_in_dim(lathe_function_t fn, lathe_value_t x, const lathe_shape *shape,
                                      const int *broadcast_axes, int n_axes, lathe_value_t *out) {
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_BROADCAST_IN_DIM, &x, 1, &n));
  char buf[LATHE_SHAPE_STR_MAX], ob[LATHE_SHAPE_STR_MAX];
  const lathe_shape *xs = &x->shape;
  if (!shape) return LATHE_INVALID("BroadcastInDim: output shape is NULL");
  if (shape->rank < 0 || shape->rank > LATHE_MAX_RANK)
    return LATHE_INVALID("BroadcastInDim: output rank %d out of range [0, %d]", shape->rank, LATHE_MAX_RANK);
  if (shape->dtype != LATHE_DTYPE_INVALID && shape->dtype != xs->dtype)
    return LATHE_INVALID("BroadcastInDim: output dtype %s differs from the operand's %s", lathe_dtype_name(shape->dtype),
                         lathe_dtype_name(xs->dtype));
  if (n_axes != xs->rank)
    return LATHE_INVALID("BroadcastInDim: %d broadcast axes given for operand %s of rank %d: there must be one per axis",
                         n_axes, SHAPE_STR(xs, buf), xs->rank);
  if (n_axes && !broadcast_axes) return LATHE_INVALID("BroadcastInDim: broadcast_axes is NULL");
  lathe_shape s = *shape;
  s.dtype = xs->dtype;
  for (int i = 0; i < s.rank; i++) {
    if (s.dims[i] < -1 || (s.dims[i] == -1 && (!s.axis_names[i] || !*s.axis_names[i])))
      return LATHE_INVALID("BroadcastInDim: output axis %d has invalid size %lld", i, (long long)s.dims[i]);
  }
  bool mapped[LATHE_MAX_RANK] = {false};
  for (int i = 0; i < n_axes; i++) {
    int a = broadcast_axes[i];
    if (a < 0 || a >= s.rank)
      return LATHE_INVALID("BroadcastInDim: broadcast_axes[%d]=%d is out of range for output %s of rank %d", i, a,
                           SHAPE_STR(&s, ob), s.rank);
    if (mapped[a]) return LATHE_INVALID("BroadcastInDim: broadcast_axes repeat output axis %d", a);
    /* XLA's rule: operand axes keep their order (a transposition is Transpose's job). */
    if (i > 0 && a < broadcast_axes[i - 1])
      return LATHE_INVALID("BroadcastInDim: broadcast_axes must be increasing, got broadcast_axes[%d]=%d after %d", i,
                           a, broadcast_axes[i - 1]);
    mapped[a] = true;
    int64_t in_d = xs->dims[i], out_d = s.dims[a];
    if (in_d == -1) {
      if (out_d != -1 || !same_name(xs->axis_names[i], s.axis_names[a]))
        return LATHE_INVALID("BroadcastInDim: dynamic axis %d of operand %s must stay the same dynamic axis in output %s",
                             i, SHAPE_STR(xs, buf), SHAPE_STR(&s, ob));
    } else if (in_d != 1 && in_d != out_d) {
      return LATHE_INVALID("BroadcastInDim: operand %s axis %d has size %lld, output %s axis %d has size %lld: they "
                           "must be equal or the operand's 1",
                           SHAPE_STR(xs, buf), i, (long long)in_d, SHAPE_STR(&s, ob), a, (long long)out_d);
    }
  }
  for (int a = 0; a < s.rank; a++) {
    bool kept_dyn = false;
    for (int i = 0; i < n_axes; i++) kept_dyn |= broadcast_axes[i] == a && xs->dims[i] == -1;
    if (s.dims[a] == -1 && !kept_dyn && !lathe_axis_name_known(fn, s.axis_names[a]))
      return LATHE_INVALID("BroadcastInDim: output axis %d introduces dynamic axis \"%s\", which no parameter binds", a,
                           s.axis_names[a]);
  }
  n->shape = s;
  LATHE_RETURN_IF_ERROR(lathe_attr_set_broadcast_in_dim_axes_int(n, broadcast_axes, n_axes));
  return lathe_node_commit(n, out);
}

/* compute's name for a concatenation axis (shapeinference.Concatenate), so GoMLX's shape checks,
 * which compare names, agree with lathe's: "=" and the sorted parts joined by "+" -- static sizes
 * in decimal, names of dynamic axes, symbolic names flattened -- or "?" where a dynamic part has
 * no usable name. A static axis is named only where an operand names it. */
typedef struct {
  const char *p; /* NULL: the size in num (qsort moves the parts) */
  size_t len;
  char num[24];
} name_part;

static const char *part_str(const name_part *q) { return q->p ? q->p : q->num; }

static int part_cmp(const void *x, const void *y) {
  const name_part *a = x, *b = y; /* Go's sort.Strings: bytewise, a prefix first */
  int c = memcmp(part_str(a), part_str(b), a->len < b->len ? a->len : b->len);
  return c ? c : (a->len > b->len) - (a->len < b->len);
}

static lathe_status_t concat_axis_name(const lathe_value_t *operands, int n_operands, int axis, bool dynamic, char **out) {
  *out = NULL;
  bool named = dynamic;
  size_t cap = 0;
  for (int k = 0; k < n_operands; k++) {
    const char *nm = operands[k]->shape.axis_names[axis];
    named |= nm && *nm;
    cap += 1;
    for (; nm && *nm; nm++) cap += *nm == '+';
  }
  if (!named) return NULL;
  name_part *parts = malloc(cap * sizeof *parts);
  if (!parts) return LATHE_OOM("Concatenate");
  size_t n = 0, total = 1;
  bool anonymous = false;
  for (int k = 0; k < n_operands && !anonymous; k++) {
    const char *nm = operands[k]->shape.axis_names[axis];
    int64_t d = operands[k]->shape.dims[axis];
    if (nm && !*nm) nm = NULL;
    if (dynamic && lathe_axis_anonymous(nm)) anonymous = true;
    else if (!nm || (dynamic && d >= 0)) { /* a size: the dynamic result keeps names of dynamic parts only */
      if (dynamic && d < 0) anonymous = true; /* unnamed dynamic: lathe's parameters never have one */
      name_part *q = &parts[n++];
      q->len = (size_t)snprintf(q->num, sizeof q->num, "%lld", (long long)d);
      q->p = NULL;
    } else if (nm[0] == LATHE_SYMBOLIC_AXIS_PREFIX) {
      for (const char *p = nm + 1;;) {
        const char *end = strchr(p, '+');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && isspace((unsigned char)*p)) p++, len--;
        while (len && isspace((unsigned char)p[len - 1])) len--;
        if (dynamic && len == 1 && *p == '?') {
          anonymous = true;
          break;
        }
        if (len) parts[n++] = (name_part){.p = p, .len = len};
        if (!end) break;
        p = end + 1;
      }
    } else {
      parts[n++] = (name_part){.p = nm, .len = strlen(nm)};
    }
  }
  if (anonymous) n = 0;
  qsort(parts, n, sizeof *parts, part_cmp);
  for (size_t i = 0; i < n; i++) total += parts[i].len + 1;
  char *name = malloc(anonymous ? 2 : total + 1);
  if (!name) {
    free(parts);
    return LATHE_OOM("Concatenate");
  }
  if (anonymous) {
    strcpy(name, LATHE_ANONYMOUS_AXIS);
  } else {
    size_t w = 0;
    name[w++] = LATHE_SYMBOLIC_AXIS_PREFIX;
    for (size_t i = 0; i < n; i++) {
      if (i) name[w++] = '+';
      memcpy(name + w, part_str(&parts[i]), parts[i].len);
      w += parts[i].len;
    }
    name[w] = 0;
  }
  free(parts);
  *out = name;
  return NULL;
}

lathe_status_t lathe_concatenate(lathe_function_t fn, int axis, const lathe_value_t *operands, int n_operands,
                                 lathe_value_t *out) {
  if (n_operands < 1) return LATHE_INVALID("Concatenate: needs at least one operand, got %d", n_operands);
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_CONCATENATE, operands, n_operands, &n));
  char buf[LATHE_SHAPE_STR_MAX], ob[LATHE_SHAPE_STR_MAX];
  lathe_shape s = operands[0]->shape;
  char *axis_name = NULL;
  if (n_operands > 1) {
    LATHE_RETURN_IF_ERROR(lathe_check_axis("Concatenate", "axis", axis, s.rank));
    bool dyn = s.dims[axis] < 0;
    for (int k = 1; k < n_operands; k++) {
      const lathe_shape *o = &operands[k]->shape;
      if (o->dtype != s.dtype)
        return LATHE_INVALID("Concatenate: operand 0 is %s but operand %d is %s", lathe_dtype_name(s.dtype), k,
                             lathe_dtype_name(o->dtype));
      if (o->rank != s.rank)
        return LATHE_INVALID("Concatenate: operand 0 has rank %d but operand %d has rank %d (%s)", s.rank, k, o->rank,
                             SHAPE_STR(o, buf));
      for (int d = 0; d < s.rank; d++) {
        if (d == axis) {
          /* a dynamic part makes the result dynamic, named below; the kernels add the bound sizes */
          dyn |= o->dims[d] < 0;
          if (dyn) s.dims[d] = -1;
          else if (lathe_add_overflow(s.dims[d], o->dims[d], &s.dims[d]))
            return LATHE_INVALID("Concatenate: the sizes of axis %d add up beyond the size limit (operand %d %s)", d, k,
                                 SHAPE_STR(o, buf));
          continue;
        }
        if (s.dims[d] >= 0 && o->dims[d] >= 0 && s.dims[d] != o->dims[d])
          return LATHE_INVALID("Concatenate: operand 0 %s and operand %d %s differ on axis %d, which is not the "
                               "concatenation axis %d",
                               SHAPE_STR(&operands[0]->shape, ob), k, SHAPE_STR(o, buf), d, axis);
        /* compute's UnifyAxisName: unnamed takes the other's name, equal names stay, "?" and
         * different names conflict; a dynamic axis against a static size stays dynamic (the sizes are
         * checked once bound, by the kernels) */
        const char *a = s.axis_names[d] && *s.axis_names[d] ? s.axis_names[d] : NULL;
        const char *b = o->axis_names[d] && *o->axis_names[d] ? o->axis_names[d] : NULL;
        if (lathe_axis_anonymous(a) || lathe_axis_anonymous(b) || (a && b && strcmp(a, b) != 0))
          return LATHE_INVALID("Concatenate: axis name conflict at axis %d (not the concatenation axis %d): operand 0 "
                               "%s, operand %d %s",
                               d, axis, SHAPE_STR(&operands[0]->shape, ob), k, SHAPE_STR(o, buf));
        if (o->dims[d] < 0) s.dims[d] = -1;
        s.axis_names[d] = a ? a : b;
      }
    }
    LATHE_RETURN_IF_ERROR(concat_axis_name(operands, n_operands, axis, dyn, &axis_name));
    s.axis_names[axis] = axis_name;
  }
  n->shape = s;
  /* One operand: GoMLX accepts any axis and the result is a copy, so the kernel gets axis 0. */
  lathe_attr_set_concatenate_axis(n, n_operands > 1 ? axis : 0);
  lathe_status_t st = lathe_node_commit(n, out); /* interns the name */
  free(axis_name);
  return st;
}

lathe_status_t lathe_slice(lathe_function_t fn, lathe_value_t x, const int64_t *starts, const int64_t *limits,
                           const int64_t *strides, int rank, lathe_value_t *out) {
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_SLICE, &x, 1, &n));
  char buf[LATHE_SHAPE_STR_MAX];
  const lathe_shape *xs = &x->shape;
  if (rank != xs->rank)
    return LATHE_INVALID("Slice: %d starts/limits given for operand %s of rank %d", rank, SHAPE_STR(xs, buf), xs->rank);
  if (rank && (!starts || !limits)) return LATHE_INVALID("Slice: starts or limits is NULL");
  int64_t st[LATHE_MAX_RANK];
  lathe_shape s = *xs;
  for (int a = 0; a < rank; a++) {
    int64_t b = starts[a], e = limits[a], k = strides ? strides[a] : 1, d = xs->dims[a];
    st[a] = k;
    if (k <= 0) return LATHE_INVALID("Slice: stride must be positive, got strides[%d]=%lld", a, (long long)k);
    if (d < 0) {
      /* dynamic axis: only the full slice keeps it (GoMLX has no axis expressions yet) */
      if (b != 0 || k != 1 || e != -1)
        return LATHE_INVALID("Slice: partial slice of dynamic axis %d (\"%s\") is not supported", a,
                             xs->axis_names[a] ? xs->axis_names[a] : "");
      continue;
    }
    if (b < 0 || b > d)
      return LATHE_INVALID("Slice: start %lld is out of bounds for axis %d of size %lld (operand %s)", (long long)b, a,
                           (long long)d, SHAPE_STR(xs, buf));
    if (e < b || e > d)
      return LATHE_INVALID("Slice: limit %lld is out of bounds for axis %d (start %lld, size %lld, operand %s)",
                           (long long)e, a, (long long)b, (long long)d, SHAPE_STR(xs, buf));
    s.dims[a] = e == b ? 0 : (e - b - 1) / k + 1; /* ceil((e - b) / k) without overflow for a huge k */
  }
  n->shape = s;
  LATHE_RETURN_IF_ERROR(lathe_attr_set_slice_starts(n, starts, rank));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_slice_limits(n, limits, rank));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_slice_strides(n, st, rank));
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_pad(lathe_function_t fn, lathe_value_t x, lathe_value_t fill, const lathe_pad_axis *axes,
                         int n_axes, lathe_value_t *out) {
  lathe_value_t ops[2] = {x, fill};
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_PAD, ops, 2, &n));
  char buf[LATHE_SHAPE_STR_MAX];
  const lathe_shape *xs = &x->shape, *fs = &fill->shape;
  if (fs->rank != 0) return LATHE_INVALID("Pad: the fill value must be a scalar, got %s", SHAPE_STR(fs, buf));
  if (fs->dtype != xs->dtype)
    return LATHE_INVALID("Pad: the fill value is %s but the operand is %s", lathe_dtype_name(fs->dtype),
                         lathe_dtype_name(xs->dtype));
  if (n_axes < 0 || n_axes > xs->rank)
    return LATHE_INVALID("Pad: %d axes configured for operand %s of rank %d", n_axes, SHAPE_STR(xs, buf), xs->rank);
  if (n_axes && !axes) return LATHE_INVALID("Pad: axes is NULL");
  int64_t lo[LATHE_MAX_RANK] = {0}, hi[LATHE_MAX_RANK] = {0}, in[LATHE_MAX_RANK] = {0};
  lathe_shape s = *xs;
  for (int a = 0; a < n_axes; a++) {
    const lathe_pad_axis *p = &axes[a];
    int64_t d = xs->dims[a];
    if (p->interior < 0)
      return LATHE_INVALID("Pad: interior padding must be non-negative, got %lld for axis %d", (long long)p->interior, a);
    /* bounded like sizes, so the kernel's positions (start + i * (interior + 1)) fit in int64 */
    if (p->interior >= LATHE_MAX_TENSOR_SIZE || p->start <= -LATHE_MAX_TENSOR_SIZE || p->start >= LATHE_MAX_TENSOR_SIZE ||
        p->end <= -LATHE_MAX_TENSOR_SIZE || p->end >= LATHE_MAX_TENSOR_SIZE)
      return LATHE_INVALID("Pad: padding [%lld, %lld, interior %lld] of axis %d is beyond the size limit (2^62)",
                           (long long)p->start, (long long)p->end, (long long)p->interior, a);
    if (d < 0) {
      if (p->start || p->end || p->interior)
        return LATHE_INVALID("Pad: padding dynamic axis %d (\"%s\") is not supported", a,
                             xs->axis_names[a] ? xs->axis_names[a] : "");
      continue;
    }
    int64_t od, holes = 0;
    if ((d > 0 && lathe_mul_overflow(d - 1, p->interior, &holes)) || lathe_add_overflow(d + p->start, p->end, &od) ||
        lathe_add_overflow(od, holes, &od))
      return LATHE_INVALID("Pad: axis %d of operand %s with padding [%lld, %lld, interior %lld] exceeds the size limit",
                           a, SHAPE_STR(xs, buf), (long long)p->start, (long long)p->end, (long long)p->interior);
    if (od < 0) return LATHE_INVALID("Pad: axis %d of operand %s would get negative size %lld", a, SHAPE_STR(xs, buf), (long long)od);
    s.dims[a] = od;
    lo[a] = p->start, hi[a] = p->end, in[a] = p->interior;
  }
  n->shape = s;
  LATHE_RETURN_IF_ERROR(lathe_attr_set_pad_start(n, lo, xs->rank));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_pad_end(n, hi, xs->rank));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_pad_interior(n, in, xs->rank));
  return lathe_node_commit(n, out);
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

lathe_status_t lathe_reverse(lathe_function_t fn, lathe_value_t x, const int *axes, int n_axes, lathe_value_t *out) {
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_REVERSE, &x, 1, &n));
  LATHE_RETURN_IF_ERROR(check_axes("Reverse", "axes", axes, n_axes, &x->shape));
  int sorted[LATHE_MAX_RANK];
  if (n_axes) memcpy(sorted, axes, sizeof(int) * (size_t)n_axes);
  qsort(sorted, (size_t)n_axes, sizeof(int), cmp_int);
  n->shape = x->shape;
  LATHE_RETURN_IF_ERROR(lathe_attr_set_reverse_axes_int(n, sorted, n_axes));
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_iota(lathe_function_t fn, const lathe_shape *shape, int iota_axis, lathe_value_t *out) {
  if (!shape) return LATHE_INVALID("Iota: shape is NULL");
  char buf[LATHE_SHAPE_STR_MAX];
  lathe_dtype dt = shape->dtype;
  if (!lathe_dtype_is_valid(dt)) return LATHE_INVALID("Iota: invalid dtype %d", (int)dt);
  if (dt == LATHE_DTYPE_BOOL) return LATHE_INVALID("Iota: dtype must be numeric, got Bool");
  if (shape->rank < 1 || shape->rank > LATHE_MAX_RANK)
    return LATHE_INVALID("Iota: shape must have rank in [1, %d], got %d", LATHE_MAX_RANK, shape->rank);
  for (int a = 0; a < shape->rank; a++)
    if (shape->dims[a] < -1 || (shape->dims[a] == -1 && !lathe_axis_name_known(fn, shape->axis_names[a])))
      return LATHE_INVALID("Iota: axis %d of %s has an invalid or unbound size", a, SHAPE_STR(shape, buf));
  LATHE_RETURN_IF_ERROR(lathe_check_axis("Iota", "iota axis", iota_axis, shape->rank));
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_IOTA, NULL, 0, &n));
  n->shape = *shape;
  lathe_attr_set_iota_axis(n, iota_axis);
  return lathe_node_commit(n, out);
}
