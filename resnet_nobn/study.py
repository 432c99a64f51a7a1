"""Ablation studies: a grid of configurations, one run directory each, and the table of results.

A study varies the factors the paper makes claims about (Section 4): `norm` (none = the paper's
BN-free net, batch = its BN twin), `init` (identity = the paper's N(0, 1/(k^2 c)^2), standard, he),
`head` (random = the frozen random projection, trained), `blocks_per_stage` (depth) and the seed.
Every other hyperparameter comes from the base flags and is the same for every run.

Layout under one root (`tensorboard --logdir ROOT` compares the runs in its HParams dashboard):

    ROOT/events.out.tfevents.*                      hp.hparams_config: the study's hparams/metrics
    ROOT/<dataset>/norm-none_init-identity_head-random_blocks-1/seed-0/
        events.out.tfevents.*                       hp.hparams: this run's hyperparameters
        config.json ckpt/ train/ eval/ results.json written by the trainer (resnet_nobn/train.py)
        train.log                                   the trainer's output
        study_status.json                           running | finished | failed | timeout

A run is finished when its results.json has `global_step >= train_steps`; a finished run is
skipped, an unfinished one is re-launched and the trainer resumes from its latest checkpoint. Each
run is a subprocess of the training entry point (run/cifar_train.py or run/imagenet_train.py), so
a crash or a global Keras setting of one run cannot affect the next.

The report side (`load_runs`, `summarize`, `markdown_table`, `plot_curves`) reads only JSON and
needs neither TensorFlow nor the flags.
"""
import dataclasses
import itertools
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

from resnet_nobn.rundir import atomic_write_json, read_json

FACTORS = ("norm", "init", "head", "blocks_per_stage", "relu_leakiness", "learning_rate", "seed")

# Hyperparameters that define what a run computes; a finished run is reused only if they match.
# (Bookkeeping such as eval_every, strategy or --xla may change between a run and its resumption.)
SCIENTIFIC_FIELDS = ("dataset", "use_synthetic_data", "crop_padding", "batch_size",
                     "learning_rate", "lr_boundaries", "lr_decay_factor", "lr_decay_every",
                     "warmup_steps", "momentum", "weight_decay", "clip_norm", "seed")

# Config fields that do not distinguish one configuration from another in the report.
_NOT_A_FACTOR = ("seed", "model_dir", "data_dir", "eval_only", "eval_every", "eval_steps",
                 "checkpoint_every", "log_every", "strategy", "train_steps")

# Table 2 of the paper (top-1 error, %): the "Ours" and "ResNet" rows.
PAPER_TABLE2 = {
    "cifar10": {"ours": 6.38, "resnet": 6.43},
    "cifar100": {"ours": 24.64, "resnet": 25.16},
    "imagenet2012": {"ours": 35.29, "ours_top5": 14.17, "resnet": 19.38},
}

ENTRY_POINTS = {"cifar10": "run/cifar_train.py", "cifar100": "run/cifar_train.py",
                "imagenet2012": "run/imagenet_train.py"}


# --------------------------------------------------------------------------------------------
# The grid


def blocks_text(blocks):
    """(1, 1, 1) -> '1'; (3, 4, 6, 3) -> '3-4-6-3'."""
    blocks = tuple(blocks)
    return str(blocks[0]) if len(set(blocks)) == 1 else "-".join(str(b) for b in blocks)


def parse_blocks(text, num_stages):
    """'3' -> (3,)*num_stages; '3:4:6:3' or '3-4-6-3' -> (3, 4, 6, 3)."""
    parts = [int(p) for p in text.replace(":", "-").split("-") if p.strip()]
    if len(parts) == 1:
        parts = parts * num_stages
    if len(parts) != num_stages or min(parts) < 1:
        raise ValueError(f"blocks_per_stage value {text!r} needs 1 or {num_stages} positive entries")
    return tuple(parts)


def run_name(cfg, named=()):
    """ROOT-relative directory of a run: <dataset>/<configuration>/seed-<k>; `named` lists the
    optional factors ('relu_leakiness', 'learning_rate') the study varies, named in it too."""
    m = cfg.model
    extra = "".join(f"_{tag}-{value}" for tag, key, value in (
        ("leak", "relu_leakiness", m.relu_leakiness), ("lr", "learning_rate", cfg.learning_rate))
        if key in named)
    return os.path.join(cfg.dataset, f"norm-{m.norm}_init-{m.init}_head-{m.head}_"
                        f"blocks-{blocks_text(m.blocks_per_stage)}{extra}", f"seed-{cfg.seed}")


def make_grid(base, root, norms, inits, heads, blocks, seeds, leakiness=None, learning_rates=None):
    """The study's TrainConfigs, one per point of the product of the factor values.

    `base` is the TrainConfig of the base flags; `inits` may hold 'auto'; `blocks` holds tuples;
    `leakiness` and `learning_rates` (None: the base's) are varied only when given. Points that
    resolve to the same configuration (e.g. init auto and identity) or cannot exist (Fixup or
    SkipInit with BN) appear once or not at all. Runs are ordered seed by seed, so the first seed
    of every configuration comes first.
    """
    from resnet_nobn.config import resolve_init
    named = [k for k, v in (("relu_leakiness", leakiness), ("learning_rate", learning_rates)) if v]
    leakiness = leakiness or [base.model.relu_leakiness]
    learning_rates = learning_rates or [base.learning_rate]
    configs, seen = [], set()
    # seed-major: a study stopped half-way has every configuration with its first seeds
    for seed, norm, init, head, bps, leak, lr in itertools.product(
            seeds, norms, inits, heads, blocks, leakiness, learning_rates):
        if norm == "batch" and init in ("fixup", "skipinit"):
            continue
        model = dataclasses.replace(base.model, norm=norm, init=resolve_init(init, norm),
                                    head=head, blocks_per_stage=tuple(bps),
                                    relu_leakiness=float(leak))
        cfg = dataclasses.replace(base, model=model, seed=int(seed), model_dir="",
                                  learning_rate=float(lr))
        cfg = dataclasses.replace(cfg, model_dir=os.path.join(root, run_name(cfg, named)))
        if cfg.model_dir not in seen:
            seen.add(cfg.model_dir)
            configs.append(cfg)
    return configs


def factor_args(cfg):
    """The command-line flags that set a run's factors and directory."""
    m = cfg.model
    return [f"--norm={m.norm}", f"--init={m.init}", f"--head={m.head}",
            f"--blocks_per_stage={','.join(str(b) for b in m.blocks_per_stage)}",
            f"--relu_leakiness={m.relu_leakiness}", f"--learning_rate={cfg.learning_rate}",
            f"--seed={cfg.seed}", f"--model_dir={cfg.model_dir}"]


def command(cfg, entry, base_args, python=None):
    """The subprocess command of one run: the entry point, the base flags, then the factors."""
    return [python or sys.executable, entry] + list(base_args) + factor_args(cfg)


# --------------------------------------------------------------------------------------------
# Run state


def check_compatible(cfg):
    """Raises ValueError if cfg.model_dir holds a run with other hyperparameters than `cfg`."""
    old = read_json(os.path.join(cfg.model_dir, "config.json"))
    if old is None:
        return
    from resnet_nobn.config import config_diffs  # here: the report must not import TensorFlow
    diffs = config_diffs(old, cfg.to_json(), fields=SCIENTIFIC_FIELDS)
    if diffs:
        raise ValueError(f"{cfg.model_dir} holds a run with other settings ({'; '.join(diffs)}); "
                         "use another --root for a study with other base flags")


def _norm_json(v):
    return json.loads(json.dumps(v))


def run_state(cfg):
    """'finished', 'failed' (the last attempt exited with an error), 'partial' or 'new'."""
    results = read_json(os.path.join(cfg.model_dir, "results.json"))
    if results and (results.get("global_step") or 0) >= cfg.train_steps:
        return "finished"
    status = read_json(os.path.join(cfg.model_dir, "study_status.json")) or {}
    if status.get("status") in ("failed", "timeout"):
        return "failed"
    return "partial" if os.path.exists(os.path.join(cfg.model_dir, "config.json")) else "new"


def _write_status(cfg, **status):
    os.makedirs(cfg.model_dir, exist_ok=True)
    atomic_write_json(os.path.join(cfg.model_dir, "study_status.json"), status)


def _tail(path, n=3):
    try:
        with open(path, errors="replace") as f:
            lines = [l.rstrip() for l in f if l.strip() and not l.startswith(("I0000", "W0000",
                                                                              "E0000", "WARNING: All"))]
        return lines[-n:]
    except OSError:
        return []


# --------------------------------------------------------------------------------------------
# HParams (TensorBoard's HParams dashboard)


def hparams_of(cfg):
    """The hyperparameters shown in TensorBoard for one run (scalars only)."""
    m = cfg.model
    return {"dataset": cfg.dataset, "norm": m.norm, "init": m.init, "head": m.head,
            "blocks_per_stage": blocks_text(m.blocks_per_stage),
            "relu_leakiness": float(m.relu_leakiness), "clip_norm": float(cfg.clip_norm),
            "residual_blocks": int(sum(m.blocks_per_stage)),
            "widths": ",".join(str(w) for w in m.widths), "seed": int(cfg.seed),
            "learning_rate": float(cfg.learning_rate), "warmup_steps": int(cfg.warmup_steps),
            "batch_size": int(cfg.batch_size), "train_steps": int(cfg.train_steps),
            "weight_decay": float(cfg.weight_decay), "synthetic_data": bool(cfg.use_synthetic_data),
            "mixed_precision": cfg.mixed_precision, "xla": bool(cfg.xla)}


METRICS = (("eval", "top1_error", "test top-1 error"), ("eval", "top5_error", "test top-5 error"),
           ("eval", "eval_loss", "test loss"), ("train", "loss", "training loss"))


def write_hparams_config(root, configs):
    """The experiment summary at ROOT: every hparam with its values in this study and in the runs
    already under ROOT (several studies may share a root), and the metrics."""
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hp
    os.makedirs(root, exist_ok=True)
    for name in os.listdir(root):  # one experiment config at the root: replace the previous one
        if name.startswith("events.out.tfevents."):
            os.remove(os.path.join(root, name))
    from resnet_nobn.config import TrainConfig
    configs = list(configs)
    for dirpath, dirnames, filenames in os.walk(root):  # and the runs of earlier studies here
        dirnames[:] = [d for d in dirnames if d not in ("ckpt", "train", "eval")]
        old = read_json(os.path.join(dirpath, "config.json")) if "config.json" in filenames else None
        if old:
            try:
                configs.append(TrainConfig.from_json(old))
            except (TypeError, ValueError):
                pass  # a config.json of another version: its values are simply not in the domain
    values = {}
    for cfg in configs:
        for k, v in hparams_of(cfg).items():
            values.setdefault(k, set()).add(v)
    hparams = [hp.HParam(k, hp.Discrete(sorted(v))) for k, v in values.items()]
    metrics = [hp.Metric(tag, group=group, display_name=label) for group, tag, label in METRICS]
    writer = tf.summary.create_file_writer(root)
    with writer.as_default():
        hp.hparams_config(hparams=hparams, metrics=metrics)
    writer.close()
    return hparams


def write_run_hparams(cfg):
    """hp.hparams in the run's directory (once), so TensorBoard pairs it with train/ and eval/."""
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hp
    os.makedirs(cfg.model_dir, exist_ok=True)
    if any(n.startswith("events.out.tfevents.") for n in os.listdir(cfg.model_dir)):
        return False
    writer = tf.summary.create_file_writer(cfg.model_dir)
    with writer.as_default():
        hp.hparams(hparams_of(cfg), trial_id=run_name(cfg))
    writer.close()
    return True


# --------------------------------------------------------------------------------------------
# Running


def run_study(configs, entry, base_args, timeout=None, retry_failed=False, log=print, python=None):
    """Runs every unfinished configuration, one subprocess at a time; returns {model_dir: state}.

    A finished run is skipped; a partial one resumes from its checkpoint; a failed one (diverged,
    bad flags, timeout) is skipped unless `retry_failed`. `timeout` (seconds) bounds each run.
    The caller checks `check_compatible` for every configuration first, before writing anything.
    """
    states = {}
    for i, cfg in enumerate(configs):
        tag = f"[{i + 1}/{len(configs)}] {cfg.model_dir}"
        state = run_state(cfg)
        if state == "finished" or (state == "failed" and not retry_failed):
            log(f"{tag}: {state}, skipped" + ("" if state == "finished" else
                                              " (--retry_failed re-runs it)"))
            states[cfg.model_dir] = state
            continue
        write_run_hparams(cfg)
        cmd = command(cfg, entry, base_args, python)
        log_path = os.path.join(cfg.model_dir, "train.log")
        log(f"{tag}: {'resuming' if state == 'partial' else 'starting'} (log: {log_path})")
        t0 = time.time()
        _write_status(cfg, status="running", command=cmd, started=t0)
        with open(log_path, "a") as out:
            out.write(f"\n$ {' '.join(cmd)}\n")
            out.flush()
            try:
                rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    timeout=timeout).returncode
            except subprocess.TimeoutExpired:
                rc = None
        if rc == 0 and run_state(cfg) == "finished":
            state = "finished"
        elif rc == 130:
            _write_status(cfg, status="interrupted", command=cmd, started=t0, ended=time.time())
            raise KeyboardInterrupt
        else:
            state = "timeout" if rc is None else "failed"
        _write_status(cfg, status=state, returncode=rc, command=cmd, started=t0, ended=time.time(),
                      last_lines=_tail(log_path))
        results = read_json(os.path.join(cfg.model_dir, "results.json")) or {}
        if state == "finished":
            log(f"{tag}: finished in {time.time() - t0:.0f} s, step {results.get('global_step')}, "
                f"top-1 error {_pct(results.get('top1_error'))}")
        else:
            diverged = read_json(os.path.join(cfg.model_dir, "diverged.json"))
            why = (f"diverged at step {diverged.get('step')}; retry with: {diverged.get('retry_with')}"
                   if diverged else " | ".join(_tail(log_path, 1)))
            log(f"{tag}: {state} (exit {rc}): {why}")
        states[cfg.model_dir] = "failed" if state == "timeout" else state
    return states


def _pct(x):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f}%"


# --------------------------------------------------------------------------------------------
# The report


def load_runs(root):
    """Every run under root: its results.json (if any) with 'run_dir' and 'status' added."""
    runs = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("ckpt", "train", "eval"))
        if "results.json" not in filenames and "study_status.json" not in filenames:
            continue
        results = _checked_results(read_json(os.path.join(dirpath, "results.json")))
        status = read_json(os.path.join(dirpath, "study_status.json")) or {}
        config = (results or {}).get("config") or read_json(os.path.join(dirpath, "config.json"))
        if config is None:
            continue
        run = dict(results or {"history": [], "global_step": 0})
        run.update(run_dir=dirpath, config=config)
        train_steps = config.get("train_steps") or 0
        if (run.get("global_step") or 0) >= train_steps and results:
            run["status"] = "finished"
        else:
            run["status"] = status.get("status") or "partial"
            if run["status"] in ("finished", "running"):  # stale status file
                run["status"] = "partial"
        run["last_lines"] = status.get("last_lines", [])
        run["diverged"] = read_json(os.path.join(dirpath, "diverged.json"))
        if results is None and os.path.exists(os.path.join(dirpath, "results.json")):
            run["status"] = "unreadable results.json"
        runs.append(run)
    return runs


def _checked_results(results):
    """`results` if its history is a list of rows that each have a step, else None (unreadable)."""
    history = (results or {}).get("history", [])
    if results is None or not isinstance(history, list) or not all(
            isinstance(h, dict) and isinstance(h.get("step"), int) for h in history):
        return None
    return results


def config_key(config):
    """A run's configuration without its seed and bookkeeping: runs differing only in seed group."""
    c = {k: v for k, v in config.items() if k not in _NOT_A_FACTOR}
    return json.dumps(c, sort_keys=True)


def paper_row(config):
    """('Ours', top-1 %) or ('ResNet', top-1 %) of Table 2 if `config` is the paper's setup, else None.

    'Ours' needs the paper's network (norm none, identity init, random head, Table 1 / the ImageNet
    variant) on the real dataset; a BN twin of that shape gets the paper's ResNet row as a
    reference (a published ResNet, not this exact network).
    """
    ds = config.get("dataset")
    if ds not in PAPER_TABLE2 or config.get("use_synthetic_data"):
        return None
    m = config.get("model", {})
    from resnet_nobn.config import IMAGENET_MODEL, ModelConfig
    table1 = dataclasses.asdict(ModelConfig())
    shape = _norm_json(IMAGENET_MODEL if ds == "imagenet2012" else
                       {k: table1[k] for k in IMAGENET_MODEL})
    if any(_norm_json(m.get(k)) != v for k, v in shape.items()):
        return None
    if m.get("norm") == "none" and m.get("init") == "identity" and m.get("head") == "random":
        return "Ours", PAPER_TABLE2[ds]["ours"]
    if m.get("norm") == "batch":
        return "ResNet†", PAPER_TABLE2[ds]["resnet"]
    return None


def summarize(runs):
    """One row per configuration (runs grouped over seeds), sorted; each a dict."""
    groups = {}
    for run in runs:
        groups.setdefault(config_key(run["config"]), []).append(run)
    # configuration fields that differ between groups of one dataset go into the label
    flat = {k: _flatten(json.loads(k)) for k in groups}
    shown = ("model.norm", "model.init", "model.head", "model.blocks_per_stage")
    rows = []
    for key, members in groups.items():
        members.sort(key=lambda r: r["config"].get("seed", 0))
        c = members[0]["config"]
        m = c["model"]
        same_ds = [f for k, f in flat.items() if f.get("dataset") == c["dataset"]]
        varying = sorted(f for f in flat[key] if f not in shown and f != "dataset"
                         and any(o.get(f) != flat[key][f] for o in same_ds))
        extra = ", ".join(f"{f.split('.')[-1]}={_short(flat[key][f])}" for f in varying)
        label = (f"{m['norm']} / {m['init']} / {m['head']} / {blocks_text(m['blocks_per_stage'])}"
                 + (f" ({extra})" if extra else ""))
        done = [r for r in members if r.get("top1_error") is not None]
        top1 = [100 * r["top1_error"] for r in done]
        top5 = [100 * r["top5_error"] for r in done if r.get("top5_error") is not None]
        loss = [r["history"][-1]["eval_loss"] for r in done
                if r.get("history") and r["history"][-1].get("eval_loss") is not None]
        steps = [r.get("global_step") or 0 for r in members]
        rows.append(dict(
            dataset=c["dataset"], synthetic=bool(c.get("use_synthetic_data")), label=label,
            sort=(c["dataset"], m["norm"] != "none", m["init"] != "identity", m["head"] != "random",
                  sum(m["blocks_per_stage"]), extra),
            seeds=[r["config"].get("seed") for r in done],
            all_seeds=[r["config"].get("seed") for r in members], steps=steps,
            train_steps=c.get("train_steps"), top1=top1, top5=top5, loss=loss,
            wall=[r.get("wall_time_s") or 0.0 for r in members],
            statuses=[r["status"] for r in members], paper=paper_row(c),
            diverged=[(r["config"].get("seed"), r["diverged"]) for r in members if r.get("diverged")],
            curves=[[(h["step"], 100 * h["top1_error"]) for h in r.get("history", [])
                     if h.get("top1_error") is not None] for r in members]))
    rows.sort(key=lambda r: r["sort"])
    return rows


def _flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = json.dumps(v) if isinstance(v, list) else v
    return out


def _short(v):
    if isinstance(v, str) and v.startswith("["):
        return v.strip("[]").replace(", ", ",")
    return v


def mean_std(values, digits=2):
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{np.mean(values):.{digits}f} ± {np.std(values, ddof=1):.{digits}f}"


def _hms(seconds):
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def markdown_table(rows):
    """The report: one Markdown table row per configuration, the paper's Table 2 value beside it."""
    lines = ["| dataset | configuration (norm / init / head / blocks per stage) | seeds | steps | "
             "top-1 error (%) | top-5 error (%) | test loss | train time (mean h:mm:ss) | "
             "paper Table 2 top-1 (%) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    notes = set()
    for r in rows:
        ds = r["dataset"] + (" (synthetic)" if r["synthetic"] else "")
        lo, hi = min(r["steps"]), max(r["steps"])
        steps = f"{lo}" if lo == hi else f"{lo}–{hi}"
        bad = [s for s in r["statuses"] if s != "finished"]
        if bad:
            steps += f" of {r['train_steps']} ({', '.join(sorted(set(bad)))}: {len(bad)} of {len(r['statuses'])})"
            notes.add("unfinished")
        seeds = ",".join(str(s) for s in r["seeds"]) or "none"
        if len(r["seeds"]) < len(r["all_seeds"]):
            seeds += f" (of {','.join(str(s) for s in r['all_seeds'])})"
            notes.add("seeds")
        paper = f"{r['paper'][1]:.2f} ({r['paper'][0]})" if r["paper"] else ""
        if r["paper"] and r["paper"][0].endswith("†"):
            notes.add("resnet")
        lines.append(f"| {ds} | {r['label']} | {seeds} | {steps} | {mean_std(r['top1'])} | "
                     f"{mean_std(r['top5'])} | {mean_std(r['loss'], 3)} | {_hms(np.mean(r['wall']))} | {paper} |")
    lines.append("")
    lines.append("Errors and test loss are from the last evaluation of each run, mean ± sample "
                 "standard deviation over the seeds listed; train time is the training loop's "
                 "(results.json wall_time_s), without start-up.")
    if "resnet" in notes:
        lines.append("† Table 2's ResNet row is a published ResNet, not this BN twin of the "
                     "all-convolutional net; it is shown for reference.")
    if "unfinished" in notes:
        lines.append("Rows marked failed/partial/timeout include runs that did not reach "
                     "train_steps; their errors are from their last evaluation, if any.")
    if "seeds" in notes:
        lines.append("seeds: the statistics are over the seeds listed, those with a result; "
                     "the runs in parentheses include some without one.")
    for r in rows:
        for seed, d in r["diverged"]:
            lines.append(f"Diverged: {r['dataset']} {r['label']} seed {seed} at step "
                         f"{d.get('step')}; retry with: {d.get('retry_with')}")
    if any(r["synthetic"] for r in rows):
        lines.append("(synthetic): --use_synthetic_data, one fixed random batch with random labels, "
                     "trained and evaluated on: memorisation, not test error.")
    return "\n".join(lines) + "\n"


def plot_curves(rows, path):
    """PNG of test top-1 error against steps, one line per configuration (mean over seeds, band =
    min..max), one panel per dataset."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    datasets = sorted({(r["dataset"], r["synthetic"]) for r in rows})
    fig, axes = plt.subplots(1, max(len(datasets), 1), figsize=(6.5 * max(len(datasets), 1), 4.5),
                             squeeze=False)
    for ax, (ds, syn) in zip(axes[0], datasets):
        for r in rows:
            if (r["dataset"], r["synthetic"]) != (ds, syn):
                continue
            by_step = {}
            for curve in r["curves"]:
                for step, err in curve:
                    by_step.setdefault(step, []).append(err)
            if not by_step:
                continue
            steps = sorted(by_step)
            mean = [np.mean(by_step[s]) for s in steps]
            line, = ax.plot(steps, mean, marker="o", markersize=3,
                            label=f"{r['label']} (n={len(r['curves'])})")
            if len(r["curves"]) > 1:
                ax.fill_between(steps, [min(by_step[s]) for s in steps],
                                [max(by_step[s]) for s in steps], color=line.get_color(), alpha=0.15)
        ax.set_title(ds + (" (synthetic: memorisation)" if syn else ""))
        ax.set_xlabel("training step")
        ax.set_ylabel("top-1 error (%)" + (" on the fixed batch" if syn else " on the test split"))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(root, md_path=None, png_path=None):
    """Reads ROOT, writes the Markdown table and the PNG; returns the table text."""
    runs = load_runs(root)
    if not runs:
        raise FileNotFoundError(f"no runs (results.json / study_status.json) under {root}")
    rows = summarize(runs)
    text = markdown_table(rows)
    md_path = md_path or os.path.join(root, "report.md")
    png_path = png_path or os.path.join(root, "report.png")
    with open(md_path, "w") as f:
        f.write(f"# Study {os.path.abspath(root)}\n\n{text}\n![test error against steps]"
                f"({os.path.relpath(png_path, os.path.dirname(os.path.abspath(md_path)))})\n")
    plot_curves(rows, png_path)
    return text, md_path, png_path
