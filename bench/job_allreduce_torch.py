#!/usr/bin/env python3
"""PyTorch's gloo AllReduce across the processes of a job: the peer of bench/job_allreduce_bench.c.
Same sizes (4 KB, 64 KB, then 1 MB to 256 MB, x4), same repeats per size, a warm-up call, Float32 sums, bus bandwidth as
NCCL counts it (bytes * 2(P-1)/P / time). Rank 0 prints the table in the same form.

    python3 bench/job_allreduce_torch.py P      # spawns P processes on this host (loopback TCP)
"""
import os
import sys
import time


def worker(rank, size, port):
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=size)
    torch.set_num_threads(1)  # the reductions run on gloo's thread either way; keep the cores for it
    buf = torch.ones((256 << 20) // 4, dtype=torch.float32)
    if rank == 0:
        print(f"torch {torch.__version__} gloo AllReduce, {size} processes, Float32 sum")
        print("%10s %10s %12s" % ("KB", "ms", "busbw GB/s"), flush=True)
    for kb in (4, 64, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10):
        n = kb << 8
        reps = 200 if kb <= 64 else 10 if kb <= 4 << 10 else 4 if kb <= 64 << 10 else 2
        view = buf[:n]
        dist.all_reduce(view)
        t0 = time.perf_counter()
        for _ in range(reps):
            dist.all_reduce(view)
        dt = (time.perf_counter() - t0) / reps
        bus = (kb << 10) * 2.0 * (size - 1) / size / dt / 1e9
        if rank == 0:
            print("%10d %10.3f %12.3f" % (kb, dt * 1e3, bus), flush=True)
        view.fill_(1.0)
    dist.destroy_process_group()


def main():
    import socket

    import torch.multiprocessing as mp

    size = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(worker, args=(size, port), nprocs=size, start_method="spawn")


if __name__ == "__main__":
    main()
