"""A memory refusal names the settings that drive the run's size (the batch, the depth, the
widths), the one to lower first first, and never one whose lowering cannot help; a crop padding
that only makes the padded image huge is refused by its own name."""
import collections

import psutil
import pytest
import tensorflow as tf

from resnet_nobn.config import ModelConfig, TrainConfig
from resnet_nobn.errors import UserError
from resnet_nobn.options import ConfigError
from resnet_nobn.training import failures, trainer

GIB = 2 ** 30


def _cfg(batch_size=8, **model):
    return TrainConfig(batch_size=batch_size, use_synthetic_data=True, model=ModelConfig(
        **{"widths": (8, 16, 32), "blocks_per_stage": 1, "stem_width": 8, **model}))


@pytest.mark.parametrize("cfg, said", [
    (_cfg(blocks_per_stage=100_000),  # at batch 1 too: the depth, not the batch
     "; lower --blocks_per_stage (now 100000,100000,100000) or --widths (now 8,16,32)"),
    (_cfg(widths=(60_000,) * 3), "; lower --widths (now 60000,60000,60000) or "
                                 "--blocks_per_stage (now 1,1,1)"),
    (_cfg(batch_size=100_000_000), "; lower --batch_size (now 100000000), --blocks_per_stage "
                                   "(now 1,1,1) or --widths (now 8,16,32)"),
])
def test_a_run_too_big_for_the_machine_names_what_drives_its_size(monkeypatch, cfg, said):
    memory = collections.namedtuple("memory", "total")
    monkeypatch.setattr(psutil, "virtual_memory", lambda: memory(16 * GIB))
    with pytest.raises(UserError, match=r"^the run needs at least [\d.]+ GiB and this machine "
                                        r"has 16\.0 GiB"):
        trainer.check_memory(cfg, 1)
    with pytest.raises(UserError) as e:
        trainer.check_memory(cfg, 1)
    assert str(e.value).endswith(said), str(e.value)
    trainer.check_memory(_cfg(), 1)  # a tiny run fits


def test_out_of_memory_while_training_names_the_batch_the_depth_and_the_widths():
    error, ends = failures.explain(tf.errors.ResourceExhaustedError(None, None, "OOM"),
                                   _cfg(blocks_per_stage=7))
    assert ends and str(error) == ("out of memory (ResourceExhaustedError): lower --batch_size "
                                   "(now 8), --blocks_per_stage (now 7,7,7) or --widths (now "
                                   "8,16,32)")


def test_bfloat16_on_a_cpu_without_its_convolution_is_one_line_naming_the_flag():
    """oneDNN on an AVX2-only CPU cannot make a bfloat16 convolution (as seen with
    ONEDNN_MAX_CPU_ISA=AVX2); the run says so, not TensorFlow's traceback. The same error in a
    float32 run is no such fault."""
    e = tf.errors.AbortedError(None, None, "Operation received an exception:Status: 3, message: "
                               "could not create a primitive descriptor for the convolution "
                               "forward propagation primitive.")
    error, ends = failures.explain(e, _cfg().replace(mixed_precision="bfloat16"))
    assert ends and str(error).startswith("--mixed_precision=bfloat16: this CPU's TensorFlow "
                                          "(oneDNN) has no bfloat16 convolution")
    assert failures.explain(e, _cfg())[0] is e


@pytest.mark.parametrize("padding", [32, 100_000])
def test_a_crop_padding_the_image_cannot_fill_is_refused_by_name(padding):
    with pytest.raises(ConfigError, match=rf"^TrainConfig\.crop_padding={padding} must be below "
                                          r"the image size \(32\)"):
        TrainConfig(crop_padding=padding)
    TrainConfig(crop_padding=31)
    TrainConfig(crop_padding=padding, use_synthetic_data=True)  # no crop: nothing to pad
