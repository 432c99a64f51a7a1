"""--xla and --mixed_precision: finite losses that agree with the default float32 run.

Each run trains the tiny synthetic net for a few steps in this process with `log_every=1`, and the
per-step training losses are read back from its TensorBoard summaries (model_dir/train).
"""

import keras
import numpy as np
import pytest

from helpers import NEEDS_BFLOAT16, tiny_config, train_losses
from resnet_nobn.training import trainer as train_lib

pytestmark = pytest.mark.slow

STEPS = 5


def _run(tmp_path, name, **overrides):
    cfg = tiny_config(tmp_path / name, train_steps=STEPS, log_every=1, batch_size=16, **overrides)
    trainer = train_lib.Trainer(cfg)
    results = trainer.run()
    losses = train_losses(cfg.model_dir)
    assert sorted(losses) == list(range(1, STEPS + 1)), losses
    assert all(np.isfinite(list(losses.values())))
    return trainer, results, np.array([losses[s] for s in sorted(losses)])


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("speed"), "default")


def test_xla_step_agrees_with_the_default(tmp_path, default_run):
    _, base_results, base = default_run
    trainer, results, losses = _run(tmp_path, "xla", xla=True)
    np.testing.assert_allclose(losses, base, rtol=1e-4, atol=1e-5)
    assert abs(results["top1_error"] - base_results["top1_error"]) < 1e-9
    # the XLA step really trained: its weights left the initialisation (the same seed, unrun)
    init = train_lib.Trainer(tiny_config(tmp_path / "init", xla=True)).model.trainable_weights
    moved = max(float(np.max(np.abs(w.numpy() - w0.numpy())))
                for w, w0 in zip(trainer.model.trainable_weights, init))
    assert moved > 1e-4


@pytest.mark.parametrize("dtype,tol", [pytest.param("bfloat16", 3e-2, marks=NEEDS_BFLOAT16),
                                       ("float16", 5e-3)])
def test_mixed_precision_step_agrees_with_the_default_and_keeps_head_and_loss_float32(
        tmp_path, default_run, dtype, tol):
    _, base_results, base = default_run
    trainer, results, losses = _run(tmp_path, dtype, mixed_precision=dtype)
    np.testing.assert_allclose(losses, base, atol=tol)
    assert abs(results["history"][-1]["eval_loss"] - base_results["history"][-1]["eval_loss"]) < tol
    model = trainer.model
    assert model.get_layer("stem").compute_dtype == dtype
    assert model.get_layer("stem").variable_dtype == "float32"
    assert model.get_layer("head").compute_dtype == "float32"
    assert model.output.dtype == "float32"
    assert isinstance(trainer.optimizer, keras.optimizers.LossScaleOptimizer) == (dtype == "float16")
    # the policy was set for that build only: it does not leak into the next run of this process
    assert keras.mixed_precision.global_policy().name == "float32"


def test_policy_of_a_mixed_run_does_not_leak_into_the_next_run(tmp_path):
    train_lib.Trainer(tiny_config(tmp_path / "a", mixed_precision="float16"))
    trainer = train_lib.Trainer(tiny_config(tmp_path / "b"))
    assert trainer.model.get_layer("stem").compute_dtype == "float32"
    assert not isinstance(trainer.optimizer, keras.optimizers.LossScaleOptimizer)
