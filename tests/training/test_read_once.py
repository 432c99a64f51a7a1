"""A start reads the run directory once (resnet_nobn/training/rundir.py `read`): config.json,
results.json and diverged.json each opened once, ckpt/ globbed once, a resume past a divergence
included; what the trainer writes after is written, not read back (ckpt/losses.json, held for
the whole run, included)."""
import glob
import json
import os

import pytest

from resnet_nobn.training import trainer
from tests.helpers import DIVERGED_RUN, copy_of, count_reads, tiny_config

pytestmark = pytest.mark.timeout(300)


def _start_reads(monkeypatch, cfg, whole_run=False):
    """{file name: times opened for reading} and the globs of ckpt/, from the start of `cfg`'s
    run until its first training loop (the start's reads, not the loop's), or to its end."""
    globs, real_glob = [], glob.glob

    def counting_glob(pattern, *a, **k):
        if os.path.join(os.path.abspath(cfg.model_dir), "ckpt") in os.path.abspath(pattern):
            globs.append(pattern)
        return real_glob(pattern, *a, **k)

    class Started(Exception):
        pass

    def first_loop(self, iterator, n):
        raise Started

    reads = count_reads(monkeypatch)
    monkeypatch.setattr(glob, "glob", counting_glob)
    if whole_run:
        trainer.train(cfg)
    else:
        monkeypatch.setattr(trainer.Trainer, "train_loop", first_loop)
        with pytest.raises(Started):
            trainer.train(cfg)
    monkeypatch.undo()
    return reads, globs


def test_a_resume_past_a_divergence_reads_each_file_of_the_run_directory_once(
        diverged_run, tmp_path, monkeypatch):
    kw = DIVERGED_RUN
    run = copy_of(diverged_run[0], tmp_path / "run")
    advice = diverged_run[1].splitlines()[-1].split()[2:]  # retry with: --flag=value ...
    retry = tiny_config(run, **{**kw, **{t[2:].split("=")[0]: float(t.split("=")[1])
                                         for t in advice}})
    reads, globs = _start_reads(monkeypatch, retry)
    for name in ("config.json", "results.json", "diverged.json", "losses.json"):
        assert reads[name] <= 1, (name, reads)
    assert reads["config.json"] == reads["diverged.json"] == reads["losses.json"] == 1, reads
    # one glob to read ckpt/ (the rollback's deletion globs the files of each step it deletes)
    assert len([g for g in globs if g.endswith("ckpt-*")]) == 1, globs
    results = json.load(open(os.path.join(run, "results.json")))
    assert len(results["rollbacks"]) == 1 and not os.path.exists(run / "diverged.json")


def test_a_run_reads_its_checkpoints_losses_once_however_often_it_saves(tmp_path, monkeypatch):
    """Each save's loss record rewrites ckpt/losses.json whole from what the run holds; it was
    read back at every save."""
    trainer.train(tiny_config(tmp_path, train_steps=2, checkpoint_every=1))
    reads, _ = _start_reads(monkeypatch, tiny_config(tmp_path, train_steps=6, checkpoint_every=1),
                            whole_run=True)
    assert reads["losses.json"] == 1, reads
    losses = json.load(open(os.path.join(tmp_path, "ckpt", "losses.json")))
    assert sorted(map(int, losses)) == [0, 1, 2, 3, 4, 5], losses  # none yet for ckpt-6
