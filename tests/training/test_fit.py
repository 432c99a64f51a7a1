"""`model.fit` trains the paper's recipe: the model carries the weight decay (model.losses),
recipes.optimizer is the trainer's SGD and schedule, so 20 steps of fit from the same initial
weights on the same batches end at the trainer's weights; the schedule saves and loads, and
refuses what TrainConfig refuses."""
import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

import resnet_nobn
from resnet_nobn.schedule import StepSchedule
from resnet_nobn.training.trainer import Trainer
from tests.helpers import tiny_config

STEPS = 20


@pytest.mark.slow
def test_twenty_steps_of_fit_give_the_trainers_weights(tmp_path):
    # real tfds batches (mock CIFAR-10: 64 images), augmented and reshuffled per epoch; a rate
    # drop at step 12 and a decay large enough to matter
    kw = dict(use_synthetic_data=False, train_steps=STEPS, batch_size=8, learning_rate=0.05,
              lr_boundaries=(12,), weight_decay=5e-3, seed=3, log_every=STEPS)
    with tfds.testing.mock_data(num_examples=64):
        trainer = Trainer(tiny_config(tmp_path / "run", **kw))
        cfg = trainer.cfg
        batches = list(trainer.input.train_dataset(tf.distribute.InputContext(), cfg.batch_size,
                                                   0).take(STEPS))
        model = resnet_nobn.build_model(cfg.model, seed=cfg.seed, weight_decay=cfg.weight_decay)
        for a, b in zip(model.weights, trainer.model.weights):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        start = [w.numpy() for w in model.trainable_weights]
        trainer.run()
    images = np.concatenate([x.numpy() for x, _ in batches])
    labels = np.concatenate([y.numpy() for _, y in batches])
    model.compile(optimizer=resnet_nobn.recipes.optimizer(cfg),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(images, labels, batch_size=cfg.batch_size, epochs=1, shuffle=False, verbose=0)
    assert int(model.optimizer.iterations) == STEPS == trainer.step
    for a, b, s in zip(model.trainable_weights, trainer.model.trainable_weights, start):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6, err_msg=a.path)
        assert not np.allclose(a.numpy(), s), f"{a.path} did not train"


def test_the_weight_decay_is_in_model_losses_as_the_papers_sum():
    cfg = resnet_nobn.ModelConfig(widths=(8, 16, 32), blocks_per_stage=1, stem_width=8)
    model = resnet_nobn.build_model(cfg, seed=1, weight_decay=1e-4)
    kernels = [w for w in model.trainable_weights if "kernel" in w.path]
    assert len(model.losses) == len(kernels) == 7  # stem and 2 convs per block; head not trained
    paper = 1e-4 * sum(np.sum(k.numpy().astype("float64") ** 2) / 2 for k in kernels)
    np.testing.assert_allclose(float(sum(model.losses)), paper, rtol=1e-6)
    assert resnet_nobn.build_model(cfg, seed=1, weight_decay=0.0).losses == []


def test_the_schedule_round_trips_through_its_config_and_a_keras_file(tmp_path):
    cfg = tiny_config(tmp_path, learning_rate=0.1, lr_boundaries=(5, 9), lr_decay_factor=0.5,
                      warmup_steps=3)
    schedule = StepSchedule.of(cfg)
    again = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert isinstance(again, StepSchedule) and again.get_config() == schedule.get_config()
    rates = [float(schedule(s)) for s in range(12)]
    np.testing.assert_allclose(rates, [0.1 / 3, 0.2 / 3, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05,
                                       0.025, 0.025, 0.025], rtol=1e-6)
    model = resnet_nobn.build_model(cfg.model)
    model.compile(optimizer=resnet_nobn.recipes.optimizer(cfg),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras",
                                     custom_objects=resnet_nobn.custom_objects())
    assert loaded.optimizer.learning_rate is not None
    assert loaded.optimizer.get_config()["learning_rate"]["config"] == schedule.get_config()
    assert loaded.optimizer.get_config()["momentum"] == 0.9


@pytest.mark.parametrize("kw, message", [
    (dict(learning_rate=-1), r"StepSchedule\.learning_rate must be positive"),
    (dict(learning_rate=float("nan")), r"StepSchedule\.learning_rate must be a finite number"),
    (dict(boundaries=(50_000, 30_000)), r"StepSchedule\.boundaries must be positive, strictly "
                                        r"increasing steps, e\.g\. 30000,50000"),
    (dict(decay_factor=0), r"StepSchedule\.decay_factor must be in \(0, 1\]"),
    (dict(decay_factor=1.5), r"StepSchedule\.decay_factor must be in \(0, 1\]"),
    (dict(decay_every=-1), r"StepSchedule\.decay_every=-1 must be at least 0"),
    (dict(warmup_steps=-1), r"StepSchedule\.warmup_steps=-1 must be at least 0"),
    (dict(warmup_steps=2.5), r"StepSchedule\.warmup_steps=2\.5 must be an integer"),
])
def test_the_schedule_refuses_what_train_config_refuses_in_its_words(kw, message):
    with pytest.raises(resnet_nobn.ConfigError, match="^" + message):
        StepSchedule(**kw)
    assert StepSchedule(boundaries=[5, 9]).boundaries == (5, 9)  # a list, as get_config gives
