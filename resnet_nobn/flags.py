"""The command line shared by run/cifar_train.py and run/imagenet_train.py.

Every hyperparameter is one absl flag with its default, unit and a validator. `config_from_flags`
turns the parsed flags once into the frozen `TrainConfig`; nothing else reads FLAGS.
"""
import contextlib
import math
import os
import signal
import sys

from absl import flags

from resnet_nobn import cluster
from resnet_nobn.config import (DATASETS, HEADS, INITS, NORMS, STRATEGIES, ModelConfig, TrainConfig,
                                UserError, resolve_init)


def _ints(text):
    return tuple(int(t) for t in text.split(",") if t.strip())


def _parses_as_ints(text, allow_empty=False):
    try:
        values = _ints(text)
    except ValueError:
        return False
    return (allow_empty or len(values) > 0) and all(v > 0 for v in values)


def as_flag_defaults(values):
    """Config values as flag defaults: tuples become comma lists."""
    return {k: ",".join(str(x) for x in v) if isinstance(v, tuple) else v for k, v in values.items()}


def define_flags(datasets, **defaults):
    """Defines the flags; `defaults` overrides per entry point (e.g. ImageNet's schedule)."""
    d = dict(dataset=datasets[0], widths="64,128,256", blocks_per_stage="9", strides="1,2,2",
             stem_width=16, stem_kernel=3, stem_stride=1, train_steps=60_000, batch_size=128,
             learning_rate=0.05, lr_boundaries="30000,50000", lr_decay_factor=0.1, lr_decay_every=0,
             weight_decay=1e-4, eval_every=5_000, checkpoint_every=1_000, log_every=100)
    d.update(defaults)
    f = flags
    # data
    f.DEFINE_enum("dataset", d["dataset"], datasets, "Dataset, read through tensorflow-datasets.")
    f.DEFINE_string("data_dir", None, "tfds data directory holding the prepared dataset (default: "
                    "tfds' own, ~/tensorflow_datasets, where tfds may download CIFAR).")
    f.DEFINE_integer("crop_padding", 2, "CIFAR training augmentation: zero pixels added on each "
                     "side before the random crop back to 32x32 (the forked code's: 2, i.e. 36x36).",
                     lower_bound=0)
    f.DEFINE_bool("use_synthetic_data", False, "Random images of the right shape, no I/O: for "
                  "smoke runs and speed measurements.")
    # model
    f.DEFINE_string("widths", d["widths"], "Channels of each stage, comma list (Table 1: 64,128,256).")
    f.DEFINE_string("blocks_per_stage", d["blocks_per_stage"], "Residual blocks per stage: one "
                    "number for all stages, or a comma list with one entry per stage (Table 1: 9).")
    f.DEFINE_string("strides", d["strides"], "Stride of the first block of each stage, comma list.")
    f.DEFINE_integer("stem_width", d["stem_width"], "Output channels of the first, standard conv.",
                     lower_bound=1)
    f.DEFINE_integer("stem_kernel", d["stem_kernel"], "Kernel size of the first conv (pixels).",
                     lower_bound=1)
    f.DEFINE_integer("stem_stride", d["stem_stride"], "Stride of the first conv.", lower_bound=1)
    f.DEFINE_enum("norm", "none", NORMS, "none: the paper's normalization-free net; batch: the "
                  "BN-ResNet baseline of the same shape (pre-activation blocks, He init).")
    f.DEFINE_enum("init", "auto", ("auto",) + INITS, "Residual conv init N(0, sigma^2): identity "
                  "sigma=1/(k^2 c) (the paper's), standard 1/(k sqrt c), he sqrt(2/(k^2 c)); auto = "
                  "identity with --norm=none, he with --norm=batch. Normalization-free baselines "
                  "(--norm=none): fixup (Zhang et al. 2019) and skipinit (De & Smith 2020).")
    f.DEFINE_float("relu_leakiness", 0.1, "Slope for x < 0 of every activation (leaky ReLU), in "
                   "the blocks and after the last block; 0.1 is the TensorFlow ResNet code the "
                   "paper forked, 0 a plain ReLU.", lower_bound=0.0, upper_bound=0.999)
    f.DEFINE_enum("head", "random", HEADS, "random: fixed random projection, never trained (the "
                  "paper's); trained: an ordinary dense layer.")
    f.DEFINE_integer("head_seed", 0, "Seed of the random-projection head.")
    # optimization
    f.DEFINE_integer("train_steps", d["train_steps"], "Training steps (global batches).",
                     lower_bound=1)
    f.DEFINE_integer("batch_size", d["batch_size"], "Global batch size (images per step over all "
                     "replicas and workers); must be a multiple of the number of replicas.",
                     lower_bound=1)
    f.DEFINE_float("learning_rate", d["learning_rate"], "Initial learning rate.")
    f.DEFINE_string("lr_boundaries", d["lr_boundaries"], "Steps at which the learning rate is "
                    "multiplied by --lr_decay_factor, increasing comma list (may be empty).")
    f.DEFINE_float("lr_decay_factor", d["lr_decay_factor"], "Factor applied at each boundary, or "
                   "every --lr_decay_every steps.", lower_bound=0.0, upper_bound=1.0)
    f.DEFINE_integer("lr_decay_every", d["lr_decay_every"], "If > 0: multiply the rate by "
                     "--lr_decay_factor every this many steps (exponential staircase), instead of "
                     "at --lr_boundaries.", lower_bound=0)
    f.DEFINE_integer("warmup_steps", 0, "Linear learning-rate warm-up, steps (the paper: 0).",
                     lower_bound=0)
    f.DEFINE_float("momentum", 0.9, "SGD momentum.", lower_bound=0.0, upper_bound=1.0)
    f.DEFINE_float("weight_decay", d["weight_decay"], "L2 weight decay on conv kernels only: adds "
                   "wd * sum ||W||^2 / 2 to the loss.", lower_bound=0.0)
    f.DEFINE_float("clip_norm", 0.0, "If > 0: clip the gradient to this global L2 norm before "
                   "the update (the paper: no clipping).", lower_bound=0.0)
    f.DEFINE_integer("seed", 0, "Seed of the weight init and of the data order/augmentation.")
    # bookkeeping
    f.DEFINE_string("model_dir", "/tmp/resnet_nobn", "Directory for checkpoints, TensorBoard "
                    "summaries, config.json and results.json; re-running resumes from it.")
    f.DEFINE_integer("eval_every", d["eval_every"], "Evaluate every this many steps (and at the "
                     "end).", lower_bound=1)
    f.DEFINE_integer("eval_steps", 0, "Evaluate on at most this many test batches (0: the whole "
                     "test split).", lower_bound=0)
    f.DEFINE_bool("eval_only", False, "Evaluate the latest checkpoint in --model_dir and exit.")
    f.DEFINE_integer("checkpoint_every", d["checkpoint_every"], "Save a checkpoint every this many "
                     "steps (and at the end); a crash loses at most this much work.", lower_bound=1)
    f.DEFINE_integer("log_every", d["log_every"], "Print progress and write training summaries "
                     "every this many steps.", lower_bound=1)
    f.DEFINE_integer("steps_per_loop", 0, "Training steps run on the device per host round-trip "
                     "(one compiled tf.range loop, one reduction of the metrics); 0 = --log_every. "
                     "A loop also ends at every log, checkpoint and evaluation step.", lower_bound=0)
    f.DEFINE_enum("strategy", "auto", STRATEGIES, "tf.distribute strategy; auto: multi_worker if "
                  "TF_CONFIG is set, mirrored with several GPUs, else one_device.")
    f.DEFINE_bool("xla", False, "Compile the forward and backward pass with XLA.")
    f.DEFINE_enum("mixed_precision", "float32", ("float32", "float16", "bfloat16"), "Compute dtype "
                  "of the network (variables, head and loss stay float32; float16 uses loss "
                  "scaling).")

    f.register_validator("learning_rate", lambda v: v > 0, "--learning_rate must be positive")
    for name in ("learning_rate", "lr_decay_factor", "momentum", "weight_decay", "clip_norm",
                 "relu_leakiness"):
        f.register_validator(name, math.isfinite, f"--{name} must be a finite number")
    for name in ("widths", "strides", "blocks_per_stage"):
        f.register_validator(name, _parses_as_ints,
                             f"--{name} must be a comma list of positive integers, e.g. 64,128,256")
    f.register_validator("lr_boundaries", lambda v: _parses_as_ints(v, allow_empty=True)
                         and list(_ints(v)) == sorted(set(_ints(v))),
                         "--lr_boundaries must be positive, strictly increasing steps, e.g. 30000,50000")
    f.register_multi_flags_validator(
        ["widths", "strides", "blocks_per_stage"],
        lambda v: not all(_parses_as_ints(v[k]) for k in v)
        or (len(_ints(v["widths"])) == len(_ints(v["strides"]))
            and len(_ints(v["blocks_per_stage"])) in (1, len(_ints(v["widths"])))),
        "--widths, --strides and --blocks_per_stage need one entry per stage "
        "(--blocks_per_stage may be a single number)")
    f.register_multi_flags_validator(
        ["widths", "stem_width"],
        lambda v: not _parses_as_ints(v["widths"])
        or list(_ints(v["widths"])) == sorted(_ints(v["widths"])) and v["stem_width"] <= _ints(v["widths"])[0],
        "--widths must be non-decreasing and start at least at --stem_width (the shortcut "
        "zero-pads channels); e.g. --stem_width=8 --widths=8,16,32")
    f.register_multi_flags_validator(
        ["norm", "init"], lambda v: not (v["norm"] == "batch" and v["init"] in ("fixup", "skipinit")),
        "--init=fixup and --init=skipinit are normalization-free methods: use them with --norm=none")


def config_from_flags(FLAGS) -> TrainConfig:
    """The parsed flags, once, as the frozen run configuration."""
    info = DATASETS[FLAGS.dataset]
    widths = _ints(FLAGS.widths)
    blocks = _ints(FLAGS.blocks_per_stage)
    model = ModelConfig(
        num_classes=info.num_classes, image_size=info.image_size, widths=widths,
        blocks_per_stage=blocks * len(widths) if len(blocks) == 1 else blocks,
        strides=_ints(FLAGS.strides), stem_width=FLAGS.stem_width, stem_kernel=FLAGS.stem_kernel,
        stem_stride=FLAGS.stem_stride, norm=FLAGS.norm, init=resolve_init(FLAGS.init, FLAGS.norm),
        relu_leakiness=FLAGS.relu_leakiness, head=FLAGS.head, head_seed=FLAGS.head_seed)
    return TrainConfig(
        model=model, dataset=FLAGS.dataset, data_dir=FLAGS.data_dir,
        use_synthetic_data=FLAGS.use_synthetic_data, crop_padding=FLAGS.crop_padding,
        train_steps=FLAGS.train_steps,
        batch_size=FLAGS.batch_size, learning_rate=FLAGS.learning_rate,
        lr_boundaries=_ints(FLAGS.lr_boundaries), lr_decay_factor=FLAGS.lr_decay_factor,
        lr_decay_every=FLAGS.lr_decay_every, warmup_steps=FLAGS.warmup_steps,
        momentum=FLAGS.momentum, weight_decay=FLAGS.weight_decay, clip_norm=FLAGS.clip_norm,
        seed=FLAGS.seed,
        model_dir=FLAGS.model_dir, eval_every=FLAGS.eval_every, eval_steps=FLAGS.eval_steps,
        eval_only=FLAGS.eval_only, checkpoint_every=FLAGS.checkpoint_every,
        log_every=FLAGS.log_every, steps_per_loop=FLAGS.steps_per_loop, strategy=FLAGS.strategy,
        xla=FLAGS.xla,
        mixed_precision=FLAGS.mixed_precision)


def main(argv):
    """absl main of run/*.py: the flags were parsed and validated before TensorFlow is loaded;
    here they become a config, once, then one training run."""
    from absl import app, logging
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    logging.set_verbosity(logging.WARNING)

    def run():
        try:
            cfg = config_from_flags(flags.FLAGS)
        except ValueError as e:  # a check of ModelConfig that no single flag's validator can make
            raise UserError(str(e)) from None
        if cfg.strategy == "multi_worker" or (cfg.strategy == "auto" and os.environ.get("TF_CONFIG")):
            cluster.parse_tf_config()  # TF_CONFIG and the timeouts: said before TensorFlow loads
            cluster.timeouts()
        with quiet_stderr():  # TensorFlow's start-up lines (CUDA probing, absl's log banner)
            from resnet_nobn import train
            train.probe_devices()
        train.tf.get_logger().setLevel("ERROR")  # deprecation notices of tf.distribute internals
        train.train(cfg)

    main_wrapper(run)


@contextlib.contextmanager
def quiet_stderr():
    """Sends file descriptor 2 to /dev/null inside the block (C++ start-up logging that
    TF_CPP_MIN_LOG_LEVEL does not silence); an exception raised inside restores it first."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def main_wrapper(run):
    """Runs `run()`; a UserError becomes one line on stderr and exit status 2, Ctrl-C exit 130."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the entry point's start-up handler
    try:
        run()
    except UserError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted; re-run the same command to resume from the last checkpoint",
              file=sys.stderr, flush=True)
        sys.exit(130)
