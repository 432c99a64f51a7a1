"""Fault campaign 3, sections 5 and 6: workers started with other settings, a peer that dies,
TF_CONFIG that is malformed; the theory experiment's command line, and the fix printed for damaged
data followed as printed."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from tests.faults.helpers import (
    ENV, MW, ROOT, RUN, TINY, ckpts, one_line, own_lines, read, registrar, run, said, workers)

case = registrar(3)




def _disagree(s, name, flag, word):
    d = os.path.join(s, name)
    chief, other = workers([["--train_steps=4", f"--model_dir={d}"],
                             ["--train_steps=4", f"--model_dir={d}", flag]])
    ok = one_line(chief, word) and one_line(other, word) and not os.path.exists(
        os.path.join(d, "results.json"))
    return ok, f"chief {said(chief)} | worker {said(other)}"


@case("5.1", "a worker started with another --seed", "both stop in one line naming seed; nothing recorded")
def worker_seed(s):
    return _disagree(s, "mw51", "--seed=3", "--seed")


@case("5.2", "a worker started with other --widths", "both stop in one line naming widths")
def worker_widths(s):
    return _disagree(s, "mw52", "--widths=8,16,16,32", "--widths")


@case("5.3", "a worker started with other --train_steps", "both stop in one line naming train_steps")
def worker_steps(s):
    return _disagree(s, "mw53", "--train_steps=8", "--train_steps")


@case("5.4", "a worker with another --data_dir (a path of its own machine)", "trains as one run")
def worker_data_dir(s):
    d = os.path.join(s, "mw54")
    chief, other = workers([["--train_steps=4", f"--model_dir={d}"],
                             ["--train_steps=4", f"--model_dir={d}", f"--data_dir={s}"]])
    return chief.returncode == 0 and other.returncode == 0, f"chief {said(chief)} | worker {said(other)}"


@case("5.5", "a peer SIGKILLed mid-run", "the survivor: one line, no TensorFlow traceback")
def peer_killed(s):
    from resnet_nobn.training import local_cluster
    d = os.path.join(s, "mw55")
    ports = local_cluster.free_ports(2)
    procs = [subprocess.Popen([sys.executable, os.path.join(RUN, "imagenet_train.py"), *MW,
                               "--train_steps=400", "--checkpoint_every=2", f"--model_dir={d}"],
                              cwd=ROOT, env=dict(ENV, TF_CONFIG=local_cluster.tf_config(ports, i)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    deadline = time.time() + 400
    while len(ckpts(d)) < 2 and time.time() < deadline and procs[0].poll() is None:
        time.sleep(0.5)
    procs[1].kill()
    o, e = procs[0].communicate(timeout=300)
    procs[1].communicate()
    p = subprocess.CompletedProcess(procs[0].args, procs[0].returncode, o, e)
    return one_line(p, "another worker failed"), said(p)


def _tf_config(tf_config, s, name):
    d = os.path.join(s, name)
    t0 = time.time()
    p = run([os.path.join(RUN, "imagenet_train.py"), *MW, "--train_steps=2", f"--model_dir={d}"],
            env=dict(ENV, TF_CONFIG=tf_config), timeout=300)
    quick = time.time() - t0 < 60
    return one_line(p, "TF_CONFIG") and quick and not os.path.exists(d), said(p) + f" ({time.time() - t0:.0f} s)"


def _cfg(workers, index=0, task_type="worker"):
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": task_type, "index": index}})


for _sec, _name, _config in (
        ("5.6", "TF_CONFIG index \"0\" (a string)", _cfg(["127.0.0.1:23456", "127.0.0.1:23457"], "0")),
        ("5.7", "TF_CONFIG address grpc://host:port", _cfg(["grpc://127.0.0.1:23456"])),
        ("5.8", "TF_CONFIG port in fullwidth digits", _cfg(["127.0.0.1:２３４５６"])),
        ("5.9", "TF_CONFIG one address for two tasks", _cfg(["127.0.0.1:23456", "127.0.0.1:23456"])),
        ("5.10", "TF_CONFIG host with a space", _cfg(["my host:23456"]))):
    case(_sec, _name, "one line before TensorFlow starts; nothing written")(
        lambda s, c=_config, n=_sec: _tf_config(c, s, f"tf{n}"))


def _experiment(*args):
    return run(["-m", "theory.section2.experiment", *args], timeout=300)


for _sec, _name, _args in (
        ("6.1", "theory experiment --steps abc", ["--out=/tmp/x61", "--steps", "abc"]),
        ("6.2", "theory experiment --dim 100000", ["--out=/tmp/x62", "--dim", "100000"]),
        ("6.3", "theory experiment --bogus", ["--out=/tmp/x65", "--bogus"]),
        ("6.4", "theory experiment --out under a file", ["--out=/etc/hostname/x", "--quick"])):
    case(_sec, _name, "one line, exit 2, before any work")(
        lambda s, a=_args: (lambda p: (one_line(p) and p.returncode == 2 and p.stdout == "",
                                       said(p)))(_experiment(*a)))


@case("6.5", "theory experiment and Ctrl-C", "one line, exit 130")
def theory_ctrl_c(s):
    proc = subprocess.Popen([sys.executable, "-m", "theory.section2.experiment", f"--out={s}/x67",
                             "--depths", "1", "2", "4", "8", "--steps", "100000"], cwd=ROOT,
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.lstrip().startswith("depth"):
            break
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    p = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return proc.returncode == 130 and len(own_lines(err)) == 1 and "Traceback" not in err, said(p)


def _labels_out_of_range(s, name, splits):
    import numpy as np
    from tests.helpers import write_cifar10  # a tfds cifar10 directory of given arrays
    from resnet_nobn.console import quiet_stderr
    rng = np.random.default_rng(0)

    def arrays(n, classes):
        return rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8), rng.integers(0, classes, n)
    data = os.path.join(s, name)
    import contextlib
    import io
    with quiet_stderr(), contextlib.redirect_stdout(io.StringIO()):
        write_cifar10(data, {split: arrays(16 if split == "train" else 8,
                                           100 if split in splits else 10)
                             for split in ("train", "test")}, num_classes=100)
    features = os.path.join(data, "cifar10", "3.0.2", "features.json")
    text = read(features)
    with open(features, "w") as f:
        f.write(text.replace('"numClasses": "100"', '"numClasses": "10"'))
    return data


def _fix_works(s, name, splits):
    data = _labels_out_of_range(s, name, splits)
    flags = [f for f in TINY if f != "--use_synthetic_data"]
    p = run([os.path.join(RUN, "cifar_train.py"), *flags, "--train_steps=2", f"--data_dir={data}",
             f"--model_dir={s}/{name}_run"])
    m = re.search(r"delete (\S+) and prepare the data again: (python run/prepare_data\.py \S+ \S+)",
                  p.stderr)
    if not (one_line(p) and m):
        return False, said(p)
    shutil.rmtree(m.group(1))  # as printed
    fix = run(m.group(2).split()[1:], timeout=300)
    return "already prepared" not in fix.stdout + fix.stderr, said(p) + " | fix: " + said(fix)


@case("6.6", "labels out of range in the test split: the printed fix", "one line; the fix does not answer 'already prepared'")
def test_split_fix(s):
    return _fix_works(s, "data68", ("test",))


