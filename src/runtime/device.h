/* device.h -- the device seam, interface version 2: events, tensors and the struct of function
 * pointers every device implements (docs/ARCHITECTURE.md, "The device seam").
 *
 * A device context serves num_devices ordinals. The runtime talks to it only through
 * lathe_device_i; a device talks back only through the functions declared here. */
#ifndef LATHE_DEVICE_H
#define LATHE_DEVICE_H

#include <stdatomic.h>
#include <stdio.h>

#include "../core/core.h"

#define LATHE_DEVICE_API_VERSION 2

struct lathe_program;
struct lathe_program_options;

/* ---- events: completion of asynchronous work ---------------------------------------------- */

/* Reference counted; signalled exactly once with a status (NULL: success). Thread-safe. */
typedef struct lathe_event lathe_event;

/* A new pending event (one reference, the caller's). */
lathe_status_t lathe_event_new(lathe_event **out);
lathe_event *lathe_event_retain(lathe_event *ev); /* NULL-safe */
void lathe_event_release(lathe_event *ev);        /* NULL-safe */
/* Marks the work done; takes ownership of status. Callbacks run on this thread, in order. */
void lathe_event_signal(lathe_event *ev, lathe_status_t status);
bool lathe_event_is_ready(lathe_event *ev); /* NULL: true */
/* Blocks until signalled; returns a copy of its status (owned by the caller). NULL: OK at once. */
lathe_status_t lathe_event_wait(lathe_event *ev);
/* Runs cb(ctx, status) once the event is signalled (now, if it already is); status is borrowed
 * for the call. Fails only on allocation failure (then cb never runs). */
typedef void (*lathe_event_fn)(void *ctx, lathe_status_t status);
lathe_status_t lathe_event_on_ready(lathe_event *ev, lathe_event_fn cb, void *ctx);
/* A device-native handle (e.g. a CUDA event) that the signalling device attaches, so that the
 * same device can order its own work after the event without a host wait. free_fn(native) runs
 * when the event goes. Set at most once, before the event is shared. */
void lathe_event_set_native(lathe_event *ev, const void *owner, void *native, void (*free_fn)(void *native));
/* The native handle if owner attached one, else NULL. */
void *lathe_event_native(lathe_event *ev, const void *owner);
/* A way for a waiter to learn the outcome from the native handle directly (the GPU's event, say),
 * without waiting for the device's signal: wait_fn(native) blocks until the work is done and
 * returns NULL when that alone means success; any status sends lathe_event_wait on to wait for the
 * signal, which carries the real status. Set with the native handle, before the event is shared. */
void lathe_event_set_native_wait(lathe_event *ev, lathe_status_t (*wait_fn)(void *native));

/* ---- tensors ---------------------------------------------------------------------------------- */

/* Tensor flags. */
enum {
  /* Memory owned by something else (an execution arena): retain/release do nothing and the
   * tensor struct itself is owned by that arena. Never reaches a buffer. */
  LATHE_TENSOR_VIEW = 1u << 0,
};

/* A tensor: device memory with a static shape, reference counted. Buffers, executions and kernels
 * hold tensors; the last release frees the memory through its device (mem_free). */
typedef struct lathe_tensor {
  atomic_int refs;
  uint32_t flags;
  lathe_shape shape;   /* static dims; axis names NULL */
  size_t nbytes;       /* packed byte size of shape */
  void *data;          /* device memory (host memory when the device has shared buffers); NULL
                        * for 0 bytes is not allowed: every tensor has a unique pointer */
  int device;          /* ordinal within its device context */
  const struct lathe_device_i *dev; /* frees data */
  void *dev_ctx;
  /* NULL when the contents are ready; else the event of the work that writes them. Set before
   * the tensor is shared, cleared (and released) by the first waiter that sees it signalled. */
  _Atomic(lathe_event *) ready;
} lathe_tensor;

/* A tensor with memory from dev's allocator on ordinal device. */
lathe_status_t lathe_tensor_alloc(const struct lathe_device_i *dev, void *dev_ctx, int device, const lathe_shape *shape,
                                  lathe_tensor **out);
/* A tensor without memory yet (an execution output the device fills): data NULL, refs 1. */
lathe_status_t lathe_tensor_shell(const struct lathe_device_i *dev, void *dev_ctx, int device, const lathe_shape *shape,
                                  lathe_tensor **out);
lathe_tensor *lathe_tensor_retain(lathe_tensor *t);
void lathe_tensor_release(lathe_tensor *t);
/* Waits until t's contents are ready; returns the status of the work that wrote them. */
lathe_status_t lathe_tensor_wait(lathe_tensor *t);
/* lathe_tensor_wait for op, its failure worded for op's caller ("<op>: the computation of this
 * buffer failed: ..."). */
lathe_status_t lathe_tensor_wait_for(const char *op, lathe_tensor *t);
/* Whether t's contents are ready (the writing work finished, successfully or not). */
bool lathe_tensor_is_ready(lathe_tensor *t);

/* ---- the device interface --------------------------------------------------------------------- */

typedef struct lathe_plan lathe_plan; /* a device's compiled program; opaque to the runtime */

/* The replicas of one SPMD execution, shared by their launches: how many, on which ordinals,
 * and the device's state for their collectives (made by the first replica that needs it). Each
 * launch holds a reference until its work is done. */
typedef struct lathe_collective {
  atomic_int refs;
  int n_replicas;
  int *devices; /* ordinal of each replica */
  void *mu;     /* pthread_mutex_t guarding impl */
  void *impl;
  void (*impl_free)(void *impl);
} lathe_collective;

lathe_status_t lathe_collective_new(int n_replicas, const int *devices, lathe_collective **out);
lathe_collective *lathe_collective_retain(lathe_collective *g);
void lathe_collective_release(lathe_collective *g);

/* One run of a plan, handed to execute. */
typedef struct lathe_launch {
  int device;             /* the ordinal the run executes on */
  lathe_tensor **inputs;  /* n_inputs references passed to the device: it releases each when the
                           * work no longer needs it. Some may still be pending (ready events). */
  const bool *donated;    /* donated[i]: the caller gave input i's memory up (may be NULL) */
  int n_inputs;
  lathe_tensor **outputs; /* n_outputs shells made by the runtime (data NULL, refs held by the
                           * runtime); on return each has data, or a pending ready event the device
                           * signals once data is set and written */
  int n_outputs;
  /* The device calls release(token) exactly once, when it no longer needs the plan (and the
   * program under it): after the work, or before returning when execute fails -- in which case
   * it has also released every input and signals nothing. */
  void (*release)(void *token);
  void *token;
  /* SPMD: this launch's replica and the execution's replicas (a reference for the device,
   * released with the inputs); NULL for a single-device program */
  int replica;
  lathe_collective *group;
} lathe_launch;

enum {
  LATHE_DEVCAP_SHARED_BUFFERS = 1u << 0, /* tensor data is host memory the caller may use */
  LATHE_DEVCAP_ASYNC = 1u << 1,          /* execute may return before the work is done */
  /* The device runs a program that keeps its dynamic axes on inputs of any binding (mlx:dynamic):
   * executions use the one compiled plan instead of a specialisation per binding. Output shells
   * then have size 0 on their dynamic axes, and the device sets each output's final shape and
   * nbytes before it returns. */
  LATHE_DEVCAP_DYNAMIC_AXES = 1u << 2,
  /* download orders itself after the tensor's pending writer (waiting as lathe_tensor_wait_for
   * does, or on the device), so the runtime hands it tensors still being written */
  LATHE_DEVCAP_ORDERED_DOWNLOAD = 1u << 3,
};

typedef struct lathe_device_i {
  uint32_t struct_size; /* sizeof(lathe_device_i) the device was built with */
  uint32_t api_version; /* LATHE_DEVICE_API_VERSION */
  const char *name;     /* "cpu", "cuda" */
  uint32_t (*caps)(void *ctx);
  int (*num_devices)(void *ctx);
  /* Owned by ctx; valid until destroy. */
  const char *(*description)(void *ctx, int device);
  bool (*supports_op)(void *ctx, lathe_op op, lathe_dtype dtype);
  bool (*supports_dtype)(void *ctx, lathe_dtype dtype);
  /* Called once, after every tensor and plan of ctx is gone; possibly on one of the device's own
   * threads (a launch's release(token) can drop the backend's last reference), which therefore
   * must not be joined from there. */
  void (*destroy)(void *ctx);

  /* memory: nbytes may be 0 (a unique pointer is still returned) */
  lathe_status_t (*mem_alloc)(void *ctx, int device, size_t nbytes, void **out_mem);
  void (*mem_free)(void *ctx, int device, void *mem, size_t nbytes);
  /* Copies nbytes from host src (borrowed for the call) into dst, which is ready. */
  lathe_status_t (*upload)(void *ctx, lathe_tensor *dst, const void *src, size_t nbytes);
  /* Copies src (ready: the runtime waited) into host dst. */
  lathe_status_t (*download)(void *ctx, lathe_tensor *src, void *dst, size_t nbytes);
  /* (optional) dst = src between ordinals of ctx; dst is a fresh tensor of src's shape. May
   * complete late by setting dst->ready. NULL: the runtime goes through host memory. */
  lathe_status_t (*copy)(void *ctx, lathe_tensor *src, lathe_tensor *dst);

  /* programs: the plan may keep pointers into program, which outlives it */
  /* (optional) what the device asks of the compile pipeline (fusion, memory plan, alignment);
   * opt arrives holding the defaults. */
  void (*program_options)(void *ctx, struct lathe_program_options *opt);
  lathe_status_t (*compile)(void *ctx, const struct lathe_program *program, lathe_plan **out);
  void (*plan_free)(void *ctx, lathe_plan *plan);
  lathe_status_t (*execute)(void *ctx, lathe_plan *plan, const lathe_launch *launch);
  /* (optional) memory counters of ordinal device (lathe_memory_stats, lathe.h), read after
   * restarting the peak from the current bytes when reset_peak; NULL: UNIMPLEMENTED */
  lathe_status_t (*memory_stats)(void *ctx, int device, bool reset_peak, lathe_memory_stats *out);
  /* (optional) while dumping: what the device made of a compiled plan (lathe:cuda: the kernels
   * bound to its steps, with their sources), written to f after the program's own dump */
  void (*dump_plan)(void *ctx, const lathe_plan *plan, FILE *f);
} lathe_device_i;

/* ---- options: each device declares its table; the runtime parses a config against it ------- */

typedef enum lathe_option_type {
  LATHE_OPTION_INT,    /* name=N, lo <= N <= hi */
  LATHE_OPTION_CHOICE, /* name=v, v one of values ("0|1", "auto|baseline|avx2") */
  LATHE_OPTION_FLAG,   /* the bare name ("dynamic") */
  LATHE_OPTION_TEXT,   /* name=text, any text without a comma (an address, a token) */
} lathe_option_type;

typedef struct lathe_option_spec {
  const char *name;
  lathe_option_type type;
  const char *values; /* as shown to a user: "N", "0|1|late"; NULL for a flag */
  long lo, hi;        /* INT: the range */
  bool bare;          /* CHOICE: a value alone selects it ("mlx:cpu" is device=cpu) */
  const char *def;    /* the default, in words */
  const char *doc;    /* one line */
} lathe_option_spec;

#define LATHE_MAX_OPTIONS 32 /* per device (each device's table asserts it fits) */

/* The runtime's own options, in every device's table (its last rows; the device ignores them):
 * the runtime reads them by name after parsing (backend.c). docs/PROFILING.md; partition:
 * docs/ARCHITECTURE.md "Partitioning". */
#define LATHE_RUNTIME_OPTION_SPECS                                                                         \
  {"trace", LATHE_OPTION_TEXT, "FILE", 0, 0, false, "LATHE_TRACE, else off",                             \
   "write a Chrome/Perfetto trace of compiles, executions, steps and transfers to FILE"},                \
  {"dump", LATHE_OPTION_TEXT, "DIR", 0, 0, false, "LATHE_DUMP, else off",                                \
   "write each compiled program (as built, after the passes, memory plan) as text and DOT into DIR"},     \
  {"partition", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "1",                                            \
   "AutoSharding programs run as per-device programs with collectives (1) or whole on the first device (0)"}

/* One parsed option, at the index of its spec. */
typedef struct lathe_option_value {
  bool set;      /* given in the config (otherwise the device's default applies) */
  long value;    /* INT: the number; CHOICE: the index in values; FLAG: 1 */
  char text[256]; /* the value as written ("avx2") */
} lathe_option_value;

/* Parses "opt,opt=v,..." against spec[0..n) into out[0..n) (all cleared first). label names the
 * device in errors ("lathe:cpu"); an unknown or malformed option is INVALID_ARGUMENT that lists
 * the known ones (lathe_options_known). */
lathe_status_t lathe_options_parse(const char *label, const lathe_option_spec *spec, int n, const char *text,
                                   lathe_option_value *out);
/* "threads=N, devices=N, fuse=0|1" into buf (always terminated). */
void lathe_options_known(const lathe_option_spec *spec, int n, char *buf, size_t cap);
/* Config or option text (len bytes) as messages may quote it: the value of every secret option
 * (token=, the job's) replaced by "<redacted>" wherever it stands -- after ':', ',' or a space,
 * misspelt configs included. Into buf (always terminated, truncated to cap); returns buf. Every
 * message that echoes a config or an option goes through it. */
const char *lathe_config_redact(const char *text, size_t len, char *buf, size_t cap);

/* Checks a device table before use (version, size, mandatory slots). */
lathe_status_t lathe_device_check(const lathe_device_i *dev);

#endif
