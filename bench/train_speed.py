"""Training throughput: the paper's model against its BN twin, and the input pipeline.

    python bench/train_speed.py                 # Table-1 model, batch 32 (slow on a CPU: ~3 min)

Both models are measured side by side in one process, in alternating rounds so that load on the
machine hits both alike; then the CIFAR input pipeline (augmentation included) alone. Prints
images/s for each, the none/batch ratio (the normalization-free model must not be slower) and the
pipeline/step ratio (the pipeline must deliver at least 10x what the training step consumes).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from resnet_nobn.config import ModelConfig, TrainConfig  # noqa: E402
from resnet_nobn.data.datasets import DATASETS  # noqa: E402


def _time_steps(trainer, iterator, steps):
    """Seconds for `steps` steps through the trainer's own loop (Trainer.train_loop), as many
    steps per host round-trip as its --steps_per_loop rule gives."""
    start = time.perf_counter()
    done = 0
    while done < steps:
        n = min(trainer.loop_length(done), steps - done)
        trainer.train_loop(iterator, n)
        done += n
    return time.perf_counter() - start


def model_throughput(args):
    from resnet_nobn.training.trainer import Trainer
    trainers, iterators = {}, {}
    for norm in ("none", "batch"):
        model = ModelConfig(num_classes=100, blocks_per_stage=(args.blocks_per_stage,) * 3,
                            norm=norm, init="identity" if norm == "none" else "he")
        cfg = TrainConfig(model=model, dataset="cifar100", use_synthetic_data=True,
                          batch_size=args.batch_size, strategy="one_device",
                          model_dir=f"/tmp/bench_train_speed_{norm}")
        t = Trainer(cfg)
        iterators[norm] = t.train_iterator()
        _time_steps(t, iterators[norm], args.warmup)  # tracing and first steps
        trainers[norm] = t
    seconds = {"none": 0.0, "batch": 0.0}
    for _ in range(args.rounds):
        for norm in seconds:
            seconds[norm] += _time_steps(trainers[norm], iterators[norm], args.steps)
    images = args.rounds * args.steps * args.batch_size
    return {norm: images / s for norm, s in seconds.items()}, trainers["none"].trainable_params


def pipeline_throughput(args):
    import numpy as np
    import tensorflow as tf

    from resnet_nobn.data.cifar import InMemoryInput
    rng = np.random.default_rng(0)
    train = (rng.integers(0, 256, (50_000, 32, 32, 3), dtype=np.uint8),
             rng.integers(0, 100, 50_000).astype(np.int32))
    test = (train[0][:100], train[1][:100])
    pipe = InMemoryInput(DATASETS["cifar100"], train, test, seed=0)
    ctx = tf.distribute.InputContext(1, 0, 1)
    ds = pipe.train_dataset(ctx, 128, start_step=0)
    it = iter(ds)
    for _ in range(20):
        next(it)
    start = time.perf_counter()
    for _ in range(args.pipeline_batches):
        next(it)
    return args.pipeline_batches * 128 / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch_size", type=int, default=32, help="images per training step")
    p.add_argument("--blocks_per_stage", type=int, default=9, help="9 = Table 1")
    p.add_argument("--steps", type=int, default=3, help="timed steps per model per round")
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds (none, batch, ...)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per model first")
    p.add_argument("--pipeline_batches", type=int, default=200, help="batches of 128 to time")
    args = p.parse_args()
    for name in ("batch_size", "blocks_per_stage", "steps", "rounds", "warmup", "pipeline_batches"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be positive")
    import tensorflow as tf  # after the flags: --help and a bad flag answer at once

    print(f"TF {tf.__version__}, {os.cpu_count()} CPU cores, GPUs: "
          f"{len(tf.config.list_physical_devices('GPU'))}", flush=True)
    rates, params = model_throughput(args)
    print(f"model: CIFAR-100, {args.blocks_per_stage} blocks/stage, {params:,} trainable params, "
          f"batch {args.batch_size}, {args.rounds}x{args.steps} timed steps each")
    print(f"  norm=none   {rates['none']:8.1f} images/s")
    print(f"  norm=batch  {rates['batch']:8.1f} images/s")
    print(f"  none/batch  {rates['none'] / rates['batch']:8.2f}x  "
          f"({'OK: not slower' if rates['none'] >= rates['batch'] else 'SLOWER'})")
    pipe = pipeline_throughput(args)
    step = max(rates.values())
    print(f"input pipeline (CIFAR augmentation, batch 128): {pipe:8.1f} images/s")
    print(f"  pipeline / fastest training step  {pipe / step:8.1f}x  "
          f"({'OK: >= 10x' if pipe >= 10 * step else 'BELOW 10x'})")


if __name__ == "__main__":
    main()
