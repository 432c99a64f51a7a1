"""Fault campaign 2, section 3: processes (`run/ablate.py` run twice on one root or SIGKILLed,
`run/launch_local.py` with 100,000 workers or SIGTERM, a small `ulimit -v`, an empty grid,
`python -m theory.check` on a full disk or Ctrl-C)."""
import glob
import json
import os
import signal
import subprocess
import sys
import time

from tests.faults.helpers import (
    ENV, ROOT, RUN, TF_NOISE, TINY, err_lines, one_line, read, registrar, run, said,
    theory_json_full, train)

case = registrar(2)


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
            *[f for f in TINY if not f.startswith(("--checkpoint_every", "--eval_every"))],
            "--checkpoint_every=50", "--eval_every=1000"]
    proc = subprocess.Popen([sys.executable] + args, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    run_dir = os.path.join(root, "cifar10", "norm-none_init-identity_head-random_blocks-1",
                           "seed-0")
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


@case("3.3", "theory.check --json to a full disk", "one line; the rows still printed")
def theory_full(s):
    p = theory_json_full(s)
    lines = [l for l in err_lines(p) if not TF_NOISE.match(l)]
    ok = (p.returncode != 0 and len(lines) == 1 and "Traceback" not in p.stderr
          and "rows in" in p.stdout)
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


def stop_busy_study():
    """Ends the long study of section 3 and the training child it left running, if any."""
    if _STUDY.get("proc") and _STUDY["proc"].poll() is None:
        _STUDY["proc"].kill()
        _STUDY["proc"].wait()
    holder = _held(_STUDY["dir"]) if _STUDY.get("dir") else None
    if holder and holder.split()[1].isdigit():  # a training child the study left running
        os.kill(int(holder.split()[1]), signal.SIGKILL)
    _STUDY.clear()
