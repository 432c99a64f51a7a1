"""The remedies that keep the paper's network at its rate: --agc (NFNets' adaptive gradient clipping
per output unit), --scalar_lr_factor (Fixup's scalars at lr/10) and the warm-up rule. Off, each
runs none of its code; on, 2 replicas equal 1 device; bad values are one line."""
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from resnet_nobn.training.recovery import warmup_rule
from resnet_nobn.training import steps
from resnet_nobn.training.steps import adaptive_clip
from resnet_nobn.training.trainer import Trainer
from tests.helpers import run_main, tiny_config

# The networks the remedies are off on: the paper's, Fixup's blocks with the random head (the
# network --init=fixup built before --scalar_lr_factor), SkipInit's, the paper's under --clip_norm.
OFF_CASES = [{}, dict(init="fixup", fixup_reference=False, head="random"), dict(init="skipinit"),
             dict(clip_norm=0.01)]


def _weights(trainer):
    return [v.numpy() for v in trainer.model.trainable_variables]


def _trained(model_dir, **kw):
    trainer = Trainer(tiny_config(model_dir, **{**dict(train_steps=3, learning_rate=0.05, seed=5,
                                                       head_seed=0), **kw}))
    trainer.run()
    return trainer


def test_agc_scales_each_output_unit_to_lambda_times_its_weight_norm():
    rng = np.random.RandomState(0)
    weight = rng.randn(3, 3, 4, 5).astype("float32")
    weight[..., 4] = 0.0  # a unit at zero: the floor 1e-3 bounds its gradient
    grad = rng.randn(3, 3, 4, 5).astype("float32")
    grad[..., 0] *= 1e-3  # a unit already under its bound: untouched
    out = adaptive_clip(tf.constant(grad), tf.constant(weight), 0.16).numpy()

    def norms(x):
        return np.sqrt((x.astype("float64") ** 2).sum(axis=(0, 1, 2)))

    limit = 0.16 * np.maximum(norms(weight), 1e-3)
    np.testing.assert_array_equal(out[..., 0], grad[..., 0])
    np.testing.assert_allclose(norms(out)[1:], limit[1:], rtol=1e-5)
    for unit in range(1, 5):  # only rescaled, never turned
        np.testing.assert_allclose(out[..., unit] * norms(grad)[unit] / limit[unit],
                                   grad[..., unit], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kw", OFF_CASES)
def test_off_is_the_step_without_the_remedies(tmp_path, monkeypatch, kw):
    """Off, no remedy's code runs: AGC's clip and the scalars' factor raise here if called, and the
    rate has no warm-up; what trains is the step as it was before the remedies existed. Checked
    on the code, in this process: a digest of the weights recorded on one machine differs on a
    CPU whose kernels round otherwise."""
    def never(*args, **kwargs):
        raise AssertionError("a remedy that is off ran")

    monkeypatch.setattr(steps, "adaptive_clip", never)
    monkeypatch.setattr(steps, "scale_scalar_gradients", never)
    off = _trained(tmp_path / "off", agc=0.0, scalar_lr_factor=1.0, warmup_steps=0, **kw)
    assert [float(steps.learning_rate(s, off.cfg)) for s in range(3)] == [np.float32(0.05)] * 3
    init = Trainer(tiny_config(tmp_path / "init", **{**dict(seed=5, head_seed=0), **kw}))
    assert any(not np.array_equal(a, b) for a, b in zip(_weights(off), _weights(init))), \
        "it trained"


def test_agc_on_changes_the_run_and_keeps_the_head(tmp_path):
    off, on = _trained(tmp_path / "off"), _trained(tmp_path / "on", agc=0.01)
    changed = [not np.array_equal(a, b) for a, b in zip(_weights(off), _weights(on))]
    assert any(changed), "the test must be able to fail: the clip was not active"


def test_scalar_lr_factor_moves_fixups_scalars_a_tenth_as_far_and_nothing_else(tmp_path):
    """The first SGD step is -lr * gradient, from the same initialisation: with the factor 0.1
    the scalars move exactly a tenth as far, the kernels the same."""
    kw = dict(init="fixup", head="random", train_steps=1, momentum=0.0)
    start = Trainer(tiny_config(tmp_path / "start", **kw))
    full, tenth = (_trained(tmp_path / n, scalar_lr_factor=f, **kw)
                   for n, f in (("full", 1.0), ("tenth", 0.1)))
    init = {v.path: v.numpy() for v in start.model.trainable_variables}
    scalars = 0
    for a, b in zip(full.model.trainable_variables, tenth.model.trainable_variables):
        step_full, step_tenth = a.numpy() - init[a.path], b.numpy() - init[b.path]
        if a.shape == ():
            scalars += 1
            np.testing.assert_allclose(step_tenth, 0.1 * step_full, rtol=1e-4, atol=1e-9)
        else:
            np.testing.assert_array_equal(step_tenth, step_full)
    assert scalars == 3 * 5 + 2 and any(abs(float(v.numpy() - init[v.path])) > 0 for v in
                                    full.model.trainable_variables if v.shape == ())


@pytest.mark.slow
@pytest.mark.parametrize("kw", [dict(agc=0.02), dict(init="fixup", scalar_lr_factor=0.1),
                                dict(agc=0.02, clip_norm=0.5, warmup_steps=3)])
def test_two_replicas_equal_one_device_with_the_remedy(tmp_path, kw):
    assert len(tf.config.list_logical_devices("CPU")) == 2
    with tfds.testing.mock_data(num_examples=64):
        base = dict(use_synthetic_data=False, train_steps=5, batch_size=8, learning_rate=0.2,
                    seed=1, **kw)
        one = Trainer(tiny_config(tmp_path / "one", strategy="one_device", **base))
        one.run()
        two = Trainer(tiny_config(tmp_path / "two", strategy="mirrored", **base))
        assert two.strategy.num_replicas_in_sync == 2
        two.run()
        off = Trainer(tiny_config(tmp_path / "off", strategy="one_device",
                                  **{**base, "agc": 0.0, "scalar_lr_factor": 1.0}))
        off.run()
    for a, b in zip(_weights(one), _weights(two)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert any(not np.allclose(a, b, rtol=1e-3, atol=1e-5)
               for a, b in zip(_weights(one), _weights(off))), "the remedy must have acted"


@pytest.mark.parametrize("args, message", [
    (["--agc=-0.1"], "--agc=-0.1"),
    (["--agc=nan"], "--agc must be a finite number"),
    (["--scalar_lr_factor=0", "--init=fixup"], "--scalar_lr_factor must be positive"),
    (["--scalar_lr_factor=0.1"], "--init=identity has no trainable scalars"),
    (["--scalar_lr_factor=0.1", "--norm=batch"], "has no trainable scalars"),
])
def test_bad_values_are_one_line_and_write_nothing(tmp_path, args, message):
    proc = run_main("cifar_train.py", "--use_synthetic_data", f"--model_dir={tmp_path / 'run'}",
                   *args)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and message in lines[0]
    assert not (tmp_path / "run").exists()


def test_the_warmup_rule_is_half_the_first_rate_period():
    assert warmup_rule(60_000, (30_000, 50_000)) == 15_000  # the paper's schedule
    assert warmup_rule(1500, (750, 1250)) == 375
    assert warmup_rule(500) == 250  # constant rate: the whole run is the first period
    assert warmup_rule(700_000, (), 10_009) == 5004  # ImageNet's staircase
    assert warmup_rule(1) == 1


@pytest.mark.parametrize("remedy", ["paper_agc", "paper_warmup"])
def test_a_diverged_run_following_a_remedy_resumes_from_its_newest_finite_checkpoint(
        tmp_path, monkeypatch, remedy):
    """With MEASURED saying `remedy` survived, the advice is that remedy at the measured rate; the
    run with it appended resumes from the checkpoint before the blow-up (here the
    initialisation) and trains; a warm-up follows its rule from there, on the global step."""
    from resnet_nobn.training import recovery
    from resnet_nobn.training import steps, trainer as train_lib
    from resnet_nobn.errors import TrainingDiverged
    monkeypatch.setattr(recovery, "MEASURED", {(remedy, 9): {3: 10.0, 5: 10.0}})
    kw = dict(train_steps=6, learning_rate=1e9, log_every=6, eval_every=6)
    with pytest.raises(TrainingDiverged) as diverged:
        train_lib.train(tiny_config(tmp_path, **kw))
    first, advice = str(diverged.value).splitlines()
    assert recovery.REMEDIES[remedy][1] in first  # what the remedy changes, in one clause
    flags = dict(t[2:].split("=") for t in advice[len("retry with: "):].split())
    expected = {k: str(recovery.warmup_rule(6) if v == recovery.WARMUP else v)
                for k, v in recovery.REMEDIES[remedy][0].items()}
    assert flags == {**expected, "learning_rate": "0.05"}
    resumed = tiny_config(tmp_path, **{**kw, **{k: type(getattr(tiny_config(tmp_path), k))(v)
                                                 for k, v in flags.items()}})
    results = train_lib.train(resumed)
    assert results["global_step"] == 6 and results["rollbacks"][0]["resumed_from"] == 0
    assert {c["field"] for c in results["resume_changes"]} == set(flags)
    assert all(np.isfinite(h["eval_loss"]) for h in results["history"])
    if remedy == "paper_warmup":  # W = 3 of a 6-step run: 1/3, 2/3, then the full rate
        rates = [float(steps.learning_rate(s, resumed)) for s in range(4)]
        np.testing.assert_allclose(rates, [0.05 / 3, 0.1 / 3, 0.05, 0.05], rtol=1e-6)


def test_the_docs_remedies_tables_are_the_rendering_of_the_measured_table():
    """docs/stability.md's remedies tables come from recovery.MEASURED, their one source."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tables = subprocess.run([sys.executable, os.path.join(root, "experiments", "stability", "remedies.py")],
                            capture_output=True, text=True, check=True, timeout=60).stdout
    with open(os.path.join(root, "docs", "stability.md")) as f:
        docs = f.read()
    start = docs.index("<!-- remedies tables: python experiments/stability/remedies.py -->\n")
    end = docs.index("<!-- end of the remedies tables -->")
    assert docs[start:end].split("\n", 1)[1].strip() == tables.strip()


def test_a_remedy_that_diverged_at_any_measured_depth_has_not_survived(monkeypatch):
    """A seed that diverged at 3 blocks per stage rules the remedy out at 9 as well (the sweep's
    rule: a remedy survives only if no seed diverges); one seed alone never counts."""
    from resnet_nobn.training import recovery
    monkeypatch.setattr(recovery, "MEASURED", {
        ("paper_warmup", 3): {3: 15.0, 5: "NaN @300"}, ("paper_warmup", 9): {3: 12.0, 5: 13.0},
        ("paper_agc", 3): {3: 17.0, 5: 17.5}, ("paper_agc", 9): {3: 17.0, 5: 16.0},
        ("paper_clip1", 9): {3: 14.0}})
    assert not recovery.survived("paper_warmup", 9) and not recovery.survived("paper_warmup", 1)
    assert recovery.survived("paper_agc", 9) and recovery.survived("paper_agc", 1)
    assert not recovery.survived("paper_clip1", 9)
    deep = tiny_config("/x", blocks_per_stage=(9, 9, 9), train_steps=1500, lr_boundaries=(750, 1250))
    assert recovery.retry_advice(deep) == "--agc=0.16"


def test_the_measured_runs_length_is_recorded_and_one(tmp_path):
    """The advice says how long its measured runs trained (measured_remedies.json `steps`); runs
    of another length are refused into the file, which is left as it was."""
    import shutil
    from resnet_nobn.training import recovery
    from experiments.stability import remedies
    path = str(tmp_path / "measured.json")
    shutil.copy(recovery.MEASURED_FILE, path)
    before = open(path).read()
    with pytest.raises(SystemExit, match="holds runs of 1500 steps, these ran 6000"):
        remedies.write({("bn", 3): {7: 9.0}}, 6000, path)
    assert open(path).read() == before
    remedies.write({("bn", 3): {7: 9.0}}, 1500, path)
    measured, steps = recovery.read_measured(path)
    assert steps == 1500 and measured[("bn", 3)] == {7: 9.0}
    deep = tiny_config("/x", blocks_per_stage=(9, 9, 9), train_steps=1500, lr_boundaries=(750, 1250))
    assert f"after {recovery.MEASURED_STEPS:,} steps" in recovery.retry_remedy(deep)[1]
