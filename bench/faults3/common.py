"""What every case of fault campaign 3 (bench/fault_campaign3.py) uses: the tiny flags, the
subprocess runners, the judges of one clear line, tmpfs and read-only mounts, a finished base run
and a finished one-run study, copied per case, and two workers on loopback."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from bench import campaign  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "run"))
RUN = os.path.join(ROOT, "run")
TINY = ["--use_synthetic_data", "--widths=8,8,8", "--stem_width=8", "--blocks_per_stage=1",
        "--batch_size=8", "--eval_steps=1", "--learning_rate=0.01", "--log_every=2",
        "--eval_every=2", "--checkpoint_every=2"]
MW = ["--use_synthetic_data", "--widths=8,8,16,16", "--stem_width=8", "--blocks_per_stage=1",
      "--batch_size=8", "--learning_rate=0.01", "--log_every=2", "--eval_every=1000"]
ENV = dict(os.environ, CUDA_VISIBLE_DEVICES="")
ENV.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as a user has it: the entry points set their default
TF_LINE = re.compile(r"^(I0000|W0000|E0000|F0000|WARNING: All log messages|To enable the following)")
CASES, MOUNTS = [], []


case = campaign.registrar(CASES)


# --------------------------------------------------------------------------------------------
# running and judging


def run(args, timeout=600, env=None, **kw):
    return subprocess.run([sys.executable] + list(args), cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env or ENV, **kw)


def train(model_dir, *flags, script="cifar_train.py", **kw):
    return run([os.path.join(RUN, script), *TINY, *flags, f"--model_dir={model_dir}"], **kw)


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


def one_line(proc, *words):
    """A non-zero exit with exactly one line of the project's on stderr, no traceback, and every
    one of `words` in it."""
    lines = own_lines(proc.stderr)
    return (proc.returncode not in (0, None) and len(lines) == 1 and "Traceback" not in proc.stderr
            and all(w in lines[0] for w in words))


def said(proc):
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


def mount_tmpfs(path, size):
    os.makedirs(path, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path], check=True)
    MOUNTS.append(path)
    return path


def mount_ro(src, dst):
    os.makedirs(dst, exist_ok=True)
    subprocess.run(["mount", "--bind", src, dst], check=True)
    MOUNTS.append(dst)
    subprocess.run(["mount", "-o", "remount,bind,ro", dst], check=True)
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


_BASE = {}


def base_run(s, steps=4):
    """A finished run of `steps` steps, checkpoints every 2, copied per case."""
    if steps not in _BASE:
        d = os.path.join(s, f"_base{steps}")
        p = train(d, f"--train_steps={steps}")
        if p.returncode != 0:
            sys.exit(f"the base run failed:\n{p.stderr[-2000:]}")
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
    root = os.path.join(s, name)
    p = run([os.path.join(RUN, "ablate.py"), f"--root={root}", "--train_steps=2", *TINY,
             f"--seeds={','.join(map(str, runs))}"])
    if p.returncode != 0:
        raise RuntimeError(f"study failed: {said(p)}")
    return root


def workers(flag_lists, timeout=600, script="imagenet_train.py", tf_configs=None):
    import launch_local
    ports = launch_local.free_ports(len(flag_lists))
    procs = []
    for i, flags in enumerate(flag_lists):
        env = dict(ENV, TF_CONFIG=tf_configs[i] if tf_configs else launch_local.tf_config(ports, i),
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
