"""Configuration fields as command-line options: their metadata, checks, and the one error
that names a field in the caller's words.

A field made with `option(...)` carries its help, unit and bounds; one made with `bounded(...)`
(not a flag) its bounds only. `check(obj)` checks each such field of a config object: its kind
(an int field takes an integer and no bool, a float field a number, a bool field a bool), then
its value; `coerce(obj)` turns what Python may give (a list, one int where the command line takes
one number) into the field's tuple. A failed check is a `ConfigError`, written once in the words
of the command line (`--stem_width`): `str(e)` names the fields as Python does
(`ModelConfig.stem_width`), `e.flag_words` as the command line does. `check_argument` applies a
field's checks to a function's argument of the same meaning (`build_model`'s weight_decay).
Imports no TensorFlow.
"""
import dataclasses
import math
import numbers
import os
import re
import typing

FLOAT32_MAX = 3.4028234663852886e38  # every float option is used as a float32


class ConfigError(ValueError):
    """A configuration's value failed its check. `str(e)`: each `--name` of the message written
    as the dataclass field it is (`ModelConfig.stem_width`, `TrainConfig.learning_rate`), for a
    caller in Python; `flag_words`: the message as written, for a command line. `owners`: the
    dataclasses, or {flag name: Python name} dicts (a function's arguments), to name them by."""

    def __init__(self, flag_words, owners):
        self.flag_words = flag_words
        super().__init__(re.sub(r"--(\w+)", lambda m: _python_name(m.group(1), owners), flag_words))


def _python_name(name, owners):
    for owner in owners:
        if isinstance(owner, dict):
            if name in owner:
                return owner[name]
        elif name in {f.name for f in dataclasses.fields(owner)}:
            return f"{owner.__name__}.{name}"
    return f"--{name}"


def flag_words(error):
    """The message of `error` in the words of the command line (a ConfigError's `flag_words`)."""
    return error.flag_words if isinstance(error, ConfigError) else str(error)


def option(default, help, unit=None, lower=None, upper=None, choices=None, check=None, **flag):
    """A field that is a command-line option: `help` and `unit` for --help; `lower`/`upper`
    bounds, `choices`, and `check` = (predicate, message) are its checks; `flag` holds what only
    the flag has (`flag_choices`, `flag_default`, `one_for_all`: one number for every stage,
    `help_for`: (dataset, sentence) pairs added to the help where the entry point trains it)."""
    return dataclasses.field(default=default, metadata=dict(
        help=help, unit=unit, lower=lower, upper=upper, choices=choices, check=check, **flag))


def is_integer(v):
    """Whether `v` is an integer and no bool (True is an int to Python): an int field's kind."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def plain(v):
    """`v` as Python holds it: a numpy number (or array) as its Python number (or list), e.g. a
    value from a numpy grid, so that a config is JSON and Keras takes its seeds; anything else as
    it is. Loads no numpy."""
    return v.tolist() if type(v).__module__ == "numpy" and hasattr(v, "tolist") else v


def bounded(default, lower=None, upper=None, check=None):
    """A field that is not a command-line option (the dataset or the network fixes it), checked
    as an option is: its kind, `lower`/`upper` bounds, and `check` = (predicate, message)."""
    return dataclasses.field(default=default, metadata=dict(
        lower=lower, upper=upper, choices=None, check=check))


def options(cls):
    """The fields of `cls` that are command-line options."""
    return [f for f in dataclasses.fields(cls) if "help" in f.metadata]


def checked(cls):
    """The fields of `cls` that `check` checks: its options and its `bounded` fields."""
    return [f for f in dataclasses.fields(cls) if "lower" in f.metadata]


def coerce(obj, stages=None):
    """Sets each checked field of the frozen `obj` given as Python may give it to what the field
    holds: a numpy number as its Python number (`plain`), an os.PathLike where a string goes as
    its path; a tuple option given as a list (or another sequence, a numpy array) as a tuple, and
    as one int as what that number means on the command line: one entry per stage
    (`one_for_all`, `stages` of them), else a one-entry tuple (`lr_boundaries=30000`)."""
    for f in checked(obj):
        v = plain(getattr(obj, f.name))
        if isinstance(v, os.PathLike) and str in (typing.get_args(f.type) or (f.type,)):
            v = os.fspath(v)
        if isinstance(f.default, tuple) and not isinstance(v, (str, bytes)):
            if isinstance(v, int) and not isinstance(v, bool):
                v = (v,) * (stages(obj) if f.metadata.get("one_for_all") else 1)
            elif isinstance(v, (list, range, tuple)):
                v = tuple(plain(x) for x in v)
        object.__setattr__(obj, f.name, v)


def check(obj):
    """ValueError, in the words of the command line, for the first field of `obj` that fails
    its checks (`check_value`)."""
    for f in checked(obj):
        check_value(f, getattr(obj, f.name))


def check_value(f, v):
    """ValueError, in the words of the command line, unless `v` passes field `f`'s checks: its
    kind, finite, float32's range, bounds, choices, `check`. None passes where the field's type
    allows it (`int | None`)."""
    m = f.metadata
    kinds = typing.get_args(f.type) or (f.type,)
    if v is None and type(None) in kinds:
        return
    example = next((d for d in (f.default, m["lower"]) if d is not None), 0)
    if bool in kinds and not isinstance(v, bool):
        raise ValueError(f"--{f.name}={v!r} must be True or False")
    if int in kinds and not is_integer(v):
        raise ValueError(f"--{f.name}={v!r} must be an integer, e.g. {example}")
    if float in kinds and (isinstance(v, bool) or not isinstance(v, numbers.Real)):
        raise ValueError(f"--{f.name}={v!r} must be a number, e.g. {example:g}")
    if str in kinds and not isinstance(v, str) and not m["choices"]:
        raise ValueError(f"--{f.name}={v!r} must be a path (a string), e.g. "
                         f"{f.default or '/tmp/' + f.name}")
    if isinstance(f.default, tuple) and not isinstance(v, tuple):
        raise ValueError(f"--{f.name}={v!r} is not a list of integers; give a tuple, e.g. "
                         f"{f.default!r}")
    if isinstance(v, float) and not math.isfinite(v):
        example = f.default if isinstance(f.default, (int, float)) else 1  # None: unset
        raise ValueError(f"--{f.name} must be a finite number, e.g. {example:g}")
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


def check_argument(cls, name, value, called):
    """ConfigError unless `value` passes the checks of field `name` of dataclass `cls`, for a
    function's argument of the same meaning, named `called` in the message
    (`check_argument(TrainConfig, "weight_decay", -1, "build_model's weight_decay")`:
    "build_model's weight_decay=-1 must be at least 0.0"). Returns `value`."""
    field = next(f for f in dataclasses.fields(cls) if f.name == name)
    try:
        check_value(field, value)
    except ValueError as e:
        raise ConfigError(str(e), ({name: called},)) from None
    return value
