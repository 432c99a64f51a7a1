"""--standardize: per-image (the fork's, unchanged) or the training split's mean and std per
channel over the images as the network takes them (Fashion-MNIST zero-padded to 32x32x3), applied
in training and evaluation, recorded in results.json, kept by a resume, and served by an export."""
import json

import numpy as np
import pytest
import tensorflow as tf

from resnet_nobn.data import cifar, standardization
from resnet_nobn.data.datasets import DATASETS
from resnet_nobn.export import writer
from resnet_nobn.training.trainer import Trainer
from tests.helpers import run_main, tiny_config, write_idx

pytestmark = pytest.mark.timeout(500)
FMNIST = DATASETS["fashion_mnist"]


def _images(n, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, 28, 28, 1), dtype=np.uint8)


def test_dataset_moments_are_numpys_over_the_padded_3_channel_images_in_any_chunks():
    images = _images(50)
    padded = np.zeros((50, 32, 32, 3))
    padded[:, 2:30, 2:30, :] = images  # zero border, the grey value in every channel
    got = cifar.dataset_standardization(images, FMNIST)
    assert got.mode == "dataset" and len(got.mean) == 3
    np.testing.assert_allclose(got.mean, padded.mean(axis=(0, 1, 2)), rtol=1e-13)
    np.testing.assert_allclose(got.std, padded.std(axis=(0, 1, 2)), rtol=1e-12)
    assert cifar.dataset_standardization(images, FMNIST, chunk=7) == got  # exact: integer sums
    x = tf.constant(images[:2])
    want = (padded[:2] - padded.mean(axis=(0, 1, 2))) / padded.std(axis=(0, 1, 2))
    np.testing.assert_allclose(got(cifar.to_network(x, FMNIST)).numpy(), want, atol=1e-5)
    assert standardization.from_results({"standardization": got.record()}) == got  # JSON round trip


def test_per_image_is_the_forks_and_both_apply_to_training_and_test_images():
    images, labels = _images(16), np.arange(16, dtype=np.int32) % 10
    ctx = tf.distribute.InputContext()
    per_image = cifar.InMemoryInput(FMNIST, (images, labels), (images, labels), seed=1)
    dataset = cifar.InMemoryInput(FMNIST, (images, labels), (images, labels), seed=1,
                                  standardize=cifar.dataset_standardization(images, FMNIST))
    raw = cifar.to_network(tf.constant(images[:8]), FMNIST)
    a = next(iter(per_image.eval_dataset(ctx, 8)))[0].numpy()
    np.testing.assert_array_equal(a, tf.image.per_image_standardization(
        tf.cast(raw, tf.float32)).numpy())  # bit for bit what it was
    std = dataset.standardization
    b = next(iter(dataset.eval_dataset(ctx, 8)))[0].numpy()
    np.testing.assert_array_equal(b, std(raw).numpy())
    # training: the same augmented images, standardised last, one way or the other
    ta = next(iter(per_image.train_dataset(ctx, 8, 0)))[0].numpy()
    tb = next(iter(dataset.train_dataset(ctx, 8, 0)))[0].numpy()
    augmented = tb * np.array(std.std, np.float32) + np.array(std.mean, np.float32)
    np.testing.assert_allclose(tf.image.per_image_standardization(augmented).numpy(), ta,
                               atol=2e-4)
    assert abs(tb.mean()) < 1 and not np.allclose(ta, tb)


def test_synthetic_data_is_refused_in_one_line():
    with pytest.raises(ValueError, match="standardize=dataset needs a training split"):
        tiny_config("/tmp/unused", standardize="dataset")
    p = run_main("cifar_train.py", "--use_synthetic_data", "--standardize=dataset")
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("error: --standardize=dataset needs a training split"), p.stderr


@pytest.fixture(scope="module")
def fmnist(tmp_path_factory):
    """A tiny Fashion-MNIST prepared offline in a tfds directory: (data_dir, train images)."""
    from resnet_nobn.data import prepare
    tmp = tmp_path_factory.mktemp("fmnist")
    rng = np.random.default_rng(4)
    train = (_images(24, seed=4)[..., 0], rng.integers(0, 10, 24))
    test = (_images(8, seed=5)[..., 0], rng.integers(0, 10, 8))
    write_idx(str(tmp / "idx"), train, test)
    (tmp / "data").mkdir()
    builder = prepare.tfds_builder("fashion_mnist", str(tmp / "data"))
    prepare.prepare(builder, str(tmp / "idx"))
    return str(tmp / "data"), train[0][..., None], test[0][..., None]


@pytest.mark.slow
def test_a_run_records_its_values_resumes_with_them_and_its_export_serves_them(fmnist, tmp_path):
    data_dir, train, test = fmnist
    run = tmp_path / "run"
    cfg = tiny_config(run, use_synthetic_data=False, dataset="fashion_mnist", data_dir=data_dir,
                      standardize="dataset", train_steps=2, eval_every=2)
    results = Trainer(cfg).run()
    want = cifar.dataset_standardization(train, FMNIST)
    assert standardization.from_results(results) == want
    assert json.loads((run / "config.json").read_text())["standardize"] == "dataset"
    # a resume goes on with the recorded values, even where the data would now give others
    edited = dict(results, standardization=dict(want.record(), mean=[10.0, 20.0, 30.0]))
    (run / "results.json").write_text(json.dumps(edited))
    resumed = Trainer(tiny_config(run, use_synthetic_data=False, dataset="fashion_mnist",
                                  data_dir=data_dir, standardize="dataset", train_steps=4,
                                  eval_every=2))
    assert resumed.input.standardization.mean == (10.0, 20.0, 30.0)
    results = resumed.run()
    assert results["standardization"]["mean"] == [10.0, 20.0, 30.0]
    # the export's serving graph standardises as the run did; its card says the values
    export = tmp_path / "export"
    writer.export(str(run), str(export), log=lambda *_: None)
    serve = tf.saved_model.load(str(export / "saved_model")).signatures["serving_default"]
    used = resumed.input.standardization
    expected = resumed.model(used(cifar.to_network(tf.constant(test), FMNIST)), training=False)
    np.testing.assert_allclose(serve(images=tf.constant(test))["logits"].numpy(),
                               expected.numpy(), rtol=1e-5, atol=1e-5)
    card = (export / "model_card.md").read_text()
    assert "mean (10, 20, 30)" in card and f"{want.std[0]:.10g}" in card, card
    assert "--standardize=dataset" in card


def test_dataset_mean_and_std_of_images_stored_as_the_network_takes_them():
    """CIFAR's 32x32x3 images pass `to_network` unchanged (numpy in, numpy out): their mean and
    standard deviation per channel, by hand."""
    import numpy as np
    from resnet_nobn.data.cifar import dataset_standardization
    from resnet_nobn.data.datasets import DATASETS
    images = np.random.default_rng(0).integers(0, 256, (5, 32, 32, 3), dtype=np.uint8)
    std = dataset_standardization(images, DATASETS["cifar10"])
    np.testing.assert_allclose(std.mean, images.mean(axis=(0, 1, 2)), rtol=1e-12)
    np.testing.assert_allclose(std.std, images.std(axis=(0, 1, 2)), rtol=1e-12)


@pytest.mark.parametrize("pixels, said", [
    ((100, 100, 100), "channels 0, 1, 2 vary by less than one pixel level (standard deviation "
                      "0, 0, 0)"),
    ((0, 90, 0), "channels 0, 2 vary"),
    ((200, 0, 7), "channels 0, 1, 2 vary"),
])
def test_a_training_split_that_hardly_varies_is_named_as_the_cause(pixels, said):
    """Each image one flat colour (and, in the last, one pixel off it): no divergence to advise
    on later, one line naming the channels now."""
    from resnet_nobn.errors import UserError
    images = np.broadcast_to(np.array(pixels, np.uint8), (40, 32, 32, 3)).copy()
    if pixels == (0, 90, 0):
        images[:20, ..., 1] = 0  # channel 1 varies; 0 and 2 do not
    if pixels == (200, 0, 7):
        images[0, 0, 0] += 1  # one pixel of 40,960 off: a standard deviation of 0.005
    with pytest.raises(UserError, match=r"^--standardize=dataset: the training split's "
                                        + said.replace("(", r"\(").replace(")", r"\)")):
        standardization.of_batches([images])
    images[:20] = 255 - images[:20]
    assert standardization.of_batches([images]).mode == "dataset"  # half one colour, half another
