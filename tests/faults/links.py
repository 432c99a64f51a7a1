"""Fault campaign 3, section 4: run directories, study roots and exports that are symbolic links
that loop or point to nothing, and read-only mounts: one line naming the path and the fix."""
import os
import shutil

from tests.faults.helpers import (
    RUN, TINY, copy_base, mount_ro, one_line, read, registrar, run, said, study_root, train)

case = registrar(3)


def _link_case(s, name, make, *words, script_args=None):
    d = os.path.join(s, name)
    make(d)
    snapshot = sorted(os.listdir(s))
    p = train(d, "--train_steps=4") if script_args is None else run(script_args(d))
    return one_line(p, "symbolic link", *words) and sorted(os.listdir(s)) == snapshot, said(p)


@case("4.1", "--model_dir a symbolic link to itself", "one line naming the link and the fix")
def link_loop(s):
    return _link_case(s, "loop41", lambda d: os.symlink(d, d), "loops")


@case("4.2", "--model_dir a dangling relative link", "one line naming the target")
def link_dangling(s):
    return _link_case(s, "dangling42", lambda d: os.symlink("nowhere/run", d), "nowhere/run")


@case("4.3", "--model_dir through a looping link (loop/run)", "one line naming the link")
def link_through(s):
    loop = os.path.join(s, "loop44")
    os.symlink(loop, loop)
    p = train(os.path.join(loop, "run"), "--train_steps=4")
    return one_line(p, "symbolic link", loop), said(p)


def _run_with_link(s, name, sub, target):
    d = copy_base(s, os.path.join(s, name))
    before = read(os.path.join(d, "results.json"))
    shutil.rmtree(os.path.join(d, sub))
    os.symlink(target if target != "self" else os.path.join(d, sub), os.path.join(d, sub))
    p = train(d, "--train_steps=6")
    return one_line(p, "symbolic link", sub) and read(os.path.join(d, "results.json")) == before, said(p)


@case("4.4", "ckpt/ a symbolic link loop in a run", "one line; the run as it was")
def ckpt_loop(s):
    return _run_with_link(s, "run45", "ckpt", "self")


@case("4.5", "ckpt/ a dangling link in a run", "one line; the run as it was")
def ckpt_dangling(s):
    return _run_with_link(s, "run46", "ckpt", "../elsewhere/ckpt")


@case("4.6", "train/ a dangling link in a run", "one line; the run as it was")
def train_dangling(s):
    return _run_with_link(s, "run47", "train", "/nonexistent/train")


def _read_only(s, name, fill=os.makedirs):
    """A read-only mount at s/name of the directory s/<name>src, made by `fill(path)`."""
    src = os.path.join(s, f"{name}src")
    fill(src)
    return mount_ro(src, os.path.join(s, name))


@case("4.7", "new run on a read-only mount", "one line")
def readonly_new(s):
    ro = _read_only(s, "ro48")
    p = train(os.path.join(ro, "run"), "--train_steps=4")
    return one_line(p, "Read-only file system"), said(p)


@case("4.8", "resuming a run on a read-only mount", "one line; nothing changed")
def readonly_resume(s):
    ro = _read_only(s, "ro49", lambda src: copy_base(s, os.path.join(src, "run")))
    p = train(os.path.join(ro, "run"), "--train_steps=8")
    return one_line(p, "Read-only file system"), said(p)


@case("4.9", "ablate on a read-only study root", "one line")
def readonly_ablate(s):
    ro = _read_only(s, "ro411", lambda src: shutil.copytree(study_root(s, "study411"), src))
    p = run([os.path.join(RUN, "ablate.py"), f"--root={ro}", "--train_steps=4", *TINY])
    return one_line(p, "Read-only file system"), said(p)


@case("4.10", "report on a read-only study root", "one line")
def readonly_report(s):
    ro = _read_only(s, "ro412", lambda src: shutil.copytree(study_root(s, "study412"), src))
    p = run([os.path.join(RUN, "report.py"), f"--root={ro}"])
    return one_line(p, "Read-only file system"), said(p)


@case("4.11", "ablate --root a symbolic link loop", "one line")
def ablate_loop(s):
    root = os.path.join(s, "root413")
    os.symlink(root, root)
    p = run([os.path.join(RUN, "ablate.py"), f"--root={root}", "--train_steps=2", *TINY])
    return one_line(p, "symbolic link"), said(p)


@case("4.12", "report --root a dangling link", "one line")
def report_dangling(s):
    root = os.path.join(s, "root414")
    os.symlink("gone", root)
    p = run([os.path.join(RUN, "report.py"), f"--root={root}"])
    return one_line(p, "symbolic link"), said(p)


@case("4.13", "export --model_dir a symbolic link loop", "one line")
def export_loop(s):
    d = os.path.join(s, "run415")
    os.symlink(d, d)
    p = run([os.path.join(RUN, "export.py"), f"--model_dir={d}", f"--export_dir={s}/exp415"])
    return one_line(p) and "loop" in p.stderr, said(p)


@case("4.14", "export to a read-only mount", "one line")
def export_readonly(s):
    d = copy_base(s, os.path.join(s, "run416"))
    ro = _read_only(s, "ro416")
    p = run([os.path.join(RUN, "export.py"), f"--model_dir={d}", f"--export_dir={ro}/exp"])
    return one_line(p), said(p)
