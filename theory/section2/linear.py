"""Linear residual networks (Hardt & Ma, "Identity Matters in Deep Learning", Section 2, App. A).

Model: ``ŷ = (I + A_ℓ)···(I + A_1) x``; ``A`` is an array of shape ``(ℓ, d, d)`` with ``A[0] = A_1``
the factor applied first.  Data ``y = R x + ξ`` with ``ξ ~ N(0, I_d)`` and ``Σ = E[x xᵀ]``.
``E = (I + A_ℓ)···(I + A_1) − R``; ``|||A||| = max_j ‖A_j‖`` (spectral norm of each slice).
TensorFlow, float64.

* :func:`population_risk` -- Claim 2.3, ``f(A) = ‖E Σ^{1/2}‖_F² + C`` with ``C = E‖ξ‖² = d``
  (the paper writes ``C = E[x xᵀ]``, a typo; we follow the proof: ``C = E‖ξ‖² = d``).
* :func:`empirical_risk` / :func:`sample` -- the mean of ``‖ŷ − y‖²`` over samples ``y = Rx + ξ``.
* :func:`gradient` -- Lemma 2.4 in closed form, in the order the proof's expansion (App. A.2) gives:
  ``∂f/∂A_i = 2 (I + A_{i+1}ᵀ)···(I + A_ℓᵀ) E Σ (I + A_1ᵀ)···(I + A_{i−1}ᵀ)``.  The paper prints
  each product reversed, ``(I + A_ℓᵀ)···(I + A_{i+1}ᵀ) E Σ (I + A_{i−1}ᵀ)···(I + A_1ᵀ)``, which is
  not the gradient once a product has two factors (``python -m theory.check`` shows by how much);
  :func:`autodiff_gradient` -- the same by ``tf.GradientTape``.
* :func:`gradient_bounds` -- Theorem 2.2 and eq. (2.3), as printed and in the form the proof gives.
* Theorem 2.1's construction is in :mod:`theory.section2.optimum` (re-exported here); the checks of
  all of this in :mod:`theory.section2.checks`.

Which global optimum value ``C_opt`` is meant in (2.3): the minimum of ``f`` over *all* ``A``.
Every ``R`` is reachable without a norm constraint (``A_1 = R − I``, the other slices 0), so
``C_opt = C = d`` for every ``R`` -- also when no ``A`` in ``B_τ`` (τ < 1) reaches it.
Hence ``f(A) − C_opt = ‖E Σ^{1/2}‖_F² = tr(E Σ Eᵀ)`` exactly, and this is what is checked.
"""
import numpy as np
import tensorflow as tf

from theory.section2.optimum import (gamma, global_optimum, paper_split,  # noqa: F401
                                   spectral_norms, theorem21_bound)

DTYPE = tf.float64

# --------------------------------------------------------------------------------------------
# The network, its risks and gradients (TensorFlow)
# --------------------------------------------------------------------------------------------


def _batched(A):
    """``A`` of shape (ℓ, d, d) or (B, ℓ, d, d) -> float64 tensor (B, ℓ, d, d), was_batched."""
    A = tf.convert_to_tensor(A, DTYPE)
    if A.shape.rank == 3:
        return A[None], False
    if A.shape.rank != 4:
        raise ValueError(f"A must have shape (depth, d, d) or (batch, depth, d, d), got {A.shape}")
    return A, True


def prefix_suffix(A):
    """For A (B, ℓ, d, d): before[i] = (I+A_{i-1})···(I+A_0), after[i] = (I+A_{ℓ-1})···(I+A_{i+1})
    (0-based, identity where empty), and the full product; shapes (B, ℓ, d, d) and (B, d, d)."""
    At = tf.transpose(A, [1, 0, 2, 3])                       # (ℓ, B, d, d)
    eye = tf.eye(tf.shape(A)[-1], batch_shape=[tf.shape(A)[0]], dtype=A.dtype)
    pre = tf.scan(lambda acc, a: acc + tf.matmul(a, acc), At, initializer=eye)
    suf = tf.scan(lambda acc, a: acc + tf.matmul(acc, a), At, initializer=eye, reverse=True)
    before = tf.concat([eye[None], pre[:-1]], axis=0)
    after = tf.concat([suf[1:], eye[None]], axis=0)
    return (tf.transpose(before, [1, 0, 2, 3]), tf.transpose(after, [1, 0, 2, 3]), pre[-1])


_prefix_suffix = tf.function(prefix_suffix, reduce_retracing=True)


def product(A):
    """``(I + A_ℓ)···(I + A_1)`` as a tf.Tensor, shape (d, d) (or (B, d, d) for batched A)."""
    Ab, batched = _batched(A)
    P = _prefix_suffix(Ab)[2]
    return P if batched else P[0]


def error_matrix(A, R):
    """``E = (I + A_ℓ)···(I + A_1) − R``."""
    return product(A) - tf.convert_to_tensor(R, DTYPE)


def population_risk(A, R, Sigma):
    """Claim 2.3: ``f(A) = ‖E Σ^{1/2}‖_F² + C = tr(E Σ Eᵀ) + d`` (``C = E‖ξ‖² = d`` for
    ``ξ ~ N(0, I_d)``; the paper's "C = E[x xᵀ]" is a typo)."""
    E = error_matrix(A, R)
    Sigma = tf.convert_to_tensor(Sigma, DTYPE)
    d = tf.cast(tf.shape(E)[-1], DTYPE)
    return tf.reduce_sum(tf.matmul(E, Sigma) * E, axis=[-2, -1]) + d


def sample(R, Sigma, n, seed=0):
    """``n`` samples ``x ~ N(0, Σ)``, ``y = R x + ξ``, ``ξ ~ N(0, I)``; returns X, Y of shape (n, d)."""
    R = np.asarray(R, np.float64)
    d = R.shape[0]
    L = np.linalg.cholesky(np.asarray(Sigma, np.float64))
    g = tf.random.Generator.from_seed(seed)
    X = tf.matmul(g.normal([n, d], dtype=DTYPE), L, transpose_b=True)
    Y = tf.matmul(X, tf.constant(R), transpose_b=True) + g.normal([n, d], dtype=DTYPE)
    return X, Y


def empirical_risk(A, X, Y, per_sample=False):
    """The empirical risk ``mean ‖(I + A_ℓ)···(I + A_1) x − y‖²`` over rows of X, Y (eq. (2.2))."""
    P = product(A)
    res = tf.matmul(X, P, transpose_b=True) - Y
    losses = tf.reduce_sum(res * res, axis=1)
    return losses if per_sample else tf.reduce_mean(losses)


def gradient_from_products(before, after, E, Sigma):
    """Lemma 2.4 for every layer at once: ``∂f/∂A_i = 2 after[i]ᵀ E Σ before[i]ᵀ`` with
    ``after[i] = (I + A_ℓ)···(I + A_{i+1})`` and ``before[i] = (I + A_{i−1})···(I + A_1)``, i.e.
    ``2 (I + A_{i+1}ᵀ)···(I + A_ℓᵀ) E Σ (I + A_1ᵀ)···(I + A_{i−1}ᵀ)``.  Shapes (B, ℓ, d, d), E (B, d, d)."""
    ES = tf.matmul(E, Sigma)[:, None]                         # (B, 1, d, d)
    return 2.0 * tf.matmul(tf.matmul(after, ES, transpose_a=True), before, transpose_b=True)


@tf.function(reduce_retracing=True)
def _gradient_b(A, R, Sigma):
    before, after, P = _prefix_suffix(A)
    E = P - R                                                 # (B, d, d)
    return gradient_from_products(before, after, E, Sigma), E


def gradient(A, R, Sigma):
    """Lemma 2.4 in closed form, ``∂f/∂A_i = 2 (I+A_{i+1}ᵀ)···(I+A_ℓᵀ) E Σ (I+A_1ᵀ)···(I+A_{i−1}ᵀ)``
    (the proof's order, see the module docstring), all ``i`` at once from prefix and suffix
    products.  Returns a tensor shaped like ``A``."""
    Ab, batched = _batched(A)
    G, _ = _gradient_b(Ab, tf.convert_to_tensor(R, DTYPE), tf.convert_to_tensor(Sigma, DTYPE))
    return G if batched else G[0]


def autodiff_gradient(A, R, Sigma):
    """``∇f(A)`` by ``tf.GradientTape`` through the forward product (the check on Lemma 2.4)."""
    A = tf.convert_to_tensor(A, DTYPE)
    with tf.GradientTape() as tape:
        tape.watch(A)
        f = tf.reduce_sum(population_risk(A, R, Sigma))
    return tape.gradient(f, A)


# --------------------------------------------------------------------------------------------
# Theorem 2.2 and eq. (2.3)
# --------------------------------------------------------------------------------------------

FORMS = ("printed", "proof", "proof_general", "per_layer")


def gradient_bounds(A, R, Sigma, tau=None):
    """Both sides of the gradient lower bounds at ``A`` (shape (ℓ, d, d) or (B, ℓ, d, d)), as logs.

    ``tau`` defaults to ``|||A|||`` itself (the smallest τ with ``A ∈ B_τ``, the strongest test).
    With ``s = σ_min(Σ)``, ``f − C_opt = tr(EΣEᵀ)`` (see the module docstring):
      ``printed``        eq. (2.3) as printed: ``‖∇f‖_F² ≥ 4ℓ(1−τ)^{ℓ−1} s² (f − C_opt)``.
      ``proof``          what the proof's steps give: ``‖∇f‖_F² ≥ 4ℓ(1−τ)^{2(ℓ−1)} s² (f − C_opt)``;
                         its last step ``‖E‖_F² ≥ f − C`` needs ``σ_max(Σ) ≤ 1``.
      ``proof_general``  the same proof with Claim C.2 applied to ``‖EΣ‖_F ≥ s^{1/2}‖EΣ^{1/2}‖_F``:
                         ``‖∇f‖_F² ≥ 4ℓ(1−τ)^{2(ℓ−1)} s (f − C_opt)`` for every Σ (no hypothesis).
      ``per_layer``      Theorem 2.2's key step: ``min_i ‖∂f/∂A_i‖_F ≥ 2(1−τ)^{ℓ−1} s ‖E‖_F``.
    Returns a dict form -> (log_lhs, log_rhs), numpy arrays of shape (B,) (or scalars), and
    ``"tau"``, ``"excess"`` (``f − C_opt``)."""
    Ab, batched = _batched(A)
    Sigma = np.asarray(Sigma, np.float64)
    G, E = _gradient_b(Ab, tf.convert_to_tensor(R, DTYPE), tf.constant(Sigma))
    G, E, An = G.numpy(), E.numpy(), Ab.numpy()
    ell = An.shape[1]
    if tau is None:
        tau = spectral_norms(An).max(axis=1)
    tau = np.broadcast_to(np.asarray(tau, np.float64), (An.shape[0],))
    s = np.linalg.eigvalsh(Sigma)[..., 0]
    excess = np.einsum("bij,jk,bik->b", E, Sigma, E) if Sigma.ndim == 2 else \
        np.einsum("bij,bjk,bik->b", E, Sigma, E)
    gi = np.linalg.norm(G, axis=(-2, -1))                    # (B, ℓ)
    log_lhs = np.log(np.sum(gi ** 2, axis=1))
    l1 = np.log1p(-tau)
    base = np.log(4 * ell) + np.log(excess)
    out = {
        "printed": (log_lhs, base + (ell - 1) * l1 + 2 * np.log(s)),
        "proof": (log_lhs, base + 2 * (ell - 1) * l1 + 2 * np.log(s)),
        "proof_general": (log_lhs, base + 2 * (ell - 1) * l1 + np.log(s)),
        "per_layer": (np.log(gi.min(axis=1)),
                      np.log(2.0) + (ell - 1) * l1 + np.log(s) + np.log(np.linalg.norm(E, axis=(-2, -1)))),
        "tau": tau, "excess": excess,
    }
    if not batched:
        out = {k: (tuple(x[0] for x in v) if isinstance(v, tuple) else v[0]) for k, v in out.items()}
    return out
