"""Fault campaign 3, sections 1 and 2: a disk that fills (a small tmpfs, or one filled up to its
last byte) under every command that writes, and the files a user keeps under SIGKILL and a full
disk: one line naming the disk, nothing saved before lost, every file whole."""
import glob
import os
import shutil
import subprocess
import sys

from tests.faults.helpers import (
    ENV, ROOT, RUN, TINY, ckpts, copy_base, fill, jread, kept, mount_tmpfs, one_line, read,
    registrar, run, said, study_root, train, workers)

case = registrar(3)


@case("1.1", "new run, the disk fills at a later checkpoint", "one line naming the disk; ckpts and results kept")
def new_run_fills(s):
    # room for ckpt-0, the first step's augmented images in train/ and ckpt-2 to 6 (each ~36 KiB):
    # the disk fills at ckpt-8, after evaluations wrote results.json
    disk = mount_tmpfs(os.path.join(s, "disk11"), "260k")
    d = os.path.join(disk, "run")
    p = train(d, "--train_steps=40")
    ok = (one_line(p, "No space left on device", disk) and "memory" not in p.stderr
          and len(ckpts(d)) >= 1 and jread(os.path.join(d, "results.json")) is not None)
    return ok, said(p) + f" [ckpts {ckpts(d)}]"


@case("1.2", "resumed run on a disk that fills", "one line naming the disk; earlier ckpts and results kept")
def resume_fills(s):
    disk = mount_tmpfs(os.path.join(s, "disk12"), "1m")
    d = copy_base(s, os.path.join(disk, "run"))
    before, results = ckpts(d), jread(os.path.join(d, "results.json"))
    fill(disk, 20_000)
    p = train(d, "--train_steps=40")
    return one_line(p, "No space left on device") and kept(d, before, results), said(p)


@case("1.3", "TensorBoard's events dir fills (train/ on a full disk)", "one line naming the disk; ckpts kept")
def events_fill(s):
    disk = mount_tmpfs(os.path.join(s, "disk13"), "64k")
    d = copy_base(s, os.path.join(s, "run13"))
    before, results = ckpts(d), jread(os.path.join(d, "results.json"))
    shutil.rmtree(os.path.join(d, "train"))
    os.symlink(disk, os.path.join(d, "train"))
    fill(disk)
    p = train(d, "--train_steps=40")
    return one_line(p, "No space left on device", disk) and kept(d, before, results), said(p)


@case("1.4", "results.json's disk fills (ckpt/ elsewhere)", "one line naming the disk; ckpts kept")
def results_fill(s):
    disk = mount_tmpfs(os.path.join(s, "disk14"), "1m")
    d = copy_base(s, os.path.join(disk, "run"))
    elsewhere = os.path.join(s, "ckpt14")
    shutil.move(os.path.join(d, "ckpt"), elsewhere)
    os.symlink(elsewhere, os.path.join(d, "ckpt"))
    before, results = ckpts(d), jread(os.path.join(d, "results.json"))
    fill(disk)
    p = train(d, "--train_steps=40")
    return one_line(p, "No space left on device") and kept(d, before, results), said(p)


@case("1.5", "new run on a disk with no room for its first checkpoint", "one line; the empty run dir removed and said")
def nothing_fits(s):
    disk = mount_tmpfs(os.path.join(s, "disk15"), "24k")
    d = os.path.join(disk, "run")
    p = train(d, "--train_steps=4")
    ok = one_line(p, "No space left on device") and not os.path.exists(d) and "removed" in p.stderr
    return ok, said(p) + ("" if not os.path.exists(d) else f" [{d} left: {os.listdir(d)}]")


@case("1.6", "--eval_only on a full disk", "one line; results.json as it was")
def eval_only_full(s):
    disk = mount_tmpfs(os.path.join(s, "disk16"), "1m")
    d = copy_base(s, os.path.join(disk, "run"))
    before = read(os.path.join(d, "results.json"))
    fill(disk)
    p = train(d, "--train_steps=4", "--eval_only")
    return one_line(p, "No space left on device") and read(os.path.join(d, "results.json")) == before, said(p)


@case("1.7", "the disk frees up: the same command resumes", "resumes from the kept ckpt; finishes")
def resume_after_space(s):
    disk = mount_tmpfs(os.path.join(s, "disk17"), "1m")
    d = copy_base(s, os.path.join(disk, "run"))
    fill(disk, 20_000)
    first = train(d, "--train_steps=8")
    os.remove(os.path.join(disk, "filler"))
    again = train(d, "--train_steps=8")
    results = jread(os.path.join(d, "results.json")) or {}
    steps = [h["step"] for h in results.get("history", [])]
    ok = first.returncode == 2 and again.returncode == 0 and results.get("global_step") == 8 \
        and steps[:2] == [2, 4]
    return ok, said(again) + f" [history steps {steps}]"




@case("1.8", "report onto a full disk, an earlier report there", "one line naming the disk; earlier report whole")
def report_full(s):
    root = study_root(s, "study18")
    disk = mount_tmpfs(os.path.join(s, "disk18"), "1m")
    md, png = os.path.join(disk, "r.md"), os.path.join(disk, "r.png")
    first = run([os.path.join(RUN, "report.py"), f"--root={root}", f"--out_md={md}", f"--out_png={png}"])
    before = read(md), read(png, "rb")
    fill(disk)
    p = run([os.path.join(RUN, "report.py"), f"--root={root}", f"--out_md={md}", f"--out_png={png}"])
    whole = first.returncode == 0 and (read(md), read(png, "rb")) == before
    return one_line(p, "No space left on device", disk) and whole, said(p)


@case("1.9", "export onto a full disk", "one line naming the disk; nothing left there")
def export_full(s):
    d = copy_base(s, os.path.join(s, "run110"))
    disk = mount_tmpfs(os.path.join(s, "disk110"), "120k")
    p = run([os.path.join(RUN, "export.py"), f"--model_dir={d}", f"--export_dir={disk}/exp"])
    leftovers = [f for f in os.listdir(disk)]
    return one_line(p, "No space left on device", disk) and leftovers == [], said(p) + f" {leftovers}"


@case("1.10", "export --overwrite onto a full disk", "one line; the earlier export whole")
def export_overwrite_full(s):
    d = copy_base(s, os.path.join(s, "run111"))
    disk = mount_tmpfs(os.path.join(s, "disk111"), "20m")
    exp = os.path.join(disk, "exp")
    first = run([os.path.join(RUN, "export.py"), f"--model_dir={d}", f"--export_dir={exp}"])
    before = {f: read(os.path.join(exp, f), "rb") for f in ("export.json", "model.keras")}
    fill(disk, 50_000)
    p = run([os.path.join(RUN, "export.py"), f"--model_dir={d}", f"--export_dir={exp}", "--overwrite"])
    whole = first.returncode == 0 and {f: read(os.path.join(exp, f), "rb") for f in before} == before
    return one_line(p, "No space left on device") and whole, said(p)


@case("1.11", "a study whose root is full", "one line naming the disk; the finished run kept")
def study_full(s):
    disk = mount_tmpfs(os.path.join(s, "disk112"), "4m")
    root = os.path.join(disk, "study")
    shutil.copytree(study_root(s, "study112"), root)
    finished = glob.glob(os.path.join(root, "*", "*", "seed-0", "results.json"))
    fill(disk)
    p = run([os.path.join(RUN, "ablate.py"), f"--root={root}", "--train_steps=2", *TINY, "--seeds=0,1"])
    return one_line(p, "No space left on device") and all(jread(f) for f in finished), said(p)


@case("1.12", "a study root that fills between runs", "one line naming the disk; the finished runs kept")
def study_fills_between(s):
    disk = mount_tmpfs(os.path.join(s, "disk113"), "400k")
    root = os.path.join(disk, "study")
    p = run([os.path.join(RUN, "ablate.py"), f"--root={root}", "--train_steps=4", *TINY,
             "--seeds=0,1,2,3,4,5"])
    finished = [f for f in glob.glob(os.path.join(root, "*", "*", "seed-*", "results.json"))
                if (jread(f) or {}).get("global_step") == 4]
    ok = one_line(p) and ("No space left on device" in p.stderr or "failed" in p.stderr)
    return ok and bool(finished), said(p) + f" [{len(finished)} finished]"


@case("1.13", "theory experiment --out on a full disk", "one line naming the disk")
def theory_full(s):
    disk = mount_tmpfs(os.path.join(s, "disk114"), "200k")
    fill(disk, 30_000)
    p = run(["-m", "theory.section2.experiment", f"--out={disk}/o", "--depths", "1", "2",
             "--steps", "20", "--dim", "4"])
    return one_line(p, "No space left on device"), said(p)


@case("1.14", "multi-worker: the chief's disk fills", "one line each; the chief's ckpts kept")
def multiworker_full(s):
    # both workers' checkpoints (the chief's in ckpt/, the other's in .scratch/, ~166 KiB each)
    # and the first step's augmented images (~1 MiB of 224x224 noise): the disk fills at ckpt-6
    disk = mount_tmpfs(os.path.join(s, "disk115"), "2200k")
    d = os.path.join(disk, "run")
    procs = workers([["--train_steps=40", "--checkpoint_every=2", f"--model_dir={d}"]] * 2)
    chief, other = procs
    ok = one_line(chief, "No space left on device") and "memory" not in chief.stderr \
        and one_line(other) and bool(ckpts(d))
    return ok, f"chief {said(chief)} | worker {said(other)}"


def _kill_repeatedly(cmd, check, tries=6, first=1.0, step=1.5):
    """Runs `cmd` and SIGKILLs it after first, first+step, ... seconds; `check()` after each kill;
    returns the failures seen."""
    bad = []
    for i in range(tries):
        p = subprocess.Popen([sys.executable] + cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        try:
            p.wait(first + i * step)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        problem = check()
        if problem:
            bad.append(problem)
    return bad


def _png_ok(path):
    data = read(path, "rb")
    return data is None or (data.startswith(b"\x89PNG") and data.rstrip().endswith(b"IEND\xaeB`\x82"))


@case("2.1", "report.png and report.md under SIGKILL at any moment", "each whole (old or new) after every kill")
def report_killed(s):
    root = study_root(s, "study21")
    md, png = os.path.join(root, "report.md"), os.path.join(root, "report.png")
    bad = _kill_repeatedly([os.path.join(RUN, "report.py"), f"--root={root}"],
                           lambda: None if _png_ok(png) and (read(md) is None or read(md).endswith(")\n"))
                           else "half-written", tries=8, first=2, step=1)
    return not bad and os.path.exists(png), f"{len(bad)} of 8 kills left a half-written file"


@case("2.2", "results.json and config.json under SIGKILL while training", "parse after every kill")
def results_killed(s):
    d = os.path.join(s, "run22")
    flags = [os.path.join(RUN, "cifar_train.py"), *TINY, "--train_steps=400", "--eval_every=1",
             "--checkpoint_every=1", f"--model_dir={d}"]

    def check():
        for f in ("results.json", "config.json", os.path.join("ckpt", "losses.json")):
            if os.path.exists(os.path.join(d, f)) and jread(os.path.join(d, f)) is None:
                return f
        return None
    bad = _kill_repeatedly(flags, check, tries=6, first=15, step=5)
    return not bad, f"unreadable after a kill: {bad}" if bad else "all whole"


@case("2.3", "theory experiment's figure under a full disk", "the earlier figure and JSON whole")
def theory_figure(s):
    disk = mount_tmpfs(os.path.join(s, "disk23"), "1m")
    args = ["-m", "theory.section2.experiment", f"--out={disk}/o", "--depths", "1", "--steps", "20",
            "--dim", "4"]
    first = run(args)
    before = read(f"{disk}/o/linear_gd.png", "rb"), read(f"{disk}/o/linear_gd.json")
    fill(disk, 8_000)
    p = run(args + ["--seed", "1"])
    whole = (read(f"{disk}/o/linear_gd.png", "rb"), read(f"{disk}/o/linear_gd.json")) == before
    return first.returncode == 0 and one_line(p) and whole, said(p)


@case("2.4", "study_status.json under SIGKILL of the study", "parses after every kill")
def status_killed(s):
    root = os.path.join(s, "study24")
    cmd = [os.path.join(RUN, "ablate.py"), f"--root={root}", "--train_steps=2", *TINY, "--seeds=0,1,2"]

    def check():
        for f in glob.glob(os.path.join(root, "*", "*", "*", "study_status.json")):
            if jread(f) is None:
                return f
        return None
    bad = _kill_repeatedly(cmd, check, tries=5, first=10, step=4)
    return not bad, f"unreadable: {bad}" if bad else "all whole"
