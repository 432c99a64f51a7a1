"""The test-error gap between two networks with its 95% interval, paired image by image on the
shared test split (docs/stability.md).

Each side is one or more finished runs (one per seed, in the same seed order on both sides). Every
run's final usable checkpoint is restored as an export restores it and evaluated on the whole test
split, with the run's own standardisation; for each test image i, e_A(i) and e_B(i) are the
fractions of that side's seeds that get it wrong. The gap is the mean of d(i) = e_A(i) - e_B(i)
over the images, and its interval the paired Student t interval over the images: what the choice
of test images leaves uncertain, for these seeds. With two or more seeds on each side the
per-seed gaps and their t interval over seeds are printed too.

    python experiments/stability/paired_gap.py --a=/runs/clip_s3,/runs/clip_s5 --b=/runs/bn_s3,/runs/bn_s5 \
        --data_dir=/tmp/fmnist --json=/tmp/gap.json
"""
import os
import sys

import numpy as np
from absl import flags

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from resnet_nobn import cli  # noqa: E402
from resnet_nobn.files import atomic_write_json  # noqa: E402
from resnet_nobn.study.stats import paired_interval, seed_interval  # noqa: E402

flags.DEFINE_list("a", None, "Side A: model_dirs of finished runs, one per seed.")
flags.DEFINE_list("b", None, "Side B: model_dirs of finished runs, in the same seed order as --a.")
flags.DEFINE_string("data_dir", None, "tfds data directory of the runs' dataset (default: each "
                    "run's own --data_dir).")
flags.DEFINE_string("json", None, "Also write the figures to this JSON file.")
flags.DEFINE_float("level", 0.95, "Confidence level of the intervals, between 0 and 1.")


def wrong_on_test(model_dir, data_dir=None, batch=500):
    """(0/1 array over the test split, the step evaluated): which test images the run's final
    usable checkpoint gets wrong (top-1). The run directory is read once and only read."""
    import dataclasses

    import tensorflow as tf

    from resnet_nobn.data import inputs
    from resnet_nobn.export import writer
    from resnet_nobn.training import rundir
    run = rundir.read(model_dir, ask_lock=False)
    cfg = writer._config(run)
    if data_dir:
        cfg = dataclasses.replace(cfg, data_dir=data_dir)
    model, step, _, _ = writer.restore(cfg, run)
    inp = inputs.make_input(cfg)
    wrong = []
    for images, labels, weights in inp.eval_dataset(tf.distribute.InputContext(), batch):
        logits = model(images, training=False)
        miss = tf.cast(tf.argmax(logits, -1, output_type=tf.int32) != labels, tf.float32)
        wrong.append(miss.numpy()[weights.numpy() > 0])
    return np.concatenate(wrong), step


def main(argv):
    del argv
    if not FLAGS.a or not FLAGS.b or len(FLAGS.a) != len(FLAGS.b):
        sys.exit("error: give --a and --b, the same number of runs on each side (one per seed)")
    if not 0 < FLAGS.level < 1:
        sys.exit(f"error: --level={FLAGS.level} is not a confidence level; give one between 0 "
                 "and 1 (e.g. 0.95)")
    if FLAGS.json and not os.path.isdir(os.path.dirname(os.path.abspath(FLAGS.json))):
        sys.exit(f"error: --json={FLAGS.json}: its directory does not exist; give a file in an "
                 "existing directory")
    sides = {}
    for side, dirs in (("a", FLAGS.a), ("b", FLAGS.b)):
        runs = [wrong_on_test(d, FLAGS.data_dir) for d in dirs]
        sides[side] = np.stack([w for w, _ in runs])
        for d, (w, step) in zip(dirs, runs):
            print(f"{side}: {d} at step {step}: {100 * w.mean():.2f}% top-1 error "
                  f"({w.size} images)")
    gap = paired_interval(sides["a"], sides["b"], FLAGS.level)
    per_seed = seed_interval(sides["a"].mean(1), sides["b"].mean(1), FLAGS.level)
    pct = lambda g: f"{100 * g[0]:+.2f} points [{100 * g[1]:+.2f}, {100 * g[2]:+.2f}]"
    print(f"A - B, paired by image ({sides['a'].shape[1]} images, {len(FLAGS.a)} seeds a side): "
          f"{pct(gap)} ({FLAGS.level:.0%} interval)")
    if per_seed:
        print(f"A - B over seeds: {pct(per_seed)}")
    if FLAGS.json:  # written whole or not at all
        atomic_write_json(FLAGS.json, {
            "a": FLAGS.a, "b": FLAGS.b, "level": FLAGS.level,
            "error_a": sides["a"].mean(1).tolist(), "error_b": sides["b"].mean(1).tolist(),
            "paired_by_image": gap, "over_seeds": per_seed})


FLAGS = flags.FLAGS

if __name__ == "__main__":
    cli.start(main)  # --help exits 0; a bad flag is one line
