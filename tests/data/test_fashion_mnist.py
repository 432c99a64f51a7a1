"""Fashion-MNIST as a dataset of its own: prepared offline from idx files as tfds' `fashion_mnist`,
trained by the CIFAR network with its 28x28 grey images padded to 32x32x3 in one place, and named
`fashion_mnist` by every record; another dataset's images under a dataset's name are said, not
silently taken for it; an offline download leaves nothing behind."""
import dataclasses
import json
import os

import numpy as np
import pytest

from tests.helpers import TINY_NET, no_network_env, run_main, run_offline, write_cifar10, write_idx

DEBIAN = "/usr/share/datasets/fashion-mnist"
ARGS = [*TINY_NET, "--batch_size=8", "--learning_rate=0.01", "--lr_boundaries=", "--log_every=2",
        "--eval_every=4", "--train_steps=4"]


def _fake_idx(directory, n_train=24, n_test=12, seed=0):
    """Fashion-MNIST's four idx files with random images: (train, test) arrays as written."""
    rng = np.random.default_rng(seed)
    train = (rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8), rng.integers(0, 10, n_train))
    test = (rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8), rng.integers(0, 10, n_test))
    write_idx(str(directory), train, test)
    return train, test


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """run/prepare_data.py --dataset=fashion_mnist from idx files in --manual_dir, no network;
    (data_dir, the arrays written, the command's output, the examples directory)."""
    tmp = tmp_path_factory.mktemp("fmnist")
    arrays = _fake_idx(tmp / "idx")
    data_dir, examples = tmp / "data", tmp / "examples"
    proc = run_main("prepare_data.py", "--dataset=fashion_mnist", f"--data_dir={data_dir}",
                   f"--manual_dir={tmp / 'idx'}", f"--examples_dir={examples}")
    assert proc.returncode == 0, proc.stderr
    return str(data_dir), arrays, proc.stdout, examples


def test_preparing_it_for_a_training_run_draws_no_progress_bars(tmp_path, capfd):
    """A training run without --data_dir prepares Fashion-MNIST itself (prepare.prepare): its one
    `preparing ...` line, not tfds' progress bars (run/prepare_data.py turned them off, training
    did not)."""
    import tensorflow_datasets as tfds
    from resnet_nobn.data import prepare
    _fake_idx(tmp_path / "idx")
    (tmp_path / "data").mkdir()
    tfds.enable_progress_bar()  # as a new process starts; another test may have turned them off
    prepare.prepare(prepare.tfds_builder("fashion_mnist", str(tmp_path / "data")),
                    str(tmp_path / "idx"))
    said = capfd.readouterr()
    assert "preparing fashion_mnist in" in said.out, said
    assert "%|" not in said.out + said.err and "examples/s" not in said.out + said.err, said


@pytest.mark.slow
def test_prepare_data_writes_tfds_own_fashion_mnist_from_idx_files(prepared):
    import tensorflow_datasets as tfds
    data_dir, (train, test), out, examples = prepared
    assert "(no download)" in out and "fashion_mnist is prepared in" in out, out
    assert "test 12, train 24 images" in out and "--dataset=fashion_mnist" in out, out
    builder = tfds.builder("fashion_mnist", data_dir=data_dir)  # the registered builder reads it
    assert builder.is_prepared() and builder.info.features["image"].shape == (28, 28, 1)
    assert builder.info.features["label"].names[0] == "T-shirt/top"
    for split, (images, labels) in (("train", train), ("test", test)):
        got = list(tfds.as_numpy(builder.as_dataset(split=split, as_supervised=True)))
        want = {(im.tobytes(), int(lab)) for im, lab in zip(images, labels)}
        assert {(im[..., 0].tobytes(), int(lab)) for im, lab in got} == want
    assert os.listdir(data_dir) == ["fashion_mnist"]  # no empty downloads/ left either
    pngs = sorted(os.listdir(examples))
    assert len(pngs) == 10 and all(p.endswith(".png") for p in pngs), pngs
    again = run_main("prepare_data.py", "--dataset=fashion_mnist", f"--data_dir={data_dir}")
    assert again.returncode == 0 and "already prepared" in again.stdout, again.stderr


@pytest.mark.slow
def test_examples_that_cannot_be_written_are_one_line_and_the_dataset_stays(prepared, tmp_path):
    data_dir, first = prepared[0], sorted(os.listdir(prepared[3]))[0]
    (tmp_path / "file").write_text("")
    (tmp_path / "taken" / first).mkdir(parents=True)  # an example's name taken by a directory
    for examples, said in (
            ("file", f"error: --examples_dir={tmp_path / 'file'} is a file, not a directory; give "
                     "another path"),
            ("file/sub", f"error: cannot write the test images to --examples_dir="
                         f"{tmp_path / 'file' / 'sub'}: Not a directory"),
            ("taken", f"error: cannot write the test images to --examples_dir={tmp_path / 'taken'}"
                      f": Is a directory ({tmp_path / 'taken' / first}); the "
                      "dataset is prepared: give another --examples_dir")):
        p = run_main("prepare_data.py", "--dataset=fashion_mnist", f"--data_dir={data_dir}",
                    f"--examples_dir={tmp_path / examples}")
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert p.stderr.startswith(said), p.stderr
    assert os.listdir(tmp_path / "taken") == [first]  # nothing half-written
    assert sorted(os.listdir(data_dir)) == ["fashion_mnist"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_fashion_mnist_run_says_fashion_mnist_everywhere_and_its_export_pads_as_training(
        prepared, tmp_path):
    import keras
    import tensorflow as tf

    from resnet_nobn.data import cifar, prepare
    from resnet_nobn.data.datasets import DATASETS
    from resnet_nobn.model.network import custom_objects
    data_dir, _, _, examples = prepared
    run, export = tmp_path / "run", tmp_path / "export"
    proc = run_main("cifar_train.py", "--dataset=fashion_mnist", f"--data_dir={data_dir}", *ARGS,
                   f"--model_dir={run}")
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stdout, proc.stdout  # its own name: nothing to warn about
    results = json.loads((run / "results.json").read_text())
    assert results["dataset"] == "fashion_mnist" and "data_mismatch" not in results
    rep = run_main("report.py", f"--root={tmp_path}")
    assert rep.returncode == 0, rep.stderr
    assert rep.stdout.count("| fashion_mnist |") == 1 and "cifar" not in rep.stdout, rep.stdout
    p = run_main("export.py", f"--model_dir={run}", f"--export_dir={export}")
    assert p.returncode == 0, p.stderr
    meta = json.loads((export / "export.json").read_text())
    assert (meta["dataset"], meta["image_size"], meta["input"]) == ("fashion_mnist", 28, "pixels")
    card = (export / "model_card.md").read_text()
    assert "fashion_mnist" in card and "uint8 [N, 28, 28, 1] grey pixels" in card
    assert "cifar10" not in card and "CIFAR-10" not in card, card
    example = sorted(examples.iterdir())[0]
    p = run_main("predict.py", f"--export_dir={export}", str(example))  # 28x28: no --resize
    assert p.returncode == 0, p.stderr
    # the served graph pads a 28x28 grey image as the input pipeline did: the run's logits
    serve = tf.saved_model.load(str(export / "saved_model")).signatures["serving_default"]
    builder = prepare.prepared_builder("fashion_mnist", data_dir)
    info = DATASETS["fashion_mnist"]
    test = cifar.load_split(builder, "test", info)
    pipeline = cifar.InMemoryInput(info, test, test, seed=0)
    images, _, _ = next(iter(pipeline.eval_dataset(tf.distribute.InputContext(), 4)))
    keras_model = keras.saving.load_model(str(export / "model.keras"),
                                          custom_objects=custom_objects())
    np.testing.assert_allclose(serve(images=tf.constant(test[0][:4]))["logits"].numpy(),
                               keras_model(images, training=False).numpy(), rtol=1e-5, atol=1e-5)
    padded = cifar.to_network(tf.constant(test[0][:1]), info).numpy()
    assert padded.shape == (1, 32, 32, 3) and not padded[:, :2].any() and not padded[:, :, -2:].any()
    np.testing.assert_array_equal(padded[0, 2:30, 2:30, 0], test[0][0, ..., 0])
    np.testing.assert_array_equal(padded[..., 0], padded[..., 2])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_another_datasets_images_under_cifar10s_name_are_said_wherever_the_dataset_is_named(
        tmp_path):
    """Fashion-MNIST written as a tfds `cifar10` directory: the run trains, warns, records where
    its data came from; the report, the plot's panel, the model card never call it CIFAR-10."""
    from resnet_nobn.data.datasets import FASHION_MNIST_NAMES
    rng = np.random.default_rng(0)
    data = tmp_path / "copy"
    write_cifar10(str(data), {s: (rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8),
                                  rng.integers(0, 10, n)) for s, n in (("train", 16), ("test", 8))},
                  label_names=FASHION_MNIST_NAMES)
    run = tmp_path / "study" / "run"
    proc = run_main("cifar_train.py", f"--data_dir={data}", *ARGS, f"--model_dir={run}")
    assert proc.returncode == 0, proc.stderr
    where = str(data / "cifar10" / "3.0.2")
    (warning,) = [line for line in proc.stdout.splitlines() if line.startswith("warning:")]
    assert f"{where} is not CIFAR-10: its classes are T-shirt/top, Trouser" in warning, warning
    results = json.loads((run / "results.json").read_text())
    assert results["dataset"] == "cifar10" and where in results["data_mismatch"]
    rep = run_main("report.py", f"--root={tmp_path / 'study'}")
    assert rep.returncode == 0, rep.stderr
    (row,) = [line for line in rep.stdout.splitlines() if line.startswith("| cifar10")]
    assert row.startswith(f"| cifar10 (not CIFAR-10: {where}) |"), row
    assert "(Ours)" not in row and "T-shirt/top" in rep.stdout  # no Table 2 value beside it
    export = tmp_path / "export"
    assert run_main("export.py", f"--model_dir={run}", f"--export_dir={export}").returncode == 0
    card = (export / "model_card.md").read_text()
    assert card.startswith(f"# Model card: resnet_nobn, cifar10 (not CIFAR-10: {where})"), card[:200]
    assert where in json.loads((export / "export.json").read_text())["data_mismatch"]
    assert "Not trained on CIFAR-10" in card
    assert (export / "labels.txt").read_text().splitlines()[0] == "T-shirt/top"


def test_real_cifar10_class_names_are_not_a_mismatch(tmp_path):
    import tensorflow_datasets as tfds

    from resnet_nobn.data import tfds_dir
    from resnet_nobn.data.datasets import DATASETS
    rng = np.random.default_rng(0)
    write_cifar10(str(tmp_path), {"train": (rng.integers(0, 256, (4, 32, 32, 3), dtype=np.uint8),
                                            np.arange(4))})
    builder = tfds.builder("cifar10", data_dir=str(tmp_path))
    assert tfds_dir.provenance(builder, DATASETS["cifar10"]) is None
    other = dataclasses.replace(DATASETS["cifar100"], num_classes=10)
    assert "is not CIFAR-100: its classes are airplane, automobile" in tfds_dir.provenance(
        builder, other)


@pytest.mark.parametrize("command", [
    ["cifar_train.py", "--dataset=cifar100"],  # tfds' default directory, made by the download
    ["prepare_data.py", "--dataset=cifar10"],  # --data_dir made by the command
])
def test_an_offline_download_leaves_nothing_behind_and_names_the_offline_routes(
        tmp_path, command):
    tfds_home = tmp_path / "home" / "tfds"
    script, *args = command
    args += ([f"--model_dir={tmp_path / 'run'}"] if script == "cifar_train.py"
             else [f"--data_dir={tfds_home}"])
    proc = run_offline(script, *args, TFDS_DATA_DIR=str(tfds_home))
    (line,) = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and line.startswith("error: could not download"), proc.stderr
    assert "--use_synthetic_data" in line and "--dataset=fashion_mnist" in line, line
    assert "python run/prepare_data.py --dataset=fashion_mnist" in line, line
    assert not tfds_home.exists(), [str(p) for p in tfds_home.rglob("*")]
    assert not (tmp_path / "run").exists()


def test_an_offline_download_into_an_existing_directory_removes_only_what_it_made(tmp_path):
    data = tmp_path / "tfds"
    (data / "other").mkdir(parents=True)
    (data / "downloads" / "manual").mkdir(parents=True)
    (data / "downloads" / "manual" / "keep.tar").write_text("x")
    proc = run_offline("prepare_data.py", "--dataset=cifar100", f"--data_dir={data}")
    assert proc.returncode == 2, proc.stderr
    left = sorted(str(p.relative_to(data)) for p in data.rglob("*"))
    assert left == ["downloads", "downloads/manual", "downloads/manual/keep.tar", "other"], left


@pytest.mark.slow
def test_fashion_mnist_without_its_idx_files_says_where_they_go(tmp_path):
    (tmp_path / "idx").mkdir()
    proc = run_main("prepare_data.py", "--dataset=fashion_mnist", f"--data_dir={tmp_path / 'd'}",
                   f"--manual_dir={tmp_path / 'idx'}")
    (line,) = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "lacks train-images-idx3-ubyte.gz" in line, line
    assert not (tmp_path / "d").exists()


@pytest.mark.skipif(not os.path.isdir(DEBIAN), reason="Debian's dataset-fashion-mnist is missing")
def test_prepare_data_prepares_debians_fashion_mnist_whole_without_network(fashion_mnist_prepared):
    """The session's run/prepare_data.py --dataset=fashion_mnist, every request refused."""
    data_dir, stdout = fashion_mnist_prepared
    assert f"from {DEBIAN} (no download)" in stdout
    assert "(test 10,000, train 60,000 images)" in stdout, stdout
    assert os.path.isdir(os.path.join(data_dir, "fashion_mnist"))


def test_without_debians_files_fashion_mnist_is_downloaded_and_offline_says_how_to_get_it(
        tmp_path, monkeypatch):
    from resnet_nobn.data import fashion_mnist, prepare
    from resnet_nobn.errors import UserError
    monkeypatch.setattr(fashion_mnist, "SOURCE", str(tmp_path / "not-installed"))
    data = tmp_path / "data"
    data.mkdir()
    with no_network_env() as proxies, pytest.raises(
            UserError, match=r"could not download fashion_mnist .*apt-get install "
                             r"dataset-fashion-mnist.*--manual_dir.*--use_synthetic"):
        for k, v in proxies.items():  # None: the variable removed
            monkeypatch.delenv(k, raising=False) if v is None else monkeypatch.setenv(k, v)
        prepare.prepare(prepare.tfds_builder("fashion_mnist", str(data)))
    assert os.listdir(data) == []  # the directory was there before: only what it made is gone
