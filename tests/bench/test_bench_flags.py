"""The benchmarks' size and peak flags: a value that is no size or no peak (0, negative, not
finite) is refused in one `error:` line before any work, never read as "not given"."""
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT

# Runs a script with TensorFlow, Keras and JAX made unimportable: a refusal must come before any of
# them loads (and before any training or fitting).
RUN = ("import sys\nclass B:\n def find_spec(self, name, *a):\n"
       "  if name.split('.')[0] in ('tensorflow', 'keras', 'jax'): raise ImportError(name)\n"
       "sys.meta_path.insert(0, B())\nimport runpy\nsys.argv = sys.argv[1:]\n"
       "runpy.run_path(sys.argv[0], run_name='__main__')\n")


@pytest.mark.parametrize("script, flags, said", [
    ("step_speed.py", ["--blocks=0", "--widths=8,8,8"], "--blocks=0"),
    ("step_speed.py", ["--peak_tflops=-5"], "--peak_tflops=-5"),
    ("step_speed.py", ["--peak_tflops=0"], "--peak_tflops=0"),
    ("step_speed.py", ["--peak_tflops=nan"], "--peak_tflops=nan"),
    *(("step_speed.py", [f"--widths={w}"], f"--widths={w}: give the channels of the 3 stages")
      for w in ("abc", "8,,16", "16,8", "0,8,16", "8,16", "8,16,32,64", "")),
    ("speed_options_bench.py", ["--quick", "--steps=0"], "--steps=0"),
    ("speed_options_bench.py", ["--blocks=0"], "--blocks=0"),
    ("speed_options_bench.py", ["--batch_size=-2"], "--batch_size=-2"),
    ("expressivity_bench.py", ["--quick", "--n=0"], "--n=0"),
    ("expressivity_bench.py", ["--d=0"], "--d=0")])
def test_a_size_or_peak_that_is_none_is_refused_before_any_work(script, flags, said):
    proc = subprocess.run([sys.executable, "-c", RUN, os.path.join(ROOT, "bench", script), *flags],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and proc.stdout == "", proc.stdout[-2000:]
    assert proc.stderr.startswith(f"error: {said}") and proc.stderr.count("\n") <= 1, proc.stderr


# TensorFlow's import ends the script (no ImportError, which Keras would take as "not installed")
NO_TF = ("import sys\nclass B:\n def find_spec(self, name, *a):\n"
         "  if name.split('.')[0] == 'tensorflow': raise SystemExit('tensorflow imported')\n"
         "sys.meta_path.insert(0, B())\nimport runpy\nsys.argv = sys.argv[1:]\n"
         "runpy.run_path(sys.argv[0], run_name='__main__')\n")


@pytest.mark.slow
def test_step_speed_times_the_network_under_jax_without_tensorflow():
    """bench/step_speed.py --backend=jax: the network's training step on a machine without
    TensorFlow (a GPU machine with JAX only), nothing on stderr; float16, which needs the trainer's
    loss scaling, is refused."""
    step_speed = os.path.join(ROOT, "bench", "step_speed.py")
    proc = subprocess.run([sys.executable, "-c", NO_TF, step_speed, "--backend=jax", "--steps=2",
                           "--widths=8,16,32", "--blocks=1", "--batch_size=4"],
                          capture_output=True, text=True, timeout=240,
                          env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-2000:]
    lines = dict(line.split(": ", 1) for line in proc.stdout.splitlines())
    assert lines["network"].endswith("float32, JAX backend") and lines["device"] == "CPU:0 (cpu)"
    ms, per_sec = float(lines["step"].split()[0]), float(lines["step"].split()[-1])
    assert per_sec == pytest.approx(4 / ms * 1e3, rel=0.05)  # 4 images a step
    half = subprocess.run([sys.executable, step_speed, "--backend=jax", "--mixed_precision=float16"],
                          capture_output=True, text=True, timeout=60)
    assert half.returncode == 1 and half.stderr.startswith("error: --mixed_precision=float16")
