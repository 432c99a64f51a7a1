"""The theory modules' command lines: `--help` starts with the usage (no TensorFlow start-up
lines before it), and `python -m theory.check --help` names every section it checks and every
status a row can have."""
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT
from theory import rows
from theory.check import SECTIONS

STATUSES = sorted(set(rows.STATUS.values()) | {"INCONCLUSIVE"})


def _help(module):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)


@pytest.mark.parametrize("module", ["theory.check", "theory.section2.experiment",
                                    "theory.section5.conjecture"])
def test_help_starts_with_the_usage(module):
    proc = _help(module)
    assert proc.returncode == 0 and proc.stdout.startswith(f"usage: python -m {module}"), \
        proc.stdout[:2000]


def test_check_help_names_every_section_and_status():
    text = " ".join(_help("theory.check").stdout.split())
    for title, _, _ in SECTIONS:
        assert title.split(":")[0] in text, title
    for status in STATUSES:
        assert status in text, status


def test_a_tilde_after_equals_is_the_home_directory(tmp_path):
    """`--json=~/x` reaches the program with its `~` (bash expands it only at a word's start)."""
    env = dict(os.environ, HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "theory.check", "--json=~/missing/rows.json"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and f"--json={tmp_path}/missing/rows.json" in proc.stderr, \
        proc.stderr
