#!/usr/bin/python3
"""Runs the char-LM benchmark (bench_lm, lsformer) and its PyTorch peer (torch_lm.py) and writes
the "char-LM speed on the CPU" section of bench/RESULTS.md.

    /usr/bin/python3 bench/run_lm.py build/bench/bench_lm --threads 2

Builds nothing. Two parts:
  1. Training (issue #13): for each configuration (bench_lm.cpp's header: `small`, the
     representative small-CPU model, and `paper`, the paper's layer with fewer steps),
     bench_lm --dump writes the seeded weights, one batch with a real memory, lsformer's loss,
     log-probabilities and gradients; torch_lm.py checks its own float32 (and float64) results
     against them (the gate: the comparison stops if it fails); then both sides time training
     steps (forward + backward + AdamW) --rounds times, one process per side and round,
     alternating which runs first. Reported: the median over rounds of each process's median
     step time, the fastest step of any round, tokens/s, the ratio (PyTorch time / lsformer
     time) of both, and peak memory (each process's resident-set high-water mark minus its
     resident set before the first step; lsformer's allocator high-water mark too).
     Target: lsformer at least 2x PyTorch in training tokens/s.
  2. Generation: bench_lm times lm::IncrementalDecoder's greedy steps (batch 1, the small model)
     after prompts of growing length; the cost per token must stay flat (growth = tokens/s at
     the shortest prompt / tokens/s at this prompt).

Only the text between <!-- lm-cpu:begin --> and <!-- lm-cpu:end --> in RESULTS.md is replaced;
other sections stay as they are.
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

BEGIN, END = "<!-- lm-cpu:begin -->", "<!-- lm-cpu:end -->"
SPEEDUP_TARGET = 2.0
CONFIG_TEXT = {
    "small": "the representative small-CPU configuration",
    "paper": "the paper's layer (d 512, 8 heads, w 512; §3.8), two layers, a 1024-token block, fewer steps",
}


def run_json(cmd, env, allow_fail=False):
    return _run_json(cmd, env, allow_fail=allow_fail, echo=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("bench_lm", help="path to the built bench_lm binary")
    p.add_argument("--configs", default="small,paper", help="training configurations (default small,paper)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per configuration (default 5)")
    p.add_argument("--sample-time", type=float, default=10.0,
                   help="sampling seconds per training measurement, small config (default 10)")
    p.add_argument("--paper-sample-time", type=float, default=5.0,
                   help="sampling seconds per training measurement, paper config (default 5)")
    p.add_argument("--min-samples", type=int, default=5, help="at least this many steps per process (default 5)")
    p.add_argument("--paper-min-samples", type=int, default=3, help="the same for the paper config (default 3)")
    p.add_argument("--prompts", default="256,1024,4096,16384", help="prompt lengths of the generation table")
    p.add_argument("--gen-sample-time", type=float, default=3.0, help="sampling seconds per generation case")
    p.add_argument("--skip-train", action="store_true", help="generation only")
    p.add_argument("--skip-generate", action="store_true", help="training only")
    add_runner_args(p, "torch_lm.py")
    return p.parse_args()



def train_part(args, env, config, dump_dir):
    """One configuration: check, then alternating rounds. Returns (markdown lines, summary, meta)."""
    small = config == "small"
    timing = ["--threads", str(args.threads), "--clock", args.clock,
              "--sample-time", str(args.sample_time if small else args.paper_sample_time),
              "--min-samples", str(args.min_samples if small else args.paper_min_samples)]
    bench = [args.bench_lm, "--filter", "train/" + config] + timing
    case_dir = os.path.join(dump_dir, config)
    torch_cmd = [args.python, os.path.join(HERE, "torch_lm.py"), case_dir] + timing
    run_json([args.bench_lm, "--threads", str(args.threads), "--filter", "train/" + config, "--dump", dump_dir], env)
    pt_meta, check_rows, rc = run_json(torch_cmd + ["--no-time"], env, allow_fail=True)
    check = next((r for r in check_rows if "check" in r), None)
    if check is None:
        raise RuntimeError(f"torch_lm.py produced no check (exit {rc})")
    if not check["pass"]:
        bad = [k for k, r in check["check"].items() if not r["pass"]]
        raise RuntimeError(f"{config}: lsformer and PyTorch differ beyond the float32 tolerance in {bad}; "
                           "not timing a different computation")
    rows = {"lsformer": [], "pytorch": []}
    for rnd in range(args.rounds):
        sides = [("lsformer", bench), ("pytorch", torch_cmd + ["--no-check"])]
        if rnd % 2:
            sides.reverse()
        for impl, cmd in sides:
            _, out, _ = run_json(cmd, env)
            rows[impl] += [r for r in out if r.get("phase") == "train_step"]
        print(f"{config}: round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    med = {k: statistics.median(r["median_ms"] for r in v) for k, v in rows.items()}
    best = {k: min(r["min_ms"] for r in v) for k, v in rows.items()}
    rss = {k: max(r["rss_extra_bytes"] for r in v) for k, v in rows.items()}
    alloc = max(r["extra_bytes"] for r in rows["lsformer"])
    c = check
    tokens = c["batch"] * c["block_length"]
    speed, speed_best = med["pytorch"] / med["lsformer"], best["pytorch"] / best["lsformer"]
    lines = [f"### Training, `{config}`: {CONFIG_TEXT.get(config, config)}", "",
             f"d {c['dim']}, {c['heads']} heads, {c['layers']} layers, FFN {c['ffn_dim']}, V {c['vocab_size']}, "
             f"M = C = {c['block_length']}, l {c['chunk_length']}, r {c['rank']}, w {c['window']}, batch "
             f"{c['batch']} ({tokens} tokens per step); dropout 0; AdamW (lr 2.5e-4, weight decay 0.01); the memory "
             f"carried from step to step. {args.rounds} rounds of one process per side (alternating which runs "
             "first), each timing ≥ "
             f"{args.min_samples if small else args.paper_min_samples} steps after one warm-up step.", "",
             "| impl | step ms (median of rounds) | fastest step ms | tokens/s (median) | tokens/s (fastest) | "
             "peak RSS growth MiB | allocator peak growth MiB |",
             "|---|---|---|---|---|---|---|",
             f"| lsformer | {fmt_ms(med['lsformer'])} | {fmt_ms(best['lsformer'])} | {tokens / med['lsformer'] * 1e3:.0f} | "
             f"{tokens / best['lsformer'] * 1e3:.0f} | {fmt_mib(rss['lsformer'], 0)} | {fmt_mib(alloc, 0)} |",
             f"| PyTorch {pt_meta.get('version', '?')} | {fmt_ms(med['pytorch'])} | {fmt_ms(best['pytorch'])} | "
             f"{tokens / med['pytorch'] * 1e3:.0f} | {tokens / best['pytorch'] * 1e3:.0f} | {fmt_mib(rss['pytorch'], 0)} | — |",
             "",
             f"**Speed-up (PyTorch / lsformer step time): {speed:.2f}× on the medians, {speed_best:.2f}× on the fastest "
             f"steps** (target ≥ {SPEEDUP_TARGET:.0f}×: {'met' if min(speed, speed_best) >= SPEEDUP_TARGET else 'NOT met'}). "
             "Round medians (ms): lsformer " + ", ".join(fmt_ms(r["median_ms"]) for r in rows["lsformer"]) +
             "; PyTorch " + ", ".join(fmt_ms(r["median_ms"]) for r in rows["pytorch"]) + ".", "",
             f"Correctness gate (before timing; one batch with a real memory, lsformer's weights in both): loss "
             f"lsformer {c['lsformer_loss']:.6f}, PyTorch float64 {c['torch64_loss']:.6f}; largest |difference| over "
             "the log-probabilities and every parameter gradient, pass if ≤ tol · max(max|ref|, floor), "
             f"tol = 8·B·M·2⁻²⁴ = {c['tol']:.2e}, floor = 2⁻¹⁰ · the largest gradient for gradients (see "
             f"`bench/torch_lm.py`): {'**pass**' if c['pass'] else '**FAIL**'}.", "",
             "| tensor | max abs | lsformer vs PyTorch f32 | lsformer vs PyTorch f64 | PyTorch f32 vs f64 |",
             "|---|---|---|---|---|"]
    shown = ["loss", "log_probs", "grad.in_emb.weight", "grad.out_emb.bias"]
    shown += [k for k in c["check"] if k.startswith("grad.layers.0.attn.")]
    shown += [k for k in c["check"] if k.startswith("grad.layers.0.") and not k.startswith("grad.layers.0.attn.")]
    for name in shown:
        r = c["check"][name]
        lines.append(f"| {name} | {r['max_abs']:.3g} | {r['lsformer_vs_torch32']:.2e} | {r['lsformer_vs_torch64']:.2e} | "
                     f"{r['torch32_vs_torch64']:.2e} |")
    others = [k for k in c["check"] if k not in shown]
    def used(k):  # the fraction of its bound a tensor's difference uses
        r = c["check"][k]
        return r["lsformer_vs_torch32"] / max(r["bound"], 1e-300)
    worst = max(c["check"], key=used)
    lines += ["", f"(Layer 0 and the shared tensors shown; the other {len(others)} gradients "
              f"{'pass' if c['pass'] else 'are in the JSON'}. Closest to its bound: {worst}, "
              f"{100 * used(worst):.0f}% of it.)", ""]
    summary = (f"{config}: lsformer {fmt_ms(med['lsformer'])} ms/step, PyTorch {fmt_ms(med['pytorch'])} ms/step, "
               f"speed-up {speed:.2f}× (fastest {speed_best:.2f}×)")
    return lines, summary, pt_meta


def generate_part(args, env):
    cmd = [args.bench_lm, "--threads", str(args.threads), "--filter", "generate/small", "--prompts", args.prompts,
           "--sample-time", str(args.gen_sample_time), "--min-samples", "3", "--clock", args.clock]
    _, rows, _ = run_json(cmd, env)
    rows.sort(key=lambda r: r["prompt"])
    base = rows[0]["tokens_per_s"]
    r0 = rows[0]
    lines = ["### Generation (lsformer, `small` model, batch 1)", "",
             f"lm::IncrementalDecoder after a prompt of P random characters: {r0['generated']} greedy steps (one "
             f"block, M = {r0['block_length']}: every block position once, including one memory roll), timed apart "
             "from feeding the prompt (whole blocks through the model's forward, the rest step by step).", "",
             "| prompt P | ms per token (median) | tokens/s (median) | tokens/s (fastest) | growth vs shortest prompt | "
             "feeding the prompt ms |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['prompt']} | {r['median_ms_per_token']:.3f} | {r['tokens_per_s']:.0f} | "
                     f"{r['best_tokens_per_s']:.0f} | {base / r['tokens_per_s']:.2f} | {fmt_ms(r['feed_ms'])} |")
    growth = max(base / r["tokens_per_s"] for r in rows)
    lines += ["", f"Largest per-token cost relative to the shortest prompt: {growth:.2f}× (flat = 1).", ""]
    return lines, f"generation: per-token cost growth up to {growth:.2f}× from P = {rows[0]['prompt']} to {rows[-1]['prompt']}"


def main():
    args = parse_args()
    args.bench_lm = os.path.abspath(args.bench_lm)
    env = runner_env(args, "run_lm")
    load_before = loadavg()
    lsf_meta = lsformer_meta(args.bench_lm, args.threads, env)
    body, summary, pt_meta = [], [], {}
    if not args.skip_train:
        with tempfile.TemporaryDirectory() as tmp:
            dump_dir = args.dump_dir or tmp
            os.makedirs(dump_dir, exist_ok=True)
            for config in [c for c in args.configs.split(",") if c]:
                lines, text, pt_meta = train_part(args, env, config, dump_dir)
                body += lines
                summary.append(text)
    if not args.skip_generate:
        lines, text = generate_part(args, env)
        body += lines
        summary.append(text)
    load_after = loadavg()
    print("\n".join(body))

    cmd_text = shlex.join([os.path.relpath(sys.argv[0])] + sys.argv[1:])
    out = [BEGIN, "## char-LM speed on the CPU (issue #13)", "",
           f"Produced by `/usr/bin/python3 {cmd_text}` on {datetime.date.today().isoformat()} "
           f"(lsformer {git_revision()}).", "",
           *setup_lines(args, load_before, load_after, lsf_meta),
           (f"- PyTorch {pt_meta.get('version', 'unknown')} (Debian, Python {pt_meta.get('python', '?')}); its BLAS: "
            f"{pt_meta.get('openblas_config', 'unknown')}. The model: `bench/torch_lm.py`, written from "
            "docs/transformer-ls.md §3 (batched tile products for the window, gathered chunk positions, one softmax)."
            if pt_meta else "- PyTorch: not run."),
           f"- Method: {args.clock}-clock time; see the headers of `bench/bench_lm.cpp`, `bench/torch_lm.py` and "
           "`bench/run_lm.py`. Peak RSS growth = VmHWM after the timed steps − VmRSS before the first (both "
           "processes read /proc/self/status the same way); allocator peak = lsformer's own high-water mark of live "
           "tensor bytes during the timed steps minus the bytes live before them.", ""]
    out += body
    for note in args.note:
        out.append(note)
        out.append("")
    out.append(END)
    print("\n".join(summary), file=sys.stderr)
    if not args.no_write:
        update_section(args.results, BEGIN, END, "\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
