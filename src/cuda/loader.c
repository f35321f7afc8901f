/* loader.c -- opens the CUDA libraries with dlopen, once per process: libcuda.so.1 (driver entry
 * points pinned to LCU_API_VERSION through cuGetProcAddress), NVRTC (13, else 12), cuBLASLt (13,
 * else 12), cuFFT, NCCL and cuDNN (optional). A missing library is UNAVAILABLE with a message that says what
 * to install; nothing is printed. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static lcu_api api;
/* per library: 0 not tried, 1 loaded, -1 failed (why[] says why) */
static int state[6];
static char why[6][768];
static int nvrtc_major, nvrtc_minor, driver_version, nccl_version;

enum { LIB_DRIVER, LIB_NVRTC, LIB_CUBLASLT, LIB_CUFFT, LIB_NCCL, LIB_CUDNN };

typedef lcuResult (*get_proc_fn)(const char *symbol, void **pfn, int version, uint64_t flags, int *status);

static void *open_first(const char *const *names, const char *env, char *tried, size_t cap) {
  const char *path = env ? getenv(env) : NULL;
  if (path && *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    snprintf(tried, cap, "%s=%s could not be opened (%s)", env, path, dlerror());
    return NULL;
  }
  size_t n = 0;
  for (int i = 0; names[i]; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    n += (size_t)snprintf(tried + n, n < cap ? cap - n : 0, "%s%s", i ? ", " : "", names[i]);
  }
  return NULL;
}

static void load_driver(void) {
  static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
  char tried[128];
  void *h = open_first(names, NULL, tried, sizeof tried);
  if (!h) {
    snprintf(why[LIB_DRIVER], sizeof why[0], "no NVIDIA driver: %s not found (install the NVIDIA driver)", tried);
    state[LIB_DRIVER] = -1;
    return;
  }
  get_proc_fn get = (get_proc_fn)dlsym(h, "cuGetProcAddress_v2");
  if (!get) {
    snprintf(why[LIB_DRIVER], sizeof why[0], "the NVIDIA driver is too old: libcuda.so.1 has no cuGetProcAddress_v2 "
                                             "(lathe:cuda needs a driver for CUDA 12 or newer)");
    state[LIB_DRIVER] = -1;
    return;
  }
#define LATHE_CU_SYM(lib, ret, name, params)                                                                    \
  if (LIB_##lib == LIB_DRIVER && state[LIB_DRIVER] == 0) {                                                    \
    void *p_ = NULL;                                                                                          \
    int found_ = 0;                                                                                           \
    if (get(#name, &p_, LCU_API_VERSION, LCU_GET_PROC_ADDRESS_DEFAULT, &found_) != LCU_SUCCESS || !p_) {       \
      snprintf(why[LIB_DRIVER], sizeof why[0], "the NVIDIA driver lacks %s for CUDA API %d", #name, LCU_API_VERSION); \
      state[LIB_DRIVER] = -1;                                                                                 \
    }                                                                                                         \
    memcpy(&api.name, &p_, sizeof p_);                                                                        \
  }
#include "cuda_symbols.def"
#undef LATHE_CU_SYM
  if (state[LIB_DRIVER] < 0) return;
  lcuResult r = api.cuInit(0);
  if (r != LCU_SUCCESS) {
    const char *msg = NULL;
    api.cuGetErrorString(r, &msg);
    snprintf(why[LIB_DRIVER], sizeof why[0], "cuInit failed: %s (error %d)", msg ? msg : "unknown", r);
    state[LIB_DRIVER] = -1;
    return;
  }
  api.cuDriverGetVersion(&driver_version);
  state[LIB_DRIVER] = 1;
}

/* dlsym every row of one library; the names are the plain ones. */
static void load_plain(int lib, const char *const *names, const char *env, const char *what) {
  char tried[256];
  void *h = open_first(names, env, tried, sizeof tried);
  if (!h) {
    snprintf(why[lib], sizeof why[0], "%s not found (tried %s)", what, tried);
    state[lib] = -1;
    return;
  }
  state[lib] = 1;
#define LATHE_CU_SYM(L, ret, name, params)                                                       \
  if (LIB_##L == lib && state[lib] == 1) {                                                     \
    void *p_ = dlsym(h, #name);                                                                \
    if (!p_) {                                                                                 \
      snprintf(why[lib], sizeof why[0], "%s has no %s", what, #name);                           \
      state[lib] = -1;                                                                         \
    }                                                                                          \
    memcpy(&api.name, &p_, sizeof p_);                                                         \
  }
#include "cuda_symbols.def"
#undef LATHE_CU_SYM
}

/* libnvrtc finds libnvrtc-builtins through its $ORIGIN rpath, which a dlopen interposer (sanitizers,
 * some profilers) defeats. Opening the builtins from libnvrtc's own folder first makes NVRTC's later
 * dlopen by soname find the loaded copy. Best effort: without it NVRTC searches as usual. */
static void preload_nvrtc_builtins(void) {
  Dl_info info;
  void *sym;
  memcpy(&sym, &api.nvrtcVersion, sizeof sym);
  if (!dladdr(sym, &info) || !info.dli_fname) return;
  const char *slash = strrchr(info.dli_fname, '/');
  if (!slash) return;
  char path[4096];
  int n = snprintf(path, sizeof path, "%.*s/libnvrtc-builtins.so.%d.%d", (int)(slash - info.dli_fname),
                   info.dli_fname, nvrtc_major, nvrtc_minor);
  if (n > 0 && (size_t)n < sizeof path) (void)dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static lathe_status_t load(int lib) {
  pthread_mutex_lock(&mu);
  if (state[lib] == 0) {
    switch (lib) {
      case LIB_DRIVER:
        load_driver();
        break;
      case LIB_NVRTC: {
        static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", NULL};
        load_plain(LIB_NVRTC, names, "LATHE_NVRTC_LIBRARY",
                   "NVRTC (CUDA's runtime compiler: the toolkit, or the nvidia-cuda-nvrtc wheel with its folder "
                   "on LD_LIBRARY_PATH or LATHE_NVRTC_LIBRARY naming libnvrtc.so)");
        if (state[LIB_NVRTC] == 1) {
          api.nvrtcVersion(&nvrtc_major, &nvrtc_minor);
          preload_nvrtc_builtins();
        }
        break;
      }
      case LIB_CUBLASLT: {
        static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so", NULL};
        load_plain(LIB_CUBLASLT, names, NULL, "cuBLASLt (CUDA's libcublasLt: the toolkit or the nvidia-cublas wheel)");
        break;
      }
      case LIB_NCCL: {
        static const char *const names[] = {"libnccl.so.2", "libnccl.so", NULL};
        load_plain(LIB_NCCL, names, "LATHE_NCCL_LIBRARY",
                   "AllReduce over several GPUs needs NCCL (libnccl.so.2: install the nvidia-nccl-cu13 wheel and put its "
                   "nvidia/nccl/lib folder on LD_LIBRARY_PATH, or name the file with LATHE_NCCL_LIBRARY)");
        if (state[LIB_NCCL] == 1 && api.ncclGetVersion(&nccl_version) != LNCCL_SUCCESS) nccl_version = 0;
        break;
      }
      case LIB_CUDNN: {
        static const char *const names[] = {"libcudnn.so.9", NULL};
        load_plain(LIB_CUDNN, names, "LATHE_CUDNN_LIBRARY", "cuDNN 9 (libcudnn.so.9: the cuDNN package or the nvidia-cudnn wheel)");
        break;
      }
      default: {
        static const char *const names[] = {"libcufft.so.12", "libcufft.so.13", "libcufft.so.11", "libcufft.so", NULL};
        load_plain(LIB_CUFFT, names, NULL, "cuFFT (CUDA's libcufft)");
        break;
      }
    }
  }
  lathe_status_t st = state[lib] > 0 ? NULL : lathe_status_new(LATHE_STATUS_UNAVAILABLE, "lathe:cuda: %s", why[lib]);
  pthread_mutex_unlock(&mu);
  return st;
}

lathe_status_t lathe_cuda_load(const lcu_api **out) {
  LATHE_RETURN_IF_ERROR(load(LIB_DRIVER));
  LATHE_RETURN_IF_ERROR(load(LIB_NVRTC));
  LATHE_RETURN_IF_ERROR(load(LIB_CUBLASLT));
  *out = &api;
  return NULL;
}

lathe_status_t lathe_cuda_load_nvrtc(const lcu_api **out) {
  LATHE_RETURN_IF_ERROR(load(LIB_NVRTC));
  *out = &api;
  return NULL;
}

bool lathe_cuda_have_cufft(void) {
  lathe_status_t st = load(LIB_CUFFT);
  bool ok = st == NULL;
  lathe_status_free(st);
  return ok;
}

lathe_status_t lathe_cuda_load_nccl(const lcu_api **out, int *version) {
  LATHE_RETURN_IF_ERROR(load(LIB_NCCL));
  *out = &api;
  *version = nccl_version;
  return NULL;
}

lathe_status_t lathe_cuda_load_cudnn(const lcu_api **out) {
  LATHE_RETURN_IF_ERROR(load(LIB_CUDNN));
  *out = &api;
  return NULL;
}

void lathe_cuda_versions(int *driver, int *nvrtc) {
  pthread_mutex_lock(&mu);
  *driver = driver_version;
  *nvrtc = nvrtc_major * 1000 + nvrtc_minor * 10;
  pthread_mutex_unlock(&mu);
}

lathe_status_t lathe_cuda_error(const lcu_api *a, lcuResult r, const char *what) {
  if (r == LCU_SUCCESS) return NULL;
  const char *msg = NULL;
  if (a && a->cuGetErrorString) a->cuGetErrorString(r, &msg);
  lathe_status_code code = r == LCU_ERROR_OUT_OF_MEMORY ? LATHE_STATUS_RESOURCE_EXHAUSTED : LATHE_STATUS_INTERNAL;
  return lathe_status_new(code, "%s: CUDA error %d (%s)", what, r, msg ? msg : "unknown");
}
