"""The all-convolutional, normalization-free residual network of Hardt & Ma, Section 4.

CIFAR (Table 1): one standard 3x3x3x16 conv; three stages of 9 residual blocks with 64, 128, 256
channels, the first block of stages 2 and 3 with stride 2; 8x8 global average pool; a fixed random
projection 256 x num_classes that is never trained. 55 convolutions, 13,538,736 trainable
parameters (the paper says 13.5M in Table 1, 13.59M in the text), all of them convolution kernels.

ImageNet (Section 4.2) uses the same builder with the stage layout of the 34-layer ResNet; see
`recipes.imagenet()` in resnet_nobn/recipes.py.

One builder makes the paper's model and the ablations / the usual baseline:
  norm='none'   the paper: block `x + C2(act(C1 x))`, no normalization anywhere.
  norm='batch'  the BN-ResNet users compare against: the same shape, pre-activation blocks
                `x + C2(act(BN(C1(act(BN x)))))` and a final BN-activation before pooling, as in
                the TensorFlow ResNet code the paper forked (He et al. 2016, "identity mappings");
                as there, the first block of stage 1 activates its input before both shortcut
                and branch (`activate_before_residual`: `a + C2(act(BN(C1 a)))`, a = act(BN x)),
                and BN has decay 0.9 and epsilon 0.001. Its statistics are the global batch's
                on any number of replicas (GlobalBatchNorm, global_batch_norm.py: TensorFlow
                backend only), so 2 GPUs train the 1-GPU twin.
  init          residual convs N(0, sigma^2) with sigma = 1/(k^2 c) ('identity', the paper's),
                1/(k sqrt c) ('standard', the usual one the paper contrasts with), or
                sqrt(2/(k^2 c)) ('he', He et al. 2015, used by the BN baseline);
                k = kernel size, c = output channels. Two published normalization-free
                baselines that keep the identity at init (see blocks.py): 'fixup' (Zhang et al.
                2019: C1 He-init times L^(-1/2) for L blocks, C2 = 0, scalar multiplier and
                biases; and as its reference code, hongyi-zhang/Fixup, builds the network around
                them: a scalar bias and an activation after the stem, every block activated after
                its sum, a scalar bias before a zero-initialised trained classifier, `--head=auto`)
                and 'skipinit' (De & Smith 2020: He init, a scalar alpha = 0 per branch).
                Fixup here differs from its reference in what the harness fixes for every net:
                Table 1's shortcut (2x2 average pool, zero channels on both sides; the reference
                subsamples `h + bias1a` 1x1 and appends the zeros), the activation's slope
                (--relu_leakiness; the reference's ReLU is 0), the stride-2 convs' padding
                (TensorFlow's SAME: none before, one pixel after; the reference: one on each
                side), and the training (weight decay 1e-4 on conv kernels only, the reference
                on every parameter; no mixup, where the reference code's default is mixup,
                `--alpha=1`; its paper also reports Fixup without). experiments/stability/fixup_parity.py
                checks this Fixup against an independent one, step by step.
  relu_leakiness  slope of every activation `act` for x < 0: 0.1 in the TensorFlow ResNet code
                the paper forked (`relu_leakiness=0.1` in resnet_main.py), 0 for a plain ReLU.
  head          'random': fixed seeded Gaussian projection, a non-trainable variable, so it is
                saved in checkpoints and evaluation uses the same matrix; 'trained': a Dense layer.
  logit_gain    a trainable scalar g (init 1) times the pooled features, just before the head
                (`logit_gain`, blocks.py ScalarGain): BN's last scale, like for like. Off by default.
The activation after the last block, before the global average pool, is the fork's `unit_last`
(BN then activation there; without BN the activation remains).

The layers are written with `keras.ops`, so the network builds, runs and trains under any Keras
backend (JAX, TensorFlow, PyTorch) with the same layer names and weights; only the BN twin's
GlobalBatchNorm needs TensorFlow (docs/backends.md).
"""
import math

import keras
import numpy as np
from keras import layers
from keras import ops

from resnet_nobn.config import SEED_MAX, ModelConfig, TrainConfig, resolve_head_seed
from resnet_nobn.model.blocks import LeakyReLU, ResidualBlock, ScalarBias, ScalarGain
from resnet_nobn.model.global_batch_norm import GlobalBatchNorm
from resnet_nobn.model.initializers import SeededGlorotUniform, SeededNormal
from resnet_nobn.model.standardize import Standardize
from resnet_nobn.options import check_argument, is_integer, plain
from resnet_nobn.schedule import StepSchedule


def residual_init_stddev(kernel_size, out_channels, init, num_blocks=1):
    """Standard deviations (C1, C2) of a residual branch's N(0, sigma^2) init (Section 4).

    'identity': sigma = 1/(k^2 c), the paper's; 'standard': 1/(k sqrt c); 'he' and 'skipinit':
    sqrt(2/(k^2 c)); 'fixup': C1 sqrt(2/(k^2 c)) * L^(-1/2) with L = num_blocks (Fixup's
    L^(-1/(2m-2)) for m = 2 layers per branch), C2 zero.
    """
    k, c = kernel_size, out_channels
    he = math.sqrt(2.0 / (k * k * c))
    if init == "fixup":
        return he / math.sqrt(num_blocks), 0.0
    std = {"identity": 1.0 / (k * k * c), "standard": 1.0 / (k * math.sqrt(c)),
           "he": he, "skipinit": he}[init]
    return std, std


def _conv(filters, kernel_size, stride, stddev, seed, stream, name, weight_decay):
    """A conv whose kernel is N(0, stddev^2) drawn by NumPy from (seed, stream): the same kernel
    on every backend (initializers.py)."""
    return layers.Conv2D(
        filters, kernel_size, strides=stride, padding="same", use_bias=False,
        kernel_initializer=SeededNormal(stddev, seed, stream), name=name,
        kernel_regularizer=weight_decay_of(weight_decay))


def weight_decay_of(weight_decay):
    """The paper's weight decay `wd * sum ||W||^2 / 2` over the conv kernels (Section 4, the
    fork's `_decay`: wd * tf.nn.l2_loss), as each kernel's regularizer: Keras' L2(wd / 2), whose
    terms are in `model.losses` (`model.fit` adds them; so does the trainer's step,
    train/steps.py); None when wd is 0."""
    return keras.regularizers.L2(weight_decay / 2) if weight_decay else None


@keras.saving.register_keras_serializable(package="resnet_nobn")
class PoolPadShortcut(layers.Layer):
    """Shortcut where the shape changes: average pooling, then zero-padding of channels.

    As in the TensorFlow ResNet code the paper forked: `avg_pool(stride, stride, 'VALID')`, then
    `(out - in) // 2` zero channels before and the rest after (the fork pads `(out - in) // 2` on
    both sides: the same for the even differences of Table 1).
    """

    def __init__(self, stride, in_channels, out_channels, **kwargs):
        super().__init__(**kwargs)
        self.stride, self.in_channels, self.out_channels = stride, in_channels, out_channels

    def call(self, x):
        if self.stride > 1:
            x = ops.average_pool(x, self.stride, strides=self.stride, padding="valid",
                                 data_format="channels_last")
        extra = self.out_channels - self.in_channels
        if extra:
            x = ops.pad(x, [[0, 0], [0, 0], [0, 0], [extra // 2, extra - extra // 2]])
        return x

    def get_config(self):
        return {**super().get_config(), "stride": self.stride, "in_channels": self.in_channels,
                "out_channels": self.out_channels}


@keras.saving.register_keras_serializable(package="resnet_nobn")
class RandomProjection(layers.Layer):
    """The fixed random-projection head of Section 4: `logits = features @ P`, P never trained.

    P ~ N(0, 1/in_features), drawn from `seed`. It is a non-trainable variable, so checkpoints hold
    it and a restored model evaluates with the matrix it was trained with. Computed in float32.
    """

    def __init__(self, num_classes, seed, **kwargs):
        super().__init__(dtype="float32", **kwargs)
        self.num_classes, self.seed = num_classes, seed

    def build(self, input_shape):
        n_in = int(input_shape[-1])
        value = np.random.default_rng(self.seed).normal(
            0.0, 1.0 / math.sqrt(n_in), size=(n_in, self.num_classes)).astype("float32")
        self.projection = self.add_weight(
            name="projection", shape=(n_in, self.num_classes),
            initializer=keras.initializers.Constant(value), trainable=False)

    def call(self, x):
        return ops.matmul(ops.cast(x, "float32"), self.projection)

    def get_config(self):
        """Without the dtype (always float32): a loaded head is the same layer; its matrix is
        loaded with the weights, not drawn again."""
        config = {k: v for k, v in super().get_config().items() if k != "dtype"}
        return {**config, "num_classes": self.num_classes, "seed": self.seed}


def build_model(cfg: ModelConfig, seed: int = 0,
                weight_decay: float = TrainConfig.weight_decay,
                include_top: bool = True) -> keras.Model:
    """Builds the network of Table 1 (or its ImageNet / ablation / BN variants) from `cfg`.

    `seed` seeds the conv initialisers; `cfg.head_seed` (default: `seed`) seeds the random
    projection. `weight_decay` (the paper's 1e-4; 0: none) is every conv kernel's regularizer
    (`weight_decay_of`), so `model.losses` holds the recipe's decay. Layer names
    are `stem`, `stage{i}_block{j}` and `head`, so per-stage weights can be found by name.
    The input is standardised images (`resnet_nobn.Standardize` in front of it:
    model/standardize.py). A numpy integer seed is taken as its int. A `cfg` that is no
    ModelConfig, or a seed that is no integer, is a TypeError; a seed or weight decay
    TrainConfig would refuse is a ConfigError in its words. `include_top=False` (as
    tf.keras.applications'): the network without its head, a feature extractor whose output is
    the pooled features [N, cfg.widths[-1]], its layers named as the whole network's.

    Args:
        cfg: ModelConfig. The architecture (of a TrainConfig: its `.model`).
        seed: int. Seed of the initialisers, in [0, 2**32 - 1].
        weight_decay: float. L2 weight decay of every conv kernel, at least 0.
        include_top: bool. False: the network without its head (the pooled features).

    Returns:
        A `keras.Model` from standardised images [N, size, size, 3] to logits [N, classes]
        (`include_top=False`: to the pooled features [N, cfg.widths[-1]]).

    Example:

    ```python
    import numpy as np
    import resnet_nobn
    config = resnet_nobn.ModelConfig(widths=(8, 16, 32), blocks_per_stage=1, stem_width=8)
    model = resnet_nobn.build_model(config, seed=0)
    assert model(np.zeros((2, 32, 32, 3), "float32")).shape == (2, 10)
    ```
    """
    if not isinstance(cfg, ModelConfig):
        fix = ("for a TrainConfig pass its .model" if isinstance(cfg, TrainConfig) else
               "e.g. resnet_nobn.ModelConfig()")
        raise TypeError(f"build_model takes a ModelConfig, not a {type(cfg).__name__}; {fix}")
    seed = plain(seed)  # a numpy integer as its int: Keras' initialisers take no other
    if not is_integer(seed):
        raise TypeError(f"build_model's seed must be an integer in [0, {SEED_MAX}], not "
                        f"{seed!r}; e.g. seed=0")
    check_argument(TrainConfig, "seed", seed, "build_model's seed")
    wd = check_argument(TrainConfig, "weight_decay", plain(weight_decay),
                        "build_model's weight_decay")
    batch_norm = cfg.norm == "batch"

    def bn(name):
        return (GlobalBatchNorm(momentum=cfg.bn_momentum, epsilon=cfg.bn_epsilon, name=name)
                if batch_norm else None)

    inputs = keras.Input((cfg.image_size, cfg.image_size, 3), name="images")
    stem_std = math.sqrt(2.0 / (cfg.stem_kernel ** 2 * cfg.stem_width))  # a standard conv: He init
    x = _conv(cfg.stem_width, cfg.stem_kernel, cfg.stem_stride, stem_std, seed, 0, "stem",
              wd)(inputs)
    fixup = cfg.init == "fixup" and cfg.fixup_reference
    if fixup:  # Fixup's reference: `relu(conv1(x) + bias1)`
        x = LeakyReLU(cfg.relu_leakiness, name="stem_act")(ScalarBias(name="stem_bias")(x))
    in_ch = cfg.stem_width
    stream = 0  # the conv's number: the stem 0, then C1 and C2 of each block in order
    branch_scale = {"fixup": 1.0, "skipinit": 0.0}.get(cfg.init)
    for s, (width, blocks, stride) in enumerate(zip(cfg.widths, cfg.blocks_per_stage, cfg.strides)):
        std1, std2 = residual_init_stddev(cfg.kernel_size, width, cfg.init, sum(cfg.blocks_per_stage))
        for b in range(blocks):
            name = f"stage{s + 1}_block{b + 1}"
            st = stride if b == 0 else 1
            stream += 2
            shortcut = (PoolPadShortcut(st, in_ch, width, name=name + "_shortcut")
                        if (st != 1 or in_ch != width) else None)
            norm1 = bn(name + "_bn1")
            if batch_norm and cfg.activate_before_residual and s == 0 and b == 0:
                x = LeakyReLU(cfg.relu_leakiness, name=name + "_preact")(norm1(x))
                norm1 = None
            x = ResidualBlock(
                _conv(width, cfg.kernel_size, st, std1, seed, stream - 1, name + "_conv1", wd),
                _conv(width, cfg.kernel_size, 1, std2, seed, stream, name + "_conv2", wd),
                shortcut=shortcut, norm1=norm1, norm2=bn(name + "_bn2"),
                leakiness=cfg.relu_leakiness, branch_scale=branch_scale,
                scalar_biases=cfg.init == "fixup", name=name)(x)
            if fixup and (s, b) != (len(cfg.widths) - 1, blocks - 1):  # Fixup's `relu(out +
                x = LeakyReLU(cfg.relu_leakiness, name=name + "_act")(x)  # identity)`; the last
            in_ch = width  # block's is final_act below
    if batch_norm:  # the fork's unit_last: BN (batch only), then the activation, then the pool
        x = bn("final_bn")(x)
    x = LeakyReLU(cfg.relu_leakiness, name="final_act")(x)
    x = layers.GlobalAveragePooling2D(name="pool")(x)
    if not include_top:
        return keras.Model(inputs, x, name="resnet_nobn_features")
    if fixup:  # Fixup's reference: `fc(x + bias2)`
        x = ScalarBias(name="classifier_bias")(x)
    if cfg.logit_gain:  # one trainable scale just before the head: BN's last scale, without BN
        x = ScalarGain(name="logit_gain")(x)
    if cfg.head == "random":
        logits = RandomProjection(cfg.num_classes, resolve_head_seed(cfg.head_seed, seed),
                                  name="head")(x)
    else:  # Fixup also zero-initialises a trained classifier
        init = ("zeros" if cfg.init == "fixup" else SeededGlorotUniform(seed, stream + 1))
        logits = layers.Dense(cfg.num_classes, dtype="float32", name="head",
                              kernel_initializer=init)(x)
    return keras.Model(inputs, logits, name="resnet_nobn" if not batch_norm else "resnet_bn")


def custom_objects():
    """The project's Keras classes a saved model.keras is made of, by their registered names: the
    `custom_objects` of `keras.saving.load_model` (docs/training.md, an export's model card);
    with the standardisation layer and, for a model compiled with `recipes.optimizer`, the
    learning-rate schedule.

    Returns:
        A dict {registered name: class}.

    Example:

    ```python
    import os, tempfile
    import keras, resnet_nobn
    config = resnet_nobn.ModelConfig(widths=(8, 16, 32), blocks_per_stage=1, stem_width=8)
    path = os.path.join(tempfile.mkdtemp(), "model.keras")
    resnet_nobn.build_model(config).save(path)
    model = keras.saving.load_model(path, custom_objects=resnet_nobn.custom_objects())
    ```
    """
    classes = (LeakyReLU, ResidualBlock, PoolPadShortcut, RandomProjection, GlobalBatchNorm,
               ScalarBias, ScalarGain, Standardize, StepSchedule, SeededNormal,
               SeededGlorotUniform)
    return {keras.saving.get_registered_name(c): c for c in classes}


def conv_kernels(model):
    """All convolution kernels (the weights that get weight decay), in layer order."""
    return [v for v in model.trainable_variables if "kernel" in v.path and "head" not in v.path]


def scalar_parameters(model):
    """The variables --scalar_lr_factor scales: every trainable scalar (Fixup's biases and
    multipliers, SkipInit's alpha) and a trained classifier's bias, the parameters Fixup's
    reference code trains at lr/10 (every `bias` and `scale`)."""
    return [v for v in model.trainable_variables
            if len(v.shape) == 0 or (v.path.startswith("head/") and "bias" in v.path)]


def stage_kernels(model):
    """{stage name: [conv kernels]} for per-stage weight-norm summaries; the stem is its own stage."""
    groups = {}
    for v in conv_kernels(model):
        groups.setdefault(v.path.split("/")[0].split("_")[0], []).append(v)
    return groups


def memory_lower_bound(cfg: ModelConfig, batch):
    """(bytes of the weights, their gradients and momenta; bytes of the activations a training
    step of `batch` images keeps for the backward pass), float32, from the shapes alone. A lower
    bound: a run needing more than the machine has cannot start."""
    size = math.ceil(cfg.image_size / cfg.stem_stride)
    params = cfg.stem_kernel ** 2 * 3 * cfg.stem_width
    activations = size * size * cfg.stem_width
    in_ch = cfg.stem_width
    for width, blocks, stride in zip(cfg.widths, cfg.blocks_per_stage, cfg.strides):
        for b in range(blocks):
            size = math.ceil(size / (stride if b == 0 else 1))
            params += cfg.kernel_size ** 2 * (in_ch + width) * width
            activations += 4 * size * size * width  # conv1, activation, conv2, sum
            in_ch = width
    return 3 * 4 * params, 4 * batch * activations


def count_params(variables):
    return int(sum(np.prod(v.shape) for v in variables))
