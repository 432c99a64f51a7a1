"""--logit_gain: one trainable scalar (init 1) times the pooled features before the head; off, the
network is unchanged; it trains, is not weight-decayed, and round-trips through model.keras."""
import numpy as np
import pytest
import tensorflow as tf

from resnet_nobn.config import ModelConfig
from resnet_nobn.model import custom_objects
from resnet_nobn.model.network import build_model, conv_kernels
from resnet_nobn.training.trainer import Trainer
from tests.helpers import TINY_MODEL, tiny_config


@pytest.mark.parametrize("head", ["random", "trained"])
def test_the_gain_scales_the_pooled_features_and_off_changes_nothing(head, tmp_path):
    off = build_model(ModelConfig(head=head, **TINY_MODEL), seed=2)
    on = build_model(ModelConfig(head=head, logit_gain=True, **TINY_MODEL), seed=2)
    extra = [v for v in on.weights if "logit_gain" in v.path]
    assert [v.path for v in extra] == ["logit_gain/gain"] and extra[0].trainable
    assert extra[0].shape == () and float(extra[0].numpy()) == 1.0
    rest = [v for v in on.weights if "logit_gain" not in v.path]
    assert [v.path for v in rest] == [v.path for v in off.weights]
    assert "logit_gain" not in [l.name for l in off.layers]
    for a, b in zip(off.weights, rest):
        np.testing.assert_array_equal(a.numpy(), b.numpy())  # the same draws
    x = np.random.default_rng(0).standard_normal((2, 32, 32, 3)).astype("float32")
    np.testing.assert_array_equal(on(x).numpy(), off(x).numpy())  # g = 1: the same logits
    extra[0].assign(2.5)
    pooled = tf.keras.Model(off.inputs, off.get_layer("pool").output)(x)
    head = off.get_layer("head")
    np.testing.assert_allclose(on(x).numpy(), head(2.5 * pooled).numpy(), rtol=1e-5, atol=1e-6)
    assert all("logit_gain" not in v.path for v in conv_kernels(on))  # no weight decay
    on.save(tmp_path / "m.keras")
    loaded = tf.keras.models.load_model(tmp_path / "m.keras", custom_objects=custom_objects())
    np.testing.assert_array_equal(loaded(x).numpy(), on(x).numpy())
    assert float(loaded.get_layer("logit_gain").gain.numpy()) == 2.5


def test_the_gain_trains(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, logit_gain=True, train_steps=3, learning_rate=0.05))
    trainer.run()
    gain = float(trainer.model.get_layer("logit_gain").gain.numpy())
    assert gain != 1.0 and np.isfinite(gain)
