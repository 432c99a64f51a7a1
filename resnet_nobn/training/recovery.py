"""Recovery from a divergence, all of it: the record a NaN/inf leaves (diverged.json) and its
`retry with:` advice from the measured remedies, the rollback past it to the checkpoint taken
before the blow-up, the run going on from there with the advised flags (by hand,
`--follow_retry_advice` or a study), and what results.json records of it.

    the NaN      the trainer calls `record_divergence`: diverged.json, and the error line with
                 its `retry with:` line (`retry_remedy`, from the measured remedies)
    the re-run   resume.py's decision asks `resume_order` (the divergence still `pending`, and the
                 checkpoints `on_the_way_up` to skip) and `advised_flags` (the settings a resume
                 may change to follow the advice); the trainer's start calls `roll_back` (the
                 checkpoints after the one restored deleted, through the function it is handed)
                 and, once config.json says the new settings, `clear_divergence`
    the record   results.json's `rollbacks` entry (`roll_back`) and its `resume_changes` that
                 followed the advice (`advised`), read back by the study and its report
                 (`advised_changes`, `followed_flags`, `diverged_at`, `as_started`)

No TensorFlow: the start is decided, and a study reads its runs, before any loads. The measured
table is data (measured_remedies.json beside this file, written by `python experiments/stability/remedies.py
--from_runs=ROOT --write`), read at its first use, never at import.
"""
import json
import math
import os
import time
import uuid

from resnet_nobn.cli import flag_text
from resnet_nobn.config import RESUMABLE_FIELDS, TrainConfig
from resnet_nobn.data import image_folder
from resnet_nobn.errors import TrainingDiverged
from resnet_nobn.files import atomic_write_json, read_json
from resnet_nobn.training import rundir
from resnet_nobn.training.rundir import DIVERGED, RESULTS, RESUME_CHANGES, ROLLBACKS

# -- the remedies: what a diverged run should retry with -------------------------------------------

AGC = 0.16  # NFNets' largest lambda, the one CIFAR studies use at batch 128; not tuned here
WARMUP = "rule"  # --warmup_steps of warmup_rule(the run's schedule)
MEASURED_RATE, MEASURED_BATCH = 0.05, 128  # the paper's, at which the remedies were measured
CLOSE = 0.5  # points of test error within which a less invasive remedy is preferred

# What a diverged run of the paper's network (identity init, no normalization) may retry with,
# least invasive first: the start only, a lower rate with nothing else changed, a bound on each
# unit's step, then the clip of the whole gradient. name -> (flags, what it changes, in one
# clause). retry_remedy takes the one that learned most (MEASURED) among those that survived.
REMEDIES = {
    "paper_warmup": (dict(warmup_steps=WARMUP),
                     "ramps the rate up linearly from 0 at step 0 over the first half of its "
                     "first period"),
    "paper_lr0.02": (dict(learning_rate=0.02), "lowers the rate to 0.02, nothing else changed"),
    "paper_lr0.01": (dict(learning_rate=0.01), "lowers the rate to 0.01, nothing else changed"),
    "paper_agc": (dict(agc=AGC), f"caps each conv unit's gradient at {AGC} of its weight norm"),
    "paper_agc_warmup": (dict(agc=AGC, warmup_steps=WARMUP),
                         f"caps each conv unit's gradient at {AGC} of its weight norm and ramps "
                         "the rate up from step 0 over the first half of its first period"),
    "paper_clip1": (dict(clip_norm=1.0), "clips the whole gradient to norm 1"),
    "paper_clip1_warmup": (dict(clip_norm=1.0, warmup_steps=WARMUP),
                           "clips the whole gradient to norm 1 and ramps the rate up from step 0 "
                           "over the first half of its first period"),
}

# What each net did on real images with the paper's schedule shape (rate /10 at 50% and 83% of
# MEASURED_STEPS steps, batch 128; each remedy at the paper's rate 0.05 unless its flags lower it):
# MEASURED, (net, blocks per stage) -> {seed: test top-1 error in % after the run, or "NaN @step"
# where its loss became non-finite}. Measured by bench/stability.py's runs and written by
# `python experiments/stability/remedies.py --from_runs=ROOT --write` into this file; docs/stability.md's tables
# are its rendering (`python experiments/stability/remedies.py`).
MEASURED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "measured_remedies.json")


def read_measured(path=MEASURED_FILE):
    """(MEASURED, MEASURED_STEPS) from its file: {(net, blocks): {seed: error in % or "NaN @step[,
    then ...]"}}, and the number of steps the runs trained."""
    with open(path) as f:
        data = json.load(f)
    return ({(r["net"], r["blocks"]): {int(s): v for s, v in r["seeds"].items()}
             for r in data["runs"]}, int(data["steps"]))


def measured():
    """(MEASURED, MEASURED_STEPS): the module's, read from MEASURED_FILE at the first use (a test
    may set MEASURED itself)."""
    if "MEASURED" not in globals():
        globals()["MEASURED"], globals()["MEASURED_STEPS"] = read_measured()
    return globals()["MEASURED"], globals()["MEASURED_STEPS"]


def __getattr__(name):
    """`recovery.MEASURED`, `recovery.MEASURED_STEPS`: read at the first use (`measured`)."""
    if name in ("MEASURED", "MEASURED_STEPS"):
        return measured()[name == "MEASURED_STEPS"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The largest stable rate without a remedy, the last resort of retry_remedy (docs/stability.md:
# Fashion-MNIST as a CIFAR-10 directory, widths 16,32,64, batch 32, 500 steps, 1, 3 and 9 blocks
# per stage). (kind, deep): deep is more than 3 blocks per stage; a shallow entry held at both 1
# and 3. kind: the init without BN (standard and he were not measured: the paper's identity row
# is used), 'batch' with BN. Fixup's rows were measured with Fixup's blocks and the paper's
# frozen head, before --init=fixup built Fixup's reference network.
STABLE_SETTINGS = {
    ("identity", False): dict(learning_rate=0.02),
    ("identity", True): dict(learning_rate=0.02),
    ("fixup", False): dict(learning_rate=0.02),
    ("fixup", True): dict(learning_rate=0.02),
    ("skipinit", False): dict(learning_rate=0.05),
    ("skipinit", True): dict(learning_rate=0.02),  # 0.05 diverged at step 170
    ("batch", False): dict(learning_rate=0.1),
    ("batch", True): dict(learning_rate=0.1),
}


def warmup_rule(train_steps, lr_boundaries=(), lr_decay_every=0):
    """The warm-up of docs/stability.md, one rule for every run (never tuned per run): a linear
    ramp over the first half of the first rate period (the steps before the first
    --lr_boundaries entry, or --lr_decay_every, or --train_steps with neither). The paper's 60k
    steps: 15,000 steps of its first 30,000; a 1,500-step run with drops at 750 and 1,250: 375.
    The ramp is a function of the global step (resnet_nobn/training/steps.py): a run continued from
    step s runs at min(1, (s+1)/W) of its rate there, as if it had warmed up from step 0."""
    first = lr_boundaries[0] if lr_boundaries else (lr_decay_every or train_steps)
    return max(1, first // 2)


def measured_depth(blocks):
    """The depth whose measurements stand for `blocks` per stage: the smallest measured depth
    at least `blocks`, else the deepest."""
    depths = sorted({b for _, b in measured()[0]})
    return next((b for b in depths if b >= blocks), depths[-1])


def mean_error(net, blocks):
    """The mean test error (%) over the seeds of `net` at `blocks`' measured depth, or None if it
    was not measured there, a seed diverged there, or fewer than two were run."""
    runs = measured()[0].get((net, measured_depth(blocks)), {})
    if len(runs) < 2 or not all(isinstance(e, (int, float)) for e in runs.values()):
        return None
    return sum(runs.values()) / len(runs)


def survived(net, blocks):
    """Whether `net` trained on two seeds or more at the measured depth for `blocks` per stage,
    and no seed diverged at any measured depth: a remedy that diverged anywhere in the sweep has
    not survived it."""
    if any(isinstance(e, str) for (n, b), runs in measured()[0].items() if n == net
           for e in runs.values()):
        return False
    return mean_error(net, blocks) is not None


def best_remedy(cfg: TrainConfig):
    """(name, flags) of the remedy a diverged run of the paper's network `cfg` should take, or
    None: among the REMEDIES that survived at its depth (MEASURED), that the run does not have
    yet and that would not raise its rate, the one with the lowest mean test error; a less
    invasive one (earlier in REMEDIES) instead where its mean is within CLOSE points of it."""
    blocks = max(cfg.model.blocks_per_stage)
    candidates = []
    for name, (flags, _) in REMEDIES.items():
        flags = {k: warmup_rule(cfg.train_steps, cfg.lr_boundaries, cfg.lr_decay_every)
                 if v == WARMUP else v for k, v in flags.items()}
        new = any(getattr(cfg, k) != v for k, v in flags.items())
        if survived(name, blocks) and new and flags.get("learning_rate", 0) <= cfg.learning_rate:
            candidates.append((name, flags, mean_error(name, blocks)))
    if not candidates:
        return None
    best = min(e for _, _, e in candidates)
    return next((n, f) for n, f, e in candidates if e <= best + CLOSE)


def measured_clause(name, blocks):
    """'measured on Fashion-MNIST after 1,500 steps, docs/stability.md: 14.6% at 9 blocks per
    stage, BN twin 9.2%' for a remedy's advice."""
    depth = measured_depth(blocks)
    bn = mean_error("bn", depth)
    return (f"measured on Fashion-MNIST after {measured()[1]:,} steps, docs/stability.md: "
            f"{mean_error(name, blocks):.1f}% at {depth} block{'s' * (depth != 1)} per stage"
            + (f", BN twin {bn:.1f}%" if bn is not None else ""))


def retry_remedy(cfg: TrainConfig):
    """(flags, clause): what a diverged run of `cfg` should be re-run with, as `--flag=value`
    tokens, and what that changes and what it measured, in one clause.

    The paper's net: `best_remedy`, at the rate it was measured at (lowered to it, never
    raised). Else, or where no remedy survived, a lower rate (STABLE_SETTINGS), no higher than
    the largest stable one nor half the one that diverged, and half its clip if it clipped.
    """
    kind = "batch" if cfg.model.norm == "batch" else (
        cfg.model.init if cfg.model.init in ("fixup", "skipinit") else "identity")
    blocks = max(cfg.model.blocks_per_stage)
    chosen = best_remedy(cfg) if kind == "identity" else None
    if chosen:
        name, flags = chosen
        what = REMEDIES[name][1]
        if cfg.learning_rate > MEASURED_RATE and "learning_rate" not in flags:
            flags["learning_rate"] = MEASURED_RATE
            what += f", at the rate {MEASURED_RATE} it was measured at"
        return _tokens(flags), f"{what} ({measured_clause(name, blocks)})"
    stable = STABLE_SETTINGS[(kind, blocks > 3)]
    flags = {"learning_rate": min(stable["learning_rate"], cfg.learning_rate / 2)}
    if cfg.clip_norm:
        flags["clip_norm"] = cfg.clip_norm / 2
    return _tokens(flags), (f"lowers the rate to {flags['learning_rate']:.3g}"
                            + (" and halves the clip" if cfg.clip_norm else ""))


def _tokens(flags):
    return " ".join(f"--{k}={v}" if isinstance(v, int) else f"--{k}={float(f'{v:.3g}')}"
                    for k, v in flags.items())


def retry_advice(cfg: TrainConfig) -> str:
    """The flags of `retry_remedy` (the `retry with:` line)."""
    return retry_remedy(cfg)[0]


# -- the divergence: diverged.json and the error the run ends with ---------------------------------

def divergence(cfg: TrainConfig, step, what, latest):
    """(diverged.json's record, the TrainingDiverged error) of `what` (the loss, the weights)
    become NaN/inf at `step`; `latest`: the newest checkpoint's name, or None. The record carries
    the `retry with:` advice (`retry_remedy`) a re-run may follow. Pure."""
    advice, change = retry_remedy(cfg)
    kept = (f"re-running resumes from a checkpoint taken before the blow-up (latest: {latest})"
            if latest else "no checkpoint was written")
    record = dict(step=step, what=what, learning_rate=cfg.learning_rate, retry_with=advice)
    return record, TrainingDiverged(f"{what} became NaN/inf at step {step}; {kept}; the advice "
                                    f"below {change}\nretry with: {advice}")


def record_divergence(cfg: TrainConfig, step, what, latest, chief):
    """The trainer's one call on a NaN/inf: the error the run ends with (`divergence`: its line
    and its `retry with:` line); the chief records the divergence in diverged.json for the
    re-run (`write_divergence`), where model_dir still exists."""
    record, error = divergence(cfg, step, what, latest)
    if chief and os.path.isdir(cfg.model_dir):
        write_divergence(cfg.model_dir, record)
    return error


def write_divergence(model_dir, record):
    """Writes diverged.json: `record` (`divergence`), timed, with an id of its own that the
    rollback past it records (`pending`)."""
    atomic_write_json(os.path.join(model_dir, DIVERGED),
                      dict(record, time=time.strftime("%Y-%m-%d %H:%M:%S"),
                           id=uuid.uuid4().hex))


def pending(diverged, results):
    """The divergence record `diverged` if the run has not resumed past it yet, else None. The
    trainer records the rollback (results.json `rollbacks`, with the record's `id`) before it
    deletes diverged.json; a run killed between the two has resumed past it, and is not diverged.
    The id tells a stale record from a new divergence at the same step with the same advice (a
    re-run without the advice diverges where it did before)."""
    if diverged is None:
        return None
    rollbacks = (results or {}).get(ROLLBACKS)
    last = rollbacks[-1] if isinstance(rollbacks, list) and rollbacks else {}
    if not isinstance(last, dict):
        return diverged
    if "divergence_id" in last or "id" in diverged:
        done = last.get("divergence_id") == diverged.get("id")
    else:  # both written before records had an id: its step and advice tell it, as they could
        done = ((last.get("diverged_at"), last.get("retry_with"))
                == (diverged.get("step"), diverged.get("retry_with")))
    return None if done else diverged


def pending_divergence(model_dir):
    """diverged.json of the run in `model_dir` if it has not resumed past it yet (`pending`), or
    None: for the export, the study and its report, which read no whole RunDir."""
    return pending(rundir.read_divergence(model_dir),
                   read_json(os.path.join(model_dir, RESULTS)))


def advised_flags(diverged):
    """The `--flag=value` tokens of a divergence record's `retry with:` line, or []."""
    advice = (diverged or {}).get("retry_with") or ""
    return [t for t in str(advice).split() if t.startswith("--") and "=" in t]


def retry_flags(model_dir):
    """The `--flag=value` tokens of the run's `retry with:` line (diverged.json), or []: for the
    study, which reads no whole RunDir."""
    return advised_flags(rundir.read_divergence(model_dir))


def clear_divergence(model_dir):
    """Deletes diverged.json (a run that trains on has resumed past it), if there is one."""
    path = os.path.join(model_dir, DIVERGED)
    if os.path.exists(path):
        os.remove(path)


# -- the rollback: which checkpoint came before the blow-up ----------------------------------------

def resume_order(run: rundir.RunDir, num_classes):
    """(the restore order, the pending divergence or None) of the run directory `run`."""
    diverged = pending(run.diverged, run.results)
    return restore_order(run.steps, run.indexed, run.losses, diverged, num_classes), diverged


def on_the_way_up(step, losses, num_classes):
    """Why the checkpoint at `step` was taken on the way to a blow-up, or None if it was not
    (`losses`: {step: the loss recorded with its weights}). The one of step 0 holds the
    initialisation, whatever loss its first loop ended with: a retry with other flags may always
    start from it."""
    if step == 0:
        return None
    loss = losses.get(step)
    if loss is None:
        return "no loss recorded with its weights"
    if not math.isfinite(loss):
        return f"loss {loss}"
    best = min((l for s, l in losses.items() if s <= step and l is not None and math.isfinite(l)),
               default=loss)  # a NaN (step 0's, whatever its loop gave) compares as no minimum
    if loss > best + math.log(num_classes):
        return f"loss {loss:.3g}, already {loss - best:.3g} above the lowest {best:.3g}"
    return None


def restore_order(steps, indexed, losses, diverged, num_classes):
    """[(step, reason to skip it or None)] of the checkpoints `steps` (newest first): one without
    its .index file (not in `indexed`) is skipped; after a divergence (`diverged`, the pending
    record, or None) one taken on the way up too.

    A resume takes the newest checkpoint that restores with finite weights (the trainer tries
    them in this order and names each it passes over). After a divergence it takes the newest
    taken *before the blow-up*: its loss, recorded with its weights (ckpt/losses.json), is at most
    `ln(num_classes)` above the lowest recorded up to it, so not already on the way up
    (`on_the_way_up`); else the initialisation, step 0. A run that trains on from it deletes the
    checkpoints after it, since it writes its own (`roll_back`)."""
    order = []
    for step in steps:
        why = None
        if step not in indexed:
            why = "its .index file is missing"
        elif diverged is not None:
            why = on_the_way_up(step, losses, num_classes)
        order.append((step, why))
    return order


def roll_back(diverged, step, steps, delete_after):
    """The start of a run that rolls back past the pending divergence `diverged` to ckpt-`step`
    (chief only): the checkpoints of `steps` (RunDir.steps) after it are deleted, with their
    losses, by `delete_after(step, steps)` (checkpoints.Checkpoints.delete_after, which the
    trainer hands here; it returns the steps deleted). Returns (the line the trainer logs,
    results.json's `rollbacks` entry: {diverged_at, resumed_from, retry_with, divergence_id}).

    Safe to be killed anywhere: killed after the deletion, diverged.json still says the run
    diverged and results.json records no rollback, so the next start rolls back again to the same
    checkpoint (only the deleted ones are gone). The trainer writes the entry into results.json
    *before* it deletes diverged.json (`clear_divergence`): killed between the two, the record is
    no longer `pending`, and the next start deletes it."""
    gone = delete_after(step, steps)
    line = (f"the run diverged at step {diverged.get('step')}: resuming from "
            f"ckpt-{step}, taken before the blow-up"
            + (f" (deleted {', '.join(f'ckpt-{s}' for s in gone)} after it)" if gone else ""))
    entry = dict(diverged_at=diverged.get("step"), resumed_from=step,
                 retry_with=diverged.get("retry_with"),
                 **({"divergence_id": diverged["id"]} if "id" in diverged else {}))
    return line, entry


# -- the run going on with the advice, as results.json records it ---------------------------------

def advised_values(flags):
    """{field: the value text} a resume after a divergence may change a setting outside
    RESUMABLE_FIELDS to: those of the `--flag=value` tokens `flags` of its `retry with:` line
    (`advised_flags`)."""
    return dict(t[2:].split("=", 1) for t in flags)


def follows(values, name, value):
    """Whether setting `name` to `value` follows the advice `values` (`advised_values`)."""
    if name not in values:
        return False
    try:
        return float(values[name]) == float(value)
    except (TypeError, ValueError):
        return False


def advised(change):
    """Whether a results.json `resume_changes` entry {step, field, from, to} is one that a resume
    made to follow the retry advice: a resume changes a setting outside RESUMABLE_FIELDS only to
    its advised value. An image folder's images (`image_folder.train_images`, ...) are no
    setting."""
    return (isinstance(change, dict) and isinstance(change.get("field"), str)
            and change["field"] not in RESUMABLE_FIELDS
            and not change["field"].startswith(f"{image_folder.NAME}."))


def advised_changes(results):
    """The changes of `results` (a results.json object) made to follow the advice (`advised`),
    oldest first: {step, field, from, to} each, `step` the one the advised resume started from.
    Whoever continued the run, the study (run/ablate.py --follow_retry_advice) or a person by
    hand, these are the advice it followed."""
    return [c for c in (results or {}).get(RESUME_CHANGES) or [] if advised(c)]


def followed_flags(results):
    """The flags the run was continued with to follow its advice (the last value of each changed
    setting), or []."""
    last = {}
    for c in advised_changes(results):
        last[c["field"]] = c.get("to")
    return [f"--{k}={flag_text(v)}" for k, v in last.items()]


def diverged_at(results):
    """The step where the run diverged before it was continued with the advice, from the rollback
    its advised resume made (results.json `rollbacks`), or None."""
    changes = advised_changes(results)
    if not changes:
        return None
    steps = [r.get("diverged_at") for r in (results.get(ROLLBACKS) or [])
             if isinstance(r, dict) and r.get("resumed_from") == changes[0].get("step")]
    return steps[-1] if steps else None


def as_started(config, results):
    """`config` (the run's config.json object) with each advised change undone: the settings the
    run was started with, i.e. those of its configuration in the study."""
    config = dict(config)
    for c in reversed(advised_changes(results)):
        if config.get(c["field"]) == c.get("to"):
            config[c["field"]] = c.get("from")
    return config
