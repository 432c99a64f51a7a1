"""Which learning rate trains without blowing up, at which depth: the paper's net against its BN
twin, Fixup and SkipInit, on real images (docs/stability.md).

For each network and depth, the learning rates 0.1, 0.05, 0.02, 0.01, 0.005 are tried from the
largest down, each for `--steps` steps through the users' own command (run/cifar_train.py); the
first that ends without a non-finite loss is the largest stable rate, and the smaller ones are not
run. Every run has its own model_dir under --root, so an interrupted sweep resumes where it
stopped (a finished or diverged run is not run again). `--report` prints the table and draws the
figure from what is under --root.

    python bench/fashion_mnist_as_cifar10.py --out=/tmp/fmnist
    python bench/stability.py --data_dir=/tmp/fmnist --root=/tmp/stability --blocks=1,9
    python bench/stability.py --root=/tmp/stability --report --figure=docs/stability.png
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATES = (0.1, 0.05, 0.02, 0.01, 0.005)
NETS = {  # name -> flags; every activation a leaky ReLU of slope 0.1 (the fork's) unless said
    "paper": ["--norm=none", "--init=identity"],
    "paper_relu": ["--norm=none", "--init=identity", "--relu_leakiness=0"],
    "bn": ["--norm=batch", "--init=he"],
    "fixup": ["--norm=none", "--init=fixup"],
    "skipinit": ["--norm=none", "--init=skipinit"],
}


def run_dir(root, net, blocks, lr, extra=""):
    return os.path.join(root, f"{net}_b{blocks}{extra}", f"lr{lr}")


def outcome(model_dir, steps):
    """'stable', 'diverged at step N', or None (not run / unfinished)."""
    diverged = _read(os.path.join(model_dir, "diverged.json"))
    if diverged:
        return f"diverged at step {diverged['step']}"
    results = _read(os.path.join(model_dir, "results.json"))
    if results and results.get("global_step", 0) >= steps:
        return "stable"
    return None


def _read(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def sweep(args, net, blocks):
    for lr in RATES:
        model_dir = run_dir(args.root, net, blocks, lr)
        result = outcome(model_dir, args.steps)
        if result is None:
            cmd = [sys.executable, os.path.join(ROOT, "run", "cifar_train.py"),
                   f"--data_dir={args.data_dir}", f"--model_dir={model_dir}",
                   f"--widths={args.widths}", f"--stem_width={args.widths.split(',')[0]}",
                   f"--blocks_per_stage={blocks}", f"--batch_size={args.batch_size}",
                   f"--learning_rate={lr}", f"--train_steps={args.steps}", "--lr_boundaries=",
                   f"--eval_every={args.steps}", "--eval_steps=20", "--checkpoint_every=100",
                   "--log_every=10", f"--seed={args.seed}"] + NETS[net]
            os.makedirs(model_dir, exist_ok=True)
            with open(os.path.join(model_dir, "train.log"), "w") as log:
                subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                               env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
            result = outcome(model_dir, args.steps) or "failed (see train.log)"
        print(f"{net:<10} blocks {blocks}  lr {lr:<6} {result}", flush=True)
        if result == "stable":
            return lr
    return None


def report(args):
    """The table: for each net and depth, each rate's outcome and the largest stable rate."""
    rows = []
    for blocks in args.blocks.split(","):
        for net in NETS:
            cells, best = [], None
            for lr in RATES:
                model_dir = run_dir(args.root, net, blocks, lr)
                result = outcome(model_dir, args.steps)
                if result == "stable":
                    res = _read(os.path.join(model_dir, "results.json"))
                    top1 = res["history"][-1]["top1_error"]
                    cells.append(f"ok ({100 * top1:.1f}%)")
                    best = best or lr
                else:
                    cells.append("NaN @" + result.split()[-1] if result else "·")
            rows.append((net, blocks, cells, best))
    print("| net | blocks/stage | " + " | ".join(f"lr {r}" for r in RATES) + " | largest stable |")
    print("|---|---|" + "---|" * (len(RATES) + 1))
    for net, blocks, cells, best in rows:
        print(f"| {net} | {blocks} | " + " | ".join(cells) + f" | {best or 'none'} |")
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True, help="directory of the runs (one model_dir each)")
    p.add_argument("--data_dir", help="tfds data_dir holding cifar10 (Fashion-MNIST's, see above)")
    p.add_argument("--blocks", default="1,9", help="blocks per stage to sweep, comma list")
    p.add_argument("--nets", default=",".join(NETS), help="networks to sweep, comma list")
    p.add_argument("--widths", default="16,32,64", help="stage widths (the stem has the first)")
    p.add_argument("--batch_size", type=int, default=128)
    p.add_argument("--steps", type=int, default=500, help="steps a stable run must survive")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", action="store_true", help="print the table of what is under --root")
    args = p.parse_args()
    if args.report:
        report(args)
        return
    if not args.data_dir:
        sys.exit("error: --data_dir is needed to run the sweep (see the module docstring)")
    for blocks in args.blocks.split(","):
        for net in args.nets.split(","):
            best = sweep(args, net, int(blocks))
            print(f"== {net} blocks {blocks}: largest stable rate {best}", flush=True)


if __name__ == "__main__":
    main()
