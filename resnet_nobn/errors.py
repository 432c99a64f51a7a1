"""The errors a user can fix: each is reported as one line on stderr, exit status 2 (cli.py)."""


class UserError(Exception):
    """Bad input, or a failed run the user can fix (the message says how)."""


class TrainingDiverged(UserError):
    """The loss or the weights stopped being finite; the message ends with the `retry with:` flags."""


def prepare_data_command(name, data_dir="DIR"):
    """The command that downloads and prepares dataset `name` in `data_dir` (run/prepare_data.py):
    the fix every message about missing or damaged data names."""
    return f"python run/prepare_data.py --dataset={name} --data_dir={data_dir}"
