"""Your own images: the layout of an image folder, read and checked without TensorFlow.

`--dataset=image_folder --data_dir=ROOT` trains on ROOT/train/LABEL/* and evaluates on
ROOT/test/LABEL/*, the layout of tfds' ImageFolder and Keras' `image_dataset_from_directory`: one
folder per class, named by the class, holding PNG or JPEG files (EXTENSIONS, any case). The class
names are the folder names of train/, sorted (class i is the i-th name); test/ must have the same
class folders. Files directly in train/ or test/, in deeper folders, hidden ones (a leading dot)
and of other extensions are not read. The command line reads the class names here once
(resnet_nobn/cli.py), before TensorFlow loads, and the run records them in config.json
(TrainConfig.class_names), so a resume and an export have them; the images themselves are read,
checked and resized by resnet_nobn/data/folder_input.py.

A class name is one line of an export's labels.txt: a class folder whose name holds a control
character (a newline) is refused. Names and paths in the messages have their control characters
escaped (`printable`), and two names that differ only in their Unicode normalisation (NFC and
NFD, as a copy made on macOS may write them) are shown as ascii() says them.

results.json records each split's number of images, a digest of its file list (`digest`) and
one of its pixels as trained on (`pixels_digest`); a resume compares them with what the run's
results.json recorded (`changes`).
"""
import hashlib
import os
import unicodedata

from resnet_nobn.console import printable
from resnet_nobn.errors import UserError

NAME = "image_folder"  # the dataset's name (resnet_nobn/data/datasets.py)
SPLITS = ("train", "test")
EXTENSIONS = (".png", ".jpg", ".jpeg")
EXAMPLE = "ROOT/train/LABEL/image.png and ROOT/test/LABEL/image.png"


def _visible(names):
    return sorted(n for n in names if not n.startswith("."))


def _list(path):
    try:
        return _visible(os.listdir(path))
    except OSError as e:
        raise UserError(f"cannot read the folder {printable(path)}: {e.strerror}; fix its "
                        "permissions") from None


def class_folders(root, split):
    """The class folders of ROOT/`split`, sorted; UserError if the split is missing, has fewer
    than two, or one whose name holds a control character."""
    where = os.path.join(root, split)
    if not os.path.isdir(where):
        raise UserError(f"--data_dir={printable(root)} has no {split}/ folder: --dataset={NAME} "
                        f"reads {EXAMPLE} (one folder per class)")
    names = [n for n in _list(where) if os.path.isdir(os.path.join(where, n))]
    bad = [n for n in names if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in n)]
    if bad:  # a line break in labels.txt, which predict refuses: the export would be unusable
        raise UserError(f"the class folder {printable(os.path.join(where, bad[0]))} has a control "
                        "character in its name; rename it (a class name is one line of an "
                        "export's labels.txt)")
    if not names:
        raise UserError(f"{printable(where)} holds no class folders: put each class's images in "
                        f"a folder named by the class ({EXAMPLE})")
    if len(names) == 1:  # ModelConfig.num_classes: one class has a softmax loss of 0
        raise UserError(f"{printable(where)} holds one class folder ({printable(names[0])}): a "
                        f"classifier needs two or more; add a folder for each other class "
                        f"({EXAMPLE})")
    return names


def images_of(folder):
    """The image files (EXTENSIONS) directly in `folder`, sorted by name."""
    return [os.path.join(folder, n) for n in _list(folder)
            if n.lower().endswith(EXTENSIONS) and os.path.isfile(os.path.join(folder, n))]


def _form(name):
    """The Unicode normalisation `name` is in: NFC, NFD, or mixed (neither)."""
    return next((f for f in ("NFC", "NFD") if unicodedata.is_normalized(f, name)), "mixed")


def _other_names(ours, theirs, what=("train/", "test/")):
    """The part of a message saying how the class names `ours` and `theirs` differ, e.g.
    `train/ only: b; test/ only: c` (`what`: how each list is called). A name that equals one of
    the others once both are in NFC is shown as ascii() says it, and the part says that those
    differ only in their Unicode normalisation."""
    nfc = [{unicodedata.normalize("NFC", n) for n in names} for names in (theirs, ours)]
    only = [[n for n in a if n not in b] for a, b in ((ours, theirs), (theirs, ours))]
    alike = [[n for n in names if unicodedata.normalize("NFC", n) in other]
             for names, other in zip(only, nfc)]
    said = "; ".join(f"{w} only: {', '.join(ascii(n) if n in a else printable(n) for n in names)}"
                     for w, names, a in zip(what, only, alike) if names)
    if any(alike):
        forms = [f"{'/'.join(sorted({_form(n) for n in a}))} in {w}"
                 for w, a in zip(what, alike) if a]
        said += f"; the quoted names differ only in Unicode normalisation ({', '.join(forms)})"
    return said


def layout(root):
    """(class names, {split: [(path, class index)]}) of the image folder ROOT; UserError (one line)
    if --data_dir is not given or not a directory, a split is missing or holds fewer than two class
    folders or no images, a class folder's name holds a control character, a class of train/ has
    no image, or test/'s class folders are not train/'s."""
    if not (root or "").strip():
        raise UserError(f"--dataset={NAME} needs --data_dir=ROOT, the folder holding {EXAMPLE}")
    if not os.path.isdir(root):
        what = "is a file" if os.path.exists(root) else "does not exist"
        raise UserError(f"--data_dir={printable(root)} {what}; give the folder holding {EXAMPLE}")
    names = {split: class_folders(root, split) for split in SPLITS}
    train, test = names["train"], names["test"]
    if train != test:
        raise UserError(f"the class folders of {printable(os.path.join(root, 'test'))} are not "
                        f"those of {printable(os.path.join(root, 'train'))} "
                        f"({_other_names(train, test)}); give both splits the same class folders")
    files = {}
    for split in SPLITS:
        files[split] = [(path, label) for label, name in enumerate(train)
                        for path in images_of(os.path.join(root, split, name))]
        if not files[split]:
            raise UserError(f"{printable(os.path.join(root, split))} holds no PNG or JPEG images "
                            f"in its class folders ({', '.join(EXTENSIONS)}; {EXAMPLE})")
    empty = [n for i, n in enumerate(train) if not any(label == i for _, label in files["train"])]
    if empty:
        raise UserError(f"the class folder {printable(os.path.join(root, 'train', empty[0]))} "
                        "holds no PNG or JPEG images: add some, or remove the folder (from test/ "
                        "too)")
    return tuple(train), files


def class_names(root):
    """The class names of the image folder ROOT (its train/ class folders, sorted), the whole
    layout checked (`layout`)."""
    return layout(root)[0]


def digest(root, split, files):
    """A digest of the file list `files` ([(path, class index)] of ROOT/`split`, `layout`'s): 16
    hex digits of the sha256 of each file's path under the split and size, in order. Every file
    is measured (os.stat), none read.

    Why names and sizes: the number of images misses an image replaced or one removed and another
    added, which change what a resume trains on as much as a new count; the names also set the
    order of the images in memory, so of the batches. An edit that keeps the size is told by
    `pixels_digest`, of the images as read; this one costs what listing the folder cost. A copy
    of the folder elsewhere has the same digest (its new --data_dir is recorded as a change of
    its own)."""
    h = hashlib.sha256()
    for path, _ in files:
        try:
            size = os.stat(path).st_size
        except OSError as e:
            raise UserError(f"cannot read {printable(path)}: {e.strerror}; replace it, or remove "
                            "it from the folder") from None
        name = os.path.relpath(path, os.path.join(root, split)).replace(os.sep, "/")
        h.update(f"{name}\t{size}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()[:16]


def pixels_digest(images):
    """A digest of a split's images as the run holds them in memory and trains on them (uint8
    [n, H, W, 3], each file decoded and resized, in `layout`'s order): 16 hex digits of the
    sha256 of their shape and bytes. It tells an image replaced by another of the same name and
    byte size, which `digest` cannot; a file re-saved with the same pixels (other metadata or
    compression), or changed only below what the resize to the network's size keeps, trains on
    the same images and leaves it as it was. It costs one pass over bytes already in memory."""
    h = hashlib.sha256(repr(tuple(images.shape)).encode())
    h.update(images.tobytes())
    return h.hexdigest()[:16]


def record(root, files, held=None):
    """results.json's `image_folder` record of the image folder ROOT but for its class names:
    {root, <split>_images: the number of images, <split>_files: `digest`, and, where `held` gives
    a split's images as trained on ({split: uint8 array}), <split>_pixels: `pixels_digest`}
    (`files`: `layout`'s)."""
    held = held or {}
    return dict(root=os.path.abspath(root),
                **{f"{split}_images": len(files[split]) for split in SPLITS},
                **{f"{split}_files": digest(root, split, files[split]) for split in SPLITS},
                **{f"{split}_pixels": pixels_digest(held[split]) for split in SPLITS
                   if split in held})


def changes(was, now):
    """{field: [there, here]} of what changed in the image folder's images between `was`, the
    `image_folder` record of the run's results.json (None or {} if it has none: an older run),
    and `now`, this start's (`record`): for each split, its number of images where that changed,
    else its file list's digest where that changed, else its pixels' digest where that changed.
    The field is the record's key under `image_folder.` (image_folder.train_images). Only what
    `was` records is compared, so an older record without the digests compares the counts, and
    one without the pixels' digests the counts and the file lists."""
    out = {}
    for split in SPLITS:
        for key in (f"{split}_images", f"{split}_files", f"{split}_pixels"):
            if isinstance(was, dict) and was.get(key) is not None and was[key] != now.get(key):
                out[f"{NAME}.{key}"] = [was[key], now.get(key)]
                break  # the first change says the split's images changed; the next adds nothing
    return out
