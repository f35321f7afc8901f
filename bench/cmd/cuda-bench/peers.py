"""cuda-bench's peers: the same computations in JAX (jit) and PyTorch (eager, and torch.compile
where it works) on the GPU, timed the same way: a sample is N calls, the last one waited for.

Prints one line per result, tab-separated: WORKLOAD, CONTENDER, median seconds per call (or
"note" lines). Workload names match main.go's keys ("chain 2^24", "softmax 512x1024x1024 (last
axis)", ...). "quick" as argument: softmax on 64x1024x1024.
"""
import statistics
import sys
import time

QUICK = len(sys.argv) > 1 and sys.argv[1] == "quick"
ROUNDS = 9


def works():
    s = (64 if QUICK else 512, 1024, 1024)
    return [
        ("chain 2^24", (1 << 24,), "chain", 20),
        ("chain 2^26", (1 << 26,), "chain", 10),
        ("softmax 512x1024x1024 (last axis)", s, "softmax", 3),
        ("row sum 8192x8192", (8192, 8192), "rowsum", 10),
        ("column sum 32768x768 (bias gradient)", (32768, 768), "colsum", 20),
        ("column sum 401408x32 (conv bias gradient)", (401408, 32), "colsum", 20),
        ("layer norm 16384x1024", (16384, 1024), "layernorm", 20),
        ("floor: x+1 on 4 floats", (4,), "floor", 1),
    ]


def emit(w, who, sec):
    print("%s\t%s\t%.9f" % (w, who, sec), flush=True)


def run_jax():
    import jax
    import jax.numpy as jnp

    print("note\tjax\t%s on %s" % (jax.__version__, jax.devices()[0].device_kind), flush=True)
    fns = {
        "chain": lambda x: jax.nn.relu(1.5 * x + 0.5) * x,
        "softmax": lambda x: jax.nn.softmax(x, axis=-1),
        "rowsum": lambda x: jnp.sum(x, axis=-1),
        "colsum": lambda x: jnp.sum(x, axis=0),
        "layernorm": lambda x: (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(jnp.square(x - x.mean(-1, keepdims=True)).mean(-1, keepdims=True) + 1e-5),
        "floor": lambda x: x + 1,
    }
    for name, shape, kind, calls in works():
        f = jax.jit(fns[kind])
        x = jax.random.normal(jax.random.PRNGKey(0), shape, jnp.float32)
        f(x).block_until_ready()
        waited, queued = [], []
        for _ in range(ROUNDS + 2):
            t = time.perf_counter()
            for _ in range(calls):
                y = f(x)
                if kind == "floor":
                    y = jax.device_get(y)
                else:
                    y.block_until_ready()
            waited.append((time.perf_counter() - t) / calls)
            t = time.perf_counter()
            ys = [f(x) for _ in range(calls)]
            ys[-1].block_until_ready()
            queued.append((time.perf_counter() - t) / calls)
            del ys
        emit(name, "jax", statistics.median(waited[2:]))
        if kind != "floor":
            emit(name, "jax queued", statistics.median(queued[2:]))
        del x


def run_torch():
    import torch

    print("note\ttorch\t%s on %s" % (torch.__version__, torch.cuda.get_device_name(0)), flush=True)
    fns = {
        "chain": lambda x: torch.relu(1.5 * x + 0.5) * x,
        "softmax": lambda x: torch.softmax(x, dim=-1),
        "rowsum": lambda x: x.sum(-1),
        "colsum": lambda x: x.sum(0),
        "layernorm": lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:], eps=1e-5),
        "floor": lambda x: x + 1,
    }
    for name, shape, kind, calls in works():
        if kind == "floor":
            continue
        x = torch.randn(shape, device="cuda", dtype=torch.float32)
        for label, f in (("torch eager", fns[kind]), ("torch compiled", None)):
            if f is None:
                try:
                    f = torch.compile(fns[kind])
                    f(x)
                except Exception as e:  # no compiler: eager only
                    print("note\ttorch\tcompile left out: %s" % str(e).split("\n")[0][:120], flush=True)
                    break
            f(x)
            torch.cuda.synchronize()
            samples = []
            for _ in range(ROUNDS + 2):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                for _ in range(calls):
                    y = f(x)
                b.record()
                b.synchronize()
                samples.append(a.elapsed_time(b) / 1e3 / calls)
                del y
            emit(name, label, statistics.median(samples[2:]))
        del x
        torch.cuda.empty_cache()


for runner in (run_jax, run_torch):
    try:
        runner()
    except Exception as e:
        print("note\t%s\tleft out: %s" % (runner.__name__, str(e).split("\n")[0][:200]), flush=True)
