"""The errors a user can fix: each is reported as one line on stderr, exit status 2 (cli.py)."""


class UserError(Exception):
    """Bad input, or a failed run the user can fix (the message says how)."""


class TrainingDiverged(UserError):
    """The loss or the weights stopped being finite; the message ends with the `retry with:` flags."""


def prepare_data_command(name, data_dir="DIR"):
    """The command that downloads and prepares dataset `name` in `data_dir` (run/prepare_data.py):
    the fix every message about missing or damaged data names."""
    return f"python run/prepare_data.py --dataset={name} --data_dir={data_dir or 'DIR'}"


def first_line(e, limit=200):
    """The informative line of an error, at most `limit` characters: not TensorFlow's "Graph
    execution error:" or a traceback; the error's type if it has no text."""
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    skip = ("Graph execution error", "Detected at node", "File ", "Traceback", "[[", "{{")
    useful = [line for line in lines if not line.startswith(skip)]
    return (useful or lines or [type(e).__name__])[0][:limit]


def seconds_from_env(name, default, environ):
    """The positive number of seconds in environment variable `name`, else `default`; UserError
    naming the variable and its default if it is set to anything else (the timeouts' one rule)."""
    text = environ.get(name, "").strip()
    try:
        value = float(text) if text else default
    except ValueError:
        value = None
    if value is None or not 0 < value < float("inf"):
        raise UserError(f"{name}={text!r} is not a positive number of seconds; unset it for the "
                        f"default ({default:.0f}) or give e.g. {name}={default:.0f}")
    return value
