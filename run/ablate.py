r"""Runs an ablation study: one training run per point of a grid of factors, all under one root.

    python run/ablate.py --root=/tmp/study --vary_norm=none,batch --seeds=0,1 \
        --use_synthetic_data --widths=16,32,64 --stem_width=16 --blocks_per_stage=1 \
        --train_steps=1000 --batch_size=64 --learning_rate=0.01

Every flag of the training entry point (run/cifar_train.py, or run/imagenet_train.py with
--dataset=imagenet2012) is a base flag, the same for every run; the --vary_* flags and --seeds
list the values of the factors, and the study runs their product. Each run trains in its own
subprocess into ROOT/<dataset>/<norm_init_head_blocks>/seed-<k>; finished runs are skipped and
interrupted ones (also after a SIGKILL or SIGTERM to this command) resume from their last
checkpoint, so re-running the same command continues the study. A run that diverges stops with
its `retry with:` flags; with --follow_retry_advice it continues once with them. `tensorboard --logdir ROOT` compares the runs (HParams tab); `python run/report.py
--root=ROOT` prints the table. With --print_commands, nothing runs: one shell command per run
the study would launch now is printed, to submit as one cluster job each (stderr says why each
other one is not). While it trains, a line per running run (its step, last loss, time left) and
one for the study come every --progress_every seconds; --progress prints them once, for the jobs
of --print_commands. `--helpfull` lists the base flags.
"""
import _start  # noqa: F401  (first: the repository on sys.path, quiet TensorFlow, Ctrl-C)

import importlib.util
import os
import sys

from absl import flags

from resnet_nobn.data.datasets import DATASETS
from resnet_nobn.study import main, progress

REPO = _start.REPO


def _dataset_from_argv(argv):
    for i, a in enumerate(argv):
        if a.startswith("--dataset="):
            return a.split("=", 1)[1]
        if a == "--dataset" and i + 1 < len(argv):
            return argv[i + 1]
    return None


# The training entry point of the dataset's recipe defines the base flags, with its own defaults
# (CIFAR's or ImageNet's); an unknown --dataset is refused by its flags.
_DATASET = DATASETS.get(_dataset_from_argv(sys.argv))
ENTRY = os.path.join(REPO, _DATASET.entry_point if _DATASET else "run/cifar_train.py")
_before = set(flags.FLAGS)
_spec = importlib.util.spec_from_file_location("_study_entry_point", ENTRY)
_spec.loader.exec_module(importlib.util.module_from_spec(_spec))
TRAIN_FLAGS = sorted(set(flags.FLAGS) - _before)

flags.DEFINE_string("root", None, "Directory of the study: one subdirectory per run, the HParams "
                    "experiment summary, and the report.")
flags.DEFINE_list("vary_norm", [], "Values of --norm to run (none, batch); default: the base --norm.")
flags.DEFINE_list("vary_init", [], "Values of --init to run (auto, identity, standard, he, "
                  "fixup, skipinit); default: the base --init (auto: identity without BN, he with "
                  "BN). fixup and skipinit are run without BN only.")
flags.DEFINE_list("vary_head", [], "Values of --head to run (auto, random, trained); default: the "
                  "base --head (auto: trained with --init=fixup, else random).")
flags.DEFINE_list("vary_blocks", [], "Values of --blocks_per_stage to run: a number for every "
                  "stage, or per-stage numbers joined by '-' (e.g. 1,3,5 or 3-4-6-3); default: "
                  "the base --blocks_per_stage.")
flags.DEFINE_list("vary_relu_leakiness", [], "Values of --relu_leakiness to run, e.g. 0.1,0 "
                  "(the fork's leaky ReLU and a plain ReLU); default: the base --relu_leakiness.")
flags.DEFINE_list("vary_learning_rate", [], "Values of --learning_rate to run, e.g. "
                  "0.05,0.02,0.01; default: the base --learning_rate.")
flags.DEFINE_list("seeds", [], "Seeds to run, e.g. 0,1,2; default: the base --seed.")
flags.DEFINE_float("run_timeout", 0, "Kill a run after this many seconds (0: no limit); it is "
                   "marked 'timeout' and resumes on the next invocation with --retry_failed.",
                   lower_bound=0)
flags.DEFINE_bool("retry_failed", False, "Re-run runs whose last attempt failed (a crash, a "
                  "timeout); by default they are skipped and reported as failed. A diverged run "
                  "would only diverge again: see --follow_retry_advice.")
flags.DEFINE_bool("follow_retry_advice", False, "A run that diverges continues once, from the "
                  "checkpoint its trainer takes before the blow-up, with the flags of its own "
                  "`retry with:` line; its results.json records the divergence step and the "
                  "changed flags, and the report marks its row.")
flags.DEFINE_bool("print_commands", False, "Print one command per run the study would launch "
                  "now (for one cluster job each; a diverged or failed run only with "
                  "--follow_retry_advice or --retry_failed) and exit, instead of running them "
                  "here one after another.")
flags.DEFINE_float("progress_every", progress.PERIOD_S, "While the study trains, print each "
                   "running run's step, last loss and time left, and the study's time left, every "
                   "this many seconds (0: never).", lower_bound=0)
flags.register_validator("progress_every", lambda v: 0 <= v <= progress.PERIOD_MAX_S,
                         f"must be a number of seconds in [0, {progress.PERIOD_MAX_S:.0f}] "
                         "(0: never)")  # nan and inf pass the lower bound
flags.DEFINE_bool("progress", False, "Print those lines once, for every run begun and not "
                  "finished (e.g. those a cluster runs after --print_commands), from the runs' "
                  "train.log and results.json, and exit; nothing runs, nothing is written.")
flags.mark_flag_as_required("root")

if __name__ == "__main__":
    main.run(ENTRY, TRAIN_FLAGS)
