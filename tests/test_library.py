"""The package as a library (docs/library.md): its public names load no TensorFlow until used,
configs made in Python name their fields, the Standardize layer is the pipeline's, a model.keras
loaded in a fresh process fails pointing at the fix and loads with it, and the page's code and
the example script run as printed."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import resnet_nobn
from tests.helpers import ROOT, TINY_MODEL

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONPATH=ROOT)

def _python(code_or_args, cwd, timeout=300):
    args = ["-c", code_or_args] if isinstance(code_or_args, str) else code_or_args
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def test_import_loads_no_tensorflow_and_the_names_load_their_modules(tmp_path):
    p = _python("import sys, resnet_nobn\n"
                "assert not {'tensorflow', 'keras'} & set(sys.modules), 'TensorFlow loaded'\n"
                "cfg = resnet_nobn.ModelConfig(); recipe = resnet_nobn.recipes.cifar()\n"
                "assert not {'tensorflow', 'keras'} & set(sys.modules), 'configs load TensorFlow'\n"
                "print(sorted(n for n in dir(resnet_nobn) if not n.startswith('_')))", tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    names = eval(p.stdout.strip().splitlines()[-1])
    assert {"ModelConfig", "TrainConfig", "build_model", "recipes", "train", "custom_objects",
            "Standardize"} <= set(names)
    # only the public names: no submodule a config happened to load (`options`, `data`), which a
    # fresh process has no attribute for
    assert names == resnet_nobn.__all__, names
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        resnet_nobn.nothing  # noqa: B018


def test_configs_from_python_name_the_field_and_take_lists_and_one_number():
    with pytest.raises(ValueError, match=r"^ModelConfig\.widths must be non-decreasing and start "
                                         r"at least at ModelConfig\.stem_width"):
        resnet_nobn.ModelConfig(widths=(8, 16, 32), blocks_per_stage=(1, 1, 1))
    with pytest.raises(resnet_nobn.ConfigError) as e:
        resnet_nobn.TrainConfig(learning_rate=0.0)
    assert str(e.value) == "TrainConfig.learning_rate must be positive"
    assert e.value.flag_words == "--learning_rate must be positive"  # the command line's words
    one = resnet_nobn.ModelConfig(widths=[8, 16, 32], blocks_per_stage=1, stem_width=8)
    same = resnet_nobn.ModelConfig(**TINY_MODEL)
    assert one == same and hash(one) == hash(same)
    cfg = resnet_nobn.TrainConfig(model=one, lr_boundaries=[100, 200])
    assert cfg.lr_boundaries == (100, 200) and isinstance(hash(cfg), int)
    assert resnet_nobn.TrainConfig(lr_boundaries=300).lr_boundaries == (300,)
    with pytest.raises(ValueError, match=r"ModelConfig\.blocks_per_stage .*one entry per stage"):
        resnet_nobn.ModelConfig(blocks_per_stage=(1, 1))



@pytest.mark.parametrize("kw, message", [
    (dict(num_classes=0), r"ModelConfig\.num_classes=0 must be at least 2"),
    (dict(num_classes=1), r"ModelConfig\.num_classes=1 must be at least 2"),
    (dict(num_classes=-5), r"ModelConfig\.num_classes=-5 must be at least 2"),
    (dict(num_classes=True), r"ModelConfig\.num_classes=True must be an integer, e.g. 10"),
    (dict(num_classes=10.0), r"ModelConfig\.num_classes=10\.0 must be an integer"),
    (dict(kernel_size=0), r"ModelConfig\.kernel_size=0 must be at least 1"),
    (dict(kernel_size=-3), r"ModelConfig\.kernel_size=-3 must be at least 1"),
    (dict(kernel_size=3.0), r"ModelConfig\.kernel_size=3\.0 must be an integer, e.g. 3"),
    (dict(image_size=0), r"ModelConfig\.image_size=0 must be at least 1"),
    (dict(image_size=True), r"ModelConfig\.image_size=True must be an integer"),
    (dict(image_size=7), r"stride 2 of stage 2 does not fit its 7x7 feature map \(of 7x7 "
                         r"images\): a stride must divide"),
    (dict(image_size=5), r"stride 2 of stage 2 does not fit its 5x5 feature map"),
    # 6 and 3 built, silently: the 1x1 pooled shortcut broadcast onto the 2x2 branch
    (dict(image_size=6), r"stride 2 of stage 3 does not fit its 3x3 feature map"),
    (dict(image_size=3), r"stride 2 of stage 2 does not fit its 3x3 feature map"),
    (dict(norm="batch", init="he", bn_epsilon=-1.0), r"ModelConfig\.bn_epsilon must be positive"),
    (dict(bn_epsilon=0.0), r"ModelConfig\.bn_epsilon must be positive"),
    (dict(bn_epsilon=float("nan")), r"ModelConfig\.bn_epsilon must be a finite number"),
    (dict(bn_momentum=1.5), r"ModelConfig\.bn_momentum must be in \[0, 1\)"),
    (dict(bn_momentum=1.0), r"ModelConfig\.bn_momentum must be in \[0, 1\)"),
    (dict(bn_momentum=-0.1), r"ModelConfig\.bn_momentum must be in \[0, 1\)"),
    (dict(stem_width=True), r"ModelConfig\.stem_width=True must be an integer"),
    (dict(stem_stride=2.0), r"ModelConfig\.stem_stride=2\.0 must be an integer"),
    (dict(relu_leakiness=True), r"ModelConfig\.relu_leakiness=True must be a number"),
    (dict(head_seed=1.5), r"ModelConfig\.head_seed=1\.5 must be an integer"),
    (dict(head_seed=True), r"ModelConfig\.head_seed=True must be an integer"),
    (dict(strides=(True, 2, 2)), r"ModelConfig\.strides must be a comma list of positive "
                                 r"integers, e.g. 1,2,2"),
    (dict(widths=(8, 16, 32.5)), r"ModelConfig\.widths must be a comma list of positive "
                                 r"integers, e.g. 64,128,256"),
    (dict(blocks_per_stage=0), r"ModelConfig\.blocks_per_stage must be a comma list of positive "
                               r"integers \(or one for every stage\), e.g. 9,9,9"),
    (dict(strides=(0, 1, 1)), r"ModelConfig\.strides must be a comma list of positive integers, "
                              r"e.g. 1,2,2"),
    (dict(logit_gain=1), r"ModelConfig\.logit_gain=1 must be True or False"),
])
def test_a_model_config_value_the_network_cannot_take_is_refused_naming_the_field(kw, message):
    with pytest.raises(resnet_nobn.ConfigError, match="^" + message):
        resnet_nobn.ModelConfig(**{**TINY_MODEL, **kw})


@pytest.mark.parametrize("kw, message", [
    (dict(batch_size=True), r"TrainConfig\.batch_size=True must be an integer, e.g. 128"),
    (dict(train_steps=10.0), r"TrainConfig\.train_steps=10\.0 must be an integer"),
    (dict(seed=1.5), r"TrainConfig\.seed=1\.5 must be an integer"),
    (dict(momentum=True), r"TrainConfig\.momentum=True must be a number, e.g. 0\.9"),
    (dict(learning_rate=False), r"TrainConfig\.learning_rate=False must be a number"),
    (dict(lr_decay_factor=0.0), r"TrainConfig\.lr_decay_factor must be in \(0, 1\]"),
    (dict(lr_boundaries=(True, 5)), r"TrainConfig\.lr_boundaries must be positive, strictly"),
    (dict(lr_boundaries=(10.5,)), r"TrainConfig\.lr_boundaries must be positive, strictly"),
    (dict(profile_steps=(1.5, 3)), r"TrainConfig\.profile_steps must be START,END"),
    (dict(xla=1), r"TrainConfig\.xla=1 must be True or False"),
    (dict(model_dir=None), r"TrainConfig\.model_dir=None must be a path \(a string\), e.g. "
                           r"/tmp/resnet_nobn$"),
    (dict(model_dir=3), r"TrainConfig\.model_dir=3 must be a path \(a string\)"),
    (dict(data_dir=b"/data"), r"TrainConfig\.data_dir=b'/data' must be a path \(a string\)"),
    (dict(dataset=3), r"TrainConfig\.dataset=3: choose one of cifar10"),
    (dict(batch_size=np.float64(8)), r"TrainConfig\.batch_size=8\.0 must be an integer"),
    (dict(seed=np.array([1, 2])), r"TrainConfig\.seed=\[1, 2\] must be an integer"),
])
def test_a_train_config_value_of_the_wrong_kind_is_refused_naming_the_field(kw, message):
    with pytest.raises(resnet_nobn.ConfigError, match="^" + message):
        resnet_nobn.TrainConfig(**kw)


def test_what_the_network_does_take_builds():
    """Even kernels (SAME padding), sizes every stride divides, 2 classes, BN's edges."""
    for kw in (dict(kernel_size=2, stem_kernel=4), dict(image_size=8), dict(image_size=4),
               dict(image_size=1, strides=(1, 1, 1)), dict(num_classes=2),
               dict(norm="batch", init="he", bn_momentum=0.0, bn_epsilon=1e-8)):
        cfg = resnet_nobn.ModelConfig(**{**TINY_MODEL, **kw})
        n = cfg.image_size
        out = resnet_nobn.build_model(cfg)(np.ones((2, n, n, 3), "float32"), training=True)
        assert out.shape == (2, cfg.num_classes) and np.isfinite(np.asarray(out)).all(), kw


def test_numpy_numbers_and_paths_are_taken_as_the_python_values_they_are(tmp_path):
    """Values from a numpy sweep grid, and a pathlib path: the config holds Python's, so its
    JSON is written and build_model takes the seed."""
    import json
    model = resnet_nobn.ModelConfig(widths=np.array([8, 16, 32]), blocks_per_stage=np.int64(1),
                                    stem_width=np.int32(8), relu_leakiness=np.float32(0.25),
                                    logit_gain=np.bool_(True), head_seed=np.uint32(7),
                                    strides=(np.int8(1), 2, 2))
    cfg = resnet_nobn.TrainConfig(model=model, batch_size=np.int64(8), seed=np.uint32(3),
                                  learning_rate=np.float32(0.5), lr_boundaries=np.array([10, 20]),
                                  use_synthetic_data=np.bool_(True), model_dir=tmp_path / "run")
    for obj, name in ((model, "widths"), (model, "blocks_per_stage"), (model, "stem_width"),
                      (model, "relu_leakiness"), (model, "logit_gain"), (model, "head_seed"),
                      (model, "strides"), (cfg, "batch_size"), (cfg, "seed"),
                      (cfg, "learning_rate"), (cfg, "lr_boundaries"), (cfg, "model_dir")):
        value = getattr(obj, name)
        for v in value if isinstance(value, tuple) else (value,):
            assert type(v) in (int, float, bool, str), (name, type(v))
    assert (model.widths, model.blocks_per_stage, cfg.lr_boundaries) == ((8, 16, 32), (1, 1, 1),
                                                                         (10, 20))
    assert cfg.model_dir == str(tmp_path / "run") and cfg.learning_rate == 0.5
    assert json.loads(json.dumps(cfg.to_json()))["model"]["relu_leakiness"] == 0.25
    weights = [resnet_nobn.build_model(resnet_nobn.ModelConfig(**TINY_MODEL), seed=s,
                                       weight_decay=np.float32(0)).get_weights()
               for s in (np.int64(3), 3)]
    for a, b in zip(*weights):
        np.testing.assert_array_equal(a, b)


def test_train_refuses_a_keras_backend_other_than_tensorflow_in_one_line(tmp_path, monkeypatch):
    import keras

    from resnet_nobn.errors import UserError
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    cfg = resnet_nobn.TrainConfig(model=resnet_nobn.ModelConfig(**TINY_MODEL), use_synthetic_data=True,
                                  model_dir=str(tmp_path / "run"))
    with pytest.raises(UserError, match=r"^train runs on TensorFlow, and Keras' backend is jax: "
                                        r"set KERAS_BACKEND=tensorflow"):
        _train(cfg)
    assert not (tmp_path / "run").exists()


def _train(cfg):
    return resnet_nobn.train(cfg)  # whichever of resnet_nobn.training's submodules a test loaded


@pytest.mark.slow
@pytest.mark.parametrize("first", ["import resnet_nobn.training.rundir", "pass"])
def test_the_public_train_is_the_function_whichever_comes_first(tmp_path, first):
    """`resnet_nobn.train` is the trainer's function and `resnet_nobn.training` the package of
    its modules: two names, so neither hides the other whichever is imported first (when they
    shared a name, the function became the module once a submodule loaded)."""
    p = _python(f"{first}\nimport inspect, resnet_nobn\n"
                "train = resnet_nobn.train\n"
                "import resnet_nobn.training.rundir, resnet_nobn.training.trainer as trainer\n"
                "print(inspect.isfunction(train), train is resnet_nobn.train is trainer.train, "
                "inspect.ismodule(resnet_nobn.training), resnet_nobn.training.rundir.RESULTS)",
                tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split()[-4:] == ["True", "True", "True", "results.json"], p.stdout[-500:]


@pytest.mark.parametrize("call, error, message", [
    (lambda: resnet_nobn.build_model(resnet_nobn.ModelConfig(**TINY_MODEL), seed=None), TypeError,
     r"^build_model's seed must be an integer in \[0, 4294967295\], not None; e.g. seed=0$"),
    (lambda: resnet_nobn.build_model(resnet_nobn.ModelConfig(**TINY_MODEL), seed=-1),
     resnet_nobn.ConfigError, r"^build_model's seed=-1 must be in \[0, 4294967295\]$"),
    (lambda: resnet_nobn.build_model(resnet_nobn.recipes.cifar()), TypeError,
     r"^build_model takes a ModelConfig, not a TrainConfig; for a TrainConfig pass its \.model"),
    (lambda: resnet_nobn.build_model({"widths": (8, 16, 32)}), TypeError,
     r"^build_model takes a ModelConfig, not a dict; e.g. resnet_nobn\.ModelConfig\(\)$"),
    (lambda: resnet_nobn.build_model(resnet_nobn.ModelConfig(**TINY_MODEL), weight_decay=-1),
     resnet_nobn.ConfigError, r"^build_model's weight_decay=-1 must be at least 0\.0$"),
    (lambda: resnet_nobn.build_model(resnet_nobn.ModelConfig(**TINY_MODEL), weight_decay=None),
     resnet_nobn.ConfigError, r"^build_model's weight_decay=None must be a number, e.g. 0\.0001"),
    (lambda: resnet_nobn.recipes.optimizer(resnet_nobn.ModelConfig()), TypeError,
     r"^recipes\.optimizer takes a TrainConfig \(its momentum and learning-rate schedule\), not a "
     r"ModelConfig; e.g. resnet_nobn\.recipes\.cifar\(\)$"),
    (lambda: _train(resnet_nobn.ModelConfig()), TypeError,
     r"^train takes a TrainConfig, not a ModelConfig; e.g. resnet_nobn\.TrainConfig\("
     r"model=config, model_dir=\.\.\.\)$"),
])
def test_a_library_function_given_the_wrong_kind_of_argument_names_it_and_the_fix(
        call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_standardize_is_the_input_pipelines_and_takes_a_datasets_mean_and_std():
    import tensorflow as tf

    from resnet_nobn.data import cifar
    images = np.random.default_rng(0).integers(0, 256, (4, 32, 32, 3), dtype="uint8")
    images[1] = 7  # a constant image: the floored standard deviation
    np.testing.assert_allclose(np.asarray(resnet_nobn.Standardize()(images)),
                               cifar.standardize(tf.constant(images)).numpy(), rtol=1e-6, atol=1e-6)
    mean, std = [120.0, 110.0, 100.0], [60.0, 50.0, 40.0]
    np.testing.assert_allclose(np.asarray(resnet_nobn.Standardize(mean, std)(images)),
                               (images - np.array(mean)) / np.array(std), rtol=1e-5)
    with pytest.raises(ValueError, match="both mean and std"):
        resnet_nobn.Standardize(mean=mean)
    m, s = np.array(mean), np.array(std, "float32")  # numpy moments, as a user computes them
    np.testing.assert_allclose(np.asarray(resnet_nobn.Standardize(m, s)(images)),
                               (images - m) / s, rtol=1e-5)
    layer = resnet_nobn.Standardize(np.float64(127.5), np.float32(64))  # one number for all
    assert layer.get_config()["mean"] == 127.5 and layer.get_config()["std"] == 64.0
    assert resnet_nobn.Standardize(m, s).get_config()["mean"] == mean  # Python floats: JSON


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("mean, std, message", [
    ([0, 0, 0], [NAN] * 3, r"^Standardize: std must be finite"),
    ([0, 0, 0], [INF] * 3, r"^Standardize: std must be finite"),
    ([NAN] * 3, [1, 1, 1], r"^Standardize: mean must be finite"),
    (np.array([1.0, INF, 1.0]), 2.0, r"^Standardize: mean must be finite"),
    ([0, 0, 0], [0, 1, 1], r"^Standardize: std must be positive"),
    (0.0, -1.0, r"^Standardize: std must be positive"),
    ([0, 0, 0], [1, 1], r"^Standardize: mean has 3 numbers and std 2"),
    ("abc", 1.0, r"^Standardize: mean must be a number or one number per channel"),
    ([0, 0, 0], [True, 1, 1], r"^Standardize: std must be a number or one number per channel"),
    ([[0, 0, 0]], [[1, 1, 1]], r"^Standardize: mean must be a number or one number per channel"),
    ([], [], r"^Standardize: mean must be a number or one number per channel"),
])
def test_standardize_refuses_moments_it_cannot_use_by_name(mean, std, message):
    with pytest.raises(ValueError, match=message):
        resnet_nobn.Standardize(mean, std)


def test_standardize_refuses_moments_of_another_number_of_channels_when_built():
    import keras
    for mean, std in (([0, 0], [1, 1]), (np.zeros(4), np.ones(4))):
        with pytest.raises(ValueError, match=r"^Standardize: mean and std have \d numbers \(one "
                           r"per channel\), and the images have 3 channels"):
            keras.Sequential([keras.Input((8, 8, 3)), resnet_nobn.Standardize(mean, std)])
        with pytest.raises(ValueError, match="the images have 3 channels"):
            resnet_nobn.Standardize(mean, std)(np.zeros((1, 8, 8, 3), "uint8"))


LOAD = r"""
import json, sys
import keras, numpy as np
x = np.random.default_rng(0).standard_normal((2, 32, 32, 3)).astype("float32")
try:
    keras.saving.load_model("model.keras")
    print("loaded without the classes")
except Exception as e:
    print(json.dumps(str(e)))
import resnet_nobn
model = keras.saving.load_model("model.keras", custom_objects=resnet_nobn.custom_objects())
print(json.dumps(np.asarray(model(x)).tolist()))
"""


@pytest.mark.slow
def test_a_model_keras_without_the_package_fails_naming_it_and_loads_with_custom_objects(tmp_path):
    import json
    model = resnet_nobn.build_model(resnet_nobn.ModelConfig(**TINY_MODEL), seed=1)
    model.save(tmp_path / "model.keras")
    p = _python(LOAD, tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    failure, logits = [json.loads(line) for line in p.stdout.strip().splitlines()[-2:]]
    # Keras' words point at the fix docs/library.md gives: the module to import, or its classes
    # (the first it meets, the stem's initializer, is said as an identifier it cannot interpret)
    assert "Could not interpret initializer identifier" in failure, failure[:500]
    assert "'module': 'resnet_nobn.model.initializers'" in failure, failure[:500]
    assert "resnet_nobn>" in failure  # the registered name custom_objects() gives
    x = np.random.default_rng(0).standard_normal((2, 32, 32, 3)).astype("float32")
    np.testing.assert_allclose(logits, np.asarray(model(x)), rtol=1e-5, atol=1e-6)


def _blocks(page):
    text = open(os.path.join(ROOT, "docs", page), encoding="utf-8").read()
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)


def _image_folder(root, classes=((0, "t_shirt"), (1, "trouser"), (8, "bag")), sizes=(300, 90)):
    """The page's folder of your own images: Fashion-MNIST's `classes` as PNG files, `sizes`
    training and test images each (Debian's idx files)."""
    from PIL import Image

    from resnet_nobn.data import fashion_mnist
    for split, n in zip(("train", "test"), sizes):
        x, y = fashion_mnist.read_split(fashion_mnist.SOURCE, split)
        for label, name in classes:
            (root / split / name).mkdir(parents=True)
            for i, j in enumerate(np.flatnonzero(y == label)[:n]):
                Image.fromarray(x[j]).save(root / split / name / f"{i}.png")


@pytest.mark.slow
def test_the_library_pages_code_runs_as_printed_and_learns(tmp_path, fashion_mnist_prepared):
    """docs/library.md's blocks, as printed, in fresh processes: the first model leaves chance on
    Fashion-MNIST within its 400 steps and loads in another process without custom_objects; the
    folder's model (run after the load, in that process) leaves chance on a folder of PNGs; the
    recipe block (run after it) prints what it says."""
    first, load, folder, recipe = _blocks("library.md")
    env = dict(ENV, TFDS_DATA_DIR=fashion_mnist_prepared[0])  # tfds' default directory, prepared
    def run(code):
        return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=900)
    p = run(first)
    assert p.returncode == 0, p.stderr[-3000:]
    curve = re.findall(r"accuracy: ([\d.]+) - loss: ([\d.]+) - val_accuracy: ([\d.]+)", p.stdout)
    assert len(curve) == 8, p.stdout[-3000:]  # the learning curve: one line per 50 steps
    assert abs(float(curve[0][1]) - np.log(10)) < 0.05  # at chance first (the page says why)
    loss, accuracy = eval(p.stdout.strip().splitlines()[-1])
    assert accuracy > 0.5, p.stdout[-3000:]  # and well away from it after 400 steps
    _image_folder(tmp_path / "my_images")
    p = run(load + folder + recipe)  # the load first: a process that never made the model
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stdout.strip().splitlines()
    predicted = next(line for line in lines if line.startswith("["))  # the load's print
    assert re.fullmatch(r"\[[\d ]+\] \[[\d ]+\]", predicted), predicted
    folders, recipes = lines[-2:]
    names, evaluated = re.fullmatch(r"(\(.*\)) (\[.*\])", folders).groups()
    names, (loss, accuracy) = eval(names), eval(evaluated)
    assert names == ("bag", "t_shirt", "trouser") and accuracy > 0.6, p.stdout[-3000:]
    assert (tmp_path / "my_images.keras").exists()
    assert recipes == "(1500, 2500) (16, 32, 64) 0.8"


@pytest.mark.slow
def test_the_example_script_fits_and_saves(tmp_path, monkeypatch, capsys):
    import runpy
    script = os.path.join(ROOT, "examples", "fit_fashion_mnist.py")
    monkeypatch.setattr(sys, "argv", [script, "--synthetic", "--steps=4", "--batch_size=16",
                                      "--train_size=40", "--test_size=32", "--widths=8,16,32",
                                      f"--save={tmp_path / 'm.keras'}"])
    runpy.run_path(script, run_name="__main__")  # in this process, as `python script` runs it
    out = capsys.readouterr().out
    assert re.search(r"test accuracy [\d.]+ +loss [\d.]+ +after 4 steps", out), out
    assert (tmp_path / "m.keras").exists()
    too_short = _python([os.path.join(ROOT, "examples", "fit_fashion_mnist.py"), "--steps=3"],
                        tmp_path)
    assert too_short.returncode == 2 and "--steps=3: give at least 4" in too_short.stderr
