"""Multi-worker scaling on loopback: throughput of 1 worker against 2, one after the other.

    python bench/multiworker_bench.py [--steps=30] [--per_worker_batch=32] [--widths=32,64,128,256]

Each worker is a process of run/imagenet_train.py (synthetic 224x224 data, a reduced model) with
its own TF_CONFIG on 127.0.0.1, one CPU thread (TF intra-/inter-op pools of 1) and pinned to its
own core. Weak scaling: the per-worker batch is fixed, so the global batch doubles with 2 workers.
Throughput is the chief's images/s over the last logging window (the first steps, which include
tracing, are excluded). Scaling efficiency = throughput(2) / (2 x throughput(1)).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from resnet_nobn.training import local_cluster  # noqa: E402  (loads no TensorFlow)


def run(num_workers, args, workdir):
    model_dir = os.path.join(workdir, f"w{num_workers}")
    steps, window = args.steps, args.steps // 3
    flags = ["run/imagenet_train.py", "--use_synthetic_data", f"--widths={args.widths}",
             f"--stem_width={args.widths.split(',')[0]}", "--blocks_per_stage=1",
             f"--batch_size={args.per_worker_batch * num_workers}", f"--train_steps={steps}",
             f"--log_every={window}", "--eval_every=1000000", "--checkpoint_every=1000000",
             f"--model_dir={model_dir}", "--learning_rate=0.01"]
    ports = local_cluster.free_ports(num_workers)
    ncpu = os.cpu_count() or 1
    procs = [local_cluster.start_worker(flags, ports, i, threads=1, cpus={i % ncpu}, cwd=ROOT,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for i in range(num_workers)]
    try:
        for p in procs:
            _, err = p.communicate(timeout=args.timeout)
            if p.returncode:
                raise SystemExit(f"worker failed ({p.returncode}):\n{err.decode()[-2000:]}")
    finally:
        local_cluster.stop(procs, grace=2)
    with open(os.path.join(model_dir, "results.json")) as f:
        return json.load(f)["images_per_sec"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30, help="training steps of each run")
    parser.add_argument("--per_worker_batch", type=int, default=32,
                        help="images per worker and step (the global batch grows with workers)")
    parser.add_argument("--widths", default="32,64,128,256", help="channels of each stage")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a run may take")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        one = run(1, args, workdir)
        two = run(2, args, workdir)
    print(f"model widths {args.widths}, 1 block per stage, 224x224 synthetic images, "
          f"{args.per_worker_batch} images per worker per step, 1 CPU thread per worker")
    print(f"{'workers':>8} {'global batch':>13} {'images/s':>10} {'per worker':>11}")
    print(f"{1:>8} {args.per_worker_batch:>13} {one:>10.1f} {one:>11.1f}")
    print(f"{2:>8} {2 * args.per_worker_batch:>13} {two:>10.1f} {two / 2:>11.1f}")
    print(f"speed-up {two / one:.2f}x, scaling efficiency {two / (2 * one):.0%} "
          f"(images/s of 2 workers / (2 x images/s of 1 worker))")


if __name__ == "__main__":
    main()
