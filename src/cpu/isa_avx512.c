/* isa_avx512.c -- the kernel table for AVX-512 F, BW, CD, DQ, VL (x86-64-v4); nothing elsewhere
 * (kernels.h). */
#if defined(__x86_64__) || defined(__i386__)
#define LATHE_ISA_TABLE lathe_cpu_kernels_avx512
#define LATHE_ISA_ENUM LATHE_CPU_ISA_AVX512
#define LATHE_ISA_LEVEL 2
#define LATHE_ISA_TARGET "avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx2,fma,f16c,bmi,bmi2"
#include "isa_kernels.h"
#else
typedef int lathe_isa_avx512_absent; /* not an x86 build */
#endif
