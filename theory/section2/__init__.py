"""Section 2 of Hardt & Ma: linear residual networks.  The mathematics: linear.py (the network,
Claim 2.3, Lemma 2.4, Theorem 2.2 / eq. (2.3)), optimum.py (Theorem 2.1), experiment.py (gradient
descent, residual against standard).  The checks: references.py (what they compare against),
checks.py (rows L1-L10 and the section's GROUPS), checks_bounds.py (rows L11-L19)."""
