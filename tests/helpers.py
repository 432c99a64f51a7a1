"""Small configurations and helpers shared by the training tests."""
import dataclasses
import glob
import os
import subprocess
import sys
import time

from resnet_nobn.config import TrainConfig
from resnet_nobn.config import ModelConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_config(model_dir, **overrides):
    """A 1-block-per-stage, narrow CIFAR net on synthetic data: trains in seconds on a CPU."""
    model_fields = {f.name for f in dataclasses.fields(ModelConfig)}
    model_kw = {k: overrides.pop(k) for k in list(overrides) if k in model_fields}
    model = ModelConfig(**{**dict(widths=(8, 16, 32), blocks_per_stage=(1, 1, 1), stem_width=8),
                           **model_kw})
    base = dict(model=model, use_synthetic_data=True, train_steps=6, batch_size=8,
                learning_rate=0.01, lr_boundaries=(), eval_every=1000, checkpoint_every=1000,
                log_every=1000, strategy="one_device", model_dir=str(model_dir))
    base.update(overrides)
    return TrainConfig(**base)


def run_cli(script, *args, timeout=240):
    """Runs `python run/<script> args`; returns the CompletedProcess."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return subprocess.run([sys.executable, os.path.join(ROOT, "run", script), *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def train_losses(model_dir):
    """{step: training loss} from a run's train/ summaries."""
    import tensorflow as tf
    out = {}
    for path in glob.glob(os.path.join(model_dir, "train", "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for v in event.summary.value:
                if v.tag == "loss":
                    out[event.step] = float(tf.make_ndarray(v.tensor))
    return out


def signal_when(proc, ready, sig, wait=300):
    """Reads `proc`'s stdout line by line until `ready(lines)` (or `wait` seconds), sends it `sig`
    and lets it finish: (everything it printed on stdout, its stderr). It never outlives the call."""
    lines, deadline = [], time.time() + wait
    try:
        for line in proc.stdout:
            lines.append(line)
            if ready(lines) or time.time() > deadline:
                break
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return "".join(lines) + (out or ""), err
