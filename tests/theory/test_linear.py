"""Section 2 of Hardt & Ma (linear residual networks): theory/section2/ (linear.py, optimum.py,
experiment.py, the checks and their references) and the report harness theory/check.py."""
import glob
import json
import math
import os

import numpy as np
import pytest
import scipy.linalg as sla
import tensorflow as tf

from theory.section2 import checks as C
from theory.section2 import checks_bounds as B
from theory.section2 import linear as L
from theory.section2 import optimum as O
from theory.section2 import references as REF


def _rng(seed=0):
    return np.random.default_rng(seed)


def _explicit_product(A):
    """(I + A[-1]) ... (I + A[0]) spelled out with multi_dot, independent of the module."""
    d = A.shape[-1]
    P = np.eye(d)
    for a in A[::-1]:                       # left to right: (I + A[-1]) (I + A[-2]) ...
        P = P @ (np.eye(d) + a)
    return P


# ---------------------------------------------------------------- Claim 2.3 and Lemma 2.4

def test_population_risk_matches_empirical_risk():
    rng = _rng(1)
    d, ell, n = 5, 3, 200_000
    R = REF.random_R(d, rng, 0.5)
    Sigma = REF.random_Sigma(d, rng, 0.3, 2.0)
    A = 0.2 * rng.standard_normal((ell, d, d)) / math.sqrt(d)
    X, Y = L.sample(R, Sigma, n, seed=7)
    losses = L.empirical_risk(A, X, Y, per_sample=True).numpy()
    f = float(L.population_risk(A, R, Sigma))
    se = losses.std() / math.sqrt(n)
    assert abs(losses.mean() - f) < 5 * se
    assert abs(losses.mean() - f) < 0.01 * f
    # C = E|xi|^2 = d: at the optimum (E = 0) the risk is d
    A_star = L.global_optimum(R, ell)
    assert float(L.population_risk(A_star, R, Sigma)) == pytest.approx(d, abs=1e-9)


@pytest.mark.parametrize("ell,d", [(1, 1), (2, 3), (7, 4), (40, 6)])
def test_closed_form_gradient_equals_autodiff(ell, d):
    rng = _rng(ell * 10 + d)
    R = REF.random_R(d, rng, 0.7)
    Sigma = REF.random_Sigma(d, rng, 0.2, 3.0)
    A = 0.5 / ell * rng.standard_normal((3, ell, d, d))       # batched
    g_cf = L.gradient(A, R, Sigma).numpy()
    g_ad = L.autodiff_gradient(A, R, Sigma).numpy()
    assert g_cf.shape == A.shape
    assert np.max(np.abs(g_cf - g_ad)) <= 1e-10 * np.max(np.abs(g_ad))
    # and against a central finite difference on one entry (independent of TensorFlow's autodiff)
    i, j, k, h = ell - 1, 0, d - 1, 1e-6
    Ap, Am = A[0].copy(), A[0].copy()
    Ap[i, j, k] += h
    Am[i, j, k] -= h
    fd = (float(L.population_risk(Ap, R, Sigma)) - float(L.population_risk(Am, R, Sigma))) / (2 * h)
    assert fd == pytest.approx(g_cf[0, i, j, k], rel=1e-6, abs=1e-8)


def _lemma24_by_hand(A, R, Sigma):
    """The proof's order, spelled out: 2 (I+A_{i+1}^T)...(I+A_l^T) E Sigma (I+A_1^T)...(I+A_{i-1}^T)."""
    ell, d = A.shape[0], A.shape[-1]
    E = _explicit_product(A) - R
    out = []
    for i in range(ell):
        left, right = np.eye(d), np.eye(d)
        for j in range(i + 1, ell):                 # (I + A_{i+1}^T) (I + A_{i+2}^T) ... (I + A_l^T)
            left = left @ (np.eye(d) + A[j].T)
        for j in range(i):                          # (I + A_1^T) ... (I + A_{i-1}^T)
            right = right @ (np.eye(d) + A[j].T)
        out.append(2 * left @ E @ Sigma @ right)
    return np.stack(out)


@pytest.mark.parametrize("ell", [4, 6])
def test_gradient_factor_order_at_depth_4_and_more(ell):
    """Lemma 2.4: with l >= 4 every layer but the middle ones has a product of >= 2 factors, so a
    misordered product (the paper's printed order) is seen; the proof's order is the gradient."""
    rng = _rng(3)
    d = 4
    A = 0.4 * rng.standard_normal((ell, d, d)) / math.sqrt(d)
    R, Sigma = REF.random_R(d, rng), REF.random_Sigma(d, rng, 0.5, 2.0)
    g = L.gradient(A, R, Sigma).numpy()
    assert np.allclose(g, _lemma24_by_hand(A, R, Sigma), rtol=0, atol=1e-12)
    assert np.allclose(g, L.autodiff_gradient(A, R, Sigma).numpy(), rtol=0, atol=1e-12)
    printed = REF.gradient_as_printed(A, R, Sigma)
    rel = np.linalg.norm(printed - g, axis=(1, 2)) / np.linalg.norm(g, axis=(1, 2))
    assert np.all(rel > 0.05), rel                  # every layer has a product of >= 2 factors
    # at l = 2 each product has at most one factor, and the two orders agree
    assert np.allclose(REF.gradient_as_printed(A[:2], R, Sigma), L.gradient(A[:2], R, Sigma).numpy(),
                       rtol=0, atol=1e-12)


# ---------------------------------------------------------------- Theorem 2.1

def _cases():
    rng = _rng(5)
    Q = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    Q[:, 0] *= np.sign(np.linalg.det(Q))
    return {
        "rand_even": REF.random_R(8, rng, 1.0),
        "rand_odd": REF.random_R(7, rng, 1.0),
        "rand_64": REF.random_R(64, rng, 0.5),
        "identity": np.eye(5),
        "d1": np.array([[0.3]]),
        "minus_I4": -np.eye(4),                                   # two rotations by exactly pi
        "rot_pi_odd": sla.block_diag(O.rotation(math.pi), [[1.0]]),
        "near_pi": sla.block_diag(O.rotation(math.pi - 1e-9), [[2.0]]),
        "sym_negative_pair": Q @ np.diag([-1, -3, 2, 1, 1, 0.5]) @ Q.T,
        "repeated_sv": 3.0 * Q,
        "psd": (lambda M: M @ M.T + 0.5 * np.eye(5))(rng.standard_normal((5, 5))),
    }


@pytest.mark.parametrize("name", list(_cases()))
@pytest.mark.parametrize("depth", [1, 2, 3, 8, 101, 256])
def test_global_optimum_factorizes_R_within_bound(name, depth):
    R = _cases()[name]
    d = R.shape[0]
    A = L.global_optimum(R, depth)
    assert isinstance(A, np.ndarray) and A.shape == (depth, d, d)
    assert np.allclose(_explicit_product(A), R, rtol=0, atol=1e-10 * depth * max(1, np.abs(R).max()))
    g = L.gamma(R)
    if depth >= 3 * g and depth >= 2:
        assert L.spectral_norms(A).max() <= L.theorem21_bound(R, depth) + 1e-12
    if depth >= 8:
        assert L.spectral_norms(A).max() < 1                   # all factors invertible, near I


def test_global_optimum_order_A0_applied_first():
    rng = _rng(9)
    R = REF.random_R(4, rng, 1.0)
    A = L.global_optimum(R, 5, method="svd")
    x = rng.standard_normal(4)
    h = x
    for a in A:                                                 # h_j = h_{j-1} + A_j h_{j-1}
        h = h + a @ h
    assert np.allclose(h, R @ x, atol=1e-10)


def test_identity_gives_zero_and_psd_case_is_the_paper_formula():
    assert np.all(L.global_optimum(np.eye(4), 6) == 0)
    rng = _rng(11)
    M = rng.standard_normal((6, 6))
    R = M @ M.T + 0.2 * np.eye(6)
    for depth in (4, 30):
        A = L.global_optimum(R, depth)
        root = sla.fractional_matrix_power(R, 1.0 / depth).real
        assert np.allclose(A, root - np.eye(6), atol=1e-10)      # A_j = R^(1/l) - I for all j
        if depth >= 3 * L.gamma(R):
            assert L.spectral_norms(A).max() <= 3 * L.gamma(R) / depth


@pytest.mark.parametrize("method", ["svd", "polar"])
def test_both_general_constructions_factor_R(method):
    rng = _rng(13)
    for d in (2, 3, 9):
        R = REF.random_R(d, rng, 1.2)
        A = L.global_optimum(R, 40, method=method)
        assert np.allclose(_explicit_product(A), R, atol=1e-10)


@pytest.mark.parametrize("R,depth", [(np.diag([-1.0, 1.0]), 8), (-np.eye(3), 16),
                                     (np.diag([-1.0, 2.0, 3.0]), 30)])
def test_negative_determinant_is_refused_only_where_the_bound_is_at_most_1(R, depth):
    assert L.theorem21_bound(R, depth) <= 1
    with pytest.raises(ValueError, match=r"det R = .* < 0 .*eigenvalue of A_j below -1.*<= 1 .*no "
                                         r"factorization"):
        L.global_optimum(R, depth)


@pytest.mark.parametrize("R,depth", [(np.diag([-1.0, 2.0, 3.0]), 8), (np.diag([-1.0, 1.0]), 4),
                                     (-np.eye(3), 2), (np.diag([-0.5, 2.0]), 16)])
def test_negative_determinant_is_factorized_within_a_bound_above_1(R, depth):
    """The issue's example: R = diag(-1, 2, 3) at l = 8 (bound 3.22); A_1 = R - I would do, and the
    construction does better (one factor of norm 1 + a, a chosen to minimise the largest norm)."""
    bound = L.theorem21_bound(R, depth)
    assert bound > 1
    A = L.global_optimum(R, depth)
    assert A.shape == (depth,) + R.shape
    assert np.allclose(_explicit_product(A), R, atol=1e-9)
    assert 1 < L.spectral_norms(A).max() <= bound
    assert np.linalg.det(np.eye(len(R)) + A[0]) < 0 < np.linalg.det(np.eye(len(R)) + A[1])


@pytest.mark.parametrize("R", [np.zeros((3, 3)), np.diag([0.0, 1.0, 2.0]), np.diag([0.0, -1.0, 2.0])])
def test_singular_R_is_factorized_with_one_projection(R):
    assert L.gamma(R) == math.inf
    A = L.global_optimum(R, 8)
    assert np.allclose(_explicit_product(A), R, atol=1e-12)
    assert L.spectral_norms(A)[0] == pytest.approx(1.0)


def test_paper_construction_is_within_the_proofs_bound_and_footnote_4():
    """method='paper': the proof's split l = 2q + p, q rounded (footnote 4); |||A||| <= max(pi/q, 3g/p),
    and the rounding costs 1% against the printed bound for a rotation by pi in 3-D at l = 101."""
    R = sla.block_diag(O.rotation(math.pi), [[1.0]])
    A = L.global_optimum(R, 101, method="paper")
    assert np.allclose(_explicit_product(A), R, atol=1e-12)
    assert L.paper_split(0.0, 101) == (50, 1)
    ratio = L.spectral_norms(A).max() / L.theorem21_bound(R, 101)
    assert ratio == pytest.approx(2 * math.sin(math.pi / 100) / (2 * math.pi / 101))
    assert 1.009 < ratio < 1.011
    rng = _rng(21)
    for d, ell in [(3, 8), (5, 32), (8, 101)]:
        R = REF.random_R(d, rng, 1.2)
        g = L.gamma(R)
        q, p = L.paper_split(g, ell)
        assert 2 * q + p == ell and q >= 1 and p >= 1
        A = L.global_optimum(R, ell, method="paper")
        assert np.allclose(_explicit_product(A), R, atol=1e-10)
        assert L.spectral_norms(A).max() <= max(math.pi / q, 3 * g / p) + 1e-12


def test_paper_construction_row_fails_when_the_split_is_broken(monkeypatch):
    """The check gates the proof's construction on its own row: a split of [1, 1, l-2] fails it."""
    from theory.section2 import optimum as linear_optimum
    rng = np.random.default_rng(0)
    assert next(r for r in C.theorem21(True, rng) if r.id == "L6").status == "PASS"
    monkeypatch.setattr(linear_optimum, "paper_split", lambda g, ell: (1, ell - 2))
    rng = np.random.default_rng(0)
    row = next(r for r in C.theorem21(True, rng) if r.id == "L6")
    assert row.status == "FAIL" and row.worst < -1


def test_check_uses_its_own_gamma_and_bound(monkeypatch):
    """A construction 10x over the bound fails L5 even if the module's gamma/bound are inflated."""
    from theory.section2 import optimum as linear_optimum
    monkeypatch.setattr(linear_optimum, "theorem21_bound", lambda R, depth: 1e9)
    monkeypatch.setattr(linear_optimum, "gamma", lambda R: 0.0)
    good = linear_optimum.global_optimum
    def one_big_factor(R, depth, method="auto"):          # A_1 = R - I, the others 0
        return np.concatenate([good(R, 1), np.zeros((depth - 1,) + R.shape)])
    monkeypatch.setattr(L, "global_optimum", lambda R, depth, method="auto": (
        good(R, depth, method) if depth < 3 else one_big_factor(R, depth)))
    row = next(r for r in C.theorem21(True, np.random.default_rng(0)) if r.id == "L5")
    assert row.status == "FAIL"


# ---------------------------------------------------------------- Theorem 2.2 and eq. (2.3)

def test_printed_equation_23_has_a_counterexample_and_the_proof_form_is_tight():
    lhs, printed_rhs, proof_rhs = B.printed_counterexample()
    assert lhs == pytest.approx(9 / 8)
    assert printed_rhs == pytest.approx(9 / 4)
    assert lhs < printed_rhs                                    # (2.3) as printed fails
    assert lhs == pytest.approx(proof_rhs)                      # the proof's form holds with equality


def test_proof_forms_hold_on_random_points_of_B_tau():
    rng = _rng(17)
    for d, ell, tau in [(3, 5, 0.2), (8, 32, 0.05), (2, 2, 0.9)]:
        R = REF.random_R(d, rng, 1.0)
        Sigma = REF.random_Sigma(d, rng, 0.2, 1.0)
        A = rng.standard_normal((20, ell, d, d))
        A *= tau / np.linalg.norm(A, ord=2, axis=(-2, -1))[..., None, None]
        A[0] = -tau * np.eye(d)
        out = L.gradient_bounds(A, R, Sigma)
        for form in ("proof", "proof_general", "per_layer"):
            lhs, rhs = out[form]
            assert np.all(lhs >= rhs - 1e-9), form
    # sigma_max(Sigma) > 1 breaks the s^2 proof form, not the general one
    d = 3
    out = L.gradient_bounds(np.zeros((4, d, d)), 2 * np.eye(d), 4 * np.eye(d))
    assert out["proof"][0] < out["proof"][1]
    assert out["proof_general"][0] >= out["proof_general"][1] - 1e-9


def test_adversarial_search_approaches_but_never_crosses_the_proof_bound():
    d, ell, tau = 3, 4, 0.2
    Sigma = np.eye(d)
    A, R = B.adversarial_search(ell, d, tau, Sigma, batch=4, steps=80, seed=1)
    assert np.all(L.spectral_norms(A) <= tau + 1e-9)            # stayed in B_tau
    out = L.gradient_bounds(A, R, Sigma, tau=tau)
    margin = out["proof_general"][0] - out["proof_general"][1]
    assert np.all(margin >= -1e-6)
    assert margin.min() < 0.05                                  # and found a near-tight point
    assert np.any(out["printed"][0] < out["printed"][1])        # violating the printed form


def test_critical_points_in_the_ball_are_global_minima_and_outside_need_not_be():
    """Theorem 2.2 itself: critical points found by Levenberg-Marquardt on grad f = 0."""
    rng = _rng(23)
    ell, d = 3, 2
    Sigma = np.eye(d)
    R = _explicit_product(0.2 * rng.standard_normal((ell, d, d)))
    A0 = 0.3 * rng.standard_normal((6, ell, d, d))
    A0[:2, :2] = -np.eye(d) + 0.02 * rng.standard_normal((2, 2, d, d))     # near A_1 = A_2 = -I
    for _ in range(100):                                                    # the others descend first
        A0[2:] -= 0.05 * L.gradient(A0[2:], R, Sigma).numpy()
    A, gnorm, excess = B.critical_points(A0, R, Sigma)
    assert np.all(gnorm < 1e-9)
    inside = L.spectral_norms(A).max(axis=1) <= B.TAU_IN
    assert inside.sum() >= 2 and np.all(excess[inside] < 1e-20)
    assert np.any(excess[~inside] > 0.1 * np.trace(R @ R.T))               # a saddle at |||A||| >= 1


def test_check_rows_quick():
    """Every Section 2 row: one kind, its own time, a named quantity, lines <= 120 characters;
    the printed statements are REFUTED and name the row that holds; nothing fatal."""
    from theory import check
    rows = list(check.rows_of(C, 20170424, quick=True))
    ids = [r.id for r in rows]
    assert ids == [f"L{i}" for i in range(1, 20) if i != 8]
    status = {r.id: r.status for r in rows}
    assert not [r.id for r in rows if r.fatal], status
    for rid in ("L2", "L14", "L17", "L19"):
        assert status[rid] == "REFUTED"
        corrected = next(r for r in rows if r.id == rid).corrected_by
        assert corrected and all(status[c.strip()] in ("PASS", "HOLDS") for c in corrected.split(","))
    assert status["L10"] == "OK" and status["L12"] == "OK"
    for r in rows:
        assert r.instances > 0 and r.quantity and r.seconds > 0 and np.isfinite(r.worst)
        assert all(len(line) <= 120 for line in r.lines()), r.id
    psd = next(r for r in rows if r.id == "L7")
    assert psd.worst > 0 and "R = I" in psd.detail[0]                    # R = I reported apart


# ---------------------------------------------------------------- the optimization experiment

def test_experiment_residual_beats_standard_and_writes_outputs(tmp_path):
    from theory.section2 import experiment as linear_experiment
    out = str(tmp_path / "exp")
    rc = linear_experiment.main(["--out", out, "--depths", "1", "16", "--steps", "200",
                                 "--lr", "0.1", "--dim", "6", "--log-every", "20"])
    assert rc == 0
    summary = json.load(open(os.path.join(out, "linear_gd.json")))
    res, std = summary["final"]["residual"], summary["final"]["standard"]
    assert res["16"] < 1e-6                                     # residual reaches the optimum
    assert std["16"] > 0.5                                      # standard stalls at W = 0
    assert std["1"] < 1e-6                                      # depth 1 is convex: both converge
    assert os.path.getsize(os.path.join(out, "linear_gd.png")) > 10_000
    events = glob.glob(os.path.join(out, "*", "depth_*", "events.out.tfevents.*"))
    assert len(events) == 4
    tags = set()
    for ev in events:
        for e in tf.compat.v1.train.summary_iterator(ev):
            tags.update(v.tag for v in e.summary.value)
    assert "relative_excess_risk" in tags


# ---------------------------------------------------------------- the checks can fail


def _row(rows, rid):
    return next(r for r in rows if r.id == rid)


def test_L1_catches_a_reversed_product(monkeypatch):
    """The empirical risk is computed in the check with the product written out: a reversed
    product in theory.section2.linear fails L1 (it passed when both sides used the module)."""
    good = L.product
    monkeypatch.setattr(L, "product", lambda A: good(np.asarray(A)[..., ::-1, :, :]))
    assert _row([C.claim23(True, np.random.default_rng(0))], "L1").status == "FAIL"


def test_L3_catches_a_gradient_that_autodiff_would_share(monkeypatch):
    """A bug shared by the closed form and autodiff (both through the module's product) passes a
    comparison of the two; L3 also compares with central differences computed in the check."""
    good = L.gradient
    def layers_swapped(A, R, Sigma):
        g = good(A, R, Sigma).numpy()
        return tf.constant(g[..., ::-1, :, :].copy())
    monkeypatch.setattr(L, "gradient", layers_swapped)
    monkeypatch.setattr(L, "autodiff_gradient", layers_swapped)
    assert _row(C.lemma24(True, np.random.default_rng(0)), "L3").status == "FAIL"


def test_L4_tolerance_is_about_1e_11_per_layer(monkeypatch):
    good = L.global_optimum
    def off(R, depth, method="auto"):
        A = good(R, depth, method)
        A[0] += 1e-10                           # one layer off by 1e-10 (the old tolerance was 3e-8)
        return A
    monkeypatch.setattr(L, "global_optimum", off)
    row = _row(C.theorem21(True, np.random.default_rng(0)), "L4")
    assert row.status == "FAIL" and row.holds_if == "<= 1e-11"


def test_the_check_uses_its_own_spectral_norms(monkeypatch):
    """A construction 1.5x over the bound at its tightest fails L5 even if theory's spectral norms
    are halved (the check's own norms come from singular values)."""
    good = L.global_optimum
    half = lambda A: 0.5 * np.linalg.norm(A, ord=2, axis=(-2, -1))   # noqa: E731
    monkeypatch.setattr(L, "spectral_norms", half)
    monkeypatch.setattr(O, "spectral_norms", half)
    monkeypatch.setattr(L, "global_optimum", lambda R, depth, method="auto": 3.0 * good(R, depth, method))
    assert _row(C.theorem21(True, np.random.default_rng(0)), "L5").status == "FAIL"


def test_edge_cases_have_the_determinant_sign_they_are_listed_with():
    """repeated_sv_6 was listed with det R > 0 but had det R = -1730; the det R < 0 cases are in the
    product check L4."""
    rng = np.random.default_rng(0)
    assert all(np.linalg.det(R) > 0 for R in REF.special_Rs(rng).values())
    assert all(np.linalg.det(R) < 0 for R in REF.negative_Rs(rng).values())
    row = _row(C.theorem21(True, np.random.default_rng(0)), "L4")
    assert "householder_4" in row.detail[0] and " with det R < 0" in row.detail[0]
    assert int(row.detail[0].split(" with det R < 0")[0].rsplit("(", 1)[1]) >= 10


def test_L10_is_a_fatal_control_of_the_det_R_negative_product(monkeypatch):
    rows = C.theorem21_det(True, np.random.default_rng(0))
    assert _row(rows, "L10").status == "OK" and _row(rows, "L10").kind == "control"
    real = L.global_optimum

    def wrong_product(R, depth, method="auto"):
        A = real(R, depth, method)
        if np.linalg.det(R) < 0:
            A[1] += 1e-6                    # inside the bound, but no longer a factorization of R
        return A
    monkeypatch.setattr(L, "global_optimum", wrong_product)
    row = _row(C.theorem21_det(True, np.random.default_rng(0)), "L10")
    assert row.status == "FAILED" and row.fatal


def test_L11_needs_critical_points_from_fresh_starts_and_L12_is_fatal(monkeypatch):
    """With no search steps (the starts returned as they are), L11 fails (too few certified
    critical points from starts not run through gradient descent) and L12, a control, is fatal."""
    real = B.critical_points
    monkeypatch.setattr(B, "critical_points", lambda A0, R, Sigma, steps=80, **kw: real(A0, R, Sigma, steps=0))
    rows = B.theorem22_critical(True, np.random.default_rng(0))
    assert _row(rows, "L11").status == "FAIL"
    assert _row(rows, "L12").status == "FAILED" and _row(rows, "L12").fatal


def test_L13_L15_L16_check_equality_at_the_tight_point(monkeypatch):
    """A right side smaller by a factor 2 still satisfies the one-sided bound; equality at
    A_j = -tau I (Sigma = I) catches it."""
    real = L.gradient_bounds

    def loose(*a, **k):
        out = real(*a, **k)
        for form in ("per_layer", "proof", "proof_general"):
            out[form] = (out[form][0], out[form][1] - np.log(2.0))
        return out
    monkeypatch.setattr(L, "gradient_bounds", loose)
    rows = B.equation23(True, np.random.default_rng(0))
    assert [_row(rows, i).status for i in ("L13", "L15", "L16")] == ["FAIL"] * 3


def test_L2_says_the_norms_it_measured():
    row = _row(C.lemma24(True, np.random.default_rng(0)), "L2")
    assert "measured |A_j| in [" in row.detail[0] and "~ 0.4" not in row.detail[0]
