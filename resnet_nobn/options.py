"""Configuration fields as command-line options: their metadata, checks, and the one error
that names a field in the caller's words.

A field made with `option(...)` carries its help, unit and bounds; one made with `bounded(...)`
(not a flag) its help and bounds; one made with `described(...)` its help only (its class checks
it). `document(cls)` writes a config class's docstring from that help, field by field, the text
the command line's --help shows, so the two never differ; `replaced` is its `replace`. `check(obj)` checks each such field of a config object: its kind
(an int field takes an integer and no bool, a float field a number, a bool field a bool), then
its value; `coerce(obj)` turns what Python may give (a list, one int where the command line takes
one number) into the field's tuple. A failed check is a `ConfigError`, written once in the words
of the command line (`--stem_width`): `str(e)` names the fields as Python does
(`ModelConfig.stem_width`), `e.flag_words` as the command line does. `check_argument` applies a
field's checks to a function's argument of the same meaning (`build_model`'s weight_decay).
Imports no TensorFlow.
"""
import dataclasses
import difflib
import inspect
import math
import numbers
import os
import re
import textwrap
import typing

FLOAT32_MAX = 3.4028234663852886e38  # every float option is used as a float32


class ConfigError(ValueError):
    """A configuration's value failed its check: what `ModelConfig`, `TrainConfig`, the recipes,
    `build_model` and `StepSchedule` raise for a value they refuse (a `ValueError`).

    `str(e)` names each field as Python does (`ModelConfig.stem_width`,
    `TrainConfig.learning_rate`); `e.flag_words` is the same message in the words of the command
    line (`--stem_width`).

    Args:
        flag_words: str. The message, naming each field as its flag (`--stem_width=0 must be at
            least 1`).
        owners: tuple. The dataclasses, or {flag name: Python name} dicts (a function's
            arguments), that `str(e)` names the flags by.

    Example:

    ```python
    import resnet_nobn
    try:
        resnet_nobn.ModelConfig(stem_width=0)
    except resnet_nobn.ConfigError as e:
        print(e)             # ModelConfig.stem_width=0 must be at least 1
        print(e.flag_words)  # --stem_width=0 must be at least 1
    ```
    """

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
        help=help, unit=unit, lower=lower, upper=upper, choices=choices, check=check, flag=True,
        **flag))


def is_integer(v):
    """Whether `v` is an integer and no bool (True is an int to Python): an int field's kind."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def plain(v):
    """`v` as Python holds it: a numpy number (or array) as its Python number (or list), e.g. a
    value from a numpy grid, so that a config is JSON and Keras takes its seeds; anything else as
    it is. Loads no numpy."""
    return v.tolist() if type(v).__module__ == "numpy" and hasattr(v, "tolist") else v


def bounded(default, help, lower=None, upper=None, check=None):
    """A field that is not a command-line option (the dataset or the network fixes it), checked
    as an option is: its kind, `lower`/`upper` bounds, and `check` = (predicate, message);
    `help` says what it is (its class's docstring: `document`)."""
    return dataclasses.field(default=default, metadata=dict(
        help=help, unit=None, lower=lower, upper=upper, choices=None, check=check))


def described(default, help):
    """A field that is no option and that its class checks itself (`TrainConfig.model`,
    `class_names`): only its `help`, for its class's docstring (`document`)."""
    return dataclasses.field(default=default, metadata=dict(help=help, unit=None))


def options(cls):
    """The fields of `cls` that are command-line options."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get("flag")]


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


def _type_name(f):
    """A field's type in words, for its docstring: `int`, `str or None`, `tuple of ints`."""
    if isinstance(f.default, tuple) or typing.get_origin(f.type) is tuple:
        return "tuple of str" if str in typing.get_args(f.type) else "tuple of ints"
    kinds = typing.get_args(f.type) or (f.type,)
    return " or ".join("None" if k is type(None) else k.__name__ for k in kinds)


def _bounds(f):
    """A checked field's bounds in words ('' for none): `At least 1.`, `One of: a, b.`."""
    m = f.metadata
    lower, upper, choices, check = (m.get(k) for k in ("lower", "upper", "choices", "check"))
    out = []
    if lower is not None or upper is not None:
        out.append(f"In [{lower}, {upper}]." if None not in (lower, upper) else
                   f"At least {lower}." if upper is None else f"At most {upper}.")
    if choices:
        out.append(f"One of: {', '.join(choices)}.")
    if check:
        out.append(check[1][0].upper() + check[1][1:].rstrip(".") + ".")
    return " ".join(out)


def field_doc(f, owners):
    """Field `f`'s entry in its class's `Args:`: its type, the help the command line's --help
    shows (each `--flag` named as the field it is, as `ConfigError` does), its unit, default and
    bounds."""
    m = f.metadata
    words = " ".join([m["help"], *(s for _, s in m.get("help_for", ()))])
    words = re.sub(r"--(\w+)", lambda g: _python_name(g.group(1), owners), words)
    words += f" Unit: {m['unit']}." if m.get("unit") else ""
    default = repr(f.default)
    if dataclasses.is_dataclass(f.default):  # TrainConfig.model: the class's own defaults
        default = f"{type(f.default).__name__}()"
    words += f" Default: `{default}`." + (f" {_bounds(f)}" if _bounds(f) else "")
    words += "" if m.get("flag") else " Not a command-line flag."
    return textwrap.fill(f"{f.name}: {_type_name(f)}. {words}", 96, initial_indent=" " * 4,
                         subsequent_indent=" " * 8, break_on_hyphens=False)


def document(cls, owners):
    """Appends to `cls.__doc__` an `Args:` section with every field (`field_doc`), from the same
    help the command line shows, so `help(cls)` lists each field's meaning, default and bounds.
    The docstring's `Example:` section, if any, stays last."""
    doc = inspect.cleandoc(cls.__doc__ or "")
    head, sep, example = doc.partition("\nExample:")
    args = "\n".join(field_doc(f, owners) for f in dataclasses.fields(cls))
    cls.__doc__ = f"{head.rstrip()}\n\nArgs:\n{args}\n" + (f"\nExample:{example}\n" if sep else "")
    return cls


def unknown_field(called, name, names, listed):
    """The TypeError of a keyword `name` that is none of `names` (a config's fields), naming the
    nearest of them and `listed`, where they are all listed (`help(resnet_nobn.TrainConfig)`)."""
    near = difflib.get_close_matches(name, names, n=1, cutoff=0.0)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return TypeError(f"{called} got an unexpected keyword argument {name!r}{hint} (the fields: "
                     f"{listed})")


def split_fields(called, fields, classes, listed=None):
    """`fields` (keywords of `called`) as one dict per dataclass of `classes`, each keyword in
    its class's (they share no field name); TypeError naming the nearest field, and `listed`
    where all are, for a keyword that is none's."""
    names = [[f.name for f in dataclasses.fields(c)] for c in classes]
    for name in fields:
        if not any(name in n for n in names):
            raise unknown_field(called, name, sum(names, []), listed or " and ".join(
                f"help(resnet_nobn.{c.__name__})" for c in classes))
    return [{k: v for k, v in fields.items() if k in n} for n in names]


def json_typed(f, value):
    """A JSON `value` as field `f` holds it: lists as tuples (integers, or names), numbers as int or
    float, when they are that number exactly."""
    kinds = typing.get_args(f.type) or (f.type,)
    if (tuple in kinds or typing.get_origin(f.type) is tuple) and isinstance(value, list):
        return tuple(v if str in kinds else _number(v, int) for v in value)  # names stay names
    for kind in (int, float):
        if kind in kinds:
            return _number(value, kind)
    return value


def _number(value, kind):
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return value
    try:
        x = float(value)
    except ValueError:
        return value
    if not math.isfinite(x) or (kind is int and x != int(x)):
        return value
    return kind(x)
