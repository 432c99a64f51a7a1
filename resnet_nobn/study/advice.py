"""A run continued with its own retry advice: the settings its resume changed after it diverged, the
flags that say them, the step where it diverged, and the configuration it was started with.

When a run diverges, the trainer writes its `retry with:` flags to model_dir/diverged.json; a
resume may then change a setting outside RESUMABLE_FIELDS only to the value that line advises
(resnet_nobn/training/resume.py: `decide`), and results.json records each change under
`resume_changes` and the divergence under `rollbacks`. So the changes read here are the advice
the run followed, whoever continued it: the study (run/ablate.py --follow_retry_advice) or a
person by hand. Reads JSON only (no TensorFlow).
"""
from resnet_nobn.cli import flag_text
from resnet_nobn.training import resume
from resnet_nobn.training.rundir import RESUME_CHANGES


def advised_changes(results):
    """The changes of `results` (a results.json object) made to follow the advice
    (resnet_nobn/training/resume.py: `advised`), oldest first: {step, field, from, to} each, `step`
    the one the advised resume started from."""
    return [c for c in (results or {}).get(RESUME_CHANGES) or [] if resume.advised(c)]


def advised_flags(results):
    """The flags the run was continued with (the last value of each changed setting), or []."""
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
    steps = [r.get("diverged_at") for r in (results.get("rollbacks") or [])
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
