"""results.json, a run's record of its outcome: one object per run, built when it begins from
what it found there, and rewritten whole after every evaluation; this module alone writes it.

It holds the last evaluation and the history of every evaluation, the training log (`TrainLog`),
where and how fast the run ran, the versions and git commit (read once per process:
provenance.py), the rollbacks past divergences, the settings each resume changed
(`resume_changes`) and the run's configuration.
"""
import math
import os

from resnet_nobn.files import atomic_write_json
from resnet_nobn.training.rundir import RESULTS, RESUME_CHANGES, ROLLBACKS


HISTORY = "train_history"
BOUND = "grad_bound_fraction"


class TrainLog:
    """The run's training log: at every log step, the means since the last one of the loss, the
    rate and the global norm of the gradient before any clip or AGC, with a clip or AGC the
    fraction of those steps it changed, and the global batch's `pooled_spread` and `logit_norm`
    (how much the pooled features differ between images, relative to their size; the
    root-mean-square logit: resnet_nobn/training/steps.py `batch_statistics`). results.json keeps
    it (`train_history`, and the whole run's fraction); TensorBoard shows it, the progress line
    its gradient. `resume` keeps the entries of results.json up to the step resumed."""

    def __init__(self, bounded):
        self.bounded = bounded  # --clip_norm or --agc
        self.entries = []

    def resume(self, results, step):
        """Takes the entries of `results` (results.json as the run found it) up to `step`."""
        self.entries = [e for e in results.get(HISTORY) or ()
                        if isinstance(e, dict) and e.get("step", math.inf) <= step]

    def add(self, step, steps, means, learning_rate):
        """Records `means`, {name: mean over the `steps` steps before `step`} of the training
        loop's sums (resnet_nobn/training/steps.py `LOOP_SUMS`); returns ({TensorBoard tag: value}
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


class Results:
    """The results.json object of one run. `found`: results.json as the run found it ({} for a
    new run); `facts`: what the run runs on and with, fixed for the run ({key: value}, written
    after the timing); `inputs`: what its data records (written after the training log);
    `config`: the configuration recorded; `bounded`: whether a clip or AGC bounds the gradient
    (its training log records how often)."""

    def __init__(self, model_dir, found, facts, inputs, config, bounded, eval_only=False):
        self.path = os.path.join(model_dir, RESULTS)
        self.found = found or {}
        self.facts, self.inputs, self.config, self.eval_only = facts, inputs, config, eval_only
        self.history = [h for h in self.found.get("history") or []
                        if isinstance(h, dict) and "step" in h]
        self.wall_before = float(self.found.get("wall_time_s") or 0.0)  # of the runs before
        self.rollbacks = list(self.found.get(ROLLBACKS) or [])
        self.changes = list(self.found.get(RESUME_CHANGES) or [])
        self.log = TrainLog(bounded)

    def keep_history(self, keep):
        """Keeps the evaluations `keep(step)` is true of."""
        self.history = [h for h in self.history if keep(h["step"])]

    def train_on(self, step, rollback=None, changes=None):
        """A run that trains on from `step` keeps the evaluations and the training log up to it,
        and records what its resume does: `rollback`, the `rollbacks` entry of a rollback to
        `step` past a divergence (resnet_nobn/training/recovery.py `roll_back`: a later start
        finds it); `changes` ({field: [there, here]}), the settings it changes, but those
        recorded already. Returns the entries of `changes` added ({step, field, from, to})."""
        self.keep_history(lambda s: s <= step)
        self.log.resume(self.found, step)
        if rollback is not None:
            self.rollbacks.append(rollback)
        new = [c for c in ({"step": step, "field": k, "from": there, "to": here}
                           for k, (there, here) in (changes or {}).items())
               if c not in self.changes]
        self.changes += new
        return new

    def evaluated(self, step):
        return any(h["step"] == step for h in self.history)

    def add_evaluation(self, entry):
        self.history.append(entry)

    def write(self, step, images_per_sec, wall_time):
        """Writes results.json (atomically) at `step` and returns it. An --eval_only run that
        found one changes only its evaluations in it."""
        history = sorted(self.history, key=lambda h: h["step"])
        last = history[-1] if history else {}
        errors = {"top1_error": last.get("top1_error"), "top5_error": last.get("top5_error")}
        if self.eval_only and self.found:  # an evaluation changes nothing about the training
            results = dict(self.found, history=history, **errors)
        else:
            results = {"dataset": self.config["dataset"], "global_step": step, **errors,
                       "images_per_sec": images_per_sec, "wall_time_s": wall_time,
                       **self.facts, "history": history, **self.log.results(), **self.inputs,
                       ROLLBACKS: self.rollbacks, RESUME_CHANGES: self.changes,
                       "config": self.config}
        atomic_write_json(self.path, results)
        return results


# -- results.json read back -------------------------------------------------------------------

def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _kind(v):
    return {str: "a string", list: "a list", dict: "an object", bool: "a boolean"}.get(
        type(v), type(v).__name__)


def is_run_config(config):
    """Whether `config` (a config.json object, or results.json's copy) is a run's: what the study's
    report reads from it is there."""
    m = config.get("model") if isinstance(config, dict) else None
    return (isinstance(m, dict) and isinstance(config.get("dataset"), str)
            and all(isinstance(m.get(k), str) for k in ("norm", "init", "head"))
            and isinstance(m.get("blocks_per_stage"), list)
            and all(isinstance(b, int) for b in m["blocks_per_stage"]))


def _out_of_range(key, value):
    """Why `value` of `key` is none a run writes (an error rate outside [0, 1], NaN; a negative
    time, speed or count), or None. A test loss may be NaN or inf: an evaluation of huge
    finite weights overflows, and the run's record says so."""
    if value is None or key == "eval_loss":
        return None
    if key.endswith("_error") and not 0 <= value <= 1:
        return f"{key} is {value}, not an error rate in [0, 1]"
    if not value >= 0 or math.isinf(value):  # NaN fails the comparison
        return f"{key} is {value}, not a finite number >= 0"
    return None


def problem(results):
    """Why `results` (a results.json object, read back) is not a run's results.json, or None if it
    is: the types its readers (the study's report, an export's model card) rely on."""
    step = results.get("global_step")
    if not isinstance(step, int) or isinstance(step, bool):
        return (f"global_step is {_kind(step)}, not an integer" if step is not None else
                "no global_step: not a run's results.json")
    for k in ("top1_error", "top5_error", "wall_time_s", "images_per_sec"):
        if results.get(k) is not None and not _number(results[k]):
            return f"{k} is {_kind(results[k])}, not a number"
        said = _out_of_range(k, results.get(k))
        if said:
            return said
    history = results.get("history", [])
    if not isinstance(history, list):
        return f"history is {_kind(history)}, not a list"
    for h in history:
        if not isinstance(h, dict) or not isinstance(h.get("step"), int):
            return "a history row without an integer step"
        for k in ("top1_error", "top5_error", "eval_loss", "eval_examples"):
            if h.get(k) is not None and not _number(h[k]):
                return f"history step {h['step']}: {k} is {_kind(h[k])}, not a number"
            said = _out_of_range(k, h.get(k))
            if said:
                return f"history step {h['step']}: {said}"
    config = results.get("config")
    if config is not None and not is_run_config(config):
        return "its config is not a run's configuration"
    return None
