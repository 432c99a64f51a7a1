"""Fault campaign 2, section 2: damaged data and hand-edited files (tfds directories with a
damaged shard or the wrong dataset in them, a config.json or results.json edited by hand, a study
root holding another program's files, a figure format nobody knows)."""
import json
import os
import shutil

from tests.faults.helpers import (
    RUN, TINY, copy_base, err_lines, one_line, read, registrar, run, said, shared, stranger_root,
    tf_quiet, train)

case = registrar(2)


_DATA = {}


def data_dirs(s):
    """A good 24-image cifar10 tfds directory and damaged copies, made once."""
    if _DATA:
        return _DATA
    import numpy as np
    from tests.helpers import write_cifar10 as write_arrays
    rng = np.random.default_rng(0)

    def arrays(n, shape=(32, 32, 3), classes=10):
        return rng.integers(0, 256, (n, *shape), dtype=np.uint8), rng.integers(0, classes, n)
    root = os.path.join(shared(s), "_data")
    import io
    import contextlib
    with tf_quiet(), contextlib.redirect_stdout(io.StringIO()):  # TensorFlow's and tfds' lines
        write_arrays(os.path.join(root, "good"), {"train": arrays(16), "test": arrays(8)})
        write_arrays(os.path.join(root, "grey"), {"train": arrays(16, (28, 28, 1)),
                                                  "test": arrays(8, (28, 28, 1))},
                     shape=(28, 28, 1))
        write_arrays(os.path.join(root, "hundred"), {"train": arrays(16, classes=100),
                                                     "test": arrays(8, classes=100)},
                     num_classes=100)
    shard = os.path.join("cifar10", "3.0.2", "cifar10-train.tfrecord-00000-of-00001")
    for name in ("truncated", "deleted", "corrupted"):
        shutil.copytree(os.path.join(root, "good"), os.path.join(root, name))
    os.truncate(os.path.join(root, "truncated", shard), 3000)
    os.remove(os.path.join(root, "deleted", shard))
    with open(os.path.join(root, "corrupted", shard), "r+b") as f:
        f.seek(20)
        f.write(b"\xff" * 40)
    shutil.copytree(os.path.join(root, "hundred"), os.path.join(root, "labels"))
    features = os.path.join(root, "labels", "cifar10", "3.0.2", "features.json")
    text = read(features)
    with open(features, "w") as f:
        f.write(text.replace('"numClasses": "100"', '"numClasses": "10"'))
    _DATA.update({n: os.path.join(root, n) for n in os.listdir(root)})
    return _DATA


def _damaged(s, name):
    data = data_dirs(s)[name]
    d = os.path.join(s, f"data_{name}")
    flags = [f for f in TINY if f != "--use_synthetic_data"]
    p = train(d, *flags, "--train_steps=2", f"--data_dir={data}", tiny=False)
    ok = one_line(p) and "run/prepare_data.py" in p.stderr and not os.path.exists(d)
    return ok, said(p) + ("" if not os.path.exists(d) else " [model_dir left behind]")


for _name, _what in (("truncated", "a truncated shard"), ("deleted", "a deleted shard"),
                     ("corrupted", "a corrupted shard"), ("grey", "28x28x1 images"),
                     ("hundred", "100 classes recorded"), ("labels", "labels out of range")):
    case("2.1", f"tfds dir with {_what}", "one line naming the file and the fix; no model_dir")(
        lambda s, n=_name: _damaged(s, n))


@case("2.2", "config.json whose model is not an object", "one line; nothing written")
def config_model(s):
    d = copy_base(s, os.path.join(s, "cfgmodel"))
    cfg = json.loads(read(os.path.join(d, "config.json")))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(dict(cfg, model=5), f)
    before = sorted(os.listdir(d))
    p = train(d, "--train_steps=6")
    return one_line(p) and sorted(os.listdir(d)) == before, said(p)


@case("2.2", "study root with an unrelated config.json: ablate", "ignored; the study runs")
def ablate_unrelated(s):
    root = stranger_root(s, "unrelated_a")
    p = run([os.path.join(RUN, "ablate.py"), f"--root={root}", "--print_commands",
             "--train_steps=2", *TINY])
    return p.returncode == 0 and "Traceback" not in p.stderr, said(p)


@case("2.2", "study root with an unrelated config.json: report", "one warning line; the table")
def report_unrelated(s):
    root = stranger_root(s, "unrelated_r")
    p = run([os.path.join(RUN, "report.py"), f"--root={root}"])
    ok = p.returncode == 0 and len(err_lines(p)) == 1 and "notes" in p.stderr
    return ok, said(p)


@case("2.2", "results.json of another schema / a string for a number", "one warning line each")
def report_schema(s):
    root = stranger_root(s, "schema")
    shutil.rmtree(os.path.join(root, "notes"))
    os.makedirs(os.path.join(root, "other"))
    with open(os.path.join(root, "other", "results.json"), "w") as f:
        json.dump({"accuracy": 0.9}, f)
    path = os.path.join(root, "cifar10", "run", "seed-0", "results.json")
    results = json.loads(read(path))
    results["top1_error"] = "0.5"
    with open(path, "w") as f:
        json.dump(results, f)
    p = run([os.path.join(RUN, "report.py"), f"--root={root}"])
    ok = p.returncode == 0 and len(err_lines(p)) == 2 and "Traceback" not in p.stderr
    return ok, said(p)


@case("2.2", "report --out_png=fig.xyz", "one line; nothing written")
def report_png(s):
    root = stranger_root(s, "png")
    p = run([os.path.join(RUN, "report.py"), f"--root={root}", f"--out_png={s}/fig.xyz"])
    return one_line(p) and not os.path.exists(os.path.join(root, "report.md")), said(p)
