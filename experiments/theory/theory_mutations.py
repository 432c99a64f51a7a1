"""Mutation campaign for `python -m theory.check --quick`: plausible bugs put into theory/, one at a
time, each in a copy of the repository (the worktree is never touched); a bug is *caught* when the
report exits non-zero through a fatal row (a FAILED: line) without a Python traceback.

    python experiments/theory/theory_mutations.py [--jobs 2] [--only NAME,...] [--out docs/results/theory_mutations.json]

Every mutation (experiments/theory/theory_bugs.json) is a name, a file under theory/, an exact text, its
replacement and what the bug is.  The text must occur exactly once (else the campaign stops: a
mutation that applies to nothing proves nothing).  Prints one line per mutation as it finishes
and a summary table (markdown).
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
from resnet_nobn.files import atomic_write_json  # noqa: E402
# The plausible bugs (experiments/theory/theory_bugs.json): name, file under theory/, exact text, replacement,
# what the bug is, and the part of the paper it breaks.
with open(os.path.join(REPO, "experiments", "theory", "theory_bugs.json"), encoding="utf-8") as _f:
    MUTATIONS = [(m["name"], m["file"], m["text"], m["replacement"], m["bug"]) for m in json.load(_f)]


# one thread per run: several runs at once on a shared machine, without spinning thread pools
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}


def apply(root, path, old, new):
    p = os.path.join(root, path)
    text = open(p, encoding="utf-8").read()
    if text.count(old) != 1:
        raise SystemExit(f"mutation text occurs {text.count(old)} times in {path}: {old[:60]!r}")
    open(p, "w", encoding="utf-8").write(text.replace(old, new))


def run_one(mutation, timeout):
    name, path, old, new, what = mutation
    with tempfile.TemporaryDirectory(prefix=f"mut_{name}_") as tmp:
        for sub in ("theory", "resnet_nobn"):
            shutil.copytree(os.path.join(REPO, sub), os.path.join(tmp, sub),
                            ignore=shutil.ignore_patterns("__pycache__"))
        apply(tmp, path, old, new)
        t = time.time()
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": tmp, **ONE_THREAD}
        try:
            proc = subprocess.run([sys.executable, "-m", "theory.check", "--quick"], cwd=tmp, env=env,
                                  capture_output=True, text=True, timeout=timeout)
            rc, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired:
            rc, out, err = None, "", "timeout"
    fatal = next((line[len("FAILED: "):] for line in out.splitlines() if line.startswith("FAILED: ")), "")
    traceback = "Traceback" in out or "Traceback" in err
    if rc is None:
        verdict = "timeout"
    elif traceback:
        verdict = "traceback"
    elif rc != 0 and fatal:
        verdict = "caught"
    elif rc == 0:
        verdict = "missed"
    else:
        verdict = f"exit {rc}"
    return {"name": name, "file": path, "bug": what, "exit": rc, "verdict": verdict,
            "fatal_rows": fatal, "seconds": round(time.time() - t, 1)}


def refused(args, only):
    """The line that says what is wrong with the flags `args` (`only`: the --only names), or None:
    --jobs or --timeout not positive, an --only name of no mutation, an --out that cannot be
    written (tried before the hours of work, not after)."""
    unknown = sorted(only - {m[0] for m in MUTATIONS})
    if unknown:
        return (f"--only names no mutation {', '.join(unknown)}; the mutations: "
                f"{', '.join(m[0] for m in MUTATIONS)}")
    if args.jobs < 1 or not 0 < args.timeout < float("inf"):
        return f"--jobs={args.jobs} and --timeout={args.timeout:g} must be positive"
    if args.out:
        try:
            atomic_write_json(args.out, [])  # replaced whole at the end
        except OSError as e:
            return f"cannot write --out={args.out}: {e.strerror}; give another --out"
    return None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=2, help="mutations run at once, one thread each (default 2)")
    p.add_argument("--only", default="", help="comma-separated mutation names")
    p.add_argument("--timeout", type=float, default=900, help="seconds per run")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args(argv)
    only = {x for x in args.only.split(",") if x}
    muts = [m for m in MUTATIONS if not only or m[0] in only]
    said = refused(args, only)
    if said:
        print(f"error: {said}", file=sys.stderr, flush=True)
        return 2
    with tempfile.TemporaryDirectory() as tmp:      # every mutation applies, before any run
        shutil.copytree(os.path.join(REPO, "theory"), os.path.join(tmp, "theory"))
        for m in muts:
            apply(tmp, m[1], m[2], m[3])
            shutil.rmtree(os.path.join(tmp, "theory"))
            shutil.copytree(os.path.join(REPO, "theory"), os.path.join(tmp, "theory"))
    results, t0 = [], time.time()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for res in pool.map(lambda m: run_one(m, args.timeout), muts):
            results.append(res)
            print(f"{res['verdict']:<9} {res['name']:<22} {res['seconds']:>6.1f}s  {res['fatal_rows']}",
                  flush=True)
    caught = sum(r["verdict"] == "caught" for r in results)
    tb = sum(r["verdict"] == "traceback" for r in results)
    print(f"\n| mutation | file | bug | verdict | fatal rows |\n| --- | --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['name']} | {r['file'].replace('theory/', '')} | {r['bug']} | {r['verdict']} | "
              f"{r['fatal_rows']} |")
    print(f"\n{caught} of {len(results)} caught through a fatal row ({100 * caught / len(results):.0f}%), "
          f"{tb} by a traceback, {sum(r['verdict'] == 'missed' for r in results)} missed; "
          f"{time.time() - t0:.0f}s wall, --jobs {args.jobs}")
    if args.out:
        atomic_write_json(args.out, results)
    return 0 if caught >= 0.9 * len(results) and tb == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
