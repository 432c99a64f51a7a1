"""Real images offline: Fashion-MNIST as a prepared tfds `cifar10` directory.

No CIFAR can be downloaded on the machines this project is developed on, but Debian ships
Fashion-MNIST (`apt-get install dataset-fashion-mnist`: 60,000 + 10,000 grey 28x28 photographs of
clothes, 10 classes). This script writes them as tfds `cifar10` 3.0.2 (each image zero-padded to
32x32 and replicated to 3 channels), so that

    python bench/fashion_mnist_as_cifar10.py --out=/tmp/fmnist
    python run/cifar_train.py --data_dir=/tmp/fmnist ...

trains through exactly the tfds code path a user with the real CIFAR-10 runs. The data is not
committed; this script makes it in about 30 s.
"""
import argparse
import gzip
import os
import sys

import numpy as np

SOURCE = "/usr/share/datasets/fashion-mnist"
LABELS = ("t-shirt/top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker",
          "bag", "ankle boot")


def read_idx(path):
    """An idx file (the MNIST format) as a uint8 numpy array."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def as_cifar_images(images):
    """(n, 28, 28) grey -> (n, 32, 32, 3): 2 zero pixels a side, the grey value in every channel."""
    padded = np.pad(images, ((0, 0), (2, 2), (2, 2)))
    return np.repeat(padded[..., None], 3, axis=-1)


def split(source, prefix):
    images = read_idx(os.path.join(source, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(source, f"{prefix}-labels-idx1-ubyte.gz"))
    return as_cifar_images(images), labels.astype(np.int64)


def write(out, source=SOURCE):
    """Prepares `<out>/cifar10/3.0.2/` from the idx files in `source`; returns the tfds builder."""
    return write_arrays(out, {"train": split(source, "train"), "test": split(source, "t10k")},
                        LABELS)


def write_arrays(out, data, label_names=LABELS, shape=(32, 32, 3), num_classes=None):
    """Prepares `<out>/cifar10/3.0.2/` from `data` = {split: (images uint8 NHWC, labels)}; returns
    the tfds builder. `shape` and `num_classes` (default: len(label_names)) are the features
    recorded in dataset_info.json (tests write damaged directories with other ones)."""
    import tensorflow_datasets as tfds
    from tensorflow_datasets.image_classification import cifar

    class Cifar10(cifar.Cifar10, skip_registration=True):  # tfds name: "cifar10"
        def _info(self):
            return tfds.core.DatasetInfo(
                builder=self, supervised_keys=("image", "label"),
                features=tfds.features.FeaturesDict({
                    "id": tfds.features.Text(), "image": tfds.features.Image(shape=tuple(shape)),
                    "label": tfds.features.ClassLabel(names=list(label_names)) if num_classes is
                    None else tfds.features.ClassLabel(num_classes=num_classes)}))

        def _split_generators(self, dl_manager):
            return {name: self._generate(name, *arrays) for name, arrays in data.items()}

        def _generate(self, name, images, labels):
            for i, (image, label) in enumerate(zip(images, labels)):
                yield i, {"id": f"{name}_{i:05d}", "image": image, "label": int(label)}

    builder = Cifar10(data_dir=out)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(try_download_gcs=False))
    return builder


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="tfds data_dir to write (cifar10/3.0.2 inside)")
    parser.add_argument("--source", default=SOURCE, help="directory of the four Fashion-MNIST "
                        "idx .gz files (default: the Debian package's)")
    args = parser.parse_args()
    if not os.path.isdir(args.source):
        sys.exit(f"error: {args.source} not found; `apt-get install dataset-fashion-mnist` "
                 "or pass --source")
    builder = write(args.out, args.source)
    print(f"wrote {builder.data_dir}: {builder.info.splits['train'].num_examples} train, "
          f"{builder.info.splits['test'].num_examples} test images")


if __name__ == "__main__":
    main()
