"""The network on Keras' other backends: under JAX the config builds the same layers, weights and
parameter count, gives the TensorFlow backend's logits from the same weights, trains under `fit`
as TensorFlow does, and loads no TensorFlow; the BN twin's GlobalBatchNorm, saved whole on
TensorFlow, loads there and runs as Keras' batch norm. The JAX side runs in a subprocess
(backend_side.py): one backend a process."""
import dataclasses
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from resnet_nobn.config import ModelConfig
from resnet_nobn.model import network
from tests.helpers import ROOT, TINY_MODEL
from tests.model import backend_side

pytestmark = pytest.mark.slow

CASES = {  # name: (config, seed, fit steps); without fit steps the weights are moved off their
    # init (Fixup's zero classifier, SkipInit's zero alpha), so that every weight is compared
    "paper": (ModelConfig(**TINY_MODEL), 1, 6),
    "trained_head": (ModelConfig(**TINY_MODEL, head="trained", init="standard"), 2, 0),
    "fixup": (ModelConfig(**TINY_MODEL, init="fixup"), 3, 0),
    "skipinit": (ModelConfig(**TINY_MODEL, init="skipinit", relu_leakiness=0.0), 4, 0),
    "bn": (ModelConfig(**TINY_MODEL, norm="batch", init="he"), 5, 6),
}


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    """({case: TensorFlow's description, logits, losses}, the JAX side's JSON)."""
    where = tmp_path_factory.mktemp("backends")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 32, 32, 3)).astype("float32")
    labels = rng.integers(0, 10, size=8).astype("int32")
    np.save(where / "x.npy", x)
    np.save(where / "labels.npy", labels)
    tf_side, cases = {}, []
    for name, (cfg, seed, steps) in CASES.items():
        model = network.build_model(cfg, seed=seed)
        if not steps:
            for v in model.trainable_variables:
                v.assign(v + rng.normal(0.0, 0.1, v.shape).astype("float32"))
        model.save_weights(where / f"{name}.weights.h5")
        if name == "bn":
            model.save(where / "bn.keras")
        tf_side[name] = {**backend_side.describe(model),
                         "logits": np.asarray(model(x, training=False))}
        if steps:
            tf_side[name]["losses"] = backend_side.fit_losses(model, x, labels, steps)
        cases.append({"name": name, "config": dataclasses.asdict(cfg), "seed": seed,
                      "fit": steps})
    (where / "cases.json").write_text(json.dumps(cases))
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "model", "backend_side.py"),
                        str(where)], capture_output=True, text=True, timeout=400,
                       env=dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu"))
    assert p.returncode == 0, p.stderr[-3000:]
    return tf_side, json.loads(p.stdout.strip().splitlines()[-1])


def test_jax_builds_the_same_layers_weights_and_parameter_count(sides):
    tf_side, jax_side = sides
    assert keras.backend.backend() == "tensorflow" and jax_side["backend"] == "jax"
    for name, (cfg, _, _) in CASES.items():
        ours, theirs = tf_side[name], jax_side["cases"][name]
        assert theirs["weights"] == ours["weights"], name
        assert theirs["params"] == ours["params"], name
        assert theirs["layers"] == ours["layers"], name
    assert ["final_bn", "GlobalBatchNorm"] in jax_side["cases"]["bn"]["layers"]


def test_jax_gives_the_tensorflow_logits_from_the_same_weights(sides):
    tf_side, jax_side = sides
    for name in CASES:
        logits = tf_side[name]["logits"]
        assert np.abs(logits).max() > 1e-2, name  # not a trivially equal zero output
        np.testing.assert_allclose(jax_side["cases"][name]["logits"], logits,
                                   rtol=1e-4, atol=1e-5, err_msg=name)
    # a BN twin saved whole on TensorFlow loads under JAX with custom_objects()
    np.testing.assert_allclose(jax_side["bn_keras_logits"], tf_side["bn"]["logits"],
                               rtol=1e-4, atol=1e-5)


def test_jax_trains_under_fit_as_tensorflow_does(sides):
    tf_side, jax_side = sides
    for name, (_, _, steps) in CASES.items():
        if not steps:
            continue
        losses = jax_side["cases"][name]["losses"]
        assert len(losses) == steps and np.all(np.isfinite(losses)), (name, losses)
        assert np.all(np.diff(losses) < 0), (name, losses)  # falling, step by step
        np.testing.assert_allclose(losses, tf_side[name]["losses"], rtol=1e-3, err_msg=name)


def test_the_network_under_jax_loads_no_tensorflow(sides):
    assert sides[1]["tensorflow_imported"] is False  # building, loading weights, fit, load_model
