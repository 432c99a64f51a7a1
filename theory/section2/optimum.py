"""Theorem 2.1 of Hardt & Ma (ICLR 2017): a global optimum of small norm, constructed (App. A.1).

For ``R ∈ R^{d×d}`` and depth ``ℓ``, :func:`global_optimum` returns ``A`` of shape ``(ℓ, d, d)``,
``A[0] = A_1`` applied first, with ``(I + A_ℓ)···(I + A_1) = R`` (so ``E = 0``: a global optimum of
the risk of Claim 2.3) and ``|||A||| = max_j ‖A_j‖ ≤ 2(√π + √(3γ))²/ℓ`` when ``ℓ ≥ 3γ``,
``γ = max(|log σ_max(R)|, |log σ_min(R)|)``.  numpy/scipy, float64.

Where the code follows the proof rather than the printed text:
  * ``det R``.  Every factor with ``‖A_j‖ < 1`` has ``det(I + A_j) > 0`` (``det(I + tA_j)`` never
    vanishes on ``t ∈ [0, 1]``); a factor with ``det(I + A_j) < 0`` has a real eigenvalue of
    ``A_j`` below −1, so ``‖A_j‖ > 1``.  So for ``det R < 0`` a factorization within the bound
    exists only if the bound exceeds 1, and then one is built (:func:`_reflect_first`);
    where the bound is at most 1, none exists and ``ValueError`` says so.  Theorem 2.1 as printed
    omits this.  For singular ``R``, ``γ = ∞``: the theorem says nothing, and a factorization with
    ``‖A_1‖ = 1`` is returned (:func:`_project_first`).
  * The proof's SVD ``R = U K Vᵀ`` needs ``det U = det V = +1`` (signs chosen so), rotation blocks
    of ``U``, ``Vᵀ`` by exactly π (eigenvalue −1 pairs) and a +1 eigenvalue for odd ``d``; and
    ``‖T(θ/q) − I‖ = 2|sin(θ/2q)|`` (the paper writes ``|sin(θ/q)|``), still ``≤ π/q``.
  * The proof's split ``ℓ = 2q + p`` uses real ``q, p``; footnote 4 rounds them, which "changes
    the bound by a small constant factor" (1% for a rotation by π in 3-D at ℓ = 101).
    ``method="paper"`` is that rounded split; ``"svd"`` the same three groups with the best
    integer split (:func:`_allocate`).
"""
import math

import numpy as np
import scipy.linalg as sla
from scipy.optimize import minimize_scalar


def gamma(R):
    """``γ = max(|log σ_max(R)|, |log σ_min(R)|)`` (``inf`` for singular R)."""
    s = np.linalg.svd(np.asarray(R, np.float64), compute_uv=False)
    if s[-1] <= 0:
        return math.inf
    return float(max(abs(math.log(s[0])), abs(math.log(s[-1]))))


def theorem21_bound(R, depth):
    """Theorem 2.1's bound ``2(√π + √(3γ))² / ℓ`` (asserted by the paper only when ``ℓ ≥ 3γ``)."""
    return 2.0 * (math.sqrt(math.pi) + math.sqrt(3.0 * gamma(R))) ** 2 / depth


def paper_split(g, depth):
    """The proof's split ``ℓ = 2q + p`` (App. A.1): ``q = ℓ√π / (2(√π + √(3γ)))`` layers for each
    of ``Vᵀ`` and ``U`` and ``p = ℓ√(3γ) / (√π + √(3γ))`` for ``K``, which gives
    ``π/q + 3γ/p ≤ 2(√π + √(3γ))²/ℓ``; ``q`` rounded to the closest integer (footnote 4), at
    least 1 and at most ``(ℓ − 1)/2`` when ``K`` needs a layer, and ``p = ℓ − 2q``."""
    a, b = math.sqrt(math.pi), math.sqrt(3.0 * g)
    q = min(max(1, round(depth * a / (2 * (a + b)))), (depth - (1 if g > 1e-13 else 0)) // 2)
    return q, depth - 2 * q


def spectral_norms(A):
    """``‖A_j‖`` for every slice; ``|||A||| = spectral_norms(A).max()``."""
    return np.linalg.norm(np.asarray(A, np.float64), ord=2, axis=(-2, -1))


def rotation(theta):
    """``T(θ)``, the 2×2 rotation by θ of App. A.1."""
    c, s = math.cos(theta), math.sin(theta)
    return np.array([[c, -s], [s, c]])


def _rotation_planes(Q):
    """Real block-diagonalisation (Claim C.1) of an orthogonal ``Q`` with ``det Q = +1``:
    ``Q = Σ_planes Z_b T(θ_b) Z_bᵀ + (projector on the +1 eigenspace)``, from the real Schur form
    (block diagonal for a normal matrix).  A 2×2 Schur block gives one plane.  Real eigenvalues
    −1 (1×1 blocks, an even number of them since det Q = +1) are paired into rotations by π --
    the case the paper's proof skips; the angle of each pair is read off ``Z_bᵀ Q Z_b`` so that a
    rotation by nearly π that Schur happened to split into two real eigenvalues is still exact.
    Real eigenvalues +1 need no factor (this is what odd ``d`` always has).
    Returns a list of (Z_b of shape (d, 2), θ_b ∈ [−π, π])."""
    T, Z = sla.schur(Q, output="real")
    d = Q.shape[0]
    planes, negative, i = [], [], 0
    while i < d:
        if i + 1 < d and T[i + 1, i] != 0.0:
            planes.append(Z[:, i:i + 2])
            i += 2
        else:
            if T[i, i] < 0:
                negative.append(i)
            i += 1
    if len(negative) % 2:
        raise ValueError("orthogonal factor has det −1: it is not a product of rotations")
    for a, b in zip(negative[0::2], negative[1::2]):
        planes.append(Z[:, [a, b]])
    out = []
    for Zb in planes:
        M = Zb.T @ Q @ Zb
        out.append((Zb, math.atan2(M[1, 0] - M[0, 1], M[0, 0] + M[1, 1])))
    return out


class _Group:
    """``m`` equal factors ``I + B`` whose product is one factor of R; ``norm(m) = ‖B‖``."""

    def __init__(self, kind, data, dim):
        self.kind, self.data, self.dim = kind, data, dim
        # the numbers the norm depends on: rotation angles θ, or log singular values log k
        self._x = np.array([t for _, t in data]) if kind == "rot" else np.log(data[1])
        self.identity = bool(np.all(np.abs(self._x) <= 1e-13))   # 1 ± 1e-16 counts as 1

    def norm(self, m):
        if self.identity:
            return 0.0
        if m == 0:
            return math.inf
        if self.kind == "rot":            # ‖T(θ/m) − I‖ = 2|sin(θ/2m)| ≤ |θ|/m ≤ π/m
            return float(np.max(2 * np.abs(np.sin(self._x / (2 * m)))))
        # ‖K^{1/m} − I‖ = max |k_i^{1/m} − 1| ≤ 3γ/m if m ≥ γ
        return float(np.max(np.abs(np.expm1(self._x / m))))

    def factor(self, m):
        """``B`` with ``(I + B)^m`` equal to the group's matrix."""
        if self.kind == "rot":
            B = np.zeros((self.dim, self.dim))
            for Zb, t in self.data:
                B += Zb @ (rotation(t / m) - np.eye(2)) @ Zb.T
            return B
        V, k = self.data                  # V diag(k^{1/m}) Vᵀ − I
        return (V * np.exp(np.log(k) / m)) @ V.T - np.eye(len(k))


def _allocate(groups, depth):
    """Split ``depth`` layers among the groups to minimise the largest ``‖B‖``, by integers,
    greedily (optimal for a max of decreasing functions).  None if depth < one per group."""
    m = [0 if g.identity else 1 for g in groups]
    if sum(m) > depth:
        return None
    for _ in range(depth - sum(m)):
        norms = [g.norm(mi) for g, mi in zip(groups, m)]
        j = int(np.argmax(norms))
        if norms[j] == 0.0:
            break
        m[j] += 1
    return m


def _construction(R, depth, method):
    """One of the constructions of Theorem 2.1 for ``det R > 0``, or None if depth is too small."""
    d = R.shape[0]
    if method == "psd":                   # A_j = R^{1/ℓ} − I (the special case of App. A.1)
        z, V = np.linalg.eigh((R + R.T) / 2)
        return np.broadcast_to((V * z ** (1.0 / depth)) @ V.T - np.eye(d), (depth, d, d)).copy()
    U, k, Vt = np.linalg.svd(R)
    if np.linalg.det(U) < 0:            # det R > 0 ⇒ det U = det V; make both +1 (the paper
        U[:, -1] *= -1                  # silently needs this): flip one singular-vector pair
        Vt[-1, :] *= -1
    if method in ("svd", "paper"):      # the proof: R = U K Vᵀ, ℓ = q + p + q
        groups = [_Group("rot", _rotation_planes(Vt), d), _Group("diag", (np.eye(d), k), d),
                  _Group("rot", _rotation_planes(U), d)]
    elif method == "polar":             # R = (U Vᵀ)(V K Vᵀ): one rotation group, ℓ = q + p
        groups = [_Group("diag", (Vt.T, k), d), _Group("rot", _rotation_planes(U @ Vt), d)]
    else:
        raise ValueError(f"unknown method {method!r}")
    if method == "paper":
        if depth < 3:
            return None
        q, p = paper_split(gamma(R), depth)
        m = [q, p, q]
    else:
        m = _allocate(groups, depth)
        if m is None:
            return None
    A = np.zeros((depth, d, d))
    j = 0
    for g, mi in zip(groups, m):        # groups listed in the order they are applied
        if mi:
            A[j:j + mi] = g.factor(mi)
            j += mi
    return A                            # remaining slices (if any) stay 0: factors I


def _positive(R, depth, method):
    """``det R > 0``: the construction asked for; "auto" = "psd" for symmetric positive definite
    R, else the smaller ``|||A|||`` of "svd" and "polar"; at depth 1, ``A_1 = R − I``."""
    if depth == 1:
        return (R - np.eye(R.shape[0]))[None]
    symmetric_pd = (np.allclose(R, R.T, rtol=0, atol=1e-12 * np.abs(R).max())
                    and np.linalg.eigvalsh((R + R.T) / 2).min() > 0)
    if method == "psd" and not symmetric_pd:
        raise ValueError("method='psd' needs a symmetric positive definite R")
    if method == "auto":
        if symmetric_pd:
            return _construction(R, depth, "psd")
        cands = [c for c in (_construction(R, depth, "svd"), _construction(R, depth, "polar"))
                 if c is not None]
        return min(cands, key=lambda A: spectral_norms(A).max())
    A = _construction(R, depth, method)
    return A if A is not None else _construction(R, depth, "polar")   # too shallow for three groups


def _reflect_first(R, depth, method):
    """``det R < 0``: ``R = M (I + A_1)`` with ``I + A_1 = I − (1 + a) v vᵀ`` (it maps the right
    singular vector ``v = v_i`` of R to ``−a v``, so ``‖A_1‖ = 1 + a``, ``det(I + A_1) = −a < 0``)
    and ``M = R (I + A_1)^{-1}``: ``det M > 0``, the singular values of R with ``k_i`` replaced by
    ``k_i / a``; ``M`` is factored by :func:`_positive` over the other ``ℓ − 1`` layers.  ``i`` (the
    smallest or the largest singular value) and ``a`` minimise the largest norm: a grid over
    ``a ∈ [1e-3, 1e3]``, then a bounded scalar search around the best."""
    _, k, Vt = np.linalg.svd(R)

    def build(i, log_a):
        a = math.exp(log_a)
        v = Vt[i]
        M = R - (1.0 + 1.0 / a) * np.outer(R @ v, v)         # R (I − (1 + 1/a) v vᵀ)
        rest = _positive(M, depth - 1, method)
        return max(1.0 + a, float(spectral_norms(rest).max())), a, v, rest

    best, log_a = None, np.linspace(math.log(1e-3), math.log(1e3), 13)
    for i in sorted({0, len(k) - 1}):
        grid = [build(i, t) for t in log_a]
        j = int(np.argmin([g[0] for g in grid]))
        res = minimize_scalar(lambda t: build(i, t)[0], method="bounded", options={"xatol": 1e-3},
                              bounds=(log_a[max(j - 1, 0)], log_a[min(j + 1, len(log_a) - 1)]))
        for cand in (grid[j], build(i, res.x)):
            if best is None or cand[0] < best[0]:
                best = cand
    _, a, v, rest = best
    return np.concatenate([(-(1.0 + a) * np.outer(v, v))[None], rest])


def _project_first(R, depth, method):
    """Singular ``R`` (``γ = ∞``): ``R = M (I + A_1)`` with ``I + A_1 = I − V_0 V_0ᵀ`` (``V_0``
    spanning the null space, ``‖A_1‖ = 1``) and ``M = R + U_0 V_0ᵀ`` (zero singular values set to
    1, one ``u`` negated if needed so that ``det M > 0``), factored over the other layers."""
    U, k, Vt = np.linalg.svd(R)
    null = k <= max(R.shape) * np.finfo(float).eps * max(k[0], 1e-300)
    null[-1] = True
    U0, V0 = U[:, null].copy(), Vt[null].T
    M = R + U0 @ V0.T
    if np.linalg.det(M) < 0:
        U0[:, 0] *= -1
        M = R + U0 @ V0.T
    return np.concatenate([(-V0 @ V0.T)[None], _positive(M, depth - 1, method)])


def global_optimum(R, depth, method="auto"):
    """Theorem 2.1: ``A`` of shape ``(depth, d, d)``, ``A[0] = A_1`` applied first, with
    ``(I + A[depth−1])···(I + A[0]) = R`` -- a global optimum of ``f`` (``E = 0``) -- and
    ``|||A||| ≤ 2(√π + √(3γ))²/depth`` whenever ``depth ≥ 3γ`` and ``det R > 0``
    (``≤ 3γ/depth`` for symmetric positive definite R).

    Methods (for ``det R > 0``):
      ``"psd"``   the special case of App. A.1: every ``A_j = R^{1/ℓ} − I`` (R symmetric PD).
      ``"paper"`` the general proof of App. A.1: ``R = U K Vᵀ`` (``det U = det V = +1``); ``Vᵀ``
                  and ``U`` each as ``(S W Sᵀ)^q`` through the real block-diagonalisation of an
                  orthogonal matrix (rotation blocks ``T(θ/q)``, −1 eigenvalue pairs as rotations
                  by π, +1 eigenvalues need no factor); ``K = (K^{1/p})^p``; layers: first
                  ``Vᵀ``'s, then ``K``'s, then ``U``'s; ``q, p`` from :func:`paper_split`.
      ``"svd"``   the same three groups with the best integer split of the depth.
      ``"polar"`` one orthogonal group: ``R = (U Vᵀ)(V K Vᵀ)``, ``ℓ = q + p``.
      ``"auto"``  "psd" for symmetric PD R, otherwise the smaller ``|||A|||`` of "svd"/"polar".
    Depth too small for the groups (e.g. depth 1): the factorization is still returned
    (``A_1 = R − I`` for depth 1), without a norm guarantee.

    ``det R < 0``: if the bound is at most 1, raises ValueError (no factorization within it
    exists, see the module docstring); otherwise :func:`_reflect_first` (one factor of norm
    ``1 + a`` > 1).  Singular R: :func:`_project_first`.
    """
    R = np.asarray(R, np.float64)
    if R.ndim != 2 or R.shape[0] != R.shape[1]:
        raise ValueError(f"R must be square, got shape {R.shape}")
    if depth < 1:
        raise ValueError("depth must be >= 1")
    if depth == 1:
        return (R - np.eye(R.shape[0]))[None]
    sign, _ = np.linalg.slogdet(R)
    if sign > 0:
        return _positive(R, depth, method)
    if sign == 0:
        return _project_first(R, depth, method)
    bound = theorem21_bound(R, depth)
    if bound <= 1:
        raise ValueError(
            f"det R = {np.linalg.det(R):.3g} < 0 needs a factor I + A_j with negative determinant, "
            "i.e. an eigenvalue of A_j below -1 and ||A_j|| > 1, but Theorem 2.1's bound "
            f"2(sqrt(pi) + sqrt(3 gamma))^2/l = {bound:.3g} <= 1 at depth {depth}: no factorization "
            "within the bound exists (Theorem 2.1 omits det R > 0). A global optimum without the "
            "bound does exist (A_1 = R - I).")
    return _reflect_first(R, depth, method)
