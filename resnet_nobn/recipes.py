"""The paper's recipes, each a configuration, and what a diverged run should retry with.

`cifar()` is Table 1 and Section 4 (the defaults of TrainConfig and ModelConfig); `imagenet()` is
Section 4.2 with the ResNet-34 variant of resnet_nobn/data/imagenet.py. run/cifar_train.py and
run/imagenet_train.py differ only by the recipe their flags default to. `optimizer(cfg)` is a
recipe's Keras optimizer, for `model.compile` (docs/library.md).
"""
import json
import os

from resnet_nobn.config import ModelConfig, TrainConfig
from resnet_nobn.data.datasets import DATASETS, of_recipe


def cifar() -> TrainConfig:
    """CIFAR-10 (Table 1, Section 4): 3 stages of 9 blocks of 64, 128, 256 channels; SGD with
    momentum 0.9, batch 128, weight decay 1e-4, learning rate 0.05 / 10 at 30k and 50k, 60k steps."""
    return TrainConfig()


def imagenet() -> TrainConfig:
    """ImageNet (Section 4.2): the all-convolutional ResNet-34 variant
    (resnet_nobn/data/imagenet.py); global batch 256, learning rate 0.1 times 0.94 every two epochs,
    700k steps. One epoch is 1,281,167 / 256 = 5,004.56 steps, so the rate is multiplied by 0.94
    every 10,009 steps. Momentum 0.9 and weight decay 1e-4 as for CIFAR."""
    info = DATASETS["imagenet2012"]
    model = ModelConfig(num_classes=info.num_classes, image_size=info.image_size,
                        widths=(84, 168, 336, 672), blocks_per_stage=(3, 4, 6, 3),
                        strides=(2, 2, 2, 2), stem_width=84, stem_kernel=7, stem_stride=2)
    return TrainConfig(model=model, dataset=info.name, batch_size=256, learning_rate=0.1,
                       lr_boundaries=(), lr_decay_factor=0.94,
                       lr_decay_every=int(2 * info.num_train / 256), train_steps=700_000,
                       eval_every=10_000)


def optimizer(cfg: TrainConfig = None):
    """The paper's optimizer for `cfg` (default: `cifar()`), for `model.compile`: Keras SGD with
    its momentum (0.9) and its step schedule (resnet_nobn/schedule.py: a registered, serializable
    LearningRateSchedule, so a compiled model saves and loads as `.keras`). The weight decay is
    not here: the model carries it (`build_model(..., weight_decay=)`, in `model.losses`).
    Loads Keras. TypeError for a `cfg` that is no TrainConfig."""
    if cfg is None:
        cfg = cifar()
    if not isinstance(cfg, TrainConfig):
        raise TypeError("recipes.optimizer takes a TrainConfig (its momentum and learning-rate "
                        f"schedule), not a {type(cfg).__name__}; e.g. resnet_nobn.recipes.cifar()")
    import keras

    from resnet_nobn.schedule import StepSchedule
    return keras.optimizers.SGD(learning_rate=StepSchedule.of(cfg), momentum=cfg.momentum)


def datasets_of(recipe: TrainConfig):
    """The datasets a recipe trains (resnet_nobn/data/datasets.py): its entry point's choices."""
    return of_recipe(DATASETS[recipe.dataset].recipe)


def for_dataset(name) -> TrainConfig:
    """The recipe that trains dataset `name`: `cifar()` or `imagenet()`."""
    return {"cifar": cifar, "imagenet": imagenet}[DATASETS[name].recipe]()


def warmup_rule(train_steps, lr_boundaries=(), lr_decay_every=0):
    """The warm-up of docs/stability.md, one rule for every run (never tuned per run): a linear
    ramp over the first half of the first rate period (the steps before the first
    --lr_boundaries entry, or --lr_decay_every, or --train_steps with neither). The paper's 60k
    steps: 15,000 steps of its first 30,000; a 1,500-step run with drops at 750 and 1,250: 375.
    The ramp is a function of the global step (resnet_nobn/training/steps.py): a run continued from
    step s runs at min(1, (s+1)/W) of its rate there, as if it had warmed up from step 0."""
    first = lr_boundaries[0] if lr_boundaries else (lr_decay_every or train_steps)
    return max(1, first // 2)


AGC = 0.16  # NFNets' largest lambda, the one CIFAR studies use at batch 128; not tuned here
WARMUP = "rule"  # --warmup_steps of warmup_rule(the run's schedule)
MEASURED_RATE, MEASURED_BATCH = 0.05, 128  # the paper's, at which the remedies were measured
CLOSE = 0.5  # points of test error within which a less invasive remedy is preferred

# What a diverged run of the paper's network (identity init, no normalization) may retry with,
# least invasive first: the start only, a lower rate with nothing else changed, a bound on each
# unit's step, then the clip of the whole gradient. name -> (flags, what it changes, in one
# clause). retry_remedy takes the one that learned most (MEASURED) among those that survived.
REMEDIES = {
    "paper_warmup": (dict(warmup_steps=WARMUP),
                     "ramps the rate up linearly from 0 at step 0 over the first half of its "
                     "first period"),
    "paper_lr0.02": (dict(learning_rate=0.02), "lowers the rate to 0.02, nothing else changed"),
    "paper_lr0.01": (dict(learning_rate=0.01), "lowers the rate to 0.01, nothing else changed"),
    "paper_agc": (dict(agc=AGC), f"caps each conv unit's gradient at {AGC} of its weight norm"),
    "paper_agc_warmup": (dict(agc=AGC, warmup_steps=WARMUP),
                         f"caps each conv unit's gradient at {AGC} of its weight norm and ramps "
                         "the rate up from step 0 over the first half of its first period"),
    "paper_clip1": (dict(clip_norm=1.0), "clips the whole gradient to norm 1"),
    "paper_clip1_warmup": (dict(clip_norm=1.0, warmup_steps=WARMUP),
                           "clips the whole gradient to norm 1 and ramps the rate up from step 0 "
                           "over the first half of its first period"),
}

# What each net did on real images with the paper's schedule shape (rate /10 at 50% and 83% of
# MEASURED_STEPS steps, batch 128; each remedy at the paper's rate 0.05 unless its flags lower it):
# (net, blocks per stage) -> {seed: test top-1 error in % after the run, or "NaN @step" where its
# loss became non-finite}. Written by `python bench/remedies.py --from_runs=ROOT --write` into
# measured_remedies.json beside this file; docs/stability.md's tables are its rendering.
MEASURED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "measured_remedies.json")


def read_measured(path=MEASURED_FILE):
    """(MEASURED, MEASURED_STEPS) from its file: {(net, blocks): {seed: error in % or "NaN @step[,
    then ...]"}}, and the number of steps the runs trained."""
    with open(path) as f:
        data = json.load(f)
    return ({(r["net"], r["blocks"]): {int(s): v for s, v in r["seeds"].items()}
             for r in data["runs"]}, int(data["steps"]))


MEASURED, MEASURED_STEPS = read_measured()


def measured_depth(blocks):
    """The depth whose measurements stand for `blocks` per stage: the smallest measured depth
    at least `blocks`, else the deepest."""
    depths = sorted({b for _, b in MEASURED})
    return next((b for b in depths if b >= blocks), depths[-1])


def mean_error(net, blocks):
    """The mean test error (%) over the seeds of `net` at `blocks`' measured depth, or None if it
    was not measured there, a seed diverged there, or fewer than two were run."""
    runs = MEASURED.get((net, measured_depth(blocks)), {})
    if len(runs) < 2 or not all(isinstance(e, (int, float)) for e in runs.values()):
        return None
    return sum(runs.values()) / len(runs)


def survived(net, blocks):
    """Whether `net` trained on two seeds or more at the measured depth for `blocks` per stage,
    and no seed diverged at any measured depth: a remedy that diverged anywhere in the sweep has
    not survived it."""
    if any(isinstance(e, str) for (n, b), runs in MEASURED.items() if n == net
           for e in runs.values()):
        return False
    return mean_error(net, blocks) is not None


# The largest stable rate without a remedy, the last resort of retry_remedy (docs/stability.md:
# Fashion-MNIST as a CIFAR-10 directory, widths 16,32,64, batch 32, 500 steps, 1, 3 and 9 blocks
# per stage). (kind, deep): deep is more than 3 blocks per stage; a shallow entry held at both 1
# and 3. kind: the init without BN (standard and he were not measured: the paper's identity row
# is used), 'batch' with BN. Fixup's rows were measured with Fixup's blocks and the paper's
# frozen head, before --init=fixup built Fixup's reference network.
STABLE_SETTINGS = {
    ("identity", False): dict(learning_rate=0.02),
    ("identity", True): dict(learning_rate=0.02),
    ("fixup", False): dict(learning_rate=0.02),
    ("fixup", True): dict(learning_rate=0.02),
    ("skipinit", False): dict(learning_rate=0.05),
    ("skipinit", True): dict(learning_rate=0.02),  # 0.05 diverged at step 170
    ("batch", False): dict(learning_rate=0.1),
    ("batch", True): dict(learning_rate=0.1),
}


def best_remedy(cfg: TrainConfig):
    """(name, flags) of the remedy a diverged run of the paper's network `cfg` should take, or
    None: among the REMEDIES that survived at its depth (MEASURED), that the run does not have
    yet and that would not raise its rate, the one with the lowest mean test error; a less
    invasive one (earlier in REMEDIES) instead where its mean is within CLOSE points of it."""
    blocks = max(cfg.model.blocks_per_stage)
    candidates = []
    for name, (flags, _) in REMEDIES.items():
        flags = {k: warmup_rule(cfg.train_steps, cfg.lr_boundaries, cfg.lr_decay_every)
                 if v == WARMUP else v for k, v in flags.items()}
        new = any(getattr(cfg, k) != v for k, v in flags.items())
        if survived(name, blocks) and new and flags.get("learning_rate", 0) <= cfg.learning_rate:
            candidates.append((name, flags, mean_error(name, blocks)))
    if not candidates:
        return None
    best = min(e for _, _, e in candidates)
    return next((n, f) for n, f, e in candidates if e <= best + CLOSE)


def measured_clause(name, blocks):
    """'measured on Fashion-MNIST after 1,500 steps, docs/stability.md: 14.6% at 9 blocks per
    stage, BN twin 9.2%' for a remedy's advice."""
    depth = measured_depth(blocks)
    bn = mean_error("bn", depth)
    return (f"measured on Fashion-MNIST after {MEASURED_STEPS:,} steps, docs/stability.md: "
            f"{mean_error(name, blocks):.1f}% at {depth} block{'s' * (depth != 1)} per stage"
            + (f", BN twin {bn:.1f}%" if bn is not None else ""))


def retry_remedy(cfg: TrainConfig):
    """(flags, clause): what a diverged run of `cfg` should be re-run with, as `--flag=value`
    tokens, and what that changes and what it measured, in one clause.

    The paper's net: `best_remedy`, at the rate it was measured at (lowered to it, never
    raised). Else, or where no remedy survived, a lower rate (STABLE_SETTINGS), no higher than
    the largest stable one nor half the one that diverged, and half its clip if it clipped.
    """
    kind = "batch" if cfg.model.norm == "batch" else (
        cfg.model.init if cfg.model.init in ("fixup", "skipinit") else "identity")
    blocks = max(cfg.model.blocks_per_stage)
    chosen = best_remedy(cfg) if kind == "identity" else None
    if chosen:
        name, flags = chosen
        what = REMEDIES[name][1]
        if cfg.learning_rate > MEASURED_RATE and "learning_rate" not in flags:
            flags["learning_rate"] = MEASURED_RATE
            what += f", at the rate {MEASURED_RATE} it was measured at"
        return _tokens(flags), f"{what} ({measured_clause(name, blocks)})"
    measured = STABLE_SETTINGS[(kind, blocks > 3)]
    flags = {"learning_rate": min(measured["learning_rate"], cfg.learning_rate / 2)}
    if cfg.clip_norm:
        flags["clip_norm"] = cfg.clip_norm / 2
    return _tokens(flags), (f"lowers the rate to {flags['learning_rate']:.3g}"
                            + (" and halves the clip" if cfg.clip_norm else ""))


def _tokens(flags):
    return " ".join(f"--{k}={v}" if isinstance(v, int) else f"--{k}={float(f'{v:.3g}')}"
                    for k, v in flags.items())


def retry_advice(cfg: TrainConfig) -> str:
    """The flags of `retry_remedy` (the `retry with:` line)."""
    return retry_remedy(cfg)[0]
