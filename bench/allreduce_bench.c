/* allreduce_bench.c -- AllReduce (sum, Float32) bus bandwidth of an SPMD program over 2 devices,
 * for sizes from 1 MB to 1 GB: the median over repeats of a batch of back-to-back executions
 * timed to the last output's completion. Bus bandwidth = 2 (n-1)/n * bytes / time (NCCL's
 * convention, as nccl-tests and bench/allreduce_torch.py).
 *
 *   make bench && build/allreduce_bench [config (lathe:cuda)] [repeats (20)] [max MB (1024)]
 *
 * One line per size: "allreduce bytes=B lathe_busbw_gbs=X time_us=T". bench/allreduce.sh runs
 * it alternately with PyTorch's NCCL all_reduce and prints the ratio. */
#include "bench.h"

enum { N_DEV = 2 };

static double one_size(int64_t bytes) {
  int64_t count = bytes / 4;
  lathe_shape s;
  TRY(lathe_shape_make(LATHE_DTYPE_FLOAT32, 1, &count, &s));
  lathe_builder_t b;
  TRY(lathe_builder_new(be, "allreduce", &b));
  TRY(lathe_builder_spmd(b, N_DEV));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_value_t x, y;
  TRY(lathe_parameter(fn, "x", &s, &x));
  TRY(lathe_all_reduce(fn, &x, 1, LATHE_OP_REDUCE_SUM, NULL, NULL, 0, &y));
  TRY(lathe_function_return(fn, &y, 1));
  lathe_executable_t e;
  TRY(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  float *host = malloc((size_t)bytes);
  if (!host) exit(1);
  for (int64_t k = 0; k < count; k++) host[k] = (float)(k % 1000) / 1000.0f;
  lathe_buffer_t in[N_DEV];
  for (int r = 0; r < N_DEV; r++) TRY(lathe_buffer_from_host(be, r, &s, host, (size_t)bytes, &in[r]));
  free(host);
  /* a batch long enough to hide the launch: 512 MB moved, 2 to 50 executions */
  int batch = (int)((512ll << 20) / bytes);
  batch = batch < 2 ? 2 : batch > 50 ? 50 : batch;
  lathe_buffer_t *out = calloc((size_t)batch * N_DEV, sizeof *out);
  double *t = malloc(sizeof(double) * (size_t)repeats);
  if (!out || !t) exit(1);
  for (int r = -2; r < repeats; r++) {
    double t0 = bench_now();
    for (int k = 0; k < batch; k++) TRY(lathe_executable_execute(e, in, NULL, N_DEV, 0, out + k * N_DEV, N_DEV));
    for (int k = 0; k < batch * N_DEV; k++) TRY(lathe_buffer_wait(out[k]));
    double t1 = bench_now();
    for (int k = 0; k < batch * N_DEV; k++) lathe_buffer_free(out[k]);
    if (r >= 0) t[r] = (t1 - t0) / batch;
  }
  qsort(t, (size_t)repeats, sizeof(double), bench_cmp_double);
  double med = t[repeats / 2];
  free(t);
  free(out);
  for (int r = 0; r < N_DEV; r++) lathe_buffer_free(in[r]);
  lathe_executable_free(e);
  return med;
}

int main(int argc, char **argv) {
  const char *cfg = argc > 1 ? argv[1] : "lathe:cuda";
  TRY(lathe_backend_new(cfg, &be));
  if (argc > 2 && atoi(argv[2]) > 0) repeats = atoi(argv[2]);
  int64_t max_mb = argc > 3 && atoll(argv[3]) > 0 ? atoll(argv[3]) : 1024;
  if (lathe_backend_num_devices(be) < N_DEV) {
    fprintf(stderr, "allreduce_bench: %s has %d device(s), the benchmark needs %d\n", cfg, lathe_backend_num_devices(be), N_DEV);
    return 2;
  }
  printf("# %s, %d repeats, AllReduce sum Float32 over %d devices\n", lathe_backend_description(be), repeats, N_DEV);
  for (int64_t mb = 1; mb <= max_mb; mb *= 2) {
    int64_t bytes = mb << 20;
    double sec = one_size(bytes);
    double busbw = 2.0 * (N_DEV - 1) / N_DEV * (double)bytes / sec / 1e9;
    printf("allreduce bytes=%lld lathe_busbw_gbs=%.2f time_us=%.1f\n", (long long)bytes, busbw, sec * 1e6);
    fflush(stdout);
  }
  lathe_backend_free(be);
  return 0;
}
