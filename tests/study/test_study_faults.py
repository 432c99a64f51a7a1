"""A study and its report under faults: a results.json that is another run's, a disk that fills
while the report or a run's status is written, two studies with other base flags on one root,
and a root that is a broken link. One line each; nothing earlier is lost or silently mixed."""
import errno
import json
import os
import shutil

import pytest

from helpers import TINY_NET, run_main, study_runs_in_process, tiny_config
from resnet_nobn.errors import UserError
from resnet_nobn.study import grid, launcher, report

# the recipe's rate unless a test gives its own
ARGS = ["--use_synthetic_data", *TINY_NET, "--batch_size=16", "--eval_every=2", "--log_every=2"]


def _run(root, seed, top1):
    """A finished run of a one-seed study, as files: config.json and results.json."""
    cfg = tiny_config("x", seed=seed, train_steps=4)
    cfg = grid.make_grid(cfg, root, ["none"], ["identity"], ["random"], [(1, 1, 1)], [seed])[0]
    os.makedirs(cfg.model_dir)
    history = [dict(step=4, top1_error=top1, top5_error=top1 / 2, eval_loss=1.0)]
    with open(os.path.join(cfg.model_dir, "config.json"), "w") as f:
        json.dump(cfg.to_json(), f)
    with open(os.path.join(cfg.model_dir, "results.json"), "w") as f:
        json.dump(dict(global_step=4, top1_error=top1, top5_error=top1 / 2, history=history,
                       seed=seed, config=cfg.to_json()), f)
    return cfg.model_dir


def test_a_results_json_copied_from_another_run_is_said_and_not_counted(tmp_path):
    root = str(tmp_path)
    seed0, seed1 = _run(root, 0, 0.5), _run(root, 1, 0.7)
    shutil.copy(os.path.join(seed1, "results.json"), os.path.join(seed0, "results.json"))
    warnings = []
    text, _, _ = report.report(root, warn=warnings.append)
    (row,) = [line for line in text.splitlines() if line.startswith("| cifar10")]
    assert "| 1 (of 0,1) |" in row and "70.00 |" in row, row  # not "1,1", not averaged twice
    (warning,) = warnings
    assert seed0 in warning and "seed 1" in warning and seed1 in warning, warning


def _full(path):
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


def test_the_report_figure_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    root = str(tmp_path)
    _run(root, 0, 0.5)
    _, md, png = report.report(root)
    before = open(png, "rb").read(), open(md).read()
    from matplotlib.figure import Figure

    def half_written(self, path, **kw):  # the disk fills half-way through the PNG
        with open(path, "wb") as f:
            f.write(before[0][:100])
        raise _full(path)
    monkeypatch.setattr(Figure, "savefig", half_written)
    _run(root, 1, 0.7)
    with pytest.raises(UserError) as e:
        report.report(root)
    msg = str(e.value)
    assert "No space left on device" in msg and "the disk mounted at" in msg and root in msg, msg
    assert (open(png, "rb").read(), open(md).read()) == before  # the earlier report, whole
    assert sorted(os.listdir(root)) == ["cifar10", "report.md", "report.png"]


def test_a_study_whose_root_fills_says_so_in_one_line(tmp_path, monkeypatch):
    base = tiny_config("x", train_steps=2)
    configs = grid.make_grid(base, str(tmp_path), ["none"], ["identity"], ["random"],
                             [(1, 1, 1)], [0])
    monkeypatch.setattr(launcher, "atomic_write_json", lambda path, obj: (_ for _ in ()).throw(
        _full(path + ".tmp1")))
    with pytest.raises(UserError) as e:
        launcher.run_study(configs, "run/cifar_train.py", [], log=lambda _: None)
    msg = str(e.value)
    assert "No space left on device" in msg and configs[0].model_dir in msg and "\n" not in msg
    assert "the disk mounted at" in msg, msg


@pytest.mark.slow
def test_two_studies_with_other_base_flags_do_not_share_a_root(tmp_path, monkeypatch):
    study_runs_in_process(monkeypatch)
    root = tmp_path / "study"
    dry = run_main("ablate.py", f"--root={root}", "--print_commands", "--train_steps=2",
                  "--learning_rate=0.01", *ARGS)
    assert dry.returncode == 0 and not root.exists(), dry.stderr[-2000:]  # a dry run writes nothing
    first = run_main("ablate.py", f"--root={root}", "--train_steps=2", "--learning_rate=0.01", *ARGS)
    assert first.returncode == 0, first.stderr[-2000:]
    second = run_main("ablate.py", f"--root={root}", "--print_commands", "--train_steps=2",
                     "--learning_rate=0.02", *ARGS)
    assert second.returncode == 2 and len(second.stderr.strip().splitlines()) == 1, second.stderr
    assert "learning_rate: 0.01 there, 0.02 here" in second.stderr, second.stderr
    # a study that varies the learning rate names it in its runs' directories: it may share it
    third = run_main("ablate.py", f"--root={root}", "--print_commands", "--train_steps=2",
                    "--vary_learning_rate=0.01,0.02", *ARGS)
    assert third.returncode == 0, third.stderr[-2000:]


@pytest.mark.parametrize("target", ["loop", "nowhere/x"])
def test_a_study_root_that_is_a_broken_link_is_one_line(tmp_path, target):
    root = tmp_path / "study"
    os.symlink(str(root) if target == "loop" else target, root)
    for script in ("ablate.py", "report.py"):
        p = run_main(script, f"--root={root}", *(ARGS if script == "ablate.py" else []))
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert "symbolic link" in p.stderr and str(root) in p.stderr, p.stderr


@pytest.mark.parametrize("where", ["run", "above"])
def test_a_file_where_a_run_directory_goes_is_said_in_one_line(tmp_path, where):
    base = tiny_config("x", train_steps=2)
    (cfg,) = grid.make_grid(base, str(tmp_path), ["none"], ["identity"], ["random"],
                            [(1, 1, 1)], [0])
    blocked = cfg.model_dir if where == "run" else os.path.dirname(cfg.model_dir)
    os.makedirs(os.path.dirname(blocked))
    with open(blocked, "w") as f:
        f.write("x")
    with pytest.raises(UserError) as e:
        launcher.run_study([cfg], "run/cifar_train.py", [], log=lambda _: None)
    there = "there" if where == "run" else f"{cfg.model_dir} under it"
    assert str(e.value) == (f"{blocked} is a file, not a directory (the study keeps the run "
                            f"{there}); move the file away or give another --root")
    assert open(blocked).read() == "x"
