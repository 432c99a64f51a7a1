"""run/prepare_data.py, the command every data message names: it prepares CIFAR (from a fake
download: the real tfds builder writes the files the trainer reads) and ImageNet (from fake
ILSVRC archives in --manual_dir), and without network or archives it says so in one line, fast."""
import io
import os
import shutil
import socket
import tarfile

import numpy as np
import pytest

from tests.helpers import proxied_env, run_main, run_offline, write_cifar10


def _env(**extra):
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", **extra)


def _fake_cifar100(directory, n_train, n_test, seed=0):
    """What cifar-100-binary.tar.gz extracts to (tfds reads `<dir>/cifar-100-binary/`): records of
    coarse label, fine label and 3x32x32 pixels; returns the train images and fine labels."""
    rng = np.random.default_rng(seed)
    root = directory / "cifar-100-binary"
    root.mkdir(parents=True)
    (root / "coarse_label_names.txt").write_text("\n".join(f"c{i}" for i in range(20)))
    (root / "fine_label_names.txt").write_text("\n".join(f"f{i}" for i in range(100)))
    out = {}
    for split, n in (("train", n_train), ("test", n_test)):
        fine = rng.integers(0, 100, n).astype(np.uint8)
        chw = rng.integers(0, 256, (n, 3, 32, 32)).astype(np.uint8)
        records = np.concatenate([(fine // 5)[:, None], fine[:, None], chw.reshape(n, -1)], axis=1)
        (root / f"{split}.bin").write_bytes(records.tobytes())
        out[split] = (chw.transpose(0, 2, 3, 1), fine.astype(np.int32))
    return out


def _one_error_line(proc):
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), \
        (proc.returncode, proc.stderr)
    return lines[0]


@pytest.mark.slow
def test_prepare_data_prepares_cifar100_that_training_reads(tmp_path, monkeypatch):
    import tensorflow_datasets as tfds
    fake = _fake_cifar100(tmp_path / "extracted", n_train=30, n_test=10)
    data_dir = tmp_path / "new" / "tfds"  # created by the command
    monkeypatch.setattr(tfds.download.DownloadManager, "download_and_extract",
                        lambda self, url: str(tmp_path / "extracted"))
    command = ["--dataset=cifar100", f"--data_dir={data_dir}"]
    proc = run_main("prepare_data.py", *command)
    assert proc.returncode == 0, proc.stderr
    assert "cifar100 is prepared in" in proc.stdout and "train 30" in proc.stdout, proc.stdout
    assert f"python run/cifar_train.py --dataset=cifar100 --data_dir={data_dir}" in proc.stdout
    from resnet_nobn.data import cifar, prepare
    builder = prepare.prepared_builder("cifar100", str(data_dir))  # what a training run calls
    for split in ("train", "test"):
        images, labels = cifar.load_split(builder, split)
        order = np.argsort([np.asarray(im).tobytes() for im in fake[split][0]])
        got = np.argsort([np.asarray(im).tobytes() for im in images])
        np.testing.assert_array_equal(images[got], fake[split][0][order])
        np.testing.assert_array_equal(labels[got], fake[split][1][order])
    again = run_main("prepare_data.py", *command)
    assert again.returncode == 0 and "already prepared" in again.stdout, again.stderr


def _jpeg(rng, h, w):
    import tensorflow as tf
    return tf.io.encode_jpeg(rng.integers(0, 256, (h, w, 3)).astype(np.uint8)).numpy()


def _tar(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.slow
def test_prepare_data_prepares_imagenet_from_the_archives_in_manual_dir(tmp_path):
    rng = np.random.default_rng(0)
    archives = tmp_path / "archives"
    archives.mkdir()
    synset = _tar([(f"n01440764_{i}.JPEG", _jpeg(rng, 40 + i, 30)) for i in range(3)])
    (archives / "ILSVRC2012_img_train.tar").write_bytes(_tar([("n01440764.tar", synset)]))
    (archives / "ILSVRC2012_img_val.tar").write_bytes(
        _tar([(f"ILSVRC2012_val_{i:08d}.JPEG", _jpeg(rng, 30, 50)) for i in (1, 2)]))
    data_dir = tmp_path / "tfds"
    proc = run_main("prepare_data.py", "--dataset=imagenet2012", f"--data_dir={data_dir}",
                   f"--manual_dir={archives}")
    assert proc.returncode == 0, proc.stderr
    assert "imagenet2012 is prepared in" in proc.stdout and "train 3" in proc.stdout, proc.stdout
    assert "validation 2" in proc.stdout, proc.stdout
    from resnet_nobn.data import prepare
    builder = prepare.imagenet_builder(str(data_dir))  # what a training run calls
    assert builder.info.splits["train"].num_examples == 3


@pytest.mark.slow
def test_imagenet_without_its_archives_is_one_line_naming_where_they_go(tmp_path):
    proc = run_main("prepare_data.py", "--dataset=imagenet2012", f"--data_dir={tmp_path}")
    line = _one_error_line(proc)
    assert f"{tmp_path}/downloads/manual/" in line and "ILSVRC2012_img_train.tar" in line
    assert f"python run/prepare_data.py --dataset=imagenet2012 --data_dir={tmp_path}" in line
    proc = run_main("prepare_data.py", "--dataset=imagenet2012", f"--data_dir={tmp_path}",
                   f"--manual_dir={tmp_path / 'nowhere'}")
    assert f"{tmp_path / 'nowhere'}/" in _one_error_line(proc)
    assert not (tmp_path / "imagenet2012").exists() or not os.listdir(tmp_path / "imagenet2012")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("command", [
    ["cifar_train.py", "--dataset=cifar100"],  # no --data_dir: tfds downloads into its default
    ["prepare_data.py", "--dataset=cifar10"],
])
def test_no_network_is_one_line_in_seconds_not_minutes_of_retries(tmp_path, command):
    """tfds alone retries for 204 s before it gives up; this test's timeout is 90 s."""
    script, *args = command
    args += [f"--model_dir={tmp_path / 'run'}"] if script == "cifar_train.py" else \
        [f"--data_dir={tmp_path / 'tfds'}"]
    proc = run_offline(script, *args, TFDS_DATA_DIR=str(tmp_path / "tfds"))
    line = _one_error_line(proc)
    name = command[1].split("=")[1]
    assert line.startswith(f"error: could not download {name} ("), line
    assert f"`python run/prepare_data.py --dataset={name} --data_dir=DIR`" in line
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A tiny cifar10 directory as tfds prepares it."""
    rng = np.random.default_rng(0)
    good = tmp_path_factory.mktemp("tfds") / "good"
    write_cifar10(str(good), {s: (rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8),
                                 rng.integers(0, 10, n)) for s, n in (("train", 16), ("test", 8))})
    return good


@pytest.mark.slow
@pytest.mark.parametrize("damage,file,said", [
    ("truncated", "cifar10-train.tfrecord-00000-of-00001", "is truncated"),
    ("cut_at_a_record", "cifar10-test.tfrecord-00000-of-00001", "is truncated (it holds 7 records"),
    ("extended", "cifar10-train.tfrecord-00000-of-00001", "is damaged"),
    ("info_not_json", "dataset_info.json", "is damaged (JSONDecodeError"),
    ("info_not_utf8", "dataset_info.json", "is damaged (UnicodeDecodeError"),
    ("features_not_json", "features.json", "is damaged (JSONDecodeError"),
])
def test_a_damaged_earlier_preparation_is_named_with_a_fix_that_works(tmp_path, prepared, damage,
                                                                     file, said):
    """Not "already prepared" (training refuses the directory and sends the user here), nor this
    command again as the fix: the damaged file, and delete its directory."""
    data_dir = tmp_path / "tfds"
    shutil.copytree(prepared, data_dir)
    where = data_dir / "cifar10" / "3.0.2"
    path = where / file
    if damage == "truncated":
        os.truncate(path, os.path.getsize(path) // 2)
    elif damage == "cut_at_a_record":  # the last record removed: a size tfds could have written
        raw, pos, ends = path.read_bytes(), 0, []
        while pos < len(raw):
            pos += int.from_bytes(raw[pos:pos + 8], "little") + 16
            ends.append(pos)
        path.write_bytes(raw[:ends[-2]])
    elif damage == "extended":
        path.write_bytes(path.read_bytes() + b"\0" * 40)
    elif damage == "info_not_utf8":
        path.write_bytes(path.read_bytes().replace(b'"cifar10"', b'"cifar\xff10"', 1))
    else:
        path.write_text(path.read_text()[:-20])
    proc = run_main("prepare_data.py", "--dataset=cifar10", f"--data_dir={data_dir}", timeout=120)
    line = _one_error_line(proc)
    assert f"{path} {said}" in line, line
    assert line.endswith(f"delete {where} and prepare the data again: python run/prepare_data.py "
                         f"--dataset=cifar10 --data_dir={data_dir}"), line
    assert "already prepared" not in proc.stdout


def test_a_whole_earlier_preparation_is_left_as_it_is(prepared):
    proc = run_main("prepare_data.py", "--dataset=cifar10", f"--data_dir={prepared}", timeout=120)
    assert proc.returncode == 0 and "cifar10 is already prepared in" in proc.stdout, proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("archive,content,said", [
    ("ILSVRC2012_img_train.tar", b"<html>Sign in to download</html>\n" * 40, "is not a tar file"),
    ("ILSVRC2012_img_train.tar", b"", "is not a tar file"),
    ("ILSVRC2012_img_val.tar", _tar([]), "is an empty tar file"),
    ("ILSVRC2012_img_val.tar", _tar([("a.JPEG", b"x" * 600)])[:700], "is truncated"),
])
def test_an_imagenet_archive_that_is_no_tar_file_is_named(tmp_path, archive, content, said):
    archives = tmp_path / "archives"
    archives.mkdir()
    for name in ("ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar"):
        (archives / name).write_bytes(_tar([("n01440764.tar", _tar([("n01440764_1.JPEG",
                                                                     b"x")]))]))
    (archives / archive).write_bytes(content)
    proc = run_main("prepare_data.py", "--dataset=imagenet2012", f"--data_dir={tmp_path / 'tfds'}",
                   f"--manual_dir={archives}", timeout=120)
    line = _one_error_line(proc)
    assert f"{archives / archive} {said}" in line, line


@pytest.mark.slow
def test_a_proxy_that_never_answers_ends_in_one_line_naming_host_and_proxy(tmp_path):
    """The proxy's socket accepts connections (the kernel completes them: it listens) and never
    answers. Each network wait is bounded (here 0.2 s, RESNET_NOBN_DOWNLOAD_TIMEOUT; 10 s by
    default)."""
    import time
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    proxy = f"http://127.0.0.1:{sock.getsockname()[1]}"
    start = time.monotonic()
    try:
        proc = run_main("prepare_data.py", "--dataset=cifar10", f"--data_dir={tmp_path / 'tfds'}",
                        env=dict(proxied_env(proxy), RESNET_NOBN_DOWNLOAD_TIMEOUT="0.2"))
    finally:
        sock.close()
    line = _one_error_line(proc)
    assert time.monotonic() - start < 60
    assert "www.cs.toronto.edu" in line and f"through the proxy {proxy} (HTTPS_PROXY)" in line, line
    assert "no answer within 0.2 s" in line, line
