"""The training loop: it learns, resumes exactly, agrees across replicas, keeps the head fixed."""
import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from resnet_nobn import files
from resnet_nobn.errors import TrainingDiverged, UserError
from resnet_nobn.training import trainer as train_lib
from resnet_nobn.training.steps import learning_rate
from resnet_nobn.training.trainer import Trainer
from tests.helpers import check_model_dir, copy_of, tiny_config


def _weights(trainer):
    return [v.numpy() for v in trainer.model.trainable_variables]


def test_learning_rate_schedule_is_the_papers():
    from resnet_nobn.config import TrainConfig
    cfg = TrainConfig()
    lr = [float(learning_rate(s, cfg)) for s in (0, 29_999, 30_000, 49_999, 50_000, 59_999)]
    np.testing.assert_allclose(lr, [0.05, 0.05, 0.005, 0.005, 0.0005, 0.0005], rtol=1e-6)
    imagenet = TrainConfig(learning_rate=0.1, lr_decay_every=10_009, lr_decay_factor=0.94)
    np.testing.assert_allclose([float(learning_rate(s, imagenet)) for s in (0, 10_008, 10_009, 20_018)],
                               [0.1, 0.1, 0.094, 0.1 * 0.94 ** 2], rtol=1e-6)
    warm = TrainConfig(warmup_steps=10)
    assert float(learning_rate(0, warm)) == pytest.approx(0.005)
    assert float(learning_rate(9, warm)) == pytest.approx(0.05)


@pytest.mark.slow
def test_synthetic_training_lowers_the_loss_and_writes_results(tmp_path):
    cfg = tiny_config(tmp_path, train_steps=40, learning_rate=0.05, eval_every=20, log_every=10)
    trainer = Trainer(cfg)
    before = trainer.evaluate()["eval_loss"]
    results = trainer.run()
    after = results["history"][-1]["eval_loss"]
    assert after < 0.8 * before, (before, after)  # the fixed batch is being memorised
    on_disk = json.loads((tmp_path / "results.json").read_text())
    for key in ("dataset", "global_step", "top1_error", "top5_error", "trainable_params",
                "config", "seed", "tf_version", "git_commit", "history"):
        assert key in on_disk
    assert on_disk["global_step"] == 40 and [h["step"] for h in on_disk["history"]] == [20, 40]
    assert on_disk["trainable_params"] == trainer.trainable_params
    train_tags, eval_tags = _summary_tags(tmp_path / "train"), _summary_tags(tmp_path / "eval")
    assert {"loss", "cross_entropy", "learning_rate", "top1_error", "top5_error", "images_per_sec",
            "weight_norm/stem", "weight_norm/stage1", "weight_norm/stage3"} <= train_tags
    assert {"top1_error", "top5_error", "eval_loss"} <= eval_tags


def _summary_tags(logdir):
    tags = set()
    for path in logdir.iterdir():
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            tags.update(v.tag for v in event.summary.value)
    return tags


def test_head_never_changes_and_is_restored_from_the_checkpoint(tmp_path):
    cfg = tiny_config(tmp_path, train_steps=5, learning_rate=0.05)
    trainer = Trainer(cfg)
    head0 = trainer.model.get_layer("head").projection.numpy().copy()
    stem0 = trainer.model.get_layer("stem").kernel.numpy().copy()
    trainer.run()
    np.testing.assert_array_equal(trainer.model.get_layer("head").projection.numpy(), head0)
    assert not np.allclose(trainer.model.get_layer("stem").kernel.numpy(), stem0)
    # evaluation uses the checkpoint's matrix, whatever the freshly built model holds
    fresh = Trainer(cfg)
    fresh.model.get_layer("head").projection.assign(tf.zeros_like(head0))
    fresh.checkpoints.restore()
    np.testing.assert_array_equal(fresh.model.get_layer("head").projection.numpy(), head0)


def _mock_cifar(num_examples=64):
    return tfds.testing.mock_data(num_examples=num_examples)


@pytest.mark.slow
def test_resumed_run_equals_uninterrupted_run_on_tfds_data(tmp_path):
    """Same seed: 3 steps, stop, resume to 8 == 8 steps straight (augmentation and order included)."""
    with _mock_cifar():
        kw = dict(use_synthetic_data=False, data_dir=None, train_steps=8, checkpoint_every=3,
                  learning_rate=0.05, lr_boundaries=(5,), seed=3)
        straight = Trainer(tiny_config(tmp_path / "a", **kw))
        straight.run()
        first = Trainer(tiny_config(tmp_path / "b", **{**kw, "train_steps": 3}))
        first.run()
        resumed = Trainer(tiny_config(tmp_path / "b", **kw))
        assert resumed.checkpoints.restore() is not None and resumed.step == 3
        resumed.run()
    assert resumed.step == straight.step == 8
    for a, b in zip(_weights(straight), _weights(resumed)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    results = json.loads((tmp_path / "b" / "results.json").read_text())
    assert results["global_step"] == 8


@pytest.mark.slow
def test_two_replica_mirrored_run_equals_one_device_run(tmp_path):
    """Keras 3 under MirroredStrategy has open reports of NaN / wrong reductions: compare."""
    assert len(tf.config.list_logical_devices("CPU")) == 2
    with _mock_cifar():
        kw = dict(use_synthetic_data=False, train_steps=5, batch_size=8, learning_rate=0.05,
                  weight_decay=1e-3, seed=1)
        one = Trainer(tiny_config(tmp_path / "one", strategy="one_device", **kw))
        one.run()
        two = Trainer(tiny_config(tmp_path / "two", strategy="mirrored", **kw))
        assert two.strategy.num_replicas_in_sync == 2
        two.run()
    w1, w2 = _weights(one), _weights(two)
    start = _weights(Trainer(tiny_config(tmp_path / "fresh", **{**kw, "use_synthetic_data": True})))
    moved = max(float(np.max(np.abs(a - s))) for a, s in zip(w1, start))
    assert moved > 1e-4  # training really changed the weights
    for a, b in zip(w1, w2):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_batch_that_does_not_split_over_replicas_is_refused(tmp_path):
    with pytest.raises(UserError, match="does not split over 2 replicas"):
        Trainer(tiny_config(tmp_path, strategy="mirrored", batch_size=7))
    assert not tmp_path.exists() or not os.listdir(tmp_path)


@pytest.mark.slow
def test_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path):
    diverging = tiny_config(tmp_path, train_steps=50, checkpoint_every=1, learning_rate=1e8,
                            lr_boundaries=())
    with pytest.raises(TrainingDiverged, match="NaN"):
        Trainer(diverging).run()
    latest = tf.train.latest_checkpoint(str(tmp_path / "ckpt"))
    reader = tf.train.load_checkpoint(latest)
    for name in reader.get_variable_to_shape_map():
        value = reader.get_tensor(name)
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            assert np.all(np.isfinite(value)), name
    # nothing recorded as a result: the checkpoints' training log only, no error
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["history"] == [] and results["top1_error"] is None
    assert results["global_step"] == int(latest.rsplit("-", 1)[1])


def test_eval_only_evaluates_the_latest_checkpoint(tmp_path):
    with _mock_cifar(num_examples=20):
        kw = dict(use_synthetic_data=False, train_steps=3, batch_size=8)
        trained = Trainer(tiny_config(tmp_path, **kw))
        results = trained.run()
        again = train_lib.train(tiny_config(tmp_path, eval_only=True, **kw))
    assert again["global_step"] == 3
    # the whole test split (20 mock images; the last batch is padded and the padding masked)
    assert again["history"][-1]["eval_examples"] == 20
    assert again["top1_error"] == pytest.approx(results["top1_error"])


def test_eval_only_without_a_checkpoint_is_refused(tmp_path):
    with pytest.raises(UserError, match="no checkpoint"):
        train_lib.train(tiny_config(tmp_path, eval_only=True))


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["one_device", "mirrored"])
def test_multi_step_loop_equals_one_step_per_loop(tmp_path, strategy):
    """--steps_per_loop: N steps in one compiled loop, one reduction, end with the same weights
    and the same logged loss as one step per host round-trip."""
    with _mock_cifar():
        kw = dict(use_synthetic_data=False, train_steps=7, batch_size=8, learning_rate=0.05,
                  log_every=7, checkpoint_every=1000, seed=2, strategy=strategy, clip_norm=0.5)
        one = Trainer(tiny_config(tmp_path / "one", steps_per_loop=1, **kw))
        one.run()
        loop = Trainer(tiny_config(tmp_path / "loop", **kw))  # default: log_every = 7 steps a loop
        assert [loop.loop_length(s) for s in (0, 3)] == [7, 4]
        loop.run()
    assert one.step == loop.step == 7
    for a, b in zip(_weights(one), _weights(loop)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    loss = [_scalar(tmp_path / d / "train", "loss") for d in ("one", "loop")]
    assert loss[0] == pytest.approx(loss[1], rel=1e-5)


def _scalar(logdir, tag):
    for path in logdir.iterdir():
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for v in event.summary.value:
                if v.tag == tag:
                    return float(tf.make_ndarray(v.tensor))


# -- resuming, evaluating and the run's record ------------------------------


def _strict_json(path):
    """results.json as strict JSON: a NaN or inf in it fails the test."""
    def refuse(constant):
        raise AssertionError(f"{path} holds {constant}")
    return json.loads(path.read_text(), parse_constant=refuse)


def test_model_dir_with_glob_characters_is_refused_before_anything_is_written(tmp_path):
    model_dir = tmp_path / "run[1]"  # TensorFlow would glob it on restore: never resumable
    with pytest.raises(UserError, match=r"contains \[, \], \* or \?.*use a path without them"):
        train_lib.train(tiny_config(model_dir, train_steps=2))
    assert not model_dir.exists()


# Each field of TrainConfig but `model` and `eval_only`, changed on resume: refused (what the run
# computes; mixed_precision: the checkpoint's optimizer state) or allowed and recorded.
REFUSED_ON_RESUME = dict(dataset="cifar100", use_synthetic_data=False, crop_padding=4, batch_size=16,
                         learning_rate=0.02, lr_boundaries=(5,), lr_decay_factor=0.5,
                         lr_decay_every=3, warmup_steps=2, momentum=0.5, weight_decay=0.0,
                         clip_norm=1.0, agc=0.1, scalar_lr_factor=0.5, max_branch_norm=0.5, seed=1,
                         mixed_precision="float16")
ALLOWED_ON_RESUME = dict(train_steps=9, data_dir="/elsewhere", model_dir="moved", eval_every=2,
                         eval_steps=1, checkpoint_every=2, log_every=2, steps_per_loop=1,
                         strategy="mirrored", xla=True, deterministic=True, profile_steps=[1, 2])
# Fixed on resume too, but each needs another dataset to change alone (tests/data:
# test_standardize.py, test_image_folder.py, test_mixup.py)
FIXED_WITH_THE_DATA = ("standardize", "class_names", "mixup")


def test_every_setting_is_either_fixed_or_allowed_to_change_on_resume(tmp_path):
    import dataclasses
    from resnet_nobn.training import rundir
    from resnet_nobn.config import SCIENTIFIC_FIELDS, TrainConfig
    fields = {f.name for f in dataclasses.fields(TrainConfig)} - {"model", "eval_only"}
    assert set(REFUSED_ON_RESUME) | set(ALLOWED_ON_RESUME) | set(FIXED_WITH_THE_DATA) == fields
    assert set(SCIENTIFIC_FIELDS) <= set(REFUSED_ON_RESUME) | set(FIXED_WITH_THE_DATA)
    assert set(FIXED_WITH_THE_DATA) <= set(SCIENTIFIC_FIELDS)
    cfg = tiny_config(tmp_path, init="skipinit")  # a net with scalars, for --scalar_lr_factor
    files.atomic_write_json(str(tmp_path / "config.json"), cfg.to_json())
    for name, value in REFUSED_ON_RESUME.items():
        with pytest.raises(UserError, match=f"{name}: "):
            check_model_dir(dataclasses.replace(cfg, **{name: value}))
    for name, value in ALLOWED_ON_RESUME.items():
        if name == "model_dir":
            continue
        _, changes = check_model_dir(dataclasses.replace(cfg, **{name: value}))
        assert changes == {name: [json.loads(json.dumps(getattr(cfg, name))), value]}


def test_resume_refuses_changed_settings_and_records_the_allowed_changes(tmp_path):
    kw = dict(train_steps=4, eval_every=4)
    train_lib.train(tiny_config(tmp_path, **kw))
    config, results = (tmp_path / "config.json").read_text(), (tmp_path / "results.json").read_text()
    with _mock_cifar(), pytest.raises(UserError) as refused:
        train_lib.train(tiny_config(tmp_path, train_steps=8, eval_every=4, seed=1, batch_size=16,
                                lr_boundaries=(6,), use_synthetic_data=False))
    message = str(refused.value)
    assert "\n" not in message
    for said in ("seed: 0 there, 1 here", "batch_size: 8 there, 16 here",
                 "lr_boundaries: (none) there, 6 here", "use_synthetic_data: True there, False here"):
        assert said in message, message
    assert "train_steps" not in message  # more steps is an allowed change
    assert (tmp_path / "config.json").read_text() == config
    assert (tmp_path / "results.json").read_text() == results
    # more steps and another evaluation and logging cadence: trained on and recorded with the step
    out = train_lib.train(tiny_config(tmp_path, train_steps=6, eval_every=2, log_every=3))
    assert out["global_step"] == 6 and [h["step"] for h in out["history"]] == [4, 6]
    assert out["resume_changes"] == [
        {"step": 4, "field": "train_steps", "from": 4, "to": 6},
        {"step": 4, "field": "eval_every", "from": 4, "to": 2},
        {"step": 4, "field": "log_every", "from": 1000, "to": 3}]
    assert json.loads((tmp_path / "config.json").read_text())["train_steps"] == 6
    assert _strict_json(tmp_path / "results.json")["resume_changes"] == out["resume_changes"]


def test_run_diverging_in_its_first_loop_can_follow_its_retry_advice(tmp_path):
    kw = dict(train_steps=6, learning_rate=1e9, log_every=6, eval_every=6)
    with pytest.raises(TrainingDiverged) as diverged:
        train_lib.train(tiny_config(tmp_path, **kw))
    from resnet_nobn.training import rundir
    assert not np.isfinite(rundir.read(str(tmp_path)).losses[0])  # blew up at once
    advice = str(diverged.value).splitlines()[-1]
    assert advice.startswith("retry with: ")
    flags = {t[2:].split("=")[0]: float(t.split("=")[1]) for t in advice.split()[2:]}
    # the initial checkpoint is the initialisation: it evaluates ...
    evaluated = train_lib.train(tiny_config(tmp_path, eval_only=True, **kw))
    assert evaluated["global_step"] == 0 and np.isfinite(evaluated["history"][-1]["eval_loss"])
    # ... a learning rate that is not the advice is refused, naming the advice ...
    with pytest.raises(UserError, match=f"only the advised {advice[len('retry with: '):]}"):
        train_lib.train(tiny_config(tmp_path, **{**kw, "learning_rate": 1e-3}))
    # ... and the advised flags train from it
    results = train_lib.train(tiny_config(tmp_path, **{**kw, **flags}))
    assert results["global_step"] == 6 and results["rollbacks"][0]["resumed_from"] == 0
    assert {c["field"] for c in results["resume_changes"]} == set(flags)
    assert all(np.isfinite(h["eval_loss"]) for h in _strict_json(tmp_path / "results.json")["history"])


def _poison(model_dir, step):
    """Writes a NaN into one weight of the checkpoint of `step`, which stays readable."""
    trainer = Trainer(tiny_config(model_dir))
    path = str(model_dir / "ckpt" / f"ckpt-{step}")
    trainer.checkpoints.checkpoint.restore(path).assert_existing_objects_matched()
    kernel = trainer.model.get_layer("stem").kernel
    kernel.assign(np.full(kernel.shape, np.nan, np.float32))
    trainer.checkpoints.checkpoint.write(path)


def test_checkpoint_with_non_finite_weights_is_never_evaluated_or_trained_on(finished_run,
                                                                             tmp_path):
    kw = dict(train_steps=4, checkpoint_every=2, eval_every=2)
    run = copy_of(finished_run, tmp_path / "run")  # 4 steps, checkpoints at 0, 2 and 4
    before = _strict_json(run / "results.json")
    _poison(run, 4)
    # the newest checkpoint skipped, named; the one before it evaluated
    evaluated = train_lib.train(tiny_config(run, eval_only=True, **kw))
    assert evaluated["history"] == [h for h in evaluated["history"] if np.isfinite(h["eval_loss"])]
    assert _strict_json(run / "results.json")["global_step"] == 4
    for step in (0, 2):
        _poison(run, step)
    results = (run / "results.json").read_text()
    for eval_only in (True, False):
        with pytest.raises(UserError, match=r"ckpt-4 \(its weights are not finite\)"):
            train_lib.train(tiny_config(run, eval_only=eval_only, **{**kw, "train_steps": 6}))
    assert (run / "results.json").read_text() == results
    assert before["history"][-1]["step"] == 4


def test_eval_only_adds_an_evaluation_and_changes_nothing_else(tmp_path):
    with _mock_cifar(num_examples=20):
        kw = dict(use_synthetic_data=False, train_steps=3, batch_size=8, eval_every=2)
        train_lib.train(tiny_config(tmp_path, **kw))
        config = (tmp_path / "config.json").read_text()
        before = json.loads((tmp_path / "results.json").read_text())
        with pytest.raises(UserError, match="learning_rate: 0.01 there, 0.3 here; seed: 0 "
                                            "there, 7 here"):
            train_lib.train(tiny_config(tmp_path, eval_only=True, **{**kw, "seed": 7,
                                                                 "learning_rate": 0.3}))
        after = train_lib.train(tiny_config(tmp_path, eval_only=True, eval_steps=1, log_every=5,
                                            **kw))
    assert (tmp_path / "config.json").read_text() == config
    assert after == json.loads((tmp_path / "results.json").read_text())
    assert [h["step"] for h in after["history"]] == [2, 3]
    assert after["history"][-1]["eval_examples"] == 8  # --eval_steps=1: one batch
    for key in set(before) | set(after):
        if key not in ("history", "top1_error", "top5_error"):
            assert after.get(key) == before.get(key), key


@pytest.mark.parametrize("change, message", [
    (dict(train_steps=1), "--train_steps=1 is below step 2 of the run"),
    (dict(mixed_precision="float16"), "mixed_precision: float32 there, float16 here"),
])
def test_resume_that_cannot_continue_the_run_is_refused_naming_why(tmp_path, change, message):
    train_lib.train(tiny_config(tmp_path, train_steps=2))
    files = {p: (tmp_path / p).read_text() for p in ("config.json", "results.json")}
    with pytest.raises(UserError) as refused:
        train_lib.train(tiny_config(tmp_path, **{"train_steps": 4, **change}))
    assert message in str(refused.value) and "corrupt" not in str(refused.value)
    assert {p: (tmp_path / p).read_text() for p in files} == files


def test_a_run_names_the_model_dir_it_trains_in(tmp_path, capsys):
    train_lib.train(tiny_config(tmp_path / "run", train_steps=1))
    assert f"new run in {tmp_path / 'run'}" in capsys.readouterr().out


def test_a_start_decided_before_another_run_ended_there_is_refused(finished_run, tmp_path,
                                                                   monkeypatch):
    """A second launch on a busy model_dir decided its start, then waited for the lock while the
    first run trained on: it restored a checkpoint the first had since rotated out ("corrupt"), or
    trained again over the finished run. It now refuses once it holds the lock."""
    from resnet_nobn.training import rundir
    run = copy_of(finished_run, tmp_path / "run")  # 4 steps, checkpoints at 0, 2 and 4
    real = rundir.locked

    def first_run_ends_meanwhile(model_dir):  # the first process trains on to the end, then unlocks
        monkeypatch.setattr(rundir, "locked", real)
        train_lib.train(tiny_config(run, train_steps=8, checkpoint_every=2, eval_every=2))
        return real(model_dir)

    finished = (run / "results.json").read_text
    monkeypatch.setattr(rundir, "locked", first_run_ends_meanwhile)
    with pytest.raises(UserError, match="changed while this run started .* re-run the same command"):
        train_lib.train(tiny_config(run, train_steps=8, checkpoint_every=2, eval_every=2))
    after = finished()
    assert json.loads(after)["global_step"] == 8
    # re-run: the finished run, nothing trained again
    assert train_lib.train(tiny_config(run, train_steps=8, checkpoint_every=2,
                                       eval_every=2))["global_step"] == 8


def test_a_run_stopped_before_its_first_evaluation_keeps_its_log_and_time(tmp_path, monkeypatch):
    """results.json, where the training log and the loop's time carry over to a resume, was
    written at evaluations only: a run stopped between its checkpoints and its first evaluation
    resumed with neither (its train_history began at the resume, and wall_time_s, a study's
    train time, missed that stretch). Each checkpoint before the last records them too."""
    kw = dict(train_steps=8, checkpoint_every=2, eval_every=6, log_every=1)

    def stopped():
        raise KeyboardInterrupt  # a stop once step 6 is saved, while it is evaluated
    first = Trainer(tiny_config(tmp_path, **kw))
    monkeypatch.setattr(first, "evaluate", stopped)
    with pytest.raises(KeyboardInterrupt):
        first.run()
    monkeypatch.undo()
    before = json.loads((tmp_path / "results.json").read_text())
    assert before["global_step"] == 6 and before["history"] == [] and before["wall_time_s"] > 0
    results = train_lib.train(tiny_config(tmp_path, **kw))  # evaluates 6, trains 7 and 8
    assert [e["step"] for e in results["train_history"]] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert results["wall_time_s"] > before["wall_time_s"]
    assert [h["step"] for h in results["history"]] == [6, 8]
