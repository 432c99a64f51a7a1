"""What a resume may change in a run: `check_model_dir` refuses a model_dir whose config.json (or,
deleted, the record of its checkpoint) is of another architecture or was trained with other
settings than the run's flags (what may change is RESUMABLE_FIELDS, resnet_nobn/config.py, and
after a divergence what diverged.json's `retry with:` line advises, read by
resnet_nobn/train/rundir.py's `retry_flags` for the trainer and the study alike); results.json
records each change with its step under `resume_changes`, those that followed the advice being
`advised`. A run re-run once finished is told so at once (`finished`). A resumed run standardises
its images with the mean and std its results.json records (`recorded_standardization`). Reads
files only (no TensorFlow).
"""
import os

from resnet_nobn.cli import flag_text
from resnet_nobn.config import RESUMABLE_FIELDS, differences
from resnet_nobn.console import log
from resnet_nobn.data import standardization
from resnet_nobn.errors import UserError
from resnet_nobn.train.lock import holder
from resnet_nobn.train.rundir import (CKPT, CONFIG, RESULTS, pending_divergence, read_json,
                                      retry_flags, steps_on_disk)


def check_model_dir(cfg, checkpoint_record=None, chief=True):
    """Refuses a model_dir whose config.json is unreadable, or that `cfg` would resume with another
    architecture, dataset or other settings than it ran with (resnet_nobn/config.py: an older
    config.json is read `as_today`; what may change is RESUMABLE_FIELDS). Returns the run's
    config.json (None for a new run) and {field: [there, here]}, the changes a resume may make:
    RESUMABLE_FIELDS, and after a divergence the settings of its `retry with:` line to the values
    it advises (`retry_flags`). Without config.json (deleted by hand), the run's settings are
    those its newest checkpoint records (`checkpoint_record()`: a config.json object, or None),
    else those of its results.json: a resume never trains on with others unrecorded."""
    path = os.path.join(cfg.model_dir, CONFIG)
    if os.path.exists(path):
        old = read_json(path)
        if old is None or not isinstance(old.get("model"), dict):
            raise UserError(f"{path} is unreadable, not a JSON object or without a `model` object "
                            "(not a run's config.json); move it away or use a new --model_dir")
    else:
        old, path = _recorded_settings(cfg.model_dir, checkpoint_record)
        if old is None:
            return None, {}
        log(f"{os.path.join(cfg.model_dir, CONFIG)} is missing: the run's settings are "
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
                    f"({said}{'' if path.endswith(CONFIG) else f', as {path} records'})"
                    f"{retry}; re-run with that run's flags or use a new --model_dir")


def _recorded_settings(model_dir, checkpoint_record):
    """(settings, where they were read) of a run directory without config.json: its newest
    checkpoint's record, else its results.json's `config`; (None, None) if neither has one."""
    recorded = checkpoint_record() if checkpoint_record else None
    if recorded is not None:
        return recorded
    path = os.path.join(model_dir, RESULTS)
    config = (read_json(path) or {}).get("config")
    return (config, f"{path} (`config`)") if isinstance(config, dict) and isinstance(
        config.get("model"), dict) else (None, None)


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
    """A config.json value as the message says it: a list as its flag does (`flag_text`, '(none)'
    when empty), anything else as JSON read it (False, 1.0)."""
    return (flag_text(value) or "(none)") if isinstance(value, list) else str(value)


def _text(value, other):
    """`value` in its flag form, with its JSON type when that is all that tells it from `other`."""
    said = _flag_form(value)
    return f"{said} ({type(value).__name__})" if said == _flag_form(other) else said


def finished(cfg):
    """One line saying that `cfg.model_dir` holds this run finished, or None. Finished: its
    config.json is this configuration (`check_model_dir`: another one is refused here, as a run
    would), results.json records step --train_steps evaluated, its newest checkpoint is of that
    step, no divergence is pending and no process holds it. A re-run then has nothing to do, and
    says so without loading TensorFlow; anything else takes the trainer's own path."""
    if cfg.eval_only or not os.path.exists(os.path.join(cfg.model_dir, CONFIG)):
        return None
    check_model_dir(cfg)
    results = read_json(os.path.join(cfg.model_dir, RESULTS)) or {}
    history = [h for h in results.get("history") or [] if isinstance(h, dict)]
    step = results.get("global_step")
    if (step != cfg.train_steps or not history or history[-1].get("step") != step
            or steps_on_disk(os.path.join(cfg.model_dir, CKPT))[:1] != [step]
            or pending_divergence(cfg.model_dir) or holder(cfg.model_dir)):
        return None
    error = history[-1].get("top1_error")
    said = f"{100 * error:.2f}%" if isinstance(error, (int, float)) else "not recorded"
    return (f"{cfg.model_dir} holds this run finished: step {step} of {cfg.train_steps}, top-1 "
            f"error {said} at step {step} (results.json); nothing to train. A larger "
            "--train_steps trains on; --eval_only evaluates it again")


def recorded_standardization(inp, model_dir, chief=True):
    """Gives input `inp` (with --standardize=dataset) the mean and std that results.json of the
    run in `model_dir` records, if it records any: a resumed run goes on with the values it
    trained with (resnet_nobn/data/standardization.py). Values computed again from other data
    than the run's are said, and replaced."""
    used = getattr(inp, "standardization", None)
    if used is None or used.mode != standardization.DATASET:
        return
    was = standardization.recorded(read_json(os.path.join(model_dir, RESULTS)))
    if was is not None and was != used:
        log(f"warning: the training split now gives {used.described()}; the run goes on with "
            f"those its results.json records: {was.described()}", chief)
        inp.standardization = was
