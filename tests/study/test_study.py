"""The study runner (run/ablate.py), its library (resnet_nobn/study/) and the report
(run/report.py, resnet_nobn/study/report.py)."""
import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from helpers import ROOT, TINY, run_main, study_runs_in_process, tiny_config
from resnet_nobn.study import grid, hparams, launcher, report

ARGS = [*TINY, "--batch_size=16", "--eval_every=2", "--log_every=2", "--run_timeout=240"]


def _plugin_tags(directory):
    tags = set()
    for name in os.listdir(directory):
        if name.startswith("events.out.tfevents."):
            for event in tf.compat.v1.train.summary_iterator(os.path.join(directory, name)):
                tags |= {v.tag for v in event.summary.value}
    return tags


def test_grid_resolves_auto_init_names_runs_and_drops_duplicates(tmp_path):
    base = tiny_config(tmp_path)
    configs = grid.make_grid(base, "/r", norms=["none", "batch"], inits=["auto", "identity"],
                              heads=["random"], blocks=[(1, 1, 1), (3, 4, 6)], seeds=[0, 1])
    # auto = identity without BN, so (none, auto) and (none, identity) are one configuration
    assert len(configs) == 2 * 3 * 2
    dirs = [c.model_dir for c in configs]
    assert len(set(dirs)) == len(dirs)
    assert "/r/cifar10/norm-none_init-identity_head-random_blocks-1/seed-0" in dirs
    assert "/r/cifar10/norm-batch_init-he_head-random_blocks-3-4-6/seed-1" in dirs
    assert "/r/cifar10/norm-batch_init-identity_head-random_blocks-1/seed-0" in dirs
    assert grid.parse_blocks("3", 3) == (3, 3, 3) and grid.parse_blocks("3-4-6", 3) == (3, 4, 6)
    with pytest.raises(ValueError):
        grid.parse_blocks("1-2", 3)


@pytest.mark.slow
def test_two_configuration_study_runs_skips_and_reports(tmp_path, monkeypatch):
    study_runs_in_process(monkeypatch)
    root = str(tmp_path / "study")
    args = [f"--root={root}", "--vary_norm=none,batch", "--train_steps=4"] + ARGS
    first = run_main("ablate.py", *args)
    assert first.returncode == 0, first.stderr[-2000:]
    runs = {n: os.path.join(root, "cifar10", n, "seed-0")
            for n in ("norm-none_init-identity_head-random_blocks-1",
                      "norm-batch_init-he_head-random_blocks-1")}
    for d in runs.values():
        res = json.load(open(os.path.join(d, "results.json")))
        assert res["global_step"] == 4
        assert res["config"]["model"]["norm"] in d
        assert json.load(open(os.path.join(d, "study_status.json")))["status"] == "finished"
        assert "_hparams_/session_start_info" in _plugin_tags(d)
    assert "_hparams_/experiment" in _plugin_tags(root)

    # a re-run skips both finished configurations: nothing is trained again
    mtimes = {d: os.path.getmtime(os.path.join(d, "results.json")) for d in runs.values()}
    again = run_main("ablate.py", *args)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.count("finished, skipped") == 2
    assert mtimes == {d: os.path.getmtime(os.path.join(d, "results.json")) for d in runs.values()}

    rep = run_main("report.py", f"--root={root}", timeout=120)
    assert rep.returncode == 0, rep.stderr[-2000:]
    rows = [l for l in rep.stdout.splitlines() if l.startswith("| cifar10")]
    assert len(rows) == 2
    assert any("| none / identity / random / 1 | 0 | 4 |" in r for r in rows)
    assert any("| batch / he / random / 1 | 0 | 4 |" in r for r in rows)
    md = open(os.path.join(root, "report.md")).read()
    assert all(r in md for r in rows)
    with open(os.path.join(root, "report.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_run_state_resumes_partial_runs_and_refuses_other_settings(tmp_path):
    cfg = tiny_config(tmp_path / "run", train_steps=4)
    assert launcher.run_state(cfg) == "new"
    os.makedirs(cfg.model_dir)
    json.dump(cfg.to_json(), open(os.path.join(cfg.model_dir, "config.json"), "w"))
    assert launcher.run_state(cfg) == "partial"  # interrupted: re-launched, the trainer resumes
    json.dump(dict(global_step=2), open(os.path.join(cfg.model_dir, "results.json"), "w"))
    assert launcher.run_state(cfg) == "partial"
    json.dump(dict(status="failed"), open(os.path.join(cfg.model_dir, "study_status.json"), "w"))
    assert launcher.run_state(cfg) == "failed"
    json.dump(dict(global_step=4), open(os.path.join(cfg.model_dir, "results.json"), "w"))
    assert launcher.run_state(cfg) == "finished"
    assert "--model_dir=" + cfg.model_dir in grid.command(cfg, "entry.py", ["--x=1"])
    launcher.check_compatible(cfg)  # same settings (and more train_steps would be fine too)
    launcher.check_compatible(dataclasses.replace(cfg, train_steps=8, log_every=1))
    with pytest.raises(ValueError, match="learning_rate"):
        launcher.check_compatible(dataclasses.replace(cfg, learning_rate=0.5))


def _fake_run(root, name, seed, top1, steps=100, settings=(), **model):
    m = dict(num_classes=10, image_size=32, widths=[64, 128, 256], blocks_per_stage=[9, 9, 9],
             strides=[1, 2, 2], stem_width=16, stem_kernel=3, stem_stride=1, kernel_size=3,
             norm="none", init="identity", head="random", head_seed=0)
    m.update(model)
    config = dict(model=m, dataset="cifar10", use_synthetic_data=False, train_steps=100,
                  batch_size=128, learning_rate=0.05, crop_padding=2, seed=seed, model_dir="x")
    config.update(settings)
    d = os.path.join(root, name, f"seed-{seed}")
    os.makedirs(d)
    history = [dict(step=s, top1_error=top1 + max(100 - s, 0) / 1000, top5_error=top1 / 4,
                    eval_loss=1.0, eval_examples=10000) for s in (50, steps)]
    json.dump(dict(dataset="cifar10", global_step=steps, top1_error=history[-1]["top1_error"],
                   top5_error=top1 / 4, wall_time_s=3600.0 + seed, seed=seed, history=history,
                   config=config), open(os.path.join(d, "results.json"), "w"))
    json.dump(config, open(os.path.join(d, "config.json"), "w"))


def test_report_groups_seeds_and_sets_the_paper_row_beside_the_papers_configuration(tmp_path):
    root = str(tmp_path)
    _fake_run(root, "ours", 0, 0.07)
    _fake_run(root, "ours", 1, 0.08)
    _fake_run(root, "ours", 2, 0.06)
    _fake_run(root, "std", 0, 0.10, init="standard")
    _fake_run(root, "short", 0, 0.50, steps=50, init="he", norm="batch")
    text, md, png = report.report(root)
    rows = [l for l in text.splitlines() if l.startswith("| cifar10")]
    assert len(rows) == 3
    ours = next(r for r in rows if "none / identity / random / 9" in r)
    assert "| 0,1,2 |" in ours and "| 100 |" in ours
    assert f"7.00 ± {np.std([7, 8, 6], ddof=1):.2f}" in ours
    assert "6.38 (Ours)" in ours
    std = next(r for r in rows if "standard" in r)
    assert "6.38" not in std and "10.00" in std
    bn = next(r for r in rows if "batch / he" in r)
    assert "6.43 (ResNet†)" in bn and "50 of 100 (partial" in bn
    assert os.path.getsize(png) > 1000 and open(md).read().count("\n| cifar10") == 3
    assert "6.38 (Ours) ¶" in ours and ("¶ cifar10 none / identity / random / 9: Table 2's value "
                                         "is for the paper's recipe, which these runs leave: 100 "
                                         "steps (the paper's 60,000)") in text


def test_the_paper_value_beside_runs_off_the_recipe_says_how_they_leave_it(tmp_path):
    """Table 2's value is its recipe's: beside runs of the paper's network at another learning
    rate or precision, the report marks it (¶) and names each departure; beside runs of the
    recipe, of its length, nothing (their seed aside)."""
    root = str(tmp_path)
    for seed in (0, 1):
        _fake_run(root, "paper", seed, 0.07, steps=60000, settings=dict(train_steps=60000))
    _fake_run(root, "rate", 0, 0.09, steps=60000,
              settings=dict(train_steps=60000, learning_rate=0.02, mixed_precision="bfloat16"))
    text, _, _ = report.report(root)
    rows = [l for l in text.splitlines() if l.startswith("| cifar10")]
    paper_row = next(r for r in rows if "learning_rate=0.02" not in r)
    assert paper_row.endswith("| 6.38 (Ours) |") and "¶ cifar10 none / identity / random / 9: " \
        not in text
    assert next(r for r in rows if "learning_rate=0.02" in r).endswith("| 6.38 (Ours) ¶ |")
    assert ("which these runs leave: --learning_rate=0.02 (the paper's 0.05); "
            "--mixed_precision=bfloat16 (the paper's float32); it is shown for reference") in text


def test_hparams_domain_covers_earlier_studies_in_the_same_root(tmp_path):
    from tensorboard.plugins.hparams import plugin_data_pb2
    root = str(tmp_path)
    earlier = grid.make_grid(tiny_config(root), root, ["batch"], ["auto"], ["random"], [(1, 1, 1)],
                             [0])
    os.makedirs(earlier[0].model_dir)
    json.dump(earlier[0].to_json(), open(os.path.join(earlier[0].model_dir, "config.json"), "w"))
    now = grid.make_grid(tiny_config(root), root, ["none"], ["identity", "standard"], ["random"],
                          [(1, 1, 1)], [0])
    hparams.write_hparams_config(root, now)
    assert hparams.write_run_hparams(now[0]) and not hparams.write_run_hparams(now[0])  # once per run
    events = [n for n in os.listdir(root) if n.startswith("events.out.tfevents.")]
    assert len(events) == 1
    domains = {}
    for event in tf.compat.v1.train.summary_iterator(os.path.join(root, events[0])):
        for v in event.summary.value:
            if v.tag == "_hparams_/experiment":
                data = plugin_data_pb2.HParamsPluginData.FromString(v.metadata.plugin_data.content)
                domains = {h.name: sorted(x.string_value or str(x.number_value)
                                          for x in h.domain_discrete.values)
                           for h in data.experiment.hparam_infos}
    assert domains["norm"] == ["batch", "none"]
    assert domains["init"] == ["he", "identity", "standard"]


def test_grid_varies_leakiness_and_learning_rate_and_skips_bn_with_fixup(tmp_path):
    base = tiny_config(tmp_path)
    configs = grid.make_grid(base, "/r", norms=["none", "batch"], inits=["auto", "fixup"],
                              heads=["random"], blocks=[(1, 1, 1)], seeds=[0],
                              leakiness=[0.1, 0.0], learning_rates=[0.05, 0.01])
    # (batch, fixup) cannot exist; the other three configurations x 2 slopes x 2 rates
    assert len(configs) == 3 * 2 * 2
    assert {(c.model.relu_leakiness, c.learning_rate) for c in configs} == {
        (0.1, 0.05), (0.1, 0.01), (0.0, 0.05), (0.0, 0.01)}
    dirs = {c.model_dir for c in configs}
    assert "/r/cifar10/norm-none_init-fixup_head-random_blocks-1_leak-0.0_lr-0.01/seed-0" in dirs
    cfg = next(c for c in configs if c.model.relu_leakiness == 0.0 and c.learning_rate == 0.01)
    args = grid.factor_args(cfg)
    assert "--relu_leakiness=0.0" in args and "--learning_rate=0.01" in args


def test_report_names_only_the_seeds_with_a_result_and_the_advice_of_a_diverged_run(tmp_path):
    root = str(tmp_path)
    _fake_run(root, "ours", 0, 0.07)
    _fake_run(root, "ours", 1, 0.08)
    seed1 = os.path.join(root, "ours", "seed-1")
    with open(os.path.join(seed1, "results.json"), "w") as f:
        f.write("")  # unreadable
    with open(os.path.join(seed1, "diverged.json"), "w") as f:
        json.dump({"step": 66, "retry_with": "--learning_rate=0.01"}, f)
    text, _, _ = report.report(root)
    (row,) = [l for l in text.splitlines() if l.startswith("| cifar10")]
    assert "| 0 (of 0,1) |" in row and "±" not in row
    assert "seed 1 at step 66; retry with: --learning_rate=0.01" in text


def test_report_takes_rows_without_eval_loss_and_marks_malformed_results(tmp_path):
    root = str(tmp_path)
    _fake_run(root, "ours", 0, 0.07)
    _fake_run(root, "ours", 1, 0.08)
    path = os.path.join(root, "ours", "seed-0", "results.json")
    results = json.load(open(path))
    for h in results["history"]:
        del h["eval_loss"]  # an older trainer's rows
    json.dump(results, open(path, "w"))
    bad = os.path.join(root, "ours", "seed-1", "results.json")
    results["history"] = [1, 2]  # parses, but its rows are not rows
    json.dump(results, open(bad, "w"))
    text, _, _ = report.report(root)
    (row,) = [l for l in text.splitlines() if l.startswith("| cifar10")]
    assert "| 0 (of 0,1) |" in row and "7.00" in row
    assert "unreadable results.json" in text


def test_ablate_root_that_is_a_file_is_one_line(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    proc = run_main("ablate.py", f"--root={a_file}", *ARGS, "--train_steps=2")
    assert proc.returncode == 2 and "is a file" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and a_file.read_text() == "x"


# -- hand-edited files: one line each, nothing half-written ---------------


def test_config_json_whose_model_is_not_an_object_is_one_line(tmp_path):
    from resnet_nobn.training import trainer
    from resnet_nobn.errors import UserError
    cfg = tiny_config(tmp_path / "run", train_steps=2)
    os.makedirs(cfg.model_dir)
    path = os.path.join(cfg.model_dir, "config.json")
    json.dump(dict(cfg.to_json(), model=5), open(path, "w"))
    with pytest.raises(UserError, match="without a `model` object"):
        trainer.train(cfg)
    with pytest.raises(ValueError, match="without a `model` object"):
        launcher.check_compatible(cfg)
    assert json.load(open(path))["model"] == 5 and sorted(os.listdir(cfg.model_dir)) == ["config.json"]


@pytest.mark.slow
def test_ablate_ignores_an_unrelated_config_json_under_its_root(tmp_path):
    root = tmp_path / "study"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "config.json").write_text('{"name": "my other program"}')
    proc = run_main("ablate.py", f"--root={root}", "--print_commands", "--train_steps=2", *ARGS)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "--model_dir=" in proc.stdout


def test_report_says_each_foreign_or_malformed_file_in_one_line(tmp_path):
    root = str(tmp_path)
    _fake_run(root, "ours", 0, 0.07)
    _fake_run(root, "ours", 1, 0.08)
    os.makedirs(os.path.join(root, "other"))
    json.dump({"name": "unrelated"}, open(os.path.join(root, "other", "config.json"), "w"))
    json.dump({}, open(os.path.join(root, "other", launcher.STATUS), "w"))
    os.makedirs(os.path.join(root, "schema"))
    json.dump({"accuracy": 0.9, "epochs": 3}, open(os.path.join(root, "schema", "results.json"), "w"))
    path = os.path.join(root, "ours", "seed-1", "results.json")
    results = json.load(open(path))
    results["top1_error"] = "0.08"  # a string where a number belongs
    json.dump(results, open(path, "w"))
    rep = run_main("report.py", f"--root={root}", timeout=120)
    assert rep.returncode == 0 and "Traceback" not in rep.stderr, rep.stderr[-2000:]
    warnings = rep.stderr.strip().splitlines()
    assert len(warnings) == 3, warnings
    assert any("other" in w and "skipped" in w for w in warnings)
    assert any("schema" in w and "skipped" in w for w in warnings)
    assert any("seed-1" in w and "top1_error is a string" in w for w in warnings)
    (row,) = [l for l in rep.stdout.splitlines() if l.startswith("| cifar10")]
    assert "| 0 (of 0,1) |" in row and "unreadable results.json: 1 of 2" in row


def test_report_refuses_an_unknown_out_png_extension_before_writing(tmp_path):
    root = str(tmp_path / "study")
    _fake_run(root, "ours", 0, 0.07)
    md = tmp_path / "out.md"
    rep = run_main("report.py", f"--root={root}", f"--out_md={md}", f"--out_png={tmp_path}/fig.xyz",
                  timeout=120)
    assert rep.returncode == 2 and rep.stderr.count("\n") == 1, rep.stderr[-2000:]
    assert ".xyz is not a figure format" in rep.stderr and not md.exists()


def test_report_prints_no_matplotlib_lines_with_an_unwritable_home(tmp_path):
    root = str(tmp_path / "study")
    _fake_run(root, "ours", 0, 0.07)
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o555)
    env = dict(os.environ, HOME=str(home), TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("MPLCONFIGDIR", None)
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "run", "report.py"), f"--root={root}"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-2000:]


# -- processes -----------------------------------------------------------

_HOLDER = """import os, sys, time
sys.path.insert(0, {root!r})
from resnet_nobn.training import rundir
model_dir = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--model_dir=")][0]
with rundir.locked(model_dir):
    open(os.path.join(model_dir, "child.pid"), "w").write(str(os.getpid()))
    time.sleep(120)
"""


def _study_of_one(tmp_path):
    """A one-run study whose 'training entry point' holds the run's lock for 120 s."""
    cfg = tiny_config(tmp_path / "run", train_steps=2)
    entry = tmp_path / "entry.py"
    entry.write_text(_HOLDER.format(root=ROOT))
    (tmp_path / "cfg.json").write_text(json.dumps(cfg.to_json()))
    return cfg, str(entry)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
def test_a_study_killed_with_sigkill_takes_its_training_child_with_it(tmp_path, sig):
    import signal
    import subprocess
    import sys
    import time
    cfg, entry = _study_of_one(tmp_path)
    code = (f"import sys; sys.path.insert(0, {ROOT!r}); import json\n"
            "from resnet_nobn.study import launcher; from resnet_nobn.config import TrainConfig\n"
            f"cfg = TrainConfig.from_json(json.load(open({str(tmp_path / 'cfg.json')!r})))\n"
            f"launcher.run_study([cfg], {entry!r}, [])\n")
    parent = subprocess.Popen([sys.executable, "-c", code])
    pid_file = os.path.join(cfg.model_dir, "child.pid")
    deadline = time.time() + 60
    while not os.path.exists(pid_file) and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(0.2)
    child = int(open(pid_file).read())
    parent.send_signal(getattr(signal, sig))
    parent.wait()
    deadline = time.time() + 10
    while _alive(child) and time.time() < deadline:
        time.sleep(0.1)
    alive = _alive(child)
    if alive:
        os.kill(child, signal.SIGKILL)
    assert not alive, "the training child outlived its SIGKILLed study"
    # neither running nor failed: a re-run resumes it
    assert launcher.run_state(cfg) in ("new", "partial")


def test_a_run_held_by_a_live_process_is_running_never_failed(tmp_path):
    from resnet_nobn.training import rundir
    cfg, entry = _study_of_one(tmp_path)
    os.makedirs(cfg.model_dir)
    json.dump(cfg.to_json(), open(os.path.join(cfg.model_dir, "config.json"), "w"))
    lines = []
    with rundir.locked(cfg.model_dir):  # another study's run, training now
        assert launcher.run_state(cfg) == "running"
        states = launcher.run_study([cfg], entry, [], log=lines.append, timeout=30)
        text, _, _ = report.report(str(tmp_path))
    assert states == {cfg.model_dir: "running"}, lines
    assert "running in another process (pid" in lines[-1]
    status = launcher.run_state(cfg)
    assert status == "partial" and not os.path.exists(os.path.join(cfg.model_dir, "child.pid"))
    assert "running: 1 of 1" in text


def test_a_run_killed_by_its_timeout_after_it_finished_is_finished_and_a_longer_study_extends_it(
        tmp_path, monkeypatch):
    """--run_timeout may kill a run after it wrote its last results.json: finished, not timeout.
    A timeout status left so by an earlier study keeps no larger --train_steps from extending it;
    a launch that timed out before its end stays failed."""
    import subprocess
    import time
    cfg = tiny_config(tmp_path / "run", train_steps=4)
    results = os.path.join(cfg.model_dir, "results.json")
    status = os.path.join(cfg.model_dir, "study_status.json")

    def finishes_then_hangs(cmd, timeout=None, **kw):
        json.dump(cfg.to_json(), open(os.path.join(cfg.model_dir, "config.json"), "w"))
        json.dump(dict(global_step=4, config=cfg.to_json()), open(results, "w"))
        raise subprocess.TimeoutExpired(cmd, timeout)
    monkeypatch.setattr(launcher.subprocess, "run", finishes_then_hangs)
    lines = []
    states = launcher.run_study([cfg], "entry.py", [], timeout=9, log=lines.append)
    assert states == {cfg.model_dir: "finished"}, lines
    assert json.load(open(status))["status"] == "finished"
    # as a study before this launcher left it: timeout, with a results.json written since
    json.dump(dict(json.load(open(status)), status="timeout"), open(status, "w"))
    longer = dataclasses.replace(cfg, train_steps=6)
    assert launcher.run_state(longer) == "partial"
    assert launcher.skipped(longer, launcher.run_state(longer)) is None  # it is extended

    def hangs(cmd, timeout=None, **kw):  # results.json: written a minute before this launch
        os.utime(results, (time.time() - 60, time.time() - 60))
        raise subprocess.TimeoutExpired(cmd, timeout)
    monkeypatch.setattr(launcher.subprocess, "run", hangs)
    states = launcher.run_study([longer], "entry.py", [], timeout=9, log=lines.append)
    assert states == {cfg.model_dir: "failed"}
    assert lines[-1].startswith(f"[1/1] {cfg.model_dir}: timeout (killed after --run_timeout=9 "
                                "s): $ "), lines
    assert launcher.run_state(longer) == "failed"


def test_a_grid_of_no_run_is_refused_in_one_line(tmp_path):
    root = tmp_path / "study"
    proc = run_main("ablate.py", f"--root={root}", "--vary_norm=batch", "--vary_init=fixup",
                   "--train_steps=2", *ARGS)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert "the grid has no run: init fixup runs without BN only" in proc.stderr
    assert not root.exists()


@pytest.mark.slow
def test_ablate_prints_no_tensorflow_start_up_lines(tmp_path):
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "run", "ablate.py"),
                           f"--root={tmp_path / 'study'}", "--print_commands", "--train_steps=2",
                           *ARGS], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-2000:]
    assert proc.stdout.count("--model_dir=") == 1


def test_report_groups_the_seeds_of_a_configuration_whatever_they_ran_on(tmp_path):
    """A run resumed with --xla or another --steps_per_loop (what a resume may change) stays in
    its configuration's row."""
    root = str(tmp_path)
    for seed, changes in ((0, {}), (1, dict(xla=True)), (2, dict(steps_per_loop=10))):
        _fake_run(root, "ours", seed, 0.07)
        for name in ("results.json", "config.json"):
            path = os.path.join(root, "ours", f"seed-{seed}", name)
            obj = json.load(open(path))
            (obj.get("config") or obj).update(changes)
            json.dump(obj, open(path, "w"))
    text, _, _ = report.report(root)
    (row,) = [l for l in text.splitlines() if l.startswith("| cifar10")]
    assert "| 0,1,2 |" in row and "xla" not in row


def test_runs_that_differ_in_learning_rate_are_two_rows_of_the_hparams_tab(tmp_path):
    from tensorboard.plugins.hparams import plugin_data_pb2
    configs = grid.make_grid(tiny_config(tmp_path), str(tmp_path), ["none"], ["identity"],
                              ["random"], [(1, 1, 1)], [0], learning_rates=[0.01, 0.02],
                              leakiness=[0.0, 0.1])
    groups = set()
    for cfg in configs:
        assert hparams.write_run_hparams(cfg)
        (events,) = [n for n in os.listdir(cfg.model_dir) if n.startswith("events.out.tfevents.")]
        for event in tf.compat.v1.train.summary_iterator(os.path.join(cfg.model_dir, events)):
            for v in event.summary.value:
                if v.tag == "_hparams_/session_start_info":
                    groups.add(plugin_data_pb2.HParamsPluginData.FromString(
                        v.metadata.plugin_data.content).session_start_info.group_name)
    assert len(configs) == 4 and len(groups) == 4  # TensorBoard groups runs by it


def test_a_run_is_trained_once_by_studies_that_name_the_learning_rate_or_not(tmp_path):
    """One study varies --learning_rate (its directories say it), another keeps the base rate:
    the run they have in common is one directory, whichever study made it."""
    root = str(tmp_path)
    base = tiny_config(tmp_path, learning_rate=0.01)

    def study_grid(**varied):
        return grid.make_grid(base, root, ["none"], ["identity"], ["random"], [(1, 1, 1)], [0],
                              **varied)
    (plain,) = study_grid()
    os.makedirs(plain.model_dir)
    json.dump(plain.to_json(), open(os.path.join(plain.model_dir, "config.json"), "w"))
    varied = study_grid(learning_rates=[0.01, 0.02])
    assert [c.model_dir for c in varied] == [
        plain.model_dir, plain.model_dir.replace("blocks-1", "blocks-1_lr-0.02")]
    for cfg in varied:
        launcher.check_compatible(cfg)
    # the other way round: a run of the varied study is the plain study's run
    other = tmp_path / "other"
    (at_002,) = [c for c in grid.make_grid(base, str(other), ["none"], ["identity"], ["random"],
                                            [(1, 1, 1)], [0], learning_rates=[0.02])]
    os.makedirs(at_002.model_dir)
    json.dump(at_002.to_json(), open(os.path.join(at_002.model_dir, "config.json"), "w"))
    (plain_002,) = grid.make_grid(dataclasses.replace(base, learning_rate=0.02), str(other),
                                   ["none"], ["identity"], ["random"], [(1, 1, 1)], [0])
    assert plain_002.model_dir == at_002.model_dir
    # a run under the plain name at another rate is another run
    (plain_001,) = grid.make_grid(base, str(other), ["none"], ["identity"], ["random"],
                                   [(1, 1, 1)], [0], learning_rates=[0.01])
    assert plain_001.model_dir.endswith("blocks-1_lr-0.01/seed-0")


def test_an_unfinished_run_is_in_no_statistic_and_the_footnote_names_its_state(tmp_path):
    """A diverged run's last evaluation, before its blow-up at another step, was in its row's
    mean and in the paper's net minus its twin (+62.50 for a run diverged at step 140 of 300,
    against a twin at 300): a row's numbers are of its finished runs only."""
    root = str(tmp_path)
    _fake_run(root, "ours", 0, 0.07)
    _fake_run(root, "ours", 1, 0.30, steps=60)
    _fake_run(root, "twin", 0, 0.05, norm="batch", init="he")
    _fake_run(root, "twin", 1, 0.06, norm="batch", init="he")
    json.dump(dict(status="diverged"), open(os.path.join(root, "ours", "seed-1",
                                                         "study_status.json"), "w"))
    text, _, _ = report.report(root)
    (row,) = [l for l in text.splitlines() if l.startswith("| cifar10") and "none /" in l]
    assert "| 0 (of 0,1) |" in row and "60–100 of 100 (diverged: 1 of 2)" in row
    assert "| 7.00 |" in row  # seed 0's alone, not the mean with seed 1's 30.40
    assert ("Rows marked diverged include runs that did not reach train_steps; they are in no "
            "statistic") in text
    (gap,) = [l for l in text.splitlines() if l.startswith("| none / identity")]
    assert "| +1.50 |" in gap and "seeds 0 and 0,1" in gap, gap  # 7.00 - 5.50, Welch: unpaired


@pytest.mark.timeout(300)
def test_print_commands_prints_what_the_study_would_launch_and_says_why_not_the_others(tmp_path):
    args = [f"--root={tmp_path / 'study'}", "--print_commands", "--train_steps=2", *ARGS]
    first = run_main("ablate.py", *args)
    assert first.returncode == 0, first.stderr[-2000:]
    model_dir = first.stdout.split("--model_dir=")[1].split()[0]
    assert not os.path.exists(tmp_path / "study")  # a dry run writes nothing
    os.makedirs(model_dir)
    json.dump(dict(step=1, retry_with="--learning_rate=0.005"),
              open(os.path.join(model_dir, "diverged.json"), "w"))
    diverged = run_main("ablate.py", *args)
    assert diverged.returncode == 0 and "--model_dir=" not in diverged.stdout, diverged.stdout
    assert (f"# {model_dir}: diverged, skipped (--follow_retry_advice continues it with "
            "--learning_rate=0.005)") in diverged.stderr
    followed = run_main("ablate.py", *args, "--follow_retry_advice")
    assert followed.returncode == 0 and followed.stderr == "", followed.stderr
    assert followed.stdout.strip().endswith(f"--model_dir={model_dir} --learning_rate=0.005")


def test_report_train_time_is_the_mean_over_the_runs_with_a_result(tmp_path):
    """A run that has not evaluated yet (no results.json) is no zero in the row's train time."""
    root = str(tmp_path)
    _fake_run(root, "ours", 0, 0.07)  # wall_time_s 3600
    _fake_run(root, "ours", 1, 0.07)
    os.remove(os.path.join(root, "ours", "seed-1", "results.json"))
    json.dump(dict(status="interrupted"), open(os.path.join(root, "ours", "seed-1",
                                                            launcher.STATUS), "w"))
    text, _, _ = report.report(root)
    (row,) = [l for l in text.splitlines() if l.startswith("| cifar10")]
    assert "| 0 (of 0,1) |" in row and "| 1:00:00 |" in row, row


def test_report_writes_its_table_into_a_new_directory_and_names_the_fix_for_a_bad_root(tmp_path):
    root = str(tmp_path / "study")
    _fake_run(root, "ours", 0, 0.07)
    md = tmp_path / "reports" / "table2" / "report.md"
    rep = run_main("report.py", f"--root={root}", f"--out_md={md}", timeout=120)
    assert rep.returncode == 0 and md.exists(), rep.stderr[-2000:]
    missing = run_main("report.py", f"--root={tmp_path / 'nope'}", timeout=120)
    (line,) = missing.stderr.splitlines()
    assert missing.returncode == 2 and line.startswith("error: --root=") and "; give the" in line


def test_the_plot_counts_the_runs_of_a_line_that_have_a_curve(tmp_path, monkeypatch):
    from matplotlib.figure import Figure
    from resnet_nobn.study import curves
    legends = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: legends.extend(
        t.get_text() for ax in fig.axes[1:2] if ax.get_legend()
        for t in ax.get_legend().get_texts()))
    row = dict(dataset="cifar10", shown="cifar10", synthetic=False, drops=[],
               label="none / identity / random / 9",
               series=[dict(seed=0, loss=[], error=[(50, 9.0), (100, 7.0)], norm=[]),
                       dict(seed=1, loss=[], error=[], norm=[])])  # not evaluated yet
    curves.plot_curves([row], str(tmp_path / "p.png"))
    assert legends == ["seed 0", "mean (n=1)"]


def test_report_marks_a_run_that_diverged_outside_a_study_as_diverged(tmp_path):
    """A run trained by hand that diverged (diverged.json, no study_status.json) is in the state
    the study gives it (launcher.run_state), not partial; so is one that a later launch left
    failed."""
    root = str(tmp_path)
    _fake_run(root, "ours", 0, 0.07)
    _fake_run(root, "ours", 1, 0.30, steps=60)
    _fake_run(root, "ours", 2, 0.30, steps=60)
    for seed in (1, 2):
        json.dump(dict(step=66, retry_with="--learning_rate=0.01"),
                  open(os.path.join(root, "ours", f"seed-{seed}", "diverged.json"), "w"))
    json.dump(dict(status="failed"),
              open(os.path.join(root, "ours", "seed-2", launcher.STATUS), "w"))
    text, _, _ = report.report(root)
    (row,) = [l for l in text.splitlines() if l.startswith("| cifar10")]
    assert "(diverged: 2 of 3)" in row, row


def test_a_run_that_ended_before_writing_its_configuration_is_said_not_dropped(tmp_path):
    """A study's run that failed at once (a bad --data_dir) leaves study_status.json and
    train.log only: the report skipped it without a word, and with no other run said "no runs
    (results.json / study_status.json)" beside two study_status.json files."""
    root = tmp_path / "study"
    for seed in (0, 1):
        d = root / "fashion_mnist" / "norm-none" / f"seed-{seed}"
        d.mkdir(parents=True)
        (d / "study_status.json").write_text(json.dumps(dict(status="failed", returncode=2)))
        (d / "train.log").write_text("error: no prepared fashion_mnist in --data_dir=nodata\n")
    said = []
    with pytest.raises(FileNotFoundError, match=r"no run under .* wrote its configuration: 2 "
                                                r"ended before \(see the train.log in each"):
        report.report(str(root), warn=said.append)
    assert len(said) == 2 and all("its run ended (failed) before it wrote its configuration; "
                                  "see its train.log" in line for line in said), said
    _fake_run(str(root), "ours", 0, 0.07)  # beside a finished run: listed, the others said
    said.clear()
    text, _, _ = report.report(str(root), warn=said.append)
    assert len(said) == 2 and "| 7.00 |" in text


def test_a_paper_net_with_two_bn_twins_is_set_beside_each(tmp_path):
    """--vary_norm=none,batch --vary_init=identity,he gives two BN rows of the net's settings:
    the difference table was dropped without a word."""
    root = str(tmp_path)
    for seed in (0, 1):
        _fake_run(root, "ours", seed, 0.07 + seed / 100)
        _fake_run(root, "bn_he", seed, 0.05, norm="batch", init="he")
        _fake_run(root, "bn_id", seed, 0.06, norm="batch", init="identity")
    text, _, _ = report.report(root)
    gaps = [l for l in text.splitlines() if l.startswith("| none / identity")]
    assert [g.split(" | ")[0] for g in gaps] == [  # in the table's order of the twins' rows
        "| none / identity / random / 9 − batch / identity / random / 9",
        "| none / identity / random / 9 − batch / he / random / 9"], gaps
    assert "| +1.50 |" in gaps[0] and "| +2.50 |" in gaps[1], gaps


@pytest.mark.parametrize("edit, said", [
    (dict(top1_error=1.5), "top1_error is 1.5, not an error rate in [0, 1]"),
    (dict(top5_error=-0.2), "top5_error is -0.2, not an error rate in [0, 1]"),
    (dict(top1_error=float("nan")), "top1_error is nan, not an error rate in [0, 1]"),
    (dict(wall_time_s=-50.0), "wall_time_s is -50.0, not a finite number >= 0")])
def test_a_results_json_with_a_value_no_run_writes_is_unreadable_not_averaged(tmp_path, edit,
                                                                                said):
    """Hand-edited values went into the mean: `100.00 ± 45.07`, `nan ± nan`, a train time of
    -1:59:45."""
    root = str(tmp_path)
    _fake_run(root, "ours", 0, 0.07)
    _fake_run(root, "ours", 1, 0.08)
    path = os.path.join(root, "ours", "seed-1", "results.json")
    json.dump({**json.load(open(path)), **edit}, open(path, "w"))
    warned = []
    text, _, _ = report.report(root, warn=warned.append)
    assert len(warned) == 1 and said in warned[0], warned
    (row,) = [l for l in text.splitlines() if l.startswith("| cifar10")]
    assert "| 0 (of 0,1) |" in row and "| 7.00 |" in row and "nan" not in row, row
