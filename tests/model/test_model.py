"""The network of Table 1 and its ablations: shape, parameter count, init, identity blocks, head."""
import json
import math
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from resnet_nobn.config import ModelConfig
from resnet_nobn.model.blocks import ResidualBlock
from resnet_nobn.model.network import (build_model, conv_kernels, count_params,
                                       residual_init_stddev, scalar_parameters)


@pytest.fixture(scope="module")
def paper_model():
    return build_model(ModelConfig(num_classes=100))


def test_table1_has_55_convolutions_and_13_5M_parameters_all_in_convolutions(paper_model):
    convs = [l for l in _all_layers(paper_model) if isinstance(l, tf.keras.layers.Conv2D)
             or type(l).__name__ == "Conv2D"]
    assert len(convs) == 55
    assert len(conv_kernels(paper_model)) == 55
    trainable = count_params(paper_model.trainable_variables)
    assert trainable == 13_538_736  # "13.5M" (Table 1), "13.59M" (text)
    # every trainable weight is a convolution kernel: no biases, no dense layer
    assert trainable == count_params(conv_kernels(paper_model))
    # the head is a fixed 256 x num_classes projection, not trained
    head = paper_model.get_layer("head")
    assert [tuple(v.shape) for v in head.non_trainable_variables] == [(256, 100)]
    assert head.trainable_variables == []


def test_table1_shapes_strides_and_output(paper_model):
    kernels = {v.path.split("/")[-2]: tuple(v.shape) for v in conv_kernels(paper_model)}
    assert kernels["stem"] == (3, 3, 3, 16)
    assert kernels["stage1_block1_conv1"] == (3, 3, 16, 64)
    assert kernels["stage2_block1_conv1"] == (3, 3, 64, 128)
    assert kernels["stage3_block9_conv2"] == (3, 3, 256, 256)
    assert paper_model.get_layer("stage3_block9").output.shape[1:] == (8, 8, 256)  # 8x8 pool
    out = paper_model(tf.zeros((2, 32, 32, 3)))
    assert out.shape == (2, 100) and out.dtype == tf.float32


def test_residual_init_is_one_over_k2c(paper_model):
    assert residual_init_stddev(3, 64, "identity") == pytest.approx((1 / (9 * 64),) * 2)
    assert residual_init_stddev(3, 64, "standard") == pytest.approx((1 / (3 * 8),) * 2)
    for name, c in (("stage1_block2_conv1", 64), ("stage3_block5_conv2", 256)):
        kernel = paper_model.get_layer(name.rsplit("_", 1)[0]).first if name.endswith("conv1") \
            else paper_model.get_layer(name.rsplit("_", 1)[0]).second
        std = float(np.std(kernel.kernel.numpy()))
        assert std == pytest.approx(1 / (9 * c), rel=0.05)


def test_zero_weight_block_is_exactly_the_identity():
    model = build_model(ModelConfig(widths=(8, 16), blocks_per_stage=(2, 2), strides=(1, 2),
                                    stem_width=8))
    x = tf.random.normal((3, 16, 16, 8), seed=1)
    block = model.get_layer("stage1_block2")  # shape-preserving block
    block.second.kernel.assign(tf.zeros_like(block.second.kernel))
    np.testing.assert_array_equal(block(x).numpy(), x.numpy())
    # and a whole network with every residual weight zero is stem -> pool -> head
    for v in conv_kernels(model)[1:]:
        v.assign(tf.zeros_like(v))
    images = tf.random.normal((2, 32, 32, 3), seed=2)
    stem = model.get_layer("stem")(images)
    # the shape-changing block's shortcut: 2x2 average pool, then zero channels on both sides
    pooled = tf.nn.avg_pool2d(stem, 2, 2, "VALID")
    padded = tf.pad(pooled, [[0, 0], [0, 0], [0, 0], [4, 4]])
    # then the fork's final activation (leaky ReLU, slope 0.1) and the pool
    features = tf.reduce_mean(tf.where(padded < 0, 0.1 * padded, padded), axis=[1, 2])
    expected = features @ model.get_layer("head").projection
    np.testing.assert_allclose(model(images).numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("leakiness", [0.0, 0.1])
def test_leakiness_is_the_slope_of_every_activation_and_adds_no_parameter(leakiness):
    cfg = ModelConfig(widths=(8, 16), blocks_per_stage=(2, 2), strides=(1, 2), stem_width=8,
                      relu_leakiness=leakiness)
    model = build_model(cfg)
    assert count_params(model.trainable_variables) == count_params(
        build_model(ModelConfig(**{**cfg.__dict__, "relu_leakiness": 0.3})).trainable_variables)
    block = model.get_layer("stage1_block2")
    h = tf.random.normal((2, 32, 32, 8), seed=4)
    a = block.first(h).numpy()
    act = np.where(a < 0, leakiness * a, a)
    np.testing.assert_allclose(block(h).numpy(), h.numpy() + block.second(act).numpy(),
                               rtol=1e-4, atol=1e-5)
    # the activation after the last block, before the pool, has the same slope
    last = model.get_layer("stage2_block2").output
    probe = tf.keras.Model(model.inputs, [last, model.get_layer("pool").output])
    x, pooled = probe(tf.random.normal((2, 32, 32, 3), seed=5))
    x = x.numpy()
    np.testing.assert_allclose(pooled.numpy(), np.where(x < 0, leakiness * x, x).mean(axis=(1, 2)),
                               rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("init", ["fixup", "skipinit"])
def test_fixup_and_skipinit_start_as_the_identity(init):
    cfg = ModelConfig(widths=(8, 8), blocks_per_stage=(2, 2), strides=(1, 1), stem_width=8, init=init)
    model = build_model(cfg)
    h = tf.random.normal((2, 16, 16, 8), seed=6)
    for name in ("stage1_block1", "stage2_block2"):
        np.testing.assert_array_equal(model.get_layer(name)(h).numpy(), h.numpy())
    scalars = [v for v in model.trainable_variables if len(v.shape) == 0]
    per_block = 5 if init == "fixup" else 1  # multiplier + 4 biases, or alpha
    outside = 2 if init == "fixup" else 0  # Fixup's biases after the stem, before the classifier
    assert len(scalars) == 4 * per_block + outside
    first = model.get_layer("stage1_block1").first.kernel.numpy()
    second = model.get_layer("stage1_block1").second.kernel.numpy()
    he = math.sqrt(2 / (9 * 8))
    if init == "fixup":  # C1: He times L^(-1/2), L = 4 blocks; C2 = 0
        assert np.std(first) == pytest.approx(he / 2, rel=0.1) and not second.any()
    else:  # He init, alpha = 0
        assert np.std(first) == pytest.approx(he, rel=0.1) and np.std(second) > 0
    with pytest.raises(ValueError, match="normalization-free"):
        ModelConfig(norm="batch", init=init)


def test_dense_block_is_the_same_layer_type():
    block = ResidualBlock(tf.keras.layers.Dense(4), tf.keras.layers.Dense(4, use_bias=False))
    h = tf.random.normal((5, 4), seed=3)
    u, s, v = block.first, None, block.second
    y = block(h).numpy()
    expected = h.numpy() + np.maximum(h.numpy() @ u.kernel.numpy() + u.bias.numpy(), 0) @ v.kernel.numpy()
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


def test_random_head_is_seeded_and_differs_across_seeds():
    cfg = ModelConfig(widths=(8,), blocks_per_stage=(1,), strides=(1,), stem_width=8)
    a = build_model(cfg).get_layer("head").projection.numpy()
    b = build_model(cfg).get_layer("head").projection.numpy()
    c = build_model(ModelConfig(**{**cfg.__dict__, "head_seed": 1})).get_layer("head").projection.numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    assert np.std(a) == pytest.approx(1 / math.sqrt(8), rel=0.5)


def test_bn_baseline_and_trained_head_variants():
    bn = build_model(ModelConfig(norm="batch", init="he", head="trained", widths=(8, 16),
                                 blocks_per_stage=(1, 1), strides=(1, 2), stem_width=8))
    names = [v.path for v in bn.trainable_variables]
    assert any("bn1/gamma" in n for n in names) and any("final_bn" in n for n in names)
    assert "head/kernel" in names  # the head is trained in this ablation
    std = float(np.std(bn.get_layer("stage2_block1").first.kernel.numpy()))
    assert std == pytest.approx(math.sqrt(2 / (9 * 16)), rel=0.1)


@pytest.mark.parametrize("kw", [dict(widths=(8, 16), blocks_per_stage=(1,)),
                                dict(widths=(16, 8), blocks_per_stage=(1, 1), strides=(1, 2)),
                                dict(norm="layer")])
def test_inconsistent_model_configs_are_refused(kw):
    with pytest.raises(ValueError):
        ModelConfig(**kw)


def _all_layers(model):
    out = []
    for layer in model.layers:
        out.append(layer)
        for sub in ("first", "second"):
            if hasattr(layer, sub):
                out.append(getattr(layer, sub))
    return out


@pytest.mark.slow
def test_head_seed_follows_the_run_seed_unless_given_and_the_config_records_it():
    """A study over seeds draws a projection per seed; --head_seed fixes one for every seed."""
    from resnet_nobn.config import TrainConfig
    from resnet_nobn.study.report import config_key
    small = ModelConfig(widths=(8,), blocks_per_stage=(1,), strides=(1,), stem_width=8)
    fixed = ModelConfig(**{**small.__dict__, "head_seed": 0})
    head = {(name, s): build_model(m, seed=s).get_layer("head").projection.numpy()
            for name, m in (("follows", small), ("fixed", fixed)) for s in (0, 1)}
    assert not np.allclose(head["follows", 0], head["follows", 1])
    np.testing.assert_array_equal(head["fixed", 1], head["follows", 0])
    np.testing.assert_array_equal(head["fixed", 0], head["fixed", 1])
    assert [TrainConfig(model=m, seed=3).to_json()["model"]["head_seed"] for m in (small, fixed)] \
        == [3, 0]
    runs = [TrainConfig(model=small, seed=s).to_json() for s in (0, 1)]
    assert config_key(runs[0]) == config_key(runs[1])  # still one configuration over seeds
    code = ("import json, sys; from absl import flags; from resnet_nobn import cli, recipes; "
            "cli.define_flags(recipes.cifar()); flags.FLAGS(sys.argv[1:]); "
            "c = cli.config_from_flags(flags.FLAGS).to_json(); "
            "print(json.dumps([c['seed'], c['model']['head_seed']]))")
    root = __file__.rsplit("/tests/", 1)[0]
    for args, expected in ((["x", "--seed=3"], [3, 3]), (["x", "--seed=3", "--head_seed=7"], [3, 7])):
        out = subprocess.run([sys.executable, "-c", code] + args, cwd=root, capture_output=True,
                             text=True, timeout=60)
        assert json.loads(out.stdout) == expected, out.stderr


def test_bn_twin_follows_the_fork_epsilon_decay_and_activate_before_residual():
    """tensorflow/models resnet/resnet_model.py (2016): BN epsilon 0.001, moving averages with
    decay 0.9, and unit_1_0 feeds act(BN x) to both the shortcut and the branch."""
    cfg = ModelConfig(norm="batch", init="he", widths=(8, 16), blocks_per_stage=(2, 1),
                      strides=(1, 2), stem_width=8)
    model = build_model(cfg)
    bns = [l for l in model.layers if "BatchNorm" in type(l).__name__]
    bns += [n for l in model.layers for n in (getattr(l, "norm1", None), getattr(l, "norm2", None))
            if n is not None]
    assert len(bns) == 2 * 3 + 1 and {(b.epsilon, b.momentum) for b in bns} == {(1e-3, 0.9)}
    images = tf.random.normal((2, 32, 32, 3), seed=7)
    probe = tf.keras.Model(model.inputs, [model.get_layer("stem").output,
                                          model.get_layer("stage1_block1").output,
                                          model.get_layer("stage1_block2").output])
    stem, out1, out2 = [t.numpy() for t in probe(images, training=False)]
    # at init the moving statistics are 0 and 1: BN x = x / sqrt(1 + eps)
    a = stem / np.sqrt(1 + 1e-3)
    a = np.where(a < 0, 0.1 * a, a)
    first = model.get_layer("stage1_block1")
    assert first.norm1 is None  # its BN and activation come before the block, shared
    np.testing.assert_allclose(out1, a + first.branch(tf.constant(a)).numpy(), rtol=1e-4, atol=1e-5)
    # the next block keeps its raw input on the shortcut (activate_before_residual = False)
    second = model.get_layer("stage1_block2")
    np.testing.assert_allclose(out2, out1 + second.branch(tf.constant(out1)).numpy(), rtol=1e-4,
                               atol=1e-5)


def test_fixup_is_its_reference_network():
    """--init=fixup computes what hongyi-zhang/Fixup's FixupResNet.forward computes (written out
    here from its code, with random values in every weight and scalar), and starts with a zero
    classifier: every logit 0, the loss ln(classes)."""
    cfg = ModelConfig(widths=(8, 16), blocks_per_stage=(2, 1), strides=(1, 2), stem_width=8,
                      init="fixup", head="trained", relu_leakiness=0.0, image_size=8)
    model = build_model(cfg, seed=1)
    x = tf.random.normal((2, 8, 8, 3), seed=2)
    assert not model(x).numpy().any()  # the zero-initialised classifier
    rng = np.random.default_rng(0)
    for v in model.trainable_variables:
        v.assign(rng.normal(0.0, 0.3, v.shape).astype("float32"))
    w = {v.path: v for v in model.trainable_variables}
    relu, conv = tf.nn.relu, lambda h, k, s: tf.nn.conv2d(h, w[k], s, "SAME")

    def block(h, name, stride, channels):  # FixupBasicBlock.forward
        b = [w[f"{name}/bias{i}"] for i in ("1a", "1b", "2a", "2b")]
        out = relu(conv(h + b[0], f"{name}/{name}_conv1/kernel", stride) + b[1])
        out = conv(out + b[2], f"{name}/{name}_conv2/kernel", 1) * w[f"{name}/branch_scale"] + b[3]
        identity = h
        if stride > 1:  # Table 1's shortcut (the reference subsamples h + bias1a instead)
            identity = tf.nn.avg_pool2d(h, stride, stride, "VALID")
            extra = channels - h.shape[-1]
            identity = tf.pad(identity, [[0, 0]] * 3 + [[extra // 2, extra - extra // 2]])
        return relu(out + identity)

    h = relu(conv(x, "stem/kernel", 1) + w["stem_bias/bias"])
    h = block(block(h, "stage1_block1", 1, 8), "stage1_block2", 1, 8)
    h = block(h, "stage2_block1", 2, 16)
    h = tf.reduce_mean(h, axis=[1, 2]) + w["classifier_bias/bias"]
    expected = h @ w["head/kernel"] + w["head/bias"]
    np.testing.assert_allclose(model(x).numpy(), expected.numpy(), rtol=1e-4, atol=1e-5)
    assert {v.path for v in scalar_parameters(model)} == {
        p for p in w if "bias" in p or "scale" in p}  # the reference's lr/10 groups


@pytest.mark.slow
def test_fixup_flags_default_to_its_reference_head_and_scalar_rate():
    """--init=fixup alone is Fixup as published (its trained head, scalars at lr/10); the
    paper's net keeps its random head and one rate; a flag given is kept."""
    code = ("import json, sys; from absl import flags; from resnet_nobn import cli, recipes; "
            "cli.define_flags(recipes.cifar()); flags.FLAGS(sys.argv[1:]); "
            "c = cli.config_from_flags(flags.FLAGS).to_json(); "
            "print(json.dumps([c['model']['head'], c['scalar_lr_factor']]))")
    root = __file__.rsplit("/tests/", 1)[0]
    for args, expected in ((["--init=fixup"], ["trained", 0.1]), ([], ["random", 1.0]),
                           (["--init=skipinit"], ["random", 1.0]),
                           (["--init=fixup", "--head=random", "--scalar_lr_factor=1"],
                            ["random", 1.0])):
        out = subprocess.run([sys.executable, "-c", code, "x"] + args, cwd=root,
                             capture_output=True, text=True, timeout=60)
        assert json.loads(out.stdout) == expected, (args, out.stderr)
