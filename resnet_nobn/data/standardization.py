"""The standardisation of every image the network takes, the last step of its preprocessing in
training, evaluation and an export's serving graph alike: `--standardize`.

per_image (the default): `tf.image.per_image_standardization`, as cifar_input.py of the TensorFlow
ResNet code the paper forked: each image to zero mean and unit variance over its own pixels.

dataset: `(x - mean) / std` with one mean and one standard deviation per channel over the
training split's images as the network takes them (resnet_nobn/data/cifar.py `to_network`:
Fashion-MNIST's 28x28 grey images zero-padded to 32x32, the grey value in 3 channels), before any
augmentation. Computed once, when the split is loaded, exactly: integer sums of the uint8 pixels
and of their squares, then the mean and the population standard deviation in float64 (the same
values on every machine and every run). results.json records them (`standardization`), and so does
an export's model card; a resumed run and an export use the recorded values (`recorded`).
"""
import dataclasses
import math

from resnet_nobn.errors import UserError

RECORD = "standardization"  # results.json's key: {"mode", "mean", "std"}
PER_IMAGE, DATASET = "per_image", "dataset"


@dataclasses.dataclass(frozen=True)
class Standardization:
    """One way to standardise images: `mode` (PER_IMAGE or DATASET) and, for DATASET, the
    per-channel `mean` and `std` (pixel units, 0..255). Called on uint8 or float images (one, or
    a batch, channels last), it returns them standardised, float32."""
    mode: str = PER_IMAGE
    mean: tuple = ()
    std: tuple = ()

    def __call__(self, images):
        import tensorflow as tf
        images = tf.cast(images, tf.float32)
        if self.mode == PER_IMAGE:
            return tf.image.per_image_standardization(images)
        return (images - tf.constant(self.mean, tf.float32)) / tf.constant(self.std, tf.float32)

    def record(self):
        """results.json's and the model card's record of it."""
        return {"mode": self.mode, **({"mean": list(self.mean), "std": list(self.std)}
                                      if self.mode == DATASET else {})}

    def described(self):
        """In words, for the serving signature's description."""
        if self.mode == PER_IMAGE:
            return "per-image standardization"
        return (f"(x - mean) / std per channel, the training split's mean "
                f"{_numbers(self.mean)} and standard deviation {_numbers(self.std)}")


def _numbers(values):
    return "(" + ", ".join(f"{v:.10g}" for v in values) + ")"


# Below this standard deviation (pixel units, 0..255) a channel hardly varies over the training
# split: dividing by it sends the crop's zero padding, and any pixel off the split's one value,
# to thousands, and the run diverges for no reason a training flag can help.
MIN_STD = 1.0


def of_batches(batches):
    """The DATASET standardisation of the images in `batches` (uint8 arrays [N, H, W, C], as the
    network takes them): exact integer sums, then float64 mean and population std per channel.
    UserError naming the channels whose std is below MIN_STD (a split of one flat colour)."""
    import numpy as np
    count, total, squares = 0, None, None
    for batch in batches:
        x = np.asarray(batch).astype(np.int64)
        s, s2 = x.sum(axis=(0, 1, 2)), (x * x).sum(axis=(0, 1, 2))
        total = s if total is None else total + s
        squares = s2 if squares is None else squares + s2
        count += x.shape[0] * x.shape[1] * x.shape[2]
    total, squares = [int(v) for v in total], [int(v) for v in squares]
    mean = tuple(s / count for s in total)  # Python's int division: correctly rounded
    std = tuple(math.sqrt((count * s2 - s * s) / (count * count))
                for s, s2 in zip(total, squares))
    flat = [i for i, v in enumerate(std) if v < MIN_STD]
    if flat:
        said = ", ".join(f"{std[i]:.3g}" for i in flat)
        raise UserError(f"--standardize=dataset: the training split's channel"
                        f"{'s' * (len(flat) > 1)} {', '.join(str(i) for i in flat)} "
                        f"{'vary' if len(flat) > 1 else 'varies'} by less than one pixel level "
                        f"(standard deviation {said}), and (x - mean) / std would divide by it; "
                        "use --standardize=per_image, or images that differ")
    return Standardization(DATASET, mean, std)


def from_results(results):
    """The DATASET standardisation results.json (`results`, a dict) records, or None."""
    rec = (results or {}).get(RECORD)
    if not isinstance(rec, dict) or rec.get("mode") != DATASET:
        return None
    try:
        mean, std = tuple(float(v) for v in rec["mean"]), tuple(float(v) for v in rec["std"])
    except (KeyError, TypeError, ValueError):
        return None
    return Standardization(DATASET, mean, std) if len(mean) == len(std) > 0 else None
