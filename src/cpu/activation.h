/* activation.h -- the activations of src/graph/ew.def (LATHE_ACT) on the CPU: row kernels for the
 * dense ops' epilogues and the kernels of FusedActivation, FusedActivationVJP, FusedDenseVJP. */
#ifndef LATHE_CPU_ACTIVATION_H
#define LATHE_CPU_ACTIVATION_H

#include "cpu.h"
#include "kernels.h"

/* y[i] = act(x[i]) for i < n (y may be x). A GLU activation applies its gate's function. */
void lathe_cpu_act_f32(int act, const float *x, float *y, int64_t n);
void lathe_cpu_act_f64(int act, const double *x, double *y, int64_t n);

/* One tile of FusedActivation (mode 1: out = f(a)) or its VJP (2: out = f'(a) g from x; 3: from
 * y) in a fusion region: a and g hold n elements of dt, or one (step 0). */
void lathe_cpu_act_tile(const lathe_cpu_kernels *kt, lathe_dtype dt, int mode, int act, const void *a, int a_step,
                        const void *g, int g_step, void *out, int64_t n);

bool lathe_cpu_supports_activation(lathe_op op, lathe_dtype dt);
lathe_status_t lathe_cpu_run_activation(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out);

#endif
