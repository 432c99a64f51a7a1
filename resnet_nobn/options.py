"""A configuration field that is a command-line option: its help, unit and bounds, kept in the
dataclass field's metadata (`option`), and the check of an object's options against them (`check`).

resnet_nobn/config.py declares its fields with `option`; resnet_nobn/cli.py makes one flag of each
(`options`). Messages are in the words of the command line. No TensorFlow is imported.
"""
import dataclasses
import math

FLOAT32_MAX = 3.4028234663852886e38  # every float option is used as a float32


def _positive_ints(values):
    return len(values) > 0 and all(v > 0 for v in values)


def increasing_steps(values):
    return all(v > 0 for v in values) and list(values) == sorted(set(values))


INTS = (_positive_ints, "must be a comma list of positive integers, e.g. 64,128,256")


def option(default, help, unit=None, lower=None, upper=None, choices=None, check=None, **flag):
    """A field that is a command-line option: `help` and `unit` for --help; `lower`/`upper`
    bounds, `choices`, and `check` = (predicate, message) are its checks; `flag` holds what only
    the flag has (`flag_choices`, `flag_default`, `one_for_all`: one number for every stage)."""
    return dataclasses.field(default=default, metadata=dict(
        help=help, unit=unit, lower=lower, upper=upper, choices=choices, check=check, **flag))


def options(cls):
    """The fields of `cls` that are command-line options."""
    return [f for f in dataclasses.fields(cls) if "help" in f.metadata]


def check(obj):
    """ValueError, in the words of the command line, for the first option of `obj` that fails
    its checks (finite, bounds, choices, `check`)."""
    for f in options(obj):
        m, v = f.metadata, getattr(obj, f.name)
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"--{f.name} must be a finite number")
        if isinstance(v, float) and abs(v) > FLOAT32_MAX:  # the network computes in float32
            raise ValueError(f"--{f.name}={v:g} is beyond float32's range (at most "
                             f"{FLOAT32_MAX:.4g})")
        lower, upper = m["lower"], m["upper"]
        if (lower is not None and v < lower) or (upper is not None and v > upper):
            bounds = (f"in [{lower}, {upper}]" if None not in (lower, upper) else
                      f"at least {lower}" if upper is None else f"at most {upper}")
            raise ValueError(f"--{f.name}={v} must be {bounds}")
        if m["choices"] and v not in m["choices"]:
            raise ValueError(f"--{f.name}={v}: choose one of {', '.join(m['choices'])}")
        if m["check"] and not m["check"][0](v):
            raise ValueError(f"--{f.name} {m['check'][1]}")
