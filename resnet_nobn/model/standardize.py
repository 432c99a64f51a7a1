"""The network's input standardisation as a Keras layer, which a user puts in front of the model.

The trainer standardises each image in its input pipeline (resnet_nobn/data/cifar.py:
`tf.image.per_image_standardization`, zero mean and unit variance over the image's pixels and
channels, the standard deviation floored at 1/sqrt(pixels x channels)); `Standardize()` computes
the same with keras.ops, on any backend (equal to float tolerance; on TensorFlow bit for bit).
Given `mean` and `std` (one per channel, e.g. a dataset's), it computes `(x - mean) / std` instead.
"""
import math
import numbers

import keras
from keras import ops, layers


@keras.saving.register_keras_serializable(package="resnet_nobn")
class Standardize(layers.Layer):
    """Images [N, H, W, C] (any numeric dtype, e.g. uint8 pixels) to what the network takes.

    Float32 images, standardised per image by default (as the trainer's input pipeline does),
    or `(x - mean) / std` per channel with `mean` and `std`. Put it in front of the model:
    `keras.Sequential([resnet_nobn.Standardize(), model])`. A ValueError names a mean or std that
    is not finite, a std that is not positive, or lists of other lengths.

    Args:
        mean: float or list of floats. One number for every channel, or one per channel (a list,
            a tuple or a numpy array); default: None (per-image standardisation).
        std: float or list of floats. Likewise; positive. Given with `mean`, or not at all.
        **kwargs: the arguments of `keras.layers.Layer` (`name`, ...).

    Example:

    ```python
    import numpy as np
    import resnet_nobn
    images = np.random.randint(0, 256, (2, 8, 8, 3), dtype="uint8")
    x = resnet_nobn.Standardize()(images)                  # per image: mean 0, std 1
    y = resnet_nobn.Standardize(mean=[125.3, 123.0, 113.9], std=[63.0, 62.1, 66.7])(images)
    assert x.shape == y.shape == (2, 8, 8, 3)
    ```
    """

    def __init__(self, mean=None, std=None, **kwargs):
        super().__init__(**{"dtype": "float32", **kwargs})
        if (mean is None) != (std is None):
            raise ValueError("Standardize takes both mean and std (per channel), or neither "
                             "(per-image standardization)")
        self.mean, self.std = (None, None) if mean is None else moments(mean, std)

    def build(self, input_shape):
        """Checks that `mean` and `std` have one number per channel of the images (Keras calls
        it on the first images).

        Args:
            input_shape: tuple. The images' shape, [N, H, W, C].

        Example:

        ```python
        import resnet_nobn
        layer = resnet_nobn.Standardize(mean=[0.5] * 3, std=[0.2] * 3)
        layer.build((None, 8, 8, 3))   # a 1-channel shape would be a ValueError
        ```
        """
        channels = input_shape[-1] if input_shape else None
        sizes = {len(v) for v in (self.mean, self.std) if isinstance(v, list)}
        if channels is not None and sizes - {channels}:
            raise ValueError(f"Standardize: mean and std have {sizes.pop()} numbers (one per "
                             f"channel), and the images have {channels} channels; give "
                             f"{channels} of each, or one number for all")
        super().build(input_shape)

    def call(self, x):
        """The standardised images (what calling the layer computes).

        Args:
            x: tensor [N, H, W, C] of any numeric dtype.

        Returns:
            The float32 tensor of the same shape.

        Example:

        ```python
        import numpy as np
        import resnet_nobn
        out = resnet_nobn.Standardize()(np.ones((1, 4, 4, 3), "float32"))
        assert float(np.abs(np.asarray(out)).max()) == 0.0   # a flat image: all zero
        ```
        """
        x = ops.cast(x, "float32")
        if self.mean is not None:
            return (x - ops.convert_to_tensor(self.mean, "float32")) / ops.convert_to_tensor(
                self.std, "float32")
        axes = [-1, -2, -3]
        size = ops.cast(ops.prod(ops.shape(x)[-3:]), "float32")
        mean = ops.mean(x, axis=axes, keepdims=True)
        std = ops.sqrt(ops.mean(ops.square(x - mean), axis=axes, keepdims=True))
        return (x - mean) / ops.maximum(std, ops.rsqrt(size))

    def compute_output_shape(self, input_shape):
        """The output's shape: the input's.

        Args:
            input_shape: tuple. The images' shape.

        Returns:
            The same shape.

        Example:

        ```python
        import resnet_nobn
        assert resnet_nobn.Standardize().compute_output_shape((2, 8, 8, 3)) == (2, 8, 8, 3)
        ```
        """
        return input_shape

    def get_config(self):
        """The layer's config, for Keras' serialization: the Layer's, with `mean` and `std`.

        Returns:
            A dict; `Standardize.from_config(config)` makes the same layer.

        Example:

        ```python
        import resnet_nobn
        config = resnet_nobn.Standardize(mean=0.5, std=0.25).get_config()
        assert (config["mean"], config["std"]) == (0.5, 0.25)
        ```
        """
        return {**super().get_config(), "mean": self.mean, "std": self.std}


def moments(mean, std):
    """`Standardize`'s mean and std as it keeps them (get_config's JSON): each one float, or a
    list of floats, one per channel (from a number, a list, a tuple or a numpy array). ValueError
    naming the argument unless every value is a finite number, every std positive, and two
    lists are as long."""
    values = {}
    for name, value in (("mean", mean), ("std", std)):
        flat = value.tolist() if hasattr(value, "tolist") else value  # numpy: Python numbers
        items = list(flat) if isinstance(flat, (list, tuple)) else [flat]
        if not items or not all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                                for v in items):
            raise ValueError(f"Standardize: {name} must be a number or one number per channel "
                             f"(a list or an array), not {value!r}")
        if not all(math.isfinite(v) for v in items):
            raise ValueError(f"Standardize: {name} must be finite, got {value!r}")
        if name == "std" and min(items) <= 0:
            raise ValueError(f"Standardize: std must be positive, got {value!r}")
        values[name] = [float(v) for v in items] if isinstance(flat, (list, tuple)) else float(flat)
    mean, std = values["mean"], values["std"]
    if isinstance(mean, list) and isinstance(std, list) and len(mean) != len(std):
        raise ValueError(f"Standardize: mean has {len(mean)} numbers and std {len(std)}; give "
                         "one of each per channel")
    return mean, std
