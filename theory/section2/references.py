"""The references the Section 2 checks compare against, computed here without the code under test
(theory.section2.linear, theory.section2.optimum): the data (random R and Σ, the edge cases of
Theorem 2.1 with their det R sign), γ from the eigenvalues of ``RᵀR``, Theorem 2.1's bound from
that γ, the product ``(I + A_ℓ)···(I + A_1)`` written out left to right, spectral norms from the
singular values, the gradient by central differences, and Lemma 2.4 in the printed order.
numpy/scipy only, float64.
"""
import functools
import math

import numpy as np
import scipy.linalg as sla


def rotation_ref(theta):
    c, s = math.cos(theta), math.sin(theta)
    return np.array([[c, -s], [s, c]])


def haar(d, rng, det_sign=1):
    """A Haar-random orthogonal d×d matrix with det of sign det_sign."""
    Q = np.linalg.qr(rng.standard_normal((d, d)))[0]
    if np.sign(np.linalg.det(Q)) != det_sign:
        Q[:, 0] *= -1
    return Q


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
          "rot_pi_3d": sla.block_diag(rotation_ref(math.pi), [[1.0]]),
          "rot_pi+eps": sla.block_diag(rotation_ref(math.pi - 1e-9), rotation_ref(0.3), [[1.0]]),
          "diag(-1,-2,3)": np.diag([-1.0, -2.0, 3.0]),
          "psd_7": (lambda M: M @ M.T + 0.1 * np.eye(7))(rng.standard_normal((7, 7)))}
    Q, P = haar(6, rng), haar(6, rng)
    Rs["orthogonal_6"] = Q
    Rs["repeated_sv_6"] = 2.0 * Q @ np.diag([1, 1, 1, 3, 3, 3.0]) @ P.T
    Rs["Q(-I)Q^T_6"] = Q @ np.diag([-1, -1, -1, -1, 1, 1.0]) @ Q.T
    return Rs


def negative_Rs(rng):
    """Edge cases with ``det R < 0``: a diagonal reflection, a Householder reflection, −I in odd d,
    a reflection with repeated singular values, a random R."""
    v = rng.standard_normal(4)
    v /= np.linalg.norm(v)
    Q = haar(5, rng)
    return {"diag(-1,2,3)": np.diag([-1.0, 2, 3]), "householder_4": np.eye(4) - 2 * np.outer(v, v),
            "-I_3": -np.eye(3), "repeated_sv_5(det<0)": Q @ np.diag([2.0, 2, 2, 0.5, 0.5]) @ haar(5, rng, -1).T,
            "rand_d3(det<0)": random_R(3, rng, 1.0, det_sign=-1)}


def gamma_ref(R):
    """``γ`` from the eigenvalues ``σ²`` of ``RᵀR``: ``max |log σ²| / 2`` (inf if singular)."""
    ev = np.linalg.eigvalsh(R.T @ R)
    return math.inf if ev[0] <= 1e-300 else 0.5 * max(abs(math.log(ev[0])), abs(math.log(ev[-1])))


def bound_ref(R, ell):
    """Theorem 2.1's bound ``2(√π + √(3γ))²/ℓ`` from :func:`gamma_ref`."""
    return 2.0 * (math.sqrt(math.pi) + math.sqrt(3.0 * gamma_ref(R))) ** 2 / ell


def det_sign_ref(R):
    """The sign of det R from its eigenvalues (product of their signs; 0 if one is 0)."""
    ev = np.linalg.eigvals(R)
    if np.any(np.abs(ev) <= 1e-300):
        return 0
    real_neg = np.sum((np.abs(ev.imag) <= 1e-12 * np.abs(ev)) & (ev.real < 0))
    return -1 if real_neg % 2 else 1


def spectral_norms_ref(A):
    """``‖A_j‖`` of every slice: the largest singular value."""
    return np.linalg.svd(np.asarray(A, np.float64), compute_uv=False)[..., 0]


def _chain(factors, d):
    return functools.reduce(np.matmul, factors, np.eye(d))


def product_ref(A):
    """``(I + A_ℓ)···(I + A_1)`` written out left to right (``A[0] = A_1`` is applied first)."""
    d = A.shape[-1]
    return _chain([np.eye(d) + A[j] for j in range(A.shape[0] - 1, -1, -1)], d)


def product_ref_batched(A):
    return np.stack([product_ref(a) for a in A])


def apply_ref(A, x):
    """``(I + A_ℓ)···(I + A_1) x`` for rows x (n, d), one layer at a time: ``x ← x + A_j x``."""
    for j in range(A.shape[0]):
        x = x + x @ A[j].T
    return x


def risk_ref(A, R, Sigma):
    """``f(A) − C = tr(E Σ Eᵀ)`` with E from :func:`product_ref`."""
    E = product_ref(A) - R
    return float(np.trace(E @ Sigma @ E.T))


def gradient_differences(A, R, Sigma, h=1e-6):
    """``∇f`` by central differences of ``f − C = tr(E Σ Eᵀ)`` (numpy; independent of TensorFlow)."""
    G = np.empty_like(A)
    for idx in np.ndindex(A.shape):
        e = np.zeros_like(A)
        e[idx] = h
        G[idx] = (risk_ref(A + e, R, Sigma) - risk_ref(A - e, R, Sigma)) / (2 * h)
    return G


def gradient_ref(A, R, Sigma):
    """Lemma 2.4 in the proof's order, written out:
    ``2 (I + A_{i+1}ᵀ)···(I + A_ℓᵀ) E Σ (I + A_1ᵀ)···(I + A_{i−1}ᵀ)`` for every i."""
    ell, d = A.shape[0], A.shape[-1]
    T = [np.eye(d) + a.T for a in A]
    E = product_ref(A) - R
    return np.stack([2 * _chain(T[i + 1:], d) @ E @ Sigma @ _chain(T[:i], d) for i in range(ell)])


def gradient_as_printed(A, R, Sigma):
    """Lemma 2.4 as the paper prints it (numpy, one A of shape (ℓ, d, d)):
    ``2 (I + A_ℓᵀ)···(I + A_{i+1}ᵀ) E Σ (I + A_{i−1}ᵀ)···(I + A_1ᵀ)``."""
    ell, d = A.shape[0], A.shape[-1]
    T = [np.eye(d) + a.T for a in A]
    E = product_ref(A) - R
    return np.stack([2 * _chain(T[ell - 1:i:-1], d) @ E @ Sigma @ _chain(T[i - 1::-1] if i else [], d)
                     for i in range(ell)])


def paper_split_ref(g, ell):
    """App. A.1's split ``ℓ = 2q + p``, q rounded (footnote 4), at least 1, at most (ℓ − 1)/2 when
    the diagonal group needs a layer."""
    a, b = math.sqrt(math.pi), math.sqrt(3 * g)
    q = min(max(1, round(ell * a / (2 * (a + b)))), (ell - (1 if g > 1e-13 else 0)) // 2)
    return q, ell - 2 * q
