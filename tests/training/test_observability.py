"""What a run shows of itself: a profiler trace of --profile_steps (one device and 2 replicas), the
TensorBoard tags beyond the scalars (HParams, kernel histograms, augmented images), --deterministic
in config.json, and the versions and device names in results.json."""
import glob
import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from helpers import tiny_config
from resnet_nobn.model import network as model_lib
from resnet_nobn.training import trainer as train_lib


def tags(directory):
    """{tag: [steps]} of the event files directly in `directory`."""
    out = {}
    for path in glob.glob(os.path.join(directory, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for v in event.summary.value:
                out.setdefault(v.tag, []).append(event.step)
    return out


@pytest.mark.parametrize("strategy", ["one_device", "mirrored"])
def test_profile_steps_write_a_trace_tensorboard_reads(tmp_path, strategy):
    cfg = tiny_config(tmp_path, train_steps=5, steps_per_loop=5, profile_steps=(2, 4),
                      strategy=strategy, use_synthetic_data=False, eval_steps=1)
    with tfds.testing.mock_data(num_examples=16):
        trainer = train_lib.Trainer(cfg)
        loops = []
        trainer.train_loop = lambda it, n, run=trainer.train_loop: (loops.append(n), run(it, n))[1]
        trainer.run()
    assert loops == [2, 2, 1]  # the loops end at START and END: the trace holds steps 3 and 4
    traces = glob.glob(str(tmp_path / "train" / "plugins" / "profile" / "*" / "*.xplane.pb"))
    assert len(traces) == 1 and os.path.getsize(traces[0]) > 0
    tf.profiler.experimental.start(str(tmp_path / "again"))  # fails if the run left one running
    tf.profiler.experimental.stop(save=False)


def test_a_run_writes_hparams_kernel_histograms_and_augmented_images(tmp_path):
    cfg = tiny_config(tmp_path, train_steps=4, eval_every=2, eval_steps=1, log_every=2,
                      use_synthetic_data=False, seed=3)
    with tfds.testing.mock_data(num_examples=16):
        trainer = train_lib.Trainer(cfg)
        trainer.run()
    assert "_hparams_/session_start_info" in tags(tmp_path)
    kernels = ["kernel/" + k.path for k in model_lib.conv_kernels(trainer.model)]
    assert len(kernels) == 7  # the stem's and two per block
    evaluation = tags(tmp_path / "eval")
    for k in kernels:
        assert evaluation[k] == [2, 4], k  # at each evaluation
    train = tags(tmp_path / "train")
    assert train["augmented_images"] == [0]  # once
    image = [v for path in glob.glob(str(tmp_path / "train" / "events.out.tfevents.*"))
             for e in tf.compat.v1.train.summary_iterator(path) for v in e.summary.value
             if v.tag == "augmented_images"][0]
    pixels = tf.io.decode_png(tf.make_ndarray(image.tensor)[2]).numpy()
    assert pixels.shape == (32, 32, 3) and pixels.min() == 0 and pixels.max() == 255  # viewable


def test_deterministic_turns_on_op_determinism_and_the_seed_and_is_recorded(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(tf.config.experimental, "enable_op_determinism",
                        lambda: calls.append("ops"))
    monkeypatch.setattr(keras.utils, "set_random_seed", lambda s: calls.append(("seed", s)))
    results = train_lib.train(tiny_config(tmp_path, train_steps=2, seed=5, deterministic=True))
    assert calls == [("seed", 5), "ops"]
    assert json.load(open(tmp_path / "config.json"))["deterministic"] is True
    assert results["numpy_version"] == np.__version__
    assert results["tfds_version"] == tfds.__version__
    build = tf.sysconfig.get_build_info()
    assert (results["cuda_version"], results["cudnn_version"]) == (
        build.get("cuda_version"), build.get("cudnn_version"))
    assert list(results["device_names"]) == ["/device:CPU:0"]
    assert results["device_names"]["/device:CPU:0"]
    off = train_lib.train(tiny_config(tmp_path / "off", train_steps=2))
    assert calls == [("seed", 5), "ops"] and off["config"]["deterministic"] is False


def test_the_hparams_tab_shows_every_training_setting_that_sets_runs_apart():
    """A run continued with --agc=0.16, or one with --mixup or --max_branch_norm, looked the same
    as the paper's settings in the HParams tab: it listed clip_norm but not these."""
    from resnet_nobn.config import SCIENTIFIC_FIELDS
    from resnet_nobn.training.summaries import hparams_of
    shown = hparams_of(tiny_config("/unused", agc=0.16))
    named = {"use_synthetic_data": "synthetic_data", "class_names": None}  # names: the dataset's
    missing = [f for f in SCIENTIFIC_FIELDS if named.get(f, f) and named.get(f, f) not in shown]
    assert missing == [] and shown["agc"] == 0.16, missing
    assert all(isinstance(v, (str, bool, int, float)) for v in shown.values())


@pytest.mark.parametrize("steps, start, train_steps, said", [
    ((2, 4), 0, 5, None),
    ((), 9, 5, None),
    ((2, 4), 4, 8, "--profile_steps=2,4: the run resumes at step 4, after them; nothing is traced"),
    ((10, 50), 0, 20, "--profile_steps=10,50: the run ends at step 20; the trace holds steps 11 "
                      "to 20"),
    ((10, 50), 15, 20, "--profile_steps=10,50: the run ends at step 20; the trace holds steps 16 "
                       "to 20"),
])
def test_profile_steps_the_run_cannot_trace_whole_are_said(steps, start, train_steps, said):
    from resnet_nobn.training import profiling
    assert profiling.shortfall(steps, start, train_steps) == said


def test_profile_steps_starting_after_the_last_step_are_refused(tmp_path):
    from resnet_nobn.options import ConfigError
    for steps in ((30, 50), (20, 21)):
        with pytest.raises(ConfigError, match=r"^TrainConfig\.profile_steps=\d+,\d+ starts at or "
                                              r"after the run's last step \(TrainConfig\."
                                              r"train_steps=20\): nothing would be traced"):
            tiny_config(tmp_path, train_steps=20, profile_steps=steps)
    tiny_config(tmp_path, train_steps=20, profile_steps=(19, 30))
