#!/usr/bin/python3
"""PyTorch side of the GPU attention benchmark (issue 7): forward + backward of (a) the
bidirectional long-short attention core (docs/transformer-ls.md §2.3 steps 7-12: one softmax over
[r projected slots | window of span w + 2*max(w//2, 1)], written from the spec with pad + unfold
tiles, the way the official lra/attention_transformer_ls.py materialises them) and (b)
torch.nn.functional.scaled_dot_product_attention over all n keys (the flash kernel in bf16/f16),
on the shapes bench_cuda_attention.cpp times: batch 1, heads of dimension 64, n = 4K, 16K, 64K,
(w, r) = (128, 32) and (8, 32). One JSON line per case: median and fastest ms per call (CUDA events), TFLOP/s
by the same count as the C++ side (long-short: 14*B*h*n*S*e; full: 14*B*h*n*n*e).

    /usr/bin/python3 bench/torch_long_short_cuda.py --heads 8 --dtype bf16

Needs a CUDA build of PyTorch (>= 2.0 for scaled_dot_product_attention) on the GPU machine.
Cases that run out of memory are reported as {"oom": true}.
"""
import argparse
import json

import torch
import torch.nn.functional as F


def long_short_core(q, k, v, kbar, vbar, w):
    """q, k, v [B, h, n, e] (q pre-scaled), kbar, vbar [B, h, r, e] -> context [B, h, n, e]."""
    B, h, n, e = q.shape
    ext = max(w // 2, 1)
    s = w + 2 * ext
    g = n // w
    kt = F.pad(k, (0, 0, ext, ext)).unfold(2, s, w).transpose(-1, -2)  # [B, h, g, s, e]
    vt = F.pad(v, (0, 0, ext, ext)).unfold(2, s, w).transpose(-1, -2)
    pos = torch.arange(g, device=q.device)[:, None] * w - ext + torch.arange(s, device=q.device)[None, :]
    outside = (pos < 0) | (pos >= n)  # [g, s]
    lw = torch.matmul(q.reshape(B, h, g, w, e), kt.transpose(-1, -2))  # [B, h, g, w, s]
    lw = lw.masked_fill(outside[:, None, :], float("-inf")).reshape(B, h, n, s)
    lg = torch.matmul(q, kbar.transpose(-1, -2))  # [B, h, n, r]
    p = torch.softmax(torch.cat([lg, lw], -1).float(), -1).to(q.dtype)  # fp32 softmax (docs/transformer-ls.md §1.1)
    r = kbar.shape[2]
    out = torch.matmul(p[..., :r], vbar)
    out = out + torch.matmul(p[..., r:].reshape(B, h, g, w, s), vt).reshape(B, h, n, e)
    return out


def time_ms(call, warmup=3, iters=10):
    """Median and fastest ms per call over `iters` event-timed calls."""
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        start.record()
        call()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2], times[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    ap.add_argument("--lengths", default="4096,16384,65536")
    args = ap.parse_args()
    dtype = torch.float32 if args.dtype == "f32" else torch.bfloat16
    dev = torch.device("cuda")
    B, h, e = 1, args.heads, 64
    for n in [int(x) for x in args.lengths.split(",")]:
        cases = [("long_short", w, r) for (w, r) in ((128, 32), (8, 32))] + [("sdpa_full", 0, 0)]
        for kind, w, r in cases:
            torch.cuda.empty_cache()
            name = f"{kind} n={n}" + (f" w={w} r={r}" if kind == "long_short" else "")
            try:
                mk = lambda *s: torch.randn(*s, device=dev, dtype=dtype).requires_grad_(True)
                q, k, v = mk(B, h, n, e), mk(B, h, n, e), mk(B, h, n, e)
                kb, vb = mk(B, h, max(r, 1), e), mk(B, h, max(r, 1), e)
                dout = torch.randn(B, h, n, e, device=dev, dtype=dtype)
                leaves = [q, k, v, kb, vb]
                if kind == "long_short":
                    qs = (q * e ** -0.5).detach().requires_grad_(True)
                    leaves.append(qs)
                    fn = lambda: long_short_core(qs, k, v, kb, vb, w)
                    S = r + w + 2 * max(w // 2, 1)
                    flops = 14.0 * B * h * n * S * e
                else:
                    fn = lambda: F.scaled_dot_product_attention(q, k, v)
                    flops = 14.0 * B * h * n * n * e

                def call():
                    for t in leaves:
                        t.grad = None
                    fn().backward(dout)

                ms, min_ms = time_ms(call)
                print(json.dumps({"case": name, "heads": h, "dtype": args.dtype, "ms": ms, "min_ms": min_ms,
                                  "tflops": flops / (ms * 1e-3) / 1e12,
                                  "peak_gib": torch.cuda.max_memory_allocated() / 2 ** 30}), flush=True)
            except torch.cuda.OutOfMemoryError:
                print(json.dumps({"case": name, "heads": h, "dtype": args.dtype, "oom": True}), flush=True)
            torch.cuda.reset_peak_memory_stats()


if __name__ == "__main__":
    main()
