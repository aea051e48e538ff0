#!/usr/bin/python3
"""Runs the attention benchmark (bench_attention, lsformer) and its PyTorch comparison
(torch_long_short.py) and writes the "Attention on the CPU" section of bench/RESULTS.md.

    /usr/bin/python3 bench/run_attention.py build/bench/bench_attention --threads 2

Builds nothing. Two parts:
  1. LRA configuration (batch 4, n 4096, d 64, 2 heads, w 8, r 32, padded as LRA's inputs):
     bench_attention --dump writes the seeded weights, inputs, lsformer's output and gradients;
     torch_long_short.py checks its own float32 (and float64) result against them and both sides
     time forward + backward, --rounds times, alternating which runs first; median over rounds.
     Target: lsformer at least 5x faster than PyTorch, outputs equal within float32 tolerance.
     The same rounds also time lsformer on 1 thread (thread scaling, target >= 1.8x from 1 to 2
     threads), and the section states the layer's GFLOP/s (work counted by bench_attention from
     the shapes) beside the machine's sgemm rate and memory bandwidth, which bench_attention
     measures before its cases (engine/machine_limits.h).
  2. Scaling: bench_attention times forward + backward and the peak memory of one
     layer for n = 1K ... --max-n (long-short w8-r32 and w128-r32, full attention; d 64 / 2 heads
     and d 512 / 8 heads; batch 1) and reports time(2n) / time(n) from n = 4K. Target for
     long-short: <= 2.2 (linear); full attention grows about 4x per doubling (quadratic).
     Long-short: each case in its own process, --scaling-rounds times, per case the fastest of
     the rounds' medians (the spread is reported); full attention: one process, once.

Only the text between <!-- attention-cpu:begin --> and <!-- attention-cpu:end --> in RESULTS.md is
replaced; other sections stay as they are.
"""
import argparse
import datetime
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

from bench_common import (  # noqa: E402
    add_runner_args, fmt_mib, fmt_ms, git_revision, loadavg, lsformer_meta, runner_env, setup_lines,
    update_section)
from bench_common import run_json as _run_json  # noqa: E402


def run_json(cmd, env, allow_fail=False):
    """Runs cmd, echoing it and its stderr; returns (meta, rows, returncode)."""
    return _run_json(cmd, env, allow_fail=allow_fail, echo=True)
BEGIN, END = "<!-- attention-cpu:begin -->", "<!-- attention-cpu:end -->"
LS_TARGET, SPEEDUP_TARGET, RATIO_FROM_N = 2.2, 5.0, 4096


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("bench_attention", help="path to the built bench_attention binary")
    p.add_argument("--rounds", type=int, default=3, help="rounds of the LRA comparison (default 3)")
    p.add_argument("--scaling-rounds", type=int, default=5,
                   help="processes timing each long-short scaling case; per case the fastest of their medians (default 5)")
    p.add_argument("--sample-time", type=float, default=1.0, help="sampling seconds per measurement (default 1.0)")
    p.add_argument("--budget", type=float, default=60.0,
                   help="skip scaling cases predicted to take longer than this many seconds (default 60)")
    p.add_argument("--max-bytes", type=float, default=8 * 2 ** 30,
                   help="skip full attention when its n x n logits exceed this (default 8 GiB)")
    p.add_argument("--max-n", type=int, default=65536, help="largest n of the scaling sweep (default 65536)")
    p.add_argument("--skip-scaling", action="store_true", help="run the LRA comparison only")
    p.add_argument("--skip-lra", action="store_true", help="run the scaling sweep only")
    add_runner_args(p, "torch_long_short.py")
    return p.parse_args()



def lra_part(args, env, common, dump_dir):
    """The LRA comparison: (markdown lines, summary text)."""
    bench = [args.bench_attention] + common + ["--filter", "lra"]
    torch_cmd = [args.python, os.path.join(HERE, "torch_long_short.py"), dump_dir, "--threads", str(args.threads),
                 "--sample-time", str(args.sample_time), "--clock", args.clock]
    _, _, _ = run_json(bench + ["--dump", dump_dir, "--min-samples", "1", "--sample-time", "0"], env)
    pt_meta, check_rows, rc = run_json(torch_cmd + ["--no-time"], env, allow_fail=True)
    check = next((r for r in check_rows if "check" in r), None)
    if check is None:
        raise RuntimeError(f"torch_long_short.py produced no check (exit {rc})")
    # Thread scaling (issue #17): lsformer's layer also on one thread, in the same rounds.
    single = [args.bench_attention, "--threads", "1"] + common[2:] + ["--filter", "lra"]
    sides_all = [("lsformer", bench), ("pytorch", torch_cmd + ["--no-check"])]
    if args.threads > 1:
        sides_all.append(("lsformer_1t", single))
    times = {impl: [] for impl, _ in sides_all}
    mins = {impl: [] for impl, _ in sides_all}
    metas = {}
    peak, gflop = None, None
    for rnd in range(args.rounds):
        sides = list(sides_all)
        if rnd % 2:
            sides.reverse()
        for impl, cmd in sides:
            meta, rows, _ = run_json(cmd, env)
            metas.setdefault(impl, meta)
            for r in rows:
                if r.get("phase") == "forward_backward":
                    times[impl].append(r["median_ms"])
                    mins[impl].append(r["min_ms"])
                    peak = r.get("extra_bytes", peak) if impl == "lsformer" else peak
                    gflop = r.get("gflop", gflop) if impl == "lsformer" else gflop
        print(f"LRA round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    lsf, pt = statistics.median(times["lsformer"]), statistics.median(times["pytorch"])
    speedup = pt / lsf
    limits = lambda impl: (metas.get(impl) or {}).get("machine") or {}  # noqa: E731
    rate_lines = []
    if gflop:
        m = limits("lsformer")
        rate = gflop / (lsf * 1e-3)
        best_rate = gflop / (min(mins["lsformer"]) * 1e-3)
        rate_lines.append(
            f"Work counted from the shapes (bench_attention.cpp `forward_gflop`: every product, 3 × the forward "
            f"for forward + backward): {gflop:.2f} GFLOP per call. lsformer runs at **{rate:.0f} GFLOP/s** on the "
            f"median ({best_rate:.0f} on the fastest sample; target ≥ 150)"
            + (f", against this machine's measured cblas_sgemm {m['sgemm_size']}³ rate of {m['sgemm_gflops']:.0f} "
               f"GFLOP/s and STREAM-triad bandwidth of {m['triad_gbs']:.1f} GB/s ({m['threads']} threads, measured by "
               f"the same lsformer process before the case; `engine/machine_limits.h`): {100 * rate / m['sgemm_gflops']:.0f}% "
               f"of sgemm" if m else "") + ".")
        rate_lines.append("")
    if "lsformer_1t" in times:
        one, one_min = statistics.median(times["lsformer_1t"]), min(mins["lsformer_1t"])
        m1 = limits("lsformer_1t")
        scaling = one / lsf
        sgemm_1t = f"; 1-thread sgemm {m1['sgemm_gflops']:.0f} GFLOP/s" if m1 else ""
        rate_lines.append(
            f"Thread scaling (the same rounds, lsformer at 1 thread: median {fmt_ms(one)} ms, fastest "
            f"{fmt_ms(one_min)} ms{sgemm_1t}): "
            f"1 → {args.threads} threads **{scaling:.2f}×** on the medians, {one_min / min(mins['lsformer']):.2f}× "
            f"on the fastest samples (target ≥ 1.8×: {'met' if scaling >= 1.8 else 'NOT met'}).")
        rate_lines.append("")
    lines = ["### LRA configuration vs PyTorch", "",
             f"Batch {check['batch']}, n {check['n']}, d {check['dim']}, {check['heads']} heads, w {check['window']}, "
             f"r {check['rank']}, padded (sequence b has its last 37·b tokens padded); forward + backward of one "
             "layer with seeded weights and inputs (`bench_attention --dump`), PyTorch: `bench/torch_long_short.py`, "
             "written from transformer-ls.md §2.3 (padded K/V, unfolded overlapping tiles, one joint softmax).", "",
             "| impl | median ms | min ms | lsformer peak extra MiB |", "|---|---|---|---|",
             f"| lsformer | {fmt_ms(lsf)} | {fmt_ms(min(mins['lsformer']))} | {fmt_mib(peak)} |",
             f"| PyTorch {pt_meta.get('version', '?')} | {fmt_ms(pt)} | {fmt_ms(min(mins['pytorch']))} | — |", "",
             f"**Speed-up (PyTorch / lsformer medians): {speedup:.2f}×** (target ≥ {SPEEDUP_TARGET:.0f}×: "
             f"{'met' if speedup >= SPEEDUP_TARGET else 'NOT met'}); ratio of fastest samples "
             f"{min(mins['pytorch']) / min(mins['lsformer']):.2f}×.", "",
             *rate_lines,
             f"Output check (largest |difference|; pass: ≤ tol · max(1, max|ref|), tol = 4·n·2⁻²⁴ = {check['tol']:.2e}): "
             f"{'**pass**' if check['pass'] else '**FAIL**'}.", "",
             "| tensor | max abs | lsformer vs PyTorch f32 | lsformer vs PyTorch f64 | PyTorch f32 vs f64 |",
             "|---|---|---|---|---|"]
    for name, r in check["check"].items():
        lines.append(f"| {name} | {r['max_abs']:.3g} | {r['lsformer_vs_torch32']:.2e} | "
                     f"{r['lsformer_vs_torch64']:.2e} | {r['torch32_vs_torch64']:.2e} |")
    summary = f"LRA: lsformer {fmt_ms(lsf)} ms, PyTorch {fmt_ms(pt)} ms, speed-up {speedup:.2f}×, check " + \
              ("pass" if check["pass"] else "FAIL")
    return lines + [""], summary, pt_meta


def scaling_part(args, env, common):
    """The scaling sweep: (markdown lines, summary text)."""
    sweep = [args.bench_attention] + common + ["--budget", str(args.budget), "--max-bytes", str(int(args.max_bytes)),
                                               "--max-n", str(args.max_n)]
    # Full attention in one process, once (it only has to show its quadratic growth; its budget
    # prediction needs the previous n). Long-short: every case in its own process, --scaling-rounds
    # times, and per case the fastest of the rounds' medians. On the shared 2-core VM a process
    # either runs at the case's usual speed or, now and then, 15-30% slower throughout (slow
    # spells of the host, and state earlier cases left in a shared process); such noise only
    # ever adds time, and one slow case skews two ratios. The spread is reported with the table.
    _, rows, _ = run_json(sweep + ["--filter", "scale/full/"], env)
    listing = subprocess.run([args.bench_attention, "--list", "--max-n", str(args.max_n)], capture_output=True,
                             text=True, env=env, check=True).stdout.split()
    ls_cases = [c for c in listing if c.startswith("scale/ls")]
    ls_rounds = []
    for rnd in range(args.scaling_rounds):
        round_rows = []
        for case in ls_cases:
            _, case_rows, _ = run_json(sweep + ["--filter", case], env)
            round_rows += [r for r in case_rows if r["case"] == case]
        ls_rounds.append(round_rows)
        print(f"scaling round {rnd + 1}/{args.scaling_rounds} done", file=sys.stderr, flush=True)
    by_case = {}
    for ls_rows in ls_rounds:
        for r in ls_rows:
            by_case.setdefault(r["case"], []).append(r)
    for case_rows in by_case.values():
        measured = [r for r in case_rows if "median_ms" in r]
        if not measured:
            rows.append(case_rows[0])
            continue
        row = dict(measured[0])
        row["median_ms"] = min(r["median_ms"] for r in measured)
        row["round_medians_ms"] = [r["median_ms"] for r in measured]
        rows.append(row)
    series = {}  # (dim, heads) -> variant -> n -> row
    for r in rows:
        series.setdefault((r["dim"], r["heads"]), {}).setdefault(r["variant"], {})[r["n"]] = r
    lines = ["### Scaling with n (batch 1, forward + backward of one layer)", "",
             f"Cases skipped: full attention where its logits (h·n² floats) exceed {args.max_bytes / 2 ** 30:.1f} GiB; "
             f"any case predicted to take more than {args.budget:g} s. ratio = time(n) / time(n/2), shown from "
             f"n = {2 * RATIO_FROM_N} (i.e. time(2n)/time(n) from n = {RATIO_FROM_N}); target for long-short ≤ "
             f"{LS_TARGET}. Long-short times: each case in its own process, {args.scaling_rounds} rounds; the "
             "fastest of the rounds' medians (noise on a shared machine only adds time; spread below each table). Peak extra = allocator high-water mark during one call minus the bytes live before it "
             "(weights, x, dy).", ""]
    summary = []
    for (d, h), by_variant in sorted(series.items()):
        variants = [v for v in by_variant if v.startswith("ls")] + [v for v in by_variant if not v.startswith("ls")]
        ns = sorted({n for v in by_variant.values() for n in v})
        lines.append(f"#### d {d}, {h} heads")
        lines.append("")
        header = "| n | " + " | ".join(f"{v} ms | {v} ratio | {v} peak extra MiB" for v in variants) + " |"
        lines += [header, "|" + "---|" * (1 + 3 * len(variants))]
        worst = {}
        for n in ns:
            cells = []
            for v in variants:
                r = by_variant[v].get(n)
                prev = by_variant[v].get(n // 2)
                if r is None or "skipped" in r:
                    cells += ["skipped" if r else "—", "—", "—"]
                    continue
                ratio = None
                if prev and "median_ms" in prev and n // 2 >= RATIO_FROM_N:
                    ratio = r["median_ms"] / prev["median_ms"]
                    if v.startswith("ls"):
                        worst[v] = max(worst.get(v, 0.0), ratio)
                cells += [fmt_ms(r["median_ms"]), "—" if ratio is None else f"{ratio:.2f}", fmt_mib(r["extra_bytes"])]
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
        lines.append("")
        spreads = [(max(r["round_medians_ms"]) / min(r["round_medians_ms"]), v, n) for v in variants
                   for n, r in by_variant[v].items() if len(r.get("round_medians_ms", [])) > 1]
        if spreads:
            top = max(spreads)
            lines.append(f"- Spread of the long-short rounds (slowest / fastest process median): median "
                         f"{statistics.median(s for s, _, _ in spreads):.2f}, largest {top[0]:.2f} ({top[1]}, n = {top[2]}).")
        for v, w in worst.items():
            text = f"d {d} / {h} heads, {v}: largest time(2n)/time(n) from n = {RATIO_FROM_N}: {w:.2f} " \
                   f"(target ≤ {LS_TARGET}: {'met' if w <= LS_TARGET else 'NOT met'})"
            lines.append(f"- {text}")
            summary.append(text)
        lines.append("")
    return lines, summary


def main():
    args = parse_args()
    args.bench_attention = os.path.abspath(args.bench_attention)
    env = runner_env(args, "run_attention")
    common = ["--threads", str(args.threads), "--sample-time", str(args.sample_time), "--clock", args.clock]
    load_before = loadavg()
    body, summary, pt_meta = [], [], {}
    lsf_meta = lsformer_meta(args.bench_attention, args.threads, env)
    if not args.skip_lra:
        with tempfile.TemporaryDirectory() as tmp:
            dump_dir = args.dump_dir or tmp
            os.makedirs(dump_dir, exist_ok=True)
            lines, text, pt_meta = lra_part(args, env, common, dump_dir)
        body += lines
        summary.append(text)
    if not args.skip_scaling:
        lines, texts = scaling_part(args, env, common)
        body += lines
        summary += texts
    load_after = loadavg()
    print("\n".join(body))

    cmd_text = shlex.join([os.path.relpath(sys.argv[0])] + sys.argv[1:])
    out = [BEGIN, "## Attention on the CPU (long-short vs full attention, and vs PyTorch)", "",
           f"Produced by `/usr/bin/python3 {cmd_text}` on {datetime.date.today().isoformat()} "
           f"(lsformer {git_revision()}).", "",
           *setup_lines(args, load_before, load_after, lsf_meta),
           (f"- PyTorch {pt_meta.get('version', 'unknown')} (Debian, Python {pt_meta.get('python', '?')}); its BLAS: "
            f"{pt_meta.get('openblas_config', 'unknown')}." if pt_meta else "- PyTorch: not run."),
           f"- Method: median per-call time of forward + backward after warm-up ({args.clock}-clock time, "
           f"sampling {args.sample_time} s per case; see the headers of `bench/bench_attention.cpp` and "
           f"`bench/torch_long_short.py`); LRA comparison over {args.rounds} rounds of one process per side, "
           "alternating which runs first.", ""]
    out += body
    for note in args.note:
        out.append(note)
        out.append("")
    out.append(END)
    section = "\n".join(out)
    print("\n".join(summary), file=sys.stderr)
    if args.no_write:
        return 0
    update_section(args.results, BEGIN, END, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
