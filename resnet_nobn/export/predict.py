"""Reading an export of resnet_nobn/export/writer.py and predicting with it (run/predict.py).

`read_export` checks the export before anything is loaded from it: export.json complete and of
the right types, the `digest` it records equal to the digest of saved_model/ and of its own
description of the model (so an export.json edited, or a saved_model/ copied from another
export, is refused), labels.txt UTF-8 with one name per class. `read_images` reads each image's
size from its header and refuses one of more than MAX_PIXELS pixels before decoding it
(resnet_nobn/data/images.py, which also resizes with `--resize`), and for an ImageNet model one
its graph does not decode (ENCODED: not WebP, BMP or an animated GIF).
`printable` escapes the control characters of a name or path before it reaches a terminal.
"""
import json
import os

from resnet_nobn.data.images import MAX_PIXELS, decode_pixels, read_file, resized
from resnet_nobn.data.datasets import DATASETS
from resnet_nobn.errors import UserError, first_line
from resnet_nobn.export.layout import GLOB, LABELS, META, SAVED_MODEL, digest

# What the ImageNet graph's tf.io.decode_jpeg decodes, as evaluation does (a GIF of one frame)
ENCODED = ("JPEG", "PNG", "GIF")
# export.json: each field predict reads, and the type it must have
FIELDS = dict(dataset=str, image_size=int, num_classes=int, input=str, step=int, digest=str)


def read_export(export_dir):
    """(export.json, label names) of an export; UserError (one line) if export_dir is not one,
    or is not the export it says it is (see the module docstring)."""
    if any(c in export_dir for c in GLOB):
        raise UserError(f"--export_dir={export_dir} contains [, ], * or ?, which TensorFlow reads "
                        "as a glob pattern (the SavedModel cannot be loaded from there); rename "
                        "the directory")
    if not os.path.isdir(export_dir):
        if os.path.exists(export_dir):
            raise UserError(f"--export_dir={export_dir} is a file; give the directory "
                            "run/export.py wrote")
        raise UserError(f"--export_dir={export_dir} does not exist; make one with run/export.py")
    path = os.path.join(export_dir, META)
    try:
        with open(path, "rb") as f:
            meta = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        meta = None
    except (OSError, ValueError) as e:
        raise UserError(f"{path} is unreadable or not JSON ({e}); export the run again with "
                        "run/export.py") from None
    if not os.path.isdir(os.path.join(export_dir, SAVED_MODEL)) or meta is None:
        raise UserError(f"--export_dir={export_dir} holds no export ({SAVED_MODEL}/ and {META}); "
                        "make one with run/export.py")
    bad = [k for k, t in FIELDS.items() if not isinstance(meta, dict)
           or not isinstance(meta.get(k), t) or isinstance(meta.get(k), bool)]
    if not bad and (meta["dataset"] not in DATASETS or meta["input"] not in ("pixels", "encoded")
                    or meta["image_size"] < 1 or meta["num_classes"] < 1):
        bad = ["dataset, input, image_size or num_classes"]
    if bad:
        raise UserError(f"{path} is not an export description of run/export.py ({', '.join(bad)} "
                        "missing or invalid); export the run again with run/export.py")
    if digest(export_dir, meta) != meta["digest"]:
        raise UserError(f"{export_dir}: {META} does not match {SAVED_MODEL}/ (one was edited, or "
                        f"{SAVED_MODEL}/ comes from another export); export the run again with "
                        "run/export.py")
    names = [str(i) for i in range(meta["num_classes"])]
    path = os.path.join(export_dir, LABELS)
    try:
        with open(path, "rb") as f:
            names = f.read().decode("utf-8-sig").splitlines()  # a BOM an editor wrote: not a name
    except FileNotFoundError:
        pass  # class numbers
    except UnicodeDecodeError as e:
        raise UserError(f"{path} is not UTF-8 text (byte {e.start}); write the names as UTF-8, "
                        "or export the run again") from None
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}") from None
    if len(names) != meta["num_classes"]:
        raise UserError(f"{path} has {len(names)} lines, the model {meta['num_classes']} classes; "
                        "give one name per line, or export the run again")
    return meta, names


def read_images(paths, meta, resize=False):
    """(the serving input for `paths`, a note per file); UserError for a file that cannot be read
    or decoded, claims more than MAX_PIXELS pixels, or (a model of pixel arrays, without `resize`)
    is not of the model's size. A model of grey images (Fashion-MNIST) gets each file as grey, at
    the dataset's size: its serving graph pads it as training did."""
    import numpy as np
    import tensorflow as tf
    from resnet_nobn.data.imagenet import eval_shorter_side
    size, batch, notes = meta["image_size"], [], []
    info = DATASETS[meta["dataset"]]
    channels = info.stored[-1] if info.pixels else 3
    shorter = eval_shorter_side(size)  # an ImageNet model's evaluation resize
    for path in paths:
        raw, (kind, w, h, frames) = read_file(path)
        if meta["input"] == "encoded" and (kind not in ENCODED or frames > 1):
            raise UserError(f"{path} is a {kind}" + (f" of {frames} frames" if frames > 1 else "")
                            + f"; the {meta['dataset']} model decodes JPEG, PNG and one-frame GIF "
                            "files, as its evaluation does: convert it to JPEG or PNG")
        if meta["input"] == "encoded" and w * h * (shorter / min(w, h)) ** 2 > MAX_PIXELS:
            raise UserError(f"{path} is {w}x{h} pixels: its shorter side resized to {shorter:g}"
                            f", as evaluation does, makes more than predict's limit of "
                            f"{MAX_PIXELS:,} pixels; crop it closer to square first")
        try:  # encoded files are decoded in the graph as evaluation does: decode_jpeg (JPEG, PNG)
            image = (tf.io.decode_jpeg(raw, channels=3) if meta["input"] == "encoded" else
                     decode_pixels(raw, path, kind, channels))
        except (tf.errors.InvalidArgumentError, ValueError):
            raise UserError(f"{path} is a damaged {kind} file or one TensorFlow cannot decode"
                            ) from None
        h, w = int(image.shape[0]), int(image.shape[1])
        note = ""
        if meta["input"] == "encoded":
            batch.append(raw)
        else:
            if (h, w) != (size, size):
                if not resize:
                    raise UserError(f"{path} is {w}x{h} pixels; the {meta['dataset']} model takes "
                                    f"{size}x{size}: resize it, or pass --resize")
                image = resized(image, size)
                note = f" (resized from {w}x{h} to {size}x{size})"
            batch.append(image.numpy())
        notes.append(note)
    inputs = (tf.constant(batch, tf.string) if meta["input"] == "encoded"
              else tf.constant(np.stack(batch), tf.uint8))
    return inputs, notes


def predict(export_dir, paths, resize=False, read=None):
    """[(path, note, [(class, name, probability)] top-5)] from the SavedModel of an export;
    `read`: what read_export(export_dir) returned, if it was called already."""
    import tensorflow as tf
    meta, names = read or read_export(export_dir)
    inputs, notes = read_images(paths, meta, resize)
    try:
        serve = tf.saved_model.load(os.path.join(export_dir, SAVED_MODEL)
                                    ).signatures["serving_default"]
    except Exception as e:  # noqa: BLE001 -- a damaged or foreign SavedModel
        text = first_line(e, 160)
        raise UserError(f"cannot load {os.path.join(export_dir, SAVED_MODEL)} ({text}); export "
                        "the run again with run/export.py") from None
    out = serve(images=inputs)
    classes, probs = out["classes"].numpy(), out["probabilities"].numpy()
    return [(path, note, [(int(c), names[c], float(p[c])) for c in top])
            for path, note, top, p in zip(paths, notes, classes, probs)]
