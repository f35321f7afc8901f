/* profile.c -- the runtime's profiling hooks: the trace file and dump directory of a backend
 * (options trace= and dump=, else LATHE_TRACE and LATHE_DUMP), program dumps, transfer events,
 * and the memory counters of the C API. docs/PROFILING.md. */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"

/* The option's value, else the environment variable's; *from says which (for errors). */
static const char *pick(const char *opt, const char *opt_name, const char *env, const char **from) {
  *from = opt_name;
  if (opt && *opt) return opt;
  const char *e = getenv(env);
  *from = env;
  return e && *e ? e : NULL;
}

lathe_status_t lathe_profile_open(lathe_backend_t b, const char *trace_opt, const char *dump_opt) {
  const char *from;
  const char *dir = pick(dump_opt, "dump", "LATHE_DUMP", &from);
  if (dir) {
    struct stat sb;
    bool there = stat(dir, &sb) == 0, is_dir = there && S_ISDIR(sb.st_mode);
    if (!there || !is_dir || access(dir, W_OK | X_OK) != 0)
      return LATHE_INVALID("%s: cannot write dumps into \"%s\": %s", from, dir,
                           there && !is_dir ? "not a directory" : strerror(errno));
    size_t n = strlen(dir) + 1;
    if (!(b->dump_dir = malloc(n))) return LATHE_OOM("Backend");
    memcpy(b->dump_dir, dir, n);
    b->program_options.dump_dir = b->dump_dir;
  }
  const char *path = pick(trace_opt, "trace", "LATHE_TRACE", &from);
  if (path) {
    lathe_status_t st = lathe_trace_open(path, from, &b->trace);
    if (st) {
      free(b->dump_dir);
      b->dump_dir = NULL;
      b->program_options.dump_dir = NULL;
      return st;
    }
    b->program_options.trace = b->trace;
  }
  return NULL;
}

void lathe_profile_close(lathe_backend_t b) {
  lathe_trace_close(b->trace);
  b->trace = NULL;
  free(b->dump_dir);
  b->dump_dir = NULL;
  b->program_options.dump_dir = NULL;
}

/* One dump file: <dir>/<seq>-<name>.<suffix>, name reduced to [A-Za-z0-9_.-]. */
static lathe_status_t dump_file(lathe_backend_t b, int seq, const char *name, const char *suffix, const void *what,
                                void (*write)(const void *, FILE *)) {
  char clean[64], path[4096];
  size_t k = 0;
  for (const char *p = name && *name ? name : "program"; *p && k + 1 < sizeof clean; p++)
    clean[k++] = (isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '.') ? *p : '_';
  clean[k] = 0;
  snprintf(path, sizeof path, "%s/%04d-%s.%s", b->dump_dir, seq, clean, suffix);
  FILE *f = fopen(path, "w");
  if (!f) return LATHE_INVALID("dump: cannot write \"%s\": %s", path, strerror(errno));
  write(what, f);
  bool bad = ferror(f) != 0;
  bad |= fclose(f) != 0;
  return bad ? lathe_status_new(LATHE_STATUS_INTERNAL, "dump: writing \"%s\" failed", path) : NULL;
}

static void builder_text(const void *b, FILE *f) { lathe_dump_builder_text(b, f); }
static void builder_dot(const void *b, FILE *f) { lathe_dump_builder_dot(b, f); }
static void program_text(const void *p, FILE *f) { lathe_dump_program_text(p, f); }
static void program_dot(const void *p, FILE *f) { lathe_dump_program_dot(p, f); }

lathe_status_t lathe_profile_dump(lathe_backend_t b, const struct lathe_builder *src, const lathe_program *program,
                                  int *out_seq) {
  if (!b->dump_dir) return NULL;
  int seq = *out_seq = atomic_fetch_add(&b->dump_seq, 1);
  const char *name = src->name;
  LATHE_RETURN_IF_ERROR(dump_file(b, seq, name, "built.txt", src, builder_text));
  LATHE_RETURN_IF_ERROR(dump_file(b, seq, name, "built.dot", src, builder_dot));
  LATHE_RETURN_IF_ERROR(dump_file(b, seq, name, "program.txt", program, program_text));
  return dump_file(b, seq, name, "program.dot", program, program_dot);
}

typedef struct plan_ctx {
  lathe_backend_t b;
  const lathe_plan *plan;
} plan_ctx;
static void device_text(const void *p, FILE *f) {
  const plan_ctx *c = p;
  c->b->dev->dump_plan(c->b->dev_ctx, c->plan, f);
}

lathe_status_t lathe_profile_dump_plan(lathe_backend_t b, int seq, const char *name, const lathe_plan *plan) {
  if (!b->dump_dir || !b->dev->dump_plan) return NULL;
  plan_ctx c = {b, plan};
  return dump_file(b, seq, name, "device.txt", &c, device_text);
}

static pthread_mutex_t note_mu = PTHREAD_MUTEX_INITIALIZER;

void lathe_profile_note(const char *dir, const char *file, const char *fmt, ...) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  pthread_mutex_lock(&note_mu);
  FILE *f = fopen(path, "a");
  if (f) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
  }
  pthread_mutex_unlock(&note_mu);
}

void lathe_profile_transfer(lathe_backend_t b, const char *what, int device, size_t nbytes, int64_t t0) {
  char args[96];
  snprintf(args, sizeof args, "\"device\":%d,\"bytes\":%zu", device, nbytes);
  lathe_trace_complete(b->trace, what, "transfer", t0, lathe_trace_now(), args);
}

lathe_status_t lathe_backend_trace_flush(lathe_backend_t b) { return b ? lathe_trace_flush(b->trace) : NULL; }
bool lathe_backend_is_tracing(lathe_backend_t b) { return b && b->trace; }

static lathe_status_t memory_stats(lathe_backend_t b, int device, bool reset, lathe_memory_stats *out) {
  if (!b || !out) return LATHE_INVALID("MemoryStats: backend or out_stats is NULL");
  if (device < 0 || device >= b->n_devices)
    return LATHE_INVALID("MemoryStats: device %d out of range [0, %d)", device, b->n_devices);
  memset(out, 0, sizeof *out);
  if (!b->dev->memory_stats) return LATHE_UNIMPL("MemoryStats: %s keeps no memory counters", b->name);
  return b->dev->memory_stats(b->dev_ctx, device, reset, out);
}

lathe_status_t lathe_backend_memory_stats(lathe_backend_t b, int device, lathe_memory_stats *out) {
  return memory_stats(b, device, false, out);
}

lathe_status_t lathe_backend_memory_reset_peak(lathe_backend_t b, int device) {
  lathe_memory_stats s;
  return memory_stats(b, device, true, &s);
}
