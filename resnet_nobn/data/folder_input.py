"""Your own images as the CIFAR recipe's input: an image folder (resnet_nobn/data/image_folder.py) read,
checked and resized into memory, then trained exactly as CIFAR is (resnet_nobn/data/cifar.py).

Every PNG or JPEG file of ROOT/train/LABEL/ and ROOT/test/LABEL/ is read before training, decoded
to RGB (a grey image's value in the three channels, an alpha channel dropped) and resized to the
network's 32x32 by `resized`, the one resize predict's `--resize` uses too
(resnet_nobn/data/images.py); a file that cannot be read or decoded is a UserError naming it. The
images are held as 32x32x3 uint8 (3 KB each) in `cifar.InMemoryInput`, so the training stream, its
augmentation (padding, random crop, flip, per-image standardisation), its resume at any step and
its split over replicas are CIFAR's. Class i is the i-th class folder of train/, sorted: the
names the run records (TrainConfig.class_names).
"""
import os

import numpy as np

from resnet_nobn.data import image_folder
from resnet_nobn.config import TrainConfig
from resnet_nobn.console import printable
from resnet_nobn.data import cifar, standardization
from resnet_nobn.data.cifar import InMemoryInput
from resnet_nobn.data.images import decode_pixels, read_file, resized
from resnet_nobn.data.datasets import DATASETS
from resnet_nobn.errors import UserError


def read_split(files, size):
    """(images uint8 [n, size, size, 3], labels int32 [n]) of [(path, class index)]; each image
    decoded to RGB and resized to size x size (`resized`) where it is of another size."""
    images = np.empty((len(files), size, size, 3), np.uint8)
    for i, (path, _) in enumerate(files):
        try:
            raw, (kind, _, _, _) = read_file(path, reader="the image folder")
            image = decode_pixels(raw, path, kind, channels=3)
        except UserError as e:
            raise UserError(f"{e}: replace it, or remove it from the folder") from None
        if tuple(image.shape[:2]) != (size, size):
            image = resized(image, size)
        images[i] = image.numpy()
    return images, np.array([label for _, label in files], np.int32)


def make_input(cfg: TrainConfig):
    """The input of a `--dataset=image_folder` run: both splits of --data_dir read into memory and
    checked before training; UserError if the folder's classes are no longer the run's
    (`cfg.class_names`, read when the run began) or an image cannot be read. `folder` records
    the folder, its numbers of images and the digests of its file lists and of its images as
    trained on (results.json `image_folder`, resnet_nobn/data/image_folder.py `record`)."""
    info = DATASETS[cfg.dataset]
    names, files = image_folder.layout(cfg.data_dir)
    if names != tuple(cfg.class_names):
        said = [", ".join(map(printable, n)) for n in (names, cfg.class_names)]
        raise UserError(f"the class folders of {printable(os.path.join(cfg.data_dir, 'train'))} "
                        f"({said[0]}) are not the run's ({said[1]}); give the folder the run was "
                        "started with, or a new --model_dir")
    train, test = (read_split(files[split], info.image_size) for split in image_folder.SPLITS)
    standardize = (cifar.dataset_standardization(train[0], info) if cfg.standardize == "dataset"
                   else standardization.Standardization())
    inp = InMemoryInput(info, train, test, cfg.seed, cfg.crop_padding, standardize=standardize,
                        mixup=cfg.mixup, num_classes=cfg.model.num_classes)
    inp.folder = image_folder.record(cfg.data_dir, files,
                                     {"train": train[0], "test": test[0]})
    return inp
