"""floor_torch.py -- PyTorch's side of build/floor_bench on a GPU: the same phases of a one-op
graph on 4 floats (upload, run, read back, the three together), medians of batches of 1000.

    python3 bench/floor_torch.py [repeats]
"""
import sys
import time

import numpy as np
import torch

BATCH = 1000


def main():
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 31
    host = np.array([1, 2, 3, 4], dtype=np.float32)
    dev = torch.from_numpy(host).cuda()
    done = -dev
    torch.cuda.synchronize()
    phases = {
        "upload 16 bytes": lambda: torch.from_numpy(host).cuda(),
        "neg (queued)": lambda: -dev,
        "read back a computed tensor": lambda: done.cpu(),
        "neg + read back": lambda: (-dev).cpu(),
        "upload + neg + read back": lambda: (-torch.from_numpy(host).cuda()).cpu(),
    }
    times = {name: [] for name in phases}
    for _ in range(repeats):
        for name, fn in phases.items():
            t0 = time.perf_counter()
            for _ in range(BATCH):
                fn()
            torch.cuda.synchronize()
            times[name].append((time.perf_counter() - t0) / BATCH)
    print(f"{'per run (median of batches)':52s} {'torch ' + torch.__version__:>12s}")
    for name, t in times.items():
        print(f"{name:52s} {sorted(t)[len(t) // 2] * 1e6:10.3f} µs")


if __name__ == "__main__":
    main()
