"""The fault campaigns 2 and 3 run whole, one Markdown row per case (expected against got) and
the totals by section, as docs/benchmarks.md shows them; `python -m pytest tests/faults` runs the
same cases as tests.

    python tests/faults/campaign.py 2 --root=/tmp/faults2             # all cases, a few minutes
    python tests/faults/campaign.py 2 --root=/tmp/faults2 --only=2.   # the cases of section 2
    sudo python tests/faults/campaign.py 3 --root=/tmp/faults3        # all cases, ~15 minutes
    sudo python tests/faults/campaign.py 3 --root=/tmp/faults3 --only=4

Every case runs the project's commands (run/*.py, `python -m theory...`) as subprocesses on tiny
configurations (synthetic data or a 24-image tfds directory, widths 8, one block per stage) and
checks what the project promises: one clear line and a non-zero exit for what the user must fix,
nothing already saved lost, nothing half-written or recorded as what it is not, processes that
end with their parent, the project's lines only. Exit status 0 iff every case behaved as
expected.

Campaign 2, the faults a user can meet: section 1 work lost or reported wrong on resume
(resume.py), 2 damaged data and hand-edited files (data.py), 3 processes (processes.py), 4 quiet:
the project's lines only (quiet.py). Campaign 3, disks, links, workers that disagree and records,
as a user's cluster treats a run: 1 a full disk, 2 files replaced whole (disk.py), 3 what is
recorded (records.py), 4 links and read-only file systems (links.py), 5 clusters, 6 the theory
experiment and damaged data (cluster.py). Campaign 3 needs root: it mounts tmpfs and read-only
bind mounts under --root, and unmounts them at the end. Their helpers are tests/faults/helpers.py;
the first campaign (tests/faults/kills.py) SIGKILLs a run again and again.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def cases(campaign):
    """The registered cases of `campaign` (2 or 3), in the table's order: campaign 2 as
    registered (sections 1, 2, 3, 4), campaign 3 by section number."""
    from tests.faults import helpers
    if campaign == 2:
        from tests.faults import resume, data, processes, quiet  # noqa: F401,I001 (register, in order)
        return list(helpers.CASES[2])
    from tests.faults import cluster, disk, links, records  # noqa: F401 (register the cases)
    return sorted(helpers.CASES[3], key=lambda c: [int(n) for n in c.section.split(".")])


def after(campaign):
    """What ends a campaign's cases whatever happens: the long study of campaign 2's section 3,
    campaign 3's mounts."""
    from tests.faults import helpers, processes
    if campaign == 2:
        processes.stop_busy_study()
    helpers.unmount_all()


def _refuse(said):
    print(f"error: {said}", file=sys.stderr, flush=True)
    sys.exit(2)


def main():
    """Parses the campaign, --root and --only, runs the cases and prints the table. The exit
    status: 0 iff every case behaved as expected; 2 and one line for an --only that selects no
    case (--root untouched), a --root that cannot be made, or campaign 3 without root."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("campaign", type=int, choices=(2, 3), help="which campaign: 2 or 3")
    p.add_argument("--root", required=True, help="scratch directory (emptied first)")
    p.add_argument("--only", default="", help="run only the cases whose section starts with this")
    args = p.parse_args()
    every = cases(args.campaign)
    order = [c for c in every if (c.section + ".").startswith(args.only)]
    if not order:  # "0 of 0 as expected" would read as a pass
        sections = sorted({c.section.split(".")[0] for c in every}, key=int)
        _refuse(f"--only={args.only} selects no case; give a section ({', '.join(sections)}) or "
                "a case number such as 1.2")
    if args.campaign == 3 and os.geteuid() != 0:
        _refuse("the campaign mounts tmpfs and read-only bind mounts: run it as root")
    shutil.rmtree(args.root, ignore_errors=True)
    try:
        os.makedirs(args.root)
    except OSError as e:
        _refuse(f"cannot make --root={args.root}: {e.strerror}; give another --root")
    title = f"fault campaign {args.campaign}"
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
        after(args.campaign)
    print()
    for sec in sorted({s.split(".")[0] for s, _ in results}, key=int):
        mine = [ok for s, ok in results if s.split(".")[0] == sec]
        print(f"section {sec}: {sum(mine)} of {len(mine)} as expected")
    total = sum(ok for _, ok in results)
    print(f"total: {total} of {len(results)} cases as expected ({time.time() - t0:.0f} s)")
    sys.exit(0 if total == len(results) else 1)


if __name__ == "__main__":
    main()
