"""The run directory `model_dir`: the names of its files, each written whole and read back.

    config.json      the run's configuration (TrainConfig.to_json), written when it starts
    results.json     its evaluations, history, rollbacks, resume changes and versions
    ckpt/            its checkpoints and their losses (resnet_nobn/train/checkpoints.py)
    train/, eval/    TensorBoard summaries of training and of evaluation
    diverged.json    the step and `retry with:` advice of a divergence not resumed past yet
    .lock            held by the chief while it runs (resnet_nobn/train/lock.py)
    .scratch/        the checkpoints of the other workers of a multi-worker run

`config.json` and `results.json` are written whole, atomically (`atomic_write_json`). What a resume
may change in a run: resnet_nobn/train/resume.py. This module reads and writes files only (no
TensorFlow).
"""
import glob
import json
import os
import re
import time

from resnet_nobn.console import log

CONFIG, RESULTS, CKPT, DIVERGED = "config.json", "results.json", "ckpt", "diverged.json"
TRAIN, EVAL = "train", "eval"  # TensorBoard summaries
SUMMARIES = (TRAIN, EVAL)
LOCK, SCRATCH = ".lock", ".scratch"
RESUME_CHANGES = "resume_changes"  # results.json: [{step, field, from, to}] of each resume's changes


def atomic_write_text(path, text):
    """Writes `path` whole or not at all: a reader never sees half a file."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def atomic_write_json(path, obj):
    atomic_write_text(path, json.dumps(obj, indent=2, default=str))


def read_json(path):
    """The JSON object in `path`, or None if it is missing, unreadable or not an object."""
    try:
        with open(path) as f:
            obj = json.load(f)
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def pending_divergence(model_dir):
    """diverged.json of a run that has not resumed past it yet, or None. The trainer records the
    rollback (results.json `rollbacks`: the step and the advice) before it deletes diverged.json;
    a run killed between the two has resumed past it, and is not diverged (it resumes)."""
    path = os.path.join(model_dir, DIVERGED)
    if not os.path.exists(path):
        return None
    diverged = read_json(path) or {}
    rollbacks = (read_json(os.path.join(model_dir, RESULTS)) or {}).get("rollbacks")
    last = rollbacks[-1] if isinstance(rollbacks, list) and rollbacks else {}
    done = (isinstance(last, dict) and diverged.get("step") is not None
            and (last.get("diverged_at"), last.get("retry_with")) == (diverged.get("step"),
                                                                      diverged.get("retry_with")))
    return None if done else diverged


def record_divergence(model_dir, step, what, learning_rate, retry_with):
    """Writes diverged.json: the step where `what` became NaN/inf, the rate, and the advice."""
    atomic_write_json(os.path.join(model_dir, DIVERGED), dict(
        step=step, what=what, learning_rate=learning_rate, retry_with=retry_with,
        time=time.strftime("%Y-%m-%d %H:%M:%S")))


def retry_flags(model_dir):
    """The `--flag=value` tokens of the run's pending `retry with:` line (diverged.json), or []:
    the one reading of it, for the resume check (resnet_nobn/train/resume.py) and the study
    (resnet_nobn/study/advice.py)."""
    advice = (read_json(os.path.join(model_dir, DIVERGED)) or {}).get("retry_with") or ""
    return [t for t in str(advice).split() if t.startswith("--") and "=" in t]


def previous_results(model_dir, chief):
    """(history, wall time, rollbacks, changes on resume) of model_dir/results.json, and the whole
    of it ({} if none); an unreadable one is set aside (by the chief) and said so, and the history
    starts anew."""
    path = os.path.join(model_dir, RESULTS)
    old = read_json(path)
    if old is None and os.path.exists(path) and chief:
        aside = f"{path}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}"
        os.replace(path, aside)
        log(f"warning: {path} is unreadable; moved to {aside}, the history starts anew")
    old = old or {}
    history = [h for h in old.get("history") or [] if isinstance(h, dict) and "step" in h]
    return (history, float(old.get("wall_time_s") or 0.0), list(old.get("rollbacks") or []),
            list(old.get(RESUME_CHANGES) or []), old)


def steps_on_disk(ckpt_dir):
    """Steps of every `ckpt-<step>` of which any file exists, newest first."""
    steps = set()
    for path in glob.glob(os.path.join(glob.escape(ckpt_dir), "ckpt-*")):
        m = re.fullmatch(r"ckpt-(\d+)\.(index|data-\d+-of-\d+)", os.path.basename(path))
        if m:
            steps.add(int(m.group(1)))
    return sorted(steps, reverse=True)
