"""The statistics of a study's report (resnet_nobn/study/report.py): a row's mean with its 95%
interval over the seeds, and the paper's net minus its BN twin with its interval.

The seeds of a configuration are a sample of its runs: the interval of a mean is Student's t with
n - 1 degrees of freedom (scipy.stats.t), mean ± t(0.975) s / sqrt(n), none for one seed. Table 2
sets the paper's all-convolutional net (no BN, identity init) beside a ResNet with BN; here its
twin is the row of the same settings with --norm=batch (and its own init). Their difference is
paired by seed when both rows have results for the same seeds, at least two (the runs of one seed
start from the same data order), a paired t interval (scipy.stats.ttest_rel); else Welch's
interval for two samples (scipy.stats.ttest_ind, equal_var=False). Two networks' gap
on one shared test set is paired image by image (`paired_interval`: experiments/stability/paired_gap.py and
experiments/stability/jax_study_report.py).
"""
import json
import math

import numpy as np
from scipy import stats

LEVEL = 0.95


def interval(values, level=LEVEL):
    """(low, high) of the mean of `values` (Student t, n - 1 degrees of freedom), or None for
    fewer than two values."""
    if len(values) < 2:
        return None
    sem = np.std(values, ddof=1) / math.sqrt(len(values))
    if sem == 0:
        return float(np.mean(values)), float(np.mean(values))
    low, high = stats.t.interval(level, len(values) - 1, loc=np.mean(values), scale=sem)
    return float(low), float(high)


def paired_interval(wrong_a, wrong_b, level=LEVEL):
    """(gap, low, high): the mean over images of d = mean_seeds(wrong_a) - mean_seeds(wrong_b),
    and the paired Student t interval over the images. `wrong_*`: (seeds, images) arrays of 0/1
    (1: that seed's network gets that image wrong); the same images in the same order."""
    d = np.mean(wrong_a, axis=0, dtype=np.float64) - np.mean(wrong_b, axis=0, dtype=np.float64)
    return (float(d.mean()), *interval(d, level))


def seed_interval(errors_a, errors_b, level=LEVEL):
    """(gap, low, high) over seeds: the per-seed differences of test error, Student t; None with
    fewer than two seeds."""
    d = np.asarray(errors_a, np.float64) - np.asarray(errors_b, np.float64)
    bounds = interval(d, level)
    return None if bounds is None else (float(d.mean()), *bounds)


def mean_interval(values, digits=2, bounds=(-math.inf, math.inf)):
    """A table cell: 'mean ± std [low, high]' (the 95% interval), the mean alone for one value.
    The interval is cut to `bounds`, where the mean lies (an error rate's [0, 100]): the t
    interval of two or three seeds can reach past them, which no mean can."""
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    low, high = interval(values)
    low, high = max(low, bounds[0]), min(high, bounds[1])
    return (f"{np.mean(values):.{digits}f} ± {np.std(values, ddof=1):.{digits}f} "
            f"[{low:.{digits}f}, {high:.{digits}f}]")


def difference(a, b, level=LEVEL):
    """(mean of a - b, (low, high) or None, how) of two rows' {seed: value}: paired by seed when
    both have the same seeds; else Welch's two-sample interval. None for an interval from fewer
    than two pairs, or fewer than two values on a side."""
    if not a or not b:
        return None
    if sorted(a) == sorted(b):
        seeds = sorted(a)
        x, y = [a[s] for s in seeds], [b[s] for s in seeds]
        d = [u - v for u, v in zip(x, y)]
        ci = (None if len(d) < 2 else (float(np.mean(d)),) * 2 if np.std(d) == 0 else
              tuple(map(float, stats.ttest_rel(x, y).confidence_interval(level))))
        return float(np.mean(d)), ci, f"paired by seed ({_seeds(seeds)})"
    x, y = list(a.values()), list(b.values())
    how = f"unpaired, Welch (seeds {_seeds(a)} and {_seeds(b)})"
    if len(x) < 2 or len(y) < 2:
        return float(np.mean(x) - np.mean(y)), None, how
    ci = stats.ttest_ind(x, y, equal_var=False).confidence_interval(level)
    return float(np.mean(x) - np.mean(y)), (float(ci.low), float(ci.high)), how


def _seeds(seeds):
    return ",".join(str(s) for s in sorted(seeds))


def twin_key(config):
    """What a configuration and its BN twin share: all but the norm and the init."""
    c = json.loads(config)
    c["model"] = {k: v for k, v in c["model"].items() if k not in ("norm", "init")}
    return json.dumps(c, sort_keys=True)


def twins(rows):
    """[(paper's row, a BN twin's row)]: a row without BN and with the identity init, and each
    row of the same dataset and settings with --norm=batch (one per init the study varied)."""
    out = []
    for r in rows:
        m = r["model"]
        if m["norm"] != "none" or m["init"] != "identity":
            continue
        out += [(r, t) for t in rows if t["model"]["norm"] == "batch" and t["twin"] == r["twin"]
                and t["mismatch"] == r["mismatch"]]
    return out


def twin_table(rows):
    """Markdown lines: the paper's net minus its BN twin, top-1 error, per pair ([] if none)."""
    pairs = [(r, t, difference(dict(zip(r["seeds"], r["top1"])), dict(zip(t["seeds"], t["top1"]))))
             for r, t in twins(rows)]
    pairs = [(r, t, d) for r, t, d in pairs if d]
    if not pairs:
        return []
    lines = ["", "The paper's net minus its BN twin, top-1 error (percentage points, the "
             "interval cut to [-100, 100]; below 0: the net without BN is better):", "",
             "| net − BN twin | dataset | difference | 95% interval | seeds |",
             "| --- | --- | --- | --- | --- |"]
    for r, t, (mean, ci, how) in pairs:  # a difference of two error rates lies in [-100, 100]
        shown = (f"[{max(ci[0], -100):+.2f}, {min(ci[1], 100):+.2f}]" if ci else
                 "– (needs two seeds a side)")
        lines.append(f"| {r['label']} − {t['label']} | {r['shown']} | {mean:+.2f} | {shown} | "
                     f"{how} |")
    return lines
