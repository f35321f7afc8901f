/* distribution.c -- programs over several devices: the device assignment, SPMD replicas and
 * their collectives (AllReduce, AllGather, ReduceScatter, AllToAll, CollectivePermute), AutoSharding meshes and shardings, and shard geometry. */
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
      if (j < 0) {
        char known[256];
        size_t at = 0;
        known[0] = 0;
        for (int q = 0; q < mesh->rank && at < sizeof known; q++)
          at += (size_t)snprintf(known + at, sizeof known - at, "%s\"%s\"", q ? ", " : "", mesh->axis_names[q]);
        return LATHE_INVALID("%s: mesh \"%s\" has no axis \"%s\" (sharding of axis %d; the mesh's axes: %s)", op,
                             mesh->name, s->axes[a][k] ? s->axes[a][k] : "(null)", a, known);
      }
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
  char op[96]; /* errors name the parameter */
  snprintf(op, sizeof op, "Parameter \"%.60s\"", name ? name : "");
  if (shape) LATHE_RETURN_IF_ERROR(resolve_sharding(fn->builder, op, sharding, shape, &def));
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
      char op[32];
      snprintf(op, sizeof op, "Return (output %d)", i);
      LATHE_RETURN_IF_ERROR(resolve_sharding(fn->builder, op, shardings[i], &outputs[i]->shape, &defs[i]));
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

/* ---- collectives ---- */

/* Checks replica groups against the program's replicas (each replica in exactly one group, none
 * out of range; equal: every group of one size) and gives the group size (n_groups 0: every
 * replica) and the count of listed replicas. */
static lathe_status_t check_groups(const char *op, lathe_function_t fn, const int *groups, const int *group_sizes,
                                   int n_groups, bool equal, int *out_size, int *out_total) {
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
    else if (equal && group_sizes[g] != group_sizes[0])
      st = LATHE_INVALID("%s: replica group %d has %d replicas, group 0 has %d: groups must have one size", op, g,
                         group_sizes[g], group_sizes[0]);
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
  *out_size = n_groups > 0 ? group_sizes[0] : replicas;
  *out_total = total;
  return st;
}

static lathe_status_t check_reduction(const char *op, lathe_op reduction) {
  if (reduction == LATHE_OP_REDUCE_SUM || reduction == LATHE_OP_REDUCE_PRODUCT || reduction == LATHE_OP_REDUCE_MAX ||
      reduction == LATHE_OP_REDUCE_MIN)
    return NULL;
  return LATHE_INVALID("%s: reduction must be ReduceSum, ReduceProduct, ReduceMax or ReduceMin, got %s", op,
                       (int)reduction >= 0 && reduction < LATHE_OP_COUNT ? lathe_op_name(reduction) : "an unknown op");
}

static lathe_status_t check_reduced_dtype(const char *op, lathe_op reduction, lathe_dtype dt, int operand) {
  bool ok = reduction == LATHE_OP_REDUCE_SUM || reduction == LATHE_OP_REDUCE_PRODUCT
                ? dt != LATHE_DTYPE_BOOL
                : !lathe_dtype_is_complex(dt) && dt != LATHE_DTYPE_BOOL;
  return ok ? NULL : LATHE_INVALID("%s: %s of %s (operand %d)", op, lathe_op_name(reduction), lathe_dtype_name(dt), operand);
}

int lathe_collective_processes(void) {
  int p, n;
  lathe_job_info(&p, &n);
  return n;
}

bool lathe_collective_in_process(const lathe_node *n) {
  return n->op == LATHE_OP_COLLECTIVE_PERMUTE || lathe_attr_collective_in_process(n);
}

lathe_status_t lathe_builder_collectives_in_process(lathe_builder_t b, bool in_process) {
  if (!b) return LATHE_INVALID("CollectivesInProcess: builder is NULL");
  b->collectives_in_process = in_process;
  return NULL;
}

int lathe_collective_group(const lathe_node *n, int r, int n_replicas, int *members) {
  lathe_ilist groups = lathe_attr_collective_groups(n), sizes = lathe_attr_collective_group_sizes(n);
  if (sizes.n == 0) {
    for (int k = 0; k < n_replicas; k++) members[k] = k;
    return n_replicas;
  }
  for (int g = 0, at = 0; g < sizes.n; at += (int)sizes.v[g++])
    for (int k = 0; k < sizes.v[g]; k++)
      if (groups.v[at + k] == r) {
        for (int q = 0; q < sizes.v[g]; q++) members[q] = (int)groups.v[at + q];
        return (int)sizes.v[g];
      }
  members[0] = r;
  return 1;
}

lathe_status_t lathe_all_reduce(lathe_function_t fn, const lathe_value_t *operands, int n, lathe_op reduction,
                                const int *groups, const int *group_sizes, int n_groups, lathe_value_t *out_values) {
  const char *op = "AllReduce";
  LATHE_RETURN_IF_ERROR(lathe_check_fn(op, fn));
  if (n < 1 || !operands) return LATHE_INVALID("%s: needs at least one operand", op);
  if (!out_values) return LATHE_INVALID("%s: out_values is NULL", op);
  LATHE_RETURN_IF_ERROR(check_reduction(op, reduction));
  int m, total;
  LATHE_RETURN_IF_ERROR(check_groups(op, fn, groups, group_sizes, n_groups, false, &m, &total));
  lathe_node *node;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_ALL_REDUCE, operands, n, &node));
  lathe_shape shapes[64], *sh = n <= 64 ? shapes : malloc(sizeof(lathe_shape) * (size_t)n);
  if (!sh) return LATHE_OOM(op);
  lathe_status_t st = NULL;
  for (int i = 0; i < n && !st; i++) {
    st = check_reduced_dtype(op, reduction, node->in[i]->shape.dtype, i);
    sh[i] = node->in[i]->shape;
  }
  lathe_attr_set_collective_reduction(node, reduction);
  lathe_attr_set_collective_in_process(node, fn->builder->collectives_in_process);
  if (!st) st = lathe_attr_set_collective_groups_int(node, groups, total);
  if (!st) st = lathe_attr_set_collective_group_sizes_int(node, group_sizes, n_groups);
  if (!st) st = lathe_node_set_outputs(node, sh, n);
  if (sh != shapes) free(sh);
  LATHE_RETURN_IF_ERROR(st);
  return lathe_node_commit_multi(node, out_values);
}

/* The common part of AllGather, ReduceScatter and AllToAll: a node of op on operand with its
 * groups; *G is the group size counted over every process of a job (the processes are the
 * outermost mesh axis, as for AllReduce), unless the builder keeps its collectives in-process. */
static lathe_status_t group_node(const char *op, lathe_op kind, lathe_function_t fn, lathe_value_t operand,
                                 const int *groups, const int *group_sizes, int n_groups, lathe_node **node, int64_t *G) {
  LATHE_RETURN_IF_ERROR(lathe_check_fn(op, fn));
  int m, total;
  LATHE_RETURN_IF_ERROR(check_groups(op, fn, groups, group_sizes, n_groups, true, &m, &total));
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, kind, &operand, 1, node));
  const lathe_shape *s = &(*node)->in[0]->shape;
  if (lathe_dtype_is_packed(s->dtype)) return LATHE_UNIMPL("%s: packed %s operands", op, lathe_dtype_name(s->dtype));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_collective_groups_int(*node, groups, total));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_collective_group_sizes_int(*node, group_sizes, n_groups));
  bool in_process = fn->builder->collectives_in_process;
  lathe_attr_set_collective_in_process(*node, in_process);
  *G = (int64_t)m * (in_process ? 1 : lathe_collective_processes());
  (*node)->shape = *s;
  return NULL;
}

/* Axis `axis` of s, which the op resizes: static, and (divide) a multiple of G. */
static lathe_status_t check_sized_axis(const char *op, const char *what, const lathe_shape *s, int axis, int64_t G,
                                       bool divide) {
  LATHE_RETURN_IF_ERROR(lathe_check_axis(op, what, axis, s->rank));
  if (s->dims[axis] < 0) return LATHE_UNIMPL("%s: %s %d has a dynamic size (\"%s\")", op, what, axis, s->axis_names[axis] ? s->axis_names[axis] : "?");
  if (divide && s->dims[axis] % G)
    return LATHE_INVALID("%s: %s %d has size %lld, which does not divide into %lld equal parts (the group size)", op, what,
                         axis, (long long)s->dims[axis], (long long)G);
  return NULL;
}

static void resize_axis(lathe_shape *s, int axis, int64_t size) {
  s->dims[axis] = size;
  s->axis_names[axis] = NULL; /* a new size: not the operand's named axis any more */
}

lathe_status_t lathe_all_gather(lathe_function_t fn, lathe_value_t operand, int axis, const int *groups,
                                const int *group_sizes, int n_groups, lathe_value_t *out) {
  const char *op = "AllGather";
  lathe_node *n;
  int64_t G;
  LATHE_RETURN_IF_ERROR(group_node(op, LATHE_OP_ALL_GATHER, fn, operand, groups, group_sizes, n_groups, &n, &G));
  LATHE_RETURN_IF_ERROR(check_sized_axis(op, "axis", &n->shape, axis, G, false));
  resize_axis(&n->shape, axis, n->shape.dims[axis] * G);
  LATHE_RETURN_IF_ERROR(lathe_check_shape_size(op, "result shape", &n->shape));
  lathe_attr_set_collective_axis(n, axis);
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_reduce_scatter(lathe_function_t fn, lathe_value_t operand, int axis, lathe_op reduction,
                                    const int *groups, const int *group_sizes, int n_groups, lathe_value_t *out) {
  const char *op = "ReduceScatter";
  LATHE_RETURN_IF_ERROR(check_reduction(op, reduction));
  lathe_node *n;
  int64_t G;
  LATHE_RETURN_IF_ERROR(group_node(op, LATHE_OP_REDUCE_SCATTER, fn, operand, groups, group_sizes, n_groups, &n, &G));
  LATHE_RETURN_IF_ERROR(check_reduced_dtype(op, reduction, n->shape.dtype, 0));
  LATHE_RETURN_IF_ERROR(check_sized_axis(op, "axis", &n->shape, axis, G, true));
  resize_axis(&n->shape, axis, n->shape.dims[axis] / G);
  lathe_attr_set_collective_reduction(n, reduction);
  lathe_attr_set_collective_axis(n, axis);
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_all_to_all(lathe_function_t fn, lathe_value_t operand, int split_axis, int concat_axis,
                                const int *groups, const int *group_sizes, int n_groups, lathe_value_t *out) {
  const char *op = "AllToAll";
  lathe_node *n;
  int64_t G;
  LATHE_RETURN_IF_ERROR(group_node(op, LATHE_OP_ALL_TO_ALL, fn, operand, groups, group_sizes, n_groups, &n, &G));
  LATHE_RETURN_IF_ERROR(check_sized_axis(op, "split axis", &n->shape, split_axis, G, true));
  LATHE_RETURN_IF_ERROR(check_sized_axis(op, "concat axis", &n->shape, concat_axis, G, false));
  resize_axis(&n->shape, split_axis, n->shape.dims[split_axis] / G);
  resize_axis(&n->shape, concat_axis, n->shape.dims[concat_axis] * G);
  lathe_attr_set_collective_axis(n, split_axis);
  lathe_attr_set_collective_concat_axis(n, concat_axis);
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_collective_permute(lathe_function_t fn, lathe_value_t operand, const int *pairs, int n_pairs,
                                        lathe_value_t *out) {
  const char *op = "CollectivePermute";
  LATHE_RETURN_IF_ERROR(lathe_check_fn(op, fn));
  lathe_builder_t b = fn->builder;
  if (b->distribution != LATHE_DIST_SPMD)
    return LATHE_INVALID("%s: only in an SPMD program (lathe_builder_spmd first)", op);
  if (n_pairs < 0 || (n_pairs > 0 && !pairs)) return LATHE_INVALID("%s: bad source-target pairs", op);
  int replicas = b->n_replicas;
  int8_t *used = calloc((size_t)replicas, 1); /* bit 0: a source, bit 1: a target */
  if (!used) return LATHE_OOM(op);
  lathe_status_t st = NULL;
  for (int i = 0; i < n_pairs && !st; i++)
    for (int k = 0; k < 2 && !st; k++) {
      int r = pairs[2 * i + k];
      if (r < 0 || r >= replicas)
        st = LATHE_INVALID("%s: pair %d names %s replica %d, out of range [0, %d)", op, i, k ? "target" : "source", r, replicas);
      else if (used[r] & (1 << k))
        st = LATHE_INVALID("%s: replica %d is the %s of two pairs (pair %d is the second)", op, r, k ? "target" : "source", i);
      else used[r] |= (int8_t)(1 << k);
    }
  free(used);
  LATHE_RETURN_IF_ERROR(st);
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_COLLECTIVE_PERMUTE, &operand, 1, &n));
  n->shape = n->in[0]->shape;
  if (lathe_dtype_is_packed(n->shape.dtype)) return LATHE_UNIMPL("%s: packed %s operands", op, lathe_dtype_name(n->shape.dtype));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_collective_pairs_int(n, pairs, 2 * n_pairs));
  return lathe_node_commit(n, out);
}
