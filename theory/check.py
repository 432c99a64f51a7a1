"""`python -m theory.check [--quick]`: every claim of Sections 2 and 3, checked numerically.

Each theory module exposes `checks(quick: bool) -> list[dict]`; every dict is one claim with keys
  claim          short name with the paper's reference, e.g. "Lemma 2.4 gradient"
  instances      how many instances were tried
  worst_margin   the smallest slack seen (>= 0 means the claim held everywhere)
  passed         bool
  proved         bool: the paper proves it (a failure makes the exit status non-zero), or it is an
                 empirical question (e.g. eq. (2.3) as printed), reported but not fatal
  detail         one line: sizes tried, counterexample numbers, ...
This file only runs them, prints a table and sets the exit status.
"""
import argparse
import json
import sys
import time


def _modules():
    from theory import expressivity, linear  # noqa: imported late so --help is instant
    return [linear, expressivity]


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m theory.check",
        description="Check the claims of Hardt & Ma, Sections 2 and 3, numerically.")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes, for CI (under a minute on 2 CPU cores)")
    parser.add_argument("--json", metavar="FILE",
                        help="also write the results to FILE as JSON")
    args = parser.parse_args(argv)

    results = []
    for module in _modules():
        start = time.time()
        for r in module.checks(quick=args.quick):
            results.append(r)
            status = "PASS" if r["passed"] else ("FAIL" if r["proved"] else "VIOLATED (empirical)")
            print(f"{status:>20}  {r['claim']:<45} instances={r['instances']:<6} "
                  f"worst_margin={r['worst_margin']:.3e}  {r['detail']}", flush=True)
        print(f"{'':>20}  ({module.__name__}: {time.time() - start:.1f}s)", flush=True)

    failed = [r["claim"] for r in results if r["proved"] and not r["passed"]]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2, default=float)
    if failed:
        print(f"FAILED: {len(failed)} proved claim(s) did not hold: {', '.join(failed)}")
        return 1
    print(f"all {len(results)} proved claims held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
