"""Lemma B.1 of Hardt & Ma 2017 (Appendix B), block by block: which vectors each hidden unit sees,
its threshold, the margins, and the weights of the l middle blocks and the final block.

Block b holds the points b*k .. b*k+k-1; unit i of it has row z_i of U, threshold theta_i
(s_i = -theta_i) and column (v_i - z_i) / (||z_i||^2 - theta_i) of V.  At block b, unit i sees
z_j for every j in blocks >= b (not moved yet) and q_c for every class c with a point in an
earlier block (moved); it must fire for z_i and for nothing else.  The proof's single threshold
s = -(1 - 2 rho') 1 ("uniform") and one threshold per unit ("per_unit") are both here; why the
second is the default is in theory/section3/expressivity.py.
"""
import numpy as np

from theory.section3.model import shortcut


def _later_gram(z32, k):
    """Yields (lo, hi, g): g[i - lo, j - lo] = <z_i, z_j> (float32) for the units i in [lo, hi) and
    every j >= lo, with -inf where j == i or j's block precedes i's (those vectors unit i never sees
    at z: they have moved).  Rows come in chunks of whole blocks."""
    n = z32.shape[0]
    blk = np.arange(n) // k
    step = k * max(1, 1024 // k)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        g = z32[lo:hi] @ z32[lo:].T
        own = g[:, :hi - lo]
        own[blk[lo:hi, None] > blk[None, lo:hi]] = -np.inf
        np.fill_diagonal(own, -np.inf)
        yield lo, hi, g


def _earlier_labels(z, q, labels, k):
    """<z_i, q_c> (float64) for the classes c with a point in a block before unit i's, else -inf."""
    blk = np.arange(z.shape[0]) // k
    first = np.full(q.shape[0], np.iinfo(np.int64).max)
    np.minimum.at(first, labels, blk)
    return np.where(first[None, :] < blk[:, None], z @ q.T, -np.inf)


def _cross_points(z, k):
    """For every unit i: max <z_i, z_j> over the vectors z_j it sees (`_later_gram`), and the j.
    The maxima are raised by the float32 error bound (k + 3) 2^-24 max||z||^2 so that they bound
    the float64 values from above."""
    n = z.shape[0]
    best, arg = np.full(n, -np.inf), np.zeros(n, np.int64)
    for lo, hi, g in _later_gram(z.astype(np.float32), k):
        a = g.argmax(axis=1)
        best[lo:hi], arg[lo:hi] = g[np.arange(hi - lo), a], lo + a
    err = (k + 3) * 2.0 ** -24 * 1.01 * float(np.einsum("ij,ij->i", z, z).max())
    return best + err, arg


def wrong_relus(z, q, labels, k, theta):
    """How many ReLUs of the l middle blocks fire wrongly at thresholds theta (shape (n,)): own
    units that stay off (||z_i||^2 <= theta_i) plus units that fire for another vector they see."""
    own = np.einsum("ij,ij->i", z, z)
    count = int((own <= theta).sum())
    for lo, hi, g in _later_gram(z.astype(np.float32), k):
        count += int((g > theta[lo:hi, None]).sum())
    return count + int((_earlier_labels(z, q, labels, k) > theta[:, None]).sum())


def margins(z, q, labels, k, thresholds="per_unit"):
    """Lemma B.1's condition for one draw (z = A_0 x, surrogate labels q): the thresholds and
    margins.  Unit i sees its own ||z_i||^2 and, from every other vector at its block, at most
    cross_i = max(<z_i, z_j> for j != i in blocks >= its own, <z_i, q_c> for classes c with a point
    in an earlier block).  per_unit: theta_i = (||z_i||^2 + cross_i)/2, margin_i = (||z_i||^2 -
    cross_i)/2; uniform: theta = (min ||z||^2 + max cross)/2, margin_i = min(||z_i||^2 - theta,
    theta - cross_i).  The final block: theta_f between max <q_c, q_c'> and 1."""
    n, r = z.shape[0], q.shape[0]
    own = np.einsum("ij,ij->i", z, z)
    pts, pts_arg = _cross_points(z, k) if n > 1 else (np.full(n, -np.inf), np.zeros(n, np.int64))
    qz = _earlier_labels(z, q, labels, k)
    lab_arg = qz.argmax(axis=1)
    lab = qz[np.arange(n), lab_arg]
    cross = np.maximum(pts, lab)
    if thresholds == "per_unit":
        theta = np.where(np.isfinite(cross), (own + cross) / 2, own / 2)
        margin = own - theta
    elif thresholds == "uniform":
        top = cross.max()
        theta = np.full(n, (own.min() + top) / 2 if np.isfinite(top) else own.min() / 2)
        margin = np.minimum(own - theta, theta - cross)
    else:
        raise ValueError("thresholds must be 'per_unit' or 'uniform'")
    qq = q @ q.T
    np.fill_diagonal(qq, -np.inf)
    max_qq = float(qq.max()) if r > 1 else -1.0
    theta_f = (1.0 + max_qq) / 2
    i = int(np.argmin(margin))
    m = {"thresholds": thresholds, "theta": theta, "margin": margin, "cross": cross,
         "theta_final": theta_f,
         "units": float(margin[i]), "unit": i,
         "partner": ("point", int(pts_arg[i])) if pts[i] >= lab[i] else ("label", int(lab_arg[i])),
         "final_own": 1.0 - theta_f, "final_cross": theta_f - max_qq,
         "norm2_range": (float(own.min()), float(own.max())),
         "theta_range": (float(theta.min()), float(theta.max()))}
    m["worst"] = min(m["units"], m["final_own"], m["final_cross"])
    return m


def weights(z, q, labels, k, theta, theta_f):
    """Appendix B's weights in float64 (A_0 is separate): the l middle blocks and the last."""
    n, r = z.shape[0], q.shape[0]
    ell = -(-n // k)
    U, V, s = np.zeros((ell, k, k)), np.zeros((ell, k, k)), np.full((ell, k), -1.0)
    v = q[labels]
    for b in range(ell):
        lo, hi = b * k, min(n, b * k + k)
        U[b, :hi - lo] = z[lo:hi]
        s[b, :hi - lo] = -theta[lo:hi]
        den = np.einsum("ij,ij->i", z[lo:hi], z[lo:hi]) - theta[lo:hi]
        V[b][:, :hi - lo] = ((v[lo:hi] - z[lo:hi]) / den[:, None]).T
    den_f = np.einsum("ij,ij->i", q, q) - theta_f
    Vf = ((np.eye(r) - shortcut(q, r)) / den_f[:, None]).T
    return {"U": U, "s": s, "V": V, "Uf": q.copy(), "sf": np.full(r, -theta_f), "Vf": Vf}
