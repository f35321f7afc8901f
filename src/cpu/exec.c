/* exec.c -- CPU plans and the interpreter: a program's functions run step by step over value
 * slots. Planned intermediates are views into a per-function arena that the plan keeps between
 * executions; the rest are reference-counted tensors from the host allocator. Sub-byte integers
 * are widened to 8 bits around kernels that compute on values. */
#include <pthread.h>
#include <stdio.h>

#include "cpu.h"
#include "exec.h"
#include "kernels.h"

/* ---- plans ---- */

struct lathe_plan {
  const lathe_program *prog;
  bool has_arenas; /* some function plans memory; otherwise executions share `none` */
  arena_set none;  /* empty arenas (never written: arena_ready returns at once) */
  cpu_fn *fns;
  int n_fns;
  pthread_mutex_t mu; /* guards spare */
  arena_set *spare;   /* arenas of finished executions, reused by the next */
  int n_spare;
};

enum { MAX_SPARE_ARENAS = 8 };

static void arena_set_free(const lathe_plan *p, arena_set *a) {
  if (!a) return;
  for (int f = 0; f < p->n_fns; f++) {
    lathe_cpu_mem_free(a->fns[f].mem, (size_t)p->fns[f].pf->arena_bytes);
    free(a->fns[f].views);
  }
  free(a->fns);
  free(a);
}

void lathe_cpu_plan_free(void *ctx, lathe_plan *p) {
  (void)ctx;
  if (!p) return;
  for (int i = 0; i < p->n_fns; i++) {
    for (int k = 0; p->fns[i].consts && k < p->fns[i].pf->n_slots; k++) lathe_tensor_release(p->fns[i].consts[k]);
    free(p->fns[i].consts);
    free(p->fns[i].const_slots);
  }
  while (p->spare) {
    arena_set *a = p->spare;
    p->spare = a->next;
    arena_set_free(p, a);
  }
  pthread_mutex_destroy(&p->mu);
  free(p->none.fns);
  free(p->fns);
  free(p);
}

static lathe_status_t check_supported(const lathe_node *n) {
  lathe_op_kind k = lathe_op_kind_of(n->op);
  if (k == LATHE_KIND_INTERNAL || n->op == LATHE_OP_PARAMETER || n->op == LATHE_OP_CONSTANT) return NULL;
  lathe_dtype dt = n->n_operands ? n->in[0]->shape.dtype : (n->multi ? n->out_shapes[0].dtype : n->shape.dtype);
  if (!lathe_cpu_supports_op(n->op, dt))
    return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  return NULL;
}

/* Every op of a step, including the members of its region. */
static lathe_status_t check_step(const lathe_pfunc *pf, const lathe_pstep *s) {
  if (s->region < 0) return check_supported(s->node);
  const lathe_pregion *g = &pf->regions[s->region];
  const lathe_pregion *parts[3] = {g, NULL, NULL};
  if (g->kind == LATHE_PREGION_REDUCE) {
    LATHE_RETURN_IF_ERROR(check_supported(g->reduce));
    parts[0] = g->prologue >= 0 ? &pf->regions[g->prologue] : NULL;
    parts[1] = g->epilogue >= 0 ? &pf->regions[g->epilogue] : NULL;
  }
  for (int k = 0; k < 3; k++)
    for (int m = 0; parts[k] && m < parts[k]->n_members; m++) LATHE_RETURN_IF_ERROR(check_supported(parts[k]->members[m].node));
  return NULL;
}

lathe_status_t lathe_cpu_compile(void *ctx, const lathe_program *prog, lathe_plan **out) {
  (void)ctx;
  lathe_plan *p = calloc(1, sizeof *p);
  if (!p) return LATHE_OOM("Compile");
  p->fns = calloc((size_t)prog->n_fns, sizeof(cpu_fn));
  if (!p->fns || pthread_mutex_init(&p->mu, NULL)) {
    free(p->fns);
    free(p);
    return LATHE_OOM("Compile");
  }
  p->prog = prog;
  p->n_fns = prog->n_fns;
  lathe_status_t st = NULL;
  for (int i = 0; i < prog->n_fns && !st; i++) {
    const lathe_pfunc *pf = &prog->fns[i];
    cpu_fn *f = &p->fns[i];
    f->pf = pf;
    p->has_arenas |= pf->arena_bytes > 0;
    for (int s = 0; s < pf->n_steps && !st; s++) {
      st = check_step(pf, &pf->steps[s]);
      if (pf->steps[s].n_in > f->max_in) f->max_in = pf->steps[s].n_in;
    }
    f->consts = calloc((size_t)pf->n_slots + 1, sizeof(lathe_tensor *));
    f->const_slots = malloc(sizeof(int) * (size_t)(pf->n_slots + 1));
    if (!st && (!f->consts || !f->const_slots)) st = LATHE_OOM("Compile");
    for (int k = 0; !st && k < pf->n_slots; k++) {
      const lathe_pslot *sl = &pf->slots[k];
      if (sl->kind != LATHE_PSLOT_CONST) continue;
      f->const_slots[f->n_consts++] = k;
      st = lathe_cpu_tensor_new(&sl->shape, &f->consts[k]);
      lathe_bytes v = lathe_attr_constant_value(sl->node);
      if (!st && v.size) memcpy(f->consts[k]->data, v.data, v.size);
    }
  }
  if (!st && !(p->none.fns = calloc((size_t)prog->n_fns, sizeof(cpu_arena)))) st = LATHE_OOM("Compile");
  if (st) {
    lathe_cpu_plan_free(NULL, p);
    return st;
  }
  *out = p;
  return NULL;
}

/* An arena set for one execution: a spare one, or a new one whose functions' blocks are made
 * on first use. */
static lathe_status_t arenas_take(lathe_plan *p, arena_set **out) {
  if (!p->has_arenas) {
    *out = &p->none;
    return NULL;
  }
  pthread_mutex_lock(&p->mu);
  arena_set *a = p->spare;
  if (a) {
    p->spare = a->next;
    p->n_spare--;
  }
  pthread_mutex_unlock(&p->mu);
  if (!a) {
    a = calloc(1, sizeof *a);
    if (a) a->fns = calloc((size_t)p->n_fns, sizeof(cpu_arena));
    if (!a || !a->fns) {
      free(a);
      return LATHE_OOM("Execute");
    }
  }
  *out = a;
  return NULL;
}

static void arenas_give_back(lathe_plan *p, arena_set *a) {
  if (a == &p->none) return;
  pthread_mutex_lock(&p->mu);
  if (p->n_spare < MAX_SPARE_ARENAS) {
    a->next = p->spare;
    p->spare = a;
    p->n_spare++;
    a = NULL;
  }
  pthread_mutex_unlock(&p->mu);
  arena_set_free(p, a);
}

static lathe_status_t arena_ready(const cpu_fn *f, cpu_arena *a) {
  const lathe_pfunc *pf = f->pf;
  if (a->views || !pf->arena_bytes) return NULL;
  a->mem = lathe_cpu_mem_alloc((size_t)pf->arena_bytes);
  a->views = calloc((size_t)pf->n_slots + 1, sizeof(lathe_tensor));
  if (!a->mem || !a->views) {
    lathe_cpu_mem_free(a->mem, (size_t)pf->arena_bytes);
    free(a->views);
    a->mem = NULL;
    a->views = NULL;
    return lathe_status_new(LATHE_STATUS_RESOURCE_EXHAUSTED, "Execute: out of memory allocating a %lld-byte arena",
                            (long long)pf->arena_bytes);
  }
  for (int k = 0; k < pf->n_slots; k++) {
    const lathe_pslot *sl = &pf->slots[k];
    if (sl->offset < 0) continue;
    lathe_tensor *v = &a->views[k];
    v->flags = LATHE_TENSOR_VIEW;
    v->shape = sl->shape;
    for (int d = 0; d < LATHE_MAX_RANK; d++) v->shape.axis_names[d] = NULL;
    v->nbytes = (size_t)sl->nbytes;
    v->data = (unsigned char *)a->mem + sl->offset;
    v->dev = &lathe_cpu_device;
  }
  return NULL;
}

/* ---- execution ---- */
lathe_pool *lathe_cpu_exec_pool(lathe_cpu_exec *ex) { return ex->cpu->pool; }

const lathe_cpu_kernels *lathe_cpu_exec_kernels(lathe_cpu_exec *ex) {
  return ex ? ex->cpu->kernels : lathe_cpu_kernels_of(LATHE_CPU_ISA_BASELINE);
}

lathe_collective *lathe_cpu_exec_group(lathe_cpu_exec *ex, int *out_replica) {
  *out_replica = ex->replica;
  return ex->group;
}

/* Sub-byte integer tensors are widened to 8 bits around kernels that compute on values, except
 * for the ops flagged PACKED in the op table. */
static bool packed_native(lathe_op op) { return lathe_op_has(op, LATHE_OPF_PACKED); }

static bool may_run_in_place(lathe_op op) { return lathe_op_has(op, LATHE_OPF_INPLACE); }

static lathe_dtype widened(lathe_dtype dt) {
  if (!lathe_dtype_is_packed(dt)) return dt;
  return lathe_dtype_class_of(dt) == LATHE_CLASS_SINT ? LATHE_DTYPE_INT8 : LATHE_DTYPE_UINT8;
}

/* Unpacking works a byte (8/bits elements) at a time, byte ranges split over the pool; a packed
 * tensor's unused tail bits stay zero. */
typedef struct {
  uint8_t *packed;
  int8_t *wide;
  int64_t n;
  int bits;
  bool sign;
} pack_job;

static void unpack_bytes(void *ctx, int64_t b, int64_t e) {
  const pack_job *j = ctx;
  int per = 8 / j->bits, shift = 8 - j->bits;
  unsigned mask = (1u << j->bits) - 1;
  for (int64_t byte = b; byte < e; byte++) {
    unsigned v = j->packed[byte];
    int64_t base = byte * per, lim = j->n - base < per ? j->n - base : per;
    for (int k = 0; k < lim; k++, v >>= j->bits)
      j->wide[base + k] = j->sign ? (int8_t)((int8_t)((v & mask) << shift) >> shift) : (int8_t)(v & mask);
  }
}

static void pack_bytes(void *ctx, int64_t b, int64_t e) {
  const pack_job *j = ctx;
  int per = 8 / j->bits;
  unsigned mask = (1u << j->bits) - 1;
  for (int64_t byte = b; byte < e; byte++) {
    unsigned v = 0;
    int64_t base = byte * per, lim = j->n - base < per ? j->n - base : per;
    for (int k = 0; k < lim; k++) v |= ((unsigned)(uint8_t)j->wide[base + k] & mask) << (k * j->bits);
    j->packed[byte] = (uint8_t)v;
  }
}

static pack_job pack_job_of(const lathe_tensor *packed, const lathe_tensor *wide) {
  return (pack_job){packed->data, wide->data, lathe_shape_size(&packed->shape), lathe_dtype_bits(packed->shape.dtype),
                    lathe_dtype_class_of(packed->shape.dtype) == LATHE_CLASS_SINT};
}

static lathe_status_t widen(lathe_cpu_exec *ex, lathe_tensor *t, lathe_tensor **out) {
  lathe_shape s = t->shape;
  s.dtype = widened(s.dtype);
  LATHE_RETURN_IF_ERROR(lathe_cpu_tensor_new(&s, out));
  pack_job j = pack_job_of(t, *out);
  lathe_parallel_for(ex->cpu->pool, (int64_t)t->nbytes, 1 << 14, unpack_bytes, &j);
  return NULL;
}

static void narrow(lathe_cpu_exec *ex, const lathe_tensor *wide, lathe_tensor *t) {
  pack_job j = pack_job_of(t, wide);
  lathe_parallel_for(ex->cpu->pool, (int64_t)t->nbytes, 1 << 14, pack_bytes, &j);
}

/* A copy of t in fresh memory (for views leaving their arena). */
static lathe_status_t detach(lathe_tensor **t) {
  lathe_tensor *c;
  LATHE_RETURN_IF_ERROR(lathe_cpu_tensor_new(&(*t)->shape, &c));
  if ((*t)->nbytes) memcpy(c->data, (*t)->data, (*t)->nbytes);
  lathe_tensor_release(*t);
  *t = c;
  return NULL;
}

lathe_status_t lathe_cpu_result_tensor(lathe_cpu_exec *ex, int slot, lathe_tensor **out) {
  frame *f = ex->cur;
  const lathe_pslot *sl = &f->f->pf->slots[slot];
  if (sl->offset >= 0 && f->arena->views) {
    *out = &f->arena->views[slot];
    return NULL;
  }
  /* a result of the main function is computed straight into its output shell */
  lathe_tensor *shell = f->shells ? f->shells[slot] : NULL;
  if (shell && !shell->data && shell->nbytes == (size_t)sl->nbytes) {
    shell->data = lathe_cpu_mem_alloc(shell->nbytes);
    if (!shell->data)
      return lathe_status_new(LATHE_STATUS_RESOURCE_EXHAUSTED, "Execute: out of memory allocating %zu bytes", shell->nbytes);
    if (lathe_dtype_is_packed(sl->shape.dtype) && shell->nbytes) ((uint8_t *)shell->data)[shell->nbytes - 1] = 0;
    *out = lathe_tensor_retain(shell);
    return NULL;
  }
  return lathe_cpu_tensor_new(&sl->shape, out);
}

/* Runs one op step. */
static lathe_status_t run_node(lathe_cpu_exec *ex, frame *f, int pos, const lathe_pstep *sp) {
  const lathe_pfunc *pf = f->f->pf;
  const lathe_node *n = sp->node;
  enum { MAXS = 16 };
  lathe_tensor *out_s[MAXS], *win_s[MAXS], *wout_s[MAXS];
  int nin = n->n_operands, nout = sp->n_out;
  lathe_tensor **in = f->step_in;
  lathe_tensor **win = nin <= MAXS ? win_s : calloc((size_t)nin, sizeof *win);
  lathe_tensor **out = nout <= MAXS ? out_s : calloc((size_t)nout, sizeof *out);
  lathe_tensor **wout = nout <= MAXS ? wout_s : calloc((size_t)nout, sizeof *wout);
  lathe_status_t st = (!win || !out || !wout) ? LATHE_OOM(lathe_op_name(n->op)) : NULL;
  if (st) goto done;
  memset(out, 0, sizeof *out * (size_t)nout);
  memset(wout, 0, sizeof *wout * (size_t)nout);
  memset(win, 0, sizeof *win * (size_t)nin);
  lathe_op_kind kind = lathe_op_kind_of(n->op);
  bool makes_results = kind == LATHE_KIND_CONTROL || kind == LATHE_KIND_BARRIER;
  /* Results: planned ones are arena views; others take the memory of an operand that dies here
   * when nothing else holds it (a donated input, say), or fresh memory. */
  for (int k = 0; k < nout && !makes_results; k++) {
    const lathe_pslot *sl = &pf->slots[sp->out[k]];
    if (may_run_in_place(n->op) && sl->offset < 0)
      for (int i = 0; i < nin; i++) {
        lathe_tensor *t = in[i];
        if (pf->slots[sp->in[i]].last_use != pos || (t->flags & LATHE_TENSOR_VIEW) || atomic_load(&t->refs) != 1 ||
            !lathe_shape_equal(&t->shape, &sl->shape) || lathe_dtype_is_packed(sl->shape.dtype))
          continue;
        bool taken = false;
        for (int j = 0; j < k; j++) taken |= out[j] == t;
        if (taken) continue;
        out[k] = lathe_tensor_retain(t);
        break;
      }
    if (!out[k] && (st = lathe_cpu_result_tensor(ex, sp->out[k], &out[k]))) break;
  }
  if (st) {
    /* an allocation failure names the op whose result it was */
  } else if (makes_results || packed_native(n->op)) {
    st = lathe_cpu_run_kernel(ex, n, in, out);
  } else {
    for (int i = 0; i < nin && !st; i++)
      st = lathe_dtype_is_packed(in[i]->shape.dtype) ? widen(ex, in[i], &win[i]) : (win[i] = lathe_tensor_retain(in[i]), NULL);
    for (int k = 0; k < nout && !st; k++) {
      if (lathe_dtype_is_packed(out[k]->shape.dtype)) {
        lathe_shape ws = out[k]->shape;
        ws.dtype = widened(ws.dtype);
        st = lathe_cpu_tensor_new(&ws, &wout[k]);
      } else {
        wout[k] = lathe_tensor_retain(out[k]);
      }
    }
    if (!st) st = lathe_cpu_run_kernel(ex, n, win, wout);
    for (int k = 0; k < nout && !st; k++)
      if (wout[k] != out[k]) narrow(ex, wout[k], out[k]);
  }
  /* a control op may hand back a view it was given (a While that never iterates): results
   * outlive the arena slots they came from, so they get their own memory */
  for (int k = 0; k < nout && !st && kind == LATHE_KIND_CONTROL; k++)
    if (out[k] && (out[k]->flags & LATHE_TENSOR_VIEW)) st = detach(&out[k]);
  if (st) {
    st = lathe_status_annotate(st, "executing %s (node %d of \"%s\")", lathe_op_name(n->op), n->id, pf->fn->name);
    goto done;
  }
  for (int k = 0; k < nout; k++) f->vals[sp->out[k]] = out[k], out[k] = NULL;
done:
  for (int i = 0; win && i < nin; i++) lathe_tensor_release(win[i]);
  for (int k = 0; out && k < nout; k++) lathe_tensor_release(out[k]);
  for (int k = 0; wout && k < nout; k++) lathe_tensor_release(wout[k]);
  if (win != win_s) free(win);
  if (out != out_s) free(out);
  if (wout != wout_s) free(wout);
  return st;
}

/* take: the frame takes over the references in args (the main function's launch inputs) instead
 * of adding its own, and releases each after its last use, so that a donated input whose only
 * reference that is can be reused in place (an optimizer's update writing into the donated
 * weights); args are consumed on every path. */
static lathe_status_t run_function(lathe_cpu_exec *ex, int fi, lathe_tensor *const *args, int n_args,
                                   lathe_tensor **outputs, lathe_tensor **shells, bool take) {
  const cpu_fn *cf = &ex->plan->fns[fi];
  const lathe_pfunc *pf = cf->pf;
  if (n_args != pf->n_params) {
    for (int i = 0; take && i < n_args; i++) lathe_tensor_release(args[i]);
    return lathe_status_new(LATHE_STATUS_INTERNAL, "function \"%s\" takes %d inputs, got %d", pf->fn->name, pf->n_params, n_args);
  }
  frame f = {.f = cf, .arena = &ex->arenas->fns[fi], .shells = shells};
  enum { STACK_SLOTS = 32 };
  lathe_tensor *vals_s[STACK_SLOTS], *in_s[STACK_SLOTS];
  int max_in = cf->max_in;
  f.vals = pf->n_slots <= STACK_SLOTS ? vals_s : malloc(sizeof(lathe_tensor *) * (size_t)pf->n_slots);
  f.step_in = max_in <= STACK_SLOTS ? in_s : malloc(sizeof(lathe_tensor *) * (size_t)max_in);
  lathe_status_t st = (!f.vals || !f.step_in) ? LATHE_OOM("Execute") : arena_ready(cf, f.arena);
  if (f.vals) memset(f.vals, 0, sizeof(lathe_tensor *) * (size_t)pf->n_slots);
  frame *saved = ex->cur;
  ex->cur = &f;
  for (int i = 0; take && i < pf->n_params; i++) {
    if (f.vals) f.vals[pf->params[i]] = args[i];
    else lathe_tensor_release(args[i]);
  }
  for (int i = 0; !take && !st && i < pf->n_params; i++) f.vals[pf->params[i]] = lathe_tensor_retain(args[i]);
  for (int k = 0; !st && k < cf->n_consts; k++) f.vals[cf->const_slots[k]] = lathe_tensor_retain(cf->consts[cf->const_slots[k]]);
  for (int pos = 0; !st && pos < pf->n_steps; pos++) {
    const lathe_pstep *sp = &pf->steps[pos];
    f.step = sp;
    for (int i = 0; i < sp->n_in; i++) f.step_in[i] = f.vals[sp->in[i]];
    st = sp->region >= 0 ? lathe_cpu_run_region(ex, pos, sp) : run_node(ex, &f, pos, sp);
    for (int d = 0; d < sp->n_dead; d++) {
      lathe_tensor_release(f.vals[sp->dead[d]]);
      f.vals[sp->dead[d]] = NULL;
    }
  }
  /* Results leave the function: views get their own memory (their arena is reused). */
  int made = 0;
  for (; !st && made < pf->n_outputs; made++) {
    outputs[made] = lathe_tensor_retain(f.vals[pf->outputs[made]]);
    if (outputs[made] && (outputs[made]->flags & LATHE_TENSOR_VIEW)) st = detach(&outputs[made]);
  }
  if (st)
    for (int k = 0; k < made; k++) lathe_tensor_release(outputs[k]), outputs[k] = NULL;
  for (int i = 0; f.vals && i < pf->n_slots; i++) lathe_tensor_release(f.vals[i]);
  if (f.vals != vals_s) free(f.vals);
  if (f.step_in != in_s) free(f.step_in);
  ex->cur = saved;
  return st;
}

lathe_status_t lathe_cpu_exec_call(lathe_cpu_exec *ex, const lathe_function *fn, lathe_tensor *const *inputs,
                                   int n_inputs, lathe_tensor **outputs) {
  int fi = lathe_program_fn_index(ex->plan->prog, fn);
  frame *caller = ex->cur;
  if (fi < 0 || !caller || !caller->step)
    return lathe_status_new(LATHE_STATUS_INTERNAL, "function \"%s\" was not compiled", fn->name);
  const lathe_pfunc *pf = ex->plan->fns[fi].pf;
  int n_caps = pf->n_params - pf->n_declared, cap = -1;
  for (int k = 0; k < caller->step->n_sub; k++)
    if (caller->step->sub_fn[k] == fi) cap = caller->step->sub_cap[k];
  if (cap < 0 || n_inputs != pf->n_declared)
    return lathe_status_new(LATHE_STATUS_INTERNAL, "function \"%s\" called with %d inputs from outside its op", fn->name, n_inputs);
  enum { STACK_ARGS = 16 };
  lathe_tensor *args_s[STACK_ARGS];
  lathe_tensor **args = pf->n_params <= STACK_ARGS ? args_s : malloc(sizeof(lathe_tensor *) * (size_t)pf->n_params);
  if (!args) return LATHE_OOM("Call");
  for (int i = 0; i < n_inputs; i++) args[i] = inputs[i];
  for (int j = 0; j < n_caps; j++) args[n_inputs + j] = caller->step_in[cap + j];
  lathe_status_t st = run_function(ex, fi, args, pf->n_params, outputs, NULL, false);
  if (args != args_s) free(args);
  return st;
}

lathe_status_t lathe_cpu_run_main(lathe_cpu *cpu, lathe_plan *p, lathe_tensor **inputs, int n_inputs,
                                  lathe_tensor **outputs, lathe_tensor *const *shells, int replica,
                                  lathe_collective *group) {
  lathe_cpu_exec ex = {.cpu = cpu, .plan = p, .replica = replica, .group = group};
  const lathe_pfunc *pf = p->fns[0].pf;
  /* the shell of each output slot (the first output that returns it) */
  enum { STACK = 32 };
  lathe_tensor *by_slot_s[STACK], **by_slot = NULL;
  if (shells) {
    by_slot = pf->n_slots <= STACK ? by_slot_s : calloc((size_t)pf->n_slots, sizeof(lathe_tensor *));
    if (!by_slot) return LATHE_OOM("Execute");
    memset(by_slot, 0, sizeof(lathe_tensor *) * (size_t)pf->n_slots);
    for (int k = pf->n_outputs - 1; k >= 0; k--)
      if (pf->slots[pf->outputs[k]].kind == LATHE_PSLOT_VALUE) by_slot[pf->outputs[k]] = shells[k];
  }
  lathe_status_t st = arenas_take(p, &ex.arenas);
  if (!st) {
    st = run_function(&ex, 0, inputs, n_inputs, outputs, by_slot, true);
    for (int i = 0; i < n_inputs; i++) inputs[i] = NULL; /* the frame released them */
    arenas_give_back(p, ex.arenas);
  }
  if (by_slot != by_slot_s) free(by_slot);
  return st;
}
