"""The trainer, the hub of one run: it alone sequences the run, top to bottom, in the order it
happens (docs/architecture.md draws it): build, restore, begin, the loop, the end.

Its spokes each do one job and sequence nothing: where it trains (cluster.py), the run directory
read once, written whole and locked (rundir.py), the start decided from it (resume.py), the
compiled steps (steps.py), the checkpoints (checkpoints.py), results.json with the training log
(results.py), the TensorBoard summaries (summaries.py, profiling.py) and the one line of a fault
(failures.py). Recovery from a divergence is recovery.py's: the trainer records one and stops
(`diverged`), and its start calls it to roll back past one (`begin`).
"""
import contextlib
import dataclasses
import math
import os
import time

import keras
import tensorflow as tf

from resnet_nobn.config import TrainConfig
from resnet_nobn.console import hms, log
from resnet_nobn.data import inputs
from resnet_nobn.errors import UserError
from resnet_nobn.files import atomic_write_json
from resnet_nobn.model import network as model_lib
from resnet_nobn.training import (checkpoints, cluster, failures, profiling, provenance,
                                  recovery, resume, run_lines, rundir, steps, summaries)
from resnet_nobn.training.results import Results


def check_memory(cfg: TrainConfig, replicas):
    """Refuses a model or batch that cannot fit in this machine's memory, before building it."""
    import psutil
    weights, activations = model_lib.memory_lower_bound(cfg.model, cfg.batch_size // replicas)
    total = psutil.virtual_memory().total
    if weights + activations > total:
        one = weights + model_lib.memory_lower_bound(cfg.model, 1)[1]  # the batch's least
        names = (("widths", "blocks_per_stage") if weights > activations else
                 ("batch_size",) * (one <= total) + ("blocks_per_stage", "widths"))
        raise UserError(f"the run needs at least {(weights + activations) / 2**30:.1f} GiB and this "
                        f"machine has {total / 2**30:.1f} GiB; {failures.lower(cfg, names)}")


class Trainer:
    """One run of one configuration: built here, then `run` restores, begins, trains and ends."""

    # -- build ---------------------------------------------------------------------------------

    def __init__(self, cfg: TrainConfig, strategy=None, plan=None):
        """Builds the run of `cfg`: its strategy, the start decided from the run directory (read
        once, unless `plan`, resume.decide's, was made already), the input, model, optimizer and
        checkpoints. Refuses (UserError) what cannot run, before building the model."""
        self.cfg = cfg
        self.strategy = strategy or cluster.make_strategy(cfg.strategy)
        cluster.check_same_settings(self.strategy, cfg.to_json())  # before anything else
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
        self.plan = plan or resume.decide(self._read_run_dir(), cfg)
        if self.plan.settings_from:
            log(f"{os.path.join(cfg.model_dir, rundir.CONFIG)} is missing: the run's settings are "
                f"read from {self.plan.settings_from}", self.chief)
        self.input = inputs.make_input(cfg)
        said = inputs.go_on_as_recorded(self.input, self.plan.run.results)
        if said:
            log(f"warning: {said}", self.chief)
        mismatch = self.input.mismatch  # another dataset under the name
        if mismatch:
            log(f"warning: {mismatch}; recorded as data_mismatch in results.json", self.chief)
        self.model, self.optimizer = steps.build(cfg, self.strategy)
        self.trainable_params = model_lib.count_params(self.model.trainable_variables)
        self.monitor = summaries.Monitor(self.model, self.optimizer, lambda: next(iter(
            self.input.eval_dataset(tf.distribute.InputContext(), 32)))[0])
        self.checkpoints = checkpoints.Checkpoints(cfg, self.model, self.optimizer, self.chief,
                                                   self.task_id, self.plan.order,
                                                   self.plan.run.losses)
        self._train_loop = self._eval_step = None
        self.results = None  # results.json's object, made when the run begins
        self.so_far = None  # the training loop's (wall time, images/s) up to now, set by run()
        # Multi-worker only: on SIGTERM to any worker, all save at a common step and stop.
        self.preemption = cluster.preemption_handler(
            self.strategy, lambda: self.checkpoint(*self.so_far()), self.checkpoints.remove_scratch,
            lambda: f"stopped by SIGTERM at step {self.step} after saving a checkpoint; re-run "
                    "the same command on every worker to resume")

    def _read_run_dir(self):
        """The run directory, read once; without config.json, with the settings its newest
        checkpoint records (read with TensorFlow)."""
        run = rundir.read(self.cfg.model_dir, ask_lock=False)  # it takes the lock itself
        if run.config is None and not run.config_unreadable and run.steps:
            run = dataclasses.replace(run, checkpoint_settings=checkpoints.run_config_in_checkpoint(
                run.ckpt_dir, run.steps))
        return run

    @property
    def step(self):
        return int(self.optimizer.iterations.numpy())

    # -- run -------------------------------------------------------------------------------------

    def run(self):
        """Restores, begins, trains (or, with eval_only, evaluates) and ends; returns the
        results dict (None on a worker that is not the chief)."""
        cfg = self.cfg
        restored = self.restore()
        cluster.check_same_step(self.strategy, self.step, cfg.model_dir)
        if cfg.eval_only and restored is None:
            raise UserError(f"--eval_only: no checkpoint in {cfg.model_dir}/{rundir.CKPT}; "
                            "train first")
        if restored and self.step > cfg.train_steps and not cfg.eval_only:
            raise resume.below_the_run(cfg, self.step)
        self.begin(restored)
        if cfg.eval_only:
            self.results.keep_history(lambda s: s != self.step)
            return self.evaluate_and_record(None, self.results.wall_before, None)
        timed_at = run_lines.timed_at(cfg, self.step, self.loop_length)
        if self.step < cfg.train_steps:  # before the first step: what the run will do
            log(run_lines.plan_line(cfg, run_lines.train_images(cfg, self.input),
                                    self.trainable_params, self.step, timed_at), self.chief)
        writers = self.open_summaries(restored)
        results, wall_before = None, self.results.wall_before
        if self.step > 0 and self.eval_due(self.step):  # interrupted before evaluating
            results = self.evaluate_and_record(writers, wall_before, None)

        # -- the loop: train, log, checkpoint, evaluate; a NaN/inf ends it (diverged) ----------
        iterator = self.train_iterator()
        t_start = time.time()
        t_log, step_log = t_start, self.step
        window = dict.fromkeys(steps.LOOP_SUMS, 0.0)
        images_per_sec = None
        # read when called (a closure): a preemption checkpoint records the time up to it
        self.so_far = lambda: (wall_before + time.time() - t_start, images_per_sec)
        step, profiler = self.step, profiling.Profiler(cfg, self.chief)
        shortfall = profiling.shortfall(cfg.profile_steps, step, cfg.train_steps)
        if shortfall:
            log(f"warning: {shortfall}", self.chief)
        while step < cfg.train_steps:
            n = self.loop_length(step)
            profiler.before(step)
            t_loop = time.time()
            sums = self.train_loop(iterator, n)
            loop_seconds = time.time() - t_loop
            step += n
            profiler.after(step)
            self.checkpoints.record_loss(sums["loss"] / n)
            if not math.isfinite(sums["loss"]):
                raise self.diverged("the loss")
            window = {k: window[k] + sums[k] for k in window}
            if step % cfg.log_every == 0 or step == cfg.train_steps:
                now = time.time()
                images_per_sec = (step - step_log) * cfg.batch_size / max(now - t_log, 1e-9)
                self.log_progress(step, step - step_log, window, now - t_log, images_per_sec,
                                  writers)
                t_log, step_log, window = now, step, dict.fromkeys(steps.LOOP_SUMS, 0.0)
            if step == timed_at:
                log(run_lines.estimate_line(cfg, step, n, loop_seconds), self.chief)
            if self.preemption:  # after the log step: its log is in the preemption checkpoint's
                self.preemption.save_checkpoint_if_preempted()
            if step % cfg.checkpoint_every == 0 or step == cfg.train_steps:
                self.checkpoint(*self.so_far())
            if self.eval_due(step):
                results = self.evaluate_and_record(writers, *self.so_far())
        del iterator
        profiler.stop()

        # -- the end ---------------------------------------------------------------------------
        if writers:
            for w in writers.values():
                w.close()
        self.checkpoints.remove_scratch()
        if results is None and self.chief:  # nothing left to train: report the latest state
            results = self.write_results(wall_before, images_per_sec)
        return results

    # -- restore and begin ---------------------------------------------------------------------

    def restore(self):
        """Restores the checkpoint a re-run resumes from (checkpoints.py, in the plan's order);
        returns checkpoints.Restored, or None for a new run. Changes nothing on disk."""
        try:
            restored = self.checkpoints.restore()
        except checkpoints.Unusable as e:
            if e.steps == [0]:
                # a kill while the first save ran: nothing was trained yet
                log(f"skipped {e.skipped[0]}: its save was cut short; the initialisation is made "
                    "again from --seed", self.chief)
                return None
            where = self.checkpoints.directory
            what = "unreadable (corrupt, or of another architecture)" if e.unreadable else "unusable"
            raise UserError(f"no checkpoint in {where} can be restored, all are {what} "
                            f"({e}); move {where} away or use a new --model_dir") from None
        if restored is not None and restored.skipped:
            log(f"skipped {', '.join(restored.skipped)}", self.chief)
        return restored

    def begin(self, restored):
        """The start-up writes, in the one order a kill between any two of them leaves safe
        (chief only; `restored`: checkpoints.Restored, or None for a new run). Its crash contract:

          1. an unreadable results.json of the run resumed is moved aside: killed after, the
             next start finds none, as this one goes on without it;
          2. a rollback past the pending divergence deletes the checkpoints after the one
             restored (recovery.roll_back, which says why a kill anywhere there is safe);
          3. the checkpoint state file tracks the restorable checkpoints up to the one restored;
          4. results.json records the rollback and the settings this resume changes (and the
             images of an image folder: resnet_nobn/data/inputs.py `changes_since`), *before*
             config.json says them: killed after, config.json still differs, the same changes
             are allowed again and recorded once (the rollback is no longer pending: recorded);
             in the other order a kill would lose them;
          5. config.json says this run's settings;
          6. diverged.json, resumed past, is deleted (recovery.clear_divergence);
          7. a new run saves its initialisation, ckpt-0 (a run diverging early restarts from it);
             killed before, the directory holds no checkpoint: a new run again.

        Every file is written whole (resnet_nobn/files.py). Builds results.json's object (one
        per run, results.py) from what the run found, on every worker."""
        cfg, run = self.cfg, self.plan.run
        found = run.results if restored is not None or cfg.eval_only else None
        # an evaluation records the run's own settings, not the flags it was given
        config = self.plan.run_config if cfg.eval_only and self.plan.run_config else cfg.to_json()
        self.results = Results(cfg.model_dir, found, self._facts(config["seed"]),
                               inputs.record(self.input, cfg.class_names), config,
                               cfg.clip_norm > 0 or cfg.agc > 0, cfg.eval_only)
        if restored is not None and run.results_unreadable and self.chief:
            rundir.set_aside(os.path.join(cfg.model_dir, rundir.RESULTS))  # 1
        if cfg.eval_only:
            return
        rollback, changes = None, {}
        if restored is not None and self.chief:
            # the settings it changes, and the images of an image folder, recorded alike
            changes = {**self.plan.changes, **inputs.changes_since(self.input, run.results)}
            if self.plan.action == resume.ROLLBACK:
                said, rollback = recovery.roll_back(self.plan.diverged, restored.step, run.steps,
                                                    self.checkpoints.delete_after)  # 2
                log(said, self.chief)
            self.checkpoints.track(restored.step)  # 3
        changed = self.results.train_on(self.step, rollback, changes)
        if changed or rollback:
            self.write_results(self.results.wall_before,  # 4
                               self.results.found.get("images_per_sec"))
        if self.chief:
            os.makedirs(cfg.model_dir, exist_ok=True)
            atomic_write_json(os.path.join(cfg.model_dir, rundir.CONFIG), cfg.to_json())  # 5
            if restored is not None:
                recovery.clear_divergence(cfg.model_dir)  # 6
        if restored is not None:
            log(f"resumed from {os.path.abspath(restored.path)} at step {self.step}", self.chief)
            if changed:
                log("with " + ", ".join(f"{c['field']} {c['from']} -> {c['to']}" for c in changed)
                    + " (recorded in results.json)", self.chief)
        else:
            log(f"new run in {os.path.abspath(cfg.model_dir)}", self.chief)
            self.save()  # 7

    def _facts(self, seed):
        """results.json's record of what the run runs on and with (fixed for the run; `seed`:
        the one its settings record)."""
        return {"trainable_params": self.trainable_params,
                "num_replicas": self.strategy.num_replicas_in_sync,
                "device_kind": self.device_kind, "devices_per_worker": self.device_count,
                "strategy": type(self.strategy).__name__, "seed": seed,
                **provenance.versions(), "device_names": self.device_names,
                "git_commit": provenance.git_commit()}

    def open_summaries(self, restored):
        """The chief's TensorBoard writers {train, eval} (None elsewhere), with the run's HParams
        and, for a new run, its first augmented images."""
        if not self.chief:
            return None
        cfg = self.cfg
        summaries.write_run_hparams(cfg)  # unless a study wrote it
        writers = {k: tf.summary.create_file_writer(os.path.join(cfg.model_dir, k))
                   for k in rundir.SUMMARIES}
        if restored is None:
            with writers[rundir.TRAIN].as_default():
                summaries.augmented_images(self.input.train_dataset(
                    tf.distribute.InputContext(), cfg.batch_size, 0), self.step)
        return writers

    # -- the loop's steps ----------------------------------------------------------------------

    def train_iterator(self):
        """The distributed training stream from the current step on (resnet_nobn/data/inputs.py).

        On one CPU replica, the dataset's own iterator (the same batches, as the distributed
        one's input context is the default one there): tf.distribute's prefetches them to the
        device through a multi-device iterator, whose copy on the host cost a tiny network's step
        about a quarter of its time (bench/step_overhead.py)."""
        start_step = self.step
        if self.strategy.num_replicas_in_sync == 1 and self.device_kind == "CPU":
            return iter(self.input.train_dataset(tf.distribute.InputContext(),
                                                 self.cfg.batch_size, start_step))
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

    def log_progress(self, step, n, window, seconds, images_per_sec, writers):
        """The log step: the means of the `n` steps' sums `window` into the training log, the
        progress line and the train/ scalars."""
        cfg = self.cfg
        means = {k: v / max(n, 1) for k, v in window.items()}
        lr = float(steps.learning_rate(step - 1, cfg))
        eta = (cfg.train_steps - step) * seconds / max(n, 1)
        gradient, text = self.results.log.add(step, n, means, lr)
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

    def checkpoint(self, wall_time, images_per_sec):
        """Saves a checkpoint of the current step and (the chief, before train_steps) results.json
        with the training log and time up to it, which a resume from it goes on from; also the
        preemption handler's save, so a SIGTERM loses no log either. results.json at train_steps
        is the final evaluation's, which follows: its step there means the run finished."""
        self.save()
        if self.chief and self.step < self.cfg.train_steps:
            self.write_results(wall_time, images_per_sec)

    def save(self):
        """Saves a checkpoint of the current step (checkpoints.py); a weight that is NaN/inf is
        the run diverged."""
        if self.checkpoints.save():
            raise self.diverged("the weights")

    def diverged(self, what):
        """The TrainingDiverged error of `what` become NaN/inf at this step, with its `retry
        with:` line; the chief records the divergence in diverged.json (recovery.py)."""
        return recovery.record_divergence(self.cfg, self.step, what, self.checkpoints.latest(),
                                          self.chief)

    def eval_due(self, step):
        due = step % self.cfg.eval_every == 0 or step == self.cfg.train_steps
        return due and not self.results.evaluated(step)

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

        iterator = iter(self.strategy.distribute_datasets_from_function(dataset_fn))
        totals = dict.fromkeys(steps.EVAL_SUMS, 0.0)
        for _ in range(batches):
            for k, t in zip(steps.EVAL_SUMS, self._eval_step(iterator)):
                totals[k] += float(t)
        del iterator
        count = totals["examples"]
        return {"top1_error": 1.0 - totals["top1_hits"] / count,
                "top5_error": 1.0 - totals["top5_hits"] / count,
                "eval_loss": totals["cross_entropy"] / count, "eval_examples": int(count)}

    def evaluate_and_record(self, writers, wall_time, images_per_sec):
        """Evaluates at the current step, adds it to results.json's history, writes the eval/
        summaries and (the chief) results.json; returns results.json's object (or None)."""
        step, ev = self.step, self.evaluate()
        # the replicas it ran on: --eval_only may evaluate a run on another count than it trained on
        self.results.add_evaluation(dict(step=step, num_replicas=self.strategy.num_replicas_in_sync,
                                         **ev, **self.results.log.latest()))
        log(f"eval  step {step}  top1_error {ev['top1_error']:.4f}  "
            f"top5_error {ev['top5_error']:.4f}  ({ev['eval_examples']} images)", self.chief)
        if writers:
            with writers[rundir.EVAL].as_default(step=step):
                for k in ("top1_error", "top5_error", "eval_loss"):
                    tf.summary.scalar(k, ev[k])
                summaries.kernel_histograms(self.model, step)
            writers[rundir.EVAL].flush()
        return self.write_results(wall_time, images_per_sec) if self.chief else None

    def write_results(self, wall_time, images_per_sec):
        """Writes results.json (results.py) at the current step and returns it."""
        return self.results.write(self.step, images_per_sec, wall_time)


def train(cfg: TrainConfig, strategy=None, plan=None):
    """Runs one configuration end to end; returns the results dict (None on non-chief workers).

    The chief holds model_dir's lock for the run, and refuses to start if the run directory
    changed after it was read (another process trained there until the lock was free).
    File-system failures (a model_dir that is a file, a broken link or read-only, a full disk),
    memory exhaustion and a peer worker lost (mid-run, or while the run is built: the broadcast
    of the initial weights) end it with one line (UserError, resnet_nobn/training/failures.py); a new
    run that saved nothing but its initialisation leaves no model_dir behind, and one that did
    keeps it. TypeError for a `cfg` that is no TrainConfig.

    Args:
        cfg: TrainConfig. The run, with its `model_dir` (re-running it resumes from there).
        strategy: a `tf.distribute.Strategy`; default: as `cfg.strategy` says.
        plan: the start `resume.decide` chose, where the caller (run/*.py) read the run
            directory already.

    Returns:
        The results dict, what results.json holds (None on a worker that is not the chief).

    Example:

    ```python
    import tempfile
    import resnet_nobn
    config = resnet_nobn.recipes.cifar(widths=(8, 16, 32), blocks_per_stage=1, stem_width=8,
        use_synthetic_data=True, batch_size=8, train_steps=2, lr_boundaries=(), eval_steps=1,
        model_dir=tempfile.mkdtemp() + "/run")
    results = resnet_nobn.train(config)
    ```
    """
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"train takes a TrainConfig, not a {type(cfg).__name__}; e.g. "
                        "resnet_nobn.TrainConfig(model=config, model_dir=...)")
    if keras.backend.backend() != "tensorflow":  # tf.distribute, TensorFlow's checkpoints
        raise UserError(f"train runs on TensorFlow, and Keras' backend is "
                        f"{keras.backend.backend()}: set KERAS_BACKEND=tensorflow before Keras "
                        "loads (the network alone runs on any backend: docs/backends.md)")
    failures.check_model_dir(cfg.model_dir)
    new = not os.path.exists(cfg.model_dir)
    trainer = None
    try:
        strategy = strategy or cluster.make_strategy(cfg.strategy)  # a peer lost from here on
        trainer = Trainer(cfg, strategy, plan)                       # is said in one line
        with rundir.locked(cfg.model_dir) if trainer.chief else contextlib.nullcontext():
            if trainer.chief and rundir.stamp(cfg.model_dir) != trainer.plan.run.stamp:
                # the start was decided before the lock: another run wrote there in between
                raise UserError(f"--model_dir={cfg.model_dir} changed while this run started "
                                "(another process trained in it until now); re-run the same "
                                "command, which starts from what that process left")
            return trainer.run()
    except rundir.InUse as e:
        raise UserError(f"--model_dir={cfg.model_dir} is in use by {e} (a second run would corrupt "
                        "its checkpoints); wait for that run or use another --model_dir") from None
    except (tf.errors.OpError, OSError, MemoryError) as e:
        peer = None  # where the run was when a peer worker was lost: (step, newest checkpoint)
        if strategy is not None and failures.peer_gone(e, cluster.is_multi_worker(strategy)):
            if trainer is not None:
                trainer.checkpoints.remove_scratch()
                peer = trainer.step, trainer.checkpoints.latest()
            else:  # before the first step, while the run was built: the newest on disk
                saved = rundir.steps_on_disk(os.path.join(cfg.model_dir, rundir.CKPT))
                peer = None, f"ckpt-{saved[0]}" if saved else None
        said, clean_up = failures.explain(e, cfg, trainer and trainer.input, peer)
        if said is e:
            raise
        if clean_up:
            said = UserError(str(said) + _clean_up(cfg, trainer, new))
        raise said from None


def _clean_up(cfg, trainer, new):
    """After a fault that ends the run: a new run's directory holding nothing to keep is removed
    (by the chief, which alone writes there); returns what the error line adds about it."""
    if new and trainer is not None and trainer.chief and rundir.discard_new_run(cfg.model_dir):
        return (f"; removed {cfg.model_dir}, which this new run had made and saved nothing in "
                "but its initialisation")
    saved = rundir.steps_on_disk(os.path.join(cfg.model_dir, rundir.CKPT))
    return f"; its checkpoints are kept (the newest: ckpt-{saved[0]})" if saved else ""
