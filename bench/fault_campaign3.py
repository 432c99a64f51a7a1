"""Disks, links, workers that disagree and records under faults, tried black-box: one row per case.

Every case runs the project's commands (run/*.py, `python -m theory...`) as subprocesses on tiny
configurations, as a user's cluster would treat them: a disk that fills (a small tmpfs, or one
filled up to its last byte), a read-only mount, symbolic links that loop or point to nothing, a
worker started with a stale command line, files copied or edited by hand, a study started twice.
Each case checks what the project promises: one clear line (TensorFlow's own start-up lines
apart) and a non-zero exit for what the user must fix, nothing already saved lost, nothing
recorded as what it is not. It prints one Markdown row per case and the totals; exit status 0
iff every case behaved as expected.

    sudo python bench/fault_campaign3.py --root=/tmp/faults3            # all cases, ~1 hour
    sudo python bench/fault_campaign3.py --root=/tmp/faults3 --only=4   # the cases of section 4

Needs root (it mounts tmpfs and read-only bind mounts under --root, and unmounts them at the
end). Sections: 1 a full disk, 2 files replaced whole (bench/faults3/disk.py), 3 what is recorded
(records.py), 4 links and read-only file systems (links.py), 5 clusters, 6 the theory experiment
and damaged data (cluster.py); their helpers are bench/faults3/common.py.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import campaign  # noqa: E402
from bench.faults3 import cluster, disk, links, records  # noqa: E402,F401 (register the cases)
from bench.faults3.common import CASES, MOUNTS  # noqa: E402


def _root():
    if os.geteuid() != 0:
        sys.exit("error: the campaign mounts tmpfs and read-only bind mounts: run it as root")


def _unmount():
    for m in reversed(MOUNTS):
        subprocess.run(["umount", "-l", m], capture_output=True)


if __name__ == "__main__":
    campaign.main(__doc__, "fault campaign 3", CASES, before=_root, after=_unmount)
