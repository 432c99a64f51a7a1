"""What a run prints: one line per event, from the chief only, durations as h:mm:ss, names with
their control characters escaped (`printable`), and nothing of TensorFlow's C++ start-up
(`quiet_stderr`)."""
import contextlib
import os
import sys


def log(msg, chief=True):
    if chief:
        print(msg, flush=True)


def hms(seconds):
    """Seconds as h:mm:ss, e.g. 3725.4 -> '1:02:05'."""
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def printable(text):
    r"""`text` with its control and other unprintable characters escaped (\x1b, \u202e): a label
    name or file name from someone else cannot send escape sequences to the terminal."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(text))


@contextlib.contextmanager
def quiet_stderr():
    """Sends file descriptor 2 to /dev/null inside the block (C++ start-up logging that
    TF_CPP_MIN_LOG_LEVEL does not silence); an exception raised inside restores it first."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
