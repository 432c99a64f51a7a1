"""The identity-parameterized residual block, shared by every network in the project.

Hardt & Ma, Section 3 and Section 4: a block computes `h + C2(ReLU(C1 h))`, one ReLU and no
normalization, so that with C2 = 0 it is exactly the identity. C1 and C2 are any Keras layers:
3x3 convolutions in the CIFAR/ImageNet networks (Table 1), dense maps `U h + s` and `V h` in the
finite-sample construction of Theorem 3.2 (`T_{U,V,s}(h) = V ReLU(U h + s)`).

The activation is a leaky ReLU `max(x, a x)`: the TensorFlow ResNet code the paper forked uses
`relu_leakiness = 0.1` for every activation; `leakiness=0` (the default here, and Theorem 3.2's) is
the plain ReLU.

The BN baseline (`norm1`, `norm2`) puts a normalization layer before each activation, in the
pre-activation order of He et al. (2016) used by that code: `h + C2(act(BN2(C1(act(BN1 h)))))`.

Two published normalization-free blocks that also start as the identity, for comparison:
  SkipInit (De & Smith 2020): `h + alpha * C2(act(C1 h))`, a trainable scalar alpha = 0 at init
    (`branch_scale=0.0`).
  Fixup (Zhang et al. 2019): scalar biases before each conv and before the activation, and a
    scalar multiplier (init 1) and bias after C2:
    `h + scale * C2(act(C1(h + b1a) + b1b) + b2a) + b2b` (`branch_scale=1.0, scalar_biases=True`);
    its initialisation (C2 = 0, C1 scaled by L^(-1/2)) and what its reference code adds around
    the blocks (`ScalarBias`, activations, the zero-initialised classifier) are in
    resnet_nobn/model/network.py.
"""
import keras
from keras import layers


def leaky_relu(x, leakiness):
    """`max(x, leakiness * x)`, the TensorFlow ResNet code's `_relu`; plain ReLU when 0."""
    return keras.ops.relu(x) if leakiness == 0 else keras.ops.leaky_relu(x, leakiness)


@keras.saving.register_keras_serializable(package="resnet_nobn")
class LeakyReLU(layers.Layer):
    """`leaky_relu(x, leakiness)` as a layer (the activation after the last block): a layer, not
    a lambda, so a saved `.keras` model loads without `safe_mode=False`."""

    def __init__(self, leakiness=0.0, **kwargs):
        super().__init__(**kwargs)
        self.leakiness = float(leakiness)

    def call(self, x):
        return leaky_relu(x, self.leakiness)

    def get_config(self):
        return {**super().get_config(), "leakiness": self.leakiness}


@keras.saving.register_keras_serializable(package="resnet_nobn")
class ScalarBias(layers.Layer):
    """`x + b`, one trainable scalar b (init 0): Fixup's biases outside the blocks (after the stem
    and before the classifier, Zhang et al. 2019)."""

    def build(self, input_shape):
        self.bias = self.add_weight(name="bias", shape=(), initializer="zeros", dtype="float32")

    def call(self, x):
        return x + keras.ops.cast(self.bias, x.dtype)


@keras.saving.register_keras_serializable(package="resnet_nobn")
class ScalarGain(layers.Layer):
    """`g x`, one trainable scalar g (init 1): `--logit_gain`, the pooled features scaled before
    the frozen random-projection head, the like-for-like of BN's last scale (the BN twin's final
    BN scales each feature before the pool; the paper's net has nothing there). Not weight-decayed
    (only conv kernels are)."""

    def build(self, input_shape):
        self.gain = self.add_weight(name="gain", shape=(), initializer="ones", dtype="float32")

    def call(self, x):
        return x * keras.ops.cast(self.gain, x.dtype)


@keras.saving.register_keras_serializable(package="resnet_nobn")
class ResidualBlock(layers.Layer):
    """`shortcut(h) + second(act(first(h)))`; `shortcut` defaults to the identity.

    Args:
      first, second: the layers C1 and C2 (or U with bias s, and V).
      shortcut: layer applied to `h` on the skip path where the shape changes (Table 1 uses
        average pooling plus zero channel padding), or None for the identity.
      norm1, norm2: optional normalization layers for the BN baseline (pre-activation order).
      leakiness: slope of the leaky ReLU for x < 0 (0: ReLU).
      branch_scale: None, or the initial value of a trainable scalar multiplying the branch
        (0: SkipInit's alpha; 1: Fixup's multiplier).
      scalar_biases: Fixup's four trainable scalar biases (init 0).
    """

    def __init__(self, first, second, shortcut=None, norm1=None, norm2=None, leakiness=0.0,
                 branch_scale=None, scalar_biases=False, **kwargs):
        super().__init__(**kwargs)
        self.first = first
        self.second = second
        self.shortcut = shortcut
        self.norm1 = norm1
        self.norm2 = norm2
        self.leakiness = float(leakiness)
        self.branch_scale = branch_scale
        self.scalar_biases = scalar_biases

    def build(self, input_shape):
        scalar = dict(shape=(), dtype="float32")
        if self.branch_scale is not None:
            self.scale = self.add_weight(
                name="branch_scale", initializer=keras.initializers.Constant(self.branch_scale),
                **scalar)
        if self.scalar_biases:
            self.biases = [self.add_weight(name=n, initializer="zeros", **scalar)
                           for n in ("bias1a", "bias1b", "bias2a", "bias2b")]

    def _bias(self, x, i):
        return x + keras.ops.cast(self.biases[i], x.dtype) if self.scalar_biases else x

    def branch(self, h, training=False):
        """The residual branch alone: `h + branch(h)` is the block's output (identity shortcut)."""
        x = h
        if self.norm1 is not None:
            x = leaky_relu(self.norm1(x, training=training), self.leakiness)
        x = self._bias(self.first(self._bias(x, 0)), 1)
        if self.norm2 is not None:
            x = self.norm2(x, training=training)
        x = self.second(self._bias(leaky_relu(x, self.leakiness), 2))
        if self.branch_scale is not None:
            x = x * keras.ops.cast(self.scale, x.dtype)
        return self._bias(x, 3)

    def call(self, h, training=False):
        skip = h if self.shortcut is None else self.shortcut(h)
        return skip + self.branch(h, training=training)

    _LAYERS = ("first", "second", "shortcut", "norm1", "norm2")

    def get_config(self):
        """The block's options and its layers, serialized (keras.saving.load_model rebuilds it)."""
        return {**super().get_config(), "leakiness": self.leakiness,
                "branch_scale": self.branch_scale, "scalar_biases": self.scalar_biases,
                **{k: keras.saving.serialize_keras_object(getattr(self, k)) for k in self._LAYERS}}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for k in cls._LAYERS:
            config[k] = keras.saving.deserialize_keras_object(config[k])
        return cls(**config)
