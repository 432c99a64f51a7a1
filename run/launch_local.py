"""Starts N training workers on this machine, on loopback, each with its own TF_CONFIG.

    python run/launch_local.py --num_workers=2 -- run/imagenet_train.py --use_synthetic_data \
        --widths=8,8,16,16 --stem_width=8 --blocks_per_stage=1 --batch_size=8 --train_steps=20 \
        --model_dir=/tmp/mw

For trying multi-worker training out and for tests; a real cluster runs the training command once
per machine (docs/imagenet_and_multiworker.md). Every worker gets a free 127.0.0.1 port and the
same cluster; worker 0 is the chief. Each output line is prefixed with `[worker i]`. The first
worker to fail, whichever it is, is named and the others are stopped; the launcher exits with its
status (128+N for a worker killed by signal N, as the shell says it), or 0 when all succeed.
SIGTERM or Ctrl-C is a preemption: every worker saves a checkpoint at a common step and stops
(TERM_GRACE seconds before SIGKILL); a second Ctrl-C kills them at once. Exit status 143 or 130.
Re-running the same command resumes from the last checkpoint in --model_dir.

Distributed TensorFlow is unauthenticated: anyone who can reach these ports can talk to the
workers. Loopback is private to this machine; on a cluster use a trusted network only.
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from resnet_nobn.training.local_cluster import WORKERS_PER_CPU, launch, max_workers  # noqa: E402


class _OneLineParser(argparse.ArgumentParser):
    """A bad flag is one line on stderr and exit status 2, as in every entry point (argparse's
    own error prints the usage first)."""

    def error(self, message):
        print(f"error: {message} (--help lists the flags)", file=sys.stderr, flush=True)
        sys.exit(2)


def main(argv=None):
    parser = _OneLineParser(
        description=__doc__.split("\n\n")[0], allow_abbrev=False,  # --num_worker: a typo
        usage="%(prog)s [--num_workers=N] [--threads_per_worker=T] [--pin_cpus] [--timeout=S] "
              "-- SCRIPT [FLAGS...]")
    parser.add_argument("--num_workers", type=int, default=2, metavar="N",
                        help="how many workers to start, worker 0 the chief (default: 2; at most "
                             f"{max_workers()} on this machine)")
    parser.add_argument("--threads_per_worker", type=int, default=0, metavar="T",
                        help="limit each worker's TensorFlow thread pools (0: TensorFlow's default)")
    parser.add_argument("--pin_cpus", action="store_true",
                        help="pin worker i to CPU i mod the number of CPUs")
    parser.add_argument("--timeout", type=float, default=0, metavar="S",
                        help="stop all workers after this many seconds (0: no limit)")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="-- then the training script and its flags")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the training command after --, e.g. -- run/imagenet_train.py "
                     "--use_synthetic_data")
    if not 1 <= args.num_workers <= max_workers():
        print(f"error: --num_workers={args.num_workers}: give 1 to {max_workers()} on this machine "
              f"({WORKERS_PER_CPU} per CPU, each worker is a whole TensorFlow process); a real "
              "cluster runs one worker per machine (docs/imagenet_and_multiworker.md)",
              file=sys.stderr, flush=True)
        return 2
    return launch(command, args.num_workers, args.threads_per_worker, args.pin_cpus, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
