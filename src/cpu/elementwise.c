/* elementwise.c -- the broadcasting driver of elementwise.h. */
#include "elementwise.h"

typedef struct ew_plan {
  int rank; /* collapsed rank >= 1; the last axis is the row */
  int64_t dims[LATHE_MAX_RANK];
  int64_t stride[LATHE_EW_MAX_IN][LATHE_MAX_RANK]; /* element strides; 0 where broadcast */
  int n_in;
  size_t esize[LATHE_EW_MAX_IN], out_esize;
  const char *in[LATHE_EW_MAX_IN];
  char *out;
  int64_t rows, row_len;
  lathe_ew_row_fn row;
  void *ctx;
} ew_plan;

static void plan_make(const lathe_shape *os, const lathe_shape *in, int n_in, ew_plan *p) {
  int r = os->rank;
  int64_t st[LATHE_EW_MAX_IN][LATHE_MAX_RANK];
  bool bc[LATHE_EW_MAX_IN][LATHE_MAX_RANK];
  for (int k = 0; k < n_in; k++) {
    const lathe_shape *s = &in[k];
    int64_t acc = 1;
    for (int a = r - 1; a >= 0; a--) {
      int64_t d = s->rank ? s->dims[a] : 1;
      bc[k][a] = d == 1 && os->dims[a] != 1;
      st[k][a] = bc[k][a] ? 0 : acc;
      acc *= d;
    }
  }
  p->rank = 0;
  for (int a = 0; a < r; a++) {
    if (os->dims[a] == 1) continue;
    bool merge = p->rank > 0;
    for (int k = 0; k < n_in && merge; k++) {
      /* the previous kept axis broadcasts alike (it may be separated only by size-1 axes) */
      int prev = -1;
      for (int b = a - 1; b >= 0; b--)
        if (os->dims[b] != 1) {
          prev = b;
          break;
        }
      merge = bc[k][prev] == bc[k][a];
    }
    if (merge) {
      p->dims[p->rank - 1] *= os->dims[a];
      for (int k = 0; k < n_in; k++) p->stride[k][p->rank - 1] = st[k][a];
    } else {
      p->dims[p->rank] = os->dims[a];
      for (int k = 0; k < n_in; k++) p->stride[k][p->rank] = st[k][a];
      p->rank++;
    }
  }
  if (p->rank == 0) { /* a single element */
    p->rank = 1;
    p->dims[0] = 1;
    for (int k = 0; k < n_in; k++) p->stride[k][0] = 1;
  }
  p->row_len = p->dims[p->rank - 1];
  p->rows = 1;
  for (int a = 0; a < p->rank - 1; a++) p->rows *= p->dims[a];
}

/* Rows [begin, end). */
static void run_rows(void *ctx, int64_t begin, int64_t end) {
  const ew_plan *p = ctx;
  int last = p->rank - 1;
  int64_t idx[LATHE_MAX_RANK] = {0};
  int64_t rem = begin;
  for (int a = last - 1; a >= 0; a--) {
    idx[a] = rem % p->dims[a];
    rem /= p->dims[a];
  }
  int step[LATHE_EW_MAX_IN];
  for (int k = 0; k < p->n_in; k++) step[k] = p->stride[k][last] != 0;
  for (int64_t row = begin; row < end; row++) {
    const void *ptr[LATHE_EW_MAX_IN];
    for (int k = 0; k < p->n_in; k++) {
      int64_t off = 0;
      for (int a = 0; a < last; a++) off += idx[a] * p->stride[k][a];
      ptr[k] = p->in[k] + (size_t)off * p->esize[k];
    }
    p->row(p->ctx, ptr, step, p->out + (size_t)(row * p->row_len) * p->out_esize, p->row_len);
    for (int a = last - 1; a >= 0; a--) {
      if (++idx[a] < p->dims[a]) break;
      idx[a] = 0;
    }
  }
}

/* Elements [begin, end) of a single row. */
static void run_one_row(void *ctx, int64_t begin, int64_t end) {
  const ew_plan *p = ctx;
  const void *ptr[LATHE_EW_MAX_IN];
  int step[LATHE_EW_MAX_IN];
  for (int k = 0; k < p->n_in; k++) {
    step[k] = p->stride[k][0] != 0;
    ptr[k] = p->in[k] + (size_t)(step[k] ? begin : 0) * p->esize[k];
  }
  p->row(p->ctx, ptr, step, p->out + (size_t)begin * p->out_esize, end - begin);
}

void lathe_ew_parallel(lathe_cpu_exec *ex, int64_t n, lathe_range_fn fn, void *ctx) {
  lathe_parallel_for(ex ? lathe_cpu_exec_pool(ex) : NULL, n, LATHE_EW_GRAIN, fn, ctx);
}

lathe_shape lathe_ew_in_shape(const lathe_node *n, int k) {
  lathe_shape s = n->in[k]->shape;
  s.dtype = lathe_dtype_widened(s.dtype);
  return s;
}

lathe_status_t lathe_ew_run(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, int n_in,
                            lathe_tensor *out, lathe_ew_row_fn row, void *ctx) {
  int64_t total = lathe_shape_size(&out->shape);
  if (total == 0) return NULL;
  lathe_shape shapes[LATHE_EW_MAX_IN];
  for (int k = 0; k < n_in; k++) shapes[k] = lathe_ew_in_shape(n, k);
  ew_plan p;
  memset(&p, 0, sizeof p);
  plan_make(&out->shape, shapes, n_in, &p);
  p.n_in = n_in;
  p.row = row;
  p.ctx = ctx;
  p.out_esize = (size_t)lathe_dtype_bits(out->shape.dtype) / 8;
  p.out = out->data;
  void *tmp = NULL;
  for (int k = 0; k < n_in; k++) {
    p.esize[k] = (size_t)lathe_dtype_bits(shapes[k].dtype) / 8;
    p.in[k] = in[k]->data;
    /* Writing over an operand that is read more than once would corrupt it. */
    if (in[k]->data == out->data && !tmp && lathe_shape_size(&shapes[k]) != total) {
      tmp = lathe_aligned_alloc(out->nbytes);
      if (!tmp) return LATHE_OOM("Elementwise");
      p.out = tmp;
    }
  }
  if (p.rows == 1)
    lathe_ew_parallel(ex, p.row_len, run_one_row, &p);
  else
    lathe_parallel_for(ex ? lathe_cpu_exec_pool(ex) : NULL, p.rows, (LATHE_EW_GRAIN + p.row_len - 1) / p.row_len,
                       run_rows, &p);
  if (tmp) {
    memcpy(out->data, tmp, out->nbytes);
    lathe_aligned_free(tmp);
  }
  return NULL;
}

void lathe_ew_fn_row(void *ctx, const void *const *in, const int *step, void *out, int64_t n) {
  const lathe_ew_fn_ctx *c = ctx;
  c->fn(in, step, out, n, c->bits);
}
