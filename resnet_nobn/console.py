"""What a run prints: one line per event, from the chief only, and durations as h:mm:ss."""


def log(msg, chief=True):
    if chief:
        print(msg, flush=True)


def hms(seconds):
    """Seconds as h:mm:ss, e.g. 3725.4 -> '1:02:05'."""
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
