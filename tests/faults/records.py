"""Fault campaign 3, section 3: what a run directory records under hand edits and copies: a
deleted config.json, a results.json copied from another run, two studies on one root, a damaged
diverged.json, NaN optimizer slots, the export of a run that diverged in its first loop."""
import glob
import json
import os
import shutil
import subprocess
import sys

from tests.faults.helpers import (
    ENV, ROOT, RUN, TINY, copy_base, jread, one_line, own_lines, read, registrar, run, said,
    study_root, train)

case = registrar(3)


def _no_config(s, name, *flags, drop=("config.json",)):
    d = copy_base(s, os.path.join(s, name))
    for f in drop:
        os.remove(os.path.join(d, f))
    before = read(os.path.join(d, "results.json"))
    p = train(d, "--train_steps=6", *flags)
    return d, before, p


@case("3.1", "config.json deleted, resumed with another --batch_size", "refused naming batch_size; results.json unchanged")
def no_config_batch(s):
    d, before, p = _no_config(s, "nocfg31", "--batch_size=16")
    return one_line(p, "batch_size") and read(os.path.join(d, "results.json")) == before, said(p)


@case("3.2", "config.json and results.json deleted, resumed with another --seed", "refused naming seed (the checkpoint's record)")
def no_config_no_results(s):
    d, _, p = _no_config(s, "nocfg33", "--seed=5", drop=("config.json", "results.json"))
    return one_line(p, "seed") and not os.path.exists(os.path.join(d, "results.json")), said(p)


@case("3.3", "config.json deleted, resumed with the run's own flags", "resumes; config.json written again")
def no_config_same(s):
    d, _, p = _no_config(s, "nocfg34")
    cfg = jread(os.path.join(d, "config.json")) or {}
    return p.returncode == 0 and cfg.get("batch_size") == 8, said(p)


def _report_root(s, name, seeds=(0, 1)):
    root = os.path.join(s, name)
    shutil.copytree(study_root(s, f"_{name}", seeds), root)
    return root, sorted(glob.glob(os.path.join(root, "*", "*", "seed-*")))


def _report(root):
    p = run([os.path.join(RUN, "report.py"), f"--root={root}"])
    rows = [l for l in p.stdout.splitlines() if l.startswith("| cifar10")]
    return p, rows


@case("3.4", "results.json copied from a sibling seed", "a warning; the run not counted twice")
def sibling_copy(s):
    root, (seed0, seed1) = _report_root(s, "rep35")
    shutil.copy(os.path.join(seed1, "results.json"), os.path.join(seed0, "results.json"))
    p, rows = _report(root)
    ok = p.returncode == 0 and len(own_lines(p.stderr)) == 1 and "| 1,1 |" not in rows[0] \
        and "seed-0" in p.stderr
    return ok, f"row seeds: {rows[0].split('|')[3].strip() if rows else '?'}; " + said(p)


@case("3.5", "a run directory copied beside the study's (seed-0.bak)", "a warning; seed 0 not counted twice")
def dir_copy(s):
    root, (seed0, _) = _report_root(s, "rep36")
    shutil.copytree(seed0, seed0 + ".bak")
    p, rows = _report(root)
    counted = rows[0].split("|")[3].split("(")[0] if rows else ""  # the seeds the mean is over
    ok = p.returncode == 0 and "0,0" not in counted and "seed-0.bak" in p.stderr
    return ok, f"row seeds: {rows[0].split('|')[3].strip() if rows else '?'}; " + said(p)


@case("3.6", "results.json edited to another seed", "a warning; not counted")
def edited_seed(s):
    root, (seed0, _) = _report_root(s, "rep37")
    path = os.path.join(seed0, "results.json")
    results = jread(path)
    results["config"]["seed"] = 7
    with open(path, "w") as f:
        json.dump(results, f)
    p, rows = _report(root)
    return p.returncode == 0 and "7" not in rows[0].split("|")[3] and "seed" in p.stderr, said(p)


@case("3.7", "two studies with other base learning rates started together", "one refused; the root not mixed")
def two_studies(s):
    root = os.path.join(s, "study38")
    procs = [subprocess.Popen([sys.executable, os.path.join(RUN, "ablate.py"), f"--root={root}",
                               "--train_steps=2", *TINY, f"--learning_rate={lr}", "--seeds=0,1"],
                              cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for lr in (0.01, 0.02)]
    outs = [p.communicate(timeout=900) for p in procs]
    rates = {(jread(f) or {}).get("learning_rate")
             for f in glob.glob(os.path.join(root, "*", "*", "*", "config.json"))}
    codes = sorted(p.returncode for p in procs)
    refused = [subprocess.CompletedProcess(p.args, p.returncode, o, e)
               for p, (o, e) in zip(procs, outs) if p.returncode == 2]
    ok = codes == [0, 2] and len(rates) == 1 and one_line(refused[0], "learning_rate")
    return ok, f"exits {codes}, learning rates under the root {sorted(map(str, rates))}; " + (
        said(refused[0]) if refused else "")


@case("3.8", "garbage diverged.json in a partial run", "the study resumes it; the report does not call it diverged")
def garbage_diverged(s):
    root = study_root(s, "study39")
    (seed0,) = glob.glob(os.path.join(root, "*", "*", "seed-0"))
    with open(os.path.join(seed0, "diverged.json"), "w") as f:
        f.write("{garbage")
    rep, rows = _report(root)
    p = run([os.path.join(RUN, "ablate.py"), f"--root={root}", "--train_steps=4", *TINY])
    results = jread(os.path.join(seed0, "results.json")) or {}
    ok = "Diverged" not in rep.stdout and p.returncode == 0 and results.get("global_step") == 4
    return ok, said(p)


@case("3.9", "diverged.json with a retry_with and no step", "no advice: resuming with that change refused")
def advice_without_step(s):
    d = copy_base(s, os.path.join(s, "run310"))
    with open(os.path.join(d, "diverged.json"), "w") as f:
        json.dump({"retry_with": "--learning_rate=0.001"}, f)
    before = read(os.path.join(d, "config.json"))
    p = train(d, "--train_steps=6", "--learning_rate=0.001")
    return one_line(p, "learning_rate") and read(os.path.join(d, "config.json")) == before, said(p)


def _poison(prefix):
    from resnet_nobn.console import quiet_stderr
    from tests.helpers import poison_optimizer_slots
    with quiet_stderr():  # TensorFlow's start-up lines
        poison_optimizer_slots(prefix)


@case("3.10", "NaN in the newest checkpoint's optimizer slots only", "skipped as damaged; trains on; no divergence")
def nan_slots(s):
    d = copy_base(s, os.path.join(s, "run311"))
    _poison(os.path.join(d, "ckpt", "ckpt-4"))
    p = train(d, "--train_steps=6")
    text = p.stdout + p.stderr
    ok = p.returncode == 0 and "skipped ckpt-4" in text and "retry with" not in text \
        and not os.path.exists(os.path.join(d, "diverged.json"))
    return ok, said(p)


@case("3.11", "NaN optimizer slots, --eval_only", "evaluates the newest checkpoint's weights")
def nan_slots_eval(s):
    d = copy_base(s, os.path.join(s, "run312"))
    _poison(os.path.join(d, "ckpt", "ckpt-4"))
    p = train(d, "--train_steps=4", "--eval_only")
    results = jread(os.path.join(d, "results.json")) or {}
    return p.returncode == 0 and results.get("global_step") == 4, said(p)


def _diverged_first_loop(s, name):
    d = os.path.join(s, name)
    train(d, "--learning_rate=1e6", "--train_steps=8", "--log_every=4", "--steps_per_loop=4",
          "--checkpoint_every=1000", "--eval_every=1000")
    return d


@case("3.12", "export of a run that diverged in its first loop", "refused in one line; nothing written")
def export_first_loop(s):
    d = _diverged_first_loop(s, "run313")
    p = run([os.path.join(RUN, "export.py"), f"--model_dir={d}", f"--export_dir={s}/exp313"])
    return one_line(p, "ckpt-0") and not os.path.exists(f"{s}/exp313"), said(p)
