"""The start-up decision (resnet_nobn/training/resume.py `decide`): new, resume, rollback, eval-only,
finished or refused, and the restore order, from hand-made snapshots of a run directory
(rundir.RunDir): pure, no file read, no TensorFlow."""
import dataclasses
import math
import os
import subprocess
import sys

import pytest

from resnet_nobn.errors import UserError
from resnet_nobn.training import recovery, resume, rundir
from resnet_nobn.training.rundir import RunDir
from tests.helpers import ROOT, tiny_config

MODEL_DIR = "/nonexistent/run"  # never read: decide touches no file


def _cfg(**kw):
    return tiny_config(MODEL_DIR, **kw)


def _run(cfg, steps=(4, 2, 0), results=None, **kw):
    """A run directory of `cfg` with ckpt-`steps` (all with their .index) and a finite loss each."""
    return RunDir(MODEL_DIR, exists=True, config=cfg.to_json(), results=results,
                  steps=tuple(steps), indexed=frozenset(steps),
                  losses={s: 2.0 - s / 10 for s in steps}, **kw)


def _finished_at(step):
    return {"global_step": step, "history": [{"step": step, "top1_error": 0.5}]}


def test_an_empty_directory_is_a_new_run_and_eval_only_there_is_refused():
    cfg = _cfg()
    plan = resume.decide(RunDir(MODEL_DIR), cfg)
    assert (plan.action, plan.order, plan.run_config, plan.changes) == (resume.NEW, (), None, {})
    with pytest.raises(UserError, match="--eval_only: .* does not exist; train first"):
        resume.decide(RunDir(MODEL_DIR), dataclasses.replace(cfg, eval_only=True))
    # a directory with its config.json but no checkpoint yet: new, with its settings checked
    assert resume.decide(_run(cfg, steps=()), cfg).action == resume.NEW


def test_a_run_with_checkpoints_resumes_newest_first_and_is_finished_only_when_all_says_so():
    cfg = _cfg(train_steps=4)
    plan = resume.decide(_run(cfg), dataclasses.replace(cfg, train_steps=8))
    assert plan.action == resume.RESUME
    assert plan.order == ((4, None), (2, None), (0, None))
    assert plan.changes == {"train_steps": [4, 8]}  # a resumable field
    assert resume.decide(_run(cfg, results=_finished_at(4)), cfg).action == resume.FINISHED
    # each of these is not finished: another step evaluated, a live process holding it, a
    # divergence pending; a checkpoint newer than the record is past --train_steps: refused
    with pytest.raises(UserError, match="--train_steps=4 is below step 6 of the run in "):
        resume.decide(_run(cfg, steps=(6, 4), results=_finished_at(4)), cfg)
    for run in (_run(cfg, results=_finished_at(2)),
                _run(cfg, results=_finished_at(4), held_by="pid 1 on host h"),
                _run(cfg, results=_finished_at(4), diverged={"step": 4})):
        assert resume.decide(run, cfg).action != resume.FINISHED, run
    assert resume.decide(_run(cfg, results=_finished_at(4)),
                         dataclasses.replace(cfg, eval_only=True)).action == resume.EVAL_ONLY


def test_a_pending_divergence_rolls_back_past_the_checkpoints_on_the_way_up():
    cfg = _cfg(train_steps=8)
    diverged = {"step": 9, "retry_with": "--learning_rate=0.005"}
    run = dataclasses.replace(_run(cfg, steps=(8, 6, 4, 2, 0), diverged=diverged),
                              losses={0: float("nan"), 2: 1.0, 4: 0.9, 6: 9.0, 8: math.inf})
    plan = resume.decide(run, dataclasses.replace(cfg, learning_rate=0.005))
    assert plan.action == resume.ROLLBACK and plan.diverged == diverged
    assert [s for s, why in plan.order if why is None] == [4, 2, 0]
    assert "above the lowest" in dict(plan.order)[6] and dict(plan.order)[8] == "loss inf"
    assert plan.changes == {"learning_rate": [0.01, 0.005]}  # the advised value only
    # --train_steps is compared with the checkpoint it resumes from, not those it skips
    assert resume.decide(run, dataclasses.replace(cfg, learning_rate=0.005, train_steps=5)
                         ).action == resume.ROLLBACK
    with pytest.raises(UserError, match="only the advised --learning_rate=0.005 may change"):
        resume.decide(run, dataclasses.replace(cfg, learning_rate=0.02))
    # results.json records the rollback already (killed before diverged.json went): no rollback
    # again, no checkpoint skipped, and the advised change still allowed
    recorded = dataclasses.replace(run, results={"rollbacks": [
        {"diverged_at": 9, "resumed_from": 4, "retry_with": diverged["retry_with"]}]})
    plan = resume.decide(recorded, dataclasses.replace(cfg, learning_rate=0.005))
    assert plan.action == resume.RESUME and plan.diverged is None
    assert all(why is None for _, why in plan.order)


def test_a_new_divergence_where_the_last_one_was_is_pending_though_its_rollback_is_recorded():
    """A re-run without the advice rolls back and, trained alike, diverges at the same step with
    the same advice: by step and advice alone its record read as the last rollback's, so the
    advised re-run resumed from the checkpoint on the way up that the first rollback skipped.
    diverged.json's id (recovery.write_divergence), which the rollback records, tells them apart;
    records of before the id are told by step and advice, as they were."""
    cfg = _cfg(train_steps=8)
    advice = "--learning_rate=0.005"
    rolled = {"diverged_at": 9, "resumed_from": 0, "retry_with": advice, "divergence_id": "a"}
    run = dataclasses.replace(_run(cfg, steps=(8, 0), results={"rollbacks": [rolled]}),
                              losses={0: 2.0, 8: float("nan")})
    for diverged, action in (({"step": 9, "retry_with": advice, "id": "b"}, resume.ROLLBACK),
                             ({"step": 9, "retry_with": advice, "id": "a"}, resume.RESUME),
                             ({"step": 9, "retry_with": advice}, resume.ROLLBACK)):
        plan = resume.decide(dataclasses.replace(run, diverged=diverged),
                             dataclasses.replace(cfg, learning_rate=0.005))
        assert plan.action == action, diverged
        assert [s for s, why in plan.order if why is None] == ([0] if action == resume.ROLLBACK
                                                                else [8, 0])
    old = {k: v for k, v in rolled.items() if k != "divergence_id"}  # both without an id
    assert recovery.pending({"step": 9, "retry_with": advice}, {"rollbacks": [old]}) is None


def test_a_checkpoint_without_its_index_file_is_skipped_with_the_reason():
    cfg = _cfg()
    run = dataclasses.replace(_run(cfg), indexed=frozenset({2, 0}))
    assert resume.decide(run, cfg).order[0] == (4, "its .index file is missing")


def test_what_a_start_refuses_is_said_before_anything_is_built():
    cfg = _cfg()
    with pytest.raises(UserError, match="config.json is unreadable"):
        resume.decide(RunDir(MODEL_DIR, exists=True, config_unreadable=True), cfg)
    with pytest.raises(UserError, match="a different architecture .*widths"):
        resume.decide(_run(_cfg(widths=(8, 16, 64))), cfg)
    with pytest.raises(UserError, match="other settings .*momentum"):
        resume.decide(_run(_cfg(momentum=0.5)), cfg)


def test_without_config_json_the_settings_are_the_checkpoints_record_else_results_json():
    cfg, other = _cfg(), _cfg(momentum=0.5)
    bare = dataclasses.replace(_run(cfg), config=None)
    recorded = dataclasses.replace(bare, checkpoint_settings=(cfg.to_json(), "the record of X"))
    plan = resume.decide(recorded, cfg)
    assert plan.settings_from == "the record of X" and plan.run_config == cfg.to_json()
    with pytest.raises(UserError, match="other settings .*as the record of X records"):
        resume.decide(recorded, other)
    in_results = dataclasses.replace(bare, results={"config": cfg.to_json()})
    assert resume.decide(in_results, cfg).settings_from.endswith("results.json (`config`)")
    assert resume.decide(bare, other).run_config is None  # nothing records any: unchecked


def test_the_decision_loads_no_tensorflow():
    """The command line decides before TensorFlow loads (resnet_nobn/training/main.py)."""
    code = ("import sys; from resnet_nobn.training import resume, rundir; "
            "assert 'tensorflow' not in sys.modules, 'tensorflow loaded'")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_directory_recorded_as_typed_is_no_change_when_it_names_the_same_one(monkeypatch):
    """Runs of before config.json's absolute paths recorded --data_dir and --model_dir as typed:
    resumed from the same directory, they change nothing; from another, the change is recorded."""
    monkeypatch.chdir("/")
    cfg = _cfg(data_dir="/work/data")
    typed = _run(cfg)
    typed = dataclasses.replace(typed, config={**typed.config, "data_dir": "work/data",
                                               "model_dir": MODEL_DIR.lstrip("/")})
    assert resume.decide(typed, cfg).changes == {}
    monkeypatch.chdir("/tmp")
    assert resume.decide(typed, cfg).changes == {"data_dir": ["work/data", "/work/data"],
                                                  "model_dir": ["nonexistent/run", MODEL_DIR]}
