"""Where a run trains: the tf.distribute strategy of --strategy, its devices and which worker is
the chief (a multi-worker run's TF_CONFIG and timeouts, checked before TensorFlow starts:
resnet_nobn/train/tf_config.py; the connection itself and preemption: multiworker.py).

Strategy `auto`: MultiWorkerMirroredStrategy when TF_CONFIG is set, MirroredStrategy over several
GPUs, else one device. Every worker of a multi-worker run runs the same command with its own
TF_CONFIG, e.g. on the first of two machines

    TF_CONFIG='{"cluster": {"worker": ["10.0.0.1:12345", "10.0.0.2:12345"]},
                "task": {"type": "worker", "index": 0}}'

Worker 0 is the chief (or the task of type "chief" if there is one).

TensorFlow is imported inside the functions that need it: the command line checks TF_CONFIG first.
"""
import itertools
import os

from resnet_nobn.config import STRATEGIES
from resnet_nobn.errors import UserError
from resnet_nobn.train import multiworker

# --------------------------------------------------------------------------------------------
# The strategy, its devices and the chief


_MIRRORED_COUNT = itertools.count()  # MirroredStrategy objects made in this process


def wants_multi_worker(strategy_name):
    """Whether --strategy=`strategy_name` means a multi-worker run (auto: when TF_CONFIG is set)."""
    return strategy_name == "multi_worker" or (strategy_name == "auto"
                                               and bool(os.environ.get("TF_CONFIG")))


def probe_devices():
    """Lists the physical devices once, so that TensorFlow's device start-up (and its log lines)
    happens here; it does not initialise the context, so collective ops can still be set up."""
    import tensorflow as tf
    return tf.config.list_physical_devices()


def make_strategy(name):
    """The tf.distribute strategy of --strategy=`name` (see the module docstring for auto)."""
    import tensorflow as tf
    if wants_multi_worker(name):
        # Before anything initialises TensorFlow's context (listing logical devices does):
        # collective ops must be configured at startup.
        return multiworker.make_strategy()
    gpus = tf.config.list_logical_devices("GPU")
    if name == "auto":
        name = "mirrored" if len(gpus) > 1 else "one_device"
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if gpus else "/cpu:0")
    if name == "mirrored":
        cpus = tf.config.list_logical_devices("CPU")
        if not gpus and len(cpus) < 2:  # mirrored over CPUs only where they were split on purpose
            raise UserError("--strategy=mirrored found no GPU: install TensorFlow's CUDA libraries "
                            "with `python -m pip install -r requirements-gpu.txt` (check with "
                            "nvidia-smi that the driver sees the GPUs), or train on the CPU with "
                            "--strategy=one_device")
        strategy_class = tf.distribute.MirroredStrategy
        # TensorFlow caches collectives per process by (group, instance) key, and every
        # MirroredStrategy starts at the same keys: a second one in a process whose collectives
        # differ (the BN twin's, then the BN-free net's) aborted with "Shape mismatch in the
        # collective instance 100". So each gets keys of its own (TF's tests set this attribute).
        strategy = strategy_class.__new__(strategy_class)
        strategy._collective_key_base = 1000 * next(_MIRRORED_COUNT)
        strategy.__init__([d.name for d in gpus] or [d.name for d in cpus])
        return strategy
    raise UserError(f"unknown --strategy={name}; choose one of {', '.join(STRATEGIES)}")


def check_replica_options(cfg, replicas):
    """UserError for a combination of options that cannot give the one-device run on `replicas`
    replicas (docs/training.md#one-device-many-gpus-many-machines). Measured with 2 mirrored
    replicas and 2 workers (tests/train/test_replicas.py, tests/train/test_multiworker.py): float16
    and bfloat16 give the one-device run; --xla does for the BN-free net but not for the BN twin,
    whose global batch statistics all-reduce inside the forward pass, which XLA does not compile
    under tf.distribute (MirroredStrategy's `merge_call`: RuntimeError at the first step)."""
    if replicas > 1 and cfg.xla and cfg.model.norm == "batch":
        raise UserError(f"--xla with --norm=batch cannot train on {replicas} replicas: the BN twin "
                        "all-reduces its batch statistics inside the forward pass, which XLA does "
                        "not compile under tf.distribute; drop --xla, or use --strategy=one_device")


def devices_of(strategy):
    """('GPU' or 'CPU', number of replicas on this worker, description) of what `strategy` uses."""
    import tensorflow as tf
    names = list(strategy.extended.worker_devices)
    kind = "GPU" if any("GPU" in n.upper() for n in names) else "CPU"
    detail = ""
    if kind == "GPU":
        gpus = tf.config.list_physical_devices("GPU")
        models = {tf.config.experimental.get_device_details(g).get("device_name", "?") for g in gpus}
        detail = f" ({', '.join(sorted(models))})"
    elif not tf.config.list_physical_devices("GPU"):
        detail = " (no GPU found)"
    return kind, len(names), (f"training on {len(names)} {kind}{'s' if len(names) > 1 else ''}"
                              f"{detail}: {type(strategy).__name__}, "
                              f"{strategy.num_replicas_in_sync} replica(s) in all")


def is_chief(strategy):
    """Whether this process writes model_dir: the only one, the `chief` task, or worker 0."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def task_id(strategy):
    """This worker's index in its job (0 without a cluster)."""
    return getattr(getattr(strategy, "cluster_resolver", None), "task_id", 0) or 0
