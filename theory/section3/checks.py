"""Section 3 of Hardt & Ma checked numerically: rows E1-E7 of `python -m theory.check`.

E1-E4 build Theorem 3.2's network (theory.section3.expressivity.fit_network) and check that it fits and
has the size the formula says (the formula recomputed here).  E5-E7 compare the proof's single
threshold with one threshold per hidden unit, on data whose separation rho is set exactly
(`pairs_data`: every point has a partner at distance rho), for rho from 1 down to 0.25, where
ln n / rho^2 and ln n / rho^4 separate.  What each row checks is in docs/theory.md.
"""
import math

import numpy as np

from theory.section3 import assumption31
from theory.section3 import expressivity as E
from theory.rows import Group, Row


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


def k_ref(n, rho, r):
    """Theorem 3.2's width with one threshold per unit, computed here: ceil(10 ln n / rho^2), at
    least ceil(4 ln r) (the surrogate labels) and 4."""
    return max(4, math.ceil(4 * math.log(max(r, 2))), math.ceil(10 * math.log(max(n, 2)) / rho ** 2))


def _layers(model):
    """The built model's weights, read by layer name: A_0 (d, k), the middle blocks (U kernel,
    bias, V kernel), the final block; and whether it starts with UnitNormalization."""
    names = [layer.name for layer in model.layers]
    blocks = [layer for layer in model.layers if layer.name.startswith("block")]
    final = model.get_layer("final_block")
    a0 = model.get_layer("A0").kernel.numpy()
    mids = [(b.first.kernel.numpy(), b.first.bias.numpy(), b.second.kernel.numpy()) for b in blocks]
    fin = (final.first.kernel.numpy(), final.first.bias.numpy(), final.second.kernel.numpy())
    return "unit_norm" in names, a0, mids, fin


def forward_ref(model, x, dtype):
    """The network on rows x, written out here from the model's own weights (cast to dtype):
    [x/|x|] -> h = x A_0 -> h + ReLU(h U_b + s_b) V_b for every block -> final block with the fixed
    skip R^k -> R^r (zero padding, or the first r coordinates)."""
    norm, a0, mids, (uf, sf, vf) = _layers(model)
    h = np.asarray(x, dtype)
    if norm:
        h = h / np.linalg.norm(h, axis=1, keepdims=True)
    h = h @ a0.astype(dtype)
    for ku, bu, kv in mids:
        h = h + np.maximum(h @ ku.astype(dtype) + bu.astype(dtype), 0) @ kv.astype(dtype)
    r, k = vf.shape[1], h.shape[1]
    skip = h[:, :r] if k >= r else np.concatenate([h, np.zeros((len(h), r - k), dtype)], 1)
    return skip + np.maximum(h @ uf.astype(dtype) + sf.astype(dtype), 0) @ vf.astype(dtype)


def _size(cert, model):
    """What the built network's size says against Theorem 3.2 (computed here from the model):
    (k, k from the formula, l, params, per-unit thresholds?, list of deviations)."""
    _, a0, mids, _ = _layers(model)
    n, d, r, rho = cert["n_unique"], a0.shape[0], cert["r"], cert["rho"]
    k, ell, params = a0.shape[1], len(mids), int(model.count_params())
    kf = k_ref(n, rho, r)
    bad = []
    accepted = [a for a in cert["attempts"] if "accepted" in a["outcome"]]
    trivial = bool(accepted) and any(w in accepted[-1]["outcome"] for w in ("search", "embedding"))
    if kf < min(n, d):
        if k != kf:
            bad.append(f"k = {k}, the formula gives {kf}")
    elif not (trivial and k <= min(n, d)):
        bad.append(f"formula's k = {kf} >= min(n, d) = {min(n, d)} but k = {k} is not a named trivial width")
    if ell != math.ceil(n / k):
        bad.append(f"l = {ell} blocks, ceil(n/k) = {math.ceil(n / k)}")
    used = np.concatenate([bu[np.abs(ku).sum(axis=0) > 0] for ku, bu, _ in mids])
    per_unit = len(np.unique(used)) > 1 or len(used) <= 1
    if not per_unit:
        bad.append("one threshold shared by every unit")
    again = [a["outcome"] for a in cert["attempts"] if "redrawn" in a["outcome"] or "raised" in a["outcome"]]
    if again:
        bad.append(f"{len(again)} redraws or larger k needed")
    if params != _formula_ref(n, d, k, r) or cert["params_formula"] != params:
        bad.append(f"count_params() = {params}, formula {_formula_ref(n, d, k, r)}, certificate "
                   f"{cert['params_formula']}")
    return k, kf, ell, params, bad


def _small_case_paths():
    """--quick's look at the paths the larger sizes take: on a small case, the float64 network
    along each point's own path (path64) against every block literally (forward64), and the
    float32 compiled loop (run_float32) against model.predict.  Returns the two max differences."""
    x, y = random_data(300, 32, 4, 7)
    model, cert = E.fit_network(x, y, 4, seed=7, verify=False)
    data, _ = assumption31.validate(x, y, 4)
    a31 = assumption31.check(data, mode="exact")
    dr, _, _ = E.draw_network(data, 4, a31, seed=7)
    w = E.weights(dr.z, dr.q, data.labels, dr.k, dr.m["theta"], dr.m["theta_final"])
    lit, _ = E.forward64(dr.z, w, data.labels, dr.k)
    path, _ = E.path64(dr.z, w, data.labels, dr.k, dr.m)
    loop, agree = E.run_float32(model, data.x32, batch_size=128, sample=32)
    keras_out = model.predict(data.x32, verbose=0)
    return float(np.abs(lit - path).max()), max(float(np.abs(loop - keras_out).max()), agree)


def built(quick, _rng):
    sizes = [("random", 2000, 256, 10, 0, None), ("pairs rho=0.5", 1000, 128, 10, 1, 0.5),
             ("pairs rho=0.25", 600, 64, 5, 2, 0.25)] if quick else \
        [("random", 20000, 1024, 100, 0, None), ("clustered", 5000, 512, 100, 1, None),
         ("pairs rho=0.35", 3000, 256, 10, 2, 0.35), ("pairs rho=0.25", 600, 64, 5, 3, 0.25),
         ("random", 3000, 256, 3, 4, None)]
    certs, e32, ok32, agree, sizes_ok, ratios, names = [], 0.0, True, 0.0, [], [], []
    for kind, n, d, r, seed, rho in sizes:
        x, y = (pairs_data(n, d, r, rho, seed) if rho else
                (random_data if kind == "random" else clustered_data)(n, d, r, seed))
        model, cert = E.fit_network(x, y, r, seed=seed)
        certs.append(cert)
        # E1 in the check: the model itself on every point, against the one-hot labels and a
        # float32 forward pass written out here from the model's weights
        out = np.concatenate([model(x[i:i + 4096]).numpy() for i in range(0, n, 4096)])
        ref = forward_ref(model, x, np.float32)
        onehot = np.eye(r, dtype=np.float32)[y]
        e32 = max(e32, float(np.abs(out - onehot).max()))
        ok32 &= bool((out.argmax(1) == y).all())
        agree = max(agree, float(np.abs(out - ref).max()))
        k, kf, ell, params, bad = _size(cert, model)
        sizes_ok.append(bad)
        ratios.append(params / (cert["n_unique"] * math.log(cert["n_unique"]) / cert["rho"] ** 2))
        names.append(f"{kind} n={n} d={d} r={r}: k={k} (formula {kf}), l={ell}")
    if quick:
        d64, d32 = _small_case_paths()
    else:
        d64 = d32 = 0.0
    c = certs
    e64 = max(cc["max_abs_err_float64"] for cc in c)
    margin = min(min(cc["margins_float64"]["own"], cc["margins_float64"]["off"]) for cc in c)
    extra = sum(cc["margins_float64"]["extra_relus"] for cc in c)
    tol = E.TOL
    paths = ([f"--quick, small case (n=300, d=32): per-point float64 path vs every block {d64:.1e}, "
              f"float32 compiled loop vs model.predict {d32:.1e}"] if quick else [])
    bad = [f"{nm}: {'; '.join(b)}" for nm, b in zip(names, sizes_ok) if b]
    return [
        Row("E1", "Thm 3.2: the network maps every x_i to its label (float32 Keras model)", "proved",
            sum(cc["n"] for cc in c), "max |out - onehot|", e32, f"<= {tol:g}, argmax = label",
            e32 <= tol and ok32 and agree <= 1e-4 and d32 <= 1e-4,
            ["; ".join(names), f"the model run by the check on every point; a float32 forward pass "
             f"written out in the check from the model's weights agrees to {agree:.1e} (<= 1e-4)"]
            + paths[:1]),
        Row("E2", "Thm 3.2: the same network in exact (float64) arithmetic", "proved",
            sum(cc["n"] for cc in c), "max |out - onehot|", e64, "<= 1e-9", e64 <= 1e-9
            and all(cc["correct_float64"] for cc in c) and d64 <= 1e-12,
            ["float64 run: " + "; ".join(sorted({cc["margins_float64"]["how"] for cc in c}))]),
        Row("E3", "Lemma B.1 with a threshold per unit: exactly one ReLU fires per moved point",
            "proved", sum(cc["n_unique"] for cc in c), "min float64 margin (own, others)", margin,
            "> 0, no extra ReLU", margin > 0 and extra == 0,
            ["per instance: " + ", ".join(f"{cc['margins']['units']:.4f}" for cc in c)
             + f"; extra ReLUs: {extra}"]),
        Row("E4", "Thm 3.2's size: k = ceil(10 ln n/rho^2), l = ceil(n/k), thresholds per unit, count "
            "kd + l(2k^2+k) + kr + r^2 + r", "proved", len(c), "networks off the theorem's size",
            len(bad), "= 0 (no redraw, no larger k)", not bad,
            ["params / (n ln n / rho^2), from count_params(): " + ", ".join(f"{x:.1f}" for x in ratios)
             + "; where the formula's k >= min(n, d), a named trivial width (bisection for k <= n, "
             "A_0 = I, or z_i = e_i)"] + bad),
    ]


def _kmin(data, r, thresholds, cap, seed):
    found = E.search_k(data, r, cap, seed, thresholds, E.MIN_MARGIN, [])
    return found.k if found is not None else None


def thresholds(quick, _rng):
    """Per-unit against shared thresholds across rho: at the paper's k, and the k each needs."""
    n, d, r = (1000, 256, 10) if quick else (4000, 256, 10)
    rhos = (1.0, 0.5) if quick else (1.0, 0.7, 0.5, 0.35, 0.25)
    cap = 1024 if quick else 4096
    per, uni, need, table, uni2 = [], [], [], [], []
    for t, rho in enumerate(rhos):
        x, y = pairs_data(n, d, r, rho, 10 + t)
        data, _ = assumption31.validate(x, y, r)
        rho_m = assumption31.check(data, mode="exact")["rho"]
        k = k_ref(n, rho_m, r)
        dr = E.Draw(data, r, k, (t, 9, 0), "per_unit")
        mu = E.margins(dr.z, dr.q, data.labels, k, "uniform")
        wrong = E.wrong_relus(dr.z, dr.q, data.labels, k, mu["theta"]) if mu["worst"] < 0 else 0
        per.append((dr.m["worst"], rho_m))
        uni.append((mu["worst"], wrong, f"rho={rho_m:.2f}, k={k}"))
        k_per, k_uni = _kmin(data, r, "per_unit", min(cap, n), t), _kmin(data, r, "uniform", cap, t)
        ln = math.log(n)
        need.append(k_per * rho_m ** 2 / ln if k_per else math.inf)
        uni2.append(((k_uni or cap) * rho_m ** 2 / ln, k_uni, rho_m))
        table.append(f"rho={rho_m:.2f}: 10 ln n/rho^2={k}; smallest k per-unit "
                     + (f"{k_per} (= {k_per * rho_m ** 2 / ln:.2f} ln n/rho^2)" if k_per
                        else f"none <= {min(cap, n)}") + ", shared "
                     + (f"{k_uni} (= {k_uni * rho_m ** 4 / ln:.1f} ln n/rho^4)" if k_uni
                        else f"> {cap} (> {cap * rho_m ** 4 / ln:.1f} ln n/rho^4)"))
    # the rho^4 half: with one shared threshold, k / (ln n/rho^2) grows as rho falls (a lower bound
    # where no k <= cap certifies), and where measured k <= 56 ln n/rho^4 (C_UNIFORM)
    # a pair (rho, smaller rho') decides growth when k at rho was measured and k at rho' was too,
    # or its lower bound (cap) already exceeds k at rho; otherwise the sizes cannot show it
    pairs = [(a[0], b[0]) for a, b in zip(uni2, uni2[1:])
             if a[1] is not None and (b[1] is not None or b[0] > a[0])]
    grows = all(b > a for a, b in pairs)
    within = [ku * rr ** 4 / math.log(n) for _, ku, rr in uni2 if ku]
    rho4 = (grows and max(within) <= E.C_UNIFORM) if pairs else None
    wu = min(uni)
    wp = min(per)
    return [
        Row("E5", "Proof of Thm 3.2 with one threshold for all units (the best shared one: at least as "
            "good as the proof's s = -(1-2rho')1), k = 10 ln n/rho^2", "printed", len(uni),
            "min Lemma B.1 margin", wu[0], f">= {E.MIN_MARGIN:g}", wu[0] >= E.MIN_MARGIN,
            [f"pairs data n={n}, d={d}, rho in {rhos}; the shared threshold midway between min |z_i|^2 and "
             "the largest cross inner product: wrong ReLUs " + ", ".join(f"{u[1]} ({u[2]})" for u in uni)],
            corrected_by="E6"),
        Row("E6", "Thm 3.2 with a threshold per unit (s in R^k, as (3.1) allows), k = 10 ln n/rho^2",
            "empirical", len(per), "min Lemma B.1 margin", wp[0],
            f">= {E.MIN_MARGIN:g} (the construction's float32 safety margin)", wp[0] >= E.MIN_MARGIN,
            ["the margin is (|z_i|^2 - max cross inner product)/2; the ideal gap (exact geometry) is "
             "rho^2/4; per rho: margin, margin/(rho^2/4): " + ", ".join(
                 f"{m:.4f}, {m / (rr ** 2 / 4):.2f} (rho={rr:.2f})" for m, rr in per),
             "HOLDS means: one draw at the paper's k certified every unit with at least the float32 "
             "safety margin; a margin near 1e-3 is a near miss, not a comfortable fit"]),
        Row("E7", "The k that certifies grows as ln n/rho^2 per unit, as ln n/rho^4 for one threshold",
            "empirical", len(need), "max smallest k per unit / (ln n/rho^2)", max(need),
            f"<= 10; shared: k rho^2/ln n grows, k <= {E.C_UNIFORM:g} ln n/rho^4",
            max(need) <= 10 and rho4 is not False, table + [
                "shared threshold, k / (ln n/rho^2) per rho (lower bounds where none <= cap): "
                + ", ".join(f"{'>' if ku is None else ''}{v:.1f}" for v, ku, _ in uni2)
                + ("; the rho^4 half cannot be measured at these sizes (raise the cap: the full run)"
                   if rho4 is None else f"; grows: {grows}")
                + "; measured k / (ln n/rho^4): " + (", ".join(f"{v:.1f}" for v in within) or "none")]),
    ]


GROUPS = [
    Group(("E1", "E2", "E3", "E4"), built),
    Group(("E5", "E6", "E7"), thresholds),
]
