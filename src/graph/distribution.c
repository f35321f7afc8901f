/* distribution.c -- programs over several devices: the device assignment, SPMD replicas and
 * their collectives (AllReduce), AutoSharding meshes and shardings, and shard geometry. */
#include <stdio.h>

#include "graph.h"

static lathe_arena *arena_of(lathe_builder_t b) { return &b->graph->arena; }

lathe_status_t lathe_builder_assign_devices(lathe_builder_t b, const int *devices, int n_devices) {
  if (!b) return LATHE_INVALID("DeviceAssignment: builder is NULL");
  if (n_devices < 1 || !devices) return LATHE_INVALID("DeviceAssignment: needs at least one device");
  int n = lathe_backend_num_devices(b->backend);
  for (int i = 0; i < n_devices; i++) {
    if (devices[i] < 0 || devices[i] >= n)
      return LATHE_INVALID("DeviceAssignment: device %d out of range [0, %d)", devices[i], n);
    for (int j = 0; j < i; j++)
      if (devices[j] == devices[i]) return LATHE_INVALID("DeviceAssignment: device %d given twice", devices[i]);
  }
  if (b->distribution == LATHE_DIST_NONE && n_devices > 1)
    return LATHE_INVALID("DeviceAssignment: %d devices for a single-device program (make it SPMD or AutoSharding "
                         "first)", n_devices);
  if (b->distribution != LATHE_DIST_NONE && n_devices != b->n_replicas)
    return LATHE_INVALID("DeviceAssignment: %d devices for a program distributed over %d", n_devices, b->n_replicas);
  int *d = lathe_arena_alloc(arena_of(b), sizeof(int) * (size_t)n_devices);
  if (!d) return LATHE_OOM("DeviceAssignment");
  memcpy(d, devices, sizeof(int) * (size_t)n_devices);
  b->devices = d;
  b->n_assigned = n_devices;
  b->assigned_device = b->distribution == LATHE_DIST_NONE ? devices[0] : -1;
  return NULL;
}

static lathe_status_t set_distribution(lathe_builder_t b, const char *op, int kind, int n) {
  if (!b) return LATHE_INVALID("%s: builder is NULL", op);
  if (b->distribution != LATHE_DIST_NONE) return LATHE_INVALID("%s: the builder is already distributed", op);
  int have = lathe_backend_num_devices(b->backend);
  if (n < 1) return LATHE_INVALID("%s: %d devices", op, n);
  if (n > have)
    return LATHE_INVALID("%s: %d devices, but the backend has %d (lathe:cpu,devices=N makes more)", op, n, have);
  if (b->n_assigned && b->n_assigned != n)
    return LATHE_INVALID("%s: %d devices, but %d were assigned", op, n, b->n_assigned);
  b->distribution = kind;
  b->n_replicas = n;
  b->assigned_device = -1;
  return NULL;
}

lathe_status_t lathe_builder_spmd(lathe_builder_t b, int n_replicas) {
  return set_distribution(b, "DistributedSPMD", LATHE_DIST_SPMD, n_replicas);
}

lathe_status_t lathe_builder_auto_sharding(lathe_builder_t b, const lathe_mesh *meshes, int n_meshes) {
  const char *op = "DistributedAutoSharding";
  if (!b) return LATHE_INVALID("%s: builder is NULL", op);
  if (n_meshes < 1 || !meshes) return LATHE_INVALID("%s: needs at least one mesh", op);
  lathe_mesh_def *defs = lathe_arena_alloc(arena_of(b), sizeof(lathe_mesh_def) * (size_t)n_meshes);
  if (!defs) return LATHE_OOM(op);
  int n_devices = 0;
  for (int m = 0; m < n_meshes; m++) {
    const lathe_mesh *in = &meshes[m];
    lathe_mesh_def *d = &defs[m];
    if (!in->name) return LATHE_INVALID("%s: mesh %d has no name", op, m);
    for (int k = 0; k < m; k++)
      if (!strcmp(defs[k].name, in->name)) return LATHE_INVALID("%s: two meshes are named \"%s\"", op, in->name);
    if (in->rank < 1 || in->rank > LATHE_MAX_MESH_RANK || !in->axis_sizes || !in->axis_names)
      return LATHE_INVALID("%s: mesh \"%s\" has rank %d (1 to %d axes, each with a size and a name)", op, in->name,
                           in->rank, LATHE_MAX_MESH_RANK);
    d->name = lathe_arena_strdup(arena_of(b), in->name);
    d->rank = in->rank;
    d->n_devices = 1;
    for (int a = 0; a < in->rank; a++) {
      if (in->axis_sizes[a] < 1) return LATHE_INVALID("%s: mesh \"%s\" axis %d has size %d", op, in->name, a, in->axis_sizes[a]);
      if (!in->axis_names[a]) return LATHE_INVALID("%s: mesh \"%s\" axis %d has no name", op, in->name, a);
      for (int k = 0; k < a; k++)
        if (!strcmp(in->axis_names[k], in->axis_names[a]))
          return LATHE_INVALID("%s: mesh \"%s\" names two axes \"%s\"", op, in->name, in->axis_names[a]);
      d->sizes[a] = in->axis_sizes[a];
      d->axis_names[a] = lathe_arena_strdup(arena_of(b), in->axis_names[a]);
      if (!d->axis_names[a]) return LATHE_OOM(op);
      d->n_devices *= in->axis_sizes[a];
      if (d->n_devices > 1 << 16) return LATHE_INVALID("%s: mesh \"%s\" has too many devices", op, in->name);
    }
    if (!d->name) return LATHE_OOM(op);
    if (m == 0) n_devices = d->n_devices;
    else if (d->n_devices != n_devices)
      return LATHE_INVALID("%s: mesh \"%s\" has %d devices, mesh \"%s\" %d: meshes must span the same devices", op,
                           in->name, d->n_devices, defs[0].name, n_devices);
    d->logical = lathe_arena_alloc(arena_of(b), sizeof(int) * (size_t)d->n_devices);
    if (!d->logical) return LATHE_OOM(op);
    for (int i = 0; i < d->n_devices; i++) {
      int l = in->logical_devices ? in->logical_devices[i] : i;
      if (l < 0 || l >= d->n_devices)
        return LATHE_INVALID("%s: mesh \"%s\" places device index %d, outside [0, %d)", op, in->name, l, d->n_devices);
      for (int k = 0; k < i; k++)
        if (d->logical[k] == l) return LATHE_INVALID("%s: mesh \"%s\" places device index %d twice", op, in->name, l);
      d->logical[i] = l;
    }
  }
  LATHE_RETURN_IF_ERROR(set_distribution(b, op, LATHE_DIST_AUTO_SHARDING, n_devices));
  b->meshes = defs;
  b->n_meshes = n_meshes;
  return NULL;
}

/* A sharding resolved against the builder's meshes (arena copy); NULL stays NULL. */
static lathe_status_t resolve_sharding(lathe_builder_t b, const char *op, const lathe_sharding *s, const lathe_shape *shape,
                                       const lathe_sharding_def **out) {
  *out = NULL;
  if (!s) return NULL;
  if (b->distribution != LATHE_DIST_SPMD && b->distribution != LATHE_DIST_AUTO_SHARDING)
    return LATHE_INVALID("%s: a sharding needs an SPMD or AutoSharding builder", op);
  if (s->rank < 0 || s->rank > shape->rank)
    return LATHE_INVALID("%s: a sharding of rank %d for a value of rank %d", op, s->rank, shape->rank);
  if (b->distribution == LATHE_DIST_SPMD) {
    /* Each replica gets its own shard as a whole value: the spec only says how the shards tile
     * the global value (GoMLX's model.Exec attaches one to every variable), so it is checked for
     * shape and dropped. An SPMD builder has no meshes to resolve its names against. */
    for (int a = 0; a < s->rank; a++)
      if (s->n_axes[a] < 0 || s->n_axes[a] > LATHE_MAX_MESH_RANK || (s->n_axes[a] && !s->axes[a]))
        return LATHE_INVALID("%s: sharding of axis %d names %d mesh axes", op, a, s->n_axes[a]);
    return NULL;
  }
  int m = -1;
  for (int k = 0; s->mesh && k < b->n_meshes; k++)
    if (!strcmp(b->meshes[k].name, s->mesh)) m = k;
  if (m < 0) return LATHE_INVALID("%s: unknown mesh \"%s\"", op, s->mesh ? s->mesh : "(null)");
  const lathe_mesh_def *mesh = &b->meshes[m];
  if (lathe_dtype_is_packed(shape->dtype))
    return LATHE_UNIMPL("%s: sharding a packed %s value", op, lathe_dtype_name(shape->dtype));
  lathe_sharding_def *d = lathe_arena_alloc(arena_of(b), sizeof *d);
  if (!d) return LATHE_OOM(op);
  d->mesh = m;
  d->rank = s->rank;
  bool used[LATHE_MAX_MESH_RANK] = {false};
  for (int a = 0; a < s->rank; a++) {
    if (s->n_axes[a] < 0 || s->n_axes[a] > mesh->rank || (s->n_axes[a] && !s->axes[a]))
      return LATHE_INVALID("%s: sharding of axis %d names %d mesh axes", op, a, s->n_axes[a]);
    int64_t parts = 1;
    for (int k = 0; k < s->n_axes[a]; k++) {
      int j = -1;
      for (int q = 0; s->axes[a][k] && q < mesh->rank; q++)
        if (!strcmp(mesh->axis_names[q], s->axes[a][k])) j = q;
      if (j < 0)
        return LATHE_INVALID("%s: mesh \"%s\" has no axis \"%s\"", op, mesh->name, s->axes[a][k] ? s->axes[a][k] : "(null)");
      if (used[j]) return LATHE_INVALID("%s: mesh axis \"%s\" is used twice in one sharding", op, mesh->axis_names[j]);
      used[j] = true;
      d->axes[a][k] = j;
      parts *= mesh->sizes[j];
    }
    d->n_axes[a] = s->n_axes[a];
    if (parts > 1 && shape->dims[a] < 0)
      return LATHE_UNIMPL("%s: a sharded axis of dynamic size (axis %d)", op, a);
  }
  *out = d;
  return NULL;
}

lathe_status_t lathe_parameter_sharded(lathe_function_t fn, const char *name, const lathe_shape *shape,
                                       const lathe_sharding *sharding, lathe_value_t *out) {
  if (!fn) return LATHE_INVALID("Parameter: function is NULL");
  if (sharding && fn != fn->builder->main_fn) return LATHE_INVALID("Parameter: only main's parameters are sharded");
  const lathe_sharding_def *def = NULL;
  if (shape) LATHE_RETURN_IF_ERROR(resolve_sharding(fn->builder, "Parameter", sharding, shape, &def));
  LATHE_RETURN_IF_ERROR(lathe_parameter(fn, name, shape, out));
  (*out)->sharding = def;
  return NULL;
}

lathe_status_t lathe_function_return_sharded(lathe_function_t fn, const lathe_value_t *outputs,
                                             const lathe_sharding *const *shardings, int n_outputs) {
  if (!fn) return LATHE_INVALID("Return: function is NULL");
  const lathe_sharding_def **defs = NULL;
  bool main = fn == fn->builder->main_fn;
  if (shardings && main && n_outputs > 0) {
    defs = lathe_arena_alloc(arena_of(fn->builder), sizeof *defs * (size_t)n_outputs);
    if (!defs) return LATHE_OOM("Return");
    for (int i = 0; i < n_outputs; i++) {
      if (!outputs || !outputs[i]) return LATHE_INVALID("Return: output %d is NULL", i);
      LATHE_RETURN_IF_ERROR(resolve_sharding(fn->builder, "Return", shardings[i], &outputs[i]->shape, &defs[i]));
    }
  }
  /* shardings of other functions are placement hints: a program computed whole needs none */
  LATHE_RETURN_IF_ERROR(lathe_function_return(fn, outputs, n_outputs));
  if (main) fn->builder->output_shardings = defs;
  return NULL;
}

void lathe_shard_geometry(const struct lathe_builder *b, const lathe_sharding_def *s, int index, const lathe_shape *g,
                          lathe_shape *out, int64_t *offsets, int64_t *valid) {
  *out = *g;
  for (int a = 0; a < g->rank; a++) {
    offsets[a] = 0;
    if (valid) valid[a] = g->dims[a];
  }
  if (!s) return;
  const lathe_mesh_def *mesh = &b->meshes[s->mesh];
  /* the mesh position of device index `index`, then its coordinates along the mesh axes */
  int pos = 0;
  for (int i = 0; i < mesh->n_devices; i++)
    if (mesh->logical[i] == index) pos = i;
  int64_t coord[LATHE_MAX_MESH_RANK];
  for (int j = mesh->rank - 1; j >= 0; j--) {
    coord[j] = pos % mesh->sizes[j];
    pos /= (int)mesh->sizes[j];
  }
  for (int a = 0; a < s->rank; a++) {
    int64_t parts = 1, shard = 0;
    for (int k = 0; k < s->n_axes[a]; k++) {
      int j = s->axes[a][k];
      shard = shard * mesh->sizes[j] + coord[j];
      parts *= mesh->sizes[j];
    }
    out->dims[a] = (g->dims[a] + parts - 1) / parts;
    offsets[a] = shard * out->dims[a];
    if (valid) valid[a] = offsets[a] >= g->dims[a] ? 0 : g->dims[a] - offsets[a] < out->dims[a] ? g->dims[a] - offsets[a] : out->dims[a];
  }
}

lathe_status_t lathe_distribution_check(const struct lathe_builder *b) {
  if (b->distribution == LATHE_DIST_NONE) return NULL;
  int have = lathe_backend_num_devices(b->backend);
  for (int r = 0; r < b->n_replicas; r++) {
    int d = b->devices ? b->devices[r] : r;
    if (d >= have) return LATHE_INVALID("Compile: the program runs on device %d, the backend has %d", d, have);
  }
  return NULL;
}

/* ---- AllReduce ---- */
lathe_status_t lathe_all_reduce(lathe_function_t fn, const lathe_value_t *operands, int n, lathe_op reduction,
                                const int *groups, const int *group_sizes, int n_groups, lathe_value_t *out_values) {
  const char *op = "AllReduce";
  LATHE_RETURN_IF_ERROR(lathe_check_fn(op, fn));
  if (n < 1 || !operands) return LATHE_INVALID("%s: needs at least one operand", op);
  if (!out_values) return LATHE_INVALID("%s: out_values is NULL", op);
  if (reduction != LATHE_OP_REDUCE_SUM && reduction != LATHE_OP_REDUCE_PRODUCT && reduction != LATHE_OP_REDUCE_MAX &&
      reduction != LATHE_OP_REDUCE_MIN)
    return LATHE_INVALID("%s: reduction must be ReduceSum, ReduceProduct, ReduceMax or ReduceMin, got %s", op,
                         (int)reduction >= 0 && reduction < LATHE_OP_COUNT ? lathe_op_name(reduction) : "an unknown op");
  lathe_builder_t b = fn->builder;
  if (b->distribution != LATHE_DIST_SPMD)
    return LATHE_INVALID("%s: only in an SPMD program (lathe_builder_spmd first)", op);
  int replicas = b->n_replicas, total = 0;
  if (n_groups < 0 || (n_groups > 0 && (!groups || !group_sizes))) return LATHE_INVALID("%s: bad replica groups", op);
  bool *seen = calloc((size_t)replicas, sizeof(bool));
  if (!seen) return LATHE_OOM(op);
  lathe_status_t st = NULL;
  for (int g = 0; g < n_groups && !st; g++) {
    if (group_sizes[g] < 1) st = LATHE_INVALID("%s: replica group %d is empty", op, g);
    for (int k = 0; !st && k < group_sizes[g]; k++) {
      int r = groups[total + k];
      if (r < 0 || r >= replicas) st = LATHE_INVALID("%s: replica %d out of range [0, %d)", op, r, replicas);
      else if (seen[r]) st = LATHE_INVALID("%s: replica %d is in two groups (or twice in one)", op, r);
      else seen[r] = true;
    }
    if (!st) total += group_sizes[g];
  }
  for (int r = 0; !st && n_groups > 0 && r < replicas; r++)
    if (!seen[r]) st = LATHE_INVALID("%s: replica %d is in no group (groups must name every replica once)", op, r);
  free(seen);
  LATHE_RETURN_IF_ERROR(st);
  lathe_node *node;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_ALL_REDUCE, operands, n, &node));
  lathe_shape shapes[64], *sh = n <= 64 ? shapes : malloc(sizeof(lathe_shape) * (size_t)n);
  if (!sh) return LATHE_OOM(op);
  for (int i = 0; i < n && !st; i++) {
    lathe_dtype dt = node->in[i]->shape.dtype;
    bool ok = reduction == LATHE_OP_REDUCE_SUM || reduction == LATHE_OP_REDUCE_PRODUCT
                  ? dt != LATHE_DTYPE_BOOL
                  : !lathe_dtype_is_complex(dt) && dt != LATHE_DTYPE_BOOL;
    if (!ok) st = LATHE_INVALID("%s: %s of %s (operand %d)", op, lathe_op_name(reduction), lathe_dtype_name(dt), i);
    sh[i] = node->in[i]->shape;
  }
  lathe_attr_set_all_reduce_reduction(node, reduction);
  if (!st) st = lathe_attr_set_all_reduce_groups_int(node, groups, total);
  if (!st) st = lathe_attr_set_all_reduce_group_sizes_int(node, group_sizes, n_groups);
  if (!st) st = lathe_node_set_outputs(node, sh, n);
  if (sh != shapes) free(sh);
  LATHE_RETURN_IF_ERROR(st);
  return lathe_node_commit_multi(node, out_values);
}
