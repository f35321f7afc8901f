/* job.h -- a job of several processes (docs/ARCHITECTURE.md "A job of several processes"): its
 * configuration (options and environment), the process-wide job a backend joins, the
 * coordinator (coordinator.c: a token-checked TCP key-value store run by process 0) and the
 * collectives of host memory across the processes (Gloo, through the plugin liblathe_gloo.so). */
#ifndef LATHE_JOB_H
#define LATHE_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/core.h"

#define LATHE_JOB_DEFAULT_TIMEOUT_MS 60000
#define LATHE_COORD_MAX_FRAME (1u << 20) /* largest message body on the coordinator's port */
#define LATHE_COORD_MAX_KEY 1024

/* ---- configuration ---- */
typedef struct lathe_job_config {
  char coordinator[256]; /* HOST:PORT ("" = unset) */
  char token[256];
  int processes, process; /* 0 and -1 = unset */
  int timeout_ms;         /* 0 = unset */
  int local_processes;    /* the job's processes on this host, from the environment (0 = not said):
                           * they share its cores, so lathe:cpu's default thread count divides */
} lathe_job_config;

void lathe_job_config_init(lathe_job_config *cfg);
/* Whether the "key=value" option of len bytes at p is one of the job's (coordinator, processes,
 * process, token, timeout); then lathe_job_option parses it into cfg (a bad value is an error
 * naming who, e.g. "lathe:cpu"). */
bool lathe_job_is_option(const char *p, size_t len);
lathe_status_t lathe_job_option(const char *who, const char *p, size_t len, lathe_job_config *cfg);
#define LATHE_JOB_OPTIONS_HELP "coordinator=HOST:PORT, processes=P, process=I, token=T, timeout=SECONDS"
/* Fills what the options left unset from the environment (LATHE_*, then torchrun's, Slurm's,
 * Open MPI's) and checks the result; *is_job: whether this is a job of more than one process. */
lathe_status_t lathe_job_config_resolve(const char *who, lathe_job_config *cfg, bool *is_job);

/* ---- the job (one per process, shared by its backends) ---- */
typedef struct lathe_job lathe_job;
/* Joins the job cfg describes (resolved, more than one process), or takes another reference to
 * the one this process has joined (its configuration must be the same). */
lathe_status_t lathe_job_acquire(const lathe_job_config *cfg, lathe_job **out);
void lathe_job_release(lathe_job *j); /* NULL is a no-op; the last one leaves the job */
/* A reference to the job this process is in, else the one the environment describes (joined
 * now), else *out = NULL: for devices whose own options do not name a job (lathe:cuda). */
lathe_status_t lathe_job_current(const char *who, lathe_job **out);
int lathe_job_process(const lathe_job *j);
int lathe_job_processes(const lathe_job *j);
/* Coordinator services (each wait bounded by the job's timeout). get's *value is malloc'ed. */
lathe_status_t lathe_job_set(lathe_job *j, const char *key, const void *value, size_t n);
lathe_status_t lathe_job_get(lathe_job *j, const char *key, void **value, size_t *n);
lathe_status_t lathe_job_barrier(lathe_job *j, const char *name);
/* In-place AllReduce of count elements of dtype dt at buf over every process of the job, for the
 * collective named group (the same name in every process: the local replica group). fn(ctx, c, a,
 * b, n) is the reduction. */
typedef void (*lathe_job_reduce_fn)(void *ctx, void *c, const void *a, const void *b, size_t n);
lathe_status_t lathe_job_all_reduce(lathe_job *j, const char *group, void *buf, size_t count, size_t elem_size,
                                    lathe_job_reduce_fn fn, void *fn_ctx);
/* AllGather of bytes bytes from every process: out (processes * bytes) receives process q's in at
 * q * bytes. in and out must not overlap. op names the collective in errors. */
lathe_status_t lathe_job_all_gather(lathe_job *j, const char *op, const char *group, const void *in, void *out, size_t bytes);
/* AllToAll: in and out hold processes chunks of bytes each; chunk q of in goes to process q, and
 * chunk q of out comes from process q. in and out must not overlap. */
lathe_status_t lathe_job_all_to_all(lathe_job *j, const char *op, const char *group, const void *in, void *out, size_t bytes);

/* ---- the coordinator (coordinator.c) ---- */
/* Wire format: a frame is a 4-byte big-endian length N (1..LATHE_COORD_MAX_FRAME) then N bytes:
 * a type byte, then fields; a string field is a 4-byte big-endian length then its bytes, an
 * integer 4 bytes big-endian. Nothing may follow the last field. */
enum {
  LATHE_COORD_HELLO = 1,   /* token, process, processes */
  LATHE_COORD_SET = 2,     /* key, value */
  LATHE_COORD_GET = 3,     /* key: answered when set, or an error at the timeout */
  LATHE_COORD_BARRIER = 4, /* name: answered when every process has arrived */
  LATHE_COORD_BYE = 5,     /* leaving cleanly */
  LATHE_COORD_OK = 0x40,   /* value (may be empty) */
  LATHE_COORD_ERR = 0x41,  /* message */
};

typedef struct lathe_coord_msg {
  int type;
  const uint8_t *a, *b; /* string fields (pointers into the parsed body) */
  uint32_t a_len, b_len;
  uint32_t u1, u2; /* integer fields */
} lathe_coord_msg;

/* Parses one frame body of n bytes, strictly: unknown type, short or overlong fields, keys too
 * long or containing NUL, and trailing bytes are INVALID_ARGUMENT. m points into body. */
lathe_status_t lathe_coord_parse(const uint8_t *body, size_t n, lathe_coord_msg *m);
/* Encodes m into a frame (length prefix included) in a malloc'ed *out of *n bytes. */
lathe_status_t lathe_coord_encode(const lathe_coord_msg *m, uint8_t **out, size_t *n);

typedef struct lathe_coord_server lathe_coord_server;
/* Listens on address HOST:PORT (exactly that host) for a job of processes with token. */
lathe_status_t lathe_coord_server_new(const char *address, const char *token, int processes, int timeout_ms,
                                      lathe_coord_server **out);
/* Waits (at most timeout_ms) until every joined process has left, then stops. */
void lathe_coord_server_free(lathe_coord_server *s, int timeout_ms);
int lathe_coord_server_refused(lathe_coord_server *s); /* connections refused (bad token, malformed) */

typedef struct lathe_coord_client lathe_coord_client;
/* Connects (retrying until timeout_ms) and presents token, process and processes. local_host
 * (cap bytes) receives this end's address, which peers can reach. */
lathe_status_t lathe_coord_client_new(const char *address, const char *token, int process, int processes,
                                      int timeout_ms, lathe_coord_client **out, char *local_host, size_t cap);
/* One request; an OK reply's value is malloc'ed into *value (when value is not NULL). */
lathe_status_t lathe_coord_client_call(lathe_coord_client *c, const lathe_coord_msg *req, void **value, size_t *n);
void lathe_coord_client_free(lathe_coord_client *c); /* says BYE */

/* Splits HOST:PORT ([V6]:PORT) into host and port (for getaddrinfo). */
lathe_status_t lathe_coord_split_address(const char *address, char *host, size_t host_cap, char *port, size_t port_cap);

#endif
