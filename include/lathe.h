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

/* Fills *out with dtype and dims (axis names NULL). Fails on rank > LATHE_MAX_RANK. */
lathe_status_t lathe_shape_make(lathe_dtype dtype, int rank, const int64_t *dims, lathe_shape *out);
int64_t lathe_shape_num_elements(const lathe_shape *shape); /* -1 if any axis is dynamic */
int64_t lathe_shape_byte_size(const lathe_shape *shape);    /* packed size; -1 if dynamic */
bool lathe_shape_is_dynamic(const lathe_shape *shape);
bool lathe_shape_equal(const lathe_shape *a, const lathe_shape *b); /* dtype and dims */

/* ---------------------------------------------------------------------------------------------
 * Ops: the op table (lathe_ops.def) as an enum. */

typedef enum lathe_op {
#define LATHE_OP(ENUM, GoName, c_name, n_operands, KIND) LATHE_OP_##ENUM,
#include "lathe_ops.def"
#undef LATHE_OP
  LATHE_OP_COUNT
} lathe_op;

const char *lathe_op_name(lathe_op op); /* GoMLX name without "OpType" ("DotGeneral"); static */
/* Looks an op up by its GoMLX name; LATHE_OP_COUNT if unknown. */
lathe_op lathe_op_from_name(const char *name);

/* ---------------------------------------------------------------------------------------------
 * Backends. Configs: "lathe", "lathe:cpu", "lathe:cpu,threads=N". Unknown names or options
 * are INVALID_ARGUMENT listing the known ones. */

typedef struct lathe_backend *lathe_backend_t; /* owned by the caller; thread-safe */

lathe_status_t lathe_backend_new(const char *config, lathe_backend_t *out_backend);
/* Frees the backend. Buffers and executables of the backend must be freed before it. */
void lathe_backend_free(lathe_backend_t backend);
const char *lathe_backend_name(lathe_backend_t backend);        /* "lathe"; owned by backend */
const char *lathe_backend_config(lathe_backend_t backend);      /* normalised config; owned by backend */
const char *lathe_backend_description(lathe_backend_t backend); /* owned by backend */
int lathe_backend_num_devices(lathe_backend_t backend);
const char *lathe_backend_device_description(lathe_backend_t backend, int device); /* owned by backend */
/* Whether the backend executes op on operands of dtype (capabilities are this query). */
bool lathe_backend_supports_op(lathe_backend_t backend, lathe_op op, lathe_dtype dtype);
bool lathe_backend_supports_dtype(lathe_backend_t backend, lathe_dtype dtype);
bool lathe_backend_supports_dynamic_axes(lathe_backend_t backend);
/* Whether buffers are host memory the caller may read and write in place. */
bool lathe_backend_has_shared_buffers(lathe_backend_t backend);

/* ---------------------------------------------------------------------------------------------
 * Buffers: device memory holding one tensor. */

typedef struct lathe_buffer *lathe_buffer_t; /* owned by the caller; freed with lathe_buffer_free */

/* Copies nbytes (must equal lathe_shape_byte_size(shape)) from data (borrowed). */
lathe_status_t lathe_buffer_from_host(lathe_backend_t backend, int device, const lathe_shape *shape,
                                      const void *data, size_t nbytes, lathe_buffer_t *out_buffer);
/* A buffer whose memory the caller reads and writes in place through *out_data (owned by the
 * buffer, 64-byte aligned, valid until the buffer is freed or donated). Requires shared buffers. */
lathe_status_t lathe_buffer_new_shared(lathe_backend_t backend, int device, const lathe_shape *shape,
                                       lathe_buffer_t *out_buffer, void **out_data);
/* Copies the contents into dst (borrowed); nbytes must equal the buffer's byte size. */
lathe_status_t lathe_buffer_to_host(lathe_buffer_t buffer, void *dst, size_t nbytes);
/* The host pointer of a shared buffer (owned by the buffer), or FAILED_PRECONDITION. */
lathe_status_t lathe_buffer_data(lathe_buffer_t buffer, void **out_data);
lathe_status_t lathe_buffer_shape(lathe_buffer_t buffer, lathe_shape *out_shape);
lathe_status_t lathe_buffer_device(lathe_buffer_t buffer, int *out_device);
lathe_status_t lathe_buffer_copy_to_device(lathe_buffer_t buffer, int device, lathe_buffer_t *out_buffer);
/* Whether the buffer's memory is gone (donated to an execution, or failed). */
bool lathe_buffer_is_donated(lathe_buffer_t buffer);
void lathe_buffer_free(lathe_buffer_t buffer);

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
typedef struct lathe_executable *lathe_executable_t; /* owned by the caller; thread-safe */
lathe_status_t lathe_builder_compile(lathe_builder_t builder, lathe_executable_t *out_exec);

/* ---------------------------------------------------------------------------------------------
 * Op builders. Each validates its operands and attributes and infers the result shape.
 * Array arguments are borrowed. */

/* One operand, one result: lathe_abs(fn, x, &out), ... (the UNARY kind of lathe_ops.def). */
lathe_status_t lathe_unary(lathe_function_t fn, lathe_op op, lathe_value_t x, lathe_value_t *out);
/* Two operands with GoMLX broadcasting (equal ranks; size-1 axes or a scalar broadcast). */
lathe_status_t lathe_binary(lathe_function_t fn, lathe_op op, lathe_value_t lhs, lathe_value_t rhs,
                            lathe_value_t *out);
#define LATHE_UNARY(c_name) lathe_status_t lathe_##c_name(lathe_function_t fn, lathe_value_t x, lathe_value_t *out);
#define LATHE_BINARY(c_name) \
  lathe_status_t lathe_##c_name(lathe_function_t fn, lathe_value_t lhs, lathe_value_t rhs, lathe_value_t *out);
#define LATHE_OP(ENUM, GoName, c_name, n, KIND) LATHE_DECL_##KIND(c_name)
#define LATHE_DECL_UNARY(c_name) LATHE_UNARY(c_name)
#define LATHE_DECL_BINARY(c_name) LATHE_BINARY(c_name)
#define LATHE_DECL_COMPARE(c_name) LATHE_BINARY(c_name)
#define LATHE_DECL_LEAF(c_name)
#define LATHE_DECL_CONVERT(c_name)
#define LATHE_DECL_SELECT(c_name)
#define LATHE_DECL_REDUCE(c_name)
#define LATHE_DECL_LAYOUT(c_name)
#define LATHE_DECL_DOT(c_name)
#define LATHE_DECL_CONV(c_name)
#define LATHE_DECL_WINDOW(c_name)
#define LATHE_DECL_INDEX(c_name)
#define LATHE_DECL_CONTROL(c_name)
#define LATHE_DECL_NUMERIC(c_name)
#define LATHE_DECL_DYNSHAPE(c_name)
#define LATHE_DECL_BARRIER(c_name)
#define LATHE_DECL_FUSED(c_name)
#define LATHE_DECL_COLLECTIVE(c_name)
#define LATHE_DECL_INTERNAL(c_name)
#include "lathe_ops.def"
#undef LATHE_OP

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

/* op is one of the REDUCE_* ops; axes are distinct, any order; n_axes == 0 reduces nothing. */
lathe_status_t lathe_reduce(lathe_function_t fn, lathe_op op, lathe_value_t x, const int *axes, int n_axes,
                            lathe_value_t *out);
/* Index of the min/max along axis, as output_dtype (an integer dtype). NaN wins; ties take the
 * first index. */
lathe_status_t lathe_arg_min_max(lathe_function_t fn, lathe_value_t x, int axis, lathe_dtype output_dtype,
                                 bool is_min, lathe_value_t *out);

lathe_status_t lathe_reshape(lathe_function_t fn, lathe_value_t x, const int64_t *dims, int rank, lathe_value_t *out);
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

/* Generalised matrix product. Result axes: batch axes, then lhs cross axes, then rhs cross axes.
 * accumulator_dtype / output_dtype may be LATHE_DTYPE_INVALID (defaults: the operands' dtype). */
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


/* ---- per-family sections: each op family adds its builders below its own marker ---- */
/* [family: index] */
/* [family: conv] */
/* [family: window] */
/* [family: numeric] */
/* [family: fused] */
/* [family: dynshape] */
/* [family: barrier] */

/* ---------------------------------------------------------------------------------------------
 * Executables. */

void lathe_executable_free(lathe_executable_t exec);
int lathe_executable_num_inputs(lathe_executable_t exec);
int lathe_executable_num_outputs(lathe_executable_t exec);
/* Names and shapes owned by the executable. */
const char *lathe_executable_input_name(lathe_executable_t exec, int i);
lathe_status_t lathe_executable_input_shape(lathe_executable_t exec, int i, lathe_shape *out_shape);
lathe_status_t lathe_executable_output_shape(lathe_executable_t exec, int i, lathe_shape *out_shape);

/* Runs the executable. inputs are borrowed, except those with donate[i] (donate may be NULL):
 * their memory passes to the execution and the handle becomes donated (free it as usual; any
 * other use is an error). Input count, dtypes and shapes are checked before anything runs.
 * outputs (array of n_outputs, written on success) are new buffers owned by the caller.
 * default_device picks the device for outputs when no input says. */
lathe_status_t lathe_executable_execute(lathe_executable_t exec, const lathe_buffer_t *inputs, const bool *donate,
                                        int n_inputs, int default_device, lathe_buffer_t *outputs, int n_outputs);

#ifdef __cplusplus
}
#endif
#endif /* LATHE_H */
