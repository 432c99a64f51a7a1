"""The fault campaigns as tests (marker `faults`): black-box cases that run the project's commands
on tiny runs under the faults a user meets, and check what the project promises.

    python -m pytest tests/faults -n 2             # the quick cases; FAULTS=all: every case
    python -m pytest tests -n 2 -m "not faults"    # the rest of the suite without them

test_kills.py SIGKILLs a run again and again (kills.py); test_campaigns.py runs each case of
campaigns 2 and 3 (one module per section, helpers.py their helpers); campaign.py prints a whole
campaign's table, as docs/benchmarks.md shows it.
"""
