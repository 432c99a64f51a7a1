"""Trains the all-convolutional, normalization-free ResNet-34 variant of Section 4.2 on ImageNet.

    python run/imagenet_train.py --model_dir=/tmp/imagenet

On a cluster, run this same command on every worker, each with its own TF_CONFIG
(docs/imagenet_and_multiworker.md); run/launch_local.py starts several workers on this machine. Defaults are the paper's recipe
(Section 4.2: `recipes.imagenet()` in resnet_nobn/recipes.py): global batch 256, momentum 0.9,
learning rate 0.1 times 0.94 every two epochs (10,009 steps), 700k steps. Re-running the same
command resumes from the last checkpoint.

Environment: RESNET_NOBN_CONNECT_TIMEOUT (seconds, default 180) bounds the wait for the peers of
TF_CONFIG; RESNET_NOBN_HEARTBEAT_TIMEOUT (seconds, default 30) is how soon a vanished peer is noticed.
"""
import _start  # noqa: F401  (first: the repository on sys.path, quiet TensorFlow, Ctrl-C)
from resnet_nobn import cli, recipes
from resnet_nobn.training import main

cli.define_flags(recipes.imagenet())
if __name__ == "__main__":
    main.run()
