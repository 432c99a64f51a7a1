"""`python -m theory.section2.experiment` takes bad input as the run/ entry points do: a bad flag,
an --out it cannot write and a --dim whose matrices cannot fit in memory are one line and exit
status 2 before any work; Ctrl-C is one line and exit status 130; its figure and JSON are
replaced whole or not at all."""
import errno
import json
import os
import signal
import subprocess
import sys

import pytest

from tests.helpers import ROOT, signal_when

pytestmark = pytest.mark.timeout(300)


def _experiment(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "theory.section2.experiment", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


@pytest.mark.parametrize("args, said", [
    (["--out", "{tmp}/o", "--steps", "abc"], "--steps"),
    (["--out", "{tmp}/o", "--steps", "0"], "--steps"),
    (["--out", "{tmp}/o", "--depths", "0"], "--depths"),
    (["--out", "{tmp}/o", "--dim", "1"], "--dim"),
    (["--out", "{tmp}/o", "--lr", "nan"], "--lr"),
    (["--steps", "3"], "--out"),
    (["--out", "{tmp}/a_file/o", "--quick"], "{tmp}/a_file"),
    (["--out", "{tmp}/o", "--dim", "200000", "--depths", "1"], "--dim"),
])
def test_bad_input_is_one_line_before_any_work(tmp_path, args, said):
    (tmp_path / "a_file").write_text("x")
    p = _experiment(*[a.format(tmp=tmp_path) for a in args])
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert said.format(tmp=tmp_path) in lines[0], lines[0]
    assert p.stdout == "" and not (tmp_path / "o").exists()


def test_ctrl_c_is_one_line_and_exit_130(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "theory.section2.experiment", "--out",
                             str(tmp_path / "o"), "--depths", "1", "2", "4", "8", "16", "32", "64",
                             "--steps", "100000"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    _, err = signal_when(proc, lambda lines: lines[-1].lstrip().startswith("depth"),
                         signal.SIGINT, wait=240)
    assert proc.returncode == 130, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("interrupted"), err


def test_the_figure_and_json_are_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    from matplotlib.figure import Figure
    from theory.section2 import experiment
    out = tmp_path / "o"
    args = ["--out", str(out), "--depths", "1", "--steps", "20", "--dim", "4", "--log-every", "10"]
    assert experiment.main(args) == 0
    before = (out / "linear_gd.png").read_bytes(), (out / "linear_gd.json").read_text()

    def half_written(self, path, **kw):
        with open(path, "wb") as f:
            f.write(before[0][:100])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    monkeypatch.setattr(Figure, "savefig", half_written)
    assert experiment.main(args + ["--seed", "1"]) == 2
    assert ((out / "linear_gd.png").read_bytes(), (out / "linear_gd.json").read_text()) == before
    assert json.loads(before[1])["args"]["seed"] == 0
    assert not [f for f in os.listdir(out) if f.startswith(".") or "tmp" in f]
