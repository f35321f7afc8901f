"""The graphs of bench/mlx_bench.c written with MLX's own Python API, timed the same way.

    PYTHONPATH=.deps/mlx python3 bench/mlx_bench.py [repeats] [device] [--host|--computed] [graph...]

Prints one line per graph (all, or those named): its name and the median microseconds of
mx.eval(f(*inputs)) with f compiled by mx.compile and with f eager. Inputs hold the values bench.h's default fill gives
(k * 7919 % 1000 / 500 - 1 for element k), created and evaluated before timing: copied from
Python lists with --host (as lathe uploads host data), computed by MLX with --computed (the default).
"""
import sys
import time

import mlx.core as mx


def fill(*shape):
    n = 1
    for d in shape:
        n *= d
    k = mx.arange(n, dtype=mx.int64)
    return mx.reshape(((k * 7919) % 1000).astype(mx.float32) / 500.0 - 1.0, shape)


def fill_host(*shape):
    n = 1
    for d in shape:
        n *= d
    data = [float((k * 7919) % 1000) / 500.0 - 1.0 for k in range(n)]
    return mx.reshape(mx.array(data, dtype=mx.float32), shape)  # a host copy; the reshape is a view


def softmax(x):
    e = mx.exp(x - mx.max(x, axis=-1, keepdims=True))
    return e / mx.sum(e, axis=-1, keepdims=True)


def mlp(x, w1, b1, w2, b2, w3, b3):
    h = mx.maximum(x @ w1 + b1, 0.0)
    h = mx.maximum(h @ w2 + b2, 0.0)
    return h @ w3 + b3


def ew_chain(x):
    return mx.tanh(x * 1.5 + 0.5) * x - x * x


def conv(x, k):
    # NHWC input, HWIO kernel -> MLX's OHWI weight
    return mx.conv_general(x, mx.transpose(k, (3, 0, 1, 2)), padding=([1, 1], [1, 1]))


def attention(q, k, v):
    return softmax((q @ mx.swapaxes(k, -1, -2)) * 0.125) @ v


def tiny(x):
    return -x


GRAPHS = [
    ("mlp", mlp, [(128, 784), (784, 512), (512,), (512, 512), (512,), (512, 10), (10,)]),
    ("ew_chain", ew_chain, [(1 << 20,)]),
    ("softmax", softmax, [(512, 1024)]),
    ("conv", conv, [(16, 32, 32, 16), (3, 3, 16, 32)]),
    ("attention", attention, [(8, 256, 64)] * 3),
    ("tiny", tiny, [(4,)]),
]


def median_us(f, args, repeats):
    times = []
    for r in range(-3, repeats):
        t0 = time.perf_counter()
        mx.eval(f(*args))
        t1 = time.perf_counter()
        if r >= 0:
            times.append(t1 - t0)
    times.sort()
    return times[len(times) // 2] * 1e6


def main():
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    device = sys.argv[2] if len(sys.argv) > 2 else "cpu"
    rest = sys.argv[3:]
    host = "--host" in rest
    only = set(a for a in rest if not a.startswith("--"))
    mx.set_default_device(mx.gpu if device == "gpu" else mx.cpu)
    for name, f, shapes in GRAPHS:
        if only and name not in only:
            continue
        args = [(fill_host if host else fill)(*s) for s in shapes]
        mx.eval(args)
        compiled = median_us(mx.compile(f), args, repeats)
        eager = median_us(f, args, repeats)
        print(f"{name} {compiled:.3f} {eager:.3f}", flush=True)


if __name__ == "__main__":
    main()
