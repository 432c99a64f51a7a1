"""The network's input standardisation as a Keras layer, which a user puts in front of the model.

The trainer standardises each image in its input pipeline (resnet_nobn/data/cifar.py:
`tf.image.per_image_standardization`, zero mean and unit variance over the image's pixels and
channels, the standard deviation floored at 1/sqrt(pixels x channels)); `Standardize()` computes
the same with keras.ops, on any backend (equal to float tolerance; on TensorFlow bit for bit).
Given `mean` and `std` (one per channel, e.g. a dataset's), it computes `(x - mean) / std` instead.
"""
import keras
from keras import ops, layers


@keras.saving.register_keras_serializable(package="resnet_nobn")
class Standardize(layers.Layer):
    """Images [N, H, W, C] (any numeric dtype, e.g. uint8 pixels) to what the network takes,
    float32: per image by default; `(x - mean) / std` per channel with `mean` and `std` (lists
    of C numbers, or scalars). Put it in front of the model:
    `keras.Sequential([resnet_nobn.Standardize(), model])`."""

    def __init__(self, mean=None, std=None, **kwargs):
        super().__init__(**{"dtype": "float32", **kwargs})
        if (mean is None) != (std is None):
            raise ValueError("Standardize takes both mean and std (per channel), or neither "
                             "(per-image standardization)")
        if std is not None and min(std if isinstance(std, (list, tuple)) else [std]) <= 0:
            raise ValueError(f"Standardize: std must be positive, got {std}")
        self.mean, self.std = mean, std

    def call(self, x):
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
        return input_shape

    def get_config(self):
        return {**super().get_config(), "mean": self.mean, "std": self.std}
