"""Damaged prepared tfds directories: one line naming the file and the fix,
before anything is written to model_dir."""
import os
import shutil

import numpy as np
import pytest

from resnet_nobn.errors import UserError
from resnet_nobn.training import trainer
from tests.helpers import tiny_config, write_cifar10

SHARD = os.path.join("cifar10", "3.0.2", "cifar10-train.tfrecord-00000-of-00001")
FIX = "python run/prepare_data.py --dataset=cifar10 --data_dir="


def _arrays(rng, n, shape=(32, 32, 3), classes=10):
    return rng.integers(0, 256, (n, *shape), dtype=np.uint8), rng.integers(0, classes, n)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """{name: data_dir}: a good tiny cifar10 directory and damaged ones."""
    root = tmp_path_factory.mktemp("tfds")
    rng = np.random.default_rng(0)
    good = str(root / "good")
    write_cifar10(good, {"train": _arrays(rng, 16), "test": _arrays(rng, 8)})
    dirs = {"good": good}
    for name in ("truncated", "deleted", "corrupted"):
        dirs[name] = str(root / name)
        shutil.copytree(good, dirs[name])
    shard = lambda name: os.path.join(dirs[name], SHARD)  # noqa: E731
    os.truncate(shard("truncated"), 3000)
    os.remove(shard("deleted"))
    with open(shard("corrupted"), "r+b") as f:  # flip bytes inside the first record
        f.seek(20)
        f.write(b"\xff" * 40)
    dirs["28x28x1"] = str(root / "grey")
    write_cifar10(dirs["28x28x1"], {"train": _arrays(rng, 16, (28, 28, 1)),
                                   "test": _arrays(rng, 8, (28, 28, 1))}, shape=(28, 28, 1))
    dirs["100 classes"] = str(root / "hundred")
    write_cifar10(dirs["100 classes"], {"train": _arrays(rng, 16, classes=100),
                                        "test": _arrays(rng, 8, classes=100)}, num_classes=100)
    # labels out of range although the recorded features say 10 classes (a hand-edited directory)
    dirs["labels"] = str(root / "labels")
    shutil.copytree(dirs["100 classes"], dirs["labels"])
    features = os.path.join(dirs["labels"], "cifar10", "3.0.2", "features.json")
    text = open(features).read()
    open(features, "w").write(text.replace('"numClasses": "100"', '"numClasses": "10"'))
    # the same in the test split only: read once the training split has passed
    dirs["test labels"] = str(root / "test_labels")
    write_cifar10(dirs["test labels"], {"train": _arrays(rng, 16),
                                        "test": _arrays(rng, 8, classes=100)}, num_classes=100)
    features = os.path.join(dirs["test labels"], "cifar10", "3.0.2", "features.json")
    text = open(features).read()
    open(features, "w").write(text.replace('"numClasses": "100"', '"numClasses": "10"'))
    return dirs


@pytest.mark.parametrize("damage, said", [
    ("truncated", "cifar10-train.tfrecord-00000-of-00001 is truncated"),
    ("deleted", "cifar10-train.tfrecord-00000-of-00001 is missing"),
    ("corrupted", "cifar10-train.tfrecord-00000-of-00001 is damaged"),
    ("28x28x1", "holds 28x28x1 images, cifar10 has 32x32x3"),
    ("100 classes", "holds 100 classes, cifar10 has 10"),
    ("labels", "holds label"),
    ("test labels", "cifar10-test.tfrecord-* holds label"),
])
def test_damaged_tfds_directory_is_one_line_and_writes_nothing(prepared, tmp_path, damage, said):
    model_dir = tmp_path / "run"
    cfg = tiny_config(model_dir, use_synthetic_data=False, data_dir=prepared[damage],
                      train_steps=2, eval_steps=1)
    with pytest.raises(UserError) as e:
        trainer.train(cfg)
    msg = str(e.value)
    assert said in msg and "\n" not in msg, msg
    assert FIX + prepared[damage] in msg, msg
    # the fix works as printed: prepare_data.py re-prepares only a directory that is gone
    assert f"delete {os.path.join(prepared[damage], 'cifar10', '3.0.2')} and " in msg, msg
    assert not model_dir.exists()  # nothing half-made


def test_good_directory_still_trains(prepared, tmp_path):
    cfg = tiny_config(tmp_path / "run", use_synthetic_data=False, data_dir=prepared["good"],
                      train_steps=2, eval_steps=1)
    assert trainer.train(cfg)["global_step"] == 2
