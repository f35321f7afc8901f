/* coordinator.c -- the job's key-value store: a TCP server in process 0 and a client in every
 * process (after PyTorch's TCPStore). The server listens only on the address it is given; a
 * connection's first message must be HELLO with the job's token (else it is answered with an
 * error and closed, and nothing else notices); each process index joins once and must agree on
 * the process count. SET/GET/BARRIER serve rendezvous; every wait ends at the job's timeout,
 * and once a joined process's connection drops without BYE every pending and later wait fails
 * with a message naming it. One thread per connection (a job has few processes). */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "job.h"

/* ---- wire format ---- */

static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}
static void put32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* the fields of each type: s = string, k = key (string, no NUL, bounded), u = integer */
static const char *fields_of(int type) {
  switch (type) {
    case LATHE_COORD_HELLO: return "suu";
    case LATHE_COORD_SET: return "ks";
    case LATHE_COORD_GET: return "k";
    case LATHE_COORD_BARRIER: return "k";
    case LATHE_COORD_BYE: return "";
    case LATHE_COORD_OK: return "s";
    case LATHE_COORD_ERR: return "s";
    default: return NULL;
  }
}

lathe_status_t lathe_coord_parse(const uint8_t *body, size_t n, lathe_coord_msg *m) {
  memset(m, 0, sizeof *m);
  if (!body || n < 1) return LATHE_INVALID("coordinator: empty message");
  if (n > LATHE_COORD_MAX_FRAME) return LATHE_INVALID("coordinator: message of %zu bytes is too long", n);
  const char *f = fields_of(body[0]);
  if (!f) return LATHE_INVALID("coordinator: unknown message type %d", body[0]);
  m->type = body[0];
  size_t at = 1;
  int ns = 0, nu = 0;
  for (; *f; f++) {
    if (n - at < 4) return LATHE_INVALID("coordinator: message type %d ends inside a field", m->type);
    uint32_t v = get32(body + at);
    at += 4;
    if (*f == 'u') {
      if (nu++ == 0) m->u1 = v;
      else m->u2 = v;
      continue;
    }
    if (v > n - at) return LATHE_INVALID("coordinator: a field of %u bytes overruns its message", v);
    if (*f == 'k') {
      if (v == 0 || v > LATHE_COORD_MAX_KEY) return LATHE_INVALID("coordinator: a key of %u bytes (1..%d allowed)", v, LATHE_COORD_MAX_KEY);
      if (memchr(body + at, 0, v)) return LATHE_INVALID("coordinator: a key contains a NUL byte");
    }
    if (ns++ == 0) {
      m->a = body + at;
      m->a_len = v;
    } else {
      m->b = body + at;
      m->b_len = v;
    }
    at += v;
  }
  if (at != n) return LATHE_INVALID("coordinator: %zu bytes after the end of a type %d message", n - at, m->type);
  return NULL;
}

lathe_status_t lathe_coord_encode(const lathe_coord_msg *m, uint8_t **out, size_t *n) {
  const char *f = fields_of(m->type);
  if (!f) return LATHE_INVALID("coordinator: unknown message type %d", m->type);
  size_t len = 1;
  int ns = 0;
  for (const char *q = f; *q; q++) len += 4 + (*q == 'u' ? 0 : ns++ == 0 ? m->a_len : m->b_len);
  if (len > LATHE_COORD_MAX_FRAME) return LATHE_INVALID("coordinator: a message of %zu bytes is too long", len);
  uint8_t *b = malloc(len + 4);
  if (!b) return LATHE_OOM("coordinator");
  put32(b, (uint32_t)len);
  size_t at = 4;
  b[at++] = (uint8_t)m->type;
  ns = 0;
  int nu = 0;
  for (; *f; f++) {
    if (*f == 'u') {
      put32(b + at, nu++ == 0 ? m->u1 : m->u2);
      at += 4;
      continue;
    }
    const uint8_t *p = ns == 0 ? m->a : m->b;
    uint32_t l = ns++ == 0 ? m->a_len : m->b_len;
    put32(b + at, l);
    at += 4;
    if (l) memcpy(b + at, p, l);
    at += l;
  }
  *out = b;
  *n = at;
  return NULL;
}

lathe_status_t lathe_coord_split_address(const char *address, char *host, size_t host_cap, char *port, size_t port_cap) {
  const char *colon = address ? strrchr(address, ':') : NULL;
  if (!colon || colon == address || !colon[1])
    return LATHE_INVALID("job: coordinator address \"%s\" is not HOST:PORT", address ? address : "");
  const char *h = address, *he = colon;
  if (*h == '[') { /* [v6]:port */
    if (he[-1] != ']') return LATHE_INVALID("job: coordinator address \"%s\" is not [HOST]:PORT", address);
    h++;
    he--;
  }
  size_t hl = (size_t)(he - h), pl = strlen(colon + 1);
  if (hl == 0 || hl >= host_cap || pl >= port_cap) return LATHE_INVALID("job: coordinator address \"%s\" is not HOST:PORT", address);
  for (const char *q = colon + 1; *q; q++)
    if (*q < '0' || *q > '9') return LATHE_INVALID("job: coordinator port in \"%s\" is not a number", address);
  memcpy(host, h, hl);
  host[hl] = 0;
  memcpy(port, colon + 1, pl + 1);
  return NULL;
}

/* ---- sockets ---- */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads or writes exactly n bytes; deadline_ms < 0: no deadline. 0 on success, -1 on EOF, error
 * or timeout (errno ETIMEDOUT). */
static int io_all(int fd, void *buf, size_t n, bool writing, int64_t deadline_ms) {
  uint8_t *p = buf;
  while (n) {
    if (deadline_ms >= 0) {
      int64_t left = deadline_ms - now_ms();
      if (left <= 0) {
        errno = ETIMEDOUT;
        return -1;
      }
      struct pollfd pf = {fd, (short)(writing ? POLLOUT : POLLIN), 0};
      int r = poll(&pf, 1, (int)(left > 1000000 ? 1000000 : left));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return -1;
      if (r == 0) continue;
    }
    ssize_t k = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      if (k == 0) errno = ECONNRESET;
      return -1;
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* One frame's body, malloc'ed; -1 on EOF/error/timeout, -2 on a bad length. */
static int read_frame(int fd, int64_t deadline_ms, uint8_t **body, size_t *n) {
  uint8_t h[4];
  if (io_all(fd, h, 4, false, deadline_ms)) return -1;
  uint32_t len = get32(h);
  if (len < 1 || len > LATHE_COORD_MAX_FRAME) return -2;
  uint8_t *b = malloc(len);
  if (!b) return -1;
  if (io_all(fd, b, len, false, deadline_ms)) {
    free(b);
    return -1;
  }
  *body = b;
  *n = len;
  return 0;
}

static int send_msg(int fd, const lathe_coord_msg *m) {
  uint8_t *b;
  size_t n;
  lathe_status_t st = lathe_coord_encode(m, &b, &n);
  if (st) {
    lathe_status_free(st);
    return -1;
  }
  int r = io_all(fd, b, n, true, now_ms() + 10000);
  free(b);
  return r;
}

static int send_reply(int fd, bool ok, const void *v, size_t n) {
  lathe_coord_msg m = {.type = ok ? LATHE_COORD_OK : LATHE_COORD_ERR, .a = v, .a_len = (uint32_t)n};
  return send_msg(fd, &m);
}

static int send_err(int fd, const char *fmt, ...) LATHE_PRINTF(2, 3);
static int send_err(int fd, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return send_reply(fd, false, msg, strlen(msg));
}

/* ---- server ---- */

typedef struct kv {
  struct kv *next;
  char *key;
  uint8_t *value;
  size_t n;
} kv;

typedef struct barrier {
  struct barrier *next;
  char *name;
  int arrived;
} barrier;

typedef struct conn {
  struct conn *next;
  struct lathe_coord_server *s;
  int fd;
  pthread_t thread;
  bool done; /* its thread has finished */
} conn;

struct lathe_coord_server {
  int fd;
  pthread_t accept_thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  char token[256];
  int processes, timeout_ms;
  bool *joined, *left; /* per process */
  char failed[320];    /* set once a joined process dropped: the job is over */
  bool stopping;
  int refused;
  kv *kvs;
  barrier *barriers;
  conn *conns;
};

static kv *find_kv(lathe_coord_server *s, const char *key) {
  for (kv *e = s->kvs; e; e = e->next)
    if (!strcmp(e->key, key)) return e;
  return NULL;
}

static void deadline_ts(int64_t ms_from_now, struct timespec *ts) {
  clock_gettime(CLOCK_REALTIME, ts);
  ts->tv_sec += ms_from_now / 1000;
  ts->tv_nsec += (ms_from_now % 1000) * 1000000;
  if (ts->tv_nsec >= 1000000000) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000;
  }
}

/* Serves one joined process's requests until it leaves; returns whether it said BYE. */
static bool serve(lathe_coord_server *s, conn *c, int process) {
  for (;;) {
    uint8_t *body = NULL;
    size_t n = 0;
    int r = read_frame(c->fd, -1, &body, &n);
    if (r == -2) send_err(c->fd, "coordinator: bad message length");
    if (r) return false;
    lathe_coord_msg m;
    lathe_status_t st = lathe_coord_parse(body, n, &m);
    if (st) {
      send_err(c->fd, "%s", lathe_status_message(st));
      lathe_status_free(st);
      free(body);
      return false; /* a malformed message ends the connection */
    }
    char key[LATHE_COORD_MAX_KEY + 1] = {0};
    if (m.type == LATHE_COORD_SET || m.type == LATHE_COORD_GET || m.type == LATHE_COORD_BARRIER) memcpy(key, m.a, m.a_len);
    pthread_mutex_lock(&s->mu);
    int64_t deadline = now_ms() + s->timeout_ms;
    if (m.type == LATHE_COORD_BYE) {
      pthread_mutex_unlock(&s->mu);
      send_reply(c->fd, true, NULL, 0);
      free(body);
      return true;
    } else if (s->failed[0]) {
      pthread_mutex_unlock(&s->mu);
      send_err(c->fd, "%s", s->failed);
    } else if (m.type == LATHE_COORD_SET) {
      kv *e = find_kv(s, key);
      uint8_t *v = malloc(m.b_len ? m.b_len : 1);
      if (!e && v) {
        e = calloc(1, sizeof *e);
        if (e) e->key = strdup(key);
        if (e && e->key) {
          e->next = s->kvs;
          s->kvs = e;
        } else {
          if (e) free(e);
          e = NULL;
        }
      }
      bool ok = e && v;
      if (ok) {
        free(e->value);
        if (m.b_len) memcpy(v, m.b, m.b_len);
        e->value = v;
        e->n = m.b_len;
        pthread_cond_broadcast(&s->cv);
      } else {
        free(v);
      }
      pthread_mutex_unlock(&s->mu);
      if (ok) send_reply(c->fd, true, NULL, 0);
      else send_err(c->fd, "coordinator: out of memory");
    } else if (m.type == LATHE_COORD_GET) {
      kv *e;
      while (!(e = find_kv(s, key)) && !s->failed[0] && !s->stopping && now_ms() < deadline) {
        struct timespec ts;
        deadline_ts(deadline - now_ms(), &ts);
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
      }
      uint8_t *v = e ? malloc(e->n ? e->n : 1) : NULL;
      size_t vn = e ? e->n : 0;
      if (v && vn) memcpy(v, e->value, vn);
      char err[400];
      snprintf(err, sizeof err, "%s", s->failed[0] ? s->failed : "");
      pthread_mutex_unlock(&s->mu);
      if (v) send_reply(c->fd, true, v, vn);
      else if (e) send_err(c->fd, "coordinator: out of memory");
      else if (err[0]) send_err(c->fd, "%s", err);
      else send_err(c->fd, "job: timed out after %d ms waiting for key \"%s\" (is every process of the job running?)", s->timeout_ms, key);
      free(v);
    } else if (m.type == LATHE_COORD_BARRIER) {
      barrier *b = s->barriers;
      while (b && strcmp(b->name, key)) b = b->next;
      if (!b && (b = calloc(1, sizeof *b)) && (b->name = strdup(key))) {
        b->next = s->barriers;
        s->barriers = b;
      } else if (b && !b->name) {
        free(b);
        b = NULL;
      }
      if (b && ++b->arrived == s->processes) pthread_cond_broadcast(&s->cv);
      while (b && b->arrived < s->processes && !s->failed[0] && !s->stopping && now_ms() < deadline) {
        struct timespec ts;
        deadline_ts(deadline - now_ms(), &ts);
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
      }
      int arrived = b ? b->arrived : 0;
      char err[400];
      snprintf(err, sizeof err, "%s", s->failed[0] ? s->failed : "");
      pthread_mutex_unlock(&s->mu);
      if (!b) send_err(c->fd, "coordinator: out of memory");
      else if (arrived >= s->processes) send_reply(c->fd, true, NULL, 0);
      else if (err[0]) send_err(c->fd, "%s", err);
      else send_err(c->fd, "job: barrier \"%s\" timed out after %d ms with %d of %d processes arrived", key, s->timeout_ms, arrived, s->processes);
    } else {
      pthread_mutex_unlock(&s->mu);
      send_err(c->fd, "coordinator: unexpected message type %d", m.type);
    }
    free(body);
    (void)process;
  }
}

static void *conn_main(void *arg) {
  conn *c = arg;
  lathe_coord_server *s = c->s;
  uint8_t *body = NULL;
  size_t n = 0;
  int process = -1;
  /* the first message, within the timeout: HELLO with the token */
  int r = read_frame(c->fd, now_ms() + s->timeout_ms, &body, &n);
  lathe_coord_msg m;
  lathe_status_t st = r ? LATHE_INVALID("coordinator: no HELLO") : lathe_coord_parse(body, n, &m);
  bool ok = !st && m.type == LATHE_COORD_HELLO && m.a_len == strlen(s->token) && !memcmp(m.a, s->token, m.a_len);
  if (!ok) {
    if (r == 0) send_err(c->fd, "job: connection refused: %s", st ? lathe_status_message(st) : "wrong job token");
    else if (r == -2) send_err(c->fd, "job: connection refused: bad message length");
    pthread_mutex_lock(&s->mu);
    s->refused++;
    pthread_mutex_unlock(&s->mu);
  } else {
    pthread_mutex_lock(&s->mu);
    int p = (int)m.u1, np = (int)m.u2;
    char err[320] = {0};
    if (np != s->processes)
      snprintf(err, sizeof err, "job: process %d says the job has %d processes, the coordinator (process 0) says %d", p, np, s->processes);
    else if (p < 0 || p >= s->processes)
      snprintf(err, sizeof err, "job: process index %d is outside 0..%d", p, s->processes - 1);
    else if (s->joined[p])
      snprintf(err, sizeof err, "job: process index %d has already joined (two processes with the same index)", p);
    else if (s->failed[0])
      snprintf(err, sizeof err, "%s", s->failed);
    else
      s->joined[p] = true, process = p;
    pthread_mutex_unlock(&s->mu);
    if (err[0]) send_err(c->fd, "%s", err);
    else send_reply(c->fd, true, NULL, 0);
  }
  lathe_status_free(st);
  free(body);
  if (process >= 0) {
    bool bye = serve(s, c, process);
    pthread_mutex_lock(&s->mu);
    s->left[process] = true;
    if (!bye && !s->failed[0] && !s->stopping)
      snprintf(s->failed, sizeof s->failed,
               "job: process %d left the job (its connection to the coordinator closed): the job cannot continue", process);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
  }
  pthread_mutex_lock(&s->mu);
  /* closed now, not when the next connection is accepted: a client turned away (bad length,
   * no HELLO in time, wrong token) or gone sees its connection end at once. Under the lock, so
   * nothing shuts down an fd number that another socket has since been given. */
  close(c->fd);
  c->fd = -1;
  c->done = true;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static void *accept_main(void *arg) {
  lathe_coord_server *s = arg;
  for (;;) {
    int fd = accept(s->fd, NULL, NULL);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      pthread_mutex_lock(&s->mu);
      bool stop = s->stopping;
      pthread_mutex_unlock(&s->mu);
      if (stop) return NULL;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        usleep(10000);
        continue;
      }
      return NULL;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn *c = calloc(1, sizeof *c);
    pthread_mutex_lock(&s->mu);
    if (!c || s->stopping) {
      pthread_mutex_unlock(&s->mu);
      free(c);
      close(fd);
      continue;
    }
    c->s = s;
    c->fd = fd;
    if (pthread_create(&c->thread, NULL, conn_main, c)) {
      pthread_mutex_unlock(&s->mu);
      free(c);
      close(fd);
      continue;
    }
    c->next = s->conns;
    s->conns = c;
    /* reap finished connections (refused ones can come often) */
    for (conn **pp = &s->conns; *pp;) {
      conn *d = *pp;
      if (d->done && d != c) {
        *pp = d->next;
        pthread_join(d->thread, NULL); /* its thread closed its fd */
        free(d);
      } else {
        pp = &d->next;
      }
    }
    pthread_mutex_unlock(&s->mu);
  }
}

lathe_status_t lathe_coord_server_new(const char *address, const char *token, int processes, int timeout_ms,
                                      lathe_coord_server **out) {
  char host[256], port[16];
  LATHE_RETURN_IF_ERROR(lathe_coord_split_address(address, host, sizeof host, port, sizeof port));
  if (strlen(token) >= 256) return LATHE_INVALID("job: the token is longer than 255 bytes");
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
  int gr = getaddrinfo(host, port, &hints, &ai);
  if (gr) return lathe_status_new(LATHE_STATUS_UNAVAILABLE, "job: coordinator address %s: %s", address, gai_strerror(gr));
  int fd = -1, err = 0;
  for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) || listen(fd, 128)) {
      err = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(ai);
  if (fd < 0)
    return lathe_status_new(LATHE_STATUS_UNAVAILABLE, "job: the coordinator cannot listen on %s: %s", address, strerror(err));
  lathe_coord_server *s = calloc(1, sizeof *s);
  if (s) {
    s->joined = calloc((size_t)processes, sizeof(bool));
    s->left = calloc((size_t)processes, sizeof(bool));
  }
  if (!s || !s->joined || !s->left || pthread_mutex_init(&s->mu, NULL) || pthread_cond_init(&s->cv, NULL)) {
    if (s) free(s->joined), free(s->left);
    free(s);
    close(fd);
    return LATHE_OOM("job: coordinator");
  }
  s->fd = fd;
  snprintf(s->token, sizeof s->token, "%s", token);
  s->processes = processes;
  s->timeout_ms = timeout_ms;
  if (pthread_create(&s->accept_thread, NULL, accept_main, s)) {
    close(fd);
    free(s->joined);
    free(s->left);
    free(s);
    return LATHE_OOM("job: coordinator thread");
  }
  *out = s;
  return NULL;
}

int lathe_coord_server_refused(lathe_coord_server *s) {
  pthread_mutex_lock(&s->mu);
  int r = s->refused;
  pthread_mutex_unlock(&s->mu);
  return r;
}

void lathe_coord_server_free(lathe_coord_server *s, int timeout_ms) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  int64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    bool busy = false;
    for (int p = 0; p < s->processes; p++) busy |= s->joined[p] && !s->left[p];
    if (!busy || s->failed[0] || now_ms() >= deadline) break;
    struct timespec ts;
    deadline_ts(deadline - now_ms() < 200 ? deadline - now_ms() : 200, &ts);
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
  }
  s->stopping = true;
  pthread_cond_broadcast(&s->cv);
  for (conn *c = s->conns; c; c = c->next)
    if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
  pthread_mutex_unlock(&s->mu);
  shutdown(s->fd, SHUT_RDWR);
  pthread_join(s->accept_thread, NULL);
  close(s->fd);
  while (s->conns) {
    conn *c = s->conns;
    s->conns = c->next;
    pthread_join(c->thread, NULL); /* its thread closed its fd */
    free(c);
  }
  while (s->kvs) {
    kv *e = s->kvs;
    s->kvs = e->next;
    free(e->key);
    free(e->value);
    free(e);
  }
  while (s->barriers) {
    barrier *b = s->barriers;
    s->barriers = b->next;
    free(b->name);
    free(b);
  }
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s->joined);
  free(s->left);
  free(s);
}

/* ---- client ---- */

struct lathe_coord_client {
  int fd;
  int timeout_ms;
  char address[256];
  pthread_mutex_t mu; /* one request at a time */
};

static lathe_status_t reply_status(const char *address, const lathe_coord_msg *m) {
  return lathe_status_new(LATHE_STATUS_UNAVAILABLE, "%.*s (coordinator %s)", (int)m->a_len, (const char *)m->a, address);
}

lathe_status_t lathe_coord_client_call(lathe_coord_client *c, const lathe_coord_msg *req, void **value, size_t *n) {
  if (value) *value = NULL;
  if (n) *n = 0;
  pthread_mutex_lock(&c->mu);
  lathe_status_t st = NULL;
  uint8_t *body = NULL;
  size_t bn = 0;
  if (c->fd < 0) st = lathe_status_new(LATHE_STATUS_UNAVAILABLE, "job: the connection to the coordinator %s is closed", c->address);
  else if (send_msg(c->fd, req))
    st = lathe_status_new(LATHE_STATUS_UNAVAILABLE, "job: cannot reach the coordinator %s: %s", c->address, strerror(errno));
  /* the server answers every wait by the job's timeout: allow it that, and some */
  else if (read_frame(c->fd, now_ms() + c->timeout_ms + 5000, &body, &bn))
    st = lathe_status_new(LATHE_STATUS_UNAVAILABLE, "job: no answer from the coordinator %s (%s): did process 0 stop?", c->address,
                          errno == ETIMEDOUT ? "timed out" : "connection closed");
  lathe_coord_msg m = {0};
  if (!st) st = lathe_coord_parse(body, bn, &m);
  if (!st && m.type == LATHE_COORD_ERR) st = reply_status(c->address, &m);
  else if (!st && m.type != LATHE_COORD_OK) st = LATHE_INVALID("job: the coordinator answered with message type %d", m.type);
  if (!st && value) {
    *value = malloc(m.a_len ? m.a_len : 1);
    if (!*value) st = LATHE_OOM("job");
    else if (m.a_len) memcpy(*value, m.a, m.a_len);
    if (n) *n = m.a_len;
  }
  if (st && c->fd >= 0 && lathe_status_code_of(st) == LATHE_STATUS_UNAVAILABLE && !(m.type == LATHE_COORD_ERR)) {
    close(c->fd); /* the stream is out of step: no further request can be trusted on it */
    c->fd = -1;
  }
  free(body);
  pthread_mutex_unlock(&c->mu);
  return st;
}

lathe_status_t lathe_coord_client_new(const char *address, const char *token, int process, int processes,
                                      int timeout_ms, lathe_coord_client **out, char *local_host, size_t cap) {
  char host[256], port[16];
  LATHE_RETURN_IF_ERROR(lathe_coord_split_address(address, host, sizeof host, port, sizeof port));
  int64_t deadline = now_ms() + timeout_ms;
  int fd = -1, err = 0;
  /* process 0's coordinator may not be listening yet: retry until the timeout */
  while (fd < 0) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
    int gr = getaddrinfo(host, port, &hints, &ai);
    if (gr && gr != EAI_AGAIN)
      return lathe_status_new(LATHE_STATUS_UNAVAILABLE, "job: coordinator address %s: %s", address, gai_strerror(gr));
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
      fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen)) {
        err = errno;
        close(fd);
        fd = -1;
      }
    }
    if (ai) freeaddrinfo(ai);
    if (fd >= 0) break;
    if (now_ms() + 100 >= deadline)
      return lathe_status_new(LATHE_STATUS_UNAVAILABLE, "job: the coordinator %s is unreachable after %d ms (%s); is process 0 running?",
                              address, timeout_ms, strerror(err ? err : ETIMEDOUT));
    usleep(100000);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (local_host && cap) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) || getnameinfo((struct sockaddr *)&ss, sl, local_host, (socklen_t)cap, NULL, 0, NI_NUMERICHOST))
      snprintf(local_host, cap, "%s", host);
  }
  lathe_coord_client *c = calloc(1, sizeof *c);
  if (!c || pthread_mutex_init(&c->mu, NULL)) {
    free(c);
    close(fd);
    return LATHE_OOM("job");
  }
  c->fd = fd;
  c->timeout_ms = timeout_ms;
  snprintf(c->address, sizeof c->address, "%s", address);
  lathe_coord_msg hello = {.type = LATHE_COORD_HELLO, .a = (const uint8_t *)token, .a_len = (uint32_t)strlen(token),
                           .u1 = (uint32_t)process, .u2 = (uint32_t)processes};
  lathe_status_t st = lathe_coord_client_call(c, &hello, NULL, NULL);
  if (st) {
    if (c->fd >= 0) close(c->fd);
    pthread_mutex_destroy(&c->mu);
    free(c);
    return lathe_status_annotate(st, "process %d joining the job", process);
  }
  *out = c;
  return NULL;
}

void lathe_coord_client_free(lathe_coord_client *c) {
  if (!c) return;
  lathe_coord_msg bye = {.type = LATHE_COORD_BYE};
  if (c->fd >= 0) lathe_status_free(lathe_coord_client_call(c, &bye, NULL, NULL));
  if (c->fd >= 0) close(c->fd);
  pthread_mutex_destroy(&c->mu);
  free(c);
}
