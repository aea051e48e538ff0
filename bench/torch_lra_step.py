#!/usr/bin/python3
"""PyTorch side of the LRA ListOps training-step benchmark (issue #17): the LRA classifier of
docs/transformer-ls.md §2.4 (embeddings, pre-LN blocks with the long-short attention of §2.3,
the CLS injected in the last layer only, final LayerNorm, the SCHead) written from the
specification and models/lra/lra_model.h's description, loaded with lsformer's weights, checked
against lsformer's loss, gradients and AdamW update, and timed: whole training steps (forward,
cross-entropy, backward, torch.optim.AdamW) and nothing else.

    build/bench/bench_lra_step --dump /tmp/lra                   # lsformer writes the case
    /usr/bin/python3 bench/torch_lra_step.py /tmp/lra --threads 2  # check + time, JSON lines

DIR holds what `bench_lra_step --dump DIR` writes: weights.safetensors (the initial state dict
under the official names: model.cls_embed, model.embeddings.*, model.transformer_{i}.{norm1, mha,
norm2, mlpblock}.*, model.norm.*, seq_classifer.mlpblock.*) and io.safetensors (tokens.<k> [B, n]
i64, mask.<k> [B, n] u8, labels.<k> [B] for the batches the steps cycle through; after one step on
batch 0: lsformer's logits [B, classes], loss, grad.<name> and after.<name>, every parameter after
the AdamW update); metadata: the configuration and the optimizer's hyper-parameters, which this
script reads (nothing is repeated here). The attention is torch_long_short.py's (imported, not
copied); the safetensors reader is torch_common.py's; nothing uses lsformer's code.

Check (before any timing), from the dumped weights on batch 0, in float32 (what is timed) and in
float64:
  * logits, loss and every parameter gradient: max|lsformer − PyTorch f32| ≤ tol · max(max|PyTorch
    f32|, floor), tol = 4·L·2^-24 with L = B·n the longest reduction (every weight gradient of the
    blocks sums over all B·n token rows): the usual bound of a float32 sum of L terms relative to
    the tensor's own size, with a margin of 4 (as torch_long_short.py). For gradients, floor =
    2^-10 · the largest |gradient| of the model: a tensor far smaller than the model's gradients
    is held to the rounding of sums at the model's scale, not to its own size (dconv_fc.bias is
    the case: its exact gradient is 0, a bias on every token's projection logit cancels in the
    softmax over the tokens, and both sides return rounding noise). lsformer against the float64
    run must meet the same bound.
  * the AdamW update: torch.optim.AdamW (the same hyper-parameters) applied to lsformer's own
    gradients, in float64, against lsformer's updated parameters: max|difference| ≤ 8·2^-24 ·
    (max|p| + lr), a few float32 roundings of the decay product and the subtraction (relative to
    |p|) and of the update m̂/(√v̂ + eps) (relative to lr, its size at most 1 here). The update is
    checked on lsformer's gradients because a first AdamW step is lr·g/(|g| + eps) ≈ lr·sign(g):
    a gradient that is rounding noise around an exact 0 (dconv_fc.bias) may flip sign between
    two correct implementations and move its parameter by up to 2·lr. PyTorch's own updated
    parameters (from its own float32 gradients) are reported beside it, not gated.
The JSON line reports each tensor's differences from both PyTorch runs and the bound.

Timing (mirrors bench_lra_step.cpp): one call = optimizer.zero_grad(set_to_none=True),
logits = model(tokens, mask), F.cross_entropy(logits, labels), backward, AdamW step, on the next of
the dumped batches (the same tokens, masks and labels lsformer cycles through); `--warmup` calls,
a calibration of calls per sample, samples until >= --min-samples and >= --sample-time seconds
(bench_common.time_call); median, min, max. Memory: VmRSS (from /proc/self/status) before the
first step and VmHWM after the last, as bench_lra_step reads its own. Threads:
torch.set_num_threads(N), and OPENBLAS_NUM_THREADS = N before torch is imported (Debian's torch
does its float GEMMs in libblas.so.3, which set_num_threads does not reach; see torch_ops.py).
"""
import argparse
import json
import os
import sys

from bench_common import add_peer_args, openblas_config, time_call as _time_call  # imports no torch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir", help="directory written by bench_lra_step --dump")
    add_peer_args(p, sample_time=10.0, warmup=1, min_samples=5, max_samples=50)
    return p.parse_args()


ARGS = parse_args()
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)
import torch  # noqa: E402  (after OPENBLAS_NUM_THREADS, which OpenBLAS reads when loaded)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_common import read_safetensors  # noqa: E402
from torch_long_short import LongShortAttention  # noqa: E402


def proc_status_bytes(field):
    """A field of /proc/self/status ("VmRSS", "VmHWM") in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return -1


class Embeddings(nn.Module):
    """Token row + learned absolute position row (§2.4); dropout 0."""

    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c["vocab_size"], c["dim"])
        self.position_embeddings = nn.Embedding(c["max_seq_len"], c["dim"])

    def forward(self, tokens):  # [B, n] -> [B, n, d]
        return self.word_embeddings(tokens) + self.position_embeddings.weight[:tokens.shape[1]]


class Block(nn.Module):
    """Pre-LN block (§2.4): X ← X + Attn(LN1(X)); X ← X + MLP(LN2(X)). With a CLS c [B, 1, d]:
    the attention gets the raw CLS and returns 1 + n rows; the CLS row's residual is c."""

    def __init__(self, c):
        super().__init__()
        d = c["dim"]
        self.norm1 = nn.LayerNorm(d)
        self.mha = LongShortAttention(d, c["heads"], c["window"], c["rank"])
        self.norm2 = nn.LayerNorm(d)
        # positions 0..4 as the official nn.Sequential: Linear, GELU, Dropout, Linear, Dropout (p = 0)
        self.mlpblock = nn.Sequential(nn.Linear(d, c["ffn_dim"]), nn.GELU(), nn.Dropout(0.0),
                                      nn.Linear(c["ffn_dim"], d), nn.Dropout(0.0))

    def forward(self, x, mask, cls=None):
        if cls is None:
            h = x + self.mha(self.norm1(x), mask)
        else:
            h = torch.cat([cls, x], 1) + self.mha(self.norm1(x), mask, cls)
        return h + self.mlpblock(self.norm2(h))


class Encoder(nn.Module):
    """"model" of the official wrapper: embeddings, blocks (the CLS joins the last one only,
    `--cls_last_layer`), the final LayerNorm on the CLS row."""

    def __init__(self, c):
        super().__init__()
        self.cls_embed = nn.Parameter(torch.zeros(1, 1, c["dim"]))
        self.embeddings = Embeddings(c)
        self.layers = c["layers"]
        for i in range(self.layers):
            setattr(self, f"transformer_{i}", Block(c))
        self.norm = nn.LayerNorm(c["dim"])

    def forward(self, tokens, mask):  # -> [B, d]
        x = self.embeddings(tokens)
        for i in range(self.layers):
            last = i + 1 == self.layers
            cls = self.cls_embed.expand(x.shape[0], 1, x.shape[2]) if last else None
            x = getattr(self, f"transformer_{i}")(x, mask, cls)
        return self.norm(x[:, 0])


class Head(nn.Module):
    """SCHead: Linear(d → head_hidden) → ReLU → Linear(head_hidden → classes)."""

    def __init__(self, c):
        super().__init__()
        self.mlpblock = nn.Sequential(nn.Linear(c["dim"], c["head_hidden"]), nn.ReLU(),
                                      nn.Linear(c["head_hidden"], c["num_classes"]))

    def forward(self, features):
        return self.mlpblock(features)


class LraClassifier(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.model = Encoder(c)
        self.seq_classifer = Head(c)  # sic, the official name

    def forward(self, tokens, mask):  # tokens [B, n] i64, mask [B, n] bool -> logits [B, classes]
        return self.seq_classifer(self.model(tokens, mask))


def config_of(meta):
    c = {k: int(meta[k]) for k in ("batch", "n", "batches", "vocab_size", "max_seq_len", "dim", "heads", "layers",
                                   "ffn_dim", "num_classes", "window", "rank", "head_hidden", "min_real")}
    c.update({k: float(meta[k]) for k in ("lr", "beta1", "beta2", "eps", "weight_decay")})
    if meta.get("pooling") != "cls":
        raise SystemExit(f"torch_lra_step: only pooling \"cls\" is written here, the dump has {meta.get('pooling')!r}")
    c["pooling"] = meta["pooling"]
    return c


def build(c, weights, dtype):
    model = LraClassifier(c)
    model.load_state_dict(weights, strict=True)  # every official name, nothing more
    return model.to(dtype).train()


def optimizer(c, params):
    return torch.optim.AdamW(params, lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["eps"],
                             weight_decay=c["weight_decay"])


def batches(c, io):
    return [(io[f"tokens.{k}"], io[f"mask.{k}"].bool(), io[f"labels.{k}"]) for k in range(c["batches"])]


def one_step(c, weights, batch, dtype):
    """From the dumped weights in dtype: logits, loss, gradients (after backward) and parameters
    (after the AdamW step), by official name."""
    model = build(c, weights, dtype)
    opt = optimizer(c, model.parameters())
    tokens, mask, labels = batch
    opt.zero_grad(set_to_none=True)
    logits = model(tokens, mask)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    out = {"logits": logits.detach(), "loss": loss.detach(),
           **{"grad." + k: p.grad.clone() for k, p in model.named_parameters()}}
    opt.step()
    out.update({"after." + k: p.detach().clone() for k, p in model.named_parameters()})
    return out


def step_on(c, weights, io):
    """torch.optim.AdamW in float64 applied to lsformer's own gradients: the reference update."""
    params = {k: v.double().clone().requires_grad_(True) for k, v in weights.items()}
    for k, p in params.items():
        p.grad = io["grad." + k].double()
    optimizer(c, list(params.values())).step()
    return {"after." + k: p.detach() for k, p in params.items()}


def max_abs(t):
    return float(t.double().abs().max())


def max_diff(a, b):
    return float((a.double() - b.double()).abs().max())


def check(c, weights, io):
    batch = batches(c, io)[0]
    r32, r64 = one_step(c, weights, batch, torch.float32), one_step(c, weights, batch, torch.float64)
    tol = 4 * c["batch"] * c["n"] * 2.0 ** -24  # float32 sum of L = B·n terms, margin 4 (module docstring)
    gmax = max(max_abs(g) for k, g in r32.items() if k.startswith("grad."))
    rows, ok = {}, True
    for name, t32 in r32.items():
        if name.startswith("after."):
            continue
        lsf, t64 = io[name], r64[name]
        scale = max_abs(t32)
        bound = tol * max(scale, 2.0 ** -10 * gmax if name.startswith("grad.") else 0.0)
        d32, d64 = max_diff(lsf, t32), max_diff(lsf, t64)
        passed = d32 <= bound and d64 <= bound
        ok &= passed
        rows[name] = {"max_abs": scale, "lsformer_vs_torch32": d32, "lsformer_vs_torch64": d64,
                      "torch32_vs_torch64": max_diff(t32, t64), "bound": bound, "pass": passed}
    ref = step_on(c, weights, io)
    for name, t64 in ref.items():
        lsf = io[name]
        bound = 8 * 2.0 ** -24 * (max_abs(weights[name[len("after."):]]) + c["lr"])  # module docstring
        d = max_diff(lsf, t64)
        passed = d <= bound
        ok &= passed
        rows[name] = {"max_abs": max_abs(t64), "lsformer_vs_adamw64_on_lsformer_grads": d, "bound": bound,
                      "lsformer_vs_torch32": max_diff(lsf, r32[name]), "lsformer_vs_torch64": max_diff(lsf, r64[name]),
                      "pass": passed}
    return rows, tol, ok, float(io["loss"]), float(r64["loss"])


def train_timing(c, weights, io):
    model = build(c, weights, torch.float32)
    opt = optimizer(c, model.parameters())
    data = batches(c, io)
    state = {"step": 0}

    def step():
        tokens, mask, labels = data[state["step"] % len(data)]
        state["step"] += 1
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(tokens, mask), labels)
        loss.backward()
        opt.step()

    rss_before = proc_status_bytes("VmRSS")
    t = _time_call(step, clock=ARGS.clock, warmup=ARGS.warmup, min_samples=ARGS.min_samples,
                   max_samples=ARGS.max_samples, min_sample_ms=ARGS.min_sample_ms, sample_ms=ARGS.sample_time * 1e3)
    hwm = proc_status_bytes("VmHWM")
    real = sum(int(m.sum()) for _, m, _ in data) / (len(data) * c["batch"] * c["n"])
    B = c["batch"]
    return {"real_fraction": real, **t, "samples_per_s": B / (t["median_ms"] * 1e-3),
            "best_samples_per_s": B / (t["min_ms"] * 1e-3), "steps": state["step"], "rss_before_bytes": rss_before,
            "rss_peak_bytes": hwm, "rss_extra_bytes": hwm - rss_before}


def main():
    torch.set_num_threads(ARGS.threads)
    weights, _ = read_safetensors(os.path.join(ARGS.dir, "weights.safetensors"))
    io, meta = read_safetensors(os.path.join(ARGS.dir, "io.safetensors"))
    c = config_of(meta)
    case = {"case": meta.get("case", "train/listops"), **c}
    print(json.dumps({"meta": {"impl": "pytorch", "version": torch.__version__, "threads": torch.get_num_threads(),
                               "openblas_config": openblas_config(), "python": sys.version.split()[0]}}), flush=True)
    ok = True
    if not ARGS.no_check:
        rows, tol, ok, lsf_loss, t64_loss = check(c, weights, io)
        print(json.dumps({"impl": "pytorch", **case, "check": rows, "tol": tol, "pass": ok,
                          "lsformer_loss": lsf_loss, "torch64_loss": t64_loss}), flush=True)
        if not ok:
            bad = [k for k, r in rows.items() if not r["pass"]]
            print(f"torch_lra_step: lsformer and PyTorch differ beyond the bound in {bad}", file=sys.stderr)
    if not ARGS.no_time:
        t = train_timing(c, weights, io)
        print(json.dumps({"impl": "pytorch", **case, "phase": "train_step", **t, "threads": torch.get_num_threads(),
                          "clock": ARGS.clock}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
