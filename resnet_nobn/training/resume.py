"""What a start does with the run directory it found: one pure decision (`decide`: new, resume,
rollback, eval-only, finished, or refused, and the restore order, `restore_order`) from the RunDir
read once (rundir.py) and the flags.

A resume may change only RESUMABLE_FIELDS (resnet_nobn/config.py) and, after a divergence, the
settings its `retry with:` line advises, to the values it advises; results.json records each
change with its step under `resume_changes` (`advised`: those that followed the advice). Without
config.json (deleted by hand) the run's settings are those its newest checkpoint records, else
those of its results.json: a resume never trains on with others unrecorded.
"""
import dataclasses
import math
import os

from resnet_nobn.data import image_folder
from resnet_nobn.cli import flag_text
from resnet_nobn.config import RESUMABLE_FIELDS, differences
from resnet_nobn.errors import UserError
from resnet_nobn.training import rundir

NEW, RESUME, ROLLBACK, EVAL_ONLY, FINISHED = "new", "resume", "rollback", "eval_only", "finished"


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a start does (`decide`). `action`: NEW, RESUME, ROLLBACK (resume past the pending
    divergence `diverged`), EVAL_ONLY or FINISHED (nothing to train); `run_config`: the run's
    recorded settings (None: a new run); `settings_from`: where they were read when config.json
    is missing (else None); `changes`: {field: [there, here]} this resume makes; `order`: the
    restore order, [(step, why to skip it or None)] newest first; `run`: the RunDir it read."""
    action: str
    run: rundir.RunDir
    run_config: dict = None
    settings_from: str = None
    changes: dict = dataclasses.field(default_factory=dict)
    order: tuple = ()
    diverged: dict = None


def decide(run: rundir.RunDir, cfg):
    """The Plan of a start of `cfg` in the run directory `run` (pure: no file, no TensorFlow).
    Refuses (UserError) --eval_only without a run, --train_steps below the newest checkpoint it
    would resume from, and a run directory whose config.json is unreadable or that `cfg` would
    resume with another architecture, dataset or other settings than it ran with (an older
    config.json is read `as_today`). Whether a checkpoint restores is known only once it is
    tried: the hub tries `order` and may still find none (a new run), or restore an older one
    than the newest (and refuse a --train_steps below it itself)."""
    if cfg.eval_only and not run.exists:
        raise UserError(f"--eval_only: {cfg.model_dir} does not exist; train first")
    run_config, settings_from, changes = _settings(run, cfg)
    order, diverged = resume_order(run, cfg.model.num_classes)
    plan = dict(run=run, run_config=run_config, settings_from=settings_from, changes=changes,
                order=tuple(order), diverged=diverged)
    if cfg.eval_only:
        return Plan(EVAL_ONLY, **plan)
    if not run.steps:
        return Plan(NEW, **plan)
    if _finished(run, cfg, diverged):
        return Plan(FINISHED, **plan)
    newest = next((step for step, why in order if why is None), None)
    if newest is not None and newest > cfg.train_steps:
        raise below_the_run(cfg, newest)
    return Plan(ROLLBACK if diverged is not None else RESUME, **plan)


def below_the_run(cfg, step):
    """The UserError of --train_steps below the step `step` a resume would start from."""
    return UserError(f"--train_steps={cfg.train_steps} is below step {step} of the run in "
                     f"{cfg.model_dir}; give --train_steps={step} or more to train on, or "
                     "--eval_only to evaluate it")


def _finished(run, cfg, diverged):
    """Whether `run` holds `cfg`'s run finished: its config.json is there, results.json records
    step --train_steps evaluated, its newest checkpoint is of that step, no divergence is pending
    and no process holds it."""
    results = run.results or {}
    history = [h for h in results.get("history") or [] if isinstance(h, dict)]
    step = results.get("global_step")
    return (run.config is not None and step == cfg.train_steps and bool(history)
            and history[-1].get("step") == step and list(run.steps[:1]) == [step]
            and diverged is None and run.held_by is None)


def finished_line(plan, cfg):
    """The one line a re-run of a FINISHED plan prints instead of training."""
    results = plan.run.results
    step = results.get("global_step")
    error = results["history"][-1].get("top1_error")
    said = f"{100 * error:.2f}%" if isinstance(error, (int, float)) else "not recorded"
    return (f"{cfg.model_dir} holds this run finished: step {step} of {cfg.train_steps}, top-1 "
            f"error {said} at step {step} (results.json); nothing to train. A larger "
            "--train_steps trains on; --eval_only evaluates it again")


def _settings(run, cfg):
    """(the run's recorded settings or None, where they were read if not config.json, the
    changes `cfg` makes to them); UserError where it may not make them."""
    path = os.path.join(cfg.model_dir, rundir.CONFIG)
    old, where = run.config, None
    if run.config_unreadable or (old is not None and not isinstance(old.get("model"), dict)):
        raise UserError(f"{path} is unreadable, not a JSON object or without a `model` object "
                        "(not a run's config.json); move it away or use a new --model_dir")
    if old is None:
        old, where = run.checkpoint_settings or _in_results(run)
        if old is None:
            return None, None, {}
    advice = rundir.advised_flags(run.diverged)
    to = dict(t[2:].split("=", 1) for t in advice)  # the advised values
    refused, changes = [], {}
    for name, there, here in differences(old, cfg.to_json()):
        if name == "eval_only" or (name in ("model_dir", "data_dir") and there and here
                                   and os.path.abspath(str(there)) == os.path.abspath(here)):
            continue  # the same directory, recorded as typed (before paths were made absolute)
        if name in RESUMABLE_FIELDS or (name in to and _same(to[name], here)):
            changes[name] = [there, here]
        else:
            refused.append((name, f"{name}: {_text(there, here)} there, {_text(here, there)} here"))
    if not refused:
        return old, where, changes
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
                    f"({said}{'' if where is None else f', as {where} records'})"
                    f"{retry}; re-run with that run's flags or use a new --model_dir")


def _in_results(run):
    """(settings, where) of results.json's `config`, or (None, None)."""
    config = (run.results or {}).get("config")
    return (config, f"{os.path.join(run.model_dir, rundir.RESULTS)} (`config`)") if isinstance(
        config, dict) and isinstance(config.get("model"), dict) else (None, None)


def resume_order(run: rundir.RunDir, num_classes):
    """(the restore order, the pending divergence or None) of the run directory `run`."""
    diverged = rundir.pending(run.diverged, run.results)
    return restore_order(run.steps, run.indexed, run.losses, diverged, num_classes), diverged


def on_the_way_up(step, losses, num_classes):
    """Why the checkpoint at `step` was taken on the way to a blow-up, or None if it was not
    (`losses`: {step: the loss recorded with its weights}). The one of step 0 holds the
    initialisation, whatever loss its first loop ended with: a retry with other flags may always
    start from it."""
    if step == 0:
        return None
    loss = losses.get(step)
    if loss is None:
        return "no loss recorded with its weights"
    if not math.isfinite(loss):
        return f"loss {loss}"
    best = min((l for s, l in losses.items() if s <= step and l is not None and math.isfinite(l)),
               default=loss)  # a NaN (step 0's, whatever its loop gave) compares as no minimum
    if loss > best + math.log(num_classes):
        return f"loss {loss:.3g}, already {loss - best:.3g} above the lowest {best:.3g}"
    return None


def restore_order(steps, indexed, losses, diverged, num_classes):
    """[(step, reason to skip it or None)] of the checkpoints `steps` (newest first): one without
    its .index file (not in `indexed`) is skipped; after a divergence (`diverged`, the pending
    record, or None) one taken on the way up too.

    A resume takes the newest checkpoint that restores with finite weights (the trainer tries
    them in this order and names each it passes over). After a divergence it takes the newest
    taken *before the blow-up*: its loss, recorded with its weights (ckpt/losses.json), is at most
    `ln(num_classes)` above the lowest recorded up to it, so not already on the way up
    (`on_the_way_up`); else the initialisation, step 0. A run that trains on from it deletes the
    checkpoints after it, since it writes its own."""
    order = []
    for step in steps:
        why = None
        if step not in indexed:
            why = "its .index file is missing"
        elif diverged is not None:
            why = on_the_way_up(step, losses, num_classes)
        order.append((step, why))
    return order


def advised(change):
    """Whether a results.json `resume_changes` entry {step, field, from, to} is one that a resume
    made to follow the retry advice: a resume changes a setting outside RESUMABLE_FIELDS only to
    its advised value. An image folder's images (`image_folder.train_images`, ...) are no
    setting."""
    return (isinstance(change, dict) and isinstance(change.get("field"), str)
            and change["field"] not in RESUMABLE_FIELDS
            and not change["field"].startswith(f"{image_folder.NAME}."))


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
