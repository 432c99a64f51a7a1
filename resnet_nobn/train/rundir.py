"""The run directory `model_dir`: its files, its lock, and what a resume may change in it.

`config.json` and `results.json` are written whole, atomically (`atomic_write_json`; any file a
user keeps is written beside its place and renamed into it: `atomic_file`); a run is refused a
`model_dir` whose `config.json` (or, deleted, the record of its checkpoint) is of another
architecture or was trained with other settings (`check_model_dir`; what a resume may change is
in resnet_nobn/config.py, and after a divergence what diverged.json's `retry with:` line advises,
read by `retry_flags` for the trainer and the study alike; results.json records each change with
its step under `resume_changes`, those that followed the advice being `advised`); the chief holds
`model_dir/.lock` while it runs (`locked`). `ckpt/` holds the checkpoints (`steps_on_disk`);
which of them a run restores is resnet_nobn/train/checkpoints.py's rule. A new run that failed
is removed only if it holds nothing to keep (`discard_new_run`); a results.json copied from
another run is told from the run's own (`not_its_own`).

This module reads and writes files only (no TensorFlow).
"""
import contextlib
import fcntl
import glob
import json
import os
import re
import shutil
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
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on host {socket.gethostname()} since "
                          f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
        except OSError as e:  # a full disk: the error names the file
            e.filename = os.path.join(model_dir, LOCK)
            raise
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
    with atomic_file(path) as tmp:
        with open(tmp, "w") as f:
            f.write(text)


def atomic_write_json(path, obj):
    atomic_write_text(path, json.dumps(obj, indent=2, default=str))


@contextlib.contextmanager
def atomic_file(path):
    """Yields a temporary path beside `path` (with its extension, which a writer such as
    matplotlib reads the format from) and renames it to `path` after the block: `path` is
    replaced whole or not at all. A failure removes the temporary file, and an OSError names
    `path`, not the temporary file."""
    head, tail = os.path.split(path)
    tmp = os.path.join(head, f".{tail}.tmp{os.getpid()}{os.path.splitext(tail)[1]}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.remove(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.filename == tmp:
            e.filename = path
        raise


def read_json(path):
    """The JSON object in `path`, or None if it is missing, unreadable or not an object."""
    try:
        with open(path) as f:
            obj = json.load(f)
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def check_model_dir(cfg, checkpoint_record=None, chief=True):
    """Refuses a model_dir whose config.json is unreadable, or that `cfg` would resume with another
    architecture, dataset or other settings than it ran with (resnet_nobn/config.py: an older
    config.json is read `as_today`; what may change is RESUMABLE_FIELDS). Returns the run's
    config.json (None for a new run) and {field: [there, here]}, the changes a resume may make:
    RESUMABLE_FIELDS, and after a divergence the settings of its `retry with:` line to the values
    it advises (`retry_flags`). Without config.json (deleted by hand), the run's settings are
    those its newest checkpoint records (`checkpoint_record()`: a config.json object, or None),
    else those of its results.json: a resume never trains on with others unrecorded."""
    path = os.path.join(cfg.model_dir, "config.json")
    if os.path.exists(path):
        old = read_json(path)
        if old is None or not isinstance(old.get("model"), dict):
            raise UserError(f"{path} is unreadable, not a JSON object or without a `model` object "
                            "(not a run's config.json); move it away or use a new --model_dir")
    else:
        old, path = _recorded_settings(cfg.model_dir, checkpoint_record)
        if old is None:
            return None, {}
        log(f"{os.path.join(cfg.model_dir, 'config.json')} is missing: the run's settings are "
            f"read from {path}", chief)
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
                    f"({said}{'' if path.endswith('config.json') else f', as {path} records'})"
                    f"{retry}; re-run with that run's flags or use a new --model_dir")


def _recorded_settings(model_dir, checkpoint_record):
    """(settings, where they were read) of a run directory without config.json: its newest
    checkpoint's record, else its results.json's `config`; (None, None) if neither has one."""
    recorded = checkpoint_record() if checkpoint_record else None
    if recorded is not None:
        return recorded
    path = os.path.join(model_dir, "results.json")
    config = (read_json(path) or {}).get("config")
    return (config, f"{path} (`config`)") if isinstance(config, dict) and isinstance(
        config.get("model"), dict) else (None, None)


def divergence_record(model_dir):
    """diverged.json as the trainer writes it (a JSON object with an integer `step`), or None: a
    missing or damaged file records no divergence."""
    record = read_json(os.path.join(model_dir, DIVERGED))
    step = (record or {}).get("step")
    return record if isinstance(step, int) and not isinstance(step, bool) else None


def pending_divergence(model_dir):
    """diverged.json of a run that has not resumed past it yet, or None. The trainer records the
    rollback (results.json `rollbacks`: the step and the advice) before it deletes diverged.json;
    a run killed between the two has resumed past it, and is not diverged (it resumes). A file
    that is no divergence record (`divergence_record`) marks nothing diverged."""
    diverged = divergence_record(model_dir)
    if diverged is None:
        return None
    rollbacks = (read_json(os.path.join(model_dir, "results.json")) or {}).get("rollbacks")
    last = rollbacks[-1] if isinstance(rollbacks, list) and rollbacks else {}
    done = (isinstance(last, dict) and (last.get("diverged_at"), last.get("retry_with"))
            == (diverged.get("step"), diverged.get("retry_with")))
    return None if done else diverged


def retry_flags(model_dir):
    """The `--flag=value` tokens of the run's pending `retry with:` line (diverged.json), or []:
    the one reading of it, for `check_model_dir` and the study (resnet_nobn/study/advice.py)."""
    advice = (divergence_record(model_dir) or {}).get("retry_with") or ""
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


def not_its_own(model_dir, results, config, root=None):
    """Why the results.json object `results` found in `model_dir` is another run's, or None: the
    seed it records is not that of the run's config.json (`config`, may be None) or of its study
    directory (seed-<k>): copied from a sibling seed's directory; or the directory it records is
    another run's, of another name or under `root`: a copy of a whole run directory beside it (a
    copy of the same name elsewhere, such as an archive or a moved study, is the run's own)."""
    recorded = results.get("config") if isinstance(results.get("config"), dict) else {}
    seed, there = recorded.get("seed", results.get("seed")), recorded.get("model_dir")
    named = re.fullmatch(r"seed-(\d+)", os.path.basename(os.path.normpath(model_dir)))
    own = (config or {}).get("seed", int(named.group(1)) if named else None)
    other = (isinstance(there, str) and os.path.exists(os.path.join(there, "config.json"))
             and os.path.realpath(there) != os.path.realpath(model_dir)
             and (os.path.basename(os.path.normpath(there)) != os.path.basename(
                 os.path.normpath(model_dir)) or (root is not None and os.path.realpath(
                     there).startswith(os.path.realpath(root).rstrip(os.sep) + os.sep))))
    if (seed is None or own is None or seed == own) and not other:
        return None
    return (f"it records seed {seed} and --model_dir={there}, not this run's (seed {own}, "
            f"{model_dir}): a copy of another run's results.json")


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


def discard_new_run(model_dir):
    """Removes the directory a new run made, if it holds nothing a user could want back: no
    results.json and no checkpoint but the initialisation (ckpt-0, made again from --seed).
    Returns whether it was removed."""
    if (os.path.exists(os.path.join(model_dir, "results.json"))
            or any(steps_on_disk(os.path.join(model_dir, "ckpt")))):
        return False
    shutil.rmtree(model_dir, ignore_errors=True)
    return not os.path.exists(model_dir)


def steps_on_disk(ckpt_dir):
    """Steps of every `ckpt-<step>` of which any file exists, newest first."""
    steps = set()
    for path in glob.glob(os.path.join(glob.escape(ckpt_dir), "ckpt-*")):
        m = re.fullmatch(r"ckpt-(\d+)\.(index|data-\d+-of-\d+)", os.path.basename(path))
        if m:
            steps.add(int(m.group(1)))
    return sorted(steps, reverse=True)
