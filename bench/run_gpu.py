#!/usr/bin/env python3
"""lsformer against PyTorch on one GPU, side by side: the ops benchmark (bench_cuda_ops vs
bench/torch_cuda_ops.py) and the fused long-short attention (bench_cuda_attention vs
bench/torch_long_short_cuda.py), each dtype for several rounds that alternate which side runs
first. Prints markdown tables with medians and fastest calls of both sides and the speed-ups on
each (PyTorch time / lsformer time), ready for bench/RESULTS.md.

    python3 bench/run_gpu.py --bin BUILD/bench [--rounds 2] [--dtypes f32,bf16] [--rows 32768]
                             [--heads 8] [--lengths 4096,16384,65536] [--json-out FILE]

BUILD/bench holds bench_cuda_ops and bench_cuda_attention (a sm_90 build, or the bin/ folder of
scripts/gpu/bundle.sh's archive); python3 must be a CUDA build of PyTorch. A round's value is
that process's median per call; the table gives the median over rounds, and the fastest call
over all rounds.
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

from bench_common import run_json  # noqa: E402


def collect(results, side, dtype, rows):
    for r in rows:
        key = (r["case"], dtype)
        entry = results.setdefault(key, {}).setdefault(side, {"ms": [], "min_ms": [], "last": r})
        if r.get("oom"):
            entry["oom"] = True
            continue
        entry["ms"].append(float(r["ms"]))
        entry["min_ms"].append(float(r.get("min_ms", r["ms"])))
        entry["last"] = r


def summary(entry):
    """(median over rounds, fastest over rounds) in ms, or None."""
    if not entry or entry.get("oom") or not entry["ms"]:
        return None
    return statistics.median(entry["ms"]), min(entry["min_ms"])


def fmt(x, digits=4):
    return "—" if x is None else f"{x:.{digits}f}"


def ratio(peer, ours):
    return "—" if peer is None or ours is None or ours <= 0 else f"{peer / ours:.2f}×"


def ops_table(results, dtypes):
    lines = ["| op | dtype | lsformer ms (median / fastest) | PyTorch ms (median / fastest) | speed-up, medians | "
             "speed-up, fastest | lsformer GB/s or TFLOP/s |", "|---|---|---|---|---|---|---|"]
    for dtype in dtypes:
        for (case, dt), sides in results.items():
            if dt != dtype or sides.get("kind") != "ops":
                continue
            ours, peer = summary(sides.get("lsformer")), summary(sides.get("PyTorch"))
            last = sides["lsformer"]["last"] if "lsformer" in sides else {}
            rate = (f"{last['tflops']:.1f} TFLOP/s" if last.get("tflops") else
                    f"{last['gbps']:.0f} GB/s" if "gbps" in last else "—")
            lines.append(f"| {case} | {dtype} | {fmt(ours and ours[0])} / {fmt(ours and ours[1])} | "
                         f"{fmt(peer and peer[0])} / {fmt(peer and peer[1])} | {ratio(peer and peer[0], ours and ours[0])} | "
                         f"{ratio(peer and peer[1], ours and ours[1])} | {rate} |")
    return "\n".join(lines)


def attention_table(results, dtypes):
    lines = ["| case | dtype | lsformer ms (median / fastest) | PyTorch long-short ms (median / fastest) | "
             "speed-up, medians | speed-up, fastest | lsformer TFLOP/s | × memory floor | SDPA full ms (same n) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for dtype in dtypes:
        for (case, dt), sides in results.items():
            if dt != dtype or sides.get("kind") != "attention" or not case.startswith("long_short"):
                continue
            ours, peer = summary(sides.get("lsformer")), summary(sides.get("PyTorch"))
            last = sides["lsformer"]["last"] if "lsformer" in sides else {}
            n = case.split()[1]  # "n=4096"
            full = summary(results.get((f"sdpa_full {n}", dtype), {}).get("PyTorch"))
            lines.append(f"| {case} | {dtype} | {fmt(ours and ours[0], 3)} / {fmt(ours and ours[1], 3)} | "
                         f"{fmt(peer and peer[0], 3)} / {fmt(peer and peer[1], 3)} | "
                         f"{ratio(peer and peer[0], ours and ours[0])} | {ratio(peer and peer[1], ours and ours[1])} | "
                         f"{fmt(last.get('tflops'), 2)} | {fmt(last.get('ratio_to_floor'), 0)} | {fmt(full and full[0], 3)} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="folder holding bench_cuda_ops and bench_cuda_attention")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--rows", type=int, default=32768)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--lengths", default="4096,16384,65536")
    ap.add_argument("--python", default=sys.executable, help="the Python with a CUDA build of PyTorch")
    ap.add_argument("--peer-ops", default=os.path.join(HERE, "torch_cuda_ops.py"))
    ap.add_argument("--peer-attention", default=os.path.join(HERE, "torch_long_short_cuda.py"))
    ap.add_argument("--json-out", help="also write every process's rows here (JSON)")
    args = ap.parse_args()
    if args.rounds < 1 or args.rows < 1 or args.heads < 1:
        ap.error("--rounds, --rows and --heads must be at least 1")
    dtypes = [d for d in args.dtypes.split(",") if d]
    if not dtypes or any(d not in ("f32", "bf16") for d in dtypes):
        ap.error(f"--dtypes takes f32 and/or bf16, got '{args.dtypes}'")
    for prog in ("bench_cuda_ops", "bench_cuda_attention"):
        if not os.access(os.path.join(args.bin, prog), os.X_OK):
            ap.error(f"no executable {prog} in {args.bin}")
    lengths = [int(n) for n in args.lengths.split(",") if n]

    results = {}
    raw = []
    for dtype in dtypes:
        for rnd in range(args.rounds):
            ours_ops = [[os.path.join(args.bin, "bench_cuda_ops"), "--dtype", dtype, "--rows", str(args.rows), "--json"]]
            peer_ops = [[args.python, args.peer_ops, "--dtype", dtype, "--rows", str(args.rows), "--json"]]
            # bench_cuda_attention has fixed lengths: one process per requested length selects them.
            ours_att = [[os.path.join(args.bin, "bench_cuda_attention"), "--heads", str(args.heads), "--dtype", dtype,
                         "--filter", f"n={n} ", "--json"] for n in lengths]
            peer_att = [[args.python, args.peer_attention, "--heads", str(args.heads), "--dtype", dtype,
                         "--lengths", args.lengths]]
            pairs = [(("lsformer", "ops", ours_ops), ("PyTorch", "ops", peer_ops)),
                     (("lsformer", "attention", ours_att), ("PyTorch", "attention", peer_att))]
            for pair in pairs:
                for side, kind, cmds in (pair if rnd % 2 == 0 else pair[::-1]):  # who runs first alternates
                    for cmd in cmds:
                        _, rows, _ = run_json(cmd, env=None, text_lines=True)
                        raw.append({"side": side, "kind": kind, "dtype": dtype, "round": rnd, "rows": rows})
                        collect(results, side, dtype, rows)
                        for r in rows:
                            results[(r["case"], dtype)]["kind"] = kind
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(raw, f, indent=1)
    print(f"lsformer vs PyTorch on the same GPU: {args.rounds} round(s) per dtype, order alternating; "
          f"ops on [{args.rows}, 1024]; attention batch 1, {args.heads} heads of 64.\n")
    print(ops_table(results, dtypes))
    print()
    print(attention_table(results, dtypes))


if __name__ == "__main__":
    main()
