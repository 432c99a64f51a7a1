"""What a divergence leaves behind, pure (no TensorFlow, no file): diverged.json's record with its
`retry with:` advice, and the error the run ends with. A re-run rolls back past it to the
checkpoint resume.py's `restore_order` gives, and results.json records the rollback (results.py).
"""
from resnet_nobn.config import TrainConfig
from resnet_nobn.errors import TrainingDiverged
from resnet_nobn.recipes import retry_remedy


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
