"""experiments/theory/theory_mutations.py's flags: what cannot run is said in one line before the hours of
work (it divided by zero for an unknown --only, and failed to write --out only at the end)."""
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT


@pytest.mark.parametrize("flag, said", [
    ("--only=nope", "error: --only names no mutation nope; the mutations: product_order, "),
    ("--jobs=0", "error: --jobs=0 and --timeout=900 must be positive"),
    ("--out=/nonexistent/x.json", "error: cannot write --out=/nonexistent/x.json: No such file"),
])
def test_a_campaign_that_cannot_run_is_refused_before_it_starts(flag, said):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "experiments", "theory", "theory_mutations.py"), flag],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stdout == "" and len(p.stderr.splitlines()) == 1, p.stderr
    assert p.stderr.startswith(said), p.stderr
