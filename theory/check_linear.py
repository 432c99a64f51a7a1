"""Section 2 of Hardt & Ma checked numerically: rows L1-L19 of `python -m theory.check` (L11-L19,
Theorem 2.2 and eq. (2.3), in theory/check_linear_bounds.py).

What each row checks is in docs/theory.md.  The check computes its references itself, not with
the code under test: ``γ`` from the eigenvalues of ``RᵀR``, Theorem 2.1's bound from that ``γ``,
the product ``(I + A_ℓ)···(I + A_1)`` with ``multi_dot``, and the paper's split ``(q, p)``.
"""
import functools
import math

import numpy as np
import scipy.linalg as sla

from theory import linear as L
from theory.linear_optimum import _rot as rot
from theory.rows import Row, measure


# ------------------------------------------------------------------ data and references


def random_R(d, rng, gamma_max=1.0, det_sign=1):
    """``R = U diag(e^u) Vᵀ``, ``u ~ U[−γ_max, γ_max]``, Haar ``U, V``; ``det R`` of sign det_sign
    (0: either)."""
    U = np.linalg.qr(rng.standard_normal((d, d)))[0]
    V = np.linalg.qr(rng.standard_normal((d, d)))[0]
    R = (U * np.exp(rng.uniform(-gamma_max, gamma_max, d))) @ V.T
    if det_sign and np.sign(np.linalg.det(R)) != det_sign:
        R[:, 0] *= -1
    return R


def random_Sigma(d, rng, lo, hi):
    """A random covariance with eigenvalues log-uniform in [lo, hi] (the extremes included)."""
    Q = np.linalg.qr(rng.standard_normal((d, d)))[0]
    ev = np.exp(rng.uniform(np.log(lo), np.log(hi), d))
    ev[0], ev[-1] = lo, hi
    return (Q * ev) @ Q.T


def special_Rs(rng):
    """Edge cases of Theorem 2.1 with ``det R > 0``: R = I, d = 1, rotations by exactly π, −I,
    repeated singular values, a symmetric R with negative eigenvalue pairs, orthogonal, PSD."""
    Rs = {"I_5": np.eye(5), "d=1": np.array([[2.5]]), "-I_4": -np.eye(4),
          "rot_pi_3d": sla.block_diag(rot(math.pi), [[1.0]]),
          "rot_pi+eps": sla.block_diag(rot(math.pi - 1e-9), rot(0.3), [[1.0]]),
          "diag(-1,-2,3)": np.diag([-1.0, -2.0, 3.0]),
          "psd_7": (lambda M: M @ M.T + 0.1 * np.eye(7))(rng.standard_normal((7, 7)))}
    Q = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    Q[:, 0] *= np.sign(np.linalg.det(Q))
    Rs["orthogonal_6"] = Q
    Rs["repeated_sv_6"] = 2.0 * Q @ np.diag([1, 1, 1, 3, 3, 3.0]) @ Q[::-1].T
    Rs["Q(-I)Q^T_6"] = Q @ np.diag([-1, -1, -1, -1, 1, 1.0]) @ Q.T
    return Rs


def gamma_ref(R):
    """``γ`` from the eigenvalues ``σ²`` of ``RᵀR``: ``max |log σ²| / 2`` (inf if singular)."""
    ev = np.linalg.eigvalsh(R.T @ R)
    return math.inf if ev[0] <= 1e-300 else 0.5 * max(abs(math.log(ev[0])), abs(math.log(ev[-1])))


def bound_ref(R, ell):
    return 2.0 * (math.sqrt(math.pi) + math.sqrt(3.0 * gamma_ref(R))) ** 2 / ell


def _chain(factors, d):
    return functools.reduce(np.matmul, factors, np.eye(d))


def product_ref(A):
    """``(I + A_ℓ)···(I + A_1)`` written out left to right."""
    return _chain([np.eye(A.shape[-1]) + a for a in A[::-1]], A.shape[-1])


def product_ref_batched(A):
    return np.stack([product_ref(a) for a in A])


def gradient_differences(A, R, Sigma, h=1e-6):
    """``∇f`` by central differences of ``f − C = tr(E Σ Eᵀ)`` (numpy; independent of TensorFlow)."""
    def f(B):
        E = product_ref(B) - R
        return np.trace(E @ Sigma @ E.T)
    G = np.empty_like(A)
    for idx in np.ndindex(A.shape):
        e = np.zeros_like(A)
        e[idx] = h
        G[idx] = (f(A + e) - f(A - e)) / (2 * h)
    return G


def gradient_as_printed(A, R, Sigma):
    """Lemma 2.4 as the paper prints it (numpy, one A of shape (ℓ, d, d)):
    ``2 (I + A_ℓᵀ)···(I + A_{i+1}ᵀ) E Σ (I + A_{i−1}ᵀ)···(I + A_1ᵀ)``."""
    ell, d = A.shape[0], A.shape[-1]
    T = [np.eye(d) + a.T for a in A]
    E = product_ref(A) - R
    return np.stack([2 * _chain(T[ell - 1:i:-1], d) @ E @ Sigma @ _chain(T[i - 1::-1] if i else [], d)
                     for i in range(ell)])


# ------------------------------------------------------------------ Claim 2.3, Lemma 2.4


def claim23(quick, rng):
    sizes = [(4, 3), (16, 8)] if quick else [(4, 3), (16, 8), (64, 16), (8, 256)]
    n = 20000 if quick else 100000
    zs = []
    for k, (d, ell) in enumerate(sizes):
        R, Sigma = random_R(d, rng, 0.5), random_Sigma(d, rng, 0.2, 2.0)
        A = 0.3 / ell * rng.standard_normal((ell, d, d)) / math.sqrt(d)
        X, Y = L.sample(R, Sigma, n, seed=100 + k)
        losses = L.empirical_risk(A, X, Y, per_sample=True).numpy()
        f = float(L.population_risk(A, R, Sigma))
        zs.append(abs(losses.mean() - f) / (losses.std() / math.sqrt(n)))
    return Row("L1", "Claim 2.3: population risk = empirical risk, C = E|xi|^2 = d", "proved",
               len(zs), "max |emp - pop| / std.err", max(zs), "< 5", max(zs) < 5,
               [f"(d, l) in {sizes}, n = {n} samples each; the paper's 'C = E[xx^T]' is a typo"])


def lemma24(quick, rng):
    sizes = [(1, 1), (3, 4), (8, 16), (16, 64)] if quick else \
        [(1, 1), (3, 4), (8, 16), (16, 64), (33, 128), (64, 256)]
    errs = []
    for d, ell in sizes:
        R, Sigma = random_R(d, rng, 0.5), random_Sigma(d, rng, 0.1, 3.0)
        A = (0.5 / ell) * rng.standard_normal((4, ell, d, d)) / math.sqrt(d)
        g1, g2 = L.gradient(A, R, Sigma).numpy(), L.autodiff_gradient(A, R, Sigma).numpy()
        errs.extend(np.linalg.norm((g1 - g2).reshape(4, -1), axis=1)
                    / np.linalg.norm(g2.reshape(4, -1), axis=1))
    # the printed order, against central differences of f, at l = 2..6 (>= 2 factors from l = 3)
    printed, per_layer = [], None
    for ell in (2, 3, 4, 5, 6):
        d = 4
        R, Sigma = random_R(d, rng, 0.5), random_Sigma(d, rng, 0.5, 2.0)
        A = 0.4 * rng.standard_normal((ell, d, d)) / math.sqrt(d)
        g = gradient_differences(A, R, Sigma)
        rel = (np.linalg.norm(gradient_as_printed(A, R, Sigma) - g, axis=(1, 2))
               / np.linalg.norm(g, axis=(1, 2)))
        printed.extend(rel)
        if ell == 4:
            per_layer = rel
    tol = 1e-9
    return [
        Row("L2", "Lemma 2.4 as printed: (I+A_l^T)...(I+A_{i+1}^T) E Sigma (I+A_{i-1}^T)...(I+A_1^T)",
            "printed", len(printed), "max rel. diff. from grad f", max(printed), "<= 1e-6",
            max(printed) <= 1e-6,
            ["grad f by central differences (numpy); counterexample l = 4, d = 4, |A_j| ~ 0.4: per layer "
             + ", ".join(f"{x:.2f}" for x in per_layer) + " (a product of two or more factors in "
             "the reverse order); equal only where each product has at most one factor"],
            corrected_by="L3"),
        Row("L3", "Lemma 2.4, proof's order: (I+A_{i+1}^T)...(I+A_l^T) E Sigma (I+A_1^T)...(I+A_{i-1}^T)",
            "proved", len(errs), "max rel. error vs autodiff", max(errs), f"<= {tol:g}",
            max(errs) <= tol, [f"(d, l) in {sizes}, 4 points each (theory.linear.gradient)"]),
    ]


# ------------------------------------------------------------------ Theorem 2.1


def _paper_split_ref(g, ell):
    a, b = math.sqrt(math.pi), math.sqrt(3 * g)
    q = min(max(1, round(ell * a / (2 * (a + b)))), (ell - (1 if g > 1e-13 else 0)) // 2)
    return q, ell - 2 * q


def theorem21(quick, rng):
    dims = [1, 2, 3, 5, 8] if quick else [1, 2, 3, 5, 8, 16, 33, 64]
    depths = [1, 2, 3, 4, 8, 32] if quick else [1, 2, 3, 4, 8, 32, 101, 256]
    cases = [(f"rand_d{d}_g{g}", random_R(d, rng, g)) for d in dims for g in (0.3, 1.5)]
    cases += list(special_Rs(rng).items())
    cases += [("singular diag(0,1,2)", np.diag([0.0, 1, 2])), ("zero_3", np.zeros((3, 3)))]
    prod, slack, psd, paper, paper_ratio, identity = [], [], [], [], [], []
    for name, R in cases:
        g = gamma_ref(R)
        is_psd = np.allclose(R, R.T) and np.linalg.eigvalsh(R).min() > 0
        for ell in depths:
            if np.linalg.det(R) < 0 and bound_ref(R, ell) <= 1:
                continue                                   # refused: rows L8-L9
            A = L.global_optimum(R, ell)
            err = np.linalg.norm(product_ref(A) - R) / max(1.0, np.linalg.norm(R))
            prod.append((err, f"{name}, l={ell}"))
            if ell < 3 * g or np.linalg.det(R) <= 0:      # det R < 0: rows L8-L10
                continue
            b, n = bound_ref(R, ell), L.spectral_norms(A).max()
            slack.append((1 - n / b, f"{name}, l={ell}: |||A||| = {n:.3g} <= {b:.3g}"))
            if is_psd and g == 0:
                identity.append(np.all(A == 0))
            elif is_psd:
                psd.append((1 - n / (3 * g / ell), f"{name}, l={ell}"))
            if ell >= 3 and not is_psd:
                q, p = _paper_split_ref(g, ell)
                Ap = L.global_optimum(R, ell, method="paper")
                proof = max(math.pi / q, 3 * g / p if p else 0.0)
                npp = L.spectral_norms(Ap).max()
                if p == 0 or p >= g:           # |e^x - 1| <= 3|x| needs |x| = gamma/p <= 1
                    paper.append((1 - npp / proof, f"{name}, l={ell}, q={q}, p={p}"))
                paper_ratio.append((npp / b, f"{name}, l={ell}"))
    tol = 1e-10 * max(depths) * max(dims)
    w = max(prod)
    worst = min(slack)
    wp, wr = min(paper), max(paper_ratio)
    names = ", ".join(k for k, _ in cases if not k.startswith("rand"))
    return [
        Row("L4", "Thm 2.1 construction: (I+A_l)...(I+A_1) = R", "proved", len(prod),
            "max rel. error", w[0], f"<= {tol:.0e}", w[0] <= tol,
            [f"d in {dims} (gamma 0.3, 1.5) and [{names}], depths {depths}; worst at {w[1]}"]),
        Row("L5", "Thm 2.1: |||A*||| <= 2(sqrt(pi)+sqrt(3g))^2/l for l >= 3g, det R > 0", "proved",
            len(slack), "min 1 - |||A|||/bound", worst[0], ">= 0", worst[0] >= 0,
            [f"construction 'auto'; gamma and bound computed by the check; tightest: {worst[1]}"]),
        Row("L6", "Thm 2.1, the proof's construction (3 groups, q and p rounded, fn. 4): "
            "|||A||| <= max(pi/q, 3g/p)", "proved", len(paper), "min 1 - |||A|||/max(pi/q, 3g/p)",
            wp[0], ">= 0", wp[0] >= 0,
            [f"tightest: {wp[1]}; against the printed bound 2(sqrt(pi)+sqrt(3g))^2/l: worst "
             f"|||A|||/bound = {wr[0]:.4f} at {wr[1]} -- footnote 4's 'small constant factor' from "
             "rounding q, p to integers, not a slip"]),
        Row("L7", "Thm 2.1, PSD case: |||A*||| <= 3 gamma/l (R != I); R = I gives A = 0", "proved",
            len(psd) + len(identity), "min 1 - |||A|||/(3 gamma/l)", min(psd)[0], ">= 0, and A = 0 at R = I",
            min(psd)[0] >= 0 and all(identity),
            [f"symmetric PD R, A_j = R^(1/l) - I; tightest {min(psd)[1]}; R = I (gamma = 0, 0/0 in the "
             f"slack, so counted apart): A = 0 exactly in {sum(identity)} of {len(identity)} instances"]),
    ]


def _det_lemma_samples(rng, n=3000):
    """min det(I + A) over random A with ‖A‖ = 0.999 (half of them near −0.999 I)."""
    worst = math.inf
    for d in (1, 2, 3, 5):
        A = rng.standard_normal((n, d, d))
        A[: n // 2] = -np.eye(d) + 0.05 * A[: n // 2]
        A *= 0.999 / np.linalg.norm(A, ord=2, axis=(1, 2))[:, None, None]
        worst = min(worst, np.linalg.det(np.eye(d) + A).min())
    return worst


def theorem21_det(quick, rng):
    """det R < 0: the printed theorem refuted where the bound is <= 1; built where it is > 1."""
    depths = [2, 3, 4, 8, 16, 32, 64]
    cases = [("diag(-1,2,3)", np.diag([-1.0, 2, 3])), ("diag(-1,1)", np.diag([-1.0, 1]))]
    cases += [(f"rand_d{d}", random_R(d, rng, 1.0, det_sign=-1)) for d in ((1, 3) if quick else (1, 2, 3, 5))]
    printed, refused, built, wrong = [], [], [], []
    for name, R in cases:
        g = gamma_ref(R)
        for ell in depths:
            if ell < 3 * g:
                continue
            b = bound_ref(R, ell)
            printed.append((b, f"R = {name}, l = {ell}"))
            try:
                A = L.global_optimum(R, ell)
            except ValueError as e:
                ok = b <= 1 and "no factorization" in str(e)
                refused.append(ok)
                if not ok:
                    wrong.append(f"{name}, l={ell}: refused at bound {b:.3g}")
                continue
            if b <= 1:
                wrong.append(f"{name}, l={ell}: not refused at bound {b:.3g}")
                continue
            err = np.abs(product_ref(A) - R).max()
            built.append((1 - L.spectral_norms(A).max() / b if err < 1e-8 else -1.0,
                          f"{name}, l={ell}: |||A||| = {L.spectral_norms(A).max():.4g} <= {b:.4g}"))
    det_min = _det_lemma_samples(rng)
    ex = min(printed)
    return [
        Row("L8", "Thm 2.1 as printed (no det R > 0): such A* exists whenever l >= 3 gamma", "printed",
            len(printed), "min bound at det R < 0", ex[0], "> 1 (else no A*)", ex[0] > 1,
            [f"counterexample {ex[1]}: bound {ex[0]:.3g} <= 1, and a factor with det(I + A_j) < 0 has an "
             "eigenvalue of A_j below -1, so |||A||| > 1; min det(I + A) over 12,000 random A with "
             f"|A| = 0.999: {det_min:.2e} > 0"], corrected_by="L9, L10"),
        Row("L9", "Thm 2.1, det R < 0: refused exactly where the bound is <= 1, with the reason",
            "proved", len(refused) + len(wrong), "wrongly refused or built", len(wrong), "= 0",
            not wrong and det_min > 0, wrong or [f"{len(refused)} refusals, each naming the bound"]),
        Row("L10", "Thm 2.1, det R < 0, bound > 1: a factorization within the bound is built",
            "empirical", len(built), "min 1 - |||A|||/bound", min(built)[0], ">= 0", min(built)[0] >= 0,
            ["A_1 = -(1 + a) v v^T (v a right singular vector of R), the other l - 1 layers factor "
             f"R (I + A_1)^-1 (det > 0); tightest: {min(built)[1]}"]),
    ]


def checks(quick: bool):
    """The rows of Section 2 (see theory/rows.py), each stamped with its own time."""
    from theory import check_linear_bounds as B
    rng = np.random.default_rng(20170424)
    rows = []
    for fn in (claim23, lemma24, theorem21, theorem21_det, B.theorem22_critical, B.equation23,
               B.adversarial):
        rows.extend(measure(fn, quick, rng))
    return rows
