#!/usr/bin/env python3
"""A model of tf32x3's products on TF32 tensor cores, without a GPU: which order of the split parts
along k keeps a Float32 product within tf32x3's bound (2^-19 of sum |a||b| per element).

The tensor-core model is Fasi, Higham, Mikaitis and Pranesh's ("Numerical behavior of NVIDIA tensor
cores", PeerJ CS 2021): an MMA adds G exact products to the Float32 accumulator by aligning every
addend to the largest exponent among them, truncating each below 2^(e - 23 - extra), and truncating
the sum to Float32. G (k per MMA) and extra (guard bits) are not documented; the model is run over
a few of each. The operands are those of `test_unit cuda_dot_tf32x3_bound` (same generator, seeds
and shapes), so its lines compare with that test's on a GPU.

What it gave (2026-12-07): with MMAs of 4 or 8 k and no guard bits, the hi.hi-first one-product form
comes to 1.133 of the bound in the batched case 3, where an H200 measured 1.13; cases 0-2 come out
larger than measured there (0.24-0.46), as they would if cuBLASLt split their k (the model sums k in
one order). In every variant the small-parts-first form stays within 0.08 of the three products'
error and hi.hi first comes to 1.35-3.5x it.

  python3 bench/tf32x3_model.py [G EXTRA]        (numpy; about a minute for every case)
"""
import sys

import numpy as np

MASK64 = (1 << 64) - 1


def fill_wide(n, seed):
    """tests/unit/test_cuda_dot.c's fill_wide: uniform in (-1, 1) times 2^[-8, 8]."""
    out = np.empty(n, np.float32)
    for i in range(n):
        seed = (seed * 6364136223846793005 + 1442695040888963407) & MASK64
        u = (seed >> 11) / 9007199254740992.0 * 2 - 1
        out[i] = np.float32(np.ldexp(u, ((seed >> 3) % 17) - 8))
    return out


def tf32(x):
    """Rounded to TF32 (10 mantissa bits), to nearest with ties away, as cvt.rna.tf32.f32."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x1000) & 0xFFFFE000).astype(np.uint32).view(np.float32)


def split(x):
    hi = tf32(x)
    return hi, tf32((x - hi).astype(np.float32))


def to_f32_toward_zero(x):
    f = x.astype(np.float32)
    over = np.abs(f.astype(np.float64)) > np.abs(x)
    f[over] = np.nextafter(f[over], np.float32(0))
    return f


def tensor_core(a, b, g, extra):
    """a [M, K] . b [K, N] of TF32 values, K in MMAs of g in order, the accumulator in Float32."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k0 in range(0, a.shape[1], g):
        terms = a[:, k0:k0 + g, None].astype(np.float64) * b[None, k0:k0 + g, :]  # exact products
        terms = np.concatenate([terms, acc[:, None, :].astype(np.float64)], axis=1)
        top = np.max(np.abs(terms), axis=1)
        e = np.floor(np.log2(np.where(top > 0, top, 1.0))).astype(np.int64)
        q = np.ldexp(1.0, e - 23 - extra)[:, None, :]
        acc = to_f32_toward_zero(np.sum(np.trunc(terms / q) * q, axis=1))
    return acc


def sgemm(a, b):
    """Float32 multiply-adds in k order, each rounded to nearest (a SIMT Float32 product)."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        acc = (acc + (a[:, k:k + 1] * b[k:k + 1, :]).astype(np.float32)).astype(np.float32)
    return acc


def pad_k(x, axis):
    """k rounded up to 16 bytes with zeros, as gemm.c's split operands are."""
    width = [(0, 0)] * x.ndim
    width[axis] = (0, (-x.shape[axis]) % 4)
    return np.pad(x, width)


def forms(a, b, g, extra):
    ah, al = split(a)
    bh, bl = split(b)
    ah, al, bh, bl = pad_k(ah, 1), pad_k(al, 1), pad_k(bh, 0), pad_k(bl, 0)
    three = tensor_core(ah, bh, g, extra) + tensor_core(ah, bl, g, extra)  # beta = 1: added in the epilogue
    three = (three.astype(np.float32) + tensor_core(al, bh, g, extra)).astype(np.float32)
    return {
        "Float32, k in order (a SIMT product; lathe's exact default)": sgemm(a, b),
        "tf32x3 as three products, hi.hi first, the others added to the result": three,
        "tf32x3 as one product, [hi|hi|lo].[hi;lo;hi] (hi.hi first)": tensor_core(
            np.concatenate([ah, ah, al], 1), np.concatenate([bh, bl, bh], 0), g, extra),
        "tf32x3 as one product, [lo|hi|hi].[hi;lo;hi] (small parts first)": tensor_core(
            np.concatenate([al, ah, ah], 1), np.concatenate([bh, bl, bh], 0), g, extra),
        "tf32=1 (one TF32 pass)": tensor_core(pad_k(tf32(a), 1), pad_k(tf32(b), 0), g, extra),
    }


def cases():
    """The four cases of cuda_dot_tf32x3_bound as (batches of) a [M, K] and b [K, N]."""
    def two(ld, lc, rd, rc):
        x = fill_wide(ld[0] * ld[1], 11).reshape(ld)
        y = fill_wide(rd[0] * rd[1], 12).reshape(rd)
        return [(x if lc == 1 else x.T, y if rc == 0 else y.T)]
    x = fill_wide(3 * 70 * 129, 11).reshape(3, 70, 129)
    y = fill_wide(3 * 129 * 66, 12).reshape(3, 129, 66)
    return [two((300, 700), 1, (700, 257), 0), two((513, 96), 0, (513, 132), 0),
            two((200, 384), 1, (260, 384), 1), [(x[i], y[i]) for i in range(3)]]


def main():
    shapes = [(int(sys.argv[1]), int(sys.argv[2]))] if len(sys.argv) > 2 else [(4, 0), (8, 0), (8, 3), (16, 3)]
    data = cases()
    for g, extra in shapes:
        print(f"MMAs of {g} k, {extra} guard bits: worst error over 2^-19 sum |a||b|, cases 0 1 2 3")
        worst = {}
        for c, pairs in enumerate(data):
            for a, b in pairs:
                a64, b64 = a.astype(np.float64), b.astype(np.float64)
                bound = np.ldexp(np.abs(a64) @ np.abs(b64), -19)
                for name, got in forms(a, b, g, extra).items():
                    w = worst.setdefault(name, [0.0] * len(data))
                    w[c] = max(w[c], float(np.max(np.abs(got - a64 @ b64) / bound)))
        for name, w in worst.items():
            print("  " + " ".join(f"{v:7.3f}" for v in w) + "  " + name)


if __name__ == "__main__":
    main()
