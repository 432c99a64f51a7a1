"""The ImageNet pieces: the model variant, the flag defaults, the tfds pipeline on mock data."""
import dataclasses
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from resnet_nobn import recipes
from resnet_nobn.data.datasets import DATASETS
from resnet_nobn.data import imagenet, inputs, prepare
from resnet_nobn.errors import UserError
from resnet_nobn.model import network as model_lib
from resnet_nobn.training.steps import learning_rate
from tests.helpers import run_main

pytestmark = pytest.mark.timeout(180)


def _imagenet_model_config(**overrides):
    return dataclasses.replace(recipes.imagenet().model, **overrides)


def test_registered_dataset_info():
    info = DATASETS["imagenet2012"]
    assert (info.num_classes, info.image_size, info.num_train, info.num_eval) == (
        1000, 224, 1_281_167, 50_000)
    # every dataset a config accepts has an input: the one of its recipe
    assert {d.recipe for d in DATASETS.values()} == set(inputs.INPUTS)


def test_model_variant_parameter_count():
    model = model_lib.build_model(_imagenet_model_config())
    convs = [v for v in model.trainable_variables if "kernel" in v.path]
    assert len(convs) == 33  # stem + 16 blocks x 2: the 34-layer ResNet's convs, head not trained
    assert model_lib.count_params(model.trainable_variables) == 36_336_636  # paper: 35.7M
    assert model.output_shape == (None, 1000)
    assert model.get_layer("stage4_block3").output.shape[1:3] == (7, 7)  # as in ResNet-34
    base = model_lib.build_model(_imagenet_model_config(widths=(64, 128, 256, 512), stem_width=64))
    assert model_lib.count_params(base.trainable_variables) == 21_095_616


def test_schedule_defaults():
    tc = recipes.imagenet()
    assert tc.batch_size == 256 and tc.learning_rate == 0.1 and tc.train_steps == 700_000
    assert tc.lr_decay_every == 10_009 == int(2 * 1_281_167 / 256) and tc.lr_decay_factor == 0.94
    assert tc.model.num_classes == 1000 and tc.model.image_size == 224
    assert float(learning_rate(10_008, tc)) == pytest.approx(0.1)
    assert float(learning_rate(10_009, tc)) == pytest.approx(0.094)
    assert float(learning_rate(20_018, tc)) == pytest.approx(0.1 * 0.94 ** 2)


def _ctx(n=1, i=0):
    return tf.distribute.InputContext(num_input_pipelines=n, input_pipeline_id=i,
                                      num_replicas_in_sync=n)


@pytest.mark.slow
def test_pipeline_on_mock_data_yields_224_batches():
    with tfds.testing.mock_data(num_examples=20, policy=tfds.testing.MockPolicy.USE_CODE):
        builder = tfds.builder("imagenet2012")
        raw = builder.as_dataset(split="validation", decoders={"image": tfds.decode.SkipDecoding()})
        sizes = {tuple(tf.image.extract_jpeg_shape(ex["image"]).numpy()[:2]) for ex in raw.take(10)}
        assert len(sizes) > 1  # the mock images have varied sizes
        inp = imagenet.TfdsInput(builder, seed=0, num_eval=20)

        batches = list(inp.train_dataset(_ctx(), 4, start_step=0).take(3))
        for images, labels in batches:
            assert images.shape == (4, 224, 224, 3) and images.dtype == tf.float32
            assert labels.shape == (4,) and labels.dtype == tf.int32
            assert np.all(np.isfinite(images.numpy()))
            assert np.all((labels.numpy() >= 0) & (labels.numpy() < 1000))

        assert inp.num_eval_batches(8) == 3
        whole = list(inp.eval_dataset(_ctx(), 8))
        assert len(whole) == 3
        assert all(b[0].shape == (8, 224, 224, 3) for b in whole)
        weights = np.concatenate([b[2].numpy() for b in whole])
        assert weights.sum() == 20 and np.all(weights[20:] == 0)  # padded with weight 0

        # Two workers: each gets its contiguous half of every global batch, nothing else.
        halves = [list(inp.eval_dataset(_ctx(2, i), 8)) for i in range(2)]
        assert [len(h) for h in halves] == [3, 3]
        for b, (h0, h1) in enumerate(zip(*halves)):
            np.testing.assert_array_equal(np.concatenate([h0[1], h1[1]]), whole[b][1].numpy())
            np.testing.assert_allclose(np.concatenate([h0[0], h1[0]]), whole[b][0].numpy(),
                                       atol=1e-5)


def test_preprocess_eval_is_central_crop():
    image = tf.cast(tf.random.uniform([300, 400, 3], 0, 255, seed=1), tf.uint8)
    out = imagenet.preprocess_eval(tf.io.encode_jpeg(image))
    assert out.shape == (224, 224, 3)
    train = imagenet.preprocess_train(tf.io.encode_jpeg(image), tf.constant([1, 2], tf.int64))
    assert train.shape == (224, 224, 3)


def test_missing_archives_say_where_to_put_them(tmp_path):
    with pytest.raises(UserError) as e:
        prepare.imagenet_builder(str(tmp_path))
    msg = str(e.value)
    manual = os.path.join(str(tmp_path), "downloads", "manual")
    assert manual in msg and "ILSVRC2012_img_train.tar" in msg and "ILSVRC2012_img_val.tar" in msg
    assert "\n" not in msg


def test_entry_point_reports_missing_data_in_one_line(tmp_path):
    p = run_main("imagenet_train.py", f"--data_dir={tmp_path}", f"--model_dir={tmp_path / 'run'}",
                 "--strategy=one_device", env=dict(TF_CPP_MIN_LOG_LEVEL="2"))
    assert p.returncode == 2, p.stderr
    assert "ILSVRC2012_img_train.tar" in p.stderr and "Traceback" not in p.stderr
