"""The paper's recipes, each a configuration, and what a diverged run should retry with.

`cifar()` is Table 1 and Section 4 (the defaults of TrainConfig and ModelConfig); `imagenet()` is
Section 4.2 with the ResNet-34 variant of resnet_nobn/data/imagenet.py. run/cifar_train.py and
run/imagenet_train.py differ only by the recipe their flags default to.
"""
from resnet_nobn.config import DATASETS, ModelConfig, TrainConfig


def cifar() -> TrainConfig:
    """CIFAR-10 (Table 1, Section 4): 3 stages of 9 blocks of 64, 128, 256 channels; SGD with
    momentum 0.9, batch 128, weight decay 1e-4, learning rate 0.05 / 10 at 30k and 50k, 60k steps."""
    return TrainConfig()


def imagenet() -> TrainConfig:
    """ImageNet (Section 4.2): the all-convolutional ResNet-34 variant (resnet_nobn/data/imagenet.py);
    global batch 256, learning rate 0.1 times 0.94 every two epochs, 700k steps. One epoch is
    1,281,167 / 256 = 5,004.56 steps, so the rate is multiplied by 0.94 every 10,009 steps.
    Momentum 0.9 and weight decay 1e-4 as for CIFAR."""
    info = DATASETS["imagenet2012"]
    model = ModelConfig(num_classes=info.num_classes, image_size=info.image_size,
                        widths=(84, 168, 336, 672), blocks_per_stage=(3, 4, 6, 3),
                        strides=(2, 2, 2, 2), stem_width=84, stem_kernel=7, stem_stride=2)
    return TrainConfig(model=model, dataset=info.name, batch_size=256, learning_rate=0.1,
                       lr_boundaries=(), lr_decay_factor=0.94,
                       lr_decay_every=int(2 * info.num_train / 256), train_steps=700_000,
                       eval_every=10_000)


def datasets_of(recipe: TrainConfig):
    """The datasets a recipe's model is built for (their image size): its entry point's choices."""
    size = recipe.model.image_size
    return tuple(name for name, info in DATASETS.items() if info.image_size == size)


def warmup_rule(train_steps, lr_boundaries=(), lr_decay_every=0):
    """The warm-up of docs/stability.md, one rule for every run (never tuned per run): a linear
    ramp over the first half of the first rate period (the steps before the first
    --lr_boundaries entry, or --lr_decay_every, or --train_steps with neither). The paper's 60k
    steps: 15,000 steps of its first 30,000; a 1,500-step run with drops at 750 and 1,250: 375.
    The ramp is a function of the global step (resnet_nobn/train/steps.py): a run continued from step s
    runs at min(1, (s+1)/W) of its rate there, as if it had warmed up from step 0."""
    first = lr_boundaries[0] if lr_boundaries else (lr_decay_every or train_steps)
    return max(1, first // 2)


AGC = 0.16  # NFNets' largest lambda, the one CIFAR studies use at batch 128; not tuned here
WARMUP = "rule"  # --warmup_steps of warmup_rule(the run's schedule)
MEASURED_RATE, MEASURED_BATCH = 0.05, 128  # the paper's, at which the remedies were measured

# Remedies that keep the paper's network (identity init, no normalization) at its rate, least
# invasive first, the order retry_advice tries them in: the start only or a bound on each unit's
# step, then the clip of the whole gradient. name -> (flags, what it changes, in one clause).
REMEDIES = {
    "paper_warmup": (dict(warmup_steps=WARMUP),
                     "ramps the rate up linearly from 0 at step 0 over the first half of its "
                     "first period"),
    "paper_agc": (dict(agc=AGC), f"caps each conv unit's gradient at {AGC} of its weight norm"),
    "paper_agc_warmup": (dict(agc=AGC, warmup_steps=WARMUP),
                         f"caps each conv unit's gradient at {AGC} of its weight norm and ramps "
                         "the rate up from step 0 over the first half of its first period"),
    "paper_clip1": (dict(clip_norm=1.0), "clips the whole gradient to norm 1"),
    "paper_clip1_warmup": (dict(clip_norm=1.0, warmup_steps=WARMUP),
                           "clips the whole gradient to norm 1 and ramps the rate up from step 0 "
                           "over the first half of its first period"),
}
FIXUP_REMEDY = ("fixup_lr10", dict(scalar_lr_factor=0.1),
                "trains Fixup's scalars at a tenth of the rate, as its reference code")

# What each remedy did at the paper's rate 0.05 and batch 128 on real images, with the paper's
# schedule shape (rate /10 at 50% and 83% of 1,500 steps; docs/stability.md's tables are its
# rendering, `python bench/remedies.py`). (net, blocks per stage) -> {seed: test top-1 error in %
# after the run, or "NaN @step" where its loss became non-finite}. bn: the BN twin; paper_advice:
# the paper's recipe, and where it diverged, the clip it was then advised (`--clip_norm=1`).
MEASURED = {
    ('bn', 1): {3: 13.13, 5: 13.26},
    ('paper_advice', 1): {3: 'NaN @150, then --clip_norm=1: 20.44%', 5: 'NaN @200, then --clip_norm=1: 20.13%'},
    ('paper_warmup', 1): {3: 20.45, 5: 'NaN @400'},
    ('paper_agc', 1): {3: 19.01, 5: 19.56},
    ('paper_agc_warmup', 1): {3: 21.08, 5: 22.82},
    ('paper_clip1', 1): {3: 20.44, 5: 20.13},
    ('paper_clip1_warmup', 1): {3: 23.87, 5: 21.31},
    ('fixup_lr10', 1): {3: 15.85, 5: 'NaN @100'},
    ('bn', 3): {3: 9.87, 5: 9.43},
    ('paper_advice', 3): {3: 'NaN @150, then --clip_norm=1: 14.96%', 5: 15.19},
    ('paper_warmup', 3): {3: 15.72, 5: 'NaN @300'},
    ('paper_agc', 3): {3: 16.77, 5: 17.67},
    ('paper_agc_warmup', 3): {3: 19.38, 5: 19.83},
    ('paper_clip1', 3): {3: 14.96, 5: 16.32},
    ('paper_clip1_warmup', 3): {3: 17.82, 5: 17.95},
    ('fixup_lr10', 3): {3: 'NaN @150', 5: 'NaN @100'},
    ('bn', 9): {3: 9.56, 5: 8.92},
    ('paper_advice', 9): {3: 'NaN @100, then --clip_norm=1: 14.45%', 5: 'NaN @150, then --clip_norm=1: 14.74%'},
    ('paper_warmup', 9): {3: 12.73, 5: 13.27},
    ('paper_agc', 9): {3: 17.36, 5: 16.67},
    ('paper_agc_warmup', 9): {3: 19.61, 5: 19.62},
    ('paper_clip1', 9): {3: 14.45, 5: 14.74},
    ('paper_clip1_warmup', 9): {3: 16.1, 5: 16.69},
    ('fixup_lr10', 9): {3: 'NaN @150', 5: 'NaN @150'},
}


def survived(net, blocks):
    """Whether `net` trained on two seeds or more at the measured depth for `blocks` per stage
    (the smallest measured depth at least `blocks`, else the deepest), and no seed diverged at
    any measured depth: a remedy that diverged anywhere in the sweep has not survived it."""
    depths = sorted(b for n, b in MEASURED if n == net)
    if not depths or any(isinstance(e, str) for b in depths for e in MEASURED[(net, b)].values()):
        return False
    return len(MEASURED[(net, next((b for b in depths if b >= blocks), depths[-1]))]) >= 2


# The largest stable rate without a remedy, the last resort of retry_remedy (docs/stability.md:
# Fashion-MNIST as a CIFAR-10 directory, widths 16,32,64, batch 32, 500 steps, 1, 3 and 9 blocks
# per stage). (kind, deep): deep is more than 3 blocks per stage; a shallow entry held at both 1
# and 3 (Fixup: 0.05 trained at 3 but diverged at 1, so 0.02). kind: the init without BN
# (standard and he were not measured: the paper's identity row is used), 'batch' with BN.
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


def retry_remedy(cfg: TrainConfig):
    """(flags, clause): what a diverged run of `cfg` should be re-run with, as `--flag=value`
    tokens, and what that changes, in one clause.

    The paper's net: the least invasive remedy of REMEDIES that survived at its depth (MEASURED)
    and that the run does not have yet, at the rate it was measured at (lowered to it, never
    raised). Fixup: its scalars at lr/10 if that survived. Else a lower rate (STABLE_SETTINGS),
    no higher than the largest stable one nor half the one that diverged, and half its clip if
    it clipped.
    """
    kind = "batch" if cfg.model.norm == "batch" else (
        cfg.model.init if cfg.model.init in ("fixup", "skipinit") else "identity")
    blocks = max(cfg.model.blocks_per_stage)
    candidates = {"identity": [(n, f, w) for n, (f, w) in REMEDIES.items()],
                  "fixup": [FIXUP_REMEDY]}.get(kind, [])
    for name, flags, what in candidates:
        flags = {k: warmup_rule(cfg.train_steps, cfg.lr_boundaries, cfg.lr_decay_every)
                 if v == WARMUP else v for k, v in flags.items()}
        if survived(name, blocks) and any(getattr(cfg, k) != v for k, v in flags.items()):
            if cfg.learning_rate > MEASURED_RATE:
                flags["learning_rate"] = MEASURED_RATE
                what += f", at the rate {MEASURED_RATE} it was measured at"
            return _tokens(flags), what
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
