"""Section 2 of Hardt & Ma checked numerically: rows L1-L10 of `python -m theory.check` here,
L11-L19 (Theorem 2.2 and eq. (2.3)) in theory/section2/checks_bounds.py; `GROUPS` lists them all.

What each row checks is in docs/theory.md.  The checks compare the code under test
(theory.section2.linear, theory.section2.optimum) with references computed without it
(theory.section2.references): γ from the eigenvalues of ``RᵀR``, Theorem 2.1's bound from that γ,
the product ``(I + A_ℓ)···(I + A_1)`` written out, spectral norms from singular values, the
gradient by central differences, and the paper's split ``(q, p)``.
"""
import math

import numpy as np

from theory.rows import Group, Row
from theory.section2 import checks_bounds as B
from theory.section2 import linear as L
from theory.section2.references import (apply_ref, bound_ref, det_sign_ref, gamma_ref, gradient_as_printed,
                                        gradient_differences, negative_Rs, paper_split_ref,
                                        product_ref, random_R, random_Sigma, special_Rs,
                                        spectral_norms_ref)


# ------------------------------------------------------------------ Claim 2.3, Lemma 2.4


def claim23(quick, rng):
    """L1: the module's population risk against the empirical risk computed here, on samples
    ``y = Rx + ξ`` drawn here, with the product written out (references.apply_ref); and the
    module's empirical risk on the same samples against that one."""
    sizes = [(4, 3), (16, 8)] if quick else [(4, 3), (16, 8), (64, 16), (8, 256)]
    n = 20000 if quick else 100000
    zs, same = [], 0.0
    for d, ell in sizes:
        R, Sigma = random_R(d, rng, 0.5), random_Sigma(d, rng, 0.2, 2.0)
        A = 0.3 / ell * rng.standard_normal((ell, d, d)) / math.sqrt(d)
        X = rng.standard_normal((n, d)) @ np.linalg.cholesky(Sigma).T
        Y = X @ R.T + rng.standard_normal((n, d))
        res = apply_ref(A, X) - Y
        losses = np.einsum("ij,ij->i", res, res)
        f = float(L.population_risk(A, R, Sigma))
        zs.append(abs(losses.mean() - f) / (losses.std() / math.sqrt(n)))
        same = max(same, abs(float(L.empirical_risk(A, X, Y)) - losses.mean()) / losses.mean())
    return Row("L1", "Claim 2.3: population risk = empirical risk, C = E|xi|^2 = d", "proved",
               len(zs), "max |emp - pop| / std.err", max(zs), "< 5, and empirical_risk exact",
               max(zs) < 5 and same <= 1e-12,
               [f"(d, l) in {sizes}, n = {n} samples each, the product applied layer by layer in the "
                f"check; theory's empirical_risk on the same samples: rel. diff. {same:.1e} (<= 1e-12); "
                "the paper's 'C = E[xx^T]' is a typo"])


def lemma24(quick, rng):
    """L2: the printed order against central differences; L3: theory's gradient against autodiff
    (every size) and against central differences of f computed here (the small sizes)."""
    sizes = [(1, 1), (3, 4), (8, 16), (16, 64)] if quick else \
        [(1, 1), (3, 4), (8, 16), (16, 64), (33, 128), (64, 256)]
    errs, fd = [], []
    for d, ell in sizes:
        R, Sigma = random_R(d, rng, 0.5), random_Sigma(d, rng, 0.1, 3.0)
        A = (0.5 / ell) * rng.standard_normal((4, ell, d, d)) / math.sqrt(d)
        g1, g2 = L.gradient(A, R, Sigma).numpy(), L.autodiff_gradient(A, R, Sigma).numpy()
        errs.extend(np.linalg.norm((g1 - g2).reshape(4, -1), axis=1)
                    / np.linalg.norm(g2.reshape(4, -1), axis=1))
        if d * d * ell <= 64:
            for a in A:
                g = gradient_differences(a, R, Sigma)
                fd.append(np.linalg.norm(L.gradient(a, R, Sigma).numpy() - g) / np.linalg.norm(g))
    # the printed order, against central differences of f, at l = 2..6 (>= 2 factors from l = 3)
    printed, per_layer, norms = [], None, []
    for ell in (2, 3, 4, 5, 6):
        d = 4
        R, Sigma = random_R(d, rng, 0.5), random_Sigma(d, rng, 0.5, 2.0)
        A = 0.4 * rng.standard_normal((ell, d, d)) / math.sqrt(d)
        norms.extend(spectral_norms_ref(A))
        g = gradient_differences(A, R, Sigma)
        rel = (np.linalg.norm(gradient_as_printed(A, R, Sigma) - g, axis=(1, 2))
               / np.linalg.norm(g, axis=(1, 2)))
        printed.extend(rel)
        if ell == 4:
            per_layer = rel
    tol, tol_fd = 1e-9, 1e-6
    return [
        Row("L2", "Lemma 2.4 as printed: (I+A_l^T)...(I+A_{i+1}^T) E Sigma (I+A_{i-1}^T)...(I+A_1^T)",
            "printed", len(printed), "max rel. diff. from grad f", max(printed), "<= 1e-6",
            max(printed) <= 1e-6,
            [f"grad f by central differences (numpy), l = 2..6, d = 4, A_j = 0.4 G/sqrt(d) (G "
             f"standard normal; measured |A_j| in [{min(norms):.2f}, {max(norms):.2f}]); at l = 4 per "
             "layer " + ", ".join(f"{x:.2f}" for x in per_layer) + " (a product of two or more factors "
             "in the reverse order); equal only where each product has at most one factor"],
            corrected_by="L3"),
        Row("L3", "Lemma 2.4, proof's order: (I+A_{i+1}^T)...(I+A_l^T) E Sigma (I+A_1^T)...(I+A_{i-1}^T)",
            "proved", len(errs) + len(fd), "max rel. error vs autodiff", max(errs),
            f"<= {tol:g}; vs differences <= {tol_fd:g}", max(errs) <= tol and max(fd) <= tol_fd,
            [f"(d, l) in {sizes}, 4 points each (theory.section2.linear.gradient); against central "
             f"differences of f computed in the check ({len(fd)} points, d^2 l <= 64): {max(fd):.1e}"]),
    ]


# ------------------------------------------------------------------ Theorem 2.1


def theorem21(quick, rng):
    """L4-L7: Theorem 2.1's construction, its product (det R > 0, det R < 0 where the bound
    exceeds 1, singular R) and its norm bounds; every reference computed here."""
    dims = [1, 2, 3, 5, 8] if quick else [1, 2, 3, 5, 8, 16, 33, 64]
    depths = [1, 2, 3, 4, 8, 32] if quick else [1, 2, 3, 4, 8, 32, 101, 256]
    cases = [(f"rand_d{d}_g{g}", random_R(d, rng, g)) for d in dims for g in (0.3, 1.5)]
    cases += list(special_Rs(rng).items())
    cases += list(negative_Rs(rng).items())
    cases += [("singular diag(0,1,2)", np.diag([0.0, 1, 2])), ("zero_3", np.zeros((3, 3)))]
    prod, slack, psd, paper, paper_ratio, identity, negative = [], [], [], [], [], [], 0
    for name, R in cases:
        g, sign = gamma_ref(R), det_sign_ref(R)
        is_psd = np.allclose(R, R.T) and np.linalg.eigvalsh(R).min() > 0
        for ell in depths:
            if sign < 0 and bound_ref(R, ell) <= 1:
                continue                                   # refused: row L9
            A = L.global_optimum(R, ell)
            if A.shape != (ell,) + R.shape:
                raise ValueError(f"global_optimum({name}, {ell}) has shape {A.shape}")
            err = np.linalg.norm(product_ref(A) - R) / max(1.0, np.linalg.norm(R))
            prod.append((err / ell, f"{name}, l={ell}: {err:.1e}"))
            negative += sign < 0
            if ell < 3 * g or sign <= 0:                   # det R < 0: rows L9-L10
                continue
            b, n = bound_ref(R, ell), spectral_norms_ref(A).max()
            slack.append((1 - n / b, f"{name}, l={ell}: |||A||| = {n:.3g} <= {b:.3g}"))
            if is_psd and g == 0:
                identity.append(np.all(A == 0))
            elif is_psd:
                psd.append((1 - n / (3 * g / ell), f"{name}, l={ell}"))
            if ell >= 3 and not is_psd:
                q, p = paper_split_ref(g, ell)
                Ap = L.global_optimum(R, ell, method="paper")
                proof = max(math.pi / q, 3 * g / p if p else 0.0)
                npp = spectral_norms_ref(Ap).max()
                err = np.linalg.norm(product_ref(Ap) - R) / max(1.0, np.linalg.norm(R))
                prod.append((err / ell, f"{name}, l={ell}, method='paper': {err:.1e}"))
                if p == 0 or p >= g:           # |e^x - 1| <= 3|x| needs |x| = gamma/p <= 1
                    paper.append((1 - npp / proof, f"{name}, l={ell}, q={q}, p={p}"))
                paper_ratio.append((npp / b, f"{name}, l={ell}"))
    tol = 1e-11
    w = max(prod)
    worst = min(slack)
    wp, wr = min(paper), max(paper_ratio)
    names = ", ".join(k for k, _ in cases if not k.startswith("rand_d") or "det" in k)
    return [
        Row("L4", "Thm 2.1 construction: (I+A_l)...(I+A_1) = R", "proved", len(prod),
            "max rel. error / l", w[0], f"<= {tol:.0e}", w[0] <= tol,
            [f"d in {dims} (gamma 0.3, 1.5) and [{names}], depths {depths} ({negative} with det R < 0, "
             f"where the bound > 1); product written out in the check; worst at {w[1]}"]),
        Row("L5", "Thm 2.1: |||A*||| <= 2(sqrt(pi)+sqrt(3g))^2/l for l >= 3g, det R > 0", "proved",
            len(slack), "min 1 - |||A|||/bound", worst[0], ">= 0", worst[0] >= 0,
            [f"construction 'auto'; gamma, bound and spectral norms computed by the check; tightest: "
             f"{worst[1]}"]),
        Row("L6", "Thm 2.1, the proof's construction (3 groups, q and p rounded, fn. 4): "
            "|||A||| <= max(pi/q, 3g/p)", "proved", len(paper), "min 1 - |||A|||/max(pi/q, 3g/p)",
            wp[0], ">= 0", wp[0] >= 0,
            [f"tightest: {wp[1]}; against the printed bound 2(sqrt(pi)+sqrt(3g))^2/l: worst "
             f"|||A|||/bound = {wr[0]:.4f} at {wr[1]} -- footnote 4's 'small constant factor' from "
             "rounding q, p to integers, not a slip"]),
        Row("L7", "Thm 2.1, PSD case: |||A*||| <= 3 gamma/l (R != I); R = I gives A = 0", "proved",
            len(psd) + len(identity), "min 1 - |||A|||/(3 gamma/l)", min(psd)[0], ">= 0, and A = 0 at R = I",
            min(psd)[0] >= 0 and all(identity) and len(identity) > 0,
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
    """det R < 0 (slip 3): refused exactly where the bound is <= 1 (L9, which also carries the
    counterexample to the printed theorem: Theorem 2.1 as printed has no det condition); where the
    bound is > 1 a factorization is built within it and multiplies out to R (L10, a control of the
    construction that L4 relies on for det R < 0: fatal)."""
    depths = [2, 3, 4, 8, 16, 32, 64]
    cases = list(negative_Rs(rng).items()) + [("diag(-1,1)", np.diag([-1.0, 1]))]
    cases += [(f"rand_d{d}", random_R(d, rng, 1.0, det_sign=-1)) for d in ((1, 3) if quick else (1, 2, 3, 5))]
    printed, refused, built, wrong, errs = [], [], [], [], []
    for name, R in cases:
        g = gamma_ref(R)
        assert det_sign_ref(R) < 0, name
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
            err = np.linalg.norm(product_ref(A) - R) / max(1.0, np.linalg.norm(R)) / ell
            errs.append(err)
            n = spectral_norms_ref(A).max()
            built.append((1 - n / b, f"{name}, l={ell}: |||A||| = {n:.4g} <= {b:.4g}"))
    det_min = _det_lemma_samples(rng)
    ex = min(printed)
    tol = 1e-11
    ok_built = bool(built) and min(built)[0] >= 0 and max(errs) <= tol
    return [
        Row("L9", "Thm 2.1, det R < 0: refused exactly where the bound is <= 1, with the reason",
            "proved", len(refused) + len(wrong), "wrongly refused or built", len(wrong), "= 0",
            not wrong and det_min > 0 and sum(refused) > 0,
            wrong or [f"{sum(refused)} refusals, each naming the bound; Theorem 2.1 as printed (no det "
                      f"R > 0) is refuted by {ex[1]}: bound {ex[0]:.3g} <= 1, and a factor with det(I + "
                      "A_j) < 0 has an eigenvalue of A_j below -1, so |||A||| > 1; min det(I + A) over "
                      f"12,000 random A with |A| = 0.999: {det_min:.2e} > 0"]),
        Row("L10", "control: det R < 0, bound > 1: the factorization built is within the bound and = R",
            "control", len(built), "min 1 - |||A|||/bound", min(built)[0] if built else -1.0,
            f">= 0, product rel. error / l <= {tol:g}", ok_built,
            ["A_1 = -(1 + a) v v^T (v a right singular vector of R), the other l - 1 layers factor "
             f"R (I + A_1)^-1 (det > 0); tightest: {min(built)[1] if built else 'none built'}; product "
             f"written out in the check: max rel. error / l {max(errs) if errs else float('nan'):.1e}"]),
    ]


GROUPS = [
    Group(("L1",), claim23),
    Group(("L2", "L3"), lemma24),
    Group(("L4", "L5", "L6", "L7"), theorem21),
    Group(("L9", "L10"), theorem21_det),
    Group(("L11", "L12"), B.theorem22_critical),
    Group(("L13", "L14", "L15", "L16", "L17"), B.equation23),
    Group(("L18", "L19"), B.adversarial),
]
