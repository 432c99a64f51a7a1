"""Where a run trains and how its workers keep in step: the tf.distribute strategy of --strategy,
its devices and which worker is the chief; for a multi-worker run (MultiWorkerMirroredStrategy),
a connection that succeeds or fails within RESNET_NOBN_CONNECT_TIMEOUT seconds (a watchdog
process: TensorFlow waits for its peers in C++ holding the GIL), workers that agree on the run's
settings (`check_same_settings`) and step (`check_same_step`) before the first step, and
preemption (`preemption_handler`). What each failure prints: docs/imagenet_and_multiworker.md,
"When something goes wrong".

Strategy `auto`: MultiWorkerMirroredStrategy when TF_CONFIG is set (checked before TensorFlow
starts: tf_config.py), MirroredStrategy over several GPUs, else one device. Every worker runs the
same command with its own TF_CONFIG; worker 0 is the chief (or the task of type "chief").
TensorFlow is imported inside the functions that need it.
"""
import hashlib
import itertools
import json
import os
import shutil
import sys
import tempfile

from resnet_nobn.cli import flag_text
from resnet_nobn.config import STRATEGIES
from resnet_nobn.errors import UserError, first_line
from resnet_nobn.training.tf_config import this_task, timeouts

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
        return connect_multi_worker()
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
    replicas and 2 workers (tests/training/test_replicas.py, tests/training/test_multiworker.py): float16
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


# --------------------------------------------------------------------------------------------
# A multi-worker run: the connection, preemption and failed peers


_WATCHDOG = r"""
import os, sys, time
pid, seconds, message = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
deadline = time.time() + seconds
while time.time() < deadline:
    time.sleep(0.25)
    if os.getppid() != pid:  # the worker is gone
        sys.exit(0)
sys.stderr.write("error: " + message + "\n")
sys.stderr.flush()
os.kill(pid, 9)
"""


class _Watchdog:
    """Kills this process (SIGKILL) with `message` on stderr unless cancelled within `seconds`.

    A separate process: while TensorFlow waits for its peers it blocks inside C++ holding the GIL
    (context.ensure_initialized), so no Python thread or signal handler of this process can run,
    and it ignores SIGTERM; only SIGKILL from outside ends it.
    """

    def __init__(self, seconds, message):
        import subprocess
        self.proc = subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(os.getpid()),
                                      str(seconds), message], stdin=subprocess.DEVNULL)

    def cancel(self):
        self.proc.kill()
        self.proc.wait()


def connect_multi_worker():
    """A MultiWorkerMirroredStrategy for this TF_CONFIG that connects or fails in bounded time."""
    import tensorflow as tf
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.distribute import multi_worker_util
    from tensorflow.python.eager import context

    connect_timeout, heartbeat_timeout = timeouts()
    cluster, task_type, task_id = this_task()
    peers = sum(len(v) for v in cluster.values())
    # TensorFlow's coordination service: registration and heartbeat timeouts. MWMS configures it
    # itself with defaults (wait for the cluster for an hour or more) unless it is configured first.
    context.context().configure_coordination_service(
        service_type="standalone",
        service_leader=multi_worker_util.coordination_leader(cluster),
        cluster_register_timeout_in_ms=int(connect_timeout * 1000),
        heartbeat_timeout_in_ms=int(heartbeat_timeout * 1000),
        shutdown_barrier_timeout_in_ms=int(heartbeat_timeout * 1000),
        coordinated_jobs=[coordination_config_pb2.CoordinatedJob(name=job, num_tasks=len(cluster[job]))
                          for job in ("chief", "worker") if job in cluster])
    where = f"{task_type} {task_id} of {peers} at {cluster[task_type][task_id]}"
    timer = _Watchdog(connect_timeout, f"{where}: could not reach all peers of TF_CONFIG within "
                      f"{connect_timeout:.0f} s (RESNET_NOBN_CONNECT_TIMEOUT); check that every "
                      "worker was started with the same cluster and that its host:port is reachable")
    try:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        # A first collective: returns once every worker is up and connected.
        tf.function(lambda: strategy.reduce(
            "SUM", strategy.run(lambda: tf.constant(1.0)), axis=None))().numpy()
    except (tf.errors.OpError, RuntimeError) as e:
        raise UserError(f"{where}: cannot connect to the cluster ({type(e).__name__}: "
                        f"{first_line(e)}); check TF_CONFIG and that every worker is running") from None
    finally:
        timer.cancel()
    return strategy


def is_multi_worker(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    return bool(resolver is not None and resolver.cluster_spec().jobs)


class Preempted(UserError):
    """SIGTERM (a preemption notice) reached a worker; a checkpoint was saved at a common step."""


def preemption_handler(strategy, save, on_exit, describe):
    """TensorFlow's PreemptionCheckpointHandler for multi-worker runs, else None.

    On SIGTERM to any worker, all workers agree on a step, `save()` there (the trainer's own
    checkpoint: chief into model_dir/ckpt, others into their scratch dir), call `on_exit()` and
    raise Preempted(describe()). Call `handler.save_checkpoint_if_preempted()` once per step.
    The handler's own run counter is kept in a throwaway checkpoint: it counts steps since this
    process started, which is the same on every worker because all resume from the same step.
    """
    if not is_multi_worker(strategy):
        return None
    import tensorflow as tf
    scratch = tempfile.mkdtemp(prefix="preemption_counter_")

    def exit_fn():
        on_exit()
        raise Preempted(describe())

    manager = tf.train.CheckpointManager(tf.train.Checkpoint(), scratch, max_to_keep=1)
    handler = tf.distribute.experimental.PreemptionCheckpointHandler(
        strategy.cluster_resolver, manager,
        termination_config=tf.distribute.experimental.TerminationConfig(
            exit_fn=exit_fn, save_fn=lambda *a, **k: save()))
    shutil.rmtree(scratch, ignore_errors=True)  # nothing is ever saved there (save_fn is ours)
    _quiet_watcher(tf.errors.OpError)
    return handler


def _quiet_watcher(error_class):
    """The handler's PeerTerminationWatcher thread dies with TensorFlow's traceback when a peer
    goes away (its error of `error_class`); the trainer says what happened in its own line
    (resnet_nobn/training/failures.py), so that thread's error is not printed. Any other is."""
    import threading
    printed = threading.excepthook

    def hook(args):
        if not (isinstance(args.exc_value, error_class) and args.thread is not None
                and args.thread.name.startswith("PeerTerminationWatcher")):
            printed(args)
    threading.excepthook = hook


def _same_on_every_replica(strategy, values):
    """For each integer of `values` (each below 2**21 in size), whether every replica holds the
    same, in one exchange: the sums over the replicas of the values and of their squares; they are
    all equal iff replicas * sum(v^2) == sum(v)^2 (Cauchy-Schwarz), so every worker learns it,
    not only those whose value differs from the mean (with 3 workers at 3, 6, 9 the one at 6 is
    the mean)."""
    import tensorflow as tf
    mine = tf.constant([x for v in values for x in (v, v * v)], tf.int64)

    @tf.function
    def moments():
        return strategy.reduce("SUM", strategy.run(lambda: mine), axis=None)

    replicas = strategy.num_replicas_in_sync
    sums = moments().numpy().tolist()
    return [replicas * q == t * t for t, q in zip(sums[0::2], sums[1::2])]


def check_same_step(strategy, step, model_dir):
    """UserError unless every worker restored the same step (model_dir must be shared storage)."""
    if not is_multi_worker(strategy) or all(_same_on_every_replica(strategy, [step])):
        return
    raise UserError(f"the workers resumed from different steps (this one {step}): every worker "
                    f"must see the same --model_dir={model_dir}, on a shared file system (NFS, "
                    "GCS, ...), to restore the chief's checkpoint")


# The settings a worker may have of its own: where it finds the run and the data on its machine,
# and --strategy (auto and multi_worker both mean this strategy when TF_CONFIG is set).
PER_WORKER = ("model_dir", "data_dir", "strategy")
_SLOTS = 64  # settings compared: a fixed length, so workers of other versions still exchange


def check_same_settings(strategy, settings):
    """UserError on every worker, before the first step, unless all run with the same settings
    (`settings`: the run's config.json object; PER_WORKER apart): each setting's fingerprint
    (two 20-bit hashes of its value, and one of the list of settings) is compared in one
    exchange, and the line names each flag that differs, with this worker's value."""
    if not is_multi_worker(strategy):
        return
    flat = {**{k: v for k, v in settings.items() if k != "model"}, **settings["model"]}
    names = sorted(k for k in flat if k not in PER_WORKER)[:_SLOTS - 1]

    def fingerprint(text):
        digest = hashlib.sha256(text.encode()).digest()
        return [int.from_bytes(digest[:3], "big") >> 4, int.from_bytes(digest[3:6], "big") >> 4]
    values = [fingerprint(" ".join(names))] + [fingerprint(json.dumps(flat[k])) for k in names]
    values += [[0, 0]] * (_SLOTS - len(values))
    same = _same_on_every_replica(strategy, [v for pair in values for v in pair])
    if not same[0] or not same[1]:
        raise UserError("the workers run different versions of this project (their settings "
                        "differ in name); install the same version on every worker")
    differ = [k for i, k in enumerate(names, 1) if not (same[2 * i] and same[2 * i + 1])]
    if "seed" in differ and flat.get("head_seed") == flat["seed"]:  # it follows --seed (config.py)
        differ = [k for k in differ if k != "head_seed"]
    if differ:
        mine = " ".join(f"--{k}={flag_text(flat[k])}" for k in differ)
        raise UserError(f"the workers were started with different "
                        f"{', '.join('--' + k for k in differ)} (this worker: {mine}); start "
                        "every worker with the same command, the chief's, only TF_CONFIG differing")
