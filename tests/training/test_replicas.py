"""One run, the same result on 1 or 2 replicas (2 logical CPU devices, MirroredStrategy), for the BN
twin too: its batch norm uses the global batch's statistics. Options under replicas, checkpoints
moved between replica counts. Multi-worker counterparts: tests/training/test_multiworker.py.

Every run reads the same tfds mock CIFAR-10 (a global batch holds the same images on 1 and 2
replicas; the synthetic data would not) and trains the tiny net 5 steps at the paper's rate.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from helpers import NEEDS_BFLOAT16, tiny_config, train_losses
from resnet_nobn.errors import UserError
from resnet_nobn.training import trainer as train_lib

pytestmark = pytest.mark.slow

STEPS = 5
BN = dict(norm="batch", init="he")


def _config(model_dir, strategy, **kw):
    return tiny_config(model_dir, **{**dict(
        use_synthetic_data=False, train_steps=STEPS, batch_size=8, learning_rate=0.05,
        weight_decay=1e-3, seed=1, log_every=1, strategy=strategy), **kw})


def run(model_dir, strategy, **kw):
    """(trainer, results) of a run of the tiny net on mock CIFAR-10 (resumes if model_dir has one);
    `strategy`: a --strategy name, or a multi-worker strategy object."""
    name = strategy if isinstance(strategy, str) else "multi_worker"
    with tfds.testing.mock_data(num_examples=64):
        trainer = train_lib.Trainer(_config(model_dir, name, **kw),
                                None if isinstance(strategy, str) else strategy)
        return trainer, trainer.run()


def evaluate_only(model_dir, strategy, **kw):
    with tfds.testing.mock_data(num_examples=64):
        return train_lib.train(_config(model_dir, strategy, eval_only=True, **kw))


def losses(model_dir):
    """The per-step training losses of a run, in step order."""
    out = train_losses(model_dir)
    return np.array([out[s] for s in sorted(out)])


def assert_same_weights(a, b):
    """Every weight (moving statistics too) within the BN-free replica test's tolerance; `a` are a
    model's weights, `b` another model's or their values in the same order."""
    assert [v.path for v in a] == [getattr(w, "path", v.path) for v, w in zip(a, b)]
    assert len(a) == len(b)
    for v, w in zip(a, b):
        np.testing.assert_allclose(np.asarray(v), np.asarray(w), rtol=1e-4, atol=1e-6, err_msg=v.path)


@pytest.fixture(scope="module")
def bn_runs(tmp_path_factory):
    """The BN twin trained 5 steps on one device and on 2 mirrored replicas."""
    root = tmp_path_factory.mktemp("bn")
    assert len(tf.config.list_logical_devices("CPU")) == 2
    one = run(root / "one", "one_device", **BN)
    two = run(root / "two", "mirrored", **BN)
    assert two[0].strategy.num_replicas_in_sync == 2
    return root, one, two


def test_bn_twin_on_two_mirrored_replicas_equals_one_device(bn_runs):
    _, (one, r1), (two, r2) = bn_runs
    start = train_lib.Trainer(_config(two.cfg.model_dir + "_init", "one_device",
                                      use_synthetic_data=True, **BN)).model.trainable_weights
    moved = max(float(np.max(np.abs(v.numpy() - s.numpy()))) for v, s in
                zip(one.model.trainable_weights, start))
    assert moved > 1e-3  # training really changed the weights
    assert_same_weights(one.model.weights, two.model.weights)
    np.testing.assert_allclose(losses(two.cfg.model_dir), losses(one.cfg.model_dir), rtol=1e-5)
    assert r2["history"][-1]["eval_loss"] == pytest.approx(r1["history"][-1]["eval_loss"], rel=1e-4)


@pytest.mark.parametrize("direction", ["2 replicas -> 1 device", "1 device -> 2 replicas"])
def test_eval_only_on_another_replica_count_gives_the_runs_own_evaluation(bn_runs, direction):
    _, (one, r1), (two, r2) = bn_runs
    trained, own, other = ((two, r2, "one_device") if direction.startswith("2")
                           else (one, r1, "mirrored"))
    again = evaluate_only(trained.cfg.model_dir, other, **BN)
    assert again["history"][-1]["num_replicas"] == (1 if other == "one_device" else 2)
    for key in ("top1_error", "top5_error", "eval_loss", "eval_examples"):
        assert again["history"][-1][key] == pytest.approx(own["history"][-1][key], rel=1e-6), key


@pytest.mark.parametrize("first,then", [("mirrored", "one_device"), ("one_device", "mirrored")])
def test_run_resumed_on_another_replica_count_continues_exactly(bn_runs, tmp_path, first, then):
    """3 steps on one replica count, then resumed to 5 on the other: the straight 5-step run."""
    _, (one, _), _ = bn_runs
    run(tmp_path, first, checkpoint_every=3, **BN, **{"train_steps": 3})
    resumed, _ = run(tmp_path, then, **BN)
    assert resumed.step == STEPS
    assert_same_weights(one.model.weights, resumed.model.weights)


@pytest.mark.parametrize("option,kw,tol", [
    ("float16", dict(mixed_precision="float16", **BN), dict(atol=5e-3)),
    pytest.param("bfloat16", dict(mixed_precision="bfloat16", **BN), dict(atol=3e-2),
                 marks=NEEDS_BFLOAT16),
    ("xla", dict(xla=True), dict(rtol=1e-4, atol=1e-5)),
])
def test_speed_option_on_two_mirrored_replicas_equals_one_device(tmp_path, option, kw, tol):
    """Tolerances of tests/training/test_speed_options.py; with --xla the BN-free net (the BN twin is
    refused, below)."""
    one, r1 = run(tmp_path / "one", "one_device", **kw)
    two, r2 = run(tmp_path / "two", "mirrored", **kw)
    np.testing.assert_allclose(losses(two.cfg.model_dir), losses(one.cfg.model_dir), **tol)
    assert r2["history"][-1]["eval_loss"] == pytest.approx(r1["history"][-1]["eval_loss"],
                                                           abs=tol["atol"])
    assert type(two.optimizer) is type(one.optimizer)


def test_xla_bn_twin_on_two_replicas_is_refused_at_start_up(tmp_path):
    with pytest.raises(UserError, match="--xla with --norm=batch cannot train on 2 replicas"):
        run(tmp_path, "mirrored", xla=True, **BN)
    assert not (tmp_path / "ckpt").exists()
    one, _ = run(tmp_path / "one", "one_device", xla=True, **BN)  # one device: fine
    assert one.step == STEPS
