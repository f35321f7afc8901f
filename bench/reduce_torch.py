"""PyTorch's x.sum(0) on the cases of bench/reduce_bench.c: K sums over K inputs timed together by
CUDA events, the median per sum over REPEATS; one line per case in reduce_bench's format.

    python3 bench/reduce_torch.py [repeats (20)]
"""
import statistics
import sys

import torch

K = 16
CASES = [(torch.bfloat16, 8192, 768), (torch.bfloat16, 8192, 3072), (torch.float32, 8192, 768),
         (torch.float32, 8192, 3072), (torch.float32, 65536, 64), (torch.float32, 512, 50304)]
NAMES = {torch.bfloat16: "BFloat16", torch.float32: "Float32"}


def main():
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    print("# PyTorch %s on %s, %d repeats, %d column sums per timing" % (torch.__version__, torch.cuda.get_device_name(), repeats, K))
    for dt, rows, cols in CASES:
        xs = [torch.full((rows, cols), 0.01, dtype=dt, device="cuda") for _ in range(K)]
        times = []
        for r in range(repeats + 2):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for x in xs:
                x.sum(0)
            b.record()
            b.synchronize()
            if r >= 2:
                times.append(a.elapsed_time(b) / 1e3 / K)
        med = statistics.median(times)
        print("reduce dtype=%s rows=%d cols=%d torch_us=%.2f torch_gbs=%.1f" % (NAMES[dt], rows, cols, med * 1e6,
                                                                              rows * cols * xs[0].element_size() / med / 1e9))


main()
