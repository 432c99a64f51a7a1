"""Trains the all-convolutional, normalization-free ResNet of Table 1 on CIFAR-10/100.

    python run/cifar_train.py --dataset=cifar100 --model_dir=/tmp/cifar100

Defaults are the paper's (Section 4); `--helpfull` lists every flag. Re-running the same command
resumes from the latest checkpoint in --model_dir.
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

run_flags.define_flags(datasets=("cifar10", "cifar100"))
flags.adopt_module_key_flags(run_flags)  # so --help lists them

if __name__ == "__main__":
    app.run(run_flags.main)
