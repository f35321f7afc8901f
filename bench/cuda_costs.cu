// cuda_costs.cu -- what bare CUDA calls cost on the host of this machine (runtime API, medians of
// 9 batches of 2000): launches, graph launches, synchronisations, events, small copies, and a
// thread wake-up. The floor of a one-op graph is made of these; on a sandboxed VM each costs
// several times what it does on bare metal, which is what build/floor_bench's figures are read
// against. Built and run on the GPU machine by bench/cuda-bench.sh BIN floor:
//   nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/cuda_costs bench/cuda_costs.cu -lcuda && /tmp/cuda_costs
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <vector>
static double now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

__global__ void k(float *p) {
  if (p && threadIdx.x == 0) p[0] += 1;
}

enum { N = 2000, R = 9 };

// f run N times per batch (then the device synchronised), the median batch per call
template <class F>
static void bench(const char *name, F f) {
  std::vector<double> v;
  for (int r = 0; r < R; r++) {
    double t0 = now();
    for (int i = 0; i < N; i++) f();
    cudaDeviceSynchronize();
    v.push_back((now() - t0) / N);
  }
  std::sort(v.begin(), v.end());
  printf("%-50s %8.3f us\n", name, v[R / 2] * 1e6);
}

// a thread that answers each request: the cost of waking a sleeping thread and hearing back
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER, cv2 = PTHREAD_COND_INITIALIZER;
static int req = 0, rep = 0, quit = 0;
static void *worker(void *) {
  pthread_mutex_lock(&mu);
  for (;;) {
    while (req == rep && !quit) pthread_cond_wait(&cv, &mu);
    if (quit) break;
    rep = req;
    pthread_cond_signal(&cv2);
  }
  pthread_mutex_unlock(&mu);
  return 0;
}

int main() {
  float *d, *pin, host[4] = {1, 2, 3, 4};
  cudaStream_t s;
  cudaEvent_t ev;
  if (cudaMalloc(&d, 1 << 20) != cudaSuccess) {
    printf("cuda_costs: no usable GPU\n");
    return 1;
  }
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaMallocHost(&pin, 4096);
  cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  CUcontext ctx;
  cuCtxGetCurrent(&ctx);
  bench("clock_gettime", [] { now(); });
  bench("malloc+free 256 B", [] { void *p = malloc(256); asm volatile("" ::"r"(p)); free(p); });
  bench("cuCtxSetCurrent", [&] { cuCtxSetCurrent(ctx); });
  bench("launch empty kernel (queued)", [&] { k<<<1, 32, 0, s>>>(0); });
  bench("launch + cudaStreamSynchronize", [&] { k<<<1, 32, 0, s>>>(0); cudaStreamSynchronize(s); });
  bench("cudaStreamSynchronize (idle stream)", [&] { cudaStreamSynchronize(s); });
  bench("cudaEventCreate + Destroy", [&] { cudaEvent_t e; cudaEventCreateWithFlags(&e, cudaEventDisableTiming); cudaEventDestroy(e); });
  bench("cudaEventRecord", [&] { cudaEventRecord(ev, s); });
  bench("launch + EventRecord + EventSynchronize", [&] { k<<<1, 32, 0, s>>>(0); cudaEventRecord(ev, s); cudaEventSynchronize(ev); });
  bench("cudaEventQuery (done)", [&] { cudaEventQuery(ev); });
  bench("cudaStreamWaitEvent (done event)", [&] { cudaStreamWaitEvent(s, ev, 0); });
  cudaGraph_t g;
  cudaGraphExec_t ge;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  k<<<1, 32, 0, s>>>(0);
  cudaStreamEndCapture(s, &g);
  cudaGraphInstantiate(&ge, g, 0);
  bench("graph launch, 1 kernel (queued)", [&] { cudaGraphLaunch(ge, s); });
  bench("graph launch + StreamSynchronize", [&] { cudaGraphLaunch(ge, s); cudaStreamSynchronize(s); });
  bench("H2D 16 B pinned async + sync", [&] { cudaMemcpyAsync(d, pin, 16, cudaMemcpyHostToDevice, s); cudaStreamSynchronize(s); });
  bench("H2D 16 B pageable async (no sync)", [&] { cudaMemcpyAsync(d, host, 16, cudaMemcpyHostToDevice, s); });
  bench("H2D 16 B pageable async + sync", [&] { cudaMemcpyAsync(d, host, 16, cudaMemcpyHostToDevice, s); cudaStreamSynchronize(s); });
  bench("D2H 16 B pinned async + sync", [&] { cudaMemcpyAsync(pin, d, 16, cudaMemcpyDeviceToHost, s); cudaStreamSynchronize(s); });
  bench("D2H 16 B pageable (cudaMemcpy)", [&] { cudaMemcpy(host, d, 16, cudaMemcpyDeviceToHost); });
  bench("launch + D2H pinned + sync", [&] { k<<<1, 32, 0, s>>>(d); cudaMemcpyAsync(pin, d, 16, cudaMemcpyDeviceToHost, s); cudaStreamSynchronize(s); });
  bench("graph + EventRecord + EventSync + D2H + sync", [&] { cudaGraphLaunch(ge, s); cudaEventRecord(ev, s); cudaEventSynchronize(ev); cudaMemcpyAsync(pin, d, 16, cudaMemcpyDeviceToHost, s); cudaStreamSynchronize(s); });
  bench("graph + D2H + sync", [&] { cudaGraphLaunch(ge, s); cudaMemcpyAsync(pin, d, 16, cudaMemcpyDeviceToHost, s); cudaStreamSynchronize(s); });
  bench("H2D pageable + graph + D2H + sync", [&] { cudaMemcpyAsync(d, host, 16, cudaMemcpyHostToDevice, s); cudaGraphLaunch(ge, s); cudaMemcpyAsync(pin, d, 16, cudaMemcpyDeviceToHost, s); cudaStreamSynchronize(s); });
  pthread_t th;
  pthread_create(&th, 0, worker, 0);
  bench("thread round trip (cond signal + reply)", [&] { pthread_mutex_lock(&mu); req++; pthread_cond_signal(&cv); while (rep != req) pthread_cond_wait(&cv2, &mu); pthread_mutex_unlock(&mu); });
  bench("cond signal to a sleeping thread (one way)", [&] { pthread_mutex_lock(&mu); req++; pthread_cond_signal(&cv); pthread_mutex_unlock(&mu); });
  pthread_mutex_lock(&mu);
  quit = 1;
  pthread_cond_signal(&cv);
  pthread_mutex_unlock(&mu);
  pthread_join(th, 0);
  return 0;
}
