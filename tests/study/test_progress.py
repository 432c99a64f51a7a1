"""A study that talks: the progress lines of resnet_nobn/study/progress.py, from a run directory
advancing by hand, and from a real two-run study (run/ablate.py) before its runs end."""
import json
import os
import re
import time

import pytest

from helpers import run_main, tiny_config
from resnet_nobn.study import progress
from resnet_nobn.training import rundir
from test_study import ARGS


def _advance(model_dir, step, loss, images_per_sec):
    """The trainer's line at `step` in train.log (its output under a study)."""
    with open(model_dir / "train.log", "a") as f:
        f.write(f"step {step}/100  loss {loss:.4f}  xent {loss:.4f}  lr 0.01  |grad| 1.2  "
                f"{images_per_sec} img/s  eta 0:00:10\n")


def test_a_run_advancing_by_hand_gives_its_step_loss_and_time_left(tmp_path):
    root = tmp_path / "study"
    runs = [tiny_config(root / "cifar10" / "a" / f"seed-{k}", train_steps=100, seed=k)
            for k in (0, 1, 2)]
    a = root / "cifar10" / "a" / "seed-0"
    with rundir.locked(a):  # its trainer's lock, as a live run holds it
        with open(a / "train.log", "w") as f:  # an earlier launch, then this one resumed at step 10
            f.write("\n$ python run/cifar_train.py\nstep 10/100  loss 9.0000  xent 9\n"
                    "\n$ python run/cifar_train.py\nresumed from ckpt/ckpt-10 at step 10\n")
        assert progress.lines(runs, str(root))[0] == (
            "progress: cifar10/a/seed-0: step 10/100, loss not logged yet, time left unknown yet")
        _advance(a, 20, 3.0, 80.0)  # its first line: compilation, not counted in the rate
        _advance(a, 30, 2.5, 1.6)  # 0.2 steps a second at batch 8
        assert progress.lines(runs, str(root)) == [
            "progress: cifar10/a/seed-0: step 30/100, loss 2.5000, time left 0:05:50",
            "progress: study: 0 of 3 runs finished, 1 running; time left 0:22:30"]
        _advance(a, 40, 2.25, 4.0)
        _advance(a, 50, 2.25, 1.0)  # 5, 2 and 8 s a step: 50 left at 0.2 a second
        assert progress.lines(runs, str(root))[0] == (
            "progress: cifar10/a/seed-0: step 50/100, loss 2.2500, time left 0:04:10")
        # a run a cluster trains (no study_status.json, no train.log): its results.json
        b = root / "cifar10" / "a" / "seed-1"
        os.makedirs(b)
        json.dump({"global_step": 40, "wall_time_s": 80.0, "train_history": [
            {"step": 20, "loss": 3.0}, {"step": 40, "loss": 1.75}]}, open(b / "results.json", "w"))
        os.utime(b / "results.json", (time.time() - 600, time.time() - 600))
        assert progress.lines(runs, str(root), every=True) == [
            "progress: cifar10/a/seed-0: step 50/100, loss 2.2500, time left 0:04:10",
            "progress: cifar10/a/seed-1: step 40/100, loss 1.7500, time left 0:02:00 (as of "
            "0:10:00 ago), not running here",
            # 250 s, 120 s, and seed 2's 100 steps at 0.35 a second (the mean of 0.2 and 0.5): 286 s
            "progress: study: 0 of 3 runs finished, 1 running; time left 0:10:56"]
        json.dump({"global_step": 100, "wall_time_s": 200.0}, open(b / "results.json", "w"))
        assert "seed-1" not in "".join(progress.lines(runs, str(root), every=True))


def test_a_run_whose_study_was_killed_is_not_running(tmp_path):
    """A study killed (SIGKILL, SIGTERM, Ctrl-C) leaves study_status.json saying "running": only
    a live holder of the run's lock makes a run running."""
    root = tmp_path / "study"
    cfg = tiny_config(root / "a" / "seed-0", train_steps=100)
    a = root / "a" / "seed-0"
    os.makedirs(a)
    json.dump({"status": "running"}, open(a / "study_status.json", "w"))
    _advance(a, 20, 3.0, 80.0)
    _advance(a, 30, 2.5, 1.6)
    assert progress.lines([cfg], str(root), every=True) == [
        "progress: a/seed-0: step 30/100, loss 2.5000, time left 0:05:50, not running here",
        "progress: study: 0 of 1 runs finished, 0 running; time left 0:05:50"]
    assert progress.lines([cfg], str(root)) == [
        "progress: study: 0 of 1 runs finished, 0 running; time left 0:05:50"]
    with rundir.locked(cfg.model_dir):
        assert progress.lines([cfg], str(root), every=True) == [
            "progress: a/seed-0: step 30/100, loss 2.5000, time left 0:05:50",
            "progress: study: 0 of 1 runs finished, 1 running; time left 0:05:50"]


def test_a_diverged_failed_or_timed_out_run_says_so_and_counts_where_the_study_relaunches_it(
        tmp_path):
    root = tmp_path / "study"
    runs = [tiny_config(root / "a" / f"seed-{k}", train_steps=100, seed=k) for k in (0, 1, 2)]
    for k, status in enumerate(("diverged", "failed", "timeout")):
        os.makedirs(runs[k].model_dir)
        _advance(root / "a" / f"seed-{k}", 20, 3.0, 80.0)
        _advance(root / "a" / f"seed-{k}", 30, 2.5, 1.6)
        json.dump({"status": status}, open(root / "a" / f"seed-{k}" / "study_status.json", "w"))
    json.dump(dict(step=30, retry_with="--learning_rate=0.005"),
              open(root / "a" / "seed-0" / "diverged.json", "w"))
    left_out = ", not running here, not counted in the study's time left"
    assert progress.lines(runs, str(root), every=True) == [
        f"progress: a/seed-0: step 30/100, loss 2.5000, diverged{left_out} "
        "(--follow_retry_advice continues it)",
        f"progress: a/seed-1: step 30/100, loss 2.5000, failed{left_out} "
        "(--retry_failed re-runs it)",
        f"progress: a/seed-2: step 30/100, loss 2.5000, timed out{left_out} "
        "(--retry_failed re-runs it)",
        "progress: study: 0 of 3 runs finished, 0 running, 1 diverged, 1 failed, 1 timed out; "
        "time left 0:00:00 (not counting 3 runs it does not relaunch)"]
    assert progress.lines(runs, str(root), every=True, retry_failed=True) == [
        f"progress: a/seed-0: step 30/100, loss 2.5000, diverged{left_out} "
        "(--follow_retry_advice continues it)",
        "progress: a/seed-1: step 30/100, loss 2.5000, time left 0:05:50, failed, not running here",
        "progress: a/seed-2: step 30/100, loss 2.5000, time left 0:05:50, timed out, not running "
        "here",
        "progress: study: 0 of 3 runs finished, 0 running, 1 diverged, 1 failed, 1 timed out; "
        "time left 0:11:40 (not counting 1 run it does not relaunch)"]
    assert progress.lines(runs, str(root), every=True, retry_failed=True,
                          follow_advice=True)[::3] == [
        "progress: a/seed-0: step 30/100, loss 2.5000, time left 0:05:50, diverged, not running "
        "here",
        "progress: study: 0 of 3 runs finished, 0 running, 1 diverged, 1 failed, 1 timed out; "
        "time left 0:17:30"]


def test_the_ticker_prints_every_period_and_nothing_after_its_block(tmp_path):
    said = []
    cfg = tiny_config(tmp_path / "r" / "seed-0", train_steps=100)
    with progress.Ticker([cfg], str(tmp_path / "r"), said.append, period=0.05):
        time.sleep(0.5)
    n = len(said)
    time.sleep(0.2)
    assert n >= 2 and len(said) == n
    assert set(said) == {"progress: study: 0 of 1 runs finished, 0 running; time left unknown "
                         "until a run has logged a step"}
    with progress.Ticker([cfg], str(tmp_path / "r"), said.append, period=0):  # 0: never
        time.sleep(0.2)
    assert len(said) == n


def test_a_line_said_while_the_ticker_reads_comes_after_its_lines(tmp_path, monkeypatch):
    """The study's "[k/n] ... finished" line, said while the progress thread had read a run as
    running and not yet printed it, came before that stale line; under the shared lock it waits."""
    import threading
    lock, said, reading = threading.RLock(), [], threading.Event()

    def say(line):
        with lock:
            said.append(line)

    def slow_lines(configs, root):
        reading.set()
        time.sleep(0.3)
        return ["progress: run: step 100/100", "progress: study: 0 of 1 runs finished"]
    monkeypatch.setattr(progress, "lines", slow_lines)
    with progress.Ticker([], str(tmp_path), say, period=0.01, lock=lock):
        assert reading.wait(5)
        say("[1/1] run: finished")
    assert said[:3] == ["progress: run: step 100/100", "progress: study: 0 of 1 runs finished",
                        "[1/1] run: finished"], said


@pytest.mark.slow
def test_a_two_run_study_prints_progress_before_its_runs_end(tmp_path):
    """The study's runs are processes here (the study runs in this process): its progress lines
    are read while another process trains."""
    # 100 steps of the tiny net last about 2 s on an idle 2-core machine (logged every 2 steps,
    # read every 0.1 s): ticks enough in each run's middle without paying for longer runs
    root = tmp_path / "study"
    p = run_main("ablate.py", f"--root={root}", "--seeds=0,1", "--train_steps=100",
                "--progress_every=0.1", *[a for a in ARGS if not a.startswith("--eval_every")],
                "--eval_every=1000")
    assert p.returncode == 0, p.stderr[-2000:]
    out = p.stdout.splitlines()
    for k in (0, 1):
        name = f"cifar10/norm-none_init-identity_head-random_blocks-1/seed-{k}"
        end = next(i for i, l in enumerate(out) if f"/{name}: finished in" in l)
        mid = [l for l in out[:end] if re.fullmatch(
            rf"progress: {name}: step ([1-9]|[1-9]\d)/100, loss \d+\.\d{{4}}, "
            r"time left \d+:\d\d:\d\d", l)]
        assert mid, out
    study = [l for l in out if l.startswith("progress: study: ")]
    assert any(re.search(r"0 of 2 runs finished, 1 running; time left \d+:\d\d:\d\d$", l)
               for l in study), study
    # the same study's runs, read once (as for the jobs of --print_commands): all finished
    once = run_main("ablate.py", f"--root={root}", "--seeds=0,1", "--train_steps=100",
                    "--progress", *ARGS)
    assert once.returncode == 0 and once.stdout.splitlines() == [
        "progress: study: 2 of 2 runs finished, 0 running; time left 0:00:00"], once.stdout
