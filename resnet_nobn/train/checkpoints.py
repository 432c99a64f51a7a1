"""Which checkpoint of a run: saved on schedule, recorded with the loss of the step after it, and
restored by one rule for a resume, --eval_only and the export (resnet_nobn/export/writer.py).

`model_dir/ckpt/` holds tf.train.CheckpointManager's `ckpt-<step>` files (step 0 included, so a
run that diverges early can restart from its initialisation) and `losses.json`: for each
checkpoint, the training loss of the step after it, i.e. computed with the checkpoint's weights.
When a run diverges, the trainer writes `model_dir/diverged.json` (the step and the `retry with:`
advice). The checkpoint restored (`restore_newest`) is:

  * the newest that restores with finite weights, skipping (and naming) any whose files are
    missing or unreadable or whose weights are not; if `ckpt/` holds checkpoint files but none
    restores, the run stops (it never silently starts again at step 0);
  * after a divergence, the newest taken *before the blow-up*: its weights are finite (the
    trainer only saves finite weights) and its loss is at most `ln(num_classes)` above the lowest
    loss recorded up to it, so not already on the way up (`exploded`), or else the
    initialisation (step 0, whatever the loss of the loop that blew up). A run that trains on
    from it deletes the checkpoints after it (`Checkpoints.commit`), since it writes its own.

Only the chief writes into model_dir/ckpt; every other worker saves into a scratch directory of
its own (multi-worker checkpointing needs every worker to save), which it deletes at the end.
"""
import collections
import glob
import math
import os
import shutil

import tensorflow as tf

from resnet_nobn.config import TrainConfig
from resnet_nobn.console import log
from resnet_nobn.errors import TrainingDiverged, UserError, first_line
from resnet_nobn.recipes import retry_remedy
from resnet_nobn.train import rundir

KEEP = 5  # checkpoints kept: enough to go back past a blow-up
LOSSES = "losses.json"

# --------------------------------------------------------------------------------------------
# the losses record and the resume order (files only)


def read_losses(ckpt_dir):
    """{step: training loss at that checkpoint} (a missing or damaged record reads as empty)."""
    raw = rundir.read_json(os.path.join(ckpt_dir, LOSSES)) or {}
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
    rundir.atomic_write_json(os.path.join(ckpt_dir, LOSSES),
                             {str(s): losses[s] for s in sorted(losses)})


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
    best = min((l for s, l in losses.items() if s <= step and l is not None and math.isfinite(l)),
               default=loss)  # a NaN (step 0's, whatever its loop gave) compares as no minimum
    if loss > best + math.log(num_classes):
        return f"loss {loss:.3g}, already {loss - best:.3g} above the lowest {best:.3g}"
    return None


def resume_order(ckpt_dir, model_dir, num_classes):
    """[(step, reason to skip it or None)] newest first, and the divergence record (or None): the
    pending one (rundir.pending_divergence), not one results.json records as rolled back already."""
    diverged = rundir.pending_divergence(model_dir) or None
    losses = read_losses(ckpt_dir)
    order = []
    for step in rundir.steps_on_disk(ckpt_dir):
        why = None
        if not os.path.exists(os.path.join(ckpt_dir, f"ckpt-{step}.index")):
            why = "its .index file is missing"
        elif diverged is not None:
            why = exploded(step, losses, num_classes)
        order.append((step, why))
    return order, diverged


def write_checkpoint_state(ckpt_dir, steps):
    """Rewrites tf.train.CheckpointManager's state file `checkpoint` to track `steps` (oldest
    first; the last is the latest), whatever it said before (it may be damaged). TensorFlow's own
    writer of that file, atomic; CheckpointManager has no public way to be told which
    checkpoints to track, and the v1 name's deprecation notice is not the run's to print."""
    paths = [f"ckpt-{s}" for s in steps]
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")
    try:
        tf.compat.v1.train.update_checkpoint_state(ckpt_dir, paths[-1], paths)
    finally:
        logger.setLevel(level)


def delete_after(ckpt_dir, step):
    """Deletes every checkpoint file (and loss record) of a step after `step`; returns the steps."""
    gone = [s for s in rundir.steps_on_disk(ckpt_dir) if s > step]
    for s in gone:
        for path in glob.glob(os.path.join(glob.escape(ckpt_dir), f"ckpt-{s}.*")):
            os.remove(path)
    if gone:
        _write_losses(ckpt_dir, {s: l for s, l in read_losses(ckpt_dir).items() if s <= step})
    return gone


# --------------------------------------------------------------------------------------------
# restoring: the one walk over the resume order


def nonfinite(variables):
    """Names of the floating-point variables holding a NaN or inf (checked on save and restore)."""
    floats = [v for v in variables if tf.as_dtype(v.dtype).is_floating]
    finite = tf.stack([tf.reduce_all(tf.math.is_finite(v)) for v in floats]).numpy()
    return [v.path if hasattr(v, "path") else v.name for v, ok in zip(floats, finite) if not ok]


# step and path restored; `skipped`: "ckpt-N (why)" of the newer ones passed over; `note`: why a
# re-run would not resume from an explicitly asked checkpoint (or None); the resume order and the
# divergence record it was picked from
Restored = collections.namedtuple("Restored", "step path skipped note order diverged")


class Unusable(Exception):
    """No checkpoint restores: `skipped` names each and why; `unreadable`: all failed to read;
    `steps`: the steps tried."""

    def __init__(self, skipped, unreadable, steps):
        super().__init__("; ".join(skipped))
        self.skipped, self.unreadable, self.steps = skipped, unreadable, steps


def restore_newest(saved, variables, model_dir, num_classes, only=None):
    """Restores into `saved` (a tf.train.Checkpoint) the checkpoint of model_dir/ckpt a re-run
    resumes from: in `resume_order`, the first that restores whole with finite `variables`; or
    ckpt-`only`, which is restored even if a re-run after a divergence would skip it (`note` says
    so). Returns Restored, or None when ckpt/ holds no checkpoint (of step `only`); raises
    Unusable when none restores. Changes nothing on disk."""
    ckpt_dir = os.path.join(model_dir, rundir.CKPT)
    order, diverged = resume_order(ckpt_dir, model_dir, num_classes)
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
                if not nonfinite(variables):
                    return Restored(step, path, skipped, note, order, diverged)
                why = "its weights are not finite"
        elif on_the_way:
            why = f"taken on the way to the blow-up: {why}"
        skipped.append(f"ckpt-{step} ({why})")
    raise Unusable(skipped, unreadable == len(skipped), [s for s, _ in candidates])


# --------------------------------------------------------------------------------------------
# the trainer's checkpoints


class Checkpoints:
    """tf.train.CheckpointManager of one run's model and optimizer, with the rules above."""

    def __init__(self, cfg: TrainConfig, model, optimizer, chief, task_id):
        self.cfg, self.model, self.optimizer, self.chief = cfg, model, optimizer, chief
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
        self.directory = os.path.join(cfg.model_dir, rundir.CKPT)
        self.scratch = None if chief else os.path.join(cfg.model_dir, rundir.SCRATCH,
                                                               f"worker{task_id}")
        self.manager = tf.train.CheckpointManager(self.checkpoint, self.scratch or self.directory,
                                                  max_to_keep=KEEP)
        self.rollbacks = []  # the divergences this run resumed from
        self._unrecorded = None
        self._restored = None  # what `restore` picked, for `commit`

    @property
    def step(self):
        return int(self.optimizer.iterations.numpy())

    def restore(self):
        """Restores the checkpoint a re-run resumes from (`restore_newest`); returns its path, or
        None when ckpt/ holds no checkpoint file at all. Changes nothing on disk: `commit` does,
        once the run is known to go ahead."""
        try:
            self._restored = restore_newest(self.checkpoint, self.model.variables,
                                            self.cfg.model_dir, self.cfg.model.num_classes)
        except Unusable as e:
            if e.steps == [0]:
                # a kill while the first save ran: nothing was trained yet
                log(f"skipped {e.skipped[0]}: its save was cut short; the initialisation is made "
                    "again from --seed", self.chief)
                return None
            what = "unreadable (corrupt, or of another architecture)" if e.unreadable else "unusable"
            raise UserError(f"no checkpoint in {self.directory} can be restored, all are {what} "
                            f"({e}); move {self.directory} away or use a new --model_dir") from None
        if self._restored is None:
            return None
        if self._restored.skipped:
            log(f"skipped {', '.join(self._restored.skipped)}", self.chief)
        return self._restored.path

    def commit(self):
        """After `restore`, in a run that trains (chief only): a rollback past a divergence deletes
        the checkpoints after the one restored and is added to `rollbacks` (the trainer writes it to
        results.json, then `clear_divergence` deletes diverged.json); the manager tracks
        the restorable checkpoints up to it, whatever its state file said; the loss of the first
        loop is recorded for it (one saved just before a stop had none)."""
        if not self.chief or self._restored is None:
            return
        ckpt_dir, step = self.directory, self._restored.step
        diverged = self._restored.diverged
        if diverged is not None:
            gone = delete_after(ckpt_dir, step)
            self.rollbacks.append(dict(diverged_at=diverged.get("step"), resumed_from=step,
                                       retry_with=diverged.get("retry_with")))
            log(f"the run diverged at step {diverged.get('step')}: resuming from ckpt-{step}, "
                f"taken before the blow-up" + (f" (deleted ckpt-{gone} after it)" if gone else ""),
                self.chief)
        write_checkpoint_state(
            ckpt_dir, [s for s, why in reversed(self._restored.order) if s <= step and why is None])
        self.manager = tf.train.CheckpointManager(self.checkpoint, ckpt_dir, max_to_keep=KEEP)
        self._unrecorded = step  # the first loop trains from its weights: its loss is recorded

    def clear_divergence(self):
        """After `commit` and once results.json records the rollback (chief only): deletes
        diverged.json, which a run that trains on from a checkpoint has resumed past. Killed in
        between, the run reads as resuming, not diverged (rundir.pending_divergence), and the next
        resume neither rolls back again nor records the rollback twice."""
        if self.chief and self._restored is not None:
            path = os.path.join(self.cfg.model_dir, rundir.DIVERGED)
            if os.path.exists(path):
                os.remove(path)

    def save(self):
        """Saves a checkpoint of the current step; refuses non-finite weights (the run has
        diverged). The loss of the next step, computed with these weights, is recorded with it
        (`record_loss`)."""
        if nonfinite(self.model.variables):
            raise self.diverged("the weights")
        self.manager.save(checkpoint_number=self.step)
        self._unrecorded = self.step

    def record_loss(self, loss):
        """After a loop: its mean loss, computed from the weights of the checkpoint taken just
        before it on, is recorded for that checkpoint."""
        if self._unrecorded is not None and self.chief:
            record_loss(self.manager.directory, self._unrecorded, loss)
        self._unrecorded = None

    def diverged(self, what):
        """The TrainingDiverged error of this step; records it in model_dir for the re-run."""
        cfg = self.cfg
        advice, change = retry_remedy(cfg)
        last = tf.train.latest_checkpoint(self.directory)
        kept = (f"re-running resumes from a checkpoint taken before the blow-up (latest: "
                f"{os.path.basename(last)})" if last else "no checkpoint was written")
        if self.chief and os.path.isdir(cfg.model_dir):
            rundir.record_divergence(cfg.model_dir, self.step, what, cfg.learning_rate, advice)
        return TrainingDiverged(f"{what} became NaN/inf at step {self.step}; {kept}; the advice "
                                f"below {change}\nretry with: {advice}")

    def remove_scratch(self):
        """A non-chief worker deletes its scratch checkpoints (and .scratch when it is empty)."""
        if self.scratch is None:
            return
        shutil.rmtree(self.scratch, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(self.scratch))
        except OSError:
            pass
