"""What a start does with the run directory it found: one pure decision (`decide`: new, resume,
rollback, eval-only, finished, or refused, and the restore order) from the RunDir read once
(rundir.py) and the flags.

A resume may change only RESUMABLE_FIELDS (resnet_nobn/config.py) and, after a divergence, the
settings its `retry with:` line advises, to the values it advises; results.json records each
change with its step under `resume_changes`. Which checkpoint a rollback past a divergence takes,
and what the advice allows, is recovery.py's to say. Without config.json (deleted by hand) the
run's settings are those its newest checkpoint records, else those of its results.json: a resume
never trains on with others unrecorded.
"""
import dataclasses
import os

from resnet_nobn.cli import flag_text
from resnet_nobn.config import RESUMABLE_FIELDS, differences
from resnet_nobn.errors import UserError
from resnet_nobn.training import recovery, rundir

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
    order, diverged = recovery.resume_order(run, cfg.model.num_classes)
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
    advice = recovery.advised_flags(run.diverged)
    to = recovery.advised_values(advice)
    refused, changes = [], {}
    for name, there, here in differences(old, cfg.to_json()):
        if name == "eval_only" or (name in ("model_dir", "data_dir") and there and here
                                   and os.path.abspath(str(there)) == os.path.abspath(here)):
            continue  # the same directory, recorded as typed (before paths were made absolute)
        if name in RESUMABLE_FIELDS or recovery.follows(to, name, here):
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


def _flag_form(value):
    """A config.json value as the message says it: a list as its flag does (`flag_text`, '(none)'
    when empty), anything else as JSON read it (False, 1.0)."""
    return (flag_text(value) or "(none)") if isinstance(value, list) else str(value)


def _text(value, other):
    """`value` in its flag form, with its JSON type when that is all that tells it from `other`."""
    said = _flag_form(value)
    return f"{said} ({type(value).__name__})" if said == _flag_form(other) else said
