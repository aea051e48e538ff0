#!/usr/bin/python3
"""PyTorch side of the CPU op benchmark: the cases of bench/bench_ops.cpp, same shapes, same method.

Run with Debian's torch:  /usr/bin/python3 bench/torch_ops.py --threads 2 [--json]

Method (mirrors bench_ops.cpp; see its header for the cases and why they were chosen): fixed seed;
every float input requires grad; "forward" runs the op with autograd recording and drops the
result; "forward_backward" sets every input's .grad to None, runs the op, then backward with a
fixed random upstream gradient (a scalar loss: backward()). Each timing: `warmup` calls, a
calibration of `inner` calls per sample so one sample lasts >= --min-sample-ms, then samples
(time.perf_counter, or with --clock cpu the process CPU time; per-call time = sample / inner) until >= --min-samples samples and
>= --budget seconds, or --max-samples. Reported: median (and min, max) per call.

Threads: torch.set_num_threads(N) sets ATen's OpenMP pool. Debian's torch does its float GEMMs
in libblas.so.3 (OpenBLAS, normally the pthread build), which torch.set_num_threads does not
reach, so OPENBLAS_NUM_THREADS is set to N before torch is imported.
"""
import argparse
import json
import math
import os
import sys
import time

SEED = 1234

# (op, case, shape text, builder name, arguments) — the same table as all_cases() in bench_ops.cpp.
# LRA ListOps: B 32, n 2048, d 64, h 2, e 32, r 32, w 8 (s 16 window keys), FFN 128, 10 classes.
# Dense: n 1024, d 512, 8 heads of 64.
CASES = [
    ("matmul", "lra/qkv_proj", "x[32,2048,64] @ W[64,64]^T", "linear", ([32, 2048, 64], 64)),
    ("matmul", "lra/ffn_up", "x[32,2048,64] @ W[128,64]^T", "linear", ([32, 2048, 64], 128)),
    ("bmm", "lra/global_scores", "Q[64,2048,32] @ Kbar[64,32,32]^T", "bmm", (64, 2048, 32, 32, True)),
    ("bmm", "lra/compress", "P[64,32,2048] @ K[64,2048,32]", "bmm", (64, 32, 32, 2048, False)),
    ("bmm", "lra/window_scores", "Qt[16384,8,32] @ Kt[16384,16,32]^T", "bmm", (16384, 8, 16, 32, True)),
    ("softmax", "lra/attn_probs", "[32,2,2048,48] dim -1", "softmax", ([32, 2, 2048, 48], -1)),
    ("softmax", "lra/proj_weights", "[32,2048,64] dim 1", "softmax", ([32, 2048, 64], 1)),
    ("layer_norm", "lra/ln", "[32,2048,64] over 64, affine", "layer_norm", ([32, 2048, 64],)),
    ("gelu", "lra/ffn", "[32,2048,128]", "gelu", ([32, 2048, 128],)),
    ("cross_entropy", "lra/head", "logits[32,10]", "cross_entropy", (32, 10)),
    ("matmul", "dense/linear", "x[1024,512] @ W[512,512]^T", "linear", ([1024, 512], 512)),
    ("bmm", "dense/attn_scores", "Q[8,1024,64] @ K[8,1024,64]^T", "bmm", (8, 1024, 1024, 64, True)),
    ("softmax", "dense/rows", "[1024,512] dim -1", "softmax", ([1024, 512], -1)),
    ("layer_norm", "dense/ln", "[1024,512] over 512, affine", "layer_norm", ([1024, 512],)),
    ("gelu", "dense/act", "[1024,512]", "gelu", ([1024, 512],)),
    ("cross_entropy", "dense/loss", "logits[1024,512]", "cross_entropy", (1024, 512)),
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="threads (default: all processors)")
    p.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    p.add_argument("--filter", default="", help='only cases whose "op case" contains TEXT')
    p.add_argument("--budget", type=float, default=1.0, help="sampling time per measurement, seconds")
    p.add_argument("--warmup", type=int, default=3, help="warm-up calls before calibration")
    p.add_argument("--min-samples", type=int, default=5)
    p.add_argument("--max-samples", type=int, default=100)
    p.add_argument("--min-sample-ms", type=float, default=1.0,
                   help="repeat fast calls so one sample lasts at least MS")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall: time.perf_counter (default); cpu: process CPU time, robust to other load "
                        "with --threads 1")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    return p.parse_args()


ARGS = parse_args()
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)
from bench_common import openblas_config, time_call as _time_call  # noqa: E402
import torch  # noqa: E402  (after OPENBLAS_NUM_THREADS, which OpenBLAS reads when loaded)
import torch.nn.functional as F  # noqa: E402


def time_call(call):
    return _time_call(call, clock=ARGS.clock, warmup=ARGS.warmup, min_samples=ARGS.min_samples,
                      max_samples=ARGS.max_samples, min_sample_ms=ARGS.min_sample_ms, sample_ms=ARGS.budget * 1e3)


def make(op, inputs, dy):
    """(forward, forward_backward) closures for op() on inputs with upstream gradient dy."""
    def forward():
        op()

    def forward_backward():
        for x in inputs:
            x.grad = None
        y = op()
        y.backward(dy)
    return forward, forward_backward


def randn(shape, gen, grad=False):
    return torch.randn(shape, generator=gen, dtype=torch.float32).requires_grad_(grad)


def build_linear(gen, x_shape, out):
    x = randn(x_shape, gen, True)
    w = randn([out, x_shape[-1]], gen, True)
    dy = randn(x_shape[:-1] + [out], gen)
    return make(lambda: torch.matmul(x, w.t()), [x, w], dy)


def build_bmm(gen, batch, m, n, k, b_nk):
    a = randn([batch, m, k], gen, True)
    b = randn([batch, n, k] if b_nk else [batch, k, n], gen, True)
    dy = randn([batch, m, n], gen)
    return make(lambda: torch.bmm(a, b.transpose(1, 2) if b_nk else b), [a, b], dy)


def build_softmax(gen, shape, dim):
    x = randn(shape, gen, True)
    dy = randn(shape, gen)
    return make(lambda: torch.softmax(x, dim), [x], dy)


def build_layer_norm(gen, shape):
    n = shape[-1]
    x = randn(shape, gen, True)
    w = torch.ones(n, requires_grad=True)
    b = torch.zeros(n, requires_grad=True)
    dy = randn(shape, gen)
    return make(lambda: F.layer_norm(x, [n], w, b, 1e-5), [x, w, b], dy)


def build_gelu(gen, shape):
    x = randn(shape, gen, True)
    dy = randn(shape, gen)
    return make(lambda: F.gelu(x), [x], dy)


def build_cross_entropy(gen, rows, classes):
    logits = randn([rows, classes], gen, True)
    target = torch.randint(0, classes, [rows], generator=gen, dtype=torch.int64)
    return make(lambda: F.cross_entropy(logits, target), [logits], None)


BUILDERS = {"linear": build_linear, "bmm": build_bmm, "softmax": build_softmax,
            "layer_norm": build_layer_norm, "gelu": build_gelu, "cross_entropy": build_cross_entropy}


def gemm_gflop(builder, args):
    if builder == "linear":
        x_shape, out = args
        return 2e-9 * math.prod(x_shape) * out
    if builder == "bmm":
        batch, m, n, k, _ = args
        return 2e-9 * batch * m * n * k
    return 0.0


def main():
    if ARGS.list:
        for op, case, shape, _, _ in CASES:
            print(f"{op:14s} {case:20s} {shape}")
        return 0
    torch.set_num_threads(ARGS.threads)
    meta = {"impl": "pytorch", "version": torch.__version__, "threads": torch.get_num_threads(),
            "openblas_config": openblas_config(), "python": sys.version.split()[0]}
    if ARGS.json:
        print(json.dumps({"meta": meta}), flush=True)
    else:
        print(meta)
        print(f"\n{'impl':14s} {'case':20s} {'phase':17s} {'op':13s} {'median_ms':>10s} {'min_ms':>10s} "
              f"{'samples':>10s} {'GFLOP/s':>8s}")
    for op, case, shape, builder, args in CASES:
        if ARGS.filter and ARGS.filter not in f"{op} {case}":
            continue
        gen = torch.Generator().manual_seed(SEED)
        forward, forward_backward = BUILDERS[builder](gen, *args)
        gflop = gemm_gflop(builder, args)
        for phase, call, flops in (("forward", forward, gflop), ("forward_backward", forward_backward, 3 * gflop)):
            t = time_call(call)
            row = {"impl": "pytorch", "op": op, "case": case, "shape": shape, "phase": phase, **t,
                   "threads": torch.get_num_threads(), "clock": ARGS.clock, "gflop": flops}
            if ARGS.json:
                print(json.dumps(row), flush=True)
            else:
                rate = f"{flops / (t['median_ms'] * 1e-3):8.1f}" if flops else ""
                print(f"{'pytorch':14s} {case:20s} {phase:17s} {op:13s} {t['median_ms']:10.3f} {t['min_ms']:10.3f} "
                      f"{t['samples']:4d}x{t['inner']:<5d} {rate}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
