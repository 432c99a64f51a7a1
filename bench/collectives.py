"""The collective operations of one compiled training step on 2 replicas: how many times a step
all-reduces the gradient, and, apart, the BN twin's synchronized batch norm's collectives.

    python bench/collectives.py                 # the tiny BN-free net and its BN twin
    python bench/collectives.py --widths=64,128,256 --blocks=9

Each runs in a process of its own on MirroredStrategy over two logical CPU devices (as the tests
do). It traces the training loop of resnet_nobn/training/steps.py for a 2-replica run and counts the
collective ops (CollectiveReduceV2, NcclAllReduce, ...) in its graph, nested functions (the loop's
body) included. MirroredStrategy traces the replica step once per replica in one graph, and packs
a list of tensors into one op per replica, so one all-reduce is `replicas` ops. The synchronized
batch norm's collectives are those of the forward and backward pass alone, traced on their own;
the step's other collectives are its gradient all-reduces. Nothing is trained.
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

COLLECTIVES = ("CollectiveReduce", "CollectiveReduceV2", "CollectiveReduceV3",
               "CollectiveGather", "CollectiveGatherV2", "CollectiveAllToAllV2",
               "CollectiveAllToAllV3", "NcclAllReduce", "NcclReduce")


def collective_ops(concrete):
    """The number of collective ops in a concrete function's graph and every function it holds."""
    graph = concrete.graph.as_graph_def()
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    return sum(n.op in COLLECTIVES for n in nodes)


def count(cfg, strategy):
    """{'gradient': gradient all-reduces per step, 'batch_norm': the synchronized batch norm's
    collectives per step, 'replicas': replicas} of `cfg`'s training loop on `strategy`."""
    import tensorflow as tf
    from resnet_nobn.data import inputs
    from resnet_nobn.training import steps

    model, optimizer = steps.build(cfg, strategy)
    data = inputs.make_input(cfg)
    iterator = iter(strategy.distribute_datasets_from_function(
        lambda ctx: data.train_dataset(ctx, cfg.batch_size, 0)))
    loop = steps.build_train_loop(cfg, strategy, model, optimizer)
    step = collective_ops(loop.get_concrete_function(iterator, tf.constant(1)))

    def forward_backward(images, labels):
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        return tape.gradient(loss, model.trainable_variables)

    passes = tf.function(lambda it: strategy.run(forward_backward, args=next(it)))
    batch_norm = collective_ops(passes.get_concrete_function(iterator))
    replicas = strategy.num_replicas_in_sync
    return {"gradient": (step - batch_norm) / replicas, "batch_norm": batch_norm / replicas,
            "replicas": replicas}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", default="8,16,32", help="channels of each stage")
    parser.add_argument("--blocks", type=int, default=1, help="residual blocks per stage")
    parser.add_argument("--norm", choices=("none", "batch", "both"), default="both",
                        help="the network counted: the BN-free net, its BN twin, or both")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    cpus = tf.config.list_physical_devices("CPU")  # before TensorFlow initialises its devices
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    from resnet_nobn.config import ModelConfig, TrainConfig
    from resnet_nobn.training import cluster

    widths = tuple(int(w) for w in args.widths.split(","))
    for norm in (("none", "batch") if args.norm == "both" else (args.norm,)):
        model = ModelConfig(widths=widths, blocks_per_stage=(args.blocks,) * len(widths),
                            stem_width=min(16, widths[0]), norm=norm,
                            init="he" if norm == "batch" else "identity")
        cfg = TrainConfig(model=model, use_synthetic_data=True, batch_size=8, strategy="mirrored")
        n = count(cfg, cluster.make_strategy("mirrored"))
        print(f"--norm={norm}, {n['replicas']} replicas, widths {args.widths}, "
              f"{args.blocks} block(s) per stage:")
        print(f"  gradient all-reduces per step: {n['gradient']:g}")
        print(f"  synchronized batch norm collectives per step: {n['batch_norm']:g}")


if __name__ == "__main__":
    main()
