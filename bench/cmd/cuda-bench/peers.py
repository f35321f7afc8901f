"""cuda-bench's peers: the same computations in JAX (jit) and PyTorch (eager, and torch.compile
where it works) on the GPU, timed the same way: a sample is N calls, the last one waited for.

Prints one line per result, tab-separated: WORKLOAD, CONTENDER, median seconds per call (or
"note" lines). Workload names match main.go's keys ("chain 2^24", "softmax 512x1024x1024 (last
axis)", ...). Arguments: "quick" (softmax on 64x1024x1024), "only=A,B" (the workloads whose names
contain one of A, B, ..., as cuda-bench's -only).
"""
import statistics
import sys
import time

QUICK = "quick" in sys.argv[1:]
ONLY = [o for a in sys.argv[1:] if a.startswith("only=") for o in a[5:].split(",") if o]
ROUNDS = 9


def works():
    s = (64 if QUICK else 512, 1024, 1024)
    return [w for w in all_works(s) if not ONLY or any(o.lower() in w[0].lower() for o in ONLY)]


def all_works(s):
    return [
        ("chain 2^24", (1 << 24,), "chain", 20),
        ("chain 2^26", (1 << 26,), "chain", 10),
        ("softmax 512x1024x1024 (last axis)", s, "softmax", 3),
        ("row sum 8192x8192", (8192, 8192), "rowsum", 10),
        ("column sum 32768x768 (bias gradient)", (32768, 768), "colsum", 20),
        ("column sum 401408x32 (conv bias gradient)", (401408, 32), "colsum", 20),
        ("layer norm 16384x1024", (16384, 1024), "layernorm", 20),
        ("floor: x+1 on 4 floats", (4,), "floor", 1),
        ("conv 3x3 32->64 b128 14x14, forward", (128, 14, 14, 32), "conv", 20),
        ("conv 3x3 32->64 b128 14x14, fwd + both grads", (128, 14, 14, 32), "convgrads", 20),
        ("attention B8 S512 H12 D64, forward", (3, 8, 512, 12, 64), "attn", 10),
        ("attention B8 S512 H12 D64, fwd + grads", (3, 8, 512, 12, 64), "attngrads", 10),
        ("attention BFloat16 B8 S512 H12 D64, forward", (3, 8, 512, 12, 64), "attnbf16", 10),
        ("attention BFloat16 B8 S512 H12 D64, fwd + grads", (3, 8, 512, 12, 64), "attngradsbf16", 10),
    ]


# products: PyTorch runs them twice, exact Float32 and TF32 (its matmul default is exact, its cuDNN
# convolutions' TF32); JAX once, at its default precision (TF32 on this GPU)
PRODUCTS = ("conv", "convgrads", "attn", "attngrads")


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
    w = 0.05 * jnp.sin(jnp.arange(3 * 3 * 32 * 64, dtype=jnp.float32)).reshape(3, 3, 32, 64)
    conv = lambda x, w: jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    attn = lambda x: jax.nn.dot_product_attention(x[0], x[1], x[2])  # BSHD, JAX's BTNH
    fns["conv"] = lambda x: conv(x, w)
    fns["convgrads"] = lambda x: jax.grad(lambda x, w: 0.5 * jnp.sum(jnp.square(conv(x, w))), argnums=(0, 1))(x, w)
    fns["attn"] = attn
    fns["attngrads"] = jax.grad(lambda x: 0.5 * jnp.sum(jnp.square(attn(x))))
    fns["attnbf16"] = lambda x: attn(x.astype(jnp.bfloat16))
    fns["attngradsbf16"] = jax.grad(lambda x: 0.5 * jnp.sum(jnp.square(attn(x.astype(jnp.bfloat16)).astype(jnp.float32))))
    for name, shape, kind, calls in works():
        f = jax.jit(fns[kind])
        x = jax.random.normal(jax.random.PRNGKey(0), shape, jnp.float32)
        jax.block_until_ready(f(x))
        waited, queued = [], []
        for _ in range(ROUNDS + 2):
            t = time.perf_counter()
            for _ in range(calls):
                y = f(x)
                if kind == "floor":
                    y = jax.device_get(y)
                else:
                    jax.block_until_ready(y)
            waited.append((time.perf_counter() - t) / calls)
            t = time.perf_counter()
            ys = [f(x) for _ in range(calls)]
            jax.block_until_ready(ys[-1])
            queued.append((time.perf_counter() - t) / calls)
            del ys
        emit(name, "jax", statistics.median(waited[2:]))
        if kind != "floor":
            emit(name, "jax queued", statistics.median(queued[2:]))
        del x


def timed(f, x, calls):
    """Median seconds per call of f(x) on the GPU: CUDA events around `calls` calls, after a warm-up
    call and two warm-up samples."""
    import torch

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
    return statistics.median(samples[2:])


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
    import torch.nn.functional as F

    w = (0.05 * torch.sin(torch.arange(3 * 3 * 32 * 64, device="cuda", dtype=torch.float32))).reshape(3, 3, 32, 64)
    w = w.permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)  # HWIO -> OIHW, NHWC in memory

    def conv(x, w):  # x NHWC in memory: an NCHW view in channels_last
        return F.conv2d(x.permute(0, 3, 1, 2), w, padding=1)

    def attn(x):  # BSHD in memory: [B, H, S, D] views
        return F.scaled_dot_product_attention(x[0].transpose(1, 2), x[1].transpose(1, 2), x[2].transpose(1, 2))

    def convgrads(x):
        xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
        y = conv(xr, wr)
        return torch.autograd.grad(0.5 * (y * y).sum(), (xr, wr))

    def attngrads(x):
        xr = x.detach().requires_grad_()
        o = attn(xr)
        return torch.autograd.grad(0.5 * (o * o).sum(), (xr,))

    def attngradsbf16(x):
        xr = x.detach().requires_grad_()
        o = attn(xr.to(torch.bfloat16)).float()
        return torch.autograd.grad(0.5 * (o * o).sum(), (xr,))

    fns.update(conv=lambda x: conv(x, w), convgrads=convgrads, attn=attn, attngrads=attngrads,
               attnbf16=lambda x: attn(x.to(torch.bfloat16)), attngradsbf16=attngradsbf16)
    for name, shape, kind, calls in works():
        if kind == "floor":
            continue
        if kind.endswith("bf16"):  # TF32 does not apply: SDPA's BFloat16 kernels
            x = torch.randn(shape, device="cuda", dtype=torch.float32)
            emit(name, "torch bf16", timed(fns[kind], x, calls))
            del x
            torch.cuda.empty_cache()
            continue
        if kind in PRODUCTS:
            x = torch.randn(shape, device="cuda", dtype=torch.float32)
            for label, tf32 in (("torch exact", False), ("torch tf32", True)):
                torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
                emit(name, label, timed(fns[kind], x, calls))
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = False, True  # PyTorch's defaults
            del x
            torch.cuda.empty_cache()
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
            emit(name, label, timed(f, x, calls))
        del x
        torch.cuda.empty_cache()


for runner in (run_jax, run_torch):
    try:
        runner()
    except Exception as e:
        print("note\t%s\tleft out: %s" % (runner.__name__, str(e).split("\n")[0][:200]), flush=True)
