"""How a run that cannot go on is said: one line (a UserError) per fault, and what a failed new run
leaves behind.

Before the run: a --model_dir (or its ckpt/, train/, eval/) that is a symbolic link that loops
or points to nothing (`check_links`). During it (`explain`): a full disk or an exhausted quota,
wherever a write meets it (a checkpoint, TensorBoard's event files, results.json), named with the
disk and the file; memory exhausted; a file system that refuses the write; a damaged shard of
the data; a peer worker gone. A failing save never deletes what was saved before: a new run's
directory is removed only if it holds nothing a user could want back (`rundir.discard_new_run`),
and the line says so.
"""
import os

import tensorflow as tf

from resnet_nobn.config import TrainConfig
from resnet_nobn.data import inputs
from resnet_nobn.errors import UserError, broken_link, disk_full, unwritable
from resnet_nobn.train import multiworker, rundir

SUBDIRS = (rundir.CKPT,) + rundir.SUMMARIES  # what a run writes into, besides its own files


def check_links(model_dir):
    """UserError if model_dir, or a directory a run writes into it, is a broken symbolic link."""
    for path, flag in [(model_dir, "--model_dir")] + [(os.path.join(model_dir, d), None)
                                                       for d in SUBDIRS]:
        said = broken_link(path, flag)
        if said:
            raise UserError(said)


def explain(e, cfg: TrainConfig, trainer, new):
    """The UserError that says why the run stopped with `e` (an OSError, MemoryError or one of
    TensorFlow's errors), or `e` itself when it is none of the faults above (a bug: its traceback
    is wanted). `trainer`: the run's Trainer (None if it was not made); `new`: whether model_dir
    did not exist before this run."""
    refused = unwritable(e, cfg.model_dir)
    if refused and not isinstance(e, OSError) and not os.path.abspath(refused[0]).startswith(
            os.path.abspath(cfg.model_dir)):
        refused = None  # TensorFlow refused another file (one of the data): not a write of the run
    memory = isinstance(e, (tf.errors.ResourceExhaustedError, MemoryError))
    disk = disk_full(e, cfg.model_dir, "free space there or give another --model_dir")
    if disk or memory or refused:
        left = _left_behind(cfg, trainer, new)
        if disk:
            return UserError(disk + left)
        if memory:
            return UserError(f"out of memory ({type(e).__name__}): lower --batch_size (now "
                             f"{cfg.batch_size}) or --widths (now "
                             f"{','.join(map(str, cfg.model.widths))}){left}")
        where, reason = refused
        return UserError(f"cannot write the run in --model_dir={cfg.model_dir}: {reason} "
                         f"({where}); fix permissions or use another --model_dir{left}")
    damaged = inputs.read_error(e, trainer.input) if trainer is not None else None
    if damaged is not None:  # a shard of a tfds directory read while training
        return damaged
    # a collective failed: a peer worker died or is unreachable
    if (trainer is None or not multiworker.is_multi_worker(trainer.strategy)
            or type(e).__name__ not in multiworker.PEER_ERRORS):
        return e
    trainer.checkpoints.remove_scratch()
    return UserError(multiworker.peer_failure_message(e, trainer.step, cfg.model_dir))


def _left_behind(cfg, trainer, new):
    """What the line adds about model_dir: a new run's directory holding nothing to keep is
    removed (by the chief, which alone writes there), and said so; otherwise what was saved is
    kept and named."""
    if new and trainer is not None and trainer.chief and rundir.discard_new_run(cfg.model_dir):
        return (f"; removed {cfg.model_dir}, which this new run had made and saved nothing in "
                "but its initialisation")
    saved = rundir.steps_on_disk(os.path.join(cfg.model_dir, rundir.CKPT))
    return f"; its checkpoints are kept (the newest: ckpt-{saved[0]})" if saved else ""
