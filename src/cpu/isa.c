/* isa.c -- which instruction sets this CPU runs, and the choice of a backend's kernel table
 * (kernels.h). Detection reads cpuid and the OS's saved vector state (xgetbv): an ISA counts only
 * when both the CPU and the OS support it. */
#include "kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define LATHE_CPU_X86 1
extern const lathe_cpu_kernels lathe_cpu_kernels_avx2, lathe_cpu_kernels_avx512;
#endif
extern const lathe_cpu_kernels lathe_cpu_kernels_baseline;

static const char *const isa_names[LATHE_CPU_ISA_COUNT] = {"baseline", "avx2", "avx512"};

const char *lathe_cpu_isa_name(lathe_cpu_isa isa) {
  return (int)isa >= 0 && isa < LATHE_CPU_ISA_COUNT ? isa_names[isa] : "unknown";
}

const lathe_cpu_kernels *lathe_cpu_kernels_of(lathe_cpu_isa isa) {
  switch (isa) {
    case LATHE_CPU_ISA_BASELINE: return &lathe_cpu_kernels_baseline;
#ifdef LATHE_CPU_X86
    case LATHE_CPU_ISA_AVX2: return &lathe_cpu_kernels_avx2;
    case LATHE_CPU_ISA_AVX512: return &lathe_cpu_kernels_avx512;
#endif
    default: return NULL;
  }
}

#ifdef LATHE_CPU_X86
/* The highest ISA of the CPU and OS (cpuid leaves 1 and 7, XCR0). */
static lathe_cpu_isa detect_x86(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return LATHE_CPU_ISA_BASELINE;
  bool fma = c >> 12 & 1, osxsave = c >> 27 & 1, avx = c >> 28 & 1, f16c = c >> 29 & 1;
  if (!osxsave || !avx) return LATHE_CPU_ISA_BASELINE;
  unsigned xlo, xhi;
  __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  (void)xhi;
  if ((xlo & 0x6) != 0x6) return LATHE_CPU_ISA_BASELINE; /* the OS saves no YMM state */
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return LATHE_CPU_ISA_BASELINE;
  bool bmi1 = b >> 3 & 1, avx2 = b >> 5 & 1, bmi2 = b >> 8 & 1;
  if (!(fma && f16c && bmi1 && avx2 && bmi2)) return LATHE_CPU_ISA_BASELINE;
  bool f = b >> 16 & 1, dq = b >> 17 & 1, cd = b >> 28 & 1, bw = b >> 30 & 1, vl = b >> 31 & 1;
  if (f && dq && cd && bw && vl && (xlo & 0xe0) == 0xe0) return LATHE_CPU_ISA_AVX512; /* and ZMM state */
  return LATHE_CPU_ISA_AVX2;
}
#endif

lathe_cpu_isa lathe_cpu_isa_detect(void) {
  static _Atomic int cached = -1;
  int v = atomic_load(&cached);
  if (v < 0) {
#ifdef LATHE_CPU_X86
    v = (int)detect_x86();
#else
    v = LATHE_CPU_ISA_BASELINE;
#endif
    atomic_store(&cached, v);
  }
  return (lathe_cpu_isa)v;
}

lathe_status_t lathe_cpu_isa_parse(const char *name, lathe_cpu_isa *out) {
  lathe_cpu_isa best = lathe_cpu_isa_detect();
  if (!name || !strcmp(name, "auto")) {
    *out = best;
    return NULL;
  }
  for (int i = 0; i < LATHE_CPU_ISA_COUNT; i++) {
    if (strcmp(name, isa_names[i]) != 0) continue;
    if (i > (int)best || !lathe_cpu_kernels_of((lathe_cpu_isa)i))
      return lathe_status_new(LATHE_STATUS_FAILED_PRECONDITION,
                              "lathe:cpu: isa=%s is not supported by this CPU (or this build); it runs up to isa=%s",
                              name, isa_names[best]);
    *out = (lathe_cpu_isa)i;
    return NULL;
  }
  return LATHE_INVALID("lathe:cpu: unknown isa \"%s\"; known: auto, baseline, avx2, avx512", name);
}
