"""Input pipelines: tfds CIFAR-10/100 (and synthetic data), as in the TensorFlow ResNet code.

Training augmentation (cifar_input.py of tensorflow/models/resnet, which the paper forked): zero-pad
to 36x36 (`image_size + 4`, `crop_padding=2` pixels a side), random 32x32 crop, random horizontal
flip, per-image standardisation. The test split is only standardised.

Determinism and resuming. CIFAR fits in memory (50,000 x 32x32x3 bytes), so the training stream is a
pure function of (seed, step): epoch e visits the examples in the order of a stateless permutation
seeded by (seed, e), and the example at stream position p is augmented with stateless randomness
seeded by (seed, p). A run resumed at step s starts the stream at position s * batch_size, so it
sees exactly the batches the uninterrupted run would have seen, on any number of replicas.

Distribution. Every global batch of B stream positions is split into `num_input_pipelines`
contiguous parts, one per worker, and each worker batches its part per replica; replica r of a
worker gets the r-th consecutive per-replica batch. So a global batch holds the same examples on
one device, on several GPUs, or on several machines.
"""
import os

import numpy as np
import tensorflow as tf

from resnet_nobn.config import DATASETS, DatasetInfo, TrainConfig, UserError

_AUTOTUNE = tf.data.AUTOTUNE


CIFAR = {name: DATASETS[name] for name in ("cifar10", "cifar100")}


def prepare_tfds_builder(name, data_dir):
    """Returns a prepared tfds builder, or raises UserError saying how to get the data.

    With an explicit `data_dir` nothing is downloaded: the data must already be there. Without
    one, tfds' default directory is used and tfds may download (CIFAR) into it.
    """
    import tensorflow_datasets as tfds
    if data_dir is not None and not os.path.isdir(data_dir):
        raise UserError(f"--data_dir={data_dir} is not a directory; create it with "
                        f"`tfds build {name} --data_dir={data_dir}` or point it at a tfds data dir")
    try:
        builder = tfds.builder(name, data_dir=data_dir)
        prepared = builder.is_prepared()
    except Exception as e:  # noqa: BLE001 -- a damaged dataset_info.json and the like
        raise UserError(f"the {name} files in --data_dir={data_dir} are damaged ({type(e).__name__}: "
                        f"{str(e).splitlines()[0][:120] if str(e) else ''}); prepare it again with "
                        f"`tfds build {name} --data_dir=DIR`") from None
    if prepared:
        return builder
    prepare = (f"prepare it on a machine with internet access with `tfds build {name} "
               f"--data_dir=DIR` and copy DIR here (or pass its path with --data_dir)")
    if data_dir is not None:
        raise UserError(f"no prepared {name} in --data_dir={data_dir} "
                        f"(expected {builder.data_dir}); {prepare}")
    try:
        builder.download_and_prepare()
    except Exception as e:  # noqa: BLE001 -- any download failure is reported the same way
        raise UserError(f"could not download {name} ({type(e).__name__}: "
                        f"{str(e).splitlines()[0][:160]}); {prepare}") from None
    return builder


def load_split(builder, split):
    """A whole tfds split as numpy arrays (images uint8 NHWC, labels int32)."""
    import tensorflow_datasets as tfds
    images, labels = [], []
    for im, lab in tfds.as_numpy(builder.as_dataset(split=split, as_supervised=True).batch(4096)):
        images.append(im)
        labels.append(lab)
    return np.concatenate(images), np.concatenate(labels).astype(np.int32)


def standardize(image):
    """Per-image standardisation (zero mean, unit variance), float32."""
    return tf.image.per_image_standardization(tf.cast(image, tf.float32))


def augment_cifar(image, seed, padding):
    """Zero-pad `padding` pixels a side, random crop back to size, random flip; stateless
    randomness from `seed` (2 ints)."""
    size = image.shape[0]
    seeds = tf.random.experimental.stateless_split(seed, 2)
    image = tf.image.resize_with_crop_or_pad(image, size + 2 * padding, size + 2 * padding)
    image = tf.image.stateless_random_crop(image, [size, size, 3], seed=seeds[0])
    return tf.image.stateless_random_flip_left_right(image, seed=seeds[1])


def pipeline_part(ds, global_batch, ctx):
    """Keeps this input pipeline's contiguous part of every global batch, unbatched.

    Elements may be one tensor or a tuple of tensors (sliced alike).
    """
    part = global_batch // ctx.num_input_pipelines
    lo = ctx.input_pipeline_id * part

    def keep(*t):
        return tf.nest.map_structure(lambda x: x[lo:lo + part], t if len(t) > 1 else t[0])

    return ds.batch(global_batch, drop_remainder=True).map(keep).unbatch()


class InMemoryInput:
    """A dataset held in memory (CIFAR), read through tfds; the stream is a function of the step."""

    def __init__(self, info: DatasetInfo, train, test, seed, crop_padding=2):
        self.info, self.seed, self.crop_padding = info, seed, crop_padding
        self._train_images, self._train_labels = train
        self._test_images, self._test_labels = test

    def train_dataset(self, ctx: tf.distribute.InputContext, global_batch, start_step):
        n, seed, padding = len(self._train_labels), self.seed, self.crop_padding
        images = tf.constant(self._train_images)
        labels = tf.constant(self._train_labels)

        def epoch(e):
            order = tf.random.experimental.stateless_shuffle(
                tf.range(n, dtype=tf.int64), seed=tf.stack([tf.constant(seed, tf.int64), e]))
            return tf.data.Dataset.from_tensor_slices(tf.stack([e * n + tf.range(n, dtype=tf.int64),
                                                                order], axis=1))

        start = start_step * global_batch
        ds = tf.data.Dataset.range(start // n, 2 ** 40).flat_map(epoch).skip(start % n)
        ds = pipeline_part(ds, global_batch, ctx)

        def load(t):
            pos, idx = t[0], t[1]
            image = augment_cifar(tf.gather(images, idx), tf.stack([tf.constant(seed, tf.int64), pos]),
                                  padding)
            return standardize(image), tf.gather(labels, idx)

        return (ds.map(load, num_parallel_calls=_AUTOTUNE)
                .batch(ctx.get_per_replica_batch_size(global_batch), drop_remainder=True)
                .prefetch(_AUTOTUNE))

    def num_eval_batches(self, global_batch):
        return -(-len(self._test_labels) // global_batch)

    def eval_dataset(self, ctx: tf.distribute.InputContext, global_batch):
        """The test split padded to whole global batches; padding has weight 0."""
        n = len(self._test_labels)
        total = self.num_eval_batches(global_batch) * global_batch
        images = tf.constant(self._test_images)
        labels = tf.constant(self._test_labels)
        ds = pipeline_part(tf.data.Dataset.range(total), global_batch, ctx)

        def load(i):
            j = tf.minimum(i, n - 1)
            return standardize(tf.gather(images, j)), tf.gather(labels, j), tf.cast(i < n, tf.float32)

        return (ds.map(load, num_parallel_calls=_AUTOTUNE)
                .batch(ctx.get_per_replica_batch_size(global_batch), drop_remainder=True)
                .prefetch(_AUTOTUNE))


class SyntheticInput:
    """`--use_synthetic_data`: one fixed random batch per replica, repeated; no I/O.

    For smoke runs and for timing the model alone. A net can memorise the batch, so the loss falls.
    """

    def __init__(self, info: DatasetInfo, seed):
        self.info, self.seed = info, seed

    def _batch(self, ctx, global_batch):
        b = ctx.get_per_replica_batch_size(global_batch)
        rng = np.random.default_rng([self.seed, ctx.input_pipeline_id])
        s = self.info.image_size
        images = rng.standard_normal((b, s, s, 3)).astype(np.float32)
        labels = rng.integers(0, self.info.num_classes, b).astype(np.int32)
        return images, labels

    def train_dataset(self, ctx, global_batch, start_step):
        return tf.data.Dataset.from_tensors(self._batch(ctx, global_batch)).repeat()

    def num_eval_batches(self, global_batch):
        return 1

    def eval_dataset(self, ctx, global_batch):
        images, labels = self._batch(ctx, global_batch)
        return tf.data.Dataset.from_tensors((images, labels, np.ones(len(labels), np.float32)))


INPUTS = {}  # dataset name -> (DatasetInfo, factory(cfg) -> input); CIFAR below, ImageNet registers itself


def dataset_info(name) -> DatasetInfo:
    _register_all()
    if name not in INPUTS:
        raise UserError(f"unknown dataset {name!r}; choose one of {', '.join(sorted(INPUTS))}")
    return INPUTS[name][0]


def make_input(cfg: TrainConfig):
    """The input for `cfg.dataset`: synthetic, or read through tfds (UserError if unavailable)."""
    info = dataset_info(cfg.dataset)
    if cfg.use_synthetic_data:
        return SyntheticInput(info, cfg.seed)
    return INPUTS[cfg.dataset][1](cfg)


def _make_cifar(cfg):
    builder = prepare_tfds_builder(cfg.dataset, cfg.data_dir)
    info = CIFAR[cfg.dataset]
    return InMemoryInput(info, load_split(builder, "train"), load_split(builder, "test"), cfg.seed,
                         cfg.crop_padding)


INPUTS.update({name: (info, _make_cifar) for name, info in CIFAR.items()})


def _register_all():
    from resnet_nobn import imagenet  # noqa: F401 -- registers imagenet2012 on import
