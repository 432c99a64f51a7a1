"""Section 3 of Hardt & Ma: finite-sample expressivity (Theorem 3.2).  The mathematics:
assumption31.py (the data, Assumption 3.1), expressivity.py (fit_network: k, the draws, the
certificate), lemma_b1.py (Lemma B.1 block by block), model.py (the Keras model), verify.py (the
network on every point).  The checks: checks.py (rows E1-E7 and the section's GROUPS)."""
