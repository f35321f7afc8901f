/* test_job.c -- a job's coordinator and configuration (src/runtime/job.h): the wire parser under
 * random and mutated bytes, encode/parse round trips, options and environment, and the
 * coordinator's answers on loopback with short timeouts: a join of several processes with
 * set/get/barrier, a wrong token, a wrong process count, a duplicate index, an unreachable
 * coordinator, a peer whose connection drops, malformed messages, and a wait that times out --
 * each an error within its timeout. (Jobs of real processes are tested from Go:
 * compute/lathe/job_test.go.) */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <math.h>

#include "core/core.h"
#include "cpu/cpu.h"
#include "runtime/device.h"
#include "runtime/job.h"
#include "testing.h"

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)rng;
}

TEST(job_parser_fuzz) {
  uint8_t buf[256];
  int accepted = 0, bad = 0;
  for (int it = 0; it < 200000; it++) {
    size_t n = next_rand() % sizeof buf;
    for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)next_rand();
    if (n && it % 2) buf[0] = (uint8_t)(1 + next_rand() % 5); /* a known type half the time */
    if (n >= 5 && it % 4 == 1) { /* a plausible first length */
      uint32_t l = next_rand() % 64;
      buf[1] = 0, buf[2] = 0, buf[3] = 0, buf[4] = (uint8_t)l;
    }
    lathe_coord_msg m;
    lathe_status_t st = lathe_coord_parse(n ? buf : NULL, n, &m);
    if (st) {
      bad += lathe_status_code_of(st) != LATHE_STATUS_INVALID_ARGUMENT;
      lathe_status_free(st);
      continue;
    }
    accepted++;
    /* an accepted message's fields lie inside it */
    if (m.a && (m.a < buf || m.a + m.a_len > buf + n)) bad++;
    if (m.b && (m.b < buf || m.b + m.b_len > buf + n)) bad++;
  }
  CHECK(bad == 0, "the parser accepted %d out-of-bounds fields or returned a non-INVALID code", bad);
  CHECK(accepted > 0, "no random message parsed at all (the fuzzing reaches no valid path)");
}

TEST(job_parser_round_trip) {
  const char *key = "gloo/cpu/2:0.1/0", *val = "\x01\x02\x00\x03";
  lathe_coord_msg m = {.type = LATHE_COORD_SET, .a = (const uint8_t *)key, .a_len = (uint32_t)strlen(key),
                       .b = (const uint8_t *)val, .b_len = 4};
  uint8_t *f;
  size_t n;
  CHECK_OK(lathe_coord_encode(&m, &f, &n));
  lathe_coord_msg p;
  CHECK_OK(lathe_coord_parse(f + 4, n - 4, &p));
  CHECK(p.type == LATHE_COORD_SET && p.a_len == strlen(key) && !memcmp(p.a, key, p.a_len) && p.b_len == 4 && !memcmp(p.b, val, 4),
        "SET did not survive encode/parse");
  /* every truncation and one extra byte are rejected */
  int bad = 0;
  for (size_t k = 0; k + 4 < n; k++) {
    lathe_status_t st = lathe_coord_parse(f + 4, k, &p);
    bad += st == NULL;
    lathe_status_free(st);
  }
  uint8_t *g = malloc(n + 1);
  memcpy(g, f, n);
  g[n] = 0;
  CHECK_ERR(lathe_coord_parse(g + 4, n - 3, &p), INVALID_ARGUMENT, "after the end");
  CHECK(bad == 0, "%d truncations of a SET parsed", bad);
  /* a key with a NUL, an empty key, an unknown type */
  uint8_t nul[] = {LATHE_COORD_GET, 0, 0, 0, 3, 'a', 0, 'b'};
  CHECK_ERR(lathe_coord_parse(nul, sizeof nul, &p), INVALID_ARGUMENT, "NUL");
  uint8_t empty[] = {LATHE_COORD_GET, 0, 0, 0, 0};
  CHECK_ERR(lathe_coord_parse(empty, sizeof empty, &p), INVALID_ARGUMENT, "key of 0 bytes");
  uint8_t unknown[] = {99};
  CHECK_ERR(lathe_coord_parse(unknown, 1, &p), INVALID_ARGUMENT, "unknown message type 99");
  free(f);
  free(g);
}

TEST(job_config) {
  static const char *vars[] = {"LATHE_COORDINATOR", "LATHE_NUM_PROCESSES", "LATHE_PROCESS_ID", "LATHE_JOB_TOKEN",
                               "LATHE_JOB_TIMEOUT", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK",
                               "SLURM_NTASKS", "SLURM_PROCID", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                               "LATHE_LOCAL_PROCESSES", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                               "SLURM_NTASKS_PER_NODE"};
  enum { NV = sizeof vars / sizeof vars[0] };
  char *saved[NV];
  for (int i = 0; i < NV; i++) {
    const char *v = getenv(vars[i]);
    saved[i] = v ? strdup(v) : NULL;
    unsetenv(vars[i]);
  }
  lathe_job_config c;
  bool is_job;
  /* nothing set: no job */
  lathe_job_config_init(&c);
  CHECK_OK(lathe_job_config_resolve("t", &c, &is_job));
  CHECK(!is_job && c.timeout_ms == LATHE_JOB_DEFAULT_TIMEOUT_MS, "no configuration made a job");
  /* options */
  const char *opts[] = {"coordinator=127.0.0.1:29500", "processes=4", "process=3", "token=abc", "timeout=2.5"};
  lathe_job_config_init(&c);
  for (int i = 0; i < 5; i++) {
    CHECK(lathe_job_is_option(opts[i], strlen(opts[i])), "%s is a job option", opts[i]);
    CHECK_OK(lathe_job_option("t", opts[i], strlen(opts[i]), &c));
  }
  CHECK(!lathe_job_is_option("devices=2", 9) && !lathe_job_is_option("process", 7), "devices=2 is not a job option");
  CHECK_OK(lathe_job_config_resolve("t", &c, &is_job));
  CHECK(is_job && c.processes == 4 && c.process == 3 && c.timeout_ms == 2500 && !strcmp(c.token, "abc"),
        "options: job %d, %d of %d, %d ms", is_job, c.process, c.processes, c.timeout_ms);
  lathe_job_config_init(&c);
  CHECK_ERR(lathe_job_option("t", "processes=0", 11, &c), INVALID_ARGUMENT, "processes must be an integer");
  CHECK_ERR(lathe_job_option("t", "timeout=-1", 10, &c), INVALID_ARGUMENT, "timeout must be seconds");
  /* missing token, index, coordinator; index out of range */
  lathe_job_config_init(&c);
  CHECK_OK(lathe_job_option("t", "processes=2", 11, &c));
  CHECK_OK(lathe_job_option("t", "process=1", 9, &c));
  CHECK_ERR(lathe_job_config_resolve("t", &c, &is_job), INVALID_ARGUMENT, "needs a coordinator");
  CHECK_OK(lathe_job_option("t", "coordinator=localhost:1", 23, &c));
  CHECK_ERR(lathe_job_config_resolve("t", &c, &is_job), INVALID_ARGUMENT, "needs a token");
  c.process = 5;
  snprintf(c.token, sizeof c.token, "x");
  CHECK_ERR(lathe_job_config_resolve("t", &c, &is_job), INVALID_ARGUMENT, "outside the job's 0..1");
  /* torchrun's variables */
  setenv("MASTER_ADDR", "10.0.0.7", 1);
  setenv("MASTER_PORT", "29400", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("RANK", "5", 1);
  setenv("LATHE_JOB_TOKEN", "tok", 1);
  lathe_job_config_init(&c);
  CHECK_OK(lathe_job_config_resolve("t", &c, &is_job));
  CHECK(is_job && !strcmp(c.coordinator, "10.0.0.7:29400") && c.processes == 8 && c.process == 5, "torchrun: %s %d of %d",
        c.coordinator, c.process, c.processes);
  /* processes on this host: lathe-launch's over torchrun's; Slurm's uneven form ignored */
  CHECK(c.local_processes == 0, "no local count set, got %d", c.local_processes);
  static const struct { const char *var, *val; int want; } locals[] = {
      {"SLURM_NTASKS_PER_NODE", "2(x3)", 0}, {"LOCAL_WORLD_SIZE", "4", 4}, {"LATHE_LOCAL_PROCESSES", "2", 2}};
  for (int i = 0; i < 3; i++) {
    setenv(locals[i].var, locals[i].val, 1);
    lathe_job_config_init(&c);
    CHECK_OK(lathe_job_config_resolve("t", &c, &is_job));
    CHECK(c.local_processes == locals[i].want, "%s=%s read as %d local processes", locals[i].var, locals[i].val,
          c.local_processes);
  }
  /* lathe's own win over torchrun's; options over both */
  setenv("LATHE_COORDINATOR", "127.0.0.1:1234", 1);
  setenv("LATHE_NUM_PROCESSES", "3", 1);
  setenv("LATHE_PROCESS_ID", "2", 1);
  lathe_job_config_init(&c);
  CHECK_OK(lathe_job_option("t", "process=1", 9, &c));
  CHECK_OK(lathe_job_config_resolve("t", &c, &is_job));
  CHECK(!strcmp(c.coordinator, "127.0.0.1:1234") && c.processes == 3 && c.process == 1, "precedence: %s %d of %d", c.coordinator,
        c.process, c.processes);
  /* Slurm's count only with a coordinator */
  for (int i = 0; i < NV; i++) unsetenv(vars[i]);
  setenv("SLURM_NTASKS", "4", 1);
  setenv("SLURM_PROCID", "1", 1);
  lathe_job_config_init(&c);
  CHECK_OK(lathe_job_config_resolve("t", &c, &is_job));
  CHECK(!is_job, "a Slurm task count alone made a job");
  for (int i = 0; i < NV; i++) {
    if (saved[i]) setenv(vars[i], saved[i], 1);
    else unsetenv(vars[i]);
    free(saved[i]);
  }
}

/* ---- the coordinator on loopback ---- */

typedef struct {
  const char *addr, *token;
  int process, processes, timeout_ms;
  lathe_status_t st;
  char got[64];
} joiner;

/* joins, passes a barrier, reads the other's key */
static void *join_main(void *arg) {
  joiner *j = arg;
  lathe_coord_client *c = NULL;
  char host[64];
  j->st = lathe_coord_client_new(j->addr, j->token, j->process, j->processes, j->timeout_ms, &c, host, sizeof host);
  if (j->st) return NULL;
  char key[32], val[32];
  snprintf(key, sizeof key, "k%d", j->process);
  snprintf(val, sizeof val, "v%d", j->process);
  lathe_coord_msg set = {.type = LATHE_COORD_SET, .a = (const uint8_t *)key, .a_len = (uint32_t)strlen(key),
                         .b = (const uint8_t *)val, .b_len = (uint32_t)strlen(val)};
  j->st = lathe_coord_client_call(c, &set, NULL, NULL);
  lathe_coord_msg bar = {.type = LATHE_COORD_BARRIER, .a = (const uint8_t *)"b", .a_len = 1};
  if (!j->st) j->st = lathe_coord_client_call(c, &bar, NULL, NULL);
  snprintf(key, sizeof key, "k%d", (j->process + 1) % j->processes);
  lathe_coord_msg get = {.type = LATHE_COORD_GET, .a = (const uint8_t *)key, .a_len = (uint32_t)strlen(key)};
  void *v = NULL;
  size_t n = 0;
  if (!j->st) j->st = lathe_coord_client_call(c, &get, &v, &n);
  if (v) snprintf(j->got, sizeof j->got, "%.*s", (int)n, (const char *)v);
  free(v);
  lathe_coord_client_free(c);
  return NULL;
}

static void addr_of(char *addr, size_t cap) { snprintf(addr, cap, "127.0.0.1:%d", tst_free_port()); }

TEST(job_coordinator_join) {
  char addr[64];
  addr_of(addr, sizeof addr);
  lathe_coord_server *s = NULL;
  CHECK_OK(lathe_coord_server_new(addr, "secret", 3, 3000, &s));
  if (!s) return;
  joiner j[3];
  pthread_t t[3];
  for (int p = 0; p < 3; p++) {
    j[p] = (joiner){addr, "secret", p, 3, 3000, NULL, {0}};
    pthread_create(&t[p], NULL, join_main, &j[p]);
  }
  for (int p = 0; p < 3; p++) {
    pthread_join(t[p], NULL);
    char want[8];
    snprintf(want, sizeof want, "v%d", (p + 1) % 3);
    CHECK(j[p].st == NULL && !strcmp(j[p].got, want), "process %d: %s, got \"%s\"", p, j[p].st ? lathe_status_message(j[p].st) : "ok",
          j[p].got);
    lathe_status_free(j[p].st);
  }
  CHECK(lathe_coord_server_refused(s) == 0, "no connection should be refused");
  double t0 = seconds();
  lathe_coord_server_free(s, 3000);
  CHECK(seconds() - t0 < 3, "the server took %.2f s to stop after every process left", seconds() - t0);
}

static int raw_connect(const char *addr) {
  int port = atoi(strrchr(addr, ':') + 1);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = htons((uint16_t)port)};
  if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
    close(fd);
    return -1;
  }
  return fd;
}

static void raw_send(int fd, const lathe_coord_msg *m) {
  uint8_t *f;
  size_t n;
  lathe_status_t st = lathe_coord_encode(m, &f, &n);
  if (!st && send(fd, f, n, MSG_NOSIGNAL) != (ssize_t)n) tst_log("raw send short");
  if (!st) free(f);
  lathe_status_free(st);
}

TEST(job_coordinator_faults) {
  char addr[64];
  addr_of(addr, sizeof addr);
  const int T = 700; /* ms */
  lathe_coord_server *s = NULL;
  CHECK_OK(lathe_coord_server_new(addr, "secret", 2, T, &s));
  if (!s) return;
  lathe_coord_client *c0 = NULL, *c = NULL;
  char host[64];
  /* wrong token: refused, counted, nothing else disturbed */
  double t0 = seconds();
  CHECK_ERR(lathe_coord_client_new(addr, "guess", 1, 2, T, &c, host, sizeof host), UNAVAILABLE, "wrong job token");
  /* malformed bytes as a first message, and garbage lengths: refused without a crash */
  int fd = raw_connect(addr);
  if (fd >= 0) {
    const char junk[] = "\xff\xff\xff\xff garbage";
    CHECK(send(fd, junk, sizeof junk, MSG_NOSIGNAL) > 0, "send junk");
    close(fd);
  }
  fd = raw_connect(addr);
  if (fd >= 0) {
    uint8_t bad[] = {0, 0, 0, 3, LATHE_COORD_HELLO, 1, 2};
    CHECK(send(fd, bad, sizeof bad, MSG_NOSIGNAL) > 0, "send bad hello");
    uint8_t reply[512];
    ssize_t r = recv(fd, reply, sizeof reply, 0);
    CHECK(r > 5 && reply[4] == LATHE_COORD_ERR, "a malformed HELLO is answered with an error (got %zd bytes)", r);
    close(fd);
  }
  /* wrong process count, index out of range */
  CHECK_ERR(lathe_coord_client_new(addr, "secret", 1, 3, T, &c, host, sizeof host), UNAVAILABLE, "says the job has 3 processes");
  CHECK_ERR(lathe_coord_client_new(addr, "secret", 7, 2, T, &c, host, sizeof host), UNAVAILABLE, "outside 0..1");
  /* a good join, then a duplicate index */
  CHECK_OK(lathe_coord_client_new(addr, "secret", 0, 2, T, &c0, host, sizeof host));
  CHECK(!strcmp(host, "127.0.0.1"), "local host %s", host);
  CHECK_ERR(lathe_coord_client_new(addr, "secret", 0, 2, T, &c, host, sizeof host), UNAVAILABLE, "already joined");
  /* each refusal is prompt: four that each waited for the timeout would take 4 T */
  CHECK(seconds() - t0 < 3.5 * T / 1000, "refusals took %.2f s", seconds() - t0);
  /* the server thread counts a refusal when it has read the connection: give it time (a loaded
   * machine), bounded */
  for (double w0 = seconds(); lathe_coord_server_refused(s) < 3 && seconds() - w0 < 5;) usleep(10000);
  CHECK(lathe_coord_server_refused(s) >= 3, "refused %d connections, want >= 3", lathe_coord_server_refused(s));
  /* a GET nobody answers: an error at the timeout (the bounds leave room for a loaded machine;
   * the messages say which error it was) */
  lathe_coord_msg get = {.type = LATHE_COORD_GET, .a = (const uint8_t *)"never", .a_len = 5};
  t0 = seconds();
  if (c0) CHECK_ERR(lathe_coord_client_call(c0, &get, NULL, NULL), UNAVAILABLE, "timed out after 700 ms");
  double dt = seconds() - t0;
  CHECK(dt >= 0.6 && dt < 4.0, "the timed-out GET took %.2f s (timeout 0.7 s)", dt);
  /* a peer that joins, then dies without BYE: the other's waits fail naming it */
  fd = raw_connect(addr);
  if (fd >= 0) {
    lathe_coord_msg hello = {.type = LATHE_COORD_HELLO, .a = (const uint8_t *)"secret", .a_len = 6, .u1 = 1, .u2 = 2};
    raw_send(fd, &hello);
    uint8_t reply[64];
    CHECK(recv(fd, reply, sizeof reply, 0) >= 5 && reply[4] == LATHE_COORD_OK, "the raw peer joined");
    /* a malformed request after joining ends its connection, which is a peer leaving */
    uint8_t bad[] = {0, 0, 0, 2, LATHE_COORD_GET, 0};
    CHECK(send(fd, bad, sizeof bad, MSG_NOSIGNAL) > 0, "send bad get");
    usleep(100000);
    close(fd);
  }
  t0 = seconds();
  if (c0) CHECK_ERR(lathe_coord_client_call(c0, &get, NULL, NULL), UNAVAILABLE, "process 1 left the job");
  lathe_coord_msg bar = {.type = LATHE_COORD_BARRIER, .a = (const uint8_t *)"after", .a_len = 5};
  if (c0) CHECK_ERR(lathe_coord_client_call(c0, &bar, NULL, NULL), UNAVAILABLE, "process 1 left the job");
  CHECK(seconds() - t0 < 3, "a dead peer took %.2f s to notice", seconds() - t0);
  lathe_coord_client_free(c0);
  lathe_coord_server_free(s, T);
  /* nobody listening: unreachable within the timeout */
  t0 = seconds();
  CHECK_ERR(lathe_coord_client_new(addr, "secret", 1, 2, 500, &c, host, sizeof host), UNAVAILABLE, "unreachable after 500 ms");
  dt = seconds() - t0;
  CHECK(dt >= 0.3 && dt < 4, "the unreachable coordinator took %.2f s (timeout 0.5 s)", dt);
  /* never every interface by default: an address must name a host */
  CHECK_ERR(lathe_coord_server_new(":29500", "x", 2, T, &s), INVALID_ARGUMENT, "is not HOST:PORT");
}

/* A backend whose job cannot form fails within its timeout (the process count says 2, nobody else
 * comes), and the process can still make plain backends. */
TEST(job_backend_alone) {
  char cfg[160];
  snprintf(cfg, sizeof cfg, "lathe:cpu,coordinator=127.0.0.1:%d,processes=2,process=0,token=t,timeout=0.5", tst_free_port());
  lathe_backend_t b = NULL;
  double t0 = seconds();
  CHECK_ERR(lathe_backend_new(cfg, &b), UNAVAILABLE, "barrier \"lathe/joined\" timed out");
  CHECK(seconds() - t0 < 5, "the lone process took %.2f s", seconds() - t0);
  int p = -1, n = -1;
  lathe_job_info(&p, &n);
  CHECK(p == 0 && n == 1, "after a failed join the process is in no job (%d of %d)", p, n);
  CHECK_OK(lathe_backend_new("lathe:cpu", &b));
  lathe_backend_free(b);
}

/* The pairwise step lathe:cpu gives Gloo: its vector loops (Float32/64 sums and products) and the
 * generic loop (everything else) against a scalar reference, in place on either side and apart,
 * lengths around the vector width, with NaN and infinities. */
TEST(job_pair_reduce) {
  enum { N = 37 };
  static const lathe_op ops[4] = {LATHE_OP_REDUCE_SUM, LATHE_OP_REDUCE_PRODUCT, LATHE_OP_REDUCE_MAX, LATHE_OP_REDUCE_MIN};
  for (int dd = 0; dd < 2; dd++)
    for (int o = 0; o < 4; o++)
      for (int where = 0; where < 3; where++)
        for (size_t n = 0; n <= N; n += n < 9 ? 1 : 7) {
          double a[N], b[N], want[N], got[N];
          float af[N], bf[N], gotf[N];
          for (size_t i = 0; i < n; i++) {
            a[i] = (double)(int)(next_rand() % 2001 - 1000) / 64.0;
            b[i] = (double)(int)(next_rand() % 2001 - 1000) / 64.0;
            if (i % 11 == 3) a[i] = NAN;
            if (i % 13 == 5) b[i] = -INFINITY;
            af[i] = (float)a[i], bf[i] = (float)b[i];
            double x = dd ? a[i] : af[i], y = dd ? b[i] : bf[i];
            switch (ops[o]) {
              case LATHE_OP_REDUCE_SUM: want[i] = x + y; break;
              case LATHE_OP_REDUCE_PRODUCT: want[i] = x * y; break;
              case LATHE_OP_REDUCE_MAX: want[i] = (x > y || x != x) ? x : y; break;
              default: want[i] = (x < y || x != x) ? x : y; break;
            }
            if (!dd) want[i] = (float)want[i];
          }
          lathe_dtype dt = dd ? LATHE_DTYPE_FLOAT64 : LATHE_DTYPE_FLOAT32;
          void *pa = dd ? (void *)a : (void *)af, *pb = dd ? (void *)b : (void *)bf, *pg = dd ? (void *)got : (void *)gotf;
          void *c = where == 0 ? pa : where == 1 ? pb : pg;
          lathe_cpu_pair_reduce(ops[o], dt, c, pa, pb, n);
          int bad = 0;
          for (size_t i = 0; i < n; i++) {
            double g = dd ? ((double *)c)[i] : ((float *)c)[i];
            bad += !(g == want[i] || (g != g && want[i] != want[i]));
          }
          CHECK(bad == 0, "%s op %d, c %s, n %zu: %d wrong", dd ? "Float64" : "Float32", o,
                where == 0 ? "= a" : where == 1 ? "= b" : "apart", n, bad);
        }
  /* Int32 through the generic loop: wrapping sums */
  int32_t x[3] = {INT32_MAX, -5, 7}, y[3] = {1, 5, -9};
  lathe_cpu_pair_reduce(LATHE_OP_REDUCE_SUM, LATHE_DTYPE_INT32, x, x, y, 3);
  CHECK(x[0] == INT32_MIN && x[1] == 0 && x[2] == -2, "Int32 sums %d %d %d", x[0], x[1], x[2]);
}

/* The job's token never appears in a message: a join that fails (the whole config is quoted),
 * options quoted back as unknown, malformed or too long, a misplaced device name, every
 * backend -- each message shows token=<redacted> or nothing of it. */
static void check_no_secret(const char *cfg, const char *secret) {
  lathe_backend_t b = NULL;
  lathe_status_t st = lathe_backend_new(cfg, &b);
  lathe_backend_free(b);
  const char *m = st ? lathe_status_message(st) : "";
  CHECK(st != NULL, "\"%.40s...\" should fail", cfg);
  CHECK(!strstr(m, secret), "the token appears in: %s", m);
  lathe_status_free(st);
}

TEST(job_token_redacted) {
  const char *secret = "S3cr3tT0ken";
  char cfg[600], big[300];
  int port = tst_free_port();
  /* joins that fail: nobody else comes (process 0), nobody listens (process 1) */
  snprintf(cfg, sizeof cfg, "lathe:cpu,coordinator=127.0.0.1:%d,processes=2,process=0,token=%s,timeout=0.3", port, secret);
  lathe_backend_t b = NULL;
  lathe_status_t st = lathe_backend_new(cfg, &b);
  CHECK(st && strstr(lathe_status_message(st), "token=<redacted>") && !strstr(lathe_status_message(st), secret),
        "a failed join quotes the config redacted: %s", st ? lathe_status_message(st) : "(ok)");
  lathe_status_free(st);
  lathe_backend_free(b);
  snprintf(cfg, sizeof cfg, "lathe:cpu,coordinator=127.0.0.1:%d,process=1,token=%s,processes=2,timeout=0.3", port, secret);
  check_no_secret(cfg, secret);
  /* options and configs quoted back */
  const char *forms[] = {"lathe:cpu,token=%s,threads=x", "lathe:cpu token=%s", "lathe:cpu,fuse=2,token=%s",
                         "lathe:cuda,token=%s", "lathe:gpu,token=%s", "lathe,token=%s,bogus", "lathe:token=%s,threads=0",
                         "mlx:cpu,token=%s", "nope:token=%s"};
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    snprintf(cfg, sizeof cfg, forms[i], secret);
    check_no_secret(cfg, secret);
  }
  /* a token too long for the option: "needs a value", quoted redacted */
  memset(big, 'k', sizeof big - 1);
  big[sizeof big - 1] = 0;
  snprintf(cfg, sizeof cfg, "lathe:cpu,token=%s", big);
  check_no_secret(cfg, big + 200);
  /* the job's own option parser, and the redaction itself */
  lathe_job_config c;
  lathe_job_config_init(&c);
  char opt[64];
  int n = snprintf(opt, sizeof opt, "tokens=%s", secret);
  CHECK_ERR(lathe_job_option("t", opt, (size_t)n, &c), INVALID_ARGUMENT, "is not a job option");
  char out[128];
  const char *text = "lathe:token=a,threads=2, token=bb,xtoken=c,token=";
  CHECK(!strcmp(lathe_config_redact(text, strlen(text), out, sizeof out),
                "lathe:token=<redacted>,threads=2, token=<redacted>,xtoken=c,token=<redacted>"),
        "redacted: %s", out);
  CHECK(!strcmp(lathe_config_redact(text, strlen(text), out, 12), "lathe:token"), "truncated: %s", out);
}

/* A connection the coordinator turns away before its HELLO -- a bad length prefix, or no HELLO
 * within the timeout -- is closed at once: the client sees its end, not a hang until another
 * connection comes. */
static bool ends_within(int fd, double secs) {
  struct timeval tv = {.tv_sec = (time_t)secs, .tv_usec = (suseconds_t)((secs - (double)(time_t)secs) * 1e6)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  uint8_t buf[512];
  for (;;) {
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r > 0) continue; /* the refusal's message, then the end */
    return r == 0 || errno == ECONNRESET;
  }
}

TEST(job_coordinator_closes_refused_connections) {
  char addr[64];
  addr_of(addr, sizeof addr);
  const int T = 300; /* ms */
  lathe_coord_server *s = NULL;
  CHECK_OK(lathe_coord_server_new(addr, "secret", 2, T, &s));
  if (!s) return;
  double t0 = seconds();
  int fd = raw_connect(addr);
  if (fd >= 0) {
    const uint8_t bad[] = {0xff, 0xff, 0xff, 0xff};
    CHECK(send(fd, bad, sizeof bad, MSG_NOSIGNAL) == sizeof bad, "send a bad length");
    CHECK(ends_within(fd, 3), "a bad length prefix: the connection stayed open");
    close(fd);
  }
  fd = raw_connect(addr);
  if (fd >= 0) {
    CHECK(ends_within(fd, 3 + T / 1000.0), "no HELLO within the timeout: the connection stayed open");
    close(fd);
  }
  CHECK(seconds() - t0 < 5, "refused connections took %.2f s to close", seconds() - t0);
  for (double w0 = seconds(); lathe_coord_server_refused(s) < 2 && seconds() - w0 < 5;) usleep(10000);
  CHECK(lathe_coord_server_refused(s) == 2, "refused %d connections, want 2", lathe_coord_server_refused(s));
  lathe_coord_server_free(s, T);
}
