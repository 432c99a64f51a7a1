"""Theorem 3.2's network (theory/expressivity.py): it fits, it is honest about its size and margins,
and inputs that break Assumption 3.1 are refused with the offending pair named."""
import math
import warnings

import numpy as np
import pytest

from theory import expressivity as E
from resnet_nobn.blocks import ResidualBlock


def _data(n=600, d=128, r=7, seed=0):
    return E._random_data(n, d, r, seed)


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
    for key in ("own", "points", "labels", "final_own", "final_cross"):
        assert m[key] >= cert["min_margin"], key
    assert m["worst"] == min(m[key] for key in ("own", "points", "labels", "final_own",
                                                "final_cross"))
    assert cert["theta"] == pytest.approx(1 - 2 * cert["rho_prime"])
    a = cert["margins_float64"]
    assert a["extra_relus"] == 0 and a["own"] > 0 and a["off"] > 0
    # the float64 run achieves the margins the scan predicted (the own margin exactly)
    assert a["own"] == pytest.approx(m["own"], abs=1e-9)
    assert a["off"] >= min(m["points"], m["labels"]) - 1e-5
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
    x, y = _data(n=400, d=128, r=5, seed=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, cert = E.fit_network(x, y, 5, k=30, seed=5, max_attempts=10)
    assert len(cert["attempts"]) >= 2 and cert["k"] > 30 and cert["k_start"] == 30
    assert all(a["outcome"] != "accepted" for a in cert["attempts"][:-1])
    assert any("violates Lemma B.1" in str(w.message) for w in caught)
    assert cert["fits"]


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


def test_checks_quick_all_proved_claims_pass():
    results = E.checks(quick=True)
    claims = {r["claim"] for r in results}
    assert {"Theorem 3.2 exact fit (float32 Keras model)", "Lemma B.1 margins (one ReLU per moved point)",
            "Parameter count kd + l(2k^2+k) + kr+r^2+r"} <= claims
    for r in results:
        assert set(r) == {"claim", "instances", "worst_margin", "passed", "proved", "detail"}
        if r["proved"]:
            assert r["passed"] and r["worst_margin"] >= 0, r


def test_float64_run_detects_broken_margins():
    """The verification can fail: with theta below the cross inner products, extra ReLUs fire."""
    x, y = _data(n=300, d=64, r=4, seed=8)
    rng = np.random.default_rng(0)
    k = 40
    a0 = rng.standard_normal((k, 64)) / math.sqrt(k)
    q = rng.standard_normal((4, k))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    z = x.astype(np.float64) @ a0.T
    w = E._weights(z, q, y, k, theta=0.0, theta_f=0.5)
    out, achieved = E._forward64(z, w, y, k)
    assert achieved["extra_relus"] > 0 and achieved["off"] < 0
    assert np.abs(out - np.eye(4)[y]).max() > 1e-3


def test_too_small_rho_for_a_practical_k_names_the_closest_pair():
    x, y = _data(n=200, d=64, r=5, seed=9)
    x[77] = x[3] + 1e-3 * np.random.default_rng(1).standard_normal(64).astype(np.float32)
    x[77] /= np.linalg.norm(x[77])
    with pytest.raises(ValueError, match=r"points 3 and 77 at distance .*> k_max"):
        E.fit_network(x, y, 5)
