"""Where a run's code came from and what it ran on, as results.json and an export's model card
record it: the git commit of the project (`-dirty` when tracked files were changed), the versions
of the libraries whose numerics a run depends on, and each device's name; and --deterministic,
which makes the run's numerics depend on nothing else. Each is read once per process.
"""
import functools
import os
import platform
import subprocess


@functools.cache
def git_commit():
    """The project's git commit (with `-dirty` if tracked files changed), or None."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=10)
        commit = out.stdout.strip() if out.returncode == 0 else None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (commit + ("-dirty" if dirty else "")) if commit else None
    except (OSError, subprocess.SubprocessError):
        return None


@functools.cache
def versions():
    """{tf_version, keras_version, numpy_version, tfds_version, cuda_version, cudnn_version}: the
    CUDA and cuDNN TensorFlow was built against (tf.sysconfig.get_build_info(); None in a build
    without CUDA)."""
    import keras
    import numpy as np
    import tensorflow as tf
    import tensorflow_datasets as tfds
    build = tf.sysconfig.get_build_info()
    return {"tf_version": tf.__version__, "keras_version": keras.__version__,
            "numpy_version": np.__version__, "tfds_version": tfds.__version__,
            "cuda_version": build.get("cuda_version"), "cudnn_version": build.get("cudnn_version")}


def _cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    except OSError:
        names = []
    return names[0] if names else platform.processor() or platform.machine()


def device_names(strategy):
    """{device: its hardware's name} of each device this worker trains on ('/device:GPU:0':
    'NVIDIA H100 80GB HBM3'; a CPU: its model from /proc/cpuinfo)."""
    import tensorflow as tf
    gpus = tf.config.list_physical_devices("GPU")
    out = {}
    for device in strategy.extended.worker_devices:
        spec = tf.DeviceSpec.from_string(device)
        index = spec.device_index or 0
        if spec.device_type == "GPU" and index < len(gpus):
            name = tf.config.experimental.get_device_details(gpus[index]).get("device_name")
        else:
            name = _cpu_name()
        out[f"/device:{spec.device_type}:{index}"] = name
    return out


def make_deterministic(seed):
    """--deterministic: TensorFlow's op determinism (every op's deterministic kernel, or an error
    naming an op that has none) and the Keras seed (Python's, numpy's and TensorFlow's global
    random generators, from `seed`). Process-wide, and not undone."""
    import keras
    import tensorflow as tf
    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
