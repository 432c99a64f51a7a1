"""The run directory `model_dir`: the names of its files, each written whole and read back.

    config.json      the run's configuration (TrainConfig.to_json), written when it starts
    results.json     its evaluations, history, rollbacks, resume changes and versions
    ckpt/            its checkpoints and their losses (resnet_nobn/train/checkpoints.py)
    train/, eval/    TensorBoard summaries of training and of evaluation
    diverged.json    the step and `retry with:` advice of a divergence not resumed past yet
    .lock            held by the chief while it runs (resnet_nobn/train/lock.py)
    .scratch/        the checkpoints of the other workers of a multi-worker run

`config.json` and `results.json` are written whole, atomically (`atomic_write_json`); any file a
user keeps is written beside its place and renamed into it (`atomic_file`). What a resume may
change in a run: resnet_nobn/train/resume.py. A new run that failed is removed only if it holds
nothing to keep (`discard_new_run`); a results.json copied from another run is told from the
run's own (`not_its_own`). This module reads and writes files only (no TensorFlow).
"""
import contextlib
import glob
import json
import os
import re
import shutil
import time

from resnet_nobn.console import log

CONFIG, RESULTS, CKPT, DIVERGED = "config.json", "results.json", "ckpt", "diverged.json"
TRAIN, EVAL = "train", "eval"  # TensorBoard summaries
SUMMARIES = (TRAIN, EVAL)
LOCK, SCRATCH = ".lock", ".scratch"
RESUME_CHANGES = "resume_changes"  # results.json: [{step, field, from, to}] of each resume's changes


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


def divergence_record(model_dir):
    """diverged.json as `record_divergence` writes it (a JSON object with an integer `step`), or
    None: a missing or damaged file records no divergence."""
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
    rollbacks = (read_json(os.path.join(model_dir, RESULTS)) or {}).get("rollbacks")
    last = rollbacks[-1] if isinstance(rollbacks, list) and rollbacks else {}
    done = (isinstance(last, dict) and (last.get("diverged_at"), last.get("retry_with"))
            == (diverged.get("step"), diverged.get("retry_with")))
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
    advice = (divergence_record(model_dir) or {}).get("retry_with") or ""
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
    other = (isinstance(there, str) and os.path.exists(os.path.join(there, CONFIG))
             and os.path.realpath(there) != os.path.realpath(model_dir)
             and (os.path.basename(os.path.normpath(there)) != os.path.basename(
                 os.path.normpath(model_dir)) or (root is not None and os.path.realpath(
                     there).startswith(os.path.realpath(root).rstrip(os.sep) + os.sep))))
    if (seed is None or own is None or seed == own) and not other:
        return None
    return (f"it records seed {seed} and --model_dir={there}, not this run's (seed {own}, "
            f"{model_dir}): a copy of another run's results.json")


def discard_new_run(model_dir):
    """Removes the directory a new run made, if it holds nothing a user could want back: no
    results.json and no checkpoint but the initialisation (ckpt-0, made again from --seed).
    Returns whether it was removed."""
    if (os.path.exists(os.path.join(model_dir, RESULTS))
            or any(steps_on_disk(os.path.join(model_dir, CKPT)))):
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
