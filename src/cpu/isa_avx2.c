/* isa_avx2.c -- the kernel table for AVX2 + FMA + F16C + BMI1/2 (x86-64-v3); nothing elsewhere
 * (kernels.h). */
#if defined(__x86_64__) || defined(__i386__)
#define LATHE_ISA_TABLE lathe_cpu_kernels_avx2
#define LATHE_ISA_ENUM LATHE_CPU_ISA_AVX2
#define LATHE_ISA_LEVEL 1
#define LATHE_ISA_TARGET "avx2,fma,f16c,bmi,bmi2"
#include "isa_kernels.h"
#else
typedef int lathe_isa_avx2_absent; /* not an x86 build */
#endif
