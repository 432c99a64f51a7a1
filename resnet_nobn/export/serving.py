"""An export's serving signature: the input `serving_default` takes, with the run's evaluation
preprocessing inside the graph, and its outputs (written by resnet_nobn/export/writer.py,
described in the model card). The preprocessing ends with the run's own standardisation
(`run_standardization`: per-image, or the training split's mean and std the run recorded).
"""
from resnet_nobn.config import TrainConfig
from resnet_nobn.data.standardization import DATASET, Standardization, from_results
from resnet_nobn.data.datasets import DATASETS

TOP_K = 5


def run_standardization(cfg: TrainConfig, results):
    """The standardisation run `cfg` trained with: per-image, or (--standardize=dataset) the mean
    and std its results.json (`results`) records, else those of its training split computed again
    (a run not evaluated yet records none; the split gives the same values)."""
    if cfg.standardize != "dataset":
        return Standardization()
    from resnet_nobn.data import inputs
    return from_results(results) or inputs.make_input(cfg).standardization


def input_spec(cfg: TrainConfig, standardize=Standardization()):
    """(tf.TensorSpec of the serving input, its description, the evaluation preprocessing): the
    images as the dataset holds them (uint8 pixels, made the network's by the input pipeline's own
    `to_network`, then `standardize`d; ImageNet: encoded files, decoded and cropped by its
    evaluation preprocessing)."""
    import tensorflow as tf

    from resnet_nobn.data import cifar, imagenet
    from resnet_nobn.model.standardize import Standardize  # the pipeline's, as a Keras layer
    info, size = DATASETS[cfg.dataset], cfg.model.image_size
    if info.pixels:
        h, w, c = info.stored
        padded = "" if info.stored == (size, size, 3) else (
            f"; zero-padded to {size}x{size}" + (", the grey value in 3 channels" if c == 1 else "")
            + ", as in training")
        return (tf.TensorSpec([None, h, w, c], tf.uint8, name="images"),
                f"uint8 [N, {h}, {w}, {c}] {'RGB' if c == 3 else 'grey'} pixels{padded}; "
                f"{standardize.described()}",
                lambda images: Standardize(*((standardize.mean, standardize.std)
                                             if standardize.mode == DATASET else ()))(
                    cifar.to_network(images, info)))

    def preprocess(encoded):
        return tf.map_fn(lambda e: imagenet.preprocess_eval(e, size), encoded,
                         fn_output_signature=tf.TensorSpec([size, size, 3], tf.float32))

    return (tf.TensorSpec([None], tf.string, name="images"),
            f"tf.string [N], encoded JPEG (or PNG) files; the shorter side resized to "
            f"{int(imagenet.eval_shorter_side(size))} and the central "
            f"{size}x{size} crop, scaled to [0, 1] and normalized by the ImageNet channel mean and "
            "standard deviation", preprocess)


def serving_archive(model, cfg: TrainConfig, standardize=Standardization()):
    """keras.export.ExportArchive of `model` with the `serving_default` endpoint: raw images in,
    the run's evaluation preprocessing (ending with `standardize`, `run_standardization`), then
    `logits`, `probabilities` and top-5 `classes`."""
    import keras
    import tensorflow as tf
    spec, _, preprocess = input_spec(cfg, standardize)
    k = min(TOP_K, cfg.model.num_classes)

    def serve(images):
        logits = tf.cast(model(preprocess(images), training=False), tf.float32)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits),
                "classes": tf.math.top_k(logits, k).indices}

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("serving_default", serve, input_signature=[spec])
    return archive
