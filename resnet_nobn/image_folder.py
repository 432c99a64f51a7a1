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
"""
import os

from resnet_nobn.errors import UserError

NAME = "image_folder"  # the dataset's name (resnet_nobn/datasets.py)
SPLITS = ("train", "test")
EXTENSIONS = (".png", ".jpg", ".jpeg")
EXAMPLE = "ROOT/train/LABEL/image.png and ROOT/test/LABEL/image.png"


def _visible(names):
    return sorted(n for n in names if not n.startswith("."))


def _list(path):
    try:
        return _visible(os.listdir(path))
    except OSError as e:
        raise UserError(f"cannot read the folder {path}: {e.strerror}; fix its permissions"
                        ) from None


def class_folders(root, split):
    """The class folders of ROOT/`split`, sorted; UserError if the split is missing or has fewer
    than two."""
    where = os.path.join(root, split)
    if not os.path.isdir(where):
        raise UserError(f"--data_dir={root} has no {split}/ folder: --dataset={NAME} reads "
                        f"{EXAMPLE} (one folder per class)")
    names = [n for n in _list(where) if os.path.isdir(os.path.join(where, n))]
    if not names:
        raise UserError(f"{where} holds no class folders: put each class's images in a folder "
                        f"named by the class ({EXAMPLE})")
    if len(names) == 1:  # ModelConfig.num_classes: one class has a softmax loss of 0
        raise UserError(f"{where} holds one class folder ({names[0]}): a classifier needs two or "
                        f"more; add a folder for each other class ({EXAMPLE})")
    return names


def images_of(folder):
    """The image files (EXTENSIONS) directly in `folder`, sorted by name."""
    return [os.path.join(folder, n) for n in _list(folder)
            if n.lower().endswith(EXTENSIONS) and os.path.isfile(os.path.join(folder, n))]


def layout(root):
    """(class names, {split: [(path, class index)]}) of the image folder ROOT; UserError (one line)
    if --data_dir is not given or not a directory, a split is missing or holds fewer than two class
    folders or no images, a class of train/ has no image, or test/'s class folders are not
    train/'s."""
    if not (root or "").strip():
        raise UserError(f"--dataset={NAME} needs --data_dir=ROOT, the folder holding {EXAMPLE}")
    if not os.path.isdir(root):
        what = "is a file" if os.path.exists(root) else "does not exist"
        raise UserError(f"--data_dir={root} {what}; give the folder holding {EXAMPLE}")
    names = {split: class_folders(root, split) for split in SPLITS}
    train, test = names["train"], names["test"]
    if train != test:
        only = [f"{split}/ only: {', '.join(n for n in a if n not in b)}"
                for split, a, b in (("train", train, test), ("test", test, train))
                if set(a) - set(b)]
        raise UserError(f"the class folders of {os.path.join(root, 'test')} are not those of "
                        f"{os.path.join(root, 'train')} ({'; '.join(only)}); give both splits "
                        "the same class folders")
    files = {}
    for split in SPLITS:
        files[split] = [(path, label) for label, name in enumerate(train)
                        for path in images_of(os.path.join(root, split, name))]
        if not files[split]:
            raise UserError(f"{os.path.join(root, split)} holds no PNG or JPEG images in its class "
                            f"folders ({', '.join(EXTENSIONS)}; {EXAMPLE})")
    empty = [n for i, n in enumerate(train) if not any(label == i for _, label in files["train"])]
    if empty:
        raise UserError(f"the class folder {os.path.join(root, 'train', empty[0])} holds no PNG or "
                        "JPEG images: add some, or remove the folder (from test/ too)")
    return tuple(train), files


def class_names(root):
    """The class names of the image folder ROOT (its train/ class folders, sorted), the whole
    layout checked (`layout`)."""
    return layout(root)[0]
