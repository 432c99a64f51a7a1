"""Section 5 of Hardt & Ma: the conjecture that Theorem 2.2 carries over to residual blocks with one
ReLU.  The probe: conjecture.py (projected gradient descent from many starts inside the ball, with
the linear network of Theorem 2.2 as the control).  The checks: checks.py (rows C1-C2, never
fatal: an open question)."""
