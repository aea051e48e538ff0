#!/usr/bin/python3
"""Runs the vision training benchmark (bench_vision, lsformer) and its PyTorch comparison
(torch_vision.py) side by side, and writes the "vision speed on the CPU" section of
bench/RESULTS.md (issue #14).

    /usr/bin/python3 bench/run_vision.py build/bench/bench_vision --threads 2

Builds nothing. Three parts:
  1. Check: bench_vision --dump writes every case's seeded weights, inputs, logits, loss and
     gradients; torch_vision.py loads them into its own implementation of the same model and
     compares its float32 (and float64) results (tolerance in torch_vision.py's docstring).
     The timing runs only when every case passes (--allow-mismatch overrides).
  2. Speed: --rounds rounds; in each, per case, one lsformer process and one PyTorch process
     (alternating which runs first), each timing training steps (forward + backward + AdamW)
     after warm-up; per side and case the median over rounds of the process medians, and the
     fastest step of any round. images/s = batch / step time; ratio = lsformer images/s /
     PyTorch images/s (≥ 1: lsformer is faster). Target (issue #14): ratio ≥ 1. Peak memory: the
     live tensor bytes during one step as each side's allocator counts them (lsformer's counter,
     PyTorch's profiler allocation events), and each process's peak resident set.
  3. Cost: bench_vision --cost, the forward GFLOPs (multiply-adds) per image of every preset,
     beside the papers' numbers.

Only the text between <!-- vision-cpu:begin --> and <!-- vision-cpu:end --> in RESULTS.md is
replaced; other sections stay as they are.
"""
import argparse
import datetime
import os
import shlex
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

from bench_common import (  # noqa: E402
    add_runner_args, fmt_mib, git_revision, loadavg, lsformer_meta, runner_env, setup_lines,
    update_section)
from bench_common import run_json as _run_json  # noqa: E402

BEGIN, END = "<!-- vision-cpu:begin -->", "<!-- vision-cpu:end -->"
TARGET = 1.0

# Forward GFLOPs per image as the Transformer-LS paper (Zhu et al., NeurIPS 2021) reports them
# for its ImageNet models (multiply-adds, the ViL and CvT papers' convention).
PAPER_GFLOPS = {
    "vil_ls_medium_224": 8.7, "vil_ls_base_224": 13.4, "vil_ls_medium_384": 28.7,
    "cvt_ls_13_224": 4.9, "cvt_ls_21_224": 7.9, "cvt_ls_21_384": 23.9, "cvt_ls_21_448": 34.2,
}


def run_json(cmd, env, allow_fail=False):
    """Runs cmd, echoing it and its stderr; returns (meta, rows, returncode)."""
    return _run_json(cmd, env, allow_fail=allow_fail, echo=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("bench_vision", help="path to the built bench_vision binary")
    p.add_argument("--rounds", type=int, default=3, help="rounds of the comparison (default 3)")
    p.add_argument("--sample-time", type=float, default=5.0, help="sampling seconds per case and process (default 5)")
    p.add_argument("--filter", default="", help="only cases whose name contains TEXT")
    p.add_argument("--skip-cost", action="store_true", help="leave out the GFLOPs table")
    p.add_argument("--allow-mismatch", action="store_true", help="time even when the check fails")
    add_runner_args(p, "torch_vision.py")
    return p.parse_args()



def fmt_rate(v):
    return f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def check_part(args, env, dump_dir):
    """Dumps every case and runs the PyTorch check: (check rows by case, PyTorch meta)."""
    run_json([args.bench_vision, "--threads", str(args.threads), "--filter", args.filter, "--dump", dump_dir], env)
    meta, rows, rc = run_json([args.python, os.path.join(HERE, "torch_vision.py"), dump_dir, "--threads",
                               str(args.threads), "--filter", args.filter, "--no-time"], env, allow_fail=True)
    checks = {r["case"]: r for r in rows if "check" in r}
    if not checks:
        raise RuntimeError(f"torch_vision.py produced no check (exit {rc})")
    return checks, meta


def speed_part(args, env, dump_dir, cases):
    """The alternating rounds: {case: {impl: [rows]}}."""
    common = ["--threads", str(args.threads), "--sample-time", str(args.sample_time), "--clock", args.clock]
    out = {c: {"lsformer": [], "pytorch": []} for c in cases}
    for rnd in range(args.rounds):
        for case in cases:
            sides = [("lsformer", [args.bench_vision, "--filter", case] + common),
                     ("pytorch", [args.python, os.path.join(HERE, "torch_vision.py"), dump_dir, "--filter", case,
                                  "--no-check"] + common)]
            if rnd % 2:
                sides.reverse()
            for impl, cmd in sides:
                _, rows, _ = run_json(cmd, env)
                out[case][impl] += [r for r in rows if r.get("case") == case and "median_ms" in r]
        print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    return out


def speed_table(results, checks):
    lines = ["| case | model | batch | parameters | lsformer img/s (median / fastest) | PyTorch img/s (median / fastest) "
             "| ratio of medians | ratio of fastest | lsformer peak MiB (extra) | PyTorch peak MiB (extra) "
             "| lsformer / PyTorch peak RSS MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    summary, verdicts = [], []
    for case, by_impl in results.items():
        lsf, pt = by_impl["lsformer"], by_impl["pytorch"]
        if not lsf or not pt:
            continue
        batch = lsf[0]["batch"]
        med = {k: statistics.median(r["median_ms"] for r in v) for k, v in by_impl.items()}
        fast = {k: min(r["min_ms"] for r in v) for k, v in by_impl.items()}
        rate = {k: batch * 1e3 / med[k] for k in med}
        rate_fast = {k: batch * 1e3 / fast[k] for k in fast}
        ratio, ratio_fast = rate["lsformer"] / rate["pytorch"], rate_fast["lsformer"] / rate_fast["pytorch"]

        def peak(rows):
            r = rows[0]
            return f"{fmt_mib(r['peak_bytes'])} ({fmt_mib(r['peak_bytes'] - r['baseline_bytes'])})"

        rss = f"{fmt_mib(max(r['rss_peak_bytes'] for r in lsf))} / {fmt_mib(max(r['rss_peak_bytes'] for r in pt))}"
        lines.append(f"| {case} | {lsf[0]['model']} {lsf[0]['image_size']}² × {lsf[0]['in_channels']} | {batch} | "
                     f"{lsf[0]['parameters'] / 1e6:.2f}M | {fmt_rate(rate['lsformer'])} / {fmt_rate(rate_fast['lsformer'])} | "
                     f"{fmt_rate(rate['pytorch'])} / {fmt_rate(rate_fast['pytorch'])} | **{ratio:.2f}** | {ratio_fast:.2f} | "
                     f"{peak(lsf)} | {peak(pt)} | {rss} |")
        met = ratio >= TARGET
        verdicts.append(f"- {case}: ratio of medians {ratio:.2f}, of fastest steps {ratio_fast:.2f} (target ≥ {TARGET:.0f}: "
                        f"{'met' if met else 'NOT met'}); check {'pass' if checks.get(case, {}).get('pass') else 'FAIL'}.")
        summary.append(f"{case}: lsformer {rate['lsformer']:.1f} img/s, PyTorch {rate['pytorch']:.1f} img/s, "
                       f"ratio {ratio:.2f} (fastest {ratio_fast:.2f})")
    return lines + [""] + verdicts + [""], summary


def check_table(checks):
    lines = ["| case | tol (L) | tensors | largest lsformer vs PyTorch f32 (tensor, relative to max(1, max abs)) "
             "| logits: lsformer vs f32 / vs f64 / f32 vs f64 | loss: lsformer vs f32 / vs f64 | result |",
             "|---|---|---|---|---|---|---|"]
    for case, c in checks.items():
        rows = c["check"]
        worst = max(rows.items(), key=lambda kv: kv[1]["lsformer_vs_torch32"] / max(1.0, kv[1]["max_abs"]))
        lg, ls = rows["logits"], rows["loss"]
        lines.append(f"| {case} | {c['tol']:.2e} ({c['reduction']}) | {len(rows)} | {worst[0]}: "
                     f"{worst[1]['lsformer_vs_torch32'] / max(1.0, worst[1]['max_abs']):.2e} | "
                     f"{lg['lsformer_vs_torch32']:.2e} / {lg['lsformer_vs_torch64']:.2e} / {lg['torch32_vs_torch64']:.2e} | "
                     f"{ls['lsformer_vs_torch32']:.2e} / {ls['lsformer_vs_torch64']:.2e} | "
                     f"{'**pass**' if c['pass'] else '**FAIL**'} |")
    return lines + [""]


def cost_table(args, env):
    _, rows, _ = run_json([args.bench_vision, "--threads", str(args.threads), "--cost"], env)
    lines = ["| preset | image | parameters | forward GFLOPs / image (measure_cost) | paper | difference |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        paper = PAPER_GFLOPS.get(r["preset"])
        diff = f"{(r['gflops'] - paper) / paper * 100:+.1f}%" if paper else "—"
        lines.append(f"| {r['preset']} | {r['image_size']}² | {r['parameters'] / 1e6:.2f}M | {r['gflops']:.2f} | "
                     f"{paper if paper else '—'} | {diff} |")
    return lines + [""]


def main():
    args = parse_args()
    args.bench_vision = os.path.abspath(args.bench_vision)
    env = runner_env(args, "run_vision")
    load_before = loadavg()
    lsf_meta = lsformer_meta(args.bench_vision, args.threads, env)
    with tempfile.TemporaryDirectory() as tmp:
        dump_dir = args.dump_dir or tmp
        os.makedirs(dump_dir, exist_ok=True)
        checks, pt_meta = check_part(args, env, dump_dir)
        failed = [c for c, r in checks.items() if not r["pass"]]
        if failed and not args.allow_mismatch:
            print(f"run_vision: the check failed for {', '.join(failed)}; not timing (--allow-mismatch overrides)",
                  file=sys.stderr)
            print("\n".join(check_table(checks)))
            return 1
        results = speed_part(args, env, dump_dir, list(checks))
    body = ["### Training speed and memory", ""]
    lines, summary = speed_table(results, checks)
    body += lines
    body += ["### Correctness gate (same weights and inputs, one training-mode step)", "",
             "Largest differences over the logits, the loss, every parameter gradient and the batch-norm running "
             "statistics; pass: max |lsformer − PyTorch f32| ≤ tol · max(1, max |PyTorch f32|) for every tensor, "
             "tol = 4·L·2⁻²⁴ with L the longest reduction of the step (batch × positions of the largest feature map).",
             ""] + check_table(checks)
    if not args.skip_cost:
        body += ["### Forward GFLOPs per image of every preset", "",
                 "`bench_vision --cost`: `vision::measure_cost` (one forward pass of a 1-image batch under the "
                 "multiply-add counter of `ops/flops.h`; matmul/bmm, conv2d and the fused attention ops, the papers' "
                 "FLOPs convention), beside the Transformer-LS paper's numbers.", ""] + cost_table(args, env)
    load_after = loadavg()
    print("\n".join(body))

    cmd_text = shlex.join([os.path.relpath(sys.argv[0])] + sys.argv[1:])
    out = [BEGIN, "## Vision speed on the CPU: ViL-LS, CvT*-LS and the CNN against PyTorch (issue #14)", "",
           f"Produced by `/usr/bin/python3 {cmd_text}` on {datetime.date.today().isoformat()} "
           f"(lsformer {git_revision()}).", "",
           *setup_lines(args, load_before, load_after, lsf_meta),
           (f"- PyTorch {pt_meta.get('version', 'unknown')} (Debian, Python {pt_meta.get('python', '?')}; convolutions "
            f"through its oneDNN build); its BLAS: {pt_meta.get('openblas_config', 'unknown')}." if pt_meta
            else "- PyTorch: not run."),
           f"- Method: {args.rounds} rounds; in each, per case, one lsformer and one PyTorch process (alternating which "
           f"runs first) time training steps — grads set to none, forward in train mode, cross-entropy, backward, "
           f"AdamW (lr 1e-3, weight decay 0.05) — after 2 warm-up steps, sampling {args.sample_time} s "
           f"({args.clock}-clock time); per side the median over rounds of the process medians, and the fastest step "
           "of any round. The models, inputs and the step: headers of `bench/bench_vision.cpp` and "
           "`bench/torch_vision.py` (PyTorch loads lsformer's weights; same images and labels). Peak memory: live "
           "tensor bytes during one step (weights, AdamW state and inputs included; extra = beyond them) as each "
           "side's allocator reports them, and the process's peak RSS (runtime and allocator caches included).", ""]
    out += body
    for note in args.note:
        out.append(note)
        out.append("")
    out.append(END)
    print("\n".join(summary), file=sys.stderr)
    if args.no_write:
        return 0
    update_section(args.results, BEGIN, END, "\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
