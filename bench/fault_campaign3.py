"""Disks, links, workers that disagree and records under faults, tried black-box: one row per case.

Every case runs the project's commands (run/*.py, `python -m theory...`) as subprocesses on tiny
configurations, as a user's cluster would treat them: a disk that fills (a small tmpfs, or one
filled up to its last byte), a read-only mount, symbolic links that loop or point to nothing, a
worker started with a stale command line, files copied or edited by hand, a study started twice.
Each case checks what the project promises: one clear line (TensorFlow's own start-up lines
apart) and a non-zero exit for what the user must fix, nothing already saved lost, nothing
recorded as what it is not. It prints one Markdown row per case and the totals; exit status 0
iff every case behaved as expected.

    sudo python bench/fault_campaign3.py --root=/tmp/faults3            # all cases, ~1 hour
    sudo python bench/fault_campaign3.py --root=/tmp/faults3 --only=4   # the cases of section 4

Needs root (it mounts tmpfs and read-only bind mounts under --root, and unmounts them at the
end). Sections: 1 a full disk, 2 files replaced whole (bench/faults3/disk.py), 3 what is recorded
(records.py), 4 links and read-only file systems (links.py), 5 clusters, 6 the theory experiment
and damaged data (cluster.py); their helpers are bench/faults3/common.py.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.faults3 import cluster, disk, links, records  # noqa: E402,F401 (register the cases)
from bench.faults3.common import CASES, MOUNTS, ROOT  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True, help="scratch directory (emptied first)")
    p.add_argument("--only", default="", help="run only the cases whose section starts with this")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("error: the campaign mounts tmpfs and read-only bind mounts: run it as root")
    shutil.rmtree(args.root, ignore_errors=True)
    os.makedirs(args.root)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    print(f"fault campaign 3: {time.strftime('%Y-%m-%d %H:%M')} UTC, commit {commit}\n")
    print("| § | case | expected | got | as expected |")
    print("| --- | --- | --- | --- | --- |")
    results, t0 = [], time.time()
    try:
        for section, name, expected, fn in sorted(CASES, key=lambda c: [
                int(n) for n in c[0].split(".")]):
            if not (section + ".").startswith(args.only):
                continue
            try:
                ok, got = fn(args.root)
            except Exception as e:  # noqa: BLE001 -- a case that cannot even be tried is a failure
                ok, got = False, f"campaign error: {type(e).__name__}: {str(e)[:150]}"
            results.append((section, ok))
            got = got.replace("|", "\\|").replace("\n", " ")
            print(f"| {section} | {name} | {expected} | {got} | {'yes' if ok else '**no**'} |",
                  flush=True)
    finally:
        for m in reversed(MOUNTS):
            subprocess.run(["umount", "-l", m], capture_output=True)
    print()
    for sec in "123456":
        mine = [ok for s, ok in results if s.split(".")[0] == sec]
        if mine:
            print(f"section {sec}: {sum(mine)} of {len(mine)} as expected")
    total = sum(ok for _, ok in results)
    print(f"total: {total} of {len(results)} cases as expected ({time.time() - t0:.0f} s)")
    return 0 if total == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
