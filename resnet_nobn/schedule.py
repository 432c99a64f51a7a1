"""The learning-rate schedule of Section 4 as a registered, serializable Keras schedule.

`StepSchedule` is the one definition of the rate at a step: linear warm-up over `warmup_steps`
(0 in the paper), then either a piecewise-constant schedule (`lr * decay_factor ** #boundaries
passed`: CIFAR, 0.05 / 10 at 30k and 50k) or, when `decay_every > 0`, an exponential staircase
(`lr * decay_factor ** floor(step / every)`: ImageNet, 0.1 * 0.94 every two epochs). Its config
is TrainConfig's schedule fields, so an optimizer using it saves in a `.keras` file and loads
again (registered as `resnet_nobn>StepSchedule`: give `resnet_nobn.custom_objects()` to
keras.saving.load_model). Written with keras.ops, so it runs on any Keras backend; on
TensorFlow it is the same float32 computation the trainer always ran.
"""
import keras
from keras import ops

from resnet_nobn.config import TrainConfig
from resnet_nobn.options import check_argument

# each argument -> the TrainConfig field it is, whose checks it passes
FIELDS = dict(learning_rate="learning_rate", boundaries="lr_boundaries",
              decay_factor="lr_decay_factor", decay_every="lr_decay_every",
              warmup_steps="warmup_steps")


@keras.saving.register_keras_serializable(package="resnet_nobn")
class StepSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """The learning rate of Section 4 at a step: a Keras `LearningRateSchedule`.

    Linear warm-up over `warmup_steps`, then the rate times `decay_factor` at each of
    `boundaries` passed, or every `decay_every` steps if that is > 0. The arguments are the
    TrainConfig fields learning_rate, lr_boundaries, lr_decay_factor, lr_decay_every and
    warmup_steps (`FIELDS`), checked as TrainConfig checks them: a ConfigError naming the argument
    (`StepSchedule.boundaries must be positive, strictly increasing steps, e.g. 30000,50000`).

    Args:
        learning_rate: float. The initial rate.
        boundaries: tuple of ints. Steps at which the rate is multiplied by `decay_factor`.
        decay_factor: float. In (0, 1].
        decay_every: int. If > 0: multiply by `decay_factor` every this many steps instead.
        warmup_steps: int. Linear warm-up steps (0: none).

    Example:

    ```python
    import resnet_nobn
    schedule = resnet_nobn.StepSchedule(0.05, boundaries=(300, 500))
    assert abs(float(schedule(400)) - 0.005) < 1e-9
    same = resnet_nobn.StepSchedule.of(resnet_nobn.recipes.cifar())  # the recipe's
    ```
    """

    def __init__(self, learning_rate=0.05, boundaries=(30_000, 50_000), decay_factor=0.1,
                 decay_every=0, warmup_steps=0):
        if isinstance(boundaries, (list, range)):  # get_config's list
            boundaries = tuple(boundaries)
        given = dict(learning_rate=learning_rate, boundaries=boundaries,
                     decay_factor=decay_factor, decay_every=decay_every, warmup_steps=warmup_steps)
        for name, value in given.items():  # TrainConfig's rule for each, in its words
            check_argument(TrainConfig, FIELDS[name], value, f"StepSchedule.{name}")
        self.learning_rate = float(learning_rate)
        self.boundaries = tuple(int(b) for b in boundaries)
        self.decay_factor = float(decay_factor)
        self.decay_every = int(decay_every)
        self.warmup_steps = int(warmup_steps)

    @classmethod
    def of(cls, cfg):
        """The schedule of a TrainConfig (what `recipes.optimizer` uses).

        Args:
            cfg: TrainConfig. The run or recipe whose schedule fields to take.

        Returns:
            A `StepSchedule`.

        Example:

        ```python
        import resnet_nobn
        schedule = resnet_nobn.StepSchedule.of(resnet_nobn.recipes.cifar())
        assert schedule.boundaries == (30000, 50000)
        ```
        """
        return cls(cfg.learning_rate, cfg.lr_boundaries, cfg.lr_decay_factor, cfg.lr_decay_every,
                   cfg.warmup_steps)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        if self.decay_every > 0:
            decays = ops.floor(step / self.decay_every)
        else:
            decays = 0.0 * step
            for b in self.boundaries:  # integer counts: exact in any order
                decays = decays + ops.cast(step >= b, "float32")
        lr = self.learning_rate * ops.power(self.decay_factor, decays)
        if self.warmup_steps > 0:
            lr = lr * ops.minimum(1.0, (step + 1.0) / self.warmup_steps)
        return lr

    def get_config(self):
        """The schedule's arguments, for Keras' serialization (`StepSchedule(**config)`).

        Returns:
            A dict of the constructor's arguments, JSON values.

        Example:

        ```python
        import resnet_nobn
        schedule = resnet_nobn.StepSchedule(0.1, decay_every=100, decay_factor=0.94)
        assert resnet_nobn.StepSchedule(**schedule.get_config()).decay_every == 100
        ```
        """
        return {"learning_rate": self.learning_rate, "boundaries": list(self.boundaries),
                "decay_factor": self.decay_factor, "decay_every": self.decay_every,
                "warmup_steps": self.warmup_steps}
