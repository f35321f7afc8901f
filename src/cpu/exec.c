/* exec.c -- lathe:cpu's side of the executor (src/exec): plans, memory, copies and launches
 * for the walk, and sub-byte integers widened to 8 bits and packed again around kernels. */
#include <stdio.h>

#include "cpu.h"
#include "exec.h"
#include "kernels.h"

/* ---- plans ---- */
struct lathe_plan {
  lathe_xplan x;
};

static lathe_status_t check_supported(const lathe_node *n) {
  lathe_op_kind k = lathe_op_kind_of(n->op);
  if (k == LATHE_KIND_INTERNAL || n->op == LATHE_OP_PARAMETER || n->op == LATHE_OP_CONSTANT) return NULL;
  lathe_dtype dt = n->n_operands ? n->in[0]->shape.dtype : (n->multi ? n->out_shapes[0].dtype : n->shape.dtype);
  if (!lathe_cpu_supports_op(n->op, dt))
    return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  return NULL;
}

void lathe_cpu_plan_free(void *ctx, lathe_plan *p) {
  (void)ctx;
  if (!p) return;
  lathe_xplan_release(&p->x);
  free(p);
}

extern const lathe_exec_device lathe_cpu_exec_device;

lathe_status_t lathe_cpu_compile(void *ctx, const lathe_program *prog, lathe_plan **out) {
  lathe_plan *p = calloc(1, sizeof *p);
  if (!p) return LATHE_OOM("Compile");
  lathe_status_t st = lathe_xplan_init(&p->x, &lathe_cpu_exec_device, ctx, 1, prog, check_supported);
  if (st) {
    lathe_cpu_plan_free(NULL, p);
    return st;
  }
  *out = p;
  return NULL;
}

/* Host memory is one domain for every ordinal. */
static void view_init(void *dev, int domain, lathe_tensor *v) {
  (void)dev, (void)domain;
  v->dev = &lathe_cpu_device;
}

static lathe_status_t const_new(void *dev, int domain, const lathe_pslot *sl, lathe_tensor **out) {
  (void)dev, (void)domain;
  LATHE_RETURN_IF_ERROR(lathe_cpu_tensor_new(&sl->shape, out));
  lathe_bytes v = lathe_attr_constant_value(sl->node);
  if (v.size) memcpy((*out)->data, v.data, v.size);
  return NULL;
}

/* ---- execution ---- */
static lathe_cpu_exec *cpu_exec(lathe_exec *x) { return (lathe_cpu_exec *)x; }

lathe_pool *lathe_cpu_exec_pool(lathe_cpu_exec *ex) { return ex->cpu->pool; }

const lathe_cpu_kernels *lathe_cpu_exec_kernels(lathe_cpu_exec *ex) {
  return ex ? ex->cpu->kernels : lathe_cpu_kernels_of(LATHE_CPU_ISA_BASELINE);
}

lathe_collective *lathe_cpu_exec_group(lathe_cpu_exec *ex, int *out_replica) {
  *out_replica = ex->x.replica;
  return ex->x.group;
}

lathe_status_t lathe_cpu_exec_call(lathe_cpu_exec *ex, const lathe_function *fn, lathe_tensor *const *inputs,
                                   int n_inputs, lathe_tensor **outputs) {
  return lathe_exec_call(&ex->x, fn, inputs, n_inputs, outputs);
}

static lathe_status_t tensor_new(lathe_exec *x, const lathe_shape *shape, lathe_tensor **out) {
  (void)x;
  return lathe_cpu_tensor_new(shape, out);
}

static lathe_status_t shell_fill(lathe_exec *x, lathe_tensor *shell) {
  (void)x;
  shell->data = lathe_cpu_mem_alloc(shell->nbytes);
  if (!shell->data)
    return lathe_status_new(LATHE_STATUS_RESOURCE_EXHAUSTED, "Execute: out of memory allocating %zu bytes", shell->nbytes);
  if (lathe_dtype_is_packed(shell->shape.dtype) && shell->nbytes) ((uint8_t *)shell->data)[shell->nbytes - 1] = 0;
  return NULL;
}

static lathe_status_t copy(lathe_exec *x, const lathe_tensor *src, lathe_tensor *dst) {
  (void)x;
  memcpy(dst->data, src->data, dst->nbytes);
  return NULL;
}

static void drop(lathe_exec *x, lathe_tensor *t) {
  (void)x;
  lathe_tensor_release(t);
}

static lathe_status_t read_bytes(lathe_exec *x, const lathe_tensor *t, void *dst, size_t nbytes) {
  (void)x;
  memcpy(dst, t->data, nbytes);
  return NULL;
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

static lathe_status_t widen(lathe_exec *x, lathe_tensor *t, lathe_tensor **out) {
  lathe_shape s = t->shape;
  s.dtype = lathe_dtype_widened(s.dtype);
  LATHE_RETURN_IF_ERROR(lathe_cpu_tensor_new(&s, out));
  pack_job j = pack_job_of(t, *out);
  lathe_parallel_for(cpu_exec(x)->cpu->pool, (int64_t)t->nbytes, 1 << 14, unpack_bytes, &j);
  return NULL;
}

static lathe_status_t narrow(lathe_exec *x, const lathe_tensor *wide, lathe_tensor *t) {
  pack_job j = pack_job_of(t, wide);
  lathe_parallel_for(cpu_exec(x)->cpu->pool, (int64_t)t->nbytes, 1 << 14, pack_bytes, &j);
  return NULL;
}

static lathe_status_t launch(lathe_exec *x, int fi, int pos, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  (void)fi, (void)pos;
  return lathe_cpu_run_kernel(cpu_exec(x), n, in, out);
}

static lathe_status_t launch_loop(lathe_exec *x, int pos, int region, bool in_place) {
  return lathe_cpu_run_loop(cpu_exec(x), pos, &lathe_exec_pfunc(x)->regions[region], in_place);
}

/* Waits for inputs still being computed (another ordinal's queue). */
static lathe_status_t begin(lathe_exec *x, const lathe_launch *l) {
  (void)x;
  lathe_status_t st = NULL;
  for (int i = 0; i < l->n_inputs && !st; i++) st = lathe_tensor_wait(l->inputs[i]);
  return st;
}

const lathe_exec_device lathe_cpu_exec_device = {
    .where = "",
    .takes_inputs = true,
    .one_memory = true,
    .device = &lathe_cpu_device,
    .view_init = view_init,
    .const_new = const_new,
    .tensor_new = tensor_new,
    .scratch_new = tensor_new,
    .shell_fill = shell_fill,
    .copy = copy,
    .drop = drop,
    .widen = widen,
    .narrow = narrow,
    .read = read_bytes,
    .launch = launch,
    .launch_loop = launch_loop,
    .begin = begin,
};

lathe_status_t lathe_cpu_run_launch(lathe_cpu *cpu, lathe_plan *p, const lathe_launch *l) {
  lathe_cpu_exec ex = {.x = {.plan = &p->x, .replica = l->replica, .group = l->group}, .cpu = cpu};
  return lathe_exec_program(&ex.x, l);
}
