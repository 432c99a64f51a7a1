"""`python -m theory.check [--quick] [--json FILE]`: the claims of Hardt & Ma, Sections 2 and 3,
checked numerically -- the paper's statements that hold, the printed ones that are refuted (with
their counterexamples, beside the corrected statement), and open empirical questions.

The rows come from theory/check_linear.py (Section 2) and theory/check_expressivity.py
(Section 3); theory/rows.py defines a row and its status; docs/theory.md says what each row checks.
This file runs them, prints the report and sets the exit status (1 if a proved statement failed or
a known counterexample was not found).
"""
import argparse
import json
import os
import sys
import time

from theory.rows import WIDTH

LEGEND = [
    "PASS / FAIL: a statement with a proof (the paper's, or with a slip corrected). REFUTED: the paper's",
    "printed statement, with a counterexample (the row says which row holds instead). HOLDS / DOES NOT",
    "HOLD: an open empirical question, never fatal. Each row: n = instances, the quantity measured, its",
    "worst value and the condition it must meet, and the row's own time.",
]


def _sections():
    from theory import check_expressivity, check_linear  # imported late so --help is instant
    return [("Section 2: linear residual networks", check_linear),
            ("Section 3: finite-sample expressivity", check_expressivity)]


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m theory.check",
        description="Check the claims of Hardt & Ma, Sections 2 and 3, numerically.")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes, for CI (under a minute on 2 CPU cores)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows to FILE as JSON")
    args = parser.parse_args(argv)
    if args.json:  # said before the minutes of checks, not after
        folder = os.path.dirname(os.path.abspath(args.json))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK) or os.path.isdir(args.json):
            print(f"error: --json={args.json}: {folder} is not a writable directory (or the path is "
                  "a directory); create it or give another path", file=sys.stderr)
            return 2

    print("\n".join(LEGEND))
    rows, start = [], time.time()
    for title, module in _sections():
        t = time.time()
        print(f"\n== {title} " + "=" * (WIDTH - len(title) - 4), flush=True)
        for row in module.checks(quick=args.quick):
            rows.append(row)
            print("\n".join(row.lines()), flush=True)
        print(f"({module.__name__}: {time.time() - t:.1f}s)", flush=True)

    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.to_json() for r in rows], f, indent=1, default=float)
    counts = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    summary = ", ".join(f"{v} {k}" for k, v in counts.items())
    fatal = [r.id for r in rows if r.fatal]
    print(f"\n{len(rows)} rows in {time.time() - start:.0f}s: {summary}")
    if fatal:
        print(f"FAILED: {', '.join(fatal)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
