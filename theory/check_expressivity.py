"""Section 3 of Hardt & Ma checked numerically: rows E1-E7 of `python -m theory.check`.

E1-E4 build Theorem 3.2's network (theory.expressivity.fit_network) and check that it fits and
has the size the formula says (the formula recomputed here).  E5-E7 compare the proof's single
threshold with one threshold per hidden unit, on data whose separation rho is set exactly
(`pairs_data`: every point has a partner at distance rho), for rho from 1 down to 0.25, where
ln n / rho^2 and ln n / rho^4 separate.  What each row checks is in docs/theory.md.
"""
import math

import numpy as np

from theory import assumption31
from theory import expressivity as E
from theory.rows import Row, measure


def random_data(n, d, r, seed):
    """n random unit points in R^d, random labels in [0, r)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x, rng.integers(0, r, n)


def clustered_data(n, d, r, seed, spread=1.5):
    """Points around r/2 well-separated centres, labels random (not the cluster): a harder case."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(2, r // 2), d))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    x = centres[rng.integers(0, len(centres), n)] + spread * rng.standard_normal((n, d)) / math.sqrt(d)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32), rng.integers(0, r, n)


def pairs_data(n, d, r, rho, seed):
    """n/2 random unit points, each with a partner at distance exactly rho (chord of the angle
    2 arcsin(rho/2)), random labels: Assumption 3.1 holds with this rho (other pairs are ~sqrt 2
    apart) and every point needs its own margin."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((n // 2, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    w = rng.standard_normal((n // 2, d))
    w -= (w * u).sum(1, keepdims=True) * u
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    phi = 2 * math.asin(rho / 2)
    x = np.empty((2 * (n // 2), d))
    x[0::2], x[1::2] = u, u * math.cos(phi) + w * math.sin(phi)
    return x.astype(np.float32), rng.integers(0, r, len(x))


def _formula_ref(n, d, k, r):
    ell = math.ceil(n / k)
    return k * d + ell * 2 * k * k + ell * k + k * r + r * r + r


def built(quick, _rng):
    sizes = [("random", 2000, 256, 10, 0, None), ("pairs rho=0.5", 1000, 128, 10, 1, 0.5),
             ("pairs rho=0.25", 600, 64, 5, 2, 0.25)] if quick else \
        [("random", 20000, 1024, 100, 0, None), ("clustered", 5000, 512, 100, 1, None),
         ("pairs rho=0.35", 3000, 256, 10, 2, 0.35), ("pairs rho=0.25", 600, 64, 5, 3, 0.25),
         ("random", 3000, 256, 3, 4, None)]
    certs = []
    for kind, n, d, r, seed, rho in sizes:
        x, y = (pairs_data(n, d, r, rho, seed) if rho else
                (random_data if kind == "random" else clustered_data)(n, d, r, seed))
        _, cert = E.fit_network(x, y, r, seed=seed)
        certs.append((f"{kind} n={n} d={d} r={r}", cert))
    c = [cc for _, cc in certs]
    e32 = max(cc["max_abs_err_float32"] for cc in c)
    e64 = max(cc["max_abs_err_float64"] for cc in c)
    margin = min(min(cc["margins_float64"]["own"], cc["margins_float64"]["off"]) for cc in c)
    extra = sum(cc["margins_float64"]["extra_relus"] for cc in c)
    count = max(abs(cc["params_model"] - _formula_ref(cc["n_unique"], cc["d"], cc["k"], cc["r"])) for cc in c)
    names = "; ".join(f"{s}: k={cc['k']} (formula {cc['k_formula']}), l={cc['ell']}" for s, cc in certs)
    return [
        Row("E1", "Thm 3.2: the network maps every x_i to its label (float32 Keras model)", "proved",
            sum(cc["n"] for cc in c), "max |out - onehot|", e32, f"<= {c[0]['tol']:g}, argmax = label",
            e32 <= c[0]["tol"] and all(cc["correct_float32"] for cc in c),
            [names, "float32 run: " + "; ".join(sorted({cc["float32_check"] for cc in c}))]),
        Row("E2", "Thm 3.2: the same network in exact (float64) arithmetic", "proved",
            sum(cc["n"] for cc in c), "max |out - onehot|", e64, "<= 1e-9", e64 <= 1e-9
            and all(cc["correct_float64"] for cc in c),
            ["float64 run: " + "; ".join(sorted({cc["margins_float64"]["how"] for cc in c}))]),
        Row("E3", "Lemma B.1 with a threshold per unit: exactly one ReLU fires per moved point",
            "proved", sum(cc["n_unique"] for cc in c), "min float64 margin (own, others)", margin,
            "> 0, no extra ReLU", margin > 0 and extra == 0,
            ["per instance: " + ", ".join(f"{cc['margins']['units']:.4f}" for cc in c)
             + f"; extra ReLUs: {extra}"]),
        Row("E4", "Parameter count kd + l(2k^2+k) + kr + r^2 + r, k <= n", "proved", len(c),
            "max |count_params - formula|", count, "= 0", count == 0 and all(
                cc["k"] <= cc["n_unique"] for cc in c),
            ["params / (n ln n / rho^2): " + ", ".join(
                f"{cc['params_per_n_ln_n_over_rho2']:.1f}" for cc in c)
             + "; where the formula's k >= min(n, d), a trivial width (bisection for k <= n, A_0 = I, or "
             "z_i = e_i)"]),
    ]


def _kmin(data, r, thresholds, cap, seed):
    found = E.search_k(data, r, cap, seed, thresholds, E.MIN_MARGIN, [])
    return found.k if found is not None else None


def thresholds(quick, _rng):
    """Per-unit against uniform thresholds across rho: at the paper's k, and the k each needs."""
    n, d, r = (1000, 256, 10) if quick else (4000, 256, 10)
    rhos = (1.0, 0.5, 0.25) if quick else (1.0, 0.7, 0.5, 0.35, 0.25)
    cap = 1024 if quick else 4096
    per, uni, need, table = [], [], [], []
    for t, rho in enumerate(rhos):
        x, y = pairs_data(n, d, r, rho, 10 + t)
        data, _ = assumption31.validate(x, y, r)
        rho_m = assumption31.check(data, mode="exact")["rho"]
        k = E.paper_k(n, rho_m, r)
        dr = E.Draw(data, r, k, (t, 9, 0), "per_unit")
        mu = E.margins(dr.z, dr.q, data.labels, k, "uniform")
        wrong = E.wrong_relus(dr.z, dr.q, data.labels, k, mu["theta"]) if mu["worst"] < 0 else 0
        per.append((dr.m["worst"], f"rho={rho_m:.2f}"))
        uni.append((mu["worst"], wrong, f"rho={rho_m:.2f}, k={k}"))
        k_per, k_uni = _kmin(data, r, "per_unit", min(cap, n), t), _kmin(data, r, "uniform", cap, t)
        ln = math.log(n)
        need.append(k_per * rho_m ** 2 / ln)
        table.append(f"rho={rho_m:.2f}: 10 ln n/rho^2={k}; smallest k per-unit {k_per} "
                     f"(= {k_per * rho_m ** 2 / ln:.2f} ln n/rho^2), uniform "
                     + (f"{k_uni} (= {k_uni * rho_m ** 4 / ln:.1f} ln n/rho^4)" if k_uni
                        else f"> {cap} (> {cap * rho_m ** 4 / ln:.1f} ln n/rho^4)"))
    wu = min(uni)
    wp = min(per)
    return [
        Row("E5", "Proof of Thm 3.2 as printed: s = -(1-2rho')1 for all units, k = 10 ln n/rho^2",
            "printed", len(uni), "min Lemma B.1 margin", wu[0], f">= {E.MIN_MARGIN:g}",
            wu[0] >= E.MIN_MARGIN,
            [f"pairs data n={n}, d={d}, rho in {rhos}: wrong ReLUs " + ", ".join(
                f"{u[1]} ({u[2]})" for u in uni)], corrected_by="E6"),
        Row("E6", "Thm 3.2 with a threshold per unit (s in R^k, as (3.1) allows), k = 10 ln n/rho^2",
            "empirical", len(per), "min Lemma B.1 margin", wp[0], f">= {E.MIN_MARGIN:g}",
            wp[0] >= E.MIN_MARGIN, ["per rho: " + ", ".join(f"{m:.4f} ({s})" for m, s in per)]),
        Row("E7", "The k that certifies grows as ln n/rho^2 per unit, as ln n/rho^4 for one threshold",
            "empirical", len(need), "max smallest k per unit / (ln n/rho^2)", max(need), "<= 10",
            max(need) <= 10, table),
    ]


def checks(quick: bool):
    """The rows of Section 3 (see theory/rows.py), each stamped with its own time."""
    rng = np.random.default_rng(0)
    return measure(built, quick, rng) + measure(thresholds, quick, rng)
