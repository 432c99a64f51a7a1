"""Small configurations and helpers shared by the training tests."""
import builtins
import collections
import contextlib
import dataclasses
import glob
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from resnet_nobn.config import TrainConfig
from resnet_nobn.config import ModelConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The tests' tiny network: one block a stage, 8, 16 and 32 channels, an 8-channel stem (trains in
# seconds on a CPU). TINY_MODEL: its ModelConfig fields; TINY_NET: the same as flags of run/*.py.
TINY_MODEL = dict(widths=(8, 16, 32), blocks_per_stage=(1, 1, 1), stem_width=8)
TINY_NET = ["--widths=8,16,32", "--stem_width=8", "--blocks_per_stage=1"]
# A tiny run as tiny_config trains it, as flags of run/cifar_train.py: the tiny network on
# synthetic data, batch 8, rate 0.01. A module adds its own cadence; a flag given again after it
# takes the later value (absl's rule), e.g. [*TINY, "--batch_size=16"].
TINY = ["--use_synthetic_data", *TINY_NET, "--batch_size=8", "--learning_rate=0.01"]
# The flags of the `cli_run` fixture's run (tests/conftest.py), without its --train_steps=4 and
# --model_dir: logged and checkpointed every 2 steps, evaluated every 4. A test resuming a copy of
# it gives these, so that it changes only what it means to.
CLI_RUN = [*TINY, "--log_every=2", "--eval_every=4", "--checkpoint_every=2"]
# tiny_config's settings of the `diverged_run` fixture's run: it diverges in its first loop.
DIVERGED_RUN = dict(train_steps=4, checkpoint_every=2, eval_every=2, learning_rate=1e9)


def tiny_config(model_dir, **overrides):
    """A TrainConfig of TINY_MODEL on synthetic data (TINY's run, without its flags' recipe of
    weight decay and rate boundaries): trains in seconds on a CPU."""
    model_fields = {f.name for f in dataclasses.fields(ModelConfig)}
    model_kw = {k: overrides.pop(k) for k in list(overrides) if k in model_fields}
    model = ModelConfig(**{**TINY_MODEL, **model_kw})
    base = dict(model=model, use_synthetic_data=True, train_steps=6, batch_size=8,
                learning_rate=0.01, lr_boundaries=(), eval_every=1000, checkpoint_every=1000,
                log_every=1000, strategy="one_device", model_dir=str(model_dir))
    base.update(overrides)
    return TrainConfig(**base)


def copy_of(run, where):
    """A copy of the run directory `run` at `where` (a session fixture's run, this test's own to
    change); returns `where`."""
    shutil.copytree(run, where)
    return where


def check_model_dir(cfg):
    """(the run's recorded settings or None, {field: [there, here]}) of a start of `cfg` on its
    run directory as it is (resume.decide on rundir.read); UserError where it refuses."""
    from resnet_nobn.training import resume, rundir
    plan = resume.decide(rundir.read(cfg.model_dir), cfg)
    return plan.run_config, plan.changes


def count_reads(monkeypatch, under=None):
    """{file name: times opened for reading}, counted from now until monkeypatch.undo(), of the
    files directly in the directories `under` (None: every file)."""
    reads, real_open = collections.Counter(), builtins.open
    under = None if under is None else {os.path.abspath(d) for d in under}

    def counting_open(path, mode="r", *a, **k):
        if ("r" in mode and isinstance(path, (str, os.PathLike))
                and (under is None or os.path.dirname(os.path.abspath(path)) in under)):
            reads[os.path.basename(os.fspath(path))] += 1
        return real_open(path, mode, *a, **k)

    monkeypatch.setattr(builtins, "open", counting_open)
    return reads


def _cli(script, args):
    """(argv, env) of `python run/<script> args` as the tests run it: TensorFlow quiet, no GPU."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return [sys.executable, os.path.join(ROOT, "run", script), *args], env


def run_cli(script, *args, timeout=240):
    """Runs `python run/<script> args`; returns the CompletedProcess. For a contract of the process
    itself (signals, a fresh interpreter, its start-up lines, importing no TensorFlow); a test of
    what the program does takes `run_main`, which costs no TensorFlow import."""
    argv, env = _cli(script, args)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)


_FLAG_STATE = ("__flags", "__hiddenflags", "__flags_by_module", "__flags_by_module_id",
               "__key_flags_by_module", "__flags_parsed", "__unparse_flags_called")
_OUTSIDE = []  # absl's flags before the outermost run_main: a nested one starts from them


def _flag_state(state=None):
    """A copy of absl's registry of flags (which are defined, by which module, parsed or not), or
    of `state`, such a copy."""
    from absl import flags
    state = flags.FLAGS.__dict__ if state is None else state
    return {k: (state[k] if isinstance(state[k], bool) else state[k].copy()
                if k in ("__flags", "__hiddenflags") else
                {m: list(v) for m, v in state[k].items()}) for k in _FLAG_STATE}


def _absl_only(state):
    """`state` (a `_flag_state` copy) with only the flags absl's own modules define: what an entry
    point finds in a fresh interpreter, whatever this process imported before it (a module of
    experiments/ defines flags of the same names at import, as its own entry point)."""
    state = _flag_state(state)
    by_module = {m: fl for m, fl in state["__flags_by_module"].items() if m.startswith("absl")}
    kept = {id(f) for fl in by_module.values() for f in fl}
    state["__flags"] = {n: f for n, f in state["__flags"].items() if id(f) in kept}
    state["__hiddenflags"] = {n for n in state["__hiddenflags"] if n in state["__flags"]}
    state["__flags_by_module"] = by_module
    for key in ("__flags_by_module_id", "__key_flags_by_module"):
        state[key] = {m: [f for f in fl if id(f) in kept] for m, fl in state[key].items()}
    return state


def proxied_env(proxy):
    """{variable: value} that sends every HTTP(S) request through `proxy` (a URL): the proxy
    variables set, no_proxy and all_proxy None (run_main removes a variable given as None)."""
    return {**{k: proxy for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")},
            **dict.fromkeys(("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"))}


@contextlib.contextmanager
def no_network_env():
    """`proxied_env` of a local port that refuses connections (a socket bound there but not
    listening), while the block runs: with it, no download can succeed, whatever this machine's
    network."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        yield proxied_env(f"http://127.0.0.1:{sock.getsockname()[1]}")
    finally:
        sock.close()


def run_offline(script, *args, **env):
    """`run_main(script, *args)` with every HTTP(S) request refused (`no_network_env`) and the
    variables `env` set."""
    with no_network_env() as proxies:
        return run_main(script, *args, env=dict(proxies, **env))


def run_main(script, *args, env=None, timeout=None):
    """Runs run/<script> with `args` in this process, as `python run/<script> args` would run it
    (its module executed as __main__, absl's flags parsed from argv, its exit status from
    SystemExit, an uncaught exception its traceback on stderr and status 1); returns a
    CompletedProcess of (argv, exit status, stdout, stderr), file descriptors 1 and 2 captured
    too. `env`: variables set for the call (a value None removes one). Afterwards absl's flags,
    the environment, sys.argv, sys.path and the signal handlers are as they were, so that the
    next call defines its entry point's flags again. `timeout` is run_cli's, unused (the test's
    own timeout holds)."""
    import contextlib
    import io
    import runpy
    import signal
    import tempfile
    import traceback

    from absl import flags
    path = os.path.join(ROOT, "run", script)
    saved_flags, outermost = _flag_state(), not _OUTSIDE
    if outermost:
        _OUTSIDE.append(_absl_only(saved_flags))
    # absl's own flags only, as a fresh interpreter has them (inside another entry point, a
    # study's run, too: none of the outer one's)
    flags.FLAGS.__dict__.update(_flag_state(_OUTSIDE[0]))
    saved_env, saved_argv, saved_path = dict(os.environ), sys.argv, list(sys.path)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    sys.stdout.flush(), sys.stderr.flush()
    saved_fds, saved_streams = (os.dup(1), os.dup(2)), (sys.stdout, sys.stderr)
    status = 0
    try:
        for k, v in (env or {}).items():  # None: the variable removed
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        sys.path.insert(0, os.path.dirname(path))  # run/, as `python run/x.py` has it
        os.dup2(out.fileno(), 1), os.dup2(err.fileno(), 2)
        sys.stdout, sys.stderr = (
            io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8",
                             line_buffering=True, write_through=True) for fd in (1, 2))
        sys.argv = [path, *args]
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except KeyboardInterrupt:
            traceback.print_exc()
            status = 130
        except Exception:  # noqa: BLE001  (as the interpreter: the traceback and status 1)
            traceback.print_exc()
            status = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush(), sys.stderr.flush()
        sys.stdout, sys.stderr = saved_streams
        for fd, saved in zip((1, 2), saved_fds):
            os.dup2(saved, fd)
            os.close(saved)
        flags.FLAGS.unparse_flags()
        flags.FLAGS.__dict__.update(saved_flags)
        if outermost:
            _OUTSIDE.clear()
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv, sys.path[:] = saved_argv, saved_path
        for s, handler in handlers.items():
            signal.signal(s, handler)
    said = []
    for f in (out, err):
        f.seek(0)
        said.append(f.read().decode("utf-8", "replace"))
        f.close()
    return subprocess.CompletedProcess([path, *args], status, *said)


_FLAG_CHECKS = r"""
import contextlib, io, json, os, runpy, sys
script, cases = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, os.path.dirname(script))
runpy.run_path(script)  # the entry point's flags defined; its main runs only as __main__
from absl import flags
from resnet_nobn import cli
said = []
for args in cases:
    flags.FLAGS.unparse_flags()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            cli.parse_flags([script, *args])
            cli.main_wrapper(lambda: cli.config_from_flags(flags.FLAGS))
        status = 0
    except SystemExit as e:
        status = e.code
    said.append([status, err.getvalue()])
print(json.dumps(said))
"""


def study_runs_in_process(monkeypatch):
    """The runs of a study (resnet_nobn.study.launcher: one subprocess of the training entry point
    each) run in this process by `run_main` from now until monkeypatch.undo(), their stdout and
    stderr written to the run's train.log as the subprocess writes them: for a test of what the
    study does with its runs' outcomes, not of the processes themselves (a study killed, a run's
    --run_timeout: their own processes)."""
    import types

    from resnet_nobn.study import launcher

    def run(cmd, stdout=None, timeout=None, **_):
        proc = run_main(os.path.basename(cmd[1]), *cmd[2:])
        stdout.write(proc.stdout + proc.stderr)
        stdout.flush()
        return subprocess.CompletedProcess(cmd, proc.returncode)
    monkeypatch.setattr(launcher, "subprocess", types.SimpleNamespace(
        run=run, DEVNULL=subprocess.DEVNULL, STDOUT=subprocess.STDOUT,
        TimeoutExpired=subprocess.TimeoutExpired))


def flag_errors(script, cases, env=None):
    """[(exit status, stderr)] of run/<script> given each argument list of `cases`, as far as its
    configuration: the flags parsed (cli.parse_flags) and made a TrainConfig
    (cli.config_from_flags, in cli.main_wrapper), as the entry point does before anything else;
    every case in one process, so that a table of bad flags costs one launch. `env`: the
    process's environment (default: run_cli's)."""
    import json
    argv, default = _cli(script, [])
    proc = subprocess.run([sys.executable, "-c", _FLAG_CHECKS, argv[1], json.dumps(cases)],
                          capture_output=True, text=True, timeout=120, env=env or default)
    assert proc.returncode == 0, proc.stderr
    return [tuple(case) for case in json.loads(proc.stdout)]


def start_cli(script, *args):
    """Starts `python run/<script> args` as `run_cli` runs it, its stdout and stderr piped (text);
    returns the Popen."""
    argv, env = _cli(script, args)
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def train_losses(model_dir):
    """{step: training loss} from a run's train/ summaries."""
    import tensorflow as tf
    out = {}
    for path in glob.glob(os.path.join(model_dir, "train", "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for v in event.summary.value:
                if v.tag == "loss":
                    out[event.step] = float(tf.make_ndarray(v.tensor))
    return out


def signal_when(proc, ready, sig, wait=300):
    """Reads `proc`'s stdout line by line until `ready(lines)` (or `wait` seconds), sends it `sig`
    and lets it finish: (everything it printed on stdout, its stderr). It never outlives the call."""
    lines, deadline = [], time.time() + wait
    try:
        for line in proc.stdout:
            lines.append(line)
            if ready(lines) or time.time() > deadline:
                break
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return "".join(lines) + (out or ""), err


def write_cifar10(out, data, label_names=None, shape=(32, 32, 3), num_classes=None):
    """Prepares `<out>/cifar10/3.0.2/` as tfds does, from `data` = {split: (images uint8 NHWC,
    labels)}; returns the tfds builder. `label_names` (default: CIFAR-10's), `shape` and
    `num_classes` (default: len(label_names)) are what dataset_info.json records: tests write
    damaged directories with other ones, and other datasets' images under the name."""
    import tensorflow_datasets as tfds
    from tensorflow_datasets.image_classification import cifar

    from resnet_nobn.data.datasets import CIFAR10_NAMES
    label_names = list(label_names or CIFAR10_NAMES)

    class Cifar10(cifar.Cifar10, skip_registration=True):  # tfds name: "cifar10"
        def _info(self):
            return tfds.core.DatasetInfo(
                builder=self, supervised_keys=("image", "label"),
                features=tfds.features.FeaturesDict({
                    "id": tfds.features.Text(), "image": tfds.features.Image(shape=tuple(shape)),
                    "label": tfds.features.ClassLabel(names=label_names) if num_classes is
                    None else tfds.features.ClassLabel(num_classes=num_classes)}))

        def _split_generators(self, dl_manager):
            return {name: self._generate(name, *arrays) for name, arrays in data.items()}

        def _generate(self, name, images, labels):
            for i, (image, label) in enumerate(zip(images, labels)):
                yield i, {"id": f"{name}_{i:05d}", "image": image, "label": int(label)}

    builder = Cifar10(data_dir=out)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(try_download_gcs=False))
    return builder


def write_idx(directory, train, test):
    """The four gzipped idx files of Fashion-MNIST (its names, MNIST's format) in `directory`, from
    (images uint8 [n, 28, 28], labels) of each split: what Debian's package installs."""
    import gzip

    import numpy as np
    from resnet_nobn.data.fashion_mnist import FILES
    os.makedirs(directory, exist_ok=True)
    for (images_file, labels_file), (images, labels) in zip(FILES.values(), (train, test)):
        for name, array in ((images_file, images), (labels_file, labels)):
            array = np.asarray(array, np.uint8)
            head = bytes([0, 0, 8, array.ndim]) + b"".join(
                int(d).to_bytes(4, "big") for d in array.shape)
            with gzip.open(os.path.join(directory, name), "wb") as f:
                f.write(head + array.tobytes())
    return directory


def poison_optimizer_slots(prefix):
    """Writes NaN into every float optimizer slot of the checkpoint `prefix` (ckpt-N), its weights
    left as they are: a damaged optimizer state, not a divergence."""
    import numpy as np
    import tensorflow as tf
    reader = tf.train.load_checkpoint(prefix)
    names = sorted(reader.get_variable_to_dtype_map())
    tensors = [reader.get_tensor(n) for n in names]
    for i, name in enumerate(names):
        if name.startswith("optimizer/_variables/") and tensors[i].dtype.kind == "f":
            tensors[i] = np.full_like(tensors[i], np.nan)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=tensors)


def bfloat16_convolutions():
    """Whether this CPU's TensorFlow (oneDNN) runs a bfloat16 convolution: AVX-512 CPUs do; an
    AVX2-only one (or oneDNN capped there, ONEDNN_MAX_CPU_ISA=AVX2) refuses it, and a run there
    is told so in one line (resnet_nobn/training/failures.py)."""
    import tensorflow as tf
    try:
        tf.nn.conv2d(tf.zeros((1, 4, 4, 1), tf.bfloat16), tf.zeros((3, 3, 1, 1), tf.bfloat16), 1,
                     "SAME")
        return True
    except tf.errors.OpError:
        return False


# A mark for a test that trains in bfloat16: skipped where this CPU has no bfloat16 convolution
# (tests/conftest.py probes when such a test is set up: never at import, where a convolution
# would start TensorFlow before a worker process configures its cluster).
NEEDS_BFLOAT16 = pytest.mark.bfloat16
