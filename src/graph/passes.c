/* passes.c -- compile-time passes over one function: common-subexpression elimination and
 * dead-code removal, producing the execution schedule and each value's last use. */
#include "graph.h"

static bool same_attrs(const lathe_node *a, const lathe_node *b) {
  if (memcmp(a->a.i, b->a.i, sizeof a->a.i) != 0 || memcmp(a->a.f, b->a.f, sizeof a->a.f) != 0) return false;
  if (memcmp(a->a.fn, b->a.fn, sizeof a->a.fn) != 0) return false;
  for (int k = 0; k < LATHE_MAX_LISTS; k++) {
    if (a->a.list_len[k] != b->a.list_len[k]) return false;
    if (a->a.list_len[k] && memcmp(a->a.list[k], b->a.list[k], sizeof(int64_t) * (size_t)a->a.list_len[k]) != 0)
      return false;
  }
  if (a->a.data_size != b->a.data_size) return false;
  if (a->a.data_size && memcmp(a->a.data, b->a.data, a->a.data_size) != 0) return false;
  return true;
}

static bool cse_candidate(const lathe_node *n) { return lathe_op_has(n->op, LATHE_OPF_CSE); }

static uint64_t node_hash(const lathe_node *n, const int *remap) {
  uint64_t h = 1469598103934665603ull;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
  MIX(n->op);
  MIX(n->shape.dtype);
  for (int i = 0; i < n->shape.rank; i++) MIX(n->shape.dims[i]);
  for (int i = 0; i < n->n_in; i++) MIX(remap[n->in[i]->id]);
  for (int i = 0; i < LATHE_MAX_IATTRS; i++) MIX(n->a.i[i]);
  for (size_t i = 0; i < n->a.data_size && i < 64; i++) MIX(((const unsigned char *)n->a.data)[i]);
#undef MIX
  return h;
}

static bool same_node(const lathe_node *a, const lathe_node *b, const int *remap) {
  if (a->op != b->op || a->n_in != b->n_in || a->n_out != b->n_out || a->multi != b->multi) return false;
  /* names too: [a] and [b] of two dynamic axes are different shapes once bound */
  if (!lathe_same_shape(&a->shape, &b->shape)) return false;
  for (int i = 0; i < a->n_out && a->multi; i++)
    if (!lathe_same_shape(&a->out_shapes[i], &b->out_shapes[i])) return false;
  for (int i = 0; i < a->n_in; i++)
    if (remap[a->in[i]->id] != remap[b->in[i]->id]) return false;
  return same_attrs(a, b);
}

void lathe_schedule_free(lathe_schedule *s) {
  if (!s) return;
  free(s->order);
  free(s->remap);
  free(s->last_use);
  memset(s, 0, sizeof *s);
}

lathe_status_t lathe_schedule_build(lathe_function *fn, lathe_schedule *out) {
  if (!fn->returned) return LATHE_INVALID("Compile: function \"%s\" has no Return", fn->name);
  int n = fn->n_nodes;
  lathe_schedule s = {.fn = fn, .n_nodes = n};
  int cap = 16;
  while (cap < 2 * n) cap *= 2;
  int *table = malloc(sizeof(int) * (size_t)cap);
  bool *live = calloc((size_t)n + 1, sizeof(bool));
  s.order = malloc(sizeof(int) * ((size_t)n + 1));
  s.remap = malloc(sizeof(int) * ((size_t)n + 1));
  s.last_use = malloc(sizeof(int) * ((size_t)n + 1));
  if (!table || !live || !s.order || !s.remap || !s.last_use) {
    free(table);
    free(live);
    lathe_schedule_free(&s);
    return LATHE_OOM("Compile");
  }
  /* CSE: open-addressing table of canonical nodes, keyed by op, inputs and attributes. */
  for (int i = 0; i < cap; i++) table[i] = -1;
  for (int i = 0; i < n; i++) {
    lathe_node *nd = fn->nodes[i];
    s.remap[i] = i;
    if (!cse_candidate(nd)) continue;
    uint64_t h = node_hash(nd, s.remap);
    for (size_t k = h & (size_t)(cap - 1);; k = (k + 1) & (size_t)(cap - 1)) {
      if (table[k] < 0) {
        table[k] = i;
        break;
      }
      if (same_node(fn->nodes[table[k]], nd, s.remap)) {
        s.remap[i] = table[k];
        break;
      }
    }
  }
  /* TUPLE_ELEMENT of a CSE'd multi-result node points at the canonical node through remap. */
  /* DCE: everything reachable from the outputs, in creation order (a topological order). */
  for (int i = 0; i < fn->n_outputs; i++) live[s.remap[fn->outputs[i]->id]] = true;
  for (int i = n - 1; i >= 0; i--) {
    if (!live[i] || s.remap[i] != i) continue;
    lathe_node *nd = fn->nodes[i];
    for (int k = 0; k < nd->n_in; k++) live[s.remap[nd->in[k]->id]] = true;
  }
  /* Parameters always stay: executables take every declared input. */
  for (int i = 0; i < fn->n_params; i++) live[fn->params[i]->id] = true;
  s.n_order = 0;
  for (int i = 0; i < n; i++) {
    s.last_use[i] = -1;
    if (live[i] && s.remap[i] == i) s.order[s.n_order++] = i;
  }
  for (int p = 0; p < s.n_order; p++) {
    lathe_node *nd = fn->nodes[s.order[p]];
    for (int k = 0; k < nd->n_in; k++) s.last_use[s.remap[nd->in[k]->id]] = p;
  }
  for (int i = 0; i < fn->n_outputs; i++) s.last_use[s.remap[fn->outputs[i]->id]] = s.n_order;
  free(table);
  free(live);
  *out = s;
  return NULL;
}
