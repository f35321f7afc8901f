/* attrs.h -- typed accessors of op attributes, generated from op_attrs.def (included by graph.h).
 *
 * For every LATHE_ATTR(group, name, TYPE, slot) row:
 *   T lathe_attr_<group>_<name>(const lathe_node *n);
 *   void lathe_attr_set_<group>_<name>(lathe_node *n, T v);                      scalars, FLOAT, FN
 *   lathe_status_t lathe_attr_set_<group>_<name>(lathe_node *n, const int64_t *v, int len);  LIST
 *   lathe_status_t lathe_attr_set_<group>_<name>_int(lathe_node *n, const int *v, int len);  LIST
 *   lathe_status_t lathe_attr_set_<group>_<name>(lathe_node *n, const void *data, size_t size); DATA
 * LIST and DATA setters copy into the graph arena (the source is borrowed) and fail only on a
 * negative length, a NULL source of nonzero length, or out of memory; their getters return views
 * of that copy, valid as long as the graph. Accessors do not check the node's op: op_attrs.def
 * says which ops carry each group. This header is the one place (with CSE's comparison and
 * specialisation's copy) that touches the raw slots of lathe_attrs. Valid C++ too (src/mlx reads it). */
#ifndef LATHE_ATTRS_H
#define LATHE_ATTRS_H

typedef struct lathe_ilist {
  const int64_t *v;
  int n;
} lathe_ilist;

typedef struct lathe_bytes {
  const void *data;
  size_t size;
} lathe_bytes;

/* Where each TYPE lives; LATHE_ATTR_STORAGE_<TYPE> names it (the op table's unit test checks
 * slots against it). */
typedef enum lathe_attr_storage {
  LATHE_ATTR_IN_I,    /* a.i[LATHE_MAX_IATTRS] */
  LATHE_ATTR_IN_F,    /* a.f[LATHE_MAX_FATTRS] */
  LATHE_ATTR_IN_LIST, /* a.list[LATHE_MAX_LISTS], a.list_len[] */
  LATHE_ATTR_IN_FN,   /* a.fn[LATHE_MAX_SUBFNS] */
  LATHE_ATTR_IN_DATA, /* a.data, a.data_size: slot 0 only */
} lathe_attr_storage;

#define LATHE_ATTR_STORAGE_INT LATHE_ATTR_IN_I
#define LATHE_ATTR_STORAGE_BOOL LATHE_ATTR_IN_I
#define LATHE_ATTR_STORAGE_DTYPE LATHE_ATTR_IN_I
#define LATHE_ATTR_STORAGE_OP LATHE_ATTR_IN_I
#define LATHE_ATTR_STORAGE_FFT_TYPE LATHE_ATTR_IN_I
#define LATHE_ATTR_STORAGE_ACTIVATION LATHE_ATTR_IN_I
#define LATHE_ATTR_STORAGE_DENSE_LAYOUT LATHE_ATTR_IN_I
#define LATHE_ATTR_STORAGE_QUANT_SCHEME LATHE_ATTR_IN_I
#define LATHE_ATTR_STORAGE_GGML_TYPE LATHE_ATTR_IN_I
#define LATHE_ATTR_STORAGE_ATTENTION_LAYOUT LATHE_ATTR_IN_I
#define LATHE_ATTR_STORAGE_FLOAT LATHE_ATTR_IN_F
#define LATHE_ATTR_STORAGE_LIST LATHE_ATTR_IN_LIST
#define LATHE_ATTR_STORAGE_FN LATHE_ATTR_IN_FN
#define LATHE_ATTR_STORAGE_DATA LATHE_ATTR_IN_DATA

/* ---- the storage behind the LIST and DATA setters ---- */
/* Copies len values of v into list slot k (graph arena). */
static inline lathe_status_t lathe_attr_store_list(lathe_node *n, int k, const int64_t *v, int len) {
  if (len < 0) return LATHE_INVALID("%s: negative list length", lathe_op_name(n->op));
  int64_t *d = (int64_t *)lathe_arena_alloc(&n->fn->builder->graph->arena, sizeof(int64_t) * (size_t)(len ? len : 1));
  if (!d) return LATHE_OOM(lathe_op_name(n->op));
  if (len) {
    if (!v) return LATHE_INVALID("%s: list attribute is NULL but has %d elements", lathe_op_name(n->op), len);
    memcpy(d, v, sizeof(int64_t) * (size_t)len);
  }
  n->a.list[k] = d;
  n->a.list_len[k] = len;
  return NULL;
}

static inline lathe_status_t lathe_attr_store_list_int(lathe_node *n, int k, const int *v, int len) {
  if (len < 0) return LATHE_INVALID("%s: negative list length", lathe_op_name(n->op));
  if (len && !v) return LATHE_INVALID("%s: list attribute is NULL but has %d elements", lathe_op_name(n->op), len);
  int64_t tmp[LATHE_MAX_RANK * 4] = {0};
  int64_t *buf = len <= (int)(sizeof tmp / sizeof tmp[0]) ? tmp : (int64_t *)malloc(sizeof(int64_t) * (size_t)len);
  if (!buf) return LATHE_OOM(lathe_op_name(n->op));
  for (int i = 0; i < len; i++) buf[i] = v[i];
  lathe_status_t st = lathe_attr_store_list(n, k, buf, len);
  if (buf != tmp) free(buf);
  return st;
}

/* Copies size bytes of data into the data slot (graph arena, 64-byte aligned). */
static inline lathe_status_t lathe_attr_store_data(lathe_node *n, const void *data, size_t size) {
  if (size && !data) return LATHE_INVALID("%s: data is NULL", lathe_op_name(n->op));
  void *d = lathe_arena_alloc(&n->fn->builder->graph->arena, size ? size : 1);
  if (!d) return LATHE_OOM(lathe_op_name(n->op));
  if (size) memcpy(d, data, size);
  n->a.data = d;
  n->a.data_size = size;
  return NULL;
}

/* ---- accessors, one pair per row of op_attrs.def ---- */
/* Types stored in the int slots: bool reads back as slot != 0, enums as their value. */
#define LATHE_ATTR_SCALAR_(group, name, T, slot)                                              \
  static inline T lathe_attr_##group##_##name(const lathe_node *n) { return (T)n->a.i[slot]; } \
  static inline void lathe_attr_set_##group##_##name(lathe_node *n, T v) { n->a.i[slot] = (int64_t)v; }
#define LATHE_ATTR_DEF_INT(g, nm, s) LATHE_ATTR_SCALAR_(g, nm, int64_t, s)
#define LATHE_ATTR_DEF_BOOL(g, nm, s) LATHE_ATTR_SCALAR_(g, nm, bool, s)
#define LATHE_ATTR_DEF_DTYPE(g, nm, s) LATHE_ATTR_SCALAR_(g, nm, lathe_dtype, s)
#define LATHE_ATTR_DEF_OP(g, nm, s) LATHE_ATTR_SCALAR_(g, nm, lathe_op, s)
#define LATHE_ATTR_DEF_FFT_TYPE(g, nm, s) LATHE_ATTR_SCALAR_(g, nm, lathe_fft_type, s)
#define LATHE_ATTR_DEF_ACTIVATION(g, nm, s) LATHE_ATTR_SCALAR_(g, nm, lathe_activation, s)
#define LATHE_ATTR_DEF_DENSE_LAYOUT(g, nm, s) LATHE_ATTR_SCALAR_(g, nm, lathe_dense_layout, s)
#define LATHE_ATTR_DEF_QUANT_SCHEME(g, nm, s) LATHE_ATTR_SCALAR_(g, nm, lathe_quant_scheme, s)
#define LATHE_ATTR_DEF_GGML_TYPE(g, nm, s) LATHE_ATTR_SCALAR_(g, nm, lathe_ggml_type, s)
#define LATHE_ATTR_DEF_ATTENTION_LAYOUT(g, nm, s) LATHE_ATTR_SCALAR_(g, nm, lathe_attention_layout, s)

#define LATHE_ATTR_DEF_FLOAT(g, nm, s)                                                  \
  static inline double lathe_attr_##g##_##nm(const lathe_node *n) { return n->a.f[s]; } \
  static inline void lathe_attr_set_##g##_##nm(lathe_node *n, double v) { n->a.f[s] = v; }

#define LATHE_ATTR_DEF_LIST(g, nm, s)                                                                  \
  static inline lathe_ilist lathe_attr_##g##_##nm(const lathe_node *n) {                               \
    lathe_ilist l = {n->a.list[s], n->a.list_len[s]};                                                  \
    return l;                                                                                           \
  }                                                                                                     \
  static inline lathe_status_t lathe_attr_set_##g##_##nm(lathe_node *n, const int64_t *v, int len) {  \
    return lathe_attr_store_list(n, s, v, len);                                                         \
  }                                                                                                     \
  static inline lathe_status_t lathe_attr_set_##g##_##nm##_int(lathe_node *n, const int *v, int len) { \
    return lathe_attr_store_list_int(n, s, v, len);                                                     \
  }

#define LATHE_ATTR_DEF_FN(g, nm, s)                                                                       \
  static inline struct lathe_function *lathe_attr_##g##_##nm(const lathe_node *n) { return n->a.fn[s]; } \
  static inline void lathe_attr_set_##g##_##nm(lathe_node *n, struct lathe_function *f) { n->a.fn[s] = f; }

/* One data slot: the slot column is 0 and unused. */
#define LATHE_ATTR_DEF_DATA(g, nm, s)                                                                   \
  static inline lathe_bytes lathe_attr_##g##_##nm(const lathe_node *n) {                                \
    lathe_bytes b = {n->a.data, n->a.data_size};                                                       \
    return b;                                                                                           \
  }                                                                                                      \
  static inline lathe_status_t lathe_attr_set_##g##_##nm(lathe_node *n, const void *data, size_t size) { \
    return lathe_attr_store_data(n, data, size);                                                         \
  }

#define LATHE_ATTR(group, name, TYPE, slot) LATHE_ATTR_DEF_##TYPE(group, name, slot)
#define LATHE_ATTR_GROUP(group, ...)
#include "op_attrs.def"
#undef LATHE_ATTR
#undef LATHE_ATTR_GROUP

#endif
