"""What an export directory holds (resnet_nobn/export/writer.py writes it, predict.py reads it):
its files' names, every path it may hold, and the digest export.json records of saved_model/.
"""
import hashlib
import json
import os
import re

SAVED_MODEL, KERAS, CARD, LABELS, META = (
    "saved_model", "model.keras", "model_card.md", "labels.txt", "export.json")
GLOB = "[]*?"  # TensorFlow reads a path with these as a glob pattern: a SavedModel there won't load
# Every file and directory an export holds (paths relative to it): all --overwrite may remove.
WRITTEN = re.compile(rf"({SAVED_MODEL}|{KERAS}|{CARD}|{LABELS}|{META}|{SAVED_MODEL}/(saved_model"
                     r"\.pb|fingerprint\.pb|assets|variables|variables/variables\.(index|data-\d+-of-"
                     r"\d+)))")
DESCRIBES = ("dataset", "image_size", "num_classes", "input")  # export.json's model description


def digest(export_dir, meta):
    """sha256 of the files of export_dir/saved_model an export writes (WRITTEN: names, sizes, bytes)
    and of `meta`'s DESCRIBES fields: recorded in export.json, so that an export.json edited or a
    saved_model/ copied from another export is refused on loading (resnet_nobn/export/predict.py),
    not one a file manager added a file to (.DS_Store)."""
    h = hashlib.sha256(json.dumps({k: meta.get(k) for k in DESCRIBES}, sort_keys=True).encode())
    top = os.path.join(export_dir, SAVED_MODEL)
    for root, dirs, files in os.walk(top):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            if not WRITTEN.fullmatch(os.path.relpath(path, export_dir)):
                continue
            h.update(f"{os.path.relpath(path, top)}\0{os.path.getsize(path)}\0".encode())
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()
