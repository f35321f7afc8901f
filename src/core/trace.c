/* trace.c -- the trace-event writer (trace.h). */
#include "trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

static const char TAIL[] = "\n]}\n";

struct lathe_trace {
  pthread_mutex_t mu;
  FILE *f;
  char *path;
  int pid;
  bool first;     /* no event written yet */
  bool tail;      /* the tail is on disk at the current position (to be overwritten) */
  bool failed;    /* a write failed: flush reports it */
  int64_t t0;     /* timestamps are relative to the trace's opening */
};

int64_t lathe_trace_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Small thread numbers, in order of first event, read better than pthread_t values. */
static atomic_int next_tid = 1;
static _Thread_local int my_tid;
static int tid(void) {
  if (!my_tid) my_tid = atomic_fetch_add(&next_tid, 1);
  return my_tid;
}

lathe_status_t lathe_trace_open(const char *path, const char *option, lathe_trace **out) {
  *out = NULL;
  if (!path || !*path) return LATHE_INVALID("%s: empty file name", option);
  FILE *f = fopen(path, "w");
  if (!f) return LATHE_INVALID("%s: cannot write \"%s\": %s", option, path, strerror(errno));
  lathe_trace *t = calloc(1, sizeof *t);
  size_t n = strlen(path) + 1;
  if (t) t->path = malloc(n);
  if (!t || !t->path || pthread_mutex_init(&t->mu, NULL)) {
    if (t) free(t->path);
    free(t);
    fclose(f);
    remove(path);
    return LATHE_OOM("trace");
  }
  memcpy(t->path, path, n);
  t->f = f;
  t->pid = (int)getpid();
  t->first = true;
  t->t0 = lathe_trace_now();
  if (fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", f) < 0) t->failed = true;
  *out = t;
  return NULL;
}

/* With mu held: start an event (separator; the tail, if on disk, is overwritten from here). */
static void begin_event(lathe_trace *t) {
  if (t->tail) {
    fseek(t->f, -(long)(sizeof TAIL - 1), SEEK_END);
    t->tail = false;
  }
  if (fputs(t->first ? "\n" : ",\n", t->f) < 0) t->failed = true;
  t->first = false;
}

static void put_tail(lathe_trace *t) {
  if (t->tail) return;
  if (fputs(TAIL, t->f) < 0) t->failed = true;
  t->tail = true;
}

lathe_status_t lathe_trace_flush(lathe_trace *t) {
  if (!t) return NULL;
  pthread_mutex_lock(&t->mu);
  put_tail(t);
  if (fflush(t->f)) t->failed = true;
  bool failed = t->failed;
  pthread_mutex_unlock(&t->mu);
  return failed ? lathe_status_new(LATHE_STATUS_INTERNAL, "trace: writing \"%s\" failed", t->path) : NULL;
}

void lathe_trace_close(lathe_trace *t) {
  if (!t) return;
  put_tail(t);
  fclose(t->f);
  pthread_mutex_destroy(&t->mu);
  free(t->path);
  free(t);
}

void lathe_bufprintf(char *buf, size_t cap, size_t *at, const char *fmt, ...) {
  if (*at >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + *at, cap - *at, fmt, ap);
  va_end(ap);
  if (w > 0) *at = *at + (size_t)w < cap ? *at + (size_t)w : cap - 1;
}

char *lathe_json_escape(char *buf, size_t cap, size_t *at, const char *s) {
  for (; s && *s && *at + 7 < cap; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') buf[(*at)++] = '\\', buf[(*at)++] = (char)c;
    else if (c < 0x20) *at += (size_t)snprintf(buf + *at, cap - *at, "\\u%04x", c);
    else buf[(*at)++] = (char)c;
  }
  if (*at < cap) buf[*at] = 0;
  return buf;
}

void lathe_trace_complete(lathe_trace *t, const char *name, const char *cat, int64_t t0, int64_t t1, const char *args) {
  char nm[256], ct[64];
  size_t a = 0, b = 0;
  lathe_json_escape(nm, sizeof nm, &a, name);
  lathe_json_escape(ct, sizeof ct, &b, cat);
  int th = tid();
  pthread_mutex_lock(&t->mu);
  begin_event(t);
  /* microseconds with nanosecond decimals: Perfetto and chrome://tracing read fractions */
  int64_t ts = t0 > t->t0 ? t0 - t->t0 : 0, dur = t1 > t0 ? t1 - t0 : 0;
  if (fprintf(t->f, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%lld.%03lld,\"dur\":%lld.%03lld,\"pid\":%d,\"tid\":%d",
              nm, ct, (long long)(ts / 1000), (long long)(ts % 1000), (long long)(dur / 1000), (long long)(dur % 1000),
              t->pid, th) < 0)
    t->failed = true;
  if (args && *args) fprintf(t->f, ",\"args\":{%s}", args);
  if (fputc('}', t->f) == EOF) t->failed = true;
  pthread_mutex_unlock(&t->mu);
}

void lathe_trace_counter(lathe_trace *t, const char *name, int64_t ts, const char *series, int64_t value) {
  int th = tid();
  pthread_mutex_lock(&t->mu);
  begin_event(t);
  ts = ts > t->t0 ? ts - t->t0 : 0;
  if (fprintf(t->f, "{\"name\":\"%s\",\"ph\":\"C\",\"ts\":%lld.%03lld,\"pid\":%d,\"tid\":%d,\"args\":{\"%s\":%lld}}", name,
              (long long)(ts / 1000), (long long)(ts % 1000), t->pid, th, series, (long long)value) < 0)
    t->failed = true;
  pthread_mutex_unlock(&t->mu);
}
