"""The run configuration: one frozen dataclass, made once from the flags by `run/*.py`.

The model, input pipeline and training loop read only this object, never absl FLAGS, so they
import and test without a command line.
"""
import dataclasses
import json

from resnet_nobn.model import ModelConfig


class UserError(Exception):
    """Bad input or a failed run the user can fix: reported as one line, exit status 2."""


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    model: ModelConfig = ModelConfig()
    # data
    dataset: str = "cifar10"
    data_dir: str | None = None          # tfds data_dir; None = tfds' default
    use_synthetic_data: bool = False
    # optimization (Section 4: SGD momentum 0.9, batch 128, wd 1e-4, lr 0.05 /10 at 30k and 50k)
    train_steps: int = 60_000
    batch_size: int = 128                # global, over all replicas and workers
    learning_rate: float = 0.05
    lr_boundaries: tuple = (30_000, 50_000)
    lr_decay_factor: float = 0.1         # multiplied in at each boundary / every lr_decay_every steps
    lr_decay_every: int = 0              # >0: exponential staircase (ImageNet: 0.94 every 2 epochs)
    warmup_steps: int = 0
    momentum: float = 0.9
    weight_decay: float = 1e-4           # on convolution kernels only, as wd * sum(||W||^2) / 2
    seed: int = 0
    # bookkeeping
    model_dir: str = "/tmp/resnet_nobn"
    eval_every: int = 5_000
    eval_steps: int = 0                  # 0 = the whole test split
    eval_only: bool = False
    checkpoint_every: int = 1_000
    log_every: int = 100
    strategy: str = "auto"
    # speed
    xla: bool = False
    mixed_precision: str = "float32"     # float32 | float16 | bfloat16

    def to_json(self):
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @staticmethod
    def from_json(d):
        d = dict(d)
        model = ModelConfig(**{k: tuple(v) if isinstance(v, list) else v
                               for k, v in d.pop("model").items()})
        return TrainConfig(model=model, **{k: tuple(v) if isinstance(v, list) else v
                                           for k, v in d.items()})


def config_diffs(old: dict, new: dict, fields=()):
    """`name: old there, new here` for each of `fields` and each model field where the JSON forms
    of two configurations (a saved config.json and `TrainConfig.to_json()`) differ."""
    old = json.loads(json.dumps(old))
    new = json.loads(json.dumps(new))
    diffs = [f"{k}: {old.get(k)} there, {new.get(k)} here" for k in fields if old.get(k) != new.get(k)]
    old_model = old.get("model") or {}
    return diffs + [f"{k}: {old_model.get(k)} there, {v} here"
                    for k, v in new["model"].items() if old_model.get(k) != v]


def learning_rate(step, cfg: TrainConfig):
    """The learning rate at `step`, a pure function of the step (works on Python ints and tensors).

    Linear warm-up over `warmup_steps` (0 in the paper), then either a piecewise-constant schedule
    (`lr * decay_factor ** #boundaries passed`: CIFAR, 0.05 / 10 at 30k and 50k) or, when
    `lr_decay_every > 0`, an exponential staircase (`lr * decay_factor ** floor(step / every)`:
    ImageNet, 0.1 * 0.94 every two epochs).
    """
    import tensorflow as tf
    step = tf.cast(step, tf.float32)
    if cfg.lr_decay_every > 0:
        decays = tf.floor(step / cfg.lr_decay_every)
    else:
        decays = tf.add_n([tf.cast(step >= b, tf.float32) for b in cfg.lr_boundaries] + [0.0 * step])
    lr = cfg.learning_rate * tf.pow(cfg.lr_decay_factor, decays)
    if cfg.warmup_steps > 0:
        lr = lr * tf.minimum(1.0, (step + 1.0) / cfg.warmup_steps)
    return lr
