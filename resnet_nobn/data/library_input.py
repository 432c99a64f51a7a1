"""A dataset for your own `model.fit`: `resnet_nobn.load_dataset`, the command line's input as a
batched `tf.data.Dataset` of (images, labels).

It is the command line's pipeline, not a second one: the CIFAR recipe's datasets (CIFAR-10/100,
Fashion-MNIST) are read and checked as a run reads them (resnet_nobn/data/prepare.py,
tfds_dir.py, cifar.py `load_split`), an image folder as a run reads it (resnet_nobn/data/
image_folder.py `layout`, folder_input.py `read_split`), and the training split is the run's
stream (cifar.py `InMemoryInput`: each epoch a permutation of (seed, epoch), each image padded,
randomly cropped and flipped with randomness of (seed, position)), endless, as the run's. The one
difference: the images stay pixels. The CIFAR recipe's come out as the network takes them,
uint8 [N, 32, 32, 3] (Fashion-MNIST's 28x28 grey padded and copied to 3 channels: cifar.py
`to_network`), not standardised: `resnet_nobn.ImageClassifier` standardises them inside the model,
so a model trained on these batches takes raw pixels, as the images you will give it later are.
ImageNet (`imagenet2012`) comes out as its run's input does, 224x224x3 float32 already normalised
by the ImageNet channel mean and standard deviation (resnet_nobn/data/imagenet.py), for the bare
network (`resnet_nobn.build_model(resnet_nobn.recipes.imagenet().model)`).
"""
import numpy as np
import tensorflow as tf

from resnet_nobn.config import TrainConfig
from resnet_nobn.data import cifar, folder_input, image_folder, imagenet, prepare, tfds_dir
from resnet_nobn.data.datasets import DATASETS
from resnet_nobn.options import check_argument, plain

SPLITS = ("train", "test")


def _pixels(image):
    """The last step of the library's pipeline: none (the model standardises)."""
    return image


def _checked(name, split, batch_size, data_dir, seed, crop_padding):
    """The arguments of `load_dataset` checked by name: ValueError (ConfigError) for a value it
    cannot take, before any file is read. Returns (batch_size, seed) as Python ints."""
    if name not in DATASETS:
        raise ValueError(f"load_dataset: name={name!r} is not a dataset; give one of "
                         f"{', '.join(DATASETS)}")
    if split not in SPLITS:
        raise ValueError(f"load_dataset: split={split!r} is not a split; give 'train' or 'test'")
    batch_size = check_argument(TrainConfig, "batch_size", plain(batch_size),
                                "load_dataset's batch_size")
    seed = check_argument(TrainConfig, "seed", plain(seed), "load_dataset's seed")
    check_argument(TrainConfig, "crop_padding", plain(crop_padding), "load_dataset's crop_padding")
    if DATASETS[name].folder and not (data_dir or "").strip():
        raise ValueError(f"load_dataset: name={name!r} needs data_dir=ROOT, the folder holding "
                         f"{image_folder.EXAMPLE}")
    return batch_size, seed


def load_dataset(name, split="train", batch_size=128, data_dir=None, seed=0,
                 crop_padding=TrainConfig.crop_padding):
    """One split of a dataset as the command line reads it, batched, for `model.fit`.

    Args:
        name: a dataset: `"cifar10"`, `"cifar100"`, `"fashion_mnist"`, `"imagenet2012"`, or
            `"image_folder"` (your own images: `data_dir=ROOT` holding ROOT/train/LABEL/*.png
            and ROOT/test/LABEL/*.png, PNG or JPEG of any size, resized to 32x32).
        split: `"train"`: the run's training stream, endless (give `model.fit` its
            `steps_per_epoch`, e.g. `ds.num_examples // batch_size`), shuffled and augmented
            as the recipe trains (zero padding, random crop, random flip); `"test"`: the test
            split (ImageNet's validation split) once, in order, not augmented, the last batch
            smaller.
        batch_size: images per batch, at least 1.
        data_dir: a tfds data directory prepared by `run/prepare_data.py` (None: tfds' default,
            where Fashion-MNIST is prepared from Debian's idx files, without network, and CIFAR
            downloaded); the image folder's ROOT for `"image_folder"` (required).
        seed: the seed of the training stream's order and augmentation (the run's `--seed`):
            the same seed gives the same batches.
        crop_padding: the pixels of zero padding on each side before the random crop (the
            run's `--crop_padding`).

    Returns:
        A `tf.data.Dataset` of (images, labels). Images: uint8 [N, 32, 32, 3] pixels as the
        network takes them, not standardised (for `resnet_nobn.ImageClassifier`, which
        standardises inside the model); ImageNet's float32 [N, 224, 224, 3], normalised as its
        run's input. Labels: int32 [N], class indices. Its `class_names` (tuple of str, class i
        at index i) and `num_examples` (the split's images) are attributes, as
        `keras.utils.image_dataset_from_directory` gives them. tf.data's autotuning is off in
        its options (`model.fit` returns as soon as its last step ends).

    Raises:
        ValueError: an unknown `name` or `split`, a `batch_size`, `seed` or `crop_padding` out
            of range, or `"image_folder"` without `data_dir`, named in the message.
        resnet_nobn.errors.UserError: data that is missing or damaged, in one line that says
            how to get it (`run/prepare_data.py`).

    Examples:

    ```python
    import resnet_nobn
    train = resnet_nobn.load_dataset("fashion_mnist", "train", batch_size=8)
    test = resnet_nobn.load_dataset("fashion_mnist", "test", batch_size=8)
    images, labels = next(iter(train))
    assert images.shape == (8, 32, 32, 3) and images.dtype == "uint8"
    model = resnet_nobn.ImageClassifier.from_preset(
        "fashion_mnist", widths=(8, 16, 32), blocks_per_stage=1, stem_width=8)
    model.fit(train, steps_per_epoch=2, epochs=1, validation_data=test.take(1), verbose=0)
    ```
    """
    batch_size, seed = _checked(name, split, batch_size, data_dir, seed, crop_padding)
    info = DATASETS[name]
    if name == imagenet.NAME:
        return _imagenet(data_dir, split, batch_size, seed)
    if info.folder:
        class_names, files = image_folder.layout(data_dir)
        images, labels = folder_input.read_split(files[split], info.image_size)
    else:
        builder = prepare.prepared_builder(name, data_dir)
        tfds_dir.check_prepared(builder, name, info.stored, info.num_classes, (split,))
        images, labels = cifar.load_split(builder, split, info)
        class_names = info.label_names
    if split == "train":
        empty = np.zeros((0,) + images.shape[1:], images.dtype), labels[:0]
        stream = cifar.InMemoryInput(info, (images, labels), empty, seed, crop_padding,
                                     standardize=_pixels, num_classes=len(class_names))
        ds = stream.train_dataset(tf.distribute.InputContext(), batch_size, 0)
    else:
        ds = (tf.data.Dataset.from_tensor_slices((images, labels))
              .batch(batch_size)
              .map(lambda x, y: (cifar.to_network(x, info), y))
              .prefetch(tf.data.AUTOTUNE))
    return _described(ds, class_names, len(labels))


def _imagenet(data_dir, split, batch_size, seed):
    """ImageNet's split as its run reads it (resnet_nobn/data/imagenet.py `TfdsInput`): the
    training stream, or the validation split without the run's padding to whole batches."""
    inp = imagenet.TfdsInput(prepare.imagenet_builder(data_dir), seed)
    ctx = tf.distribute.InputContext()
    if split == "train":
        ds, n = inp.train_dataset(ctx, batch_size, 0), imagenet.INFO.num_train
    else:
        ds = (inp.eval_dataset(ctx, batch_size).unbatch()
              .filter(lambda x, y, weight: weight > 0)
              .map(lambda x, y, weight: (x, y))
              .batch(batch_size)
              .prefetch(tf.data.AUTOTUNE))
        n = inp.num_eval_batches(1)
    names = inp.builder.info.features["label"].names
    return _described(ds, tuple(names), n)


def _described(ds, class_names, num_examples):
    """`ds` with tf.data's autotuning off, and its `class_names` and `num_examples`.

    Autotuning off: with it on, `model.fit` on the training stream returned after its last
    step idle, while it released the stream: 2 s later in 4 of 6 fits of 100 steps, 9 s in 1 of
    3 of 400 (docs/library.md's first model on 2 CPU cores); with it off, at once in 8 of 8, and
    as fast. The map's parallelism and the prefetch buffer keep tf.data's defaults for AUTOTUNE."""
    options = tf.data.Options()
    options.autotune.enabled = False
    ds = ds.with_options(options)
    ds.class_names, ds.num_examples = tuple(class_names), int(num_examples)
    return ds
