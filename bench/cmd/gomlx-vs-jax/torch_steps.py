"""The GoMLX-vs-JAX benchmark's PyTorch side: the causal language model of main.go in PyTorch.

A child process of gomlx-vs-jax with the line protocol of jax_steps.py:
  version            -> "torch X.Y on DEVICE (MODE, PRECISION)"
  init lm LAYERS D HEADS SEQ BATCH VOCAB mha|explicit f32|bf16
                     -> builds the model and its AdamW, runs one step (for torch.compile: the
                        compilation), answers "ok FIRST_STEP_SECONDS LOSS [NOTES]" (NOTES: on CUDA
                        the SDPA backend that torch picks for the model's shapes)
  step               -> one training step with the loss read back (.item()), answers its seconds
  mem                -> torch.cuda.max_memory_allocated() since the last reset, or "n/a" on the CPU
  reset              -> torch.cuda.reset_peak_memory_stats(), answers "ok"
  quit
Arguments: MODE (eager or compile: torch.compile(model), the AdamW step outside it), DEVICE
(cuda or cpu; default: cuda when available), PRECISION (tf32: float32 products on TF32 tensor
cores, torch.backends.cuda.matmul.allow_tf32 = True; fp32: exact float32 products).

The model mirrors bench/internal/steps.LMConfig: token and learned positional embeddings; pre-norm
blocks (nn.LayerNorm eps 1e-5; Q, K, V, output projections as nn.Linear with bias; attention
by F.scaled_dot_product_attention(is_causal=True) in the "mha" form, by explicit products, a
masked softmax and a product in the "explicit" form; nn.Linear 4d, exact GELU, nn.Linear d);
a final LayerNorm; logits by an untied nn.Linear; F.cross_entropy on the next tokens, in float32.
Weights get GoMLX's default initialisation (He normal: std sqrt(2/fan_in), zero biases).
AdamW: lr 3e-4, betas 0.9 and 0.999, eps 1e-8, weight decay 0.1 on every parameter
(fused=True on CUDA). "bf16" is torch's usual mixed precision, torch.autocast(bfloat16) over
float32 parameters (GoMLX's and JAX's bf16 steps keep the parameters themselves in BFloat16).
"""
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ADAMW = {"lr": 3e-4, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.1}


def he_normal_(linear):
    nn.init.normal_(linear.weight, 0.0, math.sqrt(2.0 / linear.in_features))
    nn.init.zeros_(linear.bias)
    return linear


class Block(nn.Module):
    def __init__(self, d, heads, explicit):
        super().__init__()
        self.heads, self.explicit = heads, explicit
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-5), nn.LayerNorm(d, eps=1e-5)
        self.q, self.k, self.v, self.o = (he_normal_(nn.Linear(d, d)) for _ in range(4))
        self.fc, self.out = he_normal_(nn.Linear(d, 4 * d)), he_normal_(nn.Linear(4 * d, d))

    def attention(self, x):
        b, s, d = x.shape
        split = lambda t: t.view(b, s, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))  # [b, heads, s, hd]
        if self.explicit or not hasattr(F, "scaled_dot_product_attention"):
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
            mask = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
            out = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(out.transpose(1, 2).reshape(b, s, d))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class LM(nn.Module):
    def __init__(self, layers, d, heads, seq, vocab, explicit):
        super().__init__()
        self.tok = nn.Parameter(torch.randn(vocab, d) * math.sqrt(2.0 / vocab))
        self.pos = nn.Parameter(torch.randn(seq, d) * math.sqrt(2.0 / seq))
        self.blocks = nn.ModuleList(Block(d, heads, explicit) for _ in range(layers))
        self.lnf = nn.LayerNorm(d, eps=1e-5)
        self.logits = he_normal_(nn.Linear(d, vocab))

    def forward(self, x):
        h = self.tok[x] + self.pos
        for blk in self.blocks:
            h = blk(h)
        return self.logits(self.lnf(h))


def sdpa_backend(device, batch, heads, seq, hd, dtype):
    """The backend torch's dispatcher picks for SDPA on these shapes (torch._fused_sdp_choice)."""
    if device.type != "cuda" or not hasattr(torch, "_fused_sdp_choice"):
        return "n/a"
    try:
        q = torch.empty(batch, heads, seq, hd, device=device, dtype=dtype, requires_grad=True)
        choice = torch._fused_sdp_choice(q, q, q, None, 0.0, True)
        try:
            from torch.nn.attention import SDPBackend
            return SDPBackend(choice).name
        except Exception:  # older torch: the enum's integer
            return str(choice)
    except Exception as e:
        return "unknown(%s)" % type(e).__name__


class Server:
    def __init__(self, mode, device, precision):
        self.mode, self.device, self.precision = mode, torch.device(device), precision
        if self.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
            torch.backends.cudnn.allow_tf32 = precision == "tf32"
        self.state = None

    def version(self):
        name = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu (%d threads)" % torch.get_num_threads()
        return "torch %s on %s (%s, %s)" % (torch.__version__, name, self.mode, self.precision)

    def init(self, kind, *args):
        if kind != "lm" or len(args) not in (6, 7, 8):
            raise ValueError("torch_steps.py has only the lm workload (lm LAYERS D HEADS SEQ BATCH VOCAB FORM DTYPE), not %r" % kind)
        return self.init_lm(*args)

    def init_lm(self, layers, d, heads, seq, batch, vocab, form="mha", dtype="f32"):
        self.state = None
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        layers, d, heads, seq, batch, vocab = (int(v) for v in (layers, d, heads, seq, batch, vocab))
        torch.manual_seed(0)
        model = LM(layers, d, heads, seq, vocab, form == "explicit").to(self.device)
        fused = {"fused": True} if self.device.type == "cuda" else {}
        opt = torch.optim.AdamW(model.parameters(), **ADAMW, **fused)
        fwd = torch.compile(model) if self.mode == "compile" else model
        toks = torch.randint(0, vocab, (batch, seq + 1), device=self.device)
        x, y = toks[:, :-1].contiguous(), toks[:, 1:].contiguous()
        amp_dtype = torch.bfloat16 if dtype == "bf16" else None

        def step():
            if amp_dtype is not None:
                with torch.autocast(self.device.type, dtype=amp_dtype):
                    logits = fwd(x)
            else:
                logits = fwd(x)
            loss = F.cross_entropy(logits.float().view(-1, vocab), y.view(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.item()

        t = time.perf_counter()
        loss0 = step()
        first = time.perf_counter() - t
        self.state = step
        notes = ""
        if form == "mha" and not hasattr(F, "scaled_dot_product_attention"):
            notes = " sdpa=absent(explicit-products)"  # torch < 2.0
        elif form == "mha" and self.device.type == "cuda":
            notes = " sdpa=" + sdpa_backend(self.device, batch, heads, seq, d // heads, amp_dtype or torch.float32)
        return "ok %.6f %.6f%s" % (first, loss0, notes)

    def step(self):
        t = time.perf_counter()
        self.state()
        return "%.9f" % (time.perf_counter() - t)

    def mem(self):
        if self.device.type != "cuda":
            return "n/a"
        return str(torch.cuda.max_memory_allocated(self.device))

    def reset(self):
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        return "ok"


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "eager"
    device = sys.argv[2] if len(sys.argv) > 2 else ("cuda" if torch.cuda.is_available() else "cpu")
    precision = sys.argv[3] if len(sys.argv) > 3 else "tf32"
    if mode not in ("eager", "compile") or precision not in ("tf32", "fp32"):
        sys.exit("usage: torch_steps.py [eager|compile] [cuda|cpu] [tf32|fp32]")
    srv = Server(mode, device, precision)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            cmd = words[0]
            if cmd == "quit":
                return
            elif cmd == "version":
                reply = srv.version()
            elif cmd == "init":
                reply = srv.init(*words[1:])
            elif cmd in ("step", "mem", "reset"):
                reply = getattr(srv, cmd)()
            else:
                reply = "error: unknown command %r" % cmd
        except Exception as e:  # reported to the Go side
            reply = "error: %s: %s" % (type(e).__name__, str(e).replace("\n", " "))
        sys.stdout.write(reply + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
