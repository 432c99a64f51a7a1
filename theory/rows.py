"""One row of `python -m theory.check`: a statement of the paper, what was measured, the verdict.

Three kinds of statement:
  proved     a statement with a proof (the paper's, or the paper's with a slip corrected).  PASS if
             the measured quantity met its condition on every instance, else FAIL (exit status 1).
  printed    a statement as the paper prints it that a counterexample refutes.  REFUTED when the
             counterexample is found (the row then names it, and `corrected_by` the row that holds);
             NOT REFUTED otherwise, which means the check lost its counterexample (exit status 1).
  empirical  a question without a proof (e.g. whether a constant suffices).  HOLDS or DOES NOT HOLD,
             reported, never fatal; INCONCLUSIVE (`passed` None) when the probe could not tell.
  control    a check that the check itself can see what it looks for (a search finds what it must
             find, a construction multiplies out).  OK or FAILED; FAILED is fatal, since the rows
             that rely on it prove nothing then.
  error      the computation of a group of rows raised: ERROR, fatal (`Group.run`).
Every row names the quantity it reports (`quantity`), its worst value over the instances (`worst`:
the true worst error or slack, not a tolerance) and the condition it must meet (`holds_if`).
"""
import dataclasses
import os
import textwrap
import time
import traceback

WIDTH = 120
STATUS = {("proved", True): "PASS", ("proved", False): "FAIL",
          ("printed", False): "REFUTED", ("printed", True): "NOT REFUTED",
          ("empirical", True): "HOLDS", ("empirical", False): "DOES NOT HOLD",
          ("control", True): "OK", ("control", False): "FAILED",
          ("error", True): "ERROR", ("error", False): "ERROR"}
FATAL = ("FAIL", "NOT REFUTED", "FAILED", "ERROR")


@dataclasses.dataclass
class Row:
    id: str                  # "L3": section letter and number
    claim: str               # the statement, with the paper's reference
    kind: str                # "proved" | "printed" | "empirical" | "control" | "error"
    instances: int
    quantity: str            # what `worst` is, e.g. "max rel. error"
    worst: float
    holds_if: str            # e.g. "<= 1e-9"
    passed: bool             # the condition held on every instance (empirical: None, undecided)
    detail: list             # lines: sizes tried, counterexample, ...
    seconds: float = 0.0
    corrected_by: str = ""   # for a refuted printed statement: the id of the row that holds
    timed_with: str = ""     # rows measured in the same run as this one (one time for all)

    @property
    def status(self):
        if self.kind == "empirical" and self.passed is None:
            return "INCONCLUSIVE"
        return STATUS[(self.kind, bool(self.passed))]

    @property
    def fatal(self):
        return self.status in FATAL

    def lines(self):
        """The row as text lines of at most WIDTH characters."""
        out = textwrap.wrap(f"{self.status:<13} {self.id:<4} {self.claim}", WIDTH,
                            subsequent_indent=" " * 19, break_long_words=True)
        when = f"{self.seconds:.1f}s" + (f" for {self.timed_with}" if self.timed_with else "")
        fig = f"n={self.instances}  {self.quantity} = {self.worst:.3g} (holds if {self.holds_if})  [{when}]"
        if len(out) == 1 and len(out[0]) + 2 + len(fig) <= WIDTH:
            out[0] += " " * (WIDTH - len(out[0]) - len(fig)) + fig
        else:
            out.extend(textwrap.wrap(fig, WIDTH, initial_indent=" " * 19, subsequent_indent=" " * 21,
                                     break_long_words=True))
        extra = ([f"refuted; the statement that holds: {self.corrected_by}"]
                 if self.corrected_by and self.status == "REFUTED" else [])
        for d in list(self.detail) + extra:
            out.extend(textwrap.wrap(d, WIDTH, initial_indent=" " * 19,
                                     subsequent_indent=" " * 21, break_long_words=True))
        return out

    def to_json(self):
        return {**dataclasses.asdict(self), "status": self.status}


class Group:
    """Rows computed together: ``fn(quick, rng) -> Row | [Row]`` that promises the rows ``ids``.

    ``run`` computes them guarded: an exception becomes one ERROR row (fatal) naming the rows lost
    and the exception, so the other groups still run; every row is stamped with the group's time
    (rows computed together share it and say so) and checked against the promised ids."""

    def __init__(self, ids, fn):
        self.ids, self.fn = tuple(ids), fn

    def run(self, quick, rng):
        t = time.time()
        try:
            out = self.fn(quick, rng)
            rows = out if isinstance(out, list) else [out]
            got = tuple(r.id for r in rows)
            if got != self.ids:
                raise RuntimeError(f"{self.fn.__name__} returned rows {got}, promised {self.ids}")
        except Exception as e:               # noqa: BLE001 -- reported as a fatal row, never lost
            rows = [self.error(e)]
        for r in rows:
            r.seconds = time.time() - t
            if len(rows) > 1:
                r.timed_with = f"{rows[0].id}-{rows[-1].id}"
        return rows

    def error(self, e):
        tb = traceback.extract_tb(e.__traceback__)
        where = [f"{os.path.relpath(f.filename)}:{f.lineno} in {f.name}" for f in tb[-2:]]
        ids = self.ids[0] if len(self.ids) == 1 else f"{self.ids[0]}-{self.ids[-1]}"
        msg = " ".join(str(e).split())[:300]
        return Row(ids, f"{self.fn.__name__} raised {type(e).__name__}: {msg}", "error", 0, "rows lost",
                   len(self.ids), "no exception", False, ["raised at " + ", ".join(where)])
