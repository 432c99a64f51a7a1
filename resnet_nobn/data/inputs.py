"""The input of a run: which module reads which dataset, and synthetic data for any of them.

The datasets of the CIFAR recipe (CIFAR-10/100, Fashion-MNIST: resnet_nobn/data/datasets.py) are read by
resnet_nobn/data/cifar.py, an image folder of your own by resnet_nobn/data/folder_input.py (into
cifar.py's input), ImageNet by resnet_nobn/data/imagenet.py; all split every global batch
over workers and replicas alike. Each is a `pipeline.Input` (resnet_nobn/data/pipeline.py):
`train_dataset(ctx, global_batch, start_step)` of (images, labels), `num_eval_batches(global_batch)`
and `eval_dataset(ctx, global_batch)` of (images, labels, weights), the padding weighted 0, and the
fields read here (`standardization`, `folder`, `mismatch`, `builder`; None where it has none).
results.json records what a run's input was (`record`); a resumed run's input goes on as recorded
(`go_on_as_recorded`), and a resume records how an image folder's images changed (`changes_since`).
"""
import numpy as np
import tensorflow as tf

from resnet_nobn.data import image_folder
from resnet_nobn.config import TrainConfig
from resnet_nobn.data import cifar, folder_input, imagenet, standardization, tfds_dir
from resnet_nobn.data.datasets import DATASETS, DatasetInfo
from resnet_nobn.data.pipeline import Input

INPUTS = {"cifar": cifar.make_input, "imagenet": imagenet.make_input}  # by the dataset's recipe


class SyntheticInput(Input):
    """`--use_synthetic_data`: one fixed random batch per replica, repeated; no I/O.

    For smoke runs and for timing the model alone. A net can memorise the batch, so the loss falls.
    """

    def __init__(self, info: DatasetInfo, seed, num_classes=None):
        self.info, self.seed = info, seed
        self.num_classes = num_classes or info.num_classes  # an image folder's: the run's

    def _batch(self, ctx, global_batch):
        b = ctx.get_per_replica_batch_size(global_batch)
        rng = np.random.default_rng([self.seed, ctx.input_pipeline_id])
        s = self.info.image_size
        images = rng.standard_normal((b, s, s, 3)).astype(np.float32)
        labels = rng.integers(0, self.num_classes, b).astype(np.int32)
        return images, labels

    def train_dataset(self, ctx, global_batch, start_step):
        return tf.data.Dataset.from_tensors(self._batch(ctx, global_batch)).repeat()

    def num_eval_batches(self, global_batch):
        return 1

    def eval_dataset(self, ctx, global_batch):
        images, labels = self._batch(ctx, global_batch)
        return tf.data.Dataset.from_tensors((images, labels, np.ones(len(labels), np.float32)))


def make_input(cfg: TrainConfig):
    """The input for `cfg.dataset` (a name of DATASETS: TrainConfig refuses others): synthetic, an
    image folder, or read through tfds (UserError if unavailable)."""
    info = DATASETS[cfg.dataset]
    if cfg.use_synthetic_data:
        return SyntheticInput(info, cfg.seed, cfg.model.num_classes)
    return folder_input.make_input(cfg) if info.folder else INPUTS[info.recipe](cfg)


def go_on_as_recorded(inp, results):
    """--standardize=dataset: the input `inp` of a resumed run goes on with the mean and std its
    results.json (`results`, as the run found it) records (resnet_nobn/data/standardization.py).
    Returns the warning to print where the training split now gives other values, else None."""
    used = inp.standardization
    if used is None or used.mode != standardization.DATASET:
        return None
    was = standardization.from_results(results)
    if was is None or was == used:
        return None
    inp.standardization = was
    return (f"the training split now gives {used.described()}; the run goes on with those its "
            f"results.json records: {was.described()}")


def changes_since(inp, results):
    """{field: [there, here]} of what the images of the image folder the input `inp` reads
    changed since the run's results.json (`results`, as the run found it) recorded them
    (resnet_nobn/data/image_folder.py `changes`): a resume records them with the settings it changes
    (`resume_changes`). {} for another input, and for a results.json without the record."""
    if inp.folder is None:
        return {}
    return image_folder.changes((results or {}).get(image_folder.NAME), inp.folder)


def record(inp, class_names):
    """results.json's record of the input `inp`: another dataset's images under the name
    (`data_mismatch`), an image folder's classes (`class_names`: the run's, or ()), the mean and
    std of --standardize=dataset."""
    std = inp.standardization
    return {**({"data_mismatch": inp.mismatch} if inp.mismatch else {}),
            **({image_folder.NAME: dict(inp.folder or {},
                                        class_names=list(class_names))} if class_names else {}),
            **({standardization.RECORD: std.record()}
               if std and std.mode == standardization.DATASET else {})}


def read_error(error, inp):
    """The one-line UserError for `error` if it was raised reading the damaged files of input
    `inp` while training (ImageNet is read as it trains; CIFAR is checked when loaded), else None."""
    builder = inp.builder
    return tfds_dir.read_error(error, builder, builder.name) if builder is not None else None
