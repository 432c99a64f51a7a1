"""Hardt & Ma, "Identity Matters in Deep Learning" (ICLR 2017): normalization-free residual networks.

Importing the package registers its Keras layers (resnet_nobn/blocks.py, model.py), so that
`keras.saving.load_model` reads a model.keras of run/export.py: at once if Keras is loaded, else
as soon as it is. Not before: the entry points check their command line before TensorFlow loads.
"""
import importlib.abc
import importlib.util
import sys


def _register_layers():
    from resnet_nobn import blocks, model  # noqa: F401 -- the layers register when defined


class _Loader(importlib.abc.Loader):
    """Keras' own loader, and the layers registered once Keras has loaded."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _register_layers()

    def __getattr__(self, name):  # anything else (resources, source) from Keras' loader
        return getattr(self._loader, name)


class _AfterKeras(importlib.abc.MetaPathFinder):
    """Finds `keras` as usual (once), with a loader that registers the layers after it."""

    def find_spec(self, name, path=None, target=None):
        if name != "keras":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


if "keras" in sys.modules:
    _register_layers()
elif not any(isinstance(f, _AfterKeras) for f in sys.meta_path):
    sys.meta_path.insert(0, _AfterKeras())
