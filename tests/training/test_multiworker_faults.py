"""Multi-worker faults: a TF_CONFIG checked whole before TensorFlow starts, workers started
with other settings than the chief's, stopped before the first step with one line naming the
flag (no TensorFlow traceback, nothing recorded), and a worker that fails before the first step,
of which the chief says one line."""
import json
import os
import subprocess
import sys
import time

import pytest

from resnet_nobn.errors import UserError
from resnet_nobn.training.tf_config import parse_tf_config
from resnet_nobn.training import local_cluster
from tests.helpers import ROOT, TINY

pytestmark = pytest.mark.slow

ARGS = [*TINY, "--widths=8,8,16,16", "--log_every=5", "--eval_every=1000",  # ImageNet's 4 stages
        "--train_steps=4"]


def _tf_config(workers, index=0):
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})


@pytest.mark.parametrize("tf_config, said", [
    (_tf_config(["127.0.0.1:2222", "127.0.0.1:2223"], "0"), "index '0' is a string"),
    (_tf_config(["127.0.0.1:2222"], True), "index True is not an integer"),
    (_tf_config(["grpc://127.0.0.1:2222"]), "a URL"),
    (_tf_config(["http://host:2222/x"]), "a URL"),
    (_tf_config(["127.0.0.1:２２２２"]), "ASCII digits"),
    (_tf_config(["hôst:2222"]), "not a host name"),
    (_tf_config(["127.0.0.1:2222", "127.0.0.1:2222"]), "127.0.0.1:2222 twice"),
    (json.dumps({"cluster": {"chief": ["a:1"], "worker": ["a:1"]},
                 "task": {"type": "chief", "index": 0}}), "a:1 twice"),
    (json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": ["worker"], "index": 0}}),
     "task type ['worker']"),
    (json.dumps({"cluster": {"chief": ["a:1", "a:2"], "worker": ["a:3"]},
                 "task": {"type": "worker", "index": 0}}), "at most one chief"),
    ("", "TF_CONFIG is not set"),
    ("  ", "TF_CONFIG is not set"),
])
def test_tf_config_is_checked_whole_before_tensorflow(tf_config, said):
    with pytest.raises(UserError) as e:
        parse_tf_config(tf_config)
    assert said in str(e.value) and "\n" not in str(e.value), str(e.value)


def _two_workers(argvs, timeout, drop=(), **env):
    """Runs two workers of one cluster on this machine, worker i with `argvs[i]` (after the
    interpreter), `env` added to its environment and TF_CONFIG and the variables `drop` left
    out; returns [(Popen, stdout, stderr)] once both ended (killed past `timeout`)."""
    ports = local_cluster.free_ports(2)
    procs = []
    for i, argv in enumerate(argvs):
        environ = {k: v for k, v in local_cluster.worker_env(ports, i).items() if k not in drop}
        procs.append(subprocess.Popen(
            [sys.executable, *argv], cwd=ROOT, env=dict(environ, **env),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [(p, out, err) for p, (out, err) in zip(procs, outs)]


def test_a_worker_started_with_another_seed_stops_both_naming_the_flag(tmp_path):
    model_dir = tmp_path / "run"
    ended = _two_workers([["run/imagenet_train.py", *ARGS, *extra, f"--model_dir={model_dir}"]
                          for extra in ([], ["--seed=3"])], 200, RESNET_NOBN_CONNECT_TIMEOUT="120")
    for p, out, err in ended:
        lines = [l for l in err.splitlines() if l.strip() and not l.startswith(("E0000", "W0000"))]
        assert p.returncode == 2, (out, err)
        assert len(lines) == 1 and "--seed" in lines[0] and "Traceback" not in err, err
        assert "step " not in out  # stopped before the first step
    assert not (model_dir / "results.json").exists() and not (model_dir / "ckpt").exists()


def test_a_worker_whose_chief_is_killed_says_one_line_and_no_tensorflow_log(tmp_path):
    """TensorFlow's C++ log (`E0000 ... StartAbort UNAVAILABLE`, `{grpc_status:14 ...}`) stays
    off the survivor's stderr unless the user sets TF_CPP_MIN_LOG_LEVEL: its one `error:` line is
    all it says."""
    model_dir = tmp_path / "run"
    ports = local_cluster.free_ports(2)
    procs = []
    for i in range(2):
        env = dict(local_cluster.worker_env(ports, i), RESNET_NOBN_CONNECT_TIMEOUT="120")
        env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as a user has it
        procs.append(subprocess.Popen(
            [sys.executable, "run/imagenet_train.py", *ARGS[:-1], "--train_steps=400",
             "--checkpoint_every=2", f"--model_dir={model_dir}"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        deadline = time.time() + 300
        while (len(list((model_dir / "ckpt").glob("ckpt-*.index"))) < 2 and time.time() < deadline
               and procs[1].poll() is None):
            time.sleep(0.1)  # the chief dies soon after ckpt-2: no steps trained for nothing
        procs[0].kill()
        out, err = procs[1].communicate(timeout=200)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
    assert procs[1].returncode == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: another worker failed"), err


# Worker 1 fails as one whose --data_dir does not exist on its machine does: in making its input,
# after the workers connected and compared their settings, while the chief broadcasts the initial
# weights (test-only wrapper of the entry point).
FAILS_AT_INPUT = r"""
import json, os, runpy, sys
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))  # as `python run/x.py` does
import _start  # before TensorFlow loads, as in the entry point
from resnet_nobn.console import quiet_stderr
from resnet_nobn.errors import UserError
with quiet_stderr():  # TensorFlow's start-up lines, as in the entry point
    from resnet_nobn.data import inputs
if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 1:
    def make_input(cfg):
        raise UserError("--data_dir=/nonexistent is not a directory")
    inputs.make_input = make_input
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_worker_that_fails_before_the_first_step_stops_the_chief_in_one_line(tmp_path):
    model_dir = tmp_path / "run"
    argv = ["-c", FAILS_AT_INPUT, "run/imagenet_train.py", *ARGS, f"--model_dir={model_dir}"]
    (chief, _, err0), (worker, _, err1) = _two_workers(
        [argv, argv], 150, drop=("TF_CPP_MIN_LOG_LEVEL",),  # as a user has it
        RESNET_NOBN_CONNECT_TIMEOUT="120", RESNET_NOBN_HEARTBEAT_TIMEOUT="5")
    assert worker.returncode == 2 and "/nonexistent is not a directory" in err1, err1
    assert chief.returncode == 2, err0
    lines = err0.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: another worker failed or became unreachable before the first step"), err0
    assert "Collective ops is aborted" in lines[0] and "resume from the beginning" in lines[0], err0
    assert not model_dir.exists()  # nothing written
