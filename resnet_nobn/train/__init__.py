"""One training run: the trainer (trainer.py), the hub that sequences it, and its spokes: the run
directory read once, written whole and locked (rundir.py), the start decided from it (resume.py),
the compiled steps (steps.py), checkpoints (checkpoints.py), results.json (results.py), and where
it trains (cluster.py, its TF_CONFIG read before TensorFlow: tf_config.py).

The package is also the library's `resnet_nobn.train(cfg)`: called, it runs `trainer.train`.
"""
import sys as _sys
import types as _types


class _CallablePackage(_types.ModuleType):
    """This package, callable as trainer.train. The public name `resnet_nobn.train` and this
    subpackage are one object whichever is imported first: a function under the package's name
    is replaced by the subpackage when a submodule is first imported, and once set hides the
    submodules (`resnet_nobn.train.rundir`)."""

    def __call__(self, *args, **kwargs):  # trainer.train's arguments, as it defines them
        from resnet_nobn.train.trainer import train  # loads TensorFlow: only when called
        return train(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallablePackage
