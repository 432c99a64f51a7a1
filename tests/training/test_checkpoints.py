"""Which checkpoint a run restores (resnet_nobn/training/checkpoints.py): the loss record it is judged
by after a divergence covers a checkpoint a run stopped at and was resumed from."""
import math
import os

import pytest

from resnet_nobn import files
from resnet_nobn.training import checkpoints, recovery, rundir
from resnet_nobn.training.trainer import Trainer
from tests.helpers import DIVERGED_RUN, copy_of, tiny_config

pytestmark = pytest.mark.timeout(300)


def test_a_checkpoint_resumed_from_gets_the_loss_of_the_loop_after_it(tmp_path):
    """A run that ends (or is stopped) at ckpt-4 has no loss for it; resumed, its first loop
    trains from ckpt-4's weights. Without that loss, a later divergence skipped ckpt-4 ("no loss
    recorded with its weights") and went back further than it needed."""
    Trainer(tiny_config(tmp_path, train_steps=4, checkpoint_every=2)).run()
    ckpt = str(tmp_path / "ckpt")
    assert sorted(rundir.read(str(tmp_path)).losses) == [0, 2]  # none for the step it ended at
    Trainer(tiny_config(tmp_path, train_steps=8, checkpoint_every=2)).run()
    losses = rundir.read(str(tmp_path)).losses
    assert sorted(losses) == [0, 2, 4, 6], losses
    # a divergence after ckpt-8 with ckpt-6 already on the way up: ckpt-4 is where to resume
    checkpoints.record_loss(ckpt, losses, 6, min(losses.values()) + 100.0)
    files.atomic_write_json(os.path.join(tmp_path, rundir.DIVERGED), {"step": 9})
    order, _ = recovery.resume_order(rundir.read(str(tmp_path)), 10)
    assert [step for step, why in order if why is None] == [4, 2, 0], order


def test_a_nan_loss_of_the_initialisation_does_not_hide_a_later_blow_up():
    """Step 0's loss may be NaN (the first loop blew up; a retry resumes from it): min() over the
    losses then kept the NaN, and no later checkpoint was ever judged on the way up."""
    losses = {0: float("nan"), 100: 1.0, 200: 9.0}
    assert recovery.on_the_way_up(0, losses, 10) is None
    assert recovery.on_the_way_up(100, losses, 10) is None
    assert "above the lowest 1" in recovery.on_the_way_up(200, losses, 10)


def test_after_a_first_loop_divergence_and_its_retry_the_initialisation_has_a_finite_loss(
        diverged_run, tmp_path):
    """The retry trains on from ckpt-0: its first loop's loss replaces the NaN of the loop that
    blew up, which stayed and made every later checkpoint look fine to a second divergence."""
    from resnet_nobn.training import trainer
    run = copy_of(diverged_run[0], tmp_path / "run")  # diverged in its first loop
    assert math.isnan(rundir.read(str(run)).losses[0])
    advice = diverged_run[1].splitlines()[-1].split()[2:]  # retry with: --flag=value ...
    trainer.train(tiny_config(run, **{**DIVERGED_RUN, **{
        t[2:].split("=")[0]: float(t.split("=")[1]) for t in advice}}))
    losses = rundir.read(str(run)).losses
    assert sorted(losses) == [0, 2] and all(map(math.isfinite, losses.values())), losses


def test_the_checkpoint_state_file_tracks_the_steps_given_whatever_it_said(tmp_path):
    """TensorFlow's own writer keeps `ckpt/checkpoint` (as CheckpointManager reads it back): after
    a rollback it names the checkpoints kept, the last the latest, even over a damaged file."""
    import tensorflow as tf
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "checkpoint").write_text("garbage {{{")
    checkpoints.write_checkpoint_state(str(ckpt), [0, 2, 4])
    state = tf.train.get_checkpoint_state(str(ckpt))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
        "ckpt-0", "ckpt-2", "ckpt-4"]
    assert os.path.basename(state.model_checkpoint_path) == "ckpt-4"
    assert 'model_checkpoint_path: "ckpt-4"' in (ckpt / "checkpoint").read_text()  # relative


def test_a_resumed_run_keeps_its_last_checkpoints_only(tmp_path):
    """After a resume the manager rotates the checkpoints of the earlier process out too: with no
    timestamps in the state file it kept none of them in its rotation, so each resume left up to
    KEEP checkpoints behind for good."""
    run_dir = tmp_path / "run"
    for steps in (4, 6, 14):  # a new run, then two resumes
        Trainer(tiny_config(run_dir, train_steps=steps, checkpoint_every=2, eval_every=100)).run()
    saved = sorted(int(f[5:-6]) for f in os.listdir(run_dir / "ckpt") if f.endswith(".index"))
    assert saved == [6, 8, 10, 12, 14][-checkpoints.KEEP:]
