"""The library as keras-hub and tf.keras.applications are used (docs/library.md): `load_dataset`
gives the command line's input as batches of raw pixels, `ImageClassifier` takes raw pixels
(Fashion-MNIST's 28x28 grey too) and trains on them with `model.fit`, on TensorFlow and on JAX; its
`.keras` file loads in a fresh process after `import resnet_nobn` alone; its backbone and
`build_model(include_top=False)` give the pooled features; bad arguments are named."""
import os
import subprocess
import sys

import numpy as np
import pytest

import resnet_nobn
from tests.helpers import ROOT, TINY_MODEL, write_idx

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONPATH=ROOT)
N_TRAIN, N_TEST = 24, 12


def _python(code, cwd, **env):
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=dict(ENV, **env))


@pytest.fixture(scope="module")
def fashion(tmp_path_factory):
    """A tfds data directory holding Fashion-MNIST prepared offline from idx files of random
    images (as run/prepare_data.py --manual_dir does): (data_dir, (train, test) arrays)."""
    from resnet_nobn.data import prepare
    tmp = tmp_path_factory.mktemp("fashion")
    rng = np.random.default_rng(0)
    arrays = tuple((rng.integers(0, 256, (n, 28, 28), dtype=np.uint8),
                    rng.integers(0, 10, n).astype(np.int32)) for n in (N_TRAIN, N_TEST))
    write_idx(str(tmp / "idx"), *arrays)
    (tmp / "data").mkdir()
    prepare.prepare(prepare.tfds_builder("fashion_mnist", str(tmp / "data")), str(tmp / "idx"))
    return str(tmp / "data"), arrays


def _tiny(dataset="fashion_mnist"):
    return resnet_nobn.ImageClassifier.from_preset(dataset, **TINY_MODEL)


def test_the_test_split_is_the_network_s_pixels_once_in_order(fashion):
    data_dir, (_, (images, labels)) = fashion
    ds = resnet_nobn.load_dataset("fashion_mnist", "test", batch_size=5, data_dir=data_dir)
    batches = list(ds.as_numpy_iterator())
    assert [len(y) for _, y in batches] == [5, 5, 2]
    x = np.concatenate([x for x, _ in batches])
    assert x.dtype == np.uint8 and x.shape == (N_TEST, 32, 32, 3)
    y = np.concatenate([y for _, y in batches])
    # every test image once with its label (in the prepared split's order, tfds' own), each
    # 28x28 grey image with 2 zero pixels a side and its grey value in every channel
    written = {image.tobytes(): label for image, label in zip(images, labels)}
    assert {x[i, 2:30, 2:30, 0].tobytes(): y[i] for i in range(N_TEST)} == written
    np.testing.assert_array_equal(x[..., 0:1], x[..., 1:2])
    np.testing.assert_array_equal(x[..., 0:1], x[..., 2:3])
    assert not x[:, :2].any() and not x[:, 30:].any() and not x[:, :, :2].any()
    assert not x[:, :, 30:].any()
    assert ds.num_examples == N_TEST and ds.class_names[0] == "T-shirt/top"
    # the model's own rule gives the same pixels from the 28x28x1 images
    from resnet_nobn.model.classifier import ToNetwork
    order = [next(i for i in range(N_TEST) if (images[i] == x[j, 2:30, 2:30, 0]).all())
             for j in range(N_TEST)]
    np.testing.assert_array_equal(np.asarray(ToNetwork(32)(images[order][..., None])), x)


def test_the_training_split_is_the_run_s_stream(fashion):
    data_dir, ((images, labels), _) = fashion
    first = resnet_nobn.load_dataset("fashion_mnist", batch_size=8, data_dir=data_dir, seed=3)
    again = resnet_nobn.load_dataset("fashion_mnist", batch_size=8, data_dir=data_dir, seed=3)
    other = resnet_nobn.load_dataset("fashion_mnist", batch_size=8, data_dir=data_dir, seed=4)
    a, b, c = (list(ds.take(6).as_numpy_iterator()) for ds in (first, again, other))
    assert len(a) == 6  # endless: more batches than the split holds
    for (x, y), (x2, y2) in zip(a, b):
        assert x.dtype == np.uint8 and x.shape == (8, 32, 32, 3) and y.dtype == np.int32
        np.testing.assert_array_equal(x, x2)
        np.testing.assert_array_equal(y, y2)
    assert any((x != x2).any() for (x, _), (x2, _) in zip(a, c))
    # each epoch holds every training label once (a permutation)
    np.testing.assert_array_equal(np.sort(np.concatenate([y for _, y in a[:3]])), np.sort(labels))
    assert first.num_examples == N_TRAIN


def test_both_splits_leave_autotuning_off_so_that_fit_returns_at_once(fashion):
    """With tf.data's autotuning on, `model.fit` on the training stream returned seconds after
    its last step, idle (resnet_nobn/data/library_input.py `_described`)."""
    data_dir, _ = fashion
    for split in ("train", "test"):
        ds = resnet_nobn.load_dataset("fashion_mnist", split, batch_size=8, data_dir=data_dir)
        assert ds.options().autotune.enabled is False, split


@pytest.mark.slow
def test_an_image_classifier_fits_on_it_and_its_backbone_gives_the_features(fashion):
    data_dir, _ = fashion
    train = resnet_nobn.load_dataset("fashion_mnist", batch_size=8, data_dir=data_dir)
    test = resnet_nobn.load_dataset("fashion_mnist", "test", batch_size=8, data_dir=data_dir)
    model = _tiny()
    assert model.optimizer.momentum == 0.9  # compiled with the recipe
    history = model.fit(train, steps_per_epoch=3, epochs=2, validation_data=test, verbose=0)
    assert np.isfinite(history.history["loss"]).all() and "val_accuracy" in history.history
    assert int(model.optimizer.iterations) == 6
    features = model.backbone.predict(np.zeros((2, 28, 28, 1), "uint8"), verbose=0)
    assert features.shape == (2, TINY_MODEL["widths"][-1])
    bare = resnet_nobn.build_model(resnet_nobn.ModelConfig(**TINY_MODEL), include_top=False)
    assert bare.output_shape == (None, TINY_MODEL["widths"][-1])
    assert [w.shape for w in bare.weights] == [w.shape for w in model.layers[-1].weights
                                               if "head" not in w.path]


@pytest.mark.slow
@pytest.mark.parametrize("first", [
    "import sys, resnet_nobn\nassert 'keras' not in sys.modules\n",
    # a module of ours that imports Keras, which resnet_nobn.model imports in turn: the classes
    # registered once it has loaded (registering as Keras loaded was a circular import)
    "import resnet_nobn.schedule\n"])
def test_a_saved_classifier_loads_in_a_fresh_process_without_custom_objects(tmp_path, first):
    model = _tiny()
    x = np.random.default_rng(1).integers(0, 256, (4, 28, 28, 1), dtype=np.uint8)
    model.fit(x, np.arange(4), epochs=1, verbose=0)
    model.save(tmp_path / "x.keras")
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "logits.npy", model.predict(x, verbose=0))
    p = _python(first +
                "import keras, numpy as np\n"
                "model = keras.saving.load_model('x.keras')\n"
                "assert type(model).__name__ == 'ImageClassifier', type(model)\n"
                "assert int(model.optimizer.iterations) == 1\n"
                "np.testing.assert_allclose(model.predict(np.load('x.npy'), verbose=0),\n"
                "                           np.load('logits.npy'), rtol=1e-5, atol=1e-5)\n"
                "print('loaded')", tmp_path)
    assert p.returncode == 0 and "loaded" in p.stdout, p.stderr[-3000:]


@pytest.mark.slow
def test_it_fits_on_the_jax_backend(fashion, tmp_path):
    pytest.importorskip("jax")
    data_dir, _ = fashion
    p = _python("import keras, numpy as np, resnet_nobn\n"
                "assert keras.backend.backend() == 'jax'\n"
                f"train = resnet_nobn.load_dataset('fashion_mnist', batch_size=8, "
                f"data_dir={data_dir!r})\n"
                "model = resnet_nobn.ImageClassifier.from_preset('fashion_mnist', widths=(8, 16, 32),"
                " blocks_per_stage=1, stem_width=8)\n"
                "h = model.fit(train, steps_per_epoch=2, epochs=1, verbose=0)\n"
                "assert np.isfinite(h.history['loss']).all(), h.history\n"
                "print(model.predict(np.zeros((2, 28, 28, 1), 'uint8'), verbose=0).shape)",
                tmp_path, KERAS_BACKEND="jax")
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().splitlines()[-1] == "(2, 10)"


@pytest.mark.parametrize("kwargs, message", [
    (dict(name="mnist"), r"load_dataset: name='mnist' is not a dataset; give one of cifar10, "),
    (dict(name="cifar10", split="validation"), r"split='validation' is not a split; give 'train'"),
    (dict(name="cifar10", batch_size=0), r"load_dataset's batch_size=0 must be at least 1"),
    (dict(name="cifar10", batch_size=2.5), r"load_dataset's batch_size=2\.5 must be an integer"),
    (dict(name="cifar10", seed=-1), r"load_dataset's seed=-1 must be in \[0, "),
    (dict(name="image_folder"), r"name='image_folder' needs data_dir=ROOT, the folder holding "
                                r"ROOT/train/LABEL/image\.png"),
])
def test_load_dataset_names_a_bad_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        resnet_nobn.load_dataset(**kwargs)


def test_missing_data_says_how_to_prepare_it(tmp_path):
    from resnet_nobn.errors import UserError
    with pytest.raises(UserError, match=r"no prepared cifar10 in --data_dir=.*run/prepare_data\.py"):
        resnet_nobn.load_dataset("cifar10", data_dir=str(tmp_path))
    with pytest.raises(UserError, match=r"imagenet2012 is not prepared in .* ILSVRC2012_img_train"
                                        r"\.tar and ILSVRC2012_img_val\.tar are missing"):
        resnet_nobn.load_dataset("imagenet2012", "test", data_dir=str(tmp_path))
    with pytest.raises(UserError, match=r"does not exist; give the folder holding ROOT/train"):
        resnet_nobn.load_dataset("image_folder", data_dir=str(tmp_path / "nothing"))


def test_the_classifier_names_a_bad_argument():
    with pytest.raises(ValueError, match=r"dataset='imagenet2012' must be one of cifar10, "
                                         r"cifar100, fashion_mnist, image_folder"):
        resnet_nobn.ImageClassifier(dataset="imagenet2012")
    with pytest.raises(ValueError, match=r"config.num_classes=10, and cifar100 has 100 classes"):
        resnet_nobn.ImageClassifier(resnet_nobn.ModelConfig(**TINY_MODEL), dataset="cifar100")
    with pytest.raises(TypeError, match=r"recipe must be a resnet_nobn.TrainConfig, not a "
                                        r"ModelConfig"):
        resnet_nobn.ImageClassifier(recipe=resnet_nobn.ModelConfig())
    with pytest.raises(ValueError, match=r"40x40 images are larger than the network's 32x32; "
                                         r"resize them"):
        _tiny("cifar10").predict(np.zeros((1, 40, 40, 3), "uint8"), verbose=0)


def test_an_image_folder_is_read_as_a_run_reads_it(tmp_path):
    from PIL import Image
    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        for label in ("cat", "dog"):
            (tmp_path / split / label).mkdir(parents=True)
            for i in range(2):  # one of the network's size, one resized to it
                size = (32, 32) if i else (40, 24)
                Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)).save(
                    tmp_path / split / label / f"{i}.png")
    ds = resnet_nobn.load_dataset("image_folder", "test", batch_size=3, data_dir=str(tmp_path))
    (x1, y1), (x2, y2) = ds.as_numpy_iterator()
    assert x1.shape == (3, 32, 32, 3) and x2.shape == (1, 32, 32, 3) and x1.dtype == np.uint8
    assert ds.class_names == ("cat", "dog") and ds.num_examples == 4
    assert sorted([*y1, *y2]) == [0, 0, 1, 1]
    first = np.asarray(Image.open(tmp_path / "test" / "cat" / "1.png"))
    assert any((first == x).all() for x in [*x1, *x2])  # pixels as they are, not standardised
