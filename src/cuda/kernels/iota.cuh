LT_DEV void lt_store(int8_t *p, int64_t i, int64_t v) { p[i] = (int8_t)v; }
LT_DEV void lt_store(int16_t *p, int64_t i, int64_t v) { p[i] = (int16_t)v; }
LT_DEV void lt_store(int32_t *p, int64_t i, int64_t v) { p[i] = (int32_t)v; }
LT_DEV void lt_store(int64_t *p, int64_t i, int64_t v) { p[i] = v; }
LT_DEV void lt_store(uint8_t *p, int64_t i, int64_t v) { p[i] = (uint8_t)v; }
LT_DEV void lt_store(uint16_t *p, int64_t i, int64_t v) { p[i] = (uint16_t)v; }
LT_DEV void lt_store(uint32_t *p, int64_t i, int64_t v) { p[i] = (uint32_t)v; }
LT_DEV void lt_store(uint64_t *p, int64_t i, int64_t v) { p[i] = (uint64_t)v; }
LT_DEV void lt_store(float *p, int64_t i, int64_t v) { p[i] = (float)(double)v; }
LT_DEV void lt_store(double *p, int64_t i, int64_t v) { p[i] = (double)v; }
LT_DEV void lt_store(lt_c64 *p, int64_t i, int64_t v) { p[i].re = (float)(double)v; p[i].im = 0; }
LT_DEV void lt_store(lt_c128 *p, int64_t i, int64_t v) { p[i].re = (double)v; p[i].im = 0; }
struct lt_f16 { uint16_t h; }; struct lt_bf16 { uint16_t h; };
LT_DEV void lt_store(lt_f16 *p, int64_t i, int64_t v) { p[i].h = lt_f32_to_f16((float)(double)v); }
LT_DEV void lt_store(lt_bf16 *p, int64_t i, int64_t v) { p[i].h = lt_f32_to_bf16((float)(double)v); }
template <typename T> __device__ void iota(T *out, int64_t n, int64_t dim, int64_t inner) {
  LT_LOOP(i, n) lt_store(out, i, (i / inner) % dim);
}
#define LT_IOTA(name, T) extern "C" __global__ void lt_iota_##name(T *o, int64_t n, int64_t d, int64_t in) { iota(o, n, d, in); }
LT_IOTA(Int8, int8_t) LT_IOTA(Int16, int16_t) LT_IOTA(Int32, int32_t) LT_IOTA(Int64, int64_t)
LT_IOTA(Uint8, uint8_t) LT_IOTA(Uint16, uint16_t) LT_IOTA(Uint32, uint32_t) LT_IOTA(Uint64, uint64_t)
LT_IOTA(Float16, lt_f16) LT_IOTA(BFloat16, lt_bf16) LT_IOTA(Float32, float) LT_IOTA(Float64, double)
LT_IOTA(Complex64, lt_c64) LT_IOTA(Complex128, lt_c128)
