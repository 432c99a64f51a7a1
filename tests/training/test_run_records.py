"""What a run directory records is what the run trained with: a deleted config.json is made up
for by the checkpoint's own record, a damaged optimizer state is a damaged checkpoint (not a
divergence) and a diverged.json that is no divergence record marks nothing diverged."""
import json
import os

import pytest

from resnet_nobn import files
from resnet_nobn.errors import TrainingDiverged, UserError
from resnet_nobn.study import launcher, report
from resnet_nobn.training import recovery, rundir, trainer
from tests.helpers import copy_of, poison_optimizer_slots, tiny_config


def test_a_run_without_config_json_resumes_only_with_the_settings_its_checkpoint_records(
        finished_run, tmp_path):
    d = str(copy_of(finished_run, tmp_path / "run"))
    os.remove(os.path.join(d, "config.json"))
    before = open(os.path.join(d, "results.json")).read()
    with pytest.raises(UserError, match=r"batch_size: 8 there, 16 here") as e:
        trainer.train(tiny_config(d, train_steps=6, checkpoint_every=2, eval_every=2,
                                  batch_size=16))
    assert "\n" not in str(e.value)
    assert open(os.path.join(d, "results.json")).read() == before  # nothing misrecorded
    # with the run's own settings it resumes, and config.json is written again
    results = trainer.train(tiny_config(d, train_steps=6, checkpoint_every=2, eval_every=2))
    assert results["global_step"] == 6 and results["config"]["batch_size"] == 8
    assert files.read_json(os.path.join(d, "config.json"))["batch_size"] == 8


def test_nan_in_the_optimizer_state_alone_is_a_damaged_checkpoint_not_a_divergence(
        finished_run, tmp_path, capsys):
    d = str(copy_of(finished_run, tmp_path / "run"))
    poison_optimizer_slots(os.path.join(d, "ckpt", "ckpt-4"))
    try:
        results = trainer.train(tiny_config(d, train_steps=6, checkpoint_every=2, eval_every=2))
    except TrainingDiverged as e:
        pytest.fail(f"reported as a divergence: {e}")
    out = capsys.readouterr().out
    assert "skipped ckpt-4 (its optimizer state is not finite" in out, out
    assert "resumed from" in out and "ckpt-2 at step 2" in out, out
    assert results["global_step"] == 6
    assert not os.path.exists(os.path.join(d, rundir.DIVERGED))


@pytest.mark.parametrize("garbage", ["garbage{", "[]", '{"retry_with": "--agc=0.16"}',
                                     '{"step": "x"}'])
def test_a_diverged_json_that_is_no_record_marks_nothing_diverged(finished_run, tmp_path, garbage):
    d = str(copy_of(finished_run, tmp_path / "run"))
    results = files.read_json(os.path.join(d, "results.json"))
    results["global_step"] = 2  # a partial run: it has not reached train_steps
    files.atomic_write_json(os.path.join(d, "results.json"), results)
    with open(os.path.join(d, rundir.DIVERGED), "w") as f:
        f.write(garbage)
    assert recovery.pending_divergence(d) is None
    (run,) = report.load_runs(str(tmp_path))
    assert run["status"] == "partial" and run["diverged"] is None
    assert "Diverged" not in report.markdown_table(report.summarize([run]))
    cfg = tiny_config(d, train_steps=4, checkpoint_every=2, eval_every=2)
    assert launcher.run_state(cfg) == "partial"
    assert json.loads(json.dumps(recovery.retry_flags(d))) == []
