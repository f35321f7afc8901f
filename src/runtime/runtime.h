/* runtime.h -- backends, buffers and executables: the device-independent layer between the
 * public API and a device (device.h). Every object here is reference counted; the reference
 * graph is buffer -> backend, executable -> backend, queued work -> executable, so a device
 * context is destroyed only after everything that can reach it. */
#ifndef LATHE_RUNTIME_H
#define LATHE_RUNTIME_H

#include <stdatomic.h>

#include "../graph/graph.h"
#include "../graph/partition.h"
#include "../graph/program.h"
#include "device.h"
#include "../core/trace.h"

struct lathe_backend {
  atomic_int refs;
  char *name;
  char *config;
  char *description;
  const lathe_device_i *dev;
  void *dev_ctx;
  int n_devices;
  uint32_t caps; /* LATHE_DEVCAP_* */
  lathe_program_options program_options; /* what the device asks of the compile pipeline (and
                                          * the trace, for the compile's phases) */
  /* profiling (docs/PROFILING.md): option trace= or LATHE_TRACE, dump= or LATHE_DUMP */
  struct lathe_trace *trace; /* owned; closed when the backend goes; NULL: not tracing */
  char *dump_dir;            /* owned; NULL: no dumps */
  bool partition;            /* option partition: AutoSharding programs are partitioned (partition.c) */
  atomic_int dump_seq;       /* numbers the dumped programs */
};

/* Profiling hooks of the runtime (profile.c). */
/* Reads the trace and dump options (or their environment variables) into b; INVALID_ARGUMENT
 * naming the option (or variable) and the path when the file or directory cannot be written. */
lathe_status_t lathe_profile_open(lathe_backend_t b, const char *trace_opt, const char *dump_opt);
void lathe_profile_close(lathe_backend_t b);
/* Writes program (of builder src, compiled by b) to b's dump directory; no-op without one. */
lathe_status_t lathe_profile_dump(lathe_backend_t b, const struct lathe_builder *src, const lathe_program *program,
                                  int *out_seq);
/* After the device compiled it: <seq>-<name>.device.txt, where the device has a dump_plan. */
lathe_status_t lathe_profile_dump_plan(lathe_backend_t b, int seq, const char *name, const lathe_plan *plan);
/* Appends one line (printf) to <dir>/<file>, for a device's run-time choices while dumping
 * (options.dump_dir); one writer at a time in the process. A line that cannot be written is
 * lost: the dump directory was writable when the backend was made. */
void lathe_profile_note(const char *dir, const char *file, const char *fmt, ...) LATHE_PRINTF(3, 4);
/* A transfer event ("upload"/"download") of nbytes on device, from t0 to now. */
void lathe_profile_transfer(lathe_backend_t b, const char *what, int device, size_t nbytes, int64_t t0);

struct lathe_buffer {
  atomic_int refs;
  lathe_backend_t backend; /* a reference */
  lathe_tensor *t;         /* a reference; NULL once donated */
  lathe_shape shape;
};

/* Wraps tensor t (the reference passes to the buffer) in a new buffer of backend b. */
lathe_status_t lathe_buffer_wrap_tensor(lathe_backend_t b, lathe_tensor *t, lathe_buffer_t *out);
/* Wraps n launched output tensors (taken, NULLed in tout) into outputs when *st is NULL. When *st
 * is set on entry or a wrap fails, every tensor and every buffer made is released and outputs[] is
 * all NULL. tout may be NULL (nothing was launched). */
void lathe_buffer_wrap_outputs(lathe_backend_t be, lathe_tensor **tout, lathe_buffer_t *outputs, int n, lathe_status_t *st);

/* A compiled program for one binding of the dynamic axes (or the only one): the resolved
 * builder copy, its program and the device's plan. Reference counted: the cache holds one
 * reference, and each execution holds one until the device has finished with the plan. */
typedef struct lathe_specialization {
  atomic_int refs;
  lathe_backend_t backend;        /* a reference: plans are freed through their device */
  lathe_graph *graph;             /* a reference: the program points into its nodes */
  int64_t *sizes;                 /* the key: one size per dynamic axis name of the executable, in
                                     its order, then the size values read back before (n_key in all) */
  int n_key;
  int *size_ids;                  /* a first run: the size values it computes (source main node ids) */
  int n_size_ids;                 /* 0: the program itself */
  struct lathe_builder *builder;  /* the resolved copy (NULL for the unspecialised program) */
  lathe_program *program;
  lathe_plan *plan;
  uint64_t last_used;             /* LRU clock */
} lathe_specialization;

#define LATHE_DEFAULT_MAX_SPECIALIZATIONS 64
#define LATHE_MAX_DYNAMIC_NAMES 128 /* distinct dynamic axis names of one executable */

struct lathe_executable {
  atomic_int refs;
  lathe_backend_t backend; /* a reference */
  lathe_graph *graph;      /* keeps node memory alive */
  lathe_function *main_fn;
  const char *name;        /* the builder's (graph arena): traces name executions by it */
  int assigned_device;        /* -1: each execution's default device */
  /* distributed programs (distributed.c) */
  int distribution;           /* LATHE_DIST_* */
  int n_replicas;             /* devices of one execution (1 unless distributed) */
  int *devices;               /* their ordinals */
  struct lathe_builder dist;  /* the builder's meshes and output shardings (graph arena pointers) */
  lathe_specialization *base; /* the program as built, or resolved at compile (used when !spec) */
  bool spec;                  /* each execution takes a specialisation: dynamic axes on a device that
                                 needs them resolved, or dynamic-size ops (always lowered) */
  /* dynamic axes: names in order of first appearance in the parameters, and an LRU cache of
   * specialisations, guarded by mu */
  struct lathe_builder *source; /* shallow copy of the builder, for specialising */
  const char **dyn_names;
  int n_dyn;
  void *mu; /* pthread_mutex_t */
  lathe_specialization **specs;
  int n_specs, max_specs;
  uint64_t clock;
  lathe_executable_stats stats;
  /* a partitioned AutoSharding program (base runs it as SPMD): each device's mesh coordinates,
   * its last parameter (src/graph/partition.h) */
  bool partitioned;
  lathe_tensor **coords;
  char *partition_note; /* why the partitioned program was dropped (stats.partition_declined) */
};

void lathe_specialization_release(lathe_specialization *sp);
/* Each device's mesh coordinates of partitioned AutoSharding executable e (of builder b), on
 * its device (distributed.c). */
lathe_status_t lathe_partition_upload_coords(lathe_executable_t e, const struct lathe_builder *b);
/* The specialisation an execution binding names[i] -> bound[i] uses (a new reference). Where
 * sizes depend on tensor contents, it first runs the program that computes them on device with
 * the n_inputs inputs (NULL: UNIMPLEMENTED) and reads them back. */
lathe_status_t lathe_executable_specialization(lathe_executable_t e, const char **names, const int64_t *bound, int n,
                                               const lathe_buffer_t *inputs, int n_inputs, int device,
                                               lathe_specialization **out);
/* Checks input i against parameter p (dynamic axes bind names consistently across calls). */
lathe_status_t lathe_check_input(const lathe_node *p, int i, const lathe_shape *got, int64_t *bound, const char **names,
                                 int *n_names);
/* After every input is checked: a parameter axis with a symbolic name ("=3+seq", GoMLX's
 * Concatenate) must be bound to the sum of its parts where the inputs bind them all. */
lathe_status_t lathe_check_bound_sums(const lathe_function *fn, const int64_t *bound, const char **names, int n_names);
/* Runs sp's plan once on device: one launch (inputs are references passed on; outputs receive
 * new tensors). */
lathe_status_t lathe_launch_one(lathe_executable_t e, lathe_specialization *sp, int device, lathe_tensor **inputs,
                                const bool *donated, int n_inputs, lathe_tensor **outputs, int n_outputs, int replica,
                                lathe_collective *group);
/* Execution of SPMD and AutoSharding programs (distributed.c). */
lathe_status_t lathe_execute_spmd(lathe_executable_t e, const lathe_buffer_t *inputs, const bool *donate, int n_inputs,
                                  lathe_buffer_t *outputs, int n_outputs);
lathe_status_t lathe_execute_sharded(lathe_executable_t e, const lathe_buffer_t *inputs, const bool *donate, int n_inputs,
                                     lathe_buffer_t *outputs, int n_outputs);

/* Device constructors: opt holds the config's options parsed against the device's table
 * (lathe_<dev>_options, one value per spec, in its order); the device applies its defaults to
 * those not set and may still refuse a combination. out_config is the normalised config after
 * "lathe:" ("cpu,threads=4"), malloc'ed. */
typedef lathe_status_t (*lathe_device_ctor)(const lathe_option_value *opt, const lathe_device_i **out_dev,
                                            void **out_ctx, char **out_config);

extern const lathe_option_spec lathe_cpu_options[];
extern const int lathe_cpu_n_options;
lathe_status_t lathe_cpu_device_new(const lathe_option_value *opt, const lathe_device_i **out_dev, void **out_ctx,
                                    char **out_config);
extern const lathe_option_spec lathe_cuda_options[];
extern const int lathe_cuda_n_options;
/* NULL when a GPU and the CUDA libraries are usable, else UNAVAILABLE saying why; cheap (no
 * context is made), so that plain "lathe" picks its device before it reads the options. */
lathe_status_t lathe_cuda_probe(void);
lathe_status_t lathe_cuda_device_new(const lathe_option_value *opt, const lathe_device_i **out_dev, void **out_ctx,
                                     char **out_config);
/* The MLX device (src/mlx), linked in when lathe is built with MLX (LATHE_WITH_MLX). */
extern const lathe_option_spec lathe_mlx_options[];
extern const int lathe_mlx_n_options;
lathe_status_t lathe_mlx_device_new(const lathe_option_value *opt, const lathe_device_i **out_dev, void **out_ctx,
                                    char **out_config);

#endif
