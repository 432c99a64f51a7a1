"""What README.md and docs/ promise about the programs' output, checked against the programs: the
progress line, one `error:` line on stderr with exit status 2 from every entry point under run/,
and what a run leaves in --model_dir (docs/training.md)."""
import glob
import json
import os
import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT, TINY, run_main

# docs/training.md: `step 2000/60000  loss 1.2345  xent 1.2001  lr 0.05  |grad| 0.842  1532.1 img/s
# eta 0:35:12`; with a clip or AGC, `|grad| 3.1 (bound 12% of steps)`
PROGRESS = re.compile(r"step \d+/\d+  loss \d+\.\d{4}  xent \d+\.\d{4}  lr [0-9.e+-]+  "
                      r"\|grad\| [0-9.e+-]+( \(bound \d+% of steps\))?  "
                      r"\d+\.\d img/s  eta \d+:\d\d:\d\d")
ARGS = [*TINY, "--eval_every=4"]


def _docs():
    for path in [os.path.join(ROOT, "README.md"), *glob.glob(os.path.join(ROOT, "docs", "*.md"))]:
        with open(path) as f:
            yield os.path.basename(path), f.read()


def test_progress_lines_in_the_docs_are_the_programs():
    shown = [(name, line) for name, text in _docs() for line in text.splitlines() if " eta " in line]
    assert shown  # docs/training.md shows one
    for name, line in shown:
        assert PROGRESS.search(line), (name, line)


@pytest.mark.slow
def test_a_run_prints_progress_and_leaves_lock_and_losses_as_documented(cli_run):
    """The session's 4-step run (conftest.py), logged and checkpointed every 2 steps."""
    run, stdout, _ = cli_run
    progress = [line for line in stdout.splitlines() if line.startswith("step ")]
    assert len(progress) == 2 and all(PROGRESS.fullmatch(line) for line in progress), stdout
    # `.lock` stays, naming its last holder; it is an flock, so it does not block the next run
    holder = (run / ".lock").read_text().strip()
    assert re.fullmatch(r"pid \d+ on host \S+ since [0-9-]+ [0-9:]+", holder), holder
    # a loss for each checkpoint a loop trained on from; none for the one the run ended at
    assert sorted(os.listdir(run / "ckpt")).count("ckpt-4.index") == 1
    assert sorted(json.loads((run / "ckpt" / "losses.json").read_text())) == ["0", "2"]


@pytest.mark.slow
def test_every_tensorboard_scalar_a_run_writes_is_in_the_training_guides_table(tmp_path,
                                                                               cli_run):
    """docs/training.md's TensorBoard table names every scalar of train/ and eval/ (a tag
    `family/<name>` by its family), for the BN-free net (which adds branch_bound/; the
    session's run) and the twin."""
    import tensorflow as tf
    with open(os.path.join(ROOT, "docs", "training.md")) as f:
        guide = f.read()
    table = guide[guide.index("### TensorBoard"):guide.index("### Progress")]
    tags = set()
    twin = tmp_path / "batch"
    proc = run_main("cifar_train.py", *ARGS, "--norm=batch", "--train_steps=4", "--log_every=2",
                   f"--model_dir={twin}")
    assert proc.returncode == 0, proc.stderr
    for run in (cli_run[0], twin):
        for path in glob.glob(str(run / "*" / "events.out.tfevents.*")):
            for event in tf.compat.v1.train.summary_iterator(path):
                tags |= {(os.path.basename(os.path.dirname(path)), v.tag)
                         for v in event.summary.value}
    assert {("train", "loss"), ("eval", "top1_error")} <= tags and any(
        t.startswith("branch_bound/") for _, t in tags), tags
    for where, tag in sorted(tags):
        name = tag.split("/")[0] + "/<" if "/" in tag else tag
        rows = [line for line in table.splitlines() if f"`{name}" in line]
        assert any(f"| {where}/ |" in row for row in rows), (where, tag)


def _without_tensorflow(tmp_path):
    """PYTHONPATH with a `tensorflow` that cannot be imported: what is said before it loads."""
    fake = tmp_path / "fake" / "tensorflow"
    fake.mkdir(parents=True, exist_ok=True)
    (fake / "__init__.py").write_text("raise ImportError('tensorflow imported')\n")
    return str(tmp_path / "fake")


def _one_error_line(proc, *fragments):
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), \
        (proc.returncode, proc.stderr)
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("script, args, fragment", [
    ("cifar_train.py", ["--widhts=8"], "Did you mean: widths"),
    ("cifar_train.py", ["--batch_size=x"], "--batch_size"),
    ("cifar_train.py", ["extra"], "unexpected arguments: extra"),
    ("imagenet_train.py", ["--strategy=fast"], "--strategy=fast"),
    ("ablate.py", ["--nonsense"], "nonsense"),
    ("report.py", [], "--root"),
    ("launch_local.py", ["--num_workers=two"], "--num_workers"),
    ("prepare_data.py", ["--dataset=mnist"], "--dataset=mnist"),
    ("prepare_data.py", [], "--dataset"),
    # a required flag missing, absl's bounds and flagfiles, arguments main() refuses: every
    # entry point starts through resnet_nobn.cli.start
    ("export.py", [], "missing --model_dir, --export_dir"),
    ("export.py", ["--export_dir=e"], "missing --model_dir"),
    ("predict.py", [], "missing --export_dir"),
    ("predict.py", ["--export_dir=e"], "image files"),
    ("ablate.py", [], "missing --root"),
    ("export.py", ["--model_dir=m", "--export_dir=e", "--checkpoint=-1"], "--checkpoint=-1"),
    ("export.py", ["--model_dir=m", "--export_dir=e", "extra"], "unexpected arguments: extra"),
    ("cifar_train.py", ["--flagfile={binary}"], "--flagfile"),
    ("export.py", ["--flagfile={binary}"], "--flagfile"),
    ("report.py", ["--flagfile={missing}"], "flagfile"),
    ("imagenet_train.py", ["--crop_padding=4"], "crop_padding"),  # CIFAR's augmentation only
    # a value of another entry point's: the error names that entry point, or what to do instead
    ("cifar_train.py", ["--dataset=imagenet2012"], "train it with python run/imagenet_train.py"),
    ("imagenet_train.py", ["--dataset=cifar100"], "train it with python run/cifar_train.py"),
    ("prepare_data.py", ["--dataset=image_folder"],
     "needs no preparing: train on it with python run/cifar_train.py --dataset=image_folder"),
    ("predict.py", ["--export_dir={missing}", "x.png"], "does not exist; make one with"),
])
def test_every_entry_point_says_a_flag_error_in_one_line_before_tensorflow(tmp_path, script, args,
                                                                            fragment):
    binary = tmp_path / "flags.bin"
    binary.write_bytes(bytes(range(256)))
    args = [a.format(binary=binary, missing=tmp_path / "missing") for a in args]
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "run", script), *args],
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=_without_tensorflow(tmp_path)))
    _one_error_line(proc, fragment)


@pytest.mark.parametrize("env, fragment", [
    ({"TF_CONFIG": "{not json"}, "TF_CONFIG"),
    ({"TF_CONFIG": '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}'},
     "TF_CONFIG"),
    ({"TF_CONFIG": '{"cluster": {"chief": ["a:1", "a:2"], "worker": ["a:3"]}, '
                   '"task": {"type": "worker", "index": 0}}'}, "at most one chief"),
    ({"RESNET_NOBN_CONNECT_TIMEOUT": "-1"}, "RESNET_NOBN_CONNECT_TIMEOUT"),  # no TF_CONFIG set
    ({"RESNET_NOBN_HEARTBEAT_TIMEOUT": "soon"}, "RESNET_NOBN_HEARTBEAT_TIMEOUT"),
])
def test_bad_cluster_settings_are_one_line_before_tensorflow_loads(tmp_path, env, fragment):
    base = {k: v for k, v in os.environ.items() if k != "TF_CONFIG" and not k.startswith("RESNET_NOBN")}
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "run", "cifar_train.py"), *ARGS,
                           f"--model_dir={tmp_path / 'run'}"], capture_output=True, text=True,
                          timeout=60, env=dict(base, PYTHONPATH=_without_tensorflow(tmp_path), **env))
    _one_error_line(proc, fragment)
    assert not (tmp_path / "run").exists()


def test_the_seconds_the_multiworker_guide_gives_are_the_codes():
    """docs/imagenet_and_multiworker.md: the launcher's grace before SIGKILL on SIGTERM and Ctrl-C
    (resnet_nobn/training/local_cluster.py's TERM_GRACE) and the heartbeat timeout through which a
    dead worker 1 was noticed (resnet_nobn/training/tf_config.py's default)."""
    from resnet_nobn.training import local_cluster
    from resnet_nobn.training.tf_config import TIMEOUTS
    text = " ".join(dict(_docs())["imagenet_and_multiworker.md"].split())
    assert f"so is Ctrl-C (exit 130); the workers get {local_cluster.TERM_GRACE:.0f} s to save" in text
    assert f"heartbeat (timeout {TIMEOUTS['RESNET_NOBN_HEARTBEAT_TIMEOUT']:.0f} s," in text
    assert "SIGKILLed worker 1 by the chief after 20 s and 40 s" in text  # not the 2-10 s once said


def test_data_dir_without_the_dataset_is_exactly_one_line_saying_how_to_prepare_it(tmp_path):
    proc = run_main("cifar_train.py", "--dataset=cifar100", f"--data_dir={tmp_path}",
                   f"--model_dir={tmp_path / 'run'}", "--train_steps=1")
    _one_error_line(proc, "no prepared cifar100",
                    "`python run/prepare_data.py --dataset=cifar100 --data_dir=DIR`")
    assert not (tmp_path / "run").exists()


def test_no_doc_or_message_names_a_command_this_environment_lacks():
    """`tfds build` needs apache_beam, which requirements.txt does not install: the command given
    is run/prepare_data.py."""
    tfds_build = re.compile(r"tfds build (cifar|imagenet)")
    paths = [os.path.join(ROOT, "README.md")] + [
        p for folder in ("resnet_nobn", "run", "docs", "bench", "experiments")
        for p in glob.glob(os.path.join(ROOT, folder, "**", "*.*"), recursive=True)
        if p.endswith((".py", ".md"))]
    for path in paths:
        with open(path) as f:
            assert not tfds_build.search(f.read()), path


@pytest.mark.parametrize("script, other", [("imagenet_train.py", ("CIFAR", "Table 1", "32x32",
                                                                  "image_folder")),
                                           ("cifar_train.py", ("ImageNet", "Section 4.2"))])
def test_each_training_entry_point_helps_with_its_own_recipe(script, other):
    proc = run_main(script, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "--widths:" in proc.stdout, proc.stdout
    for word in other:
        assert word.lower() not in proc.stdout.lower(), (word, proc.stdout)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_tilde_after_equals_is_the_home_directory(tmp_path, monkeypatch):
    """bash expands `~` only at the start of a word: `--model_dir=~/runs/x` reaches the program
    with its `~`, and means what `--model_dir ~/runs/x` means. The training run in process, the
    export's refusal a process."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    env = dict(os.environ, HOME=str(home), TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    with monkeypatch.context() as here:
        here.chdir(cwd)
        proc = run_main("cifar_train.py", *ARGS, "--train_steps=1", "--model_dir=~/runs/x",
                        env={"HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    assert (home / "runs" / "x" / "config.json").exists() and not os.listdir(cwd)
    # the other entry points' paths alike (checked before TensorFlow loads)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "run", "export.py"),
                           "--model_dir=~/runs/none", "--export_dir=~/export"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)
    _one_error_line(proc, str(home / "runs" / "none"))
    assert not os.listdir(cwd)
