"""Ablation studies: a grid of configurations, one run directory and one subprocess each, run
one after another until every run has finished.

A study varies the factors the paper makes claims about (Section 4): `norm` (none = the paper's
BN-free net, batch = its BN twin), `init` (identity = the paper's N(0, 1/(k^2 c)^2), standard, he),
`head` (random = the frozen random projection, trained), `blocks_per_stage` (depth) and the seed.
Every other hyperparameter comes from the base flags and is the same for every run.

Layout under one root (`tensorboard --logdir ROOT` compares the runs: resnet_nobn/study/hparams.py):

    ROOT/<dataset>/norm-none_init-identity_head-random_blocks-1/seed-0/
        config.json ckpt/ train/ eval/ results.json written by the trainer (resnet_nobn/training/)
        diverged.json                               the trainer's, while the run stands diverged
        train.log                                   the trainer's output
        study_status.json                           running | finished | diverged | failed
                                                    | timeout | interrupted
    ROOT/study.json                                 the base flags of the studies on ROOT

A run is finished when its results.json has `global_step >= train_steps`, however its process
ended (a run --run_timeout killed after its end too); a finished run is skipped, an unfinished one
(also one whose study was killed) is re-launched and the trainer resumes from its latest
checkpoint. study_status.json is the last launch's account: "running" in it proves nothing (a
killed study leaves it), a live holder of the run's lock does (resnet_nobn/training/rundir.py). A
run that diverged is skipped unless the study follows the advice (`follow_advice`): then it
continues once, from the checkpoint the trainer picks before the blow-up, with the flags of its
own `retry with:` line; a run continued so, by the study or by hand, keeps those flags on every
later launch (resnet_nobn/training/recovery.py). Each run is a subprocess of the training entry
point (run/cifar_train.py or run/imagenet_train.py), so a crash or a global Keras setting of one
run cannot affect the next.

The table and the plot of a study are resnet_nobn/study/report.py's, which needs no TensorFlow.
"""
import ctypes
import ctypes.util
import fcntl
import json
import math
import os
import signal
import subprocess
import time

from resnet_nobn.cli import flag_text
from resnet_nobn.config import SCIENTIFIC_FIELDS, config_diffs
from resnet_nobn.errors import UserError, write_failure
from resnet_nobn.study.grid import command
from resnet_nobn.study.hparams import write_run_hparams
from resnet_nobn.files import atomic_write_json, nearest_existing, read_json
from resnet_nobn.training import recovery
from resnet_nobn.training.rundir import CONFIG, DIVERGED, RESULTS, holder

STATUS = "study_status.json"  # in each run's directory: its last launch and how it ended
STUDY = "study.json"  # in the root: the base settings of the studies run on it (`claim_root`)


# --------------------------------------------------------------------------------------------
# Run state


def check_compatible(cfg):
    """Raises ValueError if cfg.model_dir holds a run with other hyperparameters than `cfg`. A run
    continued with its retry advice is compared as it was started
    (resnet_nobn/training/recovery.py `as_started`)."""
    path = os.path.join(cfg.model_dir, CONFIG)
    old = read_json(path)
    if old is None and not os.path.exists(path):
        return
    if old is None or not isinstance(old.get("model"), dict):
        raise ValueError(f"{path} is unreadable, not a JSON object or without a `model` object "
                         "(not a run's config.json); move it away or use another --root")
    old = recovery.as_started(old, _results(cfg))
    diffs = config_diffs(old, cfg.to_json(), fields=SCIENTIFIC_FIELDS)
    if diffs:
        raise ValueError(f"{cfg.model_dir} holds a run with other settings ({'; '.join(diffs)}); "
                         "use another --root for a study with other base flags")


# The settings every run directory's name tells apart (grid.run_name), which studies on one root
# may differ in; the others are the studies' base flags, which must be the same (`claim_root`).
NAMED = ("dataset", "seed", "norm", "init", "head", "blocks_per_stage", "num_classes", "image_size")


def claim_root(root, base, varied=(), write=True):
    """Records in ROOT/study.json the base settings of a study started on `root` (of its
    TrainConfig `base`: the scientific settings and the model's, but NAMED and the OPTIONAL
    factors in `varied`, which its runs' directories name, and the head's seed unless given: it
    follows each run's seed), or raises ValueError if the record holds other values: runs of two
    studies with other base flags would share directories or be grouped as one. ROOT/.study.lock
    makes the read and the write one step for two studies started together; a study after them
    adds the settings it records no value for yet. Without `write` (a dry run) the record is only
    checked."""
    settings = {k: v for k, v in base.to_json().items() if k in SCIENTIFIC_FIELDS}
    settings.update(base.to_json()["model"])
    unset = ("head_seed",) if base.model.head_seed is None else ()  # it follows each run's seed
    settings = {k: v for k, v in settings.items() if k not in NAMED + tuple(varied) + unset}
    path = os.path.join(root, STUDY)
    if not write:
        return _check_claim(path, root, settings)
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, ".study.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        record = _check_claim(path, root, settings)
        if set(settings) - set(record):
            atomic_write_json(path, {"base": {**settings, **record}})


def _check_claim(path, root, settings):
    """The base settings study.json at `path` records; ValueError if any differs from `settings`."""
    record = (read_json(path) or {}).get("base") or {}
    other = [f"{k}: {flag_text(record[k])} there, {flag_text(v)} here" for k, v in
             json.loads(json.dumps(settings)).items() if k in record and record[k] != v]
    if other:
        raise ValueError(f"--root={root} holds a study with other base flags "
                         f"({'; '.join(other)}; {path}); use another --root, or these flags")
    return record


def _results(cfg):
    return read_json(os.path.join(cfg.model_dir, RESULTS)) or {}


def run_state(cfg):
    """'finished', 'running' (a live process holds the run: another study, or a run left by a
    study that was killed), 'diverged' (its last attempt diverged: diverged.json), 'failed' (it
    exited with another error or timed out), 'partial' (interrupted: it resumes) or 'new'.

    A failed or timed-out status is stale, and the run 'partial', where results.json, written
    after that launch began, says the run reached the train_steps it was launched with (a run
    killed by --run_timeout after its end): a larger --train_steps extends it."""
    results = _results(cfg)
    step = results.get("global_step")
    if isinstance(step, int) and step >= cfg.train_steps:
        return "finished"
    if holder(cfg.model_dir):
        return "running"
    if recovery.pending_divergence(cfg.model_dir) is not None:
        return "diverged"
    status = read_json(os.path.join(cfg.model_dir, STATUS)) or {}
    if status.get("status") in ("failed", "timeout") and not _finished_since(cfg, status, results):
        return "failed"
    return "partial" if os.path.exists(os.path.join(cfg.model_dir, CONFIG)) else "new"


def _finished_since(cfg, status, results):
    """Whether results.json (`results`) was written after the launch of `status` began and
    records the run at the train_steps of its own configuration: that launch reached its end."""
    step, steps = results.get("global_step"), (results.get("config") or {}).get("train_steps")
    if not (isinstance(step, int) and isinstance(steps, int) and step >= steps):
        return False
    try:
        written = os.path.getmtime(os.path.join(cfg.model_dir, RESULTS))
    except OSError:
        return False
    begun = status.get("started")
    return isinstance(begun, (int, float)) and written >= begun


def launch_flags(cfg, follow_advice=False):
    """The flags a launch of the run adds to its study's: those it was continued with, if it was,
    else, after a divergence and with `follow_advice`, those of its `retry with:` line."""
    followed = recovery.followed_flags(_results(cfg))
    if followed or not follow_advice or run_state(cfg) != "diverged":
        return followed
    return recovery.retry_flags(cfg.model_dir)


def _write_status(cfg, **status):
    os.makedirs(cfg.model_dir, exist_ok=True)
    atomic_write_json(os.path.join(cfg.model_dir, STATUS), status)


def _tail(path, n=3):
    try:
        with open(path, errors="replace") as f:
            lines = [l.rstrip() for l in f if l.strip() and not l.startswith(("I0000", "W0000",
                                                                              "E0000", "WARNING: All"))]
        return lines[-n:]
    except OSError:
        return []


# --------------------------------------------------------------------------------------------
# Running


def run_study(configs, entry, base_args, timeout=None, retry_failed=False, follow_advice=False,
              log=print, python=None):
    """Runs every unfinished configuration, one subprocess at a time; returns {model_dir: state}.

    A finished run is skipped; a partial one resumes from its checkpoint; a failed one (bad
    flags, a crash, a timeout) is skipped unless `retry_failed`; a diverged one is skipped unless
    `follow_advice`, and then continued once with the flags of its `retry with:` line (a run that
    diverges again with them stays diverged). `timeout` (seconds) bounds each launch. The caller
    checks `check_compatible` for every configuration first, before writing anything. Every run
    that exists gets its HParams (resnet_nobn/study/hparams.py), launched here or not. A write of
    the study that fails (its root full or read-only), or a file where a run's directory goes,
    ends it with one line (UserError).
    """
    states = {}
    for i, cfg in enumerate(configs):
        tag = f"[{i + 1}/{len(configs)}] {cfg.model_dir}"
        blocked = file_in_the_way(cfg.model_dir)
        if blocked:
            where = "there" if blocked == cfg.model_dir else f"{cfg.model_dir} under it"
            raise UserError(f"{blocked} is a file, not a directory (the study keeps the run "
                            f"{where}); move the file away or give another --root")
        state = run_state(cfg)
        if os.path.isdir(cfg.model_dir):  # also a run trained elsewhere (--print_commands' jobs)
            write_run_hparams(cfg)
        for attempt in (1, 2):  # the second: a run that diverged, once with its advice
            followed = bool(recovery.followed_flags(_results(cfg)))
            why = skipped(cfg, state, retry_failed, follow_advice)
            if why:
                log(f"{tag}: {why}")
            else:
                try:
                    state = _launch(cfg, tag, entry, base_args, timeout, state, follow_advice,
                                    log, python)
                except Exception as e:  # noqa: BLE001 -- a write that failed is said, else raised
                    said = write_failure(e, cfg.model_dir, "give another --root; the runs "
                                         "finished so far are kept")
                    if said is None:
                        raise
                    raise UserError(said) from None
                if state == "diverged" and follow_advice and not followed:
                    continue
            break
        states[cfg.model_dir] = "failed" if state == "timeout" else state
    return states


def file_in_the_way(model_dir):
    """`model_dir` or the directory above it that exists and is not a directory, or None."""
    path = nearest_existing(model_dir)
    return None if os.path.isdir(path) else path


def skipped(cfg, state, retry_failed=False, follow_advice=False):
    """What the study says of a run in `state` that it does not launch now, or None: a finished
    one, one a live process trains, a failed one (unless `retry_failed`), a diverged one (unless
    `follow_advice` and it has not followed its advice yet)."""
    followed = bool(recovery.followed_flags(_results(cfg)))
    if state == "running":
        return f"running in another process ({holder(cfg.model_dir)}), skipped"
    if state == "finished" or (state == "failed" and not retry_failed) or (
            state == "diverged" and (followed or not follow_advice)):
        return _skipped(cfg, state, followed)
    return None


def _skipped(cfg, state, followed):
    """What the study says of a run it skips."""
    if state == "failed":
        return "failed, skipped (--retry_failed re-runs it)"
    if state != "diverged":
        return f"{state}, skipped"
    if followed:
        return (f"diverged again after it was continued with "
                f"{' '.join(recovery.followed_flags(_results(cfg)))}, skipped (see its train.log)")
    return (f"diverged, skipped (--follow_retry_advice continues it with "
            f"{' '.join(recovery.retry_flags(cfg.model_dir))})")


def _launch(cfg, tag, entry, base_args, timeout, state, follow_advice, log, python):
    """One launch of the run's subprocess; returns its state after it."""
    write_run_hparams(cfg)
    extra = launch_flags(cfg, follow_advice)
    cmd = command(cfg, entry, base_args, python) + extra
    log_path = os.path.join(cfg.model_dir, "train.log")
    verb = ("continuing with " + " ".join(extra) if state == "diverged" else
            "resuming" if state in ("partial", "failed") else "starting")
    log(f"{tag}: {verb} (log: {log_path})")
    t0 = time.time()
    _write_status(cfg, status="running", command=cmd, started=t0)
    with open(log_path, "a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        try:
            rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                timeout=timeout, preexec_fn=die_with_parent()).returncode
        except subprocess.TimeoutExpired:
            rc = None
    if rc != 0 and holder(cfg.model_dir):  # another process took the run first: not a failure
        log(f"{tag}: running in another process ({holder(cfg.model_dir)}), skipped")
        return "running"
    if rc == 130:
        _write_status(cfg, status="interrupted", command=cmd, started=t0, ended=time.time())
        raise KeyboardInterrupt
    # results.json says finished: finished, whatever the exit (killed by the timeout after its end)
    finished = run_state(cfg) == "finished"
    state = "finished" if finished else "timeout" if rc is None else "failed"
    diverged_path = os.path.join(cfg.model_dir, DIVERGED)
    if (not finished and rc and os.path.exists(diverged_path)
            and os.path.getmtime(diverged_path) >= t0):
        state = "diverged"  # this launch diverged (not: refused with an older record there)
    _write_status(cfg, status=state, returncode=rc, command=cmd, started=t0, ended=time.time(),
                  last_lines=_tail(log_path))
    results = _results(cfg)
    if state == "finished":
        error = ("memorisation error on its fixed random batch (--use_synthetic_data)"
                 if cfg.use_synthetic_data else "top-1 error")
        mismatch = results.get("data_mismatch")
        log(f"{tag}: finished in {time.time() - t0:.0f} s, step {results.get('global_step')}, "
            f"{error} {_pct(results.get('top1_error'))}"
            + (f" (warning: {mismatch})" if mismatch else ""))
    elif state == "diverged":
        diverged = read_json(os.path.join(cfg.model_dir, DIVERGED)) or {}
        log(f"{tag}: diverged (exit {rc}) at step {diverged.get('step')}; retry with: "
            f"{diverged.get('retry_with')}")
    else:
        how = f"killed after --run_timeout={timeout:g} s" if rc is None else f"exit {rc}"
        log(f"{tag}: {state} ({how}): {' | '.join(_tail(log_path, 1))}")
    return state


def die_with_parent(sig=signal.SIGKILL):
    """A preexec_fn that makes the child get `sig` when this process dies, however it dies (Linux
    prctl(PR_SET_PDEATHSIG)), so a study killed with SIGKILL leaves no run training on; None
    where there is no prctl (the child is then left to finish its run)."""
    try:
        prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec():
        prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the call
            os._exit(1)
    return preexec


def _pct(x):
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    return f"{100 * x:.2f}%" if ok else "n/a"
