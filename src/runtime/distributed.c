/* distributed.c -- executions of programs over several devices.
 *
 * SPMD: one launch per replica, on its device, sharing a lathe_collective through which the
 * device's collective kernels meet. AutoSharding, partitioned (src/graph/partition.c): the same,
 * each device running the per-device program on its own shards plus its mesh coordinates.
 * AutoSharding the partitioner declines: the shards of each sharded input are put together on the
 * first device of the assignment, the program runs there once, and each output is split by its
 * sharding onto every device (replicated outputs are copied whole) -- exact results, with the
 * work on one device. */
#include <stdio.h>

#include "runtime.h"

static lathe_status_t check_common(lathe_executable_t e, const lathe_buffer_t *inputs, int n_inputs,
                                   lathe_buffer_t *outputs, int n_outputs) {
  int np = e->main_fn->n_params, no = e->main_fn->n_outputs, R = e->n_replicas;
  if (n_inputs != np * R)
    return LATHE_INVALID("Execute: got %d inputs, the program takes %d per device on %d devices (%d)", n_inputs, np, R, np * R);
  if (n_outputs != no * R)
    return LATHE_INVALID("Execute: got room for %d outputs, the program returns %d per device on %d devices (%d)",
                         n_outputs, no, R, no * R);
  if (n_inputs && !inputs) return LATHE_INVALID("Execute: inputs is NULL");
  if (n_outputs && !outputs) return LATHE_INVALID("Execute: outputs is NULL");
  for (int k = 0; k < n_inputs; k++) {
    int r = k / (np ? np : 1), i = k % (np ? np : 1);
    const char *name = e->main_fn->params[i]->name;
    if (!inputs[k]) return LATHE_INVALID("Execute: input %d (\"%s\") of device %d is NULL", i, name, r);
    if (!inputs[k]->t)
      return lathe_status_new(LATHE_STATUS_FAILED_PRECONDITION, "Execute: input %d (\"%s\") of device %d was already donated", i,
                              name, r);
    if (inputs[k]->backend != e->backend)
      return LATHE_INVALID("Execute: input %d (\"%s\") of device %d belongs to another backend", i, name, r);
    if (inputs[k]->t->device != e->devices[r])
      return LATHE_INVALID("Execute: input %d (\"%s\") for device index %d is on device %d, not on device %d", i, name, r,
                           inputs[k]->t->device, e->devices[r]);
  }
  return NULL;
}

/* Launches replica r of sp on its device with inputs tin[r*ni ..] (donated where don says) and
 * outputs tout[r*no ..], unless st is already an error; releases the inputs of replicas never
 * launched, wraps the outputs into buffers (all released on failure), and frees what the caller
 * allocated: sp, group, tin, don and tout are taken. */
static lathe_status_t launch_replicas(lathe_executable_t e, lathe_specialization *sp, lathe_collective *group, lathe_tensor **tin,
                                      bool *don, int ni, lathe_tensor **tout, lathe_buffer_t *outputs, int n_outputs,
                                      lathe_status_t st) {
  int R = e->n_replicas, no = e->main_fn->n_outputs, launched = 0;
  for (; !st && launched < R; launched++)
    st = lathe_launch_one(e, sp, e->devices[launched], tin + launched * ni, don + launched * ni, ni, tout + launched * no, no,
                          launched, group);
  /* inputs of replicas never launched are still ours */
  for (int r = st ? launched : R; tin && r < R; r++)
    for (int i = 0; i < ni; i++) lathe_tensor_release(tin[r * ni + i]);
  lathe_buffer_wrap_outputs(e->backend, tout, outputs, n_outputs, &st);
  lathe_collective_release(group);
  lathe_specialization_release(sp);
  free(tin);
  free(tout);
  free(don);
  return st;
}

/* Wraps the output tensors into buffers (when *st is OK); on any failure every output buffer and
 * tensor is released. */
lathe_status_t lathe_execute_spmd(lathe_executable_t e, const lathe_buffer_t *inputs, const bool *donate, int n_inputs,
                                  lathe_buffer_t *outputs, int n_outputs) {
  LATHE_RETURN_IF_ERROR(check_common(e, inputs, n_inputs, outputs, n_outputs));
  int np = e->main_fn->n_params, R = e->n_replicas;
  int64_t bound[LATHE_MAX_DYNAMIC_NAMES];
  const char *names[LATHE_MAX_DYNAMIC_NAMES];
  int n_names = 0;
  /* every replica binds the dynamic axes alike: one program for all */
  for (int k = 0; k < n_inputs; k++) {
    LATHE_RETURN_IF_ERROR(lathe_check_input(e->main_fn->params[k % np], k % np, &inputs[k]->shape, bound, names, &n_names));
    for (int j = 0; j < k && donate && donate[k]; j++)
      if (inputs[j] == inputs[k]) return LATHE_INVALID("Execute: input %d is donated and also passed as input %d", k, j);
  }
  LATHE_RETURN_IF_ERROR(lathe_check_bound_sums(e->main_fn, bound, names, n_names));
  lathe_specialization *sp;
  LATHE_RETURN_IF_ERROR(lathe_executable_specialization(e, names, bound, n_names, NULL, 0, 0, &sp));
  lathe_collective *group = NULL;
  lathe_tensor **tin = calloc((size_t)n_inputs + 1, sizeof *tin), **tout = calloc((size_t)n_outputs + 1, sizeof *tout);
  bool *don = calloc((size_t)n_inputs + 1, sizeof *don);
  lathe_status_t st = (!tin || !tout || !don) ? LATHE_OOM("Execute") : lathe_collective_new(R, e->devices, &group);
  if (!st)
    for (int k = 0; k < n_inputs; k++) {
      don[k] = donate && donate[k];
      tin[k] = don[k] ? inputs[k]->t : lathe_tensor_retain(inputs[k]->t);
      if (don[k]) inputs[k]->t = NULL;
    }
  return launch_replicas(e, sp, group, tin, don, np, tout, outputs, n_outputs, st);
}

/* ---- AutoSharding ---- */

/* Copies the block at `offsets` of extent `valid` between a whole row-major array of shape g
 * (whole) and a packed array of shape `shard` (part; valid <= shard per axis, the rest padding):
 * to_whole picks the direction. */
static void copy_block(char *whole, const lathe_shape *g, char *part, const lathe_shape *shard, const int64_t *offsets,
                       const int64_t *valid, bool to_whole) {
  size_t es = (size_t)lathe_dtype_bits(g->dtype) / 8;
  int r = g->rank;
  if (r == 0) {
    if (to_whole) memcpy(whole, part, es);
    else memcpy(part, whole, es);
    return;
  }
  int64_t n = 1;
  for (int a = 0; a < r; a++) n *= valid[a];
  if (n == 0) return;
  int64_t gst[LATHE_MAX_RANK], pst[LATHE_MAX_RANK], idx[LATHE_MAX_RANK] = {0}, row = valid[r - 1];
  int64_t gacc = 1, pacc = 1;
  for (int a = r - 1; a >= 0; a--) {
    gst[a] = gacc;
    pst[a] = pacc;
    gacc *= g->dims[a];
    pacc *= shard->dims[a];
  }
  for (int64_t k = 0; k < n; k += row) {
    int64_t off = 0, poff = 0;
    for (int a = 0; a < r; a++) {
      off += (idx[a] + offsets[a]) * gst[a];
      poff += idx[a] * pst[a];
    }
    char *w = whole + (size_t)off * es, *p = part + (size_t)poff * es;
    if (to_whole) memcpy(w, p, (size_t)row * es);
    else memcpy(p, w, (size_t)row * es);
    for (int a = r - 2; a >= 0; a--) {
      if (++idx[a] < valid[a]) break;
      idx[a] = 0;
    }
  }
}

/* A tensor on ordinal device with the given host bytes. */
static lathe_status_t upload_to(lathe_backend_t be, int device, const lathe_shape *shape, const void *bytes,
                                lathe_tensor **out) {
  LATHE_RETURN_IF_ERROR(lathe_tensor_alloc(be->dev, be->dev_ctx, device, shape, out));
  lathe_status_t st = (*out)->nbytes ? be->dev->upload(be->dev_ctx, *out, bytes, (*out)->nbytes) : NULL;
  if (st) {
    lathe_tensor_release(*out);
    *out = NULL;
  }
  return st;
}

static lathe_status_t download_from(lathe_backend_t be, lathe_tensor *t, void *bytes) {
  LATHE_RETURN_IF_ERROR(lathe_tensor_wait(t));
  return t->nbytes ? be->dev->download(be->dev_ctx, t, bytes, t->nbytes) : NULL;
}

lathe_status_t lathe_partition_upload_coords(lathe_executable_t e, const struct lathe_builder *b) {
  lathe_shape s = lathe_partition_coords_shape(b);
  int32_t *c = malloc(sizeof(int32_t) * (size_t)(s.dims[0] + 1));
  e->coords = calloc((size_t)e->n_replicas, sizeof *e->coords);
  lathe_status_t st = (!c || !e->coords) ? LATHE_OOM("Compile") : NULL;
  for (int r = 0; !st && r < e->n_replicas; r++) {
    lathe_partition_coords(b, r, c);
    st = upload_to(e->backend, e->devices[r], &s, c, &e->coords[r]);
  }
  free(c);
  return st;
}

/* A partitioned program: as SPMD, each device's inputs its shards and its coordinates. */
static lathe_status_t execute_partitioned(lathe_executable_t e, const lathe_buffer_t *inputs, const bool *donate,
                                          int n_inputs, lathe_buffer_t *outputs, int n_outputs) {
  int np = e->main_fn->n_params, R = e->n_replicas, nl = np + 1;
  for (int k = 0; k < n_inputs; k++)
    for (int j = 0; j < k && donate && donate[k]; j++)
      if (inputs[j] == inputs[k]) return LATHE_INVALID("Execute: input %d is donated and also passed as input %d", k, j);
  lathe_specialization *sp;
  LATHE_RETURN_IF_ERROR(lathe_executable_specialization(e, NULL, NULL, 0, NULL, 0, 0, &sp));
  lathe_collective *group = NULL;
  lathe_tensor **tin = calloc((size_t)(nl * R) + 1, sizeof *tin), **tout = calloc((size_t)n_outputs + 1, sizeof *tout);
  bool *don = calloc((size_t)(nl * R) + 1, sizeof *don);
  lathe_status_t st = (!tin || !tout || !don) ? LATHE_OOM("Execute") : lathe_collective_new(R, e->devices, &group);
  if (!st)
    for (int r = 0; r < R; r++) {
      for (int i = 0; i < np; i++) {
        int k = r * np + i;
        don[r * nl + i] = donate && donate[k];
        tin[r * nl + i] = don[r * nl + i] ? inputs[k]->t : lathe_tensor_retain(inputs[k]->t);
        if (don[r * nl + i]) inputs[k]->t = NULL;
      }
      tin[r * nl + np] = lathe_tensor_retain(e->coords[r]);
    }
  return launch_replicas(e, sp, group, tin, don, nl, tout, outputs, n_outputs, st);
}

lathe_status_t lathe_execute_sharded(lathe_executable_t e, const lathe_buffer_t *inputs, const bool *donate, int n_inputs,
                                     lathe_buffer_t *outputs, int n_outputs) {
  LATHE_RETURN_IF_ERROR(check_common(e, inputs, n_inputs, outputs, n_outputs));
  lathe_function *fn = e->main_fn;
  lathe_backend_t be = e->backend;
  int np = fn->n_params, no = fn->n_outputs, R = e->n_replicas, home = e->devices[0];
  /* every device passes its shard's shape */
  for (int k = 0; k < n_inputs; k++) {
    lathe_shape want;
    LATHE_RETURN_IF_ERROR(lathe_executable_input_shape_on(e, k % np, k / np, &want));
    if (!lathe_shape_equal(&want, &inputs[k]->shape)) {
      char a[LATHE_SHAPE_STR_MAX], b[LATHE_SHAPE_STR_MAX];
      return LATHE_INVALID("Execute: input %d (\"%s\") of device index %d has shape %s, its shard is %s", k % np,
                           fn->params[k % np]->name, k / np, lathe_shape_str(&inputs[k]->shape, a, sizeof a),
                           lathe_shape_str(&want, b, sizeof b));
    }
  }
  if (e->partitioned) return execute_partitioned(e, inputs, donate, n_inputs, outputs, n_outputs);
  lathe_specialization *sp;
  LATHE_RETURN_IF_ERROR(lathe_executable_specialization(e, NULL, NULL, 0, NULL, 0, 0, &sp));
  lathe_tensor **gin = calloc((size_t)np + 1, sizeof *gin), **gout = calloc((size_t)no + 1, sizeof *gout);
  bool *don = calloc((size_t)np + 1, sizeof *don);
  lathe_status_t st = (!gin || !gout || !don) ? LATHE_OOM("Execute") : NULL;
  /* the whole inputs on the home device */
  for (int i = 0; !st && i < np; i++) {
    const lathe_node *p = fn->params[i];
    if (!p->sharding) {
      gin[i] = lathe_tensor_retain(inputs[i]->t); /* replicated: device index 0's copy */
      continue;
    }
    size_t nbytes = (size_t)lathe_shape_byte_size(&p->shape);
    char *whole = malloc(nbytes ? nbytes : 1), *part = NULL;
    if (!whole) st = LATHE_OOM("Execute");
    for (int r = 0; !st && r < R; r++) {
      lathe_tensor *t = inputs[r * np + i]->t;
      lathe_shape shard;
      int64_t off[LATHE_MAX_RANK], valid[LATHE_MAX_RANK];
      lathe_shard_geometry(&e->dist, p->sharding, r, &p->shape, &shard, off, valid);
      char *grown = realloc(part, t->nbytes ? t->nbytes : 1);
      if (!grown) st = LATHE_OOM("Execute");
      else part = grown;
      if (!st) st = download_from(be, t, part);
      if (!st) copy_block(whole, &p->shape, part, &shard, off, valid, true);
    }
    if (!st) st = upload_to(be, home, &p->shape, whole, &gin[i]);
    free(whole);
    free(part);
  }
  /* run once, then wait: the outputs are split on the host */
  if (!st) {
    lathe_specialization *ref = sp;
    st = lathe_launch_one(e, ref, home, gin, don, np, gout, no, 0, NULL);
    for (int i = 0; i < np; i++) gin[i] = NULL; /* passed to the launch */
  }
  lathe_tensor **tout = st ? NULL : calloc((size_t)n_outputs + 1, sizeof *tout);
  if (!st && !tout) st = LATHE_OOM("Execute");
  for (int k = 0; !st && k < no; k++) {
    const lathe_sharding_def *s = e->dist.output_shardings ? e->dist.output_shardings[k] : NULL;
    const lathe_shape *g = &fn->outputs[k]->shape;
    size_t nbytes = (size_t)lathe_shape_byte_size(g);
    /* a shard is at most the whole (ceil(n/k) <= n), padding included */
    char *whole = malloc(nbytes ? nbytes : 1), *part = malloc(nbytes ? nbytes : 1);
    if (!whole || !part) st = LATHE_OOM("Execute");
    if (!st) st = download_from(be, gout[k], whole);
    for (int r = 0; !st && r < R; r++) {
      lathe_shape shard;
      int64_t off[LATHE_MAX_RANK], valid[LATHE_MAX_RANK];
      lathe_shard_geometry(&e->dist, s, r, g, &shard, off, valid);
      memset(part, 0, (size_t)lathe_shape_byte_size(&shard));
      copy_block(whole, g, part, &shard, off, valid, false);
      st = upload_to(be, e->devices[r], &shard, part, &tout[r * no + k]);
    }
    free(whole);
    free(part);
  }
  /* donated inputs are gone either way */
  for (int k = 0; k < n_inputs && donate; k++)
    if (donate[k] && inputs[k]->t) {
      lathe_tensor_release(inputs[k]->t);
      inputs[k]->t = NULL;
    }
  lathe_buffer_wrap_outputs(be, tout, outputs, n_outputs, &st);
  for (int i = 0; gin && i < np; i++) lathe_tensor_release(gin[i]);
  for (int k = 0; gout && k < no; k++) lathe_tensor_release(gout[k]);
  lathe_specialization_release(sp);
  free(gin);
  free(gout);
  free(don);
  free(tout);
  return st;
}
