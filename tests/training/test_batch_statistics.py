"""The training log's `pooled_spread` and `logit_norm` (resnet_nobn/training/steps.py
`batch_statistics`): numpy's definitions on a tiny model, the global batch's on 2 mirrored replicas
as on one device, in results.json's train_history and TensorBoard's train/ (they change no weight:
tests/training/test_remedies.py holds the default run to its weights bit for bit)."""
import glob
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from resnet_nobn.data.inputs import SyntheticInput
from resnet_nobn.data.datasets import DATASETS
from resnet_nobn.training import steps
from resnet_nobn.training.trainer import Trainer
from tests.helpers import tiny_config

pytestmark = pytest.mark.timeout(500)


def _numpy(pooled, logits):
    """The definitions, by hand: between-image std of each pooled feature over the batch, mean over
    features, divided by the mean |pooled|; the root-mean-square logit."""
    p, z = np.asarray(pooled, np.float64), np.asarray(logits, np.float64)
    return p.std(axis=0).mean() / np.abs(p).mean(), np.sqrt((z ** 2).mean())


def test_the_definitions_are_numpys_also_from_sums_over_parts():
    rng = np.random.default_rng(0)
    pooled = (rng.standard_normal((12, 5)) * [0.1, 1, 2, 0.5, 0.01] + [1, -2, 0, 0.3, 0.05])
    logits = rng.standard_normal((12, 3)) * 4
    p, z = tf.constant(pooled, tf.float32), tf.constant(logits, tf.float32)
    got = [float(v) for v in steps.batch_statistics(steps.batch_moments(p, z), 3)]
    np.testing.assert_allclose(got, _numpy(pooled, logits), rtol=1e-5)
    parts = steps.batch_moments(p[:5], z[:5]) + steps.batch_moments(p[5:], z[5:])  # 2 replicas
    np.testing.assert_allclose([float(v) for v in steps.batch_statistics(parts, 3)], got,
                               rtol=1e-6)
    # one image, or features all equal across the batch: no spread; zero features: 0, not NaN
    same = tf.ones((4, 5))
    assert float(steps.batch_statistics(steps.batch_moments(same, z[:4]), 3)[0]) == 0.0
    zero = steps.batch_statistics(steps.batch_moments(0 * same, 0 * z[:4]), 3)
    assert [float(v) for v in zero] == [0.0, 0.0]


def test_a_runs_first_log_is_its_initial_networks_values_on_its_first_batch(tmp_path):
    cfg = tiny_config(tmp_path, train_steps=2, log_every=1, learning_rate=0.05)
    trainer = Trainer(cfg)
    images, _ = SyntheticInput(DATASETS[cfg.dataset], cfg.seed)._batch(
        tf.distribute.InputContext(), cfg.batch_size)
    model = trainer.model
    probe = tf.keras.Model(model.inputs, [model.output, model.get_layer("pool").output])
    logits, pooled = probe(images, training=True)
    want = _numpy(pooled, logits)
    results = trainer.run()
    first, second = results["train_history"]
    assert (first["pooled_spread"], first["logit_norm"]) == pytest.approx(want, rel=1e-5)
    assert second["logit_norm"] != first["logit_norm"]  # one value per log, after the update
    tags = set()
    for path in glob.glob(os.path.join(tmp_path, "train", "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags |= {v.tag for v in event.summary.value}
    assert {"pooled_spread", "logit_norm"} <= tags


def _history(model_dir, strategy):
    cfg = tiny_config(model_dir, use_synthetic_data=False, train_steps=4, batch_size=8,
                      learning_rate=0.05, seed=1, log_every=2, strategy=strategy)
    with tfds.testing.mock_data(num_examples=64):
        trainer = Trainer(cfg)
        assert trainer.strategy.num_replicas_in_sync == (2 if strategy == "mirrored" else 1)
        return trainer.run()["train_history"]


def test_two_mirrored_replicas_log_the_global_batchs_values_as_one_device(tmp_path):
    one, two = _history(tmp_path / "one", "one_device"), _history(tmp_path / "two", "mirrored")
    assert len(one) == len(two) == 2
    for a, b in zip(one, two):
        for k in ("pooled_spread", "logit_norm"):
            assert b[k] == pytest.approx(a[k], rel=1e-5), (k, a, b)
        assert a["pooled_spread"] > 0 and a["logit_norm"] > 0
