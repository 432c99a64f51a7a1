"""The identity-parameterized residual block, shared by every network in the project.

Hardt & Ma, Section 3 and Section 4: a block computes `h + C2(ReLU(C1 h))`, one ReLU and no
normalization, so that with C2 = 0 it is exactly the identity. C1 and C2 are any Keras layers:
3x3 convolutions in the CIFAR/ImageNet networks (Table 1), dense maps `U h + s` and `V h` in the
finite-sample construction of Theorem 3.2 (`T_{U,V,s}(h) = V ReLU(U h + s)`).

The BN baseline (`norm='batch'`) uses the same class with a normalization layer before each ReLU,
in the pre-activation order of He et al. (2016) used by the TensorFlow ResNet code the paper forked:
`h + C2(ReLU(BN2(C1(ReLU(BN1 h)))))`.
"""
import keras
from keras import layers


@keras.saving.register_keras_serializable(package="resnet_nobn")
class ResidualBlock(layers.Layer):
    """`shortcut(h) + second(ReLU(first(h)))`; `shortcut` defaults to the identity.

    Args:
      first, second: the layers C1 and C2 (or U with bias s, and V).
      shortcut: layer applied to `h` on the skip path where the shape changes (Table 1 uses
        average pooling plus zero channel padding), or None for the identity.
      norm1, norm2: optional normalization layers for the BN baseline (pre-activation order).
    """

    def __init__(self, first, second, shortcut=None, norm1=None, norm2=None, **kwargs):
        super().__init__(**kwargs)
        self.first = first
        self.second = second
        self.shortcut = shortcut
        self.norm1 = norm1
        self.norm2 = norm2

    def call(self, h, training=False):
        x = h
        if self.norm1 is not None:
            x = keras.ops.relu(self.norm1(x, training=training))
        x = self.first(x)
        if self.norm2 is not None:
            x = self.norm2(x, training=training)
        x = self.second(keras.ops.relu(x))
        skip = h if self.shortcut is None else self.shortcut(h)
        return skip + x
