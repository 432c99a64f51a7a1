"""The run configuration: frozen dataclasses, made once from the flags by `run/*.py`, and the facts
they are checked against (datasets, choices, the paper's recipes).

The model, input pipeline and training loop read only these objects, never absl FLAGS, so they
import and test without a command line. This module imports no TensorFlow, so the command line is
parsed and checked before TensorFlow is loaded.
"""
import dataclasses
import json
import math


class UserError(Exception):
    """Bad input or a failed run the user can fix: reported as one line, exit status 2."""


STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker")


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    name: str
    num_classes: int
    image_size: int
    num_train: int
    num_eval: int


DATASETS = {d.name: d for d in (
    DatasetInfo("cifar10", 10, 32, 50_000, 10_000),
    DatasetInfo("cifar100", 100, 32, 50_000, 10_000),
    DatasetInfo("imagenet2012", num_classes=1000, image_size=224, num_train=1_281_167,
                num_eval=50_000))}


NORMS = ("none", "batch")
INITS = ("identity", "standard", "he", "fixup", "skipinit")
HEADS = ("random", "trained")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Architecture. The defaults are Table 1 for CIFAR-10."""
    num_classes: int = 10
    image_size: int = 32
    widths: tuple = (64, 128, 256)
    blocks_per_stage: tuple = (9, 9, 9)
    strides: tuple = (1, 2, 2)
    stem_width: int = 16
    stem_kernel: int = 3
    stem_stride: int = 1
    kernel_size: int = 3
    norm: str = "none"
    init: str = "identity"
    relu_leakiness: float = 0.1
    head: str = "random"
    head_seed: int = 0

    def __post_init__(self):
        if not (len(self.widths) == len(self.blocks_per_stage) == len(self.strides)):
            raise ValueError(
                f"widths {self.widths}, blocks_per_stage {self.blocks_per_stage} and strides "
                f"{self.strides} must have one entry per stage")
        if self.norm not in NORMS or self.init not in INITS or self.head not in HEADS:
            raise ValueError(f"norm/init/head must be in {NORMS}/{INITS}/{HEADS}")
        if self.norm == "batch" and self.init in ("fixup", "skipinit"):
            raise ValueError(f"init={self.init} is a normalization-free method: use it with norm=none")
        if not 0.0 <= self.relu_leakiness < 1.0:
            raise ValueError(f"relu_leakiness must be in [0, 1); got {self.relu_leakiness}")
        if min(self.widths) < 1 or min(self.blocks_per_stage) < 1:
            raise ValueError("widths and blocks_per_stage must be positive")
        if list((self.stem_width,) + tuple(self.widths)) != sorted((self.stem_width,) + tuple(self.widths)):
            raise ValueError("the zero-padding shortcut needs non-decreasing widths, the first "
                             f"at least stem_width={self.stem_width}; got {self.widths}")
        size = math.ceil(self.image_size / self.stem_stride)  # 'same' convolutions
        for i, stride in enumerate(self.strides):
            if not 1 <= stride <= size:  # the shortcut's VALID average pool needs stride <= size
                raise ValueError(f"stride {stride} of stage {i + 1} does not fit its {size}x{size} "
                                 "feature map; lower --strides or --stem_stride")
            size = math.ceil(size / stride)


def resolve_init(init, norm):
    """The `--init=auto` rule: the paper's identity init without BN, He init with BN (the baseline)."""
    if init == "auto":
        return "he" if norm == "batch" else "identity"
    return init


# The paper's ImageNet recipe (Section 4.2) as flag defaults of run/imagenet_train.py; the model is
# the ResNet-34 variant of resnet_nobn/imagenet.py. "0.94 every two epochs" at global batch 256:
# one epoch is 1,281,167 / 256 = 5,004.56 steps, so the rate is multiplied by 0.94 every 10,009.
IMAGENET_MODEL = dict(widths=(84, 168, 336, 672), blocks_per_stage=(3, 4, 6, 3),
                      strides=(2, 2, 2, 2), stem_width=84, stem_kernel=7, stem_stride=2)
LR_DECAY_EVERY = int(2 * DATASETS["imagenet2012"].num_train / 256)   # 10,009
IMAGENET_RECIPE = dict(dataset="imagenet2012", batch_size=256, learning_rate=0.1,
                       lr_boundaries=(), lr_decay_factor=0.94, lr_decay_every=LR_DECAY_EVERY,
                       train_steps=700_000, weight_decay=1e-4, eval_every=10_000,
                       checkpoint_every=1_000, log_every=100)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    model: ModelConfig = ModelConfig()
    # data
    dataset: str = "cifar10"
    data_dir: str | None = None          # tfds data_dir; None = tfds' default
    use_synthetic_data: bool = False
    crop_padding: int = 2                # pixels a side before the random crop (the fork's: 2)
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
    clip_norm: float = 0.0               # >0: clip the gradient's global norm to this (paper: none)
    seed: int = 0
    # bookkeeping
    model_dir: str = "/tmp/resnet_nobn"
    eval_every: int = 5_000
    eval_steps: int = 0                  # 0 = the whole test split
    eval_only: bool = False
    checkpoint_every: int = 1_000
    log_every: int = 100
    steps_per_loop: int = 0              # steps per compiled loop (one host read); 0 = log_every
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


# What trained where the paper's recipe diverged, measured on real images (docs/stability.md:
# Fashion-MNIST as a CIFAR-10 directory, widths 16,32,64, batch 32, 500 steps, at 1 and 9 blocks per
# stage). (kind, deep) -> the largest stable learning rate without clipping, and, where measured,
# a gradient-norm clip with the largest rate that trained with it. kind: the init without BN
# (standard and he were not measured: the paper's identity row is used), 'batch' with BN.
STABLE_SETTINGS = {
    ("identity", False): dict(learning_rate=0.02, clip_norm=1.0, clipped_learning_rate=0.1),
    ("identity", True): dict(learning_rate=0.02, clip_norm=1.0, clipped_learning_rate=0.1),
    ("fixup", False): dict(learning_rate=0.02),
    ("fixup", True): dict(learning_rate=0.02),
    ("skipinit", False): dict(learning_rate=0.05),
    ("skipinit", True): dict(learning_rate=0.05),
    ("batch", False): dict(learning_rate=0.1),
    ("batch", True): dict(learning_rate=0.1),
}


def retry_advice(cfg: "TrainConfig") -> str:
    """The flags a diverged run of `cfg` should be re-run with, as `--flag=value` tokens.

    From the measured STABLE_SETTINGS of its kind and depth: first the gradient clip that kept the
    paper's rate (and the rate, if above the largest measured with it); if the run already clipped,
    half its clip and a rate no higher than the largest stable one nor half the one that diverged.
    """
    kind = "batch" if cfg.model.norm == "batch" else (
        cfg.model.init if cfg.model.init in ("fixup", "skipinit") else "identity")
    measured = STABLE_SETTINGS[(kind, max(cfg.model.blocks_per_stage) > 3)]
    flags = {}
    if cfg.clip_norm == 0 and measured.get("clip_norm"):
        flags["clip_norm"] = measured["clip_norm"]
        if cfg.learning_rate > measured["clipped_learning_rate"]:
            flags["learning_rate"] = measured["clipped_learning_rate"]
    else:
        flags["learning_rate"] = min(measured["learning_rate"], cfg.learning_rate / 2)
        if cfg.clip_norm:
            flags["clip_norm"] = cfg.clip_norm / 2
    return " ".join(f"--{k}={float(f'{v:.3g}')}" for k, v in flags.items())


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
