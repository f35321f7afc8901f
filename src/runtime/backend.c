/* backend.c -- the backend registry and config strings ("lathe", "lathe:cpu,threads=N",
 * "mlx:dynamic"), and the backend's reference count. */
#include <stdio.h>

#include "runtime.h"

typedef lathe_status_t (*device_ctor)(const char *options, const lathe_device_i **out_dev, void **out_ctx,
                                      char **out_config);

/* Devices in order of preference for plain "lathe": CUDA when a GPU and its libraries are
 * usable (UNAVAILABLE otherwise, which moves on), else the CPU. */
static const struct {
  const char *name;
  device_ctor ctor;
} devices[] = {
    {"cuda", lathe_cuda_device_new},
    {"cpu", lathe_cpu_device_new},
};
#define N_DEVICES (int)(sizeof devices / sizeof devices[0])

static char *dupstr(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* The MLX device is a backend of its own name ("mlx[:options]"), linked in only when lathe is
 * built with MLX (docs/MLX.md). */
#ifdef LATHE_WITH_MLX
static const device_ctor mlx_ctor = lathe_mlx_device_new;
#else
static const device_ctor mlx_ctor = NULL;
#endif

static lathe_status_t backend_make(const char *name, const lathe_device_i *dev, void *ctx, const char *dconf,
                                   lathe_backend_t *out) {
  lathe_backend_t b = calloc(1, sizeof *b);
  char desc[256];
  snprintf(desc, sizeof desc, "lathe %d.%d.%d on %s", LATHE_VERSION_MAJOR, LATHE_VERSION_MINOR, LATHE_VERSION_PATCH,
           dev->description(ctx, -1));
  if (b) {
    b->name = dupstr(name);
    b->config = malloc(strlen(name) + strlen(dconf) + 2);
    b->description = dupstr(desc);
  }
  if (!b || !b->name || !b->config || !b->description) {
    if (b) {
      free(b->name);
      free(b->config);
      free(b->description);
    }
    free(b);
    return LATHE_OOM("Backend");
  }
  atomic_init(&b->refs, 1);
  sprintf(b->config, "%s:%s", name, dconf);
  b->dev = dev;
  b->dev_ctx = ctx;
  b->n_devices = dev->num_devices(ctx);
  b->caps = dev->caps(ctx);
  b->program_options = (lathe_program_options){.fuse = true, .plan_memory = true, .alignment = 64};
  if (dev->program_options) dev->program_options(ctx, &b->program_options);
  *out = b;
  return NULL;
}

lathe_status_t lathe_backend_new(const char *config, lathe_backend_t *out_backend) {
  if (!out_backend) return LATHE_INVALID("Backend: out_backend is NULL");
  if (!config) config = "";
  if (strncmp(config, "mlx", 3) == 0 && (config[3] == 0 || config[3] == ':')) {
    if (!mlx_ctor)
      return lathe_status_new(LATHE_STATUS_UNAVAILABLE, "Backend \"%s\": this lathe was built without MLX (build it "
                              "with MLX_DIR set, or the Go package with -tags mlx: docs/MLX.md)", config);
    const lathe_device_i *dev;
    void *ctx;
    char *dconf;
    lathe_status_t st = mlx_ctor(config[3] ? config + 4 : "", &dev, &ctx, &dconf);
    if (st) return lathe_status_annotate(st, "Backend \"%s\"", config);
    if ((st = lathe_device_check(dev))) {
      free(dconf);
      dev->destroy(ctx);
      return st;
    }
    st = backend_make("mlx", dev, ctx, dconf, out_backend);
    free(dconf);
    if (st) dev->destroy(ctx);
    return st;
  }
  /* "lathe" or "lathe:<device>[,opt=val...]"; a bare "" also means lathe. */
  const char *rest = config;
  if (strncmp(config, "lathe", 5) == 0 && (config[5] == 0 || config[5] == ':')) rest = config[5] ? config + 6 : "";
  else if (*config)
    return LATHE_INVALID("Backend: unknown backend \"%s\"; known: \"lathe\", \"lathe:cuda\", \"lathe:cpu\", \"mlx\"", config);
  char devname[32] = "";
  const char *options = "";
  const char *comma = strchr(rest, ',');
  size_t len = comma ? (size_t)(comma - rest) : strlen(rest);
  if (len >= sizeof devname) return LATHE_INVALID("Backend: unknown device in \"%s\"; known: cuda, cpu", config);
  memcpy(devname, rest, len);
  devname[len] = 0;
  if (comma) options = comma + 1;
  if (strchr(devname, '=')) { /* "lathe:threads=2": options without a device name */
    devname[0] = 0;
    options = rest;
  }
  lathe_status_t last = NULL;
  for (int i = 0; i < N_DEVICES; i++) {
    if (*devname && strcmp(devname, devices[i].name) != 0) continue;
    const lathe_device_i *dev;
    void *ctx;
    char *dconf;
    lathe_status_t st = devices[i].ctor(options, &dev, &ctx, &dconf);
    if (!st && (st = lathe_device_check(dev))) {
      free(dconf);
      if (dev && dev->destroy) dev->destroy(ctx);
    }
    if (st) {
      if (*devname || lathe_status_code_of(st) != LATHE_STATUS_UNAVAILABLE) {
        lathe_status_free(last);
        return lathe_status_annotate(st, "Backend \"%s\"", config);
      }
      lathe_status_free(last);
      last = st;
      continue;
    }
    lathe_status_free(last);
    st = backend_make("lathe", dev, ctx, dconf, out_backend);
    free(dconf);
    if (st) dev->destroy(ctx);
    return st;
  }
  if (last) return lathe_status_annotate(last, "Backend \"%s\": no usable device", config);
  return LATHE_INVALID("Backend: unknown device \"%s\" in \"%s\"; known: cuda, cpu", devname, config);
}

lathe_backend_t lathe_backend_retain(lathe_backend_t b) {
  if (b) atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
  return b;
}

void lathe_backend_release(lathe_backend_t b) {
  if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return;
  b->dev->destroy(b->dev_ctx);
  free(b->name);
  free(b->config);
  free(b->description);
  free(b);
}

void lathe_backend_free(lathe_backend_t b) { lathe_backend_release(b); }

const char *lathe_backend_name(lathe_backend_t b) { return b ? b->name : ""; }
const char *lathe_backend_config(lathe_backend_t b) { return b ? b->config : ""; }
const char *lathe_backend_description(lathe_backend_t b) { return b ? b->description : ""; }
int lathe_backend_num_devices(lathe_backend_t b) { return b ? b->n_devices : 0; }
const char *lathe_backend_device_description(lathe_backend_t b, int device) {
  if (!b || device < 0 || device >= b->n_devices) return "";
  return b->dev->description(b->dev_ctx, device);
}
bool lathe_backend_supports_op(lathe_backend_t b, lathe_op op, lathe_dtype dtype) {
  if (!b || (int)op < 0 || op >= LATHE_OP_COUNT || lathe_op_kind_of(op) == LATHE_KIND_INTERNAL) return false;
  return b->dev->supports_op(b->dev_ctx, op, dtype);
}
bool lathe_backend_supports_dtype(lathe_backend_t b, lathe_dtype dtype) {
  return b && lathe_dtype_is_valid(dtype) && b->dev->supports_dtype(b->dev_ctx, dtype);
}
bool lathe_backend_supports_dynamic_axes(lathe_backend_t b) {
  return b && lathe_backend_supports_op(b, LATHE_OP_DYNAMIC_SHAPE, LATHE_DTYPE_FLOAT32);
}
lathe_dynamic_shapes lathe_backend_dynamic_shapes(lathe_backend_t b) {
  if (!lathe_backend_supports_dynamic_axes(b)) return LATHE_DYNAMIC_SHAPES_NONE;
  return (b->caps & LATHE_DEVCAP_DYNAMIC_AXES) ? LATHE_DYNAMIC_SHAPES_NATIVE : LATHE_DYNAMIC_SHAPES_RECOMPILING;
}
bool lathe_backend_has_shared_buffers(lathe_backend_t b) { return b && (b->caps & LATHE_DEVCAP_SHARED_BUFFERS); }
bool lathe_backend_is_asynchronous(lathe_backend_t b) { return b && (b->caps & LATHE_DEVCAP_ASYNC); }
