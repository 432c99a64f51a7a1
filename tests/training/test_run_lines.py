"""What a command-line run says of itself: a plan line before its first step (the network's
parameters, the dataset, the steps and batch, when its time is estimated), the estimate once a
loop without compiling is timed, and one closing line with results.json and the export command
that run/export.py takes."""
import json
import os
import re
import shlex
import types

from resnet_nobn.training import run_lines, trainer
from resnet_nobn.training.run_lines import closing_line
from tests.helpers import ROOT, tiny_config


def test_the_cli_run_says_its_plan_before_the_first_step_and_ends_with_where_its_results_are(
        cli_run):
    run, stdout, _ = cli_run
    lines = stdout.splitlines()
    plan = [i for i, line in enumerate(lines) if line.startswith("plan: ")]
    first_step = next(i for i, line in enumerate(lines) if line.startswith("step "))
    assert len(plan) == 1 and plan[0] < first_step, stdout
    recorded = json.loads((run / "results.json").read_text())["trainable_params"]
    assert lines[plan[0]] == (
        f"plan: 4 steps of batch 8 on synthetic images shaped as cifar10's; a network of "
        f"{recorded:,} trainable parameters (widths 8,16,32, 1/1/1 blocks per stage, "
        "--init=identity, --norm=none); 1 evaluation; too few steps to time before the end")
    assert lines[-1] == closing_line(str(run)), stdout
    assert lines[-1].startswith(f"done: results in {run}/results.json")
    command = shlex.split(lines[-1].split("export with: ")[1])
    assert command[:2] == ["python", "run/export.py"]
    flags = dict(a[2:].split("=", 1) for a in command[2:])
    assert flags == {"model_dir": str(run), "export_dir": f"{run}_export"}
    source = open(os.path.join(ROOT, "run", "export.py")).read()
    assert all(f'DEFINE_string("{name}"' in source for name in flags)  # run/export.py's flags


def test_the_closing_line_quotes_a_path_for_the_shell():
    line = closing_line("/tmp/my runs/a")
    assert line.endswith("--model_dir='/tmp/my runs/a' --export_dir='/tmp/my runs/a_export'")


def _loops(**kw):
    """`timed_at` of a run of tiny_config(**kw), with the trainer's loop_length."""
    fake = types.SimpleNamespace(cfg=tiny_config("/nowhere", **kw))
    return lambda step: run_lines.timed_at(
        fake.cfg, step, lambda s: trainer.Trainer.loop_length(fake, s))


def test_the_estimate_times_the_second_loop_whose_time_holds_no_compiling():
    assert _loops(train_steps=100, log_every=10)(0) == 20
    assert _loops(train_steps=100, log_every=10)(35) == 50  # a resume: its first loop is 35-40
    assert _loops(train_steps=100, log_every=10, steps_per_loop=2)(0) == 4
    assert _loops(train_steps=20, log_every=10)(0) is None  # the second loop ends the run
    assert _loops(train_steps=4, log_every=2)(0) is None


def test_the_estimate_line_is_the_steps_left_at_the_timed_speed():
    cfg = tiny_config("/nowhere", train_steps=80_000, eval_every=10_000)
    line = run_lines.estimate_line(cfg, 200, 100, 25.0)
    assert line == ("estimate: about 5:32:30 for the 79,800 steps left, at the 0.25 s a step of "
                    "steps 101-200 (the 8 evaluations and the checkpoints not counted)")
    assert run_lines.estimate_line(tiny_config("/nowhere", train_steps=30), 20, 10, 0.1) \
        .startswith("estimate: about 0.1 s for the 10 steps left")
    assert [run_lines.evaluations_left(tiny_config("/n", train_steps=25, eval_every=10), s)
            for s in (0, 10, 19, 20, 25)] == [3, 2, 2, 1, 0]


def test_the_plan_line_of_a_resumed_run_on_real_data_counts_epochs():
    cfg = tiny_config("/nowhere", use_synthetic_data=False, dataset="cifar10", train_steps=80_000,
                      batch_size=128, eval_every=10_000)
    line = run_lines.plan_line(cfg, 50_000, 13_538_736, 40_000, 40_100)
    assert line.startswith("plan: steps 40,001-80,000 of batch 128 on cifar10 (50,000 training "
                           "images, 102.4 epochs); a network of 13,538,736 trainable parameters")
    assert line.endswith("; 4 evaluations; a time estimate follows step 40,100")
    assert re.search(r"\(60,000 training images, 0\.0053 epochs\)", run_lines.plan_line(
        tiny_config("/n", use_synthetic_data=False, dataset="fashion_mnist", train_steps=40),
        60_000, 10, 0, None))
