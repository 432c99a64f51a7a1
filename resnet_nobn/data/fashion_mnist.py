"""Fashion-MNIST without internet: tfds' own `fashion_mnist` built from the idx files Debian ships.

Fashion-MNIST (Xiao et al. 2017: 60,000 + 10,000 grey 28x28 photographs of clothes, 10 classes)
is the real images this project trains on offline: Debian's package `dataset-fashion-mnist`
installs its four idx files in SOURCE. `builder(data_dir, source)` is tfds' registered
`fashion_mnist` builder (its name, version, features, and its keys: the records tfds would write
after a download) with only its source changed, from the download to the idx files in `source`.
A training run then reads the prepared directory through tfds like any other. Where the files are
not installed, tfds downloads them (resnet_nobn/data/prepare.py). How its 28x28 grey images meet
the CIFAR network: resnet_nobn/data/cifar.py `to_network`.
"""
import gzip
import os
import zlib

import numpy as np

from resnet_nobn.errors import UserError

NAME = "fashion_mnist"
SOURCE = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist
INSTALL = "apt-get install dataset-fashion-mnist"
FILES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
         "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}


def missing(source):
    """The idx files that are not in `source`, by name (empty: all four are there)."""
    return [f for pair in FILES.values() for f in pair if not os.path.isfile(os.path.join(source, f))]


def read_idx(path, ndim):
    """A gzipped idx file (MNIST's format: magic 0 0 8 ndim, big-endian sizes, uint8 data) of
    `ndim` dimensions as a numpy array; UserError naming the file if it is not one."""
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError, zlib.error) as e:
        raise UserError(f"{path} is not a readable gzip file ({e}); get the idx files again "
                        f"({INSTALL})") from None
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    if raw[:4] != bytes([0, 0, 8, ndim]) or len(raw) != 4 + 4 * ndim + int(np.prod(shape)):
        raise UserError(f"{path} is not an idx file of {ndim} dimensions of bytes (MNIST's "
                        f"format); get the idx files again ({INSTALL})")
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def read_split(source, split):
    """(images uint8 [n, 28, 28], labels) of `split` from the idx files in `source`; UserError
    if they are not Fashion-MNIST's shapes and classes."""
    images_file, labels_file = (os.path.join(source, f) for f in FILES[split])
    images, labels = read_idx(images_file, 3), read_idx(labels_file, 1)
    if images.shape[1:] != (28, 28) or len(images) != len(labels) or labels.max(initial=0) > 9:
        raise UserError(f"{images_file} and {labels_file} are not Fashion-MNIST's {split} split "
                        f"({len(images)} images of {'x'.join(map(str, images.shape[1:]))}, "
                        f"{len(labels)} labels up to {labels.max(initial=0)}; expected 28x28 "
                        f"images, one label 0..9 each)")
    return images, labels


def builder(data_dir, source):
    """tfds' fashion_mnist builder in the tfds data directory `data_dir`, whose examples are read
    from the idx files in `source` instead of downloaded; `download_and_prepare` it."""
    from tensorflow_datasets.image_classification import mnist

    class FashionMNIST(mnist.FashionMNIST, skip_registration=True):  # tfds name: fashion_mnist
        def _split_generators(self, dl_manager):
            return {split: self._examples(*read_split(source, split)) for split in FILES}

        def _examples(self, images, labels):
            for key, (image, label) in enumerate(zip(images, labels)):  # tfds' own keys
                yield key, {"image": image[..., None], "label": int(label)}

    return FashionMNIST(data_dir=data_dir)
