"""Is it the harness? Fixup trained by the project and by an independent JAX implementation of its
reference code (experiments/stability/fixup_jax.py), from the same initial weights on the same batches.

The project's side is its real training step: resnet_nobn.training.steps.build and build_train_loop,
one step per call, with `--init=fixup` (Fixup as its reference code builds it, lr/10 for the
scalars). The JAX side shares only the data with it: the initial weights, read from the project's
built model by variable name as numpy arrays, and each batch, drawn once from the project's input
pipeline (resnet_nobn.data) and given to both. Printed: both cross-entropies at every step, the
largest difference of every variable after the run (absolute and relative to the variable's
largest magnitude), and a verdict.

    python run/prepare_data.py --dataset=fashion_mnist --data_dir=/tmp/fmnist
    python experiments/stability/fixup_parity.py --data_dir=/tmp/fmnist            # 20 steps at rate 0.1
    python experiments/stability/fixup_parity.py --data_dir=/tmp/fmnist --long     # 1,500 steps

`--long` runs both for the full schedule (1,500 steps, the rate /10 at 750 and 1,250), printing
both losses every 50 steps and the step where either first goes non-finite. Without --data_dir the
project's synthetic data (one random batch, repeated). The JAX side's switches (--shortcut,
--padding, --decayed, --momentum_form) default to the harness's settings; the reference's are
`--shortcut=reference --padding=symmetric --decayed=all --momentum_form=torch` (experiments/stability/fixup_jax.py):
the first two make another network, the third another step, and the fourth the same steps while
the rate is constant (not across a rate change).
"""
import collections
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from experiments.stability import fixup_jax  # noqa: E402

BOUNDARIES = (750, 1250)  # --long's schedule: the 1,500 steps, /10 at 750 and 1,250
LONG_STEPS, LONG_EVERY = 1500, 50
# Float tolerance: two float32 implementations (oneDNN's and XLA's convolutions sum in other
# orders) after 20 steps; a wrong learning rate, decay or shortcut moves a weight by far more.
LOSS_TOL, WEIGHT_TOL = 1e-4, 1e-3


def project_config(widths=(16, 32, 64), blocks=3, batch_size=128, learning_rate=0.1,
                   relu_leakiness=0.0, seed=3, data_dir=None, steps=20, **train):
    """The project's TrainConfig of Fixup as published at this size: Fashion-MNIST from
    `data_dir` (None: synthetic data), the --long schedule; `train` overrides TrainConfig fields."""
    from resnet_nobn.config import ModelConfig, TrainConfig
    model = ModelConfig(widths=tuple(widths), blocks_per_stage=(blocks,) * len(widths),
                        stem_width=widths[0], init="fixup", norm="none",
                        relu_leakiness=relu_leakiness)
    return TrainConfig(model=model, dataset="fashion_mnist", data_dir=data_dir,
                       use_synthetic_data=data_dir is None, train_steps=steps,
                       batch_size=batch_size, learning_rate=learning_rate,
                       lr_boundaries=BOUNDARIES, seed=seed, strategy="one_device", **train)


class Project:
    """The project's model and compiled training loop, fed batch by batch from the project's
    input pipeline; each batch it takes is kept in `batches` for the other side, in order."""

    def __init__(self, cfg):
        import tensorflow as tf
        from resnet_nobn.data import inputs
        from resnet_nobn.training import steps
        self.strategy = tf.distribute.get_strategy()
        self.model, self.optimizer = steps.build(cfg, self.strategy)
        self.loop = steps.build_train_loop(cfg, self.strategy, self.model, self.optimizer)
        source = iter(inputs.make_input(cfg).train_dataset(
            tf.distribute.InputContext(), cfg.batch_size, 0))
        self.batches = collections.deque()

        def feed():
            for images, labels in source:
                self.batches.append((images.numpy(), labels.numpy()))
                yield self.batches[-1]

        size = cfg.model.image_size
        signature = (tf.TensorSpec((cfg.batch_size, size, size, 3), tf.float32),
                     tf.TensorSpec((cfg.batch_size,), tf.int32))
        self.iterator = iter(tf.data.Dataset.from_generator(feed, output_signature=signature))
        self.one = tf.constant(1)

    def weights(self):
        """{variable path: numpy array} of every trainable variable."""
        return {v.path: v.numpy() for v in self.model.trainable_variables}

    def step(self):
        """One training step: (cross-entropy, loss) of the batch, before the update."""
        sums = self.loop(self.iterator, self.one).numpy()
        return float(sums[0]), float(sums[1])


class Independent:
    """The JAX implementation (experiments/stability/fixup_jax.py) from the project's initial weights."""

    def __init__(self, weights, arch, opts, learning_rate):
        self.params, self.velocity = fixup_jax.start(weights, arch)
        self.train_step = fixup_jax.make_step(arch, opts)
        self.rate, self.steps = learning_rate, 0

    def step(self, images, labels):
        lr = np.float32(fixup_jax.learning_rate(self.steps, self.rate, BOUNDARIES))
        self.params, self.velocity, ce, loss = self.train_step(
            self.params, self.velocity, images, labels, lr)
        self.steps += 1
        return float(ce), float(loss)

    def weights(self):
        return {k: np.asarray(v) for k, v in self.params.items()}


def weight_differences(ours, theirs):
    """[(name, largest |a - b|, that over the largest |b|)] per variable of `theirs`, in order;
    a variable missing from `ours` is a KeyError."""
    out = []
    for name, b in theirs.items():
        diff = float(np.max(np.abs(np.asarray(ours[name], np.float64) - b), initial=0.0))
        scale = float(np.max(np.abs(b), initial=0.0))
        out.append((name, diff, diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)))
    return out


def run(cfg, opts=fixup_jax.Options(), steps=20, every=1, log=print):
    """Trains both sides `steps` steps on the same batches; returns {'project': [(ce, loss)],
    'jax': [(ce, loss)], 'weights': weight_differences, 'nonfinite': {side: first step or None}}.
    `log` gets a line every `every` steps (steps counted from 1)."""
    project = Project(cfg)
    arch = fixup_jax.Arch(widths=cfg.model.widths, blocks=cfg.model.blocks_per_stage[0],
                          num_classes=cfg.model.num_classes, strides=cfg.model.strides)
    initial = project.weights()
    if set(initial) != set(fixup_jax.layout(arch)):
        raise ValueError(f"the project's variables {sorted(set(initial) ^ set(fixup_jax.layout(arch)))} "
                         "are not Fixup's reference parameters")
    other = Independent(initial, arch, opts, cfg.learning_rate)
    losses = {"project": [], "jax": []}
    nonfinite = {"project": None, "jax": None}
    log(f"{'step':>5} {'project CE':>12} {'JAX CE':>12} {'|difference|':>13}")
    for t in range(1, steps + 1):
        losses["project"].append(project.step())
        losses["jax"].append(other.step(*project.batches.popleft()))
        for side in losses:
            if nonfinite[side] is None and not math.isfinite(losses[side][-1][1]):
                nonfinite[side] = t
                log(f"step {t}: the {side} loss is non-finite")
        if t % every == 0 or t == steps:
            a, b = losses["project"][-1][0], losses["jax"][-1][0]
            log(f"{t:>5} {a:>12.6f} {b:>12.6f} {abs(a - b):>13.3g}")
        if None not in nonfinite.values():
            log(f"both non-finite by step {t}: stopped")
            break
    return {**losses, "nonfinite": nonfinite,
            "weights": weight_differences(other.weights(), project.weights())}


def verdict(result, loss_tol=LOSS_TOL, weight_tol=WEIGHT_TOL):
    """(agree, one line): the losses finite and within `loss_tol` of each other (relative, at
    least 1) at every step, and every variable within `weight_tol` relative; else the first step
    the losses are apart."""
    pairs = list(zip(result["project"], result["jax"]))
    gaps = [abs(a[0] - b[0]) / max(1.0, abs(a[0])) for a, b in pairs]
    loss_gap = max(gaps, default=0.0)
    apart = next((t for t, gap in enumerate(gaps, 1) if not gap <= loss_tol), None)
    name, _, rel = max(result["weights"], key=lambda w: w[2])
    agree = apart is None and rel <= weight_tol
    return agree, (f"{'AGREE' if agree else 'DISAGREE'}: after {len(pairs)} steps the largest "
                   f"loss difference is {loss_gap:.2g} (tolerance {loss_tol:g}), the largest "
                   f"weight difference {rel:.2g} of {name}'s scale (tolerance {weight_tol:g})"
                   + ("" if apart is None else f"; the losses are apart (or non-finite) from "
                      f"step {apart}"))


def main(argv):
    from absl import flags
    f = flags.FLAGS
    if f.steps < 1 or f.batch_size < 1 or f.blocks_per_stage < 1 or f.learning_rate <= 0:
        sys.exit("error: --steps, --batch_size, --blocks_per_stage and --learning_rate must be "
                 "positive")
    if f.data_dir and not os.path.isdir(f.data_dir):
        sys.exit(f"error: --data_dir={f.data_dir} is not a directory; prepare one with "
                 "run/prepare_data.py --dataset=fashion_mnist")
    steps = LONG_STEPS if f.long else f.steps
    if not all(w.strip().isdigit() for w in f.widths):
        sys.exit(f"error: --widths={','.join(f.widths)} must be a comma list of positive "
                 "integers, e.g. 16,32,64")
    try:
        cfg = project_config([int(w) for w in f.widths], f.blocks_per_stage, f.batch_size,
                             f.learning_rate, f.relu_leakiness, f.seed, f.data_dir, steps)
    except ValueError as e:
        sys.exit(f"error: {e}")
    opts = fixup_jax.Options(leakiness=f.relu_leakiness, shortcut=f.shortcut, padding=f.padding,
                             decayed=f.decayed, momentum_form=f.momentum_form)
    print(f"Fixup, {cfg.dataset if f.data_dir else 'synthetic data'}, widths "
          f"{','.join(map(str, cfg.model.widths))}, {f.blocks_per_stage} blocks per stage, batch "
          f"{f.batch_size}, rate {f.learning_rate} (/10 at {BOUNDARIES}), ReLU slope "
          f"{f.relu_leakiness}, seed {f.seed}, {steps} steps; JAX side: {opts}", flush=True)
    from resnet_nobn.errors import UserError
    try:
        result = run(cfg, opts, steps, LONG_EVERY if f.long else 1,
                     lambda line: print(line, flush=True))
    except UserError as e:
        sys.exit(f"error: {e}")
    print(f"{'variable':<45} {'max |difference|':>17} {'relative':>10}")
    for name, diff, rel in result["weights"]:
        print(f"{name:<45} {diff:>17.3g} {rel:>10.3g}")
    for side, t in result["nonfinite"].items():
        print(f"{side}: {'finite to the end' if t is None else f'non-finite from step {t}'}")
    print(verdict(result)[1])


def define_flags():
    from absl import flags
    flags.DEFINE_string("data_dir", None, "Prepared Fashion-MNIST (run/prepare_data.py); "
                        "default: the project's synthetic data.")
    flags.DEFINE_integer("steps", 20, "SGD steps of both (without --long).")
    flags.DEFINE_float("learning_rate", 0.1, "The kernels' rate; the scalars' is a tenth.")
    flags.DEFINE_integer("blocks_per_stage", 3, "Residual blocks per stage.")
    flags.DEFINE_list("widths", ["16", "32", "64"], "Channels per stage; the stem is the first.")
    flags.DEFINE_integer("batch_size", 128, "Images per step.")
    flags.DEFINE_float("relu_leakiness", 0.0, "Slope of every activation below 0 (both sides).")
    flags.DEFINE_integer("seed", 3, "Seed of the project's initial weights and data order.")
    flags.DEFINE_bool("long", False, f"Run the full schedule: {LONG_STEPS} steps, the rate /10 "
                      f"at {BOUNDARIES[0]} and {BOUNDARIES[1]}, losses every {LONG_EVERY} steps.")
    flags.DEFINE_enum("shortcut", "pool_pad", fixup_jax.SHORTCUTS, "JAX side's shortcut: the "
                      "harness's Table 1 (pool_pad) or the reference's (reference).")
    flags.DEFINE_enum("padding", "same", fixup_jax.PADDINGS, "JAX side's stride-2 padding: "
                      "TensorFlow's SAME (the harness) or 1 on each side (the reference).")
    flags.DEFINE_enum("decayed", "kernels", fixup_jax.DECAYED, "JAX side's weight decay on conv "
                      "kernels (the harness) or on every parameter (the reference).")
    flags.DEFINE_enum("momentum_form", "keras", fixup_jax.MOMENTUM_FORMS, "JAX side's SGD: "
                      "Keras' v = m v - lr g (the harness) or torch's b = m b + g (the reference).")


if __name__ == "__main__":
    from resnet_nobn import cli
    define_flags()
    cli.start(main)  # --help exits 0; a bad flag is one line
