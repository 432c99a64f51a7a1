"""The run directory `model_dir`: its JSON files, and which checkpoint a re-run resumes from.

`config.json` and `results.json` are written whole, atomically (`atomic_write_json`); a run is
refused a `model_dir` whose `config.json` is of another architecture (`check_model_dir`); the
chief holds `model_dir/.lock` while it runs (`locked`).

`model_dir/ckpt/` holds tf.train.CheckpointManager's `ckpt-<step>` files (step 0 included, so a
run that diverges early can restart from its initialisation) and `losses.json`: for each
checkpoint, the training loss of the step after it, i.e. computed with the checkpoint's weights.
When a run diverges, the trainer writes `model_dir/diverged.json` (the step and the `retry with:`
advice). A re-run then resumes from:

  * the newest checkpoint that restores with finite weights, skipping (and naming) any whose
    files are missing or unreadable or whose weights are not (resnet_nobn/checkpoints.py); if
    `ckpt/` holds checkpoint files but none restores, the run stops (it never silently starts
    again at step 0);
  * after a divergence, the newest checkpoint taken *before the blow-up*: its weights are finite
    (the trainer only saves finite weights) and its loss is at most `ln(num_classes)` above the
    lowest loss recorded up to it, so not already on the way up, or else the initialisation
    (step 0, whatever the loss of the loop that blew up); checkpoints after it are deleted, since
    the resumed run writes its own at those steps.

A resume may change only some fields of config.json (`check_model_dir`); results.json records
each change with its step under `resume_changes`.

This module reads and writes files only (no TensorFlow); resnet_nobn/checkpoints.py restores.
"""
import contextlib
import fcntl
import glob
import json
import math
import os
import re
import socket
import subprocess
import time

from resnet_nobn.config import RESUMABLE_FIELDS, config_diffs
from resnet_nobn.console import log
from resnet_nobn.errors import UserError

LOSSES = "losses.json"
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
    """Refuses a model_dir whose config.json is unreadable, of another architecture or dataset than
    `cfg` (its checkpoints would not restore), or that `cfg` would resume with other settings than
    it ran with (resnet_nobn/config.py: SCIENTIFIC_FIELDS, RESUMABLE_FIELDS). Returns the run's
    config.json (None for a new run) and {field: [there, here]}, the changes a resume may make:
    RESUMABLE_FIELDS, and after a divergence --learning_rate/--clip_norm to its advised values."""
    path = os.path.join(cfg.model_dir, "config.json")
    if not os.path.exists(path):
        return None, {}
    old = read_json(path)
    if old is None or not isinstance(old.get("model"), dict):
        raise UserError(f"{path} is unreadable, not a JSON object or without a `model` object (not "
                        "a run's config.json); move it away or use a new --model_dir")
    new = cfg.to_json()
    diffs = config_diffs(old, new, fields=("dataset",))
    if all(c["model"].get("head_seed") == c.get("seed") for c in (old, new)):
        # the head's seed follows --seed in both: a changed --seed is named (refused) below
        diffs = [d for d in diffs if not d.startswith("head_seed:")]
    if diffs:
        raise UserError(f"--model_dir={cfg.model_dir} holds a run of a different architecture "
                        f"({'; '.join(diffs)}); use a new --model_dir or the flags of that run")
    advice = (read_json(os.path.join(cfg.model_dir, DIVERGED)) or {}).get("retry_with") or ""
    advised = dict(t[2:].split("=", 1) for t in advice.split() if t.startswith("--") and "=" in t)
    refused, changes = [], {}
    for name in new:
        there, here = old.get(name), new[name]
        if name in ("model", "eval_only") or there == here or (
                name == "model_dir" and os.path.normpath(str(there)) == os.path.normpath(here)):
            continue
        if name in RESUMABLE_FIELDS or (name in advised and _same(advised[name], here)):
            changes[name] = [there, here]
        else:
            refused.append(f"{name}: {_text(there)} there, {_text(here)} here")
    if refused:
        retry = (f"; after its divergence only the advised {advice} may change" if advice else "")
        raise UserError(f"--model_dir={cfg.model_dir} holds a run trained with other settings "
                        f"({'; '.join(refused)}){retry}; re-run with that run's flags or use a new "
                        "--model_dir")
    return old, changes


def _same(text, value):
    """Whether the advised flag value `text` is `value`."""
    try:
        return float(text) == float(value)
    except (TypeError, ValueError):
        return False


def _text(value):
    """A config.json value as its flag would say it (lists as comma lists)."""
    return (",".join(map(str, value)) or "(none)") if isinstance(value, list) else value


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


def read_losses(ckpt_dir):
    """{step: training loss at that checkpoint} (a missing or damaged record reads as empty)."""
    raw = read_json(os.path.join(ckpt_dir, LOSSES)) or {}
    out = {}
    for k, v in raw.items():
        try:
            out[int(k)] = None if v is None else float(v)
        except (TypeError, ValueError):
            continue
    return out


def record_loss(ckpt_dir, step, loss):
    """Records the training loss computed with the weights of the checkpoint of `step`."""
    losses = {s: l for s, l in read_losses(ckpt_dir).items() if s < step}
    losses[step] = loss
    _write_losses(ckpt_dir, losses)


def _write_losses(ckpt_dir, losses):
    atomic_write_json(os.path.join(ckpt_dir, LOSSES), {str(s): losses[s] for s in sorted(losses)})


def exploded(step, losses, num_classes):
    """Why the checkpoint at `step` was taken on the way to a blow-up, or None if it was not. The
    one of step 0 holds the initialisation, whatever loss its first loop ended with: a retry with
    other flags may always start from it."""
    if step == 0:
        return None
    loss = losses.get(step)
    if loss is None:
        return "no loss recorded with its weights"
    if not math.isfinite(loss):
        return f"loss {loss}"
    best = min((l for s, l in losses.items() if s <= step and l is not None), default=loss)
    if loss > best + math.log(num_classes):
        return f"loss {loss:.3g}, already {loss - best:.3g} above the lowest {best:.3g}"
    return None


def resume_order(ckpt_dir, model_dir, num_classes):
    """[(step, reason to skip it or None)] newest first, and the divergence record (or None)."""
    diverged = read_json(os.path.join(model_dir, DIVERGED))
    losses = read_losses(ckpt_dir)
    order = []
    for step in steps_on_disk(ckpt_dir):
        why = None
        if not os.path.exists(os.path.join(ckpt_dir, f"ckpt-{step}.index")):
            why = "its .index file is missing"
        elif diverged is not None:
            why = exploded(step, losses, num_classes)
        order.append((step, why))
    return order, diverged


def write_checkpoint_state(ckpt_dir, steps):
    """Rewrites tf.train.CheckpointManager's state file `checkpoint` to track `steps` (oldest
    first; the last is the latest), whatever it said before (it may be damaged)."""
    paths = [f"ckpt-{s}" for s in steps]
    atomic_write_text(os.path.join(ckpt_dir, "checkpoint"),
                      f'model_checkpoint_path: "{paths[-1]}"\n'
                      + "".join(f'all_model_checkpoint_paths: "{p}"\n' for p in paths))


def delete_after(ckpt_dir, step):
    """Deletes every checkpoint file (and loss record) of a step after `step`; returns the steps."""
    gone = [s for s in steps_on_disk(ckpt_dir) if s > step]
    for s in gone:
        for path in glob.glob(os.path.join(glob.escape(ckpt_dir), f"ckpt-{s}.*")):
            os.remove(path)
    if gone:
        _write_losses(ckpt_dir, {s: l for s, l in read_losses(ckpt_dir).items() if s <= step})
    return gone
