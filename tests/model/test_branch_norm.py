"""--max_branch_norm: after training every block's ||C2||_2 ||C1||_2 (times its scalar)
is at most tau, checked by a power iteration written here; off (0) it runs no projection; two
replicas equal one device; TensorBoard has the bound beside the empirical branch norm."""
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from resnet_nobn.model import lipschitz
from resnet_nobn.model.blocks import ResidualBlock
from resnet_nobn.training.trainer import Trainer
from tests.helpers import tiny_config


def _operator_norm(conv, kernel, input_shape, iterations=300):
    """||conv||_2 by power iteration on x -> conv(x), its adjoint by autodiff (not lipschitz.py)."""
    kernel = tf.constant(kernel)

    def apply(x):
        return tf.nn.conv2d(x, kernel, conv.strides, "SAME")

    def iteration(i, x):
        x = x / tf.norm(x)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = apply(x)
        return i + 1, tape.gradient(y, x, output_gradients=y)  # C^T C x

    if not np.any(kernel.numpy()):
        return 0.0
    x = tf.random.stateless_normal(input_shape, [7, 7])
    x = tf.function(lambda x: tf.while_loop(lambda i, _: i < iterations, iteration, (0, x))[1],
                    autograph=False)(x)  # compiled: 300 eager iterations cost seconds
    x = x / tf.norm(x)
    return float(tf.norm(apply(x)))


def _bounds(model):
    out = {}
    for b in (l for l in model.layers if isinstance(l, ResidualBlock)):
        shape1 = (1,) + tuple(b.input.shape[1:])
        shape2 = (1,) + tuple(b.first.compute_output_shape(shape1)[1:])
        bound = (_operator_norm(b.first, b.first.kernel.numpy(), shape1)
                 * _operator_norm(b.second, b.second.kernel.numpy(), shape2))
        if b.branch_scale is not None:
            bound *= abs(float(b.scale.numpy()))
        out[b.name] = bound
    return out


def _weights(trainer):
    return [v.numpy() for v in trainer.model.trainable_variables]


@pytest.mark.slow
@pytest.mark.parametrize("init", ["standard", "fixup"])
def test_every_block_bound_is_at_most_tau_after_training(tmp_path, init):
    tau = 0.05
    # seed 8: initial weights (NumPy's draws, the same on every backend) whose projected run
    # meets tau at both inits and whose free run neither stays under 2 tau nor diverges.
    kw = dict(init=init, train_steps=12, learning_rate=0.2, seed=8, head_seed=0)
    trainer = Trainer(tiny_config(tmp_path / "on", max_branch_norm=tau, **kw))
    trainer.run()
    bounds = _bounds(trainer.model)
    assert all(b <= tau * (1 + 1e-2) for b in bounds.values()), bounds
    assert max(bounds.values()) > 0.9 * tau  # the constraint was active
    free = Trainer(tiny_config(tmp_path / "off", **kw))
    free.run()
    assert max(_bounds(free.model).values()) > 2 * tau, "the test must be able to fail"


def test_off_is_the_step_without_the_constraint(tmp_path, monkeypatch):
    """--max_branch_norm=0 projects nothing (the projection raises here if called) and trains bit
    for bit as a run that does not name the option, both in this process: weights compared with a
    digest recorded on one machine differ on a CPU whose kernels round otherwise."""
    def never(*args, **kwargs):
        raise AssertionError("--max_branch_norm=0 ran the projection")

    monkeypatch.setattr(lipschitz.BranchBounds, "project", never)
    kw = dict(train_steps=3, learning_rate=0.05, seed=5, head_seed=0)
    absent = Trainer(tiny_config(tmp_path / "absent", **kw))
    absent.run()
    zero = Trainer(tiny_config(tmp_path / "zero", max_branch_norm=0.0, **kw))
    zero.run()
    assert all(np.array_equal(a, b) for a, b in zip(_weights(absent), _weights(zero)))
    assert any(not np.array_equal(a, b) for a, b in zip(
        _weights(zero), _weights(Trainer(tiny_config(tmp_path / "init", **kw))))), "it trained"


@pytest.mark.slow
def test_two_replicas_equal_one_device_with_the_constraint(tmp_path):
    assert len(tf.config.list_logical_devices("CPU")) == 2
    with tfds.testing.mock_data(num_examples=64):
        kw = dict(use_synthetic_data=False, train_steps=5, batch_size=8, learning_rate=0.2,
                  init="standard", max_branch_norm=0.05, seed=1)
        one = Trainer(tiny_config(tmp_path / "one", strategy="one_device", **kw))
        one.run()
        two = Trainer(tiny_config(tmp_path / "two", strategy="mirrored", **kw))
        assert two.strategy.num_replicas_in_sync == 2
        two.run()
    for a, b in zip(_weights(one), _weights(two)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert max(_bounds(two.model).values()) > 0.9 * 0.05


def test_tensorboard_has_the_bound_beside_the_branch_norm(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, train_steps=2, log_every=2, init="standard"))
    trainer.run()
    tags = {}
    for path in (tmp_path / "train").iterdir():
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for v in event.summary.value:
                if v.metadata.plugin_data.plugin_name == "scalars":  # not the augmented images
                    tags[v.tag] = float(tf.make_ndarray(v.tensor))
    assert {"branch_norm/stage2_block1", "branch_bound/stage2_block1"} <= set(tags)
    expected = _bounds(trainer.model)
    for name, bound in expected.items():  # a power iteration's estimate, from below
        assert 0.95 * bound <= tags[f"branch_bound/{name}"] <= bound * (1 + 1e-4)


def test_max_branch_norm_with_batch_norm_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"TrainConfig\.max_branch_norm"):
        tiny_config(tmp_path, norm="batch", init="he", max_branch_norm=1.0)
