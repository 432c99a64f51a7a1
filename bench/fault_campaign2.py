"""The faults a user can meet, tried black-box: one row per case, expected vs got.

Every case runs the project's commands (run/*.py, `python -m theory.check`) as subprocesses on
tiny configurations (synthetic data or a 24-image tfds directory, widths 8, one block per stage)
and checks what the README promises: one clear line and a non-zero exit for bad input, nothing
half-written or recorded as what it is not, processes that end with their parent, the project's
lines only. It prints one Markdown row per case and the totals; exit status 0 iff every case
behaved as expected.

    python bench/fault_campaign2.py --root=/tmp/faults2            # all cases, a few minutes
    python bench/fault_campaign2.py --root=/tmp/faults2 --only=2.  # the cases of section 2

Sections: 1 work lost or reported wrong on resume (bench/faults2/resume.py), 2 damaged data and
hand-edited files (data.py), 3 processes (processes.py), 4 quiet: the project's lines only
(quiet.py); their helpers are bench/faults2/common.py. The first campaign
(bench/fault_campaign.py) SIGKILLs a run again and again; this one covers the other faults.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The cases register on import, in the table's order: sections 1, 2, 3, 4.
from bench import campaign  # noqa: E402
from bench.faults2 import resume  # noqa: E402,F401,I001
from bench.faults2 import data  # noqa: E402,F401
from bench.faults2 import processes  # noqa: E402
from bench.faults2 import quiet  # noqa: E402,F401
from bench.faults2.common import CASES  # noqa: E402

if __name__ == "__main__":
    campaign.main(__doc__, "fault campaign 2", CASES, numeric_order=False,
                  after=processes.stop_busy_study)
