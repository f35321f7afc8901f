/* buffer.c -- buffers: a handle on a tensor, with upload, download, sharing and donation. */
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

static lathe_status_t wrap(lathe_backend_t b, lathe_tensor *t, lathe_buffer_t *out) {
  lathe_buffer_t buf = calloc(1, sizeof *buf);
  if (!buf) {
    lathe_tensor_release(t);
    return LATHE_OOM("Buffer");
  }
  buf->backend = b;
  buf->t = t;
  buf->shape = t->shape;
  for (int i = 0; i < LATHE_MAX_RANK; i++) buf->shape.axis_names[i] = NULL;
  *out = buf;
  return NULL;
}

lathe_status_t lathe_buffer_wrap_tensor(lathe_backend_t b, lathe_tensor *t, lathe_buffer_t *out) { return wrap(b, t, out); }

static lathe_status_t check_device(const char *op, lathe_backend_t b, int device) {
  if (!b) return LATHE_INVALID("%s: backend is NULL", op);
  if (device < 0 || device >= lathe_backend_num_devices(b))
    return LATHE_INVALID("%s: device %d out of range [0, %d)", op, device, lathe_backend_num_devices(b));
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
  LATHE_RETURN_IF_ERROR(b->dev->tensor_new(b->dev_ctx, shape, &t));
  lathe_status_t st = b->dev->upload(b->dev_ctx, t, data, nbytes);
  if (st) {
    lathe_tensor_release(t);
    return st;
  }
  return wrap(b, t, out_buffer);
}

lathe_status_t lathe_buffer_new_shared(lathe_backend_t b, int device, const lathe_shape *shape,
                                       lathe_buffer_t *out_buffer, void **out_data) {
  LATHE_RETURN_IF_ERROR(check_device("NewSharedBuffer", b, device));
  LATHE_RETURN_IF_ERROR(check_buffer_shape("NewSharedBuffer", shape));
  if (!out_buffer || !out_data) return LATHE_INVALID("NewSharedBuffer: output pointer is NULL");
  if (!b->dev->shared_buffers)
    return lathe_status_new(LATHE_STATUS_FAILED_PRECONDITION, "NewSharedBuffer: device %s has no shared buffers", b->dev->name);
  lathe_tensor *t;
  LATHE_RETURN_IF_ERROR(b->dev->tensor_new(b->dev_ctx, shape, &t));
  memset(t->data, 0, t->nbytes);
  LATHE_RETURN_IF_ERROR(wrap(b, t, out_buffer));
  *out_data = t->data;
  return NULL;
}

static lathe_status_t live(const char *op, lathe_buffer_t buf) {
  if (!buf) return LATHE_INVALID("%s: buffer is NULL", op);
  if (!buf->t) return lathe_status_new(LATHE_STATUS_FAILED_PRECONDITION, "%s: buffer was donated to an execution", op);
  return NULL;
}

lathe_status_t lathe_buffer_to_host(lathe_buffer_t buf, void *dst, size_t nbytes) {
  LATHE_RETURN_IF_ERROR(live("BufferToHost", buf));
  if (nbytes != buf->t->nbytes)
    return LATHE_INVALID("BufferToHost: got %zu bytes, buffer holds %zu", nbytes, buf->t->nbytes);
  if (nbytes && !dst) return LATHE_INVALID("BufferToHost: dst is NULL");
  return buf->backend->dev->download(buf->backend->dev_ctx, buf->t, dst, nbytes);
}

lathe_status_t lathe_buffer_data(lathe_buffer_t buf, void **out_data) {
  LATHE_RETURN_IF_ERROR(live("BufferData", buf));
  if (!out_data) return LATHE_INVALID("BufferData: out_data is NULL");
  if (!buf->backend->dev->shared_buffers)
    return lathe_status_new(LATHE_STATUS_FAILED_PRECONDITION, "BufferData: device %s has no shared buffers", buf->backend->dev->name);
  *out_data = buf->t->data;
  return NULL;
}

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

lathe_status_t lathe_buffer_copy_to_device(lathe_buffer_t buf, int device, lathe_buffer_t *out_buffer) {
  LATHE_RETURN_IF_ERROR(live("CopyToDevice", buf));
  LATHE_RETURN_IF_ERROR(check_device("CopyToDevice", buf->backend, device));
  lathe_backend_t b = buf->backend;
  lathe_tensor *t;
  LATHE_RETURN_IF_ERROR(b->dev->tensor_new(b->dev_ctx, &buf->shape, &t));
  void *host = b->dev->shared_buffers ? buf->t->data : malloc(buf->t->nbytes ? buf->t->nbytes : 1);
  lathe_status_t st = host ? NULL : LATHE_OOM("CopyToDevice");
  if (!st && !b->dev->shared_buffers) st = b->dev->download(b->dev_ctx, buf->t, host, buf->t->nbytes);
  if (!st) st = b->dev->upload(b->dev_ctx, t, host, buf->t->nbytes);
  if (!b->dev->shared_buffers) free(host);
  if (st) {
    lathe_tensor_release(t);
    return st;
  }
  return wrap(b, t, out_buffer);
}

bool lathe_buffer_is_donated(lathe_buffer_t buf) { return buf && !buf->t; }

void lathe_buffer_free(lathe_buffer_t buf) {
  if (!buf) return;
  lathe_tensor_release(buf->t);
  free(buf);
}
