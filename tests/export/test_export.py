"""Export and prediction: a run's checkpoint becomes a SavedModel that serves raw images with the
run's evaluation preprocessing, a .keras model and a model card (resnet_nobn/export/writer.py,
run/export.py, run/predict.py)."""
import dataclasses
import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from resnet_nobn.config import ModelConfig
from resnet_nobn.data import cifar, imagenet
from resnet_nobn.errors import UserError
from resnet_nobn.export import predict, writer
from resnet_nobn.model import network as model_lib
from resnet_nobn.training.trainer import Trainer
from tests.helpers import ROOT, count_reads, run_main, tiny_config

pytestmark = pytest.mark.timeout(400)

# Run in a fresh interpreter, isolated (-I: neither the script's directory, the working directory
# nor PYTHONPATH on sys.path) and from another directory: the SavedModel alone, then model.keras.
FRESH = r"""
import json, sys
import numpy as np
import tensorflow as tf


class NoProject:  # the project hidden, even where it is pip-installed (the README installs it)
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "resnet_nobn":
            raise ModuleNotFoundError(name)


sys.meta_path.insert(0, NoProject())
try:
    import resnet_nobn
    sys.exit("the project is importable: the test would prove nothing")
except ModuleNotFoundError:
    pass
data, export_dir, root = np.load(sys.argv[1]), sys.argv[2], sys.argv[3]
serve = tf.saved_model.load(export_dir + "/saved_model").signatures["serving_default"]
out = serve(images=tf.constant(data["images"]))
assert "resnet_nobn" not in sys.modules
sys.meta_path.remove(sys.meta_path[0])
saved_top1 = float(np.mean(out["classes"].numpy()[:, 0] != data["labels"]))
sys.path.insert(0, root)
import keras, resnet_nobn  # as the model card loads it: no custom_objects
model = keras.saving.load_model(export_dir + "/model.keras")
assert type(model).__name__ == "ImageClassifier", type(model)
logits = np.asarray(model(data["images"]))  # raw pixels, as the SavedModel takes them
keras_top1 = float(np.mean(logits.argmax(1) != data["labels"]))
print(json.dumps(dict(saved_model=saved_top1, keras=keras_top1,
                      saved_logits=out["logits"].numpy().tolist(), keras_logits=logits.tolist(),
                      probabilities=out["probabilities"].numpy().tolist(),
                      classes=out["classes"].numpy().tolist())))
"""


def _load_keras(path):
    """keras.saving.load_model as the model card gives it (custom_objects, where the tree has it)."""
    return keras.saving.load_model(path, custom_objects=getattr(
        model_lib, "custom_objects", lambda: None)())


def _one_line_error(p):
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert "Traceback" not in p.stderr
    return lines[0]


@pytest.mark.parametrize("variant", [{}, dict(norm="batch", init="he"), dict(init="fixup"),
                                     dict(init="skipinit", head="trained", relu_leakiness=0.0)])
def test_keras_file_round_trips_every_variant(tmp_path, variant):
    """get_config of the custom layers: the loaded model has the same weights (the frozen random
    head included, still frozen) and computes the same logits."""
    cfg = ModelConfig(widths=(8, 16, 32), blocks_per_stage=(1, 1, 1), stem_width=8, **variant)
    model = model_lib.build_model(cfg, seed=3)
    for v in model.weights:
        v.assign(v + 0.01)  # not what a fresh build draws
    model.save(tmp_path / "m.keras")
    loaded = _load_keras(tmp_path / "m.keras")
    assert [v.shape for v in loaded.weights] == [v.shape for v in model.weights]
    for a, b in zip(model.weights, loaded.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert a.trainable == b.trainable
    if cfg.head == "random":
        assert loaded.get_layer("head").trainable_weights == []
    x = np.random.default_rng(0).standard_normal((2, 32, 32, 3)).astype("float32")
    np.testing.assert_array_equal(model(x), loaded(x))


@pytest.mark.slow
def test_cifar_export_gives_the_runs_top1_in_a_fresh_process(tmp_path):
    """The export end to end: a tiny run on mock tfds CIFAR, trained on 2 mirrored replicas,
    exported by run/export.py; the SavedModel, loaded without the project, and model.keras give
    the run's own top-1 error on the test split; run/predict.py prints the same top-5."""
    run_dir, exp = tmp_path / "run", tmp_path / "exp"
    with tfds.testing.mock_data(num_examples=20):
        trainer = Trainer(tiny_config(run_dir, use_synthetic_data=False, strategy="mirrored",
                                      train_steps=6, eval_every=6, checkpoint_every=3,
                                      learning_rate=0.05))
        assert trainer.strategy.num_replicas_in_sync == 2
        results = trainer.run()
        images, labels = cifar.load_split(tfds.builder("cifar10"), "test")
    assert len(labels) == 20 and results["history"][-1]["eval_examples"] == 20
    np.savez(tmp_path / "test.npz", images=images, labels=labels)

    p = run_main("export.py", f"--model_dir={run_dir}", f"--export_dir={exp}")
    assert p.returncode == 0, p.stderr
    assert "exporting ckpt-6 (step 6)" in p.stdout
    assert sorted(os.listdir(exp)) == sorted(["saved_model", "model.keras", "model_card.md",
                                              "labels.txt", "export.json"])
    assert [f for f in os.listdir(tmp_path) if f.startswith(".")] == []  # no temporary left

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fresh = subprocess.run([sys.executable, "-I", "-c", FRESH, str(tmp_path / "test.npz"),
                            str(exp), ROOT], cwd=elsewhere, capture_output=True, text=True,
                           timeout=240, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    out = json.loads(fresh.stdout.strip().splitlines()[-1])
    assert out["saved_model"] == pytest.approx(results["top1_error"], abs=1e-9)
    assert out["keras"] == pytest.approx(results["top1_error"], abs=1e-9)
    expected = trainer.model(cifar.standardize(images), training=False).numpy()
    np.testing.assert_allclose(out["saved_logits"], expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out["keras_logits"], expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.sum(out["probabilities"], axis=1), 1.0, rtol=1e-5)
    assert [c[0] for c in out["classes"]] == list(expected.argmax(1))

    card = (exp / "model_card.md").read_text()
    assert "Table 1" in card and "`ckpt-6`" in card and "step 6" in card
    assert f"**{100 * results['top1_error']:.2f}%**" in card
    assert f"**{100 * results['top5_error']:.2f}%**" in card
    assert "on 20 images of the test split" in card and "Not a Table 2 reproduction" in card
    assert "--widths=8,16,32" in card and "--strategy=mirrored" in card
    assert f"TensorFlow {tf.__version__}, Keras {keras.__version__}" in card
    assert "Not the paper's recipe: --batch_size=8 (the paper's 128);" in card
    assert "; 6 steps (the paper's 60,000)." in card

    # run/predict.py: two test images as PNG, a third of another size resized (--resize)
    files = []
    for i in range(2):
        files.append(tmp_path / f"test{i}.png")
        files[-1].write_bytes(tf.io.encode_png(images[i]).numpy())
    files.append(tmp_path / "big.png")
    files[-1].write_bytes(tf.io.encode_png(np.zeros((40, 48, 3), np.uint8)).numpy())
    p = run_main("predict.py", f"--export_dir={exp}", "--resize", *map(str, files))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 3 * 6
    names = (exp / "labels.txt").read_text().splitlines()
    for i in range(2):
        assert lines[6 * i] == str(files[i])
        top = out["classes"][i]
        for rank in range(5):
            c = top[rank]
            assert lines[6 * i + 1 + rank] == (f"  {rank + 1}. {out['probabilities'][i][c]:.4f}  "
                                               f"{names[c]} (class {c})")
    assert lines[12] == f"{files[2]} (resized from 48x40 to 32x32)"


@pytest.mark.slow
def test_imagenet_export_decodes_jpeg_bytes_as_evaluation_does(tmp_path):
    """The ImageNet model: JPEG bytes in, evaluation's resize and central crop in the graph."""
    cfg = tiny_config(tmp_path / "run", dataset="imagenet2012", num_classes=1000, image_size=224,
                      widths=(8, 8, 16, 16), blocks_per_stage=(1, 1, 1, 1), strides=(2, 2, 2, 2),
                      stem_kernel=7, stem_stride=2, train_steps=2, batch_size=2)
    trainer = Trainer(cfg)
    trainer.run()
    assert writer.export(cfg.model_dir, str(tmp_path / "exp"), log=lambda _: None) == 2
    with tfds.testing.mock_data(num_examples=4, policy=tfds.testing.MockPolicy.USE_CODE):
        raw = tfds.builder("imagenet2012").as_dataset(
            split="validation", decoders={"image": tfds.decode.SkipDecoding()})
        encoded = [ex["image"].numpy() for ex in raw.take(4)]
    assert len({tuple(tf.image.extract_jpeg_shape(e).numpy()) for e in encoded}) > 1
    serve = tf.saved_model.load(str(tmp_path / "exp" / "saved_model")).signatures["serving_default"]
    out = serve(images=tf.constant(encoded))
    expected = trainer.model(tf.stack([imagenet.preprocess_eval(e) for e in encoded]),
                             training=False).numpy()
    np.testing.assert_allclose(out["logits"].numpy(), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(out["classes"].numpy(), tf.math.top_k(expected, 5).indices)
    card = (tmp_path / "exp" / "model_card.md").read_text()
    assert "Section 4.2" in card and "on synthetic random images" in card
    assert (tmp_path / "exp" / "labels.txt").read_text().splitlines()[0] == "n01440764"


def test_the_card_of_a_paper_run_on_another_seed_calls_it_the_papers_network(tmp_path):
    """The head's seed follows --seed: config.json records it as used, which is neither a flag the
    run was given nor a change of the network (it was \"Not the paper's network: head_seed: 0
    there, 3 here\" and \"--head_seed=3\"). A BN twin with --init=identity was listed without it."""
    from resnet_nobn import recipes
    from resnet_nobn.config import TrainConfig
    from resnet_nobn.export.model_card import model_card
    paper = recipes.cifar()
    for seed, head_seed in ((3, None), (0, None), (3, 5)):
        ran = TrainConfig.from_json(dataclasses.replace(
            paper, seed=seed, model=dataclasses.replace(paper.model, head_seed=head_seed),
            model_dir=str(tmp_path)).to_json())  # as the export reads it from config.json
        card = model_card(ran, paper.train_steps, [], None, {}, "names", "E", str(tmp_path), 1)
        assert "paper's network" not in card, card
        assert "--head_seed" not in card if head_seed is None else "`--head_seed=5`" in card
        assert f"One run (seed {seed}) of the paper's setup" in card, card
    # --init as run, where --init=auto (the flag's default) would give another
    for norm, init, flag in (("batch", "identity", "--init=identity"), ("none", "he", "--init=he"),
                             ("batch", "he", None), ("none", "identity", None)):
        model = dataclasses.replace(paper.model, norm=norm, init=init)
        ran = TrainConfig.from_json(dataclasses.replace(paper, model=model).to_json())
        card = model_card(ran, 1, [], None, {}, "names", "E", str(tmp_path), 1)
        assert ("--init=" not in card) if flag is None else (f"`{flag}`" in card), (norm, init)


def test_the_card_of_the_papers_network_off_its_recipe_is_not_the_papers_setup(tmp_path):
    """A full-length run of the paper's network at another learning rate or precision (a study's
    ablation) was \"one run of the paper's setup\": only its network and length were held to the
    paper's. Each training setting that leaves the recipe is named, and it is no Table 2 run."""
    from resnet_nobn import recipes
    from resnet_nobn.config import TrainConfig
    from resnet_nobn.export.model_card import model_card
    paper = recipes.cifar()
    for changes, said in ((dict(learning_rate=0.02), "--learning_rate=0.02 (the paper's 0.05)"),
                          (dict(mixed_precision="bfloat16"),
                           "--mixed_precision=bfloat16 (the paper's float32)"),
                          (dict(standardize="dataset"),
                           "--standardize=dataset (the paper's per_image)")):
        ran = TrainConfig.from_json(dataclasses.replace(paper, model_dir=str(tmp_path),
                                                        **changes).to_json())
        card = model_card(ran, paper.train_steps, [], None, {}, "names", "E", str(tmp_path), 1)
        assert f"Not the paper's recipe: {said}." in card and "paper's setup" not in card, card
        assert "Not a Table 2 reproduction (Table 2, row Ours: 6.38% top-1 error)" in card


def test_the_card_names_the_activation_the_network_computes(tmp_path):
    """The card wrote the paper's `x + C2(ReLU(C1 x))` for a network of the fork's leaky ReLU
    (slope 0.1, the default) and never gave the slope: cards of slopes 0.1 and 0 read the same."""
    from resnet_nobn import recipes
    from resnet_nobn.config import TrainConfig
    from resnet_nobn.export.model_card import model_card
    paper = recipes.cifar()
    for slope, formula, said in ((0.1, "`x + C2(φ(C1 x))`", "φ a leaky ReLU of slope 0.1"),
                                 (0.0, "`x + C2(ReLU(C1 x))`", "every activation a ReLU;")):
        ran = TrainConfig.from_json(dataclasses.replace(
            paper, model=dataclasses.replace(paper.model, relu_leakiness=slope),
            model_dir=str(tmp_path)).to_json())
        card = model_card(ran, 1, [], None, {}, "names", "E", str(tmp_path), 1)
        assert formula in card and said in card, card


def test_the_card_says_how_much_of_the_split_the_evaluation_it_gives_covered(tmp_path):
    """From the evaluation's own image count: a final --eval_only on the whole test split of a run
    trained with --eval_steps=10 was \"on 10,000 images ... (its first 10 batches of 128)\"."""
    from resnet_nobn.export.model_card import model_card
    for eval_steps, n, said in ((10, 10_000, "10,000 images of the test split (the whole split)"),
                                (0, 640, "640 images of the test split (its first 5 batches"),
                                (10, 1280, "1,280 images of the test split (its first 10 batches")):
        cfg = tiny_config(tmp_path, use_synthetic_data=False, batch_size=128, eval_steps=eval_steps)
        results = {"history": [dict(step=6, top1_error=0.5, top5_error=0.1, eval_examples=n)]}
        card = model_card(cfg, 6, [], None, results, "names", "E", str(tmp_path), 1)
        assert said in card, card


def test_the_card_of_a_synthetic_run_names_no_split(tmp_path):
    """Synthetic images have no test or validation split: a synthetic ImageNet run's card said
    its errors were "on 64 images of the validation split"."""
    from resnet_nobn.export.model_card import model_card
    for dataset in ("cifar10", "imagenet2012"):
        cfg = tiny_config(tmp_path, dataset=dataset, use_synthetic_data=True)
        results = {"history": [dict(step=6, top1_error=0.5, top5_error=0.1, eval_examples=64)]}
        card = model_card(cfg, 6, [], None, results, "names", "E", str(tmp_path), 1)
        assert "on 64 synthetic random images (`--use_synthetic_data`)" in card, card
        assert " split" not in card, card


def _nan_checkpoint(run_dir, step):
    """Saves ckpt-<step> of run_dir with a NaN stem kernel (the trainer never saves one)."""
    trainer = Trainer(tiny_config(run_dir))
    stem = trainer.model.get_layer("stem").kernel
    stem.assign(tf.fill(stem.shape, float("nan")))
    trainer.checkpoints.manager.save(checkpoint_number=step)
    return trainer


def test_newest_finite_checkpoint_is_exported_and_named(tmp_path, finished_run):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    _nan_checkpoint(run_dir, 6)
    said = []
    assert writer.export(str(run_dir), str(tmp_path / "a"), log=said.append) == 4
    assert said[0] == "skipped ckpt-6 (its weights are not finite)", said
    assert said[1].startswith("exporting ckpt-4 (step 4)")
    card = (tmp_path / "a" / "model_card.md").read_text()
    assert "`ckpt-4`" in card and "skipped: ckpt-6 (its weights are not finite)" in card
    assert "at step 4, on" in card  # the evaluation of step 4 (results.json has 2 and 4)
    # --checkpoint picks another; its own evaluation is the one given
    assert writer.export(str(run_dir), str(tmp_path / "b"), checkpoint=2, log=said.append) == 2
    card = (tmp_path / "b" / "model_card.md").read_text()
    history = json.loads((run_dir / "results.json").read_text())["history"]
    at2 = next(h for h in history if h["step"] == 2)
    assert f"**{100 * at2['top1_error']:.2f}%**" in card and "at step 2, on" in card
    assert "step 2: chosen with `--checkpoint`." in card and "the newest" not in card, card
    # a checkpoint without an evaluation gets no error at all (not another step's)
    writer.export(str(run_dir), str(tmp_path / "d"), checkpoint=0, log=said.append)
    card = (tmp_path / "d" / "model_card.md").read_text()
    assert "No evaluation of step 0 is recorded" in card and "**" not in card
    with pytest.raises(UserError, match=r"--checkpoint=6 cannot be exported: ckpt-6 \(its "
                                        r"weights are not finite\)"):
        writer.export(str(run_dir), str(tmp_path / "c"), checkpoint=6)
    assert not (tmp_path / "c").exists()


def test_after_a_divergence_the_rollbacks_checkpoint_is_exported(tmp_path, finished_run,
                                                                  monkeypatch):
    """... reading the run directory once: the checkpoint chosen, the evaluation and the
    divergence the card gives are of one reading (each file was read two or three times)."""
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    # the run blew up after ckpt-4: the loss computed with its weights was already infinite
    (run_dir / "ckpt" / "losses.json").write_text(json.dumps({"0": 2.3, "2": 2.3, "4": "inf"}))
    (run_dir / "diverged.json").write_text(json.dumps(
        {"step": 5, "what": "the loss", "retry_with": "--agc=0.16"}))
    # where a re-run resumes (on a copy: resuming deletes the checkpoints after it)
    shutil.copytree(run_dir, tmp_path / "copy")
    resumed = Trainer(tiny_config(tmp_path / "copy", train_steps=4, checkpoint_every=2,
                                  eval_every=2))
    resumed.checkpoints.restore()
    assert 0 < resumed.step < 4  # the newest checkpoint is on the way to the blow-up
    reads = count_reads(monkeypatch, [run_dir, run_dir / "ckpt"])
    assert writer.export(str(run_dir), str(tmp_path / "exp"), log=lambda _: None) == resumed.step
    monkeypatch.undo()
    for name in ("config.json", "results.json", "diverged.json", "losses.json"):
        assert reads[name] == 1, (name, reads)
    loaded = _load_keras(tmp_path / "exp" / "model.keras")
    for a, b in zip(resumed.model.weights, loaded.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert "the one a re-run resumes from after a divergence" in (
        tmp_path / "exp" / "model_card.md").read_text()


def test_run_without_a_finite_checkpoint_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    trainer = _nan_checkpoint(run_dir, 0)
    (run_dir / "config.json").write_text(json.dumps(trainer.cfg.to_json()))
    with pytest.raises(UserError, match=r"no checkpoint in .* restores with finite weights "
                                        r"\(ckpt-0 \(its weights are not finite\)\)"):
        writer.export(str(run_dir), str(tmp_path / "exp"))
    assert sorted(os.listdir(tmp_path)) == ["run"]


def test_a_failed_write_leaves_the_export_dir_as_it_was(tmp_path, finished_run, monkeypatch):
    exp = tmp_path / "exp"
    writer.export(str(finished_run), str(exp), log=lambda _: None)
    before = {f: (exp / f).read_bytes() for f in ("model_card.md", "model.keras")}

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(keras.Model, "save", full_disk)
    for target, overwrite in ((tmp_path / "new" / "exp", False), (exp, True)):
        with pytest.raises(UserError, match="cannot write --export_dir=.*No space left on device"):
            writer.export(str(finished_run), str(target), checkpoint=2, overwrite=overwrite)
    assert not (tmp_path / "new").exists()  # nor the parent it made
    assert {f: (exp / f).read_bytes() for f in before} == before
    assert sorted(os.listdir(tmp_path)) == ["exp"]  # no temporary directory left beside it
    monkeypatch.undo()
    assert writer.export(str(finished_run), str(exp), checkpoint=2, overwrite=True,
                         log=lambda _: None) == 2
    assert "`ckpt-2`" in (exp / "model_card.md").read_text()


def _fake_run(path):
    """A run directory as far as the checks before TensorFlow see it: config.json and ckpt-3."""
    (path / "ckpt").mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(tiny_config(path).to_json()))
    for f in ("ckpt-3.index", "ckpt-3.data-00000-of-00001"):
        (path / "ckpt" / f).write_bytes(b"")
    return path


def _unwritable(tmp_path):
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        return locked / "exp"
    return "/sys/resnet_nobn_export_test"  # root: a file system that refuses new directories


@pytest.mark.slow
@pytest.mark.parametrize("case,expected", [
    ("missing", "does not exist"),
    ("empty_flag", "--model_dir is empty"),
    ("empty_dir", "holds no config.json"),
    ("no_checkpoint", "no checkpoint in"),
    ("checkpoint_not_there", "there is no ckpt-7 in"),
    ("export_is_file", "is a file"),
    ("export_not_empty", "is not empty and holds no export; give a new or empty directory"),
    ("export_is_an_export", "holds an earlier export; pass --overwrite to replace it, or give"),
    ("export_not_writable", "cannot be written"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, case, expected):
    run_dir = _fake_run(tmp_path / "run")
    exp, extra = tmp_path / "exp", []
    if case == "missing":
        run_dir = tmp_path / "nowhere"
    elif case == "empty_flag":
        run_dir = ""
    elif case == "empty_dir":
        run_dir = tmp_path / "empty"
        run_dir.mkdir()
    elif case == "no_checkpoint":
        shutil.rmtree(run_dir / "ckpt")
    elif case == "checkpoint_not_there":
        extra = ["--checkpoint=7"]
    elif case == "export_is_file":
        exp.write_text("x")
    elif case == "export_not_empty":
        exp.mkdir()
        (exp / "mine.txt").write_text("x")
    elif case == "export_is_an_export":
        exp.mkdir()
        (exp / "export.json").write_text('{"checkpoint": 3}')
    elif case == "export_not_writable":
        exp = _unwritable(tmp_path)
    before = sorted(os.listdir(tmp_path))
    p = run_main("export.py", f"--model_dir={run_dir}", f"--export_dir={exp}", *extra, timeout=60)
    assert expected in _one_line_error(p)
    assert sorted(os.listdir(tmp_path)) == before
    assert case != "export_not_empty" or os.listdir(exp) == ["mine.txt"]


@pytest.mark.slow
def test_predict_refuses_bad_images_in_one_line(tmp_path, finished_run):
    exp = tmp_path / "exp"
    writer.export(str(finished_run), str(exp), log=lambda _: None)
    meta, _ = predict.read_export(str(exp))
    wrong = tmp_path / "wrong.png"
    wrong.write_bytes(tf.io.encode_png(np.zeros((28, 30, 3), np.uint8)).numpy())
    with pytest.raises(UserError, match=r"wrong.png is 30x28 pixels; the cifar10 model takes "
                                        r"32x32: resize it, or pass --resize"):
        predict.read_images([str(wrong)], meta)
    with pytest.raises(UserError, match="cannot read .*missing.png: No such file"):
        predict.read_images([str(tmp_path / "missing.png")], meta)
    text = tmp_path / "notes.png"
    text.write_text("not an image")
    p = run_main("predict.py", f"--export_dir={exp}", str(text), timeout=120)
    assert f"{text} is not a PNG, JPEG, GIF, BMP or WebP image" in _one_line_error(p)
    assert p.stdout == ""
    p = run_main("predict.py", f"--export_dir={tmp_path}", str(wrong), timeout=60)
    assert "holds no export" in _one_line_error(p)


def test_entry_points_have_help():
    for script, flag in (("export.py", "--model_dir"), ("predict.py", "--export_dir")):
        p = run_main(script, "--help", timeout=60)
        assert p.returncode == 0 and flag in p.stdout and "Traceback" not in p.stderr, p.stderr
