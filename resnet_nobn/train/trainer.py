"""The trainer: one run of one configuration, CIFAR or ImageNet, on any tf.distribute strategy.

Compiled loops of --steps_per_loop steps (train/steps.py), logs, checkpoints (train/checkpoints.py)
and evaluations on schedule, all kept in `model_dir` (train/rundir.py): `config.json` (checked on a
resume by train/resume.py, each change recorded), `ckpt/` (a re-run resumes from it), `train/` and
`eval/` summaries (train/monitor.py) and `results.json`, rewritten after every evaluation. One
device, several GPUs and several workers (train/cluster.py, multiworker.py) run the same loop.
"""
import math
import os
import time

import tensorflow as tf

from resnet_nobn.config import TrainConfig
from resnet_nobn.console import hms, log
from resnet_nobn.data import inputs
from resnet_nobn.data.standardization import DATASET, RECORD
from resnet_nobn.errors import UserError
from resnet_nobn.model import network as model_lib
from resnet_nobn.train import (checkpoints, cluster, failures, lock, monitor, multiworker,
                               profiling, provenance, resume, rundir, steps, summaries)
from resnet_nobn.train.train_log import TrainLog


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


class Trainer:
    """Holds the strategy, input, model, optimizer, checkpoints and compiled steps of one run."""

    def __init__(self, cfg: TrainConfig, strategy=None):
        self.cfg = cfg
        self.strategy = strategy or cluster.make_strategy(cfg.strategy)
        multiworker.check_same_settings(self.strategy, cfg.to_json())  # before anything else
        replicas = self.strategy.num_replicas_in_sync
        if cfg.batch_size % replicas:
            raise UserError(f"--batch_size={cfg.batch_size} does not split over {replicas} replicas; "
                            f"use a multiple of {replicas}")
        cluster.check_replica_options(cfg, replicas)
        self.chief = cluster.is_chief(self.strategy)
        self.task_id = cluster.task_id(self.strategy)
        self.device_kind, self.device_count, description = cluster.devices_of(self.strategy)
        self.device_names = provenance.device_names(self.strategy)
        if cfg.deterministic:  # before anything draws a random number
            provenance.make_deterministic(cfg.seed)
        log(description, self.chief)
        check_memory(cfg, replicas)
        self.input = inputs.make_input(cfg)
        resume.recorded_standardization(self.input, cfg.model_dir, self.chief)
        self.mismatch = getattr(self.input, "mismatch", None)  # another dataset under the name
        if self.mismatch:
            log(f"warning: {self.mismatch}; recorded as data_mismatch in results.json", self.chief)
        # the run's config.json (None: a new run) and the changes this resume makes to it
        self.run_config, self.changes = resume.check_model_dir(
            cfg, lambda: checkpoints.recorded(cfg.model_dir), self.chief)
        self.model, self.optimizer = steps.build(cfg, self.strategy)
        self.trainable_params = model_lib.count_params(self.model.trainable_variables)
        self.monitor = monitor.Monitor(self.model, self.optimizer, lambda: next(iter(
            self.input.eval_dataset(tf.distribute.InputContext(), 32)))[0])
        self.checkpoints = checkpoints.Checkpoints(cfg, self.model, self.optimizer, self.chief,
                                                   self.task_id)
        self._train_loop = self._eval_step = None
        self._previous_rollbacks = []  # divergences earlier runs resumed from (results.json)
        self._previous_changes = []  # settings earlier resumes changed (results.json)
        self._previous = {}  # the whole of results.json as this run found it
        self.train_log = TrainLog(cfg.clip_norm > 0 or cfg.agc > 0)
        self.resume_changes = []  # the settings this resume changed: [{step, field, from, to}]
        # Multi-worker only: on SIGTERM to any worker, all save at a common step and stop.
        self.preemption = multiworker.preemption_handler(
            self.strategy, self.checkpoints.save, self.checkpoints.remove_scratch,
            lambda: f"stopped by SIGTERM at step {self.step} after saving a checkpoint; re-run "
                    "the same command on every worker to resume")

    @property
    def step(self):
        return int(self.optimizer.iterations.numpy())

    def train_iterator(self):
        """The distributed training stream from the current step on (resnet_nobn/data/inputs.py)."""
        start_step = self.step
        return iter(self.strategy.distribute_datasets_from_function(
            lambda ctx: self.input.train_dataset(ctx, self.cfg.batch_size, start_step)))

    def train_loop(self, iterator, num_steps):
        """Trains `num_steps` steps in one compiled loop; returns {name: sum over them} of
        steps.LOOP_SUMS (the loss, cross-entropy, top-1 hits, ...), read once (the loop's host
        round-trip)."""
        if self._train_loop is None:
            self._train_loop = steps.build_train_loop(self.cfg, self.strategy, self.model,
                                                      self.optimizer)
        return steps.named_sums(self._train_loop(iterator, tf.constant(num_steps)).numpy())

    def loop_length(self, step):
        """Steps of the loop starting at `step`: --steps_per_loop (0: --log_every), cut at the
        next log, checkpoint or evaluation step and at the end, which so happen where they would
        with one step per loop."""
        cfg = self.cfg
        ends = [cfg.train_steps, step + (cfg.steps_per_loop or cfg.log_every)]
        ends += [(step // k + 1) * k for k in (cfg.log_every, cfg.checkpoint_every, cfg.eval_every)]
        ends += [s for s in cfg.profile_steps if s > step]  # a trace holds whole loops
        return min(ends) - step

    # -- evaluation ----------------------------------------------------------------------------

    def evaluate(self):
        """Top-1/top-5 error on the test split (or its first `eval_steps` global batches)."""
        if self._eval_step is None:
            self._eval_step = steps.build_eval_step(self.strategy, self.model)
        cfg = self.cfg
        batches = self.input.num_eval_batches(cfg.batch_size)
        if cfg.eval_steps > 0:
            batches = min(batches, cfg.eval_steps)
        def dataset_fn(ctx):  # each replica of a pipeline reads its own per-replica batch
            per_pipeline = ctx.num_replicas_in_sync // ctx.num_input_pipelines
            return self.input.eval_dataset(ctx, cfg.batch_size).take(batches * per_pipeline)

        dist = self.strategy.distribute_datasets_from_function(dataset_fn)
        iterator = iter(dist)
        totals = dict.fromkeys(steps.EVAL_SUMS, 0.0)
        for _ in range(batches):
            for k, t in zip(steps.EVAL_SUMS, self._eval_step(iterator)):
                totals[k] += float(t)
        del iterator
        count = totals["examples"]
        return {"top1_error": 1.0 - totals["top1_hits"] / count,
                "top5_error": 1.0 - totals["top5_hits"] / count,
                "eval_loss": totals["cross_entropy"] / count, "eval_examples": int(count)}

    # -- results -------------------------------------------------------------------------------

    def write_results(self, history, wall_time, images_per_sec):
        """Writes (atomically) and returns results.json: the last evaluation, the history, where
        and how fast it ran, the versions, the git commit and the configuration."""
        cfg = self.cfg
        history = sorted(history, key=lambda h: h["step"])
        last = history[-1] if history else {}
        if cfg.eval_only and self._previous:  # an evaluation changes nothing about the training
            results = dict(self._previous, history=history, top1_error=last.get("top1_error"),
                           top5_error=last.get("top5_error"))
            rundir.atomic_write_json(os.path.join(cfg.model_dir, rundir.RESULTS), results)
            return results
        recorded = self.run_config if cfg.eval_only and self.run_config else cfg.to_json()
        results = {
            "dataset": cfg.dataset, "global_step": self.step,
            "top1_error": last.get("top1_error"), "top5_error": last.get("top5_error"),
            "trainable_params": self.trainable_params,
            "num_replicas": self.strategy.num_replicas_in_sync,
            "device_kind": self.device_kind, "devices_per_worker": self.device_count,
            "strategy": type(self.strategy).__name__,
            "images_per_sec": images_per_sec, "wall_time_s": wall_time,
            "seed": recorded["seed"],
            **provenance.versions(), "device_names": self.device_names,
            "git_commit": provenance.git_commit(),
            "history": history,
            **self.train_log.results(),
            **({"data_mismatch": self.mismatch} if self.mismatch else {}),
            **({"image_folder": dict(getattr(self.input, "folder", None) or {},  # its classes
                                     class_names=list(cfg.class_names))} if cfg.class_names else {}),
            **({RECORD: std.record()} if (std := getattr(self.input, "standardization", None))
               and std.mode == DATASET else {}),
            "rollbacks": self._previous_rollbacks + self.checkpoints.rollbacks,
            rundir.RESUME_CHANGES: self._previous_changes + self.resume_changes,
            "config": recorded,
        }
        rundir.atomic_write_json(os.path.join(cfg.model_dir, rundir.RESULTS), results)
        return results

    def _previous_results(self):
        """(history, wall time) of results.json (rundir.py); the rest of it kept."""
        (history, wall, self._previous_rollbacks, self._previous_changes,
         self._previous) = rundir.previous_results(self.cfg.model_dir, self.chief)
        return history, wall

    def _eval_due(self, step, history):
        due = step % self.cfg.eval_every == 0 or step == self.cfg.train_steps
        return due and not any(h["step"] == step for h in history)

    def _evaluate_and_record(self, history, writers, wall_time, images_per_sec):
        """Evaluates at the current step, appends to `history`, writes summaries and results."""
        step, ev = self.step, self.evaluate()
        # the replicas it ran on: --eval_only may evaluate a run on another count than it trained on
        history.append(dict(step=step, num_replicas=self.strategy.num_replicas_in_sync, **ev,
                            **self.train_log.latest()))
        log(f"eval  step {step}  top1_error {ev['top1_error']:.4f}  "
            f"top5_error {ev['top5_error']:.4f}  ({ev['eval_examples']} images)", self.chief)
        if writers:
            with writers[rundir.EVAL].as_default(step=step):
                for k in ("top1_error", "top5_error", "eval_loss"):
                    tf.summary.scalar(k, ev[k])
                summaries.kernel_histograms(self.model, step)
            writers[rundir.EVAL].flush()
        return self.write_results(history, wall_time, images_per_sec) if self.chief else None

    def _record_changes(self, history, wall):
        """Records in results.json, with the step, each setting this resume changes (rundir.py) and
        the rollback it makes past a divergence."""
        self.resume_changes = [c for c in (
            {"step": self.step, "field": k, "from": there, "to": here}
            for k, (there, here) in self.changes.items()) if c not in self._previous_changes]
        if self.resume_changes or self.checkpoints.rollbacks:
            self.write_results(history, wall, self._previous.get("images_per_sec"))

    # -- the loop ------------------------------------------------------------------------------

    def run(self):
        """Trains (or, with eval_only, evaluates) and returns the results dict."""
        cfg = self.cfg
        restored = self.checkpoints.restore()
        multiworker.check_same_step(self.strategy, self.step, cfg.model_dir)
        if cfg.eval_only:
            if restored is None:
                raise UserError(f"--eval_only: no checkpoint in {cfg.model_dir}/{rundir.CKPT}; "
                                "train first")
            history, wall = self._previous_results()
            history = [h for h in history if h["step"] != self.step]
            return self._evaluate_and_record(history, None, wall, None)
        if restored and self.step > cfg.train_steps:
            raise UserError(f"--train_steps={cfg.train_steps} is below step {self.step} of the run "
                            f"in {cfg.model_dir}; give --train_steps={self.step} or more to train "
                            "on, or --eval_only to evaluate it")

        history, wall_before = self._previous_results() if restored else ([], 0.0)
        history = [h for h in history if h["step"] <= self.step]
        self.train_log.resume(self._previous, self.step)
        self.checkpoints.commit()
        if self.chief:
            os.makedirs(cfg.model_dir, exist_ok=True)
            if restored and (self.changes or self.checkpoints.rollbacks):
                self._record_changes(history, wall_before)  # before config.json says them
            rundir.atomic_write_json(os.path.join(cfg.model_dir, rundir.CONFIG), cfg.to_json())
        self.checkpoints.clear_divergence()  # once results.json records the rollback
        if restored:
            log(f"resumed from {os.path.abspath(restored)} at step {self.step}", self.chief)
            if self.resume_changes:
                log("with " + ", ".join(f"{c['field']} {c['from']} -> {c['to']}"
                                        for c in self.resume_changes)
                    + " (recorded in results.json)", self.chief)
        else:
            log(f"new run in {os.path.abspath(cfg.model_dir)}", self.chief)
            self.checkpoints.save()  # step 0: a run diverging early restarts from its initialisation

        writers = None
        if self.chief:
            summaries.write_run_hparams(cfg)  # unless a study wrote it
            writers = {k: tf.summary.create_file_writer(os.path.join(cfg.model_dir, k))
                       for k in rundir.SUMMARIES}
            if not restored:
                with writers[rundir.TRAIN].as_default():
                    summaries.augmented_images(self.input.train_dataset(
                        tf.distribute.InputContext(), cfg.batch_size, 0), self.step)
        results = None
        if self.step > 0 and self._eval_due(self.step, history):  # interrupted before evaluating
            results = self._evaluate_and_record(history, writers, wall_before, None)
        iterator = self.train_iterator()

        t_start = time.time()
        t_log, step_log = t_start, self.step
        window = dict.fromkeys(steps.LOOP_SUMS, 0.0)
        images_per_sec = None
        step, profiler = self.step, profiling.Profiler(cfg, self.chief)
        while step < cfg.train_steps:
            n = self.loop_length(step)
            profiler.before(step)
            sums = self.train_loop(iterator, n)
            step += n
            profiler.after(step)
            if self.preemption:
                self.preemption.save_checkpoint_if_preempted()
            self.checkpoints.record_loss(sums["loss"] / n)
            if not math.isfinite(sums["loss"]):
                raise self.checkpoints.diverged("the loss")
            window = {k: window[k] + sums[k] for k in window}
            if step % cfg.log_every == 0 or step == cfg.train_steps:
                now = time.time()
                n = step - step_log
                images_per_sec = n * cfg.batch_size / max(now - t_log, 1e-9)
                means = {k: v / max(n, 1) for k, v in window.items()}
                lr = float(steps.learning_rate(step - 1, cfg))
                eta = (cfg.train_steps - step) * (now - t_log) / max(n, 1)
                gradient, text = self.train_log.add(step, n, means, lr)
                log(f"step {step}/{cfg.train_steps}  loss {means['loss']:.4f}  "
                    f"xent {means['cross_entropy']:.4f}  lr {lr:.4g}  "
                    f"{text}  {images_per_sec:.1f} img/s  eta {hms(eta)}", self.chief)
                if writers:
                    with writers[rundir.TRAIN].as_default(step=step):
                        tf.summary.scalar("loss", means["loss"])
                        tf.summary.scalar("cross_entropy", means["cross_entropy"])
                        tf.summary.scalar("learning_rate", lr)
                        tf.summary.scalar("top1_error", 1.0 - means["top1_hits"] / cfg.batch_size)
                        tf.summary.scalar("top5_error", 1.0 - means["top5_hits"] / cfg.batch_size)
                        tf.summary.scalar("images_per_sec", images_per_sec)
                        for tag, value in {**gradient, **self.monitor.scalars()}.items():
                            tf.summary.scalar(tag, value)
                t_log, step_log, window = now, step, dict.fromkeys(steps.LOOP_SUMS, 0.0)
            if step % cfg.checkpoint_every == 0 or step == cfg.train_steps:
                self.checkpoints.save()
            if self._eval_due(step, history):
                results = self._evaluate_and_record(history, writers,
                                                    wall_before + time.time() - t_start, images_per_sec)
        del iterator
        profiler.stop()
        if writers:
            for w in writers.values():
                w.close()
        self.checkpoints.remove_scratch()
        if results is None and self.chief:  # nothing left to train: report the latest state
            results = self.write_results(history, wall_before, images_per_sec)
        return results


def train(cfg: TrainConfig, strategy=None):
    """Runs one configuration end to end; returns the results dict (None on non-chief workers).

    The chief holds model_dir's lock for the run. File-system failures (a model_dir that is a
    file, a broken link or read-only, a full disk) and memory exhaustion end it with one line
    (UserError, resnet_nobn/train/failures.py); a new run that saved nothing but its
    initialisation leaves no model_dir behind, and one that did keeps it.
    """
    if not cfg.model_dir.strip():
        raise UserError("--model_dir is empty; give the directory of the run")
    if any(c in cfg.model_dir for c in "[]*?"):  # TensorFlow globs the checkpoint path on restore
        raise UserError(f"--model_dir={cfg.model_dir} contains [, ], * or ?, which TensorFlow reads "
                        "as a glob pattern (its checkpoints could never be restored); use a path "
                        "without them (renaming the directory keeps its run)")
    failures.check_links(cfg.model_dir)
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
        with lock.locked(cfg.model_dir):
            return trainer.run()
    except lock.InUse as e:
        raise UserError(f"--model_dir={cfg.model_dir} is in use by {e} (a second run would corrupt "
                        "its checkpoints); wait for that run or use another --model_dir") from None
    except (tf.errors.OpError, OSError, MemoryError) as e:
        said = failures.explain(e, cfg, trainer, new)
        if said is e:
            raise
        raise said from None
