"""The tables of experiments/stability/jax_study.py's runs: each condition's test error per seed, and gaps paired
by image (docs/stability.md, "Longer, on a GPU").

    python experiments/stability/jax_study_report.py --results=docs/results/stability_gpu.json \
        [--pairs=conf6000_paper_clip1:conf6000_bn_lr0.1,...]

A condition is a run's name without its `_s<seed>` ending. Per condition: the test error of every
seed (or the step of its first non-finite loss), how many seeds finished, and the mean, the sample
standard deviation and the 95% Student t interval of the mean over the finished seeds
(resnet_nobn/study/stats.py `mean_interval`, as the study's report: cut to [0, 100], which the t
interval of two or three seeds can reach past, and the table's note says so). Per pair A:B: the
gap in test error over the seeds that finished on both sides, paired by image on the 10,000 test
images (resnet_nobn/study/stats.py `paired_interval`, as experiments/stability/paired_gap.py) and over those
seeds.
"""
import argparse
import collections
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from jax_study import correct_of  # noqa: E402
from resnet_nobn.study.stats import mean_interval, paired_interval, seed_interval  # noqa: E402


def conditions(records):
    """{condition: {seed: record}}, in the order the records first name them."""
    out = collections.OrderedDict()
    for r in records:
        out.setdefault(re.sub(r"_s\d+$", "", r["name"]), {})[r["seed"]] = r
    return out


def cell(record):
    """A seed's outcome: its test error in percent, or where its loss went non-finite."""
    if record.get("test_error") is None:
        return f"non-finite @{record['nonfinite_at']}"
    return f"{100 * record['test_error']:.2f}"


def summary(runs):
    """(finished seeds / seeds, 'mean ± std [low, high]' over the finished ones, in percent).
    The interval is cut to [0, 100] (`stats.mean_interval`); one finished seed gives its error
    alone."""
    errors = [100 * r["test_error"] for r in runs.values() if r.get("test_error") is not None]
    if not errors:
        return f"0/{len(runs)}", "–"
    return f"{len(errors)}/{len(runs)}", mean_interval(errors, bounds=(0, 100))


def gap(a, b):
    """(seeds, paired-by-image (gap, low, high), over-seeds (gap, low, high) or None), in points,
    over the seeds that finished on both sides; None if none did."""
    seeds = sorted(s for s in a if s in b and a[s].get("test_error") is not None
                   and b[s].get("test_error") is not None)
    if not seeds:
        return None
    wrong = {side: np.stack([~correct_of(runs[s]) for s in seeds]).astype(np.float64)
             for side, runs in (("a", a), ("b", b))}
    by_image = paired_interval(wrong["a"], wrong["b"])
    over = seed_interval(wrong["a"].mean(1), wrong["b"].mean(1))
    pts = lambda g: None if g is None else tuple(100 * v for v in g)  # noqa: E731
    return seeds, pts(by_image), pts(over)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", required=True, help="experiments/stability/jax_study.py's records (JSON list)")
    parser.add_argument("--pairs", default="", help="A:B,... conditions to compare (A minus B)")
    args = parser.parse_args()
    with open(args.results) as f:
        table = conditions(json.load(f))
    seeds = sorted({s for runs in table.values() for s in runs})
    print("| condition | " + " | ".join(f"seed {s}" for s in seeds)
          + " | finished | mean ± std [95%] |")
    print("|---" * (len(seeds) + 3) + "|")
    for name, runs in table.items():
        cells = [cell(runs[s]) if s in runs else "" for s in seeds]
        print(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(summary(runs)) + " |")
    print("\nTest error in percent; mean ± sample standard deviation over the finished seeds, and "
          "[the 95% interval of the mean] (Student t, n - 1 degrees of freedom, cut to [0, 100]).")
    for pair in filter(None, args.pairs.split(",")):
        a, b = pair.split(":")
        result = gap(table[a], table[b])
        if result is None:
            print(f"{a} - {b}: no seed finished on both sides")
            continue
        used, by_image, over = result
        line = (f"{a} - {b} (seeds {','.join(map(str, used))}): {by_image[0]:+.2f} points, "
                f"paired by image [{by_image[1]:+.2f}, {by_image[2]:+.2f}]")
        if over is not None:
            line += f"; over seeds [{over[1]:+.2f}, {over[2]:+.2f}]"
        print(line)


if __name__ == "__main__":
    main()
