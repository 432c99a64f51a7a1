"""The runner of the black-box fault campaigns (bench/fault_campaign2.py, bench/fault_campaign3.py):
cases registered by section, run one by one in a scratch directory, one Markdown row each (expected
against got) and the totals by section."""
import argparse
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def registrar(cases):
    """The `@case(section, name, expected)` decorator that appends to `cases`; a case is a function
    of the scratch directory returning (ok, what happened)."""
    def case(section, name, expected):
        def register(fn):
            cases.append((section, name, expected, fn))
            return fn
        return register
    return case


def _refuse(said):
    print(f"error: {said}", file=sys.stderr, flush=True)
    sys.exit(2)


def main(doc, title, cases, numeric_order=True, before=None, after=None):
    """Parses --root and --only, runs the cases (by section number, or as registered) and prints
    the table; `before()` runs first, `after()` at the end whatever happens. The exit status: 0
    iff every case behaved as expected; 2 and one line for an --only that selects no case (--root
    untouched) or a --root that cannot be made."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--root", required=True, help="scratch directory (emptied first)")
    p.add_argument("--only", default="", help="run only the cases whose section starts with this")
    args = p.parse_args()
    order = (sorted(cases, key=lambda c: [int(n) for n in c[0].split(".")]) if numeric_order
             else cases)
    order = [c for c in order if (c[0] + ".").startswith(args.only)]
    if not order:  # "0 of 0 as expected" would read as a pass
        sections = sorted({c[0].split(".")[0] for c in cases}, key=int)
        _refuse(f"--only={args.only} selects no case; give a section ({', '.join(sections)}) or "
                "a case number such as 1.2")
    if before:
        before()
    shutil.rmtree(args.root, ignore_errors=True)
    try:
        os.makedirs(args.root)
    except OSError as e:
        _refuse(f"cannot make --root={args.root}: {e.strerror}; give another --root")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    print(f"{title}: {time.strftime('%Y-%m-%d %H:%M')} UTC, commit {commit}\n")
    print("| § | case | expected | got | as expected |")
    print("| --- | --- | --- | --- | --- |")
    results, t0 = [], time.time()
    try:
        for section, name, expected, fn in order:
            try:
                ok, got = fn(args.root)
            except Exception as e:  # noqa: BLE001 -- a case that cannot even be tried is a failure
                ok, got = False, f"campaign error: {type(e).__name__}: {str(e)[:150]}"
            results.append((section, ok))
            got = got.replace("|", "\\|").replace("\n", " ")
            print(f"| {section} | {name} | {expected} | {got} | {'yes' if ok else '**no**'} |",
                  flush=True)
    finally:
        if after:
            after()
    print()
    for sec in sorted({s.split(".")[0] for s, _ in results}, key=int):
        mine = [ok for s, ok in results if s.split(".")[0] == sec]
        print(f"section {sec}: {sum(mine)} of {len(mine)} as expected")
    total = sum(ok for _, ok in results)
    print(f"total: {total} of {len(results)} cases as expected ({time.time() - t0:.0f} s)")
    sys.exit(0 if total == len(results) else 1)
