"""The trainer's input on one CPU replica is the dataset's own iterator (no multi-device iterator:
bench/step_overhead.py) and gives the batches the distributed input gives: the same weights."""
import numpy as np
import tensorflow as tf

from tests.helpers import tiny_config, write_cifar10


def test_one_cpu_replica_trains_on_the_batches_of_the_distributed_input(tmp_path):
    from resnet_nobn.training.trainer import Trainer
    rng = np.random.default_rng(0)
    data = {"train": (rng.integers(0, 256, (64, 32, 32, 3), dtype=np.uint8),
                      rng.integers(0, 10, 64)),
            "test": (rng.integers(0, 256, (16, 32, 32, 3), dtype=np.uint8),
                     rng.integers(0, 10, 16))}
    write_cifar10(str(tmp_path / "data"), data)
    cfg = tiny_config(tmp_path / "run", use_synthetic_data=False, dataset="cifar10",
                      data_dir=str(tmp_path / "data"))
    weights = {}
    for distributed in (False, True):
        t = Trainer(cfg)
        if distributed:  # tf.distribute's default: prefetched to the device
            iterator = iter(t.strategy.distribute_datasets_from_function(
                lambda ctx: t.input.train_dataset(ctx, cfg.batch_size, 0)))
        else:
            iterator = t.train_iterator()
            assert not isinstance(iterator, tf.distribute.DistributedIterator)
        t.train_loop(iterator, 3)
        t.train_loop(iterator, 5)  # 64 images: the second loop crosses an epoch
        weights[distributed] = [v.numpy() for v in t.model.weights + t.optimizer.variables]
    assert all(np.array_equal(a, b) for a, b in zip(weights[False], weights[True]))
