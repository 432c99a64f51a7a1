"""What Table 2 costs: the training FLOPs per image of the paper's networks, counted by TensorFlow's
profiler, the FLOPs of each Table-2 row, and an estimate of the hours of one run and of the row on
one GPU.

    python bench/flops.py                       # the Table-1 CIFAR net and the ImageNet net
    python bench/flops.py --gpu="H100 SXM, float32" --gpu_tflops=67

The estimate rests on one assumption: a run reaches the fraction of the GPU's float32 peak that
the paper's own CIFAR run reached on its K40 (`PAPER_K40`: the Table-1 net at its peak near 50k
steps of 128 images after about 24 h, on a GPU of 4.29 TFLOP/s float32 peak), i.e. about 20%;
`--fraction_of_peak` replaces it.

A training step is counted as the graph of one image's forward pass, loss and gradient with
respect to every trainable weight (tf.compat.v1.profiler, float_operation: the convolutions, their
two backward convolutions and the elementwise ops TensorFlow registers FLOPs for); the optimizer's
update is per batch, not per image, and left out. An evaluation is one forward pass.
`conv_forward_flops` counts the convolutions of the forward pass from the shapes alone
(2 x multiply-adds); tests/bench/test_flops.py checks the profiler against it. The hours are an
estimate, nothing here was measured on a GPU.
"""
import argparse
import dataclasses
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Table 2's rows as run/ablate.py runs them (README "Reproduce Table 2"): (dataset, norms, seeds).
# The BN twin (--norm=batch) runs beside the paper's BN-free net in every row.
ROWS = (("cifar10", ("none", "batch"), 3), ("cifar100", ("none", "batch"), 3),
        ("imagenet2012", ("none", "batch"), 1))

# NVIDIA A100, float32 peak without tensor cores, TFLOP/s: the GPU of the estimate. TensorFlow runs
# float32 convolutions on its TF32 tensor cores by default (156 TFLOP/s peak), which may be faster
# than the estimate; it assumes nothing about them.
A100_FP32_TFLOPS = 19.5
# The paper's measurement (Section 4): its CIFAR run peaked near 50k steps of 128 images, "about
# 24 h" on one NVIDIA K40 (float32 peak 4.29 TFLOP/s at base clock).
PAPER_K40 = dict(steps=50_000, batch=128, hours=24, tflops=4.29)


def paper_fraction(per_image):
    """The fraction of its K40's float32 peak the paper's CIFAR run reached, given the Table-1
    net's training FLOPs per image."""
    k40 = PAPER_K40
    flops_per_s = k40["steps"] * k40["batch"] * per_image / (k40["hours"] * 3600)
    return flops_per_s / (k40["tflops"] * 1e12)


def conv_forward_flops(model_cfg):
    """FLOPs (2 x multiply-adds) of the convolutions and the head of one image's forward pass."""
    m = model_cfg
    size = math.ceil(m.image_size / m.stem_stride)
    flops = 2 * size * size * m.stem_kernel ** 2 * 3 * m.stem_width
    in_ch = m.stem_width
    for width, blocks, stride in zip(m.widths, m.blocks_per_stage, m.strides):
        for b in range(blocks):
            size = math.ceil(size / (stride if b == 0 else 1))
            flops += 2 * size * size * m.kernel_size ** 2 * (in_ch + width) * width
            in_ch = width
    return flops + 2 * in_ch * m.num_classes


def profiled_flops(model_cfg, training=True):
    """FLOPs of one image, counted by TensorFlow's profiler on the graph of a training step
    (forward, loss, gradients; `training`) or of an evaluation (forward only)."""
    import tensorflow as tf

    from resnet_nobn.model.network import build_model
    model = build_model(model_cfg, seed=0)

    def train_step(images, labels):
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        return tape.gradient(loss, model.trainable_variables)

    def eval_step(images, labels):
        return model(images, training=False)

    size = model_cfg.image_size
    graph = tf.function(train_step if training else eval_step).get_concrete_function(
        tf.TensorSpec([1, size, size, 3], tf.float32), tf.TensorSpec([1], tf.int32)).graph
    builder = tf.compat.v1.profiler.ProfileOptionBuilder
    options = builder(builder.float_operation()).with_empty_output().build()
    return tf.compat.v1.profiler.profile(graph, options=options).total_float_ops


def row_cost(recipe, norms, seeds, count=profiled_flops):
    """(training FLOPs per image of each norm, total FLOPs of the row, runs): every run trains
    train_steps x batch_size images and evaluates the test split every eval_every steps."""
    from resnet_nobn.data.datasets import DATASETS
    info = DATASETS[recipe.dataset]
    evals = math.ceil(recipe.train_steps / recipe.eval_every)
    per_image, total = {}, 0
    for norm in norms:
        model = dataclasses.replace(recipe.model, norm=norm, init="identity" if norm == "none"
                                    else "he")
        per_image[norm] = count(model, training=True)
        run = (recipe.train_steps * recipe.batch_size * per_image[norm]
               + evals * info.num_eval * count(model, training=False))
        total += seeds * run
    return per_image, total, len(norms) * seeds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", default="NVIDIA A100, float32",
                        help="the GPU's name, as the estimate's line says it")
    parser.add_argument("--gpu_tflops", type=float, default=A100_FP32_TFLOPS,
                        help="the GPU's peak, TFLOP/s (default: the A100's float32 peak)")
    parser.add_argument("--fraction_of_peak", type=float, default=None,
                        help="the fraction of that peak a run reaches, in (0, 1] (default: the "
                             "paper's K40 run's, paper_fraction)")
    args = parser.parse_args()
    if not args.gpu_tflops > 0 or math.isinf(args.gpu_tflops):
        parser.error(f"--gpu_tflops={args.gpu_tflops}: give the GPU's peak, a positive number")
    if args.fraction_of_peak is not None and not 0 < args.fraction_of_peak <= 1:
        parser.error(f"--fraction_of_peak={args.fraction_of_peak}: give a fraction in (0, 1], "
                     "e.g. 0.2")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from resnet_nobn.console import quiet_stderr
    with quiet_stderr():  # TensorFlow's start-up lines
        import tensorflow as tf
    tf.get_logger().setLevel("ERROR")  # the v1 profiler's deprecation warnings
    from resnet_nobn import paper, recipes
    from resnet_nobn.data.datasets import DATASETS
    fraction = args.fraction_of_peak or paper_fraction(profiled_flops(recipes.cifar().model))
    rate = args.gpu_tflops * 1e12 * fraction
    print(f"Hours on one {args.gpu} ({args.gpu_tflops:g} TFLOP/s peak) at {fraction:.1%} of its "
          "peak:\n")
    print("| row | runs | training GFLOPs per image (BN-free / BN twin) | total FLOPs | one run "
          "| the row |")
    print("| --- | --- | --- | --- | --- | --- |")
    for dataset, norms, seeds in ROWS:
        recipe = paper.recipe_of(dataset)
        model = dataclasses.replace(recipe.model, num_classes=DATASETS[dataset].num_classes)
        recipe = dataclasses.replace(recipe, model=model, dataset=dataset)
        per_image, total, runs = row_cost(recipe, norms, seeds)
        hours = total / rate / 3600
        print(f"| {dataset} | {runs} | {' / '.join(f'{per_image[n] / 1e9:.3f}' for n in norms)} | "
              f"{total:.3g} | {hours / runs:,.1f} h | {hours:,.1f} h |", flush=True)


if __name__ == "__main__":
    main()
