"""The paper's recipes, each a configuration.

`cifar()` is Table 1 and Section 4 (the defaults of TrainConfig and ModelConfig); `imagenet()` is
Section 4.2 with the ResNet-34 variant of resnet_nobn/data/imagenet.py. Each takes any field of
TrainConfig or ModelConfig by keyword (`cifar(learning_rate=0.02, blocks_per_stage=1)`: the two
classes share no field name, so a keyword is one field, as a flag is on the command line).
`scaled(recipe, train_steps)` is a recipe over another number of steps with its learning-rate
drops at the same fractions of the run. run/cifar_train.py and run/imagenet_train.py differ only
by the recipe their flags default to. `optimizer(cfg)` is a recipe's Keras optimizer, for
`model.compile` (docs/library.md).

Example:

```python
import resnet_nobn
recipe = resnet_nobn.recipes.scaled(resnet_nobn.recipes.cifar(blocks_per_stage=1), 6000)
assert recipe.lr_boundaries == (3000, 5000) and recipe.model.blocks_per_stage == (1, 1, 1)
```
"""
import dataclasses

from resnet_nobn.config import ModelConfig, TrainConfig
from resnet_nobn.data.datasets import DATASETS
from resnet_nobn.options import ConfigError, check_argument, split_fields

__all__ = ["cifar", "imagenet", "optimizer", "scaled"]

# The fields of a step schedule: scaled with the run's length by `scaled`.
_SCHEDULE = ("lr_boundaries", "lr_decay_every", "warmup_steps")


def cifar(**fields) -> TrainConfig:
    """The paper's CIFAR-10 recipe (Table 1, Section 4), with `fields` changed.

    3 stages of 9 blocks of 64, 128, 256 channels; SGD with momentum 0.9, batch 128, weight decay
    1e-4, learning rate 0.05 divided by 10 at steps 30k and 50k, 60k steps: the defaults of
    `TrainConfig` and `ModelConfig`.

    Args:
        **fields: any `TrainConfig` or `ModelConfig` field, by name (a model field goes to the
            recipe's `model`, or to `model=`), checked as the config checks it. `train_steps`
            at or below a drop of the rate (30k, 50k) is refused unless `lr_boundaries` is
            given too: use `scaled` for the paper's schedule over fewer steps.

    Returns:
        The recipe's `TrainConfig`.

    Raises:
        ConfigError: for a value a field refuses, naming it (`TrainConfig.learning_rate`).
        TypeError: for a keyword that is no field, naming the nearest field.

    Example:

    ```python
    import resnet_nobn
    recipe = resnet_nobn.recipes.cifar(learning_rate=0.02, widths=(16, 32, 64),
                                       blocks_per_stage=1)
    assert recipe.learning_rate == 0.02 and recipe.model.blocks_per_stage == (1, 1, 1)
    short = resnet_nobn.recipes.scaled(resnet_nobn.recipes.cifar(), 600)
    assert short.lr_boundaries == (300, 500)
    ```
    """
    return _made("cifar", {}, {}, fields)


def imagenet(**fields) -> TrainConfig:
    """The paper's ImageNet recipe (Section 4.2), with `fields` changed.

    The all-convolutional ResNet-34 variant (resnet_nobn/data/imagenet.py): 4 stages of 3, 4, 6,
    3 blocks of 84 to 672 channels; global batch 256, learning rate 0.1 times 0.94 every two
    epochs, 700k steps. One epoch is 1,281,167 / 256 = 5,004.56 steps, so the rate is multiplied
    by 0.94 every 10,009 steps. Momentum 0.9 and weight decay 1e-4 as for CIFAR.

    Args:
        **fields: any `TrainConfig` or `ModelConfig` field, by name (a model field goes to the
            recipe's `model`, or to `model=`), checked as the config checks it. `train_steps`
            at or below the decay period (10,009) is refused unless `lr_decay_every` is given
            too: use `scaled` for the paper's schedule over fewer steps.

    Returns:
        The recipe's `TrainConfig`.

    Raises:
        ConfigError: for a value a field refuses, naming it (`TrainConfig.batch_size`).
        TypeError: for a keyword that is no field, naming the nearest field.

    Example:

    ```python
    import resnet_nobn
    recipe = resnet_nobn.recipes.imagenet(batch_size=512, learning_rate=0.2)
    assert recipe.model.widths == (84, 168, 336, 672) and recipe.batch_size == 512
    ```
    """
    info = DATASETS["imagenet2012"]
    model = dict(num_classes=info.num_classes, image_size=info.image_size,
                 widths=(84, 168, 336, 672), blocks_per_stage=(3, 4, 6, 3), strides=(2, 2, 2, 2),
                 stem_width=84, stem_kernel=7, stem_stride=2)
    train = dict(dataset=info.name, batch_size=256, learning_rate=0.1, lr_boundaries=(),
                 lr_decay_factor=0.94, lr_decay_every=int(2 * info.num_train / 256),
                 train_steps=700_000, eval_every=10_000)
    return _made("imagenet", model, train, fields)


def _made(name, model, train, fields):
    """Recipe `name`'s TrainConfig: its `model` and `train` values over the classes' defaults,
    `fields` over those, made as the configs make them (so `init="fixup"` brings Fixup's head and
    rate factor, as the flag does)."""
    called = f"recipes.{name}"
    train_given, model_given = split_fields(called, fields, (TrainConfig, ModelConfig))
    if "model" in train_given:  # the fields of the model given, on it
        train_given["model"] = train_given["model"].replace(**model_given)
    else:
        train_given["model"] = ModelConfig(**{**model, **model_given})
    recipe = TrainConfig(**{**train, **train_given})
    if "train_steps" in fields and not set(_SCHEDULE[:2]) & set(fields) and _beyond(recipe):
        rest = {k: v for k, v in fields.items() if k != "train_steps"}
        raise _beyond_error(called, fields, recipe, _made(name, model, train, rest))
    return recipe


def _beyond(recipe):
    """Whether a step of `recipe`'s schedule (a drop, or the first decay) is at or beyond its
    last step: the rate would not drop there during the run."""
    if recipe.lr_decay_every > 0:
        return recipe.lr_decay_every >= recipe.train_steps
    return any(b >= recipe.train_steps for b in recipe.lr_boundaries)


def _beyond_error(called, fields, recipe, paper):
    """The refusal of `called(**fields)` (`recipe`) whose train_steps leaves the schedule beyond
    the run: it names the scaled recipe (`paper`: the same without train_steps), or the least
    number of steps it scales to."""
    n = recipe.train_steps
    if recipe.lr_decay_every > 0:
        what, field = (f"decay period (--lr_decay_every={recipe.lr_decay_every}) comes",
                       "lr_decay_every")
        constant = "lr_decay_every=0"
    else:
        steps = ",".join(map(str, recipe.lr_boundaries))
        what, field, constant = (f"learning-rate drops (--lr_boundaries={steps}) come",
                                 "lr_boundaries", "lr_boundaries=()")
    rest = ", ".join(f"{k}={v!r}" for k, v in fields.items() if k != "train_steps")
    least = _least_steps(paper, n)
    scaled_call = f"resnet_nobn.recipes.scaled(resnet_nobn.{called}({rest}), {n})"
    fix = (f"for the paper's schedule over {n} steps use {scaled_call} "
           f"({_schedule_text(scaled(paper, n))})" if least == n else
           f"the paper's schedule scaled (recipes.scaled) needs at least {least} steps")
    given = f"{called}({', '.join(f'{k}={v!r}' for k, v in fields.items())})"
    return ConfigError(f"{given}: the recipe's {what} at or after the run's last step "
                       f"(--train_steps={n}), so the rate would not drop as in the paper; "
                       f"{fix}; or give {field} too ({constant} for a constant rate)",
                       (TrainConfig,))


def _least_steps(recipe, n):
    """The least number of steps, `n` or more, that `recipe`'s schedule scales to
    (`_scaled_schedule`); its own `train_steps` at most."""
    return next(m for m in range(n, recipe.train_steps + 1)
                if _scaled_schedule(recipe, m) is not None)


def _schedule_text(recipe):
    if recipe.lr_decay_every > 0:
        return f"the rate decayed every {recipe.lr_decay_every} steps"
    return f"drops at steps {', '.join(map(str, recipe.lr_boundaries))}"


def scaled(recipe: TrainConfig, train_steps: int) -> TrainConfig:
    """`recipe` over `train_steps` steps, its learning-rate schedule scaled with it.

    Each step of the schedule (the drops `lr_boundaries`, the decay period `lr_decay_every`,
    `warmup_steps`) is moved to the same fraction of the run, rounded to a step: the paper's CIFAR
    drops at 30k/60k and 50k/60k of the steps, ImageNet's decay every 10,009/700k of them. Every
    other field is the recipe's.

    Args:
        recipe: TrainConfig. The recipe to scale, e.g. `recipes.cifar()`; its schedule must lie
            within its own `train_steps`.
        train_steps: int. The number of steps of the scaled run.

    Returns:
        A new `TrainConfig` with `train_steps` and the schedule's steps scaled.

    Raises:
        ConfigError: for `train_steps` too few for the schedule's steps to fall on distinct steps
            within the run (it says how many are needed), or a recipe whose schedule lies beyond
            its own `train_steps`.
        TypeError: for a `recipe` that is no TrainConfig.

    Example:

    ```python
    import resnet_nobn
    short = resnet_nobn.recipes.scaled(resnet_nobn.recipes.cifar(), 6000)
    assert (short.train_steps, short.lr_boundaries) == (6000, (3000, 5000))
    assert resnet_nobn.recipes.scaled(resnet_nobn.recipes.imagenet(), 7000).lr_decay_every == 100
    ```
    """
    if not isinstance(recipe, TrainConfig):
        raise TypeError(f"recipes.scaled takes a TrainConfig, not a {type(recipe).__name__}; "
                        "e.g. resnet_nobn.recipes.scaled(resnet_nobn.recipes.cifar(), 6000)")
    called = {"train_steps": "recipes.scaled's train_steps"}
    check_argument(TrainConfig, "train_steps", train_steps, called["train_steps"])
    if _beyond(recipe):
        raise ConfigError(f"the recipe's schedule ({_schedule_text(recipe)}) lies beyond its own "
                          f"--train_steps={recipe.train_steps}, so it has no fraction of the run "
                          "to keep; scale a recipe whose rate drops during its run, e.g. "
                          "resnet_nobn.recipes.cifar()", (TrainConfig,))
    schedule = _scaled_schedule(recipe, train_steps)
    if schedule is None:
        least = _least_steps(recipe, train_steps)
        raise ConfigError(f"--train_steps={train_steps} is too few for the recipe's schedule "
                          f"({_schedule_text(recipe)} of {recipe.train_steps}) to fall on "
                          f"distinct steps within the run; give at least {least}", (called,))
    return dataclasses.replace(recipe, train_steps=train_steps, **schedule)


def _scaled_schedule(recipe, n):
    """The schedule fields of `recipe` scaled to `n` steps (each rounded to the nearest step), or
    None where they do not fall on distinct steps within the run."""
    total = recipe.train_steps

    def at(step):  # round half up, in integers
        return (2 * step * n + total) // (2 * total)
    boundaries = tuple(at(b) for b in recipe.lr_boundaries)
    every = at(recipe.lr_decay_every) if recipe.lr_decay_every else 0
    ok = (all(0 < b < n for b in boundaries) and len(set(boundaries)) == len(boundaries)
          and (recipe.lr_decay_every == 0 or 0 < every < n))
    return dict(lr_boundaries=boundaries, lr_decay_every=every,
                warmup_steps=at(recipe.warmup_steps)) if ok else None


def optimizer(cfg: TrainConfig = None):
    """The paper's optimizer for a recipe, for `model.compile`.

    Keras SGD with the recipe's momentum (0.9) and its step schedule (`resnet_nobn.StepSchedule`:
    a registered, serializable LearningRateSchedule, so a compiled model saves and loads as
    `.keras`), and the recipe's `clip_norm` as Keras' `global_clipnorm` (on one device the
    trainer's clip; with several replicas Keras clips each replica's gradient). The weight decay
    is not here: the model carries it (`build_model(..., weight_decay=)`, in `model.losses`).
    Loads Keras.

    Args:
        cfg: TrainConfig. The recipe whose momentum and schedule to use; default: `cifar()`.

    Returns:
        A `keras.optimizers.SGD`.

    Raises:
        TypeError: for a `cfg` that is no TrainConfig (a ModelConfig, say).
        ValueError: for a recipe with `agc` (adaptive clipping, which Keras' SGD has not: train
            it with `resnet_nobn.train`).

    Example:

    ```python
    import resnet_nobn
    recipe = resnet_nobn.recipes.scaled(resnet_nobn.recipes.cifar(), 600)
    sgd = resnet_nobn.recipes.optimizer(recipe)
    assert abs(float(sgd.learning_rate) - 0.05) < 1e-7   # float32
    ```
    """
    if cfg is None:
        cfg = cifar()
    if not isinstance(cfg, TrainConfig):
        raise TypeError("recipes.optimizer takes a TrainConfig (its momentum and learning-rate "
                        f"schedule), not a {type(cfg).__name__}; e.g. resnet_nobn.recipes.cifar()")
    if cfg.agc > 0:
        raise ValueError(f"recipes.optimizer: the recipe's agc={cfg.agc} (adaptive gradient "
                         "clipping) is no Keras optimizer's; give agc=0 (clip_norm= clips in "
                         "Keras too) or train with resnet_nobn.train")
    import keras

    from resnet_nobn.schedule import StepSchedule
    return keras.optimizers.SGD(learning_rate=StepSchedule.of(cfg), momentum=cfg.momentum,
                                global_clipnorm=cfg.clip_norm or None)
