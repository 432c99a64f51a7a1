"""The gradient's global norm before any clip or AGC, and the fraction of steps a bound changed:
in the log, TensorBoard and results.json, computed as by hand, the same on 2 replicas."""
import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from resnet_nobn.training.trainer import Trainer
from tests.helpers import tiny_config


def test_first_logged_norm_is_the_first_steps_gradient_norm(tmp_path):
    """One step of SGD without momentum moves the weights by -lr * g, so ||g|| is ||w_1 - w_0||
    / lr; the run logs the norm at every step (log_every=1), before any bound."""
    cfg = tiny_config(tmp_path, train_steps=1, log_every=1, learning_rate=0.05, momentum=0.0,
                      seed=2)
    trainer = Trainer(cfg)
    start = [v.numpy().astype("float64") for v in trainer.model.trainable_variables]
    trainer.run()
    moved = np.sqrt(sum(np.sum((v.numpy() - w) ** 2)
                        for v, w in zip(trainer.model.trainable_variables, start)))
    results = json.loads((tmp_path / "results.json").read_text())
    (entry,) = results["train_history"]
    assert entry["step"] == 1 and entry["steps"] == 1
    assert entry["grad_norm"] == pytest.approx(moved / 0.05, rel=1e-4)
    assert "grad_bound_fraction" not in entry and "grad_bound_fraction" not in results
    assert results["history"][-1]["grad_norm"] == entry["grad_norm"]


def test_clip_records_the_norm_before_it_and_every_step_it_bound(tmp_path):
    cfg = tiny_config(tmp_path / "clip", train_steps=1, log_every=1, learning_rate=0.05,
                      momentum=0.0, seed=2, clip_norm=1e-3)
    trainer = Trainer(cfg)
    start = [v.numpy().astype("float64") for v in trainer.model.trainable_variables]
    trainer.run()
    moved = np.sqrt(sum(np.sum((v.numpy() - w) ** 2)
                        for v, w in zip(trainer.model.trainable_variables, start)))
    assert moved / 0.05 == pytest.approx(1e-3, rel=1e-3)  # the step was clipped
    results = json.loads((tmp_path / "clip" / "results.json").read_text())
    (entry,) = results["train_history"]
    assert entry["grad_norm"] > 10 * 1e-3  # the norm before the clip
    assert entry["grad_bound_fraction"] == 1.0 and results["grad_bound_fraction"] == 1.0
    loose = Trainer(tiny_config(tmp_path / "loose", train_steps=4, log_every=2, clip_norm=1e6,
                                agc=1e6))
    loose.run()
    results = json.loads((tmp_path / "loose" / "results.json").read_text())
    assert [e["grad_bound_fraction"] for e in results["train_history"]] == [0.0, 0.0]
    assert results["grad_bound_fraction"] == 0.0


def test_tensorboard_has_the_norm_and_the_bound_fraction(tmp_path):
    Trainer(tiny_config(tmp_path, train_steps=2, log_every=1, agc=0.01)).run()
    tags = set()
    for event_file in tf.io.gfile.glob(str(tmp_path / "train" / "events.*")):
        for event in tf.compat.v1.train.summary_iterator(event_file):
            tags |= {v.tag for v in event.summary.value}
    assert {"grad_norm", "grad_bound_fraction"} <= tags


@pytest.mark.slow
@pytest.mark.parametrize("kw", [{}, dict(clip_norm=0.5)])
def test_two_replicas_record_the_one_device_norm(tmp_path, kw):
    assert len(tf.config.list_logical_devices("CPU")) == 2
    logs = {}
    with tfds.testing.mock_data(num_examples=64):
        for strategy in ("one_device", "mirrored"):
            cfg = tiny_config(tmp_path / strategy, use_synthetic_data=False, train_steps=4,
                              log_every=2, batch_size=8, learning_rate=0.2, seed=1,
                              strategy=strategy, **kw)
            Trainer(cfg).run()
            results = json.loads((tmp_path / strategy / "results.json").read_text())
            assert results["num_replicas"] == (2 if strategy == "mirrored" else 1)
            logs[strategy] = results["train_history"]
    for one, two in zip(logs["one_device"], logs["mirrored"]):
        assert two["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-4)
        assert two.get("grad_bound_fraction") == one.get("grad_bound_fraction")
