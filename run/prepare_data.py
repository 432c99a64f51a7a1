"""Prepares a dataset in a tfds data directory, for training with --data_dir.

    python run/prepare_data.py --dataset=cifar100 --data_dir=DIR
    python run/prepare_data.py --dataset=fashion_mnist --data_dir=DIR --examples_dir=examples
    python run/prepare_data.py --dataset=imagenet2012 --data_dir=DIR   # archives in DIR/downloads/manual
    python run/prepare_data.py --dataset=imagenet2012 --data_dir=DIR --manual_dir=/archives

The tfds builder's own `download_and_prepare`, the same data the training commands read, in a
Python environment made from requirements.txt (tfds' `tfds build` command needs apache_beam,
which is not in it). CIFAR-10/100 are downloaded from www.cs.toronto.edu (about 170 MB).
Fashion-MNIST needs no network where Debian's dataset-fashion-mnist is installed: its idx files
(or those in --manual_dir) become tfds' own fashion_mnist; elsewhere tfds downloads them. ImageNet
cannot be downloaded automatically: put ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar from
https://image-net.org in the manual directory and this converts them (hours, ~150 GB). Then train
with `python run/cifar_train.py --dataset=NAME --data_dir=DIR` (or run/imagenet_train.py), or copy
DIR to a machine without internet access. A dataset already prepared in DIR is checked (its
dataset_info.json and features.json readable, every shard whole: resnet_nobn/data/tfds_dir.py) and
left as it is; a damaged one is named, with the fix: delete its directory and run this again.
Every network wait of the download is bounded (resnet_nobn/data/download.py); a preparation that
fails leaves nothing behind in DIR (resnet_nobn/data/prepare.py).
"""
import _start  # noqa: F401  (first: the repository on sys.path, quiet TensorFlow, Ctrl-C)
import os
import sys

from absl import flags

from resnet_nobn import cli, console
from resnet_nobn.data import prepare, tfds_dir  # no TensorFlow at import
from resnet_nobn.data.datasets import DATASETS, tfds_names
from resnet_nobn.errors import UserError

flags.DEFINE_enum("dataset", None, list(tfds_names()), "The dataset to prepare (your own images, "
                  "--dataset=image_folder, need no preparing).")
flags.DEFINE_string("data_dir", None, "The tfds data directory to prepare it in (created if "
                    "missing); default: tfds' own (TFDS_DATA_DIR, else ~/tensorflow_datasets), "
                    "the one a training run without --data_dir reads.")
flags.DEFINE_string("manual_dir", None, "imagenet2012: the directory holding "
                    "ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar (default: "
                    "DATA_DIR/downloads/manual). fashion_mnist: the directory holding its four idx "
                    "files (default: Debian's /usr/share/datasets/fashion-mnist if installed, else "
                    "they are downloaded).")
flags.DEFINE_string("examples_dir", None, "Also write the first 10 test images there as PNG files "
                    "named <index>_<label>.png, to try run/predict.py on (datasets of pixel "
                    "arrays: not imagenet2012).")
cli.advise("dataset", {"image_folder": "an image folder needs no preparing: train on it with "
                       "python run/cifar_train.py --dataset=image_folder --data_dir=ROOT (ROOT "
                       "holding train/LABEL/* and test/LABEL/*)"})
flags.mark_flag_as_required("dataset")
FLAGS = flags.FLAGS


def prepare_dataset():
    """Prepares --dataset in --data_dir; UserError (one line) when it cannot, with nothing left
    behind in --data_dir (a directory it made is removed)."""
    name, data_dir, manual = FLAGS.dataset, FLAGS.data_dir, FLAGS.manual_dir
    info = DATASETS[name]
    if manual is not None and name not in ("imagenet2012", "fashion_mnist"):
        raise UserError(f"--manual_dir is for --dataset=imagenet2012 and fashion_mnist only; "
                        f"{name} is downloaded")
    if FLAGS.examples_dir is not None and not info.pixels:
        raise UserError(f"--examples_dir writes test images of datasets of pixel arrays; "
                        f"{name}'s are JPEG files: use your own")
    for flag, path in (("data_dir", data_dir), ("examples_dir", FLAGS.examples_dir)):
        if path and os.path.exists(path) and not os.path.isdir(path):
            raise UserError(f"--{flag}={path} is a file, not a directory; give another path")
    with console.quiet_stderr():  # TensorFlow's start-up lines
        import tensorflow as tf
    tf.get_logger().setLevel("ERROR")
    root = prepare.data_root(data_dir)
    with prepare.leaves_nothing(root, name):
        try:
            os.makedirs(root, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot create --data_dir={data_dir}: {e.strerror or e}") from None
        tfds_dir.check_readable(name, root)
        if name == prepare.IMAGENET:
            builder = prepare.imagenet_builder(data_dir, manual)
        else:
            builder = prepare.tfds_builder(name, data_dir)
            if builder.is_prepared():
                tfds_dir.check_prepared(builder, name, info.stored, info.num_classes,
                                        ("train", "test"))
                print(f"{name} is already prepared in {builder.data_dir}", flush=True)
                _examples(builder)
                return
            builder = prepare.prepare(builder, manual)
    splits = ", ".join(f"{s} {v.num_examples:,}" for s, v in sorted(builder.info.splits.items()))
    entry = "imagenet_train.py" if name == prepare.IMAGENET else f"cifar_train.py --dataset={name}"
    print(f"{name} is prepared in {builder.data_dir} ({splits} images); train with: "
          f"python run/{entry}{f' --data_dir={data_dir}' if data_dir else ''}", flush=True)
    _examples(builder)


def _examples(builder):
    if FLAGS.examples_dir is not None:
        paths = prepare.write_examples(builder, FLAGS.examples_dir)
        print(f"wrote {len(paths)} test images to {FLAGS.examples_dir}: "
              f"{os.path.basename(paths[0])} ... {os.path.basename(paths[-1])}", flush=True)


def main(argv):
    from absl import logging
    logging.set_verbosity(logging.ERROR)  # tfds' absl warnings: errors are said in one line

    def prepare_or_stop():
        try:
            prepare_dataset()
        except KeyboardInterrupt:  # tfds writes into a temporary directory, renamed when complete
            print("interrupted; nothing was prepared: re-run the same command", file=sys.stderr,
                  flush=True)
            sys.exit(130)

    cli.main_wrapper(prepare_or_stop)


if __name__ == "__main__":
    cli.start(main)
