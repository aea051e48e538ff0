"""Shared by the benchmark scripts (the run_*.py runners and the torch_*.py peers): machine
facts for RESULTS.md, running a C++ benchmark that prints JSON lines, the timing method (the
same as bench_timing.h's), number formatting, and the runners' common flags and setup lines.

Imports nothing heavy (no torch): torch_ops.py sets OPENBLAS_NUM_THREADS before torch loads.
"""
import ctypes
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def machine():
    """CPU model, logical CPUs, sockets × cores × threads and RAM, from /proc."""
    model, cores, siblings, packages = "unknown", None, None, set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if key == "model name":
                model = value
            elif key == "cpu cores":
                cores = int(value)
            elif key == "siblings":
                siblings = int(value)
            elif key == "physical id":
                packages.add(value)
    text = f"{model}; {len(os.sched_getaffinity(0))} logical CPUs available to this process"
    if cores and siblings:
        text += (f" ({max(len(packages), 1)} socket(s) × {cores} cores × {siblings // cores} threads/core "
                 "as reported by /proc/cpuinfo)")
    with open("/proc/meminfo") as f:
        mem = next((line.split()[1] for line in f if line.startswith("MemTotal:")), None)
    if mem:
        text += f", {int(mem) / 2 ** 20:.0f} GiB RAM"
    return text


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def git_revision():
    try:
        rev = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", HERE, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return rev + (" (with uncommitted changes)" if dirty else "")
    except (subprocess.CalledProcessError, FileNotFoundError):
        return "unknown"


def fmt_ms(v):
    if v is None:
        return "—"
    return f"{v:.3f}" if v < 10 else f"{v:.2f}" if v < 100 else f"{v:.1f}"


def run_json(cmd, env, allow_fail=False, echo=False, text_lines=False):
    """Runs cmd; returns (meta, rows, returncode) from its JSON lines, where a line holding
    {"meta": ...} is the meta and every other line a row. echo: print the command and its stderr.
    text_lines: stdout lines that are not JSON objects are passed on to stderr (else they are an
    error). A failure raises (with the command's stderr) unless allow_fail."""
    if echo:
        print("+ " + shlex.join(cmd), file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if echo and proc.stderr.strip():
        print(proc.stderr.rstrip(), file=sys.stderr)
    if proc.returncode != 0 and not allow_fail:
        raise RuntimeError(f"{shlex.join(cmd)} exited with {proc.returncode}:\n{proc.stderr.strip()}")
    meta, rows = {}, []
    for line in proc.stdout.splitlines():
        if text_lines and line.strip() and not line.lstrip().startswith("{"):
            print(line.strip(), file=sys.stderr)
        elif line.strip():
            obj = json.loads(line)
            if "meta" in obj:
                meta = obj["meta"]
            else:
                rows.append(obj)
    return meta, rows, proc.returncode


def lsformer_meta(binary, threads, env):
    """The metadata line a C++ benchmark's run starts with (version, threads, build), from its
    --meta flag: no case runs."""
    meta, _, _ = run_json([binary, "--threads", str(threads), "--meta"], env, echo=True)
    return meta


def time_call(call, clock="wall", warmup=1, min_samples=3, max_samples=50, min_sample_ms=1.0, sample_ms=1000.0):
    """Median time per call in ms, as bench_timing.h measures it: warm up, repeat fast calls so a
    sample lasts at least min_sample_ms, sample until sample_ms is spent (at least min_samples)."""
    now = time.process_time if clock == "cpu" else time.perf_counter
    last = 0.0
    for _ in range(max(warmup, 1)):
        t0 = now()
        call()
        last = (now() - t0) * 1e3
    inner = int(min(max(math.ceil(min_sample_ms / max(last, 1e-6)), 1), 100000))
    per_call, total = [], 0.0
    while len(per_call) < max_samples and (len(per_call) < min_samples or total < sample_ms):
        t0 = now()
        for _ in range(inner):
            call()
        ms = (now() - t0) * 1e3
        total += ms
        per_call.append(ms / inner)
    per_call.sort()
    k = len(per_call)
    median = per_call[k // 2] if k % 2 else 0.5 * (per_call[k // 2 - 1] + per_call[k // 2])
    return {"median_ms": median, "min_ms": per_call[0], "max_ms": per_call[-1], "samples": k, "inner": inner}


def openblas_config():
    """The configuration string of the OpenBLAS this process loaded (torch's, via libblas.so.3)."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_config.restype = ctypes.c_char_p
        return lib.openblas_get_config().decode()
    except (OSError, AttributeError):
        return "unknown"


def update_section(path, begin, end, section):
    """Replaces the text between the markers begin and end in the results file at path (the
    markers belong to section), or appends section when the markers are absent; creates the
    file if needed. Everything else in the file is kept."""
    text = ""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + section + rest.split(end, 1)[1]
    else:
        if not text:
            text = "# lsformer benchmark results\n\n"
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    with open(path, "w") as f:
        f.write(text)
    print(f"updated {path}", file=sys.stderr)


# ---- what every runner (run_*.py) shares: its common flags, --env, and the setup lines ----------

def add_runner_args(p, peer, dump_dir=True, clock_help="wall (default) or cpu time"):
    """The flags every runner takes: --threads, --clock, --results, --no-write, --note, --python
    (the interpreter of `peer`, the PyTorch script), --env and (dump_dir) --dump-dir."""
    p.add_argument("--threads", type=int, required=True, help="threads for both sides")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall", help=clock_help)
    p.add_argument("--results", default=os.path.join(HERE, "RESULTS.md"), help="the RESULTS.md to update")
    p.add_argument("--no-write", action="store_true", help="print the tables only")
    p.add_argument("--note", action="append", default=[], help="a line to add under the tables (repeatable)")
    p.add_argument("--python", default="/usr/bin/python3", help=f"interpreter for {peer}")
    if dump_dir:
        p.add_argument("--dump-dir", default=None, help="where the cases are dumped (default: a temporary directory)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="environment variable for both sides, e.g. OMP_WAIT_POLICY=passive (repeatable)")


# OpenBLAS core names by the vector width of their sgemm (engine/blas_core.cpp has the same table).
_BLAS_CORE_LEVEL = {"SkylakeX": 3, "Cooperlake": 3, "SapphireRapids": 3, "Haswell": 2, "Zen": 2, "Excavator": 2,
                    "Sandybridge": 1, "Bulldozer": 1, "Piledriver": 1, "Steamroller": 1}


def blas_core_upgrade(env):
    """(running, best) when the OpenBLAS that both sides load would pick a core with narrower
    vectors than this CPU runs (OpenBLAS 0.3.21 falls back to its generic Prescott kernels on
    CPUs newer than it knows; engine/blas_core.h), else None. Asks a fresh process, since the
    choice is made when the library loads."""
    probe = ("import ctypes; l = ctypes.CDLL('libopenblas.so.0'); "
             "l.openblas_get_corename.restype = ctypes.c_char_p; print(l.openblas_get_corename().decode())")
    try:
        running = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                                 timeout=60).stdout.strip()
        flags = set()
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except (OSError, subprocess.SubprocessError):
        return None
    v4 = {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"} <= flags
    v3 = {"avx2", "fma", "bmi1", "bmi2", "movbe"} <= flags
    best = ("Cooperlake" if "avx512_bf16" in flags else "SkylakeX") if v4 else "Haswell" if v3 else ""
    if running and best and _BLAS_CORE_LEVEL[best] > _BLAS_CORE_LEVEL.get(running, 0):
        return running, best
    return None


def runner_env(args, tool):
    """os.environ with every --env NAME=VALUE set; exits with status 2 naming a malformed one.
    Unless OPENBLAS_CORETYPE is set already, it is set (and added to args.env, so the results
    say so) where OpenBLAS would otherwise run generic kernels on this CPU: both sides then run
    the kernels OpenBLAS has for it, as the lsf tool does by itself. One inherited from the
    shell is kept and added to args.env too, with a warning where it names weaker kernels."""
    env = dict(os.environ)
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            print(f"{tool}: --env expects NAME=VALUE, got {item!r}", file=sys.stderr)
            sys.exit(2)
        env[name] = value
    upgrade = blas_core_upgrade(env)
    if "OPENBLAS_CORETYPE" in env:
        # Kept, as the user chose it; but inherited from the shell it is recorded like an --env
        # (it decides both sides' GEMM kernels), and a weaker core than the CPU runs is named.
        if not any(item.startswith("OPENBLAS_CORETYPE=") for item in args.env):
            args.env.append(f"OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']}")
        if upgrade:
            print(f"{tool}: warning: OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']} holds both sides to OpenBLAS's "
                  f"{upgrade[0]} kernels, but this CPU runs {upgrade[1]}'s (several times the GEMM rate): "
                  f"set OPENBLAS_CORETYPE={upgrade[1]} or unset it to measure at the machine's limit",
                  file=sys.stderr)
    elif upgrade:
        env["OPENBLAS_CORETYPE"] = upgrade[1]
        args.env.append(f"OPENBLAS_CORETYPE={upgrade[1]}")
        print(f"{tool}: OpenBLAS would run its {upgrade[0]} kernels on this CPU; both sides run with "
              f"OPENBLAS_CORETYPE={upgrade[1]}", file=sys.stderr)
    return env


def setup_lines(args, load_before, load_after, lsf_meta):
    """The Machine, Threads and lsformer lines that open every results section."""
    build = lsf_meta.get("build_info", "").strip().splitlines()
    # The CPU kernels' line and its continuation (vector level; bf16 products), where the build reports them.
    cpu = next((i for i, line in enumerate(build) if line.startswith("cpu:")), None)
    cpu_text = "" if cpu is None else "; " + "; ".join(" ".join(line.split()) for line in build[cpu:cpu + 2])
    return [f"- Machine: {machine()}; Linux {platform.release()}.",
            f"- Threads: {args.threads} on both sides (lsformer: `--threads`, OpenMP + OpenBLAS; PyTorch: "
            f"`torch.set_num_threads` + `OPENBLAS_NUM_THREADS`). Load average before / after: "
            f"{load_before} / {load_after}. Environment set for both: "
            f"{', '.join(f'`{e}`' for e in args.env) if args.env else 'none'}.",
            f"- lsformer: {build[0] if build else 'unknown'}; {build[1].strip() if len(build) > 1 else ''}{cpu_text}"]


def fmt_mib(b, digits=1):
    return "—" if b is None else f"{b / 2 ** 20:.{digits}f}"


# ---- what the PyTorch peers that time a dumped case share (torch_long_short/lm/vision.py) -------

def add_peer_args(p, sample_time, warmup, min_samples, max_samples):
    """--threads, the timing flags of time_call (with these defaults), --clock, --no-check and
    --no-time."""
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="threads (default: all processors)")
    p.add_argument("--sample-time", type=float, default=sample_time, help="sampling time per measurement, seconds")
    p.add_argument("--warmup", type=int, default=warmup, help="warm-up calls before calibration")
    p.add_argument("--min-samples", type=int, default=min_samples)
    p.add_argument("--max-samples", type=int, default=max_samples)
    p.add_argument("--min-sample-ms", type=float, default=1.0, help="repeat fast calls so one sample lasts at least MS")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall: time.perf_counter (default); cpu: process CPU time")
    p.add_argument("--no-check", action="store_true", help="time only")
    p.add_argument("--no-time", action="store_true", help="check only")
