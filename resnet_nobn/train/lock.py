"""The run directory's lock: the chief holds `model_dir/.lock` while it runs, so a second run in
the same directory is refused, and a study can tell a run that a live process trains.
"""
import contextlib
import fcntl
import os
import socket
import time

LOCK = ".lock"  # in model_dir


class InUse(Exception):
    """Another process holds the model_dir's lock."""


@contextlib.contextmanager
def locked(model_dir):
    """Holds `model_dir/.lock` (an flock, released when the process ends however it ends) for the
    block; raises InUse naming the holder's pid and host if another process holds it."""
    os.makedirs(model_dir, exist_ok=True)
    fd = os.open(os.path.join(model_dir, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise InUse(holder) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on host {socket.gethostname()} since "
                          f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
        except OSError as e:  # a full disk: the error names the file
            e.filename = os.path.join(model_dir, LOCK)
            raise
        yield
    finally:
        os.close(fd)  # releases the flock


def holder(model_dir):
    """Who holds `model_dir/.lock` ('pid N on host H since ...') while a live process runs in it,
    else None (the flock ends with its process, however it ends)."""
    try:
        fd = os.open(os.path.join(model_dir, LOCK), os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
