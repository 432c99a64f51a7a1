"""The stability study's runs of the project's network under Keras' JAX backend, for a GPU
machine without TensorFlow (docs/stability.md, "Longer and wider, on a GPU").

    KERAS_BACKEND=jax python experiments/stability/jax_study.py --data=DIR --plan=PLAN.json --out=OUT [--shard=I/N]

What is the project's here, and what is not:
- the network, its initialisation and weight decay: `resnet_nobn.build_model` (model/network.py),
  the same layers as the command line's (the BN twin's GlobalBatchNorm is Keras' BatchNormalization
  on one device under JAX: docs/backends.md);
- the optimizer and its schedule: `resnet_nobn.recipes.optimizer` (Keras SGD, momentum 0.9,
  StepSchedule); the step's order as train/steps.py's: the cross-entropy plus `model.losses`, the
  global gradient clipped to `clip_norm` (tf.clip_by_global_norm's formula), then the scalars'
  gradients times `scalar_lr_factor` (Fixup's lr/10), then SGD;
- NOT the input pipeline: Fashion-MNIST's idx files (DIR) are read with numpy and augmented on the
  device as resnet_nobn/data/cifar.py does (28x28 zero-padded to 32x32, grey in 3 channels, zero
  padding `crop_padding` pixels a side, a random 32x32 crop, a random horizontal flip, then
  per-image standardisation with tf.image.per_image_standardization's formula, or the training
  split's mean and std), with JAX's random numbers: the same distribution, not the same batches.
  The random head and the initial weights are drawn by NumPy from the seed: those the TensorFlow
  trainer draws for it.
- `"net": "fixup_ref"` runs the independent JAX Fixup of experiments/stability/fixup_jax.py (its `Options`: the
  reference code's shortcut, padding, weight decay and momentum form) from the project's Fixup's
  initial weights.
- `"mixup": alpha` (not with fixup_ref; Zhang et al. 2018; Fixup's reference code's default, alpha 1): each batch mixed
  with itself in a random order, lam ~ Beta(alpha, alpha), the loss lam CE(y) + (1 - lam) CE(y').

PLAN.json is a list of runs, each {"name", "net": "paper"|"bn"|"fixup"|"fixup_ref", "blocks",
"lr", "steps", "seed"} and optionally "boundaries" (default: half and five sixths of the steps, as
the study's runs), "clip_norm", "standardize" ("per_image"|"dataset"), "crop_padding" (2),
"mixup" (0), "logit_gain" (false), "border" ("pad"|"resize": Fashion-MNIST's 28x28 zero-padded, or
resized, to 32x32), "options" (fixup_ref's). `--shard=I/N` runs every N-th run from the I-th.
OUT/results_I.json gets one record per finished run, rewritten whole (and atomically) after every
run: the loss, cross-entropy and gradient norm every 10 steps (means over the 10), the first
non-finite step, the test error and the per-image correctness on the 10,000 test images
(`correct_of`, for pairing). A rerun resumes: it keeps the records already in its shard's
results file, skips the runs of the plan recorded there by name (a run that went non-finite
included; delete its record to run it again), and says how many; a results file it cannot read
as a list of named records is refused, and left as it is.
"""
import argparse
import base64
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

LOG_EVERY = 10
SIZE = 32


def load(data):
    """{split: (images uint8 [N, 28, 28], labels int32)} from Fashion-MNIST's four idx files in
    `data`, read and checked by the project's reader (resnet_nobn/data/fashion_mnist.py)."""
    from resnet_nobn.data import fashion_mnist
    return {split: (images, labels.astype("int32")) for split in fashion_mnist.FILES
            for images, labels in [fashion_mnist.read_split(data, split)]}


def to_network(images, border):
    """uint8 [N, 28, 28] -> float32 [N, 32, 32] in pixel units: zero-padded 2 pixels a side
    (cifar.py `to_network`), or resized bilinearly ('resize', a switch of this bench only)."""
    import jax
    x = np.asarray(images, np.float32)
    if border == "pad":
        return np.pad(x, ((0, 0), (2, 2), (2, 2)))
    return np.asarray(jax.image.resize(x, (len(x), SIZE, SIZE), "bilinear"))


def standardizer(mode, train):
    """images [B, 32, 32] (pixel units) -> standardised [B, 32, 32, 3], as data/standardization.py."""
    import jax.numpy as jnp
    if mode == "dataset":  # one mean and population std over the training split (every channel alike)
        mean, std = float(train.mean(dtype=np.float64)), float(train.std(dtype=np.float64))

        def f(x):
            return jnp.repeat(((x - mean) / std)[..., None], 3, axis=-1)
        return f, {"mode": "dataset", "mean": mean, "std": std}

    def f(x):  # tf.image.per_image_standardization over the 3-channel image: 32*32*3 values
        m = x.mean(axis=(1, 2), keepdims=True)
        s = jnp.maximum(x.std(axis=(1, 2), keepdims=True), 1.0 / np.sqrt(SIZE * SIZE * 3))
        return jnp.repeat(((x - m) / s)[..., None], 3, axis=-1)
    return f, {"mode": "per_image"}


def augment(x, key, padding):
    """Zero-pad `padding` pixels a side, a random SIZE x SIZE crop and a random flip per image."""
    import jax
    import jax.numpy as jnp
    n = x.shape[0]
    k1, k2 = jax.random.split(key)
    x = jnp.pad(x, ((0, 0), (padding, padding), (padding, padding)))
    offsets = jax.random.randint(k1, (n, 2), 0, 2 * padding + 1)
    x = jax.vmap(lambda im, o: jax.lax.dynamic_slice(im, (o[0], o[1]), (SIZE, SIZE)))(x, offsets)
    flip = jax.random.bernoulli(k2, 0.5, (n,))
    return jnp.where(flip[:, None, None], x[:, :, ::-1], x)


def configs(run):
    """(ModelConfig, TrainConfig) of a run: the study's widths 16,32,64 and batch 128."""
    import dataclasses
    from resnet_nobn import recipes
    from resnet_nobn.config import ModelConfig
    net, steps = run["net"], run["steps"]
    model = dict(widths=(16, 32, 64), stem_width=16, blocks_per_stage=run["blocks"],
                 logit_gain=run.get("logit_gain", False))
    if net == "bn":
        model.update(norm="batch", init="he")
    elif net in ("fixup", "fixup_ref"):
        model.update(init="fixup", relu_leakiness=0.0)
    boundaries = tuple(run.get("boundaries", (steps // 2, round(steps * 5 / 6))))
    model = ModelConfig(**model)
    train = dataclasses.replace(
        recipes.cifar(), model=model, learning_rate=run["lr"], train_steps=steps, lr_boundaries=boundaries,
        batch_size=128, clip_norm=run.get("clip_norm", 0.0),
        scalar_lr_factor=0.1 if net in ("fixup", "fixup_ref") else 1.0)
    return model, train


class KerasRun:
    """One configuration's jitted step and evaluation, shared by its seeds (compiled once)."""

    def __init__(self, cfg, train):
        import jax
        import jax.numpy as jnp
        from resnet_nobn import recipes
        from resnet_nobn.model import network
        self.cfg, self.train = cfg, train
        self.model = network.build_model(cfg, seed=0, weight_decay=train.weight_decay)
        self.optimizer = recipes.optimizer(train)
        self.optimizer.build(self.model.trainable_variables)
        scalars = {id(v) for v in network.scalar_parameters(self.model)}
        factors = [train.scalar_lr_factor if id(v) in scalars else 1.0
                   for v in self.model.trainable_variables]
        model, optimizer, clip = self.model, self.optimizer, train.clip_norm

        def loss_fn(tv, ntv, x, y, y2, lam):
            logits, ntv, losses = model.stateless_call(tv, ntv, x, training=True,
                                                       return_losses=True)
            log_p = jax.nn.log_softmax(logits.astype("float32"))
            ce = -(lam * jnp.take_along_axis(log_p, y[:, None], 1)
                   + (1 - lam) * jnp.take_along_axis(log_p, y2[:, None], 1)).mean()
            return ce + sum(losses, jnp.float32(0)), (ce, ntv)

        def step(tv, ntv, ov, x, y, y2, lam):
            (loss, (ce, ntv)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
                tv, ntv, x, y, y2, lam)
            norm = jnp.sqrt(sum(jnp.sum(g * g) for g in grads))
            if clip > 0:  # tf.clip_by_global_norm: g * clip / max(norm, clip)
                grads = [g * clip / jnp.maximum(norm, clip) for g in grads]
            grads = [g * f for g, f in zip(grads, factors)]
            tv, ov = optimizer.stateless_apply(ov, grads, tv)
            return tv, ntv, ov, loss, ce, norm

        def predict(tv, ntv, x):
            logits, _ = model.stateless_call(tv, ntv, x, training=False)
            return jnp.argmax(logits, axis=-1)

        self.step, self.predict = step, jax.jit(predict)

    def start(self, seed):
        """The trainable, non-trainable and optimizer state of a fresh model of `seed`."""
        import keras
        from resnet_nobn.model import network
        keras.utils.set_random_seed(seed)
        model = network.build_model(self.cfg, seed=seed, weight_decay=self.train.weight_decay)
        self.initial = {v.path: np.asarray(v.value) for v in model.weights}
        return ([v.value for v in model.trainable_variables],
                [v.value for v in model.non_trainable_variables],
                [v.value for v in self.optimizer.variables])  # never assigned: still at the start


def train_one(run, data, cache):
    """Trains one run; its record and its per-image correctness (None if it went non-finite)."""
    import jax
    import jax.numpy as jnp
    from resnet_nobn.schedule import StepSchedule
    cfg, train = configs(run)
    border = run.get("border", "pad")
    key_data = (border, run.get("standardize", "per_image"))
    if key_data not in cache:
        x_train = to_network(data["train"][0], border)
        x_test = to_network(data["test"][0], border)
        standardize, record = standardizer(key_data[1], x_train)
        cache[key_data] = (jnp.asarray(x_train), jnp.asarray(data["train"][1]),
                           standardize(jnp.asarray(x_test)), standardize, record)
    x_train, y_train, x_test, standardize, record = cache[key_data]
    key_step = json.dumps({k: v for k, v in run.items() if k not in ("name", "seed")},
                          sort_keys=True)
    if key_step not in cache:
        cache[key_step] = (make_reference(cfg, train, run) if run["net"] == "fixup_ref"
                           else KerasRun(cfg, train))
    runner = cache[key_step]
    tv, ntv, ov = runner.start(run["seed"])
    if (key_data, key_step) not in cache:
        cache[key_data, key_step] = batch_step(runner, run, x_train, y_train, standardize)
    batch_of = cache[key_data, key_step]
    rates = np.asarray(StepSchedule.of(train)(np.arange(train.train_steps)))  # fixup_ref's rates

    rng = np.random.default_rng(run["seed"])
    n = len(data["train"][1])
    order = np.concatenate([rng.permutation(n) for _ in
                            range(-(-train.train_steps * 128 // n))])
    key = jax.random.PRNGKey(run["seed"])
    history, window, nonfinite, t0 = [], [], None, time.time()
    for s in range(train.train_steps):
        key, sub = jax.random.split(key)
        tv, ntv, ov, loss, ce, norm = batch_of(tv, ntv, ov, order[s * 128:(s + 1) * 128], sub,
                                               jnp.float32(rates[s]))
        window.append((loss, ce, norm))
        if (s + 1) % LOG_EVERY == 0:
            v = np.asarray(jax.device_get(window), np.float64).mean(axis=0)
            window = []
            history.append([s + 1, *[float(a) for a in v]])
            if not np.all(np.isfinite(v)):
                nonfinite = s + 1
                break
    result = {**run, "standardization": record, "history": history, "nonfinite_at": nonfinite,
              "measured": {"device": str(jax.devices()[0].device_kind), "jax": jax.__version__,
                           "keras": __import__("keras").__version__,
                           "date": time.strftime("%Y-%m-%d")},
              "seconds": round(time.time() - t0, 1), "steps_run": history[-1][0] if history else 0}
    if nonfinite is not None:
        return result, None
    predict = runner.predict
    pred = np.concatenate([np.asarray(predict(tv, ntv, x_test[i:i + 1000]))
                           for i in range(0, len(x_test), 1000)])
    correct = pred == np.asarray(data["test"][1])
    result["test_error"] = float(1 - correct.mean())
    result["correct"] = base64.b64encode(np.packbits(correct)).decode()  # `correct_of` reads it
    return result, correct


def correct_of(record, n=10_000):
    """A finished run's per-image correctness on the test split, bool [n], from its record."""
    return np.unpackbits(np.frombuffer(base64.b64decode(record["correct"]), np.uint8))[:n] == 1


def batch_step(runner, run, x_train, y_train, standardize):
    """One jitted training step on the batch of training-image indices `idx`: augmented,
    standardised, mixed up if asked, then `runner`'s step (compiled once per configuration)."""
    import jax
    import jax.numpy as jnp
    padding, alpha = run.get("crop_padding", 2), run.get("mixup", 0.0)

    @jax.jit
    def batch_of(tv, ntv, ov, idx, key, lr):
        k_aug, k_mix, k_perm = jax.random.split(key, 3)
        x = standardize(augment(x_train[idx], k_aug, padding))
        y = y_train[idx]
        if alpha > 0:
            lam = jax.random.beta(k_mix, alpha, alpha)
            perm = jax.random.permutation(k_perm, x.shape[0])
            x, y2 = lam * x + (1 - lam) * x[perm], y[perm]
        else:
            lam, y2 = jnp.float32(1.0), y
        if run["net"] == "fixup_ref":
            return runner.step(tv, ntv, ov, x, y, y2, lam, lr)
        return runner.step(tv, ntv, ov, x, y, y2, lam)
    return batch_of


def make_reference(cfg, train, run):
    """experiments/stability/fixup_jax.py's independent Fixup, started from the project's Fixup's weights."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import fixup_jax  # experiments/stability/, beside this file
    import jax.numpy as jnp
    if run.get("mixup"):
        raise ValueError(f"{run['name']}: fixup_ref's step (experiments/stability/fixup_jax.py) takes one label "
                         "per image; run it without mixup")
    arch = fixup_jax.Arch(widths=cfg.widths, blocks=run["blocks"])
    opts = fixup_jax.Options(leakiness=0.0, weight_decay=train.weight_decay,
                             scalar_lr_factor=train.scalar_lr_factor, **run.get("options", {}))
    inner = fixup_jax.make_step(arch, opts)
    keras_side = KerasRun(cfg, train)

    class Reference:
        def start(self, seed):
            keras_side.start(seed)
            params, velocity = fixup_jax.start(keras_side.initial, arch)
            return params, velocity, None

        @staticmethod
        def step(params, velocity, _, x, y, y2, lam, lr):
            params, velocity, ce, loss = inner(params, velocity, x, y, lr)
            return params, velocity, None, loss, ce, jnp.float32(0)

        @staticmethod
        def predict(params, velocity, x):
            return jnp.argmax(fixup_jax.logits(params, x, arch, opts), axis=-1)

    return Reference()


def resume(path, runs):
    """(the records already in the results file `path`, the runs of `runs` not among them by
    name); ([], runs) where there is no such file.

    Raises ValueError, in one line naming the file, where it exists but cannot be read as a JSON
    list of records each with a name: the caller must not write over it."""
    if not os.path.exists(path):
        return [], list(runs)
    try:
        with open(path) as f:
            records = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot be read as results ({type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''}); it is left as it is: move "
                         "it away or repair it") from None
    if not (isinstance(records, list) and all(isinstance(r, dict) and isinstance(r.get("name"), str)
                                              for r in records)):
        raise ValueError(f"{path}: not a list of named run records; it is left as it is: move it "
                         "away or repair it")
    done = {r["name"] for r in records}
    return records, [run for run in runs if run["name"] not in done]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="folder holding Fashion-MNIST's idx files")
    parser.add_argument("--plan", required=True, help="JSON list of runs (this docstring)")
    parser.add_argument("--out", required=True, help="folder for results_I.json")
    parser.add_argument("--shard", default="0/1", help="I/N: every N-th run from the I-th")
    parser.add_argument("--deadline_s", type=float, default=0,
                        help="start no run after this many seconds (0: no limit)")
    args = parser.parse_args()
    begun = time.time()
    i, n = (int(v) for v in args.shard.split("/"))
    with open(args.plan) as f:
        runs = json.load(f)[i::n]
    path = os.path.join(args.out, f"results_{i}.json")
    try:
        records, todo = resume(path, runs)
    except ValueError as e:
        raise SystemExit(f"error: {e}")
    if records:
        print(f"[{i}/{n}] {path}: keeps its {len(records)} records, skips "
              f"{len(runs) - len(todo)} runs of the plan already among them", flush=True)
    data, cache = load(args.data) if todo else None, {}
    os.makedirs(args.out, exist_ok=True)
    for run in todo:
        if args.deadline_s and time.time() - begun > args.deadline_s:
            print(f"[{i}/{n}] {run['name']}: not started (deadline)", flush=True)
            continue
        record, _ = train_one(run, data, cache)
        records.append(record)
        print(f"[{i}/{n}] {run['name']}: error {record.get('test_error')} non-finite at "
              f"{record['nonfinite_at']} ({record['seconds']} s)", flush=True)
        with open(path + ".tmp", "w") as f:  # rewritten whole after every run
            json.dump(records, f)
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
