/* test_program.c -- the shared compile pipeline (src/graph/program.c): which fusion regions form
 * (and which must not), how regions read their inputs, REDUCE regions, closure captures as
 * parameters, liveness and the memory plan. Results of the same graphs are checked against the
 * unfused interpreter in tests/ops/fusion.c. */
#include <math.h>
#include <string.h>

#include "graph/program.h"
#include "testing.h"

static const lathe_program_options fused = {.fuse = true, .plan_memory = true, .alignment = 64};
static const lathe_program_options unfused = {.fuse = false, .plan_memory = true, .alignment = 64};

static lathe_program *program_of(lathe_builder_t b, const lathe_program_options *opt) {
  lathe_program *p = NULL;
  CHECK_OK(lathe_program_build(b, opt, &p));
  return p;
}

static lathe_value_t scalar(lathe_function_t fn, float v) {
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  lathe_value_t out = NULL;
  CHECK_OK(lathe_constant(fn, &s0, &v, sizeof v, &out));
  return out;
}

/* relu(1.5 x + 0.5) * x: one LOOP region of four members, the scalars as SCALAR inputs. */
TEST(program_loop_region) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("chain", &fn);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 8, 1000);
  lathe_value_t x = tst_param(fn, "x", s), t, u, v, y;
  CHECK_OK(lathe_mul(fn, x, scalar(fn, 1.5f), &t));
  CHECK_OK(lathe_add(fn, t, scalar(fn, 0.5f), &u));
  CHECK_OK(lathe_max(fn, u, scalar(fn, 0), &v));
  CHECK_OK(lathe_mul(fn, v, x, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  lathe_program *p = program_of(b, &fused);
  if (p) {
    const lathe_pfunc *pf = lathe_program_main(p);
    CHECK(pf->n_steps == 1 && pf->n_regions == 1, "one step, one region: %d steps, %d regions", pf->n_steps, pf->n_regions);
    const lathe_pregion *g = &pf->regions[0];
    CHECK(g->kind == LATHE_PREGION_LOOP && g->n_members == 4, "LOOP of 4, got kind %d with %d", g->kind, g->n_members);
    int scalars = 0, full = 0;
    for (int i = 0; i < g->n_inputs; i++) {
      scalars += g->inputs[i].access == LATHE_PACCESS_SCALAR;
      full += g->inputs[i].access == LATHE_PACCESS_FULL;
    }
    CHECK(scalars == 3 && full == 1, "3 scalar inputs and x: %d, %d", scalars, full);
    int escapes = 0;
    for (int m = 0; m < g->n_members; m++) escapes += g->members[m].out_slot >= 0;
    CHECK(escapes == 1, "only the root escapes, %d do", escapes);
    CHECK(pf->arena_bytes == 0, "nothing to plan: the output is not an intermediate (%lld)", (long long)pf->arena_bytes);
  }
  lathe_program_free(p);
  p = program_of(b, &unfused);
  if (p) CHECK(lathe_program_main(p)->n_regions == 0 && lathe_program_main(p)->n_steps == 4, "unfused: 4 steps");
  lathe_program_free(p);
  lathe_builder_free(b);
}

/* silu(1.5 x) * x and its VJP's chain join one LOOP region where the device asks
 * (fuse_activations: lathe:cpu), not elsewhere; SwiGLU (not elementwise) never does. */
TEST(program_activation_members) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("act_chain", &fn);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 8, 100);
  lathe_value_t x = tst_param(fn, "x", s), t, a, y, d, z, outs[2];
  CHECK_OK(lathe_mul(fn, x, scalar(fn, 1.5f), &t));
  CHECK_OK(lathe_fused_activation(fn, t, LATHE_ACTIVATION_SILU, &a));
  CHECK_OK(lathe_mul(fn, a, x, &y));
  CHECK_OK(lathe_fused_activation_vjp(fn, NULL, t, y, LATHE_ACTIVATION_SILU, &d));
  CHECK_OK(lathe_add(fn, d, x, &z));
  outs[0] = z;
  CHECK_OK(lathe_fused_activation(fn, x, LATHE_ACTIVATION_SWIGLU, &outs[1]));
  CHECK_OK(lathe_function_return(fn, outs, 2));
  lathe_program_options acts = fused;
  acts.fuse_activations = true;
  lathe_program *p = program_of(b, &acts);
  if (p) {
    const lathe_pfunc *pf = lathe_program_main(p);
    int members = 0;
    for (int r = 0; r < pf->n_regions; r++) members += pf->regions[r].n_members;
    CHECK(pf->n_regions == 1 && members == 5 && pf->n_steps == 2, "one region of 5 and SwiGLU: %d regions, %d members, %d steps",
          pf->n_regions, members, pf->n_steps);
  }
  lathe_program_free(p);
  p = program_of(b, &fused);
  if (p) {
    const lathe_pfunc *pf = lathe_program_main(p);
    CHECK(pf->n_steps >= 5, "without fuse_activations the activations are steps of their own: %d steps", pf->n_steps);
  }
  lathe_program_free(p);
  lathe_builder_free(b);
}

/* A value used by an op that is not fusable (a DotGeneral) between it and its fusable user must
 * not be moved after that op: exp(x) feeds both the product and the final add. */
TEST(program_no_region_across_a_use) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("cross", &fn);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 4, 4);
  lathe_value_t x = tst_param(fn, "x", s), a, d, y;
  CHECK_OK(lathe_exp(fn, x, &a));
  int lc = 1, rc = 0;
  CHECK_OK(lathe_dot_general(fn, a, &lc, 1, NULL, 0, x, &rc, 1, NULL, 0, NULL, &d));
  CHECK_OK(lathe_add(fn, a, d, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  lathe_program *p = program_of(b, &fused);
  if (p) {
    const lathe_pfunc *pf = lathe_program_main(p);
    CHECK(pf->n_regions == 0 && pf->n_steps == 3, "exp, dot, add stay apart: %d steps, %d regions", pf->n_steps, pf->n_regions);
    CHECK(pf->n_steps == 3 && pf->steps[0].node->op == LATHE_OP_EXP && pf->steps[1].node->op == LATHE_OP_DOT_GENERAL,
          "order kept");
  }
  lathe_program_free(p);
  lathe_builder_free(b);
}

/* An SGD step as GoMLX builds it: both gradients, then the learning rate (lr / sqrt(step)), then
 * the updates w - g*lr, returned. The learning rate moves up to where its inputs are, and each
 * update to just after its gradient and the last other reader of its weight (w1 is read by the
 * second product: its update stays after it); nothing else moves, and the unfused program keeps
 * the built order. */
TEST(program_updates_run_early) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("sgd", &fn);
  lathe_shape sx = TST_SHAPE(LATHE_DTYPE_FLOAT32, 16, 32), sw = TST_SHAPE(LATHE_DTYPE_FLOAT32, 32, 32);
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  lathe_value_t x = tst_param(fn, "x", sx), dy = tst_param(fn, "dy", sx), w0 = tst_param(fn, "w0", sw);
  lathe_value_t w1 = tst_param(fn, "w1", sw), lr = tst_param(fn, "lr", s0), step = tst_param(fn, "step", s0);
  lathe_value_t g0, h, g1, sq, rate, m0, u0, m1, u1;
  int c0 = 0, c1 = 1;
  CHECK_OK(lathe_dot_general(fn, x, &c0, 1, NULL, 0, dy, &c0, 1, NULL, 0, NULL, &g0)); /* x^T dy */
  CHECK_OK(lathe_dot_general(fn, dy, &c1, 1, NULL, 0, w1, &c1, 1, NULL, 0, NULL, &h)); /* dy w1^T */
  CHECK_OK(lathe_dot_general(fn, h, &c0, 1, NULL, 0, dy, &c0, 1, NULL, 0, NULL, &g1)); /* h^T dy */
  CHECK_OK(lathe_sqrt(fn, step, &sq));
  CHECK_OK(lathe_div(fn, lr, sq, &rate));
  CHECK_OK(lathe_mul(fn, g0, rate, &m0));
  CHECK_OK(lathe_sub(fn, w0, m0, &u0));
  CHECK_OK(lathe_mul(fn, g1, rate, &m1));
  CHECK_OK(lathe_sub(fn, w1, m1, &u1));
  lathe_value_t outs[2] = {u0, u1};
  CHECK_OK(lathe_function_return(fn, outs, 2));
  lathe_program *p = program_of(b, &fused);
  if (p) {
    const lathe_pfunc *pf = lathe_program_main(p);
    char got[64] = "";
    for (int i = 0; i < pf->n_steps && i < 8; i++) {
      const lathe_pstep *st = &pf->steps[i];
      lathe_op op = st->node->op;
      char c = st->region >= 0 ? 'U' : op == LATHE_OP_DOT_GENERAL ? 'D' : op == LATHE_OP_DIV ? 'L' : op == LATHE_OP_SQRT ? 'S' : '?';
      got[strlen(got)] = c;
    }
    /* sqrt and div (a region of two, or two steps) first, then g0, u0 after it, h, g1, u1 */
    CHECK(!strcmp(got, "UDUDDU") || !strcmp(got, "SLDUDDU"), "order: %s", got);
  }
  lathe_program_free(p);
  p = program_of(b, &unfused);
  if (p) {
    const lathe_pfunc *pf = lathe_program_main(p);
    CHECK(pf->n_steps == 9 && pf->steps[0].node->op == LATHE_OP_DOT_GENERAL && pf->steps[3].node->op == LATHE_OP_SQRT,
          "unfused: built order kept");
  }
  lathe_program_free(p);
  lathe_builder_free(b);
}

/* x - broadcast(mean over rows) and x + p with p [B, 1]: both broadcasts are STRIDED inputs of
 * one region, with stride 0 along the broadcast axis. */
TEST(program_broadcast_inputs) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("bcast", &fn);
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 6, 10), ms = TST_SHAPE(LATHE_DTYPE_FLOAT32, 6),
              ps = TST_SHAPE(LATHE_DTYPE_FLOAT32, 6, 1);
  lathe_value_t x = tst_param(fn, "x", xs), m = tst_param(fn, "m", ms), q = tst_param(fn, "p", ps), mb, t, y;
  int axis = 0;
  CHECK_OK(lathe_broadcast_in_dim(fn, m, &xs, &axis, 1, &mb));
  CHECK_OK(lathe_sub(fn, x, mb, &t));
  CHECK_OK(lathe_add(fn, t, q, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  lathe_program *p = program_of(b, &fused);
  if (p) {
    const lathe_pfunc *pf = lathe_program_main(p);
    CHECK(pf->n_regions == 1 && pf->n_steps == 1, "one region: %d steps, %d regions", pf->n_steps, pf->n_regions);
    const lathe_pregion *g = pf->n_regions ? &pf->regions[0] : NULL;
    int strided = 0, identities = 0;
    for (int i = 0; g && i < g->n_inputs; i++)
      if (g->inputs[i].access == LATHE_PACCESS_STRIDED) {
        strided++;
        CHECK(g->inputs[i].strides[0] == 1 && g->inputs[i].strides[1] == 0, "row broadcast strides {1, 0}: {%lld, %lld}",
              (long long)g->inputs[i].strides[0], (long long)g->inputs[i].strides[1]);
      }
    for (int i = 0; g && i < g->n_members; i++) identities += g->members[i].identity;
    CHECK(strided == 2 && identities == 1, "2 strided inputs (%d), the broadcast an identity member (%d)", strided, identities);
  }
  lathe_program_free(p);
  lathe_builder_free(b);
}

/* rsqrt(sum(x * x, rows) / N + eps): a REDUCE region with a prologue (x * x) and an epilogue. */
TEST(program_reduce_region) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("rms", &fn);
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 6, 10);
  lathe_value_t x = tst_param(fn, "x", xs), sq, s, m, v, y;
  CHECK_OK(lathe_mul(fn, x, x, &sq));
  int axis = 1;
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, sq, &axis, 1, &s));
  CHECK_OK(lathe_mul(fn, s, scalar(fn, 0.1f), &m));
  CHECK_OK(lathe_add(fn, m, scalar(fn, 1e-5f), &v));
  CHECK_OK(lathe_rsqrt(fn, v, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  lathe_program *p = program_of(b, &fused);
  if (p) {
    const lathe_pfunc *pf = lathe_program_main(p);
    CHECK(pf->n_steps == 1, "the whole graph is one step: %d", pf->n_steps);
    const lathe_pregion *g = pf->n_steps && pf->steps[0].region >= 0 ? &pf->regions[pf->steps[0].region] : NULL;
    CHECK(g && g->kind == LATHE_PREGION_REDUCE && g->prologue >= 0 && g->epilogue >= 0,
          "a REDUCE region with prologue and epilogue");
    if (g && g->prologue >= 0 && g->epilogue >= 0) {
      CHECK(pf->regions[g->prologue].n_members == 1 && pf->regions[g->epilogue].n_members == 3,
            "prologue of 1, epilogue of 3: %d, %d", pf->regions[g->prologue].n_members, pf->regions[g->epilogue].n_members);
      CHECK(pf->steps[0].n_in == 1 + 2 && pf->steps[0].n_out == 1, "step reads x and two scalars, writes y: %d in, %d out",
            pf->steps[0].n_in, pf->steps[0].n_out);
      CHECK(pf->slots[g->reduce_in].offset >= 0 && pf->slots[g->reduce_out].offset >= 0,
            "the slots between the parts are planned (a device running the parts in turn materialises them)");
    }
    lathe_program_stats st;
    lathe_program_get_stats(p, &st);
    CHECK(st.reduce_regions == 1 && st.regions == 1, "stats: %d regions, %d reduce", st.regions, st.reduce_regions);
  }
  lathe_program_free(p);
  lathe_builder_free(b);
}

/* A one-hot of labels (Equal of [B,1] and [1,N], converted to Float32 [B,N], 2 MiB) read by two
 * regions with a large Exp between them: with remat the second reader gets its own copy of the
 * chain, fused into its region, so the one-hot never lives in the arena across the Exp; without,
 * it does. (Values: tests/ops/fusion.c, graph 3, against the unfused run.) */
TEST(program_recomputes_cheap_values) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("one-hot", &fn);
  enum { B = 512, N = 1024 };
  lathe_shape ls = TST_SHAPE(LATHE_DTYPE_INT32, B, 1), cs = TST_SHAPE(LATHE_DTYPE_INT32, 1, N),
              xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, B, N);
  lathe_value_t labels = tst_param(fn, "labels", ls), classes = tst_param(fn, "classes", cs), x = tst_param(fn, "x", xs);
  lathe_value_t eq, oh, m1, a, e, big, m2, outs[2];
  int axis = 1;
  CHECK_OK(lathe_equal(fn, labels, classes, &eq));
  CHECK_OK(lathe_convert_dtype(fn, eq, LATHE_DTYPE_FLOAT32, &oh));
  CHECK_OK(lathe_mul(fn, oh, x, &m1));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, m1, &axis, 1, &a));
  CHECK_OK(lathe_exp(fn, x, &e));
  CHECK_OK(lathe_sqrt(fn, e, &big)); /* a step of its own between the readers */
  CHECK_OK(lathe_mul(fn, oh, big, &m2));
  outs[0] = m2, outs[1] = a;
  CHECK_OK(lathe_function_return(fn, outs, 2));
  const lathe_program_options remat = {.fuse = true, .plan_memory = true, .alignment = 64, .remat = true};
  lathe_program *pr = program_of(b, &remat), *pk = program_of(b, &fused);
  if (pr && pk) {
    const lathe_pfunc *fr = lathe_program_main(pr), *fk = lathe_program_main(pk);
    int equals = 0, onehot_planned = 0;
    for (int r = 0; r < fr->n_regions; r++)
      for (int m = 0; m < fr->regions[r].n_members; m++) equals += fr->regions[r].members[m].node->op == LATHE_OP_EQUAL;
    for (int i = 0; i < fr->n_slots; i++)
      onehot_planned += fr->slots[i].node && fr->slots[i].node->op == LATHE_OP_CONVERT_DTYPE && fr->slots[i].offset >= 0;
    CHECK(equals == 2, "the one-hot's Equal in both readers' regions: %d", equals);
    CHECK(onehot_planned == 0, "the one-hot never takes arena memory: %d slots do", onehot_planned);
    CHECK(fr->arena_bytes + (int64_t)B * N * 4 <= fk->arena_bytes, "remat arena %lld, kept %lld: the one-hot's 2 MiB less",
          (long long)fr->arena_bytes, (long long)fk->arena_bytes);
  }
  lathe_program_free(pr);
  lathe_program_free(pk);
  lathe_builder_free(b);
}

/* Without fusion, a chain of in-place-able ops over one shape lives in one arena block: each
 * result takes its dying operand's memory. Transposes (not in place) alternate two blocks. */
/* Layer norm as GoMLX writes it (mean and centred variance kept as [B, 1], broadcast back) and
 * a softmax over a [B, H, N] tensor with a [B, 1, N] mask: with rows_max each is one ROWS region
 * (two reductions, row values read back over the rows); without, LOOP and REDUCE regions as
 * before. A lone reduction with a prologue stays a REDUCE region. */
static const lathe_program_options rows = {.fuse = true, .plan_memory = true, .alignment = 64, .rows_max = 8192};

TEST(program_rows_region) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("layer_norm", &fn);
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 6, 10), ks = TST_SHAPE(LATHE_DTYPE_FLOAT32, 6, 1);
  lathe_value_t x = tst_param(fn, "x", xs), mean, c, sq, var, inv, y, outs[2];
  CHECK_OK(lathe_mul(fn, tst_reduce_keep(fn, LATHE_OP_REDUCE_SUM, x, 1, &ks), scalar(fn, 0.1f), &mean));
  CHECK_OK(lathe_sub(fn, x, tst_broadcast_same_rank(fn, mean, &xs), &c));
  CHECK_OK(lathe_mul(fn, c, c, &sq));
  CHECK_OK(lathe_mul(fn, tst_reduce_keep(fn, LATHE_OP_REDUCE_SUM, sq, 1, &ks), scalar(fn, 0.1f), &var));
  CHECK_OK(lathe_add(fn, var, scalar(fn, 1e-5f), &inv));
  CHECK_OK(lathe_rsqrt(fn, inv, &inv));
  CHECK_OK(lathe_mul(fn, c, tst_broadcast_same_rank(fn, inv, &xs), &y));
  outs[0] = y, outs[1] = inv; /* a row value escapes too (a gradient would read it) */
  CHECK_OK(lathe_function_return(fn, outs, 2));
  lathe_program *p = program_of(b, &rows);
  if (p) {
    const lathe_pfunc *pf = lathe_program_main(p);
    const lathe_pregion *g = pf->n_steps == 1 && pf->steps[0].region >= 0 ? &pf->regions[pf->steps[0].region] : NULL;
    CHECK(g && g->kind == LATHE_PREGION_ROWS && g->row_axes == 1, "one ROWS step over rows of axis 0 (%d steps)", pf->n_steps);
    if (g) {
      int reds = 0, row = 0, out = 0;
      for (int m = 0; m < g->n_members; m++) {
        reds += lathe_op_kind_of(g->members[m].node->op) == LATHE_KIND_REDUCE;
        row += g->members[m].row;
        out += g->members[m].out_slot >= 0;
      }
      CHECK(g->n_members == 13 && reds == 2 && row == 8 && out == 2, "13 members, 2 reductions, 8 per row, 2 results: %d %d %d %d",
            g->n_members, reds, row, out);
      CHECK(pf->steps[0].n_in == 1 + 2 && pf->steps[0].n_out == 2, "reads x and 2 scalars, writes 2: %d, %d", pf->steps[0].n_in,
            pf->steps[0].n_out);
    }
    lathe_program_stats st;
    lathe_program_get_stats(p, &st);
    CHECK(st.rows_regions == 1 && st.reduce_regions == 0, "stats: %d rows, %d reduce", st.rows_regions, st.reduce_regions);
  }
  lathe_program_free(p);
  p = program_of(b, &fused);
  if (p) {
    lathe_program_stats st;
    lathe_program_get_stats(p, &st);
    CHECK(st.rows_regions == 0 && st.reduce_regions >= 1, "without rows_max: %d rows, %d reduce", st.rows_regions, st.reduce_regions);
  }
  lathe_program_free(p);
  lathe_builder_free(b);

  /* softmax over the last axis of [B, H, N] with a mask broadcast over H */
  b = tst_builder("masked_softmax", &fn);
  lathe_shape ss = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 3, 40), ms = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 1, 40),
              rs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 3, 1);
  lathe_value_t s = tst_param(fn, "s", ss), mask = tst_param(fn, "mask", ms), t, e, sm;
  int axes[3] = {0, 1, 2};
  lathe_value_t mb;
  CHECK_OK(lathe_broadcast_in_dim(fn, mask, &ss, axes, 3, &mb));
  CHECK_OK(lathe_add(fn, s, mb, &t));
  CHECK_OK(lathe_sub(fn, t, tst_broadcast_same_rank(fn, tst_reduce_keep(fn, LATHE_OP_REDUCE_MAX, t, 2, &rs), &ss), &e));
  CHECK_OK(lathe_exp(fn, e, &e));
  CHECK_OK(lathe_div(fn, e, tst_broadcast_same_rank(fn, tst_reduce_keep(fn, LATHE_OP_REDUCE_SUM, e, 2, &rs), &ss), &sm));
  CHECK_OK(lathe_function_return(fn, &sm, 1));
  p = program_of(b, &rows);
  if (p) {
    const lathe_pfunc *pf = lathe_program_main(p);
    const lathe_pregion *g = pf->n_steps == 1 && pf->steps[0].region >= 0 ? &pf->regions[pf->steps[0].region] : NULL;
    CHECK(g && g->kind == LATHE_PREGION_ROWS && g->row_axes == 2, "one ROWS step over rows of axes 0-1 (%d steps)", pf->n_steps);
    for (int i = 0; g && i < g->n_inputs; i++)
      if (pf->slots[g->inputs[i].slot].shape.dims[1] == 1)
        CHECK(g->inputs[i].access == LATHE_PACCESS_STRIDED && g->inputs[i].strides[0] == 40 && g->inputs[i].strides[1] == 0 &&
                  g->inputs[i].strides[2] == 1,
              "the mask read with H broadcast: strides %lld %lld %lld", (long long)g->inputs[i].strides[0],
              (long long)g->inputs[i].strides[1], (long long)g->inputs[i].strides[2]);
  }
  lathe_program_free(p);
  lathe_builder_free(b);

  /* sum of squares alone: a REDUCE region still */
  b = tst_builder("sumsq", &fn);
  x = tst_param(fn, "x", xs);
  CHECK_OK(lathe_mul(fn, x, x, &sq));
  y = tst_reduce_keep(fn, LATHE_OP_REDUCE_SUM, sq, 1, &ks);
  CHECK_OK(lathe_function_return(fn, &y, 1));
  p = program_of(b, &rows);
  if (p) {
    lathe_program_stats st;
    lathe_program_get_stats(p, &st);
    CHECK(st.rows_regions == 0 && st.reduce_regions == 1, "one reduction: %d rows, %d reduce", st.rows_regions, st.reduce_regions);
  }
  lathe_program_free(p);
  lathe_builder_free(b);

  /* with rows_lone, a lone reduction and its prologue over enough rows: one ROWS region */
  lathe_program_options lone = rows;
  lone.rows_lone = 1024;
  lathe_shape bs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2048, 10), bk = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2048, 1);
  for (int big = 0; big < 2; big++) {
    b = tst_builder("sumsq", &fn);
    x = tst_param(fn, "x", big ? bs : xs);
    CHECK_OK(lathe_mul(fn, x, x, &sq));
    y = tst_reduce_keep(fn, LATHE_OP_REDUCE_SUM, sq, 1, big ? &bk : &ks);
    CHECK_OK(lathe_function_return(fn, &y, 1));
    p = program_of(b, &lone);
    if (p) {
      lathe_program_stats st;
      lathe_program_get_stats(p, &st);
      CHECK(st.rows_regions == big && st.regions == 1, "%s rows: %d rows regions of %d", big ? "2048" : "6", st.rows_regions,
            st.regions);
    }
    lathe_program_free(p);
    lathe_builder_free(b);
  }
}

TEST(program_memory_plan) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("plan", &fn);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 16, 16);
  lathe_value_t x = tst_param(fn, "x", s), v = x, y;
  int perm[2] = {1, 0};
  CHECK_OK(lathe_transpose(fn, v, perm, 2, &v));
  for (int k = 0; k < 5; k++) CHECK_OK(lathe_neg(fn, v, &v));
  CHECK_OK(lathe_transpose(fn, v, perm, 2, &v));
  CHECK_OK(lathe_transpose(fn, v, perm, 2, &v));
  CHECK_OK(lathe_exp(fn, v, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  lathe_program *p = program_of(b, &unfused);
  if (p) {
    const lathe_pfunc *pf = lathe_program_main(p);
    int planned = 0;
    int64_t first = -1;
    bool shared = true;
    for (int i = 0; i < pf->n_slots; i++) {
      const lathe_pslot *sl = &pf->slots[i];
      if (sl->offset < 0) continue;
      planned++;
      if (sl->def >= 1 && sl->def <= 5 && first < 0) first = sl->offset;
      if (sl->def >= 1 && sl->def <= 5) shared &= sl->offset == first;
    }
    CHECK(planned == 8, "8 intermediates planned (all but the parameter and the output): %d", planned);
    CHECK(shared, "the five negations share their operand's memory");
    CHECK(pf->arena_bytes == 2 * 1024, "two 1 KiB blocks alternate: %lld bytes", (long long)pf->arena_bytes);
  }
  lathe_program_free(p);
  lathe_builder_free(b);
}

/* A Reshape of a value that lives on takes its bytes (alias_reshape): a = exp(x); r = Reshape(a);
 * then neg(a) and neg(r), each of which may write in place only into memory nothing reads later.
 * a and r share one offset; neg(r) must not write there (a is read after it), neg(a), the last
 * reader of both, may; and the values stay what they must. */
static lathe_builder_t reshape_of_live_value(void) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("alias", &fn);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 16, 16);
  int64_t flat[1] = {256};
  lathe_value_t x = tst_param(fn, "x", s), a, r, na, nr, out;
  CHECK_OK(lathe_exp(fn, x, &a));
  CHECK_OK(lathe_reshape(fn, a, flat, 1, &r));
  CHECK_OK(lathe_neg(fn, r, &nr));
  CHECK_OK(lathe_neg(fn, a, &na));
  CHECK_OK(lathe_reshape(fn, na, flat, 1, &na));
  CHECK_OK(lathe_add(fn, na, nr, &out));
  CHECK_OK(lathe_function_return(fn, &out, 1));
  return b;
}

TEST(program_reshape_of_a_live_value) {
  lathe_builder_t b = reshape_of_live_value();
  lathe_program_options opt = unfused;
  opt.alias_reshape = true;
  lathe_program *p = program_of(b, &opt);
  if (p) {
    const lathe_pfunc *pf = lathe_program_main(p);
    int64_t off[8];
    int n = 0;
    for (int s_ = 0; s_ < pf->n_steps && n < 8; s_++) off[n++] = pf->slots[pf->steps[s_].out[0]].offset;
    /* steps: exp, reshape, neg(r), neg(a), reshape, add */
    CHECK(n == 6, "six steps, got %d", n);
    if (n == 6) {
      CHECK(off[0] >= 0 && off[1] == off[0], "the Reshape shares exp's bytes: %lld, %lld", (long long)off[0], (long long)off[1]);
      CHECK(off[2] != off[0], "neg(r) does not write over a, which neg(a) still reads");
      CHECK(off[3] == off[0], "neg(a), the last reader of both, writes in place");
    }
  }
  lathe_program_free(p);
  lathe_builder_free(b);
  /* the values: exp(x) reshaped twice and negated, summed */
  b = reshape_of_live_value();
  float in[256], got[256];
  for (int i = 0; i < 256; i++) in[i] = (float)(i % 7) * 0.25f - 0.5f;
  const void *ins[1] = {in};
  void *outp[1] = {NULL};
  lathe_status_t st = tst_run(b, ins, 1, outp, 1, NULL);
  CHECK(st == NULL, "run: %s", lathe_status_message(st));
  lathe_status_free(st);
  if (outp[0]) {
    memcpy(got, outp[0], sizeof got);
    int bad = 0;
    for (int i = 0; i < 256; i++) bad += got[i] != -2.0f * expf(in[i]);
    CHECK(bad == 0, "%d of 256 values differ from -2 exp(x)", bad);
  }
  tst_free_output(outp[0]);
  lathe_builder_free(b);
}

/* A While whose body captures a value of main: the body's program function takes it as an extra
 * parameter, and the While step says where its captures start among its inputs. */
TEST(program_closure_captures) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("loop", &fn);
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  lathe_value_t x = tst_param(fn, "x", s0), k = tst_param(fn, "k", s0), out;
  lathe_function_t cond, body;
  CHECK_OK(lathe_function_closure(fn, &cond));
  CHECK_OK(lathe_function_closure(fn, &body));
  lathe_value_t cx, c, bx, by;
  CHECK_OK(lathe_parameter(cond, "x", &s0, &cx));
  CHECK_OK(lathe_less_than(cond, cx, scalar(cond, 100), &c));
  CHECK_OK(lathe_function_return(cond, &c, 1));
  CHECK_OK(lathe_parameter(body, "x", &s0, &bx));
  CHECK_OK(lathe_add(body, bx, k, &by)); /* k is main's */
  CHECK_OK(lathe_function_return(body, &by, 1));
  int n_out = 0;
  CHECK_OK(lathe_while(fn, cond, body, &x, 1, &out, 1, &n_out));
  CHECK_OK(lathe_function_return(fn, &out, 1));
  lathe_program *p = program_of(b, &fused);
  if (p) {
    int bi = lathe_program_fn_index(p, body), ci = lathe_program_fn_index(p, cond);
    CHECK(bi > 0 && ci > 0, "both closures are program functions");
    if (bi > 0 && ci > 0) {
      CHECK(p->fns[bi].n_params == 2 && p->fns[bi].n_declared == 1, "body: 1 parameter + 1 capture, got %d/%d",
            p->fns[bi].n_declared, p->fns[bi].n_params);
      CHECK(p->fns[ci].n_params == 1, "cond captures nothing");
      const lathe_pfunc *pf = lathe_program_main(p);
      const lathe_pstep *w = NULL;
      for (int i = 0; i < pf->n_steps; i++)
        if (pf->steps[i].node->op == LATHE_OP_WHILE) w = &pf->steps[i];
      CHECK(w && w->n_sub == 2 && w->n_in == 2, "the While reads x and the captured k");
      if (w && w->n_sub == 2) {
        int which = w->sub_fn[0] == bi ? 0 : 1;
        CHECK(w->sub_fn[1 - which] == ci && w->sub_cap[which] == 1 && w->in[1] == pf->params[1],
              "body's captures start at input 1, which is main's k");
      }
    }
  }
  lathe_program_free(p);
  lathe_builder_free(b);
}

/* ConvertDType to BFloat16 of a Float32 product of BFloat16 operands (GoMLX's half products)
 * lowers to one step, the product with a BFloat16 result; also behind a folded Transpose, and an
 * identity Transpose is no node at all; not when the Float32 result has another reader. Run, the
 * folded product gives the bits the unfolded one does (lathe:cpu). */
TEST(program_converted_product) {
  const lathe_dtype bf = LATHE_DTYPE_BFLOAT16;
  void *out[3][2] = {{0}};
  for (int variant = 0; variant < 3; variant++) {
    lathe_function_t fn;
    lathe_builder_t b = tst_builder("cdot", &fn);
    lathe_value_t x = tst_param(fn, "x", TST_SHAPE(bf, 2, 7, 24));
    lathe_value_t y = tst_param(fn, "y", TST_SHAPE(bf, 2, 24, 5)), d, t, h;
    int lc = 2, rc = 1, bt = 0, swap[3] = {0, 2, 1}, same[3] = {0, 1, 2};
    const lathe_dot_config f32 = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT32};
    CHECK_OK(lathe_dot_general(fn, x, &lc, 1, &bt, 1, y, &rc, 1, &bt, 1, &f32, &d));
    CHECK_OK(lathe_transpose(fn, d, variant == 1 ? swap : same, 3, &t));
    if (variant != 1) CHECK(t == d, "variant %d: an identity Transpose is its operand", variant);
    CHECK_OK(lathe_convert_dtype(fn, t, bf, &h));
    lathe_value_t outs[2] = {h, d};
    int n_out = variant == 2 ? 2 : 1;
    CHECK_OK(lathe_function_return(fn, outs, n_out));
    lathe_program *p = program_of(b, &fused);
    if (p) {
      const lathe_pfunc *pf = lathe_program_main(p);
      if (variant != 2) {
        const lathe_pstep *s = pf->n_steps ? &pf->steps[0] : NULL;
        CHECK(pf->n_steps == 1 && s->node->op == LATHE_OP_DOT_GENERAL, "variant %d: one DotGeneral step, got %d steps",
              variant, pf->n_steps);
        if (s) CHECK(pf->slots[s->out[0]].shape.dtype == bf, "variant %d: a BFloat16 result", variant);
      } else {
        CHECK(pf->n_steps == 2, "the Float32 result read twice: DotGeneral and ConvertDType, got %d steps", pf->n_steps);
      }
    }
    lathe_program_free(p);
    if (variant == 1) { /* the transposed result: compared with variant 0's below */
      lathe_builder_free(b);
      continue;
    }
    int64_t nx = 2 * 7 * 24, ny = 2 * 24 * 5;
    uint16_t *xd = malloc((size_t)nx * 2), *yd = malloc((size_t)ny * 2);
    tst_fill(xd, bf, nx, 11), tst_fill(yd, bf, ny, 12);
    const void *in[2] = {xd, yd};
    CHECK_OK(tst_run(b, in, 2, out[variant], n_out, NULL));
    free(xd), free(yd);
    lathe_builder_free(b);
  }
  if (out[0][0] && out[2][0])
    CHECK(memcmp(out[0][0], out[2][0], 2 * 7 * 5 * 2) == 0, "the folded product rounds as DotGeneral + ConvertDType");
  for (int v = 0; v < 3; v++)
    for (int k = 0; k < 2; k++) tst_free_output(out[v][k]);
}

/* Transpose(DotGeneral(x, y)) swapping the free groups lowers to one step, DotGeneral(y, x) with
 * the transposed shape; not when the product has another reader, nor for other permutations. */
TEST(program_transposed_product) {
  for (int variant = 0; variant < 3; variant++) {
    lathe_function_t fn;
    lathe_builder_t b = tst_builder("tdot", &fn);
    lathe_value_t x = tst_param(fn, "x", TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 3, 4, 5));
    lathe_value_t y = tst_param(fn, "y", TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 5, 6)), d, t;
    int lc = 3, rc = 1, bt = 0;
    int swap[4] = {0, 3, 1, 2}, other[4] = {0, 3, 2, 1};
    CHECK_OK(lathe_dot_general(fn, x, &lc, 1, &bt, 1, y, &rc, 1, &bt, 1, NULL, &d));
    CHECK_OK(lathe_transpose(fn, d, variant == 2 ? other : swap, 4, &t));
    lathe_value_t outs[2] = {t, d};
    CHECK_OK(lathe_function_return(fn, outs, variant == 1 ? 2 : 1));
    lathe_program *p = program_of(b, &fused);
    if (p) {
      const lathe_pfunc *pf = lathe_program_main(p);
      if (variant == 0) {
        const lathe_pstep *s = &pf->steps[0];
        CHECK(pf->n_steps == 1 && s->node->op == LATHE_OP_DOT_GENERAL, "one DotGeneral step: %d steps", pf->n_steps);
        const lathe_shape *os = &pf->slots[s->out[0]].shape;
        CHECK(os->rank == 4 && os->dims[1] == 6 && os->dims[2] == 3 && os->dims[3] == 4, "shape [2,6,3,4]");
        CHECK(s->in[0] == pf->params[1] && s->in[1] == pf->params[0], "operands swapped");
        CHECK(lathe_attr_dot_general_lhs_contracting(s->node).v[0] == 1 &&
                  lathe_attr_dot_general_rhs_contracting(s->node).v[0] == 3,
              "contracting axes swapped");
      } else {
        CHECK(pf->n_steps == 2, "variant %d: DotGeneral and Transpose, got %d steps", variant, pf->n_steps);
      }
    }
    lathe_program_free(p);
    lathe_builder_free(b);
  }
}
