"""The study's hyperparameters for TensorBoard's HParams dashboard: the experiment summary at the
study's root (every hparam with its values, and the metrics) and one hp.hparams per run, written
into the run's directory before the run starts, with the study's trial id (the trainer writes it
in a run outside a study: resnet_nobn/training/summaries.py, whose `hparams_of` both use).
"""
import os

from resnet_nobn.config import TrainConfig
from resnet_nobn.files import read_json
from resnet_nobn.study.grid import OPTIONAL, run_name
from resnet_nobn.training.rundir import CKPT, CONFIG, EVAL, SUMMARIES, TRAIN


METRICS = ((EVAL, "top1_error", "test top-1 error"), (EVAL, "top5_error", "test top-5 error"),
           (EVAL, "eval_loss", "test loss"), (TRAIN, "loss", "training loss"))


def write_hparams_config(root, configs):
    """The experiment summary at ROOT: every hparam with its values in this study and in the runs
    already under ROOT (several studies may share a root), and the metrics."""
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hp
    from resnet_nobn.training.summaries import hparams_of
    os.makedirs(root, exist_ok=True)
    for name in os.listdir(root):  # one experiment config at the root: replace the previous one
        if name.startswith("events.out.tfevents."):
            os.remove(os.path.join(root, name))
    configs = list(configs)
    for dirpath, dirnames, filenames in os.walk(root):  # and the runs of earlier studies here
        dirnames[:] = [d for d in dirnames if d not in (CKPT,) + SUMMARIES]
        old = read_json(os.path.join(dirpath, CONFIG)) if CONFIG in filenames else None
        if old:
            try:
                configs.append(TrainConfig.from_json(old))
            except (TypeError, ValueError, KeyError, AttributeError):
                pass  # a config.json of another version or program: its values are not in the domain
    values = {}
    for cfg in configs:
        for k, v in hparams_of(cfg).items():
            values.setdefault(k, set()).add(v)
    hparams = [hp.HParam(k, hp.Discrete(sorted(v))) for k, v in values.items()]
    metrics = [hp.Metric(tag, group=group, display_name=label) for group, tag, label in METRICS]
    writer = tf.summary.create_file_writer(root)
    with writer.as_default():
        hp.hparams_config(hparams=hparams, metrics=metrics)
    writer.close()
    return hparams


def write_run_hparams(cfg):
    """The run's hp.hparams (resnet_nobn/training/summaries.py), once, with the study's trial id: the
    run's directory under the root."""
    from resnet_nobn.training import summaries  # loads TensorFlow
    return summaries.write_run_hparams(cfg, trial_id=run_name(cfg, OPTIONAL))
