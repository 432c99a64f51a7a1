"""A disk that fills or a quota that runs out while a run saves, and run directories that are
broken links: one line naming the disk and the path, and nothing already saved is deleted. The
full disk is injected at the write (TensorFlow raises ResourceExhaustedError with the system's
"No space left on device", Python OSError(ENOSPC) or OSError(EDQUOT)), as a real one gives it."""
import errno
import os
import shutil

import pytest
import tensorflow as tf

from resnet_nobn import files
from resnet_nobn.errors import UserError
from resnet_nobn.training import results, rundir, trainer
from tests.helpers import tiny_config

TF_FULL = ("{{function_node __wrapped__SaveV2_dtypes_18_device_/job:localhost/replica:0/task:0/"
           "device:CPU:0}} %s; No space left on device [Op:SaveV2]")


def _run(tmp_path):
    return tiny_config(tmp_path / "run", train_steps=6, checkpoint_every=2, eval_every=2,
                       log_every=2)


def _fail_checkpoint_save(monkeypatch, cfg, at_step, error):
    save = tf.train.CheckpointManager.save

    def failing(self, checkpoint_number=None, **kw):
        if checkpoint_number == at_step:
            raise error(os.path.join(cfg.model_dir, "ckpt", f"ckpt-{at_step}_temp",
                                     "part-00000-of-00001.data-00000-of-00001.tempstate8"))
        return save(self, checkpoint_number=checkpoint_number, **kw)
    monkeypatch.setattr(tf.train.CheckpointManager, "save", failing)


def _checkpoint_full(monkeypatch, cfg):
    _fail_checkpoint_save(monkeypatch, cfg, 4, lambda path: tf.errors.ResourceExhaustedError(
        None, None, TF_FULL % path))


def _checkpoint_quota(monkeypatch, cfg):
    _fail_checkpoint_save(monkeypatch, cfg, 4, lambda path: tf.errors.ResourceExhaustedError(
        None, None, (TF_FULL % path).replace("No space left on device", "Disk quota exceeded")))


def _events_full(monkeypatch, cfg):
    scalar = tf.summary.scalar

    def failing(name, data, step=None, **kw):
        if tf.summary.experimental.get_step() == 4:
            path = os.path.join(cfg.model_dir, "train", "events.out.tfevents.1.host.1.0.v2")
            raise tf.errors.ResourceExhaustedError(None, None, (
                "{{function_node __wrapped__WriteSummary_device_/job:localhost/replica:0/task:0/"
                f"device:CPU:0}}}} {path}; No space left on device\n\tFailed to flush 11 events "
                f"to {path}\n\tCould not flush events file."))
        return scalar(name, data, step, **kw)
    monkeypatch.setattr(tf.summary, "scalar", failing)


def _results_full(monkeypatch, cfg):
    write, calls = results.atomic_write_json, []

    def failing(path, obj):
        if path.endswith("results.json"):
            calls.append(path)
            if len(calls) == 2:  # the evaluation of step 4
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path + ".tmp1")
        return write(path, obj)
    monkeypatch.setattr(results, "atomic_write_json", failing)


@pytest.mark.parametrize("fault, said", [
    (_checkpoint_full, "No space left on device"), (_checkpoint_quota, "Disk quota exceeded"),
    (_events_full, "No space left on device"), (_results_full, "No space left on device")])
def test_a_full_disk_keeps_what_the_new_run_saved_and_names_the_disk(tmp_path, monkeypatch,
                                                                        fault, said):
    cfg = _run(tmp_path)
    fault(monkeypatch, cfg)
    with pytest.raises(UserError) as e:
        trainer.train(cfg)
    msg = str(e.value)
    assert "\n" not in msg and said in msg, msg
    assert "memory" not in msg and "batch_size" not in msg, msg
    assert cfg.model_dir in msg and "the disk mounted at" in msg, msg
    # step 2's checkpoint and results are kept: the run resumes from them
    assert os.path.exists(os.path.join(cfg.model_dir, "ckpt", "ckpt-2.index"))
    assert files.read_json(os.path.join(cfg.model_dir, "results.json"))["global_step"] >= 2
    assert not [f for f in os.listdir(os.path.join(cfg.model_dir, "ckpt")) if "_temp" in f]


def test_a_checkpoint_whose_index_the_full_disk_cut_short_does_not_stand_as_the_newest(
        tmp_path, monkeypatch, capsys):
    """What a real full disk leaves (seen on a 130 KiB tmpfs): ckpt-4's data file whole, its
    index empty, the state file not updated. The line named ckpt-4 the newest checkpoint kept,
    though no re-run could restore it; its files now go, and the same command resumes from
    ckpt-2 with nothing to skip."""
    cfg = _run(tmp_path)
    ckpt, save = os.path.join(cfg.model_dir, "ckpt"), tf.train.CheckpointManager.save

    def cut_short(self, checkpoint_number=None, **kw):
        if checkpoint_number == 4:
            shutil.copy(os.path.join(ckpt, "ckpt-2.data-00000-of-00001"),
                        os.path.join(ckpt, "ckpt-4.data-00000-of-00001"))
            open(os.path.join(ckpt, "ckpt-4.index"), "w").close()
            raise tf.errors.ResourceExhaustedError(
                None, None, TF_FULL % os.path.join(ckpt, "ckpt-4.index"))
        return save(self, checkpoint_number=checkpoint_number, **kw)
    monkeypatch.setattr(tf.train.CheckpointManager, "save", cut_short)
    with pytest.raises(UserError) as e:
        trainer.train(cfg)
    assert "the newest: ckpt-2)" in str(e.value), str(e.value)
    assert rundir.steps_on_disk(ckpt) == [2, 0]
    monkeypatch.undo()
    capsys.readouterr()
    assert trainer.train(cfg)["global_step"] == cfg.train_steps
    out = capsys.readouterr()
    assert "ckpt-2 at step 2" in out.out + out.err and "skipped" not in out.out + out.err


def _out_of_memory(*a, **k):
    raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor with shape")


def test_out_of_memory_after_a_checkpoint_keeps_the_run(tmp_path, monkeypatch):
    cfg = _run(tmp_path)
    loop = trainer.Trainer.train_loop

    def failing(self, iterator, num_steps):
        return _out_of_memory() if self.step >= 4 else loop(self, iterator, num_steps)
    monkeypatch.setattr(trainer.Trainer, "train_loop", failing)
    with pytest.raises(UserError, match="out of memory") as e:
        trainer.train(cfg)
    assert "removed" not in str(e.value)
    assert os.path.exists(os.path.join(cfg.model_dir, "ckpt", "ckpt-4.index"))
    assert os.path.exists(os.path.join(cfg.model_dir, "results.json"))


def test_a_new_run_that_saved_nothing_is_removed_and_says_so(tmp_path, monkeypatch):
    cfg = _run(tmp_path)
    monkeypatch.setattr(trainer.Trainer, "train_loop", _out_of_memory)
    with pytest.raises(UserError, match="out of memory") as e:
        trainer.train(cfg)
    assert not os.path.exists(cfg.model_dir)
    assert f"removed {cfg.model_dir}" in str(e.value), str(e.value)


@pytest.mark.parametrize("make, said", [
    (lambda d: os.symlink(d, d), "loops"),
    (lambda d: os.symlink(os.path.join("nowhere", "x"), d), "points to nowhere/x, which does not exist"),
    (lambda d: (os.makedirs(d), os.symlink("ckpt", os.path.join(d, "ckpt"))), "loops"),
    (lambda d: (os.makedirs(d), os.symlink("/nonexistent/ckpt", os.path.join(d, "ckpt"))),
     "does not exist"),
])
def test_a_model_dir_or_ckpt_that_is_a_broken_link_is_one_line(tmp_path, make, said):
    d = str(tmp_path / "run")
    make(d)
    before = sorted(os.listdir(tmp_path)) + (sorted(os.listdir(d)) if os.path.isdir(d) else [])
    with pytest.raises(UserError) as e:
        trainer.train(tiny_config(d, train_steps=2))
    msg = str(e.value)
    assert "symbolic link" in msg and said in msg and "\n" not in msg, msg
    assert sorted(os.listdir(tmp_path)) + (sorted(os.listdir(d)) if os.path.isdir(d) else []) == before


def test_a_failed_atomic_write_keeps_the_earlier_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = str(tmp_path / "results.json")
    files.atomic_write_json(path, {"global_step": 2})

    def full(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), src)
    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        files.atomic_write_json(path, {"global_step": 4})
    assert files.read_json(path) == {"global_step": 2}
    assert os.listdir(tmp_path) == ["results.json"]
