#!/usr/bin/python3
"""PyTorch's CPU products of bench_gemm_bf16's shapes in bf16 and in f32, side by side.

    /usr/bin/python3 bench/torch_gemm_bf16.py --threads 2 [--rounds 5] [--sample-time 0.4]

The reference for how fast a bf16 product can run on this CPU: Debian's torch multiplies bf16
matrices with oneDNN's AVX512_BF16 kernels. Same shapes and layouts as bench/bench_gemm_bf16.cpp
(op(A) [M x K] times op(B) [K x N]; ta: A stored [K x M], tb: B stored [N x K]); the two dtypes
alternate over --rounds rounds; medians of the round medians and the fastest samples.
"""
import argparse
import statistics
import time

import torch

SHAPES = [
    ("lm/ffn_up", 4096, 1024, 256, False, True), ("lm/ffn_down", 4096, 256, 1024, False, True),
    ("lm/ffn_up_dx", 4096, 256, 1024, False, False), ("lm/ffn_down_dx", 4096, 1024, 256, False, False),
    ("lm/ffn_up_dw", 1024, 256, 4096, True, False), ("lm/ffn_down_dw", 256, 1024, 4096, True, False),
    ("lm/qkv", 4096, 768, 256, False, True), ("lm/proj_dw", 256, 256, 4096, True, False),
    ("lra/qkv", 16384, 192, 64, False, True), ("lra/out", 16384, 64, 64, False, True),
    ("lra/qkv_dx", 16384, 64, 192, False, False), ("cube/1024", 1024, 1024, 1024, False, False),
]


def sample(a, b, seconds):
    """Median and fastest ms per product over `seconds` of samples (at least 5)."""
    a @ b
    times = []
    start = time.perf_counter()
    while len(times) < 5 or time.perf_counter() - start < seconds:
        t = time.perf_counter()
        a @ b
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sample-time", type=float, default=0.4)
    parser.add_argument("--filter", default="")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(5)
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads, oneDNN "
          f"{'available' if torch.backends.mkldnn.is_available() else 'NOT available'}; {args.rounds} rounds")
    print("| product | M × N × K | bf16 median / fastest ms | f32 median / fastest ms | bf16 GFLOP/s | f32 GFLOP/s | "
          "speed-up median / fastest |\n|---|---|---|---|---|---|---|")
    for name, m, n, k, ta, tb in SHAPES:
        if args.filter not in name:
            continue
        a32 = torch.randn(k, m).t() if ta else torch.randn(m, k)
        b32 = torch.randn(n, k).t() if tb else torch.randn(k, n)
        a16, b16 = a32.to(torch.bfloat16), b32.to(torch.bfloat16)
        meds = {"bf16": [], "f32": []}
        fast = {"bf16": float("inf"), "f32": float("inf")}
        for r in range(args.rounds):
            for side in (("bf16", "f32") if r % 2 == 0 else ("f32", "bf16")):
                med, low = sample(a16, b16, args.sample_time) if side == "bf16" else sample(a32, b32, args.sample_time)
                meds[side].append(med)
                fast[side] = min(fast[side], low)
        mb, mf = statistics.median(meds["bf16"]), statistics.median(meds["f32"])
        flop = 2.0 * m * n * k
        print(f"| {name} | {m} × {n} × {k} | {mb:.3f} / {fast['bf16']:.3f} | {mf:.3f} / {fast['f32']:.3f} | "
              f"{flop / mb * 1e-6:.0f} | {flop / mf * 1e-6:.0f} | **{mf / mb:.2f}× / {fast['f32'] / fast['bf16']:.2f}×** |",
              flush=True)


if __name__ == "__main__":
    main()
