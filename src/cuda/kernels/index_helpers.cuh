LT_DEV int64_t lt_index(const void *p, int code, int64_t i) {
  switch (code) {
    case 1: return ((const int8_t *)p)[i];
    case 2: return ((const int16_t *)p)[i];
    case 4: return ((const int32_t *)p)[i];
    case 8: return ((const int64_t *)p)[i];
    case 0x101: return ((const uint8_t *)p)[i];
    case 0x102: return ((const uint16_t *)p)[i];
    case 0x104: return ((const uint32_t *)p)[i];
    default: { uint64_t v = ((const uint64_t *)p)[i]; return v > 0x7fffffffffffffffULL ? 0x7fffffffffffffffLL : (int64_t)v; }
  }
}
