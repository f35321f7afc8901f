/* cuda_init_costs.c -- what creating a CUDA backend costs on this machine without lathe: each step
 * lathe:cuda's creation takes (dlopen of the driver, cuInit, the primary context, streams, pinned
 * staging, device memory, NVRTC, cuBLASLt and its handle, cuDNN), timed once in a fresh process.
 * Run it a few times (the first pays a cold page cache) beside build/floor_bench, which prints
 * lathe's own creation time: bench/cuda-bench.sh BIN floor. With `overlap` it instead opens NVRTC
 * and cuBLASLt on a second thread while the first runs cuInit and makes the primary context, and
 * prints that phase's time: alternate fresh processes of both forms to see whether the loader
 * would gain by opening them in parallel (glibc's dlopen and cuInit may serialize). No CUDA
 * headers needed:
 *   gcc -O2 -o /tmp/cuda_init_costs bench/cuda_init_costs.c -ldl -lpthread && /tmp/cuda_init_costs [overlap] */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) { /* ms */
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* the entry points' signatures, without the CUDA headers */
typedef int (*f_i)(unsigned);
typedef int (*f_get)(int *, int);
typedef int (*f_ret)(void **, int);
typedef int (*f_set)(void *);
typedef int (*f_stream)(void **, unsigned);
typedef int (*f_hostalloc)(void **, size_t, unsigned);
typedef int (*f_alloc)(unsigned long long *, size_t);
typedef int (*f_ltc)(void **);

static void *sym(void *lib, const char *name) {
  void *f = lib ? dlsym(lib, name) : NULL;
  if (!f) {
    printf("cuda_init_costs: %s not found\n", name);
    exit(1);
  }
  return f;
}

static void *open_libs(void *arg) {
  double *t = arg;
  double a = now();
  t[0] = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL) != NULL;
  t[1] = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL) != NULL;
  t[2] = now() - a;
  return NULL;
}

/* cuInit and the primary context on this thread, NVRTC and cuBLASLt opened on another. */
static int overlap(void) {
  double t0 = now(), libs[3] = {0, 0, 0};
  void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cu) {
    printf("cuda_init_costs: no libcuda.so.1 (%s)\n", dlerror());
    return 1;
  }
  double t1 = now();
  pthread_t th;
  int threaded = pthread_create(&th, NULL, open_libs, libs) == 0;
  if (((f_i)sym(cu, "cuInit"))(0)) {
    printf("cuda_init_costs: cuInit failed (no usable GPU)\n");
    return 1;
  }
  int dev;
  void *ctx;
  ((f_get)sym(cu, "cuDeviceGet"))(&dev, 0);
  ((f_ret)sym(cu, "cuDevicePrimaryCtxRetain"))(&ctx, dev);
  double t2 = now();
  if (threaded) pthread_join(th, NULL);
  else open_libs(libs);
  double t3 = now();
  printf("overlap: dlopen libcuda %.1f ms; cuInit + primary context %.1f ms beside dlopen NVRTC + cuBLASLt %.1f ms%s; "
         "the phase %.1f ms\n",
         t1 - t0, t2 - t1, libs[2], libs[0] && libs[1] ? "" : " (a library missing)", t3 - t1);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "overlap")) return overlap();
  double t0 = now();
  void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cu) {
    printf("cuda_init_costs: no libcuda.so.1 (%s)\n", dlerror());
    return 1;
  }
  double t1 = now();
  if (((f_i)sym(cu, "cuInit"))(0)) {
    printf("cuda_init_costs: cuInit failed (no usable GPU)\n");
    return 1;
  }
  double t2 = now();
  int dev;
  void *ctx;
  ((f_get)sym(cu, "cuDeviceGet"))(&dev, 0);
  ((f_ret)sym(cu, "cuDevicePrimaryCtxRetain"))(&ctx, dev);
  ((f_set)sym(cu, "cuCtxSetCurrent"))(ctx);
  double t3 = now();
  void *s[8];
  for (int i = 0; i < 8; i++) ((f_stream)sym(cu, "cuStreamCreate"))(&s[i], 1);
  double t4 = now();
  void *h;
  ((f_hostalloc)sym(cu, "cuMemHostAlloc"))(&h, 32 << 20, 1);
  double t5 = now();
  unsigned long long d;
  ((f_alloc)sym(cu, "cuMemAlloc_v2"))(&d, 32 << 20);
  double t6 = now();
  void *nv = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
  double t7 = now();
  void *lt = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
  double t8 = now();
  void *lh;
  if (lt) ((f_ltc)sym(lt, "cublasLtCreate"))(&lh);
  double t9 = now();
  void *dn = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
  double t10 = now();
  printf("dlopen libcuda %.1f ms, cuInit %.1f, primary context %.1f, 8 streams %.1f, 32 MiB pinned %.1f, 32 MiB device %.1f\n",
         t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5);
  printf("dlopen NVRTC %.1f ms%s, dlopen cuBLASLt %.1f%s, cublasLtCreate %.1f, dlopen cuDNN %.1f%s; in all %.1f ms\n", t7 - t6,
         nv ? "" : " (missing)", t8 - t7, lt ? "" : " (missing)", t9 - t8, t10 - t9, dn ? "" : " (missing)", t10 - t0);
  return 0;
}
