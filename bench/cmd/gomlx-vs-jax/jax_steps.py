"""The GoMLX-vs-JAX benchmark's JAX side: the same three training steps as main.go, in JAX on CPU.

A child process of gomlx-vs-jax, driven over stdin/stdout one line at a time, so that its steps
interleave with the GoMLX backends' in one run:
  version            -> "jax X.Y.Z on DEVICE"
  init KIND SIZE     -> builds the step (mlp BATCH, cnn BATCH, transformer SEQ [BATCH]), runs it once
                        (compile), answers "ok FIRST_STEP_SECONDS"
  step               -> one SGD step with the loss read back, answers its seconds
  quit
Models mirror main.go: dense layers with bias, ReLU, 2x2 max-pool, pre-norm transformer block
with exact GELU; SGD with learning rate 0.001; float32. JAX_PLATFORMS=cuda runs it on the GPU (JAX then
multiplies float32 with TF32 tensor cores, its default).
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


def make_step(loss):
    def step(p, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        return l, jax.tree_util.tree_map(lambda a, b: a - LR * b, p, g)

    return jax.jit(step, donate_argnums=0)


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
                build = {"mlp": mlp, "cnn": cnn, "transformer": transformer}[words[1]]
                params, x, y, loss = build(*[int(w) for w in words[2:]])
                step = make_step(loss)
                t = time.perf_counter()
                l, params = step(params, x, y)
                float(l)
                state = [step, params, x, y]
                reply = "ok %.6f" % (time.perf_counter() - t)
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
