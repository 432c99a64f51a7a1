"""CIFAR-10/100 input (Section 4): tfds, held in memory, augmented as in the TensorFlow ResNet code.

It reads every dataset of the CIFAR recipe (resnet_nobn/data/datasets.py), Fashion-MNIST too: images the
dataset holds in another shape (Fashion-MNIST's 28x28 grey) become the network's 32x32x3 in one
place, `to_network` (zero padding and the grey value in every channel), used by this pipeline and
by the export's serving graph alike.

Training augmentation (cifar_input.py of tensorflow/models/resnet, which the paper forked): zero-pad
to 36x36 (`image_size + 4`, `crop_padding=2` pixels a side), random 32x32 crop, random horizontal
flip, per-image standardisation (or, with `--standardize=dataset`, the training split's mean and
standard deviation per channel: resnet_nobn/data/standardization.py). The test split is only
standardised.

Determinism and resuming. CIFAR fits in memory (50,000 x 32x32x3 bytes), so the training stream is a
pure function of (seed, step): epoch e visits the examples in the order of a stateless permutation
seeded by (seed, e), and the example at stream position p is augmented with stateless randomness
seeded by (seed, p). A run resumed at step s starts the stream at position s * batch_size, so it
sees exactly the batches the uninterrupted run would have seen, on any number of replicas
(resnet_nobn/data/pipeline.py).
"""
import os

import numpy as np
import tensorflow as tf

from resnet_nobn.config import TrainConfig
from resnet_nobn.data import prepare, standardization, tfds_dir
from resnet_nobn.data.pipeline import Input, batch_and_prefetch, num_batches, pipeline_part
from resnet_nobn.data.datasets import DATASETS, DatasetInfo, network_padding
from resnet_nobn.errors import UserError


def load_split(builder, split, info: DatasetInfo = None):
    """A whole tfds split as numpy arrays (images uint8 NHWC, labels int32).

    With `info`, a file that cannot be read, an image of another shape or a label outside
    0..num_classes-1 is a UserError naming the file (resnet_nobn/data/tfds_dir.py), before training.
    """
    import tensorflow_datasets as tfds
    images, labels = [], []
    try:
        for im, lab in tfds.as_numpy(builder.as_dataset(split=split, as_supervised=True).batch(4096)):
            images.append(im)
            labels.append(lab)
    except tf.errors.OpError as e:
        error = tfds_dir.read_error(e, builder, builder.name, split) if info else None
        if error is None:
            raise
        raise error from None
    images, labels = np.concatenate(images), np.concatenate(labels).astype(np.int32)
    if info is not None:
        files = os.path.join(str(builder.data_dir), f"{builder.name}-{split}.tfrecord-*")
        again = tfds_dir.prepare_again(builder, info.name)
        if images.shape[1:] != info.stored:
            raise UserError(f"{files} holds {'x'.join(map(str, images.shape[1:]))} images, "
                            f"{info.name} has {'x'.join(map(str, info.stored))}; {again}")
        bad = labels[(labels < 0) | (labels >= info.num_classes)]
        if bad.size:
            raise UserError(f"{files} holds label {bad[0]}, outside 0..{info.num_classes - 1} of "
                            f"{info.name}; {again}")
    return images, labels


def to_network(images, info: DatasetInfo):
    """uint8 images (one, or a batch) as dataset `info` holds them (`info.stored`) as the network
    takes them, image_size x image_size x 3: zero-padded evenly on each side (Fashion-MNIST's 28x28:
    2 pixels a side: `datasets.network_padding`) and a grey channel copied to three. CIFAR's pass
    unchanged. resnet_nobn.ImageClassifier applies the same rule inside the model."""
    size = info.image_size
    if info.stored != (size, size, 3):
        (top, bottom), (left, right) = network_padding(*info.stored[:2], size)
        images = tf.pad(images, [[0, 0]] * (len(images.shape) - 3)
                        + [[top, bottom], [left, right], [0, 0]])
        if info.stored[-1] == 1:
            images = tf.image.grayscale_to_rgb(images)
    return images


def standardize(image):
    """Per-image standardisation (zero mean, unit variance), float32: `--standardize=per_image`."""
    return standardization.Standardization()(image)


def dataset_standardization(images, info: DatasetInfo, chunk=4096):
    """`--standardize=dataset`'s mean and std of uint8 `images` as the dataset stores them, over
    the images as the network takes them (`to_network`)."""
    return standardization.of_batches(np.asarray(to_network(images[i:i + chunk], info))
                                      for i in range(0, len(images), chunk))


def augment(image, seed, padding):
    """Zero-pad `padding` pixels a side, random crop back to size, random flip; stateless
    randomness from `seed` (2 ints)."""
    size = image.shape[0]
    seeds = tf.random.experimental.stateless_split(seed, 2)
    image = tf.image.resize_with_crop_or_pad(image, size + 2 * padding, size + 2 * padding)
    image = tf.image.stateless_random_crop(image, [size, size, 3], seed=seeds[0])
    return tf.image.stateless_random_flip_left_right(image, seed=seeds[1])


def mixup_partner(images, labels, seed, pos, global_batch, alpha, padding, num_classes, info):
    """Mixup (Zhang et al. 2018) of one training example at stream position `pos`, as Fixup's
    reference code trains (`--alpha=1`): (an augmented random training image x' and its one-hot
    label y', lam), lam ~ Beta(alpha, alpha) drawn once per global batch (pos // global_batch),
    so every replica mixes its part of a global batch with the same lam. Stateless in (seed, pos):
    a resumed run and any number of replicas mix alike. The reference pairs each image with
    another of its own batch (a permutation); here the partner is a random image of the training
    split, a draw of the same kind that needs no other replica's batch."""
    n = tf.shape(labels, out_type=tf.int64)[0]
    j = tf.random.stateless_uniform([], tf.stack([seed, -1 - pos]), 0, n, dtype=tf.int64)
    partner = augment(to_network(tf.gather(images, j), info), tf.stack([seed, -(2 ** 40) - pos]),
                      padding)
    lam = symmetric_beta([], tf.stack([seed, -(2 ** 41) - pos // global_batch]), alpha)
    return partner, tf.one_hot(tf.gather(labels, j), num_classes), lam


def symmetric_beta(shape, seed, alpha):
    """Draws of Beta(alpha, alpha), float32, of `shape`, stateless from `seed` (2 ints), right
    for any alpha > 0: X / (X + Y) of two Gamma(alpha) draws, computed as sigmoid(log X - log Y)
    in float64 with log Gamma(alpha) = log Gamma(alpha + 1) + log(U) / alpha. A Gamma(alpha)
    draw itself is below float32's (and, for alpha near 0.001, float64's) smallest number so
    often that two clamped draws would make lam exactly 0.5, where Beta puts lam near 0 or 1;
    their logs are no such numbers, and a huge alpha's sum cannot overflow."""
    seeds = tf.random.experimental.stateless_split(seed, 2)
    two = [2] + list(shape)
    g = tf.random.stateless_gamma(two, seeds[0], alpha + 1.0, dtype=tf.float64)  # >= 1: no clamp
    u = tf.random.stateless_uniform(two, seeds[1], dtype=tf.float64)  # in [0, 1)
    log_u = tf.math.log1p(-u)  # of 1 - u, in (0, 1]: finite
    log_gamma = tf.math.log(g)
    d = (log_gamma[0] - log_gamma[1]) + (log_u[0] - log_u[1]) / alpha  # +-inf for a tiny alpha
    return tf.cast(tf.sigmoid(d), tf.float32)


class InMemoryInput(Input):
    """A dataset held in memory (CIFAR's recipe), read through tfds; the stream is a function of
    the step. Images are held as the dataset stores them and made the network's (`to_network`)
    as they are read, and standardised last (`standardization`, per-image by default)."""

    def __init__(self, info: DatasetInfo, train, test, seed, crop_padding=2, mismatch=None,
                 standardize=standardization.Standardization(), mixup=0.0, num_classes=None):
        self.info, self.seed, self.crop_padding = info, seed, crop_padding
        self.mixup, self.num_classes = mixup, num_classes or info.num_classes
        self.standardization = standardize
        self.mismatch = mismatch  # tfds_dir.provenance: whose images these are, if not info's
        self._train_images, self._train_labels = train
        self._test_images, self._test_labels = test

    def train_dataset(self, ctx: tf.distribute.InputContext, global_batch, start_step):
        n, seed, padding, info = len(self._train_labels), self.seed, self.crop_padding, self.info
        standardize = self.standardization
        images = tf.constant(self._train_images)
        labels = tf.constant(self._train_labels)

        def epoch(e):
            order = tf.random.experimental.stateless_shuffle(
                tf.range(n, dtype=tf.int64), seed=tf.stack([tf.constant(seed, tf.int64), e]))
            return tf.data.Dataset.from_tensor_slices(tf.stack([e * n + tf.range(n, dtype=tf.int64),
                                                                order], axis=1))

        start = start_step * global_batch
        ds = tf.data.Dataset.range(start // n, 2 ** 40).flat_map(epoch).skip(start % n)

        alpha, num_classes = self.mixup, self.num_classes

        def load(t):
            pos, idx = t[0], t[1]
            image = augment(to_network(tf.gather(images, idx), info),
                            tf.stack([tf.constant(seed, tf.int64), pos]), padding)
            if not alpha:
                return standardize(image), tf.gather(labels, idx)
            # --mixup: the mixed standardised images and the mixed one-hot labels (soft labels)
            partner, other, lam = mixup_partner(images, labels, tf.constant(seed, tf.int64), pos,
                                                global_batch, alpha, padding, num_classes, info)
            label = tf.one_hot(tf.gather(labels, idx), num_classes)
            return (lam * standardize(image) + (1 - lam) * standardize(partner),
                    lam * label + (1 - lam) * other)

        return batch_and_prefetch(pipeline_part(ds, global_batch, ctx), load, ctx, global_batch)

    def num_eval_batches(self, global_batch):
        return num_batches(len(self._test_labels), global_batch)

    def eval_dataset(self, ctx: tf.distribute.InputContext, global_batch):
        """The test split padded to whole global batches; padding has weight 0."""
        n = len(self._test_labels)
        total = self.num_eval_batches(global_batch) * global_batch
        images = tf.constant(self._test_images)
        labels = tf.constant(self._test_labels)
        ds = pipeline_part(tf.data.Dataset.range(total), global_batch, ctx)

        def load(i):
            j = tf.minimum(i, n - 1)
            image = self.standardization(to_network(tf.gather(images, j), self.info))
            return image, tf.gather(labels, j), tf.cast(i < n, tf.float32)

        return batch_and_prefetch(ds, load, ctx, global_batch)


def make_input(cfg: TrainConfig):
    """The input of `cfg` (a dataset of the CIFAR recipe), both splits read into memory and checked
    (image shape, number of classes, every file readable, every label in range) before training:
    UserError if unavailable or damaged (resnet_nobn/data/tfds_dir.py). A directory holding
    another dataset's images under the name is trained on, and its `mismatch` kept for the run's
    records. With --standardize=dataset, the training split's mean and std are computed here."""
    info = DATASETS[cfg.dataset]
    builder = prepare.prepared_builder(cfg.dataset, cfg.data_dir)
    tfds_dir.check_prepared(builder, cfg.dataset, info.stored, info.num_classes, ("train", "test"))
    train = load_split(builder, "train", info)
    standardize = (dataset_standardization(train[0], info) if cfg.standardize == "dataset"
                   else standardization.Standardization())
    return InMemoryInput(info, train, load_split(builder, "test", info), cfg.seed,
                         cfg.crop_padding, tfds_dir.provenance(builder, info), standardize,
                         cfg.mixup, cfg.model.num_classes)
