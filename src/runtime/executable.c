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
  lathe_status_t st = lathe_program_build(b, &be->program_options, &sp->program);
  if (!st) st = be->dev->compile(be->dev_ctx, sp->program, &sp->plan);
  if (st) {
    specialization_free(sp);
    return st;
  }
  *out = sp;
  return NULL;
}

/* Graphs with dynamic axes keep a shallow copy of the builder (its arrays live in the graph
 * arena) and the ordered list of dynamic axis names that bind a specialisation. */
static lathe_status_t collect_dynamic_axes(lathe_executable_t e, lathe_builder_t b) {
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
  if (!n) return NULL;
  e->source = malloc(sizeof *e->source);
  e->dyn_names = malloc(sizeof(char *) * (size_t)n);
  e->specs = calloc((size_t)e->max_specs, sizeof *e->specs);
  pthread_mutex_t *mu = malloc(sizeof *mu);
  if (!e->source || !e->dyn_names || !e->specs || !mu || pthread_mutex_init(mu, NULL)) {
    free(mu);
    return LATHE_OOM("Compile");
  }
  *e->source = *b;
  e->source->backend = e->backend; /* the executable's reference covers the copy */
  memcpy(e->dyn_names, names, sizeof(char *) * (size_t)n);
  e->n_dyn = n;
  e->mu = mu;
  return NULL;
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
  if (!st) st = specialization_new(backend, b->graph, b, &e->base);
  if (!st) e->stats.compiles = 1;
  if (!st) st = collect_dynamic_axes(e, b);
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

/* The specialisation for the binding names[i] -> bound[i] (a new reference): cached, or compiled
 * now, evicting the least recently used one when the cache is full. Executions that still use an
 * evicted specialisation hold their own reference. */
lathe_status_t lathe_executable_specialization(lathe_executable_t e, const char **names, const int64_t *bound, int n,
                                               lathe_specialization **out) {
  if (!e->n_dyn) {
    atomic_fetch_add_explicit(&e->base->refs, 1, memory_order_relaxed);
    *out = e->base;
    return NULL;
  }
  int64_t key[LATHE_MAX_DYNAMIC_NAMES];
  for (int k = 0; k < e->n_dyn; k++) {
    int j = 0;
    while (j < n && strcmp(names[j], e->dyn_names[k]) != 0) j++;
    key[k] = j < n ? bound[j] : -1;
  }
  size_t key_bytes = sizeof(int64_t) * (size_t)e->n_dyn;
  pthread_mutex_lock(e->mu);
  for (int i = 0; i < e->n_specs; i++)
    if (memcmp(e->specs[i]->sizes, key, key_bytes) == 0) {
      e->specs[i]->last_used = ++e->clock;
      e->stats.hits++;
      *out = e->specs[i];
      atomic_fetch_add_explicit(&(*out)->refs, 1, memory_order_relaxed);
      pthread_mutex_unlock(e->mu);
      return NULL;
    }
  struct lathe_builder *copy = NULL;
  lathe_specialization *sp = NULL;
  int64_t *sizes = malloc(key_bytes);
  lathe_status_t st = sizes ? NULL : LATHE_OOM("Execute");
  if (!st) {
    memcpy(sizes, key, key_bytes);
    st = lathe_builder_specialize(e->source, e->dyn_names, key, e->n_dyn, &copy);
  }
  if (!st) st = specialization_new(e->backend, e->graph, copy, &sp);
  if (st) {
    lathe_builder_free(copy);
    free(sizes);
    pthread_mutex_unlock(e->mu);
    return lathe_status_annotate(st, "Execute: specialising dynamic axes");
  }
  sp->builder = copy;
  sp->sizes = sizes;
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
  pthread_mutex_unlock(e->mu);
  return NULL;
}

lathe_status_t lathe_launch_one(lathe_executable_t e, lathe_specialization *sp, int device, lathe_tensor **inputs,
                                const bool *donated, int n_inputs, lathe_tensor **outputs, int n_outputs, int replica,
                                lathe_collective *group) {
  lathe_backend_t be = e->backend;
  const lathe_pfunc *main = lathe_program_main(sp->program);
  lathe_status_t st = NULL;
  for (int k = 0; k < n_outputs; k++) outputs[k] = NULL;
  for (int k = 0; !st && k < n_outputs; k++)
    st = lathe_tensor_shell(be->dev, be->dev_ctx, device, &main->slots[main->outputs[k]].shape, &outputs[k]);
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

lathe_status_t lathe_executable_execute(lathe_executable_t e, const lathe_buffer_t *inputs, const bool *donate,
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
  lathe_specialization *sp;
  LATHE_RETURN_IF_ERROR(lathe_executable_specialization(e, names, bound, n_names, &sp));
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
