"""A run's checkpoints on disk: saved, their losses recorded, tracked, deleted and restored in the
order given (the policy that picks that order: resnet_nobn/training/recovery.py).

`model_dir/ckpt/` holds tf.train.CheckpointManager's `ckpt-<step>` files (step 0 included, so a
run that diverges early can restart from its initialisation) and `losses.json`: for each
checkpoint, the training loss of the loop after it, computed with its weights. Each checkpoint
also records the run's settings (`run_config_in_checkpoint`). Only the chief writes into ckpt/;
every other worker saves into a scratch directory of its own, which it deletes at the end.
"""
import collections
import glob
import json
import os
import shutil
import time

import tensorflow as tf

from resnet_nobn.config import TrainConfig
from resnet_nobn.errors import first_line
from resnet_nobn.files import atomic_write_json
from resnet_nobn.training.rundir import CKPT, LOSSES, SCRATCH

KEEP = 5  # checkpoints kept: enough to go back past a blow-up
RECORD = "run_config"  # each checkpoint's record of the run's settings (config.json's object)


def record_loss(ckpt_dir, losses, step, loss):
    """Records the training loss computed with the weights of the checkpoint of `step` into
    `losses` ({step: loss}: ckpt/losses.json as the run holds it), dropping those of later steps
    (none is on disk), and writes ckpt/losses.json whole; returns the new record."""
    losses = {s: l for s, l in losses.items() if s < step}
    losses[step] = loss
    _write_losses(ckpt_dir, losses)
    return losses


def _write_losses(ckpt_dir, losses):
    atomic_write_json(os.path.join(ckpt_dir, LOSSES), {str(s): losses[s] for s in sorted(losses)})


def write_checkpoint_state(ckpt_dir, steps):
    """Rewrites tf.train.CheckpointManager's state file `checkpoint` to track `steps` (oldest
    first; the last is the latest), whatever it said before (it may be damaged). TensorFlow's own
    writer of that file, atomic; CheckpointManager has no public way to be told which
    checkpoints to track, and the v1 name's deprecation notice is not the run's to print.

    Each path gets a timestamp, in order and after the file's `last_preserved_timestamp`: a
    CheckpointManager built on the file keeps in its rotation (`max_to_keep`) only the paths
    stamped after that, so without them it deleted none of these, ever."""
    paths = [f"ckpt-{s}" for s in steps]
    now = time.time()
    stamps = [now - len(paths) + i for i in range(len(paths))]  # only their order is used
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")
    try:
        tf.compat.v1.train.update_checkpoint_state(
            ckpt_dir, paths[-1], paths, all_model_checkpoint_timestamps=stamps,
            last_preserved_timestamp=now - len(paths) - 1)
    finally:
        logger.setLevel(level)


def delete_after(ckpt_dir, step, steps, losses):
    """Deletes every checkpoint file (and loss record) of a step after `step`. `steps`, `losses`:
    the checkpoints' steps and losses as read (RunDir.steps, RunDir.losses). Returns (the steps
    deleted, the losses kept)."""
    gone = [s for s in steps if s > step]
    for s in gone:
        for path in glob.glob(os.path.join(glob.escape(ckpt_dir), f"ckpt-{s}.*")):
            os.remove(path)
    kept = {s: l for s, l in losses.items() if s <= step}
    if gone:
        _write_losses(ckpt_dir, kept)
    return gone, kept


def run_config_in_checkpoint(ckpt_dir, steps):
    """(the run's settings as the newest of the checkpoints `steps` (newest first) records them,
    a config.json object; where) or None (only checkpoints that record none: saved before they
    did, or unreadable)."""
    for step in steps:
        path = os.path.join(ckpt_dir, f"ckpt-{step}")
        try:
            reader = tf.train.load_checkpoint(path)
            return (json.loads(reader.get_tensor(f"{RECORD}/.ATTRIBUTES/VARIABLE_VALUE")),
                    f"the record of {path}")
        except (tf.errors.OpError, ValueError):
            continue
    return None


def nonfinite(variables):
    """Names of the floating-point variables holding a NaN or inf (checked on save and restore)."""
    floats = [v for v in variables if tf.as_dtype(v.dtype).is_floating]
    finite = tf.stack([tf.reduce_all(tf.math.is_finite(v)) for v in floats]).numpy()
    return [v.path if hasattr(v, "path") else v.name for v, ok in zip(floats, finite) if not ok]


# step and path restored; `skipped`: "ckpt-N (why)" of the newer ones passed over; `note`: why a
# re-run would not resume from an explicitly asked checkpoint (or None)
Restored = collections.namedtuple("Restored", "step path skipped note")


class Unusable(Exception):
    """No checkpoint restores: `skipped` names each and why; `unreadable`: all failed to read;
    `steps`: the steps tried."""

    def __init__(self, skipped, unreadable, steps):
        super().__init__("; ".join(skipped))
        self.skipped, self.unreadable, self.steps = skipped, unreadable, steps


def restore_newest(saved, variables, ckpt_dir, order, only=None, state=()):
    """Restores into `saved` (a tf.train.Checkpoint) the first checkpoint of `order` ([(step, why
    to skip it or None)], newest first: recovery.restore_order) that restores whole with finite
    `variables` (the weights) and `state` (the optimizer's, for a run that trains on: the trainer
    never saves a non-finite one, so one is a damaged file, not a divergence); or ckpt-`only`,
    which is restored even if a re-run after a divergence would skip it (`note` says so).
    Returns Restored, or None when `order` holds no checkpoint (of step `only`); raises Unusable
    when none restores. Changes nothing on disk."""
    candidates = [(s, why) for s, why in order if only is None or s == only]
    if not candidates:
        return None
    skipped, unreadable, note = [], 0, None
    for step, why in candidates:
        path = os.path.join(ckpt_dir, f"ckpt-{step}")
        on_the_way = why is not None and os.path.exists(path + ".index")
        if on_the_way and only is not None:
            note, why = f"a re-run after the divergence would skip it: {why}", None
        if why is None:
            try:
                saved.restore(path).assert_existing_objects_matched().expect_partial()
            except Exception as e:  # noqa: BLE001 -- any failure means an unusable checkpoint
                unreadable += 1
                why = first_line(e, 160)
            else:
                if not nonfinite(variables) and not nonfinite(state):
                    return Restored(step, path, skipped, note)
                why = ("its weights are not finite" if nonfinite(variables) else "its optimizer "
                       "state is not finite: a damaged file, training never saves one")
        elif on_the_way:
            why = f"taken on the way to the blow-up: {why}"
        skipped.append(f"ckpt-{step} ({why})")
    raise Unusable(skipped, unreadable == len(skipped), [s for s, _ in candidates])


class Checkpoints:
    """tf.train.CheckpointManager of one run's model and optimizer: `restore` in the order given,
    `track` what a run that trains on keeps, `save`, and the loss recorded with each. `order`:
    the restore order (recovery.restore_order); `losses`: ckpt/losses.json as the start read it
    (RunDir.losses), held here and written whole at each change."""

    def __init__(self, cfg: TrainConfig, model, optimizer, chief, task_id, order=(), losses=None):
        self.cfg, self.model, self.optimizer, self.chief = cfg, model, optimizer, chief
        self.order = list(order)
        self.losses = dict(losses or {})
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
        with tf.device("/cpu:0"):  # the run's settings, saved in each checkpoint
            record = tf.Variable(json.dumps(cfg.to_json()), trainable=False)
        self.saved = tf.train.Checkpoint(model=model, optimizer=optimizer, **{RECORD: record})
        self.directory = os.path.join(cfg.model_dir, CKPT)
        self.scratch = None if chief else os.path.join(cfg.model_dir, SCRATCH, f"worker{task_id}")
        self.manager = tf.train.CheckpointManager(self.saved, self.scratch or self.directory,
                                                  max_to_keep=KEEP)
        self.loss_owed_by = None  # the step of the checkpoint whose loss the next loop measures

    @property
    def step(self):
        return int(self.optimizer.iterations.numpy())

    def restore(self):
        """Restores the first usable checkpoint of `order` (`restore_newest`); returns Restored,
        or None when there is none; raises Unusable. Changes nothing on disk: `track` does, once
        the run is known to go ahead."""
        return restore_newest(self.checkpoint, self.model.variables, self.directory, self.order,
                              state=() if self.cfg.eval_only else self.optimizer.variables)

    def delete_after(self, step, steps):
        """A rollback to ckpt-`step` deletes the checkpoints of `steps` (RunDir.steps) after it,
        and their losses; returns the steps deleted."""
        gone, self.losses = delete_after(self.directory, step, steps, self.losses)
        return gone

    def track(self, step):
        """In a run that trains on from ckpt-`step` (chief only, after any rollback deleted the
        later ones): the manager tracks the restorable checkpoints up to it, whatever its state
        file said, and the loss of the first loop is recorded for it (one saved just before a
        stop had none)."""
        write_checkpoint_state(
            self.directory, [s for s, why in reversed(self.order) if s <= step and why is None])
        self.manager = tf.train.CheckpointManager(self.saved, self.directory, max_to_keep=KEEP)
        self.loss_owed_by = step

    def save(self):
        """Saves a checkpoint of the current step; returns the names of its non-finite weights
        instead (nothing saved: the run has diverged). The loss of the next loop, computed with
        these weights, is recorded with it (`record_loss`)."""
        bad = nonfinite(self.model.variables)
        if bad:
            return bad
        try:
            self.manager.save(checkpoint_number=self.step)
        except BaseException:  # a full disk
            self._discard_partial(self.step)
            raise
        self.loss_owed_by = self.step
        return []

    def _discard_partial(self, step):
        """After a save of `step` that failed: TensorFlow's temporary files go, and so does the
        checkpoint itself unless its index reads (a disk that fills while the index is written
        leaves it empty beside a whole data file: no re-run could restore it, yet it would stand
        as the newest checkpoint)."""
        shutil.rmtree(os.path.join(self.manager.directory, f"ckpt-{step}_temp"), ignore_errors=True)
        path = os.path.join(self.manager.directory, f"ckpt-{step}")
        try:
            tf.train.load_checkpoint(path)
        except (tf.errors.OpError, ValueError):
            for partial in glob.glob(glob.escape(path) + ".*"):
                os.remove(partial)

    def record_loss(self, loss):
        """After a loop: its mean loss, computed from the weights of the checkpoint taken just
        before it, is recorded for that checkpoint."""
        if self.loss_owed_by is not None and self.chief:
            self.losses = record_loss(self.manager.directory, self.losses, self.loss_owed_by, loss)
        self.loss_owed_by = None

    def latest(self):
        """The newest checkpoint's name (`ckpt-N`), or None."""
        last = tf.train.latest_checkpoint(self.directory)
        return os.path.basename(last) if last else None

    def remove_scratch(self):
        """A non-chief worker deletes its scratch checkpoints (and .scratch when it is empty)."""
        if self.scratch is None:
            return
        shutil.rmtree(self.scratch, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(self.scratch))
        except OSError:
            pass
