#!/usr/bin/python3
"""Runs the LRA ListOps training-step benchmark (bench_lra_step, lsformer) and its PyTorch peer
(torch_lra_step.py) and writes the "lra-step" section of bench/RESULTS.md (issue #17).

    /usr/bin/python3 bench/run_lra_step.py build/bench/bench_lra_step --threads 2

Builds nothing. First bench_lra_step --dump writes the seeded weights, the batches and one step's
loss, gradients and updated parameters; torch_lra_step.py checks its own float32 and float64
results against them (the gate: the comparison stops if it fails). Then both sides time whole
training steps (zero grads, forward, cross-entropy, backward, AdamW; the model and batch of
bench_lra_step.cpp's header) --rounds times, one process per side and round, alternating which
runs first. Reported: the median over rounds of each process's median step time, the fastest step
of any round, samples/s of both, the speed-up (PyTorch time / lsformer time) on the medians and on
the fastest steps, and peak memory (each process's resident-set high-water mark minus its
resident set before the first step; lsformer's allocator high-water mark too).
Target (issue #17): lsformer at least 4x PyTorch in samples/s.

Only the text between <!-- lra-step:begin --> and <!-- lra-step:end --> in RESULTS.md is replaced
(the section is appended when the markers are absent); other sections stay as they are.
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
    add_runner_args, fmt_mib, fmt_ms, git_revision, loadavg, lsformer_meta, runner_env, setup_lines,
    update_section)
from bench_common import run_json as _run_json  # noqa: E402

BEGIN, END = "<!-- lra-step:begin -->", "<!-- lra-step:end -->"
SPEEDUP_TARGET = 4.0


def run_json(cmd, env, allow_fail=False):
    return _run_json(cmd, env, allow_fail=allow_fail, echo=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("bench_lra_step", help="path to the built bench_lra_step binary")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    p.add_argument("--sample-time", type=float, default=10.0, help="sampling seconds per process (default 10)")
    p.add_argument("--min-samples", type=int, default=5, help="at least this many timed steps per process (default 5)")
    p.add_argument("--min-real", type=int, default=500,
                   help="real tokens per example uniform in [N, 2048] (default 500; 2048: no padding)")
    p.add_argument("--padded", action="store_true",
                   help="lsformer runs its padded path (every position computed, as the PyTorch peer does) "
                        "instead of the packed one (real tokens only)")
    add_runner_args(p, "torch_lra_step.py")
    return p.parse_args()


def lsf_case(args):
    """bench_lra_step's flags for the case: the padding and lsformer's path."""
    return ["--min-real", str(args.min_real)] + (["--padded"] if args.padded else [])


def gate(args, env, dump_dir):
    """Dump, then the PyTorch check; returns (check row, PyTorch meta). Raises when it fails."""
    run_json([args.bench_lra_step, "--threads", str(args.threads), "--dump", dump_dir] + lsf_case(args), env)
    cmd = [args.python, os.path.join(HERE, "torch_lra_step.py"), dump_dir, "--threads", str(args.threads), "--no-time"]
    pt_meta, rows, rc = run_json(cmd, env, allow_fail=True)
    check = next((r for r in rows if "check" in r), None)
    if check is None:
        raise RuntimeError(f"torch_lra_step.py produced no check (exit {rc})")
    if not check["pass"]:
        bad = [k for k, r in check["check"].items() if not r["pass"]]
        raise RuntimeError(f"lsformer and PyTorch differ beyond the bounds in {bad}; not timing a different computation")
    return check, pt_meta


def used(r):
    """The fraction of its bound a tensor's gated difference uses."""
    d = r["lsformer_vs_adamw64_on_lsformer_grads"] if "lsformer_vs_adamw64_on_lsformer_grads" in r else \
        max(r["lsformer_vs_torch32"], r["lsformer_vs_torch64"])
    return d / max(r["bound"], 1e-300)


def check_lines(c):
    lines = [f"Correctness gate (before timing; batch 0 from the dumped weights, lsformer's weights in both): loss "
             f"lsformer {c['lsformer_loss']:.6f}, PyTorch float64 {c['torch64_loss']:.6f}. Logits, loss and every "
             "parameter gradient: largest |difference| ≤ tol · max(max|ref|, floor), tol = 4·B·n·2⁻²⁴ = "
             f"{c['tol']:.2e} (B·n the longest reduction), floor = 2⁻¹⁰ · the largest gradient for gradients, "
             "against both PyTorch runs; the AdamW update: torch.optim.AdamW in float64 on lsformer's gradients "
             "against lsformer's updated parameters, ≤ 8·2⁻²⁴·(max|p| + lr) (see `bench/torch_lra_step.py`): "
             f"{'**pass**' if c['pass'] else '**FAIL**'}.", "",
             "| tensor | max abs | lsformer vs PyTorch f32 | lsformer vs PyTorch f64 | PyTorch f32 vs f64 | bound |",
             "|---|---|---|---|---|---|"]
    check = c["check"]
    grads = [k for k in check if k.startswith("grad.")]
    shown = ["logits", "loss", "grad.model.cls_embed", "grad.model.embeddings.word_embeddings.weight"]
    shown += [k for k in grads if k.startswith("grad.model.transformer_1.mha.")]
    shown += ["grad.seq_classifer.mlpblock.0.weight"]
    for name in [k for k in shown if k in check]:
        r = check[name]
        lines.append(f"| {name} | {r['max_abs']:.3g} | {r['lsformer_vs_torch32']:.2e} | {r['lsformer_vs_torch64']:.2e} | "
                     f"{r['torch32_vs_torch64']:.2e} | {r['bound']:.2e} |")
    after = [k for k in check if k.startswith("after.")]
    worst = max(check, key=lambda k: used(check[k]))
    worst_after = max(after, key=lambda k: used(check[k]))
    lines += ["", f"(The last layer's attention and a few shared tensors shown; {len(grads)} gradients and {len(after)} "
              f"updated parameters checked in all. Closest to its bound: {worst}, {100 * used(check[worst]):.2g}% of it; "
              f"of the updates: {worst_after}, {100 * used(check[worst_after]):.2g}%. PyTorch's own update from its "
              "own float32 gradients differs from lsformer's by at most "
              f"{max(check[k]['lsformer_vs_torch32'] for k in after):.2e}.)", ""]
    return lines


def main():
    args = parse_args()
    args.bench_lra_step = os.path.abspath(args.bench_lra_step)
    env = runner_env(args, "run_lra_step")
    load_before = loadavg()
    lsf_meta = lsformer_meta(args.bench_lra_step, args.threads, env)
    timing = ["--threads", str(args.threads), "--clock", args.clock, "--sample-time", str(args.sample_time),
              "--min-samples", str(args.min_samples)]
    rows = {"lsformer": [], "pytorch": [], "lsformer_1t": []}
    metas = {}
    with tempfile.TemporaryDirectory() as tmp:
        dump_dir = args.dump_dir or tmp
        os.makedirs(dump_dir, exist_ok=True)
        check, pt_meta = gate(args, env, dump_dir)
        bench = [args.bench_lra_step] + timing + lsf_case(args)
        torch_cmd = [args.python, os.path.join(HERE, "torch_lra_step.py"), dump_dir, "--no-check"] + timing
        # Thread scaling (#17): lsformer also on one thread, in the same rounds.
        single = [args.bench_lra_step, "--threads", "1"] + timing[2:] + lsf_case(args)
        for rnd in range(args.rounds):
            sides = [("lsformer", bench), ("pytorch", torch_cmd)] + ([("lsformer_1t", single)] if args.threads > 1 else [])
            if rnd % 2:
                sides.reverse()
            for impl, cmd in sides:
                meta, out, _ = run_json(cmd, env)
                metas.setdefault(impl, meta)
                rows[impl] += [r for r in out if r.get("phase") == "train_step"]
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    load_after = loadavg()

    med = {k: statistics.median(r["median_ms"] for r in v) for k, v in rows.items() if v}
    best = {k: min(r["min_ms"] for r in v) for k, v in rows.items() if v}
    rss = {k: max(r["rss_extra_bytes"] for r in v) for k, v in rows.items() if v}
    alloc = max(r["extra_bytes"] for r in rows["lsformer"])
    c = rows["lsformer"][0]
    B = c["batch"]
    speed, speed_best = med["pytorch"] / med["lsformer"], best["pytorch"] / best["lsformer"]
    body = [f"The whole training step of `lra::LraClassifier` with the ListOps settings of "
            f"`configs/lra/listops_ls.json`: {c['layers']} layers, d {c['dim']}, {c['heads']} heads, FFN {c['ffn_dim']}, "
            f"long-short attention w {c['window']}, r {c['rank']}, CLS pooling in the last layer, head "
            f"{c['head_hidden']} → {c['num_classes']}, vocabulary {c['vocab_size']}; batch {B}, every batch padded to "
            f"n = {c['n']} with seeded real lengths in [{c['min_real']}, {c['n']}] ({100 * c['real_fraction']:.0f}% of "
            "the positions real), 4 batches cycled; lsformer on its "
            f"{'packed path (embeddings, LayerNorms, projections and MLP on the real tokens only; the attention core on the padded layout)' if c.get('packed', False) else 'padded path (every position computed, as the PyTorch peer)'}"
            "; dropout 0; one step = zero grads, forward, cross-entropy, "
            f"backward, AdamW (lr {c['lr']:g}, betas ({c['beta1']:g}, {c['beta2']:g}), eps {c['eps']:g}, weight decay "
            f"{c['weight_decay']:g}). "
            f"{args.rounds} rounds of one process per side (alternating which runs first), each timing ≥ "
            f"{args.min_samples} steps after one warm-up step.", "",
            "| impl | step ms (median of rounds) | fastest step ms | samples/s (median) | samples/s (fastest) | "
            "peak RSS growth MiB | allocator peak growth MiB |",
            "|---|---|---|---|---|---|---|",
            f"| lsformer | {fmt_ms(med['lsformer'])} | {fmt_ms(best['lsformer'])} | {B / med['lsformer'] * 1e3:.1f} | "
            f"{B / best['lsformer'] * 1e3:.1f} | {fmt_mib(rss['lsformer'], 0)} | {fmt_mib(alloc, 0)} |",
            f"| PyTorch {pt_meta.get('version', '?')} | {fmt_ms(med['pytorch'])} | {fmt_ms(best['pytorch'])} | "
            f"{B / med['pytorch'] * 1e3:.1f} | {B / best['pytorch'] * 1e3:.1f} | {fmt_mib(rss['pytorch'], 0)} | — |",
            "",
            f"**Speed-up (PyTorch / lsformer step time): {speed:.2f}× on the medians, {speed_best:.2f}× on the fastest "
            f"steps** (target ≥ {SPEEDUP_TARGET:.0f}×: {'met' if min(speed, speed_best) >= SPEEDUP_TARGET else 'NOT met'}). "
            "Round medians (ms): lsformer " + ", ".join(fmt_ms(r["median_ms"]) for r in rows["lsformer"]) +
            "; PyTorch " + ", ".join(fmt_ms(r["median_ms"]) for r in rows["pytorch"]) + ".", ""]
    machine = (metas.get("lsformer") or {}).get("machine")
    if machine:
        body += [f"Machine limits, measured by the lsformer process before its steps (`engine/machine_limits.h`, "
                 f"{machine['threads']} threads): cblas_sgemm {machine['sgemm_size']}³ {machine['sgemm_gflops']:.0f} "
                 f"GFLOP/s, STREAM triad {machine['triad_gbs']:.1f} GB/s.", ""]
    if "lsformer_1t" in med:
        scaling = med["lsformer_1t"] / med["lsformer"]
        body += [f"Thread scaling (the same rounds, lsformer at 1 thread: median {fmt_ms(med['lsformer_1t'])} ms, "
                 f"fastest {fmt_ms(best['lsformer_1t'])} ms): 1 → {args.threads} threads **{scaling:.2f}×** on the "
                 f"medians, {best['lsformer_1t'] / best['lsformer']:.2f}× on the fastest steps (target ≥ 1.8×: "
                 f"{'met' if scaling >= 1.8 else 'NOT met'}).", ""]
    body += check_lines(check)
    print("\n".join(body))

    cmd_text = shlex.join([os.path.relpath(sys.argv[0])] + sys.argv[1:])
    out = [BEGIN, "## LRA ListOps training step on the CPU (issue #17)", "",
           f"Produced by `/usr/bin/python3 {cmd_text}` on {datetime.date.today().isoformat()} "
           f"(lsformer {git_revision()}).", "",
           *setup_lines(args, load_before, load_after, lsf_meta),
           f"- PyTorch {pt_meta.get('version', 'unknown')} (Debian, Python {pt_meta.get('python', '?')}); its BLAS: "
           f"{pt_meta.get('openblas_config', 'unknown')}. The model: `bench/torch_lra_step.py`, written from "
           "docs/transformer-ls.md §2.3–2.6 with `bench/torch_long_short.py`'s attention (padded K/V, unfolded "
           "overlapping tiles, one joint softmax), `torch.optim.AdamW`.",
           f"- Method: {args.clock}-clock time; see the headers of `bench/bench_lra_step.cpp`, "
           "`bench/torch_lra_step.py` and `bench/run_lra_step.py`. Peak RSS growth = VmHWM after the timed steps − "
           "VmRSS before the first (both processes read /proc/self/status the same way); allocator peak = lsformer's "
           "own high-water mark of live tensor bytes during the timed steps minus the bytes live before them.", ""]
    out += body
    for note in args.note:
        out += [note, ""]
    out.append(END)
    print(f"lsformer {fmt_ms(med['lsformer'])} ms/step ({B / med['lsformer'] * 1e3:.1f} samples/s), PyTorch "
          f"{fmt_ms(med['pytorch'])} ms/step ({B / med['pytorch'] * 1e3:.1f} samples/s), speed-up {speed:.2f}× "
          f"(fastest {speed_best:.2f}×)", file=sys.stderr)
    if not args.no_write:
        update_section(args.results, BEGIN, END, "\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
