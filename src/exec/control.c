/* control.c -- Call, While and If for every device. Control flow runs on the host: a predicate
 * is read through the device (a GPU waits for the work that computes it) only where the host
 * must decide (While's condition, If's branch); the chosen sub-function's steps run in the same
 * execution, on the same stream. */
#include "exec.h"

bool lathe_exec_is_control(lathe_op op) { return op == LATHE_OP_CALL || op == LATHE_OP_WHILE || op == LATHE_OP_IF; }

static lathe_status_t read_bool(lathe_exec *x, const lathe_tensor *t, bool *out) {
  uint8_t b = 0;
  LATHE_RETURN_IF_ERROR(x->plan->dev->read(x, t, &b, 1));
  *out = b != 0;
  return NULL;
}

/* cond, then body, until cond is false. The state is reference counted; on a GPU a previous
 * state that queued kernels may still read stays alive through the execution's own reference
 * (the walk drops every value it made through the device, which keeps it until the stream is done). */
static lathe_status_t run_while(lathe_exec *x, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  int ns = n->n_operands;
  lathe_tensor **state = calloc(2 * (size_t)ns + 1, sizeof *state);
  if (!state) return LATHE_OOM("While");
  lathe_tensor **next = state + ns;
  for (int i = 0; i < ns; i++) state[i] = lathe_tensor_retain(in[i]);
  lathe_status_t st = NULL;
  for (;;) {
    lathe_tensor *c = NULL;
    if ((st = lathe_exec_call(x, lathe_attr_while_cond(n), state, ns, &c))) break;
    bool go = false;
    st = read_bool(x, c, &go);
    lathe_tensor_release(c);
    if (st || !go) break;
    if ((st = lathe_exec_call(x, lathe_attr_while_body(n), state, ns, next))) break;
    for (int i = 0; i < ns; i++) {
      lathe_tensor_release(state[i]);
      state[i] = next[i];
      next[i] = NULL;
    }
  }
  for (int i = 0; i < ns; i++) {
    if (st) lathe_tensor_release(state[i]);
    else out[i] = state[i];
  }
  free(state);
  return st;
}

lathe_status_t lathe_exec_control(lathe_exec *x, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  switch (n->op) {
    case LATHE_OP_CALL:
      return lathe_exec_call(x, lathe_attr_call_callee(n), in, n->n_operands, out);
    case LATHE_OP_WHILE:
      return run_while(x, n, in, out);
    case LATHE_OP_IF: {
      bool pred = false;
      LATHE_RETURN_IF_ERROR(read_bool(x, in[0], &pred));
      return lathe_exec_call(x, pred ? lathe_attr_if_true_branch(n) : lathe_attr_if_false_branch(n), NULL, 0, out);
    }
    default:
      return LATHE_UNIMPL("%s: not a control-flow op", lathe_op_name(n->op));
  }
}
