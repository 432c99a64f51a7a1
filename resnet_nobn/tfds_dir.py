"""A prepared tfds directory, checked before training and its read errors said in one line.

What a prepared directory records (`features.json`, `dataset_info.json`: the image shape, the
number of classes, each split's files and bytes) is checked against the dataset the run expects
(resnet_nobn/config.py DATASETS) before anything is written to model_dir: images of another
shape (e.g. 28x28x1), another number of classes, a missing or truncated shard are refused with
one line naming the file. What only reading shows (a corrupted record, a label out of range) is
turned into one line the same way (`read_error`). The fix is always the same: prepare the data
again (`prepare_command`).
"""
import glob
import os
import re

from resnet_nobn.errors import UserError


def prepare_command(name, data_dir):
    """The command that prepares `name` (again) in `data_dir` (run/prepare_data.py)."""
    return f"python run/prepare_data.py --dataset={name} --data_dir={data_dir or 'DIR'}"


def data_dir_root(builder):
    """The --data_dir a builder reads: builder.data_dir is <root>/<name>/<version>."""
    return os.path.dirname(os.path.dirname(os.path.normpath(str(builder.data_dir))))


def _again(builder, name):
    return f"prepare the data again: {prepare_command(name, data_dir_root(builder))}"


def check_prepared(builder, name, image_shape, num_classes, splits):
    """Refuses (UserError) a prepared directory whose recorded features or files do not match.

    `image_shape`: (height, width, channels), None for a free dimension (ImageNet's sizes vary);
    `num_classes`: the dataset's; `splits`: the splits the run reads.
    """
    import tensorflow_datasets as tfds
    where = str(builder.data_dir)
    on_disk = os.path.isfile(os.path.join(where, "dataset_info.json"))  # not under tfds' mock_data
    try:  # what is on disk, not what the registered builder's code says
        info = tfds.builder_from_directory(where).info if on_disk else builder.info
        features = info.features
        shape = tuple(features["image"].shape)
        classes = features["label"].num_classes
    except Exception as e:  # noqa: BLE001 -- a hand-edited features.json and the like
        raise UserError(f"the {name} files in {where} are damaged ({type(e).__name__}: "
                        f"{(str(e).splitlines() or [''])[0][:120]}); {_again(builder, name)}") from None
    want = tuple(image_shape)
    if len(shape) != len(want) or any(w is not None and s != w for s, w in zip(shape, want)):
        show = "x".join("?" if d is None else str(d) for d in shape)
        need = "x".join("any" if d is None else str(d) for d in want)
        raise UserError(f"{where} holds {show} images, {name} has {need}: it is not {name}; "
                        f"{_again(builder, name)}")
    if classes != num_classes:
        raise UserError(f"{where} holds {classes} classes, {name} has {num_classes}: it is not "
                        f"{name}; {_again(builder, name)}")
    for split in splits if on_disk else ():
        if split not in info.splits:
            raise UserError(f"{where} has no {split} split; {_again(builder, name)}")
        s = info.splits[split]
        files = [os.path.join(where, f) for f in s.filenames]
        for f in files:
            if not os.path.isfile(f):
                raise UserError(f"{f} is missing; {_again(builder, name)}")
        recorded = int(getattr(s, "num_bytes", 0) or 0)
        if recorded and sum(os.path.getsize(f) for f in files) < recorded:
            short = min(files, key=os.path.getsize) if len(files) > 1 else files[0]
            raise UserError(f"{short} is truncated ({name} {split} split: "
                            f"{sum(os.path.getsize(f) for f in files)} of {recorded} bytes); "
                            f"{_again(builder, name)}")


def read_error(error, builder, name, split=None):
    """The one line (a UserError) for an error raised while reading `builder`'s files, or None if
    `error` is not one (a tf.errors.OpError that names no damaged data)."""
    import tensorflow as tf
    if not isinstance(error, (tf.errors.DataLossError, tf.errors.NotFoundError,
                              tf.errors.InvalidArgumentError)):
        return None
    text = str(error)
    where = str(builder.data_dir)
    m = re.search(re.escape(where) + r"/[^\s;:'\"]+", text)
    if m:
        what = m.group(0)
    elif split:
        what = os.path.join(where, f"{name}-{split}.tfrecord-*")
        shards = glob.glob(glob.escape(what[:-1]) + "*")
        what = shards[0] if len(shards) == 1 else what
    else:
        what = where
    label = re.search(r"label value of (-?\d+) which is outside the valid range of \[0, (\d+)\)", text)
    if label:
        why = f"holds label {label.group(1)}, outside 0..{int(label.group(2)) - 1}"
    elif isinstance(error, tf.errors.NotFoundError):
        why = "is missing"
    elif isinstance(error, tf.errors.DataLossError):
        detail = re.search(r"(truncated record at \d+|corrupted record at \d+)", text)
        why = f"is damaged ({detail.group(1) if detail else 'data loss'})"
    elif "IteratorGetNext" in text and ("Incompatible shapes" in text or "decode" in text.lower()):
        detail = re.search(r"expected \[[^\]]*\] but got \[[^\]]*\]", text)
        why = f"holds images of another shape ({detail.group(0)})" if detail else \
            "holds records that do not decode as this dataset's images"
    else:
        return None
    return UserError(f"{what} {why}; {_again(builder, name)}")
