"""The network under the Keras backend the caller sets (KERAS_BACKEND): run by
tests/model/test_backends.py in a subprocess, since a process has one backend.

argv[1]: a directory holding cases.json ([{"name", "config", "seed", "fit"}]), NAME.weights.h5
(each case's weights, saved on the TensorFlow backend), x.npy, labels.npy and, optionally,
bn.keras (a BN twin saved whole on TensorFlow). Prints one JSON line: the backend; per case the
layers, weights and parameter count the config builds, the logits of the given weights and, where
"fit" is a step count, the losses of that many `fit` steps on the one batch; the logits of
bn.keras loaded with `custom_objects()`; whether TensorFlow was ever imported.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import keras  # noqa: E402

from resnet_nobn.config import ModelConfig  # noqa: E402
from resnet_nobn.model import network  # noqa: E402

LEARNING_RATE = 0.05


def describe(model):
    """What must be the same on every backend: layer names and classes, weights, parameters."""
    return {"layers": [[layer.name, type(layer).__name__] for layer in model.layers],
            "weights": [[w.path, list(w.shape), w.trainable] for w in model.weights],
            "params": model.count_params()}


def logits(model, x):
    """The model's inference logits of `x`, as lists (any backend's tensor)."""
    return keras.ops.convert_to_numpy(model(x, training=False)).tolist()


def fit_losses(model, x, labels, steps):
    """`steps` steps of `fit` (SGD with momentum, the paper's 0.9) on the one batch (x, labels)."""
    model.compile(optimizer=keras.optimizers.SGD(LEARNING_RATE, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(x, labels, batch_size=len(x), epochs=steps, shuffle=False, verbose=0)
    return [float(v) for v in history.history["loss"]]


def main(where):
    with open(os.path.join(where, "cases.json")) as f:
        cases = json.load(f)
    x, labels = np.load(os.path.join(where, "x.npy")), np.load(os.path.join(where, "labels.npy"))
    out = {"backend": keras.backend.backend(), "cases": {}}
    for case in cases:
        cfg = ModelConfig(**{k: tuple(v) if isinstance(v, list) else v
                             for k, v in case["config"].items()})
        model = network.build_model(cfg, seed=case["seed"])
        model.load_weights(os.path.join(where, case["name"] + ".weights.h5"))
        result = {**describe(model), "logits": logits(model, x)}
        if case.get("fit"):
            result["losses"] = fit_losses(model, x, labels, case["fit"])
        out["cases"][case["name"]] = result
    saved = os.path.join(where, "bn.keras")
    if os.path.exists(saved):
        model = keras.saving.load_model(saved, custom_objects=network.custom_objects())
        out["bn_keras_logits"] = logits(model, x)
    out["tensorflow_imported"] = "tensorflow" in sys.modules
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
