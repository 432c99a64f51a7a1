"""Section 2 of Hardt & Ma (linear residual networks): theory/linear.py and theory/linear_experiment.py."""
import glob
import json
import math
import os

import numpy as np
import pytest
import scipy.linalg as sla
import tensorflow as tf

from theory import linear as L


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
    R = L.random_R(d, rng, 0.5)
    Sigma = L.random_Sigma(d, rng, 0.3, 2.0)
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
    R = L.random_R(d, rng, 0.7)
    Sigma = L.random_Sigma(d, rng, 0.2, 3.0)
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


def test_gradient_is_not_transposed_or_misordered():
    """Lemma 2.4's factor order matters: the wrong order gives a different matrix."""
    rng = _rng(3)
    A = 0.3 * rng.standard_normal((3, 4, 4))
    R, Sigma = L.random_R(4, rng), L.random_Sigma(4, rng, 0.5, 2.0)
    g = L.gradient(A, R, Sigma).numpy()
    E = _explicit_product(A) - R
    I = np.eye(4)
    expected_1 = 2 * (I + A[2].T) @ E @ Sigma @ (I + A[0].T)      # dF/dA_2 (middle layer)
    assert np.allclose(g[1], expected_1, atol=1e-12)
    wrong = 2 * (I + A[0].T) @ E @ Sigma @ (I + A[2].T)
    assert not np.allclose(g[1], wrong, atol=1e-3)


# ---------------------------------------------------------------- Theorem 2.1

def _cases():
    rng = _rng(5)
    Q = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    Q[:, 0] *= np.sign(np.linalg.det(Q))
    return {
        "rand_even": L.random_R(8, rng, 1.0),
        "rand_odd": L.random_R(7, rng, 1.0),
        "rand_64": L.random_R(64, rng, 0.5),
        "identity": np.eye(5),
        "d1": np.array([[0.3]]),
        "minus_I4": -np.eye(4),                                   # two rotations by exactly pi
        "rot_pi_odd": sla.block_diag(L._rot(math.pi), [[1.0]]),
        "near_pi": sla.block_diag(L._rot(math.pi - 1e-9), [[2.0]]),
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
    R = L.random_R(4, rng, 1.0)
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
        R = L.random_R(d, rng, 1.2)
        A = L.global_optimum(R, 40, method=method)
        assert np.allclose(_explicit_product(A), R, atol=1e-10)


@pytest.mark.parametrize("R", [np.diag([-1.0, 1.0]), np.diag([-2.0, 1.0, 1.0]), np.zeros((3, 3)),
                               -np.eye(3)])
def test_nonpositive_determinant_is_refused_with_reason(R):
    with pytest.raises(ValueError, match=r"det R .*<= 0.*positive determinant"):
        L.global_optimum(R, 10)


# ---------------------------------------------------------------- Theorem 2.2 and eq. (2.3)

def test_printed_equation_23_has_a_counterexample_and_the_proof_form_is_tight():
    lhs, printed_rhs, proof_rhs = L.printed_counterexample()
    assert lhs == pytest.approx(9 / 8)
    assert printed_rhs == pytest.approx(9 / 4)
    assert lhs < printed_rhs                                    # (2.3) as printed fails
    assert lhs == pytest.approx(proof_rhs)                      # the proof's form holds with equality


def test_proof_forms_hold_on_random_points_of_B_tau():
    rng = _rng(17)
    for d, ell, tau in [(3, 5, 0.2), (8, 32, 0.05), (2, 2, 0.9)]:
        R = L.random_R(d, rng, 1.0)
        Sigma = L.random_Sigma(d, rng, 0.2, 1.0)
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
    A, R = L.adversarial_search(ell, d, tau, Sigma, batch=4, steps=80, seed=1)
    assert np.all(L.spectral_norms(A) <= tau + 1e-9)            # stayed in B_tau
    out = L.gradient_bounds(A, R, Sigma, tau=tau)
    margin = out["proof_general"][0] - out["proof_general"][1]
    assert np.all(margin >= -1e-6)
    assert margin.min() < 0.05                                  # and found a near-tight point
    assert np.any(out["printed"][0] < out["printed"][1])        # violating the printed form


def test_checks_quick_all_proved_claims_pass():
    results = L.checks(quick=True)
    keys = {"claim", "instances", "worst_margin", "passed", "proved", "detail"}
    assert all(set(r) >= keys for r in results)
    assert all(r["instances"] > 0 for r in results)
    failed = [r["claim"] for r in results if r["proved"] and not r["passed"]]
    assert not failed, failed
    printed = [r for r in results if "as printed" in r["claim"]]
    assert printed and not all(r["passed"] for r in printed)    # the counterexample is reported


# ---------------------------------------------------------------- the optimization experiment

def test_experiment_residual_beats_standard_and_writes_outputs(tmp_path):
    from theory import linear_experiment
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
