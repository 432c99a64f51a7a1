"""theory/section5/conjecture.py: Section 5's conjecture probed by projected gradient descent from many
starts, with Theorem 2.2's linear network as the control."""
import numpy as np

from theory.section5 import conjecture


def test_rows_are_plain_data_and_the_linear_control_holds():
    rows = conjecture.probe(quick=True)
    assert [("Theorem 2.2" in r["name"], "Section 5" in r["name"]) for r in rows] == [
        (True, False), (False, True)]
    linear, relu = rows
    for row in rows:
        assert row["verdict"] in ("HOLDS", "DOES NOT HOLD", "INCONCLUSIVE")
        assert len(row["final_losses"]) == row["starts"] == conjecture.QUICK.starts
        assert row["largest_bound"] <= row["tau"] * (1 + 1e-9)  # every start stayed in the ball
        assert f"{row['reached']}/{row['starts']} starts reached" in row["detail"]
    # Theorem 2.2: from every start inside B_tau, projected descent reaches the global minimum 0
    assert linear["verdict"] == "HOLDS" and max(linear["final_losses"]) <= conjecture.REACHED
    if relu["verdict"] == "HOLDS":
        assert relu["reached"] == relu["starts"]
    if relu["verdict"] == "DOES NOT HOLD":
        assert relu["stuck"] > 0


def test_a_stuck_start_is_reported_as_a_counterexample(monkeypatch):
    """The verdict can say DOES NOT HOLD: starts that end stationary above the minimum (here
    a descent replaced by one that stops at loss 0.5 of the identity's) are counterexamples."""
    monkeypatch.setattr(conjecture, "_descend", lambda net, size: dict(
        loss=np.full(size.starts, 0.5), stationarity=np.zeros(size.starts),
        stalled=np.ones(size.starts, bool), boundary=np.zeros(size.starts, bool),
        dead=np.zeros(size.starts, int), largest=0.1))
    row = conjecture._row(conjecture._ReLU, conjecture.QUICK)
    assert row["verdict"] == "DOES NOT HOLD" and row["stuck"] == conjecture.QUICK.starts


def test_the_rows_are_in_the_report_and_never_fatal(monkeypatch):
    """C1, C2 are rows of `python -m theory.check` (theory/section5/checks.py): empirical, so a
    counterexample (DOES NOT HOLD) or an undecided probe (INCONCLUSIVE) is reported, never fatal."""
    from theory.section5 import checks
    rows = checks.GROUPS[0].run(True, None)
    assert [r.id for r in rows] == ["C1", "C2"] and rows[0].status == "HOLDS"
    for verdict, status in (("DOES NOT HOLD", "DOES NOT HOLD"), ("INCONCLUSIVE", "INCONCLUSIVE")):
        fake = dict(name="x", verdict=verdict, detail="d", final_losses=[0.5], starts=1, tau=0.5)
        monkeypatch.setattr(conjecture, "probe", lambda quick, fake=fake: [fake, fake])
        rows = checks.GROUPS[0].run(True, None)
        assert [r.status for r in rows] == [status, status] and not any(r.fatal for r in rows)
