"""Exports a trained run: a SavedModel that serves images, the Keras model and a model card.

    python run/export.py --model_dir=runs/cifar100 --export_dir=exports/cifar100

Writes EXPORT_DIR whole or not at all: saved_model/ (serving_default: images as a user has them,
the run's evaluation preprocessing inside the graph; outputs logits, probabilities and the top-5
classes), model.keras, model_card.md, labels.txt and export.json. Exports the newest checkpoint
whose weights are finite (after a divergence, the one a re-run resumes from), or
--checkpoint=STEP. --overwrite replaces only an earlier export (a directory holding export.json
and nothing an export does not write), never a run directory or a directory around one. What is
written: resnet_nobn/export/writer.py.
"""
import _start  # noqa: F401  (first: the repository on sys.path, quiet TensorFlow, Ctrl-C)
from absl import flags, logging

from resnet_nobn import cli, console

flags.DEFINE_string("model_dir", None, "The --model_dir of the training run to export.")
flags.DEFINE_string("export_dir", None, "Directory to write the export to (created; must not "
                    "exist or be empty, unless --overwrite).")
flags.DEFINE_integer("checkpoint", None, "Export ckpt-STEP of the run instead of the newest one "
                     "with finite weights.", lower_bound=0)
flags.DEFINE_bool("overwrite", False, "Replace an earlier export in --export_dir (only once the "
                  "new export is complete); a directory that is not an export is refused.")
flags.mark_flags_as_required(["model_dir", "export_dir"])
FLAGS = flags.FLAGS


def main(argv):
    logging.set_verbosity(logging.ERROR)  # tfds' notes on a dataset that is not prepared here

    def run():
        from resnet_nobn.export import writer
        writer.check_paths(FLAGS.model_dir, FLAGS.export_dir, FLAGS.checkpoint, FLAGS.overwrite)
        with console.quiet_stderr():  # TensorFlow's start-up lines
            import tensorflow as tf
        tf.get_logger().setLevel("ERROR")
        writer.export(FLAGS.model_dir, FLAGS.export_dir, FLAGS.checkpoint, FLAGS.overwrite)

    cli.main_wrapper(run, "interrupted; nothing was exported")


if __name__ == "__main__":
    cli.start(main)
