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
import math
import os
import shutil
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from resnet_nobn import cluster, data, model as model_lib, rundir
from resnet_nobn.blocks import ResidualBlock
from resnet_nobn.config import (STRATEGIES, TrainConfig, UserError, config_diffs, learning_rate,
                                retry_advice)

KEEP_CHECKPOINTS = 5  # enough to go back past a blow-up (resnet_nobn/rundir.py)


class TrainingDiverged(UserError):
    """The loss or the weights stopped being finite."""


# --------------------------------------------------------------------------------------------
# Strategy and the file system


def probe_devices():
    """Lists the physical devices once, so that TensorFlow's device start-up (and its log lines)
    happens here; it does not initialise the context, so collective ops can still be set up."""
    return tf.config.list_physical_devices()


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
        cpus = tf.config.list_logical_devices("CPU")
        if not gpus and len(cpus) < 2:  # mirrored over CPUs only where they were split on purpose
            raise UserError("--strategy=mirrored found no GPU: install TensorFlow's CUDA libraries "
                            "with `python -m pip install -r requirements-gpu.txt` (check with "
                            "nvidia-smi that the driver sees the GPUs), or train on the CPU with "
                            "--strategy=one_device")
        return tf.distribute.MirroredStrategy([d.name for d in gpus] or [d.name for d in cpus])
    raise UserError(f"unknown --strategy={name}; choose one of {', '.join(STRATEGIES)}")


def devices_of(strategy):
    """('GPU' or 'CPU', number of replicas on this worker, description) of what `strategy` uses."""
    names = list(strategy.extended.worker_devices)
    kind = "GPU" if any("GPU" in n.upper() for n in names) else "CPU"
    detail = ""
    if kind == "GPU":
        gpus = tf.config.list_physical_devices("GPU")
        models = {tf.config.experimental.get_device_details(g).get("device_name", "?") for g in gpus}
        detail = f" ({', '.join(sorted(models))})"
    elif not tf.config.list_physical_devices("GPU"):
        detail = " (no GPU found)"
    return kind, len(names), (f"training on {len(names)} {kind}{'s' if len(names) > 1 else ''}"
                              f"{detail}: {type(strategy).__name__}, "
                              f"{strategy.num_replicas_in_sync} replica(s) in all")


def is_chief(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def check_memory(cfg: TrainConfig, replicas):
    """Refuses a model or batch that cannot fit in this machine's memory, before building it."""
    import psutil
    weights, activations = model_lib.memory_lower_bound(cfg.model, cfg.batch_size // replicas)
    total = psutil.virtual_memory().total
    if weights + activations > total:
        flag = (f"--widths (now {','.join(map(str, cfg.model.widths))})" if weights > activations
                else f"--batch_size (now {cfg.batch_size})")
        raise UserError(f"the run needs at least {(weights + activations) / 2**30:.1f} GiB and this "
                        f"machine has {total / 2**30:.1f} GiB; lower {flag}")


def check_model_dir(cfg: TrainConfig):
    """Refuses a model_dir whose checkpoint is of another architecture or dataset."""
    path = os.path.join(cfg.model_dir, "config.json")
    if not os.path.exists(path):
        return
    old = rundir.read_json(path)
    if old is None:
        raise UserError(f"{path} is unreadable or not a JSON object; move it away or use a new "
                        "--model_dir")
    diffs = config_diffs(old, cfg.to_json(), fields=("dataset",))
    if diffs:
        raise UserError(f"--model_dir={cfg.model_dir} holds a run of a different architecture "
                        f"({'; '.join(diffs)}); use a new --model_dir or the flags of that run")


# --------------------------------------------------------------------------------------------
# The trainer


def clip_global_norm(grads, clip_norm):
    """Clips this replica's part of the gradient so the *summed* gradient has norm <= clip_norm.

    Keras clips (`global_clipnorm`) before it all-reduces, i.e. per replica, which differs from one
    device; so the sum is formed here (one extra all-reduce with several replicas), clipped, and
    divided by the number of replicas, which Keras' own all-reduce then sums back.
    """
    ctx = tf.distribute.get_replica_context()
    replicas = ctx.num_replicas_in_sync if ctx is not None else 1
    total = ctx.all_reduce("SUM", grads) if replicas > 1 else grads
    clipped, _ = tf.clip_by_global_norm(total, clip_norm)
    return [g / replicas for g in clipped] if replicas > 1 else clipped


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
        self.device_kind, self.device_count, description = devices_of(self.strategy)
        _log(description, self.chief)
        check_memory(cfg, replicas)
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
        self.manager = tf.train.CheckpointManager(self.checkpoint, ckpt_dir, max_to_keep=KEEP_CHECKPOINTS)
        self._train_loop = self._eval_step = None
        self._probe = self._unrecorded = None
        self._rollbacks, self._previous_rollbacks = [], []  # divergences this run resumed from (resnet_nobn/rundir.py)
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
        """Restores the checkpoint a re-run resumes from (resnet_nobn/rundir.py); returns its
        path, or None when ckpt/ holds no checkpoint file at all."""
        cfg = self.cfg
        ckpt_dir = os.path.join(cfg.model_dir, "ckpt")
        order, diverged = rundir.resume_order(ckpt_dir, cfg.model_dir, cfg.model.num_classes)
        if not order:
            return None
        skipped = []
        for step, why in order:
            path = os.path.join(ckpt_dir, f"ckpt-{step}")
            if why is None:
                try:
                    self.checkpoint.restore(path).assert_existing_objects_matched()
                    break
                except Exception as e:  # noqa: BLE001 -- any failure means an unusable checkpoint
                    why = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
            skipped.append(f"ckpt-{step} ({why})")
        else:
            raise UserError(f"no checkpoint in {ckpt_dir} can be restored: corrupt, or from a "
                            f"different architecture ({'; '.join(skipped)}); move {ckpt_dir} away "
                            "or use a new --model_dir")
        if skipped:
            _log(f"skipped {', '.join(skipped)}", self.chief)
        if self.chief and not cfg.eval_only:
            if diverged is not None:
                gone = rundir.delete_after(ckpt_dir, step)
                self._rollbacks.append(dict(diverged_at=diverged.get("step"), resumed_from=step,
                                            retry_with=diverged.get("retry_with")))
                _log(f"the run diverged at step {diverged.get('step')}: resuming from ckpt-{step}, "
                     f"taken before the blow-up" + (f" (deleted ckpt-{gone} after it)" if gone else ""),
                     self.chief)
                os.remove(os.path.join(cfg.model_dir, rundir.DIVERGED))
            # The manager tracks the restorable checkpoints up to this one, whatever its state file said.
            rundir.write_checkpoint_state(
                ckpt_dir, [s for s, why in reversed(order) if s <= step and why is None])
            self.manager = tf.train.CheckpointManager(self.checkpoint, ckpt_dir,
                                                      max_to_keep=KEEP_CHECKPOINTS)
        return path

    def save(self):
        """Saves a checkpoint of the current step; refuses non-finite weights (the run has
        diverged). The loss of the next step, computed with these weights, is recorded with it
        (`_record_loss`)."""
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(v))
                                for v in self.model.trainable_variables])
        if not bool(finite):
            raise self._diverged("the weights")
        self.manager.save(checkpoint_number=self.step)
        self._unrecorded = self.step

    def _record_loss(self, loss):
        """After a loop: its mean loss, computed from the weights of the checkpoint taken just
        before it on, is recorded for that checkpoint."""
        if self._unrecorded is not None and self.chief:
            rundir.record_loss(self.manager.directory, self._unrecorded, loss)
        self._unrecorded = None

    def _diverged(self, what):
        """The TrainingDiverged error of this step; records it in model_dir for the re-run."""
        cfg = self.cfg
        advice = retry_advice(cfg)
        last = tf.train.latest_checkpoint(os.path.join(cfg.model_dir, "ckpt"))
        kept = (f"re-running resumes from a checkpoint taken before the blow-up (latest: "
                f"{os.path.basename(last)})" if last else "no checkpoint was written")
        if self.chief and os.path.isdir(cfg.model_dir):
            rundir.atomic_write_json(os.path.join(cfg.model_dir, rundir.DIVERGED), dict(
                step=self.step, what=what, learning_rate=cfg.learning_rate,
                retry_with=advice, time=time.strftime("%Y-%m-%d %H:%M:%S")))
        return TrainingDiverged(f"{what} became NaN/inf at step {self.step}; {kept}\n"
                                f"retry with: {advice}")

    # -- compiled steps ------------------------------------------------------------------------

    def _build_train_loop(self):
        """The compiled training loop: `train_loop(iterator, n)` runs n steps on the device and
        returns the sums over them of (cross-entropy, loss, top-1 hits, top-5 hits).

        As in TF Model Garden's Orbit: the `tf.range` loop around `strategy.run` is one
        tf.function; each replica adds its step's values to its own slot of an on-read summed
        variable; reading it once at the end is the loop's only reduction (one collective). With
        --xla the whole replica step, optimizer update included, is compiled on one device; with
        several replicas, only the forward and backward pass (the update all-reduces).
        """
        cfg, model, optimizer = self.cfg, self.model, self.optimizer
        global_batch = cfg.batch_size
        variables = model.trainable_variables
        kernels = self.kernels
        whole_step_xla = cfg.xla and self.strategy.num_replicas_in_sync == 1
        with self.strategy.scope():
            sums = tf.Variable(tf.zeros([4]), trainable=False, name="loop_sums",
                               synchronization=tf.VariableSynchronization.ON_READ,
                               aggregation=tf.VariableAggregation.SUM)

        @tf.function(jit_compile=cfg.xla and not whole_step_xla)
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
            return grads, tf.stack([cross_entropy, loss, tf.reduce_sum(top1), tf.reduce_sum(top5)])

        def step_fn(images, labels):
            grads, values = gradients(images, labels)
            if cfg.clip_norm > 0:
                grads = clip_global_norm(grads, cfg.clip_norm * getattr(optimizer, "dynamic_scale", 1.0))
            optimizer.apply_gradients(zip(grads, variables))
            return values

        if whole_step_xla:
            step_fn = tf.function(step_fn, jit_compile=True)

        def add(values):
            sums.assign_add(values)

        @tf.function
        def train_loop(iterator, steps):
            self.strategy.run(lambda: sums.assign(tf.zeros([4])))
            for _ in tf.range(steps):
                self.strategy.run(lambda images, labels: add(step_fn(images, labels)),
                                  args=next(iterator))
            return sums.read_value()

        return train_loop

    def train_iterator(self):
        """The distributed training stream from the current step on (resnet_nobn/data.py)."""
        start_step = self.step
        return iter(self.strategy.distribute_datasets_from_function(
            lambda ctx: self.input.train_dataset(ctx, self.cfg.batch_size, start_step)))

    def train_loop(self, iterator, steps):
        """Trains `steps` steps in one compiled loop; returns the sums over them of
        (cross-entropy, loss, top-1 hits, top-5 hits), read once (the loop's host round-trip)."""
        if self._train_loop is None:
            self._train_loop = self._build_train_loop()
        return self._train_loop(iterator, tf.constant(steps)).numpy()

    def loop_length(self, step):
        """Steps of the loop starting at `step`: --steps_per_loop (0: --log_every), cut at the
        next log, checkpoint or evaluation step and at the end, which so happen where they would
        with one step per loop."""
        cfg = self.cfg
        ends = [cfg.train_steps, step + (cfg.steps_per_loop or cfg.log_every)]
        ends += [(step // k + 1) * k for k in (cfg.log_every, cfg.checkpoint_every, cfg.eval_every)]
        return min(ends) - step

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
        return {name: float(_norm(ks)) for name, ks in self.stages.items()}

    def update_ratios(self):
        """{stage: ||last update|| / ||weights||} of its conv kernels. With momentum the last SGD
        update is exactly the velocity (`w += v`), so no copy of the weights is needed."""
        inner = getattr(self.optimizer, "inner_optimizer", self.optimizer)
        velocities = getattr(inner, "momentums", None) or []
        if len(velocities) != len(self.model.trainable_variables):
            return {}
        velocity = {v.path: m for v, m in zip(self.model.trainable_variables, velocities)}
        return {name: float(_norm([velocity[k.path] for k in ks]) / _norm(ks))
                for name, ks in self.stages.items()}

    def branch_norms(self):
        """{block: ||branch(h)|| / ||shortcut(h)||} on a fixed batch of test images: how far each
        block is from the identity, the network's counterpart of ||A_j|| in Section 2."""
        if self._probe is None:
            blocks = [l for l in self.model.layers if isinstance(l, ResidualBlock)]
            inputs = keras.Model(self.model.inputs, [b.input for b in blocks])
            images = next(iter(self.input.eval_dataset(tf.distribute.InputContext(), 32)))[0]

            @tf.function
            def probe():
                out = []
                for b, h in zip(blocks, inputs(images)):
                    skip = h if b.shortcut is None else b.shortcut(h)
                    out.append(tf.norm(tf.cast(b.branch(h), tf.float32))
                               / tf.norm(tf.cast(skip, tf.float32)))
                return out
            self._probe = (blocks, probe)
        blocks, probe = self._probe
        return {b.name: float(r) for b, r in zip(blocks, probe())}

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
            "device_kind": self.device_kind,
            "devices_per_worker": self.device_count,
            "strategy": type(self.strategy).__name__,
            "images_per_sec": images_per_sec,
            "wall_time_s": wall_time,
            "seed": cfg.seed,
            "tf_version": tf.__version__,
            "keras_version": keras.__version__,
            "git_commit": rundir.git_commit(),
            "history": history,
            "rollbacks": self._previous_rollbacks + self._rollbacks,
            "config": cfg.to_json(),
        }
        rundir.atomic_write_json(os.path.join(cfg.model_dir, "results.json"), results)
        return results

    def _previous_results(self):
        """(history, wall time) of results.json; an unreadable one is set aside and said so."""
        path = os.path.join(self.cfg.model_dir, "results.json")
        old = rundir.read_json(path)
        if old is None and os.path.exists(path) and self.chief:
            aside = f"{path}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}"
            os.replace(path, aside)
            _log(f"warning: {path} is unreadable; moved to {aside}, the history starts anew")
        old = old or {}
        self._previous_rollbacks = list(old.get("rollbacks") or [])
        history = [h for h in old.get("history") or [] if isinstance(h, dict) and "step" in h]
        return history, float(old.get("wall_time_s") or 0.0)

    def _eval_due(self, step, history):
        due = step % self.cfg.eval_every == 0 or step == self.cfg.train_steps
        return due and not any(h["step"] == step for h in history)

    def _evaluate_and_record(self, history, writers, wall_time, images_per_sec):
        """Evaluates at the current step, appends to `history`, writes summaries and results."""
        step, ev = self.step, self.evaluate()
        history.append(dict(step=step, **ev))
        _log(f"eval  step {step}  top1_error {ev['top1_error']:.4f}  "
             f"top5_error {ev['top5_error']:.4f}  ({ev['eval_examples']} images)", self.chief)
        if writers:
            with writers["eval"].as_default(step=step):
                for k in ("top1_error", "top5_error", "eval_loss"):
                    tf.summary.scalar(k, ev[k])
            writers["eval"].flush()
        return self.write_results(history, wall_time, images_per_sec) if self.chief else None

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
            rundir.atomic_write_json(os.path.join(cfg.model_dir, "config.json"), cfg.to_json())
        if restored:
            _log(f"resumed from {restored} at step {self.step}", self.chief)
        else:
            self.save()  # step 0: a run that diverges early restarts from its initialisation
        history, wall_before = self._previous_results() if restored else ([], 0.0)
        history = [h for h in history if h["step"] <= self.step]

        writers = None
        if self.chief:
            writers = {k: tf.summary.create_file_writer(os.path.join(cfg.model_dir, k))
                       for k in ("train", "eval")}
        results = None
        if self.step > 0 and self._eval_due(self.step, history):  # interrupted before evaluating
            results = self._evaluate_and_record(history, writers, wall_before, None)
        iterator = self.train_iterator()

        t_start = time.time()
        t_log, step_log = t_start, self.step
        window = np.zeros(4)
        images_per_sec = None
        step = self.step
        while step < cfg.train_steps:
            n = self.loop_length(step)
            sums = self.train_loop(iterator, n)
            step += n
            if self.preemption:
                self.preemption.save_checkpoint_if_preempted()
            self._record_loss(float(sums[1]) / n)
            if not math.isfinite(sums[1]):
                raise self._diverged("the loss")
            window += sums
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
                        for name, ratio in self.update_ratios().items():
                            tf.summary.scalar(f"update_ratio/{name}", ratio)
                        for name, ratio in self.branch_norms().items():
                            tf.summary.scalar(f"branch_norm/{name}", ratio)
                t_log, step_log, window = now, step, np.zeros(4)
            if step % cfg.checkpoint_every == 0 or step == cfg.train_steps:
                self.save()
            if self._eval_due(step, history):
                results = self._evaluate_and_record(history, writers,
                                                    wall_before + time.time() - t_start, images_per_sec)
        del iterator
        if writers:
            for w in writers.values():
                w.close()
        self._remove_scratch()
        if results is None and self.chief:  # nothing left to train: report the latest state
            results = self.write_results(history, wall_before, images_per_sec)
        return results


def _norm(tensors):
    return tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(tf.cast(t, tf.float32))) for t in tensors]))


def _hms(seconds):
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m{seconds % 60:02d}s"


def _log(msg, chief=True):
    if chief:
        print(msg, flush=True)


def train(cfg: TrainConfig, strategy=None):
    """Runs one configuration end to end; returns the results dict (None on non-chief workers).

    The chief holds model_dir's lock for the run. File-system failures (a model_dir that is a
    file or read-only, a full disk) and memory exhaustion end it with one line (UserError); a new
    run that runs out of memory leaves no model_dir behind.
    """
    if not cfg.model_dir.strip():
        raise UserError("--model_dir is empty; give the directory of the run")
    if os.path.exists(cfg.model_dir) and not os.path.isdir(cfg.model_dir):
        raise UserError(f"--model_dir={cfg.model_dir} is a file, not a directory; give another path")
    new = not os.path.exists(cfg.model_dir)
    if cfg.eval_only and new:
        raise UserError(f"--eval_only: {cfg.model_dir} does not exist; train first")
    trainer = None
    try:
        trainer = Trainer(cfg, strategy)
        if not trainer.chief:
            return trainer.run()
        with rundir.locked(cfg.model_dir):
            return trainer.run()
    except rundir.InUse as e:
        raise UserError(f"--model_dir={cfg.model_dir} is in use by {e} (a second run would corrupt "
                        "its checkpoints); wait for that run or use another --model_dir") from None
    except (tf.errors.ResourceExhaustedError, MemoryError) as e:
        if new and trainer is not None and trainer.chief:
            shutil.rmtree(cfg.model_dir, ignore_errors=True)
        raise UserError(f"out of memory ({type(e).__name__}): lower --batch_size (now "
                        f"{cfg.batch_size}) or --widths (now {','.join(map(str, cfg.model.widths))})"
                        ) from None
    except OSError as e:
        raise UserError(f"cannot write the run in --model_dir={cfg.model_dir}: "
                        f"{e.strerror or e}{f' ({e.filename})' if e.filename else ''}; free space, "
                        "fix permissions or use another --model_dir") from None
    except tf.errors.OpError as e:
        if "No space left" in str(e) or "Read-only file system" in str(e):
            raise UserError(f"cannot write the run in --model_dir={cfg.model_dir}: "
                            f"{str(e).splitlines()[0][:200]}") from None
        # a collective failed: a peer worker died or is unreachable
        if (trainer is None or not cluster.is_multi_worker(trainer.strategy)
                or type(e).__name__ not in cluster.PEER_ERRORS):
            raise
        trainer._remove_scratch()
        raise UserError(cluster.peer_failure_message(e, trainer.step, cfg.model_dir)) from None
