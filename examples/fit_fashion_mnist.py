"""Trains the paper's network with `model.fit` on Fashion-MNIST: docs/library.md's first model, with flags.

    python examples/fit_fashion_mnist.py                  # Debian's idx files, prepared into tfds' directory
    python examples/fit_fashion_mnist.py --data_dir=DIR   # a tfds directory (run/prepare_data.py)
    python examples/fit_fashion_mnist.py --synthetic      # random images: no data needed

`resnet_nobn.load_dataset` gives the command line's input (the 28x28 grey images zero-padded to
32x32x3, augmented), `resnet_nobn.ImageClassifier` the network with its preprocessing, compiled
with the CIFAR recipe at the rate and clip given, its rate divided by 10 at 50% and 83% of the
steps (`resnet_nobn.recipes.scaled`). Prints a learning curve, the test accuracy, and saves the
model as a .keras file (it loads with keras.saving.load_model after `import resnet_nobn`).
"""
import argparse


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data_dir", help="tfds directory holding the prepared fashion_mnist "
                        "(default: tfds' own, prepared there from Debian's idx files)")
    parser.add_argument("--synthetic", action="store_true", help="random images instead")
    parser.add_argument("--widths", default="16,32,64", help="channels of each stage")
    parser.add_argument("--blocks_per_stage", type=int, default=1, help="blocks in every stage")
    parser.add_argument("--steps", type=int, default=400, help="training steps")
    parser.add_argument("--batch_size", type=int, default=32, help="images per step")
    parser.add_argument("--learning_rate", type=float, default=0.1, help="the initial rate")
    parser.add_argument("--clip_norm", type=float, default=1.0,
                        help="the gradient's global norm bound (0: none; docs/stability.md)")
    parser.add_argument("--train_size", type=int, default=512,
                        help="random training images (--synthetic only)")
    parser.add_argument("--test_size", type=int, default=10000, help="test images evaluated (the first, in whole batches of up to 500)")
    parser.add_argument("--save", default="fashion_mnist.keras",
                        help="where the model is saved (a .keras file)")
    args = parser.parse_args()
    if args.steps < 4:  # the rate's two drops need two distinct steps after the first
        parser.error(f"--steps={args.steps}: give at least 4 (the rate drops at 50% and 83% of them)")
    for flag in ("batch_size", "train_size", "test_size"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag}={getattr(args, flag)}: give at least 1")
    if not args.save.endswith(".keras"):  # Keras saves only .keras files: said before training
        parser.error(f"--save={args.save}: give a path ending in .keras")
    try:
        widths = tuple(int(w) for w in args.widths.split(","))
    except ValueError:
        parser.error(f"--widths={args.widths}: give a comma list of integers, e.g. 16,32,64")

    import numpy as np
    import resnet_nobn

    try:
        recipe = resnet_nobn.recipes.scaled(resnet_nobn.recipes.cifar(
            learning_rate=args.learning_rate, clip_norm=args.clip_norm, batch_size=args.batch_size,
            widths=widths, blocks_per_stage=args.blocks_per_stage,
            stem_width=min(16, widths[0])), train_steps=args.steps)
    except ValueError as e:  # resnet_nobn.ConfigError is one, naming the field
        parser.error(f"--widths={args.widths} --blocks_per_stage={args.blocks_per_stage}: {e}")
    if args.synthetic:
        rng = np.random.default_rng(0)
        n = args.train_size + args.test_size
        x, y = rng.integers(0, 256, (n, 28, 28, 1), dtype="uint8"), rng.integers(0, 10, n)
        train = (x[:args.train_size], y[:args.train_size])
        test = (x[args.train_size:], y[args.train_size:])
    else:
        train = resnet_nobn.load_dataset("fashion_mnist", "train", batch_size=args.batch_size,
                                         data_dir=args.data_dir)
        batch = min(500, args.test_size)  # whole batches: a known length, no "ran out" warning
        test = resnet_nobn.load_dataset("fashion_mnist", "test", batch_size=batch,
                                        data_dir=args.data_dir).take(-(-args.test_size // batch))
    model = resnet_nobn.ImageClassifier(recipe.model, dataset="fashion_mnist", recipe=recipe)
    # a learning-curve line every `per` steps (at most 50, a divisor of --steps)
    per = next(d for d in range(max(1, min(50, args.steps // 8)), 0, -1) if args.steps % d == 0)
    if args.synthetic:  # exactly --steps batches, the images in a new random order each epoch
        order = np.concatenate([rng.permutation(args.train_size)
                                for _ in range(-(-args.steps * args.batch_size // args.train_size))])
        x, y = train[0][order], train[1][order]
        model.fit(x[:args.steps * args.batch_size], y[:args.steps * args.batch_size],
                  batch_size=args.batch_size, epochs=1, shuffle=False, verbose=2)
    else:
        model.fit(train, steps_per_epoch=per, epochs=args.steps // per, verbose=2)
    loss, accuracy = (model.evaluate(*test, batch_size=256, verbose=0) if args.synthetic
                      else model.evaluate(test, verbose=0))
    print(f"test accuracy {accuracy:.4f}  loss {loss:.4f}  after {int(model.optimizer.iterations)}"
          f" steps")
    model.save(args.save)
    print(f"saved {args.save}")


if __name__ == "__main__":
    main()
