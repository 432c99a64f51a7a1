"""Which learning rate trains without blowing up, at which depth: the paper's net against its BN
twin, Fixup and SkipInit, on real images (docs/stability.md).

For each network and depth, the learning rates 0.1, 0.05, 0.02, 0.01, 0.005 are tried from the
largest down, each for `--steps` steps through the users' own command (run/cifar_train.py); the
first that ends without a non-finite loss is the largest stable rate, and the smaller ones are not
run. Every run has its own model_dir under --root, launched as a study launches its runs: an
interrupted sweep resumes where it stopped. `--report` prints the table and draws the figure.

A run directory under --root that holds a run of other settings (widths, batch size, dataset, ...:
its name does not say them) is refused before anything trains, as are flags that make no run
(--steps or --batch_size below 1, ...): one `error:` line, exit status 2. A run that fails prints
the last `error:` line of its train.log, and the script then exits with status 1.

    python run/prepare_data.py --dataset=fashion_mnist --data_dir=/tmp/fmnist
    python experiments/stability/stability.py --data_dir=/tmp/fmnist --root=/tmp/stability --blocks=1,9
    python experiments/stability/stability.py --root=/tmp/stability --report --figure=docs/results/stability.png
    python experiments/stability/stability.py --data_dir=/tmp/fmnist --root=/tmp/long --long --blocks=9 \
        --nets=paper_clip1,bn --seeds=0,1 --learning_rate=0.05,0.1 --steps=1500 --batch_size=32
    python experiments/stability/stability.py --root=/tmp/long --long --report --blocks=9 --nets=paper_clip1,bn \
        --seeds=0,1 --learning_rate=0.05,0.1 --steps=1500

`--long` trains each net for --steps steps at each rate and seed, tested on the whole test split;
`--schedule`: the rate /10 at 50% and 83% of the steps (the paper's 30k and 50k of 60k), under
--root/schedule. `--report --long --figure=F` draws every --long run's loss, largest bound
||C2|| ||C1|| and largest branch norm against steps."""
import argparse
import itertools
import math
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from resnet_nobn.cli import flag_text  # noqa: E402  (none imports TensorFlow)
from resnet_nobn.data.datasets import DATASETS  # noqa: E402
from resnet_nobn.errors import UserError  # noqa: E402
from resnet_nobn.files import atomic_file, read_json  # noqa: E402
from resnet_nobn.training.recovery import (REMEDIES, WARMUP, followed_flags,  # noqa: E402
                                         pending_divergence, warmup_rule)
from resnet_nobn.training.rundir import CONFIG, RESULTS, TRAIN  # noqa: E402

RATES = (0.1, 0.05, 0.02, 0.01, 0.005)
PAPER = ["--norm=none", "--init=identity"]
NETS = {  # name -> flags; every activation a leaky ReLU of slope 0.1 (the fork's) unless said
    "paper": PAPER,
    "paper_relu": PAPER + ["--relu_leakiness=0"],
    "bn": ["--norm=batch", "--init=he"],
    "fixup": ["--norm=none", "--init=fixup"],  # as published: Fixup's trained head, lr/10 scalars
    "skipinit": ["--norm=none", "--init=skipinit"],
    # Section 2's regime kept by construction: every block's ||C2|| ||C1|| <= tau
    **{f"paper_tau{t}": PAPER + [f"--max_branch_norm={t}"] for t in ("0.1", "1", "3", "10")},
    "paper_tau1_clip1": PAPER + ["--max_branch_norm=1", "--clip_norm=1"],  # and remedies that keep
    # the paper's net (recovery.py; {warmup}: warmup_rule's steps; a lower rate is `paper` run
    # at that --learning_rate)
    **{name: PAPER + [f"--{k}={{warmup}}" if v == WARMUP else f"--{k}={flag_text(v)}"
                      for k, v in flags.items()]
       for name, (flags, _) in REMEDIES.items() if "learning_rate" not in flags},
    # the paper's net; where it diverges, re-run with its own `retry with:` flags (same model_dir)
    "paper_advice": PAPER,
    "paper_head_trained": PAPER + ["--head=trained"],  # the paper's net with a trained head
}


def run_dir(root, net, blocks, lr, seed=0):
    """A sweep run's model_dir (seed 0's without a seed in its name)."""
    return os.path.join(root, f"{net}_b{blocks}" + (f"_s{seed}" if int(seed) else ""), f"lr{lr}")


def rates(args):
    """--learning_rate as floats (with --long it may be a comma list)."""
    return [float(lr) for lr in args.learning_rate.split(",")]


def long_dir(root, net, blocks, lr, seed):
    return os.path.join(root, f"{net}_b{blocks}_s{seed}", f"lr{lr}")


def long_dir_of(args, net, blocks, lr, seed):
    """A --long run's model_dir; --schedule runs have their own tree under --root."""
    return long_dir(os.path.join(args.root, "schedule") if args.schedule else args.root, net,
                    blocks, lr, seed)


def outcome(model_dir, steps):
    """'stable', 'diverged at step N', 'diverged at step N, then <the flags it resumed with>'
    (finished, or with ': not finished'), or None (not run / unfinished)."""
    diverged = pending_divergence(model_dir)
    if diverged is not None:
        return f"diverged at step {diverged.get('step')}"
    results = read_json(os.path.join(model_dir, RESULTS)) or {}
    finished = results.get("global_step", 0) >= steps
    if results.get("rollbacks"):  # it diverged, and resumed (paper_advice: with its advice)
        return (f"diverged at step {results['rollbacks'][0]['diverged_at']}, then "
                f"{' '.join(followed_flags(results))}"
                + ("" if finished else ": not finished"))
    return "stable" if finished else None


def failure(model_dir):
    """What a run that trained and did not finish says: 'failed: ' and the last `error:` line of
    its train.log (the trainer's own words), or where to look if it has none."""
    try:
        with open(os.path.join(model_dir, "train.log"), errors="replace") as f:
            errors = [line.strip() for line in f if line.startswith("error:")]
    except OSError:
        errors = []
    return f"failed: {errors[-1]}" if errors else (
        f"failed (no error line; see {os.path.join(model_dir, 'train.log')})")


def command(args, model_dir, net, blocks, lr, seed, eval_steps, log_every):
    """The users' command (run/cifar_train.py) of one run, as [python, script, flags...]."""
    boundaries = (args.steps // 2, round(args.steps * 5 / 6)) if args.schedule else ()
    warmup = warmup_rule(args.steps, boundaries)
    cmd = [sys.executable, os.path.join(ROOT, "run", "cifar_train.py"), f"--dataset={args.dataset}",
           f"--data_dir={args.data_dir}", f"--model_dir={model_dir}",
           f"--widths={args.widths}", f"--stem_width={args.stem_width or args.widths.split(',')[0]}",
           f"--blocks_per_stage={blocks}", f"--batch_size={args.batch_size}",
           f"--learning_rate={lr}", f"--train_steps={args.steps}",
           "--lr_boundaries=" + ",".join(map(str, boundaries)),
           f"--eval_every={args.steps}", f"--eval_steps={eval_steps}", "--checkpoint_every=100",
           f"--log_every={log_every}", f"--seed={seed}"] + [
               f.format(warmup=warmup) for f in NETS[net]]
    return cmd


def train(args, model_dir, net, blocks, lr, seed, eval_steps, log_every, log_mode):
    """One run of the users' command (run/cifar_train.py) for --steps steps, at a constant rate or
    (--schedule) /10 at 50% and 83% of them, tested at the end on `eval_steps` batches (0: all),
    launched by the study's `launcher.run_study` (a partial run resumes; `paper_advice`, once
    diverged, goes on with its `retry with:` flags); its output in model_dir/train.log."""
    from resnet_nobn.console import quiet_stderr
    from resnet_nobn.study import launcher
    cmd = command(args, model_dir, net, blocks, lr, seed, eval_steps, log_every)
    os.makedirs(model_dir, exist_ok=True)
    if log_mode == "w":
        open(os.path.join(model_dir, "train.log"), "w").close()
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"  # the runs' train.log without TensorFlow's lines
    try:
        with quiet_stderr():  # the start-up lines of TensorFlow, which writes the run's HParams
            launcher.run_study([config_of(cmd)], cmd[1], cmd[2:], retry_failed=True,
                               follow_advice=net == "paper_advice", log=lambda line: None)
    except UserError as e:  # a write of the run's files that failed: the disk, a file in the way
        refuse(str(e))


def sweep_rates(args):
    """--rates as floats, largest first."""
    return sorted((float(r) for r in args.rates.split(",")), reverse=True)


def sweep(args, net, blocks, seed):
    """(the largest stable rate or None, whether a run failed): a failed run ends the sweep, as
    it tells nothing of the smaller rates."""
    for lr in sweep_rates(args):
        model_dir = run_dir(args.root, net, blocks, lr, seed)
        result = outcome(model_dir, args.steps)
        if result is None:
            train(args, model_dir, net, blocks, lr, seed, eval_steps=args.eval_steps,
                  log_every=10, log_mode="w")
            result = outcome(model_dir, args.steps)
        print(f"{net:<10} blocks {blocks}  lr {lr:<6} seed {seed}  {result or failure(model_dir)}",
              flush=True)
        if result is None:
            return None, True
        if result == "stable":
            return lr, False
    return None, False


def train_long(args, net, blocks, lr, seed):
    """One `--steps`-step run at rate `lr`, evaluated on the whole test split at the end; whether
    it failed."""
    model_dir = long_dir_of(args, net, blocks, lr, seed)
    if outcome(model_dir, args.steps) is None:
        train(args, model_dir, net, blocks, lr, seed, eval_steps=0, log_every=50, log_mode="a")
    result = outcome(model_dir, args.steps)
    print(f"{net:<10} blocks {blocks}  lr {lr}  seed {seed}  {result or failure(model_dir)}",
          flush=True)
    return result is None


def planned(args):
    """Every run this invocation may train, in the order it trains them: (model_dir, command)."""
    blocks, nets = [int(b) for b in args.blocks.split(",")], args.nets.split(",")
    if args.long:  # as train_long runs them
        runs = [(long_dir_of(args, n, b, lr, int(s)), n, b, lr, int(s), 0, 50) for b, n, lr, s
                in itertools.product(blocks, nets, rates(args), args.seeds.split(","))]
    else:  # as sweep runs them
        runs = [(run_dir(args.root, n, b, lr, int(s)), n, b, lr, int(s), args.eval_steps, 10)
                for b, n, s, lr in itertools.product(blocks, nets, args.seed.split(","),
                                                     sweep_rates(args))]
    return [(d, command(args, d, n, b, lr, s, eval_steps=e, log_every=k))
            for d, n, b, lr, s, e, k in runs]


def config_of(cmd):
    """The TrainConfig run/cifar_train.py makes of the flags of `cmd`, by its own flag parsing;
    UserError where they make none."""
    from absl import flags

    from resnet_nobn import cli, recipes
    if "train_steps" not in flags.FLAGS:
        cli.define_flags(recipes.cifar())
    flags.FLAGS.unparse_flags()
    try:
        flags.FLAGS([cmd[1]] + cmd[2:])
    except flags.Error as e:
        raise UserError(" ".join(str(e).split())) from None
    return cli.config_from_flags(flags.FLAGS)


def other_settings(args):
    """Why a run directory of this invocation that already holds a run may not be reused (one
    line: the settings that differ and the fix), or None: a run of other settings would be
    reported as this one's, since a directory's name does not say them all. The comparison is
    the studies' (resnet_nobn/study/launcher.py: the scientific settings and the model's)."""
    from resnet_nobn.study.launcher import check_compatible
    for model_dir, cmd in planned(args):
        if not os.path.exists(os.path.join(model_dir, CONFIG)):
            continue
        try:
            check_compatible(config_of(cmd))
        except (ValueError, UserError) as e:
            return str(e)
    return None


def _ints(text, lowest):
    """A comma list of integers, each at least `lowest`, or None."""
    try:
        values = [int(t) for t in text.split(",")]
    except ValueError:
        return None
    return values if all(v >= lowest for v in values) else None


def _rates(text):
    """A comma list of finite positive floats, or None."""
    try:
        values = [float(t) for t in text.split(",")]
    except ValueError:
        return None
    return values if all(math.isfinite(v) and v > 0 for v in values) else None


def bad_flags(args):
    """What is wrong with the flags (one line), or None: each must make a run, before any trains
    (a --steps of 0 would call every rate stable)."""
    unknown = [n for n in args.nets.split(",") if n not in NETS]
    checks = [
        (args.steps >= 1, f"--steps={args.steps}: a run must train at least 1 step"),
        (args.batch_size >= 1, f"--batch_size={args.batch_size}: give at least 1"),
        (args.eval_steps >= 0, f"--eval_steps={args.eval_steps}: give 0 (all) or more"),
        (_ints(args.blocks, 1), f"--blocks={args.blocks}: give blocks per stage, a comma list of "
         "integers of at least 1"),
        (_ints(args.widths, 1), f"--widths={args.widths}: give stage widths, a comma list of "
         "integers of at least 1"),
        (args.stem_width is None or _ints(args.stem_width, 1) and "," not in args.stem_width,
         f"--stem_width={args.stem_width}: give an integer of at least 1"),
        (not unknown, f"--nets: unknown {', '.join(unknown)}; give a comma list of "
         f"{', '.join(NETS)}"),
        (args.dataset in DATASETS, f"--dataset={args.dataset}: give one of "
         f"{', '.join(DATASETS)}"),
        (_rates(args.rates), f"--rates={args.rates}: give a comma list of positive rates"),
        (_rates(args.learning_rate), f"--learning_rate={args.learning_rate}: give a positive "
         "rate or a comma list of them"),
        (_ints(args.seed, 0), f"--seed={args.seed}: give a comma list of seeds (integers, 0 or "
         "more)"),
        (_ints(args.seeds, 0), f"--seeds={args.seeds}: give a comma list of seeds (integers, 0 "
         "or more)")]
    return next((why for ok, why in checks if not ok), None)


def refuse(problem):
    """`problem` as one `error:` line on stderr, exit status 2."""
    print(f"error: {problem}", file=sys.stderr, flush=True)
    sys.exit(2)


def report_long(args):
    """Test error (whole test split) after --steps steps, per net and rate, over seeds."""
    print(f"| net | blocks/stage | lr | seeds | test top-1 error after {args.steps} steps |")
    print("|---|---|---|---|---|")
    for blocks, lr, net in itertools.product(args.blocks.split(","), rates(args),
                                             args.nets.split(",")):
        errors, seeds = [], []
        for seed in args.seeds.split(","):
            model_dir = long_dir_of(args, net, blocks, lr, seed)
            res = read_json(os.path.join(model_dir, RESULTS)) or {}
            row = [h for h in res.get("history", []) if h["step"] == args.steps]
            if row:
                errors.append(100 * row[0]["top1_error"])
                seeds.append(seed)
            elif result := outcome(model_dir, args.steps):
                seeds.append(f"{seed}: {result}")
        cell = " / ".join(f"{e:.2f}%" for e in errors) or "n/a"
        if len(errors) > 1:
            cell += f" (mean {statistics.mean(errors):.2f}%)"
        print(f"| {net} | {blocks} | {lr} | {', '.join(seeds) or 'none'} | {cell} |")


def sweep_cell(model_dir, steps):
    """One sweep run as a table cell: 'ok (e%)', 'NaN @N' or '·' (not run)."""
    result = outcome(model_dir, steps)
    if result != "stable":
        return "NaN @" + result.split()[3].rstrip(",") if result else "·"
    res = read_json(os.path.join(model_dir, RESULTS))
    return f"ok ({100 * next(h['top1_error'] for h in res['history'] if h['step'] == steps):.1f}%)"


def report(args):
    """The table: for each net and depth, each rate's outcome (one per seed of --seed) and the
    largest rate at which no seed diverged."""
    rows, rates_ = [], sweep_rates(args)
    for blocks in args.blocks.split(","):
        for net in args.nets.split(","):
            cells, best = [], None
            for lr in rates_:
                seeds = [sweep_cell(run_dir(args.root, net, blocks, lr, seed), args.steps)
                         for seed in args.seed.split(",")]
                cells.append(" / ".join(seeds) if any(c != "·" for c in seeds) else "·")
                if all(c.startswith("ok") for c in seeds):
                    best = best or lr
            rows.append((net, blocks, cells, best))
    print("| net | blocks/stage | " + " | ".join(f"lr {r}" for r in rates_) + " | largest stable |")
    print("|---|---|" + "---|" * (len(rates_) + 1))
    for net, blocks, cells, best in rows:
        ran = any(c != "·" for c in cells)
        print(f"| {net} | {blocks} | " + " | ".join(cells) + f" | {best or ('none' if ran else 'not run')} |")
    return rows


def scalars(model_dir):
    """{tag: [(step, value)]} of a run's training summaries (TensorBoard event files)."""
    import tensorflow as tf
    out = {}
    train_dir = os.path.join(model_dir, TRAIN)
    for name in sorted(os.listdir(train_dir)) if os.path.isdir(train_dir) else []:
        for event in tf.compat.v1.train.summary_iterator(os.path.join(train_dir, name)):
            for v in event.summary.value:
                value = float(tf.make_ndarray(v.tensor)) if v.HasField("tensor") else v.simple_value
                out.setdefault(v.tag, []).append((event.step, value))
    return out


def figure(args, path, blocks=9):
    """Loss, largest branch norm and update/weight ratio against steps, at `blocks` per stage:
    for each net, its run at the smallest rate that diverged and at its largest stable rate."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    colors = dict(zip(NETS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for net in args.nets.split(","):
        runs = [(lr, outcome(run_dir(args.root, net, blocks, lr), args.steps))
                for lr in sweep_rates(args)]
        stable = [lr for lr, o in runs if o == "stable"]
        diverged = [lr for lr, o in runs if o and o.startswith("diverged")]
        for lr, style in ((min(diverged) if diverged else None, ":"), (max(stable) if stable else None, "-")):
            if lr is None:
                continue
            tags = scalars(run_dir(args.root, net, blocks, lr))
            label = f"{net} lr {lr}" + (" (diverged)" if style == ":" else "")
            kw = dict(color=colors[net], linestyle=style, label=label)
            if "loss" in tags:
                axes[0].plot(*zip(*tags["loss"]), **kw)
            branch = [v for t, v in tags.items() if t.startswith("branch_norm/")]
            if branch:
                steps = [s for s, _ in branch[0]]
                axes[1].plot(steps, [max(v[i][1] for v in branch) for i in range(len(steps))], **kw)
            ratio = [v for t, v in tags.items() if t.startswith("update_ratio/stage")]
            if ratio:
                steps = [s for s, _ in ratio[0]]
                axes[2].plot(steps, [max(v[i][1] for v in ratio) for i in range(len(steps))], **kw)
    titles = ("training loss", "largest ||branch(h)|| / ||h|| over the blocks",
              "largest ||update|| / ||W|| over the stages")
    _finish(fig, axes, titles, f"{DATASETS[args.dataset].title}, {blocks} blocks per stage, "
            f"widths {args.widths}, batch {args.batch_size}", path)


def _finish(fig, axes, titles, suptitle, path):
    """Titles, step x axes, log y axes, a legend; the figure replaced whole at `path` or not at all."""
    for ax, title in zip(axes, titles):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout()
    with atomic_file(path) as tmp:
        fig.savefig(tmp, dpi=100)
    print(f"written: {path}")


def figure_long(args, path):
    """For each --long run under --root (each net, rate and seed): training loss, and the largest
    over the blocks of the bound |scale| ||C2|| ||C1|| (`branch_bound/`) and of ||branch(h)||/||h||
    (`branch_norm/`), against steps."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    runs = list(itertools.product(args.blocks.split(","), args.nets.split(","), rates(args),
                                  args.seeds.split(",")))
    for i, (blocks, net, lr, seed) in enumerate(runs):
        tags = scalars(long_dir_of(args, net, blocks, lr, seed))
        if "loss" not in tags:
            continue
        kw = dict(color=colors[i % len(colors)], label=f"{net} lr {lr} seed {seed}",
                  linestyle="-" if outcome(long_dir_of(args, net, blocks, lr, seed), args.steps)
                  == "stable" else ":")
        axes[0].plot(*zip(*tags["loss"]), **kw)
        for ax, prefix in ((axes[1], "branch_bound/"), (axes[2], "branch_norm/")):
            series = [v for t, v in tags.items() if t.startswith(prefix)]
            if series:
                steps = [s for s, _ in series[0]]
                ax.plot(steps, [max(v[j][1] for v in series) for j in range(len(steps))], **kw)
    titles = ("training loss", "largest |scale| ||C2||_2 ||C1||_2 over the blocks",
              "largest ||branch(h)|| / ||h|| over the blocks")
    _finish(fig, axes, titles, f"{DATASETS[args.dataset].title}, {args.blocks} blocks per stage, "
            f"widths {args.widths}, batch {args.batch_size}"
            + (", rate /10 at 50% and 83%" if args.schedule else ", constant rate"), path)


def parser():
    """The command line's parser."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", required=True, help="directory of the runs (one model_dir each)")
    p.add_argument("--data_dir", help="tfds data_dir holding --dataset (see above)")
    p.add_argument("--dataset", default="fashion_mnist", help="the runs' --dataset")
    p.add_argument("--blocks", default="1,9", help="blocks per stage to sweep, comma list")
    p.add_argument("--nets", default="paper,paper_relu,bn,fixup,skipinit",
                   help=f"networks to sweep, comma list of {', '.join(NETS)}")
    p.add_argument("--widths", default="16,32,64", help="stage widths (the stem has the first)")
    p.add_argument("--stem_width", help="the stem's channels (default: the first of --widths)")
    p.add_argument("--batch_size", type=int, default=128, help="the runs' --batch_size")
    p.add_argument("--steps", type=int, default=500, help="steps a stable run must survive")
    p.add_argument("--seed", default="0", help="the sweep's seeds, comma list (stable: no seed diverged)")
    p.add_argument("--rates", default=",".join(map(str, RATES)),
                   help="the sweep's rates, tried from the largest down to the first stable one")
    p.add_argument("--eval_steps", type=int, default=20, help="the sweep's test batches (0: all)")
    p.add_argument("--long", action="store_true", help="instead of the sweep: train each net for "
                   "--steps steps at --learning_rate for each of --seeds, test on the whole split")
    p.add_argument("--learning_rate", default="0.05",
                   help="with --long: the rate, or a comma list of rates (each net runs at each)")
    p.add_argument("--seeds", default="0,1", help="with --long: seeds, comma list")
    p.add_argument("--schedule", action="store_true", help="the paper's schedule shape: the rate "
                   "divided by 10 at 50%% and 83%% of --steps (its 30k and 50k of 60k); else constant")
    p.add_argument("--report", action="store_true", help="print the table of what is under --root")
    p.add_argument("--figure", help="with --report: also draw the curves of the deepest runs (with "
                   "--long: of every run) here")
    return p


def main():
    args = parser().parse_args()
    problem = bad_flags(args)
    if problem:
        refuse(problem)
    if args.report and args.long:
        report_long(args)
        if args.figure:
            figure_long(args, args.figure)
        return
    if args.report:
        report(args)
        if args.figure:
            figure(args, args.figure, max(int(b) for b in args.blocks.split(",")))
        return
    if not args.data_dir:
        sys.exit("error: --data_dir is needed to run the sweep (see the module docstring)")
    problem = other_settings(args)
    if problem:
        refuse(problem)
    failed = 0
    for blocks in args.blocks.split(","):
        for net in args.nets.split(","):
            if args.long:
                for lr in rates(args):
                    for seed in args.seeds.split(","):
                        failed += train_long(args, net, int(blocks), lr, int(seed))
                continue
            for seed in args.seed.split(","):
                best, fail = sweep(args, net, int(blocks), int(seed))
                failed += fail
                print(f"== {net} blocks {blocks} seed {seed}: "
                      + ("a run failed, so no largest stable rate" if fail else
                         f"largest stable {best}"), flush=True)
    if failed:
        sys.exit(f"error: {failed} run(s) failed (their error lines are above); fix what they "
                 "say and re-run the same command to resume")


if __name__ == "__main__":
    main()
