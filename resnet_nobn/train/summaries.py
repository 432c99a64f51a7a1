"""A run's TensorBoard summaries beyond the scalars: its hyperparameters (the HParams tab), the conv
kernels' histograms at each evaluation, and a few augmented training images once.

  * `hp.hparams` in model_dir itself, once (`write_run_hparams`), so TensorBoard pairs it with the
    run's train/ and eval/ summaries; a study writes it first, with its own trial id
    (resnet_nobn/study/hparams.py, which also writes the study's experiment summary);
  * `kernel/<layer>/<kernel>`: one histogram per conv kernel (the stem's and both of every block's,
    the weights with weight decay), in eval/ at each evaluation;
  * `augmented_images`: the first 8 images of the first training batch, as the network sees
    them after augmentation, each rescaled from its own min..max to [0, 1] to be viewable
    (standardised images have no fixed range), in train/ at the run's first step.
"""
import os

import tensorflow as tf

from resnet_nobn.cli import blocks_text
from resnet_nobn.model import network as model_lib


def hparams_of(cfg):
    """The hyperparameters shown in TensorBoard for one run (scalars only)."""
    m = cfg.model
    return {"dataset": cfg.dataset, "norm": m.norm, "init": m.init, "head": m.head,
            "blocks_per_stage": blocks_text(m.blocks_per_stage, sep="-"),
            "relu_leakiness": float(m.relu_leakiness), "clip_norm": float(cfg.clip_norm),
            "residual_blocks": int(sum(m.blocks_per_stage)),
            "widths": ",".join(str(w) for w in m.widths), "seed": int(cfg.seed),
            "learning_rate": float(cfg.learning_rate), "warmup_steps": int(cfg.warmup_steps),
            "batch_size": int(cfg.batch_size), "train_steps": int(cfg.train_steps),
            "weight_decay": float(cfg.weight_decay), "synthetic_data": bool(cfg.use_synthetic_data),
            "mixed_precision": cfg.mixed_precision, "xla": bool(cfg.xla)}


def write_run_hparams(cfg, trial_id=None):
    """hp.hparams in the run's directory, unless an event file is there already (written once);
    `trial_id` is TensorBoard's group: runs of one id are one row of the HParams tab (None: one
    made from the values). Returns whether it wrote."""
    from tensorboard.plugins.hparams import api as hp
    os.makedirs(cfg.model_dir, exist_ok=True)
    if any(n.startswith("events.out.tfevents.") for n in os.listdir(cfg.model_dir)):
        return False
    writer = tf.summary.create_file_writer(cfg.model_dir)
    with writer.as_default():
        hp.hparams(hparams_of(cfg), trial_id=trial_id)
    writer.close()
    return True


def kernel_histograms(model, step):
    """One histogram per conv kernel, into the default writer at `step`."""
    for kernel in model_lib.conv_kernels(model):
        tf.summary.histogram("kernel/" + kernel.path, kernel, step=step)


def augmented_images(dataset, step, count=8):
    """The first `count` images of `dataset`'s first batch, each rescaled to [0, 1], as
    `augmented_images` into the default writer at `step`."""
    images = tf.cast(next(iter(dataset))[0][:count], tf.float32)
    low = tf.reduce_min(images, axis=[1, 2, 3], keepdims=True)
    high = tf.reduce_max(images, axis=[1, 2, 3], keepdims=True)
    tf.summary.image("augmented_images", (images - low) / tf.maximum(high - low, 1e-6),
                     step=step, max_outputs=count)
