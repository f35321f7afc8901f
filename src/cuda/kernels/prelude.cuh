#pragma nv_diag_suppress 177 /* helpers a kernel does not use */
typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long long int64_t;
typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#define LT_DEV static __device__ __forceinline__
/* complex storage and compute types: C99 layout; a real converts with imaginary part +0 */
struct lt_c128;
struct lt_c64 {
  float re, im;
  lt_c64() = default;
  __device__ constexpr lt_c64(float r, float i) : re(r), im(i) {}
  template <typename R> __device__ constexpr lt_c64(R r) : re((float)r), im(0.0f) {}
  __device__ inline explicit lt_c64(const lt_c128 &z);
};
struct lt_c128 {
  double re, im;
  lt_c128() = default;
  __device__ constexpr lt_c128(double r, double i) : re(r), im(i) {}
  template <typename R> __device__ constexpr lt_c128(R r) : re((double)r), im(0.0) {}
  __device__ constexpr lt_c128(const lt_c64 &z) : re(z.re), im(z.im) {}
};
__device__ inline lt_c64::lt_c64(const lt_c128 &z) : re((float)z.re), im((float)z.im) {}
#define LT_LOOP(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
                           i += (int64_t)gridDim.x * blockDim.x)
LT_DEV float lt_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return __uint_as_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) { float v = ldexpf((float)m, -24); return sign ? -v : v; }
  return __uint_as_float(sign | ((e + 112) << 23) | (m << 13));
}
LT_DEV uint16_t lt_f32_to_f16(float f) {
  uint32_t u = __float_as_uint(f), sign = (u >> 16) & 0x8000, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);
  if (a < 0x38800000u) return (uint16_t)(sign | (uint32_t)rintf(__uint_as_float(a) * 16777216.0f));
  uint32_t h = (((a >> 23) - 112) << 10) | ((a >> 13) & 0x3ff), rest = a & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}
LT_DEV float lt_bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
LT_DEV uint16_t lt_f32_to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}
/* 4 elements in a row, one vector access (at most 16 bytes wide): the elementwise, ROWS and warp
 * softmax kernels' grouped loads and stores */
template <typename S> struct alignas(sizeof(S) * 4 > 16 ? 16 : sizeof(S) * 4) lt_v4 { S v[4]; };
#define LT_MAX_RANK 16
struct lt_dims { int rank; int64_t d[LT_MAX_RANK]; };
struct lt_strides { int64_t s[LT_MAX_RANK]; };
/* offset, through strides, of row-major position i of an index space of dims */
LT_DEV int64_t lt_offset(int64_t i, const lt_dims &dims, const lt_strides &st) {
  int64_t off = 0;
  for (int a = dims.rank - 1; a >= 0; a--) { int64_t n = dims.d[a]; off += (i % n) * st.s[a]; i /= n; }
  return off;
}
/* n / d for n < 2^31 as a multiply-high and a shift (the host computes m and s) */
struct lt_div32 { uint32_t d, m, s; };
LT_DEV uint32_t lt_udiv(uint32_t n, lt_div32 q) { return (__umulhi(n, q.m) + n) >> q.s; }
/* lt_offset for an index and a tensor below 2^31 elements: each axis' size as its divisor, strides
 * of 32 bits (a 64-bit division is a long subroutine; this is a multiply-high and a shift) */
struct lt_dims32 { int rank; lt_div32 q[LT_MAX_RANK]; int32_t s[LT_MAX_RANK]; };
LT_DEV int32_t lt_offset32(uint32_t i, const lt_dims32 &g) {
  int32_t off = 0;
  for (int a = g.rank - 1; a > 0; a--) {
    uint32_t q = lt_udiv(i, g.q[a]);
    off += (int32_t)(i - q * g.q[a].d) * g.s[a];
    i = q;
  }
  return off + (int32_t)i * g.s[0];
}
/* a grid-stride loop over n < 2^31 elements with a 32-bit index (with lt_offset32) */
#define LT_LOOP32(i, n) for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)
