"""What the CIFAR and ImageNet inputs share: how a global batch is split over workers and replicas.

Every global batch of B stream positions is split into `num_input_pipelines` contiguous parts, one
per worker, and each worker batches its part per replica; replica r of a worker gets the r-th
consecutive per-replica batch. So a global batch holds the same examples on one device, on several
GPUs, or on several machines. The evaluation split is padded to whole global batches with
examples of weight 0.
"""
import tensorflow as tf


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
