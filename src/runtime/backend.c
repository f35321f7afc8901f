/* backend.c -- the backend registry and config strings ("lathe", "lathe:cpu,threads=N",
 * "mlx:dynamic"), and the backend's reference count. */
#include <ctype.h>
#include <stdio.h>

#include "runtime.h"

/* The registry: every device a config can name, "<backend>[:<device>][,options]". Rows of one
 * backend are in order of preference for the bare name: plain "lathe" takes CUDA when a GPU and
 * its libraries are usable, else the CPU. A row with no constructor is not linked into this
 * build (its line says how to get it). Error messages and the option listing come from here. */
typedef struct device_entry {
  const char *backend; /* "lathe", "mlx" */
  const char *device;  /* "cuda", "cpu"; NULL: the backend's only device, options right after "mlx:" */
  const char *label;   /* how errors name it */
  lathe_status_t (*probe)(void); /* (optional) UNAVAILABLE, saying why, where it cannot run */
  lathe_device_ctor ctor;
  const char *unlinked; /* ctor NULL: why, and how to build it in */
  const lathe_option_spec *options;
  const int *n_options;
} device_entry;

static const device_entry devices[] = {
    {"lathe", "cuda", "lathe:cuda", lathe_cuda_probe, lathe_cuda_device_new, NULL, lathe_cuda_options,
     &lathe_cuda_n_options},
    {"lathe", "cpu", "lathe:cpu", NULL, lathe_cpu_device_new, NULL, lathe_cpu_options, &lathe_cpu_n_options},
#ifdef LATHE_WITH_MLX
    {"mlx", NULL, "mlx", NULL, lathe_mlx_device_new, NULL, lathe_mlx_options, &lathe_mlx_n_options},
#else
    {"mlx", NULL, "mlx", NULL, NULL,
     "this lathe was built without MLX (build it with MLX_DIR set, or the Go package with -tags mlx: docs/MLX.md)",
     NULL, NULL},
#endif
};
#define N_DEVICES (int)(sizeof devices / sizeof devices[0])

static char *dupstr(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* The linked configs ("lathe", "lathe:cuda", "lathe:cpu", "mlx"), quoted, into buf. */
static void known_backends(char *buf, size_t cap) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < N_DEVICES && at < cap; i++) {
    if (!devices[i].ctor) continue;
    bool first_of_backend = true;
    for (int j = 0; j < i; j++)
      if (devices[j].ctor && !strcmp(devices[j].backend, devices[i].backend)) first_of_backend = false;
    int w = 0;
    if (first_of_backend && devices[i].device)
      w = snprintf(buf + at, cap - at, "%s\"%s\"", at ? ", " : "", devices[i].backend);
    if (w >= 0 && (at += (size_t)w) < cap) w = snprintf(buf + at, cap - at, "%s\"%s\"", at ? ", " : "", devices[i].label);
    if (w < 0) break;
    at += (size_t)w;
  }
}

/* The linked devices of backend ("cuda, cpu") into buf. */
static void known_devices(const char *backend, char *buf, size_t cap) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < N_DEVICES && at < cap; i++) {
    if (!devices[i].ctor || !devices[i].device || strcmp(devices[i].backend, backend) != 0) continue;
    int w = snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", devices[i].device);
    if (w < 0) break;
    at += (size_t)w;
  }
}

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

/* Parses options for row d and makes its device; st annotated with why is the caller's. */
static lathe_status_t open_entry(const device_entry *d, const char *options, lathe_backend_t *out) {
  lathe_option_value opt[LATHE_MAX_OPTIONS];
  LATHE_RETURN_IF_ERROR(lathe_options_parse(d->label, d->options, *d->n_options, options, opt));
  const lathe_device_i *dev;
  void *ctx;
  char *dconf;
  /* the runtime's own options (LATHE_RUNTIME_OPTION_SPECS), by name */
  const char *trace = NULL, *dump = NULL;
  bool partition = true;
  for (int i = 0; i < *d->n_options; i++) {
    if (!opt[i].set) continue;
    if (!strcmp(d->options[i].name, "trace")) trace = opt[i].text;
    if (!strcmp(d->options[i].name, "dump")) dump = opt[i].text;
    if (!strcmp(d->options[i].name, "partition")) partition = opt[i].value == 1;
  }
  LATHE_RETURN_IF_ERROR(d->ctor(opt, &dev, &ctx, &dconf));
  lathe_status_t st = lathe_device_check(dev);
  if (!st) st = backend_make(d->backend, dev, ctx, dconf, out);
  free(dconf);
  if (st && dev && dev->destroy) dev->destroy(ctx);
  if (!st) (*out)->partition = partition;
  if (!st && (st = lathe_profile_open(*out, trace, dump))) {
    lathe_backend_release(*out);
    *out = NULL;
  }
  return st;
}

/* Whether name (len bytes) is the whole of s. */
static bool is(const char *s, const char *name, size_t len) { return strlen(s) == len && !strncmp(s, name, len); }

lathe_status_t lathe_backend_new(const char *config, lathe_backend_t *out_backend) {
  if (!out_backend) return LATHE_INVALID("Backend: out_backend is NULL");
  if (!config) config = "";
  /* messages quote the config with its secrets (token=) redacted */
  char shown[512], span[320];
  lathe_config_redact(config, strlen(config), shown, sizeof shown);
  /* "<backend>[:rest]"; a bare "" is the first backend ("lathe") */
  const char *colon = strchr(config, ':');
  size_t blen = colon ? (size_t)(colon - config) : strlen(config);
  const char *backend = blen ? NULL : devices[0].backend;
  for (int i = 0; i < N_DEVICES && !backend; i++)
    if (is(devices[i].backend, config, blen)) backend = devices[i].backend;
  char known[256];
  if (!backend) {
    known_backends(known, sizeof known);
    return LATHE_INVALID("Backend: unknown backend \"%s\"; known: %s", shown, known);
  }
  const char *rest = colon ? colon + 1 : "";
  /* a backend with one device ("mlx"): the rest is its options */
  for (int i = 0; i < N_DEVICES; i++) {
    const device_entry *d = &devices[i];
    if (strcmp(d->backend, backend) != 0 || d->device) continue;
    if (!d->ctor) return lathe_status_new(LATHE_STATUS_UNAVAILABLE, "Backend \"%s\": %s", shown, d->unlinked);
    return lathe_status_annotate(open_entry(d, rest, out_backend), "Backend \"%s\"", shown);
  }
  /* "lathe:<device>[,options]", or "lathe[:options]" for the best usable device */
  size_t tlen = strcspn(rest, ",");
  known_devices(backend, known, sizeof known);
  const device_entry *named = NULL;
  for (int i = 0; i < N_DEVICES && !named; i++) {
    const device_entry *d = &devices[i];
    if (!d->ctor || !d->device || strcmp(d->backend, backend) != 0) continue;
    size_t dl = strlen(d->device);
    if (is(d->device, rest, tlen)) named = d;
    else if (tlen > dl && !strncmp(rest, d->device, dl) && rest[dl] != '_' && !isalnum((unsigned char)rest[dl])) {
      /* "lathe:cpu threads=2": the device, then something that is not ",options" */
      char opts[512];
      lathe_options_known(d->options, *d->n_options, opts, sizeof opts);
      return LATHE_INVALID("Backend \"%s\": %s: malformed option \"%s\" after the device name (options follow it "
                           "after commas, without spaces: \"%s,%s=...\"); known options: %s",
                           shown, d->label, lathe_config_redact(rest + dl, tlen - dl, span, sizeof span), d->label,
                           d->options[0].name, opts);
    }
  }
  if (named) {
    const char *options = rest[tlen] == ',' ? rest + tlen + 1 : "";
    return lathe_status_annotate(open_entry(named, options, out_backend), "Backend \"%s\"", shown);
  }
  if (tlen && !memchr(rest, '=', tlen))
    return LATHE_INVALID("Backend: unknown device \"%s\" in \"%s\"; known: %s (or options alone, name=value, "
                         "for the best usable device)", lathe_config_redact(rest, tlen, span, sizeof span), shown, known);
  /* plain "lathe": the first usable device in the table's order; then its options */
  lathe_status_t why = NULL; /* why the devices before it were passed over */
  for (int i = 0; i < N_DEVICES; i++) {
    const device_entry *d = &devices[i];
    if (!d->ctor || strcmp(d->backend, backend) != 0) continue;
    lathe_status_t st = d->probe ? d->probe() : NULL;
    if (!st) st = open_entry(d, rest, out_backend);
    if (!st) {
      lathe_status_free(why);
      return NULL;
    }
    if (lathe_status_code_of(st) == LATHE_STATUS_UNAVAILABLE) {
      /* passed over: keep the reason for the next device's message */
      st = lathe_status_annotate(st, "%s unavailable", d->label);
      if (why) st = lathe_status_annotate(st, "%s", lathe_status_message(why));
      lathe_status_free(why);
      why = st;
      continue;
    }
    st = why ? lathe_status_annotate(st, "\"%s\" picked %s (%s)", backend, d->label, lathe_status_message(why))
             : lathe_status_annotate(st, "\"%s\" picked %s (the first choice, usable here)", backend, d->label);
    lathe_status_free(why);
    return lathe_status_annotate(st, "Backend \"%s\"", shown);
  }
  if (why) return lathe_status_annotate(why, "Backend \"%s\": no usable device", shown);
  return LATHE_INVALID("Backend \"%s\": no device linked", shown);
}

bool lathe_backend_option(int i, lathe_option_info *out) {
  if (!out || i < 0) return false;
  for (int r = 0; r < N_DEVICES; r++) {
    const device_entry *d = &devices[r];
    int n = d->ctor ? *d->n_options : 0;
    if (i >= n) {
      i -= n;
      continue;
    }
    const lathe_option_spec *s = &d->options[i];
    *out = (lathe_option_info){.config = d->label, .name = s->name, .values = s->values ? s->values : "",
                               .bare = s->bare, .def = s->def, .doc = s->doc};
    return true;
  }
  return false;
}

lathe_backend_t lathe_backend_retain(lathe_backend_t b) {
  if (b) atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
  return b;
}

void lathe_backend_release(lathe_backend_t b) {
  if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return;
  b->dev->destroy(b->dev_ctx);
  lathe_profile_close(b); /* after the device: its last work may still record events */
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
  /* dynamic-size ops run as their static op once specialised */
  return b->dev->supports_op(b->dev_ctx, lathe_op_lowered_form(op), dtype);
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
