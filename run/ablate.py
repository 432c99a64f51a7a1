r"""Runs an ablation study: one training run per point of a grid of factors, all under one root.

    python run/ablate.py --root=/tmp/study --vary_norm=none,batch --seeds=0,1 \
        --use_synthetic_data --widths=16,32,64 --stem_width=16 --blocks_per_stage=1 \
        --train_steps=1000 --batch_size=64 --learning_rate=0.01

Every flag of the training entry point (run/cifar_train.py, or run/imagenet_train.py with
--dataset=imagenet2012) is a base flag, the same for every run; the --vary_* flags and --seeds
list the values of the factors, and the study runs their product. Each run trains in its own
subprocess into ROOT/<dataset>/<norm_init_head_blocks>/seed-<k>; finished runs are skipped and
interrupted ones (also after a SIGKILL or SIGTERM to this command) resume from their last
checkpoint, so re-running the same command continues the study. A run that diverges stops with
its `retry with:` flags; with --follow_retry_advice it continues once with them. `tensorboard --logdir ROOT` compares the runs (HParams tab); `python run/report.py
--root=ROOT` prints the table. With --print_commands, nothing runs: one shell command per run
the study would launch now is printed, to submit as one cluster job each (stderr says why each
other one is not). While it trains, a line per running run (its step, last loss, time left) and
one for the study come every --progress_every seconds; --progress prints them once, for the jobs
of --print_commands. `--helpfull` lists the base flags.
"""
import _start  # noqa: F401  (first: the repository on sys.path, quiet TensorFlow, Ctrl-C)

import dataclasses
import importlib.util
import os
import shlex
import sys
import threading

from absl import flags, logging

from resnet_nobn.data.datasets import DATASETS
from resnet_nobn.study import grid, hparams, launcher, progress

REPO = _start.REPO


def _dataset_from_argv(argv):
    for i, a in enumerate(argv):
        if a.startswith("--dataset="):
            return a.split("=", 1)[1]
        if a == "--dataset" and i + 1 < len(argv):
            return argv[i + 1]
    return None


# The training entry point of the dataset's recipe defines the base flags, with its own defaults
# (CIFAR's or ImageNet's); an unknown --dataset is refused by its flags.
_DATASET = DATASETS.get(_dataset_from_argv(sys.argv))
ENTRY = os.path.join(REPO, _DATASET.entry_point if _DATASET else "run/cifar_train.py")
_before = set(flags.FLAGS)
_spec = importlib.util.spec_from_file_location("_study_entry_point", ENTRY)
_spec.loader.exec_module(importlib.util.module_from_spec(_spec))
TRAIN_FLAGS = sorted(set(flags.FLAGS) - _before)

from resnet_nobn import cli, console
from resnet_nobn.errors import UserError, broken_link, first_line, write_failure
from resnet_nobn.files import read_json
from resnet_nobn.options import flag_words
from resnet_nobn.training import recovery
from resnet_nobn.training.rundir import RESULTS

flags.DEFINE_string("root", None, "Directory of the study: one subdirectory per run, the HParams "
                    "experiment summary, and the report.")
flags.DEFINE_list("vary_norm", [], "Values of --norm to run (none, batch); default: the base --norm.")
flags.DEFINE_list("vary_init", [], "Values of --init to run (auto, identity, standard, he, "
                  "fixup, skipinit); default: the base --init (auto: identity without BN, he with "
                  "BN). fixup and skipinit are run without BN only.")
flags.DEFINE_list("vary_head", [], "Values of --head to run (auto, random, trained); default: the "
                  "base --head (auto: trained with --init=fixup, else random).")
flags.DEFINE_list("vary_blocks", [], "Values of --blocks_per_stage to run: a number for every "
                  "stage, or per-stage numbers joined by '-' (e.g. 1,3,5 or 3-4-6-3); default: "
                  "the base --blocks_per_stage.")
flags.DEFINE_list("vary_relu_leakiness", [], "Values of --relu_leakiness to run, e.g. 0.1,0 "
                  "(the fork's leaky ReLU and a plain ReLU); default: the base --relu_leakiness.")
flags.DEFINE_list("vary_learning_rate", [], "Values of --learning_rate to run, e.g. "
                  "0.05,0.02,0.01; default: the base --learning_rate.")
flags.DEFINE_list("seeds", [], "Seeds to run, e.g. 0,1,2; default: the base --seed.")
flags.DEFINE_float("run_timeout", 0, "Kill a run after this many seconds (0: no limit); it is "
                   "marked 'timeout' and resumes on the next invocation with --retry_failed.",
                   lower_bound=0)
flags.DEFINE_bool("retry_failed", False, "Re-run runs whose last attempt failed (a crash, a "
                  "timeout); by default they are skipped and reported as failed. A diverged run "
                  "would only diverge again: see --follow_retry_advice.")
flags.DEFINE_bool("follow_retry_advice", False, "A run that diverges continues once, from the "
                  "checkpoint its trainer takes before the blow-up, with the flags of its own "
                  "`retry with:` line; its results.json records the divergence step and the "
                  "changed flags, and the report marks its row.")
flags.DEFINE_bool("print_commands", False, "Print one command per run the study would launch "
                  "now (for one cluster job each; a diverged or failed run only with "
                  "--follow_retry_advice or --retry_failed) and exit, instead of running them "
                  "here one after another.")
flags.DEFINE_float("progress_every", progress.PERIOD_S, "While the study trains, print each "
                   "running run's step, last loss and time left, and the study's time left, every "
                   "this many seconds (0: never).", lower_bound=0)
flags.DEFINE_bool("progress", False, "Print those lines once, for every run begun and not "
                  "finished (e.g. those a cluster runs after --print_commands), from the runs' "
                  "train.log and results.json, and exit; nothing runs, nothing is written.")
flags.mark_flag_as_required("root")
FLAGS = flags.FLAGS

_FACTOR_FLAGS = ("norm", "init", "head", "blocks_per_stage", "relu_leakiness", "learning_rate",
                 "seed", "model_dir")


def _choices(values, allowed, flag):
    bad = [v for v in values if v not in allowed]
    if bad:
        raise UserError(f"--{flag}: {', '.join(bad)} not in {', '.join(allowed)}")
    return values


def _integer(text):
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an integer") from None


def _number(text):
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None


def _values(flag, parse, check):
    """The values of the list flag --`flag`, each read by `parse` and held to the configuration's
    own bounds by `check` (it builds the base configuration with the value); UserError naming the
    flag and the value that is not one."""
    values = []
    for text in FLAGS[flag].value:
        try:
            value = parse(text)
            check(value)
        except ValueError as e:  # a ConfigError too: said in the words of the command line
            raise UserError(f"--{flag}: {flag_words(e)}") from None
        values.append(value)
    return values


def build_study():
    """(configs, base_args) from the parsed flags."""
    from resnet_nobn.config import HEADS, INITS, NORMS
    if FLAGS["model_dir"].present:
        raise UserError("--model_dir is set per run by the study; use --root")
    if not FLAGS.root.strip():
        raise UserError("--root is empty; give the directory of the study (e.g. --root=/tmp/study)")
    if broken_link(FLAGS.root, "--root"):
        raise UserError(broken_link(FLAGS.root, "--root"))
    if os.path.exists(FLAGS.root) and not os.path.isdir(FLAGS.root):
        raise UserError(f"--root={FLAGS.root} is a file, not a directory; give another path")
    base = cli.config_from_flags(FLAGS)
    stages = len(base.model.widths)
    norms = _choices(FLAGS.vary_norm or [FLAGS.norm], NORMS, "vary_norm")
    inits = _choices(FLAGS.vary_init or [FLAGS.init], ("auto",) + INITS, "vary_init")
    heads = _choices(FLAGS.vary_head or [FLAGS.head], ("auto",) + HEADS, "vary_head")
    with_model = lambda **v: dataclasses.replace(base, model=dataclasses.replace(base.model, **v))
    blocks = (_values("vary_blocks", lambda t: grid.parse_blocks(t, stages),
                      lambda v: with_model(blocks_per_stage=v)) or [base.model.blocks_per_stage])
    seeds = _values("seeds", _integer, lambda v: dataclasses.replace(base, seed=v)) or [base.seed]
    leakiness = _values("vary_relu_leakiness", _number, lambda v: with_model(relu_leakiness=v))
    rates = _values("vary_learning_rate", _number,
                    lambda v: dataclasses.replace(base, learning_rate=v))
    configs = grid.make_grid(base, os.path.abspath(FLAGS.root), norms, inits, heads, blocks, seeds,
                              leakiness=leakiness, learning_rates=rates)
    if not configs:  # make_grid drops the points that cannot exist: here, all of them
        raise UserError(f"the grid has no run: init {','.join(inits)} runs without BN only and "
                        f"the study's norm is {','.join(norms)}; add none to --vary_norm or "
                        "another value to --vary_init")
    base_args = [FLAGS[name].serialize() for name in TRAIN_FLAGS
                 if FLAGS[name].present and name not in _FACTOR_FLAGS]
    return configs, base_args


def run():
    configs, base_args = build_study()
    if FLAGS.progress and FLAGS.print_commands:
        raise UserError("--progress and --print_commands: give one (--progress reads the runs "
                        "that --print_commands' jobs train)")
    if FLAGS.progress:  # a reading of the runs' files; the study's root is not checked nor claimed
        for line in progress.lines(configs, FLAGS.root, every=True, **_relaunches()):
            print(line)
        return
    varied = [k for k in grid.OPTIONAL if FLAGS[f"vary_{k}"].value]  # named in the run dirs
    try:
        for cfg in configs:
            launcher.check_compatible(cfg)
        launcher.claim_root(FLAGS.root, configs[0], varied, write=not FLAGS.print_commands)
    except ValueError as e:
        raise UserError(str(e)) from None
    except OSError as e:
        raise UserError(write_failure(e, FLAGS.root, "give another --root")) from None
    if FLAGS.print_commands:  # the runs the study would launch now, why not the others; a dry
        for cfg in configs:   # run: nothing written (each launched run writes its own HParams)
            why = launcher.skipped(cfg, launcher.run_state(cfg), FLAGS.retry_failed,
                                   FLAGS.follow_retry_advice)
            if why:
                print(f"# {cfg.model_dir}: {why}", file=sys.stderr, flush=True)
            else:
                print(shlex.join(grid.command(cfg, ENTRY, base_args) + launcher.launch_flags(
                    cfg, FLAGS.follow_retry_advice)))
        return
    with console.quiet_stderr():  # TensorFlow's start-up lines (the HParams summaries need it)
        import tensorflow as tf
        from tensorboard.plugins.hparams import api  # noqa: F401
    tf.get_logger().setLevel("ERROR")
    try:
        hparams.write_hparams_config(FLAGS.root, configs)
    except (OSError, tf.errors.OpError) as e:
        raise UserError(write_failure(e, FLAGS.root, "give another --root")
                        or f"cannot write the study in --root={FLAGS.root}: {first_line(e)}") from None
    print(f"study: {len(configs)} run{'s' if len(configs) > 1 else ''} under {FLAGS.root}",
          flush=True)
    with progress.Ticker(configs, FLAGS.root, _say, FLAGS.progress_every, lock=_SAY,
                         **_relaunches()):
        states = launcher.run_study(configs, ENTRY, base_args, timeout=FLAGS.run_timeout or None,
                                    log=_say, **_relaunches())
    by_state = {}
    for d, s in states.items():
        by_state.setdefault(s, []).append(d)
    running = by_state.get("running", [])
    print(f"study: {len(by_state.get('finished', []))} of {len(states)} runs finished"
          f"{f', {len(running)} running in another process' if running else ''}; "
          f"report: python run/report.py --root={FLAGS.root}", flush=True)
    diverged = by_state.get("diverged", [])
    again = [d for d in diverged if recovery.followed_flags(read_json(os.path.join(d, RESULTS)))]
    problems = [_unfinished([d for d in diverged if d not in again], "diverged"),
                _unfinished(again, "diverged again"), _unfinished(by_state.get("failed", []), "failed")]
    if any(problems):
        raise UserError("; ".join(p for p in problems if p))
    if running:
        raise UserError(f"{len(running)} run(s) are being trained by another process (e.g. "
                        f"{running[0]}); re-run this command once it ends to finish the study")


def _relaunches():
    """The flags that say which diverged and failed runs the study launches again, as the
    launcher and the progress lines (what they count in the time left) take them."""
    return dict(retry_failed=FLAGS.retry_failed, follow_advice=FLAGS.follow_retry_advice)


_SAY = threading.RLock()  # re-entrant: the progress thread holds it around its lines


def _say(line):
    """One line to stdout, whole: the study's and the progress thread's lines never interleave."""
    with _SAY:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _unfinished(dirs, state):
    """What to do about the study's runs in `state`, in a few words ('' if none)."""
    if not dirs:
        return ""
    where = f"see train.log in {dirs[0]}{' and others' if len(dirs) > 1 else ''}"
    if state == "failed":
        return f"{len(dirs)} run(s) failed or timed out ({where}); --retry_failed re-runs them"
    if state == "diverged again":
        return (f"{len(dirs)} run(s) diverged again after following their retry advice ({where}); "
                "the report lists them")
    return (f"{len(dirs)} run(s) diverged ({where}); --follow_retry_advice continues each once "
            "from before its blow-up with the flags of its own `retry with:` line")


def main(argv):
    logging.set_verbosity(logging.WARNING)
    cli.main_wrapper(run)


if __name__ == "__main__":
    cli.start(main)
