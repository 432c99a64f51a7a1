"""A prepared tfds directory, checked before training and its read errors said in one line.

What a prepared directory records (`features.json`, `dataset_info.json`: the image shape, the
number of classes, each split's files and bytes) is checked against the dataset the run expects
(resnet_nobn/data/datasets.py) before anything is written to model_dir: images of another
shape (e.g. 28x28x1), another number of classes, a missing, truncated or extended shard are
refused with one line naming the file: each split's files must hold the bytes dataset_info.json
records (its records plus 16 bytes of TFRecord framing each), and if they do not, each shard's
records are counted from their length headers against the shard lengths recorded, to name the
damaged one. What only reading shows (a corrupted record, a label out of range) is turned into one
line the same way (`read_error`). A directory of the right shapes whose recorded class names are
another dataset's is not refused: `provenance` says whose it is, for the run's records.
`check_readable` names a damaged dataset_info.json or features.json for run/prepare_data.py. The
fix is always the same: delete the dataset's directory and prepare the data again
(`errors.prepare_data_command`), which a directory that is already prepared would not do.
"""
import glob
import json
import os
import re

from resnet_nobn.errors import UserError, prepare_data_command


def data_dir_root(builder):
    """The --data_dir a builder reads: builder.data_dir is <root>/<name>/<version>."""
    return os.path.dirname(os.path.dirname(os.path.normpath(str(builder.data_dir))))


def prepare_again(builder, name):
    """The fix of a damaged prepared directory, in words that work when followed: it is deleted
    first, since run/prepare_data.py leaves a directory that is already prepared as it is."""
    return _delete_and_prepare(builder.data_dir, name, data_dir_root(builder))


def _delete_and_prepare(where, name, data_dir):
    return f"delete {where} and prepare the data again: {prepare_data_command(name, data_dir)}"


def check_readable(name, data_dir):
    """For run/prepare_data.py, before tfds reads an earlier preparation of `name` in the tfds data
    directory `data_dir`: UserError naming its damaged dataset_info.json or features.json (or its
    directory, if tfds cannot read it otherwise), and the fix."""
    import tensorflow_datasets as tfds
    where = os.path.join(data_dir, name, str(tfds.builder_cls(name).VERSION))
    again = _delete_and_prepare(where, name, data_dir)
    for path in (os.path.join(where, f) for f in ("dataset_info.json", "features.json")):
        try:
            with open(path, "rb") as f:
                json.loads(f.read().decode("utf-8"))
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as e:
            raise UserError(f"{path} is damaged ({type(e).__name__}: {str(e)[:120]}); {again}"
                            ) from None
    try:
        tfds.builder(name, data_dir=data_dir).is_prepared()
    except Exception as e:  # noqa: BLE001 -- whatever tfds cannot read there
        raise UserError(f"the {name} files in {where} are damaged ({type(e).__name__}: "
                        f"{(str(e).splitlines() or [''])[0][:120]}); {again}") from None


def _records(path):
    """The number of records of a TFRecord file, from their length headers (no record is read);
    None if the file ends inside a record."""
    size, pos, n = os.path.getsize(path), 0, 0
    with open(path, "rb") as f:
        while pos < size:
            f.seek(pos)
            head = f.read(8)
            if len(head) < 8:
                return None
            pos += int.from_bytes(head, "little") + 16  # length, its CRC, the record, its CRC
            n += 1
    return n if pos == size else None


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
                        f"{(str(e).splitlines() or [''])[0][:120]}); "
                        f"{prepare_again(builder, name)}") from None
    want = tuple(image_shape)
    if len(shape) != len(want) or any(w is not None and s != w for s, w in zip(shape, want)):
        show = "x".join("?" if d is None else str(d) for d in shape)
        need = "x".join("any" if d is None else str(d) for d in want)
        raise UserError(f"{where} holds {show} images, {name} has {need}: it is not {name}; "
                        f"{prepare_again(builder, name)}")
    if classes != num_classes:
        raise UserError(f"{where} holds {classes} classes, {name} has {num_classes}: it is not "
                        f"{name}; {prepare_again(builder, name)}")
    for split in splits if on_disk else ():
        if split not in info.splits:
            raise UserError(f"{where} has no {split} split; {prepare_again(builder, name)}")
        s = info.splits[split]
        files = [os.path.join(where, f) for f in s.filenames]
        for f in files:
            if not os.path.isfile(f):
                raise UserError(f"{f} is missing; {prepare_again(builder, name)}")
        recorded = int(getattr(s, "num_bytes", 0) or 0)
        size, expected = sum(map(os.path.getsize, files)), recorded + 16 * s.num_examples
        if recorded and size != expected:
            for f, n in zip(files, s.shard_lengths):
                got = _records(f)
                if got != n:
                    raise UserError(
                        f"{f} is {'truncated' if size < expected else 'damaged'} (it "
                        + ("ends inside a record" if got is None else f"holds {got:,} records")
                        + f", dataset_info.json records {n:,}); {prepare_again(builder, name)}")


def provenance(builder, info):
    """None if the prepared directory of `builder` holds dataset `info` as far as it records (or
    records nothing: tfds' mock data), else one line saying whose it is: the class names it
    records, which are not the dataset's (`info.label_names`). Another dataset written under the
    name (Fashion-MNIST as `cifar10`, say) is told this way, so that a run on it says so."""
    import tensorflow_datasets as tfds
    where = str(builder.data_dir)
    if not info.label_names or not os.path.isfile(os.path.join(where, "dataset_info.json")):
        return None
    try:
        names = list(tfds.builder_from_directory(where).info.features["label"].names)
    except Exception:  # noqa: BLE001 -- check_prepared has read it: nothing more to learn here
        return None
    if names == list(info.label_names):
        return None
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    return (f"{where} is not {info.title}: its classes are {shown}, not "
            f"{', '.join(info.label_names[:3])}, ...")


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
    return UserError(f"{what} {why}; {prepare_again(builder, name)}")
