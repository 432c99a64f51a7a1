"""The first fault campaign (tests/faults/kills.py): a run SIGKILLed again and again and re-run
each time ends as the uninterrupted run (final step, every weight, the results history)."""
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.faults


@pytest.mark.timeout(1800)
def test_a_run_killed_again_and_again_ends_as_the_uninterrupted_one(tmp_path):
    # small: 2 kills of a 200-step run; seed 1 draws the random kill at 13% of the run, so a
    # re-run that starts and steps faster than the uninterrupted run did (the load of the other
    # test processes changes) still meets it
    size = [] if os.environ.get("FAULTS") == "all" else ["--kills=2", "--steps=200", "--seed=1"]
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "faults", "kills.py"),
                        f"--root={tmp_path / 'kills'}", *size],
                       capture_output=True, text=True, timeout=1700)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "equal the uninterrupted run's" in p.stdout, p.stdout
