"""What the trainer's machinery costs a tiny network's step: the trainer against a plain in-graph
Keras loop of the same network, with the variants between them that isolate each cost.

    python bench/step_overhead.py                       # 3 repeats of 6 windows of 300 steps
    python bench/step_overhead.py --steps=2 --windows=1 --repeats=1   # the rows, in a minute

The network is the project's (resnet_nobn.build_model: stem 8, widths 8,8,8, one block per stage,
CIFAR's 32x32 images, 10 classes), batch 8, one device, float32. Every row trains it with SGD
(momentum 0.9) on the cross-entropy plus the weight decay, its steps inside one tf.function
(a tf.range loop); the rows differ in what surrounds the step:

  plain loop            a plain Keras loop on one fixed batch, no strategy (the reference, 1.00)
  + strategy, SGD       the same loop in the trainer's OneDeviceStrategy (`strategy.run`), with the
                        trainer's model and optimizer (steps.build: SummedSGD, the step schedule,
                        the weight decay as the model's regularizers)
  + step, no stats      the trainer's compiled loop (steps.build_train_loop) on one fixed batch,
                        its per-step statistics (top-1/top-5 hits, the gradient's norm, the pooled
                        features' moments) replaced by zeros
  + step                the trainer's compiled loop on one fixed batch, statistics and named sums
  trainer, to device    Trainer.train_loop on --use_synthetic_data through the distributed input
                        as the trainer made it before (elements prefetched to the device)
  trainer               Trainer.train_loop as `run()` trains (--steps_per_loop's default,
                        Trainer.train_iterator): what a user's run gets
  trainer, 1 step/loop  the same trainer, its same compiled loop, one step per
                        Trainer.train_loop call (--steps_per_loop=1): a host round-trip a step

All rows are built in one process, then timed in interleaved windows (each window times every
row once, starting one row later than the window before), so that load on the machine hits all
alike; each repeat keeps each row's fastest window. A row's images/s are counted per second of
wall time and per second of the process's CPU time (all its threads: an input pipeline's thread
beside the step counts): on a shared machine the CPU time is the steadier measure of what a row
costs. Prints, per repeat, each row's images/s and their ratios to the plain loop's, then each
row's ratios over the repeats (median, min-max). Compare ratios, not images/s, across runs.
"""
import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BATCH = 8
ROWS = ("plain loop", "+ strategy, SGD", "+ step, no stats", "+ step", "trainer, to device",
        "trainer", "trainer, 1 step/loop")


def config(model_dir):
    """The benchmark's TrainConfig: the tiny network, batch 8, synthetic data, one device."""
    from resnet_nobn.config import ModelConfig, TrainConfig
    model = ModelConfig(widths=(8, 8, 8), stem_width=8, blocks_per_stage=(1, 1, 1))
    return TrainConfig(model=model, use_synthetic_data=True, batch_size=BATCH,
                       strategy="one_device", model_dir=model_dir)


@contextlib.contextmanager
def no_statistics():
    """While tracing: steps.py's per-step statistics (top-k hits, the pooled moments and their
    statistics, the gradient's global norm) are zeros."""
    import tensorflow as tf
    from resnet_nobn.training import steps
    saved = steps.top_k_hits, steps.batch_moments, steps.batch_statistics, tf.linalg.global_norm
    steps.top_k_hits = lambda labels, logits, k: tf.zeros(tf.shape(labels), tf.float32)
    steps.batch_moments = lambda pooled, logits: tf.zeros([2 * pooled.shape[-1] + 3])
    steps.batch_statistics = lambda moments, num_classes: (tf.constant(0.0), tf.constant(0.0))
    tf.linalg.global_norm = lambda tensors: tf.constant(0.0)
    try:
        yield
    finally:
        (steps.top_k_hits, steps.batch_moments, steps.batch_statistics,
         tf.linalg.global_norm) = saved


class FixedBatch:
    """An iterator that gives the same (images, labels) at every `next`: no input pipeline."""

    def __init__(self, images, labels):
        self.batch = images, labels

    def __iter__(self):
        return self

    def __next__(self):
        return self.batch


def build_rows(cfg):
    """{row: train(n)}, each training n steps of the tiny network, traced and warmed up."""
    import keras
    import tensorflow as tf
    from resnet_nobn.data import inputs
    from resnet_nobn.model.network import build_model, conv_kernels
    from resnet_nobn.training import steps
    from resnet_nobn.training.trainer import Trainer

    images, labels = inputs.make_input(cfg)._batch(tf.distribute.InputContext(), BATCH)
    images, labels = tf.constant(images), tf.constant(labels)
    decay = cfg.weight_decay

    def plain_step(model, optimizer, losses):
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
            loss += losses()
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables))
        return loss

    def plain():
        model = build_model(cfg.model, weight_decay=0.0)
        kernels = conv_kernels(model)
        optimizer = keras.optimizers.SGD(learning_rate=0.1, momentum=cfg.momentum)

        @tf.function
        def loop(n):
            for _ in tf.range(n):
                plain_step(model, optimizer,
                           lambda: decay * tf.add_n([tf.reduce_sum(tf.square(k)) for k in kernels]))
        return lambda n: loop(tf.constant(n))

    def strategy_sgd():
        strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
        model, optimizer = steps.build(cfg, strategy)

        @tf.function
        def loop(n):
            for _ in tf.range(n):
                strategy.run(lambda: plain_step(model, optimizer, lambda: tf.add_n(model.losses)))
        return lambda n: loop(tf.constant(n))

    def step(statistics=True):
        strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
        model, optimizer = steps.build(cfg, strategy)
        with contextlib.nullcontext() if statistics else no_statistics():
            loop = steps.build_train_loop(cfg, strategy, model, optimizer)
            iterator = FixedBatch(images, labels)
            loop(iterator, tf.constant(1)).numpy()  # traced here, under the patch
        return lambda n: loop(iterator, tf.constant(n)).numpy()

    def trainer(fetch_to_device=False):
        t = Trainer(cfg)
        if fetch_to_device:
            iterator = iter(t.strategy.distribute_datasets_from_function(
                lambda ctx: t.input.train_dataset(ctx, BATCH, 0)))
        else:
            iterator = t.train_iterator()

        def train(n, per_loop=None):
            """n steps, `per_loop` a Trainer.train_loop call (default: --steps_per_loop's rule)."""
            done = 0
            while done < n:
                k = min(per_loop or t.loop_length(t.step), n - done)
                t.train_loop(iterator, k)
                done += k
        return train

    own_input = trainer()
    rows = dict(zip(ROWS, (plain(), strategy_sgd(), step(statistics=False), step(),
                           trainer(fetch_to_device=True), own_input,
                           lambda n: own_input(n, per_loop=1))))
    for train in rows.values():
        train(2)  # traces and warms up
    return rows


def time_rows(rows, steps, windows):
    """{row: (images per second of wall time, images per second of this process's CPU time)},
    each row's fastest of `windows` interleaved windows of `steps` steps; each window starts one
    row later than the one before, so that no row always follows the same one."""
    wall, cpu = dict.fromkeys(rows, float("inf")), dict.fromkeys(rows, float("inf"))
    names = list(rows)
    for window in range(windows):
        for name in names[window % len(names):] + names[:window % len(names)]:
            train = rows[name]
            start, start_cpu = time.perf_counter(), time.process_time()
            train(steps)
            wall[name] = min(wall[name], time.perf_counter() - start)
            cpu[name] = min(cpu[name], time.process_time() - start_cpu)
    return {name: (steps * BATCH / max(wall[name], 1e-9), steps * BATCH / max(cpu[name], 1e-9))
            for name in rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="steps per timed window")
    parser.add_argument("--windows", type=int, default=6,
                        help="interleaved windows per repeat; each row keeps its fastest")
    parser.add_argument("--repeats", type=int, default=3, help="repeats, for the spread")
    args = parser.parse_args()
    for name in ("steps", "windows", "repeats"):
        if getattr(args, name) < 1:
            raise SystemExit(f"error: --{name}={getattr(args, name)}: give at least 1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    with tempfile.TemporaryDirectory() as model_dir:
        rows = build_rows(config(os.path.join(model_dir, "run")))
        print(f"TF {tf.__version__}, {os.cpu_count()} CPU cores; stem 8, widths 8,8,8, 1 block "
              f"per stage, batch {BATCH}; {args.repeats} repeat(s) of the fastest of "
              f"{args.windows} interleaved window(s) of {args.steps} steps", flush=True)
        ratios = {name: ([], []) for name in rows}
        for repeat in range(args.repeats):
            rates = time_rows(rows, args.steps, args.windows)
            print(f"repeat {repeat + 1}: images/s of wall time and of CPU time, each as a ratio "
                  "to the plain loop's")
            for name, (wall, cpu) in rates.items():
                for kept, rate, plain in zip(ratios[name], (wall, cpu), rates[ROWS[0]]):
                    kept.append(rate / plain)
                print(f"  {name:<21} wall {wall:7.1f} {ratios[name][0][-1]:5.2f}   "
                      f"CPU {cpu:7.1f} {ratios[name][1][-1]:5.2f}", flush=True)
    print(f"ratio to the plain loop over {args.repeats} repeat(s): median (min-max)")
    print(f"  {'':<21} {'wall time':<17} CPU time")
    for name, (wall, cpu) in ratios.items():
        print(f"  {name:<21} " + "  ".join(f"{statistics.median(r):4.2f} ({min(r):.2f}-{max(r):.2f})"
                                            for r in (wall, cpu)))


if __name__ == "__main__":
    main()
