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
/* layout.c puts one LT_IOTA(dtype, type) after this text: a text per dtype */
