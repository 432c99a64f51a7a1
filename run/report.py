"""Prints the table of a study: every results.json under --root, grouped over seeds.

    python run/report.py --root=/tmp/study

One Markdown row per configuration (norm / init / head / blocks per stage, plus any other
hyperparameter that differs): seeds, steps, top-1 error (mean ± std over seeds [95% interval of
the mean, Student t]), top-5 error and test loss (mean ± std), train time (the training loop's,
mean), and the paper's Table 2 value where the configuration is the paper's; below it, the
paper's net minus its BN twin with its 95% interval (paired by seed when both have the same
seeds). A run that diverged and went on with its `retry with:` flags (run/ablate.py
--follow_retry_advice) stays in its configuration's row, marked ‡, with the step where it
diverged and those flags below the table.
Also writes the table to ROOT/report.md and, per configuration, panels of the training loss,
the test error and the largest block norm against steps (each seed thin, the mean bold, the
learning-rate drops dotted) to ROOT/report.png (or --out_md / --out_png). Needs no TensorFlow;
works while the study is still running.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import flags  # noqa: E402

from resnet_nobn import cli  # noqa: E402
from resnet_nobn.errors import UserError, broken_link  # noqa: E402
from resnet_nobn.study import report  # noqa: E402

flags.DEFINE_string("root", None, "Root directory of the study (run/ablate.py --root).")
flags.DEFINE_string("out_md", None, "Markdown file for the table (default: ROOT/report.md).")
flags.DEFINE_string("out_png", None, "Figure of the training loss, test error and "
                    "largest block norm against steps (default: ROOT/report.png).")
flags.mark_flag_as_required("root")
FLAGS = flags.FLAGS


def main(argv):
    def run():
        said = broken_link(FLAGS.root, "--root")
        if said or not os.path.isdir(FLAGS.root):
            raise UserError(said or f"--root={FLAGS.root} is not a directory; give the --root of a "
                            "study (run/ablate.py --root)")
        try:
            text, md, png = report.report(FLAGS.root, FLAGS.out_md, FLAGS.out_png, warn=lambda line:
                                          print(line, file=sys.stderr, flush=True))
        except (FileNotFoundError, ValueError) as e:
            raise UserError(str(e)) from None
        print(text)
        print(f"written: {md}, {png}")

    cli.main_wrapper(run, "interrupted; an earlier report, if any, is as it was")


if __name__ == "__main__":
    cli.start(main)
