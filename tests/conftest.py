"""Shared test setup: quiet TensorFlow, two logical CPU devices for the MirroredStrategy tests, and
the tiny runs trained once a session (`finished_run`, `cli_run`)."""
import fcntl
import os
import shutil
import sys

# The entry points' own default (run/_start.py): one run in process (tests.helpers.run_main) logs
# what it logs in its own process.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import pytest  # noqa: E402


def _xdist_controller(config):
    """Whether this process is the controller of `-n N`: it hands the tests to its workers
    (xdist's own test of its distribution mode, and not a worker, which has `workerinput`)."""
    return (config.getoption("dist", "no") != "no" and bool(config.getoption("tx", None))
            and not config.getoption("collectonly") and not hasattr(config, "workerinput"))


def pytest_configure(config):
    """Two logical CPU devices, before TensorFlow initialises its devices (one_device runs use
    /cpu:0 only), in the process that runs tests: not in the controller of `-n 2`, which runs
    none and so starts without loading TensorFlow."""
    if _xdist_controller(config):
        return
    import tensorflow as tf
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])



def _made_once(tmp_path_factory, name, make):
    """`<shared>/<name>`, made by `make(directory)` once in the whole session: the xdist workers
    share it (the first to ask makes it under a file lock while the others wait, then read it).
    Tests read it, or change a copy of it (tests.helpers.copy_of)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the workers' base directories are in the session's
    where, done = shared / name, shared / f"{name}.done"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(where, ignore_errors=True)
            where.mkdir()
            make(where)
            done.touch()
    return where


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory):
    """A tiny run trained to its end in process (tiny_config: 4 steps, checkpoints and
    evaluations at steps 0, 2 and 4), once a session: its directory. A test reads it, or copies
    it (tests.helpers.copy_of) to change it."""
    def make(where):
        from resnet_nobn.training import trainer
        from tests.helpers import tiny_config
        trainer.train(tiny_config(where / "run", train_steps=4, checkpoint_every=2, eval_every=2))
    return _made_once(tmp_path_factory, "finished_run", make) / "run"


@pytest.fixture(scope="session")
def cli_run(tmp_path_factory):
    """A tiny run of run/cifar_train.py to its end (tests.helpers.CLI_RUN, 4 steps: progress at
    2 and 4, checkpoints at 0, 2 and 4), once a session: (its directory, what it printed on
    stdout, on stderr). A test reads it, or copies it (tests.helpers.copy_of) to change it. It
    runs in a shell whose KERAS_BACKEND names another backend (torch, not installed here): every
    entry point pins TensorFlow's and says so in one line."""
    from tests.helpers import CLI_RUN, run_cli

    def make(where):
        with pytest.MonkeyPatch.context() as env:
            env.setenv("KERAS_BACKEND", "torch")
            proc = run_cli("cifar_train.py", *CLI_RUN, "--train_steps=4",
                           f"--model_dir={where / 'run'}")
        assert proc.returncode == 0, proc.stderr
        (where / "stdout.txt").write_text(proc.stdout)
        (where / "stderr.txt").write_text(proc.stderr)
    where = _made_once(tmp_path_factory, "cli_run", make)
    return where / "run", (where / "stdout.txt").read_text(), (where / "stderr.txt").read_text()


@pytest.fixture(scope="session")
def diverged_run(tmp_path_factory):
    """A tiny run that diverged in its first loop, in process (tests.helpers.DIVERGED_RUN: 4 steps,
    checkpoints and evaluations every 2, learning rate 1e9; its ckpt-0 kept), once a session: (its
    directory, the TrainingDiverged message: the error and its `retry with:` line). A test
    copies it (tests.helpers.copy_of) to go on from it."""
    def make(where):
        from resnet_nobn.errors import TrainingDiverged
        from resnet_nobn.training import trainer
        from tests.helpers import DIVERGED_RUN, tiny_config
        try:
            trainer.train(tiny_config(where / "run", **DIVERGED_RUN))
        except TrainingDiverged as e:
            (where / "message.txt").write_text(str(e))
        assert (where / "message.txt").exists(), "the run did not diverge"
    where = _made_once(tmp_path_factory, "diverged_run", make)
    return where / "run", (where / "message.txt").read_text()


@pytest.fixture(scope="session")
def one_device_runs(tmp_path_factory):
    """The one-device runs the replica and multi-worker tests compare with
    (tests/training/test_replicas.py REFERENCES: the BN twin, in float16 and bfloat16 too, and the
    BN-free net under XLA), trained once a session: {name: test_replicas.Reference}. A test reads
    them, or copies a run's directory (tests.helpers.copy_of) to change it."""
    import test_replicas
    return test_replicas.read_references(
        _made_once(tmp_path_factory, "one_device_runs", test_replicas.train_references))


def pytest_runtest_setup(item):
    """A test marked `bfloat16` (tests.helpers.NEEDS_BFLOAT16) is skipped where this CPU's oneDNN
    has no bfloat16 convolution (an AVX2-only CPU)."""
    if item.get_closest_marker("bfloat16"):
        from tests.helpers import bfloat16_convolutions
        if not bfloat16_convolutions():
            pytest.skip("this CPU's oneDNN has no bfloat16 convolution (AVX2)")


@pytest.fixture(scope="session")
def fashion_mnist_prepared(tmp_path_factory):
    """run/prepare_data.py --dataset=fashion_mnist, run once a session in process with every HTTP(S)
    request refused (tests.helpers.run_offline): it prepares the whole Fashion-MNIST from
    Debian's idx files into a tfds data directory. (that directory, what the command printed on
    stdout). A test reads it as a user's tfds directory holds it (docs/library.md's blocks);
    tests of the preparation's other cases prepare their own."""
    from tests.helpers import run_offline

    def make(where):
        proc = run_offline("prepare_data.py", "--dataset=fashion_mnist",
                           f"--data_dir={where / 'tfds'}")
        assert proc.returncode == 0, proc.stderr
        (where / "stdout.txt").write_text(proc.stdout)
    where = _made_once(tmp_path_factory, "fashion_mnist_prepared", make)
    return str(where / "tfds"), (where / "stdout.txt").read_text()


@pytest.fixture(scope="session")
def fashion_mnist_slice(tmp_path_factory):
    """A tfds data directory of a slice of the real Fashion-MNIST (the first 512 training and 256
    test photographs of Debian's idx files), prepared once a session as run/prepare_data.py
    prepares the whole: for tests that train or read a few batches of real images."""
    from resnet_nobn.data import fashion_mnist
    if not os.path.isdir(fashion_mnist.SOURCE):
        pytest.skip(f"{fashion_mnist.SOURCE} is missing: apt-get install dataset-fashion-mnist")

    def make(where):
        from tests.helpers import write_idx
        train, test = (fashion_mnist.read_split(fashion_mnist.SOURCE, s) for s in ("train", "test"))
        idx = write_idx(str(where / "idx"), [a[:512] for a in train], [a[:256] for a in test])
        fashion_mnist.builder(str(where / "tfds"), idx).download_and_prepare()
    return str(_made_once(tmp_path_factory, "fashion_mnist_slice", make) / "tfds")
