/* graph.h -- the backend-independent IR: builders, functions, nodes, shape inference, passes.
 *
 * All graph memory (nodes, attribute arrays, names, constants) comes from one arena owned by a
 * reference-counted lathe_graph: the builder holds one reference and each compiled executable
 * another, so a builder may be freed while its executables live. Nodes are immutable once built. */
#ifndef LATHE_GRAPH_H
#define LATHE_GRAPH_H

#include <stdatomic.h>

#include "../core/core.h"

/* ---- op facts: the KIND and FLAGS columns of include/lathe_ops.def ---- */
typedef enum lathe_op_kind {
#define LATHE_KIND(NAME, family) LATHE_KIND_##NAME,
#include "kinds.def"
#undef LATHE_KIND
  LATHE_KIND_COUNT
} lathe_op_kind;

/* LATHE_KIND_IF_FAMILY(family, ...) expands to __VA_ARGS__ unless family is `none` (kinds.def). */
#define LATHE_KIND_IF_FAMILY(family, ...) LATHE_PP_CAT(LATHE_KIND_IF_, LATHE_KIND_HAS_FAMILY(family))(__VA_ARGS__)
#define LATHE_KIND_HAS_FAMILY(family) LATHE_PP_SECOND(LATHE_KIND_PROBE_##family, 1, ~)
#define LATHE_KIND_PROBE_none ~, 0
#define LATHE_KIND_IF_0(...)
#define LATHE_KIND_IF_1(...) __VA_ARGS__
#define LATHE_PP_SECOND(...) LATHE_PP_SECOND_(__VA_ARGS__)
#define LATHE_PP_SECOND_(a, b, ...) b
#define LATHE_PP_CAT(a, b) LATHE_PP_CAT_(a, b)
#define LATHE_PP_CAT_(a, b) a##b

/* One bit per name of the FLAGS column (lathe_ops.def documents each). */
typedef enum lathe_op_flag {
  LATHE_OPF_EW = 1u << 0,
  LATHE_OPF_FUSE = 1u << 1,
  LATHE_OPF_INPLACE = 1u << 2,
  LATHE_OPF_CSE = 1u << 3,
  LATHE_OPF_SIDE = 1u << 4,
  LATHE_OPF_PACKED = 1u << 5,
} lathe_op_flag;

lathe_op_kind lathe_op_kind_of(lathe_op op); /* INTERNAL for an op out of range */
uint32_t lathe_op_flags(lathe_op op);        /* 0 for an op out of range */
static inline bool lathe_op_has(lathe_op op, lathe_op_flag flag) { return (lathe_op_flags(op) & (uint32_t)flag) != 0; }

/* The dtype domain of an elementwise op, from ew.def's rows (DEFINED) and LATHE_EW_UNDEFINED
 * marks (UNDEFINED: the builder accepts it, every device reports it UNIMPLEMENTED). dt is the
 * first operand's dtype, as supports_op's: Where's condition (its values may have any dtype),
 * ConvertDType's source; sub-byte integers count as their class. Ops without rows in ew.def
 * (Bitcast, the non-elementwise ops) are NONE: the domain states nothing about them. */
typedef enum lathe_domain { LATHE_DOMAIN_NONE, LATHE_DOMAIN_UNDEFINED, LATHE_DOMAIN_DEFINED } lathe_domain;
lathe_domain lathe_op_domain(lathe_op op, lathe_dtype dt);
static inline bool lathe_op_accepts_dtype(lathe_op op, lathe_dtype dt) { return lathe_op_domain(op, dt) != LATHE_DOMAIN_NONE; }
/* The classes op accepts, bit 1u << LATHE_CLASS_<c> each (Where: its values'); 0 for an op
 * without rows in ew.def. */
unsigned lathe_op_domain_classes(lathe_op op);

/* Bump allocator: everything is freed at once with the graph. Zeroed memory. */
typedef struct lathe_arena_chunk lathe_arena_chunk;
typedef struct lathe_arena {
  lathe_arena_chunk *head;
} lathe_arena;
void *lathe_arena_alloc(lathe_arena *a, size_t n); /* NULL on OOM */
char *lathe_arena_strdup(lathe_arena *a, const char *s);
void lathe_arena_free(lathe_arena *a);

#define LATHE_MAX_LISTS 8
#define LATHE_MAX_IATTRS 8
#define LATHE_MAX_FATTRS 2
#define LATHE_MAX_SUBFNS 2

/* Op attribute storage. Code reads and writes it through the typed accessors of attrs.h,
 * generated from op_attrs.def (which says what each slot of each op means); only the generic
 * passes (CSE's comparison, specialisation's copy) touch the raw slots. */
typedef struct lathe_attrs {
  int64_t i[LATHE_MAX_IATTRS];           /* scalar attributes */
  double f[LATHE_MAX_FATTRS];            /* float attributes */
  int64_t *list[LATHE_MAX_LISTS];        /* int lists (arena) */
  int list_len[LATHE_MAX_LISTS];
  struct lathe_function *fn[LATHE_MAX_SUBFNS]; /* sub-functions */
  void *data;                            /* constant bytes (arena), 64-byte aligned */
  size_t data_size;
} lathe_attrs;

/* Distribution of a program over several devices (distribution.c). */
enum { LATHE_DIST_NONE = 0, LATHE_DIST_SPMD, LATHE_DIST_AUTO_SHARDING };
#define LATHE_MAX_MESH_RANK 8

typedef struct lathe_mesh_def {
  const char *name;
  int rank;
  int64_t sizes[LATHE_MAX_MESH_RANK];
  const char *axis_names[LATHE_MAX_MESH_RANK];
  int n_devices;  /* product of sizes */
  int *logical;   /* mesh position -> index in the builder's device assignment */
} lathe_mesh_def;

/* A tensor's sharding: per tensor axis, the mesh axes (indices) it is split over, in order. */
typedef struct lathe_sharding_def {
  int mesh;
  int rank;
  int n_axes[LATHE_MAX_RANK];
  int axes[LATHE_MAX_RANK][LATHE_MAX_MESH_RANK];
} lathe_sharding_def;

typedef struct lathe_node {
  int id; /* index in its function's node list: frames are indexed by it */
  lathe_op op;
  struct lathe_function *fn;
  lathe_shape shape;       /* result shape; multi-result ops: dtype INVALID, see out_shapes */
  int n_operands;          /* the op's own operands */
  int n_in;                /* operands plus hidden inputs (values captured by sub-functions) */
  struct lathe_node **in;
  int n_out;               /* 1, or the number of results of a multi-result op */
  lathe_shape *out_shapes; /* n_out shapes when n_out > 1 (or the op is multi-result) */
  bool multi;              /* results are read through TUPLE_ELEMENT nodes (lathe_attr_tuple_element_index) */
  struct lathe_node *captured; /* CAPTURE: the ancestor function's node */
  const char *name;            /* PARAMETER: its name */
  int param_index;             /* PARAMETER: position */
  const lathe_sharding_def *sharding; /* PARAMETER of an auto-sharded main: its split (NULL: replicated) */
  lathe_attrs a;
} lathe_node;

typedef struct lathe_graph {
  atomic_int refs;
  lathe_arena arena;
} lathe_graph;

typedef struct lathe_function {
  struct lathe_builder *builder;
  const char *name;
  struct lathe_function *parent;
  lathe_node **nodes;
  int n_nodes, cap_nodes;
  lathe_node **params;
  int n_params, cap_params;
  lathe_node **captures; /* CAPTURE nodes of this function */
  int n_captures, cap_captures;
  lathe_node **outputs;
  int n_outputs;
  bool returned;
} lathe_function;

struct lathe_builder {
  struct lathe_backend *backend; /* a reference */
  int assigned_device;           /* one assigned device; -1: the executions' default device */
  int distribution;              /* LATHE_DIST_* */
  int n_replicas;                /* devices one execution runs on: 1 unless distributed */
  int *devices;                  /* the device assignment (n_assigned ordinals, arena), or NULL */
  int n_assigned;
  lathe_mesh_def *meshes;        /* AutoSharding */
  int n_meshes;
  const lathe_sharding_def **output_shardings; /* AutoSharding: per main output (NULL: replicated) */
  bool collectives_in_process;   /* collectives built from now on: lathe_builder_collectives_in_process */
  bool partitioned;              /* made by the AutoSharding partitioner (partition.c), with */
  int partition_fallbacks;       /* ops run whole: on gathered operands, or RNGBitGenerator */
  int partition_collectives;     /* and the collectives the partitioner inserted */
  const char *partition_fallback_ops; /* the fallbacks' op names, comma-separated (arena) */
  lathe_graph *graph;
  const char *name;
  lathe_function *main_fn;
  lathe_function **fns; /* every function, main first */
  int n_fns, cap_fns;
};

void lathe_graph_retain(lathe_graph *g);
void lathe_graph_release(lathe_graph *g);

/* Node creation used by every op builder: checks fn, makes operands usable in fn (capturing
 * values of ancestors), allocates the node and its operand array. */
lathe_status_t lathe_node_new(lathe_function *fn, lathe_op op, lathe_value_t const *operands, int n_operands,
                              lathe_node **out);
/* Gives a multi-result node n_out result shapes (arena). */
lathe_status_t lathe_node_set_outputs(lathe_node *n, const lathe_shape *shapes, int n_out);
/* Appends the captured values of sub-function sub as hidden inputs of n. */
lathe_status_t lathe_node_add_captures(lathe_node *n, lathe_function *sub);
/* Finishes a node: interns axis names of its shape, runs CSE lookup is done at compile. */
lathe_status_t lathe_node_commit(lathe_node *n, lathe_value_t *out);
/* Projections of a multi-result node into values. */
lathe_status_t lathe_node_commit_multi(lathe_node *n, lathe_value_t *out_values);
/* Checks a value handle; returns a status naming op on a NULL or foreign value. */
lathe_status_t lathe_check_value(const char *op, lathe_function *fn, lathe_value_t v, const char *what);
lathe_status_t lathe_check_fn(const char *op, lathe_function_t fn);
/* Whether a dynamic axis name is bound by some parameter of fn or of its ancestors (ops that make
 * a shape from nothing, Iota and RNGBitGenerator, may only name those). */
bool lathe_axis_name_known(const lathe_function *fn, const char *name);

#include "attrs.h"

/* Collectives (distribution.c). The members of replica r's group of collective n, in group order,
 * into members (room for n_replicas); returns their count. */
int lathe_collective_group(const lathe_node *n, int r, int n_replicas, int *members);
/* The processes a collective's group spans (the job's, 1 outside a job): group sizes of the
 * shape rules count them (docs/ARCHITECTURE.md "Collectives"). */
int lathe_collective_processes(void);
/* Whether collective n's group stays inside this process in a job: CollectivePermute's pairs, and
 * groups built in-process (lathe_builder_collectives_in_process). */
bool lathe_collective_in_process(const lathe_node *n);

/* Control-flow facts every device lowers alike. Whether Sort node n's comparator is exactly a
 * strict comparison of its first two parameters (LessThan/GreaterThan, plain or TotalOrder), so
 * a device may run a plain key sort: sets the direction and whether NaNs and zeros follow
 * totalOrder. */
bool lathe_sort_comparator_order(const lathe_node *n, bool *desc, bool *total);

/* Shape rules shared by the families. */
lathe_status_t lathe_infer_broadcast(const char *op, const lathe_shape *a, const lathe_shape *b, lathe_shape *out);
/* The same rule over n operands (Where's three); what[k] labels operand k in messages (NULL:
 * none). The result has s[0]'s dtype. */
lathe_status_t lathe_infer_broadcast_n(const char *op, const char *const *what, const lathe_shape *const *s, int n,
                                       lathe_shape *out);
lathe_status_t lathe_check_axis(const char *op, const char *what, int64_t axis, int rank);
/* Whether axis i of a and axis j of b have one size under every binding of the dynamic axes:
 * equal static sizes, or both dynamic with the same name. Kernels rely on it where sizes pair. */
bool lathe_same_axis(const lathe_shape *a, int i, const lathe_shape *b, int j);
/* Same dtype, rank, and every axis the same in that sense (lathe_shape_equal ignores names). */
bool lathe_same_shape(const lathe_shape *a, const lathe_shape *b);

/* compute's axis-name conventions: "?" (LATHE_ANONYMOUS_AXIS) is a dynamic axis that matches
 * nothing, itself included; "=p1+p2+..." (LATHE_SYMBOLIC_AXIS_PREFIX) is the sum of its parts,
 * each a decimal size or a bound axis name -- what Concatenate names a dynamic concat axis. */
#define LATHE_ANONYMOUS_AXIS "?"
#define LATHE_SYMBOLIC_AXIS_PREFIX '='
bool lathe_axis_anonymous(const char *name);
/* The size of dynamic axis `axis` (named `name`) of op's result under a binding that get(ctx, name)
 * reads (-1: unbound): the bound size, or a symbolic name's sum of parts (where the inputs also
 * bind the whole name, the two must agree). An unnamed or anonymous axis, or an unbound name or
 * part, is INVALID_ARGUMENT naming op and axis. */
typedef int64_t (*lathe_axis_get_fn)(const void *ctx, const char *name);
lathe_status_t lathe_axis_resolve(const char *op, int axis, const char *name, lathe_axis_get_fn get, const void *ctx,
                                  int64_t *out);

/* Distribution: the shape device `index` (in the device assignment) holds of a value of global
 * shape g split by sharding (NULL: replicated), where it starts in g (offsets per axis) and how
 * much of it lies inside g (out_valid, may be NULL). An axis of size n split in k parts gives
 * every device ceil(n/k) elements, as XLA's tiles do: where k does not divide n the last shards
 * hold padding (valid < shard size; zeros in outputs, ignored in inputs). */
void lathe_shard_geometry(const struct lathe_builder *b, const lathe_sharding_def *sharding, int index,
                          const lathe_shape *g, lathe_shape *out_shard, int64_t *out_offsets, int64_t *out_valid);
/* The checks of a distributed builder before compile (assignment size, devices). */
lathe_status_t lathe_distribution_check(const struct lathe_builder *b);

/* Compile-time passes: the ordered schedule of a function after dead-code removal and
 * common-subexpression elimination. remap[id] gives the canonical node id for CSE'd nodes. */
typedef struct lathe_schedule {
  lathe_function *fn;
  int n_nodes;          /* fn->n_nodes at compile time */
  int *order;           /* ids of live nodes in execution order */
  int n_order;
  int *remap;           /* id -> canonical id (itself if kept) */
  int *last_use;        /* id -> position in order of its last consumer (-1: none; n_order: an output) */
} lathe_schedule;

lathe_status_t lathe_schedule_build(lathe_function *fn, lathe_schedule *out);
void lathe_schedule_free(lathe_schedule *s);

/* Host evaluation of small integer values (fold.c): the size values of the dynamic-size ops.
 * lookup answers first for values known otherwise (read back from a run; UNKNOWN: evaluate
 * n). OK: out holds the value; NO: not foldable (the device must compute it); PENDING: it
 * depends on a size not known yet. budget bounds the work (then NO). */
#define LATHE_FOLD_MAX LATHE_MAX_RANK
typedef enum { LATHE_FOLD_OK, LATHE_FOLD_NO, LATHE_FOLD_PENDING, LATHE_FOLD_UNKNOWN } lathe_fold_status;
typedef struct lathe_folded {
  lathe_dtype dtype;
  int n;
  int64_t v[LATHE_FOLD_MAX]; /* signed values sign-extended, unsigned ones as their bits */
} lathe_folded;
typedef struct lathe_fold_ctx {
  lathe_fold_status (*lookup)(struct lathe_fold_ctx *c, const lathe_node *n, lathe_folded *out);
  void *user;
  int budget;
} lathe_fold_ctx;
lathe_fold_status lathe_fold_value(lathe_fold_ctx *c, const lathe_node *n, lathe_folded *out);

/* Whether op is one of the dynamic-size ops that specialisation resolves and lowers to its static
 * op (DynamicBroadcastInDim, DynamicIota, DynamicPad; DynamicReshape when a value sizes an axis),
 * so that no device runs it. */
bool lathe_node_lowered_by_specialization(const lathe_node *n);
/* The static op a dynamic-size op becomes (op itself for the others): a device supports
 * DynamicBroadcastInDim, DynamicIota and DynamicPad where it supports that one. */
lathe_op lathe_op_lowered_form(lathe_op op);

/* Size values read back from a run: source main-function node ids and their values. */
typedef struct lathe_size_values {
  const int *ids;
  const int64_t *values;
  int n;
} lathe_size_values;
#define LATHE_MAX_SIZE_VALUES 64 /* size values one run computes (more take further runs) */

/* Dynamic shapes: a copy of b's functions with every dynamic axis resolved from the binding
 * names[i] -> sizes[i], sizes given by values folded (or taken from known, which may be NULL),
 * and the dynamic-size ops lowered to static ones. Where a size value depends on tensor contents
 * (and is not in known), *out_n_needed > 0: the copy is then a program that computes those
 * values (its main function returns them; their source node ids in out_needed, room for
 * LATHE_MAX_SIZE_VALUES), to run first. The copy's nodes share attribute memory with b's graph,
 * which must outlive it. Free the copy with lathe_builder_free. */
lathe_status_t lathe_builder_specialize(struct lathe_builder *b, const char *const *names, const int64_t *sizes,
                                        int n_bound, const lathe_size_values *known, int *out_needed, int *out_n_needed,
                                        struct lathe_builder **out);

#endif
