"""TensorFlow, imported without its start-up lines: `from theory.quiet import tf`.

TF_CPP_MIN_LOG_LEVEL=2 unless set, and the C++ lines that ignore it (absl's log banner, oneDNN,
CUDA probing) sent to /dev/null while TensorFlow loads and probes its devices, as run/_start.py
and resnet_nobn.console do for the training entry points. A module run as `python -m theory...`
imports it first, so its --help and its output start with its own lines."""
import os

from resnet_nobn.console import quiet_stderr

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
with quiet_stderr():
    import tensorflow as tf
    tf.config.list_physical_devices()   # the device probe's lines (cuInit)

__all__ = ["tf"]
