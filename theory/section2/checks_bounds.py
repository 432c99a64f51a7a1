"""Theorem 2.2 and eq. (2.3) of Hardt & Ma checked numerically: rows L11-L19 of
`python -m theory.check` -- critical points found by Levenberg-Marquardt, the gradient lower
bounds at sampled points of B_tau, and an adversarial search against them.
"""
import math

import numpy as np
import tensorflow as tf

from theory.section2 import linear as L
from theory.rows import Row
from theory.section2.references import (gradient_ref, product_ref, product_ref_batched, random_R, random_Sigma,
                                        spectral_norms_ref)

DT = tf.float64
TAU_IN = 0.99             # L11: critical points counted inside the ball if |||A||| <= TAU_IN
MIN_FRESH = 6             # L11: at least this many of them from starts not run through GD, 1 per (l, d)


# ------------------------------------------------------------------ Theorem 2.2: critical points


def critical_points(A0, R, Sigma, steps=80, h=1e-6, radius=0.05):
    """Levenberg-Marquardt on ``∇f(A) = 0`` (Lemma 2.4's gradient; its Jacobian, the Hessian of f,
    by central differences of it) from each start in ``A0`` (B, ℓ, d, d), steps at most ``radius``
    long; converges to nearby critical points of any kind (minima or saddles).  Returns A,
    ``‖∇f(A)‖_F`` and ``f(A) − C_opt`` (numpy, shape (B,))."""
    B, n = A0.shape[0], A0[0].size
    shifts = h * np.eye(n).reshape((n,) + A0.shape[1:])

    def evaluate(A):
        pts = np.concatenate([A, (A[:, None] + shifts).reshape((-1,) + A.shape[1:]),
                              (A[:, None] - shifts).reshape((-1,) + A.shape[1:])])
        G = L.gradient(pts, R, Sigma).numpy().reshape(len(pts), n)
        H = (G[B:B + B * n] - G[B + B * n:]).reshape(B, n, n) / (2 * h)
        E = product_ref_batched(A) - R
        return G[:B], (H + H.transpose(0, 2, 1)) / 2, np.einsum("bij,jk,bik->b", E, Sigma, E)

    A = A0.copy()
    g, H, ex = evaluate(A)
    mu = np.einsum("bij,bij->b", H, H)                       # damping, relative to ‖H‖²
    for _ in range(steps):
        floor = 1e-12 * np.einsum("bij,bij->b", H, H) + 1e-300
        mu = np.maximum(mu, floor)
        step = np.linalg.solve(H @ H + mu[:, None, None] * np.eye(n),
                               np.einsum("bij,bj->bi", H, g)[..., None])[..., 0]
        step *= np.minimum(1.0, radius / np.maximum(np.linalg.norm(step, axis=1), 1e-300))[:, None]
        cand = A - step.reshape(A.shape)
        g2, H2, ex2 = evaluate(cand)
        better = np.linalg.norm(g2, axis=1) < np.linalg.norm(g, axis=1)
        A[better], g[better], H[better], ex[better] = cand[better], g2[better], H2[better], ex2[better]
        mu = np.where(better, mu / 5, mu * 4)
    return A, np.linalg.norm(g, axis=1), ex


def theorem22_critical(quick, rng):
    configs = [(2, 1), (3, 2), (4, 2)] if quick else [(2, 1), (3, 2), (4, 2), (3, 3), (6, 2)]
    starts = 18 if quick else 24
    inside, outside_bad, unconverged, fresh = [], [], 0, []
    for ell, d in configs:
        Sigma = random_Sigma(d, rng, 0.3, 1.0)
        Ar = rng.standard_normal((ell, d, d))                # R reachable inside B_0.4
        R = product_ref(0.4 * Ar / np.linalg.norm(Ar, ord=2, axis=(1, 2))[:, None, None])
        scale = np.trace(R @ Sigma @ R.T)
        A0 = rng.standard_normal((starts, ell, d, d))
        norms = np.linalg.norm(A0, ord=2, axis=(2, 3))[..., None, None]
        A0 *= rng.uniform(0.2, 0.95, (starts, ell, 1, 1)) / norms
        ctrl = starts // 3                           # control starts near A_1 = A_2 = -I (|||A||| = 1)
        A0[:ctrl, :2] = -np.eye(d) + 0.05 * rng.standard_normal((ctrl, 2, d, d))
        descend = np.arange(starts) >= (starts + ctrl) // 2   # these first follow -grad f
        for _ in range(100 if quick else 200):
            A0[descend] -= (0.2 / ell) * L.gradient(A0[descend], R, Sigma).numpy()
        A, gn, ex = critical_points(A0, R, Sigma, steps=80)
        # certified here, not by the search's own numbers: |grad f| and f - C_opt recomputed
        gn = np.linalg.norm(np.stack([gradient_ref(a, R, Sigma) for a in A]).reshape(starts, -1), axis=1)
        E = product_ref_batched(A) - R
        ex = np.einsum("bij,jk,bik->b", E, Sigma, E)
        conv = gn <= 1e-12 * math.sqrt(scale)
        unconverged += int((~conv).sum())
        moved = np.abs(A - A0).reshape(starts, -1).max(axis=1)
        norms = spectral_norms_ref(A).max(axis=1)
        fresh.append(0)
        for i in np.nonzero(conv)[0]:
            if norms[i] <= TAU_IN:
                fresh[-1] += int(not descend[i] and moved[i] > 0)
                inside.append((ex[i] / scale, f"l={ell}, d={d}, |||A|||={norms[i]:.3f}"))
            elif ex[i] > 1e-6 * scale:
                outside_bad.append((ex[i] / scale, f"l={ell}, d={d}, |||A|||={norms[i]:.3f}"))
    w = max(inside) if inside else (math.inf, "none found")
    return [
        Row("L11", "Thm 2.2: every critical point of f in B_tau (tau < 1) is a global minimum", "proved",
            len(inside), "max (f - C_opt)/|R Sigma^1/2|^2 at them", w[0],
            f"<= 1e-12; >= {MIN_FRESH} from fresh starts, 1 per (l, d)", w[0] <= 1e-12 and sum(fresh) >= MIN_FRESH and min(fresh) >= 1,
            [f"Levenberg-Marquardt on grad f = 0 (Hessian by differences of grad f), from {starts} starts in "
             f"B_0.95 (half of them after gradient descent) for each (l, d) in {configs}; {len(inside)} "
             f"critical points (|grad f| <= 1e-12 |R Sigma^1/2|) with |||A||| <= {TAU_IN} found, "
             f"{unconverged} starts did not converge; from starts not run through gradient descent (and moved "
             f"by the search): {fresh} per (l, d); worst at {w[1]}",
             f"nearer the boundary a tiny gradient proves nothing: at A_1 = A_2 = -(1 - e) I it is "
             f"O(e) while f - C_opt is not"]),
        Row("L12", f"control: Thm 2.2 needs tau < 1: critical points with |||A||| > {TAU_IN}, not minima",
            "control", len(outside_bad), "max (f - C_opt)/|R Sigma^1/2|^2 there",
            max(outside_bad)[0] if outside_bad else 0.0, "> 0 (found)", bool(outside_bad),
            ["control for L11: the same search from starts near A_1 = A_2 = -I finds them "
             f"(e.g. {max(outside_bad)[1] if outside_bad else 'none'}), so L11's search can see them"]),
    ]


# ------------------------------------------------------------------ Theorem 2.2 and eq. (2.3)


def _taus(ell):
    taus = [0.5 / ell, 2.0 / ell, 8.0 / ell, 0.1, 0.5, 0.9]
    # keep (1 - τ)^{2ℓ} representable: ℓ·|log(1−τ)| ≤ 30
    return sorted({t for t in taus if t < 1 and -ell * math.log1p(-t) <= 30})


def _where(out, i, ell, d, Sigma):
    ev = np.linalg.eigvalsh(Sigma)
    return f"tau={out['tau'][i]:.3g}, l={ell}, d={d}, Sigma eig in [{ev[0]:.3g}, {ev[-1]:.3g}]"


def printed_counterexample():
    """The smallest counterexample to eq. (2.3) as printed: ``ℓ = 2``, ``d = 1``, ``Σ = R = 1``,
    ``A_1 = A_2 = −τ``, ``τ = 1/2``: ``‖∇f‖² = 2·(2·(1/2)·(−3/4))² = 9/8`` but the printed right side
    is ``4·2·(1/2)·1·(9/16) = 9/4``; the proof's form, with ``(1−τ)^{2(ℓ−1)}``, gives 9/8 (tight).
    Returns (lhs, printed rhs, proof rhs)."""
    out = L.gradient_bounds(-0.5 * np.ones((2, 1, 1)), np.eye(1), np.eye(1), tau=0.5)
    return tuple(float(np.exp(v)) for v in (out["printed"][0], out["printed"][1], out["proof"][1]))


def equation23(quick, rng):
    dims = [2, 8, 16] if quick else [1, 2, 8, 32, 64]
    depths = [1, 4, 32] if quick else [1, 2, 8, 32, 128, 256]
    m = {k: [] for k in ("printed", "proof", "proof_general", "per_layer", "proof_SigmaGt1")}
    count = dict.fromkeys(m, 0)
    tight = {k: [] for k in ("per_layer", "proof", "proof_general")}
    for d in dims:
        for ell in depths:
            per_point = (4 if quick else 6) if d * d * ell <= 100_000 else 3
            for family, (lo, hi) in (("le1", (0.1, 1.0)), ("gen", (0.1, 10.0)), ("id", (1, 1)),
                                     ("gen", (4.0, 4.0))):
                Sigma = random_Sigma(d, rng, lo, hi) if family != "id" else np.eye(d)
                R, taus = random_R(d, rng, 1.0), _taus(ell)
                A = rng.standard_normal((len(taus), per_point, ell, d, d))
                A /= np.linalg.norm(A, ord=2, axis=(-2, -1))[..., None, None]
                A *= rng.uniform(0.3, 1.0, (len(taus), per_point, ell, 1, 1))
                for t, tau in enumerate(taus):
                    A[t] *= tau
                    A[t, 0] = -tau * np.eye(d)                    # the tight point of the proof
                    A[t, 1] = tau * np.eye(d) * rng.choice([-1, 1], (ell, 1, 1))
                out = L.gradient_bounds(A.reshape(-1, ell, d, d), R, Sigma)
                for form in L.FORMS:
                    key = "proof_SigmaGt1" if (form == "proof" and family == "gen") else form
                    margin = out[form][0] - out[form][1]
                    i = int(np.argmin(margin))
                    m[key].append((float(margin[i]), _where(out, i, ell, d, Sigma)))
                    count[key] += len(margin)
                if family == "id":        # both sides at A_j = -tau I, Sigma = I, against the closed form
                    for t, tau in enumerate(taus):
                        i = t * per_point
                        E = (1 - tau) ** ell * np.eye(d) - R
                        l1, lE2 = math.log1p(-tau), math.log(np.sum(E * E))
                        closed = {"per_layer": math.log(2) + (ell - 1) * l1 + lE2 / 2,
                                  "proof": math.log(4 * ell) + 2 * (ell - 1) * l1 + lE2}
                        closed["proof_general"] = closed["proof"]
                        for form, ref in closed.items():
                            dev = max(abs(out[form][0][i] - ref), abs(out[form][1][i] - ref))
                            tight[form].append((dev, f"tau={tau:.3g}, l={ell}, d={d}"))
    lhs0, rhs0, _ = printed_counterexample()
    tol = 1e-9
    w = {k: min(v) for k, v in m.items()}
    eq = {k: max(v) for k, v in tight.items()}
    n = count["per_layer"]

    def at_tight(form):
        return (f"at A_j = -tau I, Sigma = I both sides equal the closed form 2^a l^b (1-tau)^c |E|_F^e "
                f"computed in the check ({len(tight[form])} points): max |ln diff| {eq[form][0]:.1e} "
                f"(<= {tol:g}) at {eq[form][1]}")
    ln = "ln(lhs/rhs)"
    return [
        Row("L13", "Thm 2.2, per layer: |df/dA_i|_F >= 2(1-tau)^(l-1) s_min(Sigma) |E|_F", "proved", n,
            f"min {ln}", w["per_layer"][0], f">= -{tol:g}, = 0 at A_j = -tau I",
            w["per_layer"][0] >= -tol and eq["per_layer"][0] <= tol,
            [f"points of B_tau for d in {dims}, l in {depths}, several tau and Sigma, including the "
             f"tight point A_j = -tau I; tightest: {w['per_layer'][1]}", at_tight("per_layer")]),
        Row("L14", "eq. (2.3) as printed: |grad f|^2 >= 4l (1-tau)^(l-1) s_min^2 (f - C_opt)", "printed",
            n, f"min {ln}", w["printed"][0], f">= -{tol:g}", w["printed"][0] >= -tol,
            [f"smallest counterexample l = 2, d = 1, Sigma = R = 1, A_j = -1/2: lhs = {lhs0:.4g} < "
             f"rhs = {rhs0:.4g}; worst: {w['printed'][1]}"], corrected_by="L15, L16"),
        Row("L15", "eq. (2.3), proof's form: ... >= 4l (1-tau)^(2(l-1)) s_min^2 (f - C_opt), Sigma <= I",
            "proved", count["proof"], f"min {ln}", w["proof"][0], f">= -{tol:g}, = 0 at A_j = -tau I",
            w["proof"][0] >= -tol and eq["proof"][0] <= tol,
            [f"sigma_max(Sigma) <= 1; tightest: {w['proof'][1]}", at_tight("proof")]),
        Row("L16", "eq. (2.3), proof with s_min(Sigma) once: ... >= 4l (1-tau)^(2(l-1)) s_min (f - C_opt)",
            "proved", n, f"min {ln}", w["proof_general"][0], f">= -{tol:g}, = 0 at A_j = -tau I",
            w["proof_general"][0] >= -tol and eq["proof_general"][0] <= tol,
            [f"every Sigma; tightest: {w['proof_general'][1]}", at_tight("proof_general")]),
        Row("L17", "eq. (2.3) proof's step |E|_F^2 >= f - C_opt without sigma_max(Sigma) <= 1", "printed",
            count["proof_SigmaGt1"], f"min {ln} of L15's form", w["proof_SigmaGt1"][0], f">= -{tol:g}",
            w["proof_SigmaGt1"][0] >= -tol, [f"worst: {w['proof_SigmaGt1'][1]}"], corrected_by="L16"),
    ]


def _project(A, tau):
    """Project every slice onto ``{‖A_j‖ ≤ τ}`` (clip singular values)."""
    s, u, v = tf.linalg.svd(A)
    return tf.matmul(u * tf.minimum(s, tau)[..., None, :], v, adjoint_b=True)


def _adam(x, g, m, v, t, lr):
    m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
    return x - lr * (m / (1 - 0.9 ** t)) / (tf.sqrt(v / (1 - 0.999 ** t)) + 1e-7), m, v


@tf.function(reduce_retracing=True)
def _adversarial_run(A, E, Sig, tau, lr, steps):
    """``steps`` projected Adam steps on ``log ‖∇f‖² − log tr(EΣEᵀ)`` over (A, E), in one graph."""
    mA, vA, mE, vE = tf.zeros_like(A), tf.zeros_like(A), tf.zeros_like(E), tf.zeros_like(E)
    for t in tf.range(1, steps + 1):
        with tf.GradientTape() as tape:
            tape.watch([A, E])
            before, after, _ = L.prefix_suffix(A)
            G = L.gradient_from_products(before, after, E, Sig)
            obj = tf.reduce_sum(tf.math.log(tf.reduce_sum(G * G, axis=[1, 2, 3]))
                                - tf.math.log(tf.reduce_sum(tf.matmul(E, Sig) * E, axis=[1, 2])))
        gA, gE = tape.gradient(obj, [A, E])
        tt = tf.cast(t, DT)
        A, mA, vA = _adam(A, gA, mA, vA, tt, lr)
        E, mE, vE = _adam(E, gE, mE, vE, tt, lr)
        A = _project(A, tau)
        E = E / tf.sqrt(tf.reduce_sum(E * E, axis=[1, 2], keepdims=True))
    return A, E


def adversarial_search(ell, d, tau, Sigma, batch=8, steps=200, lr=0.02, seed=0):
    """Search for violations of (2.3): minimise ``log ‖∇f‖² − log(f − C_opt)`` over ``A ∈ B_τ``
    (projected Adam) and over ``E`` (i.e. over ``R = Π(I + A_j) − E``; the ratio is invariant to the
    scale of E), with Lemma 2.4's gradient (theory.section2.linear).  Starts: random points of ``B_τ``,
    half of them near ``−τ I`` (where the proof's bound is tight).  Returns A (B, ℓ, d, d), R (B, d, d)."""
    rng = np.random.default_rng(seed)
    A0 = rng.standard_normal((batch, ell, d, d))
    A0 *= tau / np.linalg.norm(A0, ord=2, axis=(-2, -1))[..., None, None]
    A0[: batch // 2] = -tau * np.eye(d) + 0.1 * A0[: batch // 2]
    Sig = tf.constant(np.asarray(Sigma, np.float64))

    A, E = _adversarial_run(_project(tf.constant(A0), tau), tf.constant(rng.standard_normal((batch, d, d))),
                            Sig, tf.constant(tau, DT), tf.constant(lr, DT), tf.constant(steps))
    An = A.numpy()
    return An, product_ref_batched(An) - E.numpy()


def adversarial(quick, rng):
    configs = [(6, 3, 0.1, 1.0)] if quick else \
        [(3, 2, 0.3, 0.3), (6, 3, 0.1, 1.0), (12, 4, 0.05, 0.5), (4, 8, 0.5, 1.0),
         (24, 8, 0.05, 0.3), (48, 4, 0.02, 1.0)]
    steps = 100 if quick else 300
    proof, printed = [], []
    for k, (ell, d, tau, lo) in enumerate(configs):
        Sigma = random_Sigma(d, rng, lo, 1.0)
        A, R = adversarial_search(ell, d, tau, Sigma, batch=8, steps=steps, seed=k)
        out = L.gradient_bounds(A, R, Sigma, tau=tau)
        pm = np.minimum(out["proof_general"][0] - out["proof_general"][1], out["proof"][0] - out["proof"][1])
        proof.extend(pm)
        m = out["printed"][0] - out["printed"][1]
        i = int(np.argmin(m))
        printed.append((float(m[i]), f"tau={tau}, l={ell}, d={d}: lhs = {np.exp(out['printed'][0][i]):.4g}"
                                     f" < rhs = {np.exp(out['printed'][1][i]):.4g}"))
    w = min(printed)
    return [
        Row("L18", "eq. (2.3), proof's forms (L15, L16) under adversarial search", "proved", len(proof),
            "min ln(lhs/rhs)", float(min(proof)), ">= -1e-6", float(min(proof)) >= -1e-6,
            [f"(l, d, tau, s_min(Sigma)) in {configs}, sigma_max(Sigma) = 1, 8 starts x {steps} projected "
             "Adam steps minimising |grad f|^2/(f - C_opt) over A in B_tau and R; ~0 = the bound is tight"]),
        Row("L19", "eq. (2.3) as printed, under adversarial search", "printed", len(proof),
            "min ln(lhs/rhs)", w[0], ">= -1e-9", w[0] >= -1e-9, [f"worst: {w[1]}"], corrected_by="L18"),
    ]
