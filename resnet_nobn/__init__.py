"""Hardt & Ma, "Identity Matters in Deep Learning" (ICLR 2017): normalization-free residual networks.

The library (docs/library.md):

    import resnet_nobn
    config = resnet_nobn.ModelConfig(widths=(16, 32, 64), blocks_per_stage=1, stem_width=16)
    model = resnet_nobn.build_model(config, seed=0)          # weight decay in model.losses
    model.compile(optimizer=resnet_nobn.recipes.optimizer(), ...)  # SGD, momentum, schedule

`ModelConfig`, `TrainConfig` (resnet_nobn/config.py), `recipes` (the paper's CIFAR and ImageNet
settings), `ImageClassifier` (the network with its preprocessing: raw pixels in, compiled with the
recipe), `load_dataset(name, split)` (the command line's input as a tf.data.Dataset of raw
pixels), `build_model(config, seed=0, weight_decay=1e-4)`, `Standardize` (the input's
standardisation, a Keras layer), `train(train_config)` (the command line's trainer; returns
what results.json holds) and `custom_objects()` (for keras.saving.load_model). Importing the
package loads nothing else; each name loads its module when first used, so `import
resnet_nobn` loads no TensorFlow and the entry points (run/) check their command line before
TensorFlow loads. The modules, by floor, are listed in docs/architecture.md. Importing the
package registers the project's Keras classes as soon as Keras loads (`_RegisterWithKeras`), so a
saved model.keras loads without custom_objects:

    import keras, resnet_nobn
    model = keras.saving.load_model("EXPORT_DIR/model.keras")
"""
import importlib as _importlib
import importlib.machinery as _machinery
import sys as _sys

# name -> (module, attribute; None: the module itself), imported when the name is first used
_PUBLIC = {
    "ModelConfig": ("resnet_nobn.config", "ModelConfig"),
    "TrainConfig": ("resnet_nobn.config", "TrainConfig"),
    "ConfigError": ("resnet_nobn.options", "ConfigError"),
    "recipes": ("resnet_nobn.recipes", None),
    "build_model": ("resnet_nobn.model.network", "build_model"),
    "custom_objects": ("resnet_nobn.model.network", "custom_objects"),
    "Standardize": ("resnet_nobn.model.standardize", "Standardize"),
    "StepSchedule": ("resnet_nobn.schedule", "StepSchedule"),
    "train": ("resnet_nobn.training.trainer", "train"),
    "ImageClassifier": ("resnet_nobn.model.classifier", "ImageClassifier"),
    "load_dataset": ("resnet_nobn.data.library_input", "load_dataset"),
}
__all__ = sorted(_PUBLIC)


class _RegisterWithKeras:
    """Keras' registry of classes by name, filled with the project's as Keras loads: a saved
    model.keras then loads after `import resnet_nobn` alone (Keras imports no module of ours to
    find them), and `import resnet_nobn` still loads no Keras. A finder on sys.meta_path, armed
    until it has registered them: the specs of `keras` and of our modules, which the other
    finders give, have their loader (a file's, one per module) import resnet_nobn.model, which
    registers every class, after running the module, once Keras is loaded. Where a module
    resnet_nobn.model needs is still loading (resnet_nobn.schedule importing Keras), it waits
    for the next of ours to load. Registered, it takes itself off sys.meta_path."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "keras" and not fullname.startswith("resnet_nobn."):
            return None
        for finder in _sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = None if finder is self or find is None else find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if isinstance(spec.loader, (_machinery.SourceFileLoader, _machinery.SourcelessFileLoader)):
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                _register_with_keras()
            spec.loader.exec_module = exec_module
        return spec


def _register_with_keras():
    """Registers the project's Keras classes if Keras is loaded (`_RegisterWithKeras`)."""
    if "keras" not in _sys.modules:
        return
    if "resnet_nobn.model" not in _sys.modules:
        try:
            _importlib.import_module("resnet_nobn.model")
        except ImportError:  # a module it needs is mid-import: again when the next of ours loads
            return
    _sys.meta_path[:] = [f for f in _sys.meta_path if not isinstance(f, _RegisterWithKeras)]


if "keras" in _sys.modules:
    _importlib.import_module("resnet_nobn.model")  # Keras is loaded already: register now
else:
    _sys.meta_path.insert(0, _RegisterWithKeras())


def __getattr__(name):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'resnet_nobn' has no attribute {name!r}")
    module, attribute = _PUBLIC[name]
    value = _importlib.import_module(module)
    value = value if attribute is None else getattr(value, attribute)
    globals()[name] = value
    return value


def __dir__():
    """The public names and the module's own: not the submodules that happen to be loaded (a
    name `dir` lists must be one every process has, whatever it imported before)."""
    return sorted({n for n in globals() if n.startswith("__")} | set(_PUBLIC))
