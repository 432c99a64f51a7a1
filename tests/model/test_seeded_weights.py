"""One seed, the same initial weights on every backend: a config built with seed 3 under JAX (in a
subprocess: one backend a process) has TensorFlow's weights exactly, for every --init, both heads
and the BN twin; the draws depend on (seed, layer) alone."""
import dataclasses
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from resnet_nobn.config import ModelConfig
from resnet_nobn.model import initializers, network
from tests.helpers import ROOT, TINY_MODEL

SEED = 3
CONFIGS = {
    "identity": ModelConfig(**TINY_MODEL),
    "standard_trained_head": ModelConfig(**TINY_MODEL, init="standard", head="trained"),
    "he": ModelConfig(**TINY_MODEL, init="he"),
    "fixup": ModelConfig(**TINY_MODEL, init="fixup"),
    "skipinit": ModelConfig(**TINY_MODEL, init="skipinit"),
    "bn": ModelConfig(**TINY_MODEL, norm="batch", init="he"),
}

# Under KERAS_BACKEND=jax: build each config with the seed, np.save its weights in order.
JAX_SIDE = """
import json, os, sys
import numpy as np
sys.path.insert(0, {root!r})
import keras
from resnet_nobn.config import ModelConfig
from resnet_nobn.model.network import build_model
assert keras.backend.backend() == "jax"
where, seed = sys.argv[1], int(sys.argv[2])
for name, fields in json.load(open(os.path.join(where, "configs.json"))).items():
    cfg = ModelConfig(**{{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}})
    model = build_model(cfg, seed=seed)
    for i, w in enumerate(model.weights):
        np.save(os.path.join(where, f"{{name}}.{{i}}.npy"), keras.ops.convert_to_numpy(w))
"""


def _jax_weights(where, seed):
    (where / "configs.json").write_text(json.dumps(
        {name: dataclasses.asdict(cfg) for name, cfg in CONFIGS.items()}))
    p = subprocess.run([sys.executable, "-c", JAX_SIDE.format(root=ROOT), str(where), str(seed)],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu"))
    assert p.returncode == 0, p.stderr[-3000:]
    return {name: [np.load(where / f"{name}.{i}.npy")
                   for i in range(len(network.build_model(cfg, seed=seed).weights))]
            for name, cfg in CONFIGS.items()}


def test_a_seed_builds_the_same_weights_under_jax_as_under_tensorflow(tmp_path):
    assert keras.backend.backend() == "tensorflow"
    theirs = _jax_weights(tmp_path, SEED)
    for name, cfg in CONFIGS.items():
        ours = network.build_model(cfg, seed=SEED).weights
        assert len(ours) == len(theirs[name]), name
        for w, other in zip(ours, theirs[name]):
            assert other.dtype == np.float32, (name, w.path)
            np.testing.assert_array_equal(other, w.numpy(), err_msg=f"{name}: {w.path}")
    # the comparison is of drawn weights, not of zeros and ones
    kernel = network.build_model(CONFIGS["identity"], seed=SEED).get_layer("stem").kernel
    assert np.std(kernel.numpy()) > 0.1


def test_every_layer_draws_its_own_weights_from_the_seed():
    """Two seeds give two networks; one seed's convs of one shape are not copies of each other;
    the initializer's config round-trips through JSON."""
    cfg = ModelConfig(**{**TINY_MODEL, "widths": (8, 8, 8), "strides": (1, 1, 1)})
    a, b = (network.build_model(cfg, seed=s) for s in (SEED, SEED + 1))
    kernels = [v.numpy() for v in network.conv_kernels(a)]
    assert not np.array_equal(kernels[0], network.conv_kernels(b)[0].numpy())
    same_shape = kernels[1:]  # the blocks' convs, all 3x3x8x8
    assert all(not np.array_equal(same_shape[i], same_shape[j])
               for i in range(len(same_shape)) for j in range(i))
    init = initializers.SeededNormal(0.25, seed=SEED, stream=4)
    again = keras.initializers.deserialize(json.loads(json.dumps(
        keras.initializers.serialize(init))))
    assert isinstance(again, initializers.SeededNormal)
    np.testing.assert_array_equal(np.asarray(again((3, 3, 2, 2))), np.asarray(init((3, 3, 2, 2))))
    np.testing.assert_allclose(np.std(np.asarray(init((64, 64, 8)))), 0.25, rtol=0.02)


@pytest.mark.parametrize("init", ["identity", "standard", "he", "fixup", "skipinit"])
def test_the_kernels_have_the_inits_standard_deviation(init):
    cfg = ModelConfig(**{**TINY_MODEL, "init": init})
    model = network.build_model(cfg, seed=SEED)
    blocks = sum(cfg.blocks_per_stage)
    for s, width in enumerate(cfg.widths):
        std1, std2 = network.residual_init_stddev(cfg.kernel_size, width, init, blocks)
        block = model.get_layer(f"stage{s + 1}_block1")
        for conv, std in ((block.first, std1), (block.second, std2)):
            np.testing.assert_allclose(np.std(conv.kernel.numpy()), std, rtol=0.15, atol=0,
                                       err_msg=f"{init} stage {s + 1}")
