"""Multi-worker training on loopback: worker processes with TF_CONFIG, synthetic data, a tiny model.

Every subprocess wait has a timeout and every worker is killed when a test ends, whatever happens.
To compare the weights of the workers, each worker runs the entry point through a small wrapper
(WRAPPER below, test-only) that saves its model's final weights to DUMP_DIR/task<i>.npz.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import test_replicas
from resnet_nobn.training import local_cluster
from tests.helpers import NEEDS_BFLOAT16, TINY

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

ARGS = [*TINY, "--widths=8,8,16,16", "--log_every=5", "--eval_every=1000"]  # ImageNet's 4 stages

WRAPPER = r"""
import os, runpy, sys
import numpy as np
sys.path.insert(0, os.getcwd())
from resnet_nobn.training import trainer
_run = trainer.Trainer.run
def run(self):
    out = _run(self)
    np.savez(os.path.join(os.environ["DUMP_DIR"], f"task{self.task_id}.npz"),
             *[np.asarray(v) for v in self.model.weights])
    return out
trainer.Trainer.run = run
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))  # as `python run/x.py` does
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _start(flags, ports, tmp_path, tag, dump=None):
    procs = []
    for i in range(len(ports)):
        log = open(tmp_path / f"{tag}_worker{i}.log", "wb")
        cmd = (["-c", WRAPPER] if dump else []) + ["run/imagenet_train.py"] + flags
        env_extra = {"DUMP_DIR": str(dump)} if dump else {}
        p = subprocess.Popen([sys.executable] + cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                             env=dict(local_cluster.worker_env(ports, i), **env_extra))
        p.log = tmp_path / f"{tag}_worker{i}.log"
        procs.append(p)
    return procs


def _wait(procs, timeout):
    deadline = time.time() + timeout
    codes = []
    try:
        for p in procs:
            codes.append(p.wait(max(1.0, deadline - time.time())))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return codes


def _logs(procs):
    return "\n".join(f"--- {p.log.name}\n" + p.log.read_text(errors="replace")[-3000:] for p in procs)


@pytest.fixture
def cleanup():
    started = []
    yield started
    for procs in started:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_sigkill_one_worker_then_restart_finishes_with_identical_weights(tmp_path, cleanup):
    """A killed worker stops the chief; both restarted resume and finish with the same weights,
    the chief alone having written the run (one launch of two workers to the end serves both;
    from a fresh start, the workers' weights agree too: `worker_runs`)."""
    model_dir, dump = tmp_path / "run", tmp_path / "dump"
    dump.mkdir()
    ckpt = model_dir / "ckpt"
    flags = ARGS + ["--train_steps=40", "--checkpoint_every=5", f"--model_dir={model_dir}"]
    procs = _start(flags, local_cluster.free_ports(2), tmp_path, "first")
    cleanup.append(procs)

    def saved_steps():
        return [int(f.split("-")[1].split(".")[0]) for f in os.listdir(ckpt)
                if f.startswith("ckpt-") and f.endswith(".index")] if ckpt.is_dir() else []

    deadline = time.time() + 120
    while max(saved_steps() or [0]) < 10:
        assert time.time() < deadline and all(p.poll() is None for p in procs), _logs(procs)
        time.sleep(0.1)
    procs[1].send_signal(signal.SIGKILL)  # the non-chief dies mid-training
    codes = _wait(procs, 60)
    assert codes[1] == -signal.SIGKILL
    assert codes[0] not in (0, None), _logs(procs)  # the chief notices by itself and stops
    assert "another worker failed" in procs[0].log.read_text(), _logs(procs)
    # the project's line says what happened: TensorFlow's watcher thread adds no traceback
    assert "Traceback" not in procs[0].log.read_text(), _logs(procs)
    killed_at = max(saved_steps())
    assert 10 <= killed_at < 40

    procs = _start(flags, local_cluster.free_ports(2), tmp_path, "restart", dump)
    cleanup.append(procs)
    assert _wait(procs, 150) == [0, 0], _logs(procs)
    assert f"resumed from {ckpt}/ckpt-{killed_at} at step {killed_at}" in procs[0].log.read_text()
    w0, w1 = np.load(dump / "task0.npz"), np.load(dump / "task1.npz")
    assert len(w0.files) == len(w1.files) > 0
    for k in w0.files:
        np.testing.assert_array_equal(w0[k], w1[k], err_msg=k)
    results = json.loads((model_dir / "results.json").read_text())
    assert results["global_step"] == 40
    assert results["num_replicas"] == 2
    assert results["strategy"] in ("MultiWorkerMirroredStrategy", "CollectiveAllReduceStrategy")
    assert not (model_dir / ".scratch").exists()
    # only the chief wrote anything (and holds the lock); the other worker's scratch is gone
    written = sorted(os.listdir(model_dir))
    hparams = [n for n in written if n.startswith("events.out.tfevents.")]  # the run's HParams
    assert len(hparams) == 1, written  # one writer: the chief
    assert [n for n in written if n not in hparams] == [".lock", "ckpt", "config.json", "eval",
                                                        "results.json", "train"]


def _run_one(tf_config, tmp_path, timeout=90, env=None):
    env = dict(os.environ, TF_CONFIG=tf_config, TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    t0 = time.time()
    p = subprocess.run([sys.executable, "run/imagenet_train.py"] + ARGS +
                       ["--train_steps=2", f"--model_dir={tmp_path / 'bad'}"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stderr, time.time() - t0


@pytest.mark.parametrize("tf_config,expected", [
    ("{not json", "not valid JSON"),
    ('{"cluster": {"worker": ["127.0.0.1:1"]}}', "no 'task'"),
    ('{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 2}}',
     "out of range"),
    ('{"cluster": {"chief": ["127.0.0.1:1", "127.0.0.1:2"], "worker": ["127.0.0.1:3"]}, '
     '"task": {"type": "worker", "index": 0}}', "at most one chief"),
])
def test_malformed_tf_config_is_one_line_error(tf_config, expected, tmp_path):
    code, err, _ = _run_one(tf_config, tmp_path)
    assert code == 2 and expected in err, err
    assert "Traceback" not in err


def test_multi_worker_without_tf_config_says_it_is_not_set(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    p = subprocess.run([sys.executable, "run/imagenet_train.py", *ARGS, "--strategy=multi_worker",
                        "--train_steps=2", f"--model_dir={tmp_path / 'bad'}"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=90)
    assert p.returncode == 2 and p.stderr.startswith("error: TF_CONFIG is not set"), p.stderr
    assert "run/launch_local.py" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "bad").exists()


def test_port_in_use_is_reported(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        other = local_cluster.free_ports(1)[0]
        tf_config = json.dumps({"cluster": {"worker": [f"127.0.0.1:{port}", f"127.0.0.1:{other}"]},
                                "task": {"type": "worker", "index": 0}})
        code, err, _ = _run_one(tf_config, tmp_path)
    assert code == 2 and f"port {port}" in err and "in use" in err, err


def test_unreachable_peer_fails_in_bounded_time(tmp_path):
    ports = local_cluster.free_ports(2)  # the peer on ports[1] is never started
    code, err, elapsed = _run_one(local_cluster.tf_config(ports, 0), tmp_path,
                                  env={"RESNET_NOBN_CONNECT_TIMEOUT": "2"})
    assert code != 0 and "could not reach all peers" in err, err
    assert elapsed < 60
    assert not (tmp_path / "bad").exists()  # nothing written


@pytest.mark.parametrize("name,value", [("RESNET_NOBN_CONNECT_TIMEOUT", "abc"),
                                        ("RESNET_NOBN_HEARTBEAT_TIMEOUT", "-5"),
                                        ("RESNET_NOBN_CONNECT_TIMEOUT", "inf")])
def test_bad_timeout_variable_is_one_line_error(name, value, tmp_path):
    ports = local_cluster.free_ports(2)
    code, err, _ = _run_one(local_cluster.tf_config(ports, 0), tmp_path, env={name: value})
    assert code == 2 and name in err and "positive number of seconds" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "bad").exists()


# --------------------------------------------------------------------------------------------
# Two workers train what one device trains (the BN twin and the speed options), on mock CIFAR-10.

# Runs each configuration of argv[1] (JSON {name: overrides of test_replicas.py's config}) in turn
# on one MultiWorkerMirroredStrategy, in DUMP_DIR/<name>, and saves every weight to
# DUMP_DIR/<name>_task<i>.npz. The data: the tfds mock CIFAR-10 the one-device runs read.
SEQUENCE = r"""
import json, os, sys
import numpy as np
sys.path[:0] = [os.getcwd(), os.path.join(os.getcwd(), "tests"),
                os.path.join(os.getcwd(), "tests", "training")]
from resnet_nobn.training import cluster
import test_replicas
strategy = cluster.make_strategy("multi_worker")
dump = os.environ["DUMP_DIR"]
for name, kw in json.loads(sys.argv[1]).items():
    trainer, _ = test_replicas.run(os.path.join(dump, name), strategy, **kw)
    np.savez(os.path.join(dump, f"{name}_task{trainer.task_id}.npz"),
             *[np.asarray(v) for v in trainer.model.weights])
"""

# the one-device references' configurations (the session's one_device_runs), on 2 workers
WORKER_RUNS = test_replicas.REFERENCES


@pytest.fixture(scope="module")
def worker_runs(tmp_path_factory, one_device_runs):
    """WORKER_RUNS trained by 2 workers on loopback (one launch), and the same runs on one device
    (the session's, tests/conftest.py `one_device_runs`)."""
    tmp = tmp_path_factory.mktemp("workers")
    # the configurations the CPU trained on one device (an AVX2-only CPU: no bfloat16 run, its
    # test skipped: NEEDS_BFLOAT16)
    runs = {name: WORKER_RUNS[name] for name in one_device_runs}
    dump = tmp / "dump"
    dump.mkdir()
    ports = local_cluster.free_ports(2)
    procs = []
    for i in range(2):
        log = tmp / f"worker{i}.log"
        p = subprocess.Popen([sys.executable, "-c", SEQUENCE, json.dumps(runs)], cwd=ROOT,
                             stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                             env=dict(local_cluster.worker_env(ports, i), DUMP_DIR=str(dump)))
        p.log = log
        procs.append(p)
    try:
        assert _wait(procs, 800) == [0, 0], _logs(procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return dump, one_device_runs


def _worker_weights(dump, name):
    w0, w1 = np.load(dump / f"{name}_task0.npz"), np.load(dump / f"{name}_task1.npz")
    for k in w0.files:
        np.testing.assert_array_equal(w0[k], w1[k], err_msg=k)
    return [w0[k] for k in w0.files]


@pytest.mark.timeout(1200)
def test_bn_twin_on_two_workers_equals_one_device(worker_runs):
    dump, one = worker_runs
    own = one["bn"].results
    test_replicas.assert_same_weights(one["bn"], _worker_weights(dump, "bn"))
    results = json.loads((dump / "bn" / "results.json").read_text())
    assert results["num_replicas"] == 2
    assert results["history"][-1]["eval_loss"] == pytest.approx(own["history"][-1]["eval_loss"],
                                                                rel=1e-4)


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name,tol", [("bn_float16", dict(atol=5e-3)),
                                      pytest.param("bn_bfloat16", dict(atol=3e-2),
                                                   marks=NEEDS_BFLOAT16),
                                      ("xla", dict(rtol=1e-4, atol=1e-5))])
def test_speed_option_on_two_workers_equals_one_device(worker_runs, name, tol):
    """Tolerances of tests/training/test_speed_options.py; --xla with the BN-free net (the BN twin is
    refused with several replicas: tests/training/test_replicas.py)."""
    dump, one = worker_runs
    _worker_weights(dump, name)  # both workers hold the same weights
    np.testing.assert_allclose(test_replicas.losses(dump / name),
                               test_replicas.losses(one[name].model_dir), **tol)


@pytest.mark.timeout(1200)
def test_eval_only_on_one_device_of_a_checkpoint_written_by_two_workers(worker_runs):
    dump, _ = worker_runs
    own = json.loads((dump / "bn" / "results.json").read_text())["history"][-1]
    again = test_replicas.evaluate_only(dump / "bn", "one_device", **WORKER_RUNS["bn"])
    assert again["history"][-1]["num_replicas"] == 1
    for key in ("top1_error", "top5_error", "eval_loss", "eval_examples"):
        assert again["history"][-1][key] == pytest.approx(own[key], rel=1e-6), key


def test_xla_bn_twin_on_two_workers_is_refused_at_start_up(tmp_path, cleanup):
    flags = ARGS + ["--norm=batch", "--xla", "--train_steps=2", f"--model_dir={tmp_path / 'run'}"]
    procs = _start(flags, local_cluster.free_ports(2), tmp_path, "xla")
    cleanup.append(procs)
    assert _wait(procs, 150) == [2, 2], _logs(procs)
    for p in procs:
        lines = [l for l in p.log.read_text().splitlines() if l.startswith("error:")]
        assert lines == ["error: --xla with --norm=batch cannot train on 2 replicas: the BN twin "
                         "all-reduces its batch statistics inside the forward pass, which XLA does "
                         "not compile under tf.distribute; drop --xla, or use "
                         "--strategy=one_device"], _logs(procs)
    assert not (tmp_path / "run" / "ckpt").exists()


class _Workers:
    """A stand-in for MultiWorkerMirroredStrategy: this worker's value summed with the others'."""

    def __init__(self, other_steps):
        import tensorflow as tf
        self.num_replicas_in_sync = 1 + len(other_steps)
        self.others = tf.constant([[s, s * s] for s in other_steps], tf.int64)
        self.cluster_resolver = type("Resolver", (), {
            "cluster_spec": lambda self: type("Spec", (), {"jobs": ["worker"]})()})()

    def run(self, fn):
        return fn()

    def reduce(self, op, value, axis):
        assert op == "SUM" and axis is None
        import tensorflow as tf
        summed = tf.reduce_sum(self.others, axis=0)  # [sum of steps, sum of their squares]
        return value + (summed if value.shape.rank else summed[0])


@pytest.mark.timeout(60)
def test_a_worker_whose_step_is_the_mean_of_different_steps_stops_too():
    from resnet_nobn.errors import UserError
    from resnet_nobn.training.cluster import check_same_step
    check_same_step(_Workers([6, 6]), 6, "/shared/run")  # the same step everywhere: no error
    for this, others in [(6, [3, 9]), (3, [6, 9]), (5, [5, 4, 6])]:
        with pytest.raises(UserError, match="resumed from different steps"):
            check_same_step(_Workers(others), this, "/shared/run")
