"""A study that follows its runs' retry advice (run/ablate.py --follow_retry_advice), accepts a run
continued with it by hand, marks such a run in its report, and resumes after it is killed; the
end-to-end tests train on real images (a slice of Fashion-MNIST, `--dataset=fashion_mnist`)."""
import glob
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from helpers import ROOT, TINY_NET, check_model_dir, run_main, study_runs_in_process
from resnet_nobn.errors import UserError
from resnet_nobn.study import launcher, report

pytestmark = pytest.mark.slow

ARGS = [*TINY_NET, "--batch_size=32", "--lr_boundaries=", "--log_every=10", "--checkpoint_every=10",
        "--eval_every=20", "--run_timeout=900"]
# learning rate 2.0 diverges within 20 steps on these images, 0.02 trains
GRID = ["--vary_learning_rate=2.0,0.02"]
DIVERGING = "norm-none_init-identity_head-random_blocks-1_lr-2.0"
TRAINING = "norm-none_init-identity_head-random_blocks-1_lr-0.02"


def _run_dir(root, name):
    return os.path.join(root, "fashion_mnist", name, "seed-0")


def _results(root, name):
    return json.load(open(os.path.join(_run_dir(root, name), "results.json")))


def _check_report(root, steps):
    """The report marks the continued row and says where and with what it went on."""
    results = _results(root, DIVERGING)
    (rollback,) = results["rollbacks"]
    flags = {f"--{c['field']}" for c in results["resume_changes"]}
    assert flags and results["global_step"] == steps
    rep = run_main("report.py", f"--root={root}")
    assert rep.returncode == 0, rep.stderr[-2000:]
    (row,) = [l for l in rep.stdout.splitlines() if "learning_rate=2.0" in l and l.startswith("|")]
    assert "‡ |" in row and f"| {steps} |" in row
    (note,) = [l for l in rep.stdout.splitlines() if l.startswith("‡ ")]
    assert f"diverged at step {rollback['diverged_at']} with the settings of its row; continued " \
           "with `" in note
    assert all(f in note for f in flags), note
    assert "Diverged:" not in rep.stdout


@pytest.mark.timeout(900)  # about a minute on an idle 2-core machine
def test_a_study_on_real_images_follows_the_advice_of_its_diverged_run(
        fashion_mnist_slice, tmp_path, monkeypatch):
    study_runs_in_process(monkeypatch)
    root = str(tmp_path / "study")
    args = [f"--root={root}", "--dataset=fashion_mnist", f"--data_dir={fashion_mnist_slice}",
            "--train_steps=30", *ARGS, *GRID]
    first = run_main("ablate.py", *args)
    assert first.returncode == 2, first.stdout + first.stderr
    assert "diverged (exit 2) at step" in first.stdout and "retry with: --" in first.stdout
    (line,) = first.stderr.splitlines()
    assert "--follow_retry_advice" in line and "--retry_failed" not in line, line

    followed = run_main("ablate.py", *args, "--follow_retry_advice")
    assert followed.returncode == 0, followed.stdout + followed.stderr
    assert "continuing with --" in followed.stdout and "2 of 2 runs finished" in followed.stdout
    _check_report(root, 30)
    # the study's own command, without the flag, takes the continued run as it is
    again = run_main("ablate.py", *args)
    assert again.returncode == 0 and again.stdout.count("finished, skipped") == 2, again.stderr


@pytest.mark.timeout(900)  # about a minute on an idle 2-core machine
def test_a_study_on_real_images_killed_in_the_middle_resumes_with_the_same_command(
        fashion_mnist_slice, tmp_path, monkeypatch):
    """The study and its run killed are processes; the study then resumed runs in process. The
    run that trains comes first here: it is killed, and the resumed study continues it, then
    runs the one that diverges and follows its advice."""
    root = str(tmp_path / "study")
    args = [f"--root={root}", "--dataset=fashion_mnist", f"--data_dir={fashion_mnist_slice}",
            "--train_steps=100", *ARGS, "--vary_learning_rate=0.02,2.0",
            "--follow_retry_advice"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "run", "ablate.py"), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    ckpt = os.path.join(_run_dir(root, TRAINING), "ckpt")
    deadline = time.time() + 1200
    while not glob.glob(os.path.join(ckpt, "ckpt-[1-9]*.index")) and time.time() < deadline:
        assert proc.poll() is None, "the study ended before the kill"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)  # the first run is training
    proc.wait()
    cfg = _config(root, TRAINING)
    deadline = time.time() + 60  # the child dies with the study; its lock goes when it has exited
    while launcher.run_state(cfg) == "running" and time.time() < deadline:
        time.sleep(0.1)
    assert launcher.run_state(cfg) == "partial"

    study_runs_in_process(monkeypatch)
    again = run_main("ablate.py", *args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resuming" in again.stdout and "2 of 2 runs finished" in again.stdout
    log = open(os.path.join(_run_dir(root, TRAINING), "train.log")).read()
    assert "resumed from" in log
    assert [h["step"] for h in _results(root, TRAINING)["history"]] == list(range(20, 101, 20))
    _check_report(root, 100)


def _config(root, name):
    from resnet_nobn.config import TrainConfig
    return TrainConfig.from_json(json.load(open(os.path.join(_run_dir(root, name), "config.json"))))


SYNTHETIC = ["--use_synthetic_data", "--widths=8,8,8", "--stem_width=8", "--blocks_per_stage=1",
             "--batch_size=8", "--eval_every=2", "--log_every=2", "--run_timeout=240"]


@pytest.mark.timeout(900)
def test_a_run_continued_by_hand_with_its_advice_is_taken_by_the_study(tmp_path, monkeypatch):
    study_runs_in_process(monkeypatch)
    root = str(tmp_path / "study")
    args = [f"--root={root}", "--train_steps=6", "--learning_rate=1e9", "--checkpoint_every=1",
            *SYNTHETIC]
    first = run_main("ablate.py", *args)
    assert first.returncode == 2 and "--follow_retry_advice" in first.stderr, first.stderr
    (run_dir,) = glob.glob(os.path.join(root, "cifar10", "*", "seed-0"))
    status = json.load(open(os.path.join(run_dir, "study_status.json")))
    advice = json.load(open(os.path.join(run_dir, "diverged.json")))["retry_with"].split()
    entry, *command = status["command"][1:]  # [python, run/cifar_train.py, flags...]
    by_hand = run_main(os.path.basename(entry), *command, *advice)
    assert by_hand.returncode == 0, by_hand.stderr[-2000:]
    again = run_main("ablate.py", *args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "finished, skipped" in again.stdout


def _fake_continued_run(root, flags_changed, diverged_at=66, resumed_from=40):
    """A finished run of the paper's configuration that diverged and was continued with advice."""
    m = dict(num_classes=10, image_size=32, widths=[64, 128, 256], blocks_per_stage=[9, 9, 9],
             strides=[1, 2, 2], stem_width=16, stem_kernel=3, stem_stride=1, kernel_size=3,
             norm="none", init="identity", head="random", head_seed=0, relu_leakiness=0.1)
    started = dict(model=m, dataset="cifar10", use_synthetic_data=False, train_steps=100,
                   crop_padding=2, batch_size=128, learning_rate=0.05, clip_norm=0.0, seed=0,
                   model_dir="x")
    now = dict(started, **{k: to for k, (_, to) in flags_changed.items()})
    changes = [dict(step=resumed_from, field=k, **{"from": frm, "to": to})
               for k, (frm, to) in flags_changed.items()]
    d = os.path.join(root, "ours", "seed-0")
    os.makedirs(d)
    history = [dict(step=100, top1_error=0.08, top5_error=0.01, eval_loss=0.3)]
    json.dump(dict(global_step=100, top1_error=0.08, top5_error=0.01, history=history,
                   rollbacks=[dict(diverged_at=diverged_at, resumed_from=resumed_from,
                                   retry_with="whatever the trainer advised")],
                   resume_changes=changes, config=now), open(os.path.join(d, "results.json"), "w"))
    json.dump(now, open(os.path.join(d, "config.json"), "w"))
    return started


def test_report_marks_a_continued_run_and_keeps_it_in_its_configurations_row(tmp_path):
    _fake_continued_run(str(tmp_path), {"clip_norm": (0.0, 1.0), "learning_rate": (0.05, 0.1)})
    text, _, _ = report.report(str(tmp_path))
    (row,) = [l for l in text.splitlines() if l.startswith("| cifar10")]
    assert "| none / identity / random / 9 ‡ |" in row and "6.38 (Ours)" in row
    assert "learning_rate" not in row  # grouped with the paper's settings it was started with
    assert ("‡ cifar10 none / identity / random / 9 seed 0: diverged at step 66 with the paper's "
            "settings; continued with `--clip_norm=1 --learning_rate=0.1`") in text


def test_report_says_how_a_run_that_diverged_again_after_its_advice_goes_on(tmp_path):
    _fake_continued_run(str(tmp_path), {"learning_rate": (0.05, 0.02)})
    json.dump(dict(step=90, retry_with="--learning_rate=0.01"),
              open(os.path.join(str(tmp_path), "ours", "seed-0", "diverged.json"), "w"))
    text, _, _ = report.report(str(tmp_path))
    (line,) = [l for l in text.splitlines() if l.startswith("Diverged:")]
    assert "seed 0 at step 90; retry with: --learning_rate=0.01 (it went on with its advice " \
           "once already" in line and "--follow_retry_advice" not in line, line


def test_report_says_the_papers_settings_diverged_only_when_they_were_the_papers(tmp_path):
    """A run of the paper's network started at another learning rate than the paper's diverged
    with the settings of its row, not with the paper's."""
    _fake_continued_run(str(tmp_path), {"learning_rate": (0.1, 0.02)})
    text, _, _ = report.report(str(tmp_path))
    (row,) = [l for l in text.splitlines() if l.startswith("| cifar10")]
    assert "learning_rate" not in row and "6.38 (Ours)" in row  # the paper's network
    assert ("seed 0: diverged at step 66 with the settings of its row; continued with "
            "`--learning_rate=0.02`") in text


def test_the_study_compares_a_continued_run_as_started_and_launches_it_with_its_flags(tmp_path):
    from helpers import tiny_config
    cfg = tiny_config(tmp_path / "run", train_steps=4, clip_norm=0.0)
    os.makedirs(cfg.model_dir)
    after = dict(cfg.to_json(), learning_rate=0.005, warmup_steps=7)
    json.dump(after, open(os.path.join(cfg.model_dir, "config.json"), "w"))
    json.dump(dict(global_step=2, config=after, resume_changes=[
        dict(step=0, field="learning_rate", **{"from": cfg.learning_rate, "to": 0.005}),
        dict(step=0, field="warmup_steps", **{"from": 0, "to": 7}),
        dict(step=0, field="train_steps", **{"from": 2, "to": 4})]),
        open(os.path.join(cfg.model_dir, "results.json"), "w"))
    launcher.check_compatible(cfg)  # as started: the study's settings
    assert launcher.launch_flags(cfg) == ["--learning_rate=0.005", "--warmup_steps=7"]
    assert launcher.run_state(cfg) == "partial"
    with pytest.raises(ValueError, match="learning_rate"):
        launcher.check_compatible(tiny_config(tmp_path / "run", train_steps=4, learning_rate=0.5))
    # a diverged run: the flags of its own `retry with:` line, only when the study follows them
    other = tiny_config(tmp_path / "other", train_steps=4)
    os.makedirs(other.model_dir)
    json.dump(other.to_json(), open(os.path.join(other.model_dir, "config.json"), "w"))
    json.dump(dict(step=3, retry_with="--agc=0.01 --warmup_steps=500"),
              open(os.path.join(other.model_dir, "diverged.json"), "w"))
    assert launcher.run_state(other) == "diverged"
    assert launcher.launch_flags(other) == []
    assert launcher.launch_flags(other, follow_advice=True) == ["--agc=0.01", "--warmup_steps=500"]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("damage", ["index missing", "index cut short"])
def test_a_run_killed_while_saving_its_first_checkpoint_resumes_with_the_same_command(tmp_path,
                                                                                      damage,
                                                                                      monkeypatch):
    study_runs_in_process(monkeypatch)
    root = str(tmp_path / "study")
    args = [f"--root={root}", "--train_steps=2", "--learning_rate=0.01", *SYNTHETIC]
    assert run_main("ablate.py", *args).returncode == 0
    (run_dir,) = glob.glob(os.path.join(root, "cifar10", "*", "seed-0"))
    # what a SIGKILL inside the save of ckpt-0 leaves (TensorFlow renames the data file into
    # place, then writes the .index): the run's config, no results, ckpt-0 without a whole index
    ckpt = os.path.join(run_dir, "ckpt")
    for path in glob.glob(os.path.join(ckpt, "ckpt-2.*")) + [os.path.join(run_dir, "results.json")]:
        os.remove(path)
    index = os.path.join(ckpt, "ckpt-0.index")
    if damage == "index missing":
        os.remove(index)
    else:
        os.truncate(index, os.path.getsize(index) // 2)
    json.dump(dict(status="running"), open(os.path.join(run_dir, "study_status.json"), "w"))
    again = run_main("ablate.py", *args)
    assert again.returncode == 0, again.stdout + again.stderr
    log = open(os.path.join(run_dir, "train.log")).read()
    assert "skipped ckpt-0" in log and "its save was cut short" in log
    results = json.load(open(os.path.join(run_dir, "results.json")))
    assert results["global_step"] == 2 and np.isfinite(results["top1_error"])


@pytest.mark.parametrize("overrides", [{}, dict(agc=0.16), dict(learning_rate=0.1),
                                       dict(clip_norm=0.5, agc=0.16, warmup_steps=3),
                                       dict(norm="batch", init="he"), dict(init="fixup")])
def test_the_resume_rule_and_the_advice_reader_agree_on_every_retry_advice(tmp_path, overrides):
    """What resume.decide lets a diverged run's resume change (resnet_nobn/training/resume.py) is
    what the study and the report read back from results.json as the advice it followed
    (recovery.followed_flags), for whatever advice the trainer gives (recovery.retry_remedy)."""
    import dataclasses
    from resnet_nobn.training import recovery
    from resnet_nobn.config import SCIENTIFIC_FIELDS, config_diffs
    from helpers import tiny_config
    cfg = tiny_config(tmp_path / "run", train_steps=4, **overrides)
    os.makedirs(cfg.model_dir)
    json.dump(cfg.to_json(), open(os.path.join(cfg.model_dir, "config.json"), "w"))
    json.dump(dict(step=3, retry_with=recovery.retry_remedy(cfg)[0]),
              open(os.path.join(cfg.model_dir, "diverged.json"), "w"))
    advised = dict(t[2:].split("=", 1) for t in recovery.retry_flags(cfg.model_dir))
    assert advised
    retried = dataclasses.replace(cfg, train_steps=8, **{
        k: type(getattr(cfg, k))(float(v)) for k, v in advised.items()})
    _, changes = check_model_dir(retried)  # accepted: the advice and a longer run
    results = dict(resume_changes=[dict(step=3, field=k, **{"from": there, "to": here})
                                   for k, (there, here) in changes.items()])  # as train.py writes
    followed = dict(f[2:].split("=", 1) for f in recovery.followed_flags(results))
    new = {k: v for k, v in advised.items() if float(v) != getattr(cfg, k)}  # not train_steps
    assert new and set(followed) == set(new)
    assert all(float(followed[k]) == float(v) for k, v in new.items())
    started = recovery.as_started(retried.to_json(), results)
    assert config_diffs(started, cfg.to_json(), fields=SCIENTIFIC_FIELDS) == []
    # any other value of an advised setting is refused, naming the advice
    other = dataclasses.replace(retried, **{k: 2 * getattr(retried, k) + 1 for k in new})
    with pytest.raises(UserError, match="only the advised " + " ".join(
            recovery.retry_flags(cfg.model_dir)).replace("+", r"\+") + " may change"):
        check_model_dir(other)


def test_a_retry_with_that_is_not_a_line_of_flags_is_no_advice(tmp_path):
    from resnet_nobn.training import recovery
    from helpers import tiny_config
    cfg = tiny_config(tmp_path / "run", train_steps=4)
    os.makedirs(cfg.model_dir)
    json.dump(cfg.to_json(), open(os.path.join(cfg.model_dir, "config.json"), "w"))
    json.dump(dict(step=3, retry_with=0.01),
              open(os.path.join(cfg.model_dir, "diverged.json"), "w"))
    assert recovery.retry_flags(cfg.model_dir) == []
    with pytest.raises(UserError, match=r"learning_rate: 0.01 there, 0.02 here\); re-run"):
        check_model_dir(tiny_config(tmp_path / "run", train_steps=4, learning_rate=0.02))


_KILLED_BEFORE_CLEARING = """
import os, runpy, sys
from resnet_nobn.training import recovery
recovery.clear_divergence = lambda model_dir: os._exit(9)  # killed right there
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))  # run/, as `python run/cifar_train.py` has it
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.timeout(900)
def test_a_run_killed_after_recording_its_rollback_is_continued_not_called_diverged_again(
        tmp_path, monkeypatch):
    """The trainer records the rollback and the advised changes in results.json, then deletes
    diverged.json: a kill between the two leaves both. The study continues such a run (it had
    called it 'diverged again' and skipped it for good), and the rollback is recorded once. The
    run killed is a process; the study's launches run in process."""
    study_runs_in_process(monkeypatch)
    root = str(tmp_path / "study")
    args = [f"--root={root}", "--train_steps=6", "--learning_rate=1e9", "--checkpoint_every=1",
            *SYNTHETIC]
    assert run_main("ablate.py", *args).returncode == 2
    (run_dir,) = glob.glob(os.path.join(root, "cifar10", "*", "seed-0"))
    command = json.load(open(os.path.join(run_dir, "study_status.json")))["command"]
    advice = json.load(open(os.path.join(run_dir, "diverged.json")))["retry_with"].split()
    killed = subprocess.run([command[0], "-c", _KILLED_BEFORE_CLEARING, *command[1:], *advice],
                            capture_output=True, text=True, timeout=240, cwd=ROOT,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
                                     PYTHONPATH=ROOT))
    assert killed.returncode == 9, killed.stderr[-2000:]
    assert os.path.exists(os.path.join(run_dir, "diverged.json"))
    assert len(json.load(open(os.path.join(run_dir, "results.json")))["rollbacks"]) == 1
    again = run_main("ablate.py", *args, "--follow_retry_advice")
    assert again.returncode == 0, again.stdout + again.stderr
    results = json.load(open(os.path.join(run_dir, "results.json")))
    assert results["global_step"] == 6 and len(results["rollbacks"]) == 1, results["rollbacks"]
    assert not os.path.exists(os.path.join(run_dir, "diverged.json"))
    assert "‡" in run_main("report.py", f"--root={root}").stdout
