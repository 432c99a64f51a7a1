"""--mixup: Fixup's reference code's mixup (Zhang et al. 2018), in the CIFAR input: each training
image mixed with a random training image by one lam ~ Beta(alpha, alpha) per global batch, the
labels likewise (soft labels), the same on any number of replicas and on resume; off, the stream
is bit for bit what it was; the step's loss is lam CE(y) + (1 - lam) CE(y')."""
import json

import numpy as np
import pytest
import tensorflow as tf

from resnet_nobn.data import cifar
from resnet_nobn.data.datasets import DATASETS
from tests.helpers import run_main, tiny_config, write_idx

pytestmark = pytest.mark.timeout(300)
FMNIST = DATASETS["fashion_mnist"]


def _input(mixup, n=32):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 28, 28, 1), dtype=np.uint8)
    labels = (np.arange(n) % 10).astype(np.int32)
    return cifar.InMemoryInput(FMNIST, (images, labels), (images, labels), seed=4, mixup=mixup,
                               num_classes=10)


def _batches(inp, global_batch, start_step, count, replicas=1):
    """`count` global batches from `start_step`, each the concatenation of its replicas' parts
    (one input pipeline: its per-replica batches follow one another)."""
    ctx = tf.distribute.InputContext(num_replicas_in_sync=replicas)
    it = iter(inp.train_dataset(ctx, global_batch, start_step))
    parts = [next(it) for _ in range(count * replicas)]
    return [tuple(np.concatenate([parts[g * replicas + r][k].numpy() for r in range(replicas)])
                  for k in range(2)) for g in range(count)]


def test_mixed_labels_are_one_lam_per_global_batch_between_two_classes():
    for images, labels in _batches(_input(1.0), 8, 0, 3):
        assert labels.shape == (8, 10) and images.shape == (8, 32, 32, 3)
        np.testing.assert_allclose(labels.sum(1), 1, atol=1e-6)
        shares = np.sort(labels, axis=1)[:, -2:]  # lam and 1 - lam (or 1 if both are one class)
        big = shares[:, 1]
        lam = big[shares[:, 0] > 0]
        assert lam.size and np.allclose(lam, lam[0], atol=1e-6)  # one lam for the whole batch
    first = _batches(_input(1.0), 8, 0, 3)
    lams = {round(float(np.sort(l, 1)[:, -1].max()), 5) for _, l in first}
    assert len(lams) > 1  # a new lam each global batch


def test_the_stream_is_the_same_on_resume_and_on_two_replicas():
    one = _batches(_input(1.0), 8, 0, 4)
    resumed = _batches(_input(1.0), 8, 2, 2)
    for (a, la), (b, lb) in zip(one[2:], resumed):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(la, lb)
    two = _batches(_input(1.0), 8, 0, 4, replicas=2)
    for (a, la), (b, lb) in zip(one, two):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(la, lb)


def test_off_the_stream_is_unchanged_and_the_image_is_the_mix_of_two_standardised_images():
    plain = _batches(_input(0.0), 8, 0, 1)[0]
    assert plain[1].dtype == np.int32 and plain[1].shape == (8,)
    mixed_images, mixed_labels = _batches(_input(1.0), 8, 0, 1)[0]
    lam = np.sort(mixed_labels, 1)[:, -1]
    own = mixed_labels[np.arange(8), plain[1]]  # the share of each image's own label
    # where the partner has another class, the image is own*x + (1-own)*x' with x the plain one
    other = own < 1 - 1e-6
    assert other.any() and np.allclose(own[other], own[other][0], atol=1e-6)
    assert np.allclose(lam[other], np.maximum(own[other], 1 - own[other]), atol=1e-6)
    w = own[other][0]
    partner = (mixed_images[other] - w * plain[0][other]) / (1 - w)
    assert np.all(np.abs(partner.mean(axis=(1, 2, 3))) < 1e-3)  # a standardised image (mean 0)


def test_mixup_is_refused_without_a_training_split(tmp_path):
    with pytest.raises(ValueError, match="mixup"):
        tiny_config(tmp_path, mixup=1.0)


def test_the_steps_loss_of_mixed_labels_is_the_mixed_cross_entropy():
    from resnet_nobn.training.steps import per_example_cross_entropy as cross_entropy
    logits = tf.constant(np.random.default_rng(1).standard_normal((4, 10)), tf.float32)
    y, y2, lam = tf.constant([1, 2, 3, 4]), tf.constant([5, 6, 3, 8]), 0.3
    soft = lam * tf.one_hot(y, 10) + (1 - lam) * tf.one_hot(y2, 10)
    want = (lam * tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
            + (1 - lam) * tf.nn.sparse_softmax_cross_entropy_with_logits(y2, logits))
    got, classes = cross_entropy(soft, logits)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    assert classes.numpy().tolist() == [5, 6, 3, 8]  # the larger share (0.7)
    plain, same = cross_entropy(y, logits)
    np.testing.assert_array_equal(plain.numpy(), tf.nn.sparse_softmax_cross_entropy_with_logits(
        y, logits).numpy())
    assert same is y


@pytest.mark.slow
def test_a_run_records_its_mixup_and_refuses_another_on_resume(tmp_path):
    from resnet_nobn.data import prepare
    rng = np.random.default_rng(4)
    write_idx(str(tmp_path / "idx"), (rng.integers(0, 256, (24, 28, 28)), rng.integers(0, 10, 24)),
              (rng.integers(0, 256, (8, 28, 28)), rng.integers(0, 10, 8)))
    (tmp_path / "data").mkdir()
    prepare.prepare(prepare.tfds_builder("fashion_mnist", str(tmp_path / "data")),
                    str(tmp_path / "idx"))
    run = tmp_path / "run"
    flags = ["--dataset=fashion_mnist", f"--data_dir={tmp_path / 'data'}", f"--model_dir={run}",
             "--widths=8,16,32", "--stem_width=8", "--blocks_per_stage=1", "--batch_size=8",
             "--eval_every=2", "--log_every=1"]
    p = run_main("cifar_train.py", *flags, "--train_steps=2", "--mixup=1")
    assert p.returncode == 0, p.stderr
    assert json.loads((run / "config.json").read_text())["mixup"] == 1.0
    p = run_main("cifar_train.py", *flags, "--train_steps=4", "--mixup=0.2")
    assert p.returncode != 0 and "mixup" in p.stderr and p.stderr.count("\n") == 1, p.stderr


@pytest.mark.parametrize("alpha", [0.01, 0.03, 0.2, 1.0, 30.0])
def test_lam_follows_beta_alpha_alpha_for_small_and_large_alpha(alpha):
    """Beta(alpha, alpha): mean 1/2, variance 1 / (4 (2 alpha + 1)), and (alpha < 1) no mass
    at 1/2, where two float32 Gamma draws clamped to the smallest normal gave exactly 0.5."""
    lam = cifar.symmetric_beta([40_000], tf.constant([4, -(2 ** 41)], tf.int64), alpha).numpy()
    assert lam.dtype == np.float32 and lam.min() >= 0 and lam.max() <= 1
    variance = 1 / (4 * (2 * alpha + 1))
    assert abs(lam.mean() - 0.5) < 5 * np.sqrt(variance / lam.size)
    assert abs(lam.var() / variance - 1) < 0.04
    assert np.mean(lam == 0.5) < 1e-3


def test_a_tiny_alpha_mixes_no_batch_and_a_huge_one_mixes_every_batch_half_and_half():
    for alpha, shares in ((1e-30, {1.0}), (1e30, {0.5, 1.0})):
        for _, labels in _batches(_input(alpha), 8, 0, 6):
            assert set(np.round(np.sort(labels, 1)[:, -1], 6)) <= shares, alpha
    lam = cifar.symmetric_beta([1000], tf.constant([1, 2], tf.int64), 1e-30).numpy()
    assert set(lam) == {0.0, 1.0}
