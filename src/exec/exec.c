/* exec.c -- plans and the walk over a program's steps, for every device (exec.h says what the
 * device supplies). Planned intermediates are views into a per-function arena that the plan
 * keeps between executions; the rest are reference-counted tensors from the device. */
#include "exec.h"

/* ---- plans ---- */
enum { MAX_SPARE_ARENAS = 8 };

/* Every op of a step, including the members of its region. */
static lathe_status_t check_step(const lathe_pfunc *pf, const lathe_pstep *s, lathe_status_t (*supported)(const lathe_node *)) {
  if (s->region < 0) return supported(s->node);
  const lathe_pregion *g = &pf->regions[s->region];
  const lathe_pregion *parts[3] = {g, NULL, NULL};
  if (g->kind == LATHE_PREGION_REDUCE) {
    LATHE_RETURN_IF_ERROR(supported(g->reduce));
    parts[0] = g->prologue >= 0 ? &pf->regions[g->prologue] : NULL;
    parts[1] = g->epilogue >= 0 ? &pf->regions[g->epilogue] : NULL;
  }
  for (int k = 0; k < 3; k++)
    for (int m = 0; parts[k] && m < parts[k]->n_members; m++) LATHE_RETURN_IF_ERROR(supported(parts[k]->members[m].node));
  return NULL;
}

lathe_status_t lathe_xplan_init(lathe_xplan *p, const lathe_exec_device *dev, void *dev_ctx, int n_domains,
                                const lathe_program *prog, lathe_status_t (*supported)(const lathe_node *n)) {
  if (pthread_mutex_init(&p->mu, NULL)) return LATHE_OOM("Compile");
  p->dev = dev; /* set: the mutex exists (lathe_xplan_release) */
  p->takes_inputs = dev->takes_inputs;
  p->dev_ctx = dev_ctx;
  p->prog = prog;
  p->n_fns = prog->n_fns;
  p->n_domains = n_domains;
  p->fns = calloc((size_t)prog->n_fns + 1, sizeof *p->fns);
  p->const_base = calloc((size_t)prog->n_fns + 1, sizeof *p->const_base);
  p->consts = calloc((size_t)n_domains + 1, sizeof *p->consts);
  p->none.fns = calloc((size_t)prog->n_fns + 1, sizeof *p->none.fns);
  if (!p->fns || !p->const_base || !p->consts || !p->none.fns) return LATHE_OOM("Compile");
  for (int i = 0; i < prog->n_fns; i++) {
    const lathe_pfunc *pf = &prog->fns[i];
    lathe_xfn *f = &p->fns[i];
    f->pf = pf;
    p->has_arenas |= pf->arena_bytes > 0;
    p->const_base[i] = p->n_const_entries;
    p->n_const_entries += pf->n_slots;
    for (int s = 0; s < pf->n_steps; s++) {
      LATHE_RETURN_IF_ERROR(check_step(pf, &pf->steps[s], supported));
      if (pf->steps[s].n_in > f->max_in) f->max_in = pf->steps[s].n_in;
    }
    if (!(f->const_slots = malloc(sizeof(int) * (size_t)(pf->n_slots + 1)))) return LATHE_OOM("Compile");
    for (int k = 0; k < pf->n_slots; k++)
      if (pf->slots[k].kind == LATHE_PSLOT_CONST) f->const_slots[f->n_consts++] = k;
  }
  return NULL;
}

void lathe_exec_arena_set_free(lathe_xplan *p, lathe_xarena_set *a) {
  if (!a || a == &p->none) return;
  for (int f = 0; f < p->n_fns; f++) {
    if (a->fns[f].mem) p->dev->device->mem_free(p->dev_ctx, a->domain, a->fns[f].mem, (size_t)p->fns[f].pf->arena_bytes);
    free(a->fns[f].views);
  }
  free(a->fns);
  free(a);
}

/* Safe on a plan whose init failed part way (fields NULL). */
void lathe_xplan_release(lathe_xplan *p) {
  for (int d = 0; p->consts && d < p->n_domains; d++) {
    lathe_tensor **c = atomic_load(&p->consts[d]);
    for (int64_t k = 0; c && k < p->n_const_entries; k++) lathe_tensor_release(c[k]);
    free(c);
  }
  free(p->consts);
  while (p->spare) {
    lathe_xarena_set *a = p->spare;
    p->spare = a->next;
    lathe_exec_arena_set_free(p, a);
  }
  for (int i = 0; p->fns && i < p->n_fns; i++) free(p->fns[i].const_slots);
  free(p->fns);
  free(p->const_base);
  free(p->none.fns);
  if (p->dev) pthread_mutex_destroy(&p->mu);
}

/* Every function's constants on domain, made on its first execution there, then kept. */
static lathe_status_t consts_on(lathe_xplan *p, int domain, lathe_tensor ***out) {
  lathe_tensor **c = atomic_load_explicit(&p->consts[domain], memory_order_acquire);
  if (c) {
    *out = c;
    return NULL;
  }
  pthread_mutex_lock(&p->mu);
  lathe_status_t st = NULL;
  if (!(c = atomic_load(&p->consts[domain]))) {
    c = calloc((size_t)p->n_const_entries + 1, sizeof *c);
    if (!c) st = LATHE_OOM("Execute");
    for (int fi = 0; !st && fi < p->n_fns; fi++) {
      const lathe_xfn *f = &p->fns[fi];
      for (int k = 0; !st && k < f->n_consts; k++) {
        int slot = f->const_slots[k];
        st = p->dev->const_new(p->dev_ctx, domain, &f->pf->slots[slot], &c[p->const_base[fi] + slot]);
      }
    }
    if (st) {
      for (int64_t k = 0; c && k < p->n_const_entries; k++) lathe_tensor_release(c[k]);
      free(c);
      c = NULL;
    } else {
      atomic_store_explicit(&p->consts[domain], c, memory_order_release);
    }
  }
  pthread_mutex_unlock(&p->mu);
  *out = c;
  return st;
}

lathe_status_t lathe_exec_arenas_take(lathe_xplan *p, int domain, lathe_xarena_set **out) {
  if (!p->has_arenas) {
    *out = &p->none;
    return NULL;
  }
  pthread_mutex_lock(&p->mu);
  lathe_xarena_set **pp = &p->spare;
  while (*pp && (*pp)->domain != domain) pp = &(*pp)->next;
  lathe_xarena_set *a = *pp;
  if (a) {
    *pp = a->next;
    p->n_spare--;
  }
  pthread_mutex_unlock(&p->mu);
  if (!a) {
    a = calloc(1, sizeof *a);
    if (a) a->fns = calloc((size_t)p->n_fns, sizeof *a->fns);
    if (!a || !a->fns) {
      free(a);
      return LATHE_OOM("Execute");
    }
    a->domain = domain;
  }
  *out = a;
  return NULL;
}

void lathe_exec_arenas_give_back(lathe_xplan *p, lathe_xarena_set *a) {
  if (!a || a == &p->none) return;
  pthread_mutex_lock(&p->mu);
  if (p->n_spare < MAX_SPARE_ARENAS) {
    a->next = p->spare;
    p->spare = a;
    p->n_spare++;
    a = NULL;
  }
  pthread_mutex_unlock(&p->mu);
  lathe_exec_arena_set_free(p, a);
}

/* Function fi's arena on this execution's domain, its views made with its memory. */
static lathe_status_t arena_ready(lathe_xplan *p, int domain, const lathe_xfn *f, lathe_xarena *a) {
  const lathe_pfunc *pf = f->pf;
  if (a->views || !pf->arena_bytes) return NULL;
  a->views = calloc((size_t)pf->n_slots + 1, sizeof(lathe_tensor));
  if (!a->views) return LATHE_OOM("Execute");
  lathe_status_t st = p->dev->device->mem_alloc(p->dev_ctx, domain, (size_t)pf->arena_bytes, &a->mem);
  if (st) {
    free(a->views);
    a->views = NULL;
    a->mem = NULL;
    return st;
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
    p->dev->view_init(p->dev_ctx, domain, v);
  }
  return NULL;
}

/* ---- the walk ---- */
/* A copy of *t in fresh memory, replacing it (for views leaving their arena). */
static lathe_status_t detach(lathe_exec *x, lathe_tensor **t) {
  lathe_tensor *c;
  LATHE_RETURN_IF_ERROR(x->plan->dev->tensor_new(x, &(*t)->shape, &c));
  lathe_status_t st = (*t)->nbytes ? x->plan->dev->copy(x, *t, c) : NULL;
  if (st) {
    x->plan->dev->drop(x, c);
    return st;
  }
  lathe_tensor_release(*t); /* a view: nothing to keep */
  *t = c;
  return NULL;
}

lathe_status_t lathe_exec_result(lathe_exec *x, int slot, lathe_tensor **out) {
  lathe_frame *f = x->cur;
  const lathe_pslot *sl = &f->f->pf->slots[slot];
  if (sl->offset >= 0 && f->arena->views) {
    *out = &f->arena->views[slot];
    return NULL;
  }
  /* a result of the main function is computed straight into its output shell */
  lathe_tensor *shell = f->shells ? f->shells[slot] : NULL;
  if (shell && !shell->data && shell->nbytes == (size_t)sl->nbytes) {
    LATHE_RETURN_IF_ERROR(x->plan->dev->shell_fill(x, shell));
    *out = lathe_tensor_retain(shell);
    return NULL;
  }
  return x->plan->dev->tensor_new(x, &sl->shape, out);
}

/* Whether region g reads input k (or its slot through another input) after member m. */
static bool read_after(const lathe_pregion *g, int k, int m) {
  for (int i = 0; i < g->n_inputs; i++)
    if (i != k && g->inputs[i].slot == g->inputs[k].slot) return true;
  for (int j = m + 1; j < g->n_members; j++)
    for (int q = 0; q < g->members[j].n_in; q++)
      if (g->members[j].in[q] == -(k + 1)) return true;
  return false;
}

lathe_tensor *lathe_exec_loop_in_place(lathe_exec *x, int pos, const lathe_pregion *g, int m, lathe_tensor *const *ins,
                                       lathe_tensor *const *taken, int n_taken) {
  const lathe_pfunc *pf = x->cur->f->pf;
  const lathe_pslot *sl = &pf->slots[g->members[m].out_slot];
  if (g->kind != LATHE_PREGION_LOOP || sl->offset >= 0) return NULL;
  for (int k = 0; k < g->n_inputs; k++) {
    lathe_tensor *t = ins[k];
    if (!t || g->inputs[k].access != LATHE_PACCESS_FULL || pf->slots[g->inputs[k].slot].last_use != pos ||
        (t->flags & LATHE_TENSOR_VIEW) || atomic_load(&t->refs) != 1 || !lathe_shape_equal(&t->shape, &sl->shape) ||
        lathe_dtype_is_packed(sl->shape.dtype) || read_after(g, k, m))
      continue;
    bool used = false;
    for (int j = 0; j < n_taken; j++) used |= taken[j] == t;
    if (!used) return lathe_tensor_retain(t);
  }
  return NULL;
}

/* Runs one op step. */
static lathe_status_t run_node(lathe_exec *x, lathe_frame *f, int pos, const lathe_pstep *sp) {
  const lathe_exec_device *dev = x->plan->dev;
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
    if (lathe_op_has(n->op, LATHE_OPF_INPLACE) && sl->offset < 0)
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
    if (!out[k] && (st = lathe_exec_result(x, sp->out[k], &out[k]))) break;
  }
  if (st) {
    /* an allocation failure names the op whose result it was */
  } else if (makes_results || lathe_op_has(n->op, LATHE_OPF_PACKED)) {
    st = dev->launch(x, f->fi, pos, n, in, out);
  } else {
    for (int i = 0; i < nin && !st; i++)
      st = lathe_dtype_is_packed(in[i]->shape.dtype) ? dev->widen(x, in[i], &win[i]) : (win[i] = lathe_tensor_retain(in[i]), NULL);
    for (int k = 0; k < nout && !st; k++) {
      if (lathe_dtype_is_packed(out[k]->shape.dtype)) {
        lathe_shape ws = out[k]->shape;
        ws.dtype = lathe_dtype_widened(ws.dtype);
        st = dev->scratch_new(x, &ws, &wout[k]);
      } else {
        wout[k] = lathe_tensor_retain(out[k]);
      }
    }
    if (!st) st = dev->launch(x, f->fi, pos, n, win, wout);
    for (int k = 0; k < nout && !st; k++)
      if (wout[k] != out[k]) st = dev->narrow(x, wout[k], out[k]);
  }
  /* a control op may hand back a view it was given (a While that never iterates): results
   * outlive the arena slots they came from, so they get their own memory */
  for (int k = 0; k < nout && !st && kind == LATHE_KIND_CONTROL; k++)
    if (out[k] && (out[k]->flags & LATHE_TENSOR_VIEW)) st = detach(x, &out[k]);
  if (st) {
    st = lathe_status_annotate(st, "executing %s (node %d of \"%s\")%s", lathe_op_name(n->op), n->id, pf->fn->name, dev->where);
    goto done;
  }
  for (int k = 0; k < nout; k++) f->vals[sp->out[k]] = out[k], out[k] = NULL;
done:
  for (int i = 0; win && i < nin; i++) dev->drop(x, win[i]);
  for (int k = 0; out && k < nout; k++) dev->drop(x, out[k]);
  for (int k = 0; wout && k < nout; k++) dev->drop(x, wout[k]);
  if (win != win_s) free(win);
  if (out != out_s) free(out);
  if (wout != wout_s) free(wout);
  return st;
}

/* A region: one LOOP or ROWS kernel (ROWS results never reuse an input's memory); or a REDUCE
 * region's prologue, reduction and epilogue in turn (through the region's internal slots). */
static lathe_status_t run_region(lathe_exec *x, lathe_frame *f, int pos, const lathe_pstep *sp) {
  const lathe_exec_device *dev = x->plan->dev;
  const lathe_pfunc *pf = f->f->pf;
  const lathe_pregion *g = &pf->regions[sp->region];
  lathe_status_t st = NULL;
  if (g->kind != LATHE_PREGION_REDUCE) {
    st = dev->launch_loop(x, pos, sp->region, g->kind == LATHE_PREGION_LOOP);
  } else {
    /* the parts run one after the other, so an operand the prologue lets die may still be read
     * by the epilogue: no reuse in place inside a REDUCE region */
    bool done = false;
    if (dev->launch_reduce) st = dev->launch_reduce(x, pos, sp->region, &done);
    if (!st && !done) {
      if (g->prologue >= 0) st = dev->launch_loop(x, pos, g->prologue, false);
      lathe_tensor *in = f->vals[g->reduce_in], *out = NULL;
      if (!st && !in) st = lathe_status_new(LATHE_STATUS_INTERNAL, "fused reduction: operand not computed");
      if (!st) st = lathe_exec_result(x, g->reduce_out, &out);
      if (!st) st = dev->launch(x, f->fi, -1, g->reduce, &in, &out);
      if (!st) f->vals[g->reduce_out] = out;
      else if (out) dev->drop(x, out);
    }
    if (!st && g->epilogue >= 0) st = dev->launch_loop(x, pos, g->epilogue, false);
  }
  if (st)
    st = lathe_status_annotate(st, "executing a fused region ending in %s (node %d of \"%s\")%s", lathe_op_name(sp->node->op),
                               sp->node->id, pf->fn->name, dev->where);
  return st;
}

/* take: the frame takes over the references in args (the main function's launch inputs) instead
 * of adding its own, and releases each after its last use, so that a donated input whose only
 * reference that is can be reused in place (an optimizer's update writing into the donated
 * weights); args are consumed on every path. */
static lathe_status_t run_function(lathe_exec *x, int fi, lathe_tensor *const *args, int n_args, lathe_tensor **outputs,
                                   lathe_tensor *const *shells, bool take) {
  lathe_xplan *p = x->plan;
  const lathe_exec_device *dev = p->dev;
  const lathe_xfn *xf = &p->fns[fi];
  const lathe_pfunc *pf = xf->pf;
  if (n_args != pf->n_params) {
    for (int i = 0; take && i < n_args; i++) lathe_tensor_release(args[i]);
    return lathe_status_new(LATHE_STATUS_INTERNAL, "function \"%s\" takes %d inputs, got %d", pf->fn->name, pf->n_params, n_args);
  }
  lathe_frame f = {.fi = fi, .f = xf, .arena = &x->arenas->fns[fi], .shells = (lathe_tensor **)shells};
  enum { STACK_SLOTS = 32 };
  lathe_tensor *vals_s[STACK_SLOTS], *in_s[STACK_SLOTS], **consts = NULL;
  f.vals = pf->n_slots <= STACK_SLOTS ? vals_s : malloc(sizeof(lathe_tensor *) * (size_t)pf->n_slots);
  f.step_in = xf->max_in <= STACK_SLOTS ? in_s : malloc(sizeof(lathe_tensor *) * (size_t)xf->max_in);
  lathe_status_t st = (!f.vals || !f.step_in) ? LATHE_OOM("Execute") : arena_ready(p, x->domain, xf, f.arena);
  if (!st && xf->n_consts) st = consts_on(p, x->domain, &consts);
  if (f.vals) memset(f.vals, 0, sizeof(lathe_tensor *) * (size_t)pf->n_slots);
  lathe_frame *saved = x->cur;
  x->cur = &f;
  for (int i = 0; take && i < pf->n_params; i++) {
    if (f.vals) f.vals[pf->params[i]] = args[i];
    else lathe_tensor_release(args[i]);
  }
  for (int i = 0; !take && !st && i < pf->n_params; i++) f.vals[pf->params[i]] = lathe_tensor_retain(args[i]);
  for (int k = 0; !st && k < xf->n_consts; k++) {
    int slot = xf->const_slots[k];
    f.vals[slot] = lathe_tensor_retain(consts[p->const_base[fi] + slot]);
  }
  lathe_trace *tr = p->prog->options.trace; /* tracing: a step event each (xtrace.c) */
  for (int pos = 0; !st && pos < pf->n_steps; pos++) {
    const lathe_pstep *sp = &pf->steps[pos];
    f.step = sp;
    for (int i = 0; i < sp->n_in; i++) f.step_in[i] = f.vals[sp->in[i]];
    int m0 = LATHE_UNLIKELY(tr) ? lathe_exec_trace_gpu_step_mark(x) : -1;
    int64_t t0 = LATHE_UNLIKELY(tr) ? lathe_trace_now() : 0;
    st = sp->region >= 0 ? run_region(x, &f, pos, sp) : run_node(x, &f, pos, sp);
    if (LATHE_UNLIKELY(tr)) {
      int64_t t1 = lathe_trace_now();
      lathe_exec_trace_step(tr, x, pf, pos, t0, t1, m0, lathe_exec_trace_gpu_step_mark(x));
    }
    for (int d = 0; d < sp->n_dead; d++) {
      dev->drop(x, f.vals[sp->dead[d]]);
      f.vals[sp->dead[d]] = NULL;
    }
  }
  /* Results leave the function: views get their own memory (their arena is reused). */
  int made = 0;
  for (; !st && made < pf->n_outputs; made++) {
    outputs[made] = lathe_tensor_retain(f.vals[pf->outputs[made]]);
    if (outputs[made] && (outputs[made]->flags & LATHE_TENSOR_VIEW)) st = detach(x, &outputs[made]);
  }
  if (st)
    for (int k = 0; k < made; k++) dev->drop(x, outputs[k]), outputs[k] = NULL;
  for (int i = 0; f.vals && i < pf->n_slots; i++) dev->drop(x, f.vals[i]);
  if (f.vals != vals_s) free(f.vals);
  if (f.step_in != in_s) free(f.step_in);
  x->cur = saved;
  return st;
}

lathe_status_t lathe_exec_call(lathe_exec *x, const lathe_function *fn, lathe_tensor *const *inputs, int n_inputs,
                               lathe_tensor **outputs) {
  int fi = lathe_program_fn_index(x->plan->prog, fn);
  lathe_frame *caller = x->cur;
  if (fi < 0 || !caller || !caller->step)
    return lathe_status_new(LATHE_STATUS_INTERNAL, "function \"%s\" was not compiled", fn->name);
  const lathe_pfunc *pf = x->plan->fns[fi].pf;
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
  lathe_status_t st = run_function(x, fi, args, pf->n_params, outputs, NULL, false);
  if (args != args_s) free(args);
  return st;
}

lathe_status_t lathe_exec_walk(lathe_exec *x, lathe_tensor *const *inputs, int n_inputs, lathe_tensor **results,
                               lathe_tensor *const *shells) {
  const lathe_pfunc *pf = x->plan->fns[0].pf;
  bool take = x->plan->takes_inputs;
  /* the shell of each output slot (the first output that returns it) */
  enum { STACK = 32 };
  lathe_tensor *by_slot_s[STACK], **by_slot = NULL;
  if (shells) {
    by_slot = pf->n_slots <= STACK ? by_slot_s : malloc(sizeof(lathe_tensor *) * (size_t)pf->n_slots);
    if (!by_slot) {
      for (int i = 0; take && i < n_inputs; i++) lathe_tensor_release(inputs[i]);
      return LATHE_OOM("Execute");
    }
    memset(by_slot, 0, sizeof(lathe_tensor *) * (size_t)pf->n_slots);
    for (int k = pf->n_outputs - 1; k >= 0; k--)
      if (pf->slots[pf->outputs[k]].kind == LATHE_PSLOT_VALUE) by_slot[pf->outputs[k]] = shells[k];
  }
  lathe_status_t st = run_function(x, 0, inputs, n_inputs, results, by_slot, take);
  if (by_slot != by_slot_s) free(by_slot);
  return st;
}

/* Hands each result to its output shell: the memory moves when the result is held by nobody
 * else and is not an arena view; otherwise it is copied (outputs never share memory with
 * inputs, constants or each other, since shared buffers may be written in place). */
static lathe_status_t fill_outputs(lathe_exec *x, lathe_tensor **results, lathe_tensor *const *shells, int n) {
  const lathe_exec_device *dev = x->plan->dev;
  lathe_status_t st = NULL;
  for (int k = 0; k < n; k++) {
    lathe_tensor *r = results[k], *o = shells[k];
    if (r == o) { /* computed in place */
      lathe_tensor_release(r);
      continue;
    }
    if (!st && !(r->flags & LATHE_TENSOR_VIEW) && atomic_load(&r->refs) == 1 && r->nbytes == o->nbytes &&
        r->dev == o->dev && (dev->one_memory || r->device == o->device)) {
      o->data = r->data;
      r->data = NULL;
      lathe_tensor_release(r);
      continue;
    }
    if (!st) st = dev->shell_fill(x, o);
    if (!st && o->nbytes) st = dev->copy(x, r, o);
    dev->drop(x, r);
  }
  return st;
}

static LATHE_ALWAYS_INLINE lathe_status_t exec_program(lathe_exec *x, const lathe_launch *l, bool tracing);

lathe_status_t lathe_exec_program(lathe_exec *x, const lathe_launch *l) {
  lathe_trace *tr = x->plan->prog->options.trace;
  if (LATHE_LIKELY(!tr)) return exec_program(x, l, false);
  int64_t t0 = lathe_trace_now();
  lathe_trace *outer = lathe_trace_current;
  lathe_trace_current = tr; /* the CPU pool's parts of each step (pool.c) */
  lathe_exec_trace_gpu_begin(x);
  lathe_status_t st = exec_program(x, l, true);
  lathe_exec_trace_gpu_end(tr, x);
  lathe_trace_current = outer;
  lathe_exec_trace_run(tr, x, l, t0, lathe_trace_now());
  return st;
}

/* tracing: the walk even where the device would run the whole program at once (a CUDA graph
 * replay), so that every step has its event, unless the plan asks for replays (trace_replay) */
static LATHE_ALWAYS_INLINE lathe_status_t exec_program(lathe_exec *x, const lathe_launch *l, bool tracing) {
  const lathe_exec_device *dev = x->plan->dev;
  bool take = x->plan->takes_inputs, handled = false;
  lathe_status_t st =
      dev->launch_program && (!tracing || x->plan->trace_replay) ? dev->launch_program(x, l, &handled) : NULL;
  if (handled || st) {
    for (int i = 0; take && i < l->n_inputs; i++) lathe_tensor_release(l->inputs[i]);
    return st;
  }
  if (tracing) lathe_exec_trace_gpu_walk(x); /* from here on each step is marked */
  enum { STACK = 16 };
  lathe_tensor *res_s[STACK];
  lathe_tensor **res = l->n_outputs <= STACK ? res_s : calloc((size_t)l->n_outputs, sizeof *res);
  st = res ? NULL : LATHE_OOM("Execute");
  if (!st && dev->begin) st = dev->begin(x, l);
  if (!st && !x->arenas) st = lathe_exec_arenas_take(x->plan, x->domain, &x->arenas);
  if (st) {
    for (int i = 0; take && i < l->n_inputs; i++) lathe_tensor_release(l->inputs[i]);
  } else {
    st = lathe_exec_walk(x, l->inputs, l->n_inputs, res, l->outputs);
    if (!st) st = fill_outputs(x, res, l->outputs, l->n_outputs);
  }
  if (!dev->keeps_arenas) {
    lathe_exec_arenas_give_back(x->plan, x->arenas);
    x->arenas = NULL;
  }
  if (res != res_s) free(res);
  return st;
}
