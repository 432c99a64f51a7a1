"""Top-1 and top-5 as the trainer counts them (train/steps.py `top_k_hits`, in the training and
the evaluation step): a tie is one class, the lower index, as the export's `classes`; a row that
is not finite is a miss."""
import keras
import numpy as np
import tensorflow as tf

from resnet_nobn.training.steps import build_eval_step, top_k_hits


def test_a_tie_is_the_lower_class_not_every_class_tied():
    assert top_k_hits(tf.constant([0, 1, 2]), tf.zeros((3, 3)), 1).numpy().tolist() == [1, 0, 0]
    assert top_k_hits(tf.constant([4, 5]), tf.zeros((2, 10)), 5).numpy().tolist() == [1, 0]
    rows = tf.constant([[np.nan, 0.0, 0.0], [2.0, 1.0, 0.0], [0.0, 1.0, np.inf]])
    assert top_k_hits(tf.constant([0, 0, 2]), rows, 1).numpy().tolist() == [0, 1, 0]


def test_a_network_of_equal_logits_is_evaluated_as_its_export_would_classify():
    """A bias-free network sends a flat (standardised: zero) image to equal logits; every label
    was counted correct (0% error) while the export puts all of them in class 0."""
    model = keras.Sequential([keras.Input((4,)),
                              keras.layers.Dense(3, use_bias=False, kernel_initializer="ones")])
    images, labels = tf.zeros((6, 4)), tf.constant([0, 1, 2, 0, 1, 2])
    step = build_eval_step(tf.distribute.get_strategy(), model)
    top1, top5, examples, _ = step(iter(tf.data.Dataset.from_tensors((images, labels,
                                                                      tf.ones(6)))))
    assert (top1.numpy(), top5.numpy(), examples.numpy()) == (2.0, 6.0, 6.0)
