#!/usr/bin/env bash
# A rank killed mid-run (SIGKILL, as the OOM killer or a failed node does): every rank of the job
# must exit within a timeout with an error that says what happened, never hang; then the run
# resumes from its last checkpoint under 2 ranks, is stopped by Ctrl-C (every rank after the same
# step), and resumes again to the end.
#   kill_rank.sh MPIEXEC LSF WORKDIR
# mpirun flags: --oversubscribe (2 ranks may exceed the cores CI has), and root is allowed
# through OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) (CI runs as root).
set -euo pipefail
mpiexec=$1 lsf=$2 work=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
rm -rf "$work" && mkdir -p "$work"
config=$work/config.json
cat > "$config" <<'JSON'
{
  "data": {"task": "listops", "generate": {"enabled": true, "train": 400, "dev": 16, "test": 16,
           "min_length": 10, "max_length": 30, "max_depth": 3, "max_args": 3}, "seed": 0},
  "model": {"vocab_size": 16, "max_seq_len": 32, "dim": 16, "heads": 2, "layers": 1, "ffn_dim": 32,
            "attention": "long_short", "window": 8, "rank": 2, "dropout": 0.0, "attention_dropout": 0.0,
            "pooling": "cls", "head_hidden": 16},
  "optimizer": {"name": "adamw", "lr": 1e-3},
  "schedule": {"name": "constant"},
  "train": {"steps": 1000, "batch_size": 4, "eval_every": 0, "log_every": 20, "checkpoint_every": 20, "seed": 1}
}
JSON
run=$work/run
log=$work/killed.log
"$mpiexec" -np 2 --oversubscribe "$lsf" train --config "$config" --out "$run" > "$log" 2>&1 &
launcher=$!

# Wait (at most 60 s) for the first checkpoint, then kill rank 1 by its pid (it prints it at start).
for _ in $(seq 600); do
  [[ -f $run/last.safetensors ]] && break
  kill -0 $launcher 2>/dev/null || { echo "FAIL: the run ended before the kill:"; cat "$log"; exit 1; }
  sleep 0.1
done
[[ -f $run/last.safetensors ]] || { echo "FAIL: no checkpoint after 60 s"; cat "$log"; kill $launcher; exit 1; }
pid=$(grep -o "rank 1/2: pid [0-9]*" "$log" | head -1 | grep -o "[0-9]*$" || true)
[[ -n $pid ]] || { echo "FAIL: rank 1 printed no pid"; cat "$log"; kill $launcher; exit 1; }
kill -9 "$pid"
killed_at=$SECONDS

# Every rank must be gone within 20 s: the launcher notices the death and ends the job.
status=0
for _ in $(seq 200); do
  kill -0 $launcher 2>/dev/null || break
  sleep 0.1
done
if kill -0 $launcher 2>/dev/null; then
  echo "FAIL: the job still runs 20 s after rank 1 was killed (a hang)"; cat "$log"
  kill -9 $launcher; exit 1
fi
wait $launcher || status=$?
echo "the job ended $((SECONDS - killed_at)) s after the kill with status $status"
[[ $status -ne 0 ]] || { echo "FAIL: the job exited 0 after losing a rank"; cat "$log"; exit 1; }
grep -q "process rank 1 with PID [0-9]* .*exited on signal 9" "$log" ||
  { echo "FAIL: no message naming the killed rank"; cat "$log"; exit 1; }
if ps -o pid= -p "$pid" > /dev/null 2>&1; then echo "FAIL: rank 1 still exists"; exit 1; fi
grep "exited on signal 9" "$log"

# The last checkpoint resumes under 2 ranks; Ctrl-C (mpirun passes SIGTERM to every rank) stops
# every rank after the same step, rank 0 saving last.safetensors: the job exits within 20 s.
"$mpiexec" -np 2 --oversubscribe "$lsf" train --resume --out "$run" > "$work/interrupted.log" 2>&1 &
launcher=$!
for _ in $(seq 600); do
  grep -q "^step [0-9]*/1000" "$work/interrupted.log" && break
  kill -0 $launcher 2>/dev/null || break
  sleep 0.1
done
kill -INT $launcher
for _ in $(seq 200); do
  kill -0 $launcher 2>/dev/null || break
  sleep 0.1
done
if kill -0 $launcher 2>/dev/null; then
  echo "FAIL: the job still runs 20 s after Ctrl-C"; cat "$work/interrupted.log"; kill -9 $launcher; exit 1
fi
wait $launcher || true
grep -q "interrupted by SIGTERM after step [0-9]*/1000; saved" "$work/interrupted.log" ||
  { echo "FAIL: no orderly stop after Ctrl-C"; cat "$work/interrupted.log"; exit 1; }
grep "interrupted by" "$work/interrupted.log"

# The last checkpoint resumes under 2 ranks and the run finishes.
"$mpiexec" -np 2 --oversubscribe "$lsf" train --resume --out "$run" > "$work/resumed.log" 2>&1 ||
  { echo "FAIL: the resumed run failed"; cat "$work/resumed.log"; exit 1; }
grep -q "resuming '.*' at step [1-9][0-9]*/1000" "$work/resumed.log" || { echo "FAIL: no resume line"; cat "$work/resumed.log"; exit 1; }
grep -q "Finished 1000 steps" "$work/resumed.log" || { echo "FAIL: the resumed run did not finish"; cat "$work/resumed.log"; exit 1; }
grep "resuming\|Finished" "$work/resumed.log"
echo "PASS"
