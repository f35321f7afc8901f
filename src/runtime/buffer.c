/* buffer.c -- buffers: a reference-counted handle on a tensor, with upload, download, sharing,
 * copies between devices and donation. Reads wait for the work that computes the tensor. */
#include <stdio.h>

#include "runtime.h"

static lathe_status_t check_buffer_shape(const char *op, const lathe_shape *shape) {
  if (!shape) return LATHE_INVALID("%s: shape is NULL", op);
  if (!lathe_dtype_is_valid(shape->dtype)) return LATHE_INVALID("%s: invalid dtype %d", op, (int)shape->dtype);
  if (shape->rank < 0 || shape->rank > LATHE_MAX_RANK) return LATHE_INVALID("%s: rank %d out of range", op, shape->rank);
  for (int i = 0; i < shape->rank; i++)
    if (shape->dims[i] < 0) return LATHE_INVALID("%s: axis %d has size %lld; buffers need concrete sizes", op, i, (long long)shape->dims[i]);
  /* before any byte size is computed from the shape: beyond the limit it would wrap */
  return lathe_check_shape_size(op, "shape", shape);
}

lathe_status_t lathe_buffer_wrap_tensor(lathe_backend_t b, lathe_tensor *t, lathe_buffer_t *out) {
  lathe_buffer_t buf = calloc(1, sizeof *buf);
  if (!buf) {
    lathe_tensor_release(t);
    return LATHE_OOM("Buffer");
  }
  atomic_init(&buf->refs, 1);
  buf->backend = lathe_backend_retain(b);
  buf->t = t;
  buf->shape = t->shape;
  for (int i = 0; i < LATHE_MAX_RANK; i++) buf->shape.axis_names[i] = NULL;
  *out = buf;
  return NULL;
}

void lathe_buffer_wrap_outputs(lathe_backend_t be, lathe_tensor **tout, lathe_buffer_t *outputs, int n, lathe_status_t *st) {
  int made = 0;
  for (; !*st && tout && made < n; made++) {
    *st = lathe_buffer_wrap_tensor(be, tout[made], &outputs[made]); /* takes the tensor either way */
    tout[made] = NULL;
    if (*st) break;
  }
  if (!*st) return;
  /* the caller's array holds no handle after a failure */
  for (int k = 0; k < n; k++) {
    if (k < made) lathe_buffer_release(outputs[k]);
    outputs[k] = NULL;
  }
  for (int k = 0; tout && k < n; k++) lathe_tensor_release(tout[k]);
}

static lathe_status_t check_device(const char *op, lathe_backend_t b, int device) {
  if (!b) return LATHE_INVALID("%s: backend is NULL", op);
  if (device < 0 || device >= b->n_devices) return LATHE_INVALID("%s: device %d out of range [0, %d)", op, device, b->n_devices);
  return NULL;
}

lathe_status_t lathe_buffer_from_host(lathe_backend_t b, int device, const lathe_shape *shape, const void *data,
                                      size_t nbytes, lathe_buffer_t *out_buffer) {
  LATHE_RETURN_IF_ERROR(check_device("BufferFromHost", b, device));
  LATHE_RETURN_IF_ERROR(check_buffer_shape("BufferFromHost", shape));
  if (!out_buffer) return LATHE_INVALID("BufferFromHost: out_buffer is NULL");
  int64_t want = lathe_shape_byte_size(shape);
  if ((int64_t)nbytes != want)
    return LATHE_INVALID("BufferFromHost: got %zu bytes, shape needs %lld", nbytes, (long long)want);
  if (nbytes && !data) return LATHE_INVALID("BufferFromHost: data is NULL");
  lathe_tensor *t;
  int64_t t0 = b->trace ? lathe_trace_now() : 0;
  LATHE_RETURN_IF_ERROR(lathe_tensor_alloc(b->dev, b->dev_ctx, device, shape, &t));
  lathe_status_t st = b->dev->upload(b->dev_ctx, t, data, nbytes);
  if (b->trace) lathe_profile_transfer(b, "upload", device, nbytes, t0);
  if (st) {
    lathe_tensor_release(t);
    return st;
  }
  return lathe_buffer_wrap_tensor(b, t, out_buffer);
}

lathe_status_t lathe_buffer_new_shared(lathe_backend_t b, int device, const lathe_shape *shape,
                                       lathe_buffer_t *out_buffer, void **out_data) {
  LATHE_RETURN_IF_ERROR(check_device("NewSharedBuffer", b, device));
  LATHE_RETURN_IF_ERROR(check_buffer_shape("NewSharedBuffer", shape));
  if (!out_buffer || !out_data) return LATHE_INVALID("NewSharedBuffer: output pointer is NULL");
  if (!(b->caps & LATHE_DEVCAP_SHARED_BUFFERS))
    return lathe_status_new(LATHE_STATUS_FAILED_PRECONDITION, "NewSharedBuffer: device %s has no shared buffers", b->dev->name);
  lathe_tensor *t;
  LATHE_RETURN_IF_ERROR(lathe_tensor_alloc(b->dev, b->dev_ctx, device, shape, &t));
  memset(t->data, 0, t->nbytes);
  LATHE_RETURN_IF_ERROR(lathe_buffer_wrap_tensor(b, t, out_buffer));
  *out_data = t->data;
  return NULL;
}

static lathe_status_t live(const char *op, lathe_buffer_t buf) {
  if (!buf) return LATHE_INVALID("%s: buffer is NULL", op);
  if (!buf->t) return lathe_status_new(LATHE_STATUS_FAILED_PRECONDITION, "%s: buffer was donated to an execution", op);
  return NULL;
}

/* The buffer's tensor once its contents are computed. */
static lathe_status_t ready(const char *op, lathe_buffer_t buf) {
  LATHE_RETURN_IF_ERROR(live(op, buf));
  return lathe_tensor_wait_for(op, buf->t);
}

lathe_status_t lathe_buffer_to_host(lathe_buffer_t buf, void *dst, size_t nbytes) {
  LATHE_RETURN_IF_ERROR(live("BufferToHost", buf));
  if (nbytes != buf->t->nbytes)
    return LATHE_INVALID("BufferToHost: got %zu bytes, buffer holds %zu", nbytes, buf->t->nbytes);
  if (nbytes && !dst) return LATHE_INVALID("BufferToHost: dst is NULL");
  lathe_backend_t be = buf->backend;
  int64_t t0 = be->trace ? lathe_trace_now() : 0; /* the wait for the computation included */
  if (!(be->caps & LATHE_DEVCAP_ORDERED_DOWNLOAD)) LATHE_RETURN_IF_ERROR(ready("BufferToHost", buf));
  lathe_status_t st = be->dev->download(be->dev_ctx, buf->t, dst, nbytes);
  if (be->trace) lathe_profile_transfer(be, "download", buf->t->device, nbytes, t0);
  return st;
}

lathe_status_t lathe_buffer_data(lathe_buffer_t buf, void **out_data) {
  LATHE_RETURN_IF_ERROR(live("BufferData", buf));
  if (!out_data) return LATHE_INVALID("BufferData: out_data is NULL");
  if (!(buf->backend->caps & LATHE_DEVCAP_SHARED_BUFFERS))
    return lathe_status_new(LATHE_STATUS_FAILED_PRECONDITION, "BufferData: device %s has no shared buffers", buf->backend->dev->name);
  LATHE_RETURN_IF_ERROR(ready("BufferData", buf));
  *out_data = buf->t->data;
  return NULL;
}

lathe_status_t lathe_buffer_wait(lathe_buffer_t buf) { return ready("BufferWait", buf); }

bool lathe_buffer_is_ready(lathe_buffer_t buf) { return !buf || !buf->t || lathe_tensor_is_ready(buf->t); }

lathe_status_t lathe_buffer_shape(lathe_buffer_t buf, lathe_shape *out_shape) {
  LATHE_RETURN_IF_ERROR(live("BufferShape", buf));
  if (!out_shape) return LATHE_INVALID("BufferShape: out_shape is NULL");
  *out_shape = buf->shape;
  return NULL;
}

lathe_status_t lathe_buffer_device(lathe_buffer_t buf, int *out_device) {
  LATHE_RETURN_IF_ERROR(live("BufferDevice", buf));
  if (!out_device) return LATHE_INVALID("BufferDevice: out_device is NULL");
  *out_device = buf->t->device;
  return NULL;
}

/* Without a device copy: wait, download into host memory (or read it in place when shared),
 * upload on the target ordinal. */
static lathe_status_t copy_through_host(lathe_backend_t b, lathe_tensor *src, lathe_tensor *dst) {
  LATHE_RETURN_IF_ERROR(lathe_tensor_wait(src));
  bool shared = b->caps & LATHE_DEVCAP_SHARED_BUFFERS;
  void *host = shared ? src->data : malloc(src->nbytes ? src->nbytes : 1);
  if (!host) return LATHE_OOM("CopyToDevice");
  lathe_status_t st = shared ? NULL : b->dev->download(b->dev_ctx, src, host, src->nbytes);
  if (!st) st = b->dev->upload(b->dev_ctx, dst, host, src->nbytes);
  if (!shared) free(host);
  return st;
}

lathe_status_t lathe_buffer_copy_to_device(lathe_buffer_t buf, int device, lathe_buffer_t *out_buffer) {
  LATHE_RETURN_IF_ERROR(live("CopyToDevice", buf));
  LATHE_RETURN_IF_ERROR(check_device("CopyToDevice", buf->backend, device));
  if (!out_buffer) return LATHE_INVALID("CopyToDevice: out_buffer is NULL");
  lathe_backend_t b = buf->backend;
  lathe_tensor *t;
  LATHE_RETURN_IF_ERROR(lathe_tensor_alloc(b->dev, b->dev_ctx, device, &buf->shape, &t));
  lathe_status_t st = b->dev->copy ? b->dev->copy(b->dev_ctx, buf->t, t) : copy_through_host(b, buf->t, t);
  if (st) {
    lathe_tensor_release(t);
    return lathe_status_annotate(st, "CopyToDevice");
  }
  return lathe_buffer_wrap_tensor(b, t, out_buffer);
}

bool lathe_buffer_is_donated(lathe_buffer_t buf) { return buf && !buf->t; }

lathe_buffer_t lathe_buffer_retain(lathe_buffer_t buf) {
  if (buf) atomic_fetch_add_explicit(&buf->refs, 1, memory_order_relaxed);
  return buf;
}

void lathe_buffer_release(lathe_buffer_t buf) {
  if (!buf || atomic_fetch_sub_explicit(&buf->refs, 1, memory_order_acq_rel) != 1) return;
  lathe_tensor_release(buf->t);
  lathe_backend_release(buf->backend);
  free(buf);
}

void lathe_buffer_free(lathe_buffer_t buf) { lathe_buffer_release(buf); }
