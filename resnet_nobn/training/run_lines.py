"""The lines a run says of itself: its plan before the first step, the estimate of its time once
a loop is timed, and the closing line with its results and the command that exports it.

Pure functions of the configuration and what the trainer measured (resnet_nobn/training/trainer.py
prints the first two, main.py the last); the progress and evaluation lines are the trainer's own.
"""
import os
import shlex

from resnet_nobn.config import TrainConfig
from resnet_nobn.console import hms, printable
from resnet_nobn.data.datasets import DATASETS
from resnet_nobn.training import rundir


def plan_line(cfg: TrainConfig, train_images, params, step, timed_at):
    """The line a run prints before its first step: what it trains, on what, how long, and
    when its time is estimated (`timed_at`, the step after the first timed loop; None: the run
    ends before one)."""
    left = cfg.train_steps - step
    where = f"steps {step + 1:,}-{cfg.train_steps:,}" if step else f"{left:,} steps"
    epochs = left * cfg.batch_size / train_images if train_images else 0
    data = (f"synthetic images shaped as {cfg.dataset}'s" if train_images is None else
            f"{cfg.dataset} ({train_images:,} training images, "
            f"{f'{epochs:,.1f}' if epochs >= 1 else f'{epochs:.2g}'} epochs)")
    blocks = "/".join(map(str, cfg.model.blocks_per_stage))
    evals = evaluations_left(cfg, step)
    when = (f"a time estimate follows step {timed_at:,}" if timed_at is not None else
            "too few steps to time before the end")
    return (f"plan: {where} of batch {cfg.batch_size} on {data}; a network of {params:,} "
            f"trainable parameters (widths {','.join(map(str, cfg.model.widths))}, {blocks} "
            f"blocks per stage, --init={cfg.model.init}, --norm={cfg.model.norm}); "
            f"{evals} evaluation{'s' * (evals != 1)}; {when}")


def train_images(cfg: TrainConfig, inp):
    """The number of training images the run of `cfg` reads from its input `inp` (None:
    synthetic data, or not known)."""
    if cfg.use_synthetic_data:
        return None
    return (inp.folder or {}).get("train_images") or DATASETS[cfg.dataset].num_train


def timed_at(cfg: TrainConfig, step, loop_length):
    """The step a run at `step` is timed at for its estimate (`loop_length`: the trainer's, the
    steps of the loop starting at a step): the end of its second loop, the first whose time holds
    no compiling; None where the run ends before it."""
    after_first = step + loop_length(step)
    if after_first >= cfg.train_steps:
        return None
    second = after_first + loop_length(after_first)
    return second if second < cfg.train_steps else None


def estimate_line(cfg: TrainConfig, step, steps, seconds):
    """The line after the first timed loop (`steps` steps in `seconds`, ending at `step`): the
    time the steps left take at that speed. An estimate: evaluations and checkpoints are not
    in it, and the speed can change (other load, a slower input)."""
    left = cfg.train_steps - step
    per_step = seconds / max(steps, 1)
    evals = evaluations_left(cfg, step)
    total = left * per_step
    return (f"estimate: about {hms(total) if total >= 10 else f'{total:.1f} s'} for the "
            f"{left:,} steps left, at the "
            f"{per_step:.3g} s a step of steps {step - steps + 1:,}-{step:,} (the "
            f"{evals} evaluation{'s' * (evals != 1)} and the checkpoints not counted)")


def evaluations_left(cfg: TrainConfig, step):
    """How many evaluations a run at `step` still makes: every --eval_every steps and at the end."""
    due = cfg.train_steps // cfg.eval_every - step // cfg.eval_every
    return due + (cfg.train_steps % cfg.eval_every != 0 and step < cfg.train_steps)


def closing_line(model_dir):
    """The line a run that trained or evaluated ends with: where its results are, and the
    command that exports it (run/export.py)."""
    path = os.path.abspath(model_dir)
    export = shlex.quote(path.rstrip(os.sep) + "_export")
    return printable(f"done: results in {os.path.join(path, rundir.RESULTS)}, checkpoints and "
                     f"TensorBoard summaries in {path}; export with: python run/export.py "
                     f"--model_dir={shlex.quote(path)} --export_dir={export}")
