"""Where a run's code came from, as results.json and an export's model card record it: the git
commit of the project, `-dirty` when tracked files were changed.
"""
import os
import subprocess


def git_commit():
    """The project's git commit (with `-dirty` if tracked files changed), or None."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=10)
        commit = out.stdout.strip() if out.returncode == 0 else None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (commit + ("-dirty" if dirty else "")) if commit else None
    except (OSError, subprocess.SubprocessError):
        return None
