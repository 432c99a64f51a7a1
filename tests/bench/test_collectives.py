"""bench/collectives.py: a 2-replica step all-reduces its gradient once (the step's own sum, which
the gradient norm, the clip and AGC read; the optimizer does not all-reduce it again), and the BN
twin's synchronized batch norm's collectives are counted apart. That the sum is the one-device
result: tests/training/test_replicas.py and tests/training/test_multiworker.py."""
import pytest

from bench import collectives
from helpers import tiny_config
from resnet_nobn.training import cluster


@pytest.mark.parametrize("kw", [
    dict(),
    dict(clip_norm=1.0, agc=0.05, mixed_precision="float16"),  # the bounds and the loss scale
    dict(norm="batch", init="he"),
], ids=["paper's net", "clip, AGC, float16", "BN twin"])
def test_two_replicas_all_reduce_the_gradient_once_per_step(tmp_path, kw):
    cfg = tiny_config(tmp_path, strategy="mirrored", **kw)
    n = collectives.count(cfg, cluster.make_strategy("mirrored"))
    assert n["replicas"] == 2
    assert n["gradient"] == 1
    if kw.get("norm") == "batch":
        assert n["batch_norm"] >= 2 * 7  # each of its 7 batch norms, forward and backward
    else:
        assert n["batch_norm"] == 0
