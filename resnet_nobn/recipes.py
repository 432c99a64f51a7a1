"""The paper's recipes, each a configuration.

`cifar()` is Table 1 and Section 4 (the defaults of TrainConfig and ModelConfig); `imagenet()` is
Section 4.2 with the ResNet-34 variant of resnet_nobn/data/imagenet.py. run/cifar_train.py and
run/imagenet_train.py differ only by the recipe their flags default to. `optimizer(cfg)` is a
recipe's Keras optimizer, for `model.compile` (docs/library.md).
"""
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
