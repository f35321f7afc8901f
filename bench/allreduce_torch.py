#!/usr/bin/env python3
"""PyTorch's NCCL AllReduce (sum, float32) over cuda:0 and cuda:1 from one process, the peer of
bench/allreduce_bench.c: same sizes (1 MB to 1 GB), same batches and medians, same bus bandwidth
(2 (n-1)/n * bytes / time). torch.cuda.nccl.all_reduce reduces a list of tensors, one per GPU,
in place, issuing every rank's call from this thread inside one NCCL group.

    python3 bench/allreduce_torch.py [repeats (20)] [max MB (1024)]
"""
import statistics
import sys
import time

import torch
import torch.cuda.nccl as nccl

N_DEV = 2


def one_size(nbytes, repeats):
    count = nbytes // 4
    base = (torch.arange(count, dtype=torch.float32) % 1000) / 1000
    xs = [base.to(f"cuda:{d}") for d in range(N_DEV)]
    batch = max(2, min(50, (512 << 20) // nbytes))

    def sync():
        for d in range(N_DEV):
            torch.cuda.synchronize(d)

    times = []
    for r in range(-2, repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(batch):
            nccl.all_reduce(xs)
        sync()
        t1 = time.perf_counter()
        if r >= 0:
            times.append((t1 - t0) / batch)
        # (in place, the values double each run and reach inf: the GPU adds those as fast)
    return statistics.median(times)


def main():
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    max_mb = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    if torch.cuda.device_count() < N_DEV:
        sys.exit(f"allreduce_torch: {torch.cuda.device_count()} GPU(s), the benchmark needs {N_DEV}")
    v = nccl.version()  # a tuple in recent PyTorch, an int in older ones
    v = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    print(f"# torch {torch.__version__}, NCCL {v}, {repeats} repeats", flush=True)
    mb = 1
    while mb <= max_mb:
        nbytes = mb << 20
        sec = one_size(nbytes, repeats)
        busbw = 2.0 * (N_DEV - 1) / N_DEV * nbytes / sec / 1e9
        print(f"allreduce bytes={nbytes} torch_busbw_gbs={busbw:.2f} time_us={sec * 1e6:.1f}", flush=True)
        mb *= 2


if __name__ == "__main__":
    main()
