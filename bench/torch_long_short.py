#!/usr/bin/python3
"""PyTorch side of the attention benchmark: the bidirectional long-short attention of
docs/transformer-ls.md §2.3 (LRA semantics, no CLS, no dropout) written from the specification in the
style of the official lra/attention_transformer_ls.py, checked against lsformer's output and
gradients, and timed (forward + backward) at the same configuration.

    build/bench/bench_attention --filter lra --dump /tmp/ls          # lsformer writes the case
    /usr/bin/python3 bench/torch_long_short.py /tmp/ls --threads 2   # check + time, JSON lines

DIR holds what `bench_attention --dump DIR` writes: weights.safetensors (the layer's state dict:
W_q, W_k, W_v, W_o, dual_ln_s, dual_ln_l, dconv_fc) and io.safetensors (x [B, n, d], mask [B, n]
bool, dy, lsformer's y = layer(x), dx and grad.<parameter> after y.backward(dy); metadata: window,
rank, heads). Nothing here depends on lsformer's code: the safetensors reader is the format's few
lines, the attention is written from the spec.

Check: the same forward + backward in float32 (what is timed) and in float64 (a reference for
both). Each of y, dx and the parameter gradients must satisfy max|a − b| ≤ tol · max(1, max|b|)
with tol = 4 · L · 2^-24, L = n, the longest reduction in the layer (the projection softmax over
all n tokens and the compression P·K, P·V of n rows; the other reductions, over d, r + s and e,
are shorter), i.e. the usual bound of a float32 sum of L terms with a margin of 4. The JSON line
reports the actual largest differences.

Timing (mirrors bench_attention.cpp): one call = set the .grad of x and of every parameter to
None, y = layer(x), y.backward(dy); `--warmup` calls, a calibration of calls per sample so one
sample lasts >= --min-sample-ms, then samples (time.perf_counter, or with --clock cpu the
process CPU time) until >= --min-samples and >= --sample-time seconds, or --max-samples; median
(min, max) per call. Threads: torch.set_num_threads(N), and OPENBLAS_NUM_THREADS = N before torch
is imported (Debian's torch does its float GEMMs in libblas.so.3, which set_num_threads does not
reach; see torch_ops.py).

As a module (`from torch_long_short import LongShortAttention`, after the importer has set
OPENBLAS_NUM_THREADS and imported torch): LongShortAttention is the same attention as an
nn.Module with the official parameter names, and takes an optional CLS (§2.3 steps 5 and 13),
which the LRA model's last layer needs (bench/torch_lra_step.py); the CLI above never passes one.
"""
import argparse
import json
import os
import sys

from bench_common import add_peer_args, openblas_config, time_call as _time_call  # imports no torch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir", help="directory written by bench_attention --dump")
    add_peer_args(p, sample_time=1.0, warmup=1, min_samples=3, max_samples=50)
    return p.parse_args()


ARGS = None  # the CLI's flags; parsed only when run as a script
if __name__ == "__main__":
    ARGS = parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)
import torch  # noqa: E402  (after OPENBLAS_NUM_THREADS, which OpenBLAS reads when loaded)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_common import read_safetensors  # noqa: E402


def softmax_fp32(t, dim):
    """The official code's softmax in (at least) fp32, cast back; float64 stays float64 (the
    reference run)."""
    return torch.softmax(t.to(torch.promote_types(t.dtype, torch.float32)), dim=dim).to(t.dtype)


def long_short_attention(x, p, heads, window, rank, mask, cls=None):
    """Bidirectional long-short attention (docs/transformer-ls.md §2.3, steps 1-14 without dropout).
    x [B, n, d]; p: the state dict; mask [B, n] bool (True: real token); cls [B, 1, d] or None.
    The window branch pads K and V by ext rows at both ends and views them as n/w overlapping tiles
    of s = w + 2·ext rows with stride w (unfold); one joint softmax over [r' global slots | s window
    keys] (r' = r, or r + 1 with the CLS slot first). Returns [B, n, d], or [B, 1 + n, d] with
    the updated CLS row first when cls is given."""
    B, n, d = x.shape
    h, w, r = heads, window, rank
    e = d // h
    pad = ~mask

    def linear(t, name):
        return F.linear(t, p[name + ".weight"], p[name + ".bias"])

    def split_heads(t):  # [B, m, d] -> [B, h, m, e]
        return t.view(B, -1, h, e).transpose(1, 2)

    def merge_heads(t):  # [B, h, m, e] -> [B, m, d]
        return t.transpose(1, 2).reshape(B, -1, d)

    def dual_ln(t, name):
        return F.layer_norm(t, (d,), p[name + ".weight"], p[name + ".bias"], 1e-5)

    q = split_heads(linear(x, "W_q")) * e ** -0.5                 # 1. [B, h, n, e]
    k = split_heads(dual_ln(linear(x, "W_k"), "dual_ln_l"))      # 2. LN_L over all d features
    v = split_heads(dual_ln(linear(x, "W_v"), "dual_ln_l"))

    s_logits = linear(x, "dconv_fc").masked_fill(pad[:, :, None], float("-inf"))  # 3. [B, n, h·r]
    proj = softmax_fp32(s_logits, 1)                              # over the tokens
    proj = proj.view(B, n, h, r).permute(0, 2, 3, 1)             # [B, h, r, n], column head·r + slot
    kbar, vbar = proj @ k, proj @ v                               # 4. [B, h, r, e]
    if cls is not None:                                           # 5. raw CLS key / value (no LN_L), first
        q_c = split_heads(linear(cls, "W_q")) * e ** -0.5         # [B, h, 1, e]
        k_c, v_c = split_heads(linear(cls, "W_k")), split_heads(linear(cls, "W_v"))
        kbar, vbar = torch.cat([k_c, kbar], 2), torch.cat([v_c, vbar], 2)  # [B, h, r + 1, e]
    kbar = split_heads(dual_ln(merge_heads(kbar), "dual_ln_s"))  # 6. LN_G over d, every slot
    vbar = split_heads(dual_ln(merge_heads(vbar), "dual_ln_s"))
    global_logits = q @ kbar.transpose(-1, -2)                   # 7. [B, h, n, r']

    ext = max(w // 2, 1)                                          # 8. window of s keys per segment
    s = w + 2 * ext
    nt = n // w
    k_tiles = F.pad(k, (0, 0, ext, ext)).unfold(2, s, w)         # [B, h, nt, e, s], stride w
    v_tiles = F.pad(v, (0, 0, ext, ext)).unfold(2, s, w)
    q_tiles = q.reshape(B, h, nt, w, e)
    win_logits = q_tiles @ k_tiles                                # [B, h, nt, w, s]
    key_ok = F.pad(mask.to(torch.uint8), (ext, ext)).unfold(1, s, w).bool()  # [B, nt, s]
    win_logits = win_logits.masked_fill(~key_ok[:, None, :, None, :], float("-inf"))

    logits = torch.cat([global_logits, win_logits.reshape(B, h, n, s)], dim=-1)  # 9. [B, h, n, r' + s]
    probs = softmax_fp32(logits, -1)
    probs = probs.masked_fill(pad[:, None, :, None], 0.0)         # 10. padded queries
    p_global, p_win = probs.split([kbar.shape[2], s], dim=-1)
    ctx = p_global @ vbar + (p_win.reshape(B, h, nt, w, s) @ v_tiles.transpose(-1, -2)).reshape(B, h, n, e)  # 12.
    if cls is not None:  # 13. the CLS query over [k_c] ∪ {ctx_j : j real}, keys = values = ctx
        self_logit = (q_c * k_c).sum(-1, keepdim=True)            # [B, h, 1, 1]
        ctx_logits = (q_c @ ctx.transpose(-1, -2)).masked_fill(pad[:, None, None, :], float("-inf"))
        p_c = softmax_fp32(torch.cat([self_logit, ctx_logits], -1), -1)  # [B, h, 1, 1 + n]
        o_c = p_c[..., :1] * v_c + p_c[..., 1:] @ ctx             # [B, h, 1, e]
        ctx = torch.cat([o_c, ctx], 2)                            # 14. the CLS row first
    return linear(merge_heads(ctx), "W_o")                        # 14.


class LongShortAttention(nn.Module):
    """long_short_attention as a module, parameters registered under the official names (§2.1):
    W_q, W_k, W_v, W_o (Linear d → d), dual_ln_s, dual_ln_l (LayerNorm d, eps 1e-5), dconv_fc
    (Linear d → h·r)."""

    def __init__(self, dim, heads, window, rank):
        super().__init__()
        self.heads, self.window, self.rank = heads, window, rank
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(dim, dim) for _ in range(4))
        self.dual_ln_s, self.dual_ln_l = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.dconv_fc = nn.Linear(dim, heads * rank)

    def forward(self, x, mask, cls=None):  # x [B, n, d], mask [B, n] bool, cls [B, 1, d] or None
        return long_short_attention(x, dict(self.named_parameters()), self.heads, self.window, self.rank, mask, cls)


def forward_backward(weights, io, meta, dtype):
    """One call on leaf copies in `dtype`; returns (y, dx, {name: grad}) and the call itself."""
    params = {name: t.to(dtype).clone().requires_grad_(True) for name, t in weights.items()}
    x = io["x"].to(dtype).clone().requires_grad_(True)
    dy, mask = io["dy"].to(dtype), io["mask"].bool()
    heads, window, rank = int(meta["heads"]), int(meta["window"]), int(meta["rank"])

    def call():
        x.grad = None
        for t in params.values():
            t.grad = None
        y = long_short_attention(x, params, heads, window, rank, mask)
        y.backward(dy)
        return y

    y = call()
    return y.detach(), x.grad, {name: t.grad for name, t in params.items()}, call


def time_call(call):
    return _time_call(call, clock=ARGS.clock, warmup=ARGS.warmup, min_samples=ARGS.min_samples,
                      max_samples=ARGS.max_samples, min_sample_ms=ARGS.min_sample_ms,
                      sample_ms=ARGS.sample_time * 1e3)


def max_diff(a, b):
    """(max |a − b|, max |b|) over one tensor, in float64."""
    a, b = a.double(), b.double()
    return float((a - b).abs().max()), float(b.abs().max())


def main():
    torch.set_num_threads(ARGS.threads)
    weights, _ = read_safetensors(os.path.join(ARGS.dir, "weights.safetensors"))
    io, meta = read_safetensors(os.path.join(ARGS.dir, "io.safetensors"))
    B, n, d = io["x"].shape
    case = {"case": meta.get("case", "lra/ls-w8-r32"), "batch": B, "n": n, "dim": d, "heads": int(meta["heads"]),
            "window": int(meta["window"]), "rank": int(meta["rank"]), "masked": bool((~io["mask"].bool()).any())}
    print(json.dumps({"meta": {"impl": "pytorch", "version": torch.__version__, "threads": torch.get_num_threads(),
                               "openblas_config": openblas_config(), "python": sys.version.split()[0]}}), flush=True)

    y32, dx32, g32, call32 = forward_backward(weights, io, meta, torch.float32)
    if not ARGS.no_check:
        y64, dx64, g64, _ = forward_backward(weights, io, meta, torch.float64)
        tol = 4 * n * 2.0 ** -24  # float32 sum of L = n terms, margin 4 (module docstring)
        lsf = {"y": io["y"], "dx": io["dx"], **{"grad." + k: io["grad." + k] for k in g32}}
        torch32 = {"y": y32, "dx": dx32, **{"grad." + k: v for k, v in g32.items()}}
        ref64 = {"y": y64, "dx": dx64, **{"grad." + k: v for k, v in g64.items()}}
        rows, ok = {}, True
        for name in lsf:
            d_lt, scale = max_diff(lsf[name], torch32[name])
            d_l64, _ = max_diff(lsf[name], ref64[name])
            d_t64, _ = max_diff(torch32[name], ref64[name])
            passed = d_lt <= tol * max(1.0, scale)
            ok &= passed
            rows[name] = {"lsformer_vs_torch32": d_lt, "lsformer_vs_torch64": d_l64, "torch32_vs_torch64": d_t64,
                          "max_abs": scale, "pass": passed}
        print(json.dumps({"impl": "pytorch", **case, "check": rows, "tol": tol, "pass": ok}), flush=True)
        if not ok:
            print("torch_long_short: lsformer and PyTorch differ beyond the float32 tolerance", file=sys.stderr)
    if not ARGS.no_time:
        t = time_call(call32)
        print(json.dumps({"impl": "pytorch", **case, "phase": "forward_backward", **t,
                          "threads": torch.get_num_threads(), "clock": ARGS.clock}), flush=True)
    return 0 if ARGS.no_check or ok else 1


if __name__ == "__main__":
    sys.exit(main())
