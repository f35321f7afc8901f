/* ROWS regions (rows.c): the reductions of a row's group of G threads, folded with lathe:cpu's
 * semantics (Max/Min let NaN through; halves accumulate in float). Every thread of the group
 * ends with the row's value. */
#define LT_RF __device__ __forceinline__
template <typename A> struct lt_rsum { static LT_RF A id() { return (A)0; } static LT_RF A f(A a, A b) { return a + b; } };
template <typename A> struct lt_rprod { static LT_RF A id() { return (A)1; } static LT_RF A f(A a, A b) { return a * b; } };
template <typename A> struct lt_rmax {
  static LT_RF A id() { return -(A)__int_as_float(0x7f800000); }
  static LT_RF A f(A a, A b) { return (b > a || b != b) ? b : a; }
};
template <typename A> struct lt_rmin {
  static LT_RF A id() { return (A)__int_as_float(0x7f800000); }
  static LT_RF A f(A a, A b) { return (b < a || b != b) ? b : a; }
};
/* sm: one slot per warp of the block, this reduction's own (so no barrier before writing) */
template <class Op, int G, typename A> LT_RF A lt_rows_fold(A acc, A *sm) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) acc = Op::f(acc, __shfl_xor_sync(0xffffffffu, acc, m));
  if (G > 32) {
    int w = threadIdx.x >> 5, first = w & ~(G / 32 - 1);
    if ((threadIdx.x & 31) == 0) sm[w] = acc;
    __syncthreads();
    acc = sm[first];
#pragma unroll
    for (int i = 1; i < G / 32; i++) acc = Op::f(acc, sm[first + i]);
  }
  return acc;
}
