#!/usr/bin/python3
"""Runs the CPU op benchmark for lsformer (bench_ops) and PyTorch (torch_ops.py) side by side and
writes the "CPU ops vs PyTorch" section of bench/RESULTS.md.

    /usr/bin/python3 bench/run_cpu_ops.py build/bench/bench_ops --threads 2

Builds nothing. For every round and every case it runs one bench_ops process and one torch_ops.py
process on that case only, alternating which goes first from round to round, so both sides see
the same machine load at nearly the same time. Each process reports its median per-call time
(see bench_ops.cpp for the method); the table shows the median over rounds. bench_ops also times
the raw cblas_sgemm products of the matmul/bmm cases, which gives the GEMM fraction.

Only the text between <!-- cpu-ops:begin --> and <!-- cpu-ops:end --> in RESULTS.md is replaced;
other sections stay as they are.
"""
import argparse
import datetime
import math
import os
import shlex
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

from bench_common import (  # noqa: E402
    add_runner_args, fmt_ms, git_revision, loadavg, run_json, runner_env, setup_lines,
    update_section)
BEGIN, END = "<!-- cpu-ops:begin -->", "<!-- cpu-ops:end -->"
PHASES = ("forward", "forward_backward")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("bench_ops", help="path to the built bench_ops binary")
    p.add_argument("--rounds", type=int, default=3, help="rounds per case (default 3)")
    p.add_argument("--budget", type=float, default=1.0, help="sampling seconds per measurement (default 1.0)")
    p.add_argument("--filter", default="", help='only cases whose "op case" contains TEXT')
    add_runner_args(p, "torch_ops.py", dump_dir=False, clock_help="wall (default) or cpu: process CPU time (meaningful with --threads 1 on a busy machine)")
    return p.parse_args()


def list_cases(bench_ops):
    out = subprocess.run([bench_ops, "--list"], capture_output=True, text=True, check=True).stdout
    cases = []
    for line in out.splitlines():
        op, case, shape = line.split(None, 2)
        cases.append((op, case, shape.strip()))
    return cases


def main():
    args = parse_args()
    bench_ops = os.path.abspath(args.bench_ops)
    torch_ops = os.path.join(HERE, "torch_ops.py")
    common = ["--json", "--threads", str(args.threads), "--budget", str(args.budget), "--clock", args.clock]
    cases = [c for c in list_cases(bench_ops) if not args.filter or args.filter in f"{c[0]} {c[1]}"]
    if not cases:
        print("run_cpu_ops: no case matches the filter", file=sys.stderr)
        return 2

    env = runner_env(args, "run_cpu_ops")
    load_before = loadavg()
    times = {}  # (impl, case, phase) -> [median_ms per round]
    mins = {}   # (impl, case, phase) -> [min_ms per round]
    gflop = {}  # (case, phase) -> GFLOP per call
    errors, metas = {}, {}
    for rnd in range(args.rounds):
        for op, case, _ in cases:
            key = f"{op} {case}"
            sides = [("lsformer", [bench_ops] + common + ["--filter", key]),
                     ("pytorch", [args.python, torch_ops] + common + ["--filter", key])]
            if rnd % 2:
                sides.reverse()
            for impl, cmd in sides:
                try:
                    meta, rows, _ = run_json(cmd, env)
                except RuntimeError as e:
                    errors[(impl, case)] = str(e).splitlines()[-1]
                    print(f"  {impl} {case}: {errors[(impl, case)]}", file=sys.stderr)
                    continue
                metas[impl] = meta
                for r in rows:
                    times.setdefault((r["impl"], case, r["phase"]), []).append(r["median_ms"])
                    mins.setdefault((r["impl"], case, r["phase"]), []).append(r["min_ms"])
                    if r.get("gflop"):
                        gflop[(case, r["phase"])] = r["gflop"]
            print(f"round {rnd + 1}/{args.rounds}: {case} done", file=sys.stderr, flush=True)
    load_after = loadavg()

    def med(impl, case, phase):
        v = times.get((impl, case, phase))
        return statistics.median(v) if v else None

    def best(impl, case, phase):
        v = mins.get((impl, case, phase))
        return min(v) if v else None

    header = ("| op | case | shapes | phase | lsformer ms | PyTorch ms | ratio | ratio of mins | sgemm ms | "
              "GEMM fraction | lsformer GFLOP/s |")
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    summary = {p: [] for p in PHASES}
    slower = []
    for op, case, shape in cases:
        for phase in PHASES:
            lsf, pt, raw = med("lsformer", case, phase), med("pytorch", case, phase), med("sgemm", case, phase)
            ratio = lsf / pt if lsf and pt else None
            lsf_min, pt_min = best("lsformer", case, phase), best("pytorch", case, phase)
            ratio_min = lsf_min / pt_min if lsf_min and pt_min else None
            frac = raw / lsf if raw and lsf else None
            rate = gflop.get((case, phase), 0) / (lsf * 1e-3) if lsf and gflop.get((case, phase)) else None
            if ratio is not None:
                summary[phase].append(ratio)
                if ratio > 1.0:
                    slower.append(f"{op} {case} {phase} ({ratio:.2f}×)")
            lines.append(f"| {op} | {case} | `{shape}` | {phase} | {fmt_ms(lsf)} | {fmt_ms(pt)} | "
                         f"{'—' if ratio is None else f'{ratio:.2f}'} | "
                         f"{'—' if ratio_min is None else f'{ratio_min:.2f}'} | {fmt_ms(raw)} | "
                         f"{'—' if frac is None else f'{frac:.2f}'} | {'—' if rate is None else f'{rate:.1f}'} |")
    table = "\n".join(lines)
    print(table)

    geo = {p: math.exp(statistics.mean(math.log(r) for r in v)) for p, v in summary.items() if v}
    cmd_text = shlex.join([os.path.relpath(sys.argv[0])] + sys.argv[1:])
    lsf_meta, pt_meta = metas.get("lsformer", {}), metas.get("pytorch", {})
    out = [BEGIN, "## CPU ops vs PyTorch", "",
           f"Produced by `/usr/bin/python3 {cmd_text}` on {datetime.date.today().isoformat()} "
           f"(lsformer {git_revision()}).", "",
           *setup_lines(args, load_before, load_after, lsf_meta),
           f"- PyTorch {pt_meta.get('version', 'unknown')} (Debian, Python {pt_meta.get('python', '?')}); "
           f"its BLAS: {pt_meta.get('openblas_config', 'unknown')} via libblas.so.3.",
           f"- Method: {args.rounds} rounds; in each, per case, one lsformer and one PyTorch process "
           "(alternating which runs first); each reports the median per-call time after warm-up "
           f"(sampling budget {args.budget} s, {args.clock}-clock time); the table shows the median over rounds. Inputs require grad; "
           "`forward` records autograd; `forward_backward` = grads set to none + forward + backward with a "
           "fixed random upstream gradient. Shapes and rationale: header of `bench/bench_ops.cpp`.",
           "- ratio = lsformer / PyTorch medians (≤ 1.0: lsformer is faster); ratio of mins = the same for the "
           "fastest sample of any round (less sensitive to other load on the machine). GEMM fraction = raw `cblas_sgemm` time "
           "of the same products (forward; forward + both backward products) / lsformer time "
           "(1.0: no overhead over the BLAS).", "",
           table, ""]
    if geo:
        out.append("Geometric mean of ratios: " + ", ".join(f"{p} {g:.2f}" for p, g in geo.items()) + ".")
    out.append("Slower than PyTorch: " + ("; ".join(slower) if slower else "none") + ".")
    for (impl, case), msg in sorted(errors.items()):
        out.append(f"- error: {impl} {case}: {msg}")
    for note in args.note:
        out.append(f"\n{note}")
    out.append(END)
    section = "\n".join(out)

    if args.no_write:
        return 0
    update_section(args.results, BEGIN, END, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
