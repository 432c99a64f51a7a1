"""results.json, a run's record of its outcome: one object per run, built when it begins from
what it found there, and rewritten whole after every evaluation; this module alone writes it.

It holds the last evaluation and the history of every evaluation, the training log
(train_log.py), where and how fast the run ran, the versions and git commit (read once per
process: provenance.py), the rollbacks past divergences, the settings each resume changed
(`resume_changes`) and the run's configuration.
"""
import os

from resnet_nobn.files import atomic_write_json
from resnet_nobn.train.rundir import RESULTS, RESUME_CHANGES, ROLLBACKS


class Results:
    """The results.json object of one run. `found`: results.json as the run found it ({} for a
    new run); `facts`: what the run runs on and with, fixed for the run ({key: value}, written
    after the timing); `inputs`: what its data records (written after the training log);
    `config`: the configuration recorded."""

    def __init__(self, model_dir, found, facts, inputs, config, eval_only=False):
        self.path = os.path.join(model_dir, RESULTS)
        self.found = found or {}
        self.facts, self.inputs, self.config, self.eval_only = facts, inputs, config, eval_only
        self.history = [h for h in self.found.get("history") or []
                        if isinstance(h, dict) and "step" in h]
        self.wall_before = float(self.found.get("wall_time_s") or 0.0)  # of the runs before
        self.rollbacks = list(self.found.get(ROLLBACKS) or [])
        self.changes = list(self.found.get(RESUME_CHANGES) or [])

    def keep_history(self, keep):
        """Keeps the evaluations `keep(step)` is true of (a resume: those up to its step)."""
        self.history = [h for h in self.history if keep(h["step"])]

    def evaluated(self, step):
        return any(h["step"] == step for h in self.history)

    def add_evaluation(self, entry):
        self.history.append(entry)

    def add_rollback(self, record):
        self.rollbacks.append(record)

    def add_changes(self, step, changes):
        """Records {field: [there, here]}, the settings a resume at `step` changes, but those
        recorded already; returns the entries added ({step, field, from, to})."""
        new = [c for c in ({"step": step, "field": k, "from": there, "to": here}
                           for k, (there, here) in changes.items()) if c not in self.changes]
        self.changes += new
        return new

    def write(self, step, train_log, images_per_sec, wall_time):
        """Writes results.json (atomically) at `step` and returns it: `train_log`, the training
        log's part (TrainLog.results). An --eval_only run that found one changes only its
        evaluations in it."""
        history = sorted(self.history, key=lambda h: h["step"])
        last = history[-1] if history else {}
        errors = {"top1_error": last.get("top1_error"), "top5_error": last.get("top5_error")}
        if self.eval_only and self.found:  # an evaluation changes nothing about the training
            results = dict(self.found, history=history, **errors)
        else:
            results = {"dataset": self.config["dataset"], "global_step": step, **errors,
                       "images_per_sec": images_per_sec, "wall_time_s": wall_time,
                       **self.facts, "history": history, **train_log, **self.inputs,
                       ROLLBACKS: self.rollbacks, RESUME_CHANGES: self.changes,
                       "config": self.config}
        atomic_write_json(self.path, results)
        return results
