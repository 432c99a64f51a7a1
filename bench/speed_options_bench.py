"""Training throughput of the speed options (--xla, --mixed_precision) beside the default.

    python bench/speed_options_bench.py             # widths 16,32,64, 2 blocks/stage, batch 64
    python bench/speed_options_bench.py --quick     # smaller, fewer steps (CI)

Each option trains the same synthetic-data network with the project's Trainer (one device) for
2 x --steps steps in this process; images/s is taken over the second half only, so the first
half absorbs tracing and XLA compilation, which is reported separately as the first half's time.
The table also gives the last training loss, which must agree between the options. On a GPU, XLA
and float16/bfloat16 are expected to help; on a CPU they may well not: this prints what this
machine shows.
"""
import argparse
import contextlib
import glob
import io
import os
import platform
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

OPTIONS = [("default (float32)", dict()),
           ("--xla", dict(xla=True)),
           ("--mixed_precision=bfloat16", dict(mixed_precision="bfloat16")),
           ("--mixed_precision=float16", dict(mixed_precision="float16")),
           ("--xla --mixed_precision=bfloat16", dict(xla=True, mixed_precision="bfloat16"))]


def _last_loss(model_dir):
    import tensorflow as tf
    last = (-1, float("nan"))
    for path in glob.glob(os.path.join(model_dir, "train", "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for v in event.summary.value:
                if v.tag == "loss" and event.step > last[0]:
                    last = (event.step, float(tf.make_ndarray(v.tensor)))
    return last[1]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--widths", default=None, help="stage widths (default 16,32,64; 8,16,32 quick)")
    p.add_argument("--blocks", type=int, default=None, help="blocks per stage (default 2; 1 quick)")
    p.add_argument("--batch_size", type=int, default=None, help="default 64; 16 with --quick")
    p.add_argument("--steps", type=int, default=None, help="timed steps (default 100; 10 quick)")
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    a = p.parse_args(argv)
    for flag in ("blocks", "batch_size", "steps"):  # 0 is no size, not "the default"
        if getattr(a, flag) is not None and getattr(a, flag) < 1:
            raise SystemExit(f"error: --{flag}={getattr(a, flag)}: give at least 1")
    widths = tuple(int(w) for w in (a.widths or ("8,16,32" if a.quick else "16,32,64")).split(","))
    blocks = a.blocks if a.blocks is not None else 1 if a.quick else 2
    batch = a.batch_size if a.batch_size is not None else 16 if a.quick else 64
    steps = a.steps if a.steps is not None else 10 if a.quick else 100

    import tensorflow as tf
    tf.get_logger().setLevel("ERROR")

    from resnet_nobn.training import trainer as train_lib
    from resnet_nobn.config import TrainConfig
    from resnet_nobn.config import ModelConfig

    model = ModelConfig(widths=widths, blocks_per_stage=(blocks,) * len(widths),
                        stem_width=widths[0])
    print(f"TF {tf.__version__}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPU cores, GPUs: {len(tf.config.list_physical_devices('GPU'))}; "
          f"widths {','.join(map(str, widths))}, {blocks} block(s)/stage, batch {batch}, synthetic "
          f"data, {steps} warm-up + {steps} timed steps", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, opts in OPTIONS:
            cfg = TrainConfig(model=model, use_synthetic_data=True, batch_size=batch,
                              train_steps=2 * steps, learning_rate=0.01, lr_boundaries=(),
                              log_every=steps, eval_every=10 ** 9, checkpoint_every=10 ** 9,
                              strategy="one_device", model_dir=os.path.join(tmp, str(len(rows))),
                              **opts)
            t0 = time.time()
            trainer = train_lib.Trainer(cfg)
            with contextlib.redirect_stdout(io.StringIO()):
                results = trainer.run()
            total = time.time() - t0
            ips = results["images_per_sec"]
            warm = total - steps * batch / ips
            rows.append((name, ips, warm, _last_loss(cfg.model_dir)))
            print(f"  {name}: {ips:.0f} images/s", flush=True)
    base = rows[0][1]
    print()
    print("| option | images/s | vs default | start-up + first half (s) | last training loss |")
    print("| --- | --- | --- | --- | --- |")
    for name, ips, warm, loss in rows:
        print(f"| {name} | {ips:.0f} | {ips / base:.2f}x | {warm:.1f} | {loss:.5f} |")


if __name__ == "__main__":
    main()
