"""What every case of fault campaign 2 (bench/fault_campaign2.py) uses: the tiny flags, the
subprocess runners, the judges of one clear line, a finished base run copied per case, a study
root with a stranger's files in it, and one `theory.check --json=/dev/full` shared by two cases."""
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from bench import campaign  # noqa: E402
RUN = os.path.join(ROOT, "run")
TINY = ["--use_synthetic_data", "--widths=8,8,8", "--stem_width=8", "--blocks_per_stage=1",
        "--batch_size=8", "--eval_steps=1", "--learning_rate=0.01", "--log_every=2",
        "--eval_every=1000", "--checkpoint_every=2"]
ENV = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
TF_LINES = re.compile(r"^(I0000|W0000|E0000|WARNING: All log messages|.*cuda|.*oneDNN)", re.M)
CASES = []


case = campaign.registrar(CASES)


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
    """TensorFlow's start-up lines of this process (it edits checkpoints, writes tfds dirs)
    hidden."""
    from resnet_nobn.console import quiet_stderr
    return quiet_stderr()


def study_root(s, name):
    """A study root holding the base run, as the run of seed 0 trained there, and `notes/`, another
    program's config.json."""
    root = os.path.join(s, name)
    run_dir = os.path.join(root, "cifar10", "run", "seed-0")
    shutil.copytree(base_run(s), run_dir)
    for record in ("config.json", "results.json"):  # its own run, not a copy of the base run
        path = os.path.join(run_dir, record)
        obj = json.load(open(path))
        (obj["config"] if record == "results.json" else obj)["model_dir"] = run_dir
        with open(path, "w") as f:
            json.dump(obj, f)
    os.makedirs(os.path.join(root, "notes"))
    with open(os.path.join(root, "notes", "config.json"), "w") as f:
        json.dump({"name": "another program"}, f)
    with open(os.path.join(root, "notes", "study_status.json"), "w") as f:
        json.dump({}, f)
    return root


_THEORY = {}


def theory_json_full(s):
    """`theory.check --quick --json=/dev/full` with TF_CPP_MIN_LOG_LEVEL unset, run once."""
    if "p" not in _THEORY:
        env = {k: v for k, v in ENV.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
        _THEORY["p"] = run(["-m", "theory.check", "--quick", "--json=/dev/full"], env=env,
                           timeout=600)
    return _THEORY["p"]
