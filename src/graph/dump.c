/* dump.c -- human-readable dumps of a builder as built and of its compiled program (program.h):
 * text with one line per node / slot / step, and Graphviz DOT (fusion regions as clusters).
 * Written for reading, not parsing back: the format may change. */
#include "program.h"

static const char *result_shape(const lathe_node *n, int k, char *buf) {
  const lathe_shape *s = n->n_out > 1 || n->multi ? &n->out_shapes[k] : &n->shape;
  return lathe_shape_str(s, buf, LATHE_SHAPE_STR_MAX);
}

static void node_line(const lathe_node *n, FILE *f) {
  char sb[LATHE_SHAPE_STR_MAX];
  fprintf(f, "  %%%d = %s", n->id, lathe_op_name(n->op));
  if (n->op == LATHE_OP_PARAMETER && n->name) fprintf(f, " \"%s\"", n->name);
  fputc('(', f);
  for (int i = 0; i < n->n_in; i++)
    fprintf(f, "%s%s%%%d", i ? ", " : "", i >= n->n_operands ? "captured " : "", n->in[i]->id);
  fputs(") ", f);
  if (n->n_out > 1 || n->multi) {
    fputc('(', f);
    for (int k = 0; k < n->n_out; k++) fprintf(f, "%s%s", k ? ", " : "", result_shape(n, k, sb));
    fputc(')', f);
  } else {
    fputs(lathe_shape_str(&n->shape, sb, sizeof sb), f);
  }
  fputc('\n', f);
}

void lathe_dump_builder_text(const struct lathe_builder *b, FILE *f) {
  fprintf(f, "# \"%s\" as built: %d function(s)\n", b->name ? b->name : "", b->n_fns);
  if (b->partitioned)
    fprintf(f, "# partitioned from AutoSharding over %d devices: %d collective(s) inserted, %d op(s) run whole "
               "on every device (fallbacks%s%s)\n", b->n_replicas, b->partition_collectives, b->partition_fallbacks,
            b->partition_fallbacks ? ": " : "", b->partition_fallbacks ? b->partition_fallback_ops : "");
  for (int i = 0; i < b->n_fns; i++) {
    const lathe_function *fn = b->fns[i];
    fprintf(f, "\nfunction \"%s\"", fn->name);
    if (fn->parent) fprintf(f, " (closure of \"%s\")", fn->parent->name);
    fprintf(f, ": %d node(s)\n", fn->n_nodes);
    for (int k = 0; k < fn->n_nodes; k++) node_line(fn->nodes[k], f);
    fputs("  return", f);
    for (int k = 0; k < fn->n_outputs; k++) fprintf(f, "%s %%%d", k ? "," : "", fn->outputs[k]->id);
    fputc('\n', f);
  }
}

void lathe_dump_builder_dot(const struct lathe_builder *b, FILE *f) {
  char sb[LATHE_SHAPE_STR_MAX];
  fprintf(f, "digraph \"%s\" {\n  node [shape=box, fontname=monospace];\n", b->name ? b->name : "graph");
  for (int i = 0; i < b->n_fns; i++) {
    const lathe_function *fn = b->fns[i];
    fprintf(f, "  subgraph cluster_f%d {\n    label=\"%s\";\n", i, fn->name);
    for (int k = 0; k < fn->n_nodes; k++) {
      const lathe_node *n = fn->nodes[k];
      fprintf(f, "    f%d_n%d [label=\"%%%d %s\\n%s\"%s];\n", i, n->id, n->id, lathe_op_name(n->op),
              n->n_out > 1 || n->multi ? "(tuple)" : lathe_shape_str(&n->shape, sb, sizeof sb),
              n->op == LATHE_OP_PARAMETER ? ", shape=ellipse" : "");
      for (int j = 0; j < n->n_in; j++)
        if (n->in[j]->fn == fn) fprintf(f, "    f%d_n%d -> f%d_n%d;\n", i, n->in[j]->id, i, n->id);
    }
    fputs("  }\n", f);
  }
  fputs("}\n", f);
}

static const char *region_kind(int kind) {
  return kind == LATHE_PREGION_LOOP ? "LOOP" : kind == LATHE_PREGION_REDUCE ? "REDUCE" : kind == LATHE_PREGION_ROWS ? "ROWS" : "?";
}

/* The members of region r of pf (a REDUCE region: prologue, reduction, epilogue) as "A, B". */
static void region_ops(const lathe_pfunc *pf, int r, FILE *f) {
  const lathe_pregion *g = &pf->regions[r];
  if (g->kind == LATHE_PREGION_REDUCE) {
    if (g->prologue >= 0) region_ops(pf, g->prologue, f), fputs(", ", f);
    fputs(lathe_op_name(g->reduce->op), f);
    if (g->epilogue >= 0) fputs(", ", f), region_ops(pf, g->epilogue, f);
    return;
  }
  for (int m = 0; m < g->n_members; m++) fprintf(f, "%s%s", m ? ", " : "", lathe_op_name(g->members[m].node->op));
}

static const char *slot_kind(int kind) {
  return kind == LATHE_PSLOT_PARAM ? "param" : kind == LATHE_PSLOT_CONST ? "const" : "value";
}

void lathe_dump_program_text(const lathe_program *p, FILE *f) {
  char sb[LATHE_SHAPE_STR_MAX];
  fprintf(f, "# \"%s\" after lathe's passes: %d function(s); fuse=%d plan_memory=%d alignment=%lld\n",
          p->name ? p->name : "", p->n_fns, p->options.fuse, p->options.plan_memory,
          (long long)p->options.alignment);
  for (int i = 0; i < p->n_fns; i++) {
    const lathe_pfunc *pf = &p->fns[i];
    fprintf(f, "\nfunction \"%s\": %d step(s), %d slot(s), %d region(s), arena %lld bytes%s\n", pf->fn->name,
            pf->n_steps, pf->n_slots, pf->n_regions, (long long)pf->arena_bytes, pf->dynamic ? " (dynamic: no plan)" : "");
    fputs("steps:\n", f);
    for (int s = 0; s < pf->n_steps; s++) {
      const lathe_pstep *sp = &pf->steps[s];
      fprintf(f, "  %3d: ", s);
      if (sp->region >= 0) {
        fprintf(f, "fused %s region %d [", region_kind(pf->regions[sp->region].kind), sp->region);
        region_ops(pf, sp->region, f);
        fputs("]", f);
      } else {
        fprintf(f, "%s (node %%%d)", lathe_op_name(sp->node->op), sp->node->id);
      }
      fputs(" (", f);
      for (int k = 0; k < sp->n_in; k++) fprintf(f, "%ss%d", k ? ", " : "", sp->in[k]);
      fputs(") ->", f);
      for (int k = 0; k < sp->n_out; k++) fprintf(f, "%s s%d", k ? "," : "", sp->out[k]);
      if (sp->n_dead) {
        fputs("; frees", f);
        for (int k = 0; k < sp->n_dead; k++) fprintf(f, " s%d", sp->dead[k]);
      }
      fputc('\n', f);
    }
    fputs("slots (memory plan: arena offset and size; \"-\" is not planned: own memory or an output):\n", f);
    for (int k = 0; k < pf->n_slots; k++) {
      const lathe_pslot *sl = &pf->slots[k];
      fprintf(f, "  s%-3d %-5s %-24s", k, slot_kind(sl->kind), lathe_shape_str(&sl->shape, sb, sizeof sb));
      if (sl->offset >= 0) fprintf(f, " arena [%lld, +%lld)", (long long)sl->offset, (long long)sl->nbytes);
      else fprintf(f, " -          %lld bytes", (long long)sl->nbytes);
      fprintf(f, "  def %d, last use %d", sl->def, sl->last_use);
      if (sl->kind == LATHE_PSLOT_VALUE) fprintf(f, "  (%s %%%d)", lathe_op_name(sl->node->op), sl->node->id);
      if (sl->kind == LATHE_PSLOT_PARAM && sl->node->name) fprintf(f, "  \"%s\"", sl->node->name);
      fputc('\n', f);
    }
    fputs("returns:", f);
    for (int k = 0; k < pf->n_outputs; k++) fprintf(f, " s%d", pf->outputs[k]);
    fputc('\n', f);
  }
}

/* Steps are nodes (a fused step lists its ops), slots are edges labelled with their plan. */
void lathe_dump_program_dot(const lathe_program *p, FILE *f) {
  char sb[LATHE_SHAPE_STR_MAX];
  fprintf(f, "digraph \"%s\" {\n  node [shape=box, fontname=monospace];\n",
          p->name && *p->name ? p->name : "program");
  for (int i = 0; i < p->n_fns; i++) {
    const lathe_pfunc *pf = &p->fns[i];
    fprintf(f, "  subgraph cluster_f%d {\n    label=\"%s (arena %lld bytes)\";\n", i, pf->fn->name, (long long)pf->arena_bytes);
    for (int k = 0; k < pf->n_slots; k++)
      if (pf->slots[k].kind != LATHE_PSLOT_VALUE)
        fprintf(f, "    f%d_s%d [shape=ellipse, label=\"%s s%d\\n%s\"];\n", i, k, slot_kind(pf->slots[k].kind), k,
                lathe_shape_str(&pf->slots[k].shape, sb, sizeof sb));
    for (int s = 0; s < pf->n_steps; s++) {
      const lathe_pstep *sp = &pf->steps[s];
      if (sp->region >= 0) {
        fprintf(f, "    f%d_p%d [style=filled, fillcolor=lightblue, label=\"%d: fused %s\\n", i, s, s,
                region_kind(pf->regions[sp->region].kind));
        region_ops(pf, sp->region, f);
        fputs("\"];\n", f);
      } else {
        fprintf(f, "    f%d_p%d [label=\"%d: %s\"];\n", i, s, s, lathe_op_name(sp->node->op));
      }
      for (int k = 0; k < sp->n_in; k++) {
        const lathe_pslot *sl = &pf->slots[sp->in[k]];
        char from[32];
        if (sl->def >= 0) snprintf(from, sizeof from, "f%d_p%d", i, sl->def);
        else snprintf(from, sizeof from, "f%d_s%d", i, sp->in[k]);
        fprintf(f, "    %s -> f%d_p%d [label=\"s%d %s", from, i, s, sp->in[k], lathe_shape_str(&sl->shape, sb, sizeof sb));
        if (sl->offset >= 0) fprintf(f, "\\n@%lld+%lld", (long long)sl->offset, (long long)sl->nbytes);
        fputs("\"];\n", f);
      }
    }
    fprintf(f, "    f%d_ret [shape=ellipse, label=\"return\"];\n", i);
    for (int k = 0; k < pf->n_outputs; k++) {
      const lathe_pslot *sl = &pf->slots[pf->outputs[k]];
      if (sl->def >= 0) fprintf(f, "    f%d_p%d -> f%d_ret [label=\"s%d\"];\n", i, sl->def, i, pf->outputs[k]);
      else fprintf(f, "    f%d_s%d -> f%d_ret;\n", i, pf->outputs[k], i);
    }
    fputs("  }\n", f);
  }
  fputs("}\n", f);
}
