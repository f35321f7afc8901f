/* rng.c -- RNGBitGenerator on the CPU: Philox4x32-10 with XLA's RngBitGenerator(PHILOX) state
 * layout, so a seed gives the same bits as GoMLX's xla backend.
 *
 * state = {key, counter_lo, counter_hi}. Block b (b = 0, 1, ...) is
 * Philox(counter + b, key) with the 128-bit counter split into 32-bit words least significant
 * first; the new state is {key, counter + blocks used}. Blocks are independent, so the values
 * are generated in parallel. */
#include "numeric.h"

enum {
  PHILOX_M0 = 0xD2511F53u,
  PHILOX_M1 = 0xCD9E8D57u,
  PHILOX_W0 = 0x9E3779B9u, /* key schedule: golden ratio */
  PHILOX_W1 = 0xBB67AE85u, /* key schedule: sqrt(3) - 1 */
};

void lathe_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    if (r) k0 += PHILOX_W0, k1 += PHILOX_W1;
    uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c0 = n0, c1 = (uint32_t)p1, c2 = n2, c3 = (uint32_t)p0;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

typedef struct rng_ctx {
  uint32_t key[2];
  uint64_t lo, hi; /* the starting counter */
  void *dst;
  int bytes;       /* element size: 1, 2, 4 or 8 */
  int64_t n;       /* elements */
} rng_ctx;

enum { LANES = 8 }; /* blocks computed together: the lane loops vectorise (pmuludq) */

/* Philox4x32-10 of LANES consecutive counters starting at (lo, hi); w[j][lane]. */
static void philox_lanes(uint64_t lo, uint64_t hi, const uint32_t key[2], uint32_t w[4][LANES]) {
  uint32_t c0[LANES], c1[LANES], c2[LANES], c3[LANES];
  for (int l = 0; l < LANES; l++) {
    uint64_t a = lo + (uint64_t)l, h = hi + (a < lo);
    c0[l] = (uint32_t)a, c1[l] = (uint32_t)(a >> 32), c2[l] = (uint32_t)h, c3[l] = (uint32_t)(h >> 32);
  }
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    if (r) k0 += PHILOX_W0, k1 += PHILOX_W1;
    for (int l = 0; l < LANES; l++) {
      uint64_t p0 = (uint64_t)PHILOX_M0 * c0[l], p1 = (uint64_t)PHILOX_M1 * c2[l];
      uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[l] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3[l] ^ k1;
      c0[l] = n0, c1[l] = (uint32_t)p1, c2[l] = n2, c3[l] = (uint32_t)p0;
    }
  }
  memcpy(w[0], c0, sizeof c0), memcpy(w[1], c1, sizeof c1), memcpy(w[2], c2, sizeof c2), memcpy(w[3], c3, sizeof c3);
}

/* Stores block b's words w0..w3 as elements of the values. */
static void put_block(const rng_ctx *c, int64_t b, const uint32_t w[4]) {
  if (c->bytes == 8) {
    uint64_t *d = c->dst;
    int64_t i = 2 * b;
    d[i] = w[0] | (uint64_t)w[1] << 32;
    if (i + 1 < c->n) d[i + 1] = w[2] | (uint64_t)w[3] << 32;
    return;
  }
  int64_t i0 = 4 * b, m = c->n - i0 < 4 ? c->n - i0 : 4;
  for (int64_t j = 0; j < m; j++) {
    /* narrower dtypes keep the low bits of one 32-bit word per element */
    switch (c->bytes) {
      case 4: ((uint32_t *)c->dst)[i0 + j] = w[j]; break;
      case 2: ((uint16_t *)c->dst)[i0 + j] = (uint16_t)w[j]; break;
      default: ((uint8_t *)c->dst)[i0 + j] = (uint8_t)w[j]; break;
    }
  }
}

static void rng_blocks(void *vctx, int64_t begin, int64_t end) {
  const rng_ctx *c = vctx;
  int64_t b = begin;
  for (; b + LANES <= end; b += LANES) {
    uint64_t lo = c->lo + (uint64_t)b, hi = c->hi + (lo < c->lo);
    uint32_t w[4][LANES];
    philox_lanes(lo, hi, c->key, w);
    for (int l = 0; l < LANES; l++) put_block(c, b + l, (const uint32_t[4]){w[0][l], w[1][l], w[2][l], w[3][l]});
  }
  for (; b < end; b++) {
    uint64_t lo = c->lo + (uint64_t)b, hi = c->hi + (lo < c->lo);
    uint32_t ctr[4] = {(uint32_t)lo, (uint32_t)(lo >> 32), (uint32_t)hi, (uint32_t)(hi >> 32)}, w[4];
    lathe_philox4x32_10(ctr, c->key, w);
    put_block(c, b, w);
  }
}

lathe_status_t lathe_cpu_rng_bit_generator(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                           lathe_tensor **out) {
  const uint64_t *state = in[0]->data;
  uint64_t key = state[0];
  rng_ctx c = {.key = {(uint32_t)key, (uint32_t)(key >> 32)},
               .lo = state[1],
               .hi = state[2],
               .dst = out[1]->data,
               .bytes = lathe_dtype_bits(out[1]->shape.dtype) / 8,
               .n = lathe_shape_size(&out[1]->shape)};
  if (c.bytes != 1 && c.bytes != 2 && c.bytes != 4 && c.bytes != 8)
    return lathe_status_new(LATHE_STATUS_INTERNAL, "%s: unexpected values dtype %s", lathe_op_name(n->op),
                            lathe_dtype_name(out[1]->shape.dtype));
  int64_t blocks = c.bytes == 8 ? (c.n + 1) / 2 : (c.n + 3) / 4;
  lathe_parallel_for(lathe_cpu_exec_pool(ex), blocks, 4096, rng_blocks, &c);
  uint64_t *ns = out[0]->data;
  uint64_t lo = c.lo + (uint64_t)blocks;
  ns[0] = key;
  ns[1] = lo;
  ns[2] = c.hi + (lo < c.lo);
  return NULL;
}
