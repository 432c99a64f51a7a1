"""--profile_steps=START,END: a TensorFlow profiler trace of the steps after START up to END, in
the run's TensorBoard directory (model_dir/train/plugins/profile/<time>/<host>.xplane.pb), which
TensorBoard's Profile tab shows (plugin tensorboard-plugin-profile; docs/benchmarks.md says what
to look at).

The trainer runs several steps per compiled loop; it ends a loop at START and at END
(`Trainer.loop_length`), so that the trace holds whole loops of exactly those steps. The chief
traces its own host: all of its devices with several GPUs; other workers of a multi-worker run
trace nothing.
"""
import os

import tensorflow as tf

from resnet_nobn.training.rundir import TRAIN


def shortfall(profile_steps, start, train_steps):
    """The warning, or None, for --profile_steps=START,END (`profile_steps`, () when off) in a run
    that trains the steps after `start` up to `train_steps`: a trace of none of them (a resume
    after END), or of fewer (END after the last step). TrainConfig refuses START at or after the
    last step."""
    if not profile_steps:
        return None
    first, end = profile_steps
    flag = f"--profile_steps={first},{end}"
    if start >= end:
        return f"{flag}: the run resumes at step {start}, after them; nothing is traced"
    if end > train_steps:
        return (f"{flag}: the run ends at step {train_steps}; the trace holds steps "
                f"{max(first, start) + 1} to {train_steps}")
    return None


class Profiler:
    """Starts the trace before the loop from START (or from a resumed step before END) and stops it
    after the loop that reaches END, or at the end of the run."""

    def __init__(self, cfg, chief):
        self.steps = tuple(cfg.profile_steps) if chief else ()
        self.logdir = os.path.join(cfg.model_dir, TRAIN)
        self.running = False

    def before(self, step):
        """Called before the loop starting at `step`."""
        if self.steps and not self.running and self.steps[0] <= step < self.steps[1]:
            tf.profiler.experimental.start(self.logdir)
            self.running = True

    def after(self, step):
        """Called after the loop ending at `step`."""
        if self.running and step >= self.steps[1]:
            self.stop()

    def stop(self):
        if self.running:
            self.running = False
            tf.profiler.experimental.stop()
