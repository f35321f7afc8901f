/* program.h -- the compiled form of a builder that every device consumes: functions lowered to
 * steps over value slots, fusion regions, liveness and a memory plan, decided once here so no
 * device redoes them (docs/ARCHITECTURE.md, "Compile pipeline").
 *
 * A program points into the builder's nodes (ops, attributes, constants), which must outlive it;
 * everything else lives in the program's own arena. Immutable once built: devices share it
 * between threads. */
#ifndef LATHE_PROGRAM_H
#define LATHE_PROGRAM_H

#include "graph.h"

enum { LATHE_PSLOT_PARAM = 1, LATHE_PSLOT_CONST, LATHE_PSLOT_VALUE };

/* One value of a function. */
typedef struct lathe_pslot {
  lathe_shape shape;
  const lathe_node *node; /* PARAM: the parameter or capture node; CONST: the constant; VALUE: the op */
  int result;             /* VALUE: which result of node */
  int kind;               /* LATHE_PSLOT_* */
  int def;                /* defining step (-1 for parameters and constants) */
  int last_use;           /* last step reading it; -1: never read; n_steps: returned by the function */
  int64_t offset;         /* byte offset in the function's arena, or -1 when not planned */
  int64_t nbytes;         /* byte size (-1 while dynamic) */
} lathe_pslot;

/* Where a region reads an input slot. */
enum {
  LATHE_PACCESS_FULL = 0, /* same dims as the iteration space: element i */
  LATHE_PACCESS_SCALAR,   /* rank 0: element 0 everywhere */
  LATHE_PACCESS_STRIDED,  /* element sum(idx[d] * strides[d]) (0 where it broadcasts) */
};

typedef struct lathe_pinput {
  int slot;
  int access;
  int64_t strides[LATHE_MAX_RANK]; /* STRIDED: element strides per iteration axis */
} lathe_pinput;

#define LATHE_PMEMBER_MAX_IN 3

typedef struct lathe_pmember {
  const lathe_node *node;
  int n_in;
  /* operand k: >= 0 a member index (earlier in the list), < 0 the region input -(in[k] + 1) */
  int in[LATHE_PMEMBER_MAX_IN];
  int out_slot;  /* >= 0: the member's value escapes the region into this slot */
  bool identity; /* a BroadcastInDim (ROWS: or a Reshape): its value is its input, no computation */
  bool row;      /* ROWS: one value per row (a reduction's result and what is computed from such
                  * values alone); its slot holds the rows' values in row order */
} lathe_pmember;

enum { LATHE_PREGION_LOOP = 1, LATHE_PREGION_REDUCE, LATHE_PREGION_ROWS };

/* A fusion region. LOOP: members evaluated element by element over one iteration space, in
 * order (operands before users); members that escape write full-size slots. REDUCE: an optional
 * LOOP prologue producing the reduction's operand, the reduction, and an optional LOOP epilogue
 * over the reduction's result -- a device that cannot fuse a reduction runs the three in turn,
 * through the internal slots reduce_in and reduce_out.
 * ROWS (only for a device that asks: lathe_program_options.rows_max): reductions over the
 * trailing axes of `shape` with the elementwise work before and after them, at two levels: the
 * members over `shape` (one value per element) and the `row` members (one value per row, the
 * rows indexed by the leading row_axes axes), which members over `shape` read broadcast along
 * the trailing axes. Inputs are read as in a LOOP over `shape`; a row member's inputs are ROW
 * patterns (strides 0 on every trailing axis) or scalars, and every input's trailing strides
 * walk the trailing axes as one axis. Members are in order (operands first); no slot is
 * internal, and results never share an input's memory. A device runs it as one kernel. */
typedef struct lathe_pregion {
  int kind;
  lathe_shape shape; /* LOOP, ROWS: the iteration space (dims; dtype of the root) */
  int row_axes;      /* ROWS: the leading axes of shape that index rows */
  lathe_pmember *members;
  int n_members;
  lathe_pinput *inputs;
  int n_inputs;
  /* REDUCE */
  int prologue, epilogue; /* indices of LOOP regions in the function's list (not steps), or -1 */
  const lathe_node *reduce;
  int reduce_in, reduce_out; /* slots */
} lathe_pregion;

/* One thing a function does, in order. */
typedef struct lathe_pstep {
  const lathe_node *node; /* the op; for a region its root */
  int region;             /* the region this step runs, or -1 */
  int n_in, n_out;
  int *in;  /* operand slots; for control ops the hidden capture slots follow the operands */
  int *out; /* result slots */
  int *dead; /* slots whose last use is this step (also results nobody reads) */
  int n_dead;
  /* control ops (While, If, Sort, Call): for each sub-function node->a.fn[k], its index in the
   * program and where its captured values start in in[] (they are passed after its own
   * arguments as extra parameters) */
  int n_sub;
  int sub_fn[LATHE_MAX_SUBFNS];
  int sub_cap[LATHE_MAX_SUBFNS];
} lathe_pstep;

typedef struct lathe_pfunc {
  const lathe_function *fn;
  int n_params;     /* declared parameters, then one per captured value */
  int n_declared;   /* declared parameters */
  int *params;      /* slots */
  int n_outputs;
  int *outputs;     /* slots (a slot may be returned twice) */
  lathe_pslot *slots;
  int n_slots;
  lathe_pstep *steps;
  int n_steps;
  lathe_pregion *regions;
  int n_regions;
  int64_t arena_bytes; /* planned intermediates; 0 when nothing is planned */
  bool dynamic;        /* some slot has a dynamic axis: no memory plan */
} lathe_pfunc;

typedef struct lathe_program_options {
  bool fuse;         /* build fusion regions */
  bool plan_memory;  /* give static intermediates arena offsets */
  int64_t alignment; /* of arena offsets (a power of two >= 16) */
  bool alias_reshape; /* a Reshape takes its operand's bytes (the device then skips the copy when
                       * they are the same memory): where the operand dies, and where it lives on
                       * (both keep the bytes until the later of their last uses) */
  bool fuse_activations; /* FusedActivation and its VJP (not the gated SwiGLU) join LOOP regions as
                          * members (a device whose region tiles run them) */
  int64_t rows_max;   /* > 0: build ROWS regions over rows of up to this many elements */
  int64_t rows_lone;  /* > 0: a lone reduction with elementwise work before or after it also
                       * forms a ROWS region when it has at least this many rows (enough to keep
                       * the device busy a group per row) */
  int64_t rows_long;  /* > rows_max: rows of up to this many elements form ROWS regions too when
                       * there are at least rows_lone of them (the device walks such a row in
                       * chunks, once per reduction level: a vocabulary's softmax and loss) */
  struct lathe_trace *trace; /* set by the runtime while tracing: the phases of each function's
                              * lowering are recorded there (src/core/trace.h) */
  bool remat; /* a large value computed elementwise from small ones only (a one-hot of labels,
               * a broadcast) is computed again for each later reader instead of kept alive
               * between them (program.c, "recomputing cheap values") */
  const char *dump_dir;       /* set by the runtime while dumping: a device notes its run-time
                               * choices there (lathe_profile_note) */
} lathe_program_options;

typedef struct lathe_program {
  lathe_arena arena;
  const struct lathe_builder *builder; /* valid during the compile only (the caller may free it) */
  const char *name;                    /* the builder's name (graph arena: lives as the nodes do) */
  lathe_pfunc *fns; /* main first, then every other returned function */
  int n_fns;
  lathe_program_options options;
} lathe_program;

lathe_status_t lathe_program_build(const struct lathe_builder *b, const lathe_program_options *opt,
                                   lathe_program **out);
void lathe_program_free(lathe_program *p);

/* Dumps (dump.c), for people reading what the compile made: the builder's functions as built
 * (text, and a Graphviz DOT graph), and the program after the passes, fusion regions marked, with
 * each function's memory plan (arena offsets and sizes). Write to f; I/O errors are the caller's
 * to see (ferror). */
void lathe_dump_builder_text(const struct lathe_builder *b, FILE *f);
void lathe_dump_builder_dot(const struct lathe_builder *b, FILE *f);
void lathe_dump_program_text(const lathe_program *p, FILE *f);
void lathe_dump_program_dot(const lathe_program *p, FILE *f);
/* The index of fn in p, or -1. */
int lathe_program_fn_index(const lathe_program *p, const lathe_function *fn);
const lathe_pfunc *lathe_program_main(const lathe_program *p);

/* Statistics for tests and docs: steps, regions and fused members over every function. */
typedef struct lathe_program_stats {
  int steps, regions, loop_regions, reduce_regions, rows_regions, fused_members, planned_slots;
  int64_t arena_bytes;
} lathe_program_stats;
void lathe_program_get_stats(const lathe_program *p, lathe_program_stats *out);

#endif
