"""Trains the all-convolutional, normalization-free ResNet of Table 1 on CIFAR-10/100.

    python run/cifar_train.py --dataset=cifar100 --model_dir=/tmp/cifar100

Defaults are the paper's recipe (Table 1, Section 4: `recipes.cifar()` in resnet_nobn/recipes.py);
`--helpfull` lists every flag. Re-running the same command resumes from the latest checkpoint in
--model_dir.
"""
import _start  # noqa: F401  (first: the repository on sys.path, quiet TensorFlow, Ctrl-C)
from resnet_nobn import cli, recipes
from resnet_nobn.train import main

cli.define_flags(recipes.cifar())
if __name__ == "__main__":
    main.run()
