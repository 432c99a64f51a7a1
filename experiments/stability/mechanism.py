"""The plateau at the chance loss and its escape, seen from the pooled features: each run's
cross-entropy, `pooled_spread` and `logit_norm` against step (docs/stability.md).

Reads the runs' TensorBoard scalars (their `train/` events, written at every log, diverged runs
too) without TensorFlow, and draws one column per quantity, one line per run, a cross where a run
went non-finite (its diverged.json). `pooled_spread` is the between-image standard deviation of the
pooled features over the batch, averaged over features and divided by their mean magnitude;
`logit_norm` the root-mean-square logit (docs/training.md).

    python experiments/stability/mechanism.py --runs=paper:/runs/a,Fixup:/runs/b --figure=docs/results/mechanism.png
"""
import json
import os
import sys

from absl import flags

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from resnet_nobn import cli  # noqa: E402
from resnet_nobn.study import events  # noqa: E402  (no TensorFlow)

flags.DEFINE_list("runs", None, "LABEL:MODEL_DIR pairs, one line each in the figure.")
flags.DEFINE_string("figure", None, "Where to write the PNG.")
flags.DEFINE_integer("max_step", 300, "Last step shown.")

QUANTITIES = (("cross_entropy", "cross-entropy (chance: 2.303)"),
              ("pooled_spread", "pooled_spread"), ("logit_norm", "logit_norm"))


def curves(model_dir, max_step):
    """{tag: ([steps], [values])} of QUANTITIES up to `max_step`, and the step the run went
    non-finite (None)."""
    scalars = events.scalars(os.path.join(model_dir, "train"))
    out = {}
    for tag, _ in QUANTITIES:
        points = sorted((s, v) for s, v in scalars.get(tag, {}).items() if s <= max_step)
        out[tag] = ([s for s, _ in points], [v for _, v in points])
    path = os.path.join(model_dir, "diverged.json")
    diverged = json.load(open(path)).get("step") if os.path.exists(path) else None
    return out, diverged


def read_runs(items, max_step):
    """[(label, model_dir, curves(model_dir, max_step))] of the --runs items LABEL:MODEL_DIR; the
    one line that says what is wrong (ValueError) for an item without both parts, a MODEL_DIR that
    is no directory, or a run with none of QUANTITIES logged up to `max_step` (an empty figure
    would read as a run that logged nothing)."""
    if max_step < 1:
        raise ValueError(f"--max_step={max_step} shows no step; give 1 or more")
    out = []
    for item in items:
        label, _, model_dir = item.partition(":")
        if not (label and model_dir):
            raise ValueError(f"--runs item {item!r} is not LABEL:MODEL_DIR")
        if not os.path.isdir(model_dir):
            raise ValueError(f"--runs: {model_dir} is not a directory; give a run's --model_dir")
        data, diverged = curves(model_dir, max_step)
        if not any(steps for steps, _ in data.values()):
            raise ValueError(f"--runs: {model_dir}/train holds none of "
                             f"{', '.join(t for t, _ in QUANTITIES)} up to step {max_step}; give "
                             "a run the trainer logged")
        out.append((label, model_dir, (data, diverged)))
    return out


def main(argv):
    del argv
    if not FLAGS.runs or not FLAGS.figure:
        sys.exit("error: give --runs=LABEL:MODEL_DIR,... and --figure=PATH")
    try:
        runs = read_runs(FLAGS.runs, FLAGS.max_step)
    except ValueError as e:
        sys.exit(f"error: {e}")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(QUANTITIES), figsize=(15, 4.2))
    for label, _, (data, diverged) in runs:
        for ax, (tag, _) in zip(axes, QUANTITIES):
            steps, values = data[tag]
            line, = ax.plot(steps, values, label=label + (f" (NaN @{diverged})" if diverged else ""))
            if diverged and steps:
                ax.plot(steps[-1], values[-1], "x", color=line.get_color(), markersize=9)
    for ax, (tag, title) in zip(axes, QUANTITIES):
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.set_yscale("log" if tag != "cross_entropy" else "linear")
    axes[0].axhline(2.3026, color="grey", lw=0.8, ls=":")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    tmp = FLAGS.figure + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, FLAGS.figure)
    print(f"wrote {FLAGS.figure}")


FLAGS = flags.FLAGS

if __name__ == "__main__":
    cli.start(main)  # --help exits 0; a bad flag is one line
