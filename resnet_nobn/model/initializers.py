"""The network's seeded initial weights, drawn by NumPy: one seed, the same weights on every backend.

Keras' own seeded initialisers (`keras.initializers.RandomNormal(seed=...)`) draw with the backend's
random generator: the same seed gives other kernels under TensorFlow, JAX and PyTorch. These draw
with `np.random.default_rng((seed, stream))` on the host, rounded to float32, and hand it to the
backend, so a weight is a function of the run's seed and the layer's `stream` (its place in the
network) alone. Each is a registered Keras initializer with a JSON `get_config`, so a saved
`model.keras` names it and loads with `custom_objects()`.
"""
import math

import keras
import numpy as np


def _rng(seed, stream):
    return np.random.default_rng((int(seed), int(stream)))


class _Seeded(keras.initializers.Initializer):
    """Draws `self.draw(rng, shape)` (a float32 array) from `(seed, stream)`, cast to `dtype`."""

    def __init__(self, seed, stream=0):
        self.seed, self.stream = int(seed), int(stream)

    def __call__(self, shape, dtype=None):
        value = self.draw(_rng(self.seed, self.stream), tuple(int(d) for d in shape))
        return keras.ops.convert_to_tensor(value.astype("float32"), dtype=dtype or "float32")

    def get_config(self):
        return {"seed": self.seed, "stream": self.stream}


@keras.saving.register_keras_serializable(package="resnet_nobn")
class SeededNormal(_Seeded):
    """N(0, stddev^2), drawn by NumPy from `(seed, stream)`: the same weights on every backend.

    Args:
      stddev: the standard deviation (0: zeros, Fixup's C2).
      seed: the run's seed, an integer >= 0.
      stream: the layer's number in the network, so every layer draws its own weights.

    Examples:
      >>> tuple(SeededNormal(0.1, seed=3, stream=1)((3, 3, 8, 8)).shape)
      (3, 3, 8, 8)
    """

    def __init__(self, stddev, seed, stream=0):
        super().__init__(seed, stream)
        self.stddev = float(stddev)

    def draw(self, rng, shape):
        return rng.normal(0.0, self.stddev, size=shape) if self.stddev else np.zeros(shape)

    def get_config(self):
        return {**super().get_config(), "stddev": self.stddev}


@keras.saving.register_keras_serializable(package="resnet_nobn")
class SeededGlorotUniform(_Seeded):
    """Glorot's uniform init of a dense kernel (U(-l, l), l = sqrt(6 / (fan_in + fan_out))), as
    `keras.initializers.GlorotUniform`, drawn by NumPy from `(seed, stream)`.

    Args:
      seed: the run's seed, an integer >= 0.
      stream: the layer's number in the network.

    Examples:
      >>> tuple(SeededGlorotUniform(seed=3, stream=9)((16, 10)).shape)
      (16, 10)
    """

    def draw(self, rng, shape):
        fan_in, fan_out = shape[-2], shape[-1]
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, size=shape)
