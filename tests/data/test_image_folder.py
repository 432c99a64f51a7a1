"""Your own images: `--dataset=image_folder --data_dir=ROOT` trains on ROOT/train/LABEL/* and
evaluates on ROOT/test/LABEL/*, PNG and JPEG files of any size resized as `predict --resize` does;
the class names (the folder names, sorted) reach results.json, config.json, the model card and the
export; the run is called `image_folder` wherever it is named; each bad folder is one line."""
import json
import os
import shutil

import numpy as np
import pytest
from PIL import Image

from resnet_nobn.data import image_folder
from tests.helpers import TINY_NET, run_main

CLASSES = ("cat", "dog", "zebra")
ARGS = [*TINY_NET, "--batch_size=8", "--learning_rate=0.01", "--lr_boundaries=", "--log_every=2",
        "--eval_every=4", "--train_steps=4"]


def make_folder(root, classes=CLASSES, per_class=(8, 2), seed=0):
    """ROOT/{train,test}/<class>/ of random images, PNG and JPEG alternately, of varied sizes (one
    a grey PNG, one 32x32); returns ROOT."""
    rng = np.random.default_rng(seed)
    for split, n in zip(("train", "test"), per_class):
        for c, name in enumerate(classes):
            os.makedirs(os.path.join(root, split, name))
            for i in range(n):
                h, w = (32, 32) if i == 0 else rng.integers(12, 64, 2)
                pixels = (rng.integers(0, 64, (h, w, 3)) + 64 * c).astype(np.uint8)
                image = Image.fromarray(pixels).convert("L" if i == 1 else "RGB")
                image.save(os.path.join(root, split, name, f"{i}.{'png' if i % 2 else 'jpeg'}"))
    return str(root)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 4-step run on a 3-class folder (24 training, 6 test images): (tmp, ROOT, model_dir)."""
    tmp = tmp_path_factory.mktemp("folder")
    root, run = make_folder(tmp / "pets"), tmp / "study" / "run"
    proc = run_main("cifar_train.py", "--dataset=image_folder", f"--data_dir={root}", *ARGS,
                   f"--model_dir={run}")
    assert proc.returncode == 0, proc.stderr
    assert "eval  step 4" in proc.stdout and "(6 images)" in proc.stdout, proc.stdout
    return tmp, root, run


@pytest.mark.slow
def test_a_folder_trains_and_its_classes_reach_results_the_card_and_the_export(trained):
    tmp, root, run = trained
    results = json.loads((run / "results.json").read_text())
    assert results["dataset"] == "image_folder" and results["global_step"] == 4
    assert results["config"]["class_names"] == list(CLASSES)
    assert results["config"]["model"]["num_classes"] == 3
    files = image_folder.layout(root)[1]
    from resnet_nobn.data import folder_input
    pixels = image_folder.record(root, files, {s: folder_input.read_split(files[s], 32)[0]
                                               for s in image_folder.SPLITS})
    assert results["image_folder"] == dict(
        root=os.path.abspath(root), train_images=24, test_images=6, class_names=list(CLASSES),
        **{f"{s}_files": image_folder.digest(root, s, files[s]) for s in ("train", "test")},
        **{f"{s}_pixels": pixels[f"{s}_pixels"] for s in ("train", "test")})
    assert json.loads((run / "config.json").read_text())["class_names"] == list(CLASSES)
    rep = run_main("report.py", f"--root={tmp / 'study'}")
    assert rep.returncode == 0, rep.stderr
    (row,) = [line for line in rep.stdout.splitlines() if line.startswith("| image_folder")]
    assert row.startswith(f"| image_folder ({root}) |") and "cifar" not in rep.stdout, rep.stdout
    export = tmp / "export"
    p = run_main("export.py", f"--model_dir={run}", f"--export_dir={export}")
    assert p.returncode == 0, p.stderr
    assert (export / "labels.txt").read_text().splitlines() == list(CLASSES)
    meta = json.loads((export / "export.json").read_text())
    assert (meta["dataset"], meta["num_classes"], meta["image_size"]) == ("image_folder", 3, 32)
    card = (export / "model_card.md").read_text()
    assert f"# Model card: resnet_nobn, image_folder ({root}), step 4" in card
    assert "24 training and 6 test images" in card and "CIFAR" not in card, card
    image = os.path.join(root, "test", "dog", "1.png")  # grey, not 32x32
    p = run_main("predict.py", f"--export_dir={export}", "--resize", image)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith(f"{image} (resized from") and len(lines) == 4, p.stdout
    assert sorted(line.split()[2] for line in lines[1:]) == sorted(CLASSES), p.stdout


def test_training_reads_each_image_as_predict_resize_does(tmp_path):
    """One resize: the pixels a run trains on are those predict --resize feeds its export."""
    from resnet_nobn.data import folder_input
    from resnet_nobn.export import predict
    root = make_folder(tmp_path / "f", classes=("a", "b"), per_class=(4, 1))
    files = [(os.path.join(root, "train", "a", f"{i}.{'png' if i % 2 else 'jpeg'}"), 0)
             for i in range(4)]
    images, labels = folder_input.read_split(files, 32)
    served, notes = predict.read_images([f for f, _ in files], dict(
        image_size=32, input="pixels", dataset="image_folder"), resize=True)
    np.testing.assert_array_equal(images, served.numpy())
    assert notes[0] == "" and "resized from" in notes[1] and labels.tolist() == [0] * 4
    grey = images[1]  # a grey PNG: its value in every channel
    np.testing.assert_array_equal(grey[..., 0], grey[..., 2])


@pytest.mark.slow
def test_class_names_are_names_in_config_json_and_a_resume_on_other_folders_is_refused(
        trained, tmp_path):
    from resnet_nobn.config import ModelConfig, TrainConfig
    cfg = TrainConfig(model=ModelConfig(num_classes=2), dataset="image_folder",
                      data_dir="/x", class_names=("0", "1"))
    back = TrainConfig.from_json(json.loads(json.dumps(cfg.to_json())))
    assert back.to_json() == cfg.to_json() and back.class_names == ("0", "1")  # names, not numbers
    with pytest.raises(ValueError, match="class_names"):
        TrainConfig(model=ModelConfig(num_classes=3), dataset="image_folder", class_names=("a",))
    _, root, run = trained
    more = shutil.copytree(root, tmp_path / "more")
    for split in ("train", "test"):
        shutil.copytree(more / split / "cat", more / split / "emu")
    p = run_main("cifar_train.py", "--dataset=image_folder", f"--data_dir={more}", *ARGS,
                "--train_steps=6", f"--model_dir={run}")
    assert p.returncode == 2 and p.stderr.startswith("error: ") and len(
        p.stderr.strip().splitlines()) == 1, p.stderr
    assert "num_classes: 3 there, 4 here" in p.stderr, p.stderr


def _break(root, case):
    """Damages the folder ROOT as `case` says; returns the text the error line must hold."""
    train, test = os.path.join(root, "train"), os.path.join(root, "test")
    if case == "no test/":
        shutil.rmtree(test)
        return "has no test/ folder"
    if case == "no class folders":
        shutil.rmtree(train)
        os.makedirs(train)
        Image.new("RGB", (8, 8)).save(os.path.join(train, "loose.png"))
        return f"{train} holds no class folders"
    if case == "no images":
        for name in os.listdir(test):
            for f in os.listdir(os.path.join(test, name)):
                os.rename(os.path.join(test, name, f), os.path.join(test, name, f + ".txt"))
        return f"{test} holds no PNG or JPEG images"
    if case == "one class":
        for split in (train, test):
            shutil.rmtree(os.path.join(split, "b"))
        return f"{train} holds one class folder (a): a classifier needs two or more"
    if case == "other classes":
        os.rename(os.path.join(test, "b"), os.path.join(test, "c"))
        return "train/ only: b; test/ only: c"
    if case == "bad image":
        path = os.path.join(train, "b", "1.png")
        with open(path, "r+b") as f:  # a PNG header, then garbage
            f.seek(60)
            f.write(b"\0" * 64)
            f.truncate(124)
        return f"{path} is a damaged PNG file"
    if case == "newline in a class name":
        for split in (train, test):
            os.rename(os.path.join(split, "b"), os.path.join(split, "b\nc"))
        return f"{train}/b\\nc has a control character in its name"
    if case == "NFD name in test/":
        os.rename(os.path.join(train, "b"), os.path.join(train, "caf\u00e9"))
        os.rename(os.path.join(test, "b"), os.path.join(test, "cafe\u0301"))
        return ("train/ only: 'caf\\xe9'; test/ only: 'cafe\\u0301'; the quoted names differ "
                "only in Unicode normalisation (NFC in train/, NFD in test/)")
    if case == "not an image":
        path = os.path.join(test, "a", "0.jpeg")
        with open(path, "w") as f:
            f.write("not a picture")
        return f"{path} is not a PNG, JPEG"
    return "needs --data_dir=ROOT"  # no --data_dir


@pytest.mark.parametrize("case", ["no test/", "no class folders", "one class", "no images",
                                  "other classes", "newline in a class name", "NFD name in test/",
                                  "bad image", "not an image", "no --data_dir"])
def test_each_bad_folder_is_one_line_and_nothing_is_written(tmp_path, case):
    root = make_folder(tmp_path / "f", classes=("a", "b"), per_class=(2, 1))
    said = _break(root, case)
    run = tmp_path / "run"
    args = [] if case == "no --data_dir" else [f"--data_dir={root}"]
    p = run_main("cifar_train.py", "--dataset=image_folder", *args, *ARGS, f"--model_dir={run}")
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert said in lines[0], lines[0]
    assert not run.exists()


def test_a_folder_standardized_by_its_own_mean_and_std(tmp_path):
    """`--standardize=dataset` on a folder: the mean and std of its training images, by hand."""
    from resnet_nobn.config import ModelConfig, TrainConfig
    from resnet_nobn.data import folder_input
    root = make_folder(tmp_path / "f", classes=("a", "b"), per_class=(4, 1))
    cfg = TrainConfig(ModelConfig(num_classes=2), dataset="image_folder", data_dir=root,
                      class_names=("a", "b"), standardize="dataset")
    std = folder_input.make_input(cfg).standardization
    images = folder_input.read_split(
        [(os.path.join(root, "train", c, f"{i}.{'png' if i % 2 else 'jpeg'}"), 0)
         for c in "ab" for i in range(4)], 32)[0].astype(np.float64)
    np.testing.assert_allclose(std.mean, images.mean(axis=(0, 1, 2)), rtol=1e-9)
    np.testing.assert_allclose(std.std, images.std(axis=(0, 1, 2)), rtol=1e-9)


@pytest.mark.slow
def test_a_resume_on_other_images_says_so_and_records_it(tmp_path):
    """Images added to train/ and one of test/ replaced (same class folders): the resume says so
    in its `with ... (recorded in results.json)` line, and results.json's `resume_changes` records
    both beside the new numbers, so that it does not claim the run trained on one set."""
    root = make_folder(tmp_path / "f", classes=("a", "b"), per_class=(2, 1))
    run = tmp_path / "run"
    p = run_main("cifar_train.py", "--dataset=image_folder", f"--data_dir={root}", *ARGS,
                f"--model_dir={run}")
    assert p.returncode == 0, p.stderr
    was = json.loads((run / "results.json").read_text())["image_folder"]
    shutil.copy(os.path.join(root, "train", "a", "0.jpeg"),
                os.path.join(root, "train", "a", "x.jpeg"))
    os.remove(os.path.join(root, "test", "b", "0.jpeg"))  # replaced: the count stays 2
    Image.new("RGB", (32, 32), (9, 9, 9)).save(os.path.join(root, "test", "b", "y.png"))
    p = run_main("cifar_train.py", "--dataset=image_folder", f"--data_dir={root}", *ARGS,
                "--train_steps=6", f"--model_dir={run}")
    assert p.returncode == 0, p.stderr
    results = json.loads((run / "results.json").read_text())
    now = results["image_folder"]
    assert (now["train_images"], now["test_images"]) == (5, 2)
    assert {"step": 4, "field": "image_folder.train_images", "from": 4, "to": 5} in results[
        "resume_changes"], results["resume_changes"]
    assert results["resume_changes"] == [
        {"step": 4, "field": "train_steps", "from": 4, "to": 6},
        {"step": 4, "field": "image_folder.train_images", "from": 4, "to": 5},
        {"step": 4, "field": "image_folder.test_files", "from": was["test_files"],
         "to": now["test_files"]}]
    assert (f"with train_steps 4 -> 6, image_folder.train_images 4 -> 5, image_folder.test_files "
            f"{was['test_files']} -> {now['test_files']} (recorded in results.json)") in p.stdout


def test_what_a_resume_compares_of_the_image_folder(tmp_path):
    """The counts and the digests of the file lists (names and sizes) of each split, as far as the
    run's results.json records them: an older one without the record, or without the digests,
    resumes as before. Such a change is no setting a run followed the retry advice for."""
    from resnet_nobn.training import recovery
    root = make_folder(tmp_path / "f", classes=("a", "b"), per_class=(2, 1))
    was = image_folder.record(root, image_folder.layout(root)[1])
    copy = str(shutil.copytree(root, tmp_path / "copy"))
    assert image_folder.changes(was, image_folder.record(copy, image_folder.layout(copy)[1])) == {}
    with open(os.path.join(root, "train", "b", "1.png"), "ab") as f:
        f.write(b"\0")  # one image of another size
    os.rename(os.path.join(root, "test", "a", "0.jpeg"), os.path.join(root, "test", "a", "z.jpeg"))
    now = image_folder.record(root, image_folder.layout(root)[1])
    assert image_folder.changes(was, now) == {"image_folder.train_files": [
        was["train_files"], now["train_files"]], "image_folder.test_files": [
        was["test_files"], now["test_files"]]}
    now = dict(root="/f", train_images=5, test_images=2, train_files="1" * 16,
               test_files="2" * 16, class_names=["a", "b"])
    assert image_folder.changes(now, dict(now)) == {}
    assert image_folder.changes(None, now) == {} and image_folder.changes({}, now) == {}
    assert image_folder.changes(dict(root="/f", train_images=5, test_images=2), now) == {}
    assert image_folder.changes(dict(now, train_images=4, train_files="3" * 16), now) == {
        "image_folder.train_images": [4, 5]}
    assert image_folder.changes(dict(now, test_files="4" * 16), now) == {
        "image_folder.test_files": ["4" * 16, "2" * 16]}
    change = {"step": 4, "field": "image_folder.train_images", "from": 4, "to": 5}
    assert not recovery.advised(change)
    assert recovery.followed_flags({"resume_changes": [change]}) == []


def test_an_image_replaced_by_another_of_the_same_name_and_size_is_a_change_of_its_pixels(
        tmp_path):
    """The file list's digest (names and sizes) cannot tell such an image; the digest of the
    images as trained on does."""
    from resnet_nobn.data import folder_input
    root = make_folder(tmp_path / "f", classes=("a", "b"), per_class=(2, 1))
    path = os.path.join(root, "train", "b", "1.png")

    def save(value, **options):  # an uncompressed PNG: its size is its shape's alone
        Image.new("RGB", (32, 32), (value, 7, 7)).save(path, compress_level=0, **options)

    def record():
        files = image_folder.layout(root)[1]
        return image_folder.record(root, files, {s: folder_input.read_split(files[s], 32)[0]
                                                 for s in image_folder.SPLITS})
    save(10)
    was, size = record(), os.path.getsize(path)
    save(200)
    now = record()
    assert os.path.getsize(path) == size and now["train_files"] == was["train_files"]
    assert image_folder.changes(was, now) == {"image_folder.train_pixels": [
        was["train_pixels"], now["train_pixels"]]}
    assert image_folder.changes(now, record()) == {}
    del was["train_pixels"]  # an older record: names and sizes only
    assert image_folder.changes(was, now) == {}
