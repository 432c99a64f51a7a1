"""run/cifar_train.py from the command line: bad input gets one clear line and a non-zero exit."""
import glob
import json
import math
import os
import signal
import subprocess
import sys

import pytest

from tests.helpers import CLI_RUN, ROOT, copy_of, flag_errors, run_cli, run_main

ARGS = CLI_RUN  # the flags of the `cli_run` fixture's run


def _assert_one_line_error(proc, *fragments):
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr


def test_help_explains_every_flag():
    proc = run_main("cifar_train.py", "--help")
    assert proc.returncode == 0, proc.stderr
    for flag in ("dataset", "data_dir", "use_synthetic_data", "norm", "init", "head",
                 "blocks_per_stage", "widths", "train_steps", "batch_size", "learning_rate",
                 "lr_boundaries", "weight_decay", "seed", "warmup_steps", "model_dir",
                 "eval_every", "eval_steps", "eval_only", "strategy", "checkpoint_every",
                 "xla", "mixed_precision"):
        assert f"--{flag}:" in proc.stdout or f"--[no]{flag}:" in proc.stdout, flag


def test_help_into_a_pipe_closed_early_exits_0_without_a_traceback():
    """`--help | head -2`: the reader closes the pipe after two lines."""
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "run", "cifar_train.py"), "--help"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before the help is written: every write fails with EPIPE
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and b"Traceback" not in err, err.decode()


def test_imagenet_flags_default_to_the_imagenet_recipe():
    """run/imagenet_train.py differs from run/cifar_train.py only by its recipe (Section 4.2)."""
    proc = run_main("imagenet_train.py", "--helpfull")
    defaults = {block.split(":")[0]: block for block in proc.stdout.split("\n  --")}
    for flag, default in (("dataset", "imagenet2012"), ("widths", "84,168,336,672"),
                          ("blocks_per_stage", "3,4,6,3"), ("strides", "2,2,2,2"),
                          ("stem_width", "84"), ("stem_kernel", "7"), ("stem_stride", "2"),
                          ("batch_size", "256"), ("learning_rate", "0.1"), ("lr_boundaries", ""),
                          ("lr_decay_factor", "0.94"), ("lr_decay_every", "10009"),
                          ("train_steps", "700000"), ("eval_every", "10000"), ("momentum", "0.9")):
        assert f"(default: '{default}')" in defaults[flag], (flag, defaults.get(flag))


@pytest.mark.slow
def test_tiny_run_trains_resumes_and_writes_results(cli_run, tmp_path):
    stdout, stderr = cli_run[1], cli_run[2]
    assert "step 4/4" in stdout and "img/s" in stdout and "eta" in stdout
    assert stderr == ("warning: KERAS_BACKEND=torch ignored: cifar_train.py runs on "
                      "TensorFlow (the library's network runs on other backends: "
                      "docs/backends.md)\n"), stderr
    run = copy_of(cli_run[0], tmp_path / "run")
    results = json.loads((run / "results.json").read_text())
    assert results["global_step"] == 4 and results["config"]["model"]["widths"] == [8, 16, 32]
    proc = run_main("cifar_train.py", *ARGS, "--train_steps=6", f"--model_dir={run}")
    assert proc.returncode == 0, proc.stderr
    assert "resumed from" in proc.stdout and "step 6/6" in proc.stdout
    assert json.loads((run / "results.json").read_text())["global_step"] == 6


def test_an_imagenet_data_dir_that_is_a_file_says_how_to_prepare_it(tmp_path):
    (tmp_path / "afile").write_text("")  # it said "does not exist", and no fix
    proc = run_main("imagenet_train.py", f"--data_dir={tmp_path / 'afile'}",
                   f"--model_dir={tmp_path / 'run'}", "--train_steps=1")
    _assert_one_line_error(proc, f"--data_dir={tmp_path / 'afile'} is not a directory; create it "
                           "with `python run/prepare_data.py --dataset=imagenet2012")
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_model_dir_of_another_architecture_is_refused(cli_run, tmp_path):
    run = copy_of(cli_run[0], tmp_path / "run")
    before = sorted(os.listdir(run / "ckpt"))
    results = (run / "results.json").read_text()
    wider = [a if not a.startswith("--widths") else "--widths=8,16,64" for a in ARGS]
    proc = run_main("cifar_train.py", *wider, "--train_steps=6", f"--model_dir={run}")
    _assert_one_line_error(proc, "different architecture", "widths")
    assert proc.returncode == 2
    assert sorted(os.listdir(run / "ckpt")) == before
    assert (run / "results.json").read_text() == results
    # under --eval_only too, and at once: said before TensorFlow loads, so before the device
    # line on stdout, and nothing touched (the lock was taken and rewritten with its pid)
    lock = (run / ".lock").read_bytes() if (run / ".lock").exists() else None
    for args in ((*wider, "--train_steps=6", f"--model_dir={run}"),
                 (*ARGS, f"--model_dir={tmp_path / 'none'}")):
        proc = run_main("cifar_train.py", *args, "--eval_only")
        _assert_one_line_error(proc, "different architecture" if args[-1].endswith("run")
                               else "does not exist; train first")
        assert proc.stdout == "", proc.stdout
    assert (run / "results.json").read_text() == results and not (tmp_path / "none").exists()
    assert ((run / ".lock").read_bytes() if (run / ".lock").exists() else None) == lock


def test_train_steps_below_the_run_is_refused_before_tensorflow_loads(cli_run, tmp_path):
    """Said from the checkpoint names, as the other refusals of a resume: before the device line
    on stdout, and with nothing in the run changed."""
    run = copy_of(cli_run[0], tmp_path / "run")
    files = {p: (run / p).read_bytes() for p in ("config.json", "results.json")}
    proc = run_main("cifar_train.py", *ARGS, "--train_steps=3", f"--model_dir={run}")
    _assert_one_line_error(proc, f"--train_steps=3 is below step 4 of the run in {run}; give "
                                 "--train_steps=4 or more")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert {p: (run / p).read_bytes() for p in files} == files


@pytest.mark.slow
def test_corrupt_checkpoints_are_skipped_and_none_restorable_is_refused(cli_run, tmp_path):
    run = copy_of(cli_run[0], tmp_path / "run")  # checkpoints at steps 0, 2 and 4
    # the newest checkpoint damaged: the run resumes from the newest one that restores, says so,
    # and never starts again at step 0
    with open(glob.glob(str(run / "ckpt" / "ckpt-4.data-*"))[0], "r+b") as f:
        f.truncate(100)
    (run / "ckpt" / "checkpoint").write_text("garbage {{{")
    proc = run_main("cifar_train.py", *ARGS, "--train_steps=6", f"--model_dir={run}")
    assert proc.returncode == 0, proc.stderr
    assert "skipped ckpt-4" in proc.stdout and "resumed from" in proc.stdout and "ckpt-2" in proc.stdout
    assert [h["step"] for h in json.loads((run / "results.json").read_text())["history"]] == [4, 6]
    # every checkpoint damaged: one line, exit 2, nothing overwritten
    for data in glob.glob(str(run / "ckpt" / "*.data-*")):
        with open(data, "r+b") as f:
            f.truncate(100)
    before = sorted(os.listdir(run / "ckpt"))
    proc = run_main("cifar_train.py", *ARGS, "--train_steps=8", f"--model_dir={run}")
    _assert_one_line_error(proc, "can be restored", "corrupt")
    assert proc.returncode == 2
    assert sorted(os.listdir(run / "ckpt")) == before


@pytest.mark.slow
def test_diverged_run_ends_with_retry_advice_that_trains_when_appended(tmp_path):
    command = [*ARGS, "--train_steps=12", "--learning_rate=1e9", "--checkpoint_every=1",
               f"--model_dir={tmp_path}"]
    proc = run_main("cifar_train.py", *command)
    _assert_one_line_error(proc, "NaN")
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("retry with: --"), proc.stderr
    advice = last[len("retry with: "):].split()
    assert advice and all(t.startswith("--") and "=" in t for t in advice)
    proc = run_main("cifar_train.py", *command, *advice)
    assert proc.returncode == 0, proc.stderr
    assert "taken before the blow-up" in proc.stdout and "step 12/12" in proc.stdout
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["global_step"] == 12 and results["rollbacks"][0]["resumed_from"] == 0
    assert all(math.isfinite(h["eval_loss"]) for h in results["history"])


@pytest.mark.slow
def test_after_a_second_divergence_the_advice_rolls_back_past_it_too(tmp_path):
    """Re-run without its advice, a run rolls back and diverges again where it did, with the same
    advice; appending the advice then resumed from the checkpoint on the way up that the first
    rollback had skipped (the new divergence read as resumed past) and results.json contradicted
    itself. It rolls back again, to the initialisation here."""
    command = ["--use_synthetic_data", "--stem_width=4", "--widths=4,8,8", "--blocks_per_stage=1",
               "--batch_size=16", "--log_every=50", "--checkpoint_every=100", "--train_steps=300",
               "--eval_every=300", f"--model_dir={tmp_path}"]  # at the paper's rate: NaN at 150
    for _ in range(2):
        proc = run_main("cifar_train.py", *command)
        assert proc.returncode == 2 and "at step 150" in proc.stderr, proc.stderr
    assert "resuming from ckpt-0, taken before the blow-up (deleted ckpt-100 after it)" in proc.stdout
    advice = proc.stderr.strip().splitlines()[-1][len("retry with: "):].split()
    proc = run_main("cifar_train.py", *command, *advice)
    assert proc.returncode == 0, proc.stderr
    assert "skipped ckpt-100 (taken on the way to the blow-up" in proc.stdout
    assert f"resumed from {tmp_path / 'ckpt' / 'ckpt-0'} at step 0" in proc.stdout
    results = json.loads((tmp_path / "results.json").read_text())
    assert [r["resumed_from"] for r in results["rollbacks"]] == [0, 0]
    assert [c["step"] for c in results["resume_changes"]] == [0]


def test_relative_directories_are_recorded_as_the_directories_they_name(tmp_path):
    """config.json recorded --model_dir and --data_dir as typed: an export run from another
    directory then looked for the data there, and its card said the dataset was not prepared.
    They are made absolute once, from where the command runs ('' stays unset)."""
    code = ("import json, sys; from absl import flags; from resnet_nobn import cli, recipes; "
            "cli.define_flags(recipes.cifar()); flags.FLAGS(sys.argv[1:]); "
            "c = cli.config_from_flags(flags.FLAGS); print(json.dumps([c.model_dir, c.data_dir]))")
    for args, expected in ((["--model_dir=runs/a", "--data_dir=../data"],
                            [str(tmp_path / "runs" / "a"), str(tmp_path.parent / "data")]),
                           (["--model_dir=/x/y", "--data_dir="], ["/x/y", ""])):
        out = subprocess.run([sys.executable, "-c", code, "x", *args], cwd=tmp_path, text=True,
                             capture_output=True, timeout=60, env=dict(os.environ, PYTHONPATH=ROOT))
        assert json.loads(out.stdout) == expected, out.stderr


# Flags that make no run, and what run/cifar_train.py says of each.
BAD_FLAGS = [
    (["--dataset=mnist"], "--dataset=mnist"),
    (["--batch_size=0"], "--batch_size=0"),
    (["--train_steps=-5"], "--train_steps=-5"),
    (["--learning_rate=0"], "--learning_rate must be positive"),
    (["--lr_boundaries=50000,30000"], "strictly increasing"),
    (["--widths=64,abc"], "--widths must be a comma list of positive integers, e.g. 64,128,256"),
    (["--blocks_per_stage=0"], "--blocks_per_stage must be a comma list of positive integers (or "
                               "one for every stage), e.g. 9,9,9"),
    (["--strides=0,1,1"], "--strides must be a comma list of positive integers, e.g. 1,2,2"),
    (["--blocks_per_stage=9,9"], "one entry per stage"),
    (["--widths=32,16,8"], "non-decreasing"),
    (["--norm=layer"], "--norm=layer"),
    # values past the old validators
    (["--momentum=nan"], "--momentum must be a finite number, e.g. 0.9"),
    (["--weight_decay=nan"], "--weight_decay must be a finite number, e.g. 0.0001"),
    (["--lr_decay_factor=nan"], "--lr_decay_factor must be a finite number, e.g. 0.1"),
    (["--learning_rate=inf"], "--learning_rate must be a finite number, e.g. 0.05"),
    (["--learning_rate=nan"], "--learning_rate must be a finite number, e.g. 0.05"),
    (["--strides=1,8,8"], "does not fit its 4x4 feature map"),
    (["--lr_decay_factor=0"], "--lr_decay_factor must be in (0, 1]"),
    (["--seed=-1"], "--seed=-1: -1 is not an integer in the range [0, 4294967295]"),
    (["--head_seed=4294967296"], "--head_seed must be in [0, 4294967295]"),
]


@pytest.fixture(scope="module")
def said_to_bad_flags(tmp_path_factory):
    """{arguments: (exit status, stderr)} of run/cifar_train.py given each of BAD_FLAGS, all in
    one process (helpers.flag_errors), with a `tensorflow` that cannot be imported: said before
    TensorFlow loads; and none of their --model_dir was made."""
    where = tmp_path_factory.mktemp("bad_flags")
    fake = where / "fake" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('tensorflow imported before the flags')\n")
    cases = [[*ARGS, f"--model_dir={where / f'run{i}'}", *args]
             for i, (args, _) in enumerate(BAD_FLAGS)]
    said = flag_errors("cifar_train.py", cases, env=dict(
        os.environ, PYTHONPATH=f"{where / 'fake'}{os.pathsep}{ROOT}"))
    assert not [p for p in os.listdir(where) if p.startswith("run")]
    return {tuple(args): s for (args, _), s in zip(BAD_FLAGS, said)}


@pytest.mark.parametrize("args, message", BAD_FLAGS)
def test_impossible_flags_are_one_line_before_tensorflow_loads(said_to_bad_flags, args, message):
    status, stderr = said_to_bad_flags[tuple(args)]
    lines = stderr.strip().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith("error: "), (status, stderr)
    assert message in lines[0], lines[0]


def test_an_impossible_flag_is_refused_by_the_command_before_anything_is_written(tmp_path):
    """BAD_FLAGS' contract from the command itself, in its own process (the other tests here run
    the entry point in process, tests.helpers.run_main): one line, exit status 2, no
    --model_dir."""
    proc = run_cli("cifar_train.py", *ARGS, f"--model_dir={tmp_path / 'run'}", "--batch_size=0")
    _assert_one_line_error(proc, "--batch_size=0")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [  # said by the trainer, once TensorFlow loaded
    (["--widths=60000,60000,60000"], "lower --widths"),
    (["--batch_size=100000000"], "lower --batch_size"),
    (["--model_dir="], "--model_dir is empty"),
])
def test_a_run_too_big_or_nowhere_is_refused_before_anything_is_written(tmp_path, args, message):
    proc = run_main("cifar_train.py", *ARGS, f"--model_dir={tmp_path / 'run'}", *args)
    _assert_one_line_error(proc, message)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("module", ["config", "cli", "recipes", "study.grid", "study.launcher",
                                    "study.report", "training.rundir", "training.recovery"])
def test_config_command_line_and_report_import_without_tensorflow(tmp_path, module):
    """The leaf modules: the config and its recipes, the command line, the study and its
    report load no TensorFlow, so flags are checked at once and the report runs anywhere."""
    fake = tmp_path / "fake" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('tensorflow imported')\n")
    proc = subprocess.run([sys.executable, "-c", f"import resnet_nobn.{module}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=f"{tmp_path / 'fake'}{os.pathsep}{ROOT}"))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_model_dir_or_data_dir_that_is_a_file_or_unwritable_gets_one_line(cli_run, tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    proc = run_main("cifar_train.py", *ARGS, f"--model_dir={a_file}")
    _assert_one_line_error(proc, "is a file")
    proc = run_main("cifar_train.py", *ARGS, "--model_dir=/proc/no/such/run")
    _assert_one_line_error(proc, "cannot write the run")
    proc = run_main("cifar_train.py", "--dataset=cifar10", f"--data_dir={a_file}",
                   f"--model_dir={tmp_path / 'run'}")
    _assert_one_line_error(proc, "is not a directory")
    damaged = tmp_path / "tfds" / "cifar10" / "3.0.2"
    damaged.mkdir(parents=True)
    (damaged / "dataset_info.json").write_text("{ garbage")
    proc = run_main("cifar_train.py", "--dataset=cifar10", f"--data_dir={tmp_path / 'tfds'}",
                   f"--model_dir={tmp_path / 'run'}")
    _assert_one_line_error(proc, "cifar10")
    assert proc.returncode == 2 and not (tmp_path / "run").exists()
    run = copy_of(cli_run[0], tmp_path / "run")
    (run / "results.json").write_text('"a string"')  # parses, but is not an object
    proc = run_main("cifar_train.py", *ARGS, "--train_steps=6", f"--model_dir={run}")
    assert proc.returncode == 0 and "unreadable" in proc.stdout, proc.stderr  # set aside, said so
    assert json.loads((run / "results.json").read_text())["global_step"] == 6
    assert len(glob.glob(str(run / "results.json.unreadable-*"))) == 1
    (run / "config.json").write_text("[1, 2]")
    _assert_one_line_error(run_main("cifar_train.py", *ARGS, "--train_steps=8", f"--model_dir={run}"),
                           "not a JSON object")


@pytest.mark.slow
def test_a_second_run_on_the_same_model_dir_is_refused(tmp_path):
    first = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "run", "cifar_train.py"), *ARGS, "--train_steps=100000",
         "--checkpoint_every=100000", f"--model_dir={tmp_path}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    try:
        said = "".join(first.stdout.readline() for _ in range(4))  # its start-up and plan lines,
        assert "step 2/" in said, said                              # then it is training
        proc = run_main("cifar_train.py", *ARGS, "--train_steps=4", f"--model_dir={tmp_path}")
        _assert_one_line_error(proc, "is in use by pid", str(first.pid))
        assert proc.returncode == 2
    finally:
        first.kill()
        first.wait()
    # the lock dies with its process: the next run resumes
    proc = run_main("cifar_train.py", *ARGS, "--train_steps=4", f"--model_dir={tmp_path}")
    assert proc.returncode == 0, proc.stderr


def test_ctrl_c_while_the_modules_load_is_one_line(tmp_path):
    """SIGINT arrives while the entry point imports its modules (a fake absl that is slow to load)."""
    fake = tmp_path / "fake" / "absl"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\n"
                                      "time.sleep(5)\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path / 'fake'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    for entry in ("cifar_train.py", "imagenet_train.py", "ablate.py"):
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "run", entry), "--root=x"],
                              capture_output=True, text=True, timeout=60, env=env,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        assert proc.returncode == 130 and proc.stderr.strip() == "interrupted", (entry, proc.stderr)


def test_an_error_line_quotes_tensorflows_informative_line_not_its_preamble():
    """errors.first_line, which every one-line error quoting TensorFlow uses."""
    from resnet_nobn.errors import first_line
    graph = ValueError("Graph execution error:\n\nDetected at node save/RestoreV2 defined at "
                       "(most recent call last):\n  File \"train.py\", line 1\n"
                       "Unsuccessful TensorSliceReader constructor: ckpt-4.index is truncated\n"
                       "\t [[{{node save/RestoreV2}}]]")
    assert first_line(graph) == ("Unsuccessful TensorSliceReader constructor: ckpt-4.index is "
                                 "truncated")
    eager = RuntimeError("{{function_node __wrapped__CollectiveBcastSend_device_/job:worker}} "
                         "Collective ops is aborted by: Error reported from /job:worker/task:1\n"
                         "/job:worker/replica:0/task:1 [Op:CollectiveBcastSend]")
    assert first_line(eager) == ("Collective ops is aborted by: Error reported from "
                                 "/job:worker/task:1")
    assert first_line(KeyError()) == "KeyError"
    assert first_line(OSError("x" * 500), 160) == "x" * 160


@pytest.mark.parametrize("error, fix", [
    (OSError(28, "No space left on device", "/nowhere/f"), "free space there or give another --root"),
    (OSError(13, "Permission denied", "/nowhere/f"), "make it writable or give another --root"),
    (RuntimeError("{{function_node x}} /nowhere/f; Read-only file system"),
     "make it writable or give another --root"),
    (OSError(20, "Not a directory", "/nowhere/f"),
     "move what stands in its path away or give another --root"),
])
def test_a_failed_write_is_given_the_fix_for_its_cause(error, fix):
    """errors.write_failure: a full disk asks for space, a refusal for permission, a file in the
    way for moving it; each line names the file and ends with that fix alone."""
    from resnet_nobn.errors import write_failure
    said = write_failure(error, "/nowhere", "give another --root")
    assert said.endswith("; " + fix) and "/nowhere/f" in said, said


def test_one_formatter_and_one_blocks_parser_for_every_flag_value():
    """cli.flag_text writes a value as its flag says it (the advice, the model card, the flag
    defaults); cli.parse_blocks reads --blocks_per_stage for the command line and the study."""
    from resnet_nobn import cli
    from resnet_nobn.study import grid
    assert [cli.flag_text(v) for v in (1.0, 0.05, True, (64, 128), [1, 2], "none")] == [
        "1", "0.05", "true", "64,128", "1,2", "none"]
    assert cli.parse_blocks("3", 4) == (3, 3, 3, 3) and cli.parse_blocks("9,", 3) == (9, 9, 9)
    for text in ("3,4,6,3", "3-4-6-3", "3:4:6:3"):
        assert cli.parse_blocks(text, 4) == grid.parse_blocks(text, 4) == (3, 4, 6, 3)
    assert cli.parse_blocks("-1", 3) == (-1, -1, -1)  # a negative count: refused by its checks
    with pytest.raises(ValueError, match="needs 1 or 3 positive entries"):
        grid.parse_blocks("-1", 3)
    assert cli.blocks_text((9, 9, 9)) == "9" and grid.blocks_text((3, 4, 6, 3)) == "3-4-6-3"
