"""Which checkpoint a run resumes from, and what a diverged run is told: the rollback policy and
its advice, pure (no TensorFlow, no file).

A resume takes the newest checkpoint that restores with finite weights (the trainer tries them in
`restore_order`, newest first, and names each it passes over). After a divergence (diverged.json
pending) it takes the newest taken *before the blow-up*: its loss, recorded with its weights
(ckpt/losses.json), is at most `ln(num_classes)` above the lowest recorded up to it, so not
already on the way up (`on_the_way_up`); else the initialisation, step 0. A run that trains on
from it deletes the checkpoints after it, since it writes its own.
"""
import math

from resnet_nobn.config import TrainConfig
from resnet_nobn.errors import TrainingDiverged
from resnet_nobn.recipes import retry_remedy


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
    record, or None) one taken on the way up too."""
    order = []
    for step in steps:
        why = None
        if step not in indexed:
            why = "its .index file is missing"
        elif diverged is not None:
            why = on_the_way_up(step, losses, num_classes)
        order.append((step, why))
    return order


def rollback_record(diverged, resumed_from):
    """results.json's `rollbacks` entry of a resume from `resumed_from` past `diverged`."""
    return dict(diverged_at=diverged.get("step"), resumed_from=resumed_from,
                retry_with=diverged.get("retry_with"))


def divergence(cfg: TrainConfig, step, what, latest):
    """(diverged.json's record, the TrainingDiverged error) of `what` (the loss, the weights)
    become NaN/inf at `step`; `latest`: the newest checkpoint's name, or None. The record carries
    the `retry with:` advice (resnet_nobn/recipes.py `retry_remedy`) a re-run may follow."""
    advice, change = retry_remedy(cfg)
    kept = (f"re-running resumes from a checkpoint taken before the blow-up (latest: {latest})"
            if latest else "no checkpoint was written")
    record = dict(step=step, what=what, learning_rate=cfg.learning_rate, retry_with=advice)
    return record, TrainingDiverged(f"{what} became NaN/inf at step {step}; {kept}; the advice "
                                    f"below {change}\nretry with: {advice}")
