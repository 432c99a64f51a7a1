"""Trains the all-convolutional, normalization-free ResNet-34 variant of Section 4.2 on ImageNet.

    python run/imagenet_train.py --model_dir=/tmp/imagenet

On a cluster, run this same command on every worker, each with its own TF_CONFIG (see the README);
run/launch_local.py starts several workers on this machine. Defaults are the paper's recipe
(resnet_nobn/config.py, IMAGENET_RECIPE): global batch 256, momentum 0.9, learning rate 0.1 times 0.94 every two
epochs (10,009 steps), 700k steps. Re-running the same command resumes from the last checkpoint.

Environment: RESNET_NOBN_CONNECT_TIMEOUT (seconds, default 180) bounds the wait for the peers of
TF_CONFIG; RESNET_NOBN_HEARTBEAT_TIMEOUT (seconds, default 30) is how soon a vanished peer is noticed.
"""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Ctrl-C while the modules load: one line and exit 130 (run_flags.main_wrapper takes over after)
signal.signal(signal.SIGINT, lambda *_: (print("interrupted", file=sys.stderr), os._exit(130)))

from absl import app, flags  # noqa: E402

from resnet_nobn import flags as run_flags  # noqa: E402
from resnet_nobn.config import IMAGENET_MODEL, IMAGENET_RECIPE  # noqa: E402

run_flags.define_flags(datasets=("imagenet2012",), **run_flags.as_flag_defaults(
    {**IMAGENET_MODEL, **IMAGENET_RECIPE}))
flags.adopt_module_key_flags(run_flags)  # so --help lists them

if __name__ == "__main__":
    app.run(run_flags.main)
