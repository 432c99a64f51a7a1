"""The recipes by keyword, `replace` and `recipes.scaled`: each value checked as the configs
check it, an unknown keyword named with its nearest field, a short run pointed to `scaled`."""
import re

import pytest

import resnet_nobn
from resnet_nobn import recipes


def test_a_recipe_takes_run_and_model_fields_by_keyword():
    r = recipes.cifar(learning_rate=0.02, widths=(16, 32, 64), blocks_per_stage=1)
    assert (r.learning_rate, r.model.widths, r.model.blocks_per_stage) == (
        0.02, (16, 32, 64), (1, 1, 1))
    assert recipes.cifar() == resnet_nobn.TrainConfig()
    i = recipes.imagenet(batch_size=512)
    assert (i.batch_size, i.model.widths, i.lr_decay_every) == (512, (84, 168, 336, 672), 10009)
    fixup = recipes.cifar(init="fixup")  # as --init=fixup: Fixup's head and rate factor
    assert (fixup.model.head, fixup.scalar_lr_factor) == ("trained", 0.1)


@pytest.mark.parametrize("make, error, message", [
    (lambda: recipes.cifar(learning_rate=-1), resnet_nobn.ConfigError,
     r"^TrainConfig\.learning_rate must be positive$"),
    (lambda: recipes.imagenet(stem_width=0), resnet_nobn.ConfigError,
     r"^ModelConfig\.stem_width=0 must be at least 1$"),
    (lambda: recipes.cifar(learning_rat=0.1), TypeError,
     r"^recipes\.cifar got an unexpected keyword argument 'learning_rat'; did you mean "
     r"'learning_rate'\?"),
    (lambda: resnet_nobn.ModelConfig().replace(stem_widht=3), TypeError,
     r"^ModelConfig\.replace got an unexpected keyword argument 'stem_widht'; did you mean "
     r"'stem_width'\?"),
    (lambda: resnet_nobn.ModelConfig().replace(learning_rate=3), TypeError,
     r"^ModelConfig\.replace got learning_rate, of TrainConfig"),
    (lambda: resnet_nobn.TrainConfig().replace(batch_size=0), resnet_nobn.ConfigError,
     r"^TrainConfig\.batch_size=0 must be at least 1$"),
    (lambda: recipes.cifar(train_steps=1000), resnet_nobn.ConfigError,
     r"^recipes\.cifar\(train_steps=1000\): the recipe's learning-rate drops "
     r"\(TrainConfig\.lr_boundaries=30000,50000\) come at or after the run's last step .* use "
     r"resnet_nobn\.recipes\.scaled\(resnet_nobn\.recipes\.cifar\(\), 1000\) \(drops at steps "
     r"500, 833\); or give lr_boundaries too"),
    (lambda: recipes.imagenet(train_steps=5000), resnet_nobn.ConfigError,
     r"use resnet_nobn\.recipes\.scaled\(resnet_nobn\.recipes\.imagenet\(\), 5000\)"),
    (lambda: recipes.cifar(train_steps=3), resnet_nobn.ConfigError,
     r"the paper's schedule scaled \(recipes\.scaled\) needs at least 4 steps"),
    (lambda: recipes.scaled(recipes.cifar(), 3), resnet_nobn.ConfigError,
     r"^recipes\.scaled's train_steps=3 is too few for the recipe's schedule \(drops at steps "
     r"30000, 50000 of 60000\) to fall on distinct steps within the run; give at least 4$"),
    (lambda: recipes.scaled(resnet_nobn.TrainConfig(train_steps=100), 10),
     resnet_nobn.ConfigError, r"lies beyond its own TrainConfig\.train_steps=100"),
    (lambda: recipes.scaled(resnet_nobn.ModelConfig(), 10), TypeError,
     r"^recipes\.scaled takes a TrainConfig, not a ModelConfig"),
])
def test_a_value_refused_is_named(make, error, message):
    with pytest.raises(error) as e:
        make()
    assert type(e.value) is error and re.search(message, str(e.value)), str(e.value)


def test_a_short_run_with_its_own_schedule_is_taken():
    assert recipes.cifar(train_steps=1000, lr_boundaries=()).train_steps == 1000
    assert recipes.cifar(train_steps=55_000).lr_boundaries == (30_000, 50_000)


def test_scaled_puts_the_drops_at_the_papers_fractions():
    assert recipes.scaled(recipes.cifar(), 6000).lr_boundaries == (3000, 5000)
    assert recipes.scaled(recipes.cifar(), 4).lr_boundaries == (2, 3)
    assert recipes.scaled(recipes.cifar(), 60_000) == recipes.cifar()
    short = recipes.scaled(recipes.imagenet(), 7000)
    assert (short.train_steps, short.lr_decay_every) == (7000, 100)
    assert recipes.scaled(recipes.cifar(learning_rate=0.1), 600).learning_rate == 0.1


def test_replace_checks_and_keeps_derived_fields_in_step():
    c = recipes.cifar()
    assert c.replace(widths=(16, 32, 64)).model.widths == (16, 32, 64)
    assert c.replace(learning_rate=0.1).model == c.model
    fixup = c.replace(init="fixup")  # the values "auto" and None gave follow the new init
    assert (fixup.model.head, fixup.scalar_lr_factor) == ("trained", 0.1)
    back = fixup.replace(init="identity")
    assert (back.model.head, back.scalar_lr_factor) == ("random", 1.0)
    assert c.replace(init="fixup", head="random").model.head == "random"  # given: kept


def test_the_optimizer_clips_as_the_recipe_says_and_refuses_what_keras_cannot():
    """--clip_norm reaches model.fit as Keras' global_clipnorm; AGC, which Keras' SGD has not, is
    refused by name rather than dropped."""
    assert recipes.optimizer(recipes.cifar(clip_norm=1.0)).global_clipnorm == 1.0
    assert recipes.optimizer(recipes.cifar()).global_clipnorm is None
    with pytest.raises(ValueError, match="agc=0.01"):
        recipes.optimizer(recipes.cifar(agc=0.01))
