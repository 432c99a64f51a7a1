"""The faults a user can meet, tried black-box: one row per case, expected vs got.

Every case runs the project's commands (run/*.py, `python -m theory.check`) as subprocesses on
tiny configurations (synthetic data or a 24-image tfds directory, widths 8, one block per stage)
and checks what the README promises: one clear line and a non-zero exit for bad input, nothing
half-written or recorded as what it is not, processes that end with their parent, the project's
lines only. It prints one Markdown row per case and the totals; exit status 0 iff every case
behaved as expected.

    python bench/fault_campaign2.py --root=/tmp/faults2            # all cases, a few minutes
    python bench/fault_campaign2.py --root=/tmp/faults2 --only=2.  # the cases of section 2

Sections: 1 work lost or reported wrong on resume (bench/faults2/resume.py), 2 damaged data and
hand-edited files (data.py), 3 processes (processes.py), 4 quiet: the project's lines only
(quiet.py); their helpers are bench/faults2/common.py. The first campaign
(bench/fault_campaign.py) SIGKILLs a run again and again; this one covers the other faults.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The cases register on import, in the table's order: sections 1, 2, 3, 4.
from bench.faults2 import resume  # noqa: E402,F401,I001
from bench.faults2 import data  # noqa: E402,F401
from bench.faults2 import processes  # noqa: E402
from bench.faults2 import quiet  # noqa: E402,F401
from bench.faults2.common import CASES, ROOT  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True, help="scratch directory (emptied first)")
    p.add_argument("--only", default="", help="run only the cases whose section starts with this")
    args = p.parse_args()
    shutil.rmtree(args.root, ignore_errors=True)
    os.makedirs(args.root)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    print(f"fault campaign 2: {time.strftime('%Y-%m-%d %H:%M')} UTC, commit {commit}\n")
    print("| § | case | expected | got | as expected |")
    print("| --- | --- | --- | --- | --- |")
    results, t0 = [], time.time()
    for section, name, expected, fn in CASES:
        if not section.startswith(args.only):
            continue
        try:
            ok, got = fn(args.root)
        except Exception as e:  # noqa: BLE001 -- a case that cannot even be tried is a failure
            ok, got = False, f"campaign error: {type(e).__name__}: {str(e)[:100]}"
        results.append((section, ok))
        got = got.replace("|", "\\|")
        print(f"| {section} | {name} | {expected} | {got} | {'yes' if ok else '**no**'} |",
              flush=True)
    processes.stop_busy_study()
    print()
    for sec in ("1", "2", "3", "4"):
        mine = [ok for s, ok in results if s.startswith(sec)]
        if mine:
            print(f"section {sec}: {sum(mine)} of {len(mine)} as expected")
    total = sum(ok for _, ok in results)
    print(f"total: {total} of {len(results)} cases as expected ({time.time() - t0:.0f} s)")
    return 0 if total == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
