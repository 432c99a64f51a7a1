"""Finite-sample expressivity of identity-parameterized residual networks (Hardt & Ma 2017, Section 3).

Theorem 3.2: under Assumption 3.1 (unit-norm points, pairwise distances >= rho) a residual network of
single-ReLU blocks `h + V ReLU(U h + s)` with O(n log n + r^2) parameters maps every one of n
training points to its one-hot label. `fit_network(x, y)` builds that network for given data,
following the proof in Appendix B, as a runnable Keras model made of the project's
`resnet_nobn.blocks.ResidualBlock` (first = Dense(k, use_bias=True) holding U and s,
second = Dense(k, use_bias=False) holding V), runs it on every point, and returns a certificate.

Construction (Appendix B, proof of Theorem 3.2 and Lemmas B.1/B.2):
  1. h_0 = A_0 x, A_0 in R^{k x d} with i.i.d. N(0, 1/k) entries (Johnson-Lindenstrauss; the 1/k
     scaling keeps ||A_0 x|| near 1). A bias-free Dense(k) layer.
  2. r random unit surrogate labels q_1..q_r in R^k; point i's target is v_i = q_{y_i}.
  3. l = ceil(n/k) blocks. Block b takes the points b*k .. b*k+k-1 (in input order) and, by
     Lemma B.1, moves each of them from z_i = A_0 x_i to v_i while leaving every other current vector
     fixed: row i of U is z_i, s = -theta * 1, column i of V is (v_i - z_i) / (||z_i||^2 - theta).
     Here theta is the paper's 1 - 2 rho'. A partly filled last block gets zero rows/columns (a zero
     row never fires because s < 0); it still counts k x k parameters.
  4. A final block maps q_c to e_c in R^r (Lemma B.1 again, with alpha = q, beta = e): U_f in R^{r x k}
     has rows q_c, s_f = -theta_f * 1, V_f in R^{r x r} has columns (e_c - P q_c) / (||q_c||^2 - theta_f).

Where this follows the proof rather than the printed text (see ../shared/paper/NOTES.md, section 2):
  * Final block's skip from R^k to R^r (the paper glosses over it): the block's `shortcut` is the
    fixed, parameter-free `PadOrTruncate(r)`: P h = [h; 0] (zero padding) when r >= k, and the first
    r coordinates of h when r < k. It has no weights, so the parameter count stays the paper's
    kr + r^2 + r for that block (U_f: kr, s_f: r, V_f: r^2), and the total equals
    kd + l(2k^2 + k) + (kr + r^2 + r) exactly; the certificate compares model.count_params() with it.
  * Lemma B.1's margin. The lemma is stated with hypotheses (1 - rho' <= ||alpha||^2 <= 1 + rho',
    pairwise distances >= 3 rho') from which (B.1) derives what the mechanism actually uses:
    exactly one ReLU fires per moved point. The printed hypotheses and (B.1) do not agree:
    b) reads ||alpha_i - beta_j|| >= 3 rho' where alpha_j is meant; (B.1) subtracts 3 rho' although
    the hypothesis only gives (1/2)||alpha_i - alpha_j||^2 >= 4.5 rho'^2; Lemma B.2 assumes only
    ||z_i - z_j|| >= rho'. So this module checks the mechanism's condition directly, for every pair
    it concerns:
        own:    ||z_i||^2 - theta > 0                     (the point's own unit fires),
        points: <z_i, z_j> < theta for all i != j          (no other not-yet-moved point fires it;
                every pair matters, because when the earlier of the two is a row of U the later
                one still sits at its z),
        labels: <q_c, z_j> < theta whenever a point with label c sits in an earlier block than j
                (points already moved sit at q_c, the proof's "q_i does not correlate with z_j"),
        final:  <q_c, q_c'> < theta_f < ||q_c||^2 = 1 for c != c'.
    theta is put midway between the smallest ||z_i||^2 and the largest cross inner product (so the
    margin is as large as possible; rho' = (1 - theta)/2), theta_f midway between 1 and
    max <q_c, q_c'>. The certificate reports each margin, the literal hypotheses of Lemma B.1 (as
    information, they are not needed), and the margins achieved by the float64 forward pass.
  * The choice of k. The proof takes k = c log n / rho^2 "with c = 10" and claims JL then preserves
    distances to 1 +- rho/3; neither holds as stated: preserving distances to 1 +- eps needs
    k ~ 8 ln n / eps^2, and to keep the inner-product gap between ||z||^2 ~ 1 and
    <z_i, z_j> <= 1 - rho^2/2 the distortion must be eps ~ rho^2, i.e. k ~ ln n / rho^4. This module
    starts from k = ceil(c ln n / rho^4) with c = DEFAULT_C = 56 (chosen on random data: at
    n = 50,000 random unit points in d = 3072, rho ~ 1.34 and k = 187, l = 268 blocks, margin 0.090;
    the proof's c = 10 and rho^2 give k = 60, where the margins fail, worst margin -0.26:
    `python -m theory.check` shows this at smaller sizes), at least
    ceil(4 ln r) (the paper's "k > 4 log r" for the q's), and then checks the margins. When a draw
    violates them it draws A_0 and q again (if the shortfall is small) or multiplies k by 1.5, warns,
    and records every attempt in the certificate.
  * Assumption 3.1. Inputs are unit-normalised (by a parameter-free UnitNormalization layer at the
    model's input when normalize=True, otherwise they must already have unit norm). Bit-identical
    input rows with different labels raise ValueError naming the pair; with the same label they are
    the same training example and are merged (n_unique in the certificate). Pairs closer than rho
    (if given; otherwise closer than RHO_FLOOR, i.e. numerically the same point) raise ValueError
    naming the pair. With assumption_check='exact' (default when n^2 d <= 2e11) every pair is
    checked in R^d (blocked float32 Gram, float64 recheck) and rho is measured; at larger sizes the
    O(n^2 d) scan is too slow, so ('projected') rho is estimated from a sample of 2000 points (an
    upper bound) and the pairs that break the margins in R^k (every pair is scanned there) are
    checked in R^d: a pair closer than rho is named, otherwise the projection was unlucky and is
    redrawn.

Verification: the float32 Keras model is run on all n points: every argmax must equal the label and
every output be within `tol` (default TOL = 1e-3) of the one-hot label. The same network is also run
in float64 with numpy (the second matrix product is applied only to rows with a nonzero ReLU, which
is bit-identical to the dense product since the other rows add exact zeros), giving the
exact-arithmetic residual (~1e-15) and the margins that actually came out in every block.
"""
import math
import time
import warnings

import numpy as np

DEFAULT_C = 56.0          # k = ceil(c ln n / rho^4), see the module docstring
TOL = 1e-3                # float32 model: max |output - one-hot| allowed
RHO_FLOOR = 1e-6          # without a user rho, points closer than this count as the same point
EXACT_CHECK_BUDGET = 2e11  # n^2 d up to which Assumption 3.1 is checked on all pairs in R^d
PARAM_FORMULA = "kd + l(2k^2 + k) + (kr + r^2 + r)"

_shortcut_cls = None


def _pad_or_truncate_class():
    """The final block's skip R^k -> R^r, defined lazily so importing this module needs no Keras."""
    global _shortcut_cls
    if _shortcut_cls is None:
        import keras

        @keras.saving.register_keras_serializable(package="theory")
        class PadOrTruncate(keras.layers.Layer):
            """Fixed, parameter-free shortcut R^k -> R^r: [h; 0] if r >= k, else h[:r]."""

            def __init__(self, units, **kwargs):
                super().__init__(**kwargs)
                self.units = int(units)

            def call(self, h):
                k = h.shape[-1]
                if k >= self.units:
                    return h[..., :self.units]
                return keras.ops.pad(h, [[0, 0], [0, self.units - k]])

            def compute_output_shape(self, input_shape):
                return tuple(input_shape[:-1]) + (self.units,)

            def get_config(self):
                return {**super().get_config(), "units": self.units}

        _shortcut_cls = PadOrTruncate
    return _shortcut_cls


def parameter_formula(n, d, k, r):
    """kd + l(2k^2 + k) + (kr + r^2 + r) with l = ceil(n/k) (Theorem 3.2's count, with biases)."""
    ell = -(-n // k)
    return k * d + ell * (2 * k * k + k) + (k * r + r * r + r)


def default_k(n, rho, r=2, c=DEFAULT_C):
    """k = ceil(c ln n / rho^4), at least ceil(4 ln r) and 4 (module docstring explains rho^4)."""
    return max(4, math.ceil(4 * math.log(max(r, 2))),
               math.ceil(c * math.log(max(n, 2)) / max(rho, 1e-12) ** 4))


def _rng(seed, *key):
    """A generator for one purpose of fit_network. numpy pads seed lists with zeros, so
    default_rng([seed, 0]) is default_rng(seed): the data's own generator in many scripts. A spawn
    key keeps the construction's draws independent of data drawn with default_rng(seed)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x5E32,) + key))


def _shortcut(h, r):
    k = h.shape[1]
    if k >= r:
        return h[:, :r]
    return np.concatenate([h, np.zeros((h.shape[0], r - k), h.dtype)], axis=1)


def _pair_msg(i, j, dist, yi, yj, why):
    return (f"points {i} and {j} are at distance {dist:.3g} and have labels {yi} and {yj}: "
            f"{why}")


class _Data:
    """Unit-normalised unique points, read in float64 chunks from the float32 input."""

    def __init__(self, x32, inv_norm, keep):
        self.x32, self.inv_norm, self.keep = x32, inv_norm, keep

    def rows64(self, lo, hi):
        idx = self.keep[lo:hi]
        return self.x32[idx].astype(np.float64) * self.inv_norm[idx, None]

    def dist(self, i, j):
        """Exact distance between unique points i and j (float64)."""
        a = self.rows64(i, i + 1)[0]
        b = self.rows64(j, j + 1)[0]
        return float(np.linalg.norm(a - b))

    def project(self, a0, chunk=4096):
        n = len(self.keep)
        z = np.empty((n, a0.shape[0]))
        for lo in range(0, n, chunk):
            z[lo:lo + chunk] = self.rows64(lo, lo + chunk) @ a0.T
        return z


def _max_offdiag_gram(m32, block=1024):
    """max_{i<j} <m_i, m_j> over all pairs (float32 blocked Gram), and its pair."""
    n = m32.shape[0]
    best, pair = -np.inf, (0, 0)
    for lo in range(0, n - 1, block):
        g = m32[lo:lo + block] @ m32[lo:].T
        b = g.shape[0]
        g[np.arange(b), np.arange(b)] = -np.inf
        flat = int(np.argmax(g))
        v = float(g.flat[flat])
        if v > best:
            best, pair = v, (lo + flat // g.shape[1], lo + flat % g.shape[1])
    return best, pair


def _exact_min_distance(data, block=1024):
    """Closest pair among the unique points in R^d: blocked float32 Gram, float64 recheck."""
    n = len(data.keep)
    x32 = np.empty((n, data.x32.shape[1]), np.float32)
    for lo in range(0, n, 4096):
        x32[lo:lo + 4096] = data.rows64(lo, lo + 4096)
    _, (i, j) = _max_offdiag_gram(x32, block)
    # float32 Gram can misorder pairs within ~1e-6; recheck the near-best candidates in float64.
    best = (data.dist(i, j), i, j)
    cut = float(x32[i] @ x32[j]) - 1e-5
    for lo in range(0, n - 1, block):
        g = x32[lo:lo + block] @ x32[lo:].T
        b = g.shape[0]
        g[np.arange(b), np.arange(b)] = -np.inf
        for a, bcol in zip(*np.nonzero(g >= cut)):
            dd = data.dist(lo + a, lo + bcol)
            if dd < best[0]:
                best = (dd, lo + a, lo + bcol)
    return best


def _scan(z, q, labels_u, k, min_margin):
    """Margins of Lemma B.1 for one draw (A_0 -> z, q): returns a dict (see module docstring)."""
    n, r = z.shape[0], q.shape[0]
    norms2 = np.einsum("ij,ij->i", z, z)
    i_own = int(np.argmin(norms2))
    if n > 1:
        max_pts, (pi, pj) = _max_offdiag_gram(z.astype(np.float32))
        max_pts = float(z[pi] @ z[pj])        # float64 value of the (float32) worst pair
    else:
        max_pts, (pi, pj) = -np.inf, (0, 0)
    block = np.arange(n) // k
    first_block = np.full(r, np.iinfo(np.int64).max)
    np.minimum.at(first_block, labels_u, block)
    qz = q @ z.T                                 # r x n, float64
    needed = first_block[:, None] < block[None, :]
    if needed.any():
        masked = np.where(needed, qz, -np.inf)
        flat = int(np.argmax(masked))
        max_lab, (lc, lj) = float(masked.flat[flat]), divmod(flat, n)
    else:
        max_lab, (lc, lj) = -np.inf, (0, 0)
    cross = max(max_pts, max_lab)
    min_n2 = float(norms2[i_own])
    theta = (min_n2 + cross) / 2 if np.isfinite(cross) else min_n2 / 2
    qq = q @ q.T
    np.fill_diagonal(qq, -np.inf)
    max_qq = float(qq.max()) if r > 1 else -1.0
    theta_f = (1.0 + max_qq) / 2
    m = {
        "theta": theta, "rho_prime": (1 - theta) / 2, "theta_final": theta_f,
        "own": min_n2 - theta, "own_point": i_own,
        "points": theta - max_pts if np.isfinite(max_pts) else math.inf,
        "points_pair": (int(pi), int(pj)),
        "labels": theta - max_lab if np.isfinite(max_lab) else math.inf,
        "labels_pair": (int(lc), int(lj)),
        "final_own": 1.0 - theta_f, "final_cross": theta_f - max_qq,
        "norm2_range": (min_n2, float(norms2.max())),
    }
    m["worst"] = min(m["own"], m["points"], m["labels"], m["final_own"], m["final_cross"])
    m["ok"] = bool(m["worst"] >= min_margin)
    rp = m["rho_prime"]
    m["lemma_b1_literal_hypotheses"] = bool(1 - rp <= min_n2 and norms2.max() <= 1 + rp)
    return m


def _weights(z, q, labels_u, k, theta, theta_f):
    """Appendix B's weights in float64: A_0 is separate; here the l middle blocks and the last."""
    n, r = z.shape[0], q.shape[0]
    ell = -(-n // k)
    U = np.zeros((ell, k, k))
    V = np.zeros((ell, k, k))
    s = np.full((ell, k), -theta)
    v = q[labels_u]
    for b in range(ell):
        lo, hi = b * k, min(n, b * k + k)
        m = hi - lo
        U[b, :m] = z[lo:hi]
        den = np.einsum("ij,ij->i", z[lo:hi], z[lo:hi]) - theta
        V[b][:, :m] = ((v[lo:hi] - z[lo:hi]) / den[:, None]).T
    Uf = q.copy()
    sf = np.full(r, -theta_f)
    den_f = np.einsum("ij,ij->i", q, q) - theta_f
    Vf = ((np.eye(r) - _shortcut(q, r)) / den_f[:, None]).T
    return {"U": U, "s": s, "V": V, "Uf": Uf, "sf": sf, "Vf": Vf}


def _forward64(z, w, labels_u, k):
    """Run the blocks in float64 from h_0 = z; returns outputs and the achieved margins.

    Each block computes a = h U^T + s for all n points (one matrix product, bias added column-wise
    to its maximum so that no second n x k array is made); only rows with a positive entry get the
    second product, which equals the dense h + V ReLU(a) bit for bit (other rows add exact zeros).
    """
    n = z.shape[0]
    h = z.copy()
    buf = np.empty_like(h)
    own_min, off_max, extra = math.inf, -math.inf, 0
    for b in range(w["U"].shape[0]):
        U, s, V = w["U"][b], w["s"][b], w["V"][b]
        a = np.matmul(h, U.T, out=buf)                # pre-activation minus the bias s
        lo, hi = b * k, min(n, b * k + k)
        rows, cols = np.arange(lo, hi), np.arange(hi - lo)
        own = a[rows, cols] + s[cols]
        own_min = min(own_min, float(own.min()))
        saved = a[rows, cols].copy()
        a[rows, cols] = -np.inf
        # largest pre-activation of another point (s is the constant -theta in this construction)
        blk_max = float(a.max() + s[0]) if (s == s[0]).all() else float((a.max(axis=0) + s).max())
        off_max = max(off_max, blk_max)
        if blk_max > 0:                  # some other unit fires: Lemma B.1 broken, count them
            extra += int(((a + s) > 0).sum())
            a[rows, cols] = saved
            act = np.nonzero(((a + s) > 0).any(axis=1))[0]
        else:                            # only own units can be positive
            a[rows, cols] = saved
            act = rows[own > 0]
        h[act] += np.maximum(a[act] + s, 0) @ V.T
    r = w["Uf"].shape[0]
    af = h @ w["Uf"].T + w["sf"]
    own_f = af[np.arange(n), labels_u].copy()
    af[np.arange(n), labels_u] = -np.inf
    off_f = float(af.max()) if r > 1 else -math.inf
    extra += int((af > 0).sum())
    af[np.arange(n), labels_u] = own_f
    out = _shortcut(h, r) + np.maximum(af, 0) @ w["Vf"].T
    return out, {"own": own_min, "off": -off_max, "final_own": float(own_f.min()),
                 "final_off": -off_f, "extra_relus": extra}


def build_model(a0, w, d, normalize=True):
    """The Keras model: [UnitNormalization] -> Dense(k) A_0 -> l ResidualBlocks -> final block.

    Each block is `resnet_nobn.blocks.ResidualBlock(Dense(k, use_bias=True), Dense(k,
    use_bias=False))`; the final one has Dense(r) layers and the PadOrTruncate(r) shortcut. For
    speed (hundreds of blocks) the Dense layers are created with initializers that return the
    construction's weights and are built before the functional graph is traced, so each block is traced
    once rather than twice (Keras otherwise builds a layer without build() by running it).
    """
    import keras
    from resnet_nobn.blocks import ResidualBlock

    ell, k, _ = w["U"].shape
    r = w["Uf"].shape[0]
    f32 = np.float32

    def const(value):                 # initializer returning the construction's weights
        value = np.ascontiguousarray(value, dtype=f32)

        def init(shape, dtype=None):
            assert tuple(shape) == value.shape
            return value
        return init

    def dense(units, bias, name, fan_in, kernel, b=None):
        layer = keras.layers.Dense(units, use_bias=bias, kernel_initializer=const(kernel),
                                   bias_initializer=const(b) if bias else "zeros", name=name)
        layer.build((None, fan_in))
        return layer

    def block(first, second, name, shortcut=None):
        blk = ResidualBlock(first, second, shortcut=shortcut, name=name)
        blk.built = True       # its sublayers are built; nothing of its own to build
        return blk

    inp = keras.Input((d,), dtype="float32", name="x")
    h = keras.layers.UnitNormalization(name="unit_norm")(inp) if normalize else inp
    h = dense(k, False, "A0", d, a0.T)(h)
    for b in range(ell):
        h = block(dense(k, True, f"U{b}", k, w["U"][b].T, w["s"][b]),
                  dense(k, False, f"V{b}", k, w["V"][b].T), f"block{b}")(h)
    shortcut = _pad_or_truncate_class()(r, name="pad_or_truncate")
    out = block(dense(r, True, "U_final", k, w["Uf"].T, w["sf"]),
                dense(r, False, "V_final", r, w["Vf"].T), "final_block", shortcut)(h)
    return keras.Model(inp, out, name=f"theorem_3_2_k{k}_l{ell}")


def _say(verbose, msg, warn=False):
    if warn:
        warnings.warn(msg, RuntimeWarning, stacklevel=3)
    elif verbose:
        print(f"[expressivity] {msg}", flush=True)


def fit_network(x, y, num_classes=None, *, rho=None, k=None, c=DEFAULT_C, seed=0, normalize=True,
                min_margin=0.01, max_attempts=6, k_growth=1.5, k_max=4096,
                assumption_check="auto", verify=True, tol=TOL, batch_size=4096, verbose=False):
    """Build Theorem 3.2's network for (x, y); return (keras model, certificate dict).

    Args:
      x: (n, d) points (cast to float32, the model's input dtype). With normalize=True the model
        starts with a parameter-free UnitNormalization layer; otherwise rows must have unit norm.
      y: (n,) integer labels in [0, num_classes); num_classes defaults to max(y) + 1.
      rho: Assumption 3.1's separation. If given, pairs closer than rho raise ValueError; if None,
        rho is measured ('exact') or estimated from a sample ('projected') and only coincident
        points (< RHO_FLOOR) are errors. rho sets the starting k = ceil(c ln n / rho^4).
      k: start from this k instead of the formula. Raised by k_growth when margins fail.
      min_margin: every Lemma B.1 margin must be at least this (float32 safety).
      assumption_check: 'exact' (all pairs in R^d, O(n^2 d)), 'projected', or 'auto'.
      verify: run the float32 model and the float64 numpy network on every point.
      tol: allowed max |float32 output - one-hot|.
    Raises ValueError for inputs that break Assumption 3.1 (naming the pair), for a rho so small
    that the starting k exceeds k_max (naming the closest pair), or bad shapes/labels;
    RuntimeError if max_attempts draws all violate the margins.

    Certificate keys: n, n_unique, d, r, k, k_start, c, ell (middle blocks), depth (residual blocks,
    ell + 1), params_model, params_formula, formula, rho, rho_source, assumption_check, theta,
    rho_prime, theta_final, margins (own, points, labels, final_own, final_cross, worst, pairs,
    norm2_range, lemma_b1_literal_hypotheses), margins_float64 (achieved in the float64 run),
    attempts (one dict per draw), shortcut, tol, max_abs_err_float32, max_abs_err_float64,
    correct_float32, correct_float64, fits, times (seconds).
    """
    t_start = time.time()
    x32 = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    if x32.ndim != 2 or x32.shape[0] < 1:
        raise ValueError(f"x must be an (n, d) array with n >= 1, got shape {x32.shape}")
    if not np.all(np.isfinite(x32)):
        raise ValueError("x contains non-finite values")
    n, d = x32.shape
    y = np.asarray(y)
    if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"y must be an integer array of shape ({n},), got {y.dtype} {y.shape}")
    r = int(num_classes) if num_classes is not None else int(y.max()) + 1
    if y.min() < 0 or y.max() >= r:
        bad = int(np.nonzero((y < 0) | (y >= r))[0][0])
        raise ValueError(f"label of point {bad} is {y[bad]}, outside [0, {r})")
    if assumption_check not in ("auto", "exact", "projected"):
        raise ValueError("assumption_check must be 'auto', 'exact' or 'projected'")

    t_check = time.time()
    norms = np.sqrt(np.einsum("ij,ij->i", x32.astype(np.float64), x32.astype(np.float64))) \
        if n * d <= 5e7 else np.concatenate(
            [np.linalg.norm(x32[lo:lo + 4096].astype(np.float64), axis=1)
             for lo in range(0, n, 4096)])
    if normalize:
        if norms.min() == 0:
            raise ValueError(f"point {int(np.argmin(norms))} is zero and cannot be normalised")
        inv_norm = 1.0 / norms
    else:
        bad = np.nonzero(np.abs(norms - 1) > 1e-3)[0]
        if len(bad):
            raise ValueError(f"point {int(bad[0])} has norm {norms[bad[0]]:.6g}; Theorem 3.2 "
                             "assumes unit-norm points (pass normalize=True)")
        inv_norm = np.ones(n)

    # Bit-identical rows: different labels -> Assumption 3.1 error; same label -> merged.
    seen, keep = {}, []
    for i in range(n):
        key = x32[i].tobytes()
        j = seen.get(key)
        if j is None:
            seen[key] = len(keep)
            keep.append(i)
        else:
            if y[i] != y[keep[j]]:
                raise ValueError(_pair_msg(keep[j], i, 0.0, y[keep[j]], y[i],
                                           "Assumption 3.1 needs distinct points, and identical "
                                           "points cannot have different labels"))
    del seen
    keep = np.asarray(keep)
    nu = len(keep)
    labels_u = y[keep].astype(np.int64)
    data = _Data(x32, inv_norm, keep)
    floor = rho if rho is not None else RHO_FLOOR

    def close_error(i, j, dist):
        why = (f"Assumption 3.1 needs every pair at distance >= rho = {rho:g}" if rho is not None
               else "Assumption 3.1 needs distinct points (pass a perturbed x)")
        return ValueError(_pair_msg(int(keep[i]), int(keep[j]), dist, y[keep[i]], y[keep[j]], why))

    mode = assumption_check
    if mode == "auto":
        mode = "exact" if float(nu) * nu * d <= EXACT_CHECK_BUDGET else "projected"
    t0 = t_check
    closest = None                        # (distance, unique i, unique j) of the closest pair seen
    if nu < 2:
        rho_used, rho_source = (rho if rho is not None else 2.0), "single point"
    elif mode == "exact":
        dmin, i, j = _exact_min_distance(data)
        closest = (dmin, i, j)
        if dmin < floor:
            raise close_error(i, j, dmin)
        rho_used = rho if rho is not None else dmin
        rho_source = "given (checked on all pairs)" if rho is not None else \
            f"measured: min distance, points {keep[i]} and {keep[j]}"
    else:
        rng_s = _rng(seed, 2)
        sample = np.sort(rng_s.choice(nu, size=min(nu, 2000), replace=False))
        sub = _Data(x32, inv_norm, keep[sample])
        dmin, i, j = _exact_min_distance(sub)
        closest = (dmin, sample[i], sample[j])
        if dmin < floor:
            raise close_error(sample[i], sample[j], dmin)
        rho_used = rho if rho is not None else dmin
        rho_source = "given" if rho is not None else \
            f"estimated: min distance in a sample of {len(sample)} points (upper bound)"
    t_assume = time.time() - t0

    k_start = int(k) if k is not None else default_k(nu, rho_used, r, c)
    if k_start > k_max:
        where = "" if closest is None else (
            f" (closest pair: points {keep[closest[1]]} and {keep[closest[2]]} at distance "
            f"{closest[0]:.3g})")
        raise ValueError(f"rho = {rho_used:.3g}{where} needs k = ceil(c ln n / rho^4) = {k_start} "
                         f"> k_max = {k_max}: Assumption 3.1 holds only with a rho too small for a "
                         "practical network; perturb or deduplicate the points, or pass k")
    _say(verbose, f"n={n} ({nu} distinct), d={d}, r={r}; Assumption 3.1 check '{mode}': "
         f"rho={rho_used:.4g} ({rho_source}); start k={k_start}")
    kk = k_start
    attempts, tries_at_k = [], 0
    t0 = time.time()
    while True:
        rng = _rng(seed, 1, len(attempts))
        a0 = rng.standard_normal((kk, d)) / math.sqrt(kk)
        q = rng.standard_normal((r, kk))
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        z = data.project(a0)
        m = _scan(z, q, labels_u, kk, min_margin)
        rec = {"k": kk, "draw": len(attempts), "worst_margin": m["worst"],
               **{key: m[key] for key in ("own", "points", "labels", "final_own", "final_cross")}}
        attempts.append(rec)
        if m["ok"]:
            rec["outcome"] = "accepted"
            break
        # Does the worst pair break Assumption 3.1 itself?
        if m["points"] < min_margin:
            i, j = m["points_pair"]
            dist = data.dist(i, j)
            if dist < floor:
                raise close_error(i, j, dist)
        if len(attempts) >= max_attempts:
            raise RuntimeError(
                f"Lemma B.1 margins still violated after {len(attempts)} draws (last k = {kk}, "
                f"worst margin {m['worst']:.3g}, pair {tuple(int(keep[t]) for t in m['points_pair'])}"
                f" at distance {data.dist(*m['points_pair']):.3g}); raise k/max_attempts or rho")
        tries_at_k += 1
        if m["worst"] > -0.05 and tries_at_k < 2:
            rec["outcome"] = "redrawn (small shortfall)"
        else:
            new_k = min(k_max, max(kk + 1, math.ceil(kk * k_growth)))
            if new_k == kk:
                raise RuntimeError(f"margins violated at k = k_max = {k_max}")
            rec["outcome"] = f"k raised to {new_k}"
            kk, tries_at_k = new_k, 0
        _say(verbose, f"draw {rec['draw']} with k = {rec['k']} violates Lemma B.1's margins "
             f"(worst {m['worst']:.3g} < {min_margin}): {rec['outcome']}", warn=True)
    t_draw = time.time() - t0
    _say(verbose, f"draw {len(attempts) - 1} accepted: k={kk}, l={-(-nu // kk)} blocks, "
         f"theta={m['theta']:.4f}, worst Lemma B.1 margin {m['worst']:.4f}")

    t0 = time.time()
    w = _weights(z, q, labels_u, kk, m["theta"], m["theta_final"])
    model = build_model(a0, w, d, normalize=normalize)
    t_build = time.time() - t0
    ell = w["U"].shape[0]
    cert = {
        "theorem": "Hardt & Ma (ICLR 2017) Theorem 3.2, construction of Appendix B",
        "n": n, "n_unique": nu, "d": d, "r": r, "k": kk, "k_start": k_start, "c": c,
        "ell": ell, "depth": ell + 1,
        "params_model": int(model.count_params()),
        "params_formula": parameter_formula(nu, d, kk, r), "formula": PARAM_FORMULA,
        "n_log_n_plus_r2": nu * math.log(max(nu, 2)) + r * r,
        "rho": float(rho_used), "rho_source": rho_source, "assumption_check": mode,
        "theta": m["theta"], "rho_prime": m["rho_prime"], "theta_final": m["theta_final"],
        "margins": {key: m[key] for key in (
            "own", "points", "labels", "final_own", "final_cross", "worst", "norm2_range",
            "lemma_b1_literal_hypotheses")},
        "margin_pairs": {"own_point": int(keep[m["own_point"]]),
                         "points": tuple(int(keep[t]) for t in m["points_pair"]),
                         "labels (class, point)": (m["labels_pair"][0],
                                                   int(keep[m["labels_pair"][1]]))},
        "min_margin": min_margin, "attempts": attempts,
        "shortcut": (f"final block skip R^{kk} -> R^{r}: fixed parameter-free "
                     + ("zero padding [h; 0]" if r >= kk else f"truncation h[:{r}]")),
        "normalize": normalize, "tol": tol,
    }
    times = {"assumption_check": t_assume, "draws_and_margins": t_draw, "weights_and_model": t_build}
    if verify:
        t0 = time.time()
        out64, achieved = _forward64(z, w, labels_u, kk)
        onehot_u = np.eye(r)[labels_u]
        cert["margins_float64"] = achieved
        cert["max_abs_err_float64"] = float(np.abs(out64 - onehot_u).max())
        cert["correct_float64"] = bool((out64.argmax(1) == labels_u).all())
        times["verify_float64"] = time.time() - t0
        t0 = time.time()
        out32 = model.predict(x32, batch_size=batch_size, verbose=0)
        err = np.abs(out32 - np.eye(r, dtype=np.float32)[y]).max(axis=1)
        cert["max_abs_err_float32"] = float(err.max())
        cert["worst_point_float32"] = int(np.argmax(err))
        cert["correct_float32"] = bool((out32.argmax(1) == y).all())
        times["verify_float32"] = time.time() - t0
        cert["fits"] = bool(cert["correct_float32"] and cert["max_abs_err_float32"] <= tol
                            and cert["correct_float64"] and achieved["extra_relus"] == 0)
    times["total"] = time.time() - t_start
    cert["times"] = times
    return model, cert


def _random_data(n, d, r, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x, rng.integers(0, r, n)


def _clustered_data(n, d, r, seed, spread=1.5):
    """Points around r well-separated centres, labels random (not the cluster): a harder case."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(2, r // 2), d))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    x = centres[rng.integers(0, len(centres), n)] + spread * rng.standard_normal((n, d)) / math.sqrt(d)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32), rng.integers(0, r, n)


def checks(quick):
    """Claims of Section 3 checked on built networks; see theory/check.py for the dict keys."""
    sizes = [("random", 2000, 256, 10, 0), ("clustered", 1500, 128, 10, 1)] if quick else \
        [("random", 20000, 1024, 100, 0), ("clustered", 5000, 512, 100, 1),
         ("random", 3000, 256, 3, 2)]
    certs = []
    for kind, n, d, r, seed in sizes:
        x, y = (_random_data if kind == "random" else _clustered_data)(n, d, r, seed)
        _, cert = fit_network(x, y, r, seed=seed)
        certs.append((f"{kind} n={n} d={d} r={r}", cert))
    out = []

    def add(claim, slack, proved, detail):
        out.append({"claim": claim, "instances": len(certs), "worst_margin": float(min(slack)),
                    "passed": bool(min(slack) >= 0), "proved": proved, "detail": detail})

    add("Theorem 3.2 exact fit (float32 Keras model)",
        [(c["tol"] - c["max_abs_err_float32"]) if c["correct_float32"] else -1 for _, c in certs],
        True, "; ".join(f"{s}: k={c['k']} l={c['ell']} max|out-onehot|={c['max_abs_err_float32']:.1e}"
                        f" (tol {c['tol']:g})" for s, c in certs))
    add("Theorem 3.2 exact fit (float64 residual)",
        [1e-9 - c["max_abs_err_float64"] if c["correct_float64"] else -1 for _, c in certs],
        True, "max|out-onehot| in float64: " + ", ".join(
            f"{c['max_abs_err_float64']:.1e}" for _, c in certs) + " (slack vs 1e-9)")
    add("Lemma B.1 margins (one ReLU per moved point)",
        [min(c["margins_float64"]["own"], c["margins_float64"]["off"],
             c["margins_float64"]["final_own"], c["margins_float64"]["final_off"])
         if c["margins_float64"]["extra_relus"] == 0 else -1 for _, c in certs],
        True, "achieved float64 pre-activation margins (own, others): " + "; ".join(
            f"({c['margins_float64']['own']:.3f}, {c['margins_float64']['off']:.3f})"
            f" draws={len(c['attempts'])}" for _, c in certs))
    add("Parameter count kd + l(2k^2+k) + kr+r^2+r",
        [-abs(c["params_model"] - c["params_formula"]) for _, c in certs], True,
        "; ".join(f"{c['params_model']:,} params = formula, {c['params_model'] / c['n_log_n_plus_r2']:.1f}"
                  f" x (n ln n + r^2)" for _, c in certs))
    # Empirical: the proof's own k = 10 ln n / rho^2 (c = 10).
    slack = []
    for (kind, n, d, r, seed), (_, cert) in zip(sizes, certs):
        x, y = (_random_data if kind == "random" else _clustered_data)(n, d, r, seed)
        k10 = max(2, math.ceil(10 * math.log(n) / cert["rho"] ** 2))
        rng = _rng(seed, 1, 0)         # the first draw fit_network makes
        a0 = rng.standard_normal((k10, d)) / math.sqrt(k10)
        q = rng.standard_normal((r, k10))
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        z = x.astype(np.float64) @ a0.T
        slack.append((k10, _scan(z, q, y.astype(np.int64), k10, 0.0)["worst"]))
    out.append({"claim": "Proof's k = 10 ln n / rho^2 suffices (B.1)",
                "instances": len(slack), "worst_margin": float(min(s for _, s in slack)),
                "passed": bool(min(s for _, s in slack) > 0), "proved": False,
                "detail": "k, worst margin: " + ", ".join(f"{kk}: {s:.3f}" for kk, s in slack)
                + " (the proof's JL constants are loose; fit_network uses c ln n / rho^4)"})
    return out
