"""Files written whole or not at all, JSON objects read back, and the nearest existing directory
of a path: what the run directory, a study, an export, theory/ and bench/ write with (no
TensorFlow, no other module of the project).
"""
import contextlib
import json
import os


def atomic_write_text(path, text):
    """Writes `path` whole or not at all: a reader never sees half a file."""
    with atomic_file(path) as tmp:
        with open(tmp, "w") as f:
            f.write(text)


def atomic_write_json(path, obj):
    """Writes the JSON of `obj` (indented; what JSON cannot hold as its str) to `path`, whole."""
    atomic_write_text(path, json.dumps(obj, indent=2, default=str))


@contextlib.contextmanager
def atomic_file(path):
    """Yields a temporary path beside `path` (with its extension, which a writer such as
    matplotlib reads the format from) and renames it to `path` after the block: `path` is
    replaced whole or not at all. A failure removes the temporary file, and an OSError names
    `path`, not the temporary file."""
    head, tail = os.path.split(path)
    tmp = os.path.join(head, f".{tail}.tmp{os.getpid()}{os.path.splitext(tail)[1]}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.remove(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.filename == tmp:
            e.filename = path
        raise


def nearest_existing(path):
    """`path` (made absolute) if it exists, else its nearest ancestor that does (at worst the
    root): where a directory `path` would be made, and what may stand in its way."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def read_json(path):
    """The JSON object in `path`, or None if it is missing, unreadable or not an object."""
    try:
        with open(path) as f:
            obj = json.load(f)
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None
