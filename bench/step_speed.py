"""One training step of Table 1's network against the device's limit: images/s, the FLOP/s they
are, and their fraction of the device's peak.

    python bench/step_speed.py                          # Table 1's CIFAR net, batch 128
    python bench/step_speed.py --steps=1                # on a CPU: one timed step (~1 min)
    python bench/step_speed.py --peak_tflops=67         # a device the table below does not know
    python bench/step_speed.py --backend=jax            # Keras' JAX backend; no TensorFlow needed

The step is the trainer's own compiled loop (resnet_nobn/training/steps.py: forward, loss, gradient,
SGD update) on one device (the first GPU, else the CPU), on synthetic images (no input
pipeline), float32 by default. One loop of one step traces and warms up; then one loop of
--steps steps is timed. A training image costs 3 x the forward pass's convolutions and head,
counted from the shapes (bench/flops.py `conv_forward_flops`, which tests/bench/test_flops.py
holds within 0.5% of TensorFlow's profiler). The peak is --peak_tflops, or the float32 peak
(without tensor cores) of a GPU in `PEAK_FP32_TFLOPS` found in the device's name; TensorFlow runs
float32 convolutions on TF32 tensor cores where there are some, so the fraction may exceed what
that peak suggests. On a CPU the peak is unknown unless given.

`--backend=jax` times the same network under Keras' JAX backend, on a machine with or without
TensorFlow: the step of experiments/stability/jax_study.py (`KerasRun`: the cross-entropy plus the weight decay,
the gradient, Keras' SGD with momentum, in train/steps.py's order), jitted, on random images drawn
on the device; float32 or bfloat16 (float16 needs the TensorFlow trainer's loss scaling).
"""
import argparse
import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# Float32 peak without tensor cores, TFLOP/s, by a part of the GPU's name (the first match wins,
# so the more specific names come first); vendors' data sheets, boost clock.
PEAK_FP32_TFLOPS = (("H100 PCIe", 51.2), ("H100", 66.9), ("H200", 66.9), ("A100", 19.5),
                    ("L40S", 91.6), ("L4", 30.3), ("A10", 31.2), ("V100", 15.7), ("T4", 8.1),
                    ("RTX 4090", 82.6), ("K40", 4.29))


def peak_of(device_name):
    """The float32 peak (TFLOP/s) of a device named `device_name` in PEAK_FP32_TFLOPS, or None."""
    for part, tflops in PEAK_FP32_TFLOPS:
        if part.lower() in (device_name or "").lower():
            return tflops
    return None


def parse_widths(text):
    """--widths as a tuple of the channels of Table 1's three stages: positive and non-decreasing
    (the shortcut zero-pads channels; the stem is made no wider than the first); SystemExit with
    one `error:` line naming the flag otherwise, before anything loads."""
    try:
        widths = tuple(int(w) for w in text.split(","))
    except ValueError:
        widths = ()
    if len(widths) != 3 or min(widths) < 1 or list(widths) != sorted(widths):
        raise SystemExit(f"error: --widths={text}: give the channels of the 3 stages, positive "
                         "and non-decreasing, e.g. 64,128,256")
    return widths


def measure(cfg, steps):
    """(seconds of one training step of `cfg` on one device, the device's name)."""
    import tensorflow as tf
    from resnet_nobn.data import inputs
    from resnet_nobn.training import provenance, steps as steps_lib

    gpus = tf.config.list_logical_devices("GPU")
    strategy = tf.distribute.OneDeviceStrategy("/gpu:0" if gpus else "/cpu:0")
    model, optimizer = steps_lib.build(cfg, strategy)
    data = inputs.make_input(cfg)
    iterator = iter(strategy.distribute_datasets_from_function(
        lambda ctx: data.train_dataset(ctx, cfg.batch_size, 0)))
    loop = steps_lib.build_train_loop(cfg, strategy, model, optimizer)
    loop(iterator, tf.constant(1)).numpy()  # traces, compiles and warms up
    start = time.perf_counter()
    loop(iterator, tf.constant(steps)).numpy()
    seconds = (time.perf_counter() - start) / steps
    return seconds, next(iter(provenance.device_names(strategy).items()))


def measure_jax(cfg, steps):
    """(seconds of one training step of `cfg` under Keras' JAX backend, the device's name): the
    step of experiments/stability/jax_study.py, jitted; one call compiles and warms up, then `steps` are timed."""
    import jax
    import keras
    from experiments.stability.jax_study import KerasRun

    if cfg.mixed_precision != "float32":
        keras.mixed_precision.set_dtype_policy(f"mixed_{cfg.mixed_precision}")
    run = KerasRun(cfg.model, cfg)
    tv, ntv, ov = run.start(cfg.seed)
    step = jax.jit(run.step, donate_argnums=(0, 1, 2))
    kx, ky = jax.random.split(jax.random.PRNGKey(cfg.seed))
    m = cfg.model
    x = jax.random.normal(kx, (cfg.batch_size, m.image_size, m.image_size, 3))
    y = jax.random.randint(ky, (cfg.batch_size,), 0, m.num_classes)
    one = jax.numpy.float32(1.0)  # no mixup: the whole loss on y
    tv, ntv, ov, loss, *_ = step(tv, ntv, ov, x, y, y, one)  # traces, compiles and warms up
    loss.block_until_ready()
    start = time.perf_counter()
    for _ in range(steps):
        tv, ntv, ov, loss, *_ = step(tv, ntv, ov, x, y, y, one)
    loss.block_until_ready()
    seconds = (time.perf_counter() - start) / steps
    device = jax.devices()[0]
    return seconds, (f"{device.platform.upper()}:{device.id}", device.device_kind)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10, help="timed steps (one compiled loop)")
    parser.add_argument("--batch_size", type=int, default=128, help="images per step")
    parser.add_argument("--peak_tflops", type=float, default=None,
                        help="the device's peak, TFLOP/s (default: looked up for known GPUs)")
    parser.add_argument("--mixed_precision", choices=("float32", "float16", "bfloat16"),
                        default="float32", help="the trainer's --mixed_precision")
    parser.add_argument("--widths", default=None, help="default: Table 1's 64,128,256")
    parser.add_argument("--blocks", type=int, default=None, help="default: Table 1's 9 per stage")
    parser.add_argument("--backend", choices=("tensorflow", "jax"), default="tensorflow",
                        help="tensorflow: the trainer's own loop; jax: the network under Keras' "
                        "JAX backend, experiments/stability/jax_study.py's step (no TensorFlow needed)")
    args = parser.parse_args()
    if args.steps < 1 or args.batch_size < 1:
        raise SystemExit("error: --steps and --batch_size must be at least 1")
    if args.blocks is not None and args.blocks < 1:  # 0 is no network, not "the default"
        raise SystemExit(f"error: --blocks={args.blocks}: give at least 1 block per stage")
    if args.peak_tflops is not None and not (args.peak_tflops > 0
                                             and math.isfinite(args.peak_tflops)):
        raise SystemExit(f"error: --peak_tflops={args.peak_tflops:g}: give the device's peak, a "
                         "positive number (leave it out to look it up)")
    if args.backend == "jax" and args.mixed_precision == "float16":
        raise SystemExit("error: --mixed_precision=float16 needs the TensorFlow trainer's loss "
                         "scaling; under --backend=jax give bfloat16 or float32")
    widths = parse_widths(args.widths) if args.widths is not None else None
    if "keras" in sys.modules and os.environ.get("KERAS_BACKEND", "tensorflow") != args.backend:
        raise SystemExit(f"error: Keras is already loaded with another backend than "
                         f"--backend={args.backend}")
    os.environ["KERAS_BACKEND"] = args.backend  # before Keras loads (recipes, the network)
    if args.backend == "jax":  # Keras seeds TensorFlow too wherever it can import it
        sys.modules.setdefault("tensorflow", None)  # (keras.utils.set_random_seed): not here
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import dataclasses
    from bench.flops import conv_forward_flops
    from resnet_nobn import recipes

    cfg = recipes.cifar()
    model = cfg.model
    if widths is not None:
        model = dataclasses.replace(model, widths=widths, stem_width=min(model.stem_width,
                                                                          widths[0]))
    if args.blocks is not None:
        model = dataclasses.replace(model, blocks_per_stage=(args.blocks,) * len(model.widths))
    cfg = dataclasses.replace(cfg, model=model, batch_size=args.batch_size,
                              use_synthetic_data=True, mixed_precision=args.mixed_precision)
    seconds, (device, name) = (measure_jax if args.backend == "jax" else measure)(cfg, args.steps)
    per_image = 3 * conv_forward_flops(model)
    images_per_sec = args.batch_size / seconds
    achieved = images_per_sec * per_image / 1e12
    peak = (args.peak_tflops if args.peak_tflops is not None
            else peak_of(name) if "GPU" in device else None)
    widths = ",".join(map(str, model.widths))
    print(f"network: widths {widths}, {model.blocks_per_stage[0]} blocks per stage, "
          f"batch {args.batch_size}, {args.mixed_precision}, "
          f"{'JAX' if args.backend == 'jax' else 'TensorFlow'} backend")
    print(f"device: {device} ({name})")
    print(f"step: {seconds * 1e3:.1f} ms  images/s: {images_per_sec:.1f}")
    print(f"training FLOPs per image: {per_image / 1e9:.2f} GFLOP (3 x the forward convolutions)")
    print(f"achieved: {achieved:.3f} TFLOP/s  " + (
        f"peak: {peak:g} TFLOP/s ({'given' if args.peak_tflops is not None else 'looked up'})  "
        f"fraction of peak: {achieved / peak:.1%}" if peak else
        "peak: unknown (give --peak_tflops)"))


if __name__ == "__main__":
    main()
