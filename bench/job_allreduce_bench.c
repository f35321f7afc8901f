/* job_allreduce_bench.c -- AllReduce bus bandwidth across the processes of a job (lathe's coordinator +
 * Gloo plugin, lathe:cpu's pairwise sum), Float32 sums of 4 KB to 256 MB. Run it as a job:
 *   LATHE_GLOO_LIBRARY=build/liblathe_gloo.so go run ./cmd/lathe-launch -n 2 build/job_allreduce_bench
 * Bus bandwidth is NCCL's convention: bytes * 2(P-1)/P / time. Process 0 prints the table. */
#include <stdio.h>
#include <time.h>

#include "../src/cpu/cpu.h"
#include "../src/runtime/job.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* the pairwise reduction lathe:cpu gives Gloo in a job's AllReduce */
static void sum_f32(void *ctx, void *c, const void *a, const void *b, size_t n) {
  (void)ctx;
  lathe_cpu_pair_reduce(LATHE_OP_REDUCE_SUM, LATHE_DTYPE_FLOAT32, c, a, b, n);
}

int main(void) {
  lathe_job_config cfg;
  lathe_job_config_init(&cfg);
  bool is_job = false;
  lathe_job *j = NULL;
  lathe_status_t st = lathe_job_config_resolve("job_allreduce", &cfg, &is_job);
  if (!st && !is_job) st = LATHE_INVALID("job_allreduce: run it as a job (lathe-launch -n P)");
  if (!st) st = lathe_job_acquire(&cfg, &j);
  if (st) {
    fprintf(stderr, "%s\n", lathe_status_message(st));
    return 1;
  }
  int P = lathe_job_processes(j), p = lathe_job_process(j);
  size_t max = (size_t)256 << 20;
  float *buf = malloc(max);
  for (size_t i = 0; i < max / 4; i++) buf[i] = 1.0f;
  if (p == 0) printf("lathe job AllReduce (Gloo), %d processes, Float32 sum\n%10s %10s %12s\n", P, "KB", "ms", "busbw GB/s");
  /* 4 and 64 KB: the latency a step's small gradients pay; 1 MB up: bandwidth */
  static const size_t kbs[] = {4, 64, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10};
  for (size_t s = 0; s < sizeof kbs / sizeof kbs[0] && !st; s++) {
    size_t kb = kbs[s], n = kb << 8; /* floats */
    int reps = kb <= 64 ? 200 : kb <= (4 << 10) ? 10 : kb <= (64 << 10) ? 4 : 2;
    st = lathe_job_all_reduce(j, "bench", buf, n, 4, sum_f32, NULL); /* warm up */
    double t0 = now();
    for (int r = 0; r < reps && !st; r++) st = lathe_job_all_reduce(j, "bench", buf, n, 4, sum_f32, NULL);
    double dt = (now() - t0) / reps;
    double bus = (double)(kb << 10) * 2.0 * (P - 1) / P / dt / 1e9;
    if (!st && p == 0) printf("%10zu %10.3f %12.3f\n", kb, dt * 1e3, bus);
    for (size_t i = 0; i < n; i++) buf[i] = 1.0f;
  }
  if (st) fprintf(stderr, "process %d: %s\n", p, lathe_status_message(st));
  free(buf);
  lathe_job_release(j);
  return st ? 1 : 0;
}
