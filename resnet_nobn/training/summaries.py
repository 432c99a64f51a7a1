"""A run's TensorBoard summaries besides its loss, rate and errors: what it records about the
network at each log step (`Monitor`), its hyperparameters for the HParams tab
(`write_run_hparams`), the conv kernels' histograms at each evaluation (`kernel_histograms`) and
a few augmented training images at its first step (`augmented_images`).
"""
import os

import keras
import tensorflow as tf

from resnet_nobn.cli import blocks_text
from resnet_nobn.model import lipschitz, network as model_lib
from resnet_nobn.model.blocks import ResidualBlock


def hparams_of(cfg):
    """The hyperparameters shown in TensorBoard for one run (scalars only): the network's, and
    every training setting a study's report may name as leaving the paper's recipe
    (config.SCIENTIFIC_FIELDS, the precision and XLA)."""
    m = cfg.model
    return {"dataset": cfg.dataset, "norm": m.norm, "init": m.init, "head": m.head,
            "blocks_per_stage": blocks_text(m.blocks_per_stage, sep="-"),
            "relu_leakiness": float(m.relu_leakiness), "clip_norm": float(cfg.clip_norm),
            "residual_blocks": int(sum(m.blocks_per_stage)),
            "widths": ",".join(str(w) for w in m.widths), "seed": int(cfg.seed),
            "learning_rate": float(cfg.learning_rate), "warmup_steps": int(cfg.warmup_steps),
            "lr_boundaries": ",".join(str(b) for b in cfg.lr_boundaries) or "none",
            "lr_decay_factor": float(cfg.lr_decay_factor), "lr_decay_every": int(cfg.lr_decay_every),
            "momentum": float(cfg.momentum), "agc": float(cfg.agc),
            "max_branch_norm": float(cfg.max_branch_norm),
            "scalar_lr_factor": float(cfg.scalar_lr_factor), "mixup": float(cfg.mixup),
            "crop_padding": int(cfg.crop_padding), "standardize": cfg.standardize,
            "batch_size": int(cfg.batch_size), "train_steps": int(cfg.train_steps),
            "weight_decay": float(cfg.weight_decay), "synthetic_data": bool(cfg.use_synthetic_data),
            "mixed_precision": cfg.mixed_precision, "xla": bool(cfg.xla)}


def write_run_hparams(cfg, trial_id=None):
    """hp.hparams in the run's directory itself, so that TensorBoard pairs it with the run's
    train/ and eval/ summaries, unless an event file is there already (written once: a study
    writes it first, with its own trial id, resnet_nobn/study/hparams.py); `trial_id` is
    TensorBoard's group: runs of one id are one row of the HParams tab (None: one made from the
    values). Returns whether it wrote."""
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
    """`kernel/<layer>/<kernel>`: one histogram per conv kernel (the stem's and both of every
    block's, the weights with weight decay), into the default writer (eval/) at `step`."""
    for kernel in model_lib.conv_kernels(model):
        tf.summary.histogram("kernel/" + kernel.path, kernel, step=step)


def augmented_images(dataset, step, count=8):
    """The first `count` images of `dataset`'s first batch, as the network sees them after
    augmentation, each rescaled from its own min..max to [0, 1] to be viewable (standardised
    images have no fixed range), as `augmented_images` into the default writer (train/) at
    `step`."""
    images = tf.cast(next(iter(dataset))[0][:count], tf.float32)
    low = tf.reduce_min(images, axis=[1, 2, 3], keepdims=True)
    high = tf.reduce_max(images, axis=[1, 2, 3], keepdims=True)
    tf.summary.image("augmented_images", (images - low) / tf.maximum(high - low, 1e-6),
                     step=step, max_outputs=count)



class Monitor:
    """The scalars of one model and its optimizer at each log step, in train/: per stage, the norm
    of the conv kernels (`weight_norm/`) and of their last update relative to it
    (`update_ratio/`); per block, ||branch(h)|| / ||shortcut(h)|| on a fixed batch of test images
    (`branch_norm/`): how far each block is from the identity, the network's counterpart of
    ||A_j|| in Section 2 of the paper; and beside it, for the normalization-free nets, the bound
    the theory speaks of, |scale| ||C2||_2 ||C1||_2 (`branch_bound/`, by a power iteration of its
    own, resnet_nobn/model/lipschitz.py, warm-started at each log step). `probe_images()` gives
    the fixed test batch."""

    def __init__(self, model, optimizer, probe_images):
        self.model, self.optimizer, self._probe_images = model, optimizer, probe_images
        self.stages = model_lib.stage_kernels(model)
        self._probe = self._bounds = None

    def stage_norms(self):
        return {name: float(tf.linalg.global_norm(ks)) for name, ks in self.stages.items()}

    def update_ratios(self):
        """{stage: ||last update|| / ||weights||} of its conv kernels. With momentum the last SGD
        update is exactly the velocity (`w += v`), so no copy of the weights is needed."""
        inner = getattr(self.optimizer, "inner_optimizer", self.optimizer)
        velocities = getattr(inner, "momentums", None) or []
        if len(velocities) != len(self.model.trainable_variables):
            return {}
        velocity = {v.path: m for v, m in zip(self.model.trainable_variables, velocities)}
        return {name: float(tf.linalg.global_norm([velocity[k.path] for k in ks])
                           / tf.linalg.global_norm(ks))
                for name, ks in self.stages.items()}

    def branch_norms(self):
        """{block: ||branch(h)|| / ||shortcut(h)||} on the fixed batch of test images."""
        if self._probe is None:
            blocks = [l for l in self.model.layers if isinstance(l, ResidualBlock)]
            inputs = keras.Model(self.model.inputs, [b.input for b in blocks])
            images = self._probe_images()

            @tf.function
            def probe():
                out = []
                for b, h in zip(blocks, inputs(images)):
                    skip = h if b.shortcut is None else b.shortcut(h)
                    out.append(tf.norm(tf.cast(b.branch(h), tf.float32))
                               / tf.norm(tf.cast(skip, tf.float32)))
                return out
            self._probe = (blocks, probe)
        blocks, probe = self._probe
        return {b.name: float(r) for b, r in zip(blocks, probe())}

    def branch_bounds(self):
        """{block: |scale| ||C2||_2 ||C1||_2}, for blocks without normalization layers (with BN
        between them the product bounds nothing); 100 power iterations at the first call, 10 after.
        """
        if self._bounds is None:
            bounds = lipschitz.BranchBounds(self.model, seed=1, warmup=100)
            names = [b.name for b in bounds.blocks]
            plain = all(b.norm1 is None and b.norm2 is None for b in bounds.blocks)
            compute = tf.function(lambda: bounds.bounds(tf.where(bounds.calls == 0, 100, 10)))
            self._bounds = (names if plain else [], compute)
        names, compute = self._bounds
        return {name: float(v) for name, v in zip(names, compute())} if names else {}

    def scalars(self):
        """All of them, as {TensorBoard tag: value}."""
        return {**{f"weight_norm/{k}": v for k, v in self.stage_norms().items()},
                **{f"update_ratio/{k}": v for k, v in self.update_ratios().items()},
                **{f"branch_norm/{k}": v for k, v in self.branch_norms().items()},
                **{f"branch_bound/{k}": v for k, v in self.branch_bounds().items()}}
