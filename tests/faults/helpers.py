"""What every fault case uses: the case registry, the tiny flags, the subprocess runners, the
judges of one clear line, tmpfs and read-only mounts, a finished base run and a finished one-run
study copied per case, a study root with a stranger's files in it, two workers on loopback and
one `theory.check --json=/dev/full` shared by two cases.

Every command runs as a user has it: TF_CPP_MIN_LOG_LEVEL unset (the entry points set their own
default), no GPU. A judge counts the project's lines only (`own_lines`: TensorFlow's log lines
and their continuations apart)."""
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
RUN = os.path.join(ROOT, "run")
TINY = ["--use_synthetic_data", "--widths=8,8,8", "--stem_width=8", "--blocks_per_stage=1",
        "--batch_size=8", "--eval_steps=1", "--learning_rate=0.01", "--log_every=2",
        "--eval_every=2", "--checkpoint_every=2"]
MW = ["--use_synthetic_data", "--widths=8,8,16,16", "--stem_width=8", "--blocks_per_stage=1",
      "--batch_size=8", "--learning_rate=0.01", "--log_every=2", "--eval_every=1000"]
ENV = dict(os.environ, CUDA_VISIBLE_DEVICES="")
ENV.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as a user has it: the entry points set their default
TF_LINE = re.compile(r"^(I0000|W0000|E0000|F0000|WARNING: All log messages|To enable the following)")
# TensorFlow's noise as a user sees it: its log lines, and any line about CUDA or oneDNN
TF_NOISE = re.compile(TF_LINE.pattern + r"|.*cuda|.*oneDNN")

# --------------------------------------------------------------------------------------------
# the cases

Case = collections.namedtuple("Case", "section name expected fn")
CASES = {2: [], 3: []}  # by campaign, in the order registered
MOUNTS = []  # what the cases mounted, unmounted by `unmount_all`
SHARED = {}  # "dir": where the base run and the tfds directories are made once (else per scratch)


def registrar(campaign):
    """The `@case(section, name, expected)` decorator that registers a case of `campaign`: a
    function of the scratch directory returning (ok, what happened)."""
    def case(section, name, expected):
        def register(fn):
            CASES[campaign].append(Case(section, name, expected, fn))
            return fn
        return register
    return case


class NeedsRoot(Exception):
    """A case that mounts file systems, tried without root."""


def unmount_all():
    while MOUNTS:
        subprocess.run(["umount", "-l", MOUNTS.pop()], capture_output=True)


def shared(s):
    return SHARED.get("dir") or s


# --------------------------------------------------------------------------------------------
# running and judging


def run(args, timeout=600, env=None, **kw):
    """`python args...` from the repository root; the CompletedProcess (stdout, stderr text)."""
    return subprocess.run([sys.executable] + list(args), cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env or ENV, **kw)


def train(model_dir, *flags, script="cifar_train.py", tiny=True, **kw):
    return run([os.path.join(RUN, script), *(TINY if tiny else []), *flags,
                f"--model_dir={model_dir}"], **kw)


OWN = ("error: ", "warning: ", "interrupted", "retry with: ", "Traceback", "Exception in thread")


def own_lines(stderr):
    """The lines of stderr that are the project's: TensorFlow's log lines (I0000/W0000/E0000 ...)
    and the lines that continue them (its gRPC details) apart, up to the next line that starts as
    one of the project's (or a traceback) does."""
    out, in_tf = [], False
    for line in stderr.splitlines():
        if TF_LINE.match(line) or (in_tf and not line.startswith(OWN)):
            in_tf = True
            continue
        in_tf = False
        if line.strip():
            out.append(line)
    return out


def err_lines(proc):
    """Every non-empty line of stderr, TensorFlow's included."""
    return [line for line in proc.stderr.strip().splitlines() if line.strip()]


def one_line(proc, *words):
    """A non-zero exit with exactly one line of the project's on stderr, no traceback, and every
    one of `words` in it."""
    lines = own_lines(proc.stderr)
    return (proc.returncode not in (0, None) and len(lines) == 1 and "Traceback" not in proc.stderr
            and all(w in lines[0] for w in words))


def said(proc):
    """What a process ended with: exit status and its last line of the project's on stderr (or
    stdout), shortened."""
    lines = own_lines(proc.stderr) or proc.stdout.strip().splitlines() or [""]
    last = lines[-1].strip()
    extra = f" ({len(own_lines(proc.stderr))} lines)" if len(own_lines(proc.stderr)) > 1 else ""
    tb = " (traceback)" if "Traceback" in proc.stderr else ""
    return f"exit {proc.returncode}{tb}{extra}: {last[:150]}" + ("…" if len(last) > 150 else "")


def read(path, mode="r"):
    try:
        with open(path, mode) as f:
            return f.read()
    except OSError:
        return None


def jread(path):
    try:
        return json.loads(read(path) or "")
    except ValueError:
        return None


def ckpts(model_dir):
    return sorted(int(m.group(1)) for p in glob.glob(os.path.join(model_dir, "ckpt", "ckpt-*.index"))
                  if (m := re.search(r"ckpt-(\d+)\.index$", p)))


def tf_quiet():
    """TensorFlow's start-up lines of this process (it edits checkpoints, writes tfds dirs)
    hidden."""
    from resnet_nobn.console import quiet_stderr
    return quiet_stderr()


# --------------------------------------------------------------------------------------------
# disks


def _mount(*args):
    if os.geteuid() != 0:
        raise NeedsRoot("the case mounts a file system: run it as root")
    subprocess.run(["mount", *args], check=True)


def mount_tmpfs(path, size):
    os.makedirs(path, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", path)
    MOUNTS.append(path)
    return path


def mount_ro(src, dst):
    os.makedirs(dst, exist_ok=True)
    _mount("--bind", src, dst)
    MOUNTS.append(dst)
    _mount("-o", "remount,bind,ro", dst)
    return dst


def fill(disk, leave=0):
    """Fills the disk mounted at `disk` up to `leave` bytes (a file `filler` on it)."""
    with open(os.path.join(disk, "filler"), "ab") as f:
        try:
            while shutil.disk_usage(disk).free > leave:
                f.write(b"\0" * max(1, min(4096, shutil.disk_usage(disk).free - leave)))
                f.flush()
        except OSError:
            pass


# --------------------------------------------------------------------------------------------
# runs and studies to start from


_BASE = {}


def base_run(s, steps=4):
    """A finished run of `steps` steps, checkpoints and evaluations every 2, made once and copied
    per case (so each case starts from the same state)."""
    if steps not in _BASE:
        d = os.path.join(shared(s), f"_base{steps}")
        shutil.rmtree(d, ignore_errors=True)
        p = train(d, f"--train_steps={steps}")
        if p.returncode != 0:
            raise RuntimeError(f"the base run failed:\n{p.stderr[-2000:]}")
        _BASE[steps] = d
    return _BASE[steps]


def copy_base(s, dest, steps=4):
    shutil.copytree(base_run(s, steps), dest, symlinks=True)
    return dest


def kept(model_dir, before_ckpts, before_results):
    """Whether what a run had saved is all still there and whole."""
    results = jread(os.path.join(model_dir, "results.json"))
    return (set(before_ckpts) <= set(ckpts(model_dir)) and results is not None
            and results.get("global_step", -1) >= (before_results or {}).get("global_step", 0))


def study_root(s, name, runs=(0,)):
    """A finished study of 2-step runs (one per seed in `runs`) at s/name."""
    root = os.path.join(s, name)
    p = run([os.path.join(RUN, "ablate.py"), f"--root={root}", "--train_steps=2", *TINY,
             f"--seeds={','.join(map(str, runs))}"])
    if p.returncode != 0:
        raise RuntimeError(f"study failed: {said(p)}")
    return root


def stranger_root(s, name):
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


def workers(flag_lists, timeout=600, script="imagenet_train.py", tf_configs=None):
    """Workers of one multi-worker run on loopback, one per flag list; their CompletedProcesses."""
    from resnet_nobn.training import local_cluster
    ports = local_cluster.free_ports(len(flag_lists))
    procs = []
    for i, flags in enumerate(flag_lists):
        env = dict(ENV, TF_CONFIG=tf_configs[i] if tf_configs else local_cluster.tf_config(ports, i),
                   RESNET_NOBN_CONNECT_TIMEOUT="240")
        procs.append(subprocess.Popen([sys.executable, os.path.join(RUN, script), *MW, *flags],
                                      cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    out = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
        out.append(subprocess.CompletedProcess(p.args, p.returncode, o, e))
    return out


_THEORY = {}


def theory_json_full(s):
    """`theory.check --quick --json=/dev/full` (TF_CPP_MIN_LOG_LEVEL unset), run once."""
    if "p" not in _THEORY:
        _THEORY["p"] = run(["-m", "theory.check", "--quick", "--json=/dev/full"], timeout=600)
    return _THEORY["p"]
