extern "C" __global__ void lt_unpack(const uint8_t *p, int8_t *w, int64_t n, int bits, int sign) {
  LT_LOOP(i, n) {
    int64_t bit = i * bits; unsigned v = (p[bit >> 3] >> (bit & 7)) & ((1u << bits) - 1);
    w[i] = sign && (v >> (bits - 1)) ? (int8_t)((int)v - (1 << bits)) : (int8_t)v;
  }
}
extern "C" __global__ void lt_pack(uint8_t *p, const int8_t *w, int64_t n, int bits) {
  int per = 8 / bits; int64_t bytes = (n * bits + 7) / 8;
  LT_LOOP(b, bytes) {
    unsigned v = 0;
    for (int k = 0; k < per && b * per + k < n; k++) v |= ((unsigned)(uint8_t)w[b * per + k] & ((1u << bits) - 1)) << (k * bits);
    p[b] = (uint8_t)v;
  }
}
