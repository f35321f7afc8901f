/* executable.c -- compile and execute: the device-independent checks around a device's plan. */
#include <pthread.h>
#include <stdio.h>

#include "runtime.h"

static void specialization_free(lathe_executable_t e, lathe_specialization *sp);

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
  pthread_mutex_t *mu = malloc(sizeof *mu);
  if (!e->source || !e->dyn_names || !mu) {
    free(mu);
    return LATHE_OOM("Compile");
  }
  *e->source = *b;
  memcpy(e->dyn_names, names, sizeof(char *) * (size_t)n);
  e->n_dyn = n;
  pthread_mutex_init(mu, NULL);
  e->mu = mu;
  return NULL;
}

lathe_status_t lathe_builder_compile(lathe_builder_t b, lathe_executable_t *out_exec) {
  if (!b) return LATHE_INVALID("Compile: builder is NULL");
  if (!out_exec) return LATHE_INVALID("Compile: out_exec is NULL");
  if (!b->main_fn->returned) return LATHE_INVALID("Compile: main function has no Return");
  for (int i = 0; i < b->n_fns; i++)
    if (!b->fns[i]->returned && b->fns[i]->n_nodes)
      return LATHE_INVALID("Compile: function \"%s\" has no Return", b->fns[i]->name);
  lathe_executable_t e = calloc(1, sizeof *e);
  if (!e) return LATHE_OOM("Compile");
  lathe_status_t st = b->backend->dev->compile(b->backend->dev_ctx, b, &e->plan);
  if (st) {
    free(e);
    return st;
  }
  e->backend = b->backend;
  e->graph = b->graph;
  lathe_graph_retain(b->graph);
  e->main_fn = b->main_fn;
  st = collect_dynamic_axes(e, b);
  if (st) {
    lathe_executable_free(e);
    return st;
  }
  *out_exec = e;
  return NULL;
}

void lathe_executable_free(lathe_executable_t e) {
  if (!e) return;
  for (int i = 0; i < e->n_specs; i++) specialization_free(e, &e->specs[i]);
  if (e->mu) {
    pthread_mutex_destroy(e->mu);
    free(e->mu);
  }
  free(e->source);
  free(e->dyn_names);
  e->backend->dev->plan_free(e->backend->dev_ctx, e->plan);
  lathe_graph_release(e->graph);
  free(e);
}

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

/* Checks input i against parameter p; dynamic axes take any size, but one name binds one size. */
static lathe_status_t check_input(const lathe_node *p, int i, const lathe_shape *got, int64_t *bound,
                                  const char **names, int *n_names) {
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

/* The plan specialised for the binding names[i] -> bound[i]: cached, or made now. When the cache
 * is full the new specialisation is not cached: *tmp receives it and the caller frees it after
 * the run (cached plans may be in use by other threads, so they are never evicted). */
static lathe_status_t specialization_for(lathe_executable_t e, const char **names, const int64_t *bound, int n,
                                         lathe_plan **out, lathe_specialization *tmp) {
  int64_t key[LATHE_MAX_DYNAMIC_NAMES];
  for (int k = 0; k < e->n_dyn; k++) {
    int j = 0;
    while (j < n && strcmp(names[j], e->dyn_names[k]) != 0) j++;
    key[k] = j < n ? bound[j] : -1;
  }
  pthread_mutex_lock(e->mu);
  for (int i = 0; i < e->n_specs; i++)
    if (memcmp(e->specs[i].sizes, key, sizeof(int64_t) * (size_t)e->n_dyn) == 0) {
      *out = e->specs[i].plan;
      pthread_mutex_unlock(e->mu);
      return NULL;
    }
  lathe_specialization sp = {0};
  lathe_status_t st = NULL;
  sp.sizes = malloc(sizeof(int64_t) * (size_t)e->n_dyn);
  if (!sp.sizes) st = LATHE_OOM("Execute");
  if (!st) {
    memcpy(sp.sizes, key, sizeof(int64_t) * (size_t)e->n_dyn);
    st = lathe_builder_specialize(e->source, e->dyn_names, key, e->n_dyn, &sp.builder);
  }
  if (!st) st = e->backend->dev->compile(e->backend->dev_ctx, sp.builder, &sp.plan);
  if (st) {
    lathe_builder_free(sp.builder);
    free(sp.sizes);
    pthread_mutex_unlock(e->mu);
    return lathe_status_annotate(st, "Execute: specialising dynamic axes");
  }
  if (e->n_specs < LATHE_MAX_SPECIALIZATIONS) e->specs[e->n_specs++] = sp;
  else *tmp = sp;
  *out = sp.plan;
  pthread_mutex_unlock(e->mu);
  return NULL;
}

static void specialization_free(lathe_executable_t e, lathe_specialization *sp) {
  if (sp->plan) e->backend->dev->plan_free(e->backend->dev_ctx, sp->plan);
  lathe_builder_free(sp->builder);
  free(sp->sizes);
}

lathe_status_t lathe_executable_execute(lathe_executable_t e, const lathe_buffer_t *inputs, const bool *donate,
                                        int n_inputs, int default_device, lathe_buffer_t *outputs, int n_outputs) {
  if (!e) return LATHE_INVALID("Execute: executable is NULL");
  lathe_function *fn = e->main_fn;
  if (n_inputs != fn->n_params) return LATHE_INVALID("Execute: got %d inputs, the executable takes %d", n_inputs, fn->n_params);
  if (n_outputs != fn->n_outputs) return LATHE_INVALID("Execute: got room for %d outputs, the executable returns %d", n_outputs, fn->n_outputs);
  if (n_inputs && !inputs) return LATHE_INVALID("Execute: inputs is NULL");
  if (n_outputs && !outputs) return LATHE_INVALID("Execute: outputs is NULL");
  if (default_device < 0 || default_device >= lathe_backend_num_devices(e->backend))
    return LATHE_INVALID("Execute: device %d out of range", default_device);
  int64_t bound[LATHE_MAX_DYNAMIC_NAMES];
  const char *names[LATHE_MAX_DYNAMIC_NAMES];
  int n_names = 0;
  for (int i = 0; i < n_inputs; i++) {
    if (!inputs[i]) return LATHE_INVALID("Execute: input %d (\"%s\") is NULL", i, fn->params[i]->name);
    if (!inputs[i]->t)
      return lathe_status_new(LATHE_STATUS_FAILED_PRECONDITION, "Execute: input %d (\"%s\") was already donated", i, fn->params[i]->name);
    if (inputs[i]->backend != e->backend) return LATHE_INVALID("Execute: input %d (\"%s\") belongs to another backend", i, fn->params[i]->name);
    LATHE_RETURN_IF_ERROR(check_input(fn->params[i], i, &inputs[i]->shape, bound, names, &n_names));
    for (int j = 0; j < i && donate && donate[i]; j++)
      if (inputs[j] == inputs[i]) return LATHE_INVALID("Execute: input %d is donated and also passed as input %d", i, j);
  }
  lathe_tensor *tin_stack[16], **tin = n_inputs <= 16 ? tin_stack : malloc(sizeof(lathe_tensor *) * (size_t)n_inputs);
  lathe_tensor *tout_stack[16], **tout = n_outputs <= 16 ? tout_stack : calloc((size_t)n_outputs, sizeof(lathe_tensor *));
  if (!tin || !tout) {
    if (tin != tin_stack) free(tin);
    if (tout != tout_stack) free(tout);
    return LATHE_OOM("Execute");
  }
  memset(tout, 0, sizeof(lathe_tensor *) * (size_t)n_outputs);
  /* A donated buffer hands its reference over; others are retained for the run. */
  for (int i = 0; i < n_inputs; i++) {
    if (donate && donate[i]) {
      tin[i] = inputs[i]->t;
      inputs[i]->t = NULL;
    } else {
      tin[i] = lathe_tensor_retain(inputs[i]->t);
    }
  }
  lathe_plan *plan = e->plan;
  lathe_specialization uncached = {0};
  lathe_status_t st = e->n_dyn ? specialization_for(e, names, bound, n_names, &plan, &uncached) : NULL;
  if (st) {
    for (int i = 0; i < n_inputs; i++) lathe_tensor_release(tin[i]);
  } else {
    st = e->backend->dev->execute(e->backend->dev_ctx, plan, tin, n_inputs, tout, n_outputs);
  }
  specialization_free(e, &uncached);
  if (tin != tin_stack) free(tin);
  int made = 0;
  if (!st) {
    for (; made < n_outputs; made++) {
      st = lathe_buffer_wrap_tensor(e->backend, tout[made], &outputs[made]);
      if (st) break;
    }
    if (st) {
      /* nocrash: outputs are written on success only; leave no freed handle in the caller's array */
      for (int k = 0; k < made; k++) lathe_buffer_free(outputs[k]), outputs[k] = NULL;
      for (int k = made + 1; k < n_outputs; k++) lathe_tensor_release(tout[k]);
    }
  }
  if (tout != tout_stack) free(tout);
  return st;
}
