"""One run, the same result on 1 or 2 replicas (2 logical CPU devices, MirroredStrategy), for the BN
twin too: its batch norm uses the global batch's statistics. Options under replicas, checkpoints
moved between replica counts. Multi-worker counterparts: tests/training/test_multiworker.py.

Every run reads the same tfds mock CIFAR-10 (a global batch holds the same images on 1 and 2
replicas; the synthetic data would not) and trains the tiny net 5 steps at the paper's rate.
"""

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from helpers import NEEDS_BFLOAT16, bfloat16_convolutions, copy_of, tiny_config, train_losses
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


# The one-device runs the replica tests compare with, here and in tests/training/test_multiworker.py:
# {name: overrides of _config}. The session trains each once (tests/conftest.py `one_device_runs`).
REFERENCES = {"bn": BN, "bn_float16": dict(mixed_precision="float16", **BN),
              "bn_bfloat16": dict(mixed_precision="bfloat16", **BN), "xla": dict(xla=True)}


@dataclasses.dataclass
class Reference:
    """A finished one-device run of REFERENCES, as its directory holds it: its weights (the
    model's, moving statistics too, in order; `paths` their variables' paths), its results and
    its optimizer's class name."""
    model_dir: str
    paths: list
    weights: list
    results: dict
    optimizer: str


def train_references(where):
    """Trains every one of REFERENCES the CPU can run (bfloat16 needs its convolutions) on one
    device in `where`/<name>, with its weights beside it (weights.npz, reference.json)."""
    for name, kw in REFERENCES.items():
        if "bfloat16" in name and not bfloat16_convolutions():
            continue
        trainer, results = run(where / name, "one_device", **kw)
        np.savez(where / name / "weights.npz", *[v.numpy() for v in trainer.model.weights])
        (where / name / "reference.json").write_text(json.dumps(dict(
            paths=[v.path for v in trainer.model.weights], results=results,
            optimizer=type(trainer.optimizer).__name__)))


def read_references(where):
    """{name: Reference} of the runs `train_references` made in `where`."""
    out = {}
    for name in REFERENCES:
        if (where / name / "reference.json").exists():
            saved = json.loads((where / name / "reference.json").read_text())
            weights = np.load(where / name / "weights.npz")
            out[name] = Reference(str(where / name), saved["paths"],
                                  [weights[f"arr_{i}"] for i in range(len(saved["paths"]))],
                                  saved["results"], saved["optimizer"])
    return out


def assert_same_weights(reference, weights):
    """`weights` (a model's, moving statistics too, or their values in the same order) within the
    BN-free replica test's tolerance of the one-device `reference`'s (a Reference)."""
    assert len(weights) == len(reference.paths)
    for path, v, w in zip(reference.paths, reference.weights, weights):
        assert getattr(w, "path", path) == path
        np.testing.assert_allclose(v, np.asarray(w), rtol=1e-4, atol=1e-6, err_msg=path)


@pytest.fixture(scope="module")
def bn_runs(tmp_path_factory, one_device_runs):
    """The BN twin trained 5 steps on one device (the session's Reference) and on 2 mirrored
    replicas."""
    root = tmp_path_factory.mktemp("bn")
    assert len(tf.config.list_logical_devices("CPU")) == 2
    two = run(root / "two", "mirrored", **BN)
    assert two[0].strategy.num_replicas_in_sync == 2
    return root, one_device_runs["bn"], two


def test_bn_twin_on_two_mirrored_replicas_equals_one_device(bn_runs):
    _, one, (two, r2) = bn_runs
    start = train_lib.Trainer(_config(two.cfg.model_dir + "_init", "one_device",
                                      use_synthetic_data=True, **BN)).model.weights
    moved = max(float(np.max(np.abs(v - s.numpy()))) for v, s in zip(one.weights, start))
    assert moved > 1e-3  # training really changed the weights
    assert_same_weights(one, two.model.weights)
    np.testing.assert_allclose(losses(two.cfg.model_dir), losses(one.model_dir), rtol=1e-5)
    assert r2["history"][-1]["eval_loss"] == pytest.approx(one.results["history"][-1]["eval_loss"],
                                                           rel=1e-4)


@pytest.mark.parametrize("direction", ["2 replicas -> 1 device", "1 device -> 2 replicas"])
def test_eval_only_on_another_replica_count_gives_the_runs_own_evaluation(bn_runs, direction,
                                                                          tmp_path):
    _, one, (two, r2) = bn_runs
    trained, own, other = ((copy_of(two.cfg.model_dir, tmp_path / "run"), r2, "one_device")
                           if direction.startswith("2") else
                           (copy_of(one.model_dir, tmp_path / "run"), one.results, "mirrored"))
    again = evaluate_only(trained, other, **BN)
    assert again["history"][-1]["num_replicas"] == (1 if other == "one_device" else 2)
    for key in ("top1_error", "top5_error", "eval_loss", "eval_examples"):
        assert again["history"][-1][key] == pytest.approx(own["history"][-1][key], rel=1e-6), key


@pytest.mark.parametrize("first,then", [("mirrored", "one_device"), ("one_device", "mirrored")])
def test_run_resumed_on_another_replica_count_continues_exactly(bn_runs, tmp_path, first, then):
    """3 steps on one replica count, then resumed to 5 on the other: the straight 5-step run."""
    _, one, _ = bn_runs
    run(tmp_path, first, checkpoint_every=3, **BN, **{"train_steps": 3})
    resumed, _ = run(tmp_path, then, **BN)
    assert resumed.step == STEPS
    assert_same_weights(one, resumed.model.weights)


@pytest.mark.parametrize("name,tol", [
    ("bn_float16", dict(atol=5e-3)),
    pytest.param("bn_bfloat16", dict(atol=3e-2), marks=NEEDS_BFLOAT16),
    ("xla", dict(rtol=1e-4, atol=1e-5)),
])
def test_speed_option_on_two_mirrored_replicas_equals_one_device(tmp_path, one_device_runs, name,
                                                                 tol):
    """Tolerances of tests/training/test_speed_options.py; with --xla the BN-free net (the BN twin is
    refused, below)."""
    one = one_device_runs[name]
    two, r2 = run(tmp_path / "two", "mirrored", **REFERENCES[name])
    np.testing.assert_allclose(losses(two.cfg.model_dir), losses(one.model_dir), **tol)
    assert r2["history"][-1]["eval_loss"] == pytest.approx(
        one.results["history"][-1]["eval_loss"], abs=tol["atol"])
    assert type(two.optimizer).__name__ == one.optimizer


def test_xla_bn_twin_on_two_replicas_is_refused_at_start_up(tmp_path):
    with pytest.raises(UserError, match="--xla with --norm=batch cannot train on 2 replicas"):
        run(tmp_path, "mirrored", xla=True, **BN)
    assert not (tmp_path / "ckpt").exists()
    one, _ = run(tmp_path / "one", "one_device", xla=True, **BN)  # one device: fine
    assert one.step == STEPS
