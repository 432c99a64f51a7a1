"""The BN twin's batch normalization over the global batch, a tf.distribute feature: its global
statistics need the TensorFlow backend.

The layer itself is backend-neutral, so the BN twin builds, loads and runs on every Keras
backend with the same layer names and weight files (Keras names a weight file's entries by the
layer's class): TensorFlow is imported only when the layer computes its statistics on the
TensorFlow backend. On another backend it is Keras' `BatchNormalization` (docs/backends.md).
"""
import keras
from keras import layers

from resnet_nobn.config import ModelConfig


@keras.saving.register_keras_serializable(package="resnet_nobn")
class GlobalBatchNorm(layers.BatchNormalization):
    """The BN twin's batch normalization: in training, the mean and variance of the *global* batch,
    over every replica and worker, so N replicas normalize as one device does. The TensorFlow
    backend only (tf.distribute's replica context); on another backend, Keras' own moments of the
    batch the layer is given (on JAX `jnp.mean` and `jnp.var`: the fork's two passes).

    The values are the fork's (`tf.nn.moments`: the mean, then the mean squared deviation from
    it); several replicas all-reduce the sums of that two-pass computation (two all-reduces per
    layer and step), and the gradient flows through both passes. Keras' `synchronized=True`
    (E[x^2] - E[x]^2), like a two-pass that stops the gradient at the mean as `tf.nn.moments`
    does, left 2 mirrored replicas 3e-5 (absolute) from one device after 5 steps of the test net
    at learning rate 0.05; this agrees to 1e-4 relative (tests/training/test_replicas.py).
    Decay and epsilon: the fork's `_batch_norm` (moving averages `m <- 0.9 m + 0.1 batch`,
    epsilon 0.001), ModelConfig's bn_momentum and bn_epsilon.
    """

    def __init__(self, momentum=ModelConfig.bn_momentum, epsilon=ModelConfig.bn_epsilon, **kwargs):
        super().__init__(momentum=momentum, epsilon=epsilon, **kwargs)

    def _moments(self, inputs, mask):
        if keras.backend.backend() != "tensorflow":
            return super()._moments(inputs, mask)
        import tensorflow as tf  # here only: the network needs no TensorFlow on other backends

        axes = self._reduction_axes
        ctx = tf.distribute.get_replica_context()
        replicas = ctx.num_replicas_in_sync if ctx is not None else 1

        def total(t):
            return ctx.all_reduce("SUM", t) if replicas > 1 else t

        local_sum = tf.reduce_sum(inputs, axes)
        count = tf.cast(tf.reduce_prod(tf.gather(tf.shape(inputs), axes)), inputs.dtype)
        sum_and_count = total(tf.concat([local_sum, count[None]], 0))
        n = sum_and_count[-1]
        mean = sum_and_count[:-1] / n
        deviation = tf.math.squared_difference(inputs, mean)
        return mean, total(tf.reduce_sum(deviation, axes)) / n
