"""Finite-sample expressivity of identity-parameterized residual networks (Hardt & Ma 2017, Section 3).

Theorem 3.2: under Assumption 3.1 (unit-norm points, pairwise distances >= rho) a residual network of
single-ReLU blocks `h + V ReLU(U h + s)` with O(n log n + r^2) parameters maps every one of n
training points to its one-hot label.  `fit_network(x, y)` builds that network for given data,
following the proof of Appendix B, as a Keras model (theory.section3.model), runs it on every
point and returns a certificate.  Steps: validate the data and check Assumption 3.1
(theory.section3.assumption31), choose k, draw A_0 and the surrogate labels and check Lemma B.1's margins,
build the model, verify.

Construction (Appendix B, proof of Theorem 3.2 and Lemmas B.1/B.2):
  1. h_0 = A_0 x, A_0 in R^{k x d} with i.i.d. N(0, 1/k) entries (Johnson-Lindenstrauss; the 1/k
     scaling keeps ||A_0 x|| near 1; the proof's "standard normal entries" would not).
  2. r random unit surrogate labels q_1..q_r in R^k; point i's target is v_i = q_{y_i}.
  3. l = ceil(n/k) blocks. Block b takes the points b*k .. b*k+k-1 and, by Lemma B.1, moves each
     from z_i = A_0 x_i to v_i while every other current vector stays: row i of U is z_i, column i
     of V is (v_i - z_i) / (||z_i||^2 - theta_i), s_i = -theta_i.  A partly filled last block gets
     zero rows/columns with s = -1 (never fire); it still counts k x k parameters.
  4. A final block maps q_c to e_c (Lemma B.1 with alpha = q, beta = e; one threshold theta_f).

Where this follows the proof rather than the printed text:
  * One threshold per hidden unit.  The block T_{U,V,s} of (3.1) has s in R^k; the proof of Lemma
    B.1 takes s = -(1 - 2 rho') 1, one threshold for all units, which needs every ||z_i||^2 above
    every cross inner product: ||z||^2 fluctuates by ~sqrt(2/k) under A_0, so the gap rho^2/2 needs
    k ~ ln n / rho^4.  With theta_i between ||z_i||^2 and the largest inner product of z_i with any
    other vector unit i sees, each unit needs only its own gap <z_i, z_i - z_j> ~ ||x_i - x_j||^2/2
    >= rho^2/2, whose fluctuation is ~||x_i - x_j|| / sqrt(k): k = 10 ln n / rho^2, the proof's
    constant, suffices in every trial (`python -m theory.check`, rows E5-E7; the inner-product form
    of Johnson-Lindenstrauss, |<Au, Aw> - <u, w>| <= eps |u| |w|, with eps < rho/2 and a union
    bound over the n^2 pairs proves k = O(ln n / rho^2) for the points, with a larger constant).  thresholds="uniform" keeps the proof's
    single threshold, with k = 56 ln n / rho^4, for comparison.
  * Lemma B.1's margin.  Its printed hypotheses and (B.1) do not agree (b) reads ||alpha_i - beta_j||
    where alpha_j is meant; (B.1) subtracts 3 rho' although the hypothesis only gives
    (1/2)||alpha_i - alpha_j||^2 >= 4.5 rho'^2; Lemma B.2 assumes only ||z_i - z_j|| >= rho').  So
    the condition the mechanism needs is checked directly (`margins`): unit i of block b fires for
    z_i and for no other vector at block b -- z_j for every j != i in blocks >= b, q_c for every class
    with a point in an earlier block (the proof's "q_i does not correlate with z_j"); the last
    block: <q_c, q_c'> < theta_f < ||q_c||^2 = 1.
  * k.  k = ceil(10 ln n / rho^2) (at least ceil(4 ln r), the paper's "k > 4 log r" for the q's).
    When that k is at least min(n, d), A_0 compresses nothing, and trivial widths do instead: if
    k >= n, the smallest random k <= n that certifies (bisection, since the margins are checked
    anyway); if d <= n, the identity embedding A_0 = I (k = d: exact geometry, every unit's margin
    at least rho^2/4) -- the smaller width that certifies; failing both, if n <= d, the
    orthonormal embedding A_0 = (X X^T)^-1 X (k = n, z_i = e_i, margins 1/2).  A draw that breaks
    the margins is drawn again (small shortfall) or k is multiplied by 1.5, with a warning; every
    attempt is in the certificate.
  * The final block's skip from R^k to R^r: see theory.section3.model.

Verification (theory.section3.verify): the float32 Keras model and the network in exact
(float64) arithmetic, on every point.
"""
import math
import time
import warnings

import numpy as np

from theory.section3 import assumption31
from theory.section3.model import build_model, run_float32  # noqa: F401
from theory.section3.verify import forward64, path64, verify_network  # noqa: F401
from theory.section3.lemma_b1 import margins, weights, wrong_relus  # noqa: F401

C_PAPER = 10.0            # k = ceil(10 ln n / rho^2), per-unit thresholds: the proof's constant
C_UNIFORM = 56.0          # k = ceil(56 ln n / rho^4), one threshold for all units
TOL = 1e-3                # float32 model: max |output - one-hot| allowed
MIN_MARGIN = 1e-3         # every unit's Lemma B.1 margin must be at least this (float32 safety)
PARAM_FORMULA = "kd + l(2k^2 + k) + (kr + r^2 + r)"


def parameter_formula(n, d, k, r):
    """kd + l(2k^2 + k) + (kr + r^2 + r) with l = ceil(n/k) (Theorem 3.2's count, with biases)."""
    ell = -(-n // k)
    return k * d + ell * (2 * k * k + k) + (k * r + r * r + r)


def paper_k(n, rho, r=2, thresholds="per_unit", c=None):
    """k = ceil(c ln n / rho^2) (per-unit thresholds, c = 10) or ceil(c ln n / rho^4) (uniform,
    c = 56); at least ceil(4 ln r) and 4."""
    per_unit = thresholds == "per_unit"
    c = c if c is not None else (C_PAPER if per_unit else C_UNIFORM)
    return max(4, math.ceil(4 * math.log(max(r, 2))),
               math.ceil(c * math.log(max(n, 2)) / max(rho, 1e-12) ** (2 if per_unit else 4)))


def _rng(seed, *key):
    """A generator for one purpose of fit_network. numpy pads seed lists with zeros, so
    default_rng([seed, 0]) is default_rng(seed): the data's own generator in many scripts. A spawn
    key keeps the construction's draws independent of data drawn with default_rng(seed)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x5E32,) + key))


def _say(verbose, msg, warn=False):
    if warn:
        warnings.warn(msg, RuntimeWarning, stacklevel=4)
    elif verbose:
        print(f"[expressivity] {msg}", flush=True)


class Draw:
    """One draw of A_0 (k x d) and the surrogate labels q (r x k), z = A_0 x and its margins."""

    def __init__(self, data, r, k, key, thresholds, embedding="random"):
        """embedding: 'random' (the proof's A_0), 'identity' (A_0 = I, k = d) or 'orthonormal'
        (k = n unique points, A_0 = (X X^T)^-1 X, so z_i = e_i: needs X of full row rank)."""
        rng = _rng(*key)
        d = data.x32.shape[1]
        self.k, self.key, self.embedding = k, key, embedding
        if embedding == "identity":
            self.a0 = np.eye(d)
        elif embedding == "orthonormal":
            X = data.rows64(0, len(data))
            self.a0 = np.linalg.solve(X @ X.T, X)
        else:
            self.a0 = rng.standard_normal((k, d)) / math.sqrt(k)
        q = rng.standard_normal((r, k))
        self.q = q / np.linalg.norm(q, axis=1, keepdims=True)
        self.z = data.project(self.a0)
        self.m = margins(self.z, self.q, data.labels, k, thresholds)

    def log(self, attempts, outcome):
        """Append this draw's record to `attempts` (its index in `self.index`); returns self."""
        self.index = len(attempts)
        attempts.append(self.record(outcome))
        return self

    def record(self, outcome):
        m = self.m
        names = {"identity": "A_0 = I", "orthonormal": "A_0 = (X X^T)^-1 X"}
        return {"k": self.k, "draw": names.get(self.embedding, self.key[-1]),
                "worst_margin": m["worst"], "units": m["units"],
                "final_own": m["final_own"], "final_cross": m["final_cross"], "outcome": outcome}


def search_k(data, r, hi, seed, thresholds, min_margin, attempts):
    """The smallest k in [k_lo, hi] whose draw certifies (bisection; draw of k keyed by k), or None.
    k_lo = max(4, ceil(4 ln r)); `hi` is checked first."""
    lo = max(4, math.ceil(4 * math.log(max(r, 2))))
    best = None
    while True:
        k = hi if best is None else (lo + hi) // 2
        dr = Draw(data, r, k, (seed, 3, k), thresholds)
        ok = dr.m["worst"] >= min_margin
        dr.log(attempts, "search: certifies" if ok else "search: fails")
        if best is None and not ok:
            return None
        if ok:
            best, hi = dr, k
        else:
            lo = k + 1
        if lo >= hi:
            return best


def draw_network(data, r, a31, *, k=None, c=None, thresholds="per_unit", seed=0,
                 min_margin=MIN_MARGIN, max_attempts=6, k_growth=1.5, k_max=4096, verbose=False):
    """Choose k and draw until Lemma B.1's margins hold (module docstring).  Returns (Draw,
    k_formula, attempts).  Raises ValueError if rho is too small for any k <= k_max (naming the
    closest pair) or a pair breaking the margins is closer than Assumption 3.1 allows;
    RuntimeError after max_attempts failing draws."""
    n, d, rho = len(data), data.x32.shape[1], a31["rho"]
    k_formula = paper_k(n, rho, r, thresholds, c)
    attempts = []
    if k is None and k_formula >= min(n, d) and n > 1:    # no compression left: trivial widths
        found = search_k(data, r, min(n, k_formula, k_max), seed, thresholds, min_margin, attempts) \
            if k_formula >= n else None
        if d <= min(n, k_max) and (found is None or found.k > d):
            dr = Draw(data, r, d, (seed, 4), thresholds, embedding="identity")
            ok = dr.m["worst"] >= min_margin
            dr.log(attempts, "identity embedding: certifies" if ok else "identity embedding: fails")
            found = dr if ok else found
        if found is None and n <= min(d, k_max) and np.linalg.cond(data.rows64(0, n)) < 1e4:
            dr = Draw(data, r, n, (seed, 5), thresholds, embedding="orthonormal")
            ok = dr.m["worst"] >= min_margin
            dr.log(attempts, "orthonormal embedding: certifies" if ok else
                   "orthonormal embedding: fails")
            found = dr if ok else found
        if found is not None:
            attempts[found.index]["outcome"] += ", accepted"
            return found, k_formula, attempts
    if k is None and k_formula > k_max:
        cl = a31["closest"]
        where = "" if cl is None else (f" (closest pair: points {data.keep[cl[1]]} and "
                                       f"{data.keep[cl[2]]} at distance {cl[0]:.3g})")
        raise ValueError(f"rho = {rho:.3g}{where} needs k = {k_formula} (the formula) > k_max = "
                         f"{k_max}, and no k <= {min(n, k_max)} certifies: Assumption 3.1 holds only "
                         "with a rho too small for a practical network; perturb or deduplicate the "
                         "points, or pass k")
    kk, tries_at_k = (int(k) if k is not None else k_formula), 0
    while True:
        dr = Draw(data, r, kk, (seed, 1, len(attempts)), thresholds)
        m = dr.m
        if m["worst"] >= min_margin:
            return dr.log(attempts, "accepted"), k_formula, attempts
        if m["partner"][0] == "point" and m["units"] < min_margin:      # Assumption 3.1 itself?
            i, j = m["unit"], m["partner"][1]
            dist = data.dist(i, j)
            if dist < a31["floor"]:
                raise data.error(i, j, dist, a31["rho_given"])
        if len(attempts) + 1 >= max_attempts:
            i, j = m["unit"], m["partner"][1]
            raise RuntimeError(
                f"Lemma B.1 margins still violated after {len(attempts) + 1} draws (last k = {kk}, "
                f"worst margin {m['worst']:.3g}, unit of point {data.keep[i]}); raise k/max_attempts")
        tries_at_k += 1
        if m["worst"] > -0.05 and tries_at_k < 2:
            outcome = "redrawn (small shortfall)"
        else:
            new_k = min(k_max, max(kk + 1, math.ceil(kk * k_growth)))
            if new_k == kk:
                raise RuntimeError(f"margins violated at k = k_max = {k_max}")
            outcome, kk, tries_at_k = f"k raised to {new_k}", new_k, 0
        dr.log(attempts, outcome)
        _say(verbose, f"draw {len(attempts) - 1} with k = {attempts[-1]['k']} violates Lemma B.1's "
             f"margins (worst {m['worst']:.3g} < {min_margin}): {outcome}", warn=True)


def fit_network(x, y, num_classes=None, *, rho=None, k=None, c=None, thresholds="per_unit", seed=0,
                normalize=True, min_margin=MIN_MARGIN, max_attempts=6, k_growth=1.5, k_max=4096,
                assumption_check="auto", verify=True, tol=TOL, batch_size=8192, verbose=False):
    """Build Theorem 3.2's network for (x, y); return (keras model, certificate dict).

    Args:
      x: (n, d) points (cast to float32, the model's input dtype). With normalize=True the model
        starts with a parameter-free UnitNormalization layer; otherwise rows must have unit norm.
      y: (n,) integer labels in [0, num_classes); num_classes defaults to max(y) + 1.
      rho: Assumption 3.1's separation. If given, pairs closer than rho raise ValueError; if None,
        rho is measured ('exact') or estimated from a sample ('projected') and only coincident
        points (< RHO_FLOOR) are errors. rho sets k (`paper_k`).
      k: start from this k instead of the formula (no search). Raised by k_growth when margins fail.
      c: the constant of `paper_k` (default 10 for per-unit thresholds, 56 for uniform).
      thresholds: 'per_unit' (s_i = -theta_i, k ~ ln n / rho^2) or 'uniform' (the proof's
        s = -theta 1, k ~ ln n / rho^4).
      min_margin: every Lemma B.1 margin must be at least this (float32 safety).
      assumption_check: 'exact' (all pairs in R^d, O(n^2 d)), 'projected', or 'auto'.
      verify: run the float32 model and the float64 network on every point.
      tol: allowed max |float32 output - one-hot|.
    Raises ValueError for inputs that break Assumption 3.1 (naming the pair), for a rho so small
    that no k <= k_max certifies (naming the closest pair), or bad shapes/labels; RuntimeError if
    max_attempts draws all violate the margins.  Certificate keys: see `certificate`.
    """
    clock = _Clock()
    data, r = assumption31.validate(x, y, num_classes, normalize)
    a31 = assumption31.check(data, rho, assumption_check, _rng(seed, 2))
    clock.lap("assumption_check")
    _say(verbose, f"n={data.x32.shape[0]} ({len(data)} distinct), d={data.x32.shape[1]}, r={r}; "
         f"Assumption 3.1 '{a31['mode']}': rho={a31['rho']:.4g} ({a31['rho_source']})")
    dr, k_formula, attempts = draw_network(
        data, r, a31, k=k, c=c, thresholds=thresholds, seed=seed, min_margin=min_margin,
        max_attempts=max_attempts, k_growth=k_growth, k_max=k_max, verbose=verbose)
    clock.lap("draws_and_margins")
    _say(verbose, f"k={dr.k} (formula {k_formula}), l={-(-len(data) // dr.k)} blocks, worst Lemma "
         f"B.1 margin {dr.m['worst']:.4f} after {len(attempts)} draw(s)")
    w = weights(dr.z, dr.q, data.labels, dr.k, dr.m["theta"], dr.m["theta_final"])
    model = build_model(dr.a0, w, data.x32.shape[1], normalize=normalize)
    clock.lap("weights_and_model")
    cert = certificate(data, r, a31, dr, k_formula, attempts, model, normalize=normalize,
                       min_margin=min_margin, c=c, k_start=k if k is not None else k_formula)
    if verify:
        cert.update(verify_network(model, data, dr, w, tol, batch_size, clock))
    cert["times"] = clock.times()
    return model, cert


class _Clock:
    """Wall and CPU seconds (all threads of the process) of each phase of fit_network."""

    def __init__(self):
        self.start = self.last = (time.time(), time.process_time())
        self.wall, self.cpu = {}, {}

    def lap(self, name):
        now = (time.time(), time.process_time())
        self.wall[name], self.cpu[name] = now[0] - self.last[0], now[1] - self.last[1]
        self.last = now

    def times(self):
        return {**self.wall, "total": time.time() - self.start[0],
                "cpu": {**self.cpu, "total": time.process_time() - self.start[1]}}


def certificate(data, r, a31, dr, k_formula, attempts, model, **settings):
    """What was built and why it fits.  Keys: n, n_unique, d, r, k, k_formula, thresholds, ell
    (middle blocks), depth (residual blocks, ell + 1), params_model, params_formula, formula,
    n_log_n_plus_r2, params_per_n_ln_n_over_rho2, rho, rho_source, assumption_check, margins
    (units: min over units of Lemma B.1's margin, unit and partner (input rows), final_own,
    final_cross, worst, theta_range, norm2_range, theta_final), attempts, shortcut, and from the
    verification: margins_float64, max_abs_err_float32/64, correct_float32/64, fits, tol; times."""
    n, nu, d, k, m = data.x32.shape[0], len(data), data.x32.shape[1], dr.k, dr.m
    kind, j = m["partner"]
    return {
        "theorem": "Hardt & Ma (ICLR 2017) Theorem 3.2, construction of Appendix B",
        "n": n, "n_unique": nu, "d": d, "r": r, "k": k, "k_formula": k_formula,
        "thresholds": m["thresholds"], "ell": -(-nu // k), "depth": -(-nu // k) + 1,
        "params_model": int(model.count_params()), "params_formula": parameter_formula(nu, d, k, r),
        "formula": PARAM_FORMULA, "n_log_n_plus_r2": nu * math.log(max(nu, 2)) + r * r,
        "params_per_n_ln_n_over_rho2": parameter_formula(nu, d, k, r)
        / (nu * math.log(max(nu, 2)) / a31["rho"] ** 2),
        "rho": float(a31["rho"]), "rho_source": a31["rho_source"], "assumption_check": a31["mode"],
        "margins": {"units": m["units"], "unit": int(data.keep[m["unit"]]),
                    "partner": (kind, int(data.keep[j]) if kind == "point" else j),
                    "final_own": m["final_own"], "final_cross": m["final_cross"],
                    "worst": m["worst"], "theta_range": m["theta_range"],
                    "norm2_range": m["norm2_range"], "theta_final": m["theta_final"]},
        "attempts": attempts,
        "shortcut": (f"final block skip R^{k} -> R^{r}: fixed parameter-free "
                     + ("zero padding [h; 0]" if r >= k else f"truncation h[:{r}]")),
        **settings,
    }
