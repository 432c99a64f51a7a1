"""The run directory `model_dir`: its files, its lock, and what a resume may change in it.

`config.json` and `results.json` are written whole, atomically (`atomic_write_json`); a run is
refused a `model_dir` whose `config.json` is of another architecture or was trained with other
settings (`check_model_dir`; what a resume may change is in resnet_nobn/config.py, and after
a divergence what diverged.json's `retry with:` line advises, read by `retry_flags` for the
trainer and the study alike; results.json records each change with its step under
`resume_changes`, those that followed the advice being `advised`); the chief holds
`model_dir/.lock` while it runs (`locked`). A run re-run once finished is told so at once
(`finished`). `ckpt/` holds the checkpoints (`steps_on_disk`);
which of them a run restores is resnet_nobn/train/checkpoints.py's rule.

This module reads and writes files only (no TensorFlow).
"""
import contextlib
import fcntl
import glob
import json
import os
import re
import socket
import subprocess
import time

from resnet_nobn.config import RESUMABLE_FIELDS, differences
from resnet_nobn.console import log
from resnet_nobn.errors import UserError

DIVERGED = "diverged.json"
LOCK = ".lock"
RESUME_CHANGES = "resume_changes"  # results.json: [{step, field, from, to}] of each resume's changes


class InUse(Exception):
    """Another process holds the model_dir's lock."""


@contextlib.contextmanager
def locked(model_dir):
    """Holds `model_dir/.lock` (an flock, released when the process ends however it ends) for the
    block; raises InUse naming the holder's pid and host if another process holds it."""
    os.makedirs(model_dir, exist_ok=True)
    fd = os.open(os.path.join(model_dir, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise InUse(holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on host {socket.gethostname()} since "
                      f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the flock


def holder(model_dir):
    """Who holds `model_dir/.lock` ('pid N on host H since ...') while a live process runs in it,
    else None (the flock ends with its process, however it ends)."""
    try:
        fd = os.open(os.path.join(model_dir, LOCK), os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


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


def check_model_dir(cfg):
    """Refuses a model_dir whose config.json is unreadable, or that `cfg` would resume with another
    architecture, dataset or other settings than it ran with (resnet_nobn/config.py: an older
    config.json is read `as_today`; what may change is RESUMABLE_FIELDS). Returns the run's
    config.json (None for a new run) and {field: [there, here]}, the changes a resume may make:
    RESUMABLE_FIELDS, and after a divergence the settings of its `retry with:` line to the values
    it advises (`retry_flags`)."""
    path = os.path.join(cfg.model_dir, "config.json")
    if not os.path.exists(path):
        return None, {}
    old = read_json(path)
    if old is None or not isinstance(old.get("model"), dict):
        raise UserError(f"{path} is unreadable, not a JSON object or without a `model` object (not "
                        "a run's config.json); move it away or use a new --model_dir")
    advice = retry_flags(cfg.model_dir)
    to = dict(t[2:].split("=", 1) for t in advice)  # the advised values
    refused, changes = [], {}
    for name, there, here in differences(old, cfg.to_json()):
        if name == "eval_only" or (name == "model_dir" and there is not None
                                   and os.path.normpath(str(there)) == os.path.normpath(here)):
            continue
        if name in RESUMABLE_FIELDS or (name in to and _same(to[name], here)):
            changes[name] = [there, here]
        else:
            refused.append((name, f"{name}: {_text(there, here)} there, {_text(here, there)} here"))
    if not refused:
        return old, changes
    said = "; ".join(text for _, text in refused)
    older = [name for name, _ in refused if name not in old and name not in old["model"]]
    if older:  # the value an absent field meant (resnet_nobn/config.py: ABSENT) is shown
        said += f"; that run predates config.json's {', '.join(older)}"
    if all(name in set(cfg.to_json()["model"]) | {"dataset"} for name, _ in refused):
        raise UserError(f"--model_dir={cfg.model_dir} holds a run of a different architecture "
                        f"({said}); use a new --model_dir"
                        + ("" if older else " or the flags of that run"))
    retry = (f"; after its divergence only the advised {' '.join(advice)} may change"
             if advice else "")
    raise UserError(f"--model_dir={cfg.model_dir} holds a run trained with other settings "
                    f"({said}){retry}; re-run with that run's flags or use a new --model_dir")


def finished(cfg):
    """One line saying that `cfg.model_dir` holds this run finished, or None. Finished: its
    config.json is this configuration (`check_model_dir`: another one is refused here, as a run
    would), results.json records step --train_steps evaluated, its newest checkpoint is of that
    step, no divergence is pending and no process holds it. A re-run then has nothing to do, and
    says so without loading TensorFlow; anything else takes the trainer's own path."""
    if cfg.eval_only or not os.path.exists(os.path.join(cfg.model_dir, "config.json")):
        return None
    check_model_dir(cfg)
    results = read_json(os.path.join(cfg.model_dir, "results.json")) or {}
    history = [h for h in results.get("history") or [] if isinstance(h, dict)]
    step = results.get("global_step")
    if (step != cfg.train_steps or not history or history[-1].get("step") != step
            or steps_on_disk(os.path.join(cfg.model_dir, "ckpt"))[:1] != [step]
            or pending_divergence(cfg.model_dir) or holder(cfg.model_dir)):
        return None
    error = history[-1].get("top1_error")
    said = f"{100 * error:.2f}%" if isinstance(error, (int, float)) else "not recorded"
    return (f"{cfg.model_dir} holds this run finished: step {step} of {cfg.train_steps}, top-1 "
            f"error {said} at step {step} (results.json); nothing to train. A larger "
            "--train_steps trains on; --eval_only evaluates it again")


def pending_divergence(model_dir):
    """diverged.json of a run that has not resumed past it yet, or None. The trainer records the
    rollback (results.json `rollbacks`: the step and the advice) before it deletes diverged.json;
    a run killed between the two has resumed past it, and is not diverged (it resumes)."""
    path = os.path.join(model_dir, DIVERGED)
    if not os.path.exists(path):
        return None
    diverged = read_json(path) or {}
    rollbacks = (read_json(os.path.join(model_dir, "results.json")) or {}).get("rollbacks")
    last = rollbacks[-1] if isinstance(rollbacks, list) and rollbacks else {}
    done = (isinstance(last, dict) and diverged.get("step") is not None
            and (last.get("diverged_at"), last.get("retry_with")) == (diverged.get("step"),
                                                                      diverged.get("retry_with")))
    return None if done else diverged


def retry_flags(model_dir):
    """The `--flag=value` tokens of the run's pending `retry with:` line (diverged.json), or []:
    the one reading of it, for `check_model_dir` and the study (resnet_nobn/study/advice.py)."""
    advice = (read_json(os.path.join(model_dir, DIVERGED)) or {}).get("retry_with") or ""
    return [t for t in str(advice).split() if t.startswith("--") and "=" in t]


def advised(change):
    """Whether a results.json `resume_changes` entry {step, field, from, to} is one that a resume
    made to follow the retry advice: `check_model_dir` lets a resume change a setting outside
    RESUMABLE_FIELDS only to its advised value."""
    return (isinstance(change, dict) and isinstance(change.get("field"), str)
            and change["field"] not in RESUMABLE_FIELDS)


def _same(text, value):
    """Whether the advised flag value `text` is `value`."""
    try:
        return float(text) == float(value)
    except (TypeError, ValueError):
        return False


def _flag_form(value):
    """A config.json value as its flag would say it (lists as comma lists)."""
    return (",".join(map(str, value)) or "(none)") if isinstance(value, list) else str(value)


def _text(value, other):
    """`value` in its flag form, with its JSON type when that is all that tells it from `other`."""
    said = _flag_form(value)
    return f"{said} ({type(value).__name__})" if said == _flag_form(other) else said


def previous_results(model_dir, chief):
    """(history, wall time, rollbacks, changes on resume) of model_dir/results.json, and the whole
    of it ({} if none); an unreadable one is set aside (by the chief) and said so, and the history
    starts anew."""
    path = os.path.join(model_dir, "results.json")
    old = read_json(path)
    if old is None and os.path.exists(path) and chief:
        aside = f"{path}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}"
        os.replace(path, aside)
        log(f"warning: {path} is unreadable; moved to {aside}, the history starts anew")
    old = old or {}
    history = [h for h in old.get("history") or [] if isinstance(h, dict) and "step" in h]
    return (history, float(old.get("wall_time_s") or 0.0), list(old.get("rollbacks") or []),
            list(old.get(RESUME_CHANGES) or []), old)


def git_commit():
    """The project's git commit (with `-dirty` if tracked files changed), or None."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=10)
        commit = out.stdout.strip() if out.returncode == 0 else None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (commit + ("-dirty" if dirty else "")) if commit else None
    except (OSError, subprocess.SubprocessError):
        return None


def steps_on_disk(ckpt_dir):
    """Steps of every `ckpt-<step>` of which any file exists, newest first."""
    steps = set()
    for path in glob.glob(os.path.join(glob.escape(ckpt_dir), "ckpt-*")):
        m = re.fullmatch(r"ckpt-(\d+)\.(index|data-\d+-of-\d+)", os.path.basename(path))
        if m:
            steps.add(int(m.group(1)))
    return sorted(steps, reverse=True)
