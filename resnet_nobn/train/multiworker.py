"""A multi-worker run (MultiWorkerMirroredStrategy) that connects, stops and fails in bounded
time. What the user sees (a UserError: one line, exit status 2):

  * a TF_CONFIG that is not JSON, has no cluster or task, or names a task that is not in the
    cluster, a task whose port is already in use, and a timeout that is not a number of seconds
    are said before TensorFlow starts (`parse_tf_config`, `check_port_free`, `timeouts`);
  * the peers never come up: a watchdog process prints why and kills the worker if the strategy
    and a first collective are not ready within RESNET_NOBN_CONNECT_TIMEOUT seconds (environment
    variable, default 180). TensorFlow blocks in C++ holding the GIL and ignores
    SIGTERM meanwhile, so nothing inside the process can end the wait; the coordination
    service's own registration timeout is also set to it.
  * SIGTERM (a preemption notice) reaches a worker: all save a checkpoint at a common step and
    stop (`preemption_handler`); the same command on every worker resumes.
  * a peer dies during training: the coordination service's heartbeat notices within
    RESNET_NOBN_HEARTBEAT_TIMEOUT seconds (default 30) and the collectives of the other workers
    fail; the run stops with the error and can be restarted from the last checkpoint.
  * the workers restored different steps (a --model_dir not on shared storage): `check_same_step`.

TensorFlow is imported inside the functions that need it: the command line checks TF_CONFIG first.
"""
import json
import os
import shutil
import socket
import sys
import tempfile

from resnet_nobn.errors import UserError, first_line, seconds_from_env
from resnet_nobn.train import rundir

# --------------------------------------------------------------------------------------------
# TF_CONFIG and the timeouts, checked before TensorFlow starts


TIMEOUTS = {"RESNET_NOBN_CONNECT_TIMEOUT": 180.0, "RESNET_NOBN_HEARTBEAT_TIMEOUT": 30.0}  # seconds


def timeouts(environ=None):
    """(connect, heartbeat) timeouts in seconds from the environment, read when a multi-worker run
    starts; UserError naming the variable if one is not a positive number of seconds."""
    environ = os.environ if environ is None else environ
    return tuple(seconds_from_env(name, default, environ) for name, default in TIMEOUTS.items())


def parse_tf_config(text=None):
    """(cluster dict, task_type, task_id) from TF_CONFIG; UserError with the reason if malformed."""
    text = os.environ.get("TF_CONFIG", "") if text is None else text
    try:
        cfg = json.loads(text)
    except ValueError as e:
        raise UserError(f"TF_CONFIG is not valid JSON ({e}): {text[:120]!r}") from None
    if not isinstance(cfg, dict):
        raise UserError(f"TF_CONFIG must be a JSON object with 'cluster' and 'task', got {text[:120]!r}")
    cluster, task = cfg.get("cluster"), cfg.get("task")
    example = ('e.g. {"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
               '"task": {"type": "worker", "index": 0}}')
    if not isinstance(cluster, dict) or not cluster:
        raise UserError(f"TF_CONFIG has no 'cluster' mapping job names to host:port lists; {example}")
    for job, addresses in cluster.items():
        if job not in ("chief", "worker"):
            raise UserError(f"TF_CONFIG cluster job {job!r} is not supported by "
                            "MultiWorkerMirroredStrategy; use 'worker' (and optionally 'chief')")
        if not isinstance(addresses, list) or not addresses:
            raise UserError(f"TF_CONFIG cluster[{job!r}] must be a non-empty list of host:port")
        for a in addresses:
            _split_address(a, job)
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise UserError(f"TF_CONFIG has no 'task' with 'type' and 'index' (which task this process "
                        f"is); {example}")
    task_type, task_id = task["type"], task["index"]
    if task_type not in cluster:
        raise UserError(f"TF_CONFIG task type {task_type!r} is not a job of the cluster "
                        f"({', '.join(cluster)})")
    if not isinstance(task_id, int) or not 0 <= task_id < len(cluster[task_type]):
        raise UserError(f"TF_CONFIG task index {task_id!r} is out of range: the cluster has "
                        f"{len(cluster[task_type])} {task_type} task(s)")
    return cluster, task_type, task_id


def _split_address(address, job="?"):
    host, sep, port = str(address).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"TF_CONFIG cluster[{job!r}] entry {address!r} is not host:port")
    return host.strip("[]"), int(port)


def check_port_free(address):
    """UserError if this task's port cannot be bound (another process listens on it)."""
    _, port = _split_address(address)
    for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue
        try:
            # SO_REUSEADDR: a port left in TIME_WAIT by a killed worker is free for its restart.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
        except OSError as e:
            if family == socket.AF_INET6 and e.errno in (97, 99):  # no IPv6 here
                continue
            raise UserError(f"port {port} of this task ({address}) is in use ({e.strerror}); stop "
                            "the process using it or give this task another port in TF_CONFIG") from None
        finally:
            s.close()


# --------------------------------------------------------------------------------------------
# The connection, preemption and failed peers


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


def make_strategy():
    """A MultiWorkerMirroredStrategy for this TF_CONFIG that connects or fails in bounded time."""
    import tensorflow as tf
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.distribute import multi_worker_util
    from tensorflow.python.eager import context

    connect_timeout, heartbeat_timeout = timeouts()
    cluster, task_type, task_id = parse_tf_config()
    check_port_free(cluster[task_type][task_id])
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
    return handler


def peer_failure_message(e, step, model_dir):
    """A one-line explanation of a collective that failed because another worker went away."""
    import tensorflow as tf
    last = tf.train.latest_checkpoint(os.path.join(model_dir, rundir.CKPT))
    return (f"another worker failed or became unreachable near step {step} ({type(e).__name__}: "
            f"{first_line(e)}); restart every worker with the same command to resume from "
            f"{last or 'the beginning (no checkpoint yet)'}")


PEER_ERRORS = ("UnavailableError", "AbortedError", "CancelledError", "DeadlineExceededError",
               "InternalError", "UnknownError")


def check_same_step(strategy, step, model_dir):
    """UserError unless every worker restored the same step (model_dir must be shared storage)."""
    if not is_multi_worker(strategy):
        return
    import tensorflow as tf

    @tf.function
    def moments():
        mine = strategy.run(lambda: tf.constant([step, step * step], tf.int64))
        return strategy.reduce("SUM", mine, axis=None)

    # The sums of the steps and of their squares, the same on every worker: the steps are all
    # equal iff replicas * sum(s^2) == sum(s)^2 (Cauchy-Schwarz), so every worker stops, not only
    # those whose step differs from the mean (with 3 workers at 3, 6, 9 the one at 6 is the mean).
    replicas = strategy.num_replicas_in_sync
    total, squares = (int(v) for v in moments())
    if replicas * squares != total * total:
        raise UserError(f"the workers resumed from different steps (this one {step}, mean "
                        f"{total / replicas:g}): "
                        f"every worker must see the same --model_dir={model_dir}, on a shared file "
                        "system (NFS, GCS, ...), to restore the chief's checkpoint")
