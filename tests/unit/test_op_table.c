/* test_op_table.c -- the op table's facts: flags against the decisions they replace (re-stated
 * here as they were made by hand before the FLAGS column), the SIG and KIND columns, and the
 * attribute table (src/graph/op_attrs.def): slots in range, no slot shared within a group, every
 * group naming real ops; typed accessors read back what the builders stored; and the dtype
 * domains of ew.def. */
#include "cpu/cpu.h"
#include "graph/ew.h"
#include "graph/graph.h"
#include "testing.h"

static bool kind_is(lathe_op op, lathe_op_kind k) { return lathe_op_kind_of(op) == k; }

/* The hand-written `fusable` (of the former src/cpu/fusion.c) and `may_run_in_place` (then in
 * src/cpu/device.c), by op. */
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
    case LATHE_OP_ALL_REDUCE:
    case LATHE_OP_ALL_GATHER:
    case LATHE_OP_REDUCE_SCATTER:
    case LATHE_OP_ALL_TO_ALL:
    case LATHE_OP_COLLECTIVE_PERMUTE: return false;
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
  /* kinds.def: a family for every kind but INTERNAL */
  int families = 0;
#define LATHE_KIND(NAME, family) LATHE_KIND_IF_FAMILY(family, families++;)
#include "graph/kinds.def"
#undef LATHE_KIND
  CHECK(families == LATHE_KIND_COUNT - 1, "%d kinds with a CPU family", families);
}

/* ---- the attribute table ---- */
typedef struct {
  const char *group, *name;
  lathe_attr_storage storage;
  int slot;
} attr_row;

static const attr_row attr_rows[] = {
#define LATHE_ATTR(group, name, TYPE, slot) {#group, #name, LATHE_ATTR_STORAGE_##TYPE, slot},
#define LATHE_ATTR_GROUP(group, ...)
#include "graph/op_attrs.def"
#undef LATHE_ATTR
#undef LATHE_ATTR_GROUP
};
enum { N_ATTRS = sizeof attr_rows / sizeof attr_rows[0] };

static const char *const op_c_names[LATHE_OP_COUNT] = {
#define LATHE_OP(ENUM, GoName, c_name, n, KIND, SIG, FLAGS) #c_name,
#include "lathe_ops.def"
#undef LATHE_OP
};

typedef struct {
  const char *group;
  const lathe_op *ops;
  int n;
} shared_group;

static int storage_slots(lathe_attr_storage s) {
  switch (s) {
    case LATHE_ATTR_IN_I: return LATHE_MAX_IATTRS;
    case LATHE_ATTR_IN_F: return LATHE_MAX_FATTRS;
    case LATHE_ATTR_IN_LIST: return LATHE_MAX_LISTS;
    case LATHE_ATTR_IN_FN: return LATHE_MAX_SUBFNS;
    case LATHE_ATTR_IN_DATA: return 1;
  }
  return 0;
}

static int op_named(const char *c_name) {
  for (int i = 0; i < LATHE_OP_COUNT; i++)
    if (strcmp(op_c_names[i], c_name) == 0) return i;
  return -1;
}

TEST(op_attrs_table) {
  const shared_group groups[] = {
#define LATHE_ATTR(group, name, TYPE, slot)
#define LATHE_ATTR_GROUP(group, ...) \
  {#group, (const lathe_op[]){__VA_ARGS__}, (int)(sizeof((const lathe_op[]){__VA_ARGS__}) / sizeof(lathe_op))},
#include "graph/op_attrs.def"
#undef LATHE_ATTR
#undef LATHE_ATTR_GROUP
  };
  const int n_groups = (int)(sizeof groups / sizeof groups[0]);
  int shared_of[LATHE_OP_COUNT];
  for (int i = 0; i < LATHE_OP_COUNT; i++) shared_of[i] = -1;
  for (int g = 0; g < n_groups; g++) {
    CHECK(groups[g].n >= 1, "shared group %s lists no op", groups[g].group);
    CHECK(op_named(groups[g].group) < 0, "shared group %s is also an op's c_name", groups[g].group);
    for (int k = 0; k < groups[g].n; k++) {
      lathe_op op = groups[g].ops[k];
      bool in_range = (int)op >= 0 && op < LATHE_OP_COUNT;
      CHECK(in_range, "shared group %s lists op %d", groups[g].group, (int)op);
      if (!in_range) continue;
      CHECK(shared_of[op] < 0, "%s is in two shared groups", lathe_op_name(op));
      shared_of[op] = g;
    }
  }
  bool group_used[64] = {false};
  CHECK(n_groups <= 64, "too many shared groups");
  for (int a = 0; a < N_ATTRS; a++) {
    const attr_row *r = &attr_rows[a];
    CHECK(r->slot >= 0 && r->slot < storage_slots(r->storage), "%s.%s: slot %d out of range", r->group, r->name,
          r->slot);
    for (int b = 0; b < a; b++) {
      if (strcmp(attr_rows[b].group, r->group) != 0) continue;
      CHECK(strcmp(attr_rows[b].name, r->name) != 0, "%s.%s is listed twice", r->group, r->name);
      CHECK(attr_rows[b].storage != r->storage || attr_rows[b].slot != r->slot, "%s.%s and %s.%s share a slot",
            r->group, attr_rows[b].name, r->group, r->name);
    }
    /* the group is one op's c_name (an op outside every shared group), or a shared group */
    int op = op_named(r->group), g = -1;
    for (int k = 0; k < n_groups; k++)
      if (strcmp(groups[k].group, r->group) == 0) g = k;
    CHECK(op >= 0 || g >= 0, "%s.%s: group names no op and no shared group", r->group, r->name);
    if (op >= 0) CHECK(shared_of[op] < 0, "%s.%s: %s's attributes belong to its shared group", r->group, r->name, r->group);
    if (g >= 0 && g < 64) group_used[g] = true;
  }
  for (int g = 0; g < n_groups && g < 64; g++) CHECK(group_used[g], "shared group %s has no attribute", groups[g].group);
}

/* The typed accessors read back what the builders stored, through the types of the table. */
TEST(op_attrs_accessors) {
  lathe_function_t m;
  lathe_builder_t b = tst_builder("attrs", &m);
  lathe_value_t x = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 3, 4)), out = NULL;
  CHECK_OK(lathe_transpose(m, x, (const int[]){2, 0, 1}, 3, &out));
  lathe_ilist perm = lathe_attr_transpose_permutation(out);
  CHECK(perm.n == 3 && perm.v[0] == 2 && perm.v[1] == 0 && perm.v[2] == 1, "Transpose permutation");
  CHECK_OK(lathe_arg_min_max(m, x, 1, LATHE_DTYPE_INT32, true, &out));
  CHECK(lathe_attr_arg_min_max_axis(out) == 1 && lathe_attr_arg_min_max_is_min(out) == true, "ArgMinMax");
  CHECK_OK(lathe_fused_layer_norm(m, x, (const int[]){2}, 1, 1e-5, NULL, NULL, &out));
  CHECK(lathe_attr_fused_layer_norm_epsilon(out) == 1e-5 && !lathe_attr_fused_layer_norm_has_gamma(out) &&
            lathe_attr_fused_layer_norm_axes(out).n == 1,
        "FusedLayerNorm");
  const float data[2] = {1.5f, -2.f};
  lathe_shape cs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2);
  CHECK_OK(lathe_constant(m, &cs, data, sizeof data, &out));
  lathe_bytes bytes = lathe_attr_constant_value(out);
  CHECK(bytes.size == sizeof data && memcmp(bytes.data, data, sizeof data) == 0 && bytes.data != (const void *)data,
        "Constant bytes are a copy");
  CHECK(((uintptr_t)bytes.data & 63) == 0, "Constant bytes are 64-byte aligned");
  lathe_value_t results[2];
  CHECK_OK(lathe_fused_scaled_dot_product_attention(m, tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, 2, 3, 4)),
                                                    tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, 2, 5, 4)),
                                                    tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, 2, 5, 4)),
                                                    LATHE_ATTENTION_LAYOUT_BHSD,
                                                    &(lathe_attention_config){.scale = 0.25, .causal = true}, results));
  const lathe_node *sdpa = results[0]->in[0];
  CHECK(sdpa->op == LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION && lathe_attr_sdpa_causal(sdpa) &&
            lathe_attr_sdpa_scale(sdpa) == 0.25 && lathe_attr_sdpa_layout(sdpa) == LATHE_ATTENTION_LAYOUT_BHSD &&
            !lathe_attr_sdpa_has_mask(sdpa),
        "SDPA attributes through its tuple elements (index %lld)", (long long)lathe_attr_tuple_element_index(results[0]));
  CHECK(lathe_attr_tuple_element_index(results[1]) == 1, "second result");
  lathe_builder_free(b);
}

/* Dtype domains (lathe_op_domain, from ew.def): DEFINED is exactly what has an expression, and
 * what lathe:cpu runs (its kernels are the same rows; the MLX device's query relies on it);
 * UNDEFINED has no expression; and a few facts of the builders' documented rules. */
TEST(op_domains) {
  for (int op = 0; op < LATHE_OP_COUNT; op++) {
    lathe_op o = (lathe_op)op;
    unsigned classes = lathe_op_domain_classes(o);
    CHECK(!classes == !(lathe_op_has(o, LATHE_OPF_EW) && o != LATHE_OP_FUSED_GELU), "%s: classes %#x",
          lathe_op_name(o), classes);
    for (int d = 0; d < LATHE_DTYPE_LIMIT; d++) {
      lathe_dtype dt = (lathe_dtype)d;
      lathe_domain dom = lathe_op_domain(o, dt);
      if (!lathe_dtype_is_valid(dt) || !classes) {
        CHECK(dom == LATHE_DOMAIN_NONE, "%s on dtype %d: domain %d", lathe_op_name(o), d, (int)dom);
        continue;
      }
      CHECK(lathe_cpu_supports_op(o, dt) == (dom == LATHE_DOMAIN_DEFINED), "%s on %s: lathe:cpu %d, domain %d",
            lathe_op_name(o), lathe_dtype_name(dt), lathe_cpu_supports_op(o, dt), (int)dom);
      if (o == LATHE_OP_WHERE) continue; /* dt is the condition's */
      bool expr = false;
      for (int t = 1; t < LATHE_DTYPE_LIMIT && !expr; t++)
        expr = lathe_ew_defined(o, dt, o == LATHE_OP_CONVERT_DTYPE ? (lathe_dtype)t : dt);
      CHECK(expr == (dom == LATHE_DOMAIN_DEFINED), "%s on %s: expression %d, domain %d", lathe_op_name(o),
            lathe_dtype_name(dt), expr, (int)dom);
      CHECK(!!(classes & (1u << lathe_dtype_class_of(dt))) == (dom != LATHE_DOMAIN_NONE), "%s on %s: classes",
            lathe_op_name(o), lathe_dtype_name(dt));
    }
  }
  const struct {
    lathe_op op;
    lathe_dtype dt;
    lathe_domain want;
  } facts[] = {
      {LATHE_OP_ABS, LATHE_DTYPE_BOOL, LATHE_DOMAIN_NONE},
      {LATHE_OP_NEG, LATHE_DTYPE_UINT8, LATHE_DOMAIN_NONE},
      {LATHE_OP_LOGICAL_NOT, LATHE_DTYPE_INT32, LATHE_DOMAIN_NONE},
      {LATHE_OP_BITWISE_AND, LATHE_DTYPE_INT4, LATHE_DOMAIN_DEFINED},
      {LATHE_OP_SQRT, LATHE_DTYPE_BFLOAT16, LATHE_DOMAIN_DEFINED},
      {LATHE_OP_CEIL, LATHE_DTYPE_COMPLEX64, LATHE_DOMAIN_UNDEFINED},
      {LATHE_OP_REM, LATHE_DTYPE_COMPLEX128, LATHE_DOMAIN_UNDEFINED},
      {LATHE_OP_COMPLEX, LATHE_DTYPE_FLOAT16, LATHE_DOMAIN_NONE},
      {LATHE_OP_COMPLEX, LATHE_DTYPE_FLOAT64, LATHE_DOMAIN_DEFINED},
      {LATHE_OP_LESS_THAN, LATHE_DTYPE_COMPLEX64, LATHE_DOMAIN_NONE},
      {LATHE_OP_WHERE, LATHE_DTYPE_INT32, LATHE_DOMAIN_NONE},
      {LATHE_OP_WHERE, LATHE_DTYPE_BOOL, LATHE_DOMAIN_DEFINED},
      {LATHE_OP_BITCAST, LATHE_DTYPE_FLOAT32, LATHE_DOMAIN_NONE},
  };
  for (size_t i = 0; i < sizeof facts / sizeof facts[0]; i++)
    CHECK(lathe_op_domain(facts[i].op, facts[i].dt) == facts[i].want, "%s on %s: domain %d, want %d",
          lathe_op_name(facts[i].op), lathe_dtype_name(facts[i].dt), (int)lathe_op_domain(facts[i].op, facts[i].dt),
          (int)facts[i].want);
}
