"""Linear residual networks (Hardt & Ma, "Identity Matters in Deep Learning", Section 2, App. A).

Model: ``ŷ = (I + A_ℓ)···(I + A_1) x``; ``A`` is an array of shape ``(ℓ, d, d)`` with ``A[0] = A_1``
the factor applied first.  Data ``y = R x + ξ`` with ``ξ ~ N(0, I_d)`` and ``Σ = E[x xᵀ]``.
``E = (I + A_ℓ)···(I + A_1) − R``; ``|||A||| = max_j ‖A_j‖`` (spectral norm of each slice);
``γ = max(|log σ_max(R)|, |log σ_min(R)|)``.

What is here (TensorFlow for the network and its gradients, float64; numpy/scipy for the
linear algebra of the construction):

* :func:`population_risk` -- Claim 2.3, ``f(A) = ‖E Σ^{1/2}‖_F² + C`` with ``C = E‖ξ‖² = d``
  (the paper writes ``C = E[x xᵀ]``, a typo; we follow the proof: ``C = E‖ξ‖² = d``).
* :func:`empirical_risk` / :func:`sample` -- the mean of ``‖ŷ − y‖²`` over samples ``y = Rx + ξ``.
* :func:`gradient` -- Lemma 2.4 in closed form,
  ``∂f/∂A_i = 2 (I + A_ℓᵀ)···(I + A_{i+1}ᵀ) E Σ (I + A_{i−1}ᵀ)···(I + A_1ᵀ)``;
  :func:`autodiff_gradient` -- the same by ``tf.GradientTape``.
* :func:`global_optimum` -- Theorem 2.1's construction (PSD case, and the general case through
  the SVD and the real block-diagonalisation of the orthogonal factors).
* :func:`gradient_bounds` -- Theorem 2.2 and eq. (2.3), as printed and in the form the proof gives.
* :func:`checks` -- all of the above checked numerically, for ``python -m theory.check``.

Which global optimum value ``C_opt`` is meant in (2.3): the minimum of ``f`` over *all* ``A``.
Every ``R`` is reachable without a norm constraint (``A_1 = R − I``, the other slices 0), so
``C_opt = C = d`` for every ``R`` -- also when ``det R ≤ 0``, where no ``A`` in ``B_τ`` (τ < 1)
reaches it.  Hence ``f(A) − C_opt = ‖E Σ^{1/2}‖_F² = tr(E Σ Eᵀ)`` exactly, and this is what is checked.
"""
import math
import time

import numpy as np
import scipy.linalg as sla
import tensorflow as tf

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


def _prefix_suffix_impl(A):
    """For A (B, ℓ, d, d): before[i] = (I+A_{i-1})···(I+A_0), after[i] = (I+A_{ℓ-1})···(I+A_{i+1})
    (0-based, identity where empty), and the full product; shapes (B, ℓ, d, d) and (B, d, d)."""
    At = tf.transpose(A, [1, 0, 2, 3])                       # (ℓ, B, d, d)
    eye = tf.eye(tf.shape(A)[-1], batch_shape=[tf.shape(A)[0]], dtype=A.dtype)
    pre = tf.scan(lambda acc, a: acc + tf.matmul(a, acc), At, initializer=eye)
    suf = tf.scan(lambda acc, a: acc + tf.matmul(acc, a), At, initializer=eye, reverse=True)
    before = tf.concat([eye[None], pre[:-1]], axis=0)
    after = tf.concat([suf[1:], eye[None]], axis=0)
    return (tf.transpose(before, [1, 0, 2, 3]), tf.transpose(after, [1, 0, 2, 3]), pre[-1])


_prefix_suffix = tf.function(_prefix_suffix_impl, reduce_retracing=True)


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


@tf.function(reduce_retracing=True)
def _gradient_b(A, R, Sigma):
    before, after, P = _prefix_suffix(A)
    E = P - R                                                 # (B, d, d)
    ES = tf.matmul(E, Sigma)[:, None]                         # (B, 1, d, d)
    return 2.0 * tf.matmul(tf.matmul(after, ES, transpose_a=True), before, transpose_b=True), E


def gradient(A, R, Sigma):
    """Lemma 2.4 in closed form: ``∂f/∂A_i = 2 (I+A_ℓᵀ)···(I+A_{i+1}ᵀ) E Σ (I+A_{i−1}ᵀ)···(I+A_1ᵀ)``,
    all ``i`` at once from prefix and suffix products.  Returns a tensor shaped like ``A``."""
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
# Theorem 2.1: a global optimum of small norm (numpy / scipy)
# --------------------------------------------------------------------------------------------


def gamma(R):
    """``γ = max(|log σ_max(R)|, |log σ_min(R)|)`` (``inf`` for singular R)."""
    s = np.linalg.svd(np.asarray(R, np.float64), compute_uv=False)
    if s[-1] <= 0:
        return math.inf
    return float(max(abs(math.log(s[0])), abs(math.log(s[-1]))))


def theorem21_bound(R, depth):
    """Theorem 2.1's bound ``2(√π + √(3γ))² / ℓ`` (asserted by the paper only when ``ℓ ≥ 3γ``)."""
    return 2.0 * (math.sqrt(math.pi) + math.sqrt(3.0 * gamma(R))) ** 2 / depth


def spectral_norms(A):
    """``‖A_j‖`` for every slice; ``|||A||| = spectral_norms(A).max()``."""
    return np.linalg.norm(np.asarray(A, np.float64), ord=2, axis=(-2, -1))


def _rot(theta):
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

    def __init__(self, kind, data):
        self.kind, self.data = kind, data
        # the numbers the norm depends on: rotation angles θ, or log singular values log k
        self._x = np.array([t for _, t in data]) if kind == "rot" else np.log(data[1])
        self._identity = bool(np.all(np.abs(self._x) <= 1e-13))   # 1 ± 1e-16 counts as 1

    def identity(self):
        """No factor needed (up to round-off)."""
        return self._identity

    def norm(self, m):
        if self._identity:
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
                B += Zb @ (_rot(t / m) - np.eye(2)) @ Zb.T
            return B
        V, k = self.data                  # V diag(k^{1/m}) Vᵀ − I
        return (V * np.exp(np.log(k) / m)) @ V.T - np.eye(len(k))


def _rotation_group(Q):
    g = _Group("rot", _rotation_planes(Q))
    g.dim = Q.shape[0]
    return g


def _allocate(groups, depth):
    """Split ``depth`` layers among the groups to minimise the largest ``‖B‖`` (the paper picks
    real-valued ``q, p`` and rounds; we allocate integers greedily, which is optimal for a max of
    decreasing functions).  Returns the counts, or None if depth is too small (one per group)."""
    m = [0 if g.identity() else 1 for g in groups]
    if sum(m) > depth:
        return None
    for _ in range(depth - sum(m)):
        norms = [g.norm(mi) for g, mi in zip(groups, m)]
        j = int(np.argmax(norms))
        if norms[j] == 0.0:
            break
        m[j] += 1
    return m


def _assemble(groups, m, depth, d):
    A = np.zeros((depth, d, d))
    j = 0
    for g, mi in zip(groups, m):        # groups listed in the order they are applied
        if mi:
            A[j:j + mi] = g.factor(mi)
            j += mi
    return A                            # remaining slices (if any) stay 0: factors I


def _construction(R, depth, method):
    d = R.shape[0]
    if method == "psd":
        z, V = np.linalg.eigh((R + R.T) / 2)
        return np.broadcast_to((V * z ** (1.0 / depth)) @ V.T - np.eye(d), (depth, d, d)).copy()
    U, k, Vt = np.linalg.svd(R)
    if np.linalg.det(U) < 0:            # det R > 0 ⇒ det U = det V; make both +1 (the paper
        U[:, -1] *= -1                  # silently needs this): flip one singular-vector pair
        Vt[-1, :] *= -1
    if method == "svd":                 # the paper's proof: R = U K Vᵀ, ℓ = q + p + q
        groups = [_rotation_group(Vt), _Group("diag", (np.eye(d), k)), _rotation_group(U)]
    elif method == "polar":             # R = (U Vᵀ)(V K Vᵀ): one rotation group, ℓ = q + p
        groups = [_Group("diag", (Vt.T, k)), _rotation_group(U @ Vt)]
    else:
        raise ValueError(f"unknown method {method!r}")
    m = _allocate(groups, depth)
    if m is None:
        return None
    return _assemble(groups, m, depth, d)


def global_optimum(R, depth, method="auto"):
    """Theorem 2.1: ``A`` of shape ``(depth, d, d)``, ``A[0] = A_1`` applied first, with
    ``(I + A[depth−1])···(I + A[0]) = R`` -- a global optimum of ``f`` (``E = 0``) -- and
    ``|||A||| ≤ 2(√π + √(3γ))²/depth`` whenever ``depth ≥ 3γ`` (``≤ 3γ/depth`` for symmetric PSD R).

    Methods:
      ``"psd"``   the PSD special case: every ``A_j = R^{1/ℓ} − I`` (R symmetric positive definite).
      ``"svd"``   the paper's general proof (A.1): ``R = U K Vᵀ`` with the SVD's signs chosen so that
                  ``det U = det V = +1``; ``Vᵀ`` and ``U`` each as ``(S W Sᵀ)^q`` through the real
                  block-diagonalisation of an orthogonal matrix (rotation blocks ``T(θ/q)``; −1
                  eigenvalue pairs become rotations by π; +1 eigenvalues, e.g. for odd d, need no
                  factor); ``K = (K^{1/p})^p``.  Layers: first ``Vᵀ``'s, then ``K``'s, then ``U``'s;
                  the depth is split between them by integers (see ``_allocate``), not by the
                  paper's rounded real ``p, q`` (footnote 4).
      ``"polar"`` a variant with one orthogonal group: ``R = (U Vᵀ)(V K Vᵀ)``, ``ℓ = q + p``.
      ``"auto"``  "psd" for symmetric PD R, otherwise whichever of "svd"/"polar" has the smaller
                  ``|||A|||``.
    Depth too small for the groups (e.g. depth 1): the factorization is still returned
    (``A_1 = R − I`` for depth 1), without a norm guarantee.

    Raises ValueError if ``det R ≤ 0``: every factor ``I + A_j`` with ``‖A_j‖ < 1`` has a positive
    determinant (``det(I + tA_j)`` never vanishes for ``t ∈ [0, 1]``), so no such factorization of
    R exists -- Theorem 2.1 needs ``det R > 0``, which the paper omits.
    """
    R = np.asarray(R, np.float64)
    if R.ndim != 2 or R.shape[0] != R.shape[1]:
        raise ValueError(f"R must be square, got shape {R.shape}")
    if depth < 1:
        raise ValueError("depth must be >= 1")
    d = R.shape[0]
    sign, logdet = np.linalg.slogdet(R)
    if sign <= 0:
        raise ValueError(
            f"det R = {np.linalg.det(R):.3g} <= 0: R is not a product of factors I + A_j with "
            "||A_j|| < 1, since each such factor has positive determinant (det(I + t A_j) never "
            "vanishes for t in [0, 1]); Theorem 2.1 needs det R > 0 (the paper omits it). "
            "A global optimum still exists (A_1 = R - I), but none of small norm.")
    if depth == 1:
        return (R - np.eye(d))[None]
    symmetric = np.allclose(R, R.T, rtol=0, atol=1e-12 * np.abs(R).max())
    if method == "auto":
        if symmetric and np.linalg.eigvalsh((R + R.T) / 2).min() > 0:
            return _construction(R, depth, "psd")
        cands = [c for c in (_construction(R, depth, "svd"), _construction(R, depth, "polar"))
                 if c is not None]
        return min(cands, key=lambda A: spectral_norms(A).max())
    A = _construction(R, depth, method)
    if A is None:                       # too shallow for three groups: fall back to two
        A = _construction(R, depth, "polar")
    return A


def product_np(A):
    """``(I + A[-1])···(I + A[0])`` in numpy float64."""
    A = np.asarray(A, np.float64)
    P = np.eye(A.shape[-1])
    for a in A:
        P = P + a @ P
    return P


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


def _project(A, tau):
    """Project every slice onto ``{‖A_j‖ ≤ τ}`` (clip singular values)."""
    s, u, v = tf.linalg.svd(A)
    return tf.matmul(u * tf.minimum(s, tau)[..., None, :], v, adjoint_b=True)


def adversarial_search(ell, d, tau, Sigma, batch=8, steps=200, lr=0.02, seed=0):
    """Search actively for violations of (2.3): minimise ``log ‖∇f‖² − log(f − C_opt)`` over ``A ∈ B_τ``
    (projected Adam) and over ``E`` (i.e. over ``R = Π(I + A_j) − E``; the ratio is invariant to the
    scale of E).  Starts: random points of ``B_τ``, half of them near ``−τ I`` (where the proof's
    bound is tight).  Returns the final A (B, ℓ, d, d) and R (B, d, d) as numpy arrays."""
    rng = np.random.default_rng(seed)
    A0 = rng.standard_normal((batch, ell, d, d))
    A0 *= tau / np.linalg.norm(A0, ord=2, axis=(-2, -1))[..., None, None]
    A0[: batch // 2] = -tau * np.eye(d) + 0.1 * A0[: batch // 2]
    A = tf.Variable(_project(tf.constant(A0), tau))
    E = tf.Variable(rng.standard_normal((batch, d, d)))
    Sig = tf.constant(np.asarray(Sigma, np.float64))
    opt = tf.keras.optimizers.Adam(learning_rate=lr)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            before, after, _ = _prefix_suffix_impl(A)
            ES = tf.matmul(E, Sig)[:, None]
            G = 2.0 * tf.matmul(tf.matmul(after, ES, transpose_a=True), before, transpose_b=True)
            num = tf.reduce_sum(G * G, axis=[1, 2, 3])
            den = tf.reduce_sum(tf.matmul(E, Sig) * E, axis=[1, 2])
            obj = tf.reduce_sum(tf.math.log(num) - tf.math.log(den))
        opt.apply_gradients(zip(tape.gradient(obj, [A, E]), [A, E]))
        A.assign(_project(A, tau))
        E.assign(E / tf.sqrt(tf.reduce_sum(E * E, axis=[1, 2], keepdims=True)))

    for _ in range(steps):
        step()
    An, En = A.numpy(), E.numpy()
    R = product_np_batched(An) - En
    return An, R


def product_np_batched(A):
    return _prefix_suffix(tf.convert_to_tensor(A, DTYPE))[2].numpy()


# --------------------------------------------------------------------------------------------
# The checks for `python -m theory.check`
# --------------------------------------------------------------------------------------------


def random_R(d, rng, gamma_max=1.0, det_positive=True):
    """A random ``R = U diag(e^{u}) Vᵀ``, ``u ~ U[−γ_max, γ_max]``, Haar ``U, V``, ``det R > 0``."""
    U = np.linalg.qr(rng.standard_normal((d, d)))[0]
    V = np.linalg.qr(rng.standard_normal((d, d)))[0]
    R = (U * np.exp(rng.uniform(-gamma_max, gamma_max, d))) @ V.T
    if det_positive and np.linalg.det(R) < 0:
        R[:, 0] *= -1
    return R


def random_Sigma(d, rng, lo, hi):
    """A random covariance with eigenvalues log-uniform in [lo, hi] (the extremes included)."""
    Q = np.linalg.qr(rng.standard_normal((d, d)))[0]
    ev = np.exp(rng.uniform(np.log(lo), np.log(hi), d))
    ev[0], ev[-1] = lo, hi
    return (Q * ev) @ Q.T


def _result(claim, margins, proved, detail, tol=0.0):
    margins = np.asarray(margins, np.float64).ravel()
    worst = float(margins.min()) if margins.size else float("nan")
    return dict(claim=claim, instances=int(margins.size), worst_margin=worst,
                passed=bool(margins.size and worst >= -tol), proved=proved, detail=detail)


def _rel_margin(log_lhs, log_rhs):
    """The margin of a bound ``lhs >= rhs``: ``ln(lhs/rhs)`` (>= 0 iff it holds; ≈ relative slack)."""
    return np.asarray(log_lhs) - np.asarray(log_rhs)


def _check_claim23(quick, rng):
    sizes = [(4, 3), (16, 8)] if quick else [(4, 3), (16, 8), (64, 16), (8, 256)]
    n = 20000 if quick else 100000
    margins, worst_z = [], 0.0
    for k, (d, ell) in enumerate(sizes):
        R = random_R(d, rng, 0.5)
        Sigma = random_Sigma(d, rng, 0.2, 2.0)
        A = 0.3 / ell * rng.standard_normal((ell, d, d)) / math.sqrt(d)
        X, Y = sample(R, Sigma, n, seed=100 + k)
        losses = empirical_risk(A, X, Y, per_sample=True).numpy()
        f = float(population_risk(A, R, Sigma))
        z = abs(losses.mean() - f) / (losses.std() / math.sqrt(n))
        worst_z = max(worst_z, z)
        margins.append(1.0 - z / 5.0)             # within 5 standard errors
    return _result("Claim 2.3 population = empirical risk", margins, True,
                   f"(d,l) in {sizes}, n={n} samples each; worst |emp-pop| = {worst_z:.2f} std.err "
                   "(pass: < 5); C = E|xi|^2 = d (paper's 'C = E[xx^T]' is a typo)")


def _check_lemma24(quick, rng):
    sizes = [(1, 1), (3, 4), (8, 16), (16, 64)] if quick else \
        [(1, 1), (3, 4), (8, 16), (16, 64), (33, 128), (64, 256)]
    tol, margins, worst = 1e-9, [], 0.0
    for d, ell in sizes:
        R = random_R(d, rng, 0.5)
        Sigma = random_Sigma(d, rng, 0.1, 3.0)
        A = (0.5 / ell) * rng.standard_normal((4, ell, d, d)) / math.sqrt(d)
        g1 = gradient(A, R, Sigma).numpy()
        g2 = autodiff_gradient(A, R, Sigma).numpy()
        err = np.linalg.norm((g1 - g2).reshape(4, -1), axis=1) / np.linalg.norm(g2.reshape(4, -1), axis=1)
        worst = max(worst, err.max())
        margins.extend(1.0 - err / tol)
    return _result("Lemma 2.4 closed-form grad = autodiff", margins, True,
                   f"margin = 1 - err/tol; (d,l) in {sizes}, 4 points each; worst relative error {worst:.1e} (tol {tol:g})")


def _special_Rs(rng):
    """Edge cases of Theorem 2.1: R = I, d = 1, rotations by exactly π, −I (even d), repeated
    singular values, a symmetric R with negative eigenvalue pairs, orthogonal R, a PSD R."""
    rot = _rot
    Rs = {"I_5": np.eye(5), "d=1": np.array([[2.5]]), "-I_4": -np.eye(4),
          "rot_pi_3d": sla.block_diag(rot(math.pi), [[1.0]]),
          "rot_pi+eps": sla.block_diag(rot(math.pi - 1e-9), rot(0.3), [[1.0]]),
          "diag(-1,-2,3)": np.diag([-1.0, -2.0, 3.0]),
          "psd_7": (lambda M: M @ M.T + 0.1 * np.eye(7))(rng.standard_normal((7, 7)))}
    Q = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    if np.linalg.det(Q) < 0:
        Q[:, 0] *= -1
    Rs["orthogonal_6"] = Q
    Rs["repeated_sv_6"] = 2.0 * Q @ np.diag([1, 1, 1, 3, 3, 3.0]) @ Q[::-1].T
    Rs["Q(-I)Q^T_6"] = Q @ np.diag([-1, -1, -1, -1, 1, 1.0]) @ Q.T
    return {k: v for k, v in Rs.items() if np.linalg.det(v) > 0}


def _check_theorem21(quick, rng):
    dims = [1, 2, 3, 5, 8] if quick else [1, 2, 3, 5, 8, 16, 33, 64]
    depths = [1, 2, 3, 4, 8, 32] if quick else [1, 2, 3, 4, 8, 32, 101, 256]
    cases = [(f"rand_d{d}_g{g}", random_R(d, rng, g)) for d in dims for g in (0.3, 1.5)]
    cases += list(_special_Rs(rng).items())
    prod_m, bound_m, psd_m, paper_m = [], [], [], []
    worst_prod, worst_bound, worst_paper = (0.0, ""), (np.inf, ""), (np.inf, "")
    for name, R in cases:
        g = gamma(R)
        psd = np.allclose(R, R.T) and np.linalg.eigvalsh(R).min() > 0
        for ell in depths:
            A = global_optimum(R, ell)
            err = np.linalg.norm(product_np(A) - R) / max(1.0, np.linalg.norm(R))
            tol = 1e-10 * (1 + ell) * R.shape[0]
            prod_m.append(tol - err)
            if err > worst_prod[0]:
                worst_prod = (err, f"{name},l={ell}")
            if ell >= 3 * g:
                n = spectral_norms(A).max()
                b = theorem21_bound(R, ell)
                bound_m.append(1 - n / b)
                if bound_m[-1] < worst_bound[0]:
                    worst_bound = (bound_m[-1], f"{name},l={ell}: |||A|||={n:.3g} <= {b:.3g}")
                if psd:
                    psd_m.append(1 - n / (3 * g / ell) if g > 0 else 0.0 - n)
                if ell >= 3 and not psd:
                    A2 = global_optimum(R, ell, method="svd")
                    m2 = 1 - spectral_norms(A2).max() / b
                    paper_m.append(m2)
                    if m2 < worst_paper[0]:
                        worst_paper = (m2, f"{name},l={ell}")
    # det R <= 0 must be refused with the reason
    refused = []
    for R in (np.diag([-1.0, 1.0]), np.diag([-1.0, 2.0, 3.0]), np.zeros((3, 3)), -np.eye(3)):
        try:
            global_optimum(R, 8)
            refused.append(-1.0)
        except ValueError as e:
            refused.append(1.0 if "det R" in str(e) else -1.0)
    names = ", ".join(k for k, _ in cases if not k.startswith("rand"))
    return [
        _result("Thm 2.1 construction: product = R", prod_m, True,
                f"d in {dims} (gamma 0.3, 1.5) + edge cases [{names}], depths {depths}; "
                f"worst rel. error {worst_prod[0]:.1e} at {worst_prod[1]}"),
        _result("Thm 2.1 |||A*||| <= 2(sqrt(pi)+sqrt(3g))^2/l, l>=3g", bound_m, True,
                f"margin = 1 - |||A|||/bound; tightest: {worst_bound[1]}; the paper's own 3-group SVD "
                f"split alone (method='svd'): worst margin {worst_paper[0]:.3f} at {worst_paper[1]}"),
        _result("Thm 2.1 PSD case |||A*||| <= 3g/l", psd_m, True,
                "symmetric PD R, A_j = R^(1/l) - I; margin = 1 - |||A|||/(3 gamma/l)"),
        _result("Thm 2.1 det R <= 0 refused (no factorization)", refused, True,
                "R = diag(-1,1), diag(-1,2,3), 0, -I_3: ValueError naming det R "
                "(each I+A_j with ||A_j||<1 has det > 0)"),
    ]


def _taus(ell, quick):
    taus = [0.5 / ell, 2.0 / ell, 8.0 / ell, 0.1, 0.5, 0.9]
    # keep (1 - τ)^{2ℓ} representable and the point meaningful: ℓ·|log(1−τ)| ≤ 30
    return sorted({t for t in taus if t < 1 and -ell * math.log1p(-t) <= 30})


def _describe(out, form, i, ell, d, Sigma):
    ev = np.linalg.eigvalsh(Sigma)
    lhs, rhs = out[form][0][i], out[form][1][i]
    return (f"tau={out['tau'][i]:.3g}, l={ell}, d={d}, Sigma eig in [{ev[0]:.3g},{ev[-1]:.3g}], "
            f"lhs={np.exp(lhs):.4g}, rhs={np.exp(rhs):.4g} (lhs/rhs={np.exp(lhs - rhs):.3g})")


def printed_counterexample():
    """The smallest counterexample to eq. (2.3) as printed: ``ℓ = 2``, ``d = 1``, ``Σ = 1``, ``R = 1``,
    ``A_1 = A_2 = −τ`` with ``τ = 1/2``: ``‖∇f‖² = 2·(2·(1/2)·(−3/4))² = 9/8`` but the printed right side
    is ``4·2·(1/2)·1·(9/16) = 9/4``.  The proof's form, with ``(1−τ)^{2(ℓ−1)}``, gives ``9/8``: tight.
    Returns (lhs, printed rhs, proof rhs)."""
    A = -0.5 * np.ones((2, 1, 1))
    out = gradient_bounds(A, np.eye(1), np.eye(1), tau=0.5)
    return tuple(float(np.exp(v)) for v in (out["printed"][0], out["printed"][1], out["proof"][1]))


def _check_theorem22(quick, rng):
    dims = [2, 8, 16] if quick else [1, 2, 8, 32, 64]
    depths = [1, 4, 32] if quick else [1, 2, 8, 32, 128, 256]
    margins = {f: [] for f in FORMS}
    margins["printed_SigmaleI"], margins["proof_SigmaGt1"] = [], []
    worst = {}

    def record(key, m, out, ell, d, Sigma):
        margins[key].extend(m)
        i = int(np.argmin(m))
        if key not in worst or m[i] < worst[key][0]:
            worst[key] = (m[i], _describe(out, key if key in FORMS else "proof", i, ell, d, Sigma))

    # Σ families: σ_max(Σ) ≤ 1 (the proof's hypothesis: "le1", "id") and general ("gen": eigenvalues
    # in [0.1, 10], and 4·I).  One batched call per (d, ℓ, Σ) over all τ and points.
    for d in dims:
        for ell in depths:
            per_point = (4 if quick else 6) if d * d * ell <= 100_000 else 3
            for family, (lo, hi) in (("le1", (0.1, 1.0)), ("gen", (0.1, 10.0)), ("id", (1, 1)),
                                     ("gen", (4.0, 4.0))):
                Sigma = random_Sigma(d, rng, lo, hi) if family != "id" else np.eye(d)
                R = random_R(d, rng, 1.0)
                taus = _taus(ell, quick)
                A = rng.standard_normal((len(taus), per_point, ell, d, d))
                A /= np.linalg.norm(A, ord=2, axis=(-2, -1))[..., None, None]
                A *= rng.uniform(0.3, 1.0, (len(taus), per_point, ell, 1, 1))
                for t, tau in enumerate(taus):
                    A[t] *= tau
                    A[t, 0] = -tau * np.eye(d)                    # the tight point of the proof
                    A[t, 1] = tau * np.eye(d) * rng.choice([-1, 1], (ell, 1, 1))
                out = gradient_bounds(A.reshape(-1, ell, d, d), R, Sigma)
                del A
                for form in FORMS:
                    m = _rel_margin(*out[form])
                    if form == "proof" and family == "gen":       # hypothesis σ_max(Σ) ≤ 1 fails
                        record("proof_SigmaGt1", m, out, ell, d, Sigma)
                        continue
                    record(form, m, out, ell, d, Sigma)
                    if family != "gen" and form == "printed":
                        margins["printed_SigmaleI"].extend(m)
    n_pts = len(margins["per_layer"])
    lhs0, rhs0, _ = printed_counterexample()
    res = [
        _result("Thm 2.2 per layer: |df/dA_i| >= 2(1-t)^(l-1)s|E|", margins["per_layer"], True,
                f"{n_pts} points of B_tau, d in {dims}, l in {depths}, several tau, Sigma; tightest: "
                f"{worst['per_layer'][1]}", tol=1e-9),
        _result("eq (2.3) proof form (1-t)^2(l-1) s^2, Sig<=I", margins["proof"], True,
                f"sigma_max(Sigma) <= 1; tightest: {worst['proof'][1]}", tol=1e-9),
        _result("eq (2.3) proof form (1-t)^2(l-1) s, any Sig", margins["proof_general"], True,
                f"tightest: {worst['proof_general'][1]}", tol=1e-9),
        _result("eq (2.3) as printed (1-t)^(l-1) s^2", margins["printed"], False,
                f"worst: {worst['printed'][1]}; with sigma_max(Sigma)<=1 only: worst margin "
                f"{min(margins['printed_SigmaleI']):.3g}; smallest: l=2,d=1,Sigma=R=1,A_j=-1/2: "
                f"lhs={lhs0:.4g} < rhs={rhs0:.4g}", tol=1e-9),
        _result("eq (2.3) proof form s^2 without Sig<=I", margins["proof_SigmaGt1"], False,
                f"the hypothesis sigma_max(Sigma)<=1 matters; worst: {worst['proof_SigmaGt1'][1]}",
                tol=1e-9),
    ]
    return res


def _check_adversarial(quick, rng):
    configs = [(3, 2, 0.3, 0.3), (6, 3, 0.1, 1.0), (12, 4, 0.05, 0.5)] if quick else \
        [(3, 2, 0.3, 0.3), (6, 3, 0.1, 1.0), (12, 4, 0.05, 0.5), (4, 8, 0.5, 1.0),
         (24, 8, 0.05, 0.3), (48, 4, 0.02, 1.0)]
    steps = 120 if quick else 300
    proof_m, printed_m, best = [], [], None
    for k, (ell, d, tau, lo) in enumerate(configs):
        Sigma = random_Sigma(d, rng, lo, 1.0)
        A, R = adversarial_search(ell, d, tau, Sigma, batch=8, steps=steps, seed=k)
        out = gradient_bounds(A, R, Sigma, tau=tau)
        pm = _rel_margin(*out["proof_general"])
        proof_m.extend(np.minimum(pm, _rel_margin(*out["proof"])))
        m = _rel_margin(*out["printed"])
        printed_m.extend(m)
        i = int(np.argmin(m))
        if best is None or m[i] < best[0]:
            ev = np.linalg.eigvalsh(Sigma)
            best = (m[i], f"tau={tau}, l={ell}, d={d}, Sigma eig [{ev[0]:.3g},{ev[-1]:.3g}], "
                          f"lhs={np.exp(out['printed'][0][i]):.4g}, rhs={np.exp(out['printed'][1][i]):.4g}")
    return [
        _result("eq (2.3) proof form: adversarial search", proof_m, True,
                f"(l,d,tau,sigma_min(Sigma)) in {configs}, sigma_max(Sigma)=1, 8 starts x {steps} projected-Adam steps minimising "
                f"|grad f|^2/(f-C_opt) over A in B_tau and R; worst margin ~0 = bound is tight", tol=1e-6),
        _result("eq (2.3) as printed: adversarial search", printed_m, False,
                f"worst: {best[1]}", tol=1e-9),
    ]


def checks(quick: bool):
    """All Section 2 claims, for ``python -m theory.check`` (see theory/check.py for the dict keys)."""
    rng = np.random.default_rng(20170424)
    out = []
    for fn in (_check_claim23, _check_lemma24, _check_theorem21, _check_theorem22, _check_adversarial):
        t = time.time()
        res = fn(quick, rng)
        res = res if isinstance(res, list) else [res]
        for r in res:
            r["detail"] += f" [{time.time() - t:.1f}s]"
        out.extend(res)
    return out
