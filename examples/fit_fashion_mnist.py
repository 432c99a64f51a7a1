"""Trains the paper's network with `model.fit` on Fashion-MNIST, with the paper's recipe.

    python examples/fit_fashion_mnist.py --data_dir=DIR    # prepared by run/prepare_data.py
    python examples/fit_fashion_mnist.py --synthetic        # random images: no data needed

The grey 28x28 images are zero-padded to 32x32 and repeated in 3 channels, as the command line's
input pipeline does; `resnet_nobn.Standardize()` standardises each image in front of the network.
Prints the test accuracy and saves the model as a .keras file.
"""
import argparse
import dataclasses

import numpy as np


def images(data_dir, synthetic, train_size, test_size):
    """((x_train, y_train), (x_test, y_test)): uint8 [N, 32, 32, 3] images and their labels."""
    if synthetic:
        rng = np.random.default_rng(0)
        x = rng.integers(0, 256, (train_size + test_size, 28, 28, 1), dtype="uint8")
        y = rng.integers(0, 10, train_size + test_size)
        parts = ((x[:train_size], y[:train_size]), (x[train_size:], y[train_size:]))
    else:
        import tensorflow_datasets as tfds
        parts = [tfds.as_numpy(tfds.load("fashion_mnist", split=f"{split}[:{n}]", data_dir=data_dir,
                                         batch_size=-1, as_supervised=True, download=False))
                 for split, n in (("train", train_size), ("test", test_size))]
    return [(np.repeat(np.pad(x, ((0, 0), (2, 2), (2, 2), (0, 0))), 3, axis=-1), y)
            for x, y in parts]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data_dir", help="tfds directory holding the prepared fashion_mnist")
    parser.add_argument("--synthetic", action="store_true", help="random images instead")
    parser.add_argument("--widths", default="16,32,64", help="channels of each stage")
    parser.add_argument("--blocks_per_stage", type=int, default=1, help="blocks in every stage")
    parser.add_argument("--steps", type=int, default=1000, help="training steps")
    parser.add_argument("--batch_size", type=int, default=64, help="images per step")
    parser.add_argument("--learning_rate", type=float, default=0.02,
                        help="the initial rate (the paper's 0.05 diverged here)")
    parser.add_argument("--train_size", type=int, default=60000, help="training images used")
    parser.add_argument("--test_size", type=int, default=10000, help="test images evaluated")
    parser.add_argument("--save", default="fashion_mnist.keras",
                        help="where the model is saved (a .keras file)")
    args = parser.parse_args()
    if args.steps < 3:  # the rate's two drops need two distinct steps after the first
        parser.error(f"--steps={args.steps}: give at least 3 (the rate drops at 50% and 83% of them)")
    if not args.synthetic and not args.data_dir:
        parser.error("give --data_dir (run/prepare_data.py --dataset=fashion_mnist) or --synthetic")
    for flag in ("batch_size", "train_size", "test_size"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag}={getattr(args, flag)}: give at least 1")
    if not args.save.endswith(".keras"):  # Keras saves only .keras files: said before training
        parser.error(f"--save={args.save}: give a path ending in .keras")

    import keras
    import resnet_nobn

    try:
        widths = tuple(int(w) for w in args.widths.split(","))
    except ValueError:
        parser.error(f"--widths={args.widths}: give a comma list of integers, e.g. 16,32,64")
    try:
        config = resnet_nobn.ModelConfig(widths=widths, blocks_per_stage=args.blocks_per_stage,
                                         stem_width=min(16, widths[0]))
    except ValueError as e:  # resnet_nobn.ConfigError is one, naming the field
        parser.error(f"--widths={args.widths} --blocks_per_stage={args.blocks_per_stage}: {e}")
    # the CIFAR recipe (momentum, weight decay, rate divided by 10 at 50% and 83% of the steps)
    recipe = dataclasses.replace(resnet_nobn.recipes.cifar(), learning_rate=args.learning_rate,
                                 batch_size=args.batch_size, train_steps=args.steps,
                                 lr_boundaries=(args.steps // 2, args.steps * 5 // 6))
    (x, y), (x_test, y_test) = images(args.data_dir, args.synthetic, args.train_size,
                                      args.test_size)
    keras.utils.set_random_seed(0)
    net = resnet_nobn.build_model(config, seed=0, weight_decay=recipe.weight_decay)
    model = keras.Sequential([keras.Input((32, 32, 3), dtype="uint8"), resnet_nobn.Standardize(),
                              net])
    model.compile(optimizer=resnet_nobn.recipes.optimizer(recipe), metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    # exactly --steps batches: the training images in a new random order each epoch
    rng = np.random.default_rng(0)
    order = np.concatenate([rng.permutation(len(x)) for _ in
                            range(-(-args.steps * args.batch_size // len(x)))])
    order = order[:args.steps * args.batch_size]
    model.fit(x[order], y[order], batch_size=args.batch_size, epochs=1, shuffle=False, verbose=2)
    loss, accuracy = model.evaluate(x_test, y_test, batch_size=256, verbose=0)
    print(f"test accuracy {accuracy:.4f}  loss {loss:.4f}  after {int(model.optimizer.iterations)}"
          f" steps")
    model.save(args.save)
    print(f"saved {args.save}")


if __name__ == "__main__":
    main()
