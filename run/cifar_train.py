"""Trains the all-convolutional, normalization-free ResNet of Table 1 on CIFAR-10/100 (or on
Fashion-MNIST, real images offline, zero-padded to 32x32x3; or on your own images,
--dataset=image_folder --data_dir=ROOT of ROOT/train/LABEL/* and ROOT/test/LABEL/*).

    python run/cifar_train.py --dataset=cifar100 --model_dir=/tmp/cifar100

Defaults are the paper's recipe (Table 1, Section 4: `recipes.cifar()` in resnet_nobn/recipes.py).
Re-running the same command resumes from the latest checkpoint in --model_dir; re-running a
finished run says so and exits.
"""
import _start  # noqa: F401  (first: the repository on sys.path, quiet TensorFlow, Ctrl-C)
from resnet_nobn import cli, recipes
from resnet_nobn.training import main

cli.define_flags(recipes.cifar())
if __name__ == "__main__":
    main.run()
