/* tensor.c -- reference-counted device memory. The last release frees through the device that
 * allocated the memory; work that uses a tensor holds a reference, and a tensor released while
 * the work that writes it is pending is freed when that work is done, so memory is never freed
 * (and handed to other work) under pending work. */
#include "device.h"

static lathe_status_t tensor_struct(const lathe_device_i *dev, void *dev_ctx, int device, const lathe_shape *shape,
                                    lathe_tensor **out) {
  int64_t nbytes = lathe_shape_byte_size(shape);
  if (nbytes < 0) return LATHE_INVALID("Tensor: shape has dynamic axes");
  lathe_tensor *t = calloc(1, sizeof *t);
  if (!t) return LATHE_OOM("Tensor");
  atomic_init(&t->refs, 1);
  atomic_init(&t->ready, NULL);
  t->shape = *shape;
  for (int i = 0; i < LATHE_MAX_RANK; i++) t->shape.axis_names[i] = NULL;
  t->nbytes = (size_t)nbytes;
  t->device = device;
  t->dev = dev;
  t->dev_ctx = dev_ctx;
  *out = t;
  return NULL;
}

lathe_status_t lathe_tensor_shell(const lathe_device_i *dev, void *dev_ctx, int device, const lathe_shape *shape,
                                  lathe_tensor **out) {
  return tensor_struct(dev, dev_ctx, device, shape, out);
}

lathe_status_t lathe_tensor_alloc(const lathe_device_i *dev, void *dev_ctx, int device, const lathe_shape *shape,
                                  lathe_tensor **out) {
  lathe_tensor *t;
  LATHE_RETURN_IF_ERROR(tensor_struct(dev, dev_ctx, device, shape, &t));
  lathe_status_t st = dev->mem_alloc(dev_ctx, device, t->nbytes, &t->data);
  if (st) {
    free(t);
    return st;
  }
  *out = t;
  return NULL;
}

lathe_tensor *lathe_tensor_retain(lathe_tensor *t) {
  if (t && !(t->flags & LATHE_TENSOR_VIEW)) atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
  return t;
}

static void free_tensor(lathe_tensor *t) {
  if (t->data) t->dev->mem_free(t->dev_ctx, t->device, t->data, t->nbytes);
  free(t);
}

static void free_when_written(void *ctx, lathe_status_t st) {
  (void)st;
  free_tensor(ctx);
}

void lathe_tensor_release(lathe_tensor *t) {
  if (!t || (t->flags & LATHE_TENSOR_VIEW)) return;
  if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
  lathe_event *ev = atomic_load_explicit(&t->ready, memory_order_acquire);
  /* its writer still runs (an output dropped unread, say): the memory goes once it is done, else
   * the allocator could hand it to other work while the writer writes (and the device may still
   * set data). The writer holds the event until it signals, so the callback runs. */
  if (ev && !lathe_event_is_ready(ev)) {
    lathe_status_t st = lathe_event_on_ready(ev, free_when_written, t);
    if (!st) {
      lathe_event_release(ev);
      return;
    }
    lathe_status_free(st);
    lathe_status_free(lathe_event_wait(ev)); /* no memory for the callback: wait here */
  }
  lathe_event_release(ev);
  free_tensor(t);
}

lathe_status_t lathe_tensor_wait(lathe_tensor *t) {
  lathe_event *ev = atomic_load_explicit(&t->ready, memory_order_acquire);
  if (!ev) return NULL;
  lathe_status_t st = lathe_event_wait(ev);
  /* A successful event is dropped by whoever sees it first, so later reads are one load. A
   * failed one stays: every reader of the tensor must see the error. */
  if (!st && atomic_compare_exchange_strong(&t->ready, &ev, NULL)) lathe_event_release(ev);
  return st;
}

lathe_status_t lathe_tensor_wait_for(const char *op, lathe_tensor *t) {
  lathe_status_t st = lathe_tensor_wait(t);
  return st ? lathe_status_annotate(st, "%s: the computation of this buffer failed", op) : NULL;
}

bool lathe_tensor_is_ready(lathe_tensor *t) {
  return lathe_event_is_ready(atomic_load_explicit(&t->ready, memory_order_acquire));
}

lathe_status_t lathe_device_check(const lathe_device_i *dev) {
  if (!dev) return lathe_status_new(LATHE_STATUS_INTERNAL, "Device: no device table");
  if (dev->api_version != LATHE_DEVICE_API_VERSION)
    return lathe_status_new(LATHE_STATUS_FAILED_PRECONDITION, "Device %s: interface version %u, lathe needs %d",
                            dev->name ? dev->name : "?", dev->api_version, LATHE_DEVICE_API_VERSION);
  if (dev->struct_size < sizeof(lathe_device_i))
    return lathe_status_new(LATHE_STATUS_FAILED_PRECONDITION, "Device %s: table of %u bytes, lathe needs %zu",
                            dev->name ? dev->name : "?", dev->struct_size, sizeof(lathe_device_i));
  if (!dev->name || !dev->caps || !dev->num_devices || !dev->description || !dev->supports_op || !dev->supports_dtype ||
      !dev->destroy || !dev->mem_alloc || !dev->mem_free || !dev->upload || !dev->download || !dev->compile ||
      !dev->plan_free || !dev->execute)
    return lathe_status_new(LATHE_STATUS_FAILED_PRECONDITION, "Device %s: a mandatory slot is NULL", dev->name ? dev->name : "?");
  return NULL;
}
