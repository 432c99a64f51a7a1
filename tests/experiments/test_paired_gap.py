"""experiments/stability/paired_gap.py: the gap between two networks' test errors, paired image by image, and its
interval, as scipy's paired t test gives it; and over seeds; the script end to end on a run."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from experiments.stability import paired_gap
from tests.helpers import ROOT, run_main

SCRIPT = os.path.join(ROOT, "experiments", "stability", "paired_gap.py")


def test_the_paired_interval_is_scipys_paired_t_interval_on_the_seed_means():
    rng = np.random.default_rng(0)
    a = (rng.random((2, 1000)) < 0.15).astype(np.float64)  # two seeds, 1,000 images
    b = (rng.random((2, 1000)) < 0.10).astype(np.float64)
    gap, low, high = paired_gap.paired_interval(a, b)
    ref = stats.ttest_rel(a.mean(0), b.mean(0)).confidence_interval(0.95)
    np.testing.assert_allclose([gap, low, high],
                               [a.mean() - b.mean(), ref.low, ref.high], rtol=1e-9)
    assert low < gap < high


def test_the_same_networks_have_no_gap_and_a_seed_interval_needs_two_seeds():
    w = (np.random.default_rng(1).random((1, 50)) < 0.3).astype(np.float32)
    assert paired_gap.paired_interval(w, w)[0] == 0.0
    assert paired_gap.seed_interval([0.1], [0.2]) is None
    gap, low, high = paired_gap.seed_interval([0.15, 0.13], [0.10, 0.09])
    np.testing.assert_allclose(gap, 0.045)
    ref = stats.ttest_rel([0.15, 0.13], [0.10, 0.09]).confidence_interval(0.95)
    np.testing.assert_allclose([low, high], [ref.low, ref.high])


def _paired_gap(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=240, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
                                                CUDA_VISIBLE_DEVICES=""))


def test_the_script_restores_two_finished_runs_and_prints_their_gap(finished_run, tmp_path):
    """The command of docs/stability.md end to end, in this process (its main as `python SCRIPT`
    runs it): each run's last checkpoint restored and evaluated, the gap printed in its
    documented form and written to --json."""
    out, finished = tmp_path / "gap.json", str(finished_run)
    p = run_main("../experiments/stability/paired_gap.py", f"--a={finished}", f"--b={finished}",
                 f"--json={out}")
    assert p.returncode == 0, p.stderr[-2000:]
    lines = p.stdout.splitlines()
    assert re.fullmatch(rf"a: {re.escape(finished)} at step 4: \d+\.\d\d% top-1 error \(\d+ "
                        r"images\)", lines[0]), lines
    assert re.fullmatch(r"A - B, paired by image \(\d+ images, 1 seeds a side\): \+0\.00 points "
                        r"\[\+0\.00, \+0\.00\] \(95% interval\)", lines[-1]), lines
    saved = json.loads(out.read_text())
    assert saved["a"] == [finished] and saved["paired_by_image"] == [0.0, 0.0, 0.0]


def test_a_level_outside_0_and_1_is_refused_in_one_line_before_any_run_is_read():
    p = _paired_gap("--a=/nonexistent", "--b=/nonexistent", "--level=2")
    assert p.returncode != 0 and p.stdout == ""
    assert p.stderr.startswith("error: --level=") and p.stderr.count("\n") == 1, p.stderr
