"""ONNX's backend test cases through ge: the per-op pass/fail table and totals.

    python -m tests.conformance                       # every case, cpu and sim
    python -m tests.conformance --op Clip --op Resize --failures
    python -m tests.conformance --json > conformance.json
    python -m tests.conformance --write-expected      # rewrite expected_failures.txt from this run
    python -m tests.conformance --files               # through `ge atc` + `ge run` and onnx's .pb files
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict

from .cases import all_cases
from .expected import EXPECTED_FILE, write_expected
from .runner import DEVICES, run_case
from .through_files import run_case_files
from .summary import category


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.conformance", description=__doc__.splitlines()[0])
    p.add_argument("--op", action="append", default=[], help="only the cases of this op (repeatable; "
                   "a data kind such as pytorch-converted selects its cases)")
    p.add_argument("--case", action="append", default=[], help="only cases whose name contains this")
    p.add_argument("--device", action="append", choices=DEVICES, help="run on this device only (repeatable)")
    p.add_argument("--json", action="store_true", help="print every case's result as JSON")
    p.add_argument("--failures", action="store_true", help="list each failing case with its reason")
    p.add_argument("--write-expected", action="store_true", help=f"rewrite {EXPECTED_FILE.name} (full runs only)")
    p.add_argument("--files", action="store_true", help="run each case through the command line: `ge atc`, then "
                   "`ge run` on its test_data_set_N folders of .pb files, the outputs read back from --outfmt pb")
    args = p.parse_args(argv)

    ops = {o.lower() for o in args.op}
    cases = [c for c in all_cases() if (not ops or c.op.lower() in ops)
             and (not args.case or any(s in c.name for s in args.case))]
    if not cases:
        p.error("no case matches the filters")
    devices = tuple(args.device or DEVICES)
    results = []
    for i, case in enumerate(cases):
        results.append((run_case_files if args.files else run_case)(case, devices))
        if sys.stderr.isatty():
            print(f"\r{i + 1}/{len(cases)}", end="", file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        print(file=sys.stderr)

    if args.write_expected:
        if ops or args.case or args.device or args.files:
            p.error("--write-expected needs a full run through the API (no --op, --case, --device or --files)")
        write_expected(results)
    if args.json:
        json.dump({"devices": devices, "through": "files" if args.files else "api",
                   "passed": sum(r.passed for r in results), "total": len(results),
                   "cases": [vars(r) | {"category": category(r)} for r in results]}, sys.stdout, indent=1)
        print()
    else:
        _print_table(results, devices, args.failures, args.files)
    return 0


def _print_table(results, devices, failures: bool, through_files: bool) -> None:
    by_op = defaultdict(list)
    for r in results:
        by_op[r.op].append(r)
    width = max(len(op) for op in by_op) + 2
    print(f"{'op':<{width}}{'cases':>6}{'pass':>6}{'fail':>6}  failures by category")
    for op in sorted(by_op, key=str.lower):
        rs = by_op[op]
        n_pass = sum(r.passed for r in rs)
        cats = Counter(category(r) for r in rs if not r.passed)
        why = ", ".join(f"{c} {n}" for c, n in cats.most_common())
        print(f"{op:<{width}}{len(rs):>6}{n_pass:>6}{len(rs) - n_pass:>6}  {why}")
    n_pass = sum(r.passed for r in results)
    print(f"\n{n_pass}/{len(results)} cases pass ({100 * n_pass / len(results):.1f}%) on {' and '.join(devices)}"
          f"{' through ge atc + ge run and .pb files' if through_files else ' through the API'}")
    print("failures by category:")
    for c, n in Counter(category(r) for r in results if not r.passed).most_common():
        print(f"  {n:>5}  {c}")
    if failures:
        print("\nfailing cases:")
        for r in results:
            if not r.passed:
                print(f"  {r.name}: {r.status}: {r.message}")


if __name__ == "__main__":
    sys.exit(main())
