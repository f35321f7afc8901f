extern "C" __global__ void lt_convert(const lt_si *in, lt_so *out, int64_t n, const __grid_constant__ lt_dims d, const __grid_constant__ lt_strides s,
                                        int64_t base, int plain) {
  if (plain) { LT_LOOP(i, n) lt_st(out, i, lt_cv(lt_ld(in, base + i))); }
  else { LT_LOOP(i, n) lt_st(out, i, lt_cv(lt_ld(in, base + lt_offset(i, d, s)))); }
}
/* the strided form where the index and every offset fit in 31 bits (lt_offset32) */
extern "C" __global__ void lt_convert32(const lt_si *in, lt_so *out, uint32_t n, const __grid_constant__ lt_dims32 g, int32_t base) {
  LT_LOOP32(i, n) lt_st(out, i, lt_cv(lt_ld(in, base + lt_offset32(i, g))));
}
