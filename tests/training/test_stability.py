"""Training at depth: the fork's crop, gradient clipping over replicas, the
diagnostics summaries, and the choice of the checkpoint a diverged run resumes from."""
import math
import os
import types

import numpy as np
import pytest
import tensorflow as tf

from resnet_nobn.data import cifar
from resnet_nobn import files
from resnet_nobn.training import checkpoints, recovery, rundir
from resnet_nobn.training.steps import bound_gradients, global_gradient
from resnet_nobn.training.trainer import Trainer
from tests.helpers import tiny_config


@pytest.mark.parametrize("padding", [2, 4])
def test_crop_shifts_by_at_most_the_padding(padding):
    """The fork pads 32x32 to 36x36 (2 pixels a side): a crop moves the image by at most 2."""
    image = tf.ones((32, 32, 3), tf.uint8)
    shifts = set()
    for s in range(40):
        out = cifar.augment(image, tf.constant([7, s], tf.int64), padding).numpy()
        assert out.shape == (32, 32, 3)
        rows = np.where(out[:, 16, 0] > 0)[0]
        shifts.add(32 - len(rows))
    assert max(shifts) == padding and min(shifts) == 0


def test_clipping_and_agc_over_two_replicas_bound_the_summed_gradient():
    """Replica r holds (r + 1) times the same gradient, so the sum is 3 times it (a tensor made
    outside `strategy.run` would be taken as mirrored, all-reduced to itself). Reduced on one
    device: eager collectives here would clash with those of the trainers' strategies."""
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"],
                                              cross_device_ops=tf.distribute.ReductionToOneDevice())
    with strategy.scope():
        kernel, other = tf.Variable(tf.ones([1, 1, 2, 2])), tf.Variable(tf.ones([2]))
    grads = [tf.constant([[[[3.0, 0.0], [4.0, 0.1]]]]), tf.constant([5.0, 5.0])]

    def bounded(clip_norm, agc):
        cfg = types.SimpleNamespace(clip_norm=clip_norm, agc=agc)

        def replica_step():
            r = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32)
            total, replicas = global_gradient([g * (r + 1) for g in grads])
            total, _ = bound_gradients(total, [kernel, other], [kernel], cfg,
                                       tf.linalg.global_norm(total))
            return [g / replicas for g in total]  # Keras sums the replicas' shares
        return [strategy.reduce("SUM", g, axis=None).numpy() for g in strategy.run(replica_step)]

    clipped, expected = bounded(1.0, 0.0), tf.clip_by_global_norm([3 * g for g in grads], 1.0)[0]
    for a, b in zip(clipped, expected):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-6)
    # AGC 0.5: unit 0 of the kernel (sum norm 15) is cut to 0.5 * its weight norm sqrt(2), unit
    # 1 (sum norm 0.3) is not; the other variable is not a conv kernel
    kernel_grad, other_grad = bounded(0.0, 0.5)
    np.testing.assert_allclose(kernel_grad[..., 0].ravel(), np.array([3.0, 4.0]) / 5 * 0.5 * 2 ** 0.5,
                               rtol=1e-5)
    np.testing.assert_allclose(kernel_grad[..., 1].ravel(), [0.0, 0.3], rtol=1e-5)
    np.testing.assert_allclose(other_grad, [15.0, 15.0])


def test_training_writes_branch_norm_and_update_ratio_summaries(tmp_path):
    cfg = tiny_config(tmp_path, train_steps=4, log_every=2, learning_rate=0.05, clip_norm=1.0)
    trainer = Trainer(cfg)
    norms = trainer.monitor.branch_norms()
    # at init the paper's branches are tiny next to the identity (sigma = 1/(k^2 c))
    assert set(norms) == {"stage1_block1", "stage2_block1", "stage3_block1"}
    assert all(0 < r < 0.05 for r in norms.values()), norms
    trainer.run()
    ratios = trainer.monitor.update_ratios()
    assert set(ratios) == {"stem", "stage1", "stage2", "stage3"} and all(r > 0 for r in ratios.values())
    tags = set()
    for path in (tmp_path / "train").iterdir():
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            tags.update(v.tag for v in event.summary.value)
    assert {"branch_norm/stage1_block1", "branch_norm/stage3_block1", "update_ratio/stage2"} <= tags


def test_a_checkpoint_on_the_way_to_a_blow_up_is_not_resumed_from(tmp_path):
    model_dir = str(tmp_path / "run")
    ckpt = os.path.join(model_dir, rundir.CKPT)
    os.makedirs(ckpt)
    losses = {}
    for step, loss in ((0, 2.3), (100, 1.2), (200, 0.9), (300, 4.5), (400, float("nan"))):
        losses = checkpoints.record_loss(ckpt, losses, step, loss)
    assert rundir.read(model_dir).losses.keys() == losses.keys()
    assert recovery.on_the_way_up(200, losses, 10) is None
    assert "above the lowest" in recovery.on_the_way_up(300, losses, 10)  # 4.5 > 0.9 + ln 10
    assert "nan" in recovery.on_the_way_up(400, losses, 10)
    assert recovery.on_the_way_up(0, {}, 10) is None and recovery.on_the_way_up(100, {}, 10)
    for step in (0, 200, 300):
        for suffix in ("index", "data-00000-of-00001"):
            open(os.path.join(ckpt, f"ckpt-{step}.{suffix}"), "w").close()
    os.remove(os.path.join(ckpt, "ckpt-0.index"))
    assert rundir.steps_on_disk(ckpt) == [300, 200, 0]
    order, diverged = recovery.resume_order(rundir.read(model_dir), 10)
    assert diverged is None and order == [(300, None), (200, None), (0, "its .index file is missing")]
    files.atomic_write_json(os.path.join(model_dir, rundir.DIVERGED), {"step": 412})
    order, diverged = recovery.resume_order(rundir.read(model_dir), 10)
    assert diverged["step"] == 412 and order[0][1] is not None and order[1] == (200, None)
    gone, kept = checkpoints.delete_after(ckpt, 200, rundir.steps_on_disk(ckpt), losses)
    assert gone == [300] and rundir.steps_on_disk(ckpt) == [200, 0]
    assert rundir.read(model_dir).losses == kept and sorted(kept) == [0, 100, 200]


def test_retry_advice_takes_the_least_invasive_remedy_that_survived_in_the_measured_table(
        monkeypatch):
    """The order is REMEDIES' (the start or each unit's step, then the whole gradient), read
    through MEASURED: a remedy counts only with two seeds or more and none diverged."""

    def advice(**kw):
        tokens = recovery.retry_advice(tiny_config("/x", **kw)).split()
        return dict(t[2:].split("=") for t in tokens)

    def flags(name, warmup):
        return {k: str(warmup if v == recovery.WARMUP else v)
                for k, v in recovery.REMEDIES[name][0].items()}

    deep = dict(blocks_per_stage=(9, 9, 9), learning_rate=0.05, train_steps=1500,
                lr_boundaries=(750, 1250))
    order = list(recovery.REMEDIES)
    for i, name in enumerate(order):  # every remedy before `name` failed in its own way
        failed = [{3: 10.0, 5: "NaN @200"}, {3: 10.0}, {}]  # a seed diverged; one seed; none
        table = {(n, 9): failed[j % 3] for j, n in enumerate(order[:i])}
        table.update({(n, 9): {3: 10.0, 5: 11.0} for n in order[i:]})
        monkeypatch.setattr(recovery, "MEASURED", table)
        assert advice(**deep) == flags(name, warmup=375), name
        if name == "paper_agc":  # the run already had it: the next one; too fast: the rate too
            assert advice(agc=recovery.AGC, **deep) == flags(order[i + 1], warmup=375)
            assert advice(**{**deep, "learning_rate": 0.2}) == {**flags(name, 0),
                                                                 "learning_rate": "0.05"}
    monkeypatch.setattr(recovery, "MEASURED", {(n, 9): {3: 10.0, 5: "NaN @90"} for n in order})
    assert advice(**deep) == {"learning_rate": "0.02"}  # none survived: a lower rate
    tried = advice(clip_norm=1.0, **deep)
    assert float(tried["learning_rate"]) <= 0.02 and float(tried["clip_norm"]) == 0.5
    assert advice(**{**deep, "blocks_per_stage": (1, 1, 1)}) == {"learning_rate": "0.02"}


def test_retry_advice_is_the_best_measured_survivor_or_a_less_invasive_one_close_to_it(
        monkeypatch):
    """Among the remedies that survived, the lowest mean test error wins; a less invasive one
    (earlier in REMEDIES) is taken instead only within CLOSE points of it; the line says what the
    remedy ended at and the BN twin's mean."""
    deep = tiny_config("/x", blocks_per_stage=(9,) * 3, learning_rate=0.05)
    table = {("bn", 9): {3: 9.0, 5: 9.4}, ("paper_agc", 9): {3: 17.0, 5: 17.0},
             ("paper_lr0.02", 9): {3: 15.6, 5: 15.6}, ("paper_clip1", 9): {3: 14.5, 5: 14.7},
             ("paper_warmup", 9): {3: 12.0, 5: "NaN @300"}}
    monkeypatch.setattr(recovery, "MEASURED", table)
    flags, change = recovery.retry_remedy(deep)
    assert flags == "--clip_norm=1.0"  # 14.6 beats 15.6 and 17.0; the warm-up diverged
    assert change.endswith("14.6% at 9 blocks per stage, BN twin 9.2%)"), change
    table[("paper_lr0.02", 9)] = {3: 15.0, 5: 15.1}  # within 0.5 of the clip: less invasive
    assert recovery.retry_remedy(deep)[0] == "--learning_rate=0.02"
    already = tiny_config("/x", blocks_per_stage=(9,) * 3, learning_rate=0.02)
    assert recovery.retry_remedy(already)[0] == "--clip_norm=1.0"  # it has that rate already
    slow = tiny_config("/x", blocks_per_stage=(9,) * 3, learning_rate=0.01)
    assert recovery.retry_remedy(slow)[0] == "--clip_norm=1.0"  # a remedy never raises the rate


def test_retry_advice_on_the_measured_table_is_its_best_survivor():
    for blocks in (1, 3, 9):
        cfg = tiny_config("/x", blocks_per_stage=(blocks,) * 3, learning_rate=0.05)
        survivors = {n: recovery.mean_error(n, blocks) for n in recovery.REMEDIES
                     if recovery.survived(n, blocks)}
        flags, change = recovery.retry_remedy(cfg)
        if not survivors:
            assert flags.startswith("--learning_rate=") and change.startswith("lowers the rate")
            continue
        name = next(n for n in recovery.REMEDIES if n in survivors and
                    survivors[n] <= min(survivors.values()) + recovery.CLOSE)
        assert change.startswith(recovery.REMEDIES[name][1])
        assert {t.split("=")[0][2:] for t in flags.split()} == set(recovery.REMEDIES[name][0])


def test_retry_advice_for_the_other_nets_lowers_the_rate_never_raising_it():
    from resnet_nobn.training.recovery import retry_advice

    def advice(**kw):
        return dict(t[2:].split("=") for t in retry_advice(tiny_config("/x", **kw)).split())

    deep = dict(blocks_per_stage=(9, 9, 9))
    bn = advice(learning_rate=0.3, norm="batch", init="he", **deep)
    assert bn == {"learning_rate": "0.1"}
    # SkipInit: 0.05 trained at 1 block per stage and diverged at 9 (docs/stability.md)
    assert advice(learning_rate=0.1, init="skipinit") == {"learning_rate": "0.05"}
    assert advice(learning_rate=0.05, init="skipinit", **deep) == {"learning_rate": "0.02"}
    for kw in (dict(learning_rate=1e9), dict(learning_rate=0.01, clip_norm=3.0),
               dict(learning_rate=0.004, init="fixup", scalar_lr_factor=0.1)):
        assert all(math.isfinite(float(v)) for v in advice(**kw).values())
