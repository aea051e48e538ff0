#!/usr/bin/env python3
"""Data-parallel training on one machine: step time and scaling, 1 process → 2 MPI ranks.

For each config it trains the same global batch for --steps steps in three setups:
  1p × T    one process with T threads (T = --threads, all the cores),
  1p × T/2  one process with half of them (the per-rank share),
  2r × T/2  `mpirun -np 2` ranks with T/2 threads each (the same cores as 1p × T),
each with `lsf train --profile`, and reports
  * the step time: wall time between the first and the last logged step of metrics.jsonl
    (start-up, data generation and the final evaluation excluded), divided by the steps between;
  * the scaling efficiency: speedup of 2 ranks over one process on half the cores, divided by 2
    (1.0: two ranks are twice as fast as one rank's share of the machine), and the ratio to one
    process on all the cores (1.0: splitting the cores into ranks costs nothing);
  * the all-reduce's share of rank 0's profiled step time: the wait for the gradient buckets
    (`gradient_allreduce_wait`, the communication backward did not hide) plus the small all-reduce
    of the logged numbers (`step_stats_allreduce`).
Prints a Markdown section for bench/RESULTS.md.

  /usr/bin/python3 bench/run_distributed.py --lsf build/tools/lsf --threads 2 --steps 150
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile

CONFIGS = {
    # name: (config, --set overrides)
    "listops quickstart (LRA, batch 32)": ("configs/quickstart.json", ["schedule.warmup_steps=10"]),
    "char-LM quick (GCIDE, 16 streams × 128)": ("configs/lm/quick.json", ["schedule.warmup_steps=10"]),
}


def run(cmd, env):
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if out.returncode != 0:
        raise SystemExit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stdout[-3000:]}")
    return out.stdout


def measure(lsf, config, sets, steps, threads, ranks, workdir):
    out_dir = os.path.join(workdir, f"r{ranks}_t{threads}")
    shutil.rmtree(out_dir, ignore_errors=True)
    log_every = max(1, steps // 6)
    args = [lsf, "train", "--config", config, "--out", out_dir, "--profile", "--threads", str(threads)]
    for s in sets + [f"train.steps={steps}", "train.eval_every=0", f"train.log_every={log_every}",
                     f"train.checkpoint_every={steps}", "train.eval_batches=1"]:
        args += ["--set", s]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = args if ranks == 1 else ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none"] + args
    text = run(cmd, env)
    lines = [json.loads(l) for l in open(os.path.join(out_dir, "metrics.jsonl")) if '"train"' in l]
    first, last = lines[0], lines[-1]
    step_s = (last["elapsed_s"] - first["elapsed_s"]) / (last["step"] - first["step"])
    profiled = float(re.search(r"profile: ([0-9.]+) s profiled", text).group(1))
    def op_ms(name):
        m = re.search(rf"^\s*{name}\s+\d+\s+([0-9.]+)", text, re.M)
        return float(m.group(1)) if m else 0.0
    comm = (op_ms("gradient_allreduce_wait") + op_ms("step_stats_allreduce")) / 1000.0
    return step_s, comm / profiled, " ".join(cmd)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lsf", default="build/tools/lsf")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--note", default="")
    a = p.parse_args()
    half = max(1, a.threads // 2)
    work = tempfile.mkdtemp(prefix="lsf_bench_dp_")
    rows, commands = [], []
    for name, (config, sets) in CONFIGS.items():
        full, _, c1 = measure(a.lsf, config, sets, a.steps, a.threads, 1, work)
        one, _, c2 = measure(a.lsf, config, sets, a.steps, half, 1, work)
        two, share, c3 = measure(a.lsf, config, sets, a.steps, half, 2, work)
        commands += [c1, c2, c3]
        rows.append(f"| {name} | {full * 1e3:.1f} | {one * 1e3:.1f} | {two * 1e3:.1f} | {one / two / 2:.2f} | "
                    f"{full / two:.2f} | {share * 100:.1f}% |")
    shutil.rmtree(work, ignore_errors=True)
    print("| config | step ms, 1p × %d | step ms, 1p × %d | step ms, 2r × %d | efficiency (1p × %d → 2r) | "
          "2r / 1p × %d speed | all-reduce share (2r) |" % (a.threads, half, half, half, a.threads))
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("\nCommands (per config):\n")
    for c in commands:
        print(f"    {c}")
    if a.note:
        print(f"\n{a.note}")


if __name__ == "__main__":
    main()
