"""The errors a user can fix: each is reported as one line on stderr, exit status 2 (cli.py).

Besides the two classes, the lines every command gives for the same fault: missing or damaged
data (`prepare_data_command`), TensorFlow's error (`first_line`), a full disk or an exhausted
quota wherever a write meets it (`disk_full`), any other write refused (`write_failure`) and a
path that is a broken symbolic link (`broken_link`).
"""
import errno
import os
import re
import shutil


class UserError(Exception):
    """Bad input, or a failed run the user can fix (the message says how)."""


class TrainingDiverged(UserError):
    """The loss or the weights stopped being finite; the message ends with the `retry with:` flags."""


def prepare_data_command(name, data_dir="DIR"):
    """The command that downloads and prepares dataset `name` in `data_dir` (run/prepare_data.py):
    the fix every message about missing or damaged data names."""
    return f"python run/prepare_data.py --dataset={name} --data_dir={data_dir or 'DIR'}"


def first_line(e, limit=200):
    """The informative line of an error, at most `limit` characters: not TensorFlow's "Graph
    execution error:" or a traceback, nor the `{{function_node ...}}` an eager op's error starts
    with; the error's type if it has no text."""
    lines = [re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", line.strip())
             for line in str(e).strip().splitlines()]
    lines = [line for line in lines if line]
    skip = ("Graph execution error", "Detected at node", "File ", "Traceback", "[[", "{{")
    useful = [line for line in lines if not line.startswith(skip)]
    return (useful or lines or [type(e).__name__])[0][:limit]


def seconds_from_env(name, default, environ):
    """The positive number of seconds in environment variable `name`, else `default`; UserError
    naming the variable and its default if it is set to anything else (the timeouts' one rule)."""
    text = environ.get(name, "").strip()
    try:
        value = float(text) if text else default
    except ValueError:
        value = None
    if value is None or not 0 < value < float("inf"):
        raise UserError(f"{name}={text!r} is not a positive number of seconds; unset it for the "
                        f"default ({default:.0f}) or give e.g. {name}={default:.0f}")
    return value


# A full disk and an exhausted quota, as the system says them: Python's OSError carries the errno,
# TensorFlow's error the system's words (ResourceExhaustedError "...; No space left on device").
DISK_FULL = {errno.ENOSPC: "No space left on device", errno.EDQUOT: "Disk quota exceeded"}


def disk_full(e, path, fix):
    """The one line for `e` if it is a full disk or an exhausted quota, else None: the file being
    written (`e`'s, or `path` if it names none; a checkpoint's temporary file as the checkpoint),
    the system's words, the disk (its mount point and free space) and `fix`."""
    if isinstance(e, OSError):
        reason, where = DISK_FULL.get(e.errno), e.filename or path
    else:
        reason, where = next((r for r in DISK_FULL.values() if r in str(e)), None), _named(e, path)
    if reason is None:
        return None
    # TensorFlow's temporary files: ckpt-4_temp/part-... is ckpt-4, saved_model.pb.tmp<hex> the .pb
    where = re.sub(r"(_temp/[^/]*|\.tmp[0-9a-f]{16,})$", "", os.fspath(where))
    mount = os.path.realpath(where)  # the disk it is on, through any symbolic link
    while not (os.path.ismount(mount) and os.path.isdir(mount)):
        mount = os.path.dirname(mount)
    free = shutil.disk_usage(mount).free
    return f"{where}: {reason} (the disk mounted at {mount}, {_size(free)} free); {fix}"


def unwritable(e, path):
    """(the file, the reason) if `e` is a write the file system refused (read-only, permissions,
    a path through a file), else None; the file is `e`'s, else `path`."""
    if isinstance(e, OSError):
        return e.filename or path, e.strerror or str(e)
    reason = next((r for r in _REFUSED if r in str(e)), None)
    return (_named(e, path), reason) if reason else None


def write_failure(e, path, instead):
    """The one line for `e` if it is a write that failed, else None: the file, the reason and the
    fix for that cause, "... or `instead`" (e.g. "give another --root"): free space for a full
    disk (`disk_full`), make it writable for a refusal, move a file away for a path through one."""
    said, refused = disk_full(e, path, f"free space there or {instead}"), unwritable(e, path)
    if said or not refused:
        return said
    in_the_way = refused[1] in ("Not a directory", "Is a directory")  # a file, or a directory
    fix = "move what stands in its path away" if in_the_way else "make it writable"
    return f"cannot write {refused[0]}: {refused[1]}; {fix} or {instead}"


_REFUSED = ("Read-only file system", "Permission denied", "Not a directory", "Is a directory")


def _named(e, default):
    """The file TensorFlow's error names ("{{function_node ...}} /dir/file; No space left ..."),
    else `default`."""
    named = re.search(r"(?:^|\s)(/[^;\n]+?)(?=;|\n|$)", str(e))
    return named.group(1) if named else default


def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def broken_link(path, flag=None):
    """The one line for a path (the value of --`flag`, if given) that is, or goes through, a
    symbolic link that loops or points to nothing, else None: what it points to, and the fix."""
    try:
        os.stat(path)
        return None
    except OSError as e:
        loops = e.errno == errno.ELOOP
        if not loops and not os.path.islink(path):
            return None  # a path that does not exist yet, or another fault: the write says it
    said = f"{flag}={path}" if flag else path
    link = os.path.abspath(path)
    while not os.path.islink(link):  # the link on the way that loops
        link = os.path.dirname(link)
    target = os.readlink(link)
    said += " is" if link == os.path.abspath(path) else f" goes through {link},"
    if loops:
        return (f"{said} a symbolic link that loops ({link} -> {target}); remove the link or "
                "point it at a directory")
    resolved = os.path.normpath(os.path.join(os.path.dirname(link), target))
    return (f"{said} a symbolic link that points to {target}, which does not exist; create "
            f"{resolved} or remove the link")
