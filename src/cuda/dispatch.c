/* dispatch.c -- op kinds to the CUDA kernel families (the one list of kinds, src/graph/kinds.def). */
#include "cuda.h"

bool lathe_cuda_supports_op(lathe_op op, lathe_dtype dt) {
  if (!lathe_dtype_is_valid(dt)) return false;
  /* sub-byte integers compute widened to 8 bits, as on the CPU */
  if (!lathe_op_has(op, LATHE_OPF_PACKED)) dt = lathe_dtype_widened(dt);
  switch (lathe_op_kind_of(op)) {
#define LATHE_KIND(NAME, family) \
  LATHE_KIND_IF_FAMILY(family, case LATHE_KIND_##NAME: return lathe_cuda_supports_##family(op, dt);)
#include "../graph/kinds.def"
#undef LATHE_KIND
    default: return false;
  }
}

lathe_status_t lathe_cuda_run_kernel(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  switch (lathe_op_kind_of(n->op)) {
#define LATHE_KIND(NAME, family) \
  LATHE_KIND_IF_FAMILY(family, case LATHE_KIND_##NAME: return lathe_cuda_run_##family(ex, n, in, out);)
#include "../graph/kinds.def"
#undef LATHE_KIND
    default: return lathe_status_new(LATHE_STATUS_INTERNAL, "%s: no CUDA kernel family", lathe_op_name(n->op));
  }
}

void lathe_cuda_each_source(lathe_cuda_source_fn fn, void *ctx) {
#define LATHE_KIND(NAME, family) LATHE_KIND_IF_FAMILY(family, lathe_cuda_sources_##family(fn, ctx);)
#include "../graph/kinds.def"
#undef LATHE_KIND
}

void lathe_cuda_texts_of(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) {
  switch (lathe_op_kind_of(n->op)) {
#define LATHE_KIND(NAME, family) \
  LATHE_KIND_IF_FAMILY(family, case LATHE_KIND_##NAME: lathe_cuda_texts_##family(d, n, fn, ctx); break;)
#include "../graph/kinds.def"
#undef LATHE_KIND
    default: break;
  }
}
