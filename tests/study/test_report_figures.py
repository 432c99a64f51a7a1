"""A report to read: report.md's 95% intervals (each row's mean, the paper's net minus its BN
twin) checked against scipy by hand, and report.png's panels (training loss, test error, largest
block norm over the seeds, the learning-rate drops) from hand-made run directories."""
import json
import math
import os
import time

import numpy as np
import tensorflow as tf
from scipy import stats

from resnet_nobn.study import report


def _run(root, norm, seed, top1, block_norms=None, eval_examples=10_000):
    """A finished run of 100 steps (lr drops at 40 and 80) with a training log and, if given,
    TensorBoard block norms {step: [per block]}; each evaluation of `eval_examples` test images."""
    init = "identity" if norm == "none" else "he"
    m = dict(num_classes=10, image_size=32, widths=[8, 16, 32], blocks_per_stage=[1, 1, 1],
             strides=[1, 2, 2], stem_width=8, stem_kernel=3, stem_stride=1, kernel_size=3,
             norm=norm, init=init, head="random", head_seed=seed)
    config = dict(model=m, dataset="cifar10", use_synthetic_data=False, train_steps=100,
                  batch_size=128, learning_rate=0.05, lr_boundaries=[40, 80, 500], seed=seed,
                  model_dir="x")
    d = os.path.join(root, f"norm-{norm}", f"seed-{seed}")
    os.makedirs(d)
    history = [dict(step=s, top1_error=min(top1 + (100 - s) / 1000, 1.0), top5_error=top1 / 4,
                    eval_loss=1.0, eval_examples=eval_examples) for s in (50, 100)]
    train = [dict(step=s, loss=2.0 - s / 100 + seed / 10) for s in (10, 20, 30)]
    json.dump(dict(dataset="cifar10", global_step=100, top1_error=top1, top5_error=top1 / 4,
                   wall_time_s=60.0, seed=seed, history=history, train_history=train,
                   config=config), open(os.path.join(d, "results.json"), "w"))
    json.dump(config, open(os.path.join(d, "config.json"), "w"))
    if block_norms:
        writer = tf.summary.create_file_writer(os.path.join(d, "train"))
        with writer.as_default():
            for step, values in block_norms.items():
                for i, v in enumerate(values):
                    tf.summary.scalar(f"branch_norm/block_{i}", v, step=step)
                tf.summary.scalar("loss", 9.0, step=step)  # another tag: not a block norm
        writer.close()


def _by_hand(values):
    n, mean, s = len(values), np.mean(values), np.std(values, ddof=1)
    half = stats.t.ppf(0.975, n - 1) * s / math.sqrt(n)
    return mean - half, mean + half


def test_report_intervals_are_student_t_and_the_twin_is_paired_by_seed(tmp_path):
    root = str(tmp_path)
    ours, twin = [0.07, 0.08, 0.06], [0.065, 0.07, 0.058]
    for seed in (0, 1, 2):
        _run(root, "none", seed, ours[seed])
        _run(root, "batch", seed, twin[seed])
    text, _, _ = report.report(root)
    low, high = _by_hand([7.0, 8.0, 6.0])  # 7 ± 4.30 / sqrt(3)
    assert f"| 7.00 ± 1.00 [{low:.2f}, {high:.2f}] |" in text and f"{low:.2f}" == "4.52"
    d = [100 * (a - b) for a, b in zip(ours, twin)]  # 0.5, 1.0, 0.2 points
    low, high = _by_hand(d)
    assert (f"| none / identity / random / 1 − batch / he / random / 1 | cifar10 | "
            f"{np.mean(d):+.2f} | [{low:+.2f}, {high:+.2f}] | paired by seed (0,1,2) |") in text


def test_a_row_interval_is_cut_where_an_error_rate_ends(tmp_path):
    """Two seeds' t interval of a mean error reached past 0 and 100% ([57.17, 136.58] was printed
    for 96.88 ± 4.42): it is cut to [0, 100], and the note says so."""
    root = str(tmp_path)
    for seed, top1 in enumerate((0.01, 0.05)):
        _run(root, "none", seed, top1)
    for seed, top1 in enumerate((0.93, 0.999)):
        _run(root, "batch", seed, top1)
    text, _, _ = report.report(root)
    low, high = _by_hand([1.0, 5.0])
    assert low < 0 and f"| 3.00 ± 2.83 [0.00, {high:.2f}] |" in text, text
    low, high = _by_hand([93.0, 99.9])
    assert high > 100 and f"| 96.45 ± 4.88 [{low:.2f}, 100.00] |" in text, text
    assert "(Student t, n - 1 degrees of freedom, cut to [0, 100])" in text
    d = [1.0 - 93.0, 5.0 - 99.9]  # the net minus its twin, paired by seed
    low, high = _by_hand(d)
    assert low < -100 and f"| {np.mean(d):+.2f} | [-100.00, {high:+.2f}] | paired" in text, text


def test_a_run_evaluated_on_the_first_batches_of_the_test_split_says_so(tmp_path):
    root = str(tmp_path)
    for seed in (0, 1):  # --eval_steps=5 of batches of 128: 640 of CIFAR-10's 10,000 test images
        _run(root, "none", seed, 0.07, eval_examples=640)
        _run(root, "batch", seed, 0.06)  # the whole split
    text, _, _ = report.report(root)
    assert "| none / identity / random / 1 § |" in text and "| batch / he / random / 1 |" in text
    assert ("§ cifar10 none / identity / random / 1: evaluated on the first 640 images of the test "
            "split only (`--eval_steps`; seeds 0,1), not all of it") in text
    assert text.count("§") == 2


def test_a_twin_of_other_seeds_gets_welchs_interval(tmp_path):
    root = str(tmp_path)
    ours, twin = [0.07, 0.08, 0.06], [0.05, 0.06]
    for seed, top1 in enumerate(ours):
        _run(root, "none", seed, top1)
    for seed, top1 in zip((5, 6), twin):
        _run(root, "batch", seed, top1)
    text, _, _ = report.report(root)
    a, b = [100 * x for x in ours], [100 * x for x in twin]
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))  # Welch-Satterthwaite
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    diff = np.mean(a) - np.mean(b)
    assert (f"| {diff:+.2f} | [{diff - half:+.2f}, {diff + half:+.2f}] | unpaired, Welch "
            "(seeds 0,1,2 and 5,6) |") in text, text


def test_report_png_has_loss_error_and_block_norm_panels_per_network(tmp_path, monkeypatch):
    from matplotlib.figure import Figure
    seen = []
    save = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: (seen.append(fig.axes),
                                                                save(fig, *a, **k)))
    root = str(tmp_path)
    for seed in (0, 1):
        _run(root, "none", seed, 0.07, block_norms={10: [0.5, 0.9 + seed], 20: [1.5, 0.25]})
    _run(root, "batch", 0, 0.06)
    _, _, png = report.report(root)
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    (axes,) = seen
    assert len(axes) == 2 * 3  # two networks, three panels each
    assert [ax.get_ylabel() for ax in axes[:3]] == [
        "training loss", "test top-1 error (%)", "largest block norm ||A_j||"]

    def lines(ax):
        return {line.get_label(): line for line in ax.get_lines()}
    loss, error, norm = (lines(ax) for ax in axes[:3])
    assert set(loss) >= {"seed 0", "seed 1", "mean (n=2)", "learning-rate drop"}
    assert loss["mean (n=2)"].get_linewidth() > 2 * loss["seed 0"].get_linewidth()
    assert np.allclose(loss["mean (n=2)"].get_ydata(), [1.95, 1.85, 1.75])  # 2 - s/100 + 0.05
    assert np.allclose(error["seed 1"].get_ydata(), [12.0, 7.0])  # 7% + (100 - step) / 10
    # the largest block norm of each step; the mean of the seeds' bold
    assert np.allclose(norm["seed 1"].get_ydata(), [1.9, 1.5])
    assert np.allclose(norm["mean (n=2)"].get_ydata(), [1.4, 1.5])
    drops = [l.get_xdata()[0] for l in axes[0].get_lines() if l.get_linestyle() == ":"]
    assert drops == [40, 80]  # 500 is past train_steps
    assert "mean (n=1)" in lines(axes[3]) and "mean" not in " ".join(lines(axes[5]))  # no events


def test_the_bold_mean_is_of_every_seed_and_a_diverged_run_ends_in_a_red_x(tmp_path, monkeypatch):
    """A seed that diverged at step 25 stops its curve there: the mean goes no further than the
    steps every seed reached (it jumped to the survivors' mean), and the run's last point is
    marked."""
    from matplotlib.figure import Figure
    seen, save = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: (seen.append(fig.axes),
                                                                save(fig, *a, **k)))
    root = str(tmp_path)
    for seed in (0, 1, 2):
        _run(root, "none", seed, 0.07)
    d = os.path.join(root, "norm-none", "seed-2")
    with open(os.path.join(d, "results.json")) as f:
        results = json.load(f)
    results.update(global_step=20, history=[], train_history=results["train_history"][:2])
    json.dump(results, open(os.path.join(d, "results.json"), "w"))
    json.dump(dict(step=25, retry_with="--learning_rate=0.01"),
              open(os.path.join(d, "diverged.json"), "w"))
    report.report(root)
    loss = {line.get_label(): line for line in seen[0][0].get_lines()}
    assert list(loss["mean (n=3)"].get_xdata()) == [10, 20]
    assert np.allclose(loss["mean (n=3)"].get_ydata(), [2.0, 1.9])  # 2 - s/100 + mean(seed)/10
    x = loss["diverged"]
    assert x.get_marker() == "x" and x.get_color() == "red" and list(x.get_xdata()) == [20]
    error = {line.get_label() for line in seen[0][1].get_lines()}
    assert "diverged" not in error and "mean (n=2)" in error  # it was never evaluated


def test_a_step_written_again_after_a_resume_reads_as_its_later_value(tmp_path):
    """A resume writes the steps after its checkpoint again, into a new events file: TensorBoard
    draws both passes; the report's reader keeps the later one, as the docs say."""
    from resnet_nobn.study import events
    for offset, steps in ((0.0, range(1, 6)), (0.5, range(3, 7))):  # killed at 5, resumed from 2
        writer = tf.summary.create_file_writer(str(tmp_path))
        with writer.as_default():
            for s in steps:
                tf.summary.scalar("branch_norm/b", s + offset, step=s)
        writer.close()
        time.sleep(1.1)  # the events file's name holds its start time in seconds
    assert events.scalars(str(tmp_path), "branch_norm/") == {
        "branch_norm/b": {1: 1.0, 2: 2.0, 3: 3.5, 4: 4.5, 5: 5.5, 6: 6.5}}
