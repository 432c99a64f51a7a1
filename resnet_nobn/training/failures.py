"""How a run that cannot go on is said: one line (a UserError) per fault; cleaning up what it
leaves behind, and saying so, is the trainer's.

Before the run (`check_model_dir`): a --model_dir that is empty, a glob pattern or a file, or
(it or its ckpt/, train/, eval/) a symbolic link that loops or points to nothing. During it
(`explain`): a full disk or an exhausted quota, wherever a write meets it (a checkpoint,
TensorBoard's event files, results.json), named with the disk and the file; memory exhausted; a
file system that refuses the write; bfloat16 on a CPU without bfloat16 convolutions (AVX2 only); a
damaged shard of the data; a peer worker gone.
"""
import os

import tensorflow as tf

from resnet_nobn.config import TrainConfig
from resnet_nobn.data import inputs
from resnet_nobn.errors import UserError, broken_link, disk_full, first_line, unwritable
from resnet_nobn.training.rundir import CKPT, SUMMARIES

SUBDIRS = (CKPT,) + SUMMARIES  # what a run writes into, besides its own files
# a collective failed with one of these: a peer worker died or is unreachable
PEER_ERRORS = ("UnavailableError", "AbortedError", "CancelledError", "DeadlineExceededError",
               "InternalError", "UnknownError")


def check_model_dir(model_dir):
    """UserError if model_dir cannot hold a run: empty, a glob pattern to TensorFlow, a file, or
    (it or a directory a run writes into it) a broken symbolic link."""
    if not model_dir.strip():
        raise UserError("--model_dir is empty; give the directory of the run")
    if any(c in model_dir for c in "[]*?"):  # TensorFlow globs the checkpoint path on restore
        raise UserError(f"--model_dir={model_dir} contains [, ], * or ?, which TensorFlow reads "
                        "as a glob pattern (its checkpoints could never be restored); use a path "
                        "without them (renaming the directory keeps its run)")
    for path, flag in [(model_dir, "--model_dir")] + [(os.path.join(model_dir, d), None)
                                                       for d in SUBDIRS]:
        said = broken_link(path, flag)
        if said:
            raise UserError(said)
    if os.path.exists(model_dir) and not os.path.isdir(model_dir):
        raise UserError(f"--model_dir={model_dir} is a file, not a directory; give another path")


def lower(cfg: TrainConfig, names=("batch_size", "blocks_per_stage", "widths")):
    """The fix of a memory refusal: `lower --batch_size (now 8), --blocks_per_stage (now 9,9,9)
    or --widths (now ...)`, the settings of `cfg` in `names` (those that drive the run's size: the
    activations grow with the batch, the depth and the widths, the weights with the depth and the
    widths squared), the first the one to lower first."""
    def now(name):
        v = getattr(cfg, name) if name == "batch_size" else getattr(cfg.model, name)
        return ",".join(map(str, v)) if isinstance(v, tuple) else v
    said = [f"--{name} (now {now(name)})" for name in names]
    return "lower " + (", ".join(said[:-1]) + " or " if len(said) > 1 else "") + said[-1]


def peer_gone(e, multi_worker):
    """Whether `e` is a failed collective of a multi-worker run: a peer worker died or is gone."""
    return multi_worker and type(e).__name__ in PEER_ERRORS


def explain(e, cfg: TrainConfig, inp=None, peer=None):
    """(the UserError that says why the run stopped with `e`, an OSError, MemoryError or one of
    TensorFlow's errors, or `e` itself when it is none of the faults above: a bug, its traceback
    is wanted; whether the fault ends the run where a new run's directory is cleaned up: a full
    disk, memory, a refused write, whose line the trainer ends with what it left behind).
    `inp`: the run's input (None if not made yet); `peer`: (step, or None before the first step
    (the run was being built); newest checkpoint's name or None) when a peer worker is gone
    (`peer_gone`), else None."""
    refused = _refused(e, cfg)
    disk = disk_full(e, cfg.model_dir, "free space there or give another --model_dir")
    if disk:
        return UserError(disk), True
    if isinstance(e, (tf.errors.ResourceExhaustedError, MemoryError)):
        return UserError(f"out of memory ({type(e).__name__}): {lower(cfg)}"), True
    if refused:
        where, reason = refused
        return UserError(f"cannot write the run in --model_dir={cfg.model_dir}: {reason} "
                         f"({where}); fix permissions or use another --model_dir"), True
    if cfg.mixed_precision == "bfloat16" and "could not create a primitive descriptor" in str(e):
        return UserError("--mixed_precision=bfloat16: this CPU's TensorFlow (oneDNN) has no "
                         "bfloat16 convolution (it needs AVX-512); train without the flag here "
                         "(float32), or in bfloat16 on a GPU"), True
    damaged = inputs.read_error(e, inp) if inp is not None else None
    if damaged is not None:  # a shard of a tfds directory read while training
        return damaged, False
    if peer is None:
        return e, False
    step, latest = peer
    resume_from = (os.path.join(cfg.model_dir, CKPT, latest) if latest
                   else "the beginning (no checkpoint yet)")
    when = f"near step {step}" if step is not None else "before the first step"
    return UserError(f"another worker failed or became unreachable {when} "
                     f"({type(e).__name__}: {first_line(e)}); restart every worker with the same "
                     f"command to resume from {resume_from}"), False


def _refused(e, cfg):
    """(where, reason) of a write of the run the file system refused, or None."""
    refused = unwritable(e, cfg.model_dir)
    if refused and not isinstance(e, OSError) and not os.path.abspath(refused[0]).startswith(
            os.path.abspath(cfg.model_dir)):
        return None  # TensorFlow refused another file (one of the data): not a write of the run
    return refused
