"""What run/ablate.py makes of the flags a user did or did not give: an empty --root, and a flag
never set (the head's seed, which follows each run's seed) kept out of a study's base flags."""
import json
import os

import pytest

from helpers import TINY, run_main
from test_study import ARGS

RUN = os.path.join("cifar10", "norm-none_init-identity_head-random_blocks-1")


@pytest.mark.parametrize("dry", [False, True])
def test_an_empty_root_is_one_line_and_nothing_runs(tmp_path, monkeypatch, dry):
    monkeypatch.chdir(tmp_path)  # where an empty --root would put the runs
    p = run_main("ablate.py", "--root=", "--train_steps=2", *ARGS,
                *(["--print_commands"] if dry else []))
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [
        "error: --root is empty; give the directory of the study (e.g. --root=/tmp/study)"]
    assert p.stdout == "" and list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_the_order_of_the_seeds_is_no_base_flag(tmp_path):
    root = tmp_path / "study"
    for seed in (0, 1):  # finished runs: the studies below skip them, nothing trains
        os.makedirs(root / RUN / f"seed-{seed}")
        json.dump({"global_step": 2}, open(root / RUN / f"seed-{seed}" / "results.json", "w"))
    first = run_main("ablate.py", f"--root={root}", "--seeds=1,0", "--train_steps=2", *ARGS)
    assert first.returncode == 0 and first.stdout.count("finished, skipped") == 2, first.stderr
    assert "head_seed" not in json.load(open(root / "study.json"))["base"]
    again = run_main("ablate.py", f"--root={root}", "--seeds=0,1", "--print_commands",
                    "--train_steps=2", *ARGS)
    assert again.returncode == 0 and again.stderr.count("finished, skipped") == 2, again.stderr


@pytest.mark.parametrize("flag, said", [
    ("--seeds=0,-1", "error: --seeds: --seed=-1 must be in [0, 4294967295]"),
    ("--seeds=a", "error: --seeds: 'a' is not an integer"),
    ("--vary_learning_rate=0.1,-1", "error: --vary_learning_rate: --learning_rate must be positive"),
    ("--vary_relu_leakiness=1", "error: --vary_relu_leakiness: --relu_leakiness=1.0 must be in "
                                "[0.0, 0.999]")])
def test_a_grid_value_that_no_run_takes_is_refused_naming_its_flag(tmp_path, flag, said):
    root = tmp_path / "study"  # refused before any run: a run of it could only fail, again
    p = run_main("ablate.py", f"--root={root}", flag, "--train_steps=2", *ARGS)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [said]
    assert not root.exists()


@pytest.mark.slow
def test_a_study_of_one_run_says_one_run(tmp_path):
    root = tmp_path / "study"
    os.makedirs(root / RUN / "seed-0")  # finished: the study skips it, nothing trains
    json.dump({"global_step": 2}, open(root / RUN / "seed-0" / "results.json", "w"))
    p = run_main("ablate.py", f"--root={root}", "--train_steps=2", *ARGS)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == f"study: 1 run under {root}", p.stdout


@pytest.mark.parametrize("value", ["inf", "nan", "1e300", "-1"])
def test_a_progress_period_no_thread_can_wait_is_refused_in_one_line(tmp_path, value):
    root = tmp_path / "study"
    p = run_main("ablate.py", f"--root={root}", f"--progress_every={value}", "--train_steps=2",
                *TINY)
    assert p.returncode == 2 and p.stdout == "" and not root.exists(), p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith("error: flag --progress_every="), p.stderr


def test_progress_on_a_root_with_no_study_says_so(tmp_path):
    typo = tmp_path / "A_TYPO"
    p = run_main("ablate.py", f"--root={typo}", "--progress", "--seeds=0,1", "--train_steps=2", *TINY)
    assert p.returncode == 2 and p.stdout == "", p.stdout + p.stderr
    assert p.stderr.strip().splitlines() == [
        f"error: --root={typo}: no study there (no study.json, none of its 2 runs begun); give "
        "the --root and flags the study was started with"]
    assert not typo.exists()
    os.makedirs(typo / RUN / "seed-1")  # a run begun (by a cluster's job): the study's lines
    p = run_main("ablate.py", f"--root={typo}", "--progress", "--seeds=0,1", "--train_steps=2", *TINY)
    assert p.returncode == 0 and "progress: study: 0 of 2 runs finished" in p.stdout, p.stderr
