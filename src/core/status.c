/* status.c -- status objects: a code and a message, owned by the caller. */
#include <ctype.h>
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

/* Whether key starts at p as a whole option name (not inside "xtoken="). */
static bool key_at(const char *m, const char *p, const char *key, size_t kl) {
  return !strncmp(p, key, kl) && (p == m || !(isalnum((unsigned char)p[-1]) || p[-1] == '_'));
}

lathe_status_t lathe_status_redact(lathe_status_t status, const char *key) {
  static const char shown[] = "<redacted>"; /* as lathe_config_redact writes it: redacting twice changes nothing */
  if (!status || status == &oom_status || !*key) return status;
  size_t kl = strlen(key), n = 0, sl = sizeof shown - 1;
  char *m = status->message;
  for (const char *p = m; *p; p++) n += key_at(m, p, key, kl);
  if (!n) return status;
  char *out = malloc(strlen(m) + sl * n + 1); /* each value becomes shown (it may have been empty) */
  if (!out) {
    status->message[0] = 0; /* never leak the secret, even without memory */
    return status;
  }
  size_t o = 0;
  for (const char *p = m; *p;) {
    if (key_at(m, p, key, kl)) {
      memcpy(out + o, key, kl), o += kl, p += kl;
      while (*p && !strchr(",\" );:", *p)) p++;
      memcpy(out + o, shown, sl), o += sl;
      continue;
    }
    out[o++] = *p++;
  }
  out[o] = 0;
  free(status->message);
  status->message = out;
  return status;
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
