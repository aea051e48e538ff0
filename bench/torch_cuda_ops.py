#!/usr/bin/env python3
"""PyTorch's side of bench_cuda_ops: the same GPU cases, shapes and byte counts, forward +
backward, median and fastest time per call and achieved bandwidth (GEMMs: TFLOP/s).

    python3 bench/torch_cuda_ops.py [--filter TEXT] [--dtype f32|bf16] [--rows N] [--json]

Each call drops the gradients, runs forward and backward and synchronises the device, as the
C++ side does; bench_timing.h's sampling (warm-up, calls per sample of ≥ 1 ms, median over
≥ 0.5 s) is mirrored here.
"""
import argparse
import json
import time

import torch


def time_call(fn, warmup=3, min_sample_ms=1.0, sample_ms=500.0, min_samples=3, max_samples=50):
    last = 0.0
    for _ in range(warmup):
        t0 = time.perf_counter()
        fn()
        last = (time.perf_counter() - t0) * 1e3
    inner = max(1, min(100000, int(-(-min_sample_ms // max(last, 1e-6)))))
    per_call, total = [], 0.0
    while len(per_call) < max_samples and (len(per_call) < min_samples or total < sample_ms):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        ms = (time.perf_counter() - t0) * 1e3
        total += ms
        per_call.append(ms / inner)
    per_call.sort()
    k = len(per_call)
    median = per_call[k // 2] if k % 2 else 0.5 * (per_call[k // 2 - 1] + per_call[k // 2])
    return median, per_call[0]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--filter", default="")
    p.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    p.add_argument("--rows", type=int, default=32768, help="rows of the [rows, 1024] operands (as bench_cuda_ops)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    dev = torch.device("cuda")
    dt = torch.float32 if args.dtype == "f32" else torch.bfloat16
    torch.backends.cuda.matmul.allow_tf32 = False  # as lsformer's default
    if args.rows < 1:
        p.error("--rows must be at least 1")
    rows, cols = args.rows, 1024
    n = rows * cols
    g = torch.Generator().manual_seed(0)

    def inp(*shape):
        return torch.randn(*shape, generator=g).to(dev, dt).requires_grad_(True)

    x, y = inp(rows, cols), inp(rows, cols)
    dy = torch.randn(rows, cols, generator=g).to(dev, dt)
    w, b = inp(cols), inp(cols)
    target = (torch.rand(rows, generator=g, dtype=torch.float64) * cols).long().to(dev)
    a_mm, b_mm = inp(4096, 1024), inp(1024, 1024)
    g_mm = torch.randn(4096, 1024, generator=g).to(dev, dt)
    dsum = torch.randn(rows, generator=g).to(dev, dt)

    def fwd_bwd(f, grad, leaves):
        def call():
            for leaf in leaves:
                leaf.grad = None
            out = f()
            out.backward(grad)
            torch.cuda.synchronize()
        return call

    def copy():
        x.detach().clone()
        torch.cuda.synchronize()

    F = torch.nn.functional
    cases = [
        ("copy (calibration)", 2, 0, copy),
        ("add", 6, 0, fwd_bwd(lambda: x + y, dy, [x, y])),
        ("mul", 8, 0, fwd_bwd(lambda: x * y, dy, [x, y])),
        ("gelu", 5, 0, fwd_bwd(lambda: F.gelu(x), dy, [x])),
        ("softmax(dim=-1)", 5, 0, fwd_bwd(lambda: torch.softmax(x, -1), dy, [x])),
        ("layer_norm", 5, 0, fwd_bwd(lambda: F.layer_norm(x, (cols,), w, b), dy, [x, w, b])),
        ("cross_entropy", 3, 0, fwd_bwd(lambda: F.cross_entropy(x.float(), target), None, [x])),
        ("sum(dim=-1)", 2, 0, fwd_bwd(lambda: x.sum(-1), dsum, [x])),
        ("matmul 4096x1024x1024", 0, 3.0 * 2.0 * 4096 * 1024 * 1024, fwd_bwd(lambda: a_mm @ b_mm, g_mm, [a_mm, b_mm])),
    ]
    if not args.json:
        print(torch.cuda.get_device_name(0))
    es = 4 if dt == torch.float32 else 2
    for name, bpe, flops, fn in cases:
        if args.filter and args.filter not in name:
            continue
        ms, min_ms = time_call(fn)
        gbps = 0.0 if flops else bpe * n * es / (ms * 1e-3) / 1e9
        tflops = flops / (ms * 1e-3) / 1e12 if flops else 0.0
        if args.json:
            print(json.dumps({"case": name, "dtype": args.dtype, "ms": ms, "min_ms": min_ms, "gbps": gbps,
                              "tflops": tflops}))
        else:
            print(f"{name:28s} {ms:10.4f} ms (fastest {min_ms:10.4f})  {gbps:8.1f} GB/s  {tflops:6.1f} TFLOP/s")


if __name__ == "__main__":
    main()
