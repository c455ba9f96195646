"""Setup time: `ge atc` + loading the OM against onnxruntime's session creation, as a user meets them.

    python benchmarks/setup_time.py [--rounds 3] [--only mobilenetv2_b1,bert_base] [--no-bytecode]

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
"""
from __future__ import annotations

import os
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
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv[:3])}... failed:\n{proc.stderr}")
    return seconds


def environment(bytecode: str, tmp: str) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # cached: written by the warm-up, as pip's install writes it
    env.pop("PYTHONPYCACHEPREFIX", None)
    if bytecode == "installed":  # what is on disk, nothing written
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    if bytecode == "none":  # a fresh, empty bytecode folder per process: nothing cached, nothing written
        env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=tempfile.mkdtemp(dir=tmp))
    return env


def measure(job: dict, bytecode: str, tmp: str, ge_first: bool) -> dict:
    ge_cli = os.path.join(os.path.dirname(sys.executable), "ge")
    out = job["out"]

    def ge() -> dict:
        atc = timed([ge_cli, "atc", "--model", job["onnx"], "--output", out, "--input_shape", job["spec"],
                     "--log=error"], environment(bytecode, tmp))
        load = timed([sys.executable, "-c", LOAD_OM, out + ".om"], environment(bytecode, tmp))
        api = timed([sys.executable, "-c", API_SETUP, job["onnx"], out + "_api", job["spec"]],
                    environment(bytecode, tmp))
        return {"atc": atc, "load": load, "api": api}

    def ort() -> dict:
        return {"session": timed([sys.executable, "-c", ORT_SESSION, job["onnx"]], environment(bytecode, tmp))}
    first, second = (ge, ort) if ge_first else (ort, ge)
    return {**first(), **second()}


def main(argv=None) -> int:
    parser = rows_of.rows_parser(__doc__, 3)
    parser.add_argument("--bytecode", choices=("cached", "installed", "none"), default="cached",
                        help="the bytecode the processes find (see above)")
    parser.add_argument("--no-bytecode", action="store_const", const="none", dest="bytecode",
                        help="--bytecode none")
    args = parser.parse_args(argv)
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
                rounds.append(measure(jobs[row.key], args.bytecode, tmp, ge_first=n % 2 == 0))
            atc = statistics.median(r["atc"] for r in rounds)
            load = statistics.median(r["load"] for r in rounds)
            session = statistics.median(r["session"] for r in rounds)
            api = statistics.median(r["api"] for r in rounds)
            ratios = [(r["atc"] + r["load"]) / r["session"] for r in rounds]
            lines.append(f"| {row.label} | {atc:.2f} s | {load:.2f} s | {session:.2f} s | "
                         f"{(atc + load) / session:.2f} | {min(ratios):.2f}-{max(ratios):.2f} | {api:.2f} s | "
                         f"{api / session:.2f} |")
            print(f"  {row.key} done", file=sys.stderr, flush=True)
    bytecode = {"cached": "bytecode cached", "installed": "the bytecode installed, none written",
                "none": "no cached bytecode"}[args.bytecode]
    print(f"python benchmarks/setup_time.py --rounds {args.rounds} --bytecode {args.bytecode}"
          f"{' --only ' + args.only if only else ''}: fresh processes, wall clock, median over rounds; "
          f"{bytecode}; 1-min load average "
          f"{min(loads):.1f}-{max(loads):.1f}; CPU: {rows_of.cpu_name()}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
