"""experiments/stability/stability.py without training: flags that make no run and run directories of other
settings refused before any work, and a run that fails said in its own words, with exit status 1."""
import json
import os
import subprocess
import sys

import pytest

from experiments.stability import stability
from resnet_nobn.files import atomic_write_json
from tests.helpers import ROOT, tiny_config

SCRIPT = os.path.join(ROOT, "experiments", "stability", "stability.py")
TINY = ["--long", "--blocks=1", "--nets=paper", "--seeds=0", "--learning_rate=0.05", "--steps=2",
        "--widths=8,8,8"]


def _main(monkeypatch, *args):
    """stability.main() on the command line `args`; its exit status (0 if it returned)."""
    monkeypatch.setattr(sys, "argv", [SCRIPT, *args])
    try:
        stability.main()
    except SystemExit as e:
        return e.code
    return 0


@pytest.mark.parametrize("bad", ["--steps=0", "--steps=-1", "--batch_size=0", "--blocks=0",
                                 "--rates=abc", "--rates=", "--widths=x", "--nets=paper,foo"])
def test_flags_that_make_no_run_are_refused_in_one_line_before_any_work(
        bad, tmp_path, monkeypatch, capsys):
    """--steps=0 called every rate stable without training anything."""
    root = tmp_path / "root"
    code = _main(monkeypatch, f"--root={root}", f"--data_dir={tmp_path}", "--nets=paper",
                 "--blocks=1", bad)
    out, err = capsys.readouterr()
    assert code == 2 and out == "", out
    assert err.startswith(f"error: {bad.split('=')[0]}") and err.count("\n") == 1, err
    assert not root.exists()


def test_a_run_that_fails_prints_its_own_error_line_and_the_script_exits_1(
        tmp_path, monkeypatch, capsys):
    """The trainer's refusal (here faked, launched by the study's launcher: no TensorFlow) was
    said as `None`, with exit status 0."""
    from resnet_nobn.study import launcher

    def failing_run(cmd, stdout, **kw):
        stdout.write("step 1/2\nerror: the first words\nerror: --data_dir=X holds no data\n")
        return subprocess.CompletedProcess(cmd, 1)

    monkeypatch.setattr(launcher.subprocess, "run", failing_run)
    monkeypatch.setattr(launcher, "write_run_hparams", lambda cfg: None)
    # the run's config without absl's global flags (another test module's script defines some)
    monkeypatch.setattr(stability, "config_of", lambda cmd: tiny_config(
        next(a.split("=", 1)[1] for a in cmd if a.startswith("--model_dir="))))
    for mode in (TINY, ["--blocks=1", "--nets=paper", "--rates=0.1,0.05", "--steps=2"]):
        code = _main(monkeypatch, f"--root={tmp_path / 'root'}", f"--data_dir={tmp_path}", *mode)
        out, err = capsys.readouterr()
        assert code not in (0, None), out
        ran = [line for line in out.splitlines() if line.startswith("paper ")]
        assert len(ran) == 1, out  # a failed sweep run ends the sweep: no smaller rate tried
        assert ran[0].endswith("seed 0  failed: error: --data_dir=X holds no data"), out
        assert "None" not in out, out


def _script(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=60)


def test_a_finished_run_of_other_settings_under_root_is_refused_not_reported_as_this_ones(
        tmp_path):
    """The run directory's name leaves out widths, batch size and dataset: a finished run of
    other ones was reported as stable for these flags without training."""
    root, data = tmp_path / "root", tmp_path / "data"
    flags = [f"--root={root}", f"--data_dir={data}", "--batch_size=8", *TINY]
    # the config.json run/cifar_train.py writes for these flags, of a run finished at step 2
    write = ("import json, sys; from experiments.stability import stability as s; "
             "d, cmd = s.planned(s.parser().parse_args(sys.argv[1:]))[0]; "
             "print(json.dumps([d, s.config_of(cmd).to_json()]))")
    made = subprocess.run([sys.executable, "-c", write, *flags], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert made.returncode == 0, made.stderr
    model_dir, config = json.loads(made.stdout)
    os.makedirs(model_dir)
    atomic_write_json(os.path.join(model_dir, "config.json"), config)
    atomic_write_json(os.path.join(model_dir, "results.json"), {"global_step": 2})
    same = _script(*flags, f"--data_dir={tmp_path}")  # the same settings, another data_dir
    assert same.returncode == 0 and same.stdout.endswith("seed 0  stable\n"), same
    other = _script(*flags, "--batch_size=16", "--widths=8,8,16", f"--data_dir={tmp_path}")
    assert other.returncode == 2 and other.stdout == "", other
    err = other.stderr
    assert err.startswith(f"error: {model_dir} holds a run with other settings (batch_size: 8 "
                          "there, 16 here; widths: [8, 8, 8] there, [8, 8, 16] here") and (
        "use another --root" in err and err.count("\n") == 1), err
