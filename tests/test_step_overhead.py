"""bench/step_overhead.py: prints every row, each as a ratio to the plain loop (no timing is
asserted: the numbers belong to the machine), and refuses a size that is none in one line."""
import os
import subprocess
import sys

import pytest

from bench import step_overhead
from tests.helpers import ROOT

SCRIPT = os.path.join(ROOT, "bench", "step_overhead.py")


@pytest.mark.slow
def test_it_prints_each_row_as_a_ratio_to_the_plain_loop(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [SCRIPT, "--steps=2", "--windows=1", "--repeats=1"])
    step_overhead.main()  # in this process: the script's own main, as `python SCRIPT` runs it
    out = capsys.readouterr().out
    summary = out.split("ratio to the plain loop over 1 repeat(s)")[1].splitlines()[2:]
    assert [line.split("  ")[1].strip() for line in summary] == list(step_overhead.ROWS), out
    assert summary[0].split()[-4:] == ["1.00", "(1.00-1.00)", "1.00", "(1.00-1.00)"], summary[0]


def test_a_size_that_is_none_is_refused_in_one_line():
    proc = subprocess.run([sys.executable, SCRIPT, "--steps=0"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr == "error: --steps=0: give at least 1\n", proc.stderr
