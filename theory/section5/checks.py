"""Section 5 of Hardt & Ma probed numerically: rows C1-C2 of `python -m theory.check`.

C1 is the control of Theorem 2.2 (linear residual network: projected descent inside B_tau reaches
the global minimum from every start), C2 Section 5's conjecture for Section 3's blocks
h + V ReLU(U h + s) inside ||V|| ||U|| <= tau. Both are empirical rows (HOLDS / DOES NOT HOLD /
INCONCLUSIVE, never fatal): a probe of finitely many starts can find a counterexample, not prove
the statement. The probe and what "reached" and "stuck" mean: theory/section5/conjecture.py.
"""
from theory.rows import Group, Row
from theory.section5 import conjecture


def probed(quick, rng):
    """C1, C2 from conjecture.probe (its own fixed seed: the starts do not depend on `rng`)."""
    verdicts = {"HOLDS": True, "DOES NOT HOLD": False, "INCONCLUSIVE": None}
    return [Row(row_id, claim + f" (tau = {r['tau']})", "empirical", r["starts"],
                "max final loss / loss of the identity", max(r["final_losses"]),
                f"<= {conjecture.REACHED} on every start", verdicts[r["verdict"]], [r["detail"]])
            for row_id, claim, r in zip(
                ("C1", "C2"),
                ("Theorem 2.2 (control): projected gradient descent inside B_tau reaches the global "
                 "minimum of a linear residual network from every start",
                 "Section 5's conjecture: the same for residual blocks h + V ReLU(U h + s) inside "
                 "||V|| ||U|| <= tau"),
                conjecture.probe(quick))]


GROUPS = [Group(("C1", "C2"), probed)]
