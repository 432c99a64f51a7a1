"""Prints the top-5 classes of image files, with their names and probabilities, from an export.

    python run/predict.py --export_dir=exports/cifar100 cat.png dog.jpg

Uses the SavedModel of run/export.py (the run's evaluation preprocessing is inside it) and the
label names recorded at export; the export is checked first (resnet_nobn/export/predict.py). An
export of pixel arrays takes images of its own input size (CIFAR-10/100 and an image folder:
32x32; Fashion-MNIST: 28x28, read as grey): another size is refused, or resized to that size
(bilinear, antialiased) with --resize, and said so. An ImageNet export takes any JPEG or PNG. An
image of more than MAX_PIXELS pixels (resnet_nobn/data/images.py) is refused before it is decoded.
Names and paths are printed with their control characters escaped.
"""
import _start  # noqa: F401  (first: the repository on sys.path, quiet TensorFlow, Ctrl-C)
from absl import app, flags

from resnet_nobn import cli, console

flags.DEFINE_string("export_dir", None, "Directory written by run/export.py.")
flags.DEFINE_bool("resize", False, "Resize an image of another size to the export's input "
                  "size (e.g. 32x32 for CIFAR, 28x28 for Fashion-MNIST; bilinear, antialiased) "
                  "instead of refusing it. ImageNet exports take any size without it.")
flags.mark_flag_as_required("export_dir")
FLAGS = flags.FLAGS


def main(argv):
    files = argv[1:]
    if not files:
        raise app.UsageError("give one or more image files: run/predict.py --export_dir=E FILE...")

    def run():
        from resnet_nobn.export import predict
        read = predict.read_export(FLAGS.export_dir)  # checked before TensorFlow loads
        with console.quiet_stderr():  # TensorFlow's start-up lines
            import tensorflow as tf
        tf.get_logger().setLevel("ERROR")
        for path, note, top in predict.predict(FLAGS.export_dir, files, FLAGS.resize, read):
            print(f"{console.printable(path)}{note}")
            for rank, (c, name, p) in enumerate(top, 1):
                print(f"  {rank}. {p:.4f}  {console.printable(name)} (class {c})")

    cli.main_wrapper(run, "interrupted")


if __name__ == "__main__":
    cli.start(main, takes_arguments=True)
