"""The study's hyperparameters for TensorBoard's HParams dashboard: the experiment summary at the
study's root (every hparam with its values, and the metrics) and one hp.hparams per run, written
into the run's directory so TensorBoard pairs it with the run's train/ and eval/ summaries.
"""
import os

from resnet_nobn.config import TrainConfig
from resnet_nobn.study.grid import OPTIONAL, blocks_text, run_name
from resnet_nobn.train.rundir import CKPT, CONFIG, EVAL, SUMMARIES, TRAIN, read_json


def hparams_of(cfg):
    """The hyperparameters shown in TensorBoard for one run (scalars only)."""
    m = cfg.model
    return {"dataset": cfg.dataset, "norm": m.norm, "init": m.init, "head": m.head,
            "blocks_per_stage": blocks_text(m.blocks_per_stage),
            "relu_leakiness": float(m.relu_leakiness), "clip_norm": float(cfg.clip_norm),
            "residual_blocks": int(sum(m.blocks_per_stage)),
            "widths": ",".join(str(w) for w in m.widths), "seed": int(cfg.seed),
            "learning_rate": float(cfg.learning_rate), "warmup_steps": int(cfg.warmup_steps),
            "batch_size": int(cfg.batch_size), "train_steps": int(cfg.train_steps),
            "weight_decay": float(cfg.weight_decay), "synthetic_data": bool(cfg.use_synthetic_data),
            "mixed_precision": cfg.mixed_precision, "xla": bool(cfg.xla)}


METRICS = ((EVAL, "top1_error", "test top-1 error"), (EVAL, "top5_error", "test top-5 error"),
           (EVAL, "eval_loss", "test loss"), (TRAIN, "loss", "training loss"))


def write_hparams_config(root, configs):
    """The experiment summary at ROOT: every hparam with its values in this study and in the runs
    already under ROOT (several studies may share a root), and the metrics."""
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hp
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
    """hp.hparams in the run's directory (once), so TensorBoard pairs it with train/ and eval/."""
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hp
    os.makedirs(cfg.model_dir, exist_ok=True)
    if any(n.startswith("events.out.tfevents.") for n in os.listdir(cfg.model_dir)):
        return False
    writer = tf.summary.create_file_writer(cfg.model_dir)
    with writer.as_default():
        # the trial id is TensorBoard's group: runs of one id are one row of the HParams tab
        hp.hparams(hparams_of(cfg), trial_id=run_name(cfg, OPTIONAL))
    writer.close()
    return True
