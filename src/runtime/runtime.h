/* runtime.h -- backends, the device interface, tensors, buffers and executables. */
#ifndef LATHE_RUNTIME_H
#define LATHE_RUNTIME_H

#include <stdatomic.h>

#include "../graph/graph.h"

/* A tensor: reference-counted device memory with a static shape. Buffers, execution frames
 * and kernels all hold tensors; the last release frees the memory through its device. */
typedef struct lathe_tensor {
  atomic_int refs;
  lathe_shape shape;
  void *data;
  size_t nbytes;
  int device;
  const struct lathe_device_i *dev; /* frees data */
  void *dev_ctx;
} lathe_tensor;

lathe_tensor *lathe_tensor_retain(lathe_tensor *t);
void lathe_tensor_release(lathe_tensor *t);

/* A compiled plan for one device; opaque to the runtime. */
typedef struct lathe_plan lathe_plan;

/* The device interface: a struct of function pointers and a context. Optional slots may be
 * NULL; the runtime supplies the default. */
typedef struct lathe_device_i {
  const char *name; /* "cpu" */
  lathe_status_t (*tensor_new)(void *ctx, const lathe_shape *shape, lathe_tensor **out);
  void (*tensor_free_data)(void *ctx, void *data);
  lathe_status_t (*upload)(void *ctx, lathe_tensor *t, const void *src, size_t nbytes);
  lathe_status_t (*download)(void *ctx, const lathe_tensor *t, void *dst, size_t nbytes);
  /* compile the main function of builder (with all its sub-functions) */
  lathe_status_t (*compile)(void *ctx, struct lathe_builder *builder, lathe_plan **out);
  /* inputs: one tensor per parameter, owned (retained) by the caller; owned_inputs[i] set when
   * the execution may reuse input i's memory (it was donated and nothing else holds it).
   * outputs: written with owned tensors. */
  lathe_status_t (*execute)(void *ctx, lathe_plan *plan, lathe_tensor **inputs, int n_inputs,
                            lathe_tensor **outputs, int n_outputs);
  void (*plan_free)(void *ctx, lathe_plan *plan);
  bool (*supports_op)(void *ctx, lathe_op op, lathe_dtype dtype);
  bool (*supports_dtype)(void *ctx, lathe_dtype dtype);
  const char *(*description)(void *ctx);
  void (*destroy)(void *ctx);
  bool shared_buffers; /* tensors live in host memory */
} lathe_device_i;

struct lathe_backend {
  char *name;
  char *config;
  char *description;
  const lathe_device_i *dev;
  void *dev_ctx;
};

struct lathe_buffer {
  lathe_backend_t backend;
  lathe_tensor *t; /* NULL once donated */
  lathe_shape shape;
};

/* One compiled specialisation of a graph with dynamic axes, for one binding of its names. */
typedef struct lathe_specialization {
  int64_t *sizes; /* one per dynamic axis name of the executable, in its order */
  struct lathe_builder *builder; /* the resolved copy (owns its node memory) */
  lathe_plan *plan;
} lathe_specialization;

#define LATHE_MAX_SPECIALIZATIONS 64
#define LATHE_MAX_DYNAMIC_NAMES 128 /* distinct dynamic axis names of one executable */

struct lathe_executable {
  lathe_backend_t backend;
  lathe_graph *graph; /* keeps node memory alive */
  lathe_function *main_fn;
  lathe_plan *plan;
  /* dynamic axes: names in order of first appearance in the parameters, and the cache of
   * specialisations (one per binding), guarded by mu */
  struct lathe_builder *source; /* shallow copy of the builder, for specialising */
  const char **dyn_names;
  int n_dyn;
  void *mu; /* pthread_mutex_t */
  lathe_specialization specs[LATHE_MAX_SPECIALIZATIONS];
  int n_specs, next_evict;
};

lathe_status_t lathe_buffer_wrap_tensor(lathe_backend_t b, lathe_tensor *t, lathe_buffer_t *out); /* takes t */

/* Device constructors: parse their options (the text after "name:"), or fail listing known ones. */
lathe_status_t lathe_cpu_device_new(const char *options, const lathe_device_i **out_dev, void **out_ctx,
                                    char **out_config);

#endif
