"""The run configuration: frozen dataclasses, the facts they are checked against, and the checks.

Each field carries its help, unit and bounds (`dataclasses.field(metadata=...)`): cli.py makes
one flag of each option, defaulting to a recipe's value (recipes.py; the dataclass defaults are
the paper's CIFAR recipe), and the class's docstring lists every field with the same text
(`document`); the fields that are no flag carry their help and bounds (`bounded`). Every value
is checked when a config is made (`replace` too), its kind too (resnet_nobn/options.py), then
the checks across fields here; a failed one is a ConfigError naming the field as Python does
(`ModelConfig.stem_width`), or as the command line does (its `flag_words`). A list is taken as a
tuple, one int as one entry per stage where the command line takes one number, so a config is
frozen and hashable. The model, input pipeline and training loop read only these objects, never
absl FLAGS. A saved config.json of any version is read back `as_today`. No TensorFlow here, so
the command line is checked before TensorFlow loads.
"""
import dataclasses
import json
import math

from resnet_nobn.data.datasets import DATASETS, check_classes, of_recipe
from resnet_nobn.options import (ConfigError, bounded, check, coerce, described,  # noqa: F401
                                 document, is_integer, json_typed, option, options, split_fields)
STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker")
NORMS = ("none", "batch")
INITS = ("identity", "standard", "he", "fixup", "skipinit")
HEADS = ("random", "trained")
PRECISIONS = ("float32", "float16", "bfloat16")
SEED_MAX = 2**32 - 1  # numpy's seeds (the head's projection; --deterministic seeds numpy too)


def positive_ints(example, one_for_all=False):
    """The check of a per-stage comma list: positive integers (no bools), `example` in its
    message, which also says one number may stand for every stage where it can."""
    return (lambda v: len(v) > 0 and all(is_integer(x) and x > 0 for x in v),
            "must be a comma list of positive integers" + " (or one for every stage)" * one_for_all
            + f", e.g. {example}")


def increasing_steps(values):
    return all(is_integer(v) and v > 0 for v in values) and list(values) == sorted(set(values))


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The network's architecture, frozen; the defaults are Table 1's network for CIFAR-10.

    Each value is checked when made (a `ConfigError` naming the field: `ModelConfig.stem_width=0
    must be at least 1`); a list is taken as a tuple, one int as one entry per stage where the
    command line takes one number. Each field is a flag of run/cifar_train.py too, with this text.

    Example:

    ```python
    import resnet_nobn
    config = resnet_nobn.ModelConfig(widths=(8, 16, 32), blocks_per_stage=1, stem_width=8)
    model = resnet_nobn.build_model(config, seed=0)
    ```
    """
    # From the dataset. Two classes at least: with one, the softmax loss is 0 whatever the weights.
    num_classes: int = bounded(10, "Classes of the dataset: the head's outputs (the command line "
                               "takes them from --dataset).", lower=2)
    image_size: int = bounded(32, "Height and width of the input images, in pixels (the command "
                              "line takes it from --dataset); every stride must divide the "
                              "feature map it takes.", lower=1)  # _checks
    widths: tuple = option((64, 128, 256), "Channels of each stage, comma list.",
                           "channels", check=positive_ints("64,128,256"))
    blocks_per_stage: tuple = option((9, 9, 9), "Residual blocks per stage: one number for all "
                                     "stages, or a comma list with one entry per stage.", "blocks",
                                     check=positive_ints("9,9,9", one_for_all=True),
                                     one_for_all=True)
    strides: tuple = option((1, 2, 2), "Stride of the first block of each stage, comma list.",
                            check=positive_ints("1,2,2"))
    stem_width: int = option(16, "Output channels of the first, standard conv.", "channels",
                             lower=1)
    stem_kernel: int = option(3, "Kernel size of the first conv.", "pixels", lower=1)
    stem_stride: int = option(1, "Stride of the first conv.", lower=1)
    kernel_size: int = bounded(3, "Kernel size of the residual blocks' convolutions ('same' "
                               "padding: even sizes work too).", lower=1)
    norm: str = option("none", "none: the paper's normalization-free net; batch: the BN-ResNet "
                       "baseline of the same shape (pre-activation blocks, He init).", choices=NORMS)
    init: str = option("identity", "Residual conv init N(0, sigma^2): identity sigma=1/(k^2 c) "
                       "(the paper's), standard 1/(k sqrt c), he sqrt(2/(k^2 c)); auto = identity "
                       "with --norm=none, he with --norm=batch. Normalization-free baselines "
                       "(--norm=none): fixup (Zhang et al. 2019) and skipinit (De & Smith 2020).",
                       choices=INITS, flag_choices=("auto",) + INITS, flag_default="auto")
    relu_leakiness: float = option(0.1, "Slope for x < 0 of every activation (leaky ReLU), in the "
                                   "blocks and after the last block; 0.1 is the TensorFlow ResNet "
                                   "code the paper forked, 0 a plain ReLU.", lower=0.0, upper=0.999)
    head: str = option("auto", "random: fixed random projection, never trained (the paper's); "
                       "trained: a dense layer with a bias (zero-initialised with --init=fixup); "
                       "auto = trained with --init=fixup (Fixup's), else random.", choices=HEADS,
                       flag_choices=("auto",) + HEADS, flag_default="auto")
    head_seed: int | None = option(None, "Seed of the random-projection head; default: --seed, "
                                   "so each seed of a study draws its own projection (config.json "
                                   "records the seed used).",
                                   check=(lambda v: 0 <= v <= SEED_MAX,
                                          f"must be in [0, {SEED_MAX}] (numpy's seeds)"))
    logit_gain: bool = option(False, "One trainable scalar g (init 1, not weight-decayed) times "
                              "the pooled features before the head: BN's last scale, without BN.")
    # The BN twin as in the fork's resnet_model.py; config.json records them (`ABSENT_WITH_BN`).
    bn_epsilon: float = bounded(1e-3, "The BN twin's (--norm=batch) epsilon, added to the "
                                "variance BN divides by.", check=(lambda v: v > 0, "must be "
                                "positive, e.g. 0.001 (BN divides by sqrt(variance + epsilon))"))
    bn_momentum: float = bounded(0.9, "The BN twin's decay of its moving averages: m <- momentum "
                                 "m + (1 - momentum) batch.", check=(lambda v: 0 <= v < 1, "must "
                                 "be in [0, 1), e.g. 0.9 (1 would never update the averages)"))
    activate_before_residual: bool = bounded(True, "The BN twin's first block: its BN and "
                                             "activation come before the shortcut splits off.")
    fixup_reference: bool = bounded(True, "With --init=fixup: Fixup's network as its reference "
                                    "code builds it (model/network.py); False: Fixup's blocks "
                                    "alone, in older runs' config.json (`ABSENT_WITH_FIXUP`).")

    def __post_init__(self):
        if self.head == "auto":  # frozen dataclass: the `--head=auto` rule
            object.__setattr__(self, "head", _auto_head(self.init))
        coerce(self, lambda c: len(c.widths))
        _checked(self._checks, ModelConfig)

    def replace(self, **fields):
        """The config with `fields` replaced (`dataclasses.replace`), checked as a new one is
        (a `ConfigError` naming a field it refuses, a `TypeError` naming the nearest field for a
        keyword that is none). `head`, if `"auto"` gave it, follows a new `init`.

        Args:
            **fields: the ModelConfig fields to change, by name (`help(ModelConfig)`).

        Returns:
            A new `ModelConfig`.

        Example:

        ```python
        import resnet_nobn
        config = resnet_nobn.ModelConfig(widths=(8, 16, 32), stem_width=8)
        assert config.replace(blocks_per_stage=1).blocks_per_stage == (1, 1, 1)
        ```
        """
        train, _ = split_fields("ModelConfig.replace", fields, (TrainConfig, ModelConfig),
                                "help(resnet_nobn.ModelConfig)")
        if train:  # the nearest model field would mislead
            raise TypeError(f"ModelConfig.replace got {', '.join(train)}, of TrainConfig: give "
                            "it to TrainConfig.replace or a recipe, which take both's fields")
        if "init" in fields and "head" not in fields and self.head == _auto_head(self.init):
            fields = {**fields, "head": "auto"}
        return dataclasses.replace(self, **fields)

    def _checks(self):
        check(self)
        if not (len(self.widths) == len(self.blocks_per_stage) == len(self.strides)):
            raise ValueError("--widths, --strides and --blocks_per_stage need one entry per stage "
                             "(--blocks_per_stage may be a single number)")
        if list(self.widths) != sorted(self.widths) or self.stem_width > self.widths[0]:
            raise ValueError("--widths must be non-decreasing and start at least at --stem_width "
                             "(the shortcut zero-pads channels); e.g. --stem_width=8 --widths=8,16,32")
        if self.norm == "batch" and self.init in ("fixup", "skipinit"):
            raise ValueError("--init=fixup and --init=skipinit are normalization-free methods: use "
                             "them with --norm=none")
        n = self.image_size
        size = math.ceil(n / self.stem_stride)  # 'same' convolutions
        for i, stride in enumerate(self.strides):
            # the shortcut's VALID average pool gives floor(size / stride), the conv ceil(...)
            if size % stride:
                raise ValueError(f"stride {stride} of stage {i + 1} does not fit its {size}x{size} "
                                 f"feature map (of {n}x{n} images): a stride must divide the map "
                                 "it takes, or the shortcut's average pool and the conv differ "
                                 "in size; change --strides or --stem_stride, or the image size")
            size //= stride


def _auto_head(init):
    """The `--head=auto` rule: Fixup's trained classifier with `--init=fixup`, else the paper's
    random projection."""
    return "trained" if init == "fixup" else "random"


def _auto_scalar_lr_factor(init):
    """The default of `--scalar_lr_factor`: Fixup's reference code's lr/10 with `--init=fixup`."""
    return 0.1 if init == "fixup" else 1.0


def _checked(checks, *owners):
    """Runs `checks`; a ValueError they raise (in the command line's words) as a ConfigError."""
    try:
        checks()
    except ConfigError:
        raise
    except ValueError as e:
        raise ConfigError(str(e), owners) from None


def resolve_init(init, norm):
    """The `--init=auto` rule: the paper's identity init without BN, He init with BN (the baseline)."""
    return ("he" if norm == "batch" else "identity") if init == "auto" else init


def resolve_head_seed(head_seed, seed):
    """The random head's seed: --head_seed if given, else --seed (a study's spread includes it)."""
    return seed if head_seed is None else head_seed


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """One training run, frozen; the defaults are the paper's CIFAR recipe (`recipes.cifar()`).

    Each value is checked when made (a `ConfigError` naming the field: `TrainConfig.learning_rate
    must be positive`). `train(config)` runs it, `recipes.optimizer(config)` is its optimizer for
    `model.compile`. Each field is a flag of run/cifar_train.py too, with this text.

    Example:

    ```python
    import resnet_nobn
    model = resnet_nobn.ModelConfig(widths=(8, 16, 32), blocks_per_stage=1, stem_width=8)
    config = resnet_nobn.TrainConfig(model=model, train_steps=10, lr_boundaries=(5,))
    ```
    """
    model: ModelConfig = described(ModelConfig(), "The network (its fields are flags too).")
    # data
    dataset: str = option("cifar10", "Dataset, read through tensorflow-datasets.",
                          choices=tuple(DATASETS))
    data_dir: str | None = option(None, "tfds data directory holding the prepared dataset (default: "
                           "tfds' own, TFDS_DATA_DIR or ~/tensorflow_datasets; run/prepare_data.py "
                           "prepares one).", help_for=(
                               ("image_folder", "image_folder: ROOT of train/LABEL/* and "
                                "test/LABEL/*."),))
    class_names: tuple[str, ...] = described((), "The class names of --dataset=image_folder, "
                                             "sorted, one per class of the model (its train/ "
                                             "folders: the command line reads them from "
                                             "--data_dir); empty for every other dataset.")
    use_synthetic_data: bool = option(False, "Random images of the right shape, no I/O: for smoke "
                                      "runs and speed measurements.")
    crop_padding: int = option(2, "Training augmentation: zero pixels added on each side "
                               "before the random crop back to 32x32 (the forked code's: 2, i.e. "
                               "36x36).", "pixels", lower=0, only_for=of_recipe("cifar"))
    standardize: str = option("per_image", "Last step of every image's preprocessing: per_image "
                              "(the forked code's), or dataset: (x - mean) / std, one mean and std "
                              "per channel over the training split (results.json records them).",
                              choices=("per_image", "dataset"), only_for=of_recipe("cifar"))
    mixup: float = option(0.0, "Mixup (Zhang et al. 2018) with Beta(alpha, alpha): each training "
                          "image mixed with a random other one, lam x + (1 - lam) x', its label "
                          "likewise, one lam per global batch; Fixup's reference code trains with "
                          "alpha 1. 0: none (the paper's).", "alpha", lower=0,
                          only_for=of_recipe("cifar"))
    # optimization
    train_steps: int = option(60_000, "Training steps (global batches).", "steps", lower=1)
    batch_size: int = option(128, "Global batch size (images per step over all replicas and "
                             "workers); must be a multiple of the number of replicas.", "images",
                             lower=1)
    learning_rate: float = option(0.05, "Initial learning rate.",
                                  check=(lambda v: v > 0, "must be positive"))
    lr_boundaries: tuple = option((30_000, 50_000), "Steps at which the learning rate is "
                                  "multiplied by --lr_decay_factor, increasing comma list (may be "
                                  "empty).", "steps", check=(increasing_steps, "must be positive, "
                                  "strictly increasing steps, e.g. 30000,50000"))
    lr_decay_factor: float = option(0.1, "Factor applied at each boundary, or every "
                                    "--lr_decay_every steps.", check=(lambda v: 0 < v <= 1,
                                    "must be in (0, 1], e.g. 0.1 (0 would stop the training at "
                                    "the first decay)"))
    lr_decay_every: int = option(0, "If > 0: multiply the rate by --lr_decay_factor every this "
                                 "many steps (exponential staircase), instead of at "
                                 "--lr_boundaries.", "steps", lower=0)
    warmup_steps: int = option(0, "Linear learning-rate warm-up (the paper: 0).", "steps", lower=0)
    momentum: float = option(0.9, "SGD momentum.", lower=0.0, upper=1.0)
    weight_decay: float = option(1e-4, "L2 weight decay on conv kernels only: adds "
                                 "wd * sum ||W||^2 / 2 to the loss.", lower=0.0)
    clip_norm: float = option(0.0, "If > 0: clip the gradient to this global L2 norm before the "
                              "update (the paper: no clipping).", lower=0.0)
    agc: float = option(0.0, "If > 0: adaptive gradient clipping (NFNets, Brock et al. 2021): "
                        "the gradient of each output unit of every conv kernel is scaled down to "
                        "norm at most this times max(||W_unit||, 1e-3), norms over the kernel's "
                        "spatial and input axes, on the gradient summed over replicas. 0: off "
                        "(the paper).", lower=0.0)
    scalar_lr_factor: float | None = option(None, "Learning-rate factor of the trainable scalars "
                                            "(Fixup's, with its classifier's bias; SkipInit's "
                                            "alpha); default: 0.1 with --init=fixup (its "
                                            "reference code's lr/10), else 1.", flag_default=None,
                                            check=(lambda v: v > 0, "must be positive"))
    max_branch_norm: float = option(0.0, "If > 0: after every update, keep each residual block's "
                                    "Lipschitz bound |scale| ||C2||_2 ||C1||_2 (spectral norms of "
                                    "its convolutions, bounded above from the kernels' DFT) at "
                                    "most this, by "
                                    "rescaling both kernels and their momentum (Section 2's regime "
                                    "||A_j|| < 1; docs/stability.md). 0: off (the paper).",
                                    lower=0.0)
    seed: int = option(0, "Seed of the weight init and of the data order/augmentation.",
                       lower=0, upper=SEED_MAX)
    deterministic: bool = option(False, "TensorFlow's op determinism and the Keras seed (--seed): "
                                 "a run and its resume give the same weights on a GPU too, at "
                                 "some cost in speed.")
    # bookkeeping
    model_dir: str = option("/tmp/resnet_nobn", "Directory for checkpoints, TensorBoard "
                            "summaries, config.json and results.json; re-running resumes from it.")
    eval_every: int = option(5_000, "Evaluate every this many steps (and at the end).", "steps",
                             lower=1)
    eval_steps: int = option(0, "Evaluate on at most this many test batches (0: the whole test "
                             "split).", "global batches", lower=0)
    eval_only: bool = option(False, "Evaluate the latest checkpoint in --model_dir (given the "
                             "run's flags) and exit; adds the evaluation to results.json.")
    checkpoint_every: int = option(1_000, "Save a checkpoint every this many steps (and at the "
                                   "end); a crash loses at most this much work.", "steps", lower=1)
    log_every: int = option(100, "Print progress and write training summaries every this many "
                            "steps.", "steps", lower=1)
    steps_per_loop: int = option(0, "Training steps run on the device per host round-trip (one "
                                 "compiled tf.range loop, one reduction of the metrics); 0 = "
                                 "--log_every. A loop also ends at every log, checkpoint and "
                                 "evaluation step.", "steps", lower=0)
    strategy: str = option("auto", "tf.distribute strategy; auto: multi_worker if TF_CONFIG is "
                           "set, mirrored with several GPUs, else one_device.", choices=STRATEGIES)
    profile_steps: tuple = option((), "START,END: trace the steps after START up to END with "
                                  "TensorFlow's profiler into --model_dir/train (TensorBoard's "
                                  "Profile tab); empty: off.", "steps", check=(
                                      lambda v: len(v) in (0, 2) and increasing_steps(v),
                                      "must be START,END with 0 < START < END, e.g. 100,110"))
    # speed
    xla: bool = option(False, "Compile with XLA: the whole train step on one device, the forward "
                       "and backward pass with several replicas.")
    mixed_precision: str = option("float32", "Compute dtype of the network (variables, head and "
                                  "loss stay float32; float16 uses loss scaling).",
                                  choices=PRECISIONS)

    def __post_init__(self):
        if not isinstance(self.model, ModelConfig):
            raise ConfigError(f"--model must be a ModelConfig, not {type(self.model).__name__}",
                              (TrainConfig,))
        if self.scalar_lr_factor is None:  # the init's own: Fixup's reference code's lr/10
            object.__setattr__(self, "scalar_lr_factor", _auto_scalar_lr_factor(self.model.init))
        coerce(self)
        _checked(self._checks, TrainConfig, ModelConfig)

    def _checks(self):
        check(self)
        check_classes(self.dataset, self.class_names, self.model.num_classes)
        if self.standardize == "dataset" and (self.use_synthetic_data or self.dataset not in
                                              of_recipe("cifar")):  # no split to compute it over
            raise ValueError("--standardize=dataset needs a training split (CIFAR's recipe), and "
                             "--use_synthetic_data has none: use --standardize=per_image")
        if (self.crop_padding >= self.model.image_size and not self.use_synthetic_data
                and self.dataset in of_recipe("cifar")):  # the padded image grows as its square
            raise ValueError(f"--crop_padding={self.crop_padding} must be below the image size "
                             f"({self.model.image_size}): with more, a random crop can hold no "
                             "pixel of the image; e.g. --crop_padding=2 (the fork's) or 4")
        if self.profile_steps and self.profile_steps[0] >= self.train_steps:
            raise ValueError(f"--profile_steps={','.join(map(str, self.profile_steps))} starts "
                             f"at or after the run's last step (--train_steps="
                             f"{self.train_steps}): nothing would be traced; give a START "
                             "below it")
        if self.mixup > 0 and self.use_synthetic_data:
            raise ValueError("--mixup mixes the training split's images, and --use_synthetic_data "
                             "has none: use --mixup=0")
        if self.max_branch_norm > 0 and self.model.norm == "batch":
            raise ValueError("--max_branch_norm bounds the normalization-free blocks; with "
                             "--norm=batch the branch's BN makes ||C2|| ||C1|| no bound: use "
                             "--norm=none")
        if self.scalar_lr_factor != 1 and self.model.init not in ("fixup", "skipinit"):
            raise ValueError(f"--scalar_lr_factor={self.scalar_lr_factor}: --init="
                             f"{self.model.init} has no trainable scalars; use it with "
                             "--init=fixup or --init=skipinit, or leave it at 1")

    def replace(self, **fields):
        """The config with `fields` replaced (`dataclasses.replace`), checked as a new one is
        (a `ConfigError` naming a field it refuses, a `TypeError` naming the nearest field for a
        keyword that is none). `scalar_lr_factor`, if None gave it, follows a new `init`.

        Args:
            **fields: TrainConfig fields, and ModelConfig fields for its `model` (applied to
                `model=` if given too), by name (`help(TrainConfig)`, `help(ModelConfig)`).

        Returns:
            A new `TrainConfig`.

        Example:

        ```python
        import resnet_nobn
        config = resnet_nobn.recipes.cifar()
        faster = config.replace(learning_rate=0.1, widths=(16, 32, 64), blocks_per_stage=1)
        assert (faster.learning_rate, faster.model.widths) == (0.1, (16, 32, 64))
        ```
        """
        train, model = split_fields("TrainConfig.replace", fields, (TrainConfig, ModelConfig))
        if model:  # on the model given, or this one's
            train["model"] = train.get("model", self.model).replace(**model)
        if (train.get("model", self.model).init != self.model.init and "scalar_lr_factor" not in train
                and self.scalar_lr_factor == _auto_scalar_lr_factor(self.model.init)):
            train["scalar_lr_factor"] = None  # derived again, from the new init
        return dataclasses.replace(self, **train)

    def to_json(self):
        """The configuration as JSON, as config.json records it.

        Returns:
            A dict of JSON values, the model's under `"model"` (its `head_seed` as used).

        Example:

        ```python
        import resnet_nobn
        assert resnet_nobn.recipes.cifar().to_json()["model"]["widths"] == [64, 128, 256]
        ```
        """
        d = json.loads(json.dumps(dataclasses.asdict(self)))
        d["model"]["head_seed"] = resolve_head_seed(self.model.head_seed, self.seed)
        return d

    @staticmethod
    def from_json(d):
        """The TrainConfig of a config.json object of any version (`as_today`); ValueError or
        TypeError for one that is not a run's configuration.

        Args:
            d: dict. A config.json object (`json.load` of one, or `to_json()`).

        Returns:
            The `TrainConfig` it records.

        Example:

        ```python
        import resnet_nobn
        config = resnet_nobn.recipes.cifar(learning_rate=0.02)
        assert resnet_nobn.TrainConfig.from_json(config.to_json()).learning_rate == 0.02
        ```
        """
        d = as_today(d)
        model = ModelConfig(**d.pop("model"))
        return TrainConfig(model=model, **d)


document(ModelConfig, (ModelConfig, TrainConfig))
document(TrainConfig, (TrainConfig, ModelConfig))


# TrainConfig's fields by what a change of one means for a run that has checkpoints: one list for
# the trainer (a resume or --eval_only in the same model_dir: resnet_nobn/training/rundir.py) and for
# run/ablate.py (which reuses a finished run only if its scientific fields match: study.py).
# What a run computes: never changed on resume, except to a diverged run's `retry with:` advice.
SCIENTIFIC_FIELDS = ("dataset", "class_names", "use_synthetic_data", "crop_padding", "mixup",
                     "standardize", "batch_size", "learning_rate", "lr_boundaries",
                     "lr_decay_factor", "lr_decay_every", "warmup_steps", "momentum",
                     "weight_decay", "clip_norm", "agc", "scalar_lr_factor", "max_branch_norm",
                     "seed")
# Where it runs, for how long, and its bookkeeping: a resume may change these (each change is
# recorded in results.json with its step). Every field in neither list (the model's;
# mixed_precision, on which the checkpoint's optimizer state and the numerics depend) is fixed.
RESUMABLE_FIELDS = ("train_steps", "data_dir", "model_dir", "eval_every", "eval_steps",
                    "checkpoint_every", "log_every", "steps_per_loop", "strategy", "xla",
                    "deterministic", "profile_steps")


# What an absent field of an older config.json meant. A field added later whose default is what
# the code did before it existed (max_branch_norm 0: off; clip_norm 0: no clipping) is not listed:
# its absence means today's default, and a resume accepts it. A field whose absence meant another
# computation is listed with the value of its time, so that a run of that time is refused naming
# the difference: the 40x40 crop before the fork's 36x36, the plain ReLU before the fork's leaky
# one, the BN twin before the fork's epsilon and activate_before_residual, Fixup's blocks alone
# (these only with BN, or Fixup: otherwise they compute nothing, and their absence means today's
# default), and scalars at the kernels' rate before --scalar_lr_factor existed.
ABSENT = {"crop_padding": 4, "relu_leakiness": 0.0, "scalar_lr_factor": 1.0}
ABSENT_WITH_BN = {"bn_epsilon": 1e-5, "activate_before_residual": False}
ABSENT_WITH_FIXUP = {"fixup_reference": False}


def as_today(d: dict):
    """A config.json object written by any version of the trainer, in the form `to_json` writes
    today: each absent field as `ABSENT` says, and a number written in another JSON type (8.0 for
    an integer, "0.01" for a float) as its field's type when it is that number exactly; anything
    else is left as it is (the config's checks then refuse it). ValueError without `model`."""
    if not isinstance(d, dict) or not isinstance(d.get("model"), dict):
        raise ValueError("not a JSON object with a `model` object")
    d, model = dict(d), dict(d["model"])
    absent = {**ABSENT, **(ABSENT_WITH_BN if model.get("norm") == "batch" else {}),
              **(ABSENT_WITH_FIXUP if model.get("init") == "fixup" else {})}
    for obj, cls in ((d, TrainConfig), (model, ModelConfig)):
        for f in dataclasses.fields(cls):
            if f.name == "model":
                continue
            if f.name in obj:
                obj[f.name] = json_typed(f, obj[f.name])
            else:
                obj[f.name] = absent.get(f.name, f.default)
    d["model"] = model
    return d


def differences(old: dict, new: dict):
    """[(field, value there, value here)] where a config.json object `old` (read `as_today`) and
    `new` (`TrainConfig.to_json()`) differ: the run's fields, then the model's."""
    old, new = json.loads(json.dumps(as_today(old))), json.loads(json.dumps(new))
    out = []
    for a, b in ((old, new), (old["model"], new["model"])):
        out += [(k, a.get(k), v) for k, v in b.items() if k != "model" and a.get(k) != v]
    return out


def config_diffs(old: dict, new: dict, fields=()):
    """`name: old there, new here` for each of `fields` and each model field where two
    configurations (a saved config.json and `TrainConfig.to_json()`) differ."""
    model = set(new["model"])
    return [f"{k}: {there} there, {here} here" for k, there, here in differences(old, new)
            if k in fields or k in model]
