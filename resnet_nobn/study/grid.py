"""A study's grid: its configurations, one per point of the product of the factor values, and the
names of their run directories (the layout: resnet_nobn/study/launcher.py).
"""
import dataclasses
import itertools
import os
import sys

from resnet_nobn import cli
from resnet_nobn.config import RESUMABLE_FIELDS, differences, resolve_init
from resnet_nobn.files import read_json
from resnet_nobn.training import recovery
from resnet_nobn.training.rundir import CONFIG, RESULTS


def blocks_text(blocks):
    """--blocks_per_stage as a study names it: (1, 1, 1) -> '1'; (3, 4, 6, 3) -> '3-4-6-3'."""
    return cli.blocks_text(blocks, sep="-")


def parse_blocks(text, num_stages):
    """A --vary_blocks value: '3' -> (3,)*num_stages; '3:4:6:3' or '3-4-6-3' -> (3, 4, 6, 3)
    (resnet_nobn/cli.py: `parse_blocks`); ValueError unless 1 or `num_stages` positive entries."""
    parts = cli.parse_blocks(text, num_stages)
    if len(parts) != num_stages or min(parts) < 1:
        raise ValueError(f"blocks_per_stage value {text!r} needs 1 or {num_stages} positive entries")
    return parts


# factors named in a run's directory only if its study varies them
OPTIONAL = ("relu_leakiness", "learning_rate")


def run_name(cfg, named=()):
    """ROOT-relative directory of a run: <dataset>/<configuration>/seed-<k>; `named` lists the
    OPTIONAL factors the study varies, named in it too."""
    m = cfg.model
    extra = "".join(f"_{tag}-{value}" for tag, key, value in (
        ("leak", "relu_leakiness", m.relu_leakiness), ("lr", "learning_rate", cfg.learning_rate))
        if key in named)
    return os.path.join(cfg.dataset, f"norm-{m.norm}_init-{m.init}_head-{m.head}_"
                        f"blocks-{blocks_text(m.blocks_per_stage)}{extra}", f"seed-{cfg.seed}")


def make_grid(base, root, norms, inits, heads, blocks, seeds, leakiness=None, learning_rates=None):
    """The study's TrainConfigs, one per point of the product of the factor values.

    `base` is the TrainConfig of the base flags; `inits` may hold 'auto'; `blocks` holds tuples;
    `leakiness` and `learning_rates` (None: the base's) are varied only when given. Points that
    resolve to the same configuration (e.g. init auto and identity) or cannot exist (Fixup or
    SkipInit with BN) appear once or not at all. Runs are ordered seed by seed, so the first seed
    of every configuration comes first.
    """
    named = [k for k, v in (("relu_leakiness", leakiness), ("learning_rate", learning_rates)) if v]
    leakiness = leakiness or [base.model.relu_leakiness]
    learning_rates = learning_rates or [base.learning_rate]
    configs, seen = [], set()
    # the base's own factor for each init, unless the base flags set another (config.py)
    own = dataclasses.replace(base, scalar_lr_factor=None).scalar_lr_factor
    scalar_lr_factor = None if base.scalar_lr_factor == own else base.scalar_lr_factor
    # seed-major: a study stopped half-way has every configuration with its first seeds
    for seed, norm, init, head, bps, leak, lr in itertools.product(
            seeds, norms, inits, heads, blocks, leakiness, learning_rates):
        if norm == "batch" and init in ("fixup", "skipinit"):
            continue
        init = resolve_init(init, norm)
        model = dataclasses.replace(base.model, norm=norm, init=init,
                                    head=head, blocks_per_stage=tuple(bps),
                                    relu_leakiness=float(leak))
        cfg = dataclasses.replace(base, model=model, seed=int(seed), model_dir="",
                                  learning_rate=float(lr), scalar_lr_factor=scalar_lr_factor)
        cfg = dataclasses.replace(cfg, model_dir=_run_dir(cfg, root, named))
        if cfg.model_dir not in seen:
            seen.add(cfg.model_dir)
            configs.append(cfg)
    return configs


def _run_dir(cfg, root, named):
    """ROOT/run_name(cfg, named), or the directory in which a study that named other OPTIONAL
    factors (one run with --vary_learning_rate, one without) has the same run: a run is trained
    once, and counted once in the report."""
    names = [run_name(cfg, named)] + [run_name(cfg, n) for k in range(len(OPTIONAL) + 1)
                                      for n in itertools.combinations(OPTIONAL, k)]
    for name in names:
        path = os.path.join(root, name)
        old = read_json(os.path.join(path, CONFIG))
        try:
            diffs = differences(recovery.as_started(old, read_json(
                os.path.join(path, RESULTS))), cfg.to_json()) if old else None
        except ValueError:  # not a run's config.json: check_compatible says so
            diffs = None
        if diffs is not None and all(k in RESUMABLE_FIELDS + ("eval_only",) for k, _, _ in diffs):
            return path
    return os.path.join(root, names[0])


def factor_args(cfg):
    """The command-line flags that set a run's factors and directory."""
    m = cfg.model
    return [f"--norm={m.norm}", f"--init={m.init}", f"--head={m.head}",
            f"--blocks_per_stage={cli.flag_text(m.blocks_per_stage)}",
            f"--relu_leakiness={m.relu_leakiness}", f"--learning_rate={cfg.learning_rate}",
            f"--seed={cfg.seed}", f"--model_dir={cfg.model_dir}"]


def command(cfg, entry, base_args, python=None):
    """The subprocess command of one run: the entry point, the base flags, then the factors."""
    return [python or sys.executable, entry] + list(base_args) + factor_args(cfg)
