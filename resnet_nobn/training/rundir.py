"""The run directory `model_dir`: the names of its files, and all of it read once into a snapshot.

    config.json      the run's configuration (TrainConfig.to_json), written when it starts
    results.json     its evaluations, history, rollbacks, resume changes and versions (results.py)
    ckpt/            its checkpoints and their losses, `losses.json` (checkpoints.py)
    train/, eval/    TensorBoard summaries of training and of evaluation
    diverged.json    the step and `retry with:` advice of a divergence not resumed past yet
                     (written, read back and deleted by recovery.py)
    .lock            held by the chief while it runs (`locked`), so a second run is refused and
                     a study can tell a run that a live process trains (`holder`)
    .scratch/        the checkpoints of the other workers of a multi-worker run

A start reads the directory once (`read`: a `RunDir`); every file is written whole
(resnet_nobn/files.py). Files only, no TensorFlow.
"""
import contextlib
import dataclasses
import fcntl
import glob
import os
import re
import shutil
import socket
import time

from resnet_nobn.console import log
from resnet_nobn.files import read_json

CONFIG, RESULTS, CKPT, DIVERGED = "config.json", "results.json", "ckpt", "diverged.json"
LOSSES = "losses.json"  # in ckpt/: {step: the training loss computed with that checkpoint}
TRAIN, EVAL = "train", "eval"  # TensorBoard summaries
SUMMARIES = (TRAIN, EVAL)
LOCK, SCRATCH = ".lock", ".scratch"
RESUME_CHANGES = "resume_changes"  # results.json: [{step, field, from, to}] of each resume's changes
ROLLBACKS = "rollbacks"  # results.json: [{diverged_at, resumed_from, retry_with, ...}]


@dataclasses.dataclass(frozen=True)
class RunDir:
    """What a start finds in `model_dir`, read once (`read`); None where a file is missing.

    `config_unreadable`/`results_unreadable`: the file exists but holds no JSON object;
    `diverged`: diverged.json when it is a divergence record (an integer `step`); `steps`: every
    `ckpt-<step>` with any file, newest first, `indexed` those with their `.index` file;
    `losses`: ckpt/losses.json as {step: loss or None}; `held_by`: the lock's holder, if live
    (and asked: `read`); `checkpoint_settings`: (config.json object, where) of the newest
    checkpoint's record, filled in by the trainer (it needs TensorFlow) only when config.json is
    missing; `stamp`: the directory's `stamp` when it was read, to tell whether another process
    changed it since.
    """
    model_dir: str
    exists: bool = False
    config: dict = None
    config_unreadable: bool = False
    results: dict = None
    results_unreadable: bool = False
    diverged: dict = None
    steps: tuple = ()
    indexed: frozenset = frozenset()
    losses: dict = dataclasses.field(default_factory=dict)
    held_by: str = None
    checkpoint_settings: tuple = None
    stamp: tuple = None

    @property
    def ckpt_dir(self):
        return os.path.join(self.model_dir, CKPT)


def read(model_dir, ask_lock=True):
    """The RunDir of `model_dir` (an absent directory reads as empty). `ask_lock`: whether to ask
    who holds its lock (asking takes a shared flock for an instant: the trainer, which takes
    the lock itself and whose workers start together, does not ask)."""
    stamped = stamp(model_dir)  # before the files are read: a write after it shows
    if not os.path.isdir(model_dir):
        return RunDir(model_dir, stamp=stamped)
    config_path, results_path = os.path.join(model_dir, CONFIG), os.path.join(model_dir, RESULTS)
    config, results = read_json(config_path), read_json(results_path)
    ckpt_dir = os.path.join(model_dir, CKPT)
    steps = steps_on_disk(ckpt_dir)
    return RunDir(
        model_dir, exists=True, config=config,
        config_unreadable=config is None and os.path.exists(config_path), results=results,
        results_unreadable=results is None and os.path.exists(results_path),
        diverged=read_divergence(model_dir),
        steps=tuple(steps),
        indexed=frozenset(s for s in steps
                          if os.path.exists(os.path.join(ckpt_dir, f"ckpt-{s}.index"))),
        losses=losses_of(read_json(os.path.join(ckpt_dir, LOSSES))),
        held_by=holder(model_dir) if ask_lock else None, stamp=stamped)


def stamp(model_dir):
    """The size and modification time of each file of the run directory a start reads
    (config.json, results.json, diverged.json, everything in ckpt/), None for one absent: equal
    for two readings unless a process wrote there in between. Each is a stat; nothing is read."""
    def of(path):
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns
    ckpt_dir = os.path.join(model_dir, CKPT)
    try:
        names = sorted(os.listdir(ckpt_dir))
    except OSError:
        names = []
    return (tuple(of(os.path.join(model_dir, n)) for n in (CONFIG, RESULTS, DIVERGED))
            + tuple((n, of(os.path.join(ckpt_dir, n))) for n in names))


def losses_of(raw):
    """{step: loss or None} of a losses.json object (None: empty; entries not a number: left out)."""
    out = {}
    for k, v in (raw or {}).items():
        try:
            out[int(k)] = None if v is None else float(v)
        except (TypeError, ValueError):
            continue
    return out


def _divergence_record(record):
    """`record` if it is a divergence record (a JSON object with an integer `step`), else None:
    a damaged diverged.json records no divergence."""
    step = (record or {}).get("step")
    return record if isinstance(step, int) and not isinstance(step, bool) else None


def read_divergence(model_dir):
    """diverged.json's divergence record in `model_dir`, or None (missing or damaged): for those
    that read no whole RunDir (resnet_nobn/training/recovery.py)."""
    return _divergence_record(read_json(os.path.join(model_dir, DIVERGED)))


def set_aside(path):
    """Renames an unreadable `path` out of the way (`<path>.unreadable-<time>`) and says so."""
    aside = f"{path}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}"
    os.replace(path, aside)
    log(f"warning: {path} is unreadable; moved to {aside}, the history starts anew")


def copied_from_another_run(model_dir, results, config, root=None):
    """Why the results.json object `results` found in `model_dir` is another run's, or None: the
    seed it records is not that of the run's config.json (`config`, may be None) or of its study
    directory (seed-<k>): copied from a sibling seed's directory; or the directory it records is
    another run's, of another name or under `root`: a copy of a whole run directory beside it (a
    copy of the same name elsewhere, such as an archive or a moved study, is the run's own)."""
    recorded = results.get("config") if isinstance(results.get("config"), dict) else {}
    seed, there = recorded.get("seed", results.get("seed")), recorded.get("model_dir")
    named = re.fullmatch(r"seed-(\d+)", os.path.basename(os.path.normpath(model_dir)))
    own = (config or {}).get("seed", int(named.group(1)) if named else None)
    other = (isinstance(there, str) and os.path.exists(os.path.join(there, CONFIG))
             and os.path.realpath(there) != os.path.realpath(model_dir)
             and (os.path.basename(os.path.normpath(there)) != os.path.basename(
                 os.path.normpath(model_dir)) or (root is not None and os.path.realpath(
                     there).startswith(os.path.realpath(root).rstrip(os.sep) + os.sep))))
    if (seed is None or own is None or seed == own) and not other:
        return None
    return (f"it records seed {seed} and --model_dir={there}, not this run's (seed {own}, "
            f"{model_dir}): a copy of another run's results.json")


def discard_new_run(model_dir):
    """Removes the directory a new run made, if it holds nothing a user could want back: no
    results.json and no checkpoint but the initialisation (ckpt-0, made again from --seed).
    Returns whether it was removed."""
    if (os.path.exists(os.path.join(model_dir, RESULTS))
            or any(steps_on_disk(os.path.join(model_dir, CKPT)))):
        return False
    shutil.rmtree(model_dir, ignore_errors=True)
    return not os.path.exists(model_dir)


def steps_on_disk(ckpt_dir):
    """Steps of every `ckpt-<step>` of which any file exists, newest first."""
    steps = set()
    for path in glob.glob(os.path.join(glob.escape(ckpt_dir), "ckpt-*")):
        m = re.fullmatch(r"ckpt-(\d+)\.(index|data-\d+-of-\d+)", os.path.basename(path))
        if m:
            steps.add(int(m.group(1)))
    return sorted(steps, reverse=True)


# -- the lock ------------------------------------------------------------------------------------


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
            raise InUse(_holder_line(fd)) from None
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
            return _holder_line(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _holder_line(fd):
    """What the lock file `fd` says of its holder ('pid N on host H since ...')."""
    return os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
