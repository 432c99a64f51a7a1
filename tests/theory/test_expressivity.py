"""Theorem 3.2's network (theory/section3/expressivity.py): it fits, it is honest about its size and margins,
and inputs that break Assumption 3.1 are refused with the offending pair named."""
import math
import warnings

import numpy as np
import pytest

from resnet_nobn.model.blocks import ResidualBlock
from theory.section3 import assumption31
from theory.section3 import checks as C
from theory.section3 import expressivity as E


def _data(n=600, d=128, r=7, seed=0):
    return C.random_data(n, d, r, seed)


@pytest.fixture(scope="module")
def built():
    x, y = _data()
    model, cert = E.fit_network(x, y, 7, seed=0)
    return x, y, model, cert


def test_fits_every_point(built):
    x, y, model, cert = built
    out = model.predict(x, batch_size=256, verbose=0)
    assert out.shape == (len(x), 7)
    assert (out.argmax(1) == y).all()
    assert np.abs(out - np.eye(7)[y]).max() <= E.TOL
    assert cert["fits"] and cert["correct_float32"] and cert["correct_float64"]
    assert cert["max_abs_err_float64"] < 1e-10


def test_built_from_project_residual_blocks(built):
    _, _, model, cert = built
    blocks = [l for l in model.layers if isinstance(l, ResidualBlock)]
    assert len(blocks) == cert["ell"] + 1 == cert["depth"]
    assert cert["ell"] == math.ceil(cert["n_unique"] / cert["k"]) and cert["ell"] >= 3
    for b in blocks[:-1]:
        assert b.first.use_bias and not b.second.use_bias and b.shortcut is None
        assert b.first.units == b.second.units == cert["k"]
    assert blocks[-1].shortcut is not None and blocks[-1].shortcut.count_params() == 0


def test_parameter_count_matches_model_and_formula(built):
    x, _, model, cert = built
    n, d = x.shape
    k, r = cert["k"], 7
    ell = math.ceil(n / k)
    by_hand = k * d + ell * (2 * k * k + k) + (k * r + r * r + r)
    assert model.count_params() == cert["params_model"] == cert["params_formula"] == by_hand


def test_margins_reported_and_positive(built):
    _, _, _, cert = built
    m = cert["margins"]
    assert cert["thresholds"] == "per_unit" and cert["k"] == cert["k_formula"] < 128
    for key in ("units", "final_own", "final_cross"):
        assert m[key] >= cert["min_margin"], key
    assert m["worst"] == min(m["units"], m["final_own"], m["final_cross"])
    lo, hi = m["theta_range"]
    assert lo < hi                                    # one threshold per unit, not one for all
    a = cert["margins_float64"]
    assert a["extra_relus"] == 0 and a["own"] > 0 and a["off"] > 0
    # the float64 run achieves the margins the scan predicted (the own margin exactly)
    assert a["own"] == pytest.approx(m["units"], abs=1e-9)
    assert a["off"] >= m["units"] - 1e-5
    assert cert["attempts"][-1]["outcome"] == "accepted"


def test_duplicate_with_different_labels_names_the_pair():
    x, y = _data(n=100, d=32, r=10, seed=1)
    x[40] = x[12]
    y[12], y[40] = 3, 7
    with pytest.raises(ValueError, match=r"points 12 and 40 .*distance 0 .*labels 3 and 7"):
        E.fit_network(x, y, 10)


def test_same_label_duplicate_is_merged_and_fits():
    x, y = _data(n=300, d=64, r=5, seed=2)
    x[250] = x[17]
    y[250] = y[17]
    model, cert = E.fit_network(x, y, 5, seed=2)
    assert cert["n_unique"] == 299 and cert["fits"]
    assert (model.predict(x, verbose=0).argmax(1) == y).all()


@pytest.mark.parametrize("mode", ["exact", "projected"])
def test_close_pair_names_the_pair(mode):
    x, y = _data(n=300, d=64, r=5, seed=3)
    x[25] = x[5] + 1e-3 * np.random.default_rng(0).standard_normal(64).astype(np.float32)
    x[25] /= np.linalg.norm(x[25])
    with pytest.raises(ValueError, match=r"points 5 and 25 .*Assumption 3.1 .*rho = 0.5"):
        E.fit_network(x, y, 5, rho=0.5, assumption_check=mode)


def test_numerically_coincident_points_without_rho():
    x, y = _data(n=200, d=64, r=5, seed=4)
    x[150] = x[9]
    x[150, 0] = np.nextafter(x[9, 0], np.float32(2))   # one ulp apart: not bit-identical
    with pytest.raises(ValueError, match=r"points 9 and 150 .*distinct points"):
        E.fit_network(x, y, 5)


def test_too_small_k_is_redrawn_or_raised_and_says_so():
    """The proof's single threshold with a k far below what it needs: redrawn, then k raised."""
    x, y = _data(n=400, d=128, r=5, seed=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, cert = E.fit_network(x, y, 5, k=30, thresholds="uniform", seed=5, max_attempts=10)
    assert len(cert["attempts"]) >= 2 and cert["k"] > 30 and cert["k_start"] == 30
    assert all("accepted" not in a["outcome"] for a in cert["attempts"][:-1])
    assert any("violates Lemma B.1" in str(w.message) for w in caught)
    assert cert["fits"] and cert["thresholds"] == "uniform"


def test_zero_padding_shortcut_when_r_exceeds_k():
    x, y = _data(n=500, d=256, r=300, seed=6)
    model, cert = E.fit_network(x, y, 300, seed=6)
    assert cert["k"] < 300 and "zero padding" in cert["shortcut"]
    assert cert["fits"] and model.count_params() == cert["params_formula"]


def test_unnormalised_input_and_bad_labels_are_refused():
    x, y = _data(n=50, d=16, r=3, seed=7)
    x[8] *= 2
    with pytest.raises(ValueError, match="point 8 has norm 2"):
        E.fit_network(x, y, 3, normalize=False)
    y[4] = 3
    with pytest.raises(ValueError, match=r"label of point 4 is 3, outside \[0, 3\)"):
        E.fit_network(x, y, 3)


def test_per_unit_thresholds_certify_at_the_papers_k_where_one_threshold_fails():
    """Theorem 3.2 at the paper's width: k = 10 ln n / rho^2 with s_i per unit fits every point at
    rho = 0.35; the proof's s = -theta 1 at the same k has hundreds of wrong ReLUs."""
    n, d, r = 1000, 256, 10
    x, y = C.pairs_data(n, d, r, 0.35, 0)
    data, _ = assumption31.validate(x, y, r)
    rho = assumption31.check(data, mode="exact")["rho"]
    assert rho == pytest.approx(0.35, abs=1e-5)
    k = E.paper_k(n, rho, r)
    assert k == math.ceil(10 * math.log(n) / rho ** 2)
    draw = E.Draw(data, r, k, (0, 9, 0), "per_unit")
    uniform = E.margins(draw.z, draw.q, data.labels, k, "uniform")
    assert draw.m["worst"] >= E.MIN_MARGIN
    assert np.all(draw.m["margin"] >= uniform["margin"] - 1e-12)    # per unit is never worse
    assert uniform["worst"] < 0
    assert E.wrong_relus(draw.z, draw.q, data.labels, k, uniform["theta"]) > 100
    assert E.wrong_relus(draw.z, draw.q, data.labels, k, draw.m["theta"]) == 0


def test_threshold_rows_refute_the_single_threshold_and_hold_per_unit():
    rows = C.thresholds(True, None)
    status = {r.id: r.status for r in rows}
    assert status == {"E5": "REFUTED", "E6": "HOLDS", "E7": "HOLDS"}
    assert "cannot be measured" in " ".join(rows[2].detail)     # the rho^4 half needs the full sizes
    assert rows[0].corrected_by == "E6" and "wrong ReLUs" in rows[0].detail[0]
    assert all(len(line) <= 120 for r in rows for line in r.lines())


def test_search_when_the_formula_exceeds_n():
    """Formula k >= n (and d > n, so no identity embedding): the smallest certifying k <= n."""
    x, y = C.pairs_data(300, 512, 5, 0.4, 3)
    model, cert = E.fit_network(x, y, 5, seed=3)
    assert cert["k_formula"] >= 300 and cert["k"] < 300 and cert["fits"]
    probes = [a for a in cert["attempts"] if a["outcome"].startswith("search")]
    assert len(probes) >= 3 and probes[0]["k"] == 300
    accepted = [a for a in probes if "accepted" in a["outcome"]]
    assert len(accepted) == 1 and accepted[0]["k"] == cert["k"]
    assert all("fails" in a["outcome"] for a in probes if a["k"] < cert["k"])
    assert model.count_params() == E.parameter_formula(300, 512, cert["k"], 5)


def test_orthonormal_embedding_when_no_random_k_up_to_n_certifies():
    """rho = 0.3 needs k ~ 400 > n = 300 with a random A_0; the width-n construction z_i = e_i
    (A_0 = (X X^T)^-1 X) certifies with margin 1/2, so k never exceeds n."""
    x, y = C.pairs_data(300, 512, 5, 0.3, 3)
    model, cert = E.fit_network(x, y, 5, seed=3)
    assert cert["k_formula"] > 300 and cert["k"] == 300 and cert["fits"]
    assert cert["attempts"][0]["outcome"] == "search: fails"
    assert cert["attempts"][-1]["draw"] == "A_0 = (X X^T)^-1 X"
    assert cert["margins"]["units"] == pytest.approx(0.5, abs=1e-3)


def test_identity_embedding_at_n200_d20_and_3x_fewer_parameters_than_before():
    """n = 200 points in R^20: the formula's k (~100) exceeds d, so A_0 = I (k = d) certifies;
    the previous construction (one threshold, k = 56 ln n / rho^4) had 2M parameters here."""
    x, y = _data(n=200, d=20, r=5, seed=0)
    model, cert = E.fit_network(x, y, 5, seed=0)
    assert cert["k"] == 20 and cert["k_formula"] > 20 and cert["fits"]
    assert cert["attempts"][-1]["draw"] == "A_0 = I"
    old = E.parameter_formula(200, 20, math.ceil(E.C_UNIFORM * math.log(200) / cert["rho"] ** 4), 5)
    assert 3 * cert["params_model"] <= old
    unit = 200 * math.log(200) / cert["rho"] ** 2
    assert cert["params_per_n_ln_n_over_rho2"] == pytest.approx(cert["params_model"] / unit)


def test_cifar_scale_parameter_count_is_3x_below_the_previous_construction():
    """At n = 50,000, d = 3072, r = 100 with rho ~ 1.343 (the bench's estimate): k = 60 against 187."""
    n, d, r, rho = 50000, 3072, 100, 1.343
    k_new = E.paper_k(n, rho, r)
    k_old = E.paper_k(n, rho, r, "uniform")
    assert (k_new, k_old) == (60, 187)
    assert 3 * E.parameter_formula(n, d, k_new, r) <= E.parameter_formula(n, d, k_old, r)


def test_fast_float32_run_and_float64_path_agree_with_the_literal_runs(built, monkeypatch):
    x, y, model, cert = built
    out, agree = E.run_float32(model, x, batch_size=256, sample=64)
    assert agree == 0.0
    assert np.abs(out - model.predict(x, verbose=0)).max() <= 1e-5      # float32 rounding
    data, _ = assumption31.validate(x, y, 7)
    dr = E.Draw(data, 7, cert["k"], (0, 1, 0), "per_unit")
    w = E.weights(dr.z, dr.q, data.labels, dr.k, dr.m["theta"], dr.m["theta_final"])
    lit, a_lit = E.forward64(dr.z, w, data.labels, dr.k)
    path, a_path = E.path64(dr.z, w, data.labels, dr.k, dr.m)
    assert np.abs(lit - path).max() < 1e-12 and a_path["extra_relus"] == a_lit["extra_relus"] == 0
    from theory.section3 import verify as expressivity_verify
    monkeypatch.setattr(expressivity_verify, "KERAS_ALL_BUDGET", 0)
    monkeypatch.setattr(expressivity_verify, "LITERAL64_BUDGET", 0)
    _, c2 = E.fit_network(x, y, 7, seed=0)
    assert c2["fits"] and "run_float32" in c2["float32_check"]
    assert "own path" in c2["margins_float64"]["how"]


def test_float64_run_detects_broken_margins():
    """The verification can fail: with theta below the cross inner products, extra ReLUs fire."""
    x, y = _data(n=300, d=64, r=4, seed=8)
    rng = np.random.default_rng(0)
    k = 40
    a0 = rng.standard_normal((k, 64)) / math.sqrt(k)
    q = rng.standard_normal((4, k))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    z = x.astype(np.float64) @ a0.T
    w = E.weights(z, q, y, k, theta=np.zeros(len(z)), theta_f=0.5)
    out, achieved = E.forward64(z, w, y, k)
    assert achieved["extra_relus"] > 0 and achieved["off"] < 0
    assert np.abs(out - np.eye(4)[y]).max() > 1e-3


def test_too_small_rho_for_a_practical_k_names_the_closest_pair():
    x, y = _data(n=200, d=64, r=5, seed=9)
    x[77] = x[3] + 1e-3 * np.random.default_rng(1).standard_normal(64).astype(np.float32)
    x[77] /= np.linalg.norm(x[77])
    with pytest.raises(ValueError, match=r"points 3 and 77 at distance .*> k_max"):
        E.fit_network(x, y, 5)


# ---------------------------------------------------------------- the checks can fail


def test_E4_refuses_a_shared_threshold_another_k_and_redraws():
    """Theorem 3.2's size is checked from the built model: k against the formula, l = ceil(n/k),
    one threshold per unit, no redraw or larger k (E4 passed all of these before)."""
    x, y = C.random_data(400, 256, 4, 5)
    model, cert = E.fit_network(x, y, 4, seed=5, verify=False)
    k, kf, ell, params, bad = C._size(cert, model)
    assert not bad and k == kf and ell == -(-400 // k) and params == model.count_params()
    model, cert = E.fit_network(x, y, 4, seed=5, verify=False, c=5.0)
    assert any("the formula gives" in b for b in C._size(cert, model)[4])
    model, cert = E.fit_network(x, y, 4, seed=5, verify=False, thresholds="uniform", k_max=400)
    assert any("one threshold shared" in b for b in C._size(cert, model)[4])
    with pytest.warns(RuntimeWarning):
        model, cert = E.fit_network(x, y, 4, seed=5, verify=False, k=6)
    assert any("redraws or larger k" in b for b in C._size(cert, model)[4])


def test_quick_runs_the_per_point_float64_path_and_the_float32_loop(monkeypatch):
    real = E.path64
    monkeypatch.setattr(E, "path64", lambda z, w, labels, k, m: (real(z, w, labels, k, m)[0] + 1e-6,
                                                                 real(z, w, labels, k, m)[1]))
    d64, d32 = C._small_case_paths()
    assert d64 > 1e-7 and d32 <= 1e-4
    monkeypatch.setattr(C, "_small_case_paths", lambda: (1e-6, 1.0))
    rows = C.built(True, None)
    assert [r.status for r in rows[:2]] == ["FAIL", "FAIL"]


def test_E7_says_when_no_per_unit_k_certifies(monkeypatch):
    real = C._kmin
    monkeypatch.setattr(C, "_kmin", lambda data, r, th, cap, seed: None if th == "per_unit"
                        else real(data, r, th, cap, seed))
    row = C.thresholds(True, None)[2]
    assert row.status == "DOES NOT HOLD" and any("none <=" in line for line in row.detail)


def test_E5_and_E6_say_what_they_compute():
    rows = C.thresholds(True, None)
    assert "best shared" in rows[0].claim and "float32 safety margin" in rows[1].holds_if
    assert "rho^2/4" in rows[1].detail[0]
