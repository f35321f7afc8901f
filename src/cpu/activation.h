/* activation.h -- the activations of src/graph/ew.def (LATHE_ACT) on the CPU: row kernels for the
 * dense ops' epilogues and the kernels of FusedActivation, FusedActivationVJP, FusedDenseVJP. */
#ifndef LATHE_CPU_ACTIVATION_H
#define LATHE_CPU_ACTIVATION_H

#include "cpu.h"

/* y[i] = act(x[i]) for i < n (y may be x). A GLU activation applies its gate's function. */
void lathe_cpu_act_f32(int act, const float *x, float *y, int64_t n);
void lathe_cpu_act_f64(int act, const double *x, double *y, int64_t n);

bool lathe_cpu_supports_activation(lathe_op op, lathe_dtype dt);
lathe_status_t lathe_cpu_run_activation(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out);

#endif
