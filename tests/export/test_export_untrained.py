"""An export never passes the initialisation off as a trained network: a run whose only usable
checkpoint is ckpt-0 (it diverged in its first loop) is refused in one line, unless
--checkpoint=0 asks for the initial weights."""
import os

import pytest

from resnet_nobn.errors import TrainingDiverged, UserError
from resnet_nobn.export import writer
from resnet_nobn.training import trainer
from tests.helpers import run_main, tiny_config


@pytest.mark.slow
def test_a_run_that_diverged_in_its_first_loop_is_not_exported_as_trained(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(TrainingDiverged):
        trainer.train(tiny_config(run_dir, train_steps=8, steps_per_loop=4, log_every=4,
                                  learning_rate=1e6))
    p = run_main("export.py", f"--model_dir={run_dir}", f"--export_dir={tmp_path / 'exp'}")
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "ckpt-0" in lines[0] and "initialisation" in lines[0], p.stderr
    assert "--checkpoint=0" in lines[0] and "retry with" in lines[0], p.stderr
    assert not (tmp_path / "exp").exists()
    # asked for, the initial weights are exported
    assert writer.export(str(run_dir), str(tmp_path / "init"), checkpoint=0,
                         log=lambda _: None) == 0
    assert os.path.exists(tmp_path / "init" / "model.keras")
    with pytest.raises(UserError, match="initialisation"):
        writer.export(str(run_dir), str(tmp_path / "again"), log=lambda _: None)


def test_a_run_whose_trained_checkpoints_are_all_damaged_names_them(tmp_path):
    run_dir = tmp_path / "run"
    trainer.train(tiny_config(run_dir, train_steps=4, checkpoint_every=2, eval_every=4))
    for step in (2, 4):  # truncated, as a full disk or a copy cut short leaves them
        os.truncate(run_dir / "ckpt" / f"ckpt-{step}.data-00000-of-00001", 100)
    with pytest.raises(UserError) as e:
        writer.export(str(run_dir), str(tmp_path / "exp"), log=lambda _: None)
    assert "the later ones cannot be restored: ckpt-4 (" in str(e.value), e.value
    assert "ckpt-2 (" in str(e.value) and "train it on" not in str(e.value)
    assert not (tmp_path / "exp").exists()
