/* sampler.c -- an LD_PRELOAD sampling profiler of a program's host side (scripts/host-profile.sh):
 * SIGPROF every HOSTPROF_US microseconds of the process's CPU time, each sample's stack written to
 * $HOSTPROF_OUT at exit as "sample module offset symbol" lines, innermost frame first. For
 * machines without perf or gdb (the GPU machine). glibc's backtrace is not async-signal-safe
 * until its unwinder is loaded, so the constructor loads it before the first signal. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
enum { MAXS = 400000, DEPTH = 28 };
static void *st[MAXS][DEPTH];
static unsigned char dep[MAXS];
static int ns;
static void handler(int sig) {
  (void)sig;
  int i = __atomic_fetch_add(&ns, 1, __ATOMIC_RELAXED);
  if (i < MAXS) dep[i] = (unsigned char)backtrace(st[i], DEPTH);
}
__attribute__((constructor)) static void start(void) {
  if (!getenv("HOSTPROF_OUT")) return;
  void *tmp[4];
  backtrace(tmp, 4); /* loads the unwinder outside the handler */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGPROF, &sa, 0);
  int us = getenv("HOSTPROF_US") ? atoi(getenv("HOSTPROF_US")) : 250;
  struct itimerval it = {{0, us}, {0, us}};
  setitimer(ITIMER_PROF, &it, 0);
}
__attribute__((destructor)) static void stop(void) {
  const char *out = getenv("HOSTPROF_OUT");
  if (!out) return;
  struct itimerval it;
  memset(&it, 0, sizeof it);
  setitimer(ITIMER_PROF, &it, 0);
  FILE *f = fopen(out, "w");
  if (!f) return;
  int n = ns < MAXS ? ns : MAXS;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < dep[i]; k++) {
      Dl_info di;
      if (dladdr(st[i][k], &di) && di.dli_fname)
        fprintf(f, "%d %s %lx %s\n", i, di.dli_fname, (unsigned long)((char *)st[i][k] - (char *)di.dli_fbase) - (k ? 1 : 0),
                di.dli_sname ? di.dli_sname : "?");
      else
        fprintf(f, "%d ? %lx ?\n", i, (unsigned long)st[i][k]);
    }
  fclose(f);
}
