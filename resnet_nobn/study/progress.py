"""A study's progress while its runs go: each running run's step of its total, its last logged loss
and its time left, and the study's time left, one plain line each (fit for a log file).

run/ablate.py prints these lines at most every PERIOD_S seconds while it trains its runs
(`Ticker`), and once with --progress, for a study whose runs a cluster launches
(--print_commands). They are read from the files the trainer writes into each run's model_dir as
it goes (the layout: resnet_nobn/study/launcher.py), whichever holds the later step:

    train.log      the trainer's output under run/ablate.py: a `step N/T  loss L ... I img/s`
                   line at each log step (--log_every); the rate so far is the mean over the
                   current launch's lines but its first (start-up and compilation)
    results.json   rewritten at each evaluation and checkpoint: `global_step`, the training log
                   (`train_history`, the loss at each log step) and `wall_time_s`, the training
                   loop's time; the rate so far is global_step / wall_time_s, and the line says
                   how old the record is

A run is `running` only while a live process holds its directory's lock (the trainer takes it
once its run is built: resnet_nobn/training/rundir.py `holder`); study_status.json saying "running"
is no proof, since a study killed with SIGKILL, SIGTERM or Ctrl-C leaves it so. A run that is not
held is `diverged` (its divergence not resumed past), `failed` or `timeout` (its study's last
launch of it ended so) or `idle` (interrupted, or trained elsewhere: "not running here").

The study's time left is the sum of the time left of the runs that the same command would still
train: those running and those it would launch now (launcher.skipped: a diverged run only with
--follow_retry_advice and before it has followed its advice, a failed or timed-out one only with
--retry_failed), one run after another as run/ablate.py trains them, a run not started yet at the
mean rate of those that have one (jobs of a cluster running side by side take less). The study's
line says how many it leaves out. Reads files only (no TensorFlow).
"""
import math
import os
import re
import threading
import time

from resnet_nobn.console import hms
from resnet_nobn.study import launcher
from resnet_nobn.study.launcher import STATUS
from resnet_nobn.files import read_json
from resnet_nobn.training import recovery
from resnet_nobn.training.results import HISTORY
from resnet_nobn.training.rundir import CONFIG, RESULTS

PERIOD_S = 60.0  # at most one progress report a minute (run/ablate.py --progress_every)
PERIOD_MAX_S = 86_400.0  # --progress_every's largest: a day (a thread's wait takes no inf)
LOG = "train.log"  # the trainer's output under run/ablate.py (launcher._launch)
_STEP = re.compile(r"^step (\d+)/(\d+)  loss (\S+)", re.M)
_SPEED = re.compile(r"^step \d+/\d+  .*  (\S+) img/s", re.M)
_RESUMED = re.compile(r"^resumed from .* at step (\d+)$", re.M)


def _finite(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def from_log(model_dir, batch_size):
    """(step, loss, steps per second) of the current launch's last `step` line in train.log (its
    resume step before one), or None; loss and rate None where not known yet. The rate is the
    mean of the launch's lines after its first (whose interval holds the step's compilation)."""
    try:
        with open(os.path.join(model_dir, LOG), errors="replace") as f:
            launch = f.read().rsplit("\n$ ", 1)[-1]  # launcher._launch: `$ command`, then its log
    except OSError:
        return None
    steps, resumed = _STEP.findall(launch), _RESUMED.search(launch)
    if not steps:  # resumed, no step logged yet: its step
        return (int(resumed.group(1)), None, None) if resumed else None
    step, loss = int(steps[-1][0]), _number(steps[-1][2])
    speeds = [_number(ips) for ips in _SPEED.findall(launch)]
    seconds = [batch_size / v for v in speeds[1:] or speeds if v and v > 0]  # a step's
    return step, loss, len(seconds) / sum(seconds) if seconds else None


def _number(text):
    try:
        return float(text)
    except ValueError:
        return None


def from_results(model_dir):
    """(step, loss, steps per second, age in seconds) of results.json, or None."""
    path = os.path.join(model_dir, RESULTS)
    results = read_json(path)
    step = (results or {}).get("global_step")
    if not isinstance(step, int) or isinstance(step, bool):
        return None
    history = [h for h in results.get(HISTORY) or () if isinstance(h, dict)]
    loss = history[-1].get("loss") if history else None
    wall = results.get("wall_time_s")
    rate = step / wall if _finite(wall) and wall > 0 and step > 0 else None
    try:
        age = max(time.time() - os.path.getmtime(path), 0.0)
    except OSError:
        age = 0.0
    return step, loss if _finite(loss) else None, rate, age


def run_progress(cfg, retry_failed=False, follow_advice=False):
    """{step, total, loss, rate, age, left, state, counted} of one run of the study (TrainConfig
    `cfg`): the later of train.log and results.json; `left` (seconds) None until a rate is known;
    `state` 'finished', 'running' (a live process holds its lock), 'diverged', 'failed',
    'timeout' or 'idle' (see the module's docstring); `counted`: whether the study's time left
    counts it, for a study with `retry_failed` and `follow_advice` (its --retry_failed and
    --follow_retry_advice)."""
    logged, recorded = from_log(cfg.model_dir, cfg.batch_size), from_results(cfg.model_dir)
    p = dict(step=0, total=cfg.train_steps, loss=None, rate=None, age=0.0)
    if recorded:
        p.update(zip(("step", "loss", "rate", "age"), recorded))
    if logged and logged[0] >= p["step"]:
        p.update(step=logged[0], loss=logged[1], rate=logged[2] or p["rate"], age=0.0)
    state = launcher.run_state(cfg)  # "running" only with a live holder of the run's lock
    status = (read_json(os.path.join(cfg.model_dir, STATUS)) or {}).get("status")
    p["state"] = ("finished" if p["step"] >= cfg.train_steps else
                  ("timeout" if status == "timeout" else "failed") if state == "failed" else
                  state if state in ("running", "diverged") else "idle")
    p["counted"] = (p["state"] == "running"
                    or launcher.skipped(cfg, state, retry_failed, follow_advice) is None)
    p["left"] = (cfg.train_steps - p["step"]) / p["rate"] if p["rate"] else None
    return p


_SAID = {"diverged": "diverged", "failed": "failed", "timeout": "timed out"}


def _left_out(cfg, p):
    """Why the study's time left does not count the run of `p` (run_progress), in a few words."""
    if p["state"] != "diverged":
        return "--retry_failed re-runs it"
    if recovery.followed_flags(read_json(os.path.join(cfg.model_dir, RESULTS))):
        return "it diverged again after following its retry advice"
    return "--follow_retry_advice continues it"


def started(cfg):
    """Whether the run has begun: its directory holds a configuration, a record or a log."""
    return any(os.path.exists(os.path.join(cfg.model_dir, n)) for n in (CONFIG, RESULTS, LOG))


def lines(configs, root, every=False, retry_failed=False, follow_advice=False):
    """The progress lines of a study: one per running run (with `every`, per run begun and not
    finished, as --progress prints them), then the study's; `retry_failed` and `follow_advice`
    are the study's flags, which say the runs its time left counts (run_progress)."""
    out = []
    runs = [(cfg, run_progress(cfg, retry_failed, follow_advice)) for cfg in configs]
    for cfg, p in runs:
        if p["state"] == "finished" or not (p["state"] == "running" or every and started(cfg)):
            continue
        name = os.path.relpath(cfg.model_dir, root)
        loss = f"{p['loss']:.4f}" if p["loss"] is not None else "not logged yet"
        left = hms(p["left"]) if p["left"] is not None else "unknown yet"
        age = f" (as of {hms(p['age'])} ago)" if p["age"] >= PERIOD_S else ""
        said = f", {_SAID[p['state']]}" if p["state"] in _SAID else ""
        idle = f"{said}, not running here" if p["state"] != "running" else ""
        if p["counted"]:
            out.append(f"progress: {name}: step {p['step']}/{p['total']}, loss {loss}, "
                       f"time left {left}{age}{idle}")
        else:
            out.append(f"progress: {name}: step {p['step']}/{p['total']}, loss {loss}{age}{idle}, "
                       f"not counted in the study's time left ({_left_out(cfg, p)})")
    out.append(study_line(runs))
    return out


def study_line(runs):
    """The study's line: its runs finished, running, diverged, failed and timed out, and its
    time left (see the module's docstring); `runs` is [(cfg, run_progress(cfg))]."""
    count = lambda state: sum(p["state"] == state for _, p in runs)
    stopped = [f"{count(state)} {said}" for state, said in _SAID.items() if count(state)]
    rates = [p["rate"] for _, p in runs if p["rate"]]
    todo = [(cfg.train_steps - p["step"], p["rate"]) for cfg, p in runs
            if p["state"] != "finished" and p["counted"]]
    mean = sum(rates) / len(rates) if rates else None
    left = (sum(n / (rate or mean) for n, rate in todo) if mean else None) if todo else 0.0
    out = sum(p["state"] != "finished" and not p["counted"] for _, p in runs)
    return (f"progress: study: {count('finished')} of {len(runs)} runs finished, "
            f"{count('running')} running{''.join(', ' + s for s in stopped)}; time left "
            + (hms(left) if left is not None else "unknown until a run has logged a step")
            + (f" (not counting {out} run{'s' if out > 1 else ''} it does not relaunch)"
               if out else ""))


class Ticker:
    """Prints `lines(configs, root, **study)` through `log` every `period` seconds (none:
    PERIOD_S) from a thread, while the block runs; the first after one period, none after the
    block; `study`: the study's `retry_failed` and `follow_advice` (`lines`). With `lock`
    (re-entrant, and held by `log` and the study's own lines) the lines are read and printed
    under it: a run's "finished" line never comes before a progress line read while it ran."""

    def __init__(self, configs, root, log, period=None, lock=None, **study):
        self.configs, self.root, self.log, self.study = configs, root, log, study
        self.period = PERIOD_S if period is None else period
        self.lock = lock or threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="progress")

    def _loop(self):
        while not self._stop.wait(self.period):
            with self.lock:
                for line in lines(self.configs, self.root, **self.study):
                    if self._stop.is_set():
                        return
                    self.log(line)

    def __enter__(self):
        if self.period > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
