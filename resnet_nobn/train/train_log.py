"""The run's training log: at every log step, the means since the last one of the loss, the rate
and the global norm of the gradient before any clip or AGC, with a clip or AGC the fraction of
those steps it changed, and the global batch's `pooled_spread` and `logit_norm` (how much the
pooled features differ between images, relative to their size; the root-mean-square logit:
resnet_nobn/train/steps.py `batch_statistics`). results.json keeps it (`train_history`, and the
whole run's fraction); TensorBoard shows it, the progress line its gradient."""
import math

HISTORY = "train_history"
BOUND = "grad_bound_fraction"


class TrainLog:
    """The entries of one run (`resume` keeps those of results.json up to its step)."""

    def __init__(self, bounded):
        self.bounded = bounded  # --clip_norm or --agc
        self.entries = []

    def resume(self, results, step):
        """Takes the entries of `results` (results.json as the run found it) up to `step`."""
        self.entries = [e for e in results.get(HISTORY) or ()
                        if isinstance(e, dict) and e.get("step", math.inf) <= step]

    def add(self, step, steps, means, learning_rate):
        """Records `means`, {name: mean over the `steps` steps before `step`} of the training
        loop's sums (resnet_nobn/train/steps.py `LOOP_SUMS`); returns ({TensorBoard tag: value}
        of its gradient, `pooled_spread` and `logit_norm`; the progress line's part: `|grad|
        0.842`, with a bound `|grad| 3.1 (bound 12% of steps)`)."""
        grad_norm, bound = means["grad_norm"], means["bounded_steps"]
        gradient = {"grad_norm": grad_norm, **({BOUND: bound} if self.bounded else {}),
                    "pooled_spread": means["pooled_spread"], "logit_norm": means["logit_norm"]}
        self.entries.append(dict(step=step, steps=steps, loss=means["loss"],
                                 cross_entropy=means["cross_entropy"],
                                 learning_rate=learning_rate, **gradient))
        return gradient, f"|grad| {grad_norm:.3g}" + (
            f" (bound {bound:.0%} of steps)" if self.bounded else "")

    def latest(self):
        """The last entry's gradient values, for an evaluation's record in results.json."""
        last = self.entries[-1] if self.entries else {}
        return {k: last[k] for k in ("grad_norm", BOUND) if k in last}

    def results(self):
        """results.json's part: the entries, and over the whole run the fraction of steps a
        bound changed (with one)."""
        logged = [e for e in self.entries if BOUND in e]
        steps = sum(e["steps"] for e in logged)
        total = {BOUND: sum(e[BOUND] * e["steps"] for e in logged) / steps} if steps else {}
        return {HISTORY: self.entries, **total}
