/* trace.h -- a Chrome/Perfetto trace-event writer ({"traceEvents":[...]}: "X" complete events
 * with microsecond timestamps, "C" counters), shared by the compile pipeline, the runtime and the
 * executor. Events are appended to the file as they happen (stdio-buffered); at every flush,
 * checkpoint and close the closing "]}" is written, so the file is valid JSON after each, and the
 * next event overwrites that tail. Thread-safe: one mutex per trace. Docs: docs/PROFILING.md. */
#ifndef LATHE_TRACE_H
#define LATHE_TRACE_H

#include <stdint.h>

#include "core.h"

typedef struct lathe_trace lathe_trace;

/* The writer of path, shared by every holder of the same path in this process: the first open in
 * the process truncates the file, a later one (after every holder closed it) continues it.
 * INVALID_ARGUMENT naming option and path when it cannot be written. */
lathe_status_t lathe_trace_open(const char *path, const char *option, lathe_trace **out);
/* Drops a holder; the last one writes the tail and closes the file. NULL-safe. */
void lathe_trace_close(lathe_trace *t);
/* Makes the file valid JSON on disk now; an I/O error is INTERNAL naming the path. */
lathe_status_t lathe_trace_flush(lathe_trace *t);
/* The same where no one can take a status (the end of each compile and execution, so that a
 * process that ends without freeing its backend, as a Go program's exit does, leaves a whole
 * file): an I/O error waits for the next flush. NULL-safe. */
void lathe_trace_checkpoint(lathe_trace *t);

/* Monotonic nanoseconds (the trace's clock). */
int64_t lathe_trace_now(void);
/* A complete event [t0, t1) (ns of lathe_trace_now) on the calling thread. name and cat are
 * escaped; args: the members of the "args" object as JSON text ("\"k\":1,\"s\":\"x\"") or NULL. */
void lathe_trace_complete(lathe_trace *t, const char *name, const char *cat, int64_t t0, int64_t t1, const char *args);
/* The same on a track that is not a thread (a GPU's stream): track is its id (distinct from the
 * small thread numbers: LATHE_TRACE_TRACK_BASE and up), track_name its label, written once. */
enum { LATHE_TRACE_TRACK_BASE = 1000 };
void lathe_trace_complete_on(lathe_trace *t, int track, const char *track_name, const char *name, const char *cat,
                             int64_t t0, int64_t t1, const char *args);
/* A counter event: series name = value at ts (ns). */
void lathe_trace_counter(lathe_trace *t, const char *name, int64_t ts, const char *series, int64_t value);

/* The trace of the execution the calling thread runs now (set by the executor only while
 * tracing), so that the CPU pool can record each thread's part of a step without an argument
 * threaded through every kernel. */
#ifndef __cplusplus /* the MLX device (C++) reaches this header through runtime.h, never the variable */
extern _Thread_local lathe_trace *lathe_trace_current;
#endif

/* Appends s to buf (cap bytes in all, at *at) as a JSON string body (no quotes), truncating
 * cleanly; returns buf. */
char *lathe_json_escape(char *buf, size_t cap, size_t *at, const char *s);
/* printf into buf at *at (never past cap). */
void lathe_bufprintf(char *buf, size_t cap, size_t *at, const char *fmt, ...) LATHE_PRINTF(4, 5);

#endif
