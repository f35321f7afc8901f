/* isa_baseline.c -- the kernel table for the build's own target (x86-64-v2 on x86: SSE4.2), the
 * one every CPU that runs the build has (kernels.h). */
#define LATHE_ISA_TABLE lathe_cpu_kernels_baseline
#define LATHE_ISA_ENUM LATHE_CPU_ISA_BASELINE
#define LATHE_ISA_LEVEL 0
#include "isa_kernels.h"
