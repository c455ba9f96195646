"""Setup time: `ge atc` + loading the OM against onnxruntime's session creation, as a user meets them.

    python benchmarks/setup_time.py [--rounds 3] [--only mobilenetv2_b1,bert_base] [--no-bytecode]
                                    [--count instructions]

Every model row of vs_onnxruntime.py (its builders, its input shapes). Each side in fresh processes,
timed by the clock from outside, Python's start and every import included:
  ge           `ge atc --model m.onnx --output m --input_shape ...` (one process), then one process that
               loads the OM (`ge.core.acl.models.load_from_file`) and unloads it
  ge API       one process doing both through the Python API (`api.atc(...)`, then `api.load_from_file`
               and `api.unload`), as a script or notebook that compiles and runs does: Python's start
               and numpy's import paid once, as a session pays them
  onnxruntime  one process that imports onnxruntime and creates an InferenceSession (CPU provider)
The ratio is ge's two processes over onnxruntime's one (issue 31's target: at most 2), the API's
beside it. Every process runs this script's Python: run it with the python of a venv made by
`pip install .` (README's first command) to time the install users get; an editable install
(`pip install -e`) adds its import finder to every Python start (~50 M instructions: pathlib, re,
fnmatch), which ge's two processes pay twice, a session once.

--bytecode says what bytecode the processes find (the engines alternate which goes first):
  cached     (default) every module's, written by an untimed warm-up
  installed  only what is on disk, nothing written (PYTHONDONTWRITEBYTECODE=1): what `pip install`
             compiled (it does under PYTHONDONTWRITEBYTECODE too) and what the Python install ships.
             Python's container images delete the standard library's .pyc files: each process then
             compiles every standard module it imports. To time that, run this script with the python
             of a venv made from a copy of Python without them:
               cp -a "$(python3 -c 'import sys; print(sys.base_prefix)')" /tmp/pyslim  # (its site-packages
               find /tmp/pyslim/lib -name __pycache__ -prune -exec rm -rf {} +      #  may be left out)
               PYTHONDONTWRITEBYTECODE=1 /tmp/pyslim/bin/python3 -m venv /tmp/slim
               PYTHONDONTWRITEBYTECODE=1 /tmp/slim/bin/pip install . onnxruntime
               PYTHONDONTWRITEBYTECODE=1 /tmp/slim/bin/python benchmarks/setup_time.py --bytecode installed
  none       (or --no-bytecode) none at all: each process compiles every module it imports from source
             (PYTHONPYCACHEPREFIX pointing at an empty folder), numpy's, onnx's and onnxruntime's included

--count says what is measured:
  time          (default) the wall clock, from outside each process
  instructions  the instructions each process executes, counted by valgrind's callgrind (millions): exact
                and the same from run to run where a shared machine's clock drifts by 20% and more. Every
                process runs with GE_NATIVE_LEVEL=v3 (valgrind runs no AVX-512; onnxruntime's MLAS picks
                its AVX2 kernels under it too), PYTHONHASHSEED=0 and OPENBLAS_NUM_THREADS=1. ge's counts
                are the same in every run; onnxruntime's are not: a MobileNetV2 session counted 709 M
                at one hour and 896 M two hours later on this machine (its import alone 698 M then; the
                same with its pool's spinning off). Take rounds at different times, and compare ge with
                onnxruntime's lowest count (the strictest comparison)
"""
from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import vs_onnxruntime as rows_of  # noqa: E402  (the rows and their models)

LOAD_OM = "import sys; from ge.core.acl import models; models.unload(models.load_from_file(sys.argv[1]))"
API_SETUP = ("import sys; from ge.core import api; "
             "api.unload(api.load_from_file(api.atc(sys.argv[1], sys.argv[2], input_shape=sys.argv[3], "
             "log='error').om_path))")
ORT_SESSION = ("import sys, onnxruntime as ort; "
               "ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])")


def timed(argv: list[str], env: dict) -> float:
    """Seconds the process takes, by the wall clock."""
    t0 = time.perf_counter()
    _run(argv, env)
    return time.perf_counter() - t0


def counted(argv: list[str], env: dict) -> float:
    """Millions of instructions the process executes (callgrind's count, every thread's)."""
    env = {"GE_NATIVE_LEVEL": "v3", **env, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    stderr = _run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv], env)
    return int(re.findall(r"Collected : (\d+)", stderr)[-1]) / 1e6


def _run(argv: list[str], env: dict) -> str:
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv[:3])}... failed:\n{proc.stderr}")
    return proc.stderr


def environment(bytecode: str, tmp: str) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # cached: written by the warm-up, as pip's install writes it
    env.pop("PYTHONPYCACHEPREFIX", None)
    if bytecode == "installed":  # what is on disk, nothing written
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    if bytecode == "none":  # a fresh, empty bytecode folder per process: nothing cached, nothing written
        env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=tempfile.mkdtemp(dir=tmp))
    return env


def measure(job: dict, bytecode: str, tmp: str, ge_first: bool, cost=timed) -> dict:
    """{"atc", "load", "api", "session"}: each process's cost (`timed` or `counted`)."""
    ge_cli = os.path.join(os.path.dirname(sys.executable), "ge")
    out = job["out"]

    def ge() -> dict:
        atc = cost([ge_cli, "atc", "--model", job["onnx"], "--output", out, "--input_shape", job["spec"],
                    "--log=error"], environment(bytecode, tmp))
        load = cost([sys.executable, "-c", LOAD_OM, out + ".om"], environment(bytecode, tmp))
        api = cost([sys.executable, "-c", API_SETUP, job["onnx"], out + "_api", job["spec"]],
                   environment(bytecode, tmp))
        return {"atc": atc, "load": load, "api": api}

    def ort() -> dict:
        return {"session": cost([sys.executable, "-c", ORT_SESSION, job["onnx"]], environment(bytecode, tmp))}
    first, second = (ge, ort) if ge_first else (ort, ge)
    return {**first(), **second()}


def main(argv=None) -> int:
    parser = rows_of.rows_parser(__doc__, 3)
    parser.add_argument("--bytecode", choices=("cached", "installed", "none"), default="cached",
                        help="the bytecode the processes find (see above)")
    parser.add_argument("--no-bytecode", action="store_const", const="none", dest="bytecode",
                        help="--bytecode none")
    parser.add_argument("--count", choices=("time", "instructions"), default="time",
                        help="the wall clock, or instructions counted by valgrind (see above)")
    args = parser.parse_args(argv)
    cost, unit = (timed, "s") if args.count == "time" else (counted, "M")
    if args.count == "instructions" and not shutil.which("valgrind"):
        parser.error("--count instructions runs every process under valgrind, which is not installed")
    rows = [r for r in rows_of.full_rows() if r.kind == "latency"]
    only = [k for k in args.only.split(",") if k]
    unknown = set(only) - {r.key for r in rows}
    if unknown:
        parser.error(f"unknown rows {sorted(unknown)}; choose from {', '.join(r.key for r in rows)}")
    rows = [r for r in rows if not only or r.key in only]
    for r in rows:
        r.kind = "compile_load"  # prepare() builds the ONNX files only: compiling them is what is timed
    lines = ["| model | ge atc | ge load | onnxruntime session | ge / onnxruntime | rounds' ratios | "
             "ge API, one process | API / onnxruntime |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    loads = []
    with tempfile.TemporaryDirectory(prefix="ge_setup_") as tmp:
        jobs = rows_of.prepare(rows, tmp)
        if args.bytecode == "cached":  # untimed: writes the bytecode of every module either side imports
            measure(jobs[rows[0].key], "cached", tmp, ge_first=True)
        for row in rows:
            rounds = []
            for n in range(args.rounds):
                loads.append(os.getloadavg()[0])
                rounds.append(measure(jobs[row.key], args.bytecode, tmp, ge_first=n % 2 == 0, cost=cost))
            atc = statistics.median(r["atc"] for r in rounds)
            load = statistics.median(r["load"] for r in rounds)
            session = statistics.median(r["session"] for r in rounds)
            api = statistics.median(r["api"] for r in rounds)
            ratios = [(r["atc"] + r["load"]) / r["session"] for r in rounds]
            shown = (lambda v: f"{v:.2f} s") if unit == "s" else (lambda v: f"{v:.0f} M")
            lines.append(f"| {row.label} | {shown(atc)} | {shown(load)} | {shown(session)} | "
                         f"{(atc + load) / session:.2f} | {min(ratios):.2f}-{max(ratios):.2f} | {shown(api)} | "
                         f"{api / session:.2f} |")
            print(f"  {row.key} done", file=sys.stderr, flush=True)
    bytecode = {"cached": "bytecode cached", "installed": "the bytecode installed, none written",
                "none": "no cached bytecode"}[args.bytecode]
    counts = "wall clock" if unit == "s" else "instructions (callgrind, v3, millions)"
    print(f"python benchmarks/setup_time.py --rounds {args.rounds} --bytecode {args.bytecode} --count {args.count}"
          f"{' --only ' + args.only if only else ''}: fresh processes, {counts}, median over rounds; "
          f"{bytecode}; 1-min load average "
          f"{min(loads):.1f}-{max(loads):.1f}; CPU: {rows_of.cpu_name()}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
