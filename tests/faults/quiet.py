"""Fault campaign 2, section 4: quiet, the project's lines only (TensorFlow's start-up lines
hidden with TF_CPP_MIN_LOG_LEVEL unset, matplotlib's with an unwritable HOME)."""
import os
import shutil

from tests.faults.helpers import (
    ENV, RUN, TF_NOISE, TINY, err_lines, registrar, run, stranger_root, theory_json_full)

case = registrar(2)


@case("4", "ablate with TF_CPP_MIN_LOG_LEVEL unset", "the project's lines only")
def ablate_quiet(s):
    env = {k: v for k, v in ENV.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    p = run([os.path.join(RUN, "ablate.py"), f"--root={s}/quiet", "--print_commands",
             "--train_steps=2", *TINY], env=env)
    ok = p.returncode == 0 and p.stderr == ""
    return ok, f"exit {p.returncode}, {len(err_lines(p))} stderr lines"


@case("4", "theory.check with TF_CPP_MIN_LOG_LEVEL unset", "the project's lines only")
def theory_quiet(s):
    p = theory_json_full(s)
    noise = [l for l in err_lines(p) if TF_NOISE.match(l)]
    return not noise, f"{len(noise)} TensorFlow lines on stderr"


@case("4", "report with an unwritable HOME", "the project's lines only")
def report_home(s):
    root = stranger_root(s, "home")
    shutil.rmtree(os.path.join(root, "notes"))
    home = os.path.join(s, "home_ro")
    os.makedirs(home)
    os.chmod(home, 0o555)
    env = dict(ENV, HOME=home)
    env.pop("MPLCONFIGDIR", None)
    p = run([os.path.join(RUN, "report.py"), f"--root={root}"], env=env)
    ok = p.returncode == 0 and p.stderr == ""
    return ok, f"exit {p.returncode}, {len(err_lines(p))} stderr lines"
