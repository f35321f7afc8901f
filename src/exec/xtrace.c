/* xtrace.c -- the executor's trace events (docs/PROFILING.md): one complete event per step (an op,
 * or a fusion region named by its ops), one per run of a program, and a memory counter after it.
 * Called only while tracing: the walk tests the plan's trace pointer once per step. */
#include "exec.h"

static const char *const kind_names[] = {
#define LATHE_KIND(NAME, family) [LATHE_KIND_##NAME] = #NAME,
#include "../graph/kinds.def"
#undef LATHE_KIND
};

/* op names of region r into buf ("Mul+Add"; a REDUCE region's prologue, reduction, epilogue). */
static void region_ops(const lathe_pfunc *pf, int r, char *buf, size_t cap, size_t *at) {
  const lathe_pregion *g = &pf->regions[r];
  if (g->kind == LATHE_PREGION_REDUCE) {
    if (g->prologue >= 0) region_ops(pf, g->prologue, buf, cap, at), lathe_bufprintf(buf, cap, at, "+");
    lathe_bufprintf(buf, cap, at, "%s", lathe_op_name(g->reduce->op));
    if (g->epilogue >= 0) lathe_bufprintf(buf, cap, at, "+"), region_ops(pf, g->epilogue, buf, cap, at);
    return;
  }
  for (int m = 0; m < g->n_members; m++) {
    if (g->members[m].identity) continue; /* a broadcast: no work of its own */
    lathe_bufprintf(buf, cap, at, "%s%s", *at && buf[*at - 1] != ':' ? "+" : "", lathe_op_name(g->members[m].node->op));
  }
}

void lathe_exec_trace_step(lathe_trace *tr, const lathe_pfunc *pf, int pos, int64_t t0, int64_t t1) {
  const lathe_pstep *sp = &pf->steps[pos];
  char name[200], args[1024], sb[LATHE_SHAPE_STR_MAX];
  size_t n = 0, at = 0;
  const char *kind;
  if (sp->region >= 0) {
    int rk = pf->regions[sp->region].kind;
    kind = rk == LATHE_PREGION_LOOP ? "fused LOOP" : rk == LATHE_PREGION_REDUCE ? "fused REDUCE" : "fused ROWS";
    lathe_bufprintf(name, sizeof name, &n, "fused:");
    region_ops(pf, sp->region, name, sizeof name, &n);
  } else {
    kind = kind_names[lathe_op_kind_of(sp->node->op)];
    lathe_bufprintf(name, sizeof name, &n, "%s", lathe_op_name(sp->node->op));
  }
  /* bytes every step reads and writes (static slots), for a throughput figure */
  int64_t bytes = 0;
  for (int k = 0; k < sp->n_in; k++) bytes += pf->slots[sp->in[k]].nbytes > 0 ? pf->slots[sp->in[k]].nbytes : 0;
  for (int k = 0; k < sp->n_out; k++) bytes += pf->slots[sp->out[k]].nbytes > 0 ? pf->slots[sp->out[k]].nbytes : 0;
  lathe_bufprintf(args, sizeof args, &at, "\"kind\":\"%s\",\"fn\":\"", kind);
  lathe_json_escape(args, sizeof args, &at, pf->fn->name);
  lathe_bufprintf(args, sizeof args, &at, "\",\"step\":%d,\"node\":%d,\"bytes\":%lld,\"out\":\"", pos, sp->node->id,
                  (long long)bytes);
  for (int k = 0; k < sp->n_out; k++)
    lathe_bufprintf(args, sizeof args, &at, "%s%s", k ? ";" : "", lathe_shape_str(&pf->slots[sp->out[k]].shape, sb, sizeof sb));
  lathe_bufprintf(args, sizeof args, &at, "\",\"in\":\"");
  for (int k = 0; k < sp->n_in && k < 8; k++)
    lathe_bufprintf(args, sizeof args, &at, "%s%s", k ? ";" : "", lathe_shape_str(&pf->slots[sp->in[k]].shape, sb, sizeof sb));
  lathe_bufprintf(args, sizeof args, &at, "%s\"", sp->n_in > 8 ? ";..." : "");
  lathe_trace_complete(tr, name, "step", t0, t1, args);
}

void lathe_exec_trace_run(lathe_trace *tr, lathe_exec *x, const lathe_launch *l, int64_t t0, int64_t t1) {
  const lathe_xplan *p = x->plan;
  const char *prog = p->prog->name ? p->prog->name : "";
  char name[160], args[200];
  size_t n = 0, at = 0;
  lathe_bufprintf(name, sizeof name, &n, "run %s", prog);
  lathe_bufprintf(args, sizeof args, &at, "\"device\":%d,\"replica\":%d,\"inputs\":%d,\"outputs\":%d", l->device,
                  l->replica, l->n_inputs, l->n_outputs);
  lathe_trace_complete(tr, name, "run", t0, t1, args);
  const lathe_device_i *dev = p->dev->device;
  lathe_memory_stats ms;
  if (dev->memory_stats && !dev->memory_stats(p->dev_ctx, l->device, false, &ms)) {
    lathe_trace_counter(tr, "memory", t1, "current_bytes", ms.current_bytes);
    lathe_trace_counter(tr, "memory peak", t1, "peak_bytes", ms.peak_bytes);
  }
}
