"""The entry points as a newcomer meets them: --help, a finished run run again, a dry-run study,
and the README's output paths kept out of git."""
import ast
import glob
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from tests.helpers import CLI_RUN, ROOT, TINY, copy_of, run_main, study_runs_in_process

ARGS = [*TINY, "--log_every=2", "--eval_every=2"]


def _files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, files in os.walk(root) for f in files)


@pytest.mark.parametrize("script", ["cifar_train.py", "imagenet_train.py"])
@pytest.mark.parametrize("flag", ["--help", "-h", "--helpshort", "--helpfull"])
def test_help_exits_0_and_shows_the_projects_flags_first(script, flag):
    proc = run_main(script, flag, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-500:])
    out = proc.stdout
    assert "--widths:" in out and "--batch_size:" in out, out[:2000]
    first_absl = min((out.index(s) for s in ("absl.app:", "--[no]only_check_args", "absl.logging")
                      if s in out), default=len(out))
    assert out.index("--widths:") < first_absl, out[:3000]
    if flag == "--helpfull":
        assert "--[no]only_check_args" in out  # absl's own flags still listed, after the project's
    else:
        assert "absl.app" not in out and "--[no]only_check_args" not in out


def _help_of(script, *args):
    return subprocess.run([sys.executable, os.path.join(ROOT, script), "--help", *args],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""))


def _summary(script):
    """The first paragraph of a script's docstring: what its --help must say whole."""
    with open(os.path.join(ROOT, script)) as f:
        return ast.get_docstring(ast.parse(f.read())).split("\n\n")[0]


BENCH = sorted(os.path.relpath(p, ROOT) for pattern in ("bench/*.py", "experiments/*/*.py")
               for p in glob.glob(os.path.join(ROOT, pattern))
               if 'if __name__ == "__main__"' in open(p).read())


@pytest.mark.parametrize("script", BENCH)
def test_every_bench_script_helps_with_its_whole_summary_and_exits_0(script):
    proc = _help_of(script)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-500:])
    squeeze = lambda text: re.sub(r"\s+", "", text)  # argparse re-wraps the description
    assert squeeze(_summary(script)) in squeeze(proc.stdout), proc.stdout[:1000]


@pytest.mark.parametrize("script", BENCH)
def test_every_flag_of_a_bench_script_has_its_help(script):
    """Each argparse flag of a bench script says what it is: some said only their default."""
    with open(os.path.join(ROOT, script)) as f:
        tree = ast.parse(f.read())
    bare = [ast.unparse(call.args[0]) for call in ast.walk(tree)
            if isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "add_argument"
            and not any(k.arg == "help" for k in call.keywords)]
    assert bare == [], bare


def test_launch_local_helps_with_every_flag_and_refuses_an_abbreviation():
    out = _help_of("run/launch_local.py").stdout
    flags = re.split(r"\n  (?=-)", out.split("options:")[1])[1:]
    assert len(flags) >= 5, out
    for flag in flags:  # the flag, its value's name, then its help
        assert len(flag.split()) >= 3, flag
    assert "default: 2" in next(f for f in flags if f.startswith("--num_workers")), out
    # `python -c pass` stands for the training command: nothing is started when refused
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "run", "launch_local.py"),
                           "--num_worker=1", "--", "-c", "pass"], capture_output=True, text=True,
                          timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "--num_worker=1" in lines[0], proc.stderr
    assert "[launch]" not in proc.stdout, proc.stdout


def test_predict_help_is_true_of_every_export():
    """Not only CIFAR's 32x32: a Fashion-MNIST export takes 28x28 grey images, and --resize
    scales to the export's own input. The file it names for MAX_PIXELS defines it."""
    out = run_main("predict.py", "--help", timeout=120).stdout
    assert "28x28" in out and "export's" in out and "CIFAR: resize" not in out, out
    named = re.findall(r"MAX_PIXELS[^()]*\(([\w/]+\.py)\)", " ".join(out.split()))
    assert named, out
    for path in named:
        with open(os.path.join(ROOT, path)) as f:
            assert re.search(r"^MAX_PIXELS = ", f.read(), flags=re.M), path


def test_report_help_names_every_column_of_the_table():
    out = " ".join(run_main("report.py", "--help", timeout=120).stdout.split())
    for column in ("seeds", "steps", "top-1 error", "top-5 error", "test loss", "train time",
                   "Table 2"):  # resnet_nobn/study/report.py markdown_table's columns
        assert column in out, (column, out[:1500])


@pytest.mark.slow
def test_a_finished_run_run_again_says_so_at_once_without_tensorflow(tmp_path, cli_run):
    """Nothing is built: here TensorFlow cannot even be imported, and the command still answers.
    The run: the session's finished 4-step run (conftest.py), its command given again."""
    run = copy_of(cli_run[0], tmp_path / "run")
    args = [*CLI_RUN, "--train_steps=4", f"--model_dir={run}"]
    before = {f: os.path.getmtime(run / f) for f in _files(run)}
    fake = tmp_path / "fake" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('tensorflow imported')\n")
    start = time.monotonic()
    again = subprocess.run([sys.executable, os.path.join(ROOT, "run", "cifar_train.py"), *args],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PYTHONPATH=str(tmp_path / "fake")))
    assert again.returncode == 0, again.stderr
    assert time.monotonic() - start < 30
    lines = again.stdout.strip().splitlines()
    assert len(lines) == 1 and "finished" in lines[0] and "nothing to train" in lines[0], lines
    assert str(run) in lines[0], lines
    assert "step 4" in lines[0] and "top-1" in lines[0], lines
    assert again.stderr == ""
    assert {f: os.path.getmtime(run / f) for f in _files(run)} == before  # nothing written
    # more steps, or another setting, take the ordinary path (TensorFlow needed)
    longer = subprocess.run([sys.executable, os.path.join(ROOT, "run", "cifar_train.py"),
                             *[a for a in args if not a.startswith("--train_steps")],
                             "--train_steps=6"], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, PYTHONPATH=str(tmp_path / "fake")))
    assert longer.returncode != 0 and "nothing to train" not in longer.stdout


@pytest.mark.slow
def test_a_finished_run_is_not_finished_for_other_settings_or_a_pending_divergence(
        tmp_path, cli_run):
    run = copy_of(cli_run[0], tmp_path / "run")
    args = [*CLI_RUN, "--train_steps=4", f"--model_dir={run}"]
    other = run_main("cifar_train.py", *args, "--seed=3")
    assert other.returncode == 2 and "seed: 0 there, 3 here" in other.stderr, other.stderr
    (run / "diverged.json").write_text('{"step": 4, "retry_with": "--learning_rate=0.005"}')
    again = run_main("cifar_train.py", *args)
    assert "nothing to train" not in again.stdout, again.stdout


@pytest.mark.slow
def test_print_commands_writes_nothing(tmp_path, monkeypatch):
    study_runs_in_process(monkeypatch)
    root = tmp_path / "root"
    args = [f"--root={root}", *ARGS, "--train_steps=2", "--vary_norm=none,batch",
            "--print_commands"]
    proc = run_main("ablate.py", *args)
    assert proc.returncode == 0, proc.stderr
    assert len([line for line in proc.stdout.splitlines() if "cifar_train.py" in line]) == 2
    assert not root.exists() or _files(root) == [], _files(root)
    # on a root with a finished run: the same
    run_args = [a for a in args if a != "--print_commands" and not a.startswith("--vary")]
    assert run_main("ablate.py", *run_args).returncode == 0
    before = {f: os.path.getmtime(root / f) for f in _files(root)}
    proc = run_main("ablate.py", *args)
    assert proc.returncode == 0, proc.stderr
    assert {f: os.path.getmtime(root / f) for f in _files(root)} == before


def test_the_paths_the_readme_writes_are_ignored_by_git(tmp_path):
    """Every relative directory a README command writes into (--model_dir, --export_dir, ...)."""
    if shutil.which("git") is None or subprocess.run(
            ["git", "rev-parse"], cwd=ROOT, capture_output=True).returncode:
        pytest.skip("not a git checkout")
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    written = set(re.findall(r"--(?:model_dir|export_dir|data_dir|examples_dir|root)=([\w.-]+)/?",
                             text))
    tops = {w.split("/")[0] for w in written if not w.isupper()}  # not a placeholder (DIR)
    assert {"runs", "exports", "data", "examples"} <= tops, written
    for top in tops:  # examples/ also holds the library's example script: its PNGs are ignored
        proc = subprocess.run(["git", "check-ignore", "-q", f"{top}/x.png"], cwd=ROOT)
        assert proc.returncode == 0, f"{top}/ is not in .gitignore"


@pytest.mark.slow
@pytest.mark.parametrize("args, said", [
    (["--save=m.txt"], "--save=m.txt: give a path ending in .keras"),  # Keras refused it after
    (["--widths=8,x"], "--widths=8,x: give a comma list of integers, e.g. 16,32,64"),  # training
    (["--train_size=0"], "--train_size=0: give at least 1"),  # a ZeroDivisionError
    (["--widths=32,16,8"], "ModelConfig.widths must be non-decreasing")])
def test_the_fit_example_says_a_bad_argument_in_one_line_before_training(tmp_path, args, said):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "fit_fashion_mnist.py"),
                           "--synthetic", *args], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=dict(os.environ, PYTHONPATH=ROOT,
                                                 TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, \
        proc.stderr[-2000:]
    assert os.listdir(tmp_path) == []
