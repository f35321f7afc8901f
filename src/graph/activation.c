/* activation.c -- the activations of ew.def (LATHE_ACT rows) as facts for the builders and as
 * CUDA source text: the rows stringified, so a generated kernel computes what the CPU's
 * instantiation of the same rows (src/cpu/activation.c) computes. */
#include <assert.h>

#include "ew.h"
#include "graph.h"

#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR)
#define LATHE_ACT(ENUM, NUM, FORM, FWD, VJP_X, VJP_Y) \
  static_assert(NUM == LATHE_ACTIVATION_##ENUM && NUM < LATHE_ACT_COUNT, "ew.def: LATHE_ACT(" #ENUM ") number");
#include "ew.def"
#undef LATHE_ACT

static const struct {
  const char *name;
  lathe_act_form form;
} acts[LATHE_ACT_COUNT] = {
/* a number given twice is an initializer overridden: -Werror=override-init */
#define LATHE_ACT(ENUM, NUM, FORM, FWD, VJP_X, VJP_Y) [NUM] = {#ENUM, LATHE_ACT_FORM_##FORM},
#include "ew.def"
#undef LATHE_ACT
};

bool lathe_act_valid(int act) { return act >= 0 && act < LATHE_ACT_COUNT && acts[act].name; }
lathe_act_form lathe_act_form_of(lathe_activation act) { return lathe_act_valid((int)act) ? acts[act].form : LATHE_ACT_FORM_X; }
const char *lathe_act_name(lathe_activation act) { return lathe_act_valid((int)act) ? acts[act].name : "?"; }

lathe_status_t lathe_act_check(const char *op, lathe_activation act, bool dense) {
  if (!lathe_act_valid((int)act)) return LATHE_INVALID("%s: unknown activation %d", op, (int)act);
  if (dense && acts[act].form == LATHE_ACT_FORM_GLU)
    return LATHE_INVALID("%s: activation %s (%d) changes the output's last axis: use FusedDense without activation, "
                         "then FusedActivation",
                         op, acts[act].name, (int)act);
  return NULL;
}

/* Three device templates over T (float or double), switching on the activation's number. */
#define ACT_CASE(NUM, EXPR) "    case " #NUM ": return (T)(" #EXPR ");\n"
static const char cuda_src[] =
    "/* activations: src/graph/ew.def (LATHE_ACT) */\n"
    "template <typename T> LT_DEV T lt_act(T x, int act) {\n  switch (act) {\n"
#define LATHE_ACT(ENUM, NUM, FORM, FWD, VJP_X, VJP_Y) ACT_CASE(NUM, FWD)
#include "ew.def"
#undef LATHE_ACT
    "    default: return x;\n  }\n}\n"
    "template <typename T> LT_DEV T lt_act_vjp_x(T x, T g, int act) {\n  switch (act) {\n"
#define LATHE_ACT(ENUM, NUM, FORM, FWD, VJP_X, VJP_Y) ACT_CASE(NUM, VJP_X)
#include "ew.def"
#undef LATHE_ACT
    "    default: return g;\n  }\n}\n"
    "template <typename T> LT_DEV T lt_act_vjp_y(T y, T g, int act) {\n  switch (act) {\n"
#define LATHE_ACT(ENUM, NUM, FORM, FWD, VJP_X, VJP_Y) ACT_CASE(NUM, VJP_Y)
#include "ew.def"
#undef LATHE_ACT
    "    default: return g;\n  }\n}\n";
#undef LATHE_EW

const char *lathe_act_source_cuda(void) { return cuda_src; }
