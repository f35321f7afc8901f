"""report.py SAMPLES EXE [TOP]: inclusive and self shares per function from sampler.c's samples.

Frames in EXE are named with addr2line, frames in shared libraries with the symbol dladdr found
(else the library's name: stripped libraries such as libcuda count as one function)."""
import collections
import subprocess
import sys


def main():
    path, exe = sys.argv[1], sys.argv[2]
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    base = exe.split("/")[-1]
    samples = collections.defaultdict(list)
    for line in open(path):
        i, mod, off, sym = line.split()
        samples[int(i)].append((mod, int(off, 16), sym))
    offs = sorted({o for s in samples.values() for m, o, _ in s if m.endswith(base)})
    names = {}
    if offs:
        out = subprocess.run(["addr2line", "-f", "-C", "-e", exe] + [hex(o) for o in offs],
                             capture_output=True, text=True).stdout.split("\n")
        names = {o: out[2 * k] for k, o in enumerate(offs)}

    def name(mod, off, sym):
        if mod.endswith(base):
            return names.get(off, "?")
        lib = mod.split("/")[-1]
        return f"{sym}@{lib}" if sym != "?" else lib

    incl, self_ = collections.Counter(), collections.Counter()
    n = 0
    for frames in samples.values():
        k = 0  # the sampler's own frames, then the signal trampoline
        while k < len(frames) and ("sampler" in frames[k][0] or "backtrace" in frames[k][2]):
            k += 1
        frames = frames[k + 1:]
        if not frames:
            continue
        n += 1
        fns = [name(*f) for f in frames]
        self_[fns[0]] += 1
        for f in set(fns):
            incl[f] += 1
    print(f"{n} samples")
    print("inclusive:")
    for f, c in incl.most_common(top):
        print(f"  {100 * c / n:5.1f}%  self {100 * self_[f] / n:5.1f}%  {f}")
    print("self:")
    for f, c in self_.most_common(top // 2):
        print(f"  {100 * c / n:5.1f}%  {f}")


if __name__ == "__main__":
    main()
