/* status.c -- status objects: a code and a message, owned by the caller. */
#include <stdio.h>

#include "core.h"

struct lathe_status {
  lathe_status_code code;
  char *message;
};

/* Returned when even the status cannot be allocated; never freed. */
static struct lathe_status oom_status = {LATHE_STATUS_RESOURCE_EXHAUSTED, "out of memory"};

lathe_status_t lathe_status_newv(lathe_status_code code, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) n = 0;
  lathe_status_t s = malloc(sizeof *s);
  char *msg = malloc((size_t)n + 1);
  if (!s || !msg) {
    free(s);
    free(msg);
    return &oom_status;
  }
  vsnprintf(msg, (size_t)n + 1, fmt, ap);
  s->code = code;
  s->message = msg;
  return s;
}

lathe_status_t lathe_status_new(lathe_status_code code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lathe_status_t s = lathe_status_newv(code, fmt, ap);
  va_end(ap);
  return s;
}

lathe_status_t lathe_status_annotate(lathe_status_t status, const char *fmt, ...) {
  if (!status || status == &oom_status) return status;
  char prefix[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  lathe_status_t s = lathe_status_new(status->code, "%s: %s", prefix, status->message);
  if (s == &oom_status) return status;
  lathe_status_free(status);
  return s;
}

lathe_status_code lathe_status_code_of(lathe_status_t status) { return status ? status->code : LATHE_STATUS_OK; }

const char *lathe_status_message(lathe_status_t status) { return status ? status->message : ""; }

const char *lathe_status_code_name(lathe_status_code code) {
  switch (code) {
    case LATHE_STATUS_OK: return "OK";
    case LATHE_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case LATHE_STATUS_NOT_FOUND: return "NOT_FOUND";
    case LATHE_STATUS_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case LATHE_STATUS_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case LATHE_STATUS_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case LATHE_STATUS_INTERNAL: return "INTERNAL";
    case LATHE_STATUS_UNAVAILABLE: return "UNAVAILABLE";
  }
  return "UNKNOWN";
}

void lathe_status_free(lathe_status_t status) {
  if (!status || status == &oom_status) return;
  free(status->message);
  free(status);
}

void *lathe_aligned_alloc(size_t nbytes) {
  size_t n = (nbytes + 63) & ~(size_t)63;
  if (n == 0) n = 64;
  if (n < nbytes) return NULL; /* overflow */
  return aligned_alloc(64, n);
}

void lathe_aligned_free(void *p) { free(p); }
