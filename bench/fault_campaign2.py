"""The faults of issue 20, tried black-box as a user would: one row per case, expected vs got.

Every case runs the project's commands (run/*.py, `python -m theory.check`) as subprocesses on
tiny configurations (synthetic data or a 24-image tfds directory, widths 8, one block per stage)
and checks what the README promises: one clear line and a non-zero exit for bad input, nothing
half-written or recorded as what it is not, processes that end with their parent, the project's
lines only. It prints one Markdown row per case and the totals; exit status 0 iff every case
behaved as expected.

    python bench/fault_campaign2.py --root=/tmp/faults2            # all cases, a few minutes
    python bench/fault_campaign2.py --root=/tmp/faults2 --only=2.  # the cases of section 2

Sections as in issue 20: 1 work lost or reported wrong (resume), 2 damaged data and hand-edited
files, 3 processes, 4 quiet. The first campaign (bench/fault_campaign.py) SIGKILLs a run again
and again; this one covers the other classes.
"""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
RUN = os.path.join(ROOT, "run")
TINY = ["--use_synthetic_data", "--widths=8,8,8", "--stem_width=8", "--blocks_per_stage=1",
        "--batch_size=8", "--eval_steps=1", "--learning_rate=0.01", "--log_every=2",
        "--eval_every=1000", "--checkpoint_every=2"]
ENV = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
TF_LINES = re.compile(r"^(I0000|W0000|E0000|WARNING: All log messages|.*cuda|.*oneDNN)", re.M)
CASES = []


def case(section, name, expected):
    """Registers a case: a function of a scratch directory returning (ok, what happened)."""
    def register(fn):
        CASES.append((section, name, expected, fn))
        return fn
    return register


# --------------------------------------------------------------------------------------------
# helpers


def run(args, timeout=300, env=None, **kw):
    """`python args...` from the repository root; the CompletedProcess (stdout, stderr text)."""
    return subprocess.run([sys.executable] + list(args), cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env or ENV, **kw)


def train(model_dir, *flags, tiny=True, **kw):
    return run([os.path.join(RUN, "cifar_train.py"), *(TINY if tiny else []), *flags,
                f"--model_dir={model_dir}"], **kw)


def err_lines(proc):
    return [l for l in proc.stderr.strip().splitlines() if l.strip()]


def one_line(proc):
    """A non-zero exit with exactly one line on stderr and no traceback."""
    lines = err_lines(proc)
    return proc.returncode != 0 and len(lines) == 1 and "Traceback" not in proc.stderr


def said(proc):
    """What a process ended with: exit status and its last stderr (or stdout) line, shortened."""
    lines = err_lines(proc) or proc.stdout.strip().splitlines() or [""]
    last = lines[-1].strip()
    tb = " (traceback)" if "Traceback" in proc.stderr else ""
    return f"exit {proc.returncode}{tb}: {last[:110]}" + ("…" if len(last) > 110 else "")


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


_BASE = {}


def base_run(scratch):
    """A finished 4-step run (copied per case, so each case starts from the same state)."""
    if "dir" not in _BASE:
        d = os.path.join(scratch, "_base")
        proc = train(d, "--train_steps=4", "--eval_every=4")
        if proc.returncode != 0:
            sys.exit(f"the base run failed:\n{proc.stderr[-2000:]}")
        _BASE["dir"] = d
    return _BASE["dir"]


def copy_base(scratch, name):
    d = os.path.join(scratch, name)
    shutil.copytree(base_run(scratch), d)
    return d


def tf_quiet():
    """TensorFlow's start-up lines of this process (it edits checkpoints, writes tfds dirs) hidden."""
    from resnet_nobn.console import quiet_stderr
    return quiet_stderr()


# --------------------------------------------------------------------------------------------
# 1. Work lost or reported wrong (resume)


@case("1.1", "--model_dir with [ ] * ?", "resumes, or refused in one line before training")
def model_dir_glob(s):
    d = os.path.join(s, "run[1]*?")
    first = train(d, "--train_steps=2")
    if one_line(first) and not os.path.exists(d):
        return True, said(first)
    again = train(d, "--train_steps=4")
    return again.returncode == 0 and "resumed from" in again.stdout, said(again)


def _changed(s, name, flag, field):
    d = copy_base(s, name)
    before = read(os.path.join(d, "config.json"))
    p = train(d, "--train_steps=6", flag)
    ok = one_line(p) and field in p.stderr and read(os.path.join(d, "config.json")) == before
    return ok, said(p)


@case("1.2", "resume with another --seed", "one line naming seed; config.json unchanged")
def changed_seed(s):
    return _changed(s, "seed", "--seed=1", "seed")


@case("1.2", "resume with another --batch_size", "one line naming batch_size; config.json unchanged")
def changed_batch(s):
    return _changed(s, "batch", "--batch_size=16", "batch_size")


@case("1.2", "resume with other --lr_boundaries", "one line naming lr_boundaries; config.json unchanged")
def changed_boundaries(s):
    return _changed(s, "boundaries", "--lr_boundaries=3", "lr_boundaries")


@case("1.3", "retry after a first-loop divergence", "the printed `retry with:` flags resume the run")
def retry_after_divergence(s):
    d = os.path.join(s, "diverge")
    flags = ["--learning_rate=1e6", "--train_steps=8", "--log_every=4", "--steps_per_loop=4",
             "--checkpoint_every=1000"]
    first = train(d, *flags)
    m = re.search(r"retry with: (.*)", first.stderr)
    if not m:
        return False, "no `retry with:` line: " + said(first)
    again = train(d, *flags, *m.group(1).split())
    ok = "corrupt" not in again.stderr and (again.returncode == 0 or "retry with" in again.stderr)
    return ok, said(again)


def _poison(model_dir):
    """Writes NaN into one kernel of the newest checkpoint (same keys, valid checksums); returns
    its prefix."""
    with tf_quiet():
        import tensorflow as tf
    prefix = tf.train.latest_checkpoint(os.path.join(model_dir, "ckpt"))
    reader = tf.train.load_checkpoint(prefix)
    names = sorted(reader.get_variable_to_dtype_map())
    tensors = [reader.get_tensor(n) for n in names]
    kernel = next(i for i, n in enumerate(names)  # a trained weight (not an optimizer slot)
                  if "_trainable_variables" in n and tensors[i].dtype.kind == "f"
                  and tensors[i].size > 1)
    tensors[kernel] = tensors[kernel].copy()
    tensors[kernel].flat[0] = float("nan")
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=tensors)
    return prefix


@case("1.4", "NaN weights restored (--eval_only)",
      "the NaN checkpoint skipped and named; no non-finite number recorded")
def nan_weights(s):
    d = copy_base(s, "nan")
    newest = _poison(d)
    p = train(d, "--train_steps=4", "--eval_only")

    def finite_only(constant):
        raise ValueError(f"{constant} in results.json")
    try:
        json.loads(read(os.path.join(d, "results.json")) or "{}", parse_constant=finite_only)
        strict = True
    except ValueError:
        strict = False
    skipped = f"skipped {os.path.basename(newest)}" in p.stdout + p.stderr
    return skipped and strict and "Traceback" not in p.stderr, said(p)


@case("1.5", "--eval_only --seed=7 --learning_rate=0.3", "results.json keeps the run's seed and rate")
def eval_only_record(s):
    d = copy_base(s, "evalonly")
    p = train(d, "--train_steps=4", "--eval_only", "--seed=7", "--learning_rate=0.3")
    cfg = (json.loads(read(os.path.join(d, "results.json")) or "{}")).get("config", {})
    got = f"exit {p.returncode}; recorded seed {cfg.get('seed')}, lr {cfg.get('learning_rate')}"
    return cfg.get("seed") == 0 and cfg.get("learning_rate") == 0.01, got


@case("1.6", "--train_steps below the current step", "said; config.json unchanged")
def fewer_steps(s):
    d = copy_base(s, "fewer")
    before = read(os.path.join(d, "config.json"))
    p = train(d, "--train_steps=2")
    text = p.stdout + p.stderr
    ok = "train_steps" in text and read(os.path.join(d, "config.json")) == before
    return ok, said(p)


@case("1.7", "resume with another --mixed_precision", "one line naming mixed_precision")
def changed_precision(s):
    d = copy_base(s, "precision")
    p = train(d, "--train_steps=6", "--mixed_precision=bfloat16")
    return one_line(p) and "mixed_precision" in p.stderr and "corrupt" not in p.stderr, said(p)


@case("1.8", "--model_dir omitted", "the default directory is named")
def no_model_dir(s):
    default = "/tmp/resnet_nobn"
    if os.path.exists(default):
        return False, f"not tried: {default} exists (remove it to run this case)"
    try:
        p = run([os.path.join(RUN, "cifar_train.py"), *TINY, "--train_steps=2"])
        return default in p.stdout + p.stderr, said(p)
    finally:
        shutil.rmtree(default, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# 2. Damaged data and hand-edited files


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
    root = os.path.join(s, "_data")
    import io
    import contextlib
    with tf_quiet(), contextlib.redirect_stdout(io.StringIO()):  # TensorFlow's and tfds' lines
        write_arrays(os.path.join(root, "good"), {"train": arrays(16), "test": arrays(8)})
        write_arrays(os.path.join(root, "grey"), {"train": arrays(16, (28, 28, 1)),
                                                  "test": arrays(8, (28, 28, 1))}, shape=(28, 28, 1))
        write_arrays(os.path.join(root, "hundred"), {"train": arrays(16, classes=100),
                                                     "test": arrays(8, classes=100)}, num_classes=100)
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
    d = copy_base(s, "cfgmodel")
    cfg = json.loads(read(os.path.join(d, "config.json")))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(dict(cfg, model=5), f)
    before = sorted(os.listdir(d))
    p = train(d, "--train_steps=6")
    return one_line(p) and sorted(os.listdir(d)) == before, said(p)


def _study_root(s, name):
    root = os.path.join(s, name)
    shutil.copytree(base_run(s), os.path.join(root, "cifar10", "run", "seed-0"))
    os.makedirs(os.path.join(root, "notes"))
    with open(os.path.join(root, "notes", "config.json"), "w") as f:
        json.dump({"name": "another program"}, f)
    with open(os.path.join(root, "notes", "study_status.json"), "w") as f:
        json.dump({}, f)
    return root


@case("2.2", "study root with an unrelated config.json: ablate", "ignored; the study runs")
def ablate_unrelated(s):
    root = _study_root(s, "unrelated_a")
    p = run([os.path.join(RUN, "ablate.py"), f"--root={root}", "--print_commands",
             "--train_steps=2", *TINY])
    return p.returncode == 0 and "Traceback" not in p.stderr, said(p)


@case("2.2", "study root with an unrelated config.json: report", "one warning line; the table")
def report_unrelated(s):
    root = _study_root(s, "unrelated_r")
    p = run([os.path.join(RUN, "report.py"), f"--root={root}"])
    ok = p.returncode == 0 and len(err_lines(p)) == 1 and "notes" in p.stderr
    return ok, said(p)


@case("2.2", "results.json of another schema / a string for a number", "one warning line each")
def report_schema(s):
    root = _study_root(s, "schema")
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
    root = _study_root(s, "png")
    p = run([os.path.join(RUN, "report.py"), f"--root={root}", f"--out_png={s}/fig.xyz"])
    return one_line(p) and not os.path.exists(os.path.join(root, "report.md")), said(p)


# --------------------------------------------------------------------------------------------
# 3. Processes


def _held(model_dir):
    """Who holds the run's `.lock` flock (the trainer's: 'pid N on host H ...'), else None; read
    here, not through the project's code, so the case is black-box."""
    import fcntl
    try:
        fd = os.open(os.path.join(model_dir, ".lock"), os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    except OSError:
        return os.pread(fd, 200, 0).decode(errors="replace").strip() or "pid ?"
    finally:
        os.close(fd)


_STUDY = {}


def _busy_study(s):
    """Starts a long one-run study; returns (Popen, run dir) once its child holds the run."""
    root = os.path.join(s, "busy")
    args = [os.path.join(RUN, "ablate.py"), f"--root={root}", "--train_steps=100000",
            *[f for f in TINY if not f.startswith("--checkpoint_every")], "--checkpoint_every=50"]
    proc = subprocess.Popen([sys.executable] + args, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    run_dir = os.path.join(root, "cifar10", "norm-none_init-identity_head-random_blocks-1", "seed-0")
    deadline = time.time() + 240
    while not _held(run_dir) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    _STUDY.update(proc=proc, dir=run_dir, args=args)
    return proc, run_dir


@case("3.1", "a second ablate on the root of a running one", "that run 'running', never 'failed'")
def second_ablate(s):
    proc, run_dir = _busy_study(s)
    if not _held(run_dir):
        return False, "the first study's run never started"
    p = run(_STUDY["args"], timeout=240)
    status = (json.loads(read(os.path.join(run_dir, "study_status.json")) or "{}")).get("status")
    ok = "running in another process" in p.stdout + p.stderr and status != "failed"
    return ok, said(p) + f"; status file: {status}"


@case("3.1", "ablate killed with SIGKILL", "its training child ends with it")
def ablate_sigkill(s):
    proc, run_dir = (_STUDY["proc"], _STUDY["dir"]) if _STUDY else _busy_study(s)
    holder = _held(run_dir)
    if not holder:
        proc.kill()
        return False, "the study's run never started"
    child = int(holder.split()[1])
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 15
    while _held(run_dir) and time.time() < deadline:
        time.sleep(0.2)
    alive = bool(_held(run_dir))
    if alive:
        os.kill(child, signal.SIGKILL)
    return not alive, "child still running after 15 s (killed now)" if alive else "child ended"


@case("3.2", "launch_local --num_workers=100000", "one line at once")
def launch_many(s):
    try:
        p = run([os.path.join(RUN, "launch_local.py"), "--num_workers=100000", "--",
                 "run/imagenet_train.py", "--use_synthetic_data"], timeout=30)
    except subprocess.TimeoutExpired:
        return False, "no output after 30 s (hangs)"
    return one_line(p), said(p)


@case("3.2", "SIGTERM to launch_local", "forwarded: the workers save a checkpoint and stop")
def launch_sigterm(s):
    d = os.path.join(s, "mw")
    cmd = [sys.executable, os.path.join(RUN, "launch_local.py"), "--num_workers=2",
           "--threads_per_worker=1", "--", "run/imagenet_train.py", "--use_synthetic_data",
           "--widths=8,8,8,8", "--stem_width=8", "--blocks_per_stage=1", "--batch_size=4",
           "--log_every=1", "--eval_every=100000", "--checkpoint_every=100000",
           "--train_steps=100000", f"--model_dir={d}"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines, deadline = [], time.time() + 240
    try:
        for line in proc.stdout:
            lines.append(line)
            if sum(l.startswith("[worker 0] step ") for l in lines) >= 2 or time.time() > deadline:
                break
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = "".join(lines) + out
    saved = [p for p in glob.glob(os.path.join(d, "ckpt", "ckpt-*.index")) if "ckpt-0." not in p]
    ok = "stopped by SIGTERM at step" in text and bool(saved)
    return ok, f"exit {proc.returncode}; " + ("checkpoint saved" if saved else "no checkpoint")


@case("3.4", "ulimit -v 2000000", "one line, not a C stack dump")
def small_ulimit(s):
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2_000_000 * 1024, resource.RLIM_INFINITY))
    p = train(os.path.join(s, "ulimit"), "--train_steps=2", preexec_fn=limit)
    return one_line(p) and "Fatal Python error" not in p.stderr, said(p)


@case("3.5", "ablate --vary_norm=batch --vary_init=fixup", "refused in one line saying why")
def empty_grid(s):
    p = run([os.path.join(RUN, "ablate.py"), f"--root={s}/empty", "--vary_norm=batch",
             "--vary_init=fixup", "--train_steps=2", *TINY])
    return one_line(p), said(p)


_THEORY = {}


def _theory_json_full(s):
    if "p" not in _THEORY:
        env = {k: v for k, v in ENV.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
        _THEORY["p"] = run(["-m", "theory.check", "--quick", "--json=/dev/full"], env=env,
                           timeout=600)
    return _THEORY["p"]


@case("3.3", "theory.check --json to a full disk", "one line; the rows still printed")
def theory_full(s):
    p = _theory_json_full(s)
    lines = [l for l in err_lines(p) if not TF_LINES.match(l)]
    ok = p.returncode != 0 and len(lines) == 1 and "Traceback" not in p.stderr and "rows in" in p.stdout
    return ok, said(p)


@case("3.3", "theory.check and Ctrl-C", "one line, exit 130, no traceback")
def theory_sigint(s):
    proc = subprocess.Popen([sys.executable, "-m", "theory.check", "--quick"], cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = []
    for line in proc.stdout:  # Ctrl-C once the first row is out: the report is mid-way
        first.append(line)
        if line.startswith(("PASS", "FAIL", "REFUTED", "ERROR")):
            break
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
        out = "".join(first) + out
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    p = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return proc.returncode == 130 and "Traceback" not in err, said(p)


# --------------------------------------------------------------------------------------------
# 4. Quiet


@case("4", "ablate with TF_CPP_MIN_LOG_LEVEL unset", "the project's lines only")
def ablate_quiet(s):
    env = {k: v for k, v in ENV.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    p = run([os.path.join(RUN, "ablate.py"), f"--root={s}/quiet", "--print_commands",
             "--train_steps=2", *TINY], env=env)
    return p.returncode == 0 and p.stderr == "", f"exit {p.returncode}, {len(err_lines(p))} stderr lines"


@case("4", "theory.check with TF_CPP_MIN_LOG_LEVEL unset", "the project's lines only")
def theory_quiet(s):
    p = _theory_json_full(s)
    noise = [l for l in err_lines(p) if TF_LINES.match(l)]
    return not noise, f"{len(noise)} TensorFlow lines on stderr"


@case("4", "report with an unwritable HOME", "the project's lines only")
def report_home(s):
    root = _study_root(s, "home")
    shutil.rmtree(os.path.join(root, "notes"))
    home = os.path.join(s, "home_ro")
    os.makedirs(home)
    os.chmod(home, 0o555)
    env = dict(ENV, HOME=home)
    env.pop("MPLCONFIGDIR", None)
    p = run([os.path.join(RUN, "report.py"), f"--root={root}"], env=env)
    return p.returncode == 0 and p.stderr == "", f"exit {p.returncode}, {len(err_lines(p))} stderr lines"


# --------------------------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True, help="scratch directory (emptied first)")
    p.add_argument("--only", default="", help="run only the cases whose section starts with this")
    args = p.parse_args()
    shutil.rmtree(args.root, ignore_errors=True)
    os.makedirs(args.root)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    print(f"fault campaign 2: {time.strftime('%Y-%m-%d %H:%M')} UTC, commit {commit}\n")
    print("| § | case | expected | got | as expected |")
    print("| --- | --- | --- | --- | --- |")
    results, t0 = [], time.time()
    for section, name, expected, fn in CASES:
        if not section.startswith(args.only):
            continue
        try:
            ok, got = fn(args.root)
        except Exception as e:  # noqa: BLE001 -- a case that cannot even be tried is a failure
            ok, got = False, f"campaign error: {type(e).__name__}: {str(e)[:100]}"
        results.append((section, ok))
        got = got.replace("|", "\\|")
        print(f"| {section} | {name} | {expected} | {got} | {'yes' if ok else '**no**'} |", flush=True)
    if _STUDY.get("proc") and _STUDY["proc"].poll() is None:
        _STUDY["proc"].kill()
        _STUDY["proc"].wait()
    holder = _held(_STUDY["dir"]) if _STUDY.get("dir") else None
    if holder and holder.split()[1].isdigit():  # a training child the study left running
        os.kill(int(holder.split()[1]), signal.SIGKILL)
    print()
    for sec in ("1", "2", "3", "4"):
        mine = [ok for s, ok in results if s.startswith(sec)]
        if mine:
            print(f"section {sec}: {sum(mine)} of {len(mine)} as expected")
    total = sum(ok for _, ok in results)
    print(f"total: {total} of {len(results)} cases as expected ({time.time() - t0:.0f} s)")
    return 0 if total == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
