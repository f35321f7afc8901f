/* test_op_table.c -- the op table's facts: flags against the decisions they replace (re-stated
 * here as they were made by hand before the FLAGS column), and the SIG and KIND columns. */
#include "graph/graph.h"
#include "testing.h"

static bool kind_is(lathe_op op, lathe_op_kind k) { return lathe_op_kind_of(op) == k; }

/* src/cpu/fusion.c `fusable` and src/cpu/device.c `may_run_in_place`, by op. */
static bool old_fusable(lathe_op op) {
  return kind_is(op, LATHE_KIND_UNARY) || kind_is(op, LATHE_KIND_BINARY) || kind_is(op, LATHE_KIND_COMPARE) ||
         kind_is(op, LATHE_KIND_SELECT) || op == LATHE_OP_CONVERT_DTYPE;
}
static bool old_may_run_in_place(lathe_op op) {
  switch (lathe_op_kind_of(op)) {
    case LATHE_KIND_UNARY:
    case LATHE_KIND_BINARY:
    case LATHE_KIND_COMPARE:
    case LATHE_KIND_SELECT: return true;
    default: return op == LATHE_OP_CONVERT_DTYPE;
  }
}
/* src/graph/passes.c `cse_candidate`. */
static bool old_cse_candidate(lathe_op op) {
  switch (op) {
    case LATHE_OP_PARAMETER:
    case LATHE_OP_CAPTURE:
    case LATHE_OP_OPTIMIZATION_BARRIER:
    case LATHE_OP_SCHEDULING_BARRIER:
    case LATHE_OP_ALL_REDUCE: return false;
    default: return true;
  }
}
/* src/cpu/device.c `packed_native`. */
static bool old_packed_native(lathe_op op) {
  return op == LATHE_OP_BITCAST || op == LATHE_OP_FUSED_QUANTIZED_DENSE || kind_is(op, LATHE_KIND_CONTROL) ||
         kind_is(op, LATHE_KIND_INTERNAL) || kind_is(op, LATHE_KIND_LEAF) || kind_is(op, LATHE_KIND_BARRIER);
}

TEST(op_flags_reproduce_old_decisions) {
  for (int i = 0; i < LATHE_OP_COUNT; i++) {
    lathe_op op = (lathe_op)i;
    const char *name = lathe_op_name(op);
    /* BroadcastInDim joins fusion regions in the compile pipeline; nothing else changes */
    CHECK(lathe_op_has(op, LATHE_OPF_FUSE) == (old_fusable(op) || op == LATHE_OP_BROADCAST_IN_DIM), "%s FUSE", name);
    CHECK(lathe_op_has(op, LATHE_OPF_INPLACE) == old_may_run_in_place(op), "%s INPLACE", name);
    CHECK(lathe_op_has(op, LATHE_OPF_CSE) == old_cse_candidate(op), "%s CSE", name);
    CHECK(lathe_op_has(op, LATHE_OPF_PACKED) == old_packed_native(op), "%s PACKED", name);
    CHECK(lathe_op_has(op, LATHE_OPF_SIDE) == (kind_is(op, LATHE_KIND_BARRIER) || kind_is(op, LATHE_KIND_COLLECTIVE)),
          "%s SIDE", name);
    /* elementwise: the fusable value ops, and FusedGelu (one operand, element by element) */
    CHECK(lathe_op_has(op, LATHE_OPF_EW) == (old_fusable(op) || op == LATHE_OP_FUSED_GELU), "%s EW", name);
    CHECK(!(lathe_op_has(op, LATHE_OPF_SIDE) && lathe_op_has(op, LATHE_OPF_CSE)), "%s: SIDE ops are never merged", name);
    CHECK((lathe_op_flags(op) & ~(uint32_t)(LATHE_OPF_EW | LATHE_OPF_FUSE | LATHE_OPF_INPLACE | LATHE_OPF_CSE |
                                            LATHE_OPF_SIDE | LATHE_OPF_PACKED)) == 0,
          "%s: unknown flag bits", name);
  }
  CHECK(lathe_op_flags(LATHE_OP_COUNT) == 0 && lathe_op_flags((lathe_op)-1) == 0, "ops out of range have no flags");
  CHECK(!lathe_op_has(LATHE_OP_COUNT, LATHE_OPF_CSE), "ops out of range have no flags");
  CHECK(lathe_op_kind_of(LATHE_OP_COUNT) == LATHE_KIND_INTERNAL, "ops out of range are INTERNAL");
}

TEST(op_table_sig_and_kinds) {
  bool kind_used[LATHE_KIND_COUNT] = {false};
#define LATHE_OP(ENUM, GoName, c_name, n, KIND, SIG, FLAGS)                                                     \
  do {                                                                                                          \
    lathe_op op = LATHE_OP_##ENUM;                                                                              \
    lathe_op_kind k = LATHE_KIND_##KIND;                                                                        \
    CHECK(lathe_op_kind_of(op) == k, "%s: kind", #ENUM);                                                         \
    kind_used[k] = true;                                                                                        \
    /* U and B are exactly the kinds lathe_unary and lathe_binary accept, with their operand counts */          \
    CHECK((strcmp(#SIG, "U") == 0) == (k == LATHE_KIND_UNARY), "%s: SIG U iff UNARY", #ENUM);                   \
    CHECK((strcmp(#SIG, "B") == 0) == (k == LATHE_KIND_BINARY || k == LATHE_KIND_COMPARE), "%s: SIG B", #ENUM); \
    CHECK(strcmp(#SIG, "U") != 0 || n == 1, "%s: U takes one operand", #ENUM);                                 \
    CHECK(strcmp(#SIG, "B") != 0 || n == 2, "%s: B takes two operands", #ENUM);                                \
    CHECK(strcmp(lathe_op_name(op), #GoName) == 0, "%s: name", #ENUM);                                          \
  } while (0);
#include "lathe_ops.def"
#undef LATHE_OP
  for (int k = 0; k < LATHE_KIND_COUNT; k++) CHECK(kind_used[k], "kind %d has no op", k);
  /* kinds.def: a family for every kind but COLLECTIVE and INTERNAL */
  int families = 0;
#define LATHE_KIND(NAME, family) LATHE_KIND_IF_FAMILY(family, families++;)
#include "graph/kinds.def"
#undef LATHE_KIND
  CHECK(families == LATHE_KIND_COUNT - 2, "%d kinds with a CPU family", families);
}
