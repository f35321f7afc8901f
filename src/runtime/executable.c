/* executable.c -- compile and execute: the device-independent part. Compile lowers the builder to
 * a program (src/graph/program.h) that the device turns into a plan; with dynamic axes, each new
 * binding of axis names gets its own program, kept in a bounded LRU cache. Execute checks the
 * inputs, creates the outputs and hands the run to the device, which may finish it later. */
#include <pthread.h>
#include <stdio.h>

#include "runtime.h"

/* ---- specialisations ---- */

static void specialization_free(lathe_specialization *sp) {
  if (!sp) return;
  if (sp->plan) sp->backend->dev->plan_free(sp->backend->dev_ctx, sp->plan);
  lathe_program_free(sp->program);
  lathe_builder_free(sp->builder);
  lathe_graph_release(sp->graph);
  lathe_backend_release(sp->backend);
  free(sp->sizes);
  free(sp->size_ids);
  free(sp);
}

void lathe_specialization_release(lathe_specialization *sp) {
  if (sp && atomic_fetch_sub_explicit(&sp->refs, 1, memory_order_acq_rel) == 1) specialization_free(sp);
}

static void release_token(void *token) { lathe_specialization_release(token); }

/* Lowers builder b (nodes in graph g) and compiles it for backend be. */
static lathe_status_t specialization_new(lathe_backend_t be, lathe_graph *g, struct lathe_builder *b,
                                         lathe_specialization **out) {
  lathe_specialization *sp = calloc(1, sizeof *sp);
  if (!sp) return LATHE_OOM("Compile");
  atomic_init(&sp->refs, 1);
  sp->backend = lathe_backend_retain(be);
  lathe_graph_retain(g);
  sp->graph = g;
  int64_t t0 = be->trace ? lathe_trace_now() : 0, t1 = 0;
  lathe_status_t st = lathe_program_build(b, &be->program_options, &sp->program);
  if (be->trace) t1 = lathe_trace_now();
  int seq = 0;
  if (!st) st = lathe_profile_dump(be, b, sp->program, &seq);
  if (!st) st = be->dev->compile(be->dev_ctx, sp->program, &sp->plan);
  if (!st) st = lathe_profile_dump_plan(be, seq, b->name, sp->plan);
  if (be->trace) {
    char args[200];
    size_t at = 0;
    lathe_bufprintf(args, sizeof args, &at, "\"program\":\"");
    lathe_json_escape(args, sizeof args, &at, b->name);
    lathe_bufprintf(args, sizeof args, &at, "\",\"ok\":%s", st ? "false" : "true");
    int64_t t2 = lathe_trace_now();
    lathe_trace_complete(be->trace, "lower (passes, fusion, memory plan)", "compile", t0, t1, args);
    lathe_trace_complete(be->trace, "device compile", "compile", t1, t2, args);
    lathe_trace_complete(be->trace, "compile", "compile", t0, t2, args);
    lathe_trace_checkpoint(be->trace);
  }
  if (st) {
    specialization_free(sp);
    return st;
  }
  *out = sp;
  return NULL;
}

static bool has_lowered_ops(const struct lathe_builder *b) {
  for (int f = 0; f < b->n_fns; f++)
    for (int k = 0; k < b->fns[f]->n_nodes; k++)
      if (lathe_node_lowered_by_specialization(b->fns[f]->nodes[k])) return true;
  return false;
}

/* Graphs with dynamic axes or dynamic-size ops keep a shallow copy of the builder (its arrays
 * live in the graph arena) and the ordered list of dynamic axis names that bind a specialisation. */
static lathe_status_t collect_dynamic_axes(lathe_executable_t e, lathe_builder_t b, bool lowered) {
  lathe_function *fn = b->main_fn;
  int n = 0;
  const char *names[LATHE_MAX_DYNAMIC_NAMES];
  for (int i = 0; i < fn->n_params; i++)
    for (int k = 0; k < fn->params[i]->shape.rank; k++) {
      const lathe_shape *s = &fn->params[i]->shape;
      if (s->dims[k] >= 0) continue;
      int j = 0;
      while (j < n && strcmp(names[j], s->axis_names[k]) != 0) j++;
      if (j < n) continue;
      if (n == LATHE_MAX_DYNAMIC_NAMES) return LATHE_INVALID("Compile: more than %d dynamic axis names", LATHE_MAX_DYNAMIC_NAMES);
      names[n++] = s->axis_names[k];
    }
  if (!n && !lowered) return NULL;
  e->source = malloc(sizeof *e->source);
  e->dyn_names = malloc(sizeof(char *) * (size_t)(n + 1));
  e->specs = calloc((size_t)e->max_specs, sizeof *e->specs);
  pthread_mutex_t *mu = malloc(sizeof *mu);
  if (!e->source || !e->dyn_names || !e->specs || !mu || pthread_mutex_init(mu, NULL)) {
    free(mu);
    return LATHE_OOM("Compile");
  }
  *e->source = *b;
  e->source->backend = e->backend; /* the executable's reference covers the copy */
  if (n) memcpy(e->dyn_names, names, sizeof(char *) * (size_t)n);
  e->n_dyn = n;
  e->mu = mu;
  return NULL;
}

/* Dynamic-size ops in a program with no dynamic axes: sizes that fold resolve now, once, and the
 * executable needs no specialisation at run time. Otherwise (sizes from tensor contents, or a bad
 * size, reported by each execution) it specialises per execution. */
static lathe_status_t resolve_at_compile(lathe_executable_t e, lathe_builder_t b) {
  int needed[LATHE_MAX_SIZE_VALUES], n_needed = 0;
  struct lathe_builder *copy = NULL;
  lathe_status_t st = lathe_builder_specialize(b, NULL, NULL, 0, NULL, needed, &n_needed, &copy);
  if (st || n_needed) {
    lathe_status_free(st);
    lathe_builder_free(copy);
    return NULL;
  }
  st = specialization_new(e->backend, b->graph, copy, &e->base);
  if (st) {
    lathe_builder_free(copy);
    return st;
  }
  e->base->builder = copy;
  e->stats.compiles = 1;
  e->spec = false;
  return NULL;
}

/* A partitioned program that could not be made or compiled: the program runs whole, as the pass
 * would have left it, and the stats keep why (out of memory stays an error). */
static lathe_status_t whole_after(lathe_executable_t e, lathe_status_t st) {
  if (lathe_status_code_of(st) == LATHE_STATUS_RESOURCE_EXHAUSTED) return st;
  const char *msg = lathe_status_message(st);
  size_t n = strlen(msg) + 64;
  e->partition_note = malloc(n);
  if (e->partition_note) snprintf(e->partition_note, n, "the partitioned program failed, so it runs whole: %s", msg);
  e->stats.partition_declined = e->partition_note ? e->partition_note : "the partitioned program failed";
  lathe_status_free(st);
  return NULL;
}

/* AutoSharding: the per-device program of partition.c as e's base, run as SPMD with each device's
 * mesh coordinates as its last input; a program the pass declines runs whole (the reason goes
 * to the stats). */
static lathe_status_t partition(lathe_executable_t e, lathe_builder_t b, lathe_backend_t backend, bool lowered) {
  if (!backend->partition) {
    e->stats.partition_declined = "the backend option partition=0";
    return NULL;
  }
  if (lowered) {
    e->stats.partition_declined = "the program has dynamic-size ops";
    return NULL;
  }
  /* a device whose collectives are not all offered (lathe:cuda's, until they have run on GPUs)
   * keeps the whole-program path it has been tested with */
  static const lathe_op needed[] = {LATHE_OP_ALL_REDUCE, LATHE_OP_ALL_GATHER, LATHE_OP_REDUCE_SCATTER, LATHE_OP_ALL_TO_ALL};
  for (size_t k = 0; k < sizeof needed / sizeof needed[0]; k++)
    if (!lathe_backend_supports_op(backend, needed[k], LATHE_DTYPE_FLOAT32)) {
      e->stats.partition_declined = "the device does not offer every collective (AllReduce, AllGather, ReduceScatter, "
                                    "AllToAll)";
      return NULL;
    }
  struct lathe_builder *p = NULL;
  lathe_partition_report rep;
  lathe_status_t st = lathe_partition(b, &p, &rep);
  if (st) return whole_after(e, st);
  e->stats.partition_declined = rep.declined;
  if (!p) return NULL;
  /* the ops the pass adds, on a device that may lack some (lathe:cuda's untried collectives) */
  for (int k = 0; k < p->main_fn->n_nodes; k++) {
    const lathe_node *n = p->main_fn->nodes[k];
    if ((lathe_op_kind_of(n->op) == LATHE_KIND_COLLECTIVE || n->op == LATHE_OP_DYNAMIC_SLICE) &&
        !lathe_backend_supports_op(backend, n->op, n->in[0]->shape.dtype)) {
      e->stats.partition_declined = "the device lacks a collective the partitioned program needs";
      lathe_builder_free(p);
      return NULL;
    }
  }
  st = specialization_new(backend, b->graph, p, &e->base);
  if (st) {
    lathe_builder_free(p);
    return whole_after(e, st);
  }
  e->base->builder = p;
  e->partitioned = e->stats.partitioned = true;
  e->stats.partition_fallbacks = rep.fallbacks;
  e->stats.partition_collectives = rep.collectives;
  e->stats.partition_fallback_ops = p->partition_fallback_ops; /* p lives as long as e->base */
  e->stats.compiles = 1;
  return lathe_partition_upload_coords(e, b);
}

lathe_status_t lathe_builder_compile_for(lathe_builder_t b, lathe_backend_t backend, lathe_executable_t *out_exec) {
  if (!b) return LATHE_INVALID("Compile: builder is NULL");
  if (!backend) return LATHE_INVALID("Compile: backend is NULL");
  if (!out_exec) return LATHE_INVALID("Compile: out_exec is NULL");
  if (!b->main_fn->returned) return LATHE_INVALID("Compile: main function has no Return");
  for (int i = 0; i < b->n_fns; i++)
    if (!b->fns[i]->returned && b->fns[i]->n_nodes)
      return LATHE_INVALID("Compile: function \"%s\" has no Return", b->fns[i]->name);
  if (b->assigned_device >= backend->n_devices)
    return LATHE_INVALID("Compile: the builder was assigned device %d, the backend has %d", b->assigned_device,
                         backend->n_devices);
  lathe_executable_t e = calloc(1, sizeof *e);
  if (!e) return LATHE_OOM("Compile");
  atomic_init(&e->refs, 1);
  e->backend = lathe_backend_retain(backend);
  e->graph = b->graph;
  lathe_graph_retain(b->graph);
  e->main_fn = b->main_fn;
  e->name = b->name;
  e->assigned_device = b->assigned_device;
  e->max_specs = LATHE_DEFAULT_MAX_SPECIALIZATIONS;
  e->stats.capacity = e->max_specs;
  e->distribution = b->distribution;
  e->n_replicas = b->n_replicas;
  e->dist = *b;
  lathe_status_t st = lathe_distribution_check(b);
  if (!st && b->n_replicas > backend->n_devices)
    st = LATHE_INVALID("Compile: the program runs on %d devices, the backend has %d", b->n_replicas, backend->n_devices);
  if (!st) {
    e->devices = malloc(sizeof(int) * (size_t)b->n_replicas);
    if (!e->devices) st = LATHE_OOM("Compile");
    for (int r = 0; !st && r < b->n_replicas; r++) e->devices[r] = b->devices ? b->devices[r] : r;
  }
  /* A program with dynamic-size ops is never compiled as built: no device runs those ops. */
  bool lowered = has_lowered_ops(b);
  if (!st && b->distribution == LATHE_DIST_AUTO_SHARDING) st = partition(e, b, backend, lowered);
  if (!st && !lowered && !e->partitioned) st = specialization_new(backend, b->graph, b, &e->base);
  if (!st && !lowered) e->stats.compiles = 1;
  if (!st) st = collect_dynamic_axes(e, b, lowered);
  if (!st) e->spec = lowered || (e->n_dyn && !(backend->caps & LATHE_DEVCAP_DYNAMIC_AXES));
  if (!st && lowered && !e->n_dyn) st = resolve_at_compile(e, b);
  if (!st && e->n_dyn && b->distribution == LATHE_DIST_AUTO_SHARDING)
    st = LATHE_UNIMPL("Compile: an AutoSharding program with dynamic axes");
  if (st) {
    lathe_executable_release(e);
    return st;
  }
  *out_exec = e;
  return NULL;
}

lathe_status_t lathe_builder_compile(lathe_builder_t b, lathe_executable_t *out_exec) {
  if (!b) return LATHE_INVALID("Compile: builder is NULL");
  return lathe_builder_compile_for(b, b->backend, out_exec);
}

lathe_executable_t lathe_executable_retain(lathe_executable_t e) {
  if (e) atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
  return e;
}

void lathe_executable_release(lathe_executable_t e) {
  if (!e || atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) != 1) return;
  for (int i = 0; i < e->n_specs; i++) lathe_specialization_release(e->specs[i]);
  free(e->specs);
  lathe_specialization_release(e->base);
  if (e->mu) {
    pthread_mutex_destroy(e->mu);
    free(e->mu);
  }
  for (int r = 0; e->coords && r < e->n_replicas; r++) lathe_tensor_release(e->coords[r]);
  free(e->coords);
  free(e->partition_note);
  free(e->source);
  free(e->dyn_names);
  free(e->devices);
  lathe_graph_release(e->graph);
  lathe_backend_release(e->backend);
  free(e);
}

void lathe_executable_free(lathe_executable_t e) { lathe_executable_release(e); }

int lathe_executable_num_inputs(lathe_executable_t e) { return e ? e->main_fn->n_params : 0; }
int lathe_executable_num_outputs(lathe_executable_t e) { return e ? e->main_fn->n_outputs : 0; }

const char *lathe_executable_input_name(lathe_executable_t e, int i) {
  if (!e || i < 0 || i >= e->main_fn->n_params) return NULL;
  return e->main_fn->params[i]->name;
}

lathe_status_t lathe_executable_input_shape(lathe_executable_t e, int i, lathe_shape *out_shape) {
  if (!e || !out_shape) return LATHE_INVALID("Executable: NULL argument");
  if (i < 0 || i >= e->main_fn->n_params) return LATHE_INVALID("Executable: input %d out of range [0, %d)", i, e->main_fn->n_params);
  *out_shape = e->main_fn->params[i]->shape;
  return NULL;
}

lathe_status_t lathe_executable_output_shape(lathe_executable_t e, int i, lathe_shape *out_shape) {
  if (!e || !out_shape) return LATHE_INVALID("Executable: NULL argument");
  if (i < 0 || i >= e->main_fn->n_outputs) return LATHE_INVALID("Executable: output %d out of range [0, %d)", i, e->main_fn->n_outputs);
  *out_shape = e->main_fn->outputs[i]->shape;
  return NULL;
}

lathe_status_t lathe_executable_get_stats(lathe_executable_t e, lathe_executable_stats *out) {
  if (!e || !out) return LATHE_INVALID("ExecutableStats: NULL argument");
  if (e->mu) pthread_mutex_lock(e->mu);
  *out = e->stats;
  out->cached = e->n_specs;
  if (e->mu) pthread_mutex_unlock(e->mu);
  return NULL;
}

lathe_status_t lathe_executable_arena_bytes(lathe_executable_t e, int64_t *out) {
  if (!e || !out) return LATHE_INVALID("ExecutableArenaBytes: NULL argument");
  *out = 0;
  if (e->mu) pthread_mutex_lock(e->mu);
  const lathe_specialization *sp = e->base;
  for (int k = 0; k < e->n_specs; k++) /* with dynamic axes: the most recently used */
    if (!sp || e->specs[k]->last_used > sp->last_used) sp = e->specs[k];
  lathe_program_stats ps;
  if (sp && sp->program) lathe_program_get_stats(sp->program, &ps), *out = ps.arena_bytes;
  if (e->mu) pthread_mutex_unlock(e->mu);
  return NULL;
}

/* Checks input i against parameter p; dynamic axes take any size, but one name binds one size. */
lathe_status_t lathe_check_input(const lathe_node *p, int i, const lathe_shape *got, int64_t *bound, const char **names,
                                 int *n_names) {
  char a[LATHE_SHAPE_STR_MAX], b[LATHE_SHAPE_STR_MAX];
  const lathe_shape *want = &p->shape;
  bool ok = want->dtype == got->dtype && want->rank == got->rank;
  for (int k = 0; ok && k < want->rank; k++) {
    if (want->dims[k] >= 0) {
      ok = want->dims[k] == got->dims[k];
      continue;
    }
    int j = 0;
    while (j < *n_names && strcmp(names[j], want->axis_names[k]) != 0) j++;
    if (j == *n_names) {
      if (j == LATHE_MAX_DYNAMIC_NAMES) return LATHE_INVALID("Execute: more than %d dynamic axis names", LATHE_MAX_DYNAMIC_NAMES);
      names[j] = want->axis_names[k];
      bound[j] = got->dims[k];
      (*n_names)++;
    } else if (bound[j] != got->dims[k]) {
      return LATHE_INVALID("Execute: input %d (\"%s\") axis %d binds dynamic axis \"%s\" to %lld, already bound to %lld", i,
                           p->name, k, want->axis_names[k], (long long)got->dims[k], (long long)bound[j]);
    }
  }
  if (!ok)
    return LATHE_INVALID("Execute: input %d (\"%s\") has shape %s, the executable expects %s", i, p->name,
                         lathe_shape_str(got, a, sizeof a), lathe_shape_str(want, b, sizeof b));
  return NULL;
}

typedef struct {
  const int64_t *bound;
  const char **names;
  int n;
  const char *skip; /* the symbolic name itself: its parts decide */
} named_sizes;

static int64_t named_size(const void *ctx, const char *name) {
  const named_sizes *ns = ctx;
  if (ns->skip && strcmp(name, ns->skip) == 0) return -1;
  for (int j = 0; j < ns->n; j++)
    if (strcmp(ns->names[j], name) == 0) return ns->bound[j];
  return -1;
}

lathe_status_t lathe_check_bound_sums(const lathe_function *fn, const int64_t *bound, const char **names, int n_names) {
  for (int i = 0; i < fn->n_params; i++) {
    const lathe_shape *s = &fn->params[i]->shape;
    for (int k = 0; k < s->rank; k++) {
      const char *nm = s->axis_names[k];
      if (s->dims[k] >= 0 || !nm || nm[0] != LATHE_SYMBOLIC_AXIS_PREFIX) continue;
      named_sizes ns = {bound, names, n_names, nm};
      int64_t sum, had = named_size(&(named_sizes){bound, names, n_names, NULL}, nm);
      lathe_status_t st = lathe_axis_resolve("Execute", k, nm, named_size, &ns, &sum);
      if (st) { /* a part the inputs do not bind: nothing to check against */
        lathe_status_free(st);
        continue;
      }
      if (had != sum)
        return LATHE_INVALID("Execute: input %d (\"%s\") axis %d binds \"%s\" to %lld, but its parts add up to %lld", i,
                             fn->params[i]->name, k, nm, (long long)had, (long long)sum);
    }
  }
  return NULL;
}

/* Runs sp (a program computing size values) on the execution's inputs and reads the values back:
 * signed ones sign-extended, unsigned ones as their bits (as fold.c keeps them). */
static lathe_status_t run_size_program(lathe_executable_t e, lathe_specialization *sp, const lathe_buffer_t *inputs,
                                       int n_inputs, int device, int64_t *values) {
  if (!inputs)
    return LATHE_UNIMPL("Execute: sizes computed from tensor contents in a distributed program (give them as constants or "
                        "from the dynamic axes)");
  lathe_backend_t be = e->backend;
  lathe_tensor **tin = malloc(sizeof(lathe_tensor *) * (size_t)(n_inputs + 1));
  bool *don = calloc((size_t)n_inputs + 1, sizeof(bool));
  lathe_tensor *tout[LATHE_MAX_SIZE_VALUES] = {NULL};
  if (!tin || !don) {
    free(tin);
    free(don);
    return LATHE_OOM("Execute");
  }
  for (int i = 0; i < n_inputs; i++) tin[i] = lathe_tensor_retain(inputs[i]->t);
  lathe_status_t st = lathe_launch_one(e, sp, device, tin, don, n_inputs, tout, sp->n_size_ids, 0, NULL);
  for (int k = 0; !st && k < sp->n_size_ids; k++) {
    lathe_dtype dt = tout[k]->shape.dtype;
    uint64_t raw = 0;
    /* sub-byte integers: the first value is the low bits of the first byte */
    int bits = lathe_dtype_bits(dt), bytes = (bits + 7) / 8;
    st = bits > 0 ? lathe_tensor_wait(tout[k]) : LATHE_INVALID("Execute: a size given by a value of %s", lathe_dtype_name(dt));
    if (!st) st = be->dev->download(be->dev_ctx, tout[k], &raw, (size_t)bytes); /* little-endian hosts */
    if (!st && bits < 64) raw &= (UINT64_C(1) << bits) - 1;
    if (!st && lathe_dtype_class_of(dt) == LATHE_CLASS_SINT && bits < 64 && (raw >> (bits - 1)) & 1)
      raw |= ~((UINT64_C(1) << bits) - 1);
    values[k] = (int64_t)raw;
  }
  for (int k = 0; k < sp->n_size_ids; k++) lathe_tensor_release(tout[k]);
  free(tin);
  free(don);
  return st ? lathe_status_annotate(st, "Execute: computing the sizes given by values") : NULL;
}

/* The cached specialisation of key[0..n_key) (a new reference), or one compiled now, evicting the
 * least recently used one when the cache is full. Executions that still use an evicted
 * specialisation hold their own reference. Called with e->mu held. */
static lathe_status_t cached_specialization(lathe_executable_t e, const int64_t *key, int n_key, const lathe_size_values *known,
                                            lathe_specialization **out) {
  size_t key_bytes = sizeof(int64_t) * (size_t)n_key;
  for (int i = 0; i < e->n_specs; i++)
    if (e->specs[i]->n_key == n_key && memcmp(e->specs[i]->sizes, key, key_bytes) == 0) {
      e->specs[i]->last_used = ++e->clock;
      e->stats.hits++;
      *out = e->specs[i];
      atomic_fetch_add_explicit(&(*out)->refs, 1, memory_order_relaxed);
      return NULL;
    }
  struct lathe_builder *copy = NULL;
  lathe_specialization *sp = NULL;
  int needed[LATHE_MAX_SIZE_VALUES], n_needed = 0;
  int64_t *sizes = malloc(key_bytes + 1);
  lathe_status_t st = sizes ? NULL : LATHE_OOM("Execute");
  if (!st) {
    memcpy(sizes, key, key_bytes);
    st = lathe_builder_specialize(e->source, e->dyn_names, key, e->n_dyn, known, needed, &n_needed, &copy);
  }
  if (!st) st = specialization_new(e->backend, e->graph, copy, &sp);
  if (sp) sp->builder = copy, copy = NULL;
  if (!st && n_needed && !(sp->size_ids = malloc(sizeof(int) * (size_t)n_needed))) st = LATHE_OOM("Execute");
  if (st) {
    specialization_free(sp);
    lathe_builder_free(copy);
    free(sizes);
    return lathe_status_annotate(st, "Execute: specialising dynamic shapes");
  }
  sp->sizes = sizes;
  sp->n_key = n_key;
  if (n_needed) memcpy(sp->size_ids, needed, sizeof(int) * (size_t)n_needed);
  sp->n_size_ids = n_needed;
  sp->last_used = ++e->clock;
  e->stats.compiles++;
  if (e->n_specs == e->max_specs) {
    int lru = 0;
    for (int i = 1; i < e->n_specs; i++)
      if (e->specs[i]->last_used < e->specs[lru]->last_used) lru = i;
    lathe_specialization_release(e->specs[lru]);
    e->specs[lru] = e->specs[--e->n_specs];
    e->stats.evictions++;
  }
  e->specs[e->n_specs++] = sp;
  atomic_fetch_add_explicit(&sp->refs, 1, memory_order_relaxed);
  *out = sp;
  return NULL;
}

/* The specialisation for the binding names[i] -> bound[i]. Its key is the sizes of the dynamic
 * axes, then the size values read back so far: a binding whose sizes depend on tensor contents
 * first takes (or compiles) the program that computes them, runs it, and looks again with the
 * values -- one compile per distinct value, cached like the rest. */
lathe_status_t lathe_executable_specialization(lathe_executable_t e, const char **names, const int64_t *bound, int n,
                                               const lathe_buffer_t *inputs, int n_inputs, int device,
                                               lathe_specialization **out) {
  if (!e->spec) {
    atomic_fetch_add_explicit(&e->base->refs, 1, memory_order_relaxed);
    *out = e->base;
    return NULL;
  }
  int cap = e->n_dyn + LATHE_MAX_SIZE_VALUES;
  int64_t *key = malloc(sizeof(int64_t) * (size_t)cap), *values = NULL;
  int *ids = malloc(sizeof(int) * LATHE_MAX_SIZE_VALUES);
  if (!key || !ids) {
    free(key);
    free(ids);
    return LATHE_OOM("Execute");
  }
  for (int k = 0; k < e->n_dyn; k++) {
    int j = 0;
    while (j < n && strcmp(names[j], e->dyn_names[k]) != 0) j++;
    key[k] = j < n ? bound[j] : -1;
  }
  int n_known = 0;
  lathe_status_t st = NULL;
  for (int round = 0;; round++) {
    values = key + e->n_dyn;
    lathe_size_values known = {ids, values, n_known};
    lathe_specialization *sp = NULL;
    pthread_mutex_lock(e->mu);
    st = cached_specialization(e, key, e->n_dyn + n_known, &known, &sp);
    pthread_mutex_unlock(e->mu);
    if (st) break;
    if (!sp->n_size_ids) {
      *out = sp;
      break;
    }
    /* a first run computes size values: read them, then look again with them in the key */
    if (round == LATHE_MAX_SIZE_VALUES || n_known + sp->n_size_ids > cap - e->n_dyn) {
      int grow = cap + LATHE_MAX_SIZE_VALUES;
      int64_t *k2 = round == LATHE_MAX_SIZE_VALUES ? NULL : realloc(key, sizeof(int64_t) * (size_t)grow);
      int *i2 = k2 ? realloc(ids, sizeof(int) * (size_t)(grow - e->n_dyn)) : NULL;
      if (k2) key = k2;
      if (i2) ids = i2;
      if (!k2 || !i2) {
        lathe_specialization_release(sp);
        st = round == LATHE_MAX_SIZE_VALUES ? LATHE_INVALID("Execute: too many rounds of sizes given by values") : LATHE_OOM("Execute");
        break;
      }
      cap = grow;
    }
    st = run_size_program(e, sp, inputs, n_inputs, device, key + e->n_dyn + n_known);
    if (!st) memcpy(ids + n_known, sp->size_ids, sizeof(int) * (size_t)sp->n_size_ids), n_known += sp->n_size_ids;
    lathe_specialization_release(sp);
    if (st) break;
  }
  free(key);
  free(ids);
  return st;
}

lathe_status_t lathe_launch_one(lathe_executable_t e, lathe_specialization *sp, int device, lathe_tensor **inputs,
                                const bool *donated, int n_inputs, lathe_tensor **outputs, int n_outputs, int replica,
                                lathe_collective *group) {
  lathe_backend_t be = e->backend;
  const lathe_pfunc *main = lathe_program_main(sp->program);
  lathe_status_t st = NULL;
  for (int k = 0; k < n_outputs; k++) outputs[k] = NULL;
  for (int k = 0; !st && k < n_outputs; k++) {
    lathe_shape os = main->slots[main->outputs[k]].shape;
    for (int d = 0; (be->caps & LATHE_DEVCAP_DYNAMIC_AXES) && d < os.rank; d++)
      if (os.dims[d] < 0) os.dims[d] = 0; /* a program kept dynamic: the device sets the sizes */
    st = lathe_tensor_shell(be->dev, be->dev_ctx, device, &os, &outputs[k]);
  }
  if (st) {
    for (int k = 0; k < n_outputs; k++) lathe_tensor_release(outputs[k]), outputs[k] = NULL;
    for (int i = 0; i < n_inputs; i++) lathe_tensor_release(inputs[i]);
    return st;
  }
  atomic_fetch_add_explicit(&sp->refs, 1, memory_order_relaxed); /* the device's, released through the token */
  lathe_launch launch = {.device = device, .inputs = inputs, .donated = donated, .n_inputs = n_inputs,
                         .outputs = outputs, .n_outputs = n_outputs, .release = release_token, .token = sp,
                         .replica = replica, .group = lathe_collective_retain(group)};
  st = be->dev->execute(be->dev_ctx, sp->plan, &launch);
  if (st)
    for (int k = 0; k < n_outputs; k++) lathe_tensor_release(outputs[k]), outputs[k] = NULL;
  return st;
}

/* inlined into both paths of lathe_executable_execute: the one-op floor pays no extra call */
static LATHE_ALWAYS_INLINE lathe_status_t execute(lathe_executable_t e, const lathe_buffer_t *inputs, const bool *donate,
                                                  int n_inputs, int default_device, lathe_buffer_t *outputs, int n_outputs);

lathe_status_t lathe_executable_execute(lathe_executable_t e, const lathe_buffer_t *inputs, const bool *donate,
                                        int n_inputs, int default_device, lathe_buffer_t *outputs, int n_outputs) {
  if (LATHE_UNLIKELY(e && e->backend->trace)) {
    /* the API call on the caller's thread: checks, specialisation, the launch (and the run itself
     * when it runs inline); the device's run and its steps nest inside or follow on its threads */
    int64_t t0 = lathe_trace_now();
    lathe_status_t st = execute(e, inputs, donate, n_inputs, default_device, outputs, n_outputs);
    char args[160];
    size_t at = 0;
    lathe_bufprintf(args, sizeof args, &at, "\"program\":\"");
    lathe_json_escape(args, sizeof args, &at, e->name);
    lathe_bufprintf(args, sizeof args, &at, "\",\"ok\":%s", st ? "false" : "true");
    lathe_trace_complete(e->backend->trace, "Execute", "api", t0, lathe_trace_now(), args);
    lathe_trace_checkpoint(e->backend->trace);
    return st;
  }
  return execute(e, inputs, donate, n_inputs, default_device, outputs, n_outputs);
}

static LATHE_ALWAYS_INLINE lathe_status_t execute(lathe_executable_t e, const lathe_buffer_t *inputs, const bool *donate,
                                                  int n_inputs, int default_device, lathe_buffer_t *outputs, int n_outputs) {
  if (!e) return LATHE_INVALID("Execute: executable is NULL");
  if (e->distribution == LATHE_DIST_SPMD) return lathe_execute_spmd(e, inputs, donate, n_inputs, outputs, n_outputs);
  if (e->distribution == LATHE_DIST_AUTO_SHARDING) return lathe_execute_sharded(e, inputs, donate, n_inputs, outputs, n_outputs);
  lathe_function *fn = e->main_fn;
  lathe_backend_t be = e->backend;
  if (n_inputs != fn->n_params) return LATHE_INVALID("Execute: got %d inputs, the executable takes %d", n_inputs, fn->n_params);
  if (n_outputs != fn->n_outputs) return LATHE_INVALID("Execute: got room for %d outputs, the executable returns %d", n_outputs, fn->n_outputs);
  if (n_inputs && !inputs) return LATHE_INVALID("Execute: inputs is NULL");
  if (n_outputs && !outputs) return LATHE_INVALID("Execute: outputs is NULL");
  int device = e->assigned_device >= 0 ? e->assigned_device : default_device;
  if (device < 0 || device >= be->n_devices) return LATHE_INVALID("Execute: device %d out of range [0, %d)", device, be->n_devices);
  int64_t bound[LATHE_MAX_DYNAMIC_NAMES];
  const char *names[LATHE_MAX_DYNAMIC_NAMES];
  int n_names = 0;
  for (int i = 0; i < n_inputs; i++) {
    if (!inputs[i]) return LATHE_INVALID("Execute: input %d (\"%s\") is NULL", i, fn->params[i]->name);
    if (!inputs[i]->t)
      return lathe_status_new(LATHE_STATUS_FAILED_PRECONDITION, "Execute: input %d (\"%s\") was already donated", i, fn->params[i]->name);
    if (inputs[i]->backend != be) return LATHE_INVALID("Execute: input %d (\"%s\") belongs to another backend", i, fn->params[i]->name);
    if (inputs[i]->t->device != device)
      return LATHE_INVALID("Execute: input %d (\"%s\") is on device %d, the execution runs on device %d (copy it with "
                           "CopyToDevice)", i, fn->params[i]->name, inputs[i]->t->device, device);
    LATHE_RETURN_IF_ERROR(lathe_check_input(fn->params[i], i, &inputs[i]->shape, bound, names, &n_names));
    for (int j = 0; j < i && donate && donate[i]; j++)
      if (inputs[j] == inputs[i]) return LATHE_INVALID("Execute: input %d is donated and also passed as input %d", i, j);
  }
  LATHE_RETURN_IF_ERROR(lathe_check_bound_sums(fn, bound, names, n_names));
  lathe_specialization *sp;
  LATHE_RETURN_IF_ERROR(lathe_executable_specialization(e, names, bound, n_names, inputs, n_inputs, device, &sp));
  enum { STACK = 16 };
  lathe_tensor *tin_s[STACK], *tout_s[STACK];
  bool don_s[STACK];
  lathe_tensor **tin = n_inputs <= STACK ? tin_s : malloc(sizeof(lathe_tensor *) * (size_t)n_inputs);
  bool *don = n_inputs <= STACK ? don_s : malloc(sizeof(bool) * (size_t)n_inputs);
  lathe_tensor **tout = n_outputs <= STACK ? tout_s : calloc((size_t)n_outputs, sizeof(lathe_tensor *));
  lathe_status_t st = (!tin || !don || !tout) ? LATHE_OOM("Execute") : NULL;
  if (!st) {
    /* A donated buffer hands its tensor over; the others are retained for the run. */
    for (int i = 0; i < n_inputs; i++) {
      don[i] = donate && donate[i];
      if (don[i]) {
        tin[i] = inputs[i]->t;
        inputs[i]->t = NULL;
      } else {
        tin[i] = lathe_tensor_retain(inputs[i]->t);
      }
    }
    st = lathe_launch_one(e, sp, device, tin, don, n_inputs, tout, n_outputs, 0, NULL);
  }
  lathe_specialization_release(sp);
  lathe_buffer_wrap_outputs(be, st ? NULL : tout, outputs, n_outputs, &st);
  if (tin != tin_s) free(tin);
  if (don != don_s) free(don);
  if (tout != tout_s) free(tout);
  return st;
}

int lathe_executable_num_replicas(lathe_executable_t e) { return e ? e->n_replicas : 0; }

static lathe_status_t shape_on(lathe_executable_t e, bool input, int i, int index, lathe_shape *out) {
  if (!e || !out) return LATHE_INVALID("Executable: NULL argument");
  int n = input ? e->main_fn->n_params : e->main_fn->n_outputs;
  if (i < 0 || i >= n) return LATHE_INVALID("Executable: %s %d out of range [0, %d)", input ? "input" : "output", i, n);
  if (index < 0 || index >= e->n_replicas)
    return LATHE_INVALID("Executable: device index %d out of range [0, %d)", index, e->n_replicas);
  const lathe_shape *g = input ? &e->main_fn->params[i]->shape : &e->main_fn->outputs[i]->shape;
  const lathe_sharding_def *s = NULL;
  if (e->distribution == LATHE_DIST_AUTO_SHARDING)
    s = input ? e->main_fn->params[i]->sharding : (e->dist.output_shardings ? e->dist.output_shardings[i] : NULL);
  int64_t off[LATHE_MAX_RANK];
  lathe_shard_geometry(&e->dist, s, index, g, out, off, NULL);
  return NULL;
}

lathe_status_t lathe_executable_input_shape_on(lathe_executable_t e, int i, int index, lathe_shape *out) {
  return shape_on(e, true, i, index, out);
}

lathe_status_t lathe_executable_output_shape_on(lathe_executable_t e, int i, int index, lathe_shape *out) {
  return shape_on(e, false, i, index, out);
}
