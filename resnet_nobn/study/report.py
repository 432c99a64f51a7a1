"""The table of a study (run/report.py): one Markdown row per configuration, its runs grouped over
seeds, the paper's Table 2 value beside the paper's own configuration; a run that diverged and
was continued with its retry advice is grouped with its configuration and marked ‡, with the step
where it diverged and the flags it continued with. The plot is resnet_nobn/study/curves.py's.

It reads only the JSON files of the run directories (resnet_nobn/study/launcher.py) and needs no
TensorFlow, so it works while a study is still running, on any machine.
"""
import json
import os

import numpy as np

from resnet_nobn import paper
from resnet_nobn.data import datasets
from resnet_nobn.cli import departure_text
from resnet_nobn.config import RESUMABLE_FIELDS
from resnet_nobn.console import hms
from resnet_nobn.errors import UserError, disk_full
from resnet_nobn.study.curves import figure_formats, lr_drops, plot_curves, run_series
from resnet_nobn.study.grid import blocks_text
from resnet_nobn.study.launcher import STATUS
from resnet_nobn.study.stats import mean_interval, twin_key, twin_table
from resnet_nobn.files import atomic_file, atomic_write_text, read_json
from resnet_nobn.training import recovery
from resnet_nobn.training.results import is_run_config, problem as results_problem
from resnet_nobn.training.rundir import (CKPT, CONFIG, RESULTS, SUMMARIES, copied_from_another_run,
                                         holder)

# Config fields that do not distinguish one configuration from another in the report: the seed,
# and where a run ran, for how long and its bookkeeping (what a resume may change).
_NOT_A_FACTOR = ("seed", "eval_only") + RESUMABLE_FIELDS


def load_runs(root, warn=None, early=None):
    """Every run under root: its results.json (if any) with 'run_dir' and 'status' added.

    A results.json that is not a run's (another schema, a string where a number belongs, an
    error rate outside [0, 1]) marks its run "unreadable results.json", one that is another run's
    (rundir.copied_from_another_run) "another run's results.json", and neither is counted; a
    directory whose configuration is not a run's (an unrelated config.json) is skipped, and so is
    a study's run that ended before it wrote its configuration (a bad --data_dir, say: its
    study_status.json and train.log only), which is also added to the list `early`, if given.
    Each is said in one line to `warn`, if given.
    """
    runs = []
    warn = warn or (lambda msg: None)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in (CKPT,) + SUMMARIES)
        if RESULTS not in filenames and STATUS not in filenames and not (
                CONFIG in filenames and holder(dirpath)):  # a run that has not evaluated yet
            continue
        path = os.path.join(dirpath, RESULTS)
        raw = read_json(path)
        own = read_json(os.path.join(dirpath, CONFIG))
        problem = results_problem(raw) if raw is not None else (
            "unreadable or not a JSON object" if os.path.exists(path) else None)
        foreign = None if raw is None or problem else copied_from_another_run(dirpath, raw, own, root)
        results = None if problem or foreign else raw
        status = read_json(os.path.join(dirpath, STATUS)) or {}
        candidates = [(raw or {}).get("config"), own]
        if problem or foreign:  # the run's own config.json before what its results.json says
            candidates.reverse()
        config = next((c for c in candidates if is_run_config(c)), None)
        if config is None:
            why = problem or ("its config.json has no `model` object with norm, init, head and "
                              "blocks_per_stage" if os.path.exists(
                                  os.path.join(dirpath, CONFIG)) else None)
            if why:
                warn(f"warning: {dirpath}: not a run of this project ({why}); skipped")
            elif STATUS in filenames:  # the study launched it; it wrote nothing else
                warn(f"warning: {dirpath}: its run ended ({status.get('status', 'unknown')}) "
                     "before it wrote its configuration; see its train.log (not in the table)")
                if early is not None:
                    early.append(dirpath)
            continue
        if problem or foreign:
            warn(f"warning: {path}: {problem or foreign}; the run is listed as "
                 f"{'unreadable' if problem else 'not counted'}")
        run = dict(results or {"history": [], "global_step": 0})
        # a run continued with its retry advice: grouped as started, marked with what it followed
        run.update(run_dir=dirpath, config=recovery.as_started(config, results),
                   advice=(recovery.diverged_at(results),
                           " ".join(recovery.followed_flags(results)))
                   if recovery.advised_changes(results) else None)
        train_steps = config.get("train_steps") or 0
        run["diverged"] = recovery.pending_divergence(dirpath)
        if (run.get("global_step") or 0) >= train_steps and results:
            run["status"] = "finished"
        elif holder(dirpath):  # a live process trains it, whatever an earlier attempt left
            run["status"] = "running"
        elif run["diverged"] is not None:  # as study.run_state: whoever ran it
            run["status"] = "diverged"
        else:
            run["status"] = status.get("status") or "partial"
            if run["status"] in ("finished", "running"):  # stale status file
                run["status"] = "partial"
        run["last_lines"] = status.get("last_lines", [])
        if problem or foreign:
            run["status"] = "unreadable results.json" if problem else "another run's results.json"
        runs.append(run)
    return runs


def config_key(config):
    """A run's configuration without its seed and bookkeeping: runs differing only in seed group."""
    c = {k: v for k, v in config.items() if k not in _NOT_A_FACTOR}
    if isinstance(c.get("model"), dict):  # the head's seed follows --seed unless given
        c["model"] = {k: v for k, v in c["model"].items() if k != "head_seed"}
    return json.dumps(c, sort_keys=True)


def summarize(runs):
    """One row per configuration (runs grouped over seeds), sorted; each a dict."""
    groups = {}
    for run in runs:  # runs on another dataset's images under the name are apart, and say so
        groups.setdefault((config_key(run["config"]), run.get("data_mismatch")), []).append(run)
    # configuration fields that differ between groups of one dataset go into the label
    flat = {k: _flatten(json.loads(k[0])) for k in groups}
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
        # the statistics are of finished runs only: a run stopped early (diverged, failed,
        # still running) has a last evaluation of another step, before any blow-up
        done = [r for r in members
                if r["status"] == "finished" and r.get("top1_error") is not None]
        top1 = [100 * r["top1_error"] for r in done]
        top5 = [100 * r["top5_error"] for r in done if r.get("top5_error") is not None]
        loss = [r["history"][-1]["eval_loss"] for r in done
                if r.get("history") and r["history"][-1].get("eval_loss") is not None]
        steps = [r.get("global_step") or 0 for r in members]
        mismatch = key[1]
        table2 = None if mismatch else paper.paper_row(c)
        rows.append(dict(
            dataset=c["dataset"], synthetic=bool(c.get("use_synthetic_data")), label=label,
            model=m, twin=twin_key(key[0]),
            shown=datasets.shown(c["dataset"], bool(c.get("use_synthetic_data")), mismatch,
                                 c.get("data_dir")),
            mismatch=mismatch,
            sort=(c["dataset"], mismatch or "", m["norm"] != "none", m["init"] != "identity",
                  m["head"] != "random", sum(m["blocks_per_stage"]), extra),
            seeds=[r["config"].get("seed") for r in done],
            all_seeds=[r["config"].get("seed") for r in members], steps=steps,
            train_steps=c.get("train_steps"), top1=top1, top5=top5, loss=loss,
            wall=[r.get("wall_time_s") or 0.0 for r in done],
            statuses=[r["status"] for r in members], paper=table2,
            paper_settings=bool(table2) and paper.paper_settings(c),
            departures=paper.departures(c, min(steps)) if table2 else [],
            diverged=[(r["config"].get("seed"), r["diverged"]) for r in members if r.get("diverged")],
            continued=[(r["config"].get("seed"), r["advice"]) for r in members if r.get("advice")],
            partial=[] if c.get("use_synthetic_data") else _partial(done),
            series=[run_series(r) for r in members], drops=lr_drops(c)))
    rows.sort(key=lambda r: r["sort"])
    return rows


def _partial(runs):
    """(seed, images) of each of `runs` whose last evaluation covered only the first batches of
    the test split (`--eval_steps`), not all of it."""
    partial = []
    for run in runs:
        c = run["config"]
        n = (run.get("history") or [{}])[-1].get("eval_examples")
        if isinstance(n, int) and not isinstance(n, bool) and datasets.partial_evaluation(
                c["dataset"], n, c.get("batch_size") or 1,
                (run.get("image_folder") or {}).get("test_images")):
            partial.append((c.get("seed"), n))
    return partial


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


def markdown_table(rows):
    """The report: one Markdown table row per configuration, the paper's Table 2 value beside it."""
    lines = ["| dataset | configuration (norm / init / head / blocks per stage) | seeds | steps | "
             "top-1 error (%) | top-5 error (%) | test loss | train time (mean h:mm:ss) | "
             "paper Table 2 top-1 (%) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    notes, unfinished = set(), set()
    for r in rows:
        ds = r["shown"]
        lo, hi = min(r["steps"]), max(r["steps"])
        steps = f"{lo}" if lo == hi else f"{lo}–{hi}"
        bad = [s for s in r["statuses"] if s != "finished"]
        if bad:
            steps += f" of {r['train_steps']} ({', '.join(sorted(set(bad)))}: {len(bad)} of {len(r['statuses'])})"
            unfinished |= set(bad)
        seeds = ",".join(str(s) for s in r["seeds"]) or "none"
        if len(r["seeds"]) < len(r["all_seeds"]):
            seeds += f" (of {','.join(str(s) for s in r['all_seeds'])})"
            notes.add("seeds")
        paper = f"{r['paper'][1]:.2f} ({r['paper'][0]})" if r["paper"] else ""
        if r["paper"] and r["paper"][0].endswith("†"):
            notes.add("resnet")
        if r["departures"]:
            paper += " ¶"
        label = r["label"] + (" §" if r["partial"] else "") + (" ‡" if r["continued"] else "")
        wall = hms(np.mean(r["wall"])) if r["wall"] else "–"
        top1 = mean_interval(r["top1"], bounds=(0, 100))
        lines.append(f"| {ds} | {label} | {seeds} | {steps} | {top1} | "
                     f"{mean_std(r['top5'])} | {mean_std(r['loss'], 3)} | {wall} | {paper} |")
    lines.append("")
    lines.append("Errors and test loss are from the last evaluation of each run, mean ± sample "
                 "standard deviation over the seeds listed, and for top-1 [the 95% interval of "
                 "the mean] (Student t, n - 1 degrees of freedom, cut to [0, 100]); train time "
                 "is the training loop's (results.json wall_time_s), without start-up, mean over "
                 "the same seeds.")
    if "resnet" in notes:
        lines.append("† Table 2's ResNet row is a published ResNet, not this BN twin of the "
                     "all-convolutional net; it is shown for reference.")
    if unfinished:
        lines.append(f"Rows marked {'/'.join(sorted(unfinished))} include runs that did not "
                     "reach train_steps; they are in no statistic (an earlier step's error, or "
                     "one before a blow-up, is not the row's), only in the steps column.")
    if "seeds" in notes:
        lines.append("seeds: the statistics are over the seeds listed, those that finished; "
                     "the runs in parentheses include the others.")
    for r in rows:
        settings = "the paper's settings" if r["paper_settings"] else "the settings of its row"
        for seed, (step, flags) in r["continued"]:
            lines.append(f"‡ {r['shown']} {r['label']} seed {seed}: diverged at step {step} with "
                         f"{settings}; continued with `{flags}`; its errors are those it reached "
                         "with these flags.")
        again = {seed for seed, _ in r["continued"]}
        for seed, d in r["diverged"]:
            how = ("it went on with its advice once already, which run/ablate.py does not repeat: "
                   "add these flags to its command (its train.log) to go on" if seed in again else
                   "run/ablate.py --follow_retry_advice continues it with these flags")
            lines.append(f"Diverged: {r['shown']} {r['label']} seed {seed} at step "
                         f"{d.get('step')}; retry with: {d.get('retry_with')} ({how})")
    for r in rows:
        if r["departures"]:
            left = "; ".join(departure_text(*d) for d in r["departures"])
            lines.append(f"¶ {r['shown']} {r['label']}: Table 2's value is for the paper's "
                         f"recipe, which these runs leave: {left}; it is shown for reference, "
                         "not as their match.")
    for r in rows:
        if r["partial"]:
            counts = " or ".join(f"{n:,}" for n in sorted({n for _, n in r["partial"]}))
            seeds = ",".join(str(seed) for seed, _ in r["partial"])
            lines.append(f"§ {r['shown']} {r['label']}: evaluated on the first {counts} images of "
                         f"the test split only (`--eval_steps`; seeds {seeds}), not all of it: its "
                         "errors are those of these images.")
    for mismatch in sorted({r["mismatch"] for r in rows if r["mismatch"]}):
        lines.append(f"(not ...): {mismatch}; its runs trained on those images, which the "
                     "dataset's name does not describe, and have no Table 2 value.")
    if any(r["synthetic"] for r in rows):
        lines.append("(synthetic): --use_synthetic_data, one fixed random batch with random labels, "
                     "trained and evaluated on: memorisation, not test error.")
    lines += twin_table(rows)
    return "\n".join(lines) + "\n"


def report(root, md_path=None, png_path=None, warn=None):
    """Reads ROOT, writes the Markdown table and the PNG; returns (table text, .md path, .png path).

    ValueError (nothing written) if `png_path` has an extension matplotlib cannot write; `warn`
    gets one line per results.json or configuration that is not a run's (load_runs). UserError if
    they cannot be written (a full disk: the disk named); an earlier report is then as it was.
    """
    png_path = png_path or os.path.join(root, "report.png")
    ext = os.path.splitext(png_path)[1].lstrip(".").lower()
    formats = figure_formats()
    if ext not in formats:
        raise ValueError(f"--out_png={png_path}: {f'.{ext} is not a figure format' if ext else 'no extension'}"
                         f"; use one of .{', .'.join(formats)} (e.g. report.png)")
    early = []
    runs = load_runs(root, warn, early)
    if not runs and early:
        raise FileNotFoundError(f"no run under {root} wrote its configuration: {len(early)} "
                                "ended before (see the train.log in each, e.g. "
                                f"{os.path.join(early[0], 'train.log')})")
    if not runs:
        raise FileNotFoundError(f"no runs (results.json / study_status.json) under {root}")
    rows = summarize(runs)
    text = markdown_table(rows)
    md_path = md_path or os.path.join(root, "report.md")
    png_link = os.path.relpath(png_path, os.path.dirname(os.path.abspath(md_path)))
    try:  # both replaced whole, or neither: the table is renamed into place, then the figure
        os.makedirs(os.path.dirname(os.path.abspath(md_path)), exist_ok=True)
        with atomic_file(png_path) as png:
            plot_curves(rows, png)
            atomic_write_text(md_path, f"# Study {os.path.abspath(root)}\n\n{text}\n"
                              f"![training loss, test error and block norm against steps]"
                              f"({png_link})\n")
    except OSError as e:
        fix = "free space there, or give --out_md and --out_png on another disk"
        raise UserError(disk_full(e, md_path, fix) or f"cannot write the report: {e.strerror} "
                        f"({e.filename}); fix permissions or give --out_md and --out_png "
                        "elsewhere (the earlier report, if any, is as it was)") from None
    return text, md_path, png_path
