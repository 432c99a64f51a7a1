"""The remedies tables of docs/stability.md, rendered from their one source,
resnet_nobn/training/measured_remedies.json (recovery.MEASURED, which the retry advice reads too);
`--from_runs` reads the runs' results into it.

    # the runs (schedule-shaped, 1,500 steps, batch 128; the paper's rate 0.05 unless a row
    # lowers it), e.g.
    python experiments/stability/stability.py --data_dir=/tmp/fmnist --root=/tmp/exp --long --schedule \
        --blocks=9 --nets=bn,paper_advice,paper_agc --seeds=3,5 --learning_rate=0.05 \
        --steps=1500 --batch_size=128
    python experiments/stability/stability.py --data_dir=/tmp/fmnist --root=/tmp/exp --long --schedule \
        --blocks=9 --nets=paper --seeds=3,5 --learning_rate=0.02 --steps=1500 --batch_size=128
    # their entries, printed; with --write, merged into resnet_nobn/training/measured_remedies.json
    python experiments/stability/remedies.py --from_runs=/tmp/exp --blocks=9 --seeds=3,5 --write
    # the markdown tables of docs/stability.md
    python experiments/stability/remedies.py
"""
import argparse
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resnet_nobn.training import recovery  # noqa: E402
from resnet_nobn.training.recovery import MEASURED, REMEDIES, warmup_rule  # noqa: E402
from resnet_nobn.files import atomic_write_json, read_json  # noqa: E402
from stability import NETS, PAPER, long_dir, outcome  # noqa: E402  (neither imports TensorFlow)

ROWS = ["bn", "paper_advice", *REMEDIES, "paper_head_trained", "fixup"]
LABELS = {"bn": "the BN twin (`--norm=batch --init=he`)",
          "paper_advice": "the paper's recipe; where it diverged, the clip `--clip_norm=1` "
                          "appended",
          "fixup": "Fixup as published (`--init=fixup`: its reference network, zero-initialised "
                   "trained classifier, scalars at lr/10)"}


def run_of(net):
    """(the experiments/stability/stability.py net, the rate) a row's runs were made with: a lower rate is the
    paper's net run at it."""
    rate = REMEDIES.get(net, ({},))[0].get("learning_rate")
    return ("paper", rate) if rate else (net, recovery.MEASURED_RATE)


def label(net):
    """A net's row: its name and flags (the warm-up's steps as in the 1,500-step runs)."""
    warmup = warmup_rule(1500, (750, 1250))
    bench_net, rate = run_of(net)
    flags = [f.format(warmup=warmup) for f in NETS[bench_net] if f not in PAPER] + (
        [f"--learning_rate={rate}"] if bench_net != net else [])
    return LABELS.get(net) or f"{net} (`{' '.join(flags)}`)"


def error(value):
    """The test error in % of a MEASURED value: a number, or the one a followed advice ended at."""
    if isinstance(value, (int, float)):
        return float(value)
    found = re.search(r": ([0-9.]+)%$", value)
    return float(found.group(1)) if found else None


def per_stage(blocks):
    return f"{blocks} block{'' if blocks == 1 else 's'}/stage"


def cell(value):
    return f"{value:.2f}%" if isinstance(value, (int, float)) else value


def mean(seeds):
    """The mean test error over two seeds or more (None if fewer, or one never finished)."""
    errors = [error(v) for v in seeds.values()]
    return statistics.mean(errors) if len(errors) > 1 and None not in errors else None


def schedule_table(blocks):
    """Each net at `blocks` per stage: per seed, the mean, and the gap to the BN twin's mean."""
    seeds = sorted({s for (n, b), v in MEASURED.items() if b == blocks for s in v})
    bn = mean(MEASURED.get(("bn", blocks), {}))
    print(f"| {per_stage(blocks)} | " + " | ".join(f"seed {s}" for s in seeds)
          + " | mean | minus the BN twin's mean | closes the gap |")
    print("|---|" + "---|" * (len(seeds) + 3))
    for net in ROWS:
        runs = MEASURED.get((net, blocks))
        if runs is None:
            continue
        m = mean(runs)
        finite = all(isinstance(v, (int, float)) for v in runs.values())
        gap = f"{m - bn:+.2f}" if m is not None and bn is not None else "—"
        closes = ("—" if net == "bn" or m is None or bn is None else
                  "yes" if finite and len(runs) >= 2 and m - bn <= 1.0 else "no")
        print(f"| {label(net)} | " + " | ".join(cell(runs[s]) if s in runs else "not run"
                                                for s in seeds)
              + f" | {'—' if m is None else f'{m:.2f}%'} | {gap} | {closes} |")


def survival_table():
    """At the paper's rate: for each net and depth, whether each seed's loss stayed finite."""
    depths = sorted({b for _, b in MEASURED})
    print("| net | " + " | ".join(per_stage(b) for b in depths) + " |")
    print("|---|" + "---|" * len(depths))
    for net in ROWS:
        if net == "bn" or not any(n == net for n, _ in MEASURED):
            continue
        cells = []
        for b in depths:
            runs = MEASURED.get((net, b))
            if not runs:
                cells.append("not run")
                continue
            bad = [f"seed {s}: {str(v).split(',')[0]}" for s, v in runs.items()
                   if isinstance(v, str)]
            seeds = f"seed {next(iter(runs))}" if len(runs) == 1 else f"{len(runs)} seeds"
            cells.append("; ".join(bad) or f"no non-finite loss ({seeds})")
        name = "the paper's recipe" if net == "paper_advice" else label(net)
        print(f"| {name} | " + " | ".join(cells) + " |")


def advice_table():
    """What a run of the paper's recipe that diverges at each measured depth is told."""
    from resnet_nobn.config import ModelConfig, TrainConfig
    print("| a diverged run of the paper's recipe at | `retry with:` | what the advice says it "
          "changes and measured |")
    print("|---|---|---|")
    for blocks in sorted({b for _, b in MEASURED}):
        cfg = TrainConfig(model=ModelConfig(blocks_per_stage=(blocks,) * 3))
        flags, clause = recovery.retry_remedy(cfg)
        print(f"| {per_stage(blocks)} | `{flags}` | {clause} |")


def from_runs(root, blocks, seeds, steps):
    """MEASURED's entries {(net, blocks): {seed: value}} for the --long --schedule runs under
    root (only those run)."""
    found = {}
    for b in blocks:
        for net in ROWS:
            runs = {}
            for seed in seeds:
                bench_net, rate = run_of(net)
                model_dir = long_dir(os.path.join(root, "schedule"), bench_net, b, rate, seed)
                result = outcome(model_dir, steps)
                res = read_json(os.path.join(model_dir, "results.json")) or {}
                final = [h["top1_error"] for h in res.get("history", []) if h["step"] == steps]
                if result == "stable" and final:
                    runs[seed] = round(100 * final[0], 2)
                elif result and result.startswith("diverged"):
                    step, then = result.split()[3].rstrip(","), result.partition(", then ")[2]
                    runs[seed] = f"NaN @{step}" + (
                        f", then {then}" + ("" if then.endswith("not finished") else
                                            f": {100 * final[0]:.2f}%") if then else "")
            if runs:
                found[(net, b)] = runs
    return found


def write(found, steps, path=recovery.MEASURED_FILE):
    """Merges `found`, of runs of `steps` steps, into the measured file (an entry replaces the one
    of its net and depth); refuses, in one line, runs of another length than those it holds."""
    with open(path) as f:
        data = json.load(f)
    if data.get("steps", steps) != steps:
        sys.exit(f"error: {path} holds runs of {data['steps']} steps, these ran {steps}; "
                 "write runs of one length into it")
    data["steps"] = steps
    table = {(r["net"], r["blocks"]): r for r in data["runs"]}
    for (net, b), runs in found.items():
        table[(net, b)] = dict(net=net, blocks=b, seeds={str(s): v for s, v in runs.items()})
    data["runs"] = sorted(table.values(), key=lambda r: (r["blocks"], ROWS.index(r["net"])
                                                         if r["net"] in ROWS else len(ROWS)))
    atomic_write_json(path, data)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--from_runs", help="print MEASURED's entries from the runs under this --root")
    p.add_argument("--blocks", default="1,3,9", help="with --from_runs: depths, comma list")
    p.add_argument("--seeds", default="3,5", help="with --from_runs: seeds, comma list")
    p.add_argument("--steps", type=int, default=1500, help="with --from_runs: the runs' steps")
    p.add_argument("--write", action="store_true", help="with --from_runs: merge the entries into "
                   "resnet_nobn/training/measured_remedies.json")
    args = p.parse_args()
    if args.from_runs:
        found = from_runs(args.from_runs, [int(b) for b in args.blocks.split(",")],
                          [int(s) for s in args.seeds.split(",")], args.steps)
        for key, runs in found.items():
            print(f"{key}: {runs}")
        if args.write:
            write(found, args.steps)
        return
    survival_table()
    for blocks in sorted({b for _, b in MEASURED}, reverse=True):
        print()
        schedule_table(blocks)
    print()
    advice_table()


if __name__ == "__main__":
    main()
