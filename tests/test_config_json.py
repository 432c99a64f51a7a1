"""config.json read back: the network's identity (the BN twin) recorded and compared by the one
resume rule, absent fields read as the default of their time, numbers in another JSON type, and
float options bounded by float32 (resnet_nobn/config.py, resume.decide)."""
import json

import pytest

from resnet_nobn.config import TrainConfig
from resnet_nobn.errors import UserError
from tests.helpers import check_model_dir, run_main, tiny_config


def _write(cfg, edit):
    """config.json of `cfg` in its model_dir, after `edit(dict)`."""
    d = cfg.to_json()
    edit(d)
    with open(f"{cfg.model_dir}/config.json", "w") as f:
        json.dump(d, f)


def _drop_bn_fields(d):
    for k in ("bn_epsilon", "bn_momentum", "activate_before_residual"):
        d["model"].pop(k, None)  # as written before they existed


def test_a_bn_run_directory_from_before_the_twin_was_recorded_is_refused_naming_it(tmp_path):
    bn = tiny_config(tmp_path, norm="batch", init="he")
    _write(bn, _drop_bn_fields)
    with pytest.raises(UserError) as refused:
        check_model_dir(bn)
    message = str(refused.value)
    assert "\n" not in message and "different architecture" in message, message
    assert "bn_epsilon: 1e-05 there, 0.001 here" in message, message
    assert "activate_before_residual: False there, True here" in message, message
    assert message.endswith("that run predates config.json's bn_epsilon, "
                            "activate_before_residual); use a new --model_dir"), message
    # and the old twin is what the run directory's config builds (an export of it)
    old = TrainConfig.from_json(json.loads((tmp_path / "config.json").read_text()))
    assert (old.model.bn_epsilon, old.model.activate_before_residual) == (1e-5, False)
    # without BN these fields compute nothing: an old run directory resumes
    plain = tiny_config(tmp_path)
    _write(plain, _drop_bn_fields)
    assert check_model_dir(plain)[1] == {}


def test_a_run_of_the_former_fixup_is_refused_on_resume_and_still_builds(tmp_path):
    """Before --init=fixup built Fixup's reference network its config.json had no
    fixup_reference (and, earlier still, no scalar_lr_factor: its scalars at the full rate)."""
    former = tiny_config(tmp_path, init="fixup", head="random", scalar_lr_factor=1.0)

    def as_written_then(d):
        d["model"].pop("fixup_reference")
        d.pop("scalar_lr_factor")
    _write(former, as_written_then)
    with pytest.raises(UserError, match="fixup_reference: False there, True here"):
        check_model_dir(former)
    old = TrainConfig.from_json(json.loads((tmp_path / "config.json").read_text()))
    assert (old.model.fixup_reference, old.scalar_lr_factor) == (False, 1.0)
    from resnet_nobn.model.network import build_model
    names = {layer.name for layer in build_model(old.model).layers}
    assert "stem_bias" not in names and "stem_bias" in {
        layer.name for layer in build_model(tiny_config(tmp_path, init="fixup").model).layers}


def test_a_field_absent_from_an_old_config_means_the_default_of_its_time(tmp_path):
    cfg = tiny_config(tmp_path)
    _write(cfg, lambda d: d.pop("max_branch_norm"))  # before --max_branch_norm: no bound
    assert check_model_dir(cfg)[1] == {}
    with pytest.raises(UserError, match=r"max_branch_norm: 0\.0 there, 0\.5 here"):
        check_model_dir(tiny_config(tmp_path, max_branch_norm=0.5))
    _write(cfg, lambda d: d.pop("crop_padding"))  # before the fork's 36x36 crop: 40x40
    with pytest.raises(UserError, match="crop_padding: 4 there, 2 here"):
        check_model_dir(cfg)


def test_numbers_written_in_another_json_type_are_read_as_the_same_number(tmp_path):
    cfg = tiny_config(tmp_path)

    def retyped(d):
        d["model"]["widths"] = [8.0, 16.0, 32.0]
        d["learning_rate"] = "0.01"
        d["batch_size"] = 8.0
    _write(cfg, retyped)
    assert check_model_dir(cfg)[1] == {}
    read = TrainConfig.from_json(json.loads((tmp_path / "config.json").read_text()))
    assert read.to_json() == cfg.to_json() and all(type(w) is int for w in read.model.widths)
    from resnet_nobn.model import network as model_lib
    model_lib.build_model(read.model)  # 8.0 channels were a Keras traceback
    # a value that is not the number stays as written, and the refusal tells the two apart
    _write(cfg, lambda d: d.update(use_synthetic_data="True"))
    with pytest.raises(UserError, match=r"use_synthetic_data: True \(str\) there, True \(bool\) "
                                        "here"):
        check_model_dir(cfg)
    _write(cfg, lambda d: d["model"].update(widths=[8.5, 16, 32]))
    with pytest.raises(UserError, match="widths: 8.5,16,32 there, 8,16,32 here"):
        check_model_dir(cfg)


def test_a_float_option_beyond_float32_is_refused_in_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"TrainConfig\.max_branch_norm=1e\+300 is beyond float32"):
        tiny_config(tmp_path, max_branch_norm=1e300)
    p = run_main("cifar_train.py", "--use_synthetic_data", "--max_branch_norm=1e300",
                f"--model_dir={tmp_path / 'run'}", timeout=120)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "error: --max_branch_norm=1e+300 is beyond float32's range (at most 3.403e+38)"], p.stderr
    assert not (tmp_path / "run").exists()
