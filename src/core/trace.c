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
  FILE *f;        /* NULL while no backend holds the trace */
  char *path;
  int refs;       /* backends holding it (under registry_mu) */
  int pid;
  bool first;     /* no event written yet */
  bool tail;      /* the tail is on disk at the end of the file (the next event overwrites it) */
  bool failed;    /* a write failed: flush reports it */
  int named[64];  /* tracks that are not threads (lathe_trace_complete_on), named already */
  int n_named;
  struct lathe_trace *next; /* the registry */
};

/* Every path traced in this process, by name: backends naming the same file (LATHE_TRACE, read by
 * every backend a program makes) share one writer, and a later backend continues the file that an
 * earlier one closed instead of truncating it. The entries stay for the process's life (one small
 * struct per distinct path). Timestamps count from the first trace the process opened. */
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static lathe_trace *registry;
static int64_t t_zero;

int64_t lathe_trace_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

_Thread_local lathe_trace *lathe_trace_current;

/* Small thread numbers, in order of first event, read better than pthread_t values. */
static atomic_int next_tid = 1;
static _Thread_local int my_tid;
static int tid(void) {
  if (!my_tid) my_tid = atomic_fetch_add(&next_tid, 1);
  return my_tid;
}

/* t's file, opened afresh ("w", header written) or continued ("r+", positioned at its tail). */
static lathe_status_t open_file(lathe_trace *t, const char *option, bool fresh) {
  if (!fresh && (t->f = fopen(t->path, "r+"))) {
    char tail[sizeof TAIL] = {0};
    if (!fseek(t->f, -(long)(sizeof TAIL - 1), SEEK_END) && fread(tail, 1, sizeof TAIL - 1, t->f) == sizeof TAIL - 1 &&
        !strcmp(tail, TAIL)) {
      t->tail = true;
      return NULL;
    }
    fclose(t->f); /* not the file this process wrote (changed since): start it again */
  }
  if (!(t->f = fopen(t->path, "w"))) return LATHE_INVALID("%s: cannot write \"%s\": %s", option, t->path, strerror(errno));
  t->first = true;
  t->n_named = 0;
  t->tail = t->failed = false;
  if (fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", t->f) < 0) t->failed = true;
  return NULL;
}

lathe_status_t lathe_trace_open(const char *path, const char *option, lathe_trace **out) {
  *out = NULL;
  if (!path || !*path) return LATHE_INVALID("%s: empty file name", option);
  pthread_mutex_lock(&registry_mu);
  if (!t_zero) t_zero = lathe_trace_now();
  lathe_trace *t = registry;
  while (t && strcmp(t->path, path)) t = t->next;
  lathe_status_t st = NULL;
  if (t && t->refs) {
    t->refs++;
  } else if (t) {
    if (!(st = open_file(t, option, false))) t->refs = 1;
  } else {
    t = calloc(1, sizeof *t);
    size_t n = strlen(path) + 1;
    if (t) t->path = malloc(n);
    if (!t || !t->path || pthread_mutex_init(&t->mu, NULL)) {
      if (t) free(t->path);
      free(t);
      pthread_mutex_unlock(&registry_mu);
      return LATHE_OOM("trace");
    }
    memcpy(t->path, path, n);
    t->pid = (int)getpid();
    if ((st = open_file(t, option, true))) {
      pthread_mutex_destroy(&t->mu);
      free(t->path);
      free(t);
    } else {
      t->refs = 1;
      t->next = registry;
      registry = t;
    }
  }
  pthread_mutex_unlock(&registry_mu);
  if (!st) *out = t;
  return st;
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

/* With mu held: the first event of a track that is not a thread names it (a metadata event). */
static void name_track(lathe_trace *t, int track, const char *track_name) {
  for (int i = 0; i < t->n_named; i++)
    if (t->named[i] == track) return;
  if (t->n_named < (int)(sizeof t->named / sizeof t->named[0])) t->named[t->n_named++] = track;
  char nm[128];
  size_t a = 0;
  lathe_json_escape(nm, sizeof nm, &a, track_name);
  begin_event(t);
  if (fprintf(t->f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", t->pid,
              track, nm) < 0)
    t->failed = true;
}

static void put_tail(lathe_trace *t) {
  if (t->tail) return;
  if (fputs(TAIL, t->f) < 0) t->failed = true;
  t->tail = true;
}

/* The tail on disk now; whether any write so far failed. */
static bool sync_file(lathe_trace *t) {
  pthread_mutex_lock(&t->mu);
  if (t->f) {
    put_tail(t);
    if (fflush(t->f)) t->failed = true;
  }
  bool failed = t->failed;
  pthread_mutex_unlock(&t->mu);
  return failed;
}

lathe_status_t lathe_trace_flush(lathe_trace *t) {
  if (!t || !sync_file(t)) return NULL;
  return lathe_status_new(LATHE_STATUS_INTERNAL, "trace: writing \"%s\" failed", t->path);
}

void lathe_trace_checkpoint(lathe_trace *t) {
  if (t) sync_file(t);
}

void lathe_trace_close(lathe_trace *t) {
  if (!t) return;
  pthread_mutex_lock(&registry_mu);
  if (--t->refs == 0) {
    pthread_mutex_lock(&t->mu);
    put_tail(t);
    fclose(t->f);
    t->f = NULL;
    pthread_mutex_unlock(&t->mu);
  }
  pthread_mutex_unlock(&registry_mu);
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

static void complete(lathe_trace *t, int th, const char *track_name, const char *name, const char *cat, int64_t t0,
                     int64_t t1, const char *args) {
  char nm[256], ct[64];
  size_t a = 0, b = 0;
  lathe_json_escape(nm, sizeof nm, &a, name);
  lathe_json_escape(ct, sizeof ct, &b, cat);
  pthread_mutex_lock(&t->mu);
  if (track_name) name_track(t, th, track_name);
  begin_event(t);
  /* microseconds with nanosecond decimals: Perfetto and chrome://tracing read fractions */
  int64_t ts = t0 > t_zero ? t0 - t_zero : 0, dur = t1 > t0 ? t1 - t0 : 0;
  if (fprintf(t->f, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%lld.%03lld,\"dur\":%lld.%03lld,\"pid\":%d,\"tid\":%d",
              nm, ct, (long long)(ts / 1000), (long long)(ts % 1000), (long long)(dur / 1000), (long long)(dur % 1000),
              t->pid, th) < 0)
    t->failed = true;
  if (args && *args) fprintf(t->f, ",\"args\":{%s}", args);
  if (fputc('}', t->f) == EOF) t->failed = true;
  pthread_mutex_unlock(&t->mu);
}

void lathe_trace_complete(lathe_trace *t, const char *name, const char *cat, int64_t t0, int64_t t1, const char *args) {
  complete(t, tid(), NULL, name, cat, t0, t1, args);
}

void lathe_trace_complete_on(lathe_trace *t, int track, const char *track_name, const char *name, const char *cat,
                             int64_t t0, int64_t t1, const char *args) {
  complete(t, track, track_name, name, cat, t0, t1, args);
}

void lathe_trace_counter(lathe_trace *t, const char *name, int64_t ts, const char *series, int64_t value) {
  int th = tid();
  pthread_mutex_lock(&t->mu);
  begin_event(t);
  ts = ts > t_zero ? ts - t_zero : 0;
  if (fprintf(t->f, "{\"name\":\"%s\",\"ph\":\"C\",\"ts\":%lld.%03lld,\"pid\":%d,\"tid\":%d,\"args\":{\"%s\":%lld}}", name,
              (long long)(ts / 1000), (long long)(ts % 1000), t->pid, th, series, (long long)value) < 0)
    t->failed = true;
  pthread_mutex_unlock(&t->mu);
}
