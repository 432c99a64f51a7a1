"""Image files as the network's uint8 pixels: read and measured by their header, decoded, resized.

One source for the two readers of image files that a user has: run/predict.py
(resnet_nobn/export/predict.py) and training on an image folder (resnet_nobn/data/folder_input.py).
`read_file` reads each file's size from its header (`header_size`, by Pillow: PNG, JPEG, GIF, BMP
and WebP, the formats tf.io.decode_image reads) and refuses one of more than MAX_PIXELS pixels
before decoding it; `decode_pixels` decodes it; `resized` is predict's `--resize` and the
folder's resize to the network's input: bilinear, antialiased, rounded back to uint8. Loads no
TensorFlow until a function needs it.
"""
import io
import struct

from PIL import Image

from resnet_nobn.errors import UserError

MAX_PIXELS = 50_000_000  # per image file: width x height x frames, read from its header
# The formats tf.io.decode_image reads, as Pillow names them: as the messages name them (a JPEG
# with more pictures, MPO, is read by TensorFlow as its first)
FORMATS = {"PNG": "PNG", "JPEG": "JPEG", "MPO": "JPEG", "GIF": "GIF", "BMP": "BMP", "WEBP": "WebP"}


def header_size(raw):
    """(format, width, height, frames) of an encoded image, from its header: Pillow's Image.open
    reads the header only, nothing is decoded. None if it is none of the formats tf.io.decode_image
    reads (FORMATS) or Pillow cannot read its header."""
    # Pillow's own limit (Image.MAX_IMAGE_PIXELS, DecompressionBombError) counts one frame and
    # names no size; ours counts every frame and says the size (read_file), so Pillow's is
    # lifted while the header is read
    limit, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None
    try:
        with Image.open(io.BytesIO(raw), formats=sorted(set(FORMATS) - {"MPO"})) as image:
            kind = FORMATS.get(image.format)
            frames = getattr(image, "n_frames", 1) if kind in ("GIF", "WebP") else 1
            return (kind, image.width, image.height, frames) if kind else None
    except (OSError, ValueError, EOFError, SyntaxError, struct.error):  # Unidentified...: OSError
        return None
    finally:
        Image.MAX_IMAGE_PIXELS = limit


def read_file(path, reader="predict"):
    """(the file's bytes, (format, width, height, frames)); UserError naming `path` if it cannot
    be read, is not an image (FORMATS), or claims more than MAX_PIXELS pixels, said as `reader`'s
    limit."""
    try:
        with open(path, "rb") as f:
            raw = f.read(4 * MAX_PIXELS + 1)  # more than any image within the limit holds
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}") from None
    if len(raw) > 4 * MAX_PIXELS:
        raise UserError(f"{path} is larger than {4 * MAX_PIXELS:,} bytes, more than any image "
                        f"within {reader}'s limit of {MAX_PIXELS:,} pixels; scale it down first")
    header = header_size(raw)
    if header is None:
        raise UserError(f"{path} is not a PNG, JPEG, GIF, BMP or WebP image")
    kind, w, h, frames = header
    if w * h * frames > MAX_PIXELS:
        raise UserError(f"{path} is a {kind} of {w}x{h} pixels" + (
            f" x {frames} frames" if frames > 1 else "") + f", more than {reader}'s limit of "
            f"{MAX_PIXELS:,} pixels (width x height x frames); scale it down first")
    return raw, header


def decode_pixels(raw, path, kind, channels=3):
    """The uint8 [height, width, channels] pixels of an image file's bytes `raw` (its first frame);
    UserError naming `path` if TensorFlow cannot decode it. `channels=1`: grey (a grey file's
    pixels exactly; a colour file's luma, ITU-R 601)."""
    import tensorflow as tf
    try:
        if channels == 1 and kind not in ("PNG", "JPEG"):  # TensorFlow decodes these in colour only
            rgb = tf.io.decode_image(raw, channels=3, expand_animations=False)
            grey = tf.image.rgb_to_grayscale(tf.cast(rgb, tf.float32))
            return tf.cast(tf.clip_by_value(tf.round(grey), 0, 255), tf.uint8)
        return tf.io.decode_image(raw, channels=channels, expand_animations=False)
    except (tf.errors.InvalidArgumentError, ValueError):
        raise UserError(f"{path} is a damaged {kind} file or one TensorFlow cannot decode"
                        ) from None


def resized(image, size):
    """uint8 pixels [h, w, c] resized to size x size (bilinear, antialiased, rounded): predict's
    `--resize`, and every image of an image folder as the network takes it."""
    import tensorflow as tf
    return tf.cast(tf.clip_by_value(tf.round(tf.image.resize(
        image, [size, size], antialias=True)), 0, 255), tf.uint8)
