"""The GoMLX-vs-JAX benchmark's JAX side: the same training steps as main.go, in JAX.

A child process of gomlx-vs-jax, driven over stdin/stdout one line at a time, so that its steps
interleave with the GoMLX backends' in one run:
  version            -> "jax X.Y.Z on DEVICE"
  init KIND SIZE     -> builds the step (mlp BATCH, cnn BATCH, transformer SEQ [BATCH],
                        lm LAYERS D HEADS SEQ BATCH VOCAB mha|explicit f32|bf16), runs it once
                        (compile), answers "ok FIRST_STEP_SECONDS LOSS [NOTES]"
  step               -> one training step with the loss read back, answers its seconds
  mem                -> the device's peak bytes in use (memory_stats()['peak_bytes_in_use'],
                        since the process started: JAX cannot reset it), or "n/a"
  reset              -> "ok" (the peak cannot be reset in JAX)
  quit
Models mirror bench/internal/steps: dense layers with bias, ReLU, 2x2 max-pool, pre-norm
transformer block with exact GELU, SGD with learning rate 0.001; and the causal language model
(steps.LMConfig) with AdamW, written by hand (the same formula as GoMLX's optimizer.Adam with
weight decay; optax is not needed). The LM's "mha" form uses jax.nn.dot_product_attention
(is_causal=True: JAX's fused attention, as GoMLX's MultiHeadAttention is GoMLX's), "explicit"
writes the products with einsum. float32, or BFloat16 parameters and activations with the
AdamW moments, the LayerNorm statistics and the loss in float32. JAX_PLATFORMS=cuda runs it on
the GPU (JAX then multiplies float32 with TF32 tensor cores, its default); set
XLA_PYTHON_CLIENT_PREALLOCATE=false there so that the peak is the model's (gomlx-vs-jax does).
"""
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

LR = 0.001


def dense_init(key, n_in, n_out):
    w = jax.random.normal(key, (n_in, n_out), jnp.float32) * (1.0 / n_in) ** 0.5
    return {"w": w, "b": jnp.zeros((n_out,), jnp.float32)}


def dense(p, x):
    return x @ p["w"] + p["b"]


def xent(logits, labels):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels, axis=-1))


def mlp(batch):
    k = jax.random.split(jax.random.PRNGKey(0), 4)
    params = {"d0": dense_init(k[0], 784, 1024), "d1": dense_init(k[1], 1024, 1024), "d2": dense_init(k[2], 1024, 10)}
    x = jax.random.normal(k[3], (batch, 784), jnp.float32)
    y = jax.random.randint(k[3], (batch, 1), 0, 10)

    def loss(p, x, y):
        h = jax.nn.relu(dense(p["d0"], x))
        h = jax.nn.relu(dense(p["d1"], h))
        return xent(dense(p["d2"], h), y)

    return params, x, y, loss


def conv(p, x):
    y = lax.conv_general_dilated(x, p["w"], (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return y + p["b"]


def cnn(batch):
    k = jax.random.split(jax.random.PRNGKey(0), 4)
    params = {
        "c0": {"w": jax.random.normal(k[0], (3, 3, 3, 32), jnp.float32) * 0.2, "b": jnp.zeros((32,), jnp.float32)},
        "c1": {"w": jax.random.normal(k[1], (3, 3, 32, 64), jnp.float32) * 0.06, "b": jnp.zeros((64,), jnp.float32)},
        "d": dense_init(k[2], 64, 10),
    }
    x = jax.random.normal(k[3], (batch, 28, 28, 3), jnp.float32)
    y = jax.random.randint(k[3], (batch, 1), 0, 10)

    def loss(p, x, y):
        h = jax.nn.relu(conv(p["c0"], x))
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        h = jax.nn.relu(conv(p["c1"], h))
        h = jnp.mean(h, axis=(1, 2))
        return xent(dense(p["d"], h), y)

    return params, x, y, loss


def layer_norm(p, x, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * p["g"] + p["b"]


def transformer(seq, batch=1, d=768, heads=12, ffn=3072):
    k = jax.random.split(jax.random.PRNGKey(0), 8)
    ln = lambda: {"g": jnp.ones((d,), jnp.float32), "b": jnp.zeros((d,), jnp.float32)}  # noqa: E731
    params = {
        "ln0": ln(), "ln1": ln(),
        "q": dense_init(k[0], d, d), "k": dense_init(k[1], d, d), "v": dense_init(k[2], d, d), "o": dense_init(k[3], d, d),
        "ff0": dense_init(k[4], d, ffn), "ff1": dense_init(k[5], ffn, d),
    }
    x = jax.random.normal(k[6], (batch, seq, d), jnp.float32)
    y = jax.random.normal(k[7], (batch, seq, d), jnp.float32)
    hd = d // heads

    def mha(p, x):
        b, s, _ = x.shape
        split = lambda t: t.reshape(b, s, heads, hd)  # noqa: E731
        q, kk, v = split(dense(p["q"], x)), split(dense(p["k"], x)), split(dense(p["v"], x))
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, kk) / jnp.sqrt(jnp.float32(hd))
        w = jax.nn.softmax(logits, axis=-1)
        out = jnp.einsum("bhqk,bkhd->bqhd", w, v).reshape(b, s, d)
        return dense(p["o"], out)

    def loss(p, x, y):
        h = x + mha(p, layer_norm(p["ln0"], x))
        f = jax.nn.gelu(dense(p["ff0"], layer_norm(p["ln1"], h)), approximate=False)
        out = h + dense(p["ff1"], f)
        return jnp.mean(jnp.square(out - y))

    return params, x, y, loss


def lm(layers, d, heads, seq, batch, vocab, form="mha", dtype="f32"):
    dt = {"f32": jnp.float32, "bf16": jnp.bfloat16}[dtype]
    keys = iter(jax.random.split(jax.random.PRNGKey(0), 8 * layers + 8))
    hd = d // heads

    def normal(shape, fan_in):  # GoMLX's default: He normal
        return (jax.random.normal(next(keys), shape, jnp.float32) * (2.0 / fan_in) ** 0.5).astype(dt)

    def lin(n_in, n_out):
        return {"w": normal((n_in, n_out), n_in), "b": jnp.zeros((n_out,), dt)}

    ln = lambda: {"g": jnp.ones((d,), dt), "b": jnp.zeros((d,), dt)}  # noqa: E731
    params = {
        "tok": normal((vocab, d), vocab), "pos": normal((seq, d), seq),
        "blocks": [{"ln1": ln(), "q": lin(d, d), "k": lin(d, d), "v": lin(d, d), "o": lin(d, d),
                    "ln2": ln(), "fc": lin(d, 4 * d), "out": lin(4 * d, d)} for _ in range(layers)],
        "lnf": ln(), "logits": lin(d, vocab),
    }
    toks = jax.random.randint(next(keys), (batch, seq + 1), 0, vocab, jnp.int32)
    x, y = toks[:, :-1], toks[:, 1:, None]

    def norm(p, x):  # statistics in float32, as GoMLX's LayerNorm does for BFloat16
        return layer_norm(p, x.astype(jnp.float32)).astype(dt)

    def attn(p, x):
        b, s, _ = x.shape
        split = lambda t: t.reshape(b, s, heads, hd)  # noqa: E731
        q, k, v = split(dense(p["q"], x)), split(dense(p["k"], x)), split(dense(p["v"], x))
        if form == "mha":
            out = jax.nn.dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) * jnp.asarray(1.0 / hd ** 0.5, dt)
            mask = jnp.tril(jnp.ones((s, s), jnp.bool_))
            scores = jnp.where(mask, scores, jnp.asarray(-jnp.inf, dt))
            out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, axis=-1), v)
        return dense(p["o"], out.reshape(b, s, d))

    def loss(p, x, y):
        h = p["tok"][x] + p["pos"][None]
        for blk in p["blocks"]:
            h = h + attn(blk, norm(blk["ln1"], h))
            h = h + dense(blk["out"], jax.nn.gelu(dense(blk["fc"], norm(blk["ln2"], h)), approximate=False))
        logits = dense(p["logits"], norm(p["lnf"], h)).astype(jnp.float32)
        return xent(logits, y)

    return params, x, y, loss, "adamw"


# AdamW as GoMLX's optimizer.Adam().WeightDecay() computes it (steps.LMConfig): moments and
# arithmetic in float32, the update cast back to the parameter's dtype.
ADAMW = {"lr": 3e-4, "b1": 0.9, "b2": 0.999, "eps": 1e-8, "wd": 0.1}


def make_step(loss, opt="sgd"):
    if opt == "sgd":
        def step(state, x, y):
            p = state
            l, g = jax.value_and_grad(loss)(p, x, y)
            return l, jax.tree_util.tree_map(lambda a, b: a - LR * b, p, g)

        return jax.jit(step, donate_argnums=0), lambda p: p

    a = ADAMW
    f32 = jnp.float32
    tmap = jax.tree_util.tree_map

    def init(p):
        z = lambda w: jnp.zeros(w.shape, f32)  # noqa: E731
        return {"p": p, "m": tmap(z, p), "v": tmap(z, p), "t": jnp.zeros((), f32)}

    def step(state, x, y):
        l, g = jax.value_and_grad(loss)(state["p"], x, y)
        t = state["t"] + 1
        m = tmap(lambda m, g: a["b1"] * m + (1 - a["b1"]) * g.astype(f32), state["m"], g)
        v = tmap(lambda v, g: a["b2"] * v + (1 - a["b2"]) * jnp.square(g.astype(f32)), state["v"], g)
        c1, c2 = 1 / (1 - a["b1"] ** t), 1 / (1 - a["b2"] ** t)

        def upd(w, m, v):
            w32 = w.astype(f32)
            d = a["lr"] * (m * c1) / (jnp.sqrt(v * c2) + a["eps"]) + a["lr"] * a["wd"] * w32
            return (w32 - d).astype(w.dtype)

        return l, {"p": tmap(upd, state["p"], m, v), "m": m, "v": v, "t": t}

    return jax.jit(step, donate_argnums=0), init


def peak_bytes():
    stats = jax.devices()[0].memory_stats()
    if not stats or "peak_bytes_in_use" not in stats:
        return "n/a"
    return str(stats["peak_bytes_in_use"])


def main():
    state = None
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            if words[0] == "version":
                reply = "jax %s on %s (%d CPU threads visible)" % (jax.__version__, jax.devices()[0].device_kind, os.cpu_count())
            elif words[0] == "init":
                state = None  # frees the previous workload's buffers
                build = {"mlp": mlp, "cnn": cnn, "transformer": transformer, "lm": lm}[words[1]]
                args = [int(w) if w.isdigit() else w for w in words[2:]]
                params, x, y, loss, *opt = build(*args)
                step, init = make_step(loss, *opt)
                params = init(params)
                t = time.perf_counter()
                l, params = step(params, x, y)
                loss0 = float(l)
                state = [step, params, x, y]
                reply = "ok %.6f %.6f" % (time.perf_counter() - t, loss0)
            elif words[0] == "mem":
                reply = peak_bytes()
            elif words[0] == "reset":
                reply = "ok"
            elif words[0] == "step":
                step, params, x, y = state
                t = time.perf_counter()
                l, state[1] = step(params, x, y)
                float(l)
                reply = "%.9f" % (time.perf_counter() - t)
            elif words[0] == "quit":
                return
            else:
                reply = "error: unknown command %r" % words[0]
        except Exception as e:  # reported to the Go side, which stops
            reply = "error: %s: %s" % (type(e).__name__, str(e).replace("\n", " "))
        sys.stdout.write(reply + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
