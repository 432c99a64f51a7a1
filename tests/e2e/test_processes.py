"""The entry points as processes: run/launch_local.py bounds --num_workers
and forwards SIGTERM to the workers (which save a checkpoint and stop); an address-space limit
too small for TensorFlow is one line."""
import glob
import os
import signal
import subprocess
import sys

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
    assert [p for p in glob.glob(str(model_dir / "ckpt" / "ckpt-*.index")) if not p.endswith("-0.index")]


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
