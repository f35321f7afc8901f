/* program.c -- lowering a builder to a program: steps over value slots (multi-result ops write
 * several slots, closure captures become parameters), fusion regions, liveness and the memory
 * plan. See program.h. */
#include "ew.h"
#include "program.h"

#include "../core/trace.h"

/* ---- op facts this pass needs ---- */
static bool kind_is(const lathe_node *n, lathe_op_kind k) { return lathe_op_kind_of(n->op) == k; }

/* Elementwise ops that may join a LOOP region, and BroadcastInDim (an index map, no work). */
static bool fusable_op(lathe_op op) { return lathe_op_has(op, LATHE_OPF_FUSE); }

/* Ops whose result may take the memory of an operand that dies at them (same dtype and dims). */
static bool inplace_op(lathe_op op) { return lathe_op_has(op, LATHE_OPF_INPLACE); }

/* Reductions that may root a REDUCE region (ArgMinMax keeps an index too: not a plain fold). */
static bool fold_op(lathe_op op) { return lathe_op_kind_of(op) == LATHE_KIND_REDUCE && op != LATHE_OP_ARG_MIN_MAX; }

/* Ops whose results are made by the op itself (sub-function results, pass-through values), so
 * they are never planned in the arena. */
static bool results_from_op(const lathe_node *n) { return kind_is(n, LATHE_KIND_CONTROL) || kind_is(n, LATHE_KIND_BARRIER); }

static bool same_dims(const lathe_shape *a, const lathe_shape *b) {
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* ---- building one function ---- */
typedef struct {
  lathe_program *p;
  lathe_pfunc *pf;
  lathe_schedule s;
  int *slot_of; /* node id -> slot (through CSE's remap); multi-result nodes: their first result */
  /* scratch during region formation, indexed by step */
  int *region_of;
  int *row_level;           /* per step of a ROWS draft: its RL_* level */
  int *users_start, *users; /* CSR list of the steps reading each slot */
  bool *is_output;          /* per slot: returned by the function */
  const lathe_node **fold;  /* by node id: Transposes of products folded into them (lower_nodes) */
  int *chain;               /* by node id (options.remat): steps to compute it again, 0: not cheap, -1: unknown */
  bool *read;               /* by node id (options.remat): some step already reads its slot */
} lower_ctx;

static void *arena_array(lathe_program *p, size_t n, size_t size) { return lathe_arena_alloc(&p->arena, (n ? n : 1) * size); }

static int add_slot(lower_ctx *c, int kind, const lathe_node *n, int result, const lathe_shape *shape) {
  lathe_pslot *sl = &c->pf->slots[c->pf->n_slots];
  memset(sl, 0, sizeof *sl);
  sl->kind = kind;
  sl->node = n;
  sl->result = result;
  sl->shape = *shape;
  sl->def = -1;
  sl->last_use = -1;
  sl->offset = -1;
  sl->nbytes = lathe_shape_byte_size(shape);
  if (sl->nbytes < 0) c->pf->dynamic = true;
  return c->pf->n_slots++;
}

static int slot_of_node(const lower_ctx *c, const lathe_node *n) { return c->slot_of[c->s.remap[n->id]]; }

/* ---- Transpose of a product: the product with its operands swapped ----
 * DotGeneral's result is [batch, lhs free, rhs free]; a Transpose that only swaps the two free
 * groups is DotGeneral(rhs, lhs) with the attribute lists swapped, which computes the same
 * products and sums (in lathe's own loops and gemm, in the same order: the same bits) without
 * the layout copy. GoMLX's gradients of DotGeneral end in such Transposes. Applies when the
 * product has no other reader. */
static bool swaps_free_groups(const lathe_node *t, const lathe_node *d) {
  lathe_ilist perm = lathe_attr_transpose_permutation(t);
  int nb = (int)lathe_attr_dot_general_lhs_batch(d).n;
  int nl = d->in[0]->shape.rank - nb - (int)lathe_attr_dot_general_lhs_contracting(d).n;
  int nr = d->in[1]->shape.rank - nb - (int)lathe_attr_dot_general_rhs_contracting(d).n;
  if (nl <= 0 || nr <= 0 || perm.n != nb + nl + nr) return false;
  for (int i = 0; i < perm.n; i++) {
    int want = i < nb ? i : i < nb + nr ? nl + i : i - nr;
    if (perm.v[i] != want) return false;
  }
  return true;
}

/* fold[id]: for a folded Transpose (or ConvertDType), the product that replaces it (a node of
 * the same id); for a node it replaces, that Transpose or ConvertDType (a node of another id,
 * which means: no step of its own). */
static lathe_status_t fold_products(lower_ctx *c) {
  const lathe_function *fn = c->pf->fn;
  int n = fn->n_nodes;
  const lathe_node **fold = calloc((size_t)n + 1, sizeof *fold);
  int *uses = calloc((size_t)n + 1, sizeof(int));
  if (!fold || !uses) {
    free(fold);
    free(uses);
    return LATHE_OOM("Compile");
  }
  for (int k = 0; k < c->s.n_order; k++) {
    const lathe_node *nd = fn->nodes[c->s.order[k]];
    for (int i = 0; i < nd->n_in; i++) uses[c->s.remap[nd->in[i]->id]]++;
  }
  for (int i = 0; i < fn->n_outputs; i++) uses[c->s.remap[fn->outputs[i]->id]]++;
  lathe_status_t st = NULL;
  for (int k = 0; k < c->s.n_order && !st; k++) {
    const lathe_node *t = fn->nodes[c->s.order[k]];
    if (t->op != LATHE_OP_TRANSPOSE) continue;
    const lathe_node *d = fn->nodes[c->s.remap[t->in[0]->id]];
    if (d->op != LATHE_OP_DOT_GENERAL || d->multi || d->n_in != 2 || uses[d->id] != 1 || fold[d->id] ||
        !swaps_free_groups(t, d))
      continue;
    lathe_node *sw = lathe_arena_alloc(&c->p->arena, sizeof *sw);
    lathe_node **in = arena_array(c->p, 2, sizeof *in);
    if (!sw || !in) {
      st = LATHE_OOM("Compile");
      break;
    }
    *sw = *d;
    sw->id = t->id;
    sw->shape = t->shape;
    in[0] = d->in[1], in[1] = d->in[0];
    sw->in = in;
    for (int l = 0; l < 2; l++) { /* lists: lhs contracting, lhs batch, rhs contracting, rhs batch */
      sw->a.list[l] = d->a.list[l + 2], sw->a.list_len[l] = d->a.list_len[l + 2];
      sw->a.list[l + 2] = d->a.list[l], sw->a.list_len[l + 2] = d->a.list_len[l];
    }
    fold[t->id] = sw;
    fold[d->id] = t;
  }
  /* A product of two halves summed in Float32 whose only reader rounds it to the halves' dtype
   * (GoMLX's half products: DotGeneral to Float32, then ConvertDType) is the product with a half
   * result: every device sums in Float32 and rounds once either way (the same bits), without the
   * Float32 result in memory or the pass that converts it. Also after a folded Transpose. */
  for (int k = 0; k < c->s.n_order && !st; k++) {
    const lathe_node *t = fn->nodes[c->s.order[k]];
    lathe_dtype half = t->shape.dtype;
    if (t->op != LATHE_OP_CONVERT_DTYPE || (half != LATHE_DTYPE_FLOAT16 && half != LATHE_DTYPE_BFLOAT16)) continue;
    const lathe_node *src = fn->nodes[c->s.remap[t->in[0]->id]];
    const lathe_node *d = !fold[src->id] ? src : fold[src->id]->id == src->id ? fold[src->id] : NULL;
    if (!d || d->op != LATHE_OP_DOT_GENERAL || d->multi || d->n_in != 2 || uses[src->id] != 1 || fold[t->id] ||
        d->shape.dtype != LATHE_DTYPE_FLOAT32 || lathe_attr_dot_general_accumulator(d) != LATHE_DTYPE_FLOAT32 ||
        d->in[0]->shape.dtype != half || d->in[1]->shape.dtype != half)
      continue;
    lathe_node *h = lathe_arena_alloc(&c->p->arena, sizeof *h);
    if (!h) {
      st = LATHE_OOM("Compile");
      break;
    }
    *h = *d;
    h->id = t->id;
    h->shape = t->shape;
    fold[t->id] = h;
    fold[src->id] = t;
  }
  free(uses);
  if (st) {
    free(fold);
    return st;
  }
  c->fold = fold;
  return NULL;
}

/* ---- recomputing cheap values (options.remat) ----
 * A value is cheap when an elementwise op (one fusion joins) makes it from operands that are each
 * at most 1/REMAT_RATIO of its size, or cheap themselves, in at most REMAT_CHAIN steps: a one-hot
 * of the labels (Equal of an Iota and the labels, converted), the loss gradient's broadcast of a
 * scalar times it. Left alone, such a value of REMAT_MIN_BYTES or more is written once and read
 * by steps far apart (the forward loss and its gradient), so it holds its memory through all the
 * steps between; each reader after the first instead gets a copy of its chain, lowered just
 * before it, which fusion then joins to the reader's region: the value lives only as long as one
 * reader, often never in memory at all, for a little arithmetic. */
enum { REMAT_RATIO = 8, REMAT_CHAIN = 8, REMAT_WIDEN = 2 };
#define REMAT_MIN_BYTES ((int64_t)1 << 20)

static const lathe_node *canonical(const lower_ctx *c, const lathe_node *n) { return c->pf->fn->nodes[c->s.remap[n->id]]; }

static int chain_of(lower_ctx *c, const lathe_node *n);

/* Whether a chain that makes n reads its operand in as it is rather than computing it again too:
 * in is small (at most 1/REMAT_RATIO of n's elements); or in is not cheap itself but holds at most
 * 1/REMAT_WIDEN of n's bytes -- a narrower dtype, as the BFloat16 logits a Float32 softmax chain
 * widens: reading them again costs less than writing and reading the wide value, and they hold
 * less memory while they wait. */
static bool read_as_is(lower_ctx *c, const lathe_node *in, const lathe_node *n) {
  /* divided, not multiplied: sizes near INT64_MAX must not overflow */
  if (lathe_shape_num_elements(&in->shape) <= lathe_shape_num_elements(&n->shape) / REMAT_RATIO) return true;
  bool leaf = in->op == LATHE_OP_PARAMETER || in->op == LATHE_OP_CAPTURE;
  return (leaf || !chain_of(c, in)) && lathe_shape_byte_size(&in->shape) <= lathe_shape_byte_size(&n->shape) / REMAT_WIDEN;
}

/* Steps in n's chain (0: n is not cheap). */
static int chain_of(lower_ctx *c, const lathe_node *n) {
  if (c->chain[n->id] >= 0) return c->chain[n->id];
  c->chain[n->id] = 0; /* while deciding */
  if (!fusable_op(n->op) || n->multi || n->n_in == 0 || n->n_in > LATHE_PMEMBER_MAX_IN || n->shape.rank == 0 ||
      lathe_dtype_is_packed(n->shape.dtype) || c->fold[n->id])
    return 0;
  int64_t size = lathe_shape_num_elements(&n->shape), steps = 1;
  if (size <= 0) return 0;
  for (int i = 0; i < n->n_in; i++) {
    const lathe_node *in = canonical(c, n->in[i]);
    int64_t isz = lathe_shape_num_elements(&in->shape);
    if (isz < 0 || lathe_dtype_is_packed(in->shape.dtype)) return 0;
    if (read_as_is(c, in, n)) continue;
    int k = in->op == LATHE_OP_PARAMETER || in->op == LATHE_OP_CAPTURE ? 0 : chain_of(c, in);
    if (!k) return 0;
    steps += k;
  }
  if (steps > REMAT_CHAIN) return 0;
  return c->chain[n->id] = (int)steps;
}

/* Whether n's slot, read again by a later step, should be computed again for it instead. */
static bool remat_input(lower_ctx *c, const lathe_node *n) {
  return c->chain && c->read[n->id] && lathe_shape_byte_size(&n->shape) >= REMAT_MIN_BYTES && chain_of(c, n) > 0;
}

static lathe_status_t new_step(lower_ctx *c, const lathe_node *n, lathe_pstep **out);

/* A copy of n's chain lowered now (its cheap operands first); *slot: the copy's result. */
static lathe_status_t lower_copy(lower_ctx *c, const lathe_node *n, int *slot) {
  int in_slots[LATHE_PMEMBER_MAX_IN];
  for (int i = 0; i < n->n_in; i++) {
    const lathe_node *in = canonical(c, n->in[i]);
    if (read_as_is(c, in, n)) in_slots[i] = slot_of_node(c, in);
    else LATHE_RETURN_IF_ERROR(lower_copy(c, in, &in_slots[i]));
  }
  lathe_pstep *st;
  LATHE_RETURN_IF_ERROR(new_step(c, n, &st));
  for (int i = 0; i < n->n_in; i++) st->in[i] = in_slots[i];
  *slot = st->out[0];
  return NULL;
}

/* The next step, for node n: its result slots made, inputs left for the caller. */
static lathe_status_t new_step(lower_ctx *c, const lathe_node *n, lathe_pstep **out) {
  lathe_pfunc *pf = c->pf;
  lathe_pstep *st = &pf->steps[pf->n_steps];
  st->node = n;
  st->region = -1;
  st->n_in = n->n_in;
  st->n_out = n->multi ? n->n_out : 1;
  st->in = arena_array(c->p, (size_t)st->n_in, sizeof(int));
  st->out = arena_array(c->p, (size_t)st->n_out, sizeof(int));
  if (!st->in || !st->out) return LATHE_OOM("Compile");
  for (int r = 0; r < st->n_out; r++) {
    st->out[r] = add_slot(c, LATHE_PSLOT_VALUE, n, r, n->multi ? &n->out_shapes[r] : &n->shape);
    pf->slots[st->out[r]].def = pf->n_steps;
  }
  pf->n_steps++;
  *out = st;
  return NULL;
}

/* Slots and one step per scheduled op. */
static lathe_status_t lower_nodes(lower_ctx *c) {
  lathe_pfunc *pf = c->pf;
  const lathe_function *fn = pf->fn;
  int n_slots = fn->n_params + fn->n_captures, n_steps = 0;
  c->slot_of = malloc(sizeof(int) * (size_t)(fn->n_nodes + 1));
  if (!c->slot_of) return LATHE_OOM("Compile");
  for (int i = 0; i <= fn->n_nodes; i++) c->slot_of[i] = -1;
  LATHE_RETURN_IF_ERROR(fold_products(c));
  const lathe_node **fold = c->fold;
  if (c->p->options.remat) {
    c->chain = malloc(sizeof(int) * (size_t)(fn->n_nodes + 1));
    c->read = calloc((size_t)fn->n_nodes + 1, sizeof(bool));
    if (!c->chain || !c->read) return LATHE_OOM("Compile");
    for (int i = 0; i <= fn->n_nodes; i++) c->chain[i] = -1;
  }
  for (int k = 0; k < c->s.n_order; k++) {
    const lathe_node *n = fn->nodes[c->s.order[k]];
    if (n->op == LATHE_OP_PARAMETER || n->op == LATHE_OP_CAPTURE || n->op == LATHE_OP_TUPLE_ELEMENT) continue;
    n_slots += n->multi ? n->n_out : 1;
    if (n->op != LATHE_OP_CONSTANT) n_steps++;
    /* room for copies of cheap operands (an upper bound: one per read) */
    for (int i = 0; c->chain && i < n->n_in; i++) {
      const lathe_node *in = canonical(c, n->in[i]);
      int k2 = lathe_shape_byte_size(&in->shape) >= REMAT_MIN_BYTES ? chain_of(c, in) : 0;
      n_slots += k2, n_steps += k2;
    }
  }
  pf->slots = arena_array(c->p, (size_t)n_slots, sizeof(lathe_pslot));
  pf->steps = arena_array(c->p, (size_t)n_steps, sizeof(lathe_pstep));
  pf->params = arena_array(c->p, (size_t)(fn->n_params + fn->n_captures), sizeof(int));
  if (!pf->slots || !pf->steps || !pf->params) return LATHE_OOM("Compile");
  pf->n_declared = fn->n_params;
  pf->n_params = fn->n_params + fn->n_captures;
  for (int i = 0; i < fn->n_params; i++) {
    const lathe_node *n = fn->params[i];
    c->slot_of[n->id] = pf->params[i] = add_slot(c, LATHE_PSLOT_PARAM, n, 0, &n->shape);
  }
  for (int i = 0; i < fn->n_captures; i++) {
    const lathe_node *n = fn->captures[i];
    c->slot_of[n->id] = pf->params[fn->n_params + i] = add_slot(c, LATHE_PSLOT_PARAM, n, 0, &n->shape);
  }
  for (int k = 0; k < c->s.n_order; k++) {
    const lathe_node *n = fn->nodes[c->s.order[k]];
    if (fold[n->id] && fold[n->id]->id != n->id) continue; /* computed by a later node's step */
    if (fold[n->id]) n = fold[n->id];
    switch (n->op) {
      case LATHE_OP_PARAMETER:
      case LATHE_OP_CAPTURE:
        continue;
      case LATHE_OP_TUPLE_ELEMENT:
        c->slot_of[n->id] = slot_of_node(c, n->in[0]) + (int)lathe_attr_tuple_element_index(n);
        continue;
      case LATHE_OP_CONSTANT:
        c->slot_of[n->id] = add_slot(c, LATHE_PSLOT_CONST, n, 0, &n->shape);
        continue;
      default:
        break;
    }
    /* cheap operands read before: computed again first (their copies precede this step) */
    int in_slots[LATHE_PMEMBER_MAX_IN];
    bool copies = c->chain && n->n_in <= LATHE_PMEMBER_MAX_IN;
    for (int i = 0; copies && i < n->n_in; i++) {
      const lathe_node *in = canonical(c, n->in[i]);
      in_slots[i] = slot_of_node(c, in);
      if (remat_input(c, in)) LATHE_RETURN_IF_ERROR(lower_copy(c, in, &in_slots[i]));
    }
    lathe_pstep *st;
    LATHE_RETURN_IF_ERROR(new_step(c, n, &st));
    for (int i = 0; i < n->n_in; i++) st->in[i] = copies ? in_slots[i] : slot_of_node(c, n->in[i]);
    for (int i = 0; c->chain && i < n->n_in; i++) c->read[canonical(c, n->in[i])->id] = true;
    c->slot_of[n->id] = st->out[0];
    /* sub-functions (the FN attribute slots, in order) and where their captures start among the
     * hidden inputs */
    int cap = n->n_operands;
    for (int j = 0; j < LATHE_MAX_SUBFNS; j++) {
      const lathe_function *sub = n->a.fn[j];
      if (!sub) continue;
      st->sub_fn[st->n_sub] = lathe_program_fn_index(c->p, sub);
      if (st->sub_fn[st->n_sub] < 0)
        return lathe_status_new(LATHE_STATUS_INTERNAL, "%s: sub-function \"%s\" was not compiled", lathe_op_name(n->op), sub->name);
      bool same = j > 0 && n->a.fn[0] == sub; /* one function for both branches shares its captures */
      st->sub_cap[st->n_sub] = same ? st->sub_cap[0] : cap;
      if (!same) cap += sub->n_captures;
      st->n_sub++;
    }
  }
  pf->n_outputs = fn->n_outputs;
  pf->outputs = arena_array(c->p, (size_t)fn->n_outputs, sizeof(int));
  if (!pf->outputs) return LATHE_OOM("Compile");
  for (int i = 0; i < fn->n_outputs; i++) pf->outputs[i] = slot_of_node(c, fn->outputs[i]);
  return NULL;
}

/* ---- users of each slot (CSR), for region formation ---- */
static lathe_status_t index_users(lower_ctx *c) {
  lathe_pfunc *pf = c->pf;
  c->users_start = calloc((size_t)pf->n_slots + 2, sizeof(int));
  c->is_output = calloc((size_t)pf->n_slots + 1, sizeof(bool));
  int total = 0;
  for (int s = 0; s < pf->n_steps; s++) total += pf->steps[s].n_in;
  c->users = malloc(sizeof(int) * (size_t)(total + 1));
  if (!c->users_start || !c->is_output || !c->users) return LATHE_OOM("Compile");
  for (int s = 0; s < pf->n_steps; s++)
    for (int i = 0; i < pf->steps[s].n_in; i++) c->users_start[pf->steps[s].in[i] + 2]++;
  for (int k = 2; k <= pf->n_slots + 1; k++) c->users_start[k] += c->users_start[k - 1];
  for (int s = 0; s < pf->n_steps; s++)
    for (int i = 0; i < pf->steps[s].n_in; i++) c->users[c->users_start[pf->steps[s].in[i] + 1]++] = s;
  for (int i = 0; i < pf->n_outputs; i++) c->is_output[pf->outputs[i]] = true;
  return NULL;
}

/* ---- fusion regions ----
 * Formed over the one-step-per-op list, walking it backwards: a fusable step joins the region of
 * one of its users when their iteration dims agree and every other use of its value comes after
 * that region runs (a region runs where its root -- its last member -- was). So moving a member
 * later never makes a value used before it is computed, and no cycle can form. */
typedef struct {
  int root;     /* the step where the region runs */
  int *members; /* step indices (LOOP) */
  int n_members, cap;
  int owner;    /* a LOOP draft that became part of a REDUCE draft: that draft; else -1 */
  int reduce_step, prologue, epilogue; /* REDUCE drafts; -1 otherwise */
  int final;    /* index in the function's region list, or -1 */
  bool rows;    /* a ROWS draft (members: its steps, at every level) */
  int row_axes; /* ROWS: leading axes of the reductions' operand that index rows */
} draft;

typedef struct {
  draft *d;
  int n, cap;
} drafts;

static int top_of(const drafts *ds, int r) { return ds->d[r].owner >= 0 ? ds->d[r].owner : r; }

/* Where step s runs once regions are formed. */
static int exec_pos(const lower_ctx *c, const drafts *ds, int s) {
  int r = c->region_of[s];
  return r < 0 ? s : ds->d[top_of(ds, r)].root;
}

/* FusedActivation and its VJP are elementwise but for the gated SwiGLU: members of LOOP regions
 * where the device asks (lathe_program_options.fuse_activations). */
static bool activation_member(const lower_ctx *c, const lathe_node *n) {
  if (!c->p->options.fuse_activations) return false;
  if (n->op == LATHE_OP_FUSED_ACTIVATION)
    return lathe_act_form_of(lathe_attr_fused_activation_activation(n)) != LATHE_ACT_FORM_GLU;
  if (n->op == LATHE_OP_FUSED_ACTIVATION_VJP)
    return lathe_act_form_of(lathe_attr_fused_activation_vjp_activation(n)) != LATHE_ACT_FORM_GLU;
  return false;
}

static bool step_fusable(const lower_ctx *c, int s) {
  const lathe_pstep *st = &c->pf->steps[s];
  const lathe_node *n = st->node;
  if (!(fusable_op(n->op) || activation_member(c, n)) || n->multi || st->n_out != 1 || n->shape.rank == 0 || lathe_dtype_is_packed(n->shape.dtype))
    return false;
  if (n->n_in > LATHE_PMEMBER_MAX_IN) return false;
  for (int i = 0; i < n->n_in; i++) {
    const lathe_shape *o = &n->in[i]->shape;
    if (lathe_dtype_is_packed(o->dtype)) return false;
    if (n->op == LATHE_OP_BROADCAST_IN_DIM || o->rank == 0 || same_dims(o, &n->shape)) continue;
    if (o->rank != n->shape.rank) return false;
    for (int d = 0; d < o->rank; d++) /* implicit broadcasting: size-1 axes only */
      if (o->dims[d] != n->shape.dims[d] && o->dims[d] != 1) return false;
  }
  return true;
}

/* Whether every use of slot outside draft r (but `except`) comes after pos. */
static bool uses_after(const lower_ctx *c, const drafts *ds, int slot, int r, int except, int pos) {
  for (int k = c->users_start[slot]; k < c->users_start[slot + 1]; k++) {
    int u = c->users[k];
    if (u == except || (r >= 0 && c->region_of[u] == r)) continue;
    if (exec_pos(c, ds, u) <= pos) return false;
  }
  return true;
}

static lathe_status_t draft_add(draft *d, int step) {
  if (d->n_members == d->cap) {
    int nc = d->cap ? 2 * d->cap : 8;
    int *m = realloc(d->members, sizeof(int) * (size_t)nc);
    if (!m) return LATHE_OOM("Compile");
    d->members = m;
    d->cap = nc;
  }
  d->members[d->n_members++] = step;
  return NULL;
}

static lathe_status_t draft_new(drafts *ds, int root, int *out) {
  if (ds->n == ds->cap) {
    int nc = ds->cap ? 2 * ds->cap : 16;
    draft *d = realloc(ds->d, sizeof(draft) * (size_t)nc);
    if (!d) return LATHE_OOM("Compile");
    ds->d = d;
    ds->cap = nc;
  }
  draft *d = &ds->d[ds->n];
  memset(d, 0, sizeof *d);
  d->root = root;
  d->owner = d->reduce_step = d->prologue = d->epilogue = d->final = -1;
  *out = ds->n++;
  return NULL;
}

static lathe_status_t form_loops(lower_ctx *c, drafts *ds) {
  lathe_pfunc *pf = c->pf;
  for (int s = pf->n_steps - 1; s >= 0; s--) {
    if (c->region_of[s] >= 0 || !step_fusable(c, s)) continue;
    int slot = pf->steps[s].out[0], best = -1;
    for (int k = c->users_start[slot]; k < c->users_start[slot + 1]; k++) {
      int r = c->region_of[c->users[k]];
      if (r < 0 || ds->d[r].rows || (best >= 0 && ds->d[r].root >= ds->d[best].root)) continue;
      if (!same_dims(&pf->steps[ds->d[r].root].node->shape, &pf->steps[s].node->shape)) continue;
      if (uses_after(c, ds, slot, r, -1, ds->d[r].root)) best = r;
    }
    if (best < 0) LATHE_RETURN_IF_ERROR(draft_new(ds, s, &best));
    LATHE_RETURN_IF_ERROR(draft_add(&ds->d[best], s));
    c->region_of[s] = best;
  }
  return NULL;
}

/* A LOOP worth running as a region on its own: two members or more, not only index maps. */
static bool loop_worth(const lower_ctx *c, const draft *d) {
  if (d->n_members < 2) return false;
  for (int i = 0; i < d->n_members; i++)
    if (c->pf->steps[d->members[i]].node->op != LATHE_OP_BROADCAST_IN_DIM) return true;
  return false;
}

/* REDUCE regions: a reduction takes the LOOP draft rooted at its operand's producer as its
 * prologue, and a LOOP draft over its result's dims that reads the result as its epilogue, when
 * every outside use of what moves still comes after the merged region runs. A single fusable op
 * (a one-member draft) may be a part. */
static lathe_status_t form_reduces(lower_ctx *c, drafts *ds) {
  lathe_pfunc *pf = c->pf;
  for (int s = 0; s < pf->n_steps; s++) {
    const lathe_node *n = pf->steps[s].node;
    if (c->region_of[s] >= 0 || !fold_op(n->op) || lathe_dtype_is_packed(n->in[0]->shape.dtype) ||
        lathe_dtype_is_packed(n->shape.dtype))
      continue;
    int in_slot = pf->steps[s].in[0], out_slot = pf->steps[s].out[0];
    int epi = -1;
    for (int k = c->users_start[out_slot]; k < c->users_start[out_slot + 1]; k++) {
      int r = c->region_of[c->users[k]];
      if (r < 0 || ds->d[r].owner >= 0 || ds->d[r].reduce_step >= 0 || ds->d[r].rows) continue;
      if (!same_dims(&pf->steps[ds->d[r].root].node->shape, &n->shape)) continue;
      if (epi < 0 || ds->d[r].root < ds->d[epi].root) epi = r;
    }
    if (epi >= 0 && !uses_after(c, ds, out_slot, epi, -1, ds->d[epi].root)) epi = -1;
    int pos = epi >= 0 ? ds->d[epi].root : s;
    int pro = -1, def = pf->slots[in_slot].def;
    if (def >= 0 && c->region_of[def] >= 0) {
      int r = c->region_of[def];
      if (ds->d[r].root == def && ds->d[r].owner < 0 && ds->d[r].reduce_step < 0 && !ds->d[r].rows && r != epi) pro = r;
    }
    for (int i = 0; pro >= 0 && i < ds->d[pro].n_members; i++)
      if (!uses_after(c, ds, pf->steps[ds->d[pro].members[i]].out[0], pro, s, pos)) pro = -1;
    if (pro < 0 && epi < 0) continue;
    int r;
    LATHE_RETURN_IF_ERROR(draft_new(ds, pos, &r));
    ds->d[r].reduce_step = s;
    ds->d[r].prologue = pro;
    ds->d[r].epilogue = epi;
    c->region_of[s] = r;
    if (pro >= 0) ds->d[pro].owner = r;
    if (epi >= 0) ds->d[epi].owner = r;
  }
  return NULL;
}

/* Region inputs: one per (slot, access pattern). */
static int add_input(lathe_pregion *g, int slot, int access, const int64_t *strides, int rank) {
  for (int i = 0; i < g->n_inputs; i++) {
    lathe_pinput *in = &g->inputs[i];
    if (in->slot != slot || in->access != access) continue;
    if (access != LATHE_PACCESS_STRIDED || memcmp(in->strides, strides, sizeof(int64_t) * (size_t)rank) == 0) return i;
  }
  lathe_pinput *in = &g->inputs[g->n_inputs];
  memset(in, 0, sizeof *in);
  in->slot = slot;
  in->access = access;
  if (access == LATHE_PACCESS_STRIDED) memcpy(in->strides, strides, sizeof(int64_t) * (size_t)rank);
  return g->n_inputs++;
}

/* The element strides, over iteration dims `it`, at which member reads an operand of shape os
 * (0 where it broadcasts); *full: the operand is read whole, in order. A rank-0 operand of a
 * member other than a BroadcastInDim gets no strides (a scalar). */
static void read_strides(const lathe_node *member, const lathe_shape *os, const lathe_shape *it, int64_t *strides, bool *full) {
  for (int a = 0; a < LATHE_MAX_RANK; a++) strides[a] = 0;
  *full = false;
  /* a broadcast member has no computation of its own: even a scalar operand is read as a tile
   * (all strides 0), so that its users see an operand of the iteration's shape */
  if (member->op == LATHE_OP_BROADCAST_IN_DIM) {
    const int64_t *axes = lathe_attr_broadcast_in_dim_axes(member).v;
    int64_t acc = 1;
    bool whole = os->rank == it->rank;
    for (int i = os->rank - 1; i >= 0; i--) {
      int a = (int)axes[i];
      strides[a] = os->dims[i] == 1 && it->dims[a] != 1 ? 0 : acc;
      whole = whole && a == i && os->dims[i] == it->dims[a];
      acc *= os->dims[i];
    }
    *full = whole;
    return;
  }
  if (os->rank == 0) return;
  if (same_dims(os, it)) {
    *full = true;
    int64_t acc = 1;
    for (int d = os->rank - 1; d >= 0; d--) strides[d] = acc, acc *= os->dims[d];
    return;
  }
  int64_t acc = 1;
  for (int d = os->rank - 1; d >= 0; d--) {
    strides[d] = os->dims[d] == 1 && it->dims[d] != 1 ? 0 : acc;
    acc *= os->dims[d];
  }
}

/* How member reads an operand slot of shape os over the region's iteration dims. */
static int input_for(lathe_pregion *g, const lathe_node *member, int slot, const lathe_shape *os) {
  int64_t strides[LATHE_MAX_RANK];
  bool full;
  read_strides(member, os, &g->shape, strides, &full);
  if (full) return add_input(g, slot, LATHE_PACCESS_FULL, strides, 0);
  if (member->op != LATHE_OP_BROADCAST_IN_DIM && os->rank == 0) return add_input(g, slot, LATHE_PACCESS_SCALAR, strides, 0);
  return add_input(g, slot, LATHE_PACCESS_STRIDED, strides, g->shape.rank);
}

/* ---- ROWS regions (formed first, for devices that ask) ----
 * Each reduction over the trailing axes of its operand (dims F: rows, then the reduced run) seeds
 * a draft that grows by the producers and users of its members while they are elementwise (or
 * Reshapes and broadcasts of row values) at one of two levels, over F or over the rows, and
 * while every use of what moves still comes after the draft runs (as for LOOP drafts). It stays
 * a region when it does more than a reduction with its prologue and epilogue -- a second
 * reduction, or values over F computed from row values (softmax, layer norm and their
 * gradients as GoMLX's graph package writes them) -- or, with options.rows_lone, when it has
 * that many rows and work besides its reduction; otherwise its steps are left to the LOOP and
 * REDUCE drafts. Only floating-point Sum, Product, Max and Min join. */
enum { RL_FULL = 1, RL_ROW, RL_RED, ROWS_MAX_MEMBERS = 48 };

typedef struct {
  lathe_shape F;
  int k;        /* leading axes that index rows */
  int64_t R, N; /* rows, elements per row */
} rspace;

/* Whether n reduces the trailing axes of its operand, rows of at most rows_max (or rows_long,
 * when there are rows_lone rows or more); *sp its space. */
static bool row_reduction(const lower_ctx *c, const lathe_node *n, rspace *sp) {
  if (!fold_op(n->op)) return false;
  /* floats only: that leaves Sum, Product, Max and Min (the bitwise and logical folds are not
   * defined on them) */
  lathe_dtype_class cl = lathe_dtype_class_of(n->shape.dtype);
  if ((cl != LATHE_CLASS_FLOAT && cl != LATHE_CLASS_HALF) || n->in[0]->shape.dtype != n->shape.dtype) return false;
  const lathe_shape *F = &n->in[0]->shape;
  bool red[LATHE_MAX_RANK] = {false};
  lathe_ilist axes = lathe_attr_reduce_axes(n);
  for (int i = 0; i < axes.n; i++) red[axes.v[i]] = true;
  int k = 0;
  for (int a = 0; a < F->rank; a++) {
    if (F->dims[a] < 0) return false;
    if (!red[a] && F->dims[a] != 1) k = a + 1;
  }
  int64_t R = 1, N = 1;
  for (int a = 0; a < F->rank; a++) {
    if (a < k && red[a] && F->dims[a] != 1) return false;
    if (a < k) R *= F->dims[a];
    else N *= F->dims[a];
  }
  const lathe_program_options *o = &c->p->options;
  bool fits = N <= o->rows_max || (N <= o->rows_long && o->rows_lone > 0 && R >= o->rows_lone);
  if (N < 2 || !fits || R < 1) return false;
  *sp = (rspace){*F, k, R, N};
  return true;
}

/* Whether shape s holds one value per row in row order (F's leading dims, size-1 axes aside). */
static bool row_shaped(const rspace *sp, const lathe_shape *s) {
  if (lathe_shape_size(s) != sp->R) return false;
  int a = 0;
  for (int d = 0; d < s->rank; d++) {
    if (s->dims[d] == 1) continue;
    while (a < sp->k && sp->F.dims[a] == 1) a++;
    if (a >= sp->k || sp->F.dims[a] != s->dims[d]) return false;
    a++;
  }
  return true;
}

/* Whether strides over F read element r of a row value (row-major over the leading axes, 0 over
 * the trailing ones). */
static bool row_pattern(const rspace *sp, const int64_t *strides) {
  int64_t acc = 1;
  for (int a = sp->F.rank - 1; a >= 0; a--) {
    if (sp->F.dims[a] == 1) continue;
    if (a >= sp->k ? strides[a] != 0 : strides[a] != acc) return false;
    if (a < sp->k) acc *= sp->F.dims[a];
  }
  return true;
}

/* Whether strides over F walk the trailing axes as one axis (a device reads a row with one
 * stride). */
static bool trailing_as_one(const rspace *sp, const int64_t *strides) {
  int64_t step = -1, acc = 1;
  for (int a = sp->F.rank - 1; a >= sp->k; a--) {
    if (sp->F.dims[a] == 1) continue;
    if (step < 0) step = strides[a];
    else if (strides[a] != step * acc) return false;
    acc *= sp->F.dims[a];
  }
  return true;
}

/* Whether strides over shape it read it in row-major order (size-1 axes aside). */
static bool in_order(const lathe_shape *it, const int64_t *strides) {
  int64_t acc = 1;
  for (int a = it->rank - 1; a >= 0; a--) {
    if (it->dims[a] == 1) continue;
    if (strides[a] != acc) return false;
    acc *= it->dims[a];
  }
  return true;
}

/* The level step s would join a ROWS draft over sp at (0: none). */
static int level_of(const lower_ctx *c, const rspace *sp, int s) {
  const lathe_pstep *st = &c->pf->steps[s];
  const lathe_node *n = st->node;
  if (st->n_out != 1 || n->multi || lathe_dtype_is_packed(n->shape.dtype)) return 0;
  if (fold_op(n->op)) {
    rspace t;
    return row_reduction(c, n, &t) && t.k == sp->k && same_dims(&t.F, &sp->F) ? RL_RED : 0;
  }
  if (n->op == LATHE_OP_RESHAPE) return row_shaped(sp, &n->shape) && row_shaped(sp, &n->in[0]->shape) ? RL_ROW : 0;
  if (!fusable_op(n->op) || st->n_in > LATHE_PMEMBER_MAX_IN) return 0;
  for (int i = 0; i < st->n_in; i++)
    if (lathe_dtype_is_packed(c->pf->slots[st->in[i]].shape.dtype)) return 0;
  if (same_dims(&n->shape, &sp->F)) return RL_FULL;
  return row_shaped(sp, &n->shape) ? RL_ROW : 0;
}

/* Whether step s at level lvl may read its operands as members of draft r are (the draft's
 * members at their levels, the rest as region inputs). */
static bool operands_ok(const lower_ctx *c, int r, const rspace *sp, int s, int lvl) {
  const lathe_pstep *st = &c->pf->steps[s];
  const lathe_node *n = st->node;
  for (int i = 0; i < st->n_in; i++) {
    int slot = st->in[i], def = c->pf->slots[slot].def;
    int ml = def >= 0 && c->region_of[def] == r ? c->row_level[def] : 0;
    const lathe_shape *os = &c->pf->slots[slot].shape;
    int64_t str[LATHE_MAX_RANK];
    bool full;
    if (lvl == RL_RED) {
      if (ml == RL_ROW || ml == RL_RED) return false;
      continue;
    }
    if (lvl == RL_ROW) {
      if (ml == RL_FULL) return false;
      if (n->op == LATHE_OP_RESHAPE || lathe_shape_size(os) == 1) continue;
      read_strides(n, os, &n->shape, str, &full);
      if (n->op == LATHE_OP_BROADCAST_IN_DIM ? !in_order(&n->shape, str) : !same_dims(os, &n->shape)) return false;
      continue;
    }
    if (n->op != LATHE_OP_BROADCAST_IN_DIM && os->rank != 0 && !same_dims(os, &sp->F)) {
      if (os->rank != sp->F.rank) return false;
      for (int d = 0; d < os->rank; d++)
        if (os->dims[d] != sp->F.dims[d] && os->dims[d] != 1) return false;
    }
    read_strides(n, os, &sp->F, str, &full);
    if (ml == RL_FULL ? !full : ml ? !row_pattern(sp, str) : !trailing_as_one(sp, str)) return false;
  }
  return true;
}

/* Whether every member of draft r still reads its operands as its level allows. */
static bool members_ok(const lower_ctx *c, const drafts *ds, int r, const rspace *sp) {
  for (int i = 0; i < ds->d[r].n_members; i++) {
    int m = ds->d[r].members[i];
    if (!operands_ok(c, r, sp, m, c->row_level[m])) return false;
  }
  return true;
}

static lathe_status_t grow_rows(lower_ctx *c, drafts *ds, int r, const rspace *sp) {
  lathe_pfunc *pf = c->pf;
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < ds->d[r].n_members && ds->d[r].n_members < ROWS_MAX_MEMBERS; i++) {
      const lathe_pstep *st = &pf->steps[ds->d[r].members[i]];
      /* producers run later, at the draft's root */
      for (int k = 0; k < st->n_in && ds->d[r].n_members < ROWS_MAX_MEMBERS; k++) {
        int p = pf->slots[st->in[k]].def, lvl;
        if (p < 0 || c->region_of[p] >= 0 || !(lvl = level_of(c, sp, p)) || !operands_ok(c, r, sp, p, lvl) ||
            !uses_after(c, ds, pf->steps[p].out[0], r, -1, ds->d[r].root))
          continue;
        LATHE_RETURN_IF_ERROR(draft_add(&ds->d[r], p));
        c->region_of[p] = r, c->row_level[p] = lvl;
        if (members_ok(c, ds, r, sp)) {
          changed = true;
        } else { /* a member reads it in a way its level does not allow */
          ds->d[r].n_members--;
          c->region_of[p] = -1;
        }
      }
      /* users: the draft then runs where the last of them was */
      int slot = st->out[0];
      for (int k = c->users_start[slot]; k < c->users_start[slot + 1] && ds->d[r].n_members < ROWS_MAX_MEMBERS; k++) {
        int u = c->users[k], lvl;
        if (c->region_of[u] >= 0 || !(lvl = level_of(c, sp, u)) || !operands_ok(c, r, sp, u, lvl)) continue;
        int root = u > ds->d[r].root ? u : ds->d[r].root;
        bool ok = uses_after(c, ds, pf->steps[u].out[0], r, -1, root);
        for (int j = 0; ok && j < ds->d[r].n_members; j++) ok = uses_after(c, ds, pf->steps[ds->d[r].members[j]].out[0], r, u, root);
        if (!ok) continue;
        LATHE_RETURN_IF_ERROR(draft_add(&ds->d[r], u));
        c->region_of[u] = r, c->row_level[u] = lvl;
        ds->d[r].root = root;
        changed = true;
      }
    }
  }
  return NULL;
}

static lathe_status_t form_rows(lower_ctx *c, drafts *ds) {
  lathe_pfunc *pf = c->pf;
  for (int s = 0; s < pf->n_steps; s++) {
    rspace sp;
    if (c->region_of[s] >= 0 || pf->steps[s].n_out != 1 || !row_reduction(c, pf->steps[s].node, &sp)) continue;
    int r;
    LATHE_RETURN_IF_ERROR(draft_new(ds, s, &r));
    ds->d[r].rows = true;
    ds->d[r].row_axes = sp.k;
    LATHE_RETURN_IF_ERROR(draft_add(&ds->d[r], s));
    c->region_of[s] = r, c->row_level[s] = RL_RED;
    LATHE_RETURN_IF_ERROR(grow_rows(c, ds, r, &sp));
    /* worth a kernel of its own: a second reduction, or row values read back over F */
    int reds = 0;
    bool back = false;
    for (int i = 0; i < ds->d[r].n_members; i++) {
      const lathe_pstep *st = &pf->steps[ds->d[r].members[i]];
      reds += c->row_level[ds->d[r].members[i]] == RL_RED;
      for (int k = 0; c->row_level[ds->d[r].members[i]] == RL_FULL && k < st->n_in; k++) {
        int def = pf->slots[st->in[k]].def;
        back |= def >= 0 && c->region_of[def] == r && c->row_level[def] != RL_FULL;
      }
    }
    if (reds >= 2 || back || (c->p->options.rows_lone > 0 && sp.R >= c->p->options.rows_lone && ds->d[r].n_members > 1))
      continue;
    for (int i = 0; i < ds->d[r].n_members; i++) c->region_of[ds->d[r].members[i]] = -1;
    ds->d[r].n_members = 0;
    ds->d[r].rows = false;
  }
  return NULL;
}

/* The members of region g (kind and shape set) from draft r, in order (operands first). A
 * member's value escapes (gets its slot written) when it is the root, returned, or read outside
 * the draft; values used only inside stay internal. Inputs are read as input_for says over g's
 * shape; in a ROWS region (sp given), those of row members in row order or as a scalar. */
static lathe_status_t fill_members(lower_ctx *c, draft *d, int r, lathe_pregion *g, const rspace *sp) {
  lathe_pfunc *pf = c->pf;
  g->members = arena_array(c->p, (size_t)d->n_members, sizeof(lathe_pmember));
  g->inputs = arena_array(c->p, (size_t)d->n_members * LATHE_PMEMBER_MAX_IN, sizeof(lathe_pinput));
  if (!g->members || !g->inputs) return LATHE_OOM("Compile");
  int64_t rowst[LATHE_MAX_RANK] = {0}, acc = 1, zero[LATHE_MAX_RANK] = {0};
  for (int a = sp ? sp->k - 1 : -1; a >= 0; a--) rowst[a] = sp->F.dims[a] == 1 ? 0 : acc, acc *= sp->F.dims[a];
  for (int i = 0; i < d->n_members; i++) {
    const lathe_pstep *st = &pf->steps[d->members[i]];
    int lvl = sp ? c->row_level[d->members[i]] : RL_FULL;
    lathe_pmember *m = &g->members[g->n_members++];
    m->node = st->node;
    m->n_in = st->n_in;
    m->identity = st->node->op == LATHE_OP_BROADCAST_IN_DIM || st->node->op == LATHE_OP_RESHAPE;
    m->row = lvl != RL_FULL;
    for (int k = 0; k < st->n_in; k++) {
      int slot = st->in[k], def = pf->slots[slot].def, j = -1;
      for (int q = 0; def >= 0 && q < i; q++)
        if (d->members[q] == def) j = q;
      const lathe_shape *os = &pf->slots[slot].shape;
      if (j >= 0) m->in[k] = j;
      else if (lvl != RL_ROW) m->in[k] = -(input_for(g, st->node, slot, os) + 1);
      else if (lathe_shape_size(os) == 1) m->in[k] = -(add_input(g, slot, LATHE_PACCESS_SCALAR, zero, 0) + 1);
      else m->in[k] = -(add_input(g, slot, LATHE_PACCESS_STRIDED, rowst, g->shape.rank) + 1);
    }
    int slot = st->out[0];
    bool escapes = i == d->n_members - 1 || c->is_output[slot];
    for (int k = c->users_start[slot]; !escapes && k < c->users_start[slot + 1]; k++)
      escapes = c->region_of[c->users[k]] != r;
    m->out_slot = escapes ? slot : -1;
  }
  return NULL;
}

/* The ROWS region of draft r: its members at their levels over the reductions' operand. */
static lathe_status_t make_rows(lower_ctx *c, draft *d, int r, lathe_pregion *g) {
  lathe_pfunc *pf = c->pf;
  qsort(d->members, (size_t)d->n_members, sizeof(int), cmp_int);
  rspace sp = {0};
  for (int i = 0; i < d->n_members; i++)
    if (c->row_level[d->members[i]] == RL_RED && row_reduction(c, pf->steps[d->members[i]].node, &sp)) break;
  memset(g, 0, sizeof *g);
  g->kind = LATHE_PREGION_ROWS;
  g->prologue = g->epilogue = g->reduce_in = g->reduce_out = -1;
  g->shape = sp.F;
  g->shape.dtype = pf->steps[d->members[d->n_members - 1]].node->shape.dtype;
  g->row_axes = sp.k;
  return fill_members(c, d, r, g, &sp);
}

/* The LOOP region of draft r over its root's dims (a Reshape never joins one). */
static lathe_status_t make_loop(lower_ctx *c, draft *d, int r, lathe_pregion *g) {
  lathe_pfunc *pf = c->pf;
  qsort(d->members, (size_t)d->n_members, sizeof(int), cmp_int);
  memset(g, 0, sizeof *g);
  g->kind = LATHE_PREGION_LOOP;
  g->prologue = g->epilogue = g->reduce_in = g->reduce_out = -1;
  g->shape = pf->steps[d->members[d->n_members - 1]].node->shape;
  return fill_members(c, d, r, g, NULL);
}

static void add_unique(int *arr, int *n, int v) {
  for (int j = 0; j < *n; j++)
    if (arr[j] == v) return;
  arr[(*n)++] = v;
}

/* Whether slot is read by a step outside the given draft and step, or returned. */
static bool read_outside(const lower_ctx *c, int slot, int draft_idx, int step) {
  if (c->is_output[slot]) return true;
  for (int k = c->users_start[slot]; k < c->users_start[slot + 1]; k++) {
    int u = c->users[k];
    if (u != step && (draft_idx < 0 || c->region_of[u] != draft_idx)) return true;
  }
  return false;
}

/* The step that runs region g (built from draft index top). */
static lathe_status_t region_step(lower_ctx *c, const drafts *ds, int top, lathe_pstep *ns) {
  lathe_pfunc *pf = c->pf;
  const draft *d = &ds->d[top];
  const lathe_pregion *g = &pf->regions[d->final];
  const lathe_pregion *parts[2] = {g, NULL};
  if (g->kind == LATHE_PREGION_REDUCE) {
    parts[0] = g->prologue >= 0 ? &pf->regions[g->prologue] : NULL;
    parts[1] = g->epilogue >= 0 ? &pf->regions[g->epilogue] : NULL;
  }
  memset(ns, 0, sizeof *ns);
  ns->region = d->final;
  ns->node = g->kind == LATHE_PREGION_REDUCE ? g->reduce : g->members[g->n_members - 1].node;
  int max_in = 1, max_out = 1;
  for (int k = 0; k < 2; k++)
    if (parts[k]) max_in += parts[k]->n_inputs, max_out += parts[k]->n_members;
  ns->in = arena_array(c->p, (size_t)max_in, sizeof(int));
  ns->out = arena_array(c->p, (size_t)max_out, sizeof(int));
  if (!ns->in || !ns->out) return LATHE_OOM("Compile");
  for (int k = 0; k < 2; k++)
    for (int i = 0; parts[k] && i < parts[k]->n_inputs; i++)
      if (g->kind != LATHE_PREGION_REDUCE || parts[k]->inputs[i].slot != g->reduce_out)
        add_unique(ns->in, &ns->n_in, parts[k]->inputs[i].slot);
  if (g->kind == LATHE_PREGION_REDUCE && g->prologue < 0) add_unique(ns->in, &ns->n_in, g->reduce_in);
  for (int k = 0; k < 2; k++)
    for (int i = 0; parts[k] && i < parts[k]->n_members; i++) {
      int slot = parts[k]->members[i].out_slot;
      if (slot < 0) continue;
      if (g->kind == LATHE_PREGION_REDUCE && slot == g->reduce_in && !read_outside(c, slot, -1, d->reduce_step)) continue;
      add_unique(ns->out, &ns->n_out, slot);
    }
  if (g->kind == LATHE_PREGION_REDUCE && (g->epilogue < 0 || read_outside(c, g->reduce_out, d->epilogue, -1)))
    add_unique(ns->out, &ns->n_out, g->reduce_out);
  return NULL;
}

/* Forms the regions and replaces their member steps by one step per region, at its root. */
static lathe_status_t build_regions(lower_ctx *c) {
  lathe_pfunc *pf = c->pf;
  drafts ds = {0};
  lathe_status_t st = NULL;
  c->region_of = malloc(sizeof(int) * (size_t)(pf->n_steps + 1));
  int *new_index = malloc(sizeof(int) * (size_t)(pf->n_steps + 1));
  if (!c->region_of || !new_index) st = LATHE_OOM("Compile");
  if (!st) st = index_users(c);
  for (int s = 0; !st && s < pf->n_steps; s++) c->region_of[s] = -1;
  if (!st && c->p->options.rows_max > 0) {
    c->row_level = calloc((size_t)pf->n_steps + 1, sizeof(int));
    st = c->row_level ? form_rows(c, &ds) : LATHE_OOM("Compile");
  }
  if (!st) st = form_loops(c, &ds);
  if (!st) st = form_reduces(c, &ds);
  /* keep REDUCE drafts, their parts, and LOOP drafts worth it; the rest run as plain steps */
  int n_final = 0;
  for (int r = 0; !st && r < ds.n; r++) {
    draft *d = &ds.d[r];
    if (d->rows || d->reduce_step >= 0 || d->owner >= 0 || loop_worth(c, d)) {
      d->final = n_final++;
      continue;
    }
    for (int i = 0; i < d->n_members; i++) c->region_of[d->members[i]] = -1;
  }
  if (!st && n_final) {
    pf->regions = arena_array(c->p, (size_t)n_final, sizeof(lathe_pregion));
    if (!pf->regions) st = LATHE_OOM("Compile");
    pf->n_regions = n_final;
  }
  for (int r = 0; !st && r < ds.n; r++)
    if (ds.d[r].final >= 0 && ds.d[r].reduce_step < 0)
      st = ds.d[r].rows ? make_rows(c, &ds.d[r], r, &pf->regions[ds.d[r].final]) : make_loop(c, &ds.d[r], r, &pf->regions[ds.d[r].final]);
  for (int r = 0; !st && r < ds.n; r++) {
    const draft *d = &ds.d[r];
    if (d->final < 0 || d->reduce_step < 0) continue;
    lathe_pregion *g = &pf->regions[d->final];
    const lathe_pstep *rs = &pf->steps[d->reduce_step];
    memset(g, 0, sizeof *g);
    g->kind = LATHE_PREGION_REDUCE;
    g->shape = rs->node->shape;
    g->reduce = rs->node;
    g->reduce_in = rs->in[0];
    g->reduce_out = rs->out[0];
    g->prologue = d->prologue >= 0 ? ds.d[d->prologue].final : -1;
    g->epilogue = d->epilogue >= 0 ? ds.d[d->epilogue].final : -1;
  }
  /* the new step list, in the old order, each region at its root */
  lathe_pstep *steps = st ? NULL : arena_array(c->p, (size_t)pf->n_steps, sizeof(lathe_pstep));
  if (!st && !steps) st = LATHE_OOM("Compile");
  int n = 0;
  for (int s = 0; !st && s < pf->n_steps; s++) {
    int r = c->region_of[s];
    new_index[s] = -1;
    if (r < 0) {
      steps[n] = pf->steps[s];
      new_index[s] = n++;
    } else if (ds.d[top_of(&ds, r)].root == s) {
      st = region_step(c, &ds, top_of(&ds, r), &steps[n]);
      new_index[s] = n++;
    }
  }
  if (!st) {
    /* slots made inside a region are defined by its step */
    for (int i = 0; i < pf->n_slots; i++) {
      int d = pf->slots[i].def;
      if (d >= 0) pf->slots[i].def = new_index[exec_pos(c, &ds, d)];
    }
    pf->steps = steps;
    pf->n_steps = n;
  }
  for (int r = 0; r < ds.n; r++) free(ds.d[r].members);
  free(ds.d);
  free(new_index);
  return st;
}

/* ---- returned regions run early (after fusion, before liveness) ----
 * A LOOP region whose results are only returned (an optimizer's update of the weights: w - lr*dw)
 * moves up to just after the last step that makes or reads one of its inputs. Built in order, the
 * updates all come after the whole backward pass, and each reads its gradient back from memory;
 * moved, it runs while the gradient (and the weight a product has just read) is still in cache,
 * and the gradient's arena slot dies sooner. Every other reader of its inputs stays before it, so
 * reuse in place is unchanged. Steps with small results move up to just after their inputs are
 * made first (the updates' learning rate is computed from the step count after the backward
 * pass). The order of side effects, barriers, control and collective ops is kept (nothing moves
 * above one). */
/* Results of at most this many elements each are "small" (a learning rate divided by the square
 * root of the step count): moving their step up costs no memory worth counting. */
enum { HOIST_SMALL = 64 };

static bool pins_order(const lathe_pstep *st) {
  if (st->region >= 0) return false;
  lathe_op_kind k = lathe_op_kind_of(st->node->op);
  return lathe_op_has(st->node->op, LATHE_OPF_SIDE) || k == LATHE_KIND_CONTROL || k == LATHE_KIND_BARRIER ||
         k == LATHE_KIND_COLLECTIVE;
}

/* Whether step q makes one of slots (or, with reads, reads one that is not small: one that could
 * be reused in place). */
static bool touches(const lathe_pfunc *pf, const lathe_pstep *q, const int *slots, int n, bool reads) {
  for (int i = 0; i < n; i++) {
    bool big = lathe_shape_size(&pf->slots[slots[i]].shape) > HOIST_SMALL;
    for (int j = 0; reads && big && j < q->n_in; j++)
      if (q->in[j] == slots[i]) return true;
    for (int j = 0; j < q->n_out; j++)
      if (q->out[j] == slots[i]) return true;
  }
  return false;
}

static lathe_status_t hoist_returned_regions(lower_ctx *c) {
  lathe_pfunc *pf = c->pf;
  int n = pf->n_steps;
  int *read_by = calloc((size_t)pf->n_slots + 1, sizeof(int)), *order = malloc(sizeof(int) * (size_t)(n + 1));
  int *pos = malloc(sizeof(int) * (size_t)(n + 1));
  lathe_pstep *steps = arena_array(c->p, (size_t)n, sizeof(lathe_pstep));
  if (!read_by || !order || !pos || !steps) {
    free(read_by), free(order), free(pos);
    return LATHE_OOM("Compile");
  }
  for (int s = 0; s < n; s++)
    for (int i = 0; i < pf->steps[s].n_in; i++) read_by[pf->steps[s].in[i]]++;
  for (int s = 0; s < n; s++) order[s] = s;
  bool moved = false;
  for (int r = 0; r < n; r++) { /* order[r] is still step r: only earlier entries have moved */
    const lathe_pstep *st = &pf->steps[r];
    if (st->n_out == 0 || pins_order(st) || (st->region >= 0 && pf->regions[st->region].kind != LATHE_PREGION_LOOP))
      continue;
    bool only_returned = st->region >= 0, small = true;
    for (int k = 0; k < st->n_out; k++) {
      only_returned &= c->is_output[st->out[k]] && !read_by[st->out[k]];
      small &= pf->slots[st->out[k]].nbytes >= 0 && lathe_shape_size(&pf->slots[st->out[k]].shape) <= HOIST_SMALL;
    }
    if (!only_returned && !small) continue;
    /* a region stays after its inputs' readers (reuse in place); small results only after their
     * inputs are made */
    int to = r;
    while (to > 0 && !pins_order(&pf->steps[order[to - 1]]) &&
           !touches(pf, &pf->steps[order[to - 1]], st->in, st->n_in, only_returned))
      to--;
    if (to == r) continue;
    memmove(&order[to + 1], &order[to], sizeof(int) * (size_t)(r - to));
    order[to] = r;
    moved = true;
  }
  if (moved) {
    for (int s = 0; s < n; s++) steps[s] = pf->steps[order[s]], pos[order[s]] = s;
    for (int i = 0; i < pf->n_slots; i++)
      if (pf->slots[i].def >= 0) pf->slots[i].def = pos[pf->slots[i].def];
    pf->steps = steps;
  }
  free(read_by), free(order), free(pos);
  return NULL;
}

/* ---- liveness ---- */
static lathe_status_t liveness(lower_ctx *c) {
  lathe_pfunc *pf = c->pf;
  for (int i = 0; i < pf->n_slots; i++) pf->slots[i].last_use = -1;
  for (int s = 0; s < pf->n_steps; s++)
    for (int i = 0; i < pf->steps[s].n_in; i++) pf->slots[pf->steps[s].in[i]].last_use = s;
  /* slots passed between the parts of a REDUCE region live inside its step */
  for (int s = 0; s < pf->n_steps; s++) {
    const lathe_pstep *st = &pf->steps[s];
    if (st->region < 0 || pf->regions[st->region].kind != LATHE_PREGION_REDUCE) continue;
    const lathe_pregion *g = &pf->regions[st->region];
    int internal[2] = {g->reduce_in, g->reduce_out};
    for (int k = 0; k < 2; k++)
      if (pf->slots[internal[k]].def == s && pf->slots[internal[k]].last_use < s) pf->slots[internal[k]].last_use = s;
  }
  for (int i = 0; i < pf->n_outputs; i++) pf->slots[pf->outputs[i]].last_use = pf->n_steps;
  /* what dies after each step: operands read last there, results nobody reads */
  int *buf = malloc(sizeof(int) * (size_t)(pf->n_slots + 1));
  if (!buf) return LATHE_OOM("Compile");
  lathe_status_t st = NULL;
  for (int s = 0; !st && s < pf->n_steps; s++) {
    lathe_pstep *sp = &pf->steps[s];
    int n = 0;
    for (int i = 0; i < sp->n_in; i++)
      if (pf->slots[sp->in[i]].last_use == s) add_unique(buf, &n, sp->in[i]);
    for (int i = 0; i < sp->n_out; i++)
      if (pf->slots[sp->out[i]].last_use < 0) add_unique(buf, &n, sp->out[i]);
    if (sp->region >= 0 && pf->regions[sp->region].kind == LATHE_PREGION_REDUCE) {
      const lathe_pregion *g = &pf->regions[sp->region];
      if (pf->slots[g->reduce_in].last_use == s) add_unique(buf, &n, g->reduce_in);
      if (pf->slots[g->reduce_out].last_use == s) add_unique(buf, &n, g->reduce_out);
    }
    sp->n_dead = n;
    sp->dead = arena_array(c->p, (size_t)n, sizeof(int));
    if (!sp->dead) st = LATHE_OOM("Compile");
    else memcpy(sp->dead, buf, sizeof(int) * (size_t)n);
  }
  free(buf);
  return st;
}

/* ---- memory plan ----
 * Static intermediates get offsets in one arena. Slots that share memory form a group (an
 * in-place result joins its dying operand's group; a barrier's result extends its operand's
 * lifetime), then groups are placed largest first at the lowest offset free over their
 * lifetime. */
typedef struct {
  int64_t size, offset;
  int start, end;
} mgroup;

static bool plannable(const lathe_pfunc *pf, int slot) {
  const lathe_pslot *sl = &pf->slots[slot];
  if (sl->kind != LATHE_PSLOT_VALUE || sl->nbytes < 0 || sl->def < 0 || sl->last_use >= pf->n_steps) return false;
  const lathe_pstep *st = &pf->steps[sl->def];
  return st->region >= 0 || !results_from_op(st->node);
}

static int cmp_group(const void *a, const void *b) {
  const mgroup *x = *(mgroup *const *)a, *y = *(mgroup *const *)b;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  return (x->start > y->start) - (x->start < y->start);
}

/* Whether the region reads slot at member index > after (or through another access pattern). */
static bool region_reads_after(const lathe_pregion *g, int slot, int input, int after) {
  for (int i = 0; i < g->n_inputs; i++)
    if (g->inputs[i].slot == slot && i != input) return true;
  for (int m = after + 1; m < g->n_members; m++)
    for (int k = 0; k < g->members[m].n_in; k++)
      if (g->members[m].in[k] == -(input + 1)) return true;
  return false;
}

static lathe_status_t plan_memory(lower_ctx *c) {
  lathe_pfunc *pf = c->pf;
  int64_t align = c->p->options.alignment;
  int *group_of = malloc(sizeof(int) * (size_t)(pf->n_slots + 1));
  mgroup *groups = malloc(sizeof(mgroup) * (size_t)(pf->n_slots + 1));
  mgroup **order = malloc(sizeof(mgroup *) * (size_t)(pf->n_slots + 1));
  bool *taken = calloc((size_t)pf->n_slots + 1, sizeof(bool));
  bool *made = calloc((size_t)pf->n_slots + 1, sizeof(bool));
  lathe_status_t st = (!group_of || !groups || !order || !taken || !made) ? LATHE_OOM("Compile") : NULL;
  /* only values that reach memory: step results and the slots between a REDUCE region's parts
   * (members that stay inside a region never do) */
  for (int s = 0; !st && s < pf->n_steps; s++) {
    const lathe_pstep *sp = &pf->steps[s];
    for (int k = 0; k < sp->n_out; k++) made[sp->out[k]] = true;
    if (sp->region >= 0 && pf->regions[sp->region].kind == LATHE_PREGION_REDUCE)
      made[pf->regions[sp->region].reduce_in] = made[pf->regions[sp->region].reduce_out] = true;
  }
  int ng = 0;
  for (int i = 0; !st && i < pf->n_slots; i++) {
    group_of[i] = -1;
    if (!made[i] || !plannable(pf, i)) continue;
    const lathe_pslot *sl = &pf->slots[i];
    groups[ng] = (mgroup){(sl->nbytes + align - 1) / align * align, -1, sl->def, sl->last_use < sl->def ? sl->def : sl->last_use};
    group_of[i] = ng++;
  }
#define JOIN(o, i)                                                              \
  do {                                                                          \
    mgroup *g_ = &groups[group_of[i]];                                          \
    int e_ = groups[group_of[o]].end;                                           \
    groups[group_of[o]].size = 0; /* emptied: its slot lives in g_ */           \
    groups[group_of[o]].end = -1;                                               \
    group_of[o] = (int)(g_ - groups);                                           \
    if (e_ > g_->end) g_->end = e_;                                             \
    taken[i] = true;                                                            \
  } while (0)
  for (int s = 0; !st && s < pf->n_steps; s++) {
    const lathe_pstep *sp = &pf->steps[s];
    bool reshape = sp->node->op == LATHE_OP_RESHAPE && c->p->options.alias_reshape; /* same bytes, new dims */
    if (sp->region < 0 && (inplace_op(sp->node->op) || reshape) && sp->n_out == 1 && group_of[sp->out[0]] >= 0) {
      int o = sp->out[0];
      for (int k = 0; k < sp->n_in; k++) {
        int i = sp->in[k];
        /* an in-place op takes an operand whose memory is free after this step; a Reshape takes
         * its operand's bytes even while the operand lives on (both keep them until the later of
         * their last uses: the group's end, which every in-place test below reads) */
        if (group_of[i] < 0 || taken[i] || (!reshape && groups[group_of[i]].end != s) ||
            pf->slots[i].nbytes != pf->slots[o].nbytes ||
            (!reshape && !lathe_shape_equal(&pf->slots[i].shape, &pf->slots[o].shape)) ||
            lathe_dtype_is_packed(pf->slots[o].shape.dtype))
          continue;
        JOIN(o, i);
        if (reshape) taken[i] = false; /* shared, not used up: the step that ends the group may take it */
        break;
      }
    } else if (sp->region >= 0 && pf->regions[sp->region].kind == LATHE_PREGION_LOOP) {
      const lathe_pregion *g = &pf->regions[sp->region];
      for (int m = 0; m < g->n_members; m++) {
        int o = g->members[m].out_slot;
        if (o < 0 || group_of[o] < 0) continue;
        for (int k = 0; k < g->n_inputs; k++) {
          int i = g->inputs[k].slot;
          if (g->inputs[k].access != LATHE_PACCESS_FULL || group_of[i] < 0 || taken[i] || groups[group_of[i]].end != s ||
              !lathe_shape_equal(&pf->slots[i].shape, &pf->slots[o].shape) || region_reads_after(g, i, k, m))
            continue;
          JOIN(o, i);
          break;
        }
      }
    } else if (sp->region < 0 && kind_is(sp->node, LATHE_KIND_BARRIER)) {
      for (int k = 0; k < sp->n_in && k < sp->n_out; k++) {
        int i = sp->in[k], o = sp->out[k];
        if (group_of[i] < 0) continue;
        int e = pf->slots[o].last_use < 0 ? s : pf->slots[o].last_use;
        if (e > groups[group_of[i]].end) groups[group_of[i]].end = e;
      }
    }
  }
#undef JOIN
  int n_order = 0;
  for (int k = 0; !st && k < ng; k++)
    if (groups[k].end >= 0) order[n_order++] = &groups[k];
  if (!st) qsort(order, (size_t)n_order, sizeof *order, cmp_group);
  /* first fit: the lowest offset that overlaps no placed group alive at the same time */
  int64_t top = 0;
  for (int k = 0; !st && k < n_order; k++) {
    mgroup *g = order[k];
    int64_t off = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (int j = 0; j < k; j++) {
        const mgroup *h = order[j];
        if (h->end < g->start || g->end < h->start) continue;
        if (off < h->offset + h->size && h->offset < off + g->size) {
          off = h->offset + h->size;
          moved = true;
        }
      }
    }
    g->offset = off;
    if (off + g->size > top) top = off + g->size;
  }
  for (int i = 0; !st && i < pf->n_slots; i++)
    if (group_of[i] >= 0) pf->slots[i].offset = groups[group_of[i]].offset;
  pf->arena_bytes = top;
  free(made);
  free(group_of);
  free(groups);
  free(order);
  free(taken);
  return st;
}

/* ---- the program ---- */
/* A compile phase [*t, now) of function pf into the trace; *t moves to now. */
static void phase(lathe_program *p, lathe_pfunc *pf, const char *name, int64_t *t) {
  if (!p->options.trace) return;
  int64_t now = lathe_trace_now();
  char args[300];
  size_t at = 0;
  lathe_bufprintf(args, sizeof args, &at, "\"function\":\"");
  lathe_json_escape(args, sizeof args, &at, pf->fn->name);
  lathe_bufprintf(args, sizeof args, &at, "\"");
  lathe_trace_complete(p->options.trace, name, "compile", *t, now, args);
  *t = now;
}

static lathe_status_t build_fn(lathe_program *p, lathe_pfunc *pf) {
  lower_ctx c = {.p = p, .pf = pf};
  int64_t t = p->options.trace ? lathe_trace_now() : 0;
  lathe_status_t st = lathe_schedule_build((lathe_function *)pf->fn, &c.s);
  phase(p, pf, "schedule (CSE, dead code, order)", &t);
  if (!st) st = lower_nodes(&c);
  phase(p, pf, "lower to slots", &t);
  if (!st && p->options.fuse) st = build_regions(&c);
  if (!st && p->options.fuse) st = hoist_returned_regions(&c);
  if (p->options.fuse) phase(p, pf, "fusion regions", &t);
  if (!st) st = liveness(&c);
  if (!st && p->options.plan_memory) st = plan_memory(&c);
  phase(p, pf, "liveness and memory plan", &t);
  lathe_schedule_free(&c.s);
  free(c.slot_of);
  free(c.region_of);
  free(c.row_level);
  free(c.users_start);
  free(c.users);
  free(c.is_output);
  free(c.fold);
  free(c.chain);
  free(c.read);
  return st;
}

lathe_status_t lathe_program_build(const struct lathe_builder *b, const lathe_program_options *opt,
                                   lathe_program **out) {
  lathe_program *p = calloc(1, sizeof *p);
  if (!p) return LATHE_OOM("Compile");
  p->builder = b;
  p->name = b->name;
  p->options = opt ? *opt : (lathe_program_options){.fuse = true, .plan_memory = true, .alignment = 64};
  if (p->options.alignment < 16) p->options.alignment = 16;
  int n = 0;
  for (int i = 0; i < b->n_fns; i++) n += b->fns[i]->returned;
  p->fns = arena_array(p, (size_t)n, sizeof(lathe_pfunc));
  lathe_status_t st = p->fns ? NULL : LATHE_OOM("Compile");
  /* main first (it is fns[0]); every function is known before any is lowered, so control ops
   * can name their sub-functions by index */
  for (int i = 0; !st && i < b->n_fns; i++)
    if (b->fns[i]->returned) p->fns[p->n_fns++].fn = b->fns[i];
  if (!st && (p->n_fns == 0 || p->fns[0].fn != b->main_fn))
    st = LATHE_INVALID("Compile: main function has no Return");
  for (int i = 0; !st && i < p->n_fns; i++) {
    st = build_fn(p, &p->fns[i]);
    if (st) st = lathe_status_annotate(st, "function \"%s\"", p->fns[i].fn->name);
  }
  if (st) {
    lathe_program_free(p);
    return st;
  }
  *out = p;
  return NULL;
}

void lathe_program_free(lathe_program *p) {
  if (!p) return;
  lathe_arena_free(&p->arena);
  free(p);
}

int lathe_program_fn_index(const lathe_program *p, const lathe_function *fn) {
  for (int i = 0; i < p->n_fns; i++)
    if (p->fns[i].fn == fn) return i;
  return -1;
}

const lathe_pfunc *lathe_program_main(const lathe_program *p) { return &p->fns[0]; }

void lathe_program_get_stats(const lathe_program *p, lathe_program_stats *out) {
  memset(out, 0, sizeof *out);
  for (int f = 0; f < p->n_fns; f++) {
    const lathe_pfunc *pf = &p->fns[f];
    out->steps += pf->n_steps;
    out->arena_bytes += pf->arena_bytes;
    for (int r = 0; r < pf->n_regions; r++) {
      const lathe_pregion *g = &pf->regions[r];
      if (g->kind == LATHE_PREGION_REDUCE) out->reduce_regions++;
      if (g->kind == LATHE_PREGION_ROWS) out->rows_regions++;
      out->fused_members += g->kind != LATHE_PREGION_REDUCE ? g->n_members : 1;
    }
    for (int s = 0; s < pf->n_steps; s++)
      if (pf->steps[s].region >= 0) {
        out->regions++;
        out->loop_regions += pf->regions[pf->steps[s].region].kind == LATHE_PREGION_LOOP;
      }
    for (int i = 0; i < pf->n_slots; i++) out->planned_slots += pf->slots[i].offset >= 0;
  }
}
