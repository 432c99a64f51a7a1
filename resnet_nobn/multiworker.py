"""A multi-worker run (MultiWorkerMirroredStrategy) that connects, stops and fails in bounded
time; its TF_CONFIG is checked first (resnet_nobn/cluster.py). What the user sees (a UserError:
one line, exit status 2):

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
"""
import os
import shutil
import sys
import tempfile

from resnet_nobn.cluster import check_port_free, is_multi_worker, parse_tf_config, timeouts
from resnet_nobn.errors import UserError, first_line

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
    last = tf.train.latest_checkpoint(os.path.join(model_dir, "ckpt"))
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
