"""The trainer: one custom loop for every tf.distribute strategy, CIFAR and ImageNet alike.

Keras 3 `model.fit` fails under MultiWorkerMirroredStrategy (keras-team/keras#20585), so the step is
`strategy.run` inside a `tf.function`, over `distribute_datasets_from_function`, with Keras layers
and the Keras SGD optimizer (which all-reduces the gradients itself: each replica's loss is scaled
by the *global* batch with `tf.nn.compute_average_loss`). Single-device, multi-GPU and multi-worker
runs share this code.

`model_dir` holds everything: `config.json` (the run's configuration; a later run with another
architecture is refused), `ckpt/` (tf.train.CheckpointManager; a re-run resumes from the latest),
`train/` and `eval/` TensorBoard summaries, and `results.json`, rewritten after every evaluation.
"""
import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from resnet_nobn import cluster, data, model as model_lib
from resnet_nobn.config import TrainConfig, UserError, config_diffs, learning_rate

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker")


class TrainingDiverged(UserError):
    """The loss or the weights stopped being finite."""


# --------------------------------------------------------------------------------------------
# Strategy and the file system


def make_strategy(name):
    """auto: multi-worker when TF_CONFIG is set, mirrored with several GPUs, else one device."""
    if name == "multi_worker" or (name == "auto" and os.environ.get("TF_CONFIG")):
        # Before anything initialises TensorFlow's context (listing logical devices does): collective
        # ops must be configured at startup. TF_CONFIG checked, bounded connection: see cluster.py.
        return cluster.make_multi_worker_strategy()
    gpus = tf.config.list_logical_devices("GPU")
    if name == "auto":
        name = "mirrored" if len(gpus) > 1 else "one_device"
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if gpus else "/cpu:0")
    if name == "mirrored":
        devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices)
    raise UserError(f"unknown --strategy={name}; choose one of {', '.join(STRATEGIES)}")


def is_chief(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def _atomic_write_json(path, obj):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, default=str)
    os.replace(tmp, path)


def git_commit():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=10)
        commit = out.stdout.strip() if out.returncode == 0 else None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (commit + ("-dirty" if dirty else "")) if commit else None
    except (OSError, subprocess.SubprocessError):
        return None


def check_model_dir(cfg: TrainConfig):
    """Refuses a model_dir whose checkpoint is of another architecture or dataset."""
    path = os.path.join(cfg.model_dir, "config.json")
    if not os.path.exists(path):
        return
    try:
        with open(path) as f:
            old = json.load(f)
    except (OSError, ValueError) as e:
        raise UserError(f"{path} is unreadable ({e}); move it away or use a new --model_dir") from None
    diffs = config_diffs(old, cfg.to_json(), fields=("dataset",))
    if diffs:
        raise UserError(f"--model_dir={cfg.model_dir} holds a run of a different architecture "
                        f"({'; '.join(diffs)}); use a new --model_dir or the flags of that run")


# --------------------------------------------------------------------------------------------
# The trainer


class LearningRate(keras.optimizers.schedules.LearningRateSchedule):
    """Keras wrapper around the pure function `config.learning_rate(step, cfg)`."""

    def __init__(self, cfg):
        self.cfg = cfg

    def __call__(self, step):
        return learning_rate(step, self.cfg)

    def get_config(self):
        return {}


class Trainer:
    """Holds the strategy, model, optimizer, checkpoint and the compiled steps for one run."""

    def __init__(self, cfg: TrainConfig, strategy=None):
        self.cfg = cfg
        self.strategy = strategy or make_strategy(cfg.strategy)
        replicas = self.strategy.num_replicas_in_sync
        if cfg.batch_size % replicas:
            raise UserError(f"--batch_size={cfg.batch_size} does not split over {replicas} replicas; "
                            f"use a multiple of {replicas}")
        self.chief = is_chief(self.strategy)
        self.input = data.make_input(cfg)
        check_model_dir(cfg)
        # The layers take the global dtype policy when built; set it for this build only, so it
        # neither leaks into a later run in the same process nor inherits an earlier one's.
        previous_policy = keras.mixed_precision.global_policy()
        keras.mixed_precision.set_dtype_policy(
            "float32" if cfg.mixed_precision == "float32" else f"mixed_{cfg.mixed_precision}")
        try:
            with self.strategy.scope():
                self.model = model_lib.build_model(cfg.model, seed=cfg.seed)
        finally:
            keras.mixed_precision.set_dtype_policy(previous_policy)
        with self.strategy.scope():
            optimizer = keras.optimizers.SGD(learning_rate=LearningRate(cfg), momentum=cfg.momentum)
            if cfg.mixed_precision == "float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            self.optimizer = optimizer
            self.optimizer.build(self.model.trainable_variables)
        self.kernels = model_lib.conv_kernels(self.model)
        self.stages = model_lib.stage_kernels(self.model)
        self.trainable_params = model_lib.count_params(self.model.trainable_variables)
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer)
        # Only the chief writes into model_dir; other workers save to a scratch dir they delete.
        ckpt_dir = os.path.join(cfg.model_dir, "ckpt")
        if not self.chief:
            ckpt_dir = os.path.join(cfg.model_dir, ".scratch", f"worker{self._task_id()}")
        self.manager = tf.train.CheckpointManager(self.checkpoint, ckpt_dir, max_to_keep=3)
        self._train_step = self._eval_step = None
        # Multi-worker only: on SIGTERM to any worker, all save at a common step and stop.
        self.preemption = cluster.preemption_handler(
            self.strategy, self.save, self._remove_scratch,
            lambda: f"stopped by SIGTERM at step {self.step} after saving a checkpoint; re-run "
                    "the same command on every worker to resume")

    def _task_id(self):
        resolver = getattr(self.strategy, "cluster_resolver", None)
        return getattr(resolver, "task_id", 0) or 0

    def _remove_scratch(self):
        """Non-chief workers delete their scratch checkpoints (and .scratch when it is empty)."""
        if self.chief:
            return
        scratch = os.path.join(self.cfg.model_dir, ".scratch")
        shutil.rmtree(os.path.join(scratch, f"worker{self._task_id()}"), ignore_errors=True)
        try:
            os.rmdir(scratch)
        except OSError:
            pass

    @property
    def step(self):
        return int(self.optimizer.iterations.numpy())

    # -- checkpoints ---------------------------------------------------------------------------

    def restore(self):
        """Restores the latest checkpoint of model_dir, if any; returns its path or None."""
        path = tf.train.latest_checkpoint(os.path.join(self.cfg.model_dir, "ckpt"))
        if path is None:
            return None
        try:
            self.checkpoint.restore(path).assert_existing_objects_matched()
        except Exception as e:  # noqa: BLE001 -- any failure here means an unusable checkpoint
            first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            raise UserError(f"cannot restore {path}: corrupt, or from a different architecture "
                            f"({first}); use a new --model_dir") from None
        return path

    def save(self):
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(v))
                                for v in self.model.trainable_variables])
        if not bool(finite):
            raise TrainingDiverged(self._diverged_message("the weights"))
        self.manager.save(checkpoint_number=self.step)

    def _diverged_message(self, what):
        last = tf.train.latest_checkpoint(os.path.join(self.cfg.model_dir, "ckpt"))
        kept = f"the last good checkpoint {last} is kept" if last else "no checkpoint was written"
        return (f"{what} became NaN/inf at step {self.step}; {kept}; lower --learning_rate "
                f"(now {self.cfg.learning_rate}) or add --warmup_steps")

    # -- compiled steps ------------------------------------------------------------------------

    def _build_train_step(self):
        cfg, model, optimizer = self.cfg, self.model, self.optimizer
        global_batch = cfg.batch_size
        variables = model.trainable_variables
        kernels = self.kernels

        @tf.function(jit_compile=cfg.xla)
        def gradients(images, labels):
            with tf.GradientTape() as tape:
                logits = tf.cast(model(images, training=True), tf.float32)
                per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
                cross_entropy = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
                decay = cfg.weight_decay * tf.add_n([tf.nn.l2_loss(tf.cast(k, tf.float32))
                                                     for k in kernels])
                loss = cross_entropy + tf.nn.scale_regularization_loss(decay)
                scaled = optimizer.scale_loss(loss)
            grads = tape.gradient(scaled, variables)
            top1 = tf.cast(tf.math.in_top_k(labels, logits, 1), tf.float32)
            top5 = tf.cast(tf.math.in_top_k(labels, logits, min(5, logits.shape[-1])), tf.float32)
            return grads, cross_entropy, loss, tf.reduce_sum(top1), tf.reduce_sum(top5)

        def step_fn(images, labels):
            grads, cross_entropy, loss, top1, top5 = gradients(images, labels)
            optimizer.apply_gradients(zip(grads, variables))
            return cross_entropy, loss, top1, top5

        @tf.function
        def train_step(iterator):
            images, labels = next(iterator)
            out = self.strategy.run(step_fn, args=(images, labels))
            return [self.strategy.reduce("SUM", t, axis=None) for t in out]

        return train_step

    def _build_eval_step(self):
        model = self.model

        def step_fn(images, labels, weights):
            logits = tf.cast(model(images, training=False), tf.float32)
            top1 = tf.cast(tf.math.in_top_k(labels, logits, 1), tf.float32) * weights
            top5 = tf.cast(tf.math.in_top_k(labels, logits, min(5, logits.shape[-1])),
                           tf.float32) * weights
            ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits) * weights
            return tf.reduce_sum(top1), tf.reduce_sum(top5), tf.reduce_sum(weights), tf.reduce_sum(ce)

        @tf.function
        def eval_step(iterator):
            out = self.strategy.run(step_fn, args=next(iterator))
            return [self.strategy.reduce("SUM", t, axis=None) for t in out]

        return eval_step

    # -- evaluation ----------------------------------------------------------------------------

    def evaluate(self):
        """Top-1/top-5 error on the test split (or its first `eval_steps` global batches)."""
        if self._eval_step is None:
            self._eval_step = self._build_eval_step()
        cfg = self.cfg
        batches = self.input.num_eval_batches(cfg.batch_size)
        if cfg.eval_steps > 0:
            batches = min(batches, cfg.eval_steps)
        def dataset_fn(ctx):  # each replica of a pipeline reads its own per-replica batch
            per_pipeline = ctx.num_replicas_in_sync // ctx.num_input_pipelines
            return self.input.eval_dataset(ctx, cfg.batch_size).take(batches * per_pipeline)

        dist = self.strategy.distribute_datasets_from_function(dataset_fn)
        iterator = iter(dist)
        totals = np.zeros(4)
        for _ in range(batches):
            totals += np.array([float(t) for t in self._eval_step(iterator)])
        del iterator
        top1, top5, count, ce = totals
        return {"top1_error": 1.0 - top1 / count, "top5_error": 1.0 - top5 / count,
                "eval_loss": ce / count, "eval_examples": int(count)}

    # -- summaries and results -----------------------------------------------------------------

    def stage_norms(self):
        return {name: float(tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(tf.cast(k, tf.float32)))
                                              for k in ks])))
                for name, ks in self.stages.items()}

    def write_results(self, history, wall_time, images_per_sec):
        cfg = self.cfg
        last = history[-1] if history else {}
        results = {
            "dataset": cfg.dataset,
            "global_step": self.step,
            "top1_error": last.get("top1_error"),
            "top5_error": last.get("top5_error"),
            "trainable_params": self.trainable_params,
            "num_replicas": self.strategy.num_replicas_in_sync,
            "strategy": type(self.strategy).__name__,
            "images_per_sec": images_per_sec,
            "wall_time_s": wall_time,
            "seed": cfg.seed,
            "tf_version": tf.__version__,
            "keras_version": keras.__version__,
            "git_commit": git_commit(),
            "history": history,
            "config": cfg.to_json(),
        }
        _atomic_write_json(os.path.join(cfg.model_dir, "results.json"), results)
        return results

    def _previous_results(self):
        path = os.path.join(self.cfg.model_dir, "results.json")
        try:
            with open(path) as f:
                old = json.load(f)
            return old.get("history", []), float(old.get("wall_time_s") or 0.0)
        except (OSError, ValueError):
            return [], 0.0

    # -- the loop ------------------------------------------------------------------------------

    def run(self):
        """Trains (or, with eval_only, evaluates) and returns the results dict."""
        cfg = self.cfg
        restored = self.restore()
        cluster.check_same_step(self.strategy, self.step, cfg.model_dir)
        if cfg.eval_only:
            if restored is None:
                raise UserError(f"--eval_only: no checkpoint in {cfg.model_dir}/ckpt; train first")
            history, wall = self._previous_results()
            ev = self.evaluate()
            history = [h for h in history if h["step"] != self.step] + [dict(step=self.step, **ev)]
            _log(f"eval  step {self.step}  top1_error {ev['top1_error']:.4f}  "
                 f"top5_error {ev['top5_error']:.4f}  ({ev['eval_examples']} images)", self.chief)
            return self.write_results(history, wall, None) if self.chief else None

        if self.chief:
            os.makedirs(cfg.model_dir, exist_ok=True)
            _atomic_write_json(os.path.join(cfg.model_dir, "config.json"), cfg.to_json())
        if restored:
            _log(f"resumed from {restored} at step {self.step}", self.chief)
        history, wall_before = self._previous_results() if restored else ([], 0.0)
        history = [h for h in history if h["step"] <= self.step]

        writers = None
        if self.chief:
            writers = {k: tf.summary.create_file_writer(os.path.join(cfg.model_dir, k))
                       for k in ("train", "eval")}
        if self._train_step is None:
            self._train_step = self._build_train_step()
        start_step = self.step
        dist = self.strategy.distribute_datasets_from_function(
            lambda ctx: self.input.train_dataset(ctx, cfg.batch_size, start_step))
        iterator = iter(dist)

        t_start = time.time()
        t_log, step_log = t_start, start_step
        window = np.zeros(4)
        images_per_sec = None
        results = None
        while self.step < cfg.train_steps:
            cross_entropy, loss, top1, top5 = (float(t) for t in self._train_step(iterator))
            if self.preemption:
                self.preemption.save_checkpoint_if_preempted()
            if not math.isfinite(loss):
                raise TrainingDiverged(self._diverged_message("the loss"))
            window += (cross_entropy, loss, top1, top5)
            step = self.step
            if step % cfg.log_every == 0 or step == cfg.train_steps:
                now = time.time()
                n = step - step_log
                images_per_sec = n * cfg.batch_size / max(now - t_log, 1e-9)
                ce, total, top1, top5 = window / max(n, 1)
                lr = float(learning_rate(step - 1, cfg))
                eta = (cfg.train_steps - step) * (now - t_log) / max(n, 1)
                _log(f"step {step}/{cfg.train_steps}  loss {total:.4f}  xent {ce:.4f}  lr {lr:.4g}  "
                     f"{images_per_sec:.1f} img/s  eta {_hms(eta)}", self.chief)
                if writers:
                    with writers["train"].as_default(step=step):
                        tf.summary.scalar("loss", total)
                        tf.summary.scalar("cross_entropy", ce)
                        tf.summary.scalar("learning_rate", lr)
                        tf.summary.scalar("top1_error", 1.0 - top1 / cfg.batch_size)
                        tf.summary.scalar("top5_error", 1.0 - top5 / cfg.batch_size)
                        tf.summary.scalar("images_per_sec", images_per_sec)
                        for name, norm in self.stage_norms().items():
                            tf.summary.scalar(f"weight_norm/{name}", norm)
                t_log, step_log, window = now, step, np.zeros(4)
            if step % cfg.checkpoint_every == 0 or step == cfg.train_steps:
                self.save()
            if step % cfg.eval_every == 0 or step == cfg.train_steps:
                ev = self.evaluate()
                history.append(dict(step=step, **ev))
                _log(f"eval  step {step}  top1_error {ev['top1_error']:.4f}  "
                     f"top5_error {ev['top5_error']:.4f}  ({ev['eval_examples']} images)", self.chief)
                if writers:
                    with writers["eval"].as_default(step=step):
                        for k in ("top1_error", "top5_error", "eval_loss"):
                            tf.summary.scalar(k, ev[k])
                    writers["eval"].flush()
                if self.chief:
                    results = self.write_results(history, wall_before + time.time() - t_start,
                                                 images_per_sec)
        del iterator
        if writers:
            for w in writers.values():
                w.close()
        self._remove_scratch()
        if results is None and self.chief:  # nothing left to train: report the latest state
            results = self.write_results(history, wall_before, images_per_sec)
        return results


def _hms(seconds):
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m{seconds % 60:02d}s"


def _log(msg, chief=True):
    if chief:
        print(msg, flush=True)


def train(cfg: TrainConfig, strategy=None):
    """Runs one configuration end to end; returns the results dict (None on non-chief workers)."""
    trainer = Trainer(cfg, strategy)
    try:
        return trainer.run()
    except tf.errors.OpError as e:  # a collective failed: a peer worker died or is unreachable
        if not cluster.is_multi_worker(trainer.strategy) or type(e).__name__ not in cluster.PEER_ERRORS:
            raise
        trainer._remove_scratch()
        raise UserError(cluster.peer_failure_message(e, trainer.step, cfg.model_dir)) from None
