"""The fault campaigns' runner (tests/faults/campaign.py): a selection of no case is no pass."""
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.faults


def test_an_only_that_selects_no_case_is_refused_and_the_root_kept(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "kept").write_text("x")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "faults", "campaign.py"), "2",
                        f"--root={root}", "--only=9"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == "", (p.stdout, p.stderr)
    assert p.stderr.splitlines() == ["error: --only=9 selects no case; give a section (1, 2, 3, 4) "
                                     "or a case number such as 1.2"]
    assert (root / "kept").read_text() == "x"
