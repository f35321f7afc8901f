/* xtrace.c -- the executor's trace events (docs/PROFILING.md): one complete event per step (an op,
 * or a fusion region named by its ops), one per run of a program, and a memory counter after it;
 * on a device that keeps its own clock (lathe:cuda), the same steps again as that device ran them.
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
    lathe_bufprintf(buf, cap, at, "%s%s", *at && buf[*at - 1] != ':' && buf[*at - 1] != '+' ? "+" : "",
                    lathe_op_name(g->members[m].node->op));
  }
}

/* A step's span waiting for its device times (the marks' indices). */
typedef struct xspan {
  char *name, *args;
  int m0, m1;
} xspan;

struct lathe_xgpu {
  xspan *v;
  int n, cap;
  int n_marks; /* marks made: indices 0 .. n_marks - 1 */
  bool walk;   /* the steps are marked (otherwise the device marked a whole launch) */
};

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* A lost span (no memory) loses only itself. */
static void add_span(struct lathe_xgpu *g, const char *name, const char *args, int m0, int m1) {
  if (g->n == g->cap) {
    int cap = g->cap ? 2 * g->cap : 64;
    xspan *v = realloc(g->v, sizeof *v * (size_t)cap);
    if (!v) return;
    g->v = v, g->cap = cap;
  }
  xspan sp = {dup_str(name), dup_str(args), m0, m1};
  if (!sp.name || !sp.args) {
    free(sp.name), free(sp.args);
    return;
  }
  g->v[g->n++] = sp;
}

void lathe_exec_trace_gpu_begin(lathe_exec *x) {
  x->gpu = x->plan->dev->trace_mark ? calloc(1, sizeof *x->gpu) : NULL; /* no memory: host events only */
}

void lathe_exec_trace_gpu_walk(lathe_exec *x) {
  if (x->gpu) x->gpu->walk = true;
}

int lathe_exec_trace_gpu_mark(lathe_exec *x) {
  if (!x->gpu) return -1;
  int m = x->plan->dev->trace_mark(x);
  if (m >= x->gpu->n_marks) x->gpu->n_marks = m + 1;
  return m;
}

int lathe_exec_trace_gpu_step_mark(lathe_exec *x) { return x->gpu && x->gpu->walk ? lathe_exec_trace_gpu_mark(x) : -1; }

void lathe_exec_trace_gpu_end(lathe_trace *tr, lathe_exec *x) {
  struct lathe_xgpu *g = x->gpu;
  if (!g) return;
  x->gpu = NULL;
  int64_t *t = g->n_marks ? malloc(sizeof(int64_t) * (size_t)g->n_marks) : NULL;
  int track = 0;
  char track_name[64] = "";
  lathe_status_t st = t ? x->plan->dev->trace_times(x, t, g->n_marks, &track, track_name, sizeof track_name) : NULL;
  if (t && !st) {
    const char *prog = x->plan->prog->name ? x->plan->prog->name : "";
    char name[160], args[96];
    size_t n = 0, at = 0;
    lathe_bufprintf(name, sizeof name, &n, "%s %s", g->walk ? "run" : "replay", prog);
    lathe_bufprintf(args, sizeof args, &at, "\"device\":%d,\"replica\":%d,\"steps\":%s", x->domain, x->replica,
                    g->walk ? "true" : "false");
    if (g->n_marks > 1) lathe_trace_complete_on(tr, track, track_name, name, "gpu", t[0], t[g->n_marks - 1], args);
    for (int i = 0; i < g->n; i++)
      lathe_trace_complete_on(tr, track, track_name, g->v[i].name, "gpu step", t[g->v[i].m0], t[g->v[i].m1], g->v[i].args);
  } else if (!t && g->n_marks) {
    x->plan->dev->trace_times(x, NULL, 0, &track, track_name, sizeof track_name); /* forgets the marks */
  }
  lathe_status_free(st);
  free(t);
  for (int i = 0; i < g->n; i++) free(g->v[i].name), free(g->v[i].args);
  free(g->v);
  free(g);
}

const char *lathe_exec_step_name(const lathe_pfunc *pf, int pos, char *name, size_t cap, const char **kind) {
  const lathe_pstep *sp = &pf->steps[pos];
  size_t n = 0;
  name[0] = 0;
  if (sp->region >= 0) {
    int rk = pf->regions[sp->region].kind;
    *kind = rk == LATHE_PREGION_LOOP ? "fused LOOP" : rk == LATHE_PREGION_REDUCE ? "fused REDUCE" : "fused ROWS";
    lathe_bufprintf(name, cap, &n, "fused:");
    region_ops(pf, sp->region, name, cap, &n);
  } else {
    *kind = kind_names[lathe_op_kind_of(sp->node->op)];
    lathe_bufprintf(name, cap, &n, "%s", lathe_op_name(sp->node->op));
  }
  return name;
}

/* The device's memory counters for ordinal device, where it keeps them. */
static bool memory_now(const lathe_xplan *p, int device, lathe_memory_stats *ms) {
  const lathe_device_i *dev = p->dev->device;
  if (!dev->memory_stats) return false;
  lathe_status_t st = dev->memory_stats(p->dev_ctx, device, false, ms);
  bool ok = !st;
  lathe_status_free(st);
  return ok;
}

void lathe_exec_trace_step(lathe_trace *tr, lathe_exec *x, const lathe_pfunc *pf, int pos, int64_t t0, int64_t t1,
                           int m0, int m1) {
  const lathe_pstep *sp = &pf->steps[pos];
  char name[200], args[1024], sb[LATHE_SHAPE_STR_MAX];
  size_t at = 0;
  const char *kind;
  lathe_exec_step_name(pf, pos, name, sizeof name, &kind);
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
  /* the device's memory in use once the step is queued (its results, scratch and arena): where a
   * program's peak comes from */
  lathe_memory_stats ms;
  bool mem = memory_now(x->plan, x->domain, &ms);
  if (mem) lathe_bufprintf(args, sizeof args, &at, ",\"in_use\":%lld", (long long)ms.current_bytes);
  lathe_trace_complete(tr, name, "step", t0, t1, args);
  if (mem) lathe_trace_counter(tr, "memory", t1, "current_bytes", ms.current_bytes);
  if (x->gpu && m0 >= 0 && m1 >= 0) add_span(x->gpu, name, args, m0, m1);
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
  lathe_memory_stats ms;
  if (memory_now(p, l->device, &ms)) {
    lathe_trace_counter(tr, "memory", t1, "current_bytes", ms.current_bytes);
    lathe_trace_counter(tr, "memory peak", t1, "peak_bytes", ms.peak_bytes);
  }
  lathe_trace_checkpoint(tr);
}
