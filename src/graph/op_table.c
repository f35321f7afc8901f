/* op_table.c -- the op facts of include/lathe_ops.def: kind and flags per op.
 *
 * The FLAGS column is written with short names (EW|FUSE|...); they are defined here only, as
 * local enum constants, so they never reach another translation unit or the public header. */
#include "graph.h"

static const lathe_op_kind op_kinds[] = {
#define LATHE_OP(ENUM, GoName, c_name, n, KIND, SIG, FLAGS) [LATHE_OP_##ENUM] = LATHE_KIND_##KIND,
#include "lathe_ops.def"
#undef LATHE_OP
};
_Static_assert(sizeof op_kinds / sizeof op_kinds[0] == LATHE_OP_COUNT, "op table");

enum {
  NONE = 0,
  EW = LATHE_OPF_EW,
  FUSE = LATHE_OPF_FUSE,
  INPLACE = LATHE_OPF_INPLACE,
  CSE = LATHE_OPF_CSE,
  SIDE = LATHE_OPF_SIDE,
  PACKED = LATHE_OPF_PACKED,
};

static const uint32_t op_flags[] = {
#define LATHE_OP(ENUM, GoName, c_name, n, KIND, SIG, FLAGS) [LATHE_OP_##ENUM] = (uint32_t)(FLAGS),
#include "lathe_ops.def"
#undef LATHE_OP
};
_Static_assert(sizeof op_flags / sizeof op_flags[0] == LATHE_OP_COUNT, "op table");

lathe_op_kind lathe_op_kind_of(lathe_op op) { return (int)op >= 0 && op < LATHE_OP_COUNT ? op_kinds[op] : LATHE_KIND_INTERNAL; }

uint32_t lathe_op_flags(lathe_op op) { return (int)op >= 0 && op < LATHE_OP_COUNT ? op_flags[op] : 0; }
