"""The entry points as processes: run/launch_local.py bounds --num_workers, forwards SIGTERM and
Ctrl-C to the workers (which save a checkpoint and stop; a second Ctrl-C kills them, in one line)
and names the first worker to fail, whichever it is; an address-space limit too small for
TensorFlow is one line."""
import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from tests.helpers import signal_when

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAUNCH = os.path.join(ROOT, "run", "launch_local.py")


def test_too_many_workers_is_one_line_at_once():
    proc = subprocess.run([sys.executable, LAUNCH, "--num_workers=100000", "--",
                           "run/imagenet_train.py", "--use_synthetic_data"],
                          capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert "--num_workers=100000: give 1 to" in proc.stderr and proc.stdout == ""


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_sigterm_to_the_launcher_is_forwarded_as_a_preemption(tmp_path):
    model_dir = tmp_path / "mw"
    cmd = [sys.executable, LAUNCH, "--num_workers=2", "--threads_per_worker=1", "--",
           "run/imagenet_train.py", "--use_synthetic_data", "--widths=8,8,8,8", "--stem_width=8",
           "--blocks_per_stage=1", "--batch_size=4", "--learning_rate=0.01", "--log_every=1",
           "--eval_every=100000", "--checkpoint_every=100000", "--train_steps=100000",
           f"--model_dir={model_dir}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)
    text, _ = signal_when(  # once both workers train
        proc, lambda lines: sum(l.startswith("[worker 0] step ") for l in lines) >= 2, signal.SIGTERM)
    assert "[launch] SIGTERM: forwarded to the workers" in text, text[-3000:]
    assert "stopped by SIGTERM at step" in text, text[-3000:]
    assert proc.returncode == 128 + signal.SIGTERM, text[-3000:]
    saved = [int(p.rsplit("-", 1)[1][:-len(".index")])
             for p in glob.glob(str(model_dir / "ckpt" / "ckpt-*.index"))]
    step = max(saved)
    assert step >= 2 and f"stopped by SIGTERM at step {step}" in text, (saved, text[-3000:])
    # the preemption checkpoint keeps the training log up to it (a resume goes on from it)
    results = json.loads((model_dir / "results.json").read_text())
    assert results["global_step"] == step, results
    assert [h["step"] for h in results["train_history"]] == list(range(1, step + 1)), results


# A stand-in worker for the launcher's own tests (no TensorFlow): it reads its index from
# TF_CONFIG, prints `ready`, then does what FAKE_WORKER_<index> says (a Python statement); on
# SIGTERM it "saves a checkpoint" for FAKE_SAVE seconds and exits 0.
FAKE_WORKER = """
import json, os, signal, sys, time
i = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
def on_term(*_):
    print("saving", flush=True)
    time.sleep(float(os.environ.get("FAKE_SAVE", "0")))
    print("saved", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
exec(os.environ.get(f"FAKE_WORKER_{i}", "time.sleep(120)"))
"""


def _launch(num_workers=2, **env):
    return subprocess.Popen([sys.executable, LAUNCH, f"--num_workers={num_workers}", "--", "-c",
                             FAKE_WORKER], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=dict(os.environ, **env))


def _finish(proc, timeout):
    try:
        return proc.communicate(timeout=timeout)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("last, status, said", [
    ("sys.exit(3)", 3, "worker 2 exited with status 3"),
    ("os.kill(os.getpid(), signal.SIGKILL)", 137, "worker 2 was killed by SIGKILL (status 137)")])
def test_a_worker_other_than_the_chief_that_fails_stops_the_launcher_at_once(last, status, said):
    t0 = time.time()
    proc = _launch(3, FAKE_WORKER_2=last)  # workers 0 and 1 would run for 120 s
    out = _finish(proc, 60)
    assert proc.returncode == status, out
    assert f"[launch] {said}; stopping the others" in out, out
    assert time.time() - t0 < 30, out  # not when worker 0 ends


@pytest.mark.slow
def test_ctrl_c_gives_the_workers_the_sigterm_grace_to_save():
    proc = _launch(FAKE_SAVE="11")  # a save longer than the 10 s the launcher once gave Ctrl-C
    out, _ = signal_when(proc, lambda lines: sum("ready" in l for l in lines) == 2, signal.SIGINT,
                         wait=60)
    assert proc.returncode == 130, out
    assert "[launch] interrupted; stopping the workers" in out, out
    assert out.count("saved") == 2 and "Traceback" not in out, out


def test_a_second_ctrl_c_kills_the_workers_in_one_line():
    proc = _launch(FAKE_SAVE="100")
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if sum("ready" in l for l in lines) == 2:
                break
        proc.send_signal(signal.SIGINT)
        for line in proc.stdout:
            lines.append(line)
            if sum("saving" in l for l in lines) == 2:
                break
        t0 = time.time()
        proc.send_signal(signal.SIGINT)
        out = "".join(lines) + _finish(proc, 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and time.time() - t0 < 10, out
    assert "[launch] interrupted; killing the workers (SIGKILL)" in out, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out


@pytest.mark.slow
def test_an_address_space_limit_too_small_for_tensorflow_is_one_line(tmp_path):
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2_000_000 * 1024, resource.RLIM_INFINITY))
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "run", "cifar_train.py"),
                           "--use_synthetic_data", "--train_steps=2",
                           f"--model_dir={tmp_path / 'run'}"], preexec_fn=limit, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert "ulimit -v" in proc.stderr and not (tmp_path / "run").exists()
