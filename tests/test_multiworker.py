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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "run"))
import launch_local  # noqa: E402

pytestmark = pytest.mark.timeout(240)

TINY = ["--use_synthetic_data", "--widths=8,8,16,16", "--stem_width=8", "--blocks_per_stage=1",
        "--batch_size=8", "--learning_rate=0.01", "--log_every=5", "--eval_every=1000"]

WRAPPER = r"""
import os, runpy, sys
import numpy as np
sys.path.insert(0, os.getcwd())
from resnet_nobn import train
_run = train.Trainer.run
def run(self):
    out = _run(self)
    np.savez(os.path.join(os.environ["DUMP_DIR"], f"task{self.task_id}.npz"),
             *[np.asarray(v) for v in self.model.weights])
    return out
train.Trainer.run = run
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
                             env=dict(launch_local.worker_env(ports, i), **env_extra))
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


def test_two_workers_finish_with_identical_weights(tmp_path, cleanup):
    model_dir, dump = tmp_path / "run", tmp_path / "dump"
    dump.mkdir()
    flags = TINY + ["--train_steps=12", "--checkpoint_every=5", f"--model_dir={model_dir}"]
    procs = _start(flags, launch_local.free_ports(2), tmp_path, "ok", dump)
    cleanup.append(procs)
    assert _wait(procs, 150) == [0, 0], _logs(procs)
    w0, w1 = np.load(dump / "task0.npz"), np.load(dump / "task1.npz")
    assert len(w0.files) == len(w1.files) > 0
    for k in w0.files:
        np.testing.assert_array_equal(w0[k], w1[k], err_msg=k)
    results = json.loads((model_dir / "results.json").read_text())
    assert results["global_step"] == 12
    assert results["num_replicas"] == 2
    assert results["strategy"] in ("MultiWorkerMirroredStrategy", "CollectiveAllReduceStrategy")
    # only the chief wrote anything (and holds the lock); the other worker's scratch is gone
    assert sorted(os.listdir(model_dir)) == [".lock", "ckpt", "config.json", "eval", "results.json",
                                             "train"]


def test_sigkill_one_worker_then_restart_finishes(tmp_path, cleanup):
    model_dir = tmp_path / "run"
    ckpt = model_dir / "ckpt"
    flags = TINY + ["--train_steps=40", "--checkpoint_every=5", f"--model_dir={model_dir}"]
    procs = _start(flags, launch_local.free_ports(2), tmp_path, "first")
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
    killed_at = max(saved_steps())
    assert 10 <= killed_at < 40

    procs = _start(flags, launch_local.free_ports(2), tmp_path, "restart")
    cleanup.append(procs)
    assert _wait(procs, 150) == [0, 0], _logs(procs)
    assert f"resumed from {ckpt}/ckpt-{killed_at} at step {killed_at}" in procs[0].log.read_text()
    results = json.loads((model_dir / "results.json").read_text())
    assert results["global_step"] == 40
    assert not (model_dir / ".scratch").exists()


def _run_one(tf_config, tmp_path, timeout=90, env=None):
    env = dict(os.environ, TF_CONFIG=tf_config, TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    t0 = time.time()
    p = subprocess.run([sys.executable, "run/imagenet_train.py"] + TINY +
                       ["--train_steps=2", f"--model_dir={tmp_path / 'bad'}"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stderr, time.time() - t0


@pytest.mark.parametrize("tf_config,expected", [
    ("{not json", "not valid JSON"),
    ('{"cluster": {"worker": ["127.0.0.1:1"]}}', "no 'task'"),
    ('{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 2}}',
     "out of range"),
])
def test_malformed_tf_config_is_one_line_error(tf_config, expected, tmp_path):
    code, err, _ = _run_one(tf_config, tmp_path)
    assert code == 2 and expected in err, err
    assert "Traceback" not in err


def test_port_in_use_is_reported(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        other = launch_local.free_ports(1)[0]
        tf_config = json.dumps({"cluster": {"worker": [f"127.0.0.1:{port}", f"127.0.0.1:{other}"]},
                                "task": {"type": "worker", "index": 0}})
        code, err, _ = _run_one(tf_config, tmp_path)
    assert code == 2 and f"port {port}" in err and "in use" in err, err


def test_unreachable_peer_fails_in_bounded_time(tmp_path):
    ports = launch_local.free_ports(2)  # the peer on ports[1] is never started
    code, err, elapsed = _run_one(launch_local.tf_config(ports, 0), tmp_path,
                                  env={"RESNET_NOBN_CONNECT_TIMEOUT": "5"})
    assert code != 0 and "could not reach all peers" in err, err
    assert elapsed < 60
    assert not (tmp_path / "bad").exists()  # nothing written


@pytest.mark.parametrize("name,value", [("RESNET_NOBN_CONNECT_TIMEOUT", "abc"),
                                        ("RESNET_NOBN_HEARTBEAT_TIMEOUT", "-5"),
                                        ("RESNET_NOBN_CONNECT_TIMEOUT", "inf")])
def test_bad_timeout_variable_is_one_line_error(name, value, tmp_path):
    ports = launch_local.free_ports(2)
    code, err, _ = _run_one(launch_local.tf_config(ports, 0), tmp_path, env={name: value})
    assert code == 2 and name in err and "positive number of seconds" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "bad").exists()
