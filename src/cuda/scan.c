/* scan.c -- the SCAN family on the GPU: CumSum (Exclusive, Reverse), with lathe:cpu's semantics
 * (src/cpu/scan.c): integers wrap (sums in the unsigned type), halves accumulate in float and
 * round each result once. Floating sums are in a fixed tree order that depends only on the shape,
 * not lathe:cpu's index order: results agree with the CPU to rounding (docs/CUDA.md).
 *
 * The operand is [pre, len, post] around the axis; a line is one of its pre * post runs along
 * the axis, read in scan order (from the end when reversed). Two engines, both over lines cut
 * into chunks of scan positions:
 *   rows  (post == 1, contiguous lines): a group of 32 threads (lines up to 512) or of the whole
 *         256-thread block walks its chunk in rounds of one element per thread -- coalesced
 *         loads, a warp-shuffle scan, the warps' totals through shared memory, a running carry;
 *   cols  (post > 1): one thread per line, consecutive threads on consecutive columns (coalesced),
 *         summing its chunk in order.
 * When there are too few lines to fill the GPU, lines split into chunks and the scan takes three
 * passes (reduce, then scan, then scan again): each chunk's total (pass 1), an exclusive scan of
 * those totals per line by the rows engine in place (pass 2), each chunk scanned from its carry
 * (pass 3): every element is read twice and written once, with a parallelism set by the sizes
 * alone. Sizes are arguments: one module per dtype serves every shape. */
#include <pthread.h>
#include <stdio.h>

#include "cuda.h"
#include "kernels/zkernels.h"

/* The engines. An op is a struct with S (storage) and A (accumulator) types and load(s),
 * add(a, b), store(a); PART kernels read and write accumulators (pass 2's chunk totals). */
static const char scan_lib[] = LT_CUH_SCAN;

static const char *int_type(lathe_dtype dt, bool want_unsigned) {
  static const char *const s[] = {"int8_t", "int16_t", "int32_t", "int64_t"}, *const u[] = {"uint8_t", "uint16_t", "uint32_t", "uint64_t"};
  int k = lathe_dtype_bits(dt) == 8 ? 0 : lathe_dtype_bits(dt) == 16 ? 1 : lathe_dtype_bits(dt) == 32 ? 2 : 3;
  return want_unsigned ? u[k] : s[k];
}

/* The instantiation line of dt (empty when CumSum has none: Bool, complex; sub-byte integers
 * arrive widened). */
static void inst_line(lathe_dtype dt, char *buf, size_t cap) {
  buf[0] = 0;
  if (!lathe_dtype_is_valid(dt) || lathe_dtype_is_packed(dt)) return;
  switch (lathe_dtype_class_of(dt)) {
    case LATHE_CLASS_SINT:
    case LATHE_CLASS_UINT:
      snprintf(buf, cap, "LT_SCAN_INT(%s, %s)\n", int_type(dt, lathe_dtype_class_of(dt) == LATHE_CLASS_UINT),
               int_type(dt, true));
      break;
    case LATHE_CLASS_FLOAT: snprintf(buf, cap, "LT_SCAN_FLOAT(%s)\n", lathe_dtype_bits(dt) == 32 ? "float" : "double"); break;
    case LATHE_CLASS_HALF: snprintf(buf, cap, "LT_SCAN_HALF(%s)\n", dt == LATHE_DTYPE_FLOAT16 ? "f16" : "bf16"); break;
    default: break;
  }
}

/* One module per dtype, made once: only what a program uses is compiled. */
static char *sources[LATHE_DTYPE_LIMIT];
static pthread_once_t sources_once = PTHREAD_ONCE_INIT;

static void make_sources(void) {
  for (int d = 1; d < LATHE_DTYPE_LIMIT; d++) {
    char line[128];
    inst_line((lathe_dtype)d, line, sizeof line);
    if (!line[0]) continue;
    size_t n = sizeof scan_lib + strlen(line) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s", scan_lib, line);
    sources[d] = s;
  }
}

static const char *source_of(lathe_dtype dt) {
  pthread_once(&sources_once, make_sources);
  return (int)dt > 0 && dt < LATHE_DTYPE_LIMIT ? sources[dt] : NULL;
}

void lathe_cuda_sources_scan(lathe_cuda_source_fn fn, void *ctx) {
  for (int d = 1; d < LATHE_DTYPE_LIMIT; d++) {
    const char *s = source_of((lathe_dtype)d);
    char label[64];
    snprintf(label, sizeof label, "scan cumsum %s", lathe_dtype_name((lathe_dtype)d));
    if (s) fn(ctx, label, s);
  }
}

void lathe_cuda_texts_scan(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) {
  (void)d;
  const char *s = n->op == LATHE_OP_CUM_SUM && n->n_operands ? source_of(n->in[0]->shape.dtype) : NULL;
  if (s) fn(ctx, s);
}

bool lathe_cuda_supports_scan(lathe_op op, lathe_dtype dtype) { return op == LATHE_OP_CUM_SUM && source_of(dtype); }

/* ---- host side ---- */
typedef struct sgeom_h { /* lt_sgeom */
  int64_t lines, len, post, nch, ch;
  int excl, rev;
} sgeom_h;

enum { FILL_ROWS = 1024, FILL_COLS = 65536, ROW_CHUNK = 8192, COL_CHUNK_MIN = 64, MAX_CHUNKS = 4096 };

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static lathe_status_t launch(lathe_cuda_exec *ex, const char *src, const char *name, const void *in, void *out,
                             const void *carry, void *part, const sgeom_h *g, int gs, int mode) {
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), src, name, &f));
  lcuDeviceptr pi = (lcuDeviceptr)(uintptr_t)in, po = (lcuDeviceptr)(uintptr_t)out;
  lcuDeviceptr pc = (lcuDeviceptr)(uintptr_t)carry, pp = (lcuDeviceptr)(uintptr_t)part;
  sgeom_h gg = *g;
  void *args[] = {&pi, &po, &pc, &pp, &gg, &gs, &mode};
  int64_t work = g->lines * g->nch, per_block = strcmp(name, "lt_scan_cols") == 0 ? 256 : 256 / gs;
  int64_t blocks = cdiv(work, per_block);
  if (blocks < 1) blocks = 1;
  if (blocks > (1 << 20)) blocks = 1 << 20; /* the loops stride over the rest */
  return lathe_cuda_launch(ex, f, (unsigned)blocks, 256, 0, args);
}

static int group_for(int64_t len) { return len <= 512 ? 32 : 256; }

lathe_status_t lathe_cuda_run_scan(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  const lathe_shape *xs = &in[0]->shape;
  lathe_dtype dt = xs->dtype;
  const char *src = n->op == LATHE_OP_CUM_SUM ? source_of(dt) : NULL;
  if (!src) return LATHE_UNIMPL("%s: not implemented on lathe:cuda for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  int axis = (int)lathe_attr_cum_sum_axis(n);
  int64_t pre = lathe_dims_product(xs->dims, 0, axis), len = xs->dims[axis];
  int64_t post = lathe_dims_product(xs->dims, axis + 1, xs->rank);
  if (pre * len * post == 0) return NULL;
  sgeom_h g = {.lines = pre * post, .len = len, .post = post, .nch = 1, .ch = len,
               .excl = lathe_attr_cum_sum_exclusive(n) ? 1 : 0, .rev = lathe_attr_cum_sum_reverse(n) ? 1 : 0};
  bool rows = post == 1;
  /* chunks only when the lines alone leave the GPU idle; the rule reads the sizes alone */
  if (rows && g.lines < FILL_ROWS && len > 2 * ROW_CHUNK) {
    g.ch = ROW_CHUNK;
  } else if (!rows && g.lines < FILL_COLS) {
    int64_t want = cdiv(FILL_COLS, g.lines), most = cdiv(len, COL_CHUNK_MIN);
    int64_t nch = want < most ? want : most;
    if (nch > MAX_CHUNKS) nch = MAX_CHUNKS;
    g.ch = cdiv(len, nch < 1 ? 1 : nch);
  }
  g.nch = cdiv(len, g.ch);
  const char *engine = rows ? "lt_scan_rows" : "lt_scan_cols";
  int gs = group_for(g.ch);
  if (g.nch == 1) return launch(ex, src, engine, in[0]->data, out[0]->data, NULL, NULL, &g, gs, 0);
  /* three passes; the chunk totals, [lines][nch] accumulators */
  lathe_shape ps;
  memset(&ps, 0, sizeof ps);
  ps.dtype = LATHE_DTYPE_UINT8;
  ps.rank = 1;
  ps.dims[0] = (lathe_dtype_class_of(dt) == LATHE_CLASS_HALF ? 4 : lathe_dtype_bits(dt) / 8) * g.lines * g.nch;
  lathe_tensor *part;
  LATHE_RETURN_IF_ERROR(lathe_cuda_exec_tensor(ex, &ps, &part));
  lathe_tensor_release(part); /* ours; the execution keeps its own until the stream is done */
  LATHE_RETURN_IF_ERROR(launch(ex, src, engine, in[0]->data, NULL, NULL, part->data, &g, gs, 1));
  sgeom_h pg = {.lines = g.lines, .len = g.nch, .post = 1, .nch = 1, .ch = g.nch, .excl = 1, .rev = 0};
  LATHE_RETURN_IF_ERROR(launch(ex, src, "lt_scan_rowsp", part->data, part->data, NULL, NULL, &pg, group_for(g.nch), 0));
  return launch(ex, src, engine, in[0]->data, out[0]->data, part->data, NULL, &g, gs, 0);
}
