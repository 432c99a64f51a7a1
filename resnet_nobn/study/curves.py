"""The plot of a study (run/report.py): one row of panels per configuration of the report's table,
over its seeds, against training steps: the training loss (results.json `train_history`), the test
top-1 error (results.json `history`) and the largest block norm ||A_j|| (the largest of the
`branch_norm/<block>` scalars the trainer writes to TensorBoard, resnet_nobn/training/summaries.py:
||branch(h)|| / ||shortcut(h)|| on a fixed test batch, the network's counterpart of Section 2's
||A_j||), each seed thin, their mean bold at the steps every seed reached (a seed that stopped
early, diverged or not trained that far yet, leaves the mean's company unchanged), a diverged
run's last point a red x, the learning-rate drops (--lr_boundaries, or every --lr_decay_every
steps) dotted. matplotlib is imported quietly (its cache notices are not the project's lines).
"""
import contextlib
import logging
import os

import numpy as np

from resnet_nobn.study import events
from resnet_nobn.training.results import HISTORY
from resnet_nobn.training.rundir import TRAIN

PANELS = (("loss", "training loss"), ("error", "test top-1 error (%)"),
          ("norm", "largest block norm ||A_j||"))
MAX_DROPS = 50  # an exponential staircase of more drops is not drawn


def run_series(run):
    """{seed, diverged, loss, error, norm}: [(step, value)] each of one run (report.load_runs'
    dict); diverged: whether its status is diverged."""
    return dict(
        seed=run["config"].get("seed"), diverged=run.get("status") == "diverged",
        loss=[(h["step"], h["loss"]) for h in run.get(HISTORY) or []
              if isinstance(h, dict) and isinstance(h.get("step"), int) and _number(h.get("loss"))],
        error=[(h["step"], 100 * h["top1_error"]) for h in run.get("history", [])
               if h.get("top1_error") is not None],
        norm=events.largest(os.path.join(run["run_dir"], TRAIN), "branch_norm/"))


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)


def lr_drops(config):
    """The steps at which the run's learning rate drops, up to its train_steps."""
    end, every = config.get("train_steps") or 0, config.get("lr_decay_every") or 0
    if every > 0:
        steps = range(every, end + 1, every) if end // every <= MAX_DROPS else []
    else:
        steps = config.get("lr_boundaries") or []
    return [s for s in steps if 0 < s <= end]


def plot_curves(rows, path):
    """PNG of len(rows) rows of len(PANELS) panels; returns `path`. A row holds `series` (one
    run_series per run), `drops` (lr_drops), `shown`, `synthetic` and `label`."""
    with quiet_matplotlib():
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    n = max(len(rows), 1)
    fig, axes = plt.subplots(n, len(PANELS), figsize=(5.2 * len(PANELS), 3.4 * n), squeeze=False)
    for row, panels in zip(rows, axes):
        for ax, (key, name) in zip(panels, PANELS):
            _panel(ax, row, key)
            what = ("error (%) on the fixed batch" if key == "error" and row["synthetic"]
                    else name)
            ax.set_title(f"{row['shown']}: {row['label']}", fontsize=8)
            ax.set_xlabel("training step", fontsize=8)
            ax.set_ylabel(what, fontsize=8)
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:  # no curve yet: no legend (nor its warning)
                ax.legend(fontsize=6)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _panel(ax, row, key):
    """One panel: each seed's curve thin, a diverged one ending in a red x, the mean of the seeds
    bold at the steps all of them have, the drops."""
    curves = [(s["seed"], s.get("diverged"), s[key]) for s in row["series"] if s[key]]
    by_step = {}  # step: {curve: its value there}
    for i, (seed, diverged, curve) in enumerate(curves):
        steps, values = zip(*curve)
        ax.plot(steps, values, linewidth=0.7, alpha=0.6, label=f"seed {seed}")
        if diverged:  # one legend entry for all of them
            marked = "diverged" in ax.get_legend_handles_labels()[1]
            ax.plot(steps[-1:], values[-1:], color="red", marker="x", linestyle="none",
                    label=None if marked else "diverged")
        for step, value in curve:
            by_step.setdefault(step, {})[i] = value
    # a step some seed did not reach (it diverged, stopped or trains on) is no mean of all of them
    steps = sorted(s for s, values in by_step.items() if len(values) == len(curves))
    if steps:
        ax.plot(steps, [np.mean(list(by_step[s].values())) for s in steps], color="black",
                linewidth=2.2, label=f"mean (n={len(curves)})")
    for i, step in enumerate(row["drops"]):
        ax.axvline(step, color="grey", linestyle=":", linewidth=1,
                   label="learning-rate drop" if i == 0 else None)


def figure_formats():
    """The file extensions matplotlib can write a figure as (png, pdf, svg, ...)."""
    with quiet_matplotlib():
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    return sorted(FigureCanvasAgg(Figure()).get_supported_filetypes())


@contextlib.contextmanager
def quiet_matplotlib():
    """Importing matplotlib inside prints nothing: its cache-directory and font-cache notices
    (an unwritable HOME) are logged at WARNING; the project prints its own lines only."""
    logger = logging.getLogger("matplotlib")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
