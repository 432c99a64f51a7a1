"""The study entry point's main (run/ablate.py): the parsed flags become a grid of configurations,
checked before TensorFlow loads, then the study runs here one run after another
(resnet_nobn/study/launcher.py) with its progress lines (progress.py), or its commands are
printed (--print_commands), or its progress is read (--progress); at the end, one line per kind
of run left unfinished. The flags themselves: run/ablate.py.
"""
import dataclasses
import os
import shlex
import sys
import threading

from absl import flags, logging

from resnet_nobn import cli, console
from resnet_nobn.config import HEADS, INITS, NORMS
from resnet_nobn.errors import UserError, broken_link, first_line, write_failure
from resnet_nobn.files import read_json
from resnet_nobn.options import flag_words
from resnet_nobn.study import grid, hparams, launcher, progress
from resnet_nobn.training import recovery
from resnet_nobn.training.rundir import RESULTS

FLAGS = flags.FLAGS


def run(entry, train_flags):
    """Runs run/ablate.py, whose flags are defined (absl parses them, then `main`): `entry` is the
    training entry point each run is a subprocess of, `train_flags` the names of its flags."""
    cli.start(lambda argv: main(entry, train_flags))


def main(entry, train_flags):
    """absl main of run/ablate.py: the flags were parsed; here the study."""
    logging.set_verbosity(logging.WARNING)
    cli.main_wrapper(lambda: ablate(entry, train_flags))


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


def build_study(train_flags):
    """(configs, base_args) from the parsed flags; `train_flags`: the names of the training entry
    point's flags, the base flags."""
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
    base_args = [FLAGS[name].serialize() for name in train_flags
                 if FLAGS[name].present and name not in _FACTOR_FLAGS]
    return configs, base_args


def ablate(entry, train_flags):
    """The study the parsed flags give, checked, then run here one run after another (each a
    subprocess of the training entry point `entry`), its commands printed (--print_commands) or
    its progress read (--progress); UserError for what the user can fix."""
    configs, base_args = build_study(train_flags)
    if FLAGS.progress and FLAGS.print_commands:
        raise UserError("--progress and --print_commands: give one (--progress reads the runs "
                        "that --print_commands' jobs train)")
    if FLAGS.progress and not (os.path.exists(os.path.join(FLAGS.root, launcher.STUDY))
                               or any(os.path.isdir(cfg.model_dir) for cfg in configs)):
        raise UserError(f"--root={FLAGS.root}: no study there (no {launcher.STUDY}, none of its "
                        f"{len(configs)} runs begun); give the --root and flags the study was "
                        "started with")
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
                print(shlex.join(grid.command(cfg, entry, base_args) + launcher.launch_flags(
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
        states = launcher.run_study(configs, entry, base_args, timeout=FLAGS.run_timeout or None,
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
