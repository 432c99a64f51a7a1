"""The errors a user can fix: each is reported as one line on stderr, exit status 2 (cli.py)."""


class UserError(Exception):
    """Bad input, or a failed run the user can fix (the message says how)."""


class TrainingDiverged(UserError):
    """The loss or the weights stopped being finite; the message ends with the `retry with:` flags."""
