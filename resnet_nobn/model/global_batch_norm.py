"""The BN twin's synchronized batch normalization, a tf.distribute feature: it needs the
TensorFlow backend.

The network module (network.py) imports this module only when it builds norm='batch' on the
TensorFlow backend, so the paper's network (norm='none') builds without TensorFlow. Under another
Keras backend norm='batch' builds Keras' own `BatchNormalization` instead (`batch_norm_layer` in
network.py; docs/backends.md).
"""
import keras
import tensorflow as tf
from keras import layers

from resnet_nobn.config import ModelConfig


@keras.saving.register_keras_serializable(package="resnet_nobn")
class GlobalBatchNorm(layers.BatchNormalization):
    """The BN twin's batch normalization: in training, the mean and variance of the *global* batch,
    over every replica and worker, so N replicas normalize as one device does. TensorFlow backend
    only (it all-reduces through tf.distribute's replica context).

    The values are the fork's (`tf.nn.moments`: the mean, then the mean squared deviation from
    it); several replicas all-reduce the sums of that two-pass computation (two all-reduces per
    layer and step), and the gradient flows through both passes. Keras' `synchronized=True`
    (E[x^2] - E[x]^2), like a two-pass that stops the gradient at the mean as `tf.nn.moments`
    does, left 2 mirrored replicas 3e-5 (absolute) from one device after 5 steps of the test net
    at learning rate 0.05; this agrees to 1e-4 relative (tests/train/test_replicas.py).
    Decay and epsilon: the fork's `_batch_norm` (moving averages `m <- 0.9 m + 0.1 batch`,
    epsilon 0.001), ModelConfig's bn_momentum and bn_epsilon.
    """

    def __init__(self, momentum=ModelConfig.bn_momentum, epsilon=ModelConfig.bn_epsilon, **kwargs):
        super().__init__(momentum=momentum, epsilon=epsilon, **kwargs)

    def _moments(self, inputs, mask):
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
