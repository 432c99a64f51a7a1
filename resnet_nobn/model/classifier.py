"""The network with its preprocessing, as one Keras model that takes raw pixels:
`resnet_nobn.ImageClassifier`.

Raw images in (uint8, or float 0..255; any batch size): made the network's image_size x
image_size x 3 by `ToNetwork` (zero padding evenly on each side and a grey channel copied to three,
the input pipeline's own rule: resnet_nobn/data/datasets.py `network_padding`, so Fashion-MNIST's
28x28x1 images and the 32x32x3 ones `resnet_nobn.load_dataset` gives are both taken), standardised
(`resnet_nobn.Standardize`: per image, or a dataset's mean and std), then the network of
resnet_nobn/model/network.py; logits out. Compiled with the paper's recipe (SGD with momentum and
the step schedule, weight decay in `model.losses`), as keras-hub's tasks are with theirs. Every
layer is `keras.ops`: it builds, trains and saves on any Keras backend, and a saved `.keras` file
loads after `import resnet_nobn` alone.
"""
import dataclasses
import json

import keras
from keras import layers, ops

from resnet_nobn import recipes
from resnet_nobn.config import ModelConfig, TrainConfig
from resnet_nobn.data.datasets import DATASETS, network_padding
from resnet_nobn.model.network import build_model
from resnet_nobn.model.standardize import Standardize


@keras.saving.register_keras_serializable(package="resnet_nobn")
class ToNetwork(layers.Layer):
    """Raw images [N, H, W, C] to the network's [N, size, size, 3], as the input pipeline makes
    them (resnet_nobn/data/cifar.py `to_network`): zero-padded evenly to size x size
    (`network_padding`) where smaller, a grey channel (C = 1) copied to three. Images of the
    network's size and 3 channels pass unchanged.

    Args:
        image_size: the network's input size (`ModelConfig.image_size`).

    Returns:
        A Keras layer; called on images, their network form, same dtype.

    Examples:

    ```python
    import numpy as np, resnet_nobn.model.classifier as c
    assert c.ToNetwork(32)(np.zeros((2, 28, 28, 1), "uint8")).shape == (2, 32, 32, 3)
    ```
    """

    def __init__(self, image_size, **kwargs):
        super().__init__(**kwargs)
        self.image_size = int(image_size)

    def call(self, images):
        _, height, width, channels = ops.shape(images)  # ints where known, else tensors
        if isinstance(channels, int) and channels not in (1, 3):
            raise ValueError(f"{self.name}: images have {channels} channels; give 3 (RGB) or 1 "
                             "(grey)")
        (top, bottom), (left, right) = network_padding(height, width, self.image_size)
        if not all(isinstance(p, int) and p == 0 for p in (top, bottom, left, right)):
            images = ops.pad(images, [[0, 0], [top, bottom], [left, right], [0, 0]])
        if not (isinstance(channels, int) and channels == 3):  # 1, or a graph's unknown: grey
            images = ops.broadcast_to(images, (ops.shape(images)[0], self.image_size,
                                               self.image_size, 3))
        return images

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.image_size, self.image_size, 3)

    def get_config(self):
        return {**super().get_config(), "image_size": self.image_size}


def _model_config(config, dataset):
    """The ModelConfig of an ImageClassifier of `dataset`, checked: TypeError for no ModelConfig,
    ValueError for a dataset it does not take or classes that are not the dataset's."""
    if dataset not in DATASETS or not DATASETS[dataset].pixels:
        choices = ", ".join(n for n, d in DATASETS.items() if d.pixels)
        raise ValueError(f"ImageClassifier: dataset={dataset!r} must be one of {choices}; for "
                         "ImageNet use resnet_nobn.build_model(resnet_nobn.recipes.imagenet()"
                         ".model) behind resnet_nobn.load_dataset('imagenet2012')'s "
                         "preprocessed images")
    info = DATASETS[dataset]
    if config is None:
        config = ModelConfig(num_classes=info.num_classes or ModelConfig.num_classes)
    if not isinstance(config, ModelConfig):
        raise TypeError(f"ImageClassifier: config must be a resnet_nobn.ModelConfig, not a "
                        f"{type(config).__name__}")
    if info.num_classes and config.num_classes != info.num_classes:
        raise ValueError(f"ImageClassifier: config.num_classes={config.num_classes}, and "
                         f"{dataset} has {info.num_classes} classes; give "
                         f"num_classes={info.num_classes}")
    if config.image_size != info.image_size:
        raise ValueError(f"ImageClassifier: config.image_size={config.image_size}, and the "
                         f"network of {dataset} takes {info.image_size}x{info.image_size} images")
    return config


@keras.saving.register_keras_serializable(package="resnet_nobn")
class ImageClassifier(keras.Model):
    """The paper's network with its preprocessing: raw pixels in, logits out, compiled with the
    paper's recipe.

    `ToNetwork` (Fashion-MNIST's 28x28 grey to 32x32x3, as the command line does), then
    `resnet_nobn.Standardize` (per image; or `mean` and `std` per channel, as
    `--standardize=dataset`), then `resnet_nobn.build_model(config, seed, recipe.weight_decay)`.
    Compiled (`compile()`'s "auto") with `resnet_nobn.recipes.optimizer(recipe)`,
    `SparseCategoricalCrossentropy(from_logits=True)` and accuracy; compile it again to change
    any of them. Saved with `model.save("x.keras")`, it loads in a fresh process with
    `keras.saving.load_model("x.keras")` once `resnet_nobn` is imported (no custom_objects).

    Args:
        config: the network, a `resnet_nobn.ModelConfig` (default: the paper's, with the
            dataset's number of classes).
        dataset: the images it takes: `"cifar10"`, `"cifar100"`, `"fashion_mnist"` or
            `"image_folder"` (its classes: `config.num_classes`). ImageNet is not one: its
            input is preprocessed files, not pixels (see `resnet_nobn.load_dataset`).
        recipe: the `resnet_nobn.TrainConfig` whose optimizer, schedule and weight decay it is
            compiled with (default: `resnet_nobn.recipes.cifar()`).
        seed: the seed of the network's initial weights (`build_model`'s).
        mean, std: per-channel standardisation (pixel units, 0..255) instead of per image.
        compile: whether to compile it now (keras-hub's tasks' argument); False for a model
            only to predict or to save without an optimizer (an export's model.keras).
        **kwargs: `keras.Model`'s, e.g. `name`.

    Returns:
        A compiled `keras.Model` of raw images [N, H, W, C] (uint8 or float 0..255) to logits
        [N, num_classes].

    Examples:

    ```python
    import numpy as np, resnet_nobn
    config = resnet_nobn.ModelConfig(widths=(8, 16, 32), blocks_per_stage=1, stem_width=8)
    model = resnet_nobn.ImageClassifier(config, dataset="fashion_mnist")
    x = np.random.default_rng(0).integers(0, 256, (16, 28, 28, 1), dtype="uint8")
    model.fit(x, np.arange(16) % 10, batch_size=8, epochs=1, verbose=0)
    assert model.predict(x, verbose=0).shape == (16, 10)
    ```
    """

    def __init__(self, config=None, dataset="cifar10", recipe=None, seed=0, mean=None, std=None,
                 compile=True, **kwargs):
        config = _model_config(config, dataset)
        recipe = recipes.cifar() if recipe is None else recipe
        if not isinstance(recipe, TrainConfig):
            raise TypeError(f"ImageClassifier: recipe must be a resnet_nobn.TrainConfig, not a "
                            f"{type(recipe).__name__}; e.g. resnet_nobn.recipes.cifar()")
        network = build_model(config, seed=seed, weight_decay=recipe.weight_decay)
        images = keras.Input((None, None, None), name="images")
        standardized = Standardize(mean, std, name="standardize")(
            ToNetwork(config.image_size, name="to_network")(images))
        super().__init__(images, network(standardized), **kwargs)
        self.config, self.dataset, self.recipe, self.seed = config, dataset, recipe, seed
        if compile:
            self.compile()

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """Compiles the model; "auto" is the recipe's (`recipes.optimizer(recipe)`, sparse
        cross-entropy of logits, accuracy).

        Args:
            optimizer, loss, metrics: as `keras.Model.compile`'s, or "auto".
            **kwargs: `keras.Model.compile`'s others.

        Returns:
            None.

        Examples:

        ```python
        import keras, resnet_nobn
        config = resnet_nobn.ModelConfig(widths=(8, 16, 32), blocks_per_stage=1, stem_width=8)
        model = resnet_nobn.ImageClassifier(config)
        model.compile(optimizer=keras.optimizers.Adam(1e-3))  # the recipe's loss and metrics
        ```
        """
        def auto(value):
            return isinstance(value, str) and value == "auto"
        super().compile(
            optimizer=recipes.optimizer(self.recipe) if auto(optimizer) else optimizer,
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True) if auto(loss)
            else loss,
            metrics=["accuracy"] if auto(metrics) else metrics, **kwargs)

    def compile_from_config(self, config):
        """Compiles a loaded model as it was saved (Keras' own, which skips a custom `compile`),
        its optimizer built so that its saved state loads. Keras calls it on loading.

        Args:
            config: the `compile` arguments Keras saved (`get_compile_config()`).

        Returns:
            None.

        Examples:

        ```python
        import resnet_nobn
        model = resnet_nobn.ImageClassifier.from_preset(
            "cifar10", widths=(8, 16, 32), blocks_per_stage=1, stem_width=8)
        other = resnet_nobn.ImageClassifier(model.config, compile=False)
        other.compile_from_config(model.get_compile_config())
        assert other.optimizer.momentum == 0.9
        ```
        """
        self.compile(**keras.saving.deserialize_keras_object(config))
        self.optimizer.build(self.trainable_variables)

    @classmethod
    def from_preset(cls, dataset, recipe=None, seed=0, **fields):
        """The classifier of `dataset` with the network of the CIFAR recipe (Table 1), any of
        its `ModelConfig` fields changed.

        Args:
            dataset: `"cifar10"`, `"cifar100"`, `"fashion_mnist"` or `"image_folder"`.
            recipe: as `ImageClassifier`'s.
            seed: as `ImageClassifier`'s.
            **fields: `ModelConfig` fields, e.g. `widths=(16, 32, 64), blocks_per_stage=1`
                (an image folder's `num_classes`).

        Returns:
            A compiled `ImageClassifier`.

        Examples:

        ```python
        import resnet_nobn
        model = resnet_nobn.ImageClassifier.from_preset(
            "fashion_mnist", widths=(16, 32, 64), blocks_per_stage=1)
        assert model.output_shape == (None, 10)
        ```
        """
        num_classes = DATASETS[dataset].num_classes if dataset in DATASETS else None
        config = ModelConfig(**{"num_classes": num_classes or ModelConfig.num_classes, **fields})
        return cls(config, dataset=dataset, recipe=recipe, seed=seed)

    @property
    def backbone(self):
        """The classifier without its head: raw images to the pooled features, the layers (and
        weights) the classifier's own, tf.keras.applications' `include_top=False`; a new
        `keras.Model` each time it is read, its layers shared.

        Returns:
            A `keras.Model` of raw images to features [N, config.widths[-1]].

        Examples:

        ```python
        import numpy as np, resnet_nobn
        model = resnet_nobn.ImageClassifier.from_preset(
            "cifar10", widths=(8, 16, 32), blocks_per_stage=1, stem_width=8)
        assert model.backbone.predict(np.zeros((2, 32, 32, 3), "uint8"), verbose=0).shape == (2, 32)
        ```
        """
        network = self.layers[-1]
        features = keras.Model(network.inputs, network.get_layer("pool").output, name="features")
        return keras.Model(self.inputs, features(self.get_layer("standardize").output),
                           name="backbone")

    def get_config(self):
        """What `from_config` rebuilds the classifier from (its weights are saved apart):
        Keras' `.keras` files hold it.

        Returns:
            A JSON-serializable dict: the dataset, the `ModelConfig` and recipe as dicts, the
            seed, and the standardisation's `mean` and `std` (None: per image).

        Examples:

        ```python
        import resnet_nobn
        model = resnet_nobn.ImageClassifier.from_preset(
            "cifar10", widths=(8, 16, 32), blocks_per_stage=1, stem_width=8)
        assert model.get_config()["config"]["widths"] == [8, 16, 32]
        ```
        """
        return {"name": self.name, "trainable": self.trainable, "dataset": self.dataset,
                "config": json.loads(json.dumps(dataclasses.asdict(self.config))),
                "recipe": self.recipe.to_json(), "seed": self.seed,
                "mean": self.get_layer("standardize").mean,
                "std": self.get_layer("standardize").std}

    @classmethod
    def from_config(cls, config):
        """The classifier `get_config` describes, with new initial weights (Keras then loads the
        saved ones), uncompiled (Keras then compiles it as saved: `compile_from_config`).

        Args:
            config: a dict of `get_config`.

        Returns:
            An `ImageClassifier`.

        Examples:

        ```python
        import resnet_nobn
        model = resnet_nobn.ImageClassifier.from_preset(
            "cifar10", widths=(8, 16, 32), blocks_per_stage=1, stem_width=8)
        again = resnet_nobn.ImageClassifier.from_config(model.get_config())
        assert again.config == model.config
        ```
        """
        config = dict(config)
        config["config"] = ModelConfig(**config["config"])
        config["recipe"] = TrainConfig.from_json(config["recipe"])
        # compiled as saved (`compile_from_config`), or not at all where it was saved uncompiled
        return cls(**config, compile=False)
