"""Kill a training run again and again, re-run it each time, and check that nothing was lost.

A tiny run (synthetic data, widths 8, one block per stage) is trained once without interruption,
then again in another model_dir where it is SIGKILLed `--kills` times and re-run after each kill
with the same command. Half of the kills come at a random moment of the run; the other half the
moment a checkpoint of an evaluation step appears on disk while results.json has no row for that
step yet (between the save and the evaluation). At the end the two runs must have the same final
step, the same weights (every variable of the last checkpoint) and the same results history
(steps, top-1/top-5 error, test loss). Exit status 0 iff they do.

    python tests/faults/kills.py --kills=20 --root=/tmp/faults

tests/faults/test_kills.py runs it as a test: 2 kills of a 200-step run, or this command's
defaults with FAULTS=all.
"""
import argparse
import glob
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from resnet_nobn.console import quiet_stderr  # noqa: E402
TINY = ["--use_synthetic_data", "--widths=8,8,8", "--stem_width=8", "--blocks_per_stage=1",
        "--batch_size=8", "--eval_steps=2", "--learning_rate=0.01"]


def command(model_dir, steps):
    return [sys.executable, os.path.join(ROOT, "run", "cifar_train.py"), *TINY,
            f"--train_steps={steps}", "--eval_every=10", "--checkpoint_every=5", "--log_every=5",
            f"--model_dir={model_dir}"]


def history(model_dir):
    try:
        with open(os.path.join(model_dir, "results.json")) as f:
            return json.load(f).get("history", [])
    except (OSError, ValueError):
        return []


def eval_step_saved_not_evaluated(model_dir, after):
    """An evaluation step after `after` whose checkpoint is on disk but whose results row is not."""
    saved = {int(m.group(1)) for p in glob.glob(os.path.join(model_dir, "ckpt", "ckpt-*.index"))
             if (m := re.search(r"ckpt-(\d+)\.index$", p))}
    evaluated = {h["step"] for h in history(model_dir)}
    return any(s % 10 == 0 and s > after and s not in evaluated for s in saved)


def run_to_end(model_dir, steps, timeout=600):
    proc = subprocess.run(command(model_dir, steps), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        sys.exit(f"the run failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")


def steps_on_disk(model_dir):
    """The newest checkpoint's step (0 if none)."""
    return max([int(m.group(1)) for p in glob.glob(os.path.join(model_dir, "ckpt", "ckpt-*.index"))
                if (m := re.search(r"ckpt-(\d+)\.index$", p))] or [0])


def kill_once(model_dir, steps, at_seconds=None, poll=0.005, limit=300):
    """Starts the run and SIGKILLs it `at_seconds` after start, or (None) between a save of an
    evaluation step and its evaluation; returns 'random', 'between save and eval' or 'finished'."""
    start = steps_on_disk(model_dir)
    proc = subprocess.Popen(command(model_dir, steps), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    t0 = time.time()
    while proc.poll() is None and time.time() - t0 < limit:
        if (time.time() - t0 >= at_seconds) if at_seconds is not None else \
                eval_step_saved_not_evaluated(model_dir, start):
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return "random" if at_seconds is not None else "between save and eval"
        time.sleep(poll)
    if proc.poll() is None:
        sys.exit(f"the run did not end within {limit} s")
    return "finished"


def variables(model_dir):
    with quiet_stderr():
        import tensorflow as tf
    reader = tf.train.load_checkpoint(os.path.join(model_dir, "ckpt"))
    return {k: reader.get_tensor(k) for k, dtype in reader.get_variable_to_dtype_map().items()
            if "save_counter" not in k and dtype.is_floating}


def compare(a, b):
    """The differences between two finished runs (empty list: equal)."""
    import numpy as np
    problems = []
    ra = json.load(open(os.path.join(a, "results.json")))
    rb = json.load(open(os.path.join(b, "results.json")))
    if ra["global_step"] != rb["global_step"]:
        problems.append(f"final step {ra['global_step']} != {rb['global_step']}")
    keys = ("step", "top1_error", "top5_error", "eval_loss")
    ha = [tuple(h.get(k) for k in keys) for h in ra["history"]]
    hb = [tuple(h.get(k) for k in keys) for h in rb["history"]]
    if [h[0] for h in ha] != [h[0] for h in hb]:
        problems.append(f"history steps {[h[0] for h in ha]} != {[h[0] for h in hb]}")
    elif not np.allclose(np.array(ha, float), np.array(hb, float), rtol=1e-5, atol=1e-6):
        problems.append("history values differ")
    va, vb = variables(a), variables(b)
    if set(va) != set(vb):
        problems.append("the checkpoints hold different variables")
    else:
        worst = max(float(np.max(np.abs(va[k] - vb[k]))) if va[k].size else 0.0 for k in va)
        if worst > 1e-5:
            problems.append(f"weights differ by up to {worst:.2e}")
    return problems


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", required=True, help="scratch directory (emptied first)")
    p.add_argument("--kills", type=int, default=20, help="how many SIGKILLs (at least 1)")
    p.add_argument("--steps", type=int, default=1500, help="training steps of the run (enough "
                   "that 20 kills come before its end on 2 CPU cores)")
    p.add_argument("--seed", type=int, default=0, help="seed of the kill times")
    args = p.parse_args()
    if args.kills < 1 or args.steps < 10:
        sys.exit("error: --kills must be >= 1 and --steps >= 10")
    shutil.rmtree(args.root, ignore_errors=True)
    os.makedirs(args.root)
    clean, faulty = os.path.join(args.root, "uninterrupted"), os.path.join(args.root, "killed")
    t0 = time.time()
    proc = subprocess.Popen(command(clean, args.steps), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    while not os.path.exists(os.path.join(clean, "ckpt", "ckpt-0.index")) and proc.poll() is None:
        time.sleep(0.01)
    startup = time.time() - t0
    if proc.wait() != 0:
        sys.exit(f"the uninterrupted run failed:\n{proc.stderr.read()[-2000:]}")
    per_step = (time.time() - t0 - startup) / args.steps
    print(f"uninterrupted run: start-up {startup:.1f} s, then {args.steps} steps at "
          f"{1000 * per_step:.0f} ms/step", flush=True)
    rng = random.Random(args.seed)
    counts = {}
    for k in range(args.kills):
        # a random moment that leaves, on average, a kill's share of the steps done per re-run
        at = None if k % 2 else startup + rng.uniform(0, 2 * args.steps / args.kills) * per_step
        what = kill_once(faulty, args.steps, at)
        counts[what] = counts.get(what, 0) + 1
        print(f"kill {k + 1:>2}/{args.kills}: {what:<21} checkpoint at step "
              f"{steps_on_disk(faulty):>3}, results rows {[h['step'] for h in history(faulty)]}",
              flush=True)
    run_to_end(faulty, args.steps)
    problems = compare(clean, faulty)
    print("kills: " + ", ".join(f"{n} {kind}" for kind, n in counts.items()))
    if counts.get("finished"):
        problems.append(f"{counts['finished']} run(s) finished before their kill: raise --steps")
    if problems:
        print("MISMATCH: " + "; ".join(problems))
        sys.exit(1)
    print(f"final step, weights and results history of the killed run equal the uninterrupted "
          f"run's ({len(history(clean))} evaluation rows)")


if __name__ == "__main__":
    main()
