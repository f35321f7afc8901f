/* lathe.h -- the one public C API of lathe: compute backends for GoMLX with an engine in C.
 *
 * Conventions kept by every function here:
 *  - Functions that can fail return lathe_status_t: NULL means OK; otherwise the caller owns
 *    the status and frees it with lathe_status_free(). Messages name the op and the problem.
 *  - The library never aborts, exits or prints. Bad input, allocation failure and a missing
 *    driver are statuses.
 *  - Results come back through out_* parameters, written only on success.
 *  - X_free(NULL) / X_release(NULL) are no-ops.
 *  - Ownership of every pointer is stated next to it. "borrowed" means the callee does not keep
 *    it past the call; "owned by X" means it lives as long as X.
 *
 * Thread safety: a backend and a compiled executable may be used from many threads at once;
 * buffers may be read from many threads but freed by one; a builder (and its functions and
 * values) belongs to one thread at a time. */
#ifndef LATHE_H
#define LATHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LATHE_VERSION_MAJOR 0
#define LATHE_VERSION_MINOR 1
#define LATHE_VERSION_PATCH 0

/* The largest rank a shape may have. */
#define LATHE_MAX_RANK 16

/* ---------------------------------------------------------------------------------------------
 * Status */

typedef enum lathe_status_code {
  LATHE_STATUS_OK = 0,
  LATHE_STATUS_INVALID_ARGUMENT = 3,
  LATHE_STATUS_NOT_FOUND = 5,
  LATHE_STATUS_RESOURCE_EXHAUSTED = 8,
  LATHE_STATUS_FAILED_PRECONDITION = 9,
  LATHE_STATUS_UNIMPLEMENTED = 12,
  LATHE_STATUS_INTERNAL = 13,
  LATHE_STATUS_UNAVAILABLE = 14,
} lathe_status_code;

typedef struct lathe_status *lathe_status_t; /* NULL is OK; owned by the caller */

lathe_status_code lathe_status_code_of(lathe_status_t status); /* OK for NULL */
/* The message; lifetime: that of the status. "" for NULL. */
const char *lathe_status_message(lathe_status_t status);
const char *lathe_status_code_name(lathe_status_code code); /* static string */
void lathe_status_free(lathe_status_t status);

/* ---------------------------------------------------------------------------------------------
 * DTypes: the numbering of GoMLX's compute/dtypes. */

typedef enum lathe_dtype {
  LATHE_DTYPE_INVALID = 0,
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) LATHE_DTYPE_##ENUM = id,
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
  LATHE_DTYPE_LIMIT = 32 /* one past the largest id */
} lathe_dtype;

const char *lathe_dtype_name(lathe_dtype dtype); /* GoMLX name ("Float32"); static; "Invalid" if unknown */
int lathe_dtype_bits(lathe_dtype dtype);         /* storage bits per element; 0 if unknown */
bool lathe_dtype_is_valid(lathe_dtype dtype);

/* ---------------------------------------------------------------------------------------------
 * Shapes. A plain value type: copy it freely. A dimension of -1 is dynamic and must carry a
 * name in axis_names; other axes may be named or not (NULL). */

typedef struct lathe_shape {
  lathe_dtype dtype;
  int rank;
  int64_t dims[LATHE_MAX_RANK];
  /* borrowed on input; on output owned by the builder or executable that returned the shape */
  const char *axis_names[LATHE_MAX_RANK];
} lathe_shape;

/* The size limit: a shape's element count and byte size must both be below this (2^62), with
 * size-0 axes counted as 1 (and dynamic axes as 1 until bound). A parameter, constant, buffer,
 * or op result beyond it is INVALID_ARGUMENT where it is declared; a valid shape whose memory
 * cannot be had is RESOURCE_EXHAUSTED when it is allocated. */
#define LATHE_MAX_TENSOR_SIZE ((int64_t)1 << 62)

/* Fills *out with dtype and dims (axis names NULL). Fails on rank > LATHE_MAX_RANK. */
lathe_status_t lathe_shape_make(lathe_dtype dtype, int rank, const int64_t *dims, lathe_shape *out);
/* -1 if any axis is dynamic, or the shape is beyond the size limit or has a rank out of range */
int64_t lathe_shape_num_elements(const lathe_shape *shape);
int64_t lathe_shape_byte_size(const lathe_shape *shape); /* packed size; -1 as num_elements */
bool lathe_shape_is_dynamic(const lathe_shape *shape);
bool lathe_shape_equal(const lathe_shape *a, const lathe_shape *b); /* dtype and dims */

/* ---------------------------------------------------------------------------------------------
 * Ops: the op table (lathe_ops.def) as an enum. */

typedef enum lathe_op {
#define LATHE_OP(ENUM, GoName, c_name, n_operands, KIND, SIG, FLAGS) LATHE_OP_##ENUM,
#include "lathe_ops.def"
#undef LATHE_OP
  LATHE_OP_COUNT
} lathe_op;

const char *lathe_op_name(lathe_op op); /* GoMLX name without "OpType" ("DotGeneral"); static */
/* Looks an op up by its GoMLX name; LATHE_OP_COUNT if unknown. */
lathe_op lathe_op_from_name(const char *name);

/* ---------------------------------------------------------------------------------------------
 * Backends. Configs: "lathe[:options]" (the best usable device: lathe:cuda when a GPU and its
 * libraries are usable, else lathe:cpu; the options are then checked against that device),
 * "lathe:cpu[,options]" (docs/CPU.md), "lathe:cuda[,options]" (docs/CUDA.md), "mlx[:options]"
 * (docs/MLX.md; UNAVAILABLE when lathe was built without MLX). Options are comma-separated;
 * lathe_backend_option lists them. Unknown names or options are INVALID_ARGUMENT listing the
 * known ones.
 *
 * Lifetimes: backends, buffers and executables are reference counted. X_free releases the
 * caller's reference (the same as X_release); X_retain takes another. Buffers and executables
 * hold a reference on their backend, and work still running holds references on what it uses,
 * so objects may be released in any order: the memory goes when the last reference does. */

typedef struct lathe_backend *lathe_backend_t; /* reference counted; thread-safe */

lathe_status_t lathe_backend_new(const char *config, lathe_backend_t *out_backend);
/* The options of the devices linked into this build, for help texts and docs: fills *out with
 * option i (0, 1, ...) and returns true, or false past the last. Strings are static. */
typedef struct lathe_option_info {
  const char *config; /* what the option follows: "lathe:cpu", "lathe:cuda", "mlx" */
  const char *name;   /* "threads" */
  const char *values; /* "N", "0|1", "auto|baseline|avx2|avx512"; "" for a flag ("dynamic") */
  bool bare;          /* a value alone selects it ("mlx:cpu" = "mlx:device=cpu") */
  const char *def;    /* the default, in words */
  const char *doc;    /* one line */
} lathe_option_info;
bool lathe_backend_option(int i, lathe_option_info *out);
lathe_backend_t lathe_backend_retain(lathe_backend_t backend); /* returns backend */
void lathe_backend_release(lathe_backend_t backend);
void lathe_backend_free(lathe_backend_t backend); /* = lathe_backend_release */
const char *lathe_backend_name(lathe_backend_t backend);        /* "lathe"; owned by backend */
const char *lathe_backend_config(lathe_backend_t backend);      /* normalised config; owned by backend */
const char *lathe_backend_description(lathe_backend_t backend); /* owned by backend */
int lathe_backend_num_devices(lathe_backend_t backend);
/* "" for an ordinal out of range; owned by backend. */
const char *lathe_backend_device_description(lathe_backend_t backend, int device);
/* Whether the backend executes op on operands of dtype (capabilities are this query). */
bool lathe_backend_supports_op(lathe_backend_t backend, lathe_op op, lathe_dtype dtype);
bool lathe_backend_supports_dtype(lathe_backend_t backend, lathe_dtype dtype);
bool lathe_backend_supports_dynamic_axes(lathe_backend_t backend);
/* How the backend runs graphs with dynamic axes (GoMLX's Capabilities.DynamicShapes, same
 * numbering): NONE it cannot; NATIVE one compiled plan serves every binding (mlx:dynamic);
 * RECOMPILING each binding gets a specialisation of its own (lathe:cpu, lathe:cuda, compiled mlx). */
typedef enum lathe_dynamic_shapes {
  LATHE_DYNAMIC_SHAPES_NONE = 0,
  LATHE_DYNAMIC_SHAPES_NATIVE = 1,
  LATHE_DYNAMIC_SHAPES_RECOMPILING = 2,
} lathe_dynamic_shapes;
lathe_dynamic_shapes lathe_backend_dynamic_shapes(lathe_backend_t backend);
/* Whether buffers are host memory the caller may read and write in place. */
bool lathe_backend_has_shared_buffers(lathe_backend_t backend);
/* Whether lathe_executable_execute may return before the work is done (async=1 on the CPU). */
bool lathe_backend_is_asynchronous(lathe_backend_t backend);

/* Profiling (docs/PROFILING.md). A backend made with the option trace=FILE (or, without it, the
 * environment variable LATHE_TRACE=FILE) writes a Chrome/Perfetto trace-event file: compiles and
 * their phases, every execution, its steps (an op or a fusion region), transfers and memory
 * counters. The backend owns the file: events are appended as they happen (from any thread; the
 * writer locks), and the file is complete, valid JSON after every flush and once the backend's
 * last reference is released. Flushes the trace to disk now (NULL when not tracing); thread-safe. */
lathe_status_t lathe_backend_trace_flush(lathe_backend_t backend);
/* Whether backend writes a trace. */
bool lathe_backend_is_tracing(lathe_backend_t backend);

/* Device memory of one ordinal, in bytes. lathe:cpu's host memory is one process-wide pool shared
 * by every CPU backend: its counters are the process's (process_wide true). */
typedef struct lathe_memory_stats {
  int64_t current_bytes; /* in use now: buffers, execution arenas, temporaries */
  int64_t peak_bytes;    /* the most current_bytes has been (since the pool started or was reset) */
  int64_t cached_bytes;  /* freed, kept by the allocator for reuse (not in current_bytes) */
  int64_t n_allocs;      /* allocations made (cache hits included) */
  bool process_wide;
} lathe_memory_stats;
/* lathe:cuda counts its caching allocator (per GPU; sizes rounded up to the allocator's size
 * classes); mlx reads MLX's allocator (the process's arrays: process_wide; n_allocs 0, MLX keeps
 * no count). UNIMPLEMENTED on a device without counters; INVALID_ARGUMENT for a bad ordinal. */
lathe_status_t lathe_backend_memory_stats(lathe_backend_t backend, int device, lathe_memory_stats *out_stats);
/* Starts peak_bytes again from current_bytes (for measuring one phase). */
lathe_status_t lathe_backend_memory_reset_peak(lathe_backend_t backend, int device);
/* This process's place in a job of several processes (joined by a backend made with a job's
 * options or environment; docs/ARCHITECTURE.md "A job of several processes"): its index and the
 * job's process count; 0 and 1 outside a job. An AllReduce sums over the replicas of every
 * process: a data-parallel mean divides by processes * replicas. */
void lathe_job_info(int *out_process, int *out_processes);

/* ---------------------------------------------------------------------------------------------
 * Buffers: device memory holding one tensor, on one device (ordinal) of a backend.
 *
 * A buffer made by an execution may still be being computed: lathe_buffer_to_host,
 * lathe_buffer_data and lathe_buffer_wait wait for it, and return the error of the work that
 * computes it if that work failed. Releasing a buffer whose contents are still used by queued
 * work is safe: the work keeps the memory until it is done. */

typedef struct lathe_buffer *lathe_buffer_t; /* reference counted; see lathe_buffer_release */

/* Copies nbytes (must equal lathe_shape_byte_size(shape)) from data (borrowed). */
lathe_status_t lathe_buffer_from_host(lathe_backend_t backend, int device, const lathe_shape *shape,
                                      const void *data, size_t nbytes, lathe_buffer_t *out_buffer);
/* A buffer whose memory the caller reads and writes in place through *out_data (owned by the
 * buffer, 64-byte aligned, valid until the buffer is released or donated). Requires shared
 * buffers. */
lathe_status_t lathe_buffer_new_shared(lathe_backend_t backend, int device, const lathe_shape *shape,
                                       lathe_buffer_t *out_buffer, void **out_data);
/* Waits for the contents, then copies them into dst (borrowed); nbytes must equal the buffer's
 * byte size. */
lathe_status_t lathe_buffer_to_host(lathe_buffer_t buffer, void *dst, size_t nbytes);
/* Waits for the contents, then gives the host pointer of a shared buffer (owned by the buffer),
 * or FAILED_PRECONDITION. */
lathe_status_t lathe_buffer_data(lathe_buffer_t buffer, void **out_data);
/* Waits until the contents are computed; returns the error of the work if it failed. */
lathe_status_t lathe_buffer_wait(lathe_buffer_t buffer);
/* Whether the contents are computed (or their computation failed); does not wait. */
bool lathe_buffer_is_ready(lathe_buffer_t buffer);
lathe_status_t lathe_buffer_shape(lathe_buffer_t buffer, lathe_shape *out_shape);
lathe_status_t lathe_buffer_device(lathe_buffer_t buffer, int *out_device);
/* A new buffer on ordinal device with the contents of buffer (ordered after the work that
 * computes them; the copy itself may complete later on asynchronous backends). */
lathe_status_t lathe_buffer_copy_to_device(lathe_buffer_t buffer, int device, lathe_buffer_t *out_buffer);
/* Whether the buffer's memory is gone (donated to an execution). */
bool lathe_buffer_is_donated(lathe_buffer_t buffer);
lathe_buffer_t lathe_buffer_retain(lathe_buffer_t buffer); /* returns buffer */
void lathe_buffer_release(lathe_buffer_t buffer);
void lathe_buffer_free(lathe_buffer_t buffer); /* = lathe_buffer_release */

/* ---------------------------------------------------------------------------------------------
 * Builders, functions and values.
 *
 * A builder holds a main function and named functions; a closure is a function whose parent
 * is another function and which may use its parent's values simply by naming them (the graph
 * records the capture). Values are owned by the builder and live until it is freed. */

typedef struct lathe_builder *lathe_builder_t;   /* owned by the caller; one thread at a time */
typedef struct lathe_function *lathe_function_t; /* owned by its builder */
typedef struct lathe_node *lathe_value_t;        /* owned by its builder */

lathe_status_t lathe_builder_new(lathe_backend_t backend, const char *name, lathe_builder_t *out_builder);
void lathe_builder_free(lathe_builder_t builder);
const char *lathe_builder_name(lathe_builder_t builder); /* owned by builder */
lathe_function_t lathe_builder_main(lathe_builder_t builder);
/* A new top-level named function (for Call). Names are unique within a builder. */
lathe_status_t lathe_builder_new_function(lathe_builder_t builder, const char *name, lathe_function_t *out_fn);
/* A new closure of parent (for While, If, Sort, Call). */
lathe_status_t lathe_function_closure(lathe_function_t parent, lathe_function_t *out_fn);
const char *lathe_function_name(lathe_function_t fn);     /* owned by builder */
lathe_function_t lathe_function_parent(lathe_function_t fn); /* NULL for top-level functions */
/* Sets the outputs of fn (values borrowed; the array is copied). Once per function. */
lathe_status_t lathe_function_return(lathe_function_t fn, const lathe_value_t *outputs, int n_outputs);

/* Parameters are numbered in creation order. shape is copied (names too). */
lathe_status_t lathe_parameter(lathe_function_t fn, const char *name, const lathe_shape *shape, lathe_value_t *out);
/* Copies nbytes (== byte size of shape) from data (borrowed). */
lathe_status_t lathe_constant(lathe_function_t fn, const lathe_shape *shape, const void *data, size_t nbytes,
                              lathe_value_t *out);
/* The shape of a value; axis names owned by the builder. */
lathe_status_t lathe_value_shape(lathe_value_t value, lathe_shape *out_shape);
lathe_function_t lathe_value_function(lathe_value_t value);

/* Compiles the main function (and everything it calls). The builder may be freed afterwards. */
typedef struct lathe_executable *lathe_executable_t; /* reference counted; thread-safe */
lathe_status_t lathe_builder_compile(lathe_builder_t builder, lathe_executable_t *out_exec);
/* ---- Several devices ----
 * A program runs on one device, or on several at once:
 *  - SPMD (GoMLX's DistributedSPMD): one replica of the program per device; replicas exchange
 *    values only through collectives (lathe_all_reduce). An execution takes the inputs of every
 *    replica, device-major (input i of replica r is inputs[r * n_parameters + i]), and returns
 *    the outputs likewise.
 *  - AutoSharding (GoMLX's DistributedAutoSharding): parameters and outputs of main are declared
 *    with their global shape and a sharding over a mesh of devices; each device passes and gets
 *    its shard (device-major as above). Compile partitions such a program into a program of
 *    local shapes that every device runs on its shards, with the collectives the shardings imply
 *    (ops without a partitioning rule run on gathered operands; lathe_executable_get_stats counts
 *    them). Programs the partitioner leaves whole (closures, shards that do not divide, several
 *    processes, backend option partition=0; the stats say why) are computed on the first device
 *    of the assignment and their outputs split by their shardings. Results are the same.
 * Fixes the devices of the compiled executable (GoMLX's DeviceAssignment): one device for a
 * single-device program (executions then run there whatever their default_device), or one per
 * replica / mesh device of a distributed program (default: 0, 1, 2, ...). */
lathe_status_t lathe_builder_assign_devices(lathe_builder_t builder, const int *devices, int n_devices);
/* Makes the builder an SPMD program of n_replicas replicas (n_replicas >= 1). */
lathe_status_t lathe_builder_spmd(lathe_builder_t builder, int n_replicas);
#define LATHE_MAX_MESH_RANK 8
typedef struct lathe_mesh {
  const char *name;               /* borrowed */
  int rank;                       /* 1 to LATHE_MAX_MESH_RANK */
  const int *axis_sizes;          /* rank sizes (borrowed) */
  const char *const *axis_names;  /* rank distinct names (borrowed) */
  const int *logical_devices;     /* product(axis_sizes) indices into the device assignment, or NULL */
} lathe_mesh;
/* Makes the builder an AutoSharding program over meshes (copied); all meshes have the same
 * number of devices, which is the number of devices of an execution. */
lathe_status_t lathe_builder_auto_sharding(lathe_builder_t builder, const lathe_mesh *meshes, int n_meshes);
/* A tensor's sharding over a mesh: tensor axis a is split over the mesh axes axes[a][0..n_axes[a])
 * (row-major over them); an axis with none, and axes from `rank` on, are replicated. */
typedef struct lathe_sharding {
  const char *mesh;                         /* a mesh's name (borrowed) */
  int rank;
  const char *const *axes[LATHE_MAX_RANK];  /* per axis: n_axes[a] mesh axis names (borrowed) */
  int n_axes[LATHE_MAX_RANK];
} lathe_sharding;
/* A parameter of an AutoSharding program: shape is its global shape; sharding may be NULL
 * (replicated on every device). Each axis's size must divide by its number of shards.
 * In an SPMD program shape is the replica's shape and a sharding is only checked for its rank:
 * it describes how the replicas' values tile a global one, which the caller assembles. */
lathe_status_t lathe_parameter_sharded(lathe_function_t fn, const char *name, const lathe_shape *shape,
                                       const lathe_sharding *sharding, lathe_value_t *out);
/* Return with a sharding per output (the array and entries may be NULL: replicated); in an SPMD
 * program, as for parameters, only checked. */
lathe_status_t lathe_function_return_sharded(lathe_function_t fn, const lathe_value_t *outputs,
                                             const lathe_sharding *const *shardings, int n_outputs);
/* The number of devices one execution runs on (1 for a single-device program). */
int lathe_executable_num_replicas(lathe_executable_t exec);
/* The shape replica/device `index` passes for input i or gets for output i (the shard shape of
 * an AutoSharding program; the plain shape otherwise). */
lathe_status_t lathe_executable_input_shape_on(lathe_executable_t exec, int i, int index, lathe_shape *out_shape);
lathe_status_t lathe_executable_output_shape_on(lathe_executable_t exec, int i, int index, lathe_shape *out_shape);
/* Compiles the builder's graph for another backend (graphs do not depend on the backend that
 * built them): e.g. to run one graph on a device and on lathe:cpu as a reference. */
lathe_status_t lathe_builder_compile_for(lathe_builder_t builder, lathe_backend_t backend, lathe_executable_t *out_exec);

/* ---------------------------------------------------------------------------------------------
 * Op builders. Each validates its operands and attributes and infers the result shape.
 * Array arguments are borrowed. */

/* One operand, one result: lathe_abs(fn, x, &out), ... (SIG U in lathe_ops.def). */
lathe_status_t lathe_unary(lathe_function_t fn, lathe_op op, lathe_value_t x, lathe_value_t *out);
/* Two operands with GoMLX broadcasting (equal ranks; size-1 axes or a scalar broadcast): lathe_add(fn, lhs,
 * rhs, &out), ... (SIG B in lathe_ops.def). */
lathe_status_t lathe_binary(lathe_function_t fn, lathe_op op, lathe_value_t lhs, lathe_value_t rhs,
                            lathe_value_t *out);
#define LATHE_SIG_U(c_name) lathe_status_t lathe_##c_name(lathe_function_t fn, lathe_value_t x, lathe_value_t *out);
#define LATHE_SIG_B(c_name) \
  lathe_status_t lathe_##c_name(lathe_function_t fn, lathe_value_t lhs, lathe_value_t rhs, lathe_value_t *out);
#define LATHE_SIG_X(c_name)
#define LATHE_OP(ENUM, GoName, c_name, n, KIND, SIG, FLAGS) LATHE_SIG_##SIG(c_name)
#include "lathe_ops.def"
#undef LATHE_OP
#undef LATHE_SIG_U
#undef LATHE_SIG_B
#undef LATHE_SIG_X

lathe_status_t lathe_convert_dtype(lathe_function_t fn, lathe_value_t x, lathe_dtype dtype, lathe_value_t *out);
/* Reinterprets bits. Same width: same dims. Narrower target: a new last axis of size
 * src_bits/dst_bits. Wider target: the last axis must equal dst_bits/src_bits and is removed. */
lathe_status_t lathe_bitcast(lathe_function_t fn, lathe_value_t x, lathe_dtype dtype, lathe_value_t *out);

/* cond is Bool, of the operands' shape or a scalar; on_true/on_false may be scalars. */
lathe_status_t lathe_where(lathe_function_t fn, lathe_value_t cond, lathe_value_t on_true, lathe_value_t on_false,
                           lathe_value_t *out);
/* min and max are scalars or of x's shape. */
lathe_status_t lathe_clamp(lathe_function_t fn, lathe_value_t min, lathe_value_t x, lathe_value_t max,
                           lathe_value_t *out);

/* op is one of the REDUCE_* ops; axes are distinct, any order; n_axes == 0 reduces every axis
 * (GoMLX's definition). */
lathe_status_t lathe_reduce(lathe_function_t fn, lathe_op op, lathe_value_t x, const int *axes, int n_axes,
                            lathe_value_t *out);
/* Index of the min/max along axis, as output_dtype (an integer dtype). NaN wins; ties take the
 * first index. */
lathe_status_t lathe_arg_min_max(lathe_function_t fn, lathe_value_t x, int axis, lathe_dtype output_dtype,
                                 bool is_min, lathe_value_t *out);
/* Running sums of x (an integer or real float, rank >= 1) along axis, x's shape: element i is the
 * sum of elements 0..i (exclusive: 0..i-1; reverse: i..n-1, exclusive i+1..n-1). Integers wrap;
 * floats are added in index order along the axis (Float16/BFloat16 accumulate in Float32). */
lathe_status_t lathe_cum_sum(lathe_function_t fn, lathe_value_t x, int axis, bool exclusive, bool reverse,
                             lathe_value_t *out);

lathe_status_t lathe_reshape(lathe_function_t fn, lathe_value_t x, const int64_t *dims, int rank, lathe_value_t *out);
/* Axis i of the result is axis permutation[i] of x. The identity permutation gives x itself (as
 * *out: no new value). */
lathe_status_t lathe_transpose(lathe_function_t fn, lathe_value_t x, const int *permutation, int rank,
                               lathe_value_t *out);
/* Axis i of x becomes axis broadcast_axes[i] of shape (increasing); x's size there is 1 or equal. */
lathe_status_t lathe_broadcast_in_dim(lathe_function_t fn, lathe_value_t x, const lathe_shape *shape,
                                      const int *broadcast_axes, int n_axes, lathe_value_t *out);
lathe_status_t lathe_concatenate(lathe_function_t fn, int axis, const lathe_value_t *operands, int n_operands,
                                 lathe_value_t *out);
/* strides may be NULL (all 1). */
lathe_status_t lathe_slice(lathe_function_t fn, lathe_value_t x, const int64_t *starts, const int64_t *limits,
                           const int64_t *strides, int rank, lathe_value_t *out);
typedef struct lathe_pad_axis {
  int64_t start, end, interior; /* start/end may be negative (cropping); interior >= 0 */
} lathe_pad_axis;
/* fill is a scalar of x's dtype; n_axes may be less than the rank (missing axes: no padding). */
lathe_status_t lathe_pad(lathe_function_t fn, lathe_value_t x, lathe_value_t fill, const lathe_pad_axis *axes,
                         int n_axes, lathe_value_t *out);
lathe_status_t lathe_reverse(lathe_function_t fn, lathe_value_t x, const int *axes, int n_axes, lathe_value_t *out);
lathe_status_t lathe_iota(lathe_function_t fn, const lathe_shape *shape, int iota_axis, lathe_value_t *out);

/* Generalised matrix product. Result axes: batch axes, then lhs cross axes (in increasing
 * order), then rhs cross axes. Axes are in [0, rank); each axis is used at most once; paired
 * axes have equal sizes. Operands share one numeric dtype (Bool is rejected). config (borrowed)
 * may be NULL, and its fields LATHE_DTYPE_INVALID, for the defaults: the output dtype is the
 * operands'; the accumulator is the operands' dtype, except Float32 for Float16/BFloat16 and
 * 8 bits for sub-byte integers. Integer sums wrap at the accumulator's width. Complex operands
 * need a complex accumulator, and a complex accumulator a complex output. */
typedef struct lathe_dot_config {
  lathe_dtype accumulator_dtype;
  lathe_dtype output_dtype;
} lathe_dot_config;
lathe_status_t lathe_dot_general(lathe_function_t fn, lathe_value_t lhs, const int *lhs_contracting, int n_lc,
                                 const int *lhs_batch, int n_lb, lathe_value_t rhs, const int *rhs_contracting,
                                 int n_rc, const int *rhs_batch, int n_rb, const lathe_dot_config *config,
                                 lathe_value_t *out);

/* Control flow. Results are written to out_values (caller's array of capacity max_outputs);
 * *out_n receives the count. */
lathe_status_t lathe_call(lathe_function_t fn, lathe_function_t callee, const lathe_value_t *inputs, int n_inputs,
                          lathe_value_t *out_values, int max_outputs, int *out_n);
lathe_status_t lathe_while(lathe_function_t fn, lathe_function_t cond, lathe_function_t body,
                           const lathe_value_t *state, int n_state, lathe_value_t *out_values, int max_outputs,
                           int *out_n);
lathe_status_t lathe_if(lathe_function_t fn, lathe_value_t pred, lathe_function_t true_branch,
                        lathe_function_t false_branch, lathe_value_t *out_values, int max_outputs, int *out_n);
/* comparator takes 2*n_inputs scalars (lhs_i, rhs_i interleaved per input) and returns a Bool
 * scalar "lhs < rhs". All inputs share one shape. */
lathe_status_t lathe_sort(lathe_function_t fn, lathe_function_t comparator, int axis, bool is_stable,
                          const lathe_value_t *inputs, int n_inputs, lathe_value_t *out_values);


/* ---- Indexing: Gather, Scatter, DynamicSlice, DynamicUpdateSlice ---- */
/* Gather in XLA's general form (GoMLX's Gather). start_indices has an integer dtype; its axis
 * index_vector_axis (== its rank: an implicit axis of size 1) holds index vectors whose entry k
 * is the start along operand axis start_index_map[k] (other axes start at 0). Each start is
 * clamped to [0, dim - slice_size]. slice_sizes has one entry per operand axis (-1: the whole
 * axis, for dynamic axes); collapsed_slice_axes (size-1 slices) are dropped from the result;
 * the remaining operand axes appear, in order, at result axes offset_output_axes; the other
 * result axes are the batch axes of start_indices, in order. indices_are_sorted is a hint.
 * All arrays are borrowed. */
lathe_status_t lathe_gather(lathe_function_t fn, lathe_value_t operand, lathe_value_t start_indices,
                            int index_vector_axis, const int *offset_output_axes, int n_offset_output_axes,
                            const int *collapsed_slice_axes, int n_collapsed_slice_axes, const int *start_index_map,
                            int n_start_index_map, const int64_t *slice_sizes, int n_slice_sizes,
                            bool indices_are_sorted, lathe_value_t *out);
/* Scatter in XLA's general form: the result is operand with each update window combined (sum,
 * max or min: scatter_op is LATHE_OP_SCATTER_SUM/MAX/MIN) into it at the position given by the
 * matching index vector of indices (integer dtype; index_vector_axis as for gather; entry k is
 * the start along operand axis scatter_axes_to_operand_axes[k]). update_window_axes of updates
 * map in order to the operand axes not in inserted_window_axes; the other axes of updates are
 * batch axes and match the batch axes of indices. A window that does not fit entirely in the
 * operand is skipped. indices_are_sorted and unique_indices are hints; results do not depend on
 * them. All arrays are borrowed. */
lathe_status_t lathe_scatter(lathe_function_t fn, lathe_op scatter_op, lathe_value_t operand, lathe_value_t indices,
                             lathe_value_t updates, int index_vector_axis, const int *update_window_axes,
                             int n_update_window_axes, const int *inserted_window_axes, int n_inserted_window_axes,
                             const int *scatter_axes_to_operand_axes, int n_scatter_axes, bool indices_are_sorted,
                             bool unique_indices, lathe_value_t *out);
#define LATHE_SCATTER_DECL(name)                                                                                   \
  lathe_status_t lathe_##name(lathe_function_t fn, lathe_value_t operand, lathe_value_t indices, lathe_value_t updates, \
                              int index_vector_axis, const int *update_window_axes, int n_update_window_axes,        \
                              const int *inserted_window_axes, int n_inserted_window_axes,                           \
                              const int *scatter_axes_to_operand_axes, int n_scatter_axes, bool indices_are_sorted, \
                              bool unique_indices, lathe_value_t *out);
LATHE_SCATTER_DECL(scatter_sum)
LATHE_SCATTER_DECL(scatter_max)
LATHE_SCATTER_DECL(scatter_min)
#undef LATHE_SCATTER_DECL
/* The slice of operand of sizes slice_dims (one per axis) starting at start_indices (array of
 * one integer scalar value per operand axis, or of one 1-D integer value holding them all;
 * borrowed); each start is clamped to [0, dim - slice_dim]. */
lathe_status_t lathe_dynamic_slice(lathe_function_t fn, lathe_value_t operand, const lathe_value_t *start_indices,
                                   int n_start_indices, const int64_t *slice_dims, int n_slice_dims, lathe_value_t *out);
/* operand with update (same dtype and rank, no larger) written at start_indices (one integer
 * scalar per axis, or one 1-D integer value holding them all; borrowed), each start clamped to
 * [0, dim - update_dim]. */
lathe_status_t lathe_dynamic_update_slice(lathe_function_t fn, lathe_value_t operand, lathe_value_t update,
                                          const lathe_value_t *start_indices, int n_start_indices, lathe_value_t *out);
/* ---- Convolution ---- */
/* Low/high padding of one axis (ConvGeneral, ReduceWindow, SelectAndScatter*). */
typedef struct lathe_padding {
  int64_t low, high;
} lathe_padding;

/* Which axis plays which role in ConvGeneral (GoMLX's ConvolveAxesConfig). The spatial arrays
 * are borrowed; each must have rank-2 entries, spatial axis i of input, kernel and output
 * corresponding. */
typedef struct lathe_conv_axes {
  int input_batch, input_channels;
  const int *input_spatial;
  int n_input_spatial;
  int kernel_input_channels, kernel_output_channels;
  const int *kernel_spatial;
  int n_kernel_spatial;
  int output_batch, output_channels;
  const int *output_spatial;
  int n_output_spatial;
} lathe_conv_axes;

/* ConvGeneral's window parameters. Every array is borrowed and either absent (count 0: the
 * default) or has one entry per spatial axis. A zeroed struct, or NULL, means the defaults. */
typedef struct lathe_conv_params {
  const int64_t *strides; /* default 1; each >= 1 */
  int n_strides;
  const lathe_padding *paddings; /* default 0; negative values crop */
  int n_paddings;
  const int64_t *input_dilations; /* default 1; each >= 1 */
  int n_input_dilations;
  const int64_t *kernel_dilations; /* default 1; each >= 1 */
  int n_kernel_dilations;
  int64_t channel_group_count; /* 0 or 1: no grouping; input channels = kernel input channels * count */
  int64_t batch_group_count;   /* 0 or 1: no grouping; at most one of the two counts may exceed 1 */
} lathe_conv_params;

/* General convolution (XLA's ConvGeneralDilated): any number of spatial axes, any layout.
 * input and kernel share one dtype; the result has it too (Float16/BFloat16 accumulate in
 * float32, integers wrap). params may be NULL. */
lathe_status_t lathe_conv_general(lathe_function_t fn, lathe_value_t input, lathe_value_t kernel,
                                  const lathe_conv_axes *axes, const lathe_conv_params *params, lathe_value_t *out);
/* ---- Windows: ReduceWindow, SelectAndScatter ---- */
/* Window parameters of ReduceWindow and SelectAndScatter*. Arrays are borrowed; each is absent
 * (count 0: the default) or has one entry per operand axis. NULL means all defaults. */
typedef struct lathe_window_params {
  const int64_t *window_dims; /* default 1; each >= 1 */
  int n_window_dims;
  const int64_t *strides; /* default: the window dims; each >= 1 */
  int n_strides;
  const int64_t *input_dilations; /* default 1; each >= 1; ReduceWindow only */
  int n_input_dilations;
  const int64_t *window_dilations; /* default 1; each >= 1; ReduceWindow only */
  int n_window_dilations;
  const lathe_padding *paddings; /* default 0; each >= 0 */
  int n_paddings;
} lathe_window_params;

/* Reduces each window of x with reduction, one of LATHE_OP_REDUCE_SUM, _PRODUCT, _MAX, _MIN.
 * Padding and input-dilation holes take the reduction's identity (0, 1, lowest, highest). */
lathe_status_t lathe_reduce_window(lathe_function_t fn, lathe_op reduction, lathe_value_t x,
                                   const lathe_window_params *params, lathe_value_t *out);
/* op is LATHE_OP_SELECT_AND_SCATTER_MAX or _MIN: for every window of operand (window_dims,
 * strides, paddings of params; dilations must be absent) the max (min) element is selected --
 * the first on ties, a NaN over numbers -- and the window's source value is added there. source
 * has the shape of ReduceWindow's result; the result has the operand's shape. SelectAndScatterSum
 * has no builder in GoMLX's compute API (deprecated there): UNIMPLEMENTED. */
lathe_status_t lathe_select_and_scatter(lathe_function_t fn, lathe_op op, lathe_value_t operand,
                                        lathe_value_t source, const lathe_window_params *params,
                                        lathe_value_t *out);
/* ---- Numerics: RNGBitGenerator, FFT, BatchNorm ---- */
/* RNGBitGenerator: Philox4x32-10 as XLA's RngBitGenerator(PHILOX) defines it. state is
 * Uint64[3] = {key, counter low 64 bits, counter high 64 bits}. shape (copied; static dims) gives
 * the values: integers and floats of 8 to 64 bits (Bool and complex are rejected). 32-bit
 * dtypes take the 4 words of each 128-bit block in order; 64-bit dtypes take (w0|w1<<32),
 * (w2|w3<<32); 8- and 16-bit dtypes take one 32-bit word per element, truncated. The counter
 * advances by the number of blocks used. out_values (caller's array of 2) receives
 * {new_state, values}. */
lathe_status_t lathe_rng_bit_generator(lathe_function_t fn, lathe_value_t state, const lathe_shape *shape,
                                       lathe_value_t *out_values);

/* The numbering of GoMLX's compute.FFTType. */
typedef enum lathe_fft_type {
  LATHE_FFT_TYPE_FORWARD = 0,      /* complex -> complex */
  LATHE_FFT_TYPE_INVERSE = 1,      /* complex -> complex, scaled by 1/N */
  LATHE_FFT_TYPE_FORWARD_REAL = 2, /* Float32/64 [..., N] -> Complex64/128 [..., N/2+1] */
  LATHE_FFT_TYPE_INVERSE_REAL = 3, /* Complex64/128 [..., N/2+1] -> Float32/64 [..., N], scaled by 1/N */
} lathe_fft_type;
/* FFT over the n_fft_length (1 to 3) innermost axes of x; fft_length (borrowed) holds their
 * logical sizes (positive): for FORWARD, INVERSE and FORWARD_REAL they must equal x's innermost
 * sizes; for INVERSE_REAL all but the last must, and x's last axis must be fft_length[-1]/2+1. */
lathe_status_t lathe_fft(lathe_function_t fn, lathe_value_t x, lathe_fft_type type, const int64_t *fft_length,
                         int n_fft_length, lathe_value_t *out);

/* Batch normalisation over every axis but feature_axis (in [0, rank)). operand is a float
 * dtype; scale, offset, mean and variance are rank 1 of operand's dtype and of the feature
 * axis's size; epsilon >= 0 and finite. Variances are the biased (population) ones. */
lathe_status_t lathe_batch_norm_for_inference(lathe_function_t fn, lathe_value_t operand, lathe_value_t scale,
                                              lathe_value_t offset, lathe_value_t mean, lathe_value_t variance,
                                              float epsilon, int feature_axis, lathe_value_t *out);
/* out_values (caller's array of 3) receives {normalized, batch_mean, batch_variance}. */
lathe_status_t lathe_batch_norm_for_training(lathe_function_t fn, lathe_value_t operand, lathe_value_t scale,
                                             lathe_value_t offset, float epsilon, int feature_axis,
                                             lathe_value_t *out_values);
/* grad_output has operand's shape. out_values (caller's array of 3) receives {grad_operand,
 * grad_scale, grad_offset}, computed with the given mean and variance. */
lathe_status_t lathe_batch_norm_gradient(lathe_function_t fn, lathe_value_t operand, lathe_value_t scale,
                                         lathe_value_t mean, lathe_value_t variance, lathe_value_t grad_output,
                                         float epsilon, int feature_axis, lathe_value_t *out_values);
/* ---- Fused ops ---- */
/* Fused ops: one pass over memory where the decomposition takes several. Float dtypes. */
/* softmax along axis (0 <= axis < rank). */
lathe_status_t lathe_fused_softmax(lathe_function_t fn, lathe_value_t x, int axis, lathe_value_t *out);
/* GELU: exact (x/2 (1 + erf(x/sqrt 2))) or the tanh approximation. */
lathe_status_t lathe_fused_gelu(lathe_function_t fn, lathe_value_t x, bool exact, lathe_value_t *out);
/* Layer normalisation over axes (distinct; a negative axis counts from the end, -1 the last);
 * gamma and beta (may be NULL) hold one value per element of the normalised axes (dims of x at
 * axes, in the order given). */
lathe_status_t lathe_fused_layer_norm(lathe_function_t fn, lathe_value_t x, const int *axes, int n_axes, double epsilon,
                                      lathe_value_t gamma, lathe_value_t beta, lathe_value_t *out);
/* Activations of the fused ops. The numbering is lathe's own, kept stable across releases; it is
 * not GoMLX's compute.ActivationType (which renumbers between releases: the Go layer maps by name).
 * Their formulas and derivatives are the rows of src/graph/ew.def (LATHE_ACT), as GoMLX's Go
 * backend computes them. */
typedef enum lathe_activation {
  LATHE_ACTIVATION_NONE = 0,
  LATHE_ACTIVATION_GELU = 1, /* exact (erf) */
  LATHE_ACTIVATION_RELU = 2,
  LATHE_ACTIVATION_SILU = 3,
  LATHE_ACTIVATION_HARD_SWISH = 4,
  LATHE_ACTIVATION_TANH = 5,
  LATHE_ACTIVATION_SIGMOID = 6,
  LATHE_ACTIVATION_HARD_SIGMOID = 7,     /* max(0, min(1, 0.2x + 0.5)) */
  LATHE_ACTIVATION_LEAKY_RELU = 8,       /* slope 0.3 below 0 */
  LATHE_ACTIVATION_SELU = 9,             /* scale 1.0507..., alpha 1.6733... */
  LATHE_ACTIVATION_GELU_APPROXIMATE = 10, /* the tanh form */
  LATHE_ACTIVATION_SWIGLU = 11, /* silu(gate) * value, gate the first half of the last axis; not for the dense ops */
} lathe_activation;
/* y = activation(x), the shape of x; SwiGLU halves the last axis (static and even). */
lathe_status_t lathe_fused_activation(lathe_function_t fn, lathe_value_t x, lathe_activation activation, lathe_value_t *out);
/* dx = d_output * activation'(...), the shape of x (or of y when x is NULL). y or x may be NULL as
 * the activation allows (NULL where needed is INVALID_ARGUMENT naming it): the activations whose
 * derivative follows from y (None, ReLU, Sigmoid, HardSigmoid, LeakyReLU, SELU, Tanh) take y or x
 * and use y when both are given; the others (GELU, GELU approximate, SiLU, HardSwish, SwiGLU)
 * need x and ignore y. d_output has y's shape. */
lathe_status_t lathe_fused_activation_vjp(lathe_function_t fn, lathe_value_t y, lathe_value_t x, lathe_value_t d_output,
                                          lathe_activation activation, lathe_value_t *out);
typedef enum lathe_dense_layout {
  LATHE_DENSE_INPUT_OUTPUTS = 0, /* weight [in, out...] */
  LATHE_DENSE_OUTPUTS_INPUT = 1, /* weight [out..., in] */
} lathe_dense_layout;
/* activation(x @ weight + bias): x [batch..., in]; bias [out...] or NULL; result [batch..., out...]. */
lathe_status_t lathe_fused_dense(lathe_function_t fn, lathe_value_t x, lathe_value_t weight, lathe_value_t bias,
                                 lathe_activation activation, lathe_dense_layout layout, lathe_value_t *out);
/* The gradients of lathe_fused_dense from its result y (the activation's derivative must follow
 * from y: not GELU, GELU approximate, SiLU, HardSwish, SwiGLU) and d_output (y's shape). out
 * (caller's array of 3) receives out[0] = dx (x's shape), out[1] = d_weight (weight's shape),
 * out[2] = d_bias (bias's shape; NULL when bias is NULL). */
lathe_status_t lathe_fused_dense_vjp(lathe_function_t fn, lathe_value_t x, lathe_value_t weight, lathe_value_t bias,
                                     lathe_value_t y, lathe_value_t d_output, lathe_activation activation,
                                     lathe_dense_layout layout, lathe_value_t out[3]);
/* ---- Dynamic shapes ---- */
/* Dynamic shapes: parameters may have dynamic axes (size -1 with a name); an executable binds
 * the names from its inputs' shapes and keeps one specialisation per binding. */
/* The dims of x at run time, as Int64[rank] (every size lathe produces is Int64: GoMLX's
 * Capabilities.DynamicDimDType left unset; size operands below take any integer dtype). */
lathe_status_t lathe_dynamic_shape(lathe_function_t fn, lathe_value_t x, lathe_value_t *out);
/* The size of x's axis at run time, as an Int64 scalar. */
lathe_status_t lathe_dynamic_dimension_size(lathe_function_t fn, lathe_value_t x, int axis, lathe_value_t *out);
/* One target axis of lathe_dynamic_reshape: static (name NULL, static_size >= 0), named with a
 * value (name and an integer scalar value giving its size), or named and inferred (name, value
 * NULL; at most one axis). name is borrowed. */
typedef struct lathe_dim_spec {
  int64_t static_size;
  const char *name;
  lathe_value_t value;
} lathe_dim_spec;
lathe_status_t lathe_dynamic_reshape(lathe_function_t fn, lathe_value_t x, const lathe_dim_spec *dims, int n_dims,
                                     lathe_value_t *out);
/* Sizes given by graph values. A size value is an integer scalar of the graph; where it follows
 * from the bound dynamic axes and constants (DynamicDimensionSize and integer arithmetic on it)
 * it is folded when the executable is specialised for a binding; otherwise the executable
 * computes it first and specialises the rest on the value read back (one compile per distinct
 * value, see lathe_executable_stats). A negative size, one the data contradicts, or one beyond
 * the size limit is INVALID_ARGUMENT at execution, naming the op. The name "?" (or none) on an
 * axis with a value makes an anonymous axis that matches no other. DynamicReshape's size values
 * follow the same rules. */
/* x's axis i becomes result axis broadcast_axes[i] (strictly increasing); x's size there is 1, or
 * equal (a dynamic axis of x stays that axis, by name). dims: one spec per result axis: static;
 * named with a value; or named without one (an axis the parameters bind, or one of x's). */
lathe_status_t lathe_dynamic_broadcast_in_dim(lathe_function_t fn, lathe_value_t x, const int *broadcast_axes, int n_axes,
                                              const lathe_dim_spec *dims, int n_dims, lathe_value_t *out);
/* Iota (counting along iota_axis from 0) of dtype, dims as for lathe_dynamic_broadcast_in_dim. */
lathe_status_t lathe_dynamic_iota(lathe_function_t fn, lathe_dtype dtype, int iota_axis, const lathe_dim_spec *dims, int n_dims,
                                  lathe_value_t *out);
/* One axis of lathe_dynamic_pad: each amount static, or given by an integer scalar value (which
 * replaces the static one). target_name (borrowed; NULL: anonymous) names the result axis when it
 * is dynamic. */
typedef struct lathe_dynamic_pad_axis {
  int64_t start, end, interior;
  lathe_value_t start_value, end_value, interior_value;
  const char *target_name;
} lathe_dynamic_pad_axis;
/* Pad with amounts that may be values; fill is a scalar of x's dtype; n_axes <= rank (missing
 * axes: no padding). Negative start/end crop; interior must be >= 0. */
lathe_status_t lathe_dynamic_pad(lathe_function_t fn, lathe_value_t x, lathe_value_t fill, const lathe_dynamic_pad_axis *axes,
                                 int n_axes, lathe_value_t *out);
/* ---- Barriers ---- */
/* Returns the operands unchanged (n results), and keeps the optimiser from moving or merging
 * work across it. */
lathe_status_t lathe_optimization_barrier(lathe_function_t fn, const lathe_value_t *operands, int n,
                                          lathe_value_t *out_values);
/* Returns operand unchanged once every value of deps (n_deps of them; may be NULL when 0) has
 * been computed. */
lathe_status_t lathe_scheduling_barrier(lathe_function_t fn, lathe_value_t operand, const lathe_value_t *deps,
                                        int n_deps, lathe_value_t *out);

/* ---- Collectives (SPMD programs) ---- */
/* Reduces each operand over the replicas of its replica group: reduction is LATHE_OP_REDUCE_SUM,
 * _PRODUCT, _MAX or _MIN. groups: n_groups lists of replica indices (group g has group_sizes[g]
 * entries, flattened one after the other in `groups`) that together name every replica once;
 * n_groups == 0 means one group of every replica. out_values (caller's array of n) receives
 * the reduced values, each of its operand's shape. */
lathe_status_t lathe_all_reduce(lathe_function_t fn, const lathe_value_t *operands, int n, lathe_op reduction,
                                const int *groups, const int *group_sizes, int n_groups, lathe_value_t *out_values);
/* The collectives a partitioner inserts (C API only: compute v0.1.14 has no builders for them).
 * Groups are given as for lathe_all_reduce and must all have one size G (G counts the replicas
 * of every process in a job: docs/ARCHITECTURE.md "Collectives"); member k is the k-th replica
 * listed in its group. Packed (sub-byte) dtypes are not supported.
 * AllGather: the group's operands concatenated along axis in group order (size on axis * G). */
lathe_status_t lathe_all_gather(lathe_function_t fn, lathe_value_t operand, int axis, const int *groups,
                                const int *group_sizes, int n_groups, lathe_value_t *out);
/* ReduceScatter: the AllReduce (reduction as lathe_all_reduce's) of the group, of which member k
 * keeps the k-th of G equal slices along axis (axis's size must divide by G). */
lathe_status_t lathe_reduce_scatter(lathe_function_t fn, lathe_value_t operand, int axis, lathe_op reduction,
                                    const int *groups, const int *group_sizes, int n_groups, lathe_value_t *out);
/* AllToAll: each member splits its operand along split_axis into G equal parts (the size must
 * divide by G) and sends part j to member j; each concatenates the G parts it receives along
 * concat_axis in the order of their senders. */
lathe_status_t lathe_all_to_all(lathe_function_t fn, lathe_value_t operand, int split_axis, int concat_axis,
                                const int *groups, const int *group_sizes, int n_groups, lathe_value_t *out);
/* The collectives builder b builds from this call on: in_process true keeps their groups inside
 * this process -- in a job of several processes they then do not extend across the processes
 * (tensor parallelism inside a host, beside a data-parallel AllReduce across hosts), and their
 * group sizes count this process's replicas only; false (the default) extends each group across
 * every process of the job (docs/ARCHITECTURE.md "A job of several processes"). Outside a job both
 * are the same. lathe:cuda has no in-process groups in a job yet (UNIMPLEMENTED when run). */
lathe_status_t lathe_builder_collectives_in_process(lathe_builder_t b, bool in_process);
/* CollectivePermute: n_pairs pairs (source, target) of replicas, flattened in pairs; replica
 * target gets source's operand, a replica that is no pair's target gets zeros. Each replica is
 * at most one pair's source and at most one pair's target. */
lathe_status_t lathe_collective_permute(lathe_function_t fn, lathe_value_t operand, const int *pairs, int n_pairs,
                                        lathe_value_t *out);

/* ---- Quantized fused ops ---- */
/* Quantized weights, as GoMLX's compute.Quantization. The numbering of both enums is GoMLX's. */
typedef enum lathe_quant_scheme {
  LATHE_QUANT_LINEAR = 0, /* value = q * scale + zero_point (no zero point: symmetric) */
  LATHE_QUANT_NF4 = 1,    /* value = lathe_nf4_table[q & 15] * scale (QLoRA's NormalFloat4) */
  LATHE_QUANT_GGML = 2,   /* llama.cpp block formats: scales live inside the blocks */
} lathe_quant_scheme;
typedef enum lathe_ggml_type {
  LATHE_GGML_Q4_0 = 0,   /* 32 values in 18 bytes: f16 d, 16 bytes of nibbles; d * (q - 8) */
  LATHE_GGML_Q8_0 = 1,   /* 32 values in 34 bytes: f16 d, 32 int8; d * q */
  LATHE_GGML_IQ4_NL = 2, /* 32 values in 18 bytes: as Q4_0 with d * lathe_iq4nl_table[q] */
  LATHE_GGML_Q2_K = 3,   /* 256 values in 84 bytes */
  LATHE_GGML_Q3_K = 4,   /* 256 values in 110 bytes */
  LATHE_GGML_Q4_K = 5,   /* 256 values in 144 bytes */
  LATHE_GGML_Q5_K = 6,   /* 256 values in 176 bytes */
  LATHE_GGML_Q6_K = 7,   /* 256 values in 210 bytes */
} lathe_ggml_type;
/* Values and bytes of one block of a GGML type (0 if unknown); its name ("Q4_K"; static;
 * "unknown" if unknown). A GGML row of K values takes K / values * bytes bytes. */
int lathe_ggml_block_values(lathe_ggml_type type);
int lathe_ggml_block_bytes(lathe_ggml_type type);
const char *lathe_ggml_type_name(lathe_ggml_type type);
extern const float lathe_nf4_table[16];   /* GoMLX's NF4LookupTable */
extern const float lathe_iq4nl_table[16]; /* GoMLX's IQ4NLLookupTable (before the block scale) */
/* How a quantized operand is stored. The scale and zero point tensors, when the scheme has
 * them, are operands of the op, not fields. */
typedef struct lathe_quantization {
  lathe_quant_scheme scheme;
  lathe_ggml_type ggml_type; /* GGML only */
  int block_axis;            /* Linear/NF4: the weights axis that is blocked; must be 1 */
  int64_t block_size;        /* Linear/NF4: >= 1 consecutive output features share one scale */
} lathe_quantization;
/* activation(x @ dequantize(weights) + bias) without materialising the float weights.
 * x: Float32 [batch..., K]. quant (borrowed) must not be NULL.
 * Linear/NF4: weights [K, N] of Int2/Int4/Int8/Uint2/Uint4/Uint8 (sub-byte dtypes packed, as a
 * Bitcast gives them); scale [K, ceil(N / block_size)] of Float32, Float16 or BFloat16;
 * zero_point (Linear only; NULL: symmetric) like scale. GGML: weights [N, bytes per row]
 * Uint8 of blocks of ggml_type holding K values per row; scale and zero_point NULL.
 * bias: Float32 [N] or NULL. Result: Float32 [batch..., N]. */
lathe_status_t lathe_fused_quantized_dense(lathe_function_t fn, lathe_value_t x, lathe_value_t weights,
                                           const lathe_quantization *quant, lathe_value_t scale,
                                           lathe_value_t zero_point, lathe_value_t bias, lathe_activation activation,
                                           lathe_value_t *out);
/* Embedding rows gathered and dequantized: data [vocab, bytes per row] Uint8 of GGML blocks
 * (quant->scheme must be GGML: other schemes are UNIMPLEMENTED), indices of an integer dtype
 * with last axis 1. Result: Float32 [indices dims but the last..., K]. An index outside
 * [0, vocab) fails the execution with INVALID_ARGUMENT (as GoMLX's go backend). */
lathe_status_t lathe_quantized_embedding_lookup(lathe_function_t fn, lathe_value_t data, lathe_value_t indices,
                                                const lathe_quantization *quant, lathe_value_t *out);

/* ---- Fused attention ---- */
/* Axis order of the 4-D attention tensors (GoMLX's AttentionAxesLayout). */
typedef enum lathe_attention_layout {
  LATHE_ATTENTION_LAYOUT_BHSD = 0, /* [batch, heads, seq, headDim] */
  LATHE_ATTENTION_LAYOUT_BSHD = 1, /* [batch, seq, heads, headDim] */
} lathe_attention_layout;

/* GoMLX's ScaledDotProductAttentionConfig. A zeroed struct, or NULL, means the defaults. The
 * values are borrowed handles of the same function (NULL: unused). mask and bias broadcast to
 * the scores (each axis 1 or equal): rank 2 is [seqLen, kvLen]; rank 3 is [1, seqLen, kvLen];
 * rank 4 is [batch, numHeads, seqLen, kvLen], except a BSHD mask, which is [batch, seqLen,
 * numHeads, kvLen] as GoMLX's attention.Core builds it. A rank-3 operand with a leading axis
 * other than 1, and a BSHD rank-4 bias with a heads or seq axis, are UNIMPLEMENTED: GoMLX's
 * backends read them differently, so the caller falls back to the decomposition. */
typedef struct lathe_attention_config {
  double scale;        /* multiplies query . key; 0: 1/sqrt(headDim); finite */
  bool causal;         /* query row i sees key j only when j <= i (top-left aligned) */
  lathe_value_t mask;  /* Bool (true: attend) or query's dtype (added to the scores) */
  lathe_value_t bias;  /* query's dtype, added to the scores (ALiBi, relative position) */
  lathe_value_t query_seq_len;     /* Int32 [batch]: query rows from it on give zeros */
  lathe_value_t key_value_seq_len; /* Int32 [batch]: keys from it on are masked; both or neither */
  bool quantized_matmuls; /* a hint; ignored: lathe:cpu computes in float */
} lathe_attention_config;

/* softmax(scale * query . key^T + bias + mask) . value per head. query is
 * [batch, numHeads, seqLen, headDim] (BHSD) or [batch, seqLen, numHeads, headDim] (BSHD); key
 * and value have numKVHeads heads and kvLen positions; numHeads is a multiple of numKVHeads and
 * query head h reads kv head h / (numHeads / numKVHeads) (grouped-query attention). All three
 * share one float dtype. A query row that sees no key gives zeros. out_values (caller's array
 * of 2) receives {output (query's shape), logsumexp}: logsumexp is the per-row log of the
 * softmax denominator, [batch, numHeads, seqLen], Float64 for Float64 inputs and Float32
 * otherwise (-inf for rows that see no key); it is the state FusedScaledDotProductAttentionVJP
 * takes. */
lathe_status_t lathe_fused_scaled_dot_product_attention(lathe_function_t fn, lathe_value_t query, lathe_value_t key,
                                                        lathe_value_t value, lathe_attention_layout layout,
                                                        const lathe_attention_config *config,
                                                        lathe_value_t *out_values);
/* Gradients of FusedScaledDotProductAttention. query, key, value, layout and config are those of
 * the forward call; output and states (n_states == 1: the logsumexp; array borrowed) are what it
 * returned; d_output has output's shape. out_values (caller's array of 3) receives {dQuery,
 * dKey, dValue} with the shapes of query, key and value. No gradient flows to mask or bias. */
lathe_status_t lathe_fused_scaled_dot_product_attention_vjp(lathe_function_t fn, lathe_value_t query, lathe_value_t key,
                                                            lathe_value_t value, lathe_attention_layout layout,
                                                            const lathe_attention_config *config, lathe_value_t output,
                                                            const lathe_value_t *states, int n_states,
                                                            lathe_value_t d_output, lathe_value_t *out_values);
/* x [batch..., inFeatures] . w_qkv [inFeatures, query_dim + 2 * key_value_dim], split along the
 * last axis into query [batch..., query_dim], key and value [batch..., key_value_dim], each plus
 * its bias when given (bias_q [query_dim], bias_k and bias_v [key_value_dim]; NULL: none). One
 * float dtype throughout; dims > 0. out_values (caller's array of 3) receives {query, key, value}. */
lathe_status_t lathe_fused_attention_qkv_projection(lathe_function_t fn, lathe_value_t x, lathe_value_t w_qkv,
                                                    lathe_value_t bias_q, lathe_value_t bias_k, lathe_value_t bias_v,
                                                    int64_t query_dim, int64_t key_value_dim,
                                                    lathe_value_t *out_values);

/* ---------------------------------------------------------------------------------------------
 * Executables. */

lathe_executable_t lathe_executable_retain(lathe_executable_t exec); /* returns exec */
void lathe_executable_release(lathe_executable_t exec);
void lathe_executable_free(lathe_executable_t exec); /* = lathe_executable_release */
int lathe_executable_num_inputs(lathe_executable_t exec);
int lathe_executable_num_outputs(lathe_executable_t exec);
/* Names and shapes owned by the executable. */
const char *lathe_executable_input_name(lathe_executable_t exec, int i);
lathe_status_t lathe_executable_input_shape(lathe_executable_t exec, int i, lathe_shape *out_shape);
lathe_status_t lathe_executable_output_shape(lathe_executable_t exec, int i, lathe_shape *out_shape);

/* Compilation counters of an executable with dynamic axes: one program is compiled per binding
 * of its axis names and kept in a bounded LRU cache. */
typedef struct lathe_executable_stats {
  int64_t compiles;  /* programs compiled, the first one included */
  int64_t hits;      /* executions that found their binding's program cached */
  int64_t evictions; /* programs dropped from the full cache */
  int cached;        /* programs in the cache now */
  int capacity;      /* the cache's bound */
  /* AutoSharding: whether the program runs partitioned (one program of local shapes per device),
   * else why not (text that lives as long as the executable; NULL for other programs); ops that
   * run whole on every device: on gathered operands for want of a partitioning rule, and every
   * RNGBitGenerator (a split would change its values); collectives the partitioner inserted */
  bool partitioned;
  const char *partition_declined;
  int partition_fallbacks;
  int partition_collectives;
  const char *partition_fallback_ops; /* the fallbacks' op names, comma-separated ("" for none) */
} lathe_executable_stats;
lathe_status_t lathe_executable_get_stats(lathe_executable_t exec, lathe_executable_stats *out_stats);
/* Bytes of the planned arena one execution of exec's program takes (all functions; the main
 * program as compiled, or the last specialisation with dynamic axes); 0 when nothing is planned.
 * The executable keeps arenas between executions (a few per device). */
lathe_status_t lathe_executable_arena_bytes(lathe_executable_t exec, int64_t *out_bytes);

/* Runs the executable. inputs are borrowed, except those with donate[i] (donate may be NULL):
 * their memory passes to the execution and the handle becomes donated (release it as usual; any
 * other use is an error). Input count, dtypes, shapes and devices are checked before anything
 * runs. The execution runs on default_device, or on the device the builder was assigned
 * (lathe_builder_assign_devices); every input must be on that device (lathe_buffer_copy_to_device
 * moves one). outputs (array of n_outputs, written on success) are new buffers on that device,
 * owned by the caller. On an asynchronous backend the call returns once the work is queued: an error of the
 * work itself surfaces when an output is read or waited for. */
lathe_status_t lathe_executable_execute(lathe_executable_t exec, const lathe_buffer_t *inputs, const bool *donate,
                                        int n_inputs, int default_device, lathe_buffer_t *outputs, int n_outputs);

#ifdef __cplusplus
}
#endif
#endif /* LATHE_H */
