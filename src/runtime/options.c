/* options.c -- one parser for every device's options: a config's "opt,opt=v" text checked
 * against the device's table (device.h, lathe_option_spec). */
#include <stdio.h>

#include "runtime.h"

void lathe_options_known(const lathe_option_spec *spec, int n, char *buf, size_t cap) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < n && at < cap; i++) {
    const lathe_option_spec *s = &spec[i];
    int w = s->type == LATHE_OPTION_FLAG ? snprintf(buf + at, cap - at, "%s%s", i ? ", " : "", s->name)
            : s->bare ? snprintf(buf + at, cap - at, "%s%s=%s (or %s alone)", i ? ", " : "", s->name, s->values, s->values)
                      : snprintf(buf + at, cap - at, "%s%s=%s", i ? ", " : "", s->name, s->values);
    if (w < 0) break;
    at += (size_t)w;
  }
}

/* Options whose values are secrets: never in a message. */
static const char *const secret_options[] = {"token"};

const char *lathe_config_redact(const char *text, size_t len, char *buf, size_t cap) {
  size_t at = 0;
  if (!cap) return buf;
  for (size_t i = 0; i < len && text[i] && at + 1 < cap;) {
    size_t kl = 0;
    if (i == 0 || strchr(":, \t", text[i - 1]))
      for (size_t k = 0; k < sizeof secret_options / sizeof secret_options[0] && !kl; k++) {
        size_t l = strlen(secret_options[k]);
        if (len - i > l && !strncmp(text + i, secret_options[k], l) && text[i + l] == '=') kl = l + 1;
      }
    if (kl) { /* the key, then the value up to the next option */
      int w = snprintf(buf + at, cap - at, "%.*s<redacted>", (int)kl, text + i);
      at = w < 0 ? at : at + (size_t)w < cap ? at + (size_t)w : cap - 1;
      for (i += kl; i < len && text[i] && text[i] != ','; i++) {}
    } else {
      buf[at++] = text[i++];
    }
  }
  buf[at] = 0;
  return buf;
}

/* The index of v (len bytes) among the '|'-separated values, or -1. */
static long choice_of(const char *values, const char *v, size_t len) {
  long idx = 0;
  for (const char *p = values;; idx++) {
    const char *bar = strchr(p, '|');
    size_t l = bar ? (size_t)(bar - p) : strlen(p);
    if (l == len && strncmp(p, v, len) == 0) return idx;
    if (!bar) return -1;
    p = bar + 1;
  }
}

/* INVALID_ARGUMENT "label: what; known options: ..." about option text p (len bytes). */
static lathe_status_t bad(const char *label, const lathe_option_spec *spec, int n, const char *p, size_t len,
                          const char *what) {
  char known[512];
  lathe_options_known(spec, n, known, sizeof known);
  /* a space where a comma belongs ("threads=2 fuse=0") is the usual slip */
  bool space = memchr(p, ' ', len) != NULL;
  return LATHE_INVALID("%s: %s%s; known options: %s", label, what,
                       space ? " (options are separated by commas, without spaces)" : "", known);
}

lathe_status_t lathe_options_parse(const char *label, const lathe_option_spec *spec, int n, const char *text,
                                   lathe_option_value *out) {
  memset(out, 0, (size_t)n * sizeof *out);
  for (const char *p = text ? text : ""; *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    const char *eq = memchr(p, '=', len);
    size_t klen = eq ? (size_t)(eq - p) : len;
    const char *v = eq ? eq + 1 : NULL;
    size_t vlen = eq ? len - klen - 1 : 0;
    int hit = -1;
    long choice = -1;
    for (int i = 0; i < n && hit < 0; i++) {
      if (strlen(spec[i].name) == klen && strncmp(spec[i].name, p, klen) == 0) hit = i;
      else if (!eq && spec[i].bare && (choice = choice_of(spec[i].values, p, len)) >= 0) hit = i, v = p, vlen = len;
    }
    char what[512], shown[320]; /* the option as quoted: secrets redacted */
    lathe_config_redact(p, len, shown, sizeof shown);
    if (len && hit < 0) {
      snprintf(what, sizeof what, "unknown option \"%s\"", shown);
      return bad(label, spec, n, p, len, what);
    }
    if (hit >= 0) {
      const lathe_option_spec *s = &spec[hit];
      lathe_option_value *o = &out[hit];
      if (s->type == LATHE_OPTION_FLAG) {
        if (eq) {
          snprintf(what, sizeof what, "%s takes no value, got \"%s\"", s->name, shown);
          return bad(label, spec, n, p, len, what);
        }
        o->value = 1;
      } else if (!v || vlen == 0 || vlen >= sizeof o->text) {
        snprintf(what, sizeof what, "%s needs a value (%s=%s, at most %zu characters), got \"%s\"", s->name, s->name,
                 s->values, sizeof o->text - 1, shown);
        return bad(label, spec, n, p, len, what);
      } else if (s->type == LATHE_OPTION_TEXT) {
        o->value = (long)vlen;
      } else if (s->type == LATHE_OPTION_INT) {
        char num[sizeof o->text], *e;
        memcpy(num, v, vlen);
        num[vlen] = 0;
        long x = strtol(num, &e, 10);
        if (*e || x < s->lo || x > s->hi) {
          snprintf(what, sizeof what, "%s must be an integer in [%ld, %ld], got \"%s\"", s->name, s->lo, s->hi,
                   lathe_config_redact(v, vlen, num, sizeof num)); /* "2 token=..." */
          return bad(label, spec, n, p, len, what);
        }
        o->value = x;
      } else {
        if (choice < 0) choice = choice_of(s->values, v, vlen);
        if (choice < 0) {
          char val[sizeof o->text + 16];
          snprintf(what, sizeof what, "%s must be one of %s, got \"%s\"", s->name, s->values,
                   lathe_config_redact(v, vlen, val, sizeof val));
          return bad(label, spec, n, p, len, what);
        }
        o->value = choice;
      }
      if (v) {
        memcpy(o->text, v, vlen);
        o->text[vlen] = 0;
      }
      o->set = true;
    }
    p += len;
    if (*p == ',') p++;
  }
  return NULL;
}
