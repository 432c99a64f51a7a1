"""The plot of a study (run/report.py): test top-1 error against training steps, one line per
configuration of the report's table (the mean over its seeds, a band from min to max), one panel
per dataset. matplotlib is imported quietly (its cache notices are not the project's lines).
"""
import contextlib
import logging
import os

import numpy as np


def plot_curves(rows, path):
    """PNG of test top-1 error against steps, one line per configuration (mean over seeds, band =
    min..max), one panel per dataset."""
    with quiet_matplotlib():
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    datasets = sorted({(r["shown"], r["synthetic"]) for r in rows})
    fig, axes = plt.subplots(1, max(len(datasets), 1), figsize=(6.5 * max(len(datasets), 1), 4.5),
                             squeeze=False)
    for ax, (ds, syn) in zip(axes[0], datasets):
        for r in rows:
            if (r["shown"], r["synthetic"]) != (ds, syn):
                continue
            by_step, curves = {}, [c for c in r["curves"] if c]  # the runs evaluated so far
            for curve in curves:
                for step, err in curve:
                    by_step.setdefault(step, []).append(err)
            if not by_step:
                continue
            steps = sorted(by_step)
            mean = [np.mean(by_step[s]) for s in steps]
            line, = ax.plot(steps, mean, marker="o", markersize=3,
                            label=f"{r['label']} (n={len(curves)})")
            if len(curves) > 1:
                ax.fill_between(steps, [min(by_step[s]) for s in steps],
                                [max(by_step[s]) for s in steps], color=line.get_color(), alpha=0.15)
        ax.set_title(ds + (": memorisation" if syn else ""), fontsize=9)
        ax.set_xlabel("training step")
        ax.set_ylabel("top-1 error (%)" + (" on the fixed batch" if syn else " on the test split"))
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # no curve yet: no legend (nor matplotlib's warning)
            ax.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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
