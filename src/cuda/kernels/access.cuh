#define INFINITY __int_as_float(0x7f800000)
struct lt_f16s { uint16_t h; }; struct lt_bf16s { uint16_t h; };
template <typename S> struct lt_ct { typedef S T; };
template <> struct lt_ct<lt_f16s> { typedef float T; };
template <> struct lt_ct<lt_bf16s> { typedef float T; };
LT_DEV float lt_g(const float *p, int64_t i) { return p[i]; }
LT_DEV double lt_g(const double *p, int64_t i) { return p[i]; }
LT_DEV float lt_g(const lt_f16s *p, int64_t i) { return lt_f16_to_f32(p[i].h); }
LT_DEV float lt_g(const lt_bf16s *p, int64_t i) { return lt_bf16_to_f32(p[i].h); }
LT_DEV void lt_s(float *p, int64_t i, float v) { p[i] = v; }
LT_DEV void lt_s(double *p, int64_t i, double v) { p[i] = v; }
LT_DEV void lt_s(lt_f16s *p, int64_t i, float v) { p[i].h = lt_f32_to_f16(v); }
LT_DEV void lt_s(lt_bf16s *p, int64_t i, float v) { p[i].h = lt_f32_to_bf16(v); }
LT_DEV float lt_exp(float v) { return expf(v); }
LT_DEV double lt_exp(double v) { return exp(v); }
LT_DEV float lt_log(float v) { return logf(v); }
LT_DEV double lt_log(double v) { return log(v); }
LT_DEV float lt_erf(float v) { return erff(v); }
LT_DEV double lt_erf(double v) { return erf(v); }
LT_DEV float lt_tanh(float v) { return tanhf(v); }
LT_DEV double lt_tanh(double v) { return tanh(v); }
LT_DEV float lt_sqrt(float v) { return sqrtf(v); }
LT_DEV double lt_sqrt(double v) { return sqrt(v); }
template <typename T> LT_DEV T lt_inf() { return (T)INFINITY; }
