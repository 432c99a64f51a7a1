"""What every input shares: the `Input` class (its datasets and the fields a run records of it),
and how a global batch is split over workers and replicas.

Every global batch of B stream positions is split into `num_input_pipelines` contiguous parts, one
per worker, and each worker batches its part per replica; replica r of a worker gets the r-th
consecutive per-replica batch. So a global batch holds the same examples on one device, on several
GPUs, or on several machines. The evaluation split is padded to whole global batches with
examples of weight 0.
"""
import tensorflow as tf


class Input:
    """An input of a run (cifar.InMemoryInput, imagenet.TfdsInput, inputs.SyntheticInput): its
    datasets, and the fields the run reads of it (resnet_nobn/data/inputs.py), None where the
    input has none:

    standardization  the last step of its preprocessing (resnet_nobn/data/standardization.py);
                     None: ImageNet's own normalisation, synthetic data
    folder           an image folder's record (resnet_nobn/data/image_folder.py `record`)
    mismatch         whose images these are, when another dataset's (tfds_dir.provenance)
    builder          the tfds builder it reads while training, whose damaged files it names
    """
    standardization = None
    folder = None
    mismatch = None
    builder = None

    def train_dataset(self, ctx: tf.distribute.InputContext, global_batch, start_step):
        """(images, labels) per-replica batches, the stream going on from `start_step`."""
        raise NotImplementedError

    def num_eval_batches(self, global_batch):
        """How many global batches the evaluation split fills (the last one padded)."""
        raise NotImplementedError

    def eval_dataset(self, ctx: tf.distribute.InputContext, global_batch):
        """(images, labels, weights) per-replica batches of the evaluation split, padding
        weighted 0."""
        raise NotImplementedError


def pipeline_part(ds, global_batch, ctx):
    """Keeps this input pipeline's contiguous part of every global batch, unbatched.

    Elements may be one tensor or a tuple of tensors (sliced alike).
    """
    part = global_batch // ctx.num_input_pipelines
    lo = ctx.input_pipeline_id * part

    def keep(*t):
        return tf.nest.map_structure(lambda x: x[lo:lo + part], t if len(t) > 1 else t[0])

    return ds.batch(global_batch, drop_remainder=True).map(keep).unbatch()


def batch_and_prefetch(ds, load, ctx, global_batch):
    """`load` mapped over `ds` in parallel, then whole per-replica batches, prefetched."""
    return (ds.map(load, num_parallel_calls=tf.data.AUTOTUNE)
            .batch(ctx.get_per_replica_batch_size(global_batch), drop_remainder=True)
            .prefetch(tf.data.AUTOTUNE))


def num_batches(examples, global_batch):
    """Global batches that hold `examples` examples, the last one padded."""
    return -(-examples // global_batch)
