"""The data of Theorem 3.2 (Hardt & Ma 2017, Section 3): validated, unit-normalised, deduplicated,
and checked against Assumption 3.1 (every pair of points at distance >= rho).

* :func:`validate` -- shapes, labels, finite values, unit norm (or normalisation, as the model's
  parameter-free UnitNormalization layer does), bit-identical rows: with different labels a
  ValueError naming the pair, with the same label the same training example (merged).
* :func:`check` -- Assumption 3.1.  'exact' (all pairs in R^d: blocked float32 Gram, float64
  recheck; O(n^2 d)) measures rho; 'projected' (for large n^2 d) estimates it from a sample of
  2,000 points (an upper bound); the construction then scans every pair in R^k and rechecks in R^d
  the pairs that break its margins (theory.section3.expressivity).
"""
import time

import numpy as np

RHO_FLOOR = 1e-6          # without a user rho, points closer than this count as the same point
EXACT_CHECK_BUDGET = 2e11  # n^2 d up to which Assumption 3.1 is checked on all pairs in R^d
SAMPLE = 2000             # points in the 'projected' estimate of rho


def pair_error(i, j, dist, yi, yj, why):
    return ValueError(f"points {i} and {j} are at distance {dist:.3g} and have labels {yi} and {yj}: "
                      f"{why}")


class Data:
    """Unit-normalised unique points (``keep``: their rows in the input), read in float64 chunks
    from the float32 input; ``labels``: their labels; ``y``: all labels."""

    def __init__(self, x32, inv_norm, keep, y):
        self.x32, self.inv_norm, self.keep, self.y = x32, inv_norm, keep, y
        self.labels = y[keep].astype(np.int64)

    def __len__(self):
        return len(self.keep)

    def rows64(self, lo, hi):
        idx = self.keep[lo:hi]
        return self.x32[idx].astype(np.float64) * self.inv_norm[idx, None]

    def dist(self, i, j):
        """Exact distance between unique points i and j (float64)."""
        return float(np.linalg.norm(self.rows64(i, i + 1)[0] - self.rows64(j, j + 1)[0]))

    def project(self, a0, chunk=4096):
        """``z_i = A_0 x_i`` for every unique point, float64, shape (n_unique, k)."""
        z = np.empty((len(self), a0.shape[0]))
        for lo in range(0, len(self), chunk):
            z[lo:lo + chunk] = self.rows64(lo, lo + chunk) @ a0.T
        return z

    def subset(self, rows):
        return Data(self.x32, self.inv_norm, self.keep[rows], self.y)

    def error(self, i, j, dist, rho):
        """The ValueError for unique points i, j closer than Assumption 3.1 allows."""
        why = (f"Assumption 3.1 needs every pair at distance >= rho = {rho:g}" if rho is not None
               else "Assumption 3.1 needs distinct points (pass a perturbed x)")
        ki, kj = int(self.keep[i]), int(self.keep[j])
        return pair_error(ki, kj, dist, self.y[ki], self.y[kj], why)


def validate(x, y, num_classes=None, normalize=True):
    """Returns (Data, r).  Raises ValueError for bad shapes, labels or norms, and for identical
    points with different labels (naming the pair)."""
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
    norms = np.concatenate([np.linalg.norm(x32[lo:lo + 4096].astype(np.float64), axis=1)
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
    seen, keep = {}, []
    for i in range(n):
        j = seen.setdefault(x32[i].tobytes(), len(keep))
        if j == len(keep):
            keep.append(i)
        elif y[i] != y[keep[j]]:
            raise pair_error(keep[j], i, 0.0, y[keep[j]], y[i], "Assumption 3.1 needs distinct "
                             "points, and identical points cannot have different labels")
    return Data(x32, inv_norm, np.asarray(keep), y), r


def max_offdiag_gram(m32, block=1024):
    """max_{i<j} <m_i, m_j> over all pairs (float32 blocked Gram), and its pair."""
    n = m32.shape[0]
    best, pair = -np.inf, (0, 0)
    for lo in range(0, n - 1, block):
        g = m32[lo:lo + block] @ m32[lo:].T
        b = g.shape[0]
        g[np.arange(b), np.arange(b)] = -np.inf
        flat = int(np.argmax(g))
        if g.flat[flat] > best:
            best, pair = float(g.flat[flat]), (lo + flat // g.shape[1], lo + flat % g.shape[1])
    return best, pair


def min_distance(data, block=1024):
    """Closest pair among the unique points in R^d: blocked float32 Gram, float64 recheck of the
    candidates within 1e-5 of the best (float32 can misorder pairs within ~1e-6)."""
    n = len(data)
    x32 = np.empty((n, data.x32.shape[1]), np.float32)
    for lo in range(0, n, 4096):
        x32[lo:lo + 4096] = data.rows64(lo, lo + 4096)
    _, (i, j) = max_offdiag_gram(x32, block)
    best = (data.dist(i, j), i, j)
    cut = float(x32[i] @ x32[j]) - 1e-5
    for lo in range(0, n - 1, block):
        g = x32[lo:lo + block] @ x32[lo:].T
        b = g.shape[0]
        g[np.arange(b), np.arange(b)] = -np.inf
        for a, c in zip(*np.nonzero(g >= cut)):
            dd = data.dist(lo + a, lo + c)
            if dd < best[0]:
                best = (dd, lo + a, lo + c)
    return best


def check(data, rho=None, mode="auto", rng=None):
    """Assumption 3.1 on the unique points.  Returns a dict: rho (given, measured or estimated),
    rho_source, mode, closest (distance, unique i, unique j) or None, floor, seconds.  Raises the
    ValueError of :meth:`Data.error` for a pair closer than rho (or RHO_FLOOR without rho)."""
    t0 = time.time()
    if mode not in ("auto", "exact", "projected"):
        raise ValueError("assumption_check must be 'auto', 'exact' or 'projected'")
    n, d = len(data), data.x32.shape[1]
    if mode == "auto":
        mode = "exact" if float(n) * n * d <= EXACT_CHECK_BUDGET else "projected"
    floor = rho if rho is not None else RHO_FLOOR
    out = {"mode": mode, "floor": floor, "closest": None, "rho_given": rho}
    if n < 2:
        out.update(rho=rho if rho is not None else 2.0, rho_source="single point")
    elif mode == "exact":
        dmin, i, j = min_distance(data)
        out["closest"] = (dmin, i, j)
        if dmin < floor:
            raise data.error(i, j, dmin, rho)
        out.update(rho=rho if rho is not None else dmin,
                   rho_source="given (checked on all pairs)" if rho is not None else
                   f"measured: min distance, points {data.keep[i]} and {data.keep[j]}")
    else:
        sample = np.sort(rng.choice(n, size=min(n, SAMPLE), replace=False))
        dmin, i, j = min_distance(data.subset(sample))
        out["closest"] = (dmin, sample[i], sample[j])
        if dmin < floor:
            raise data.error(sample[i], sample[j], dmin, rho)
        out.update(rho=rho if rho is not None else dmin, rho_source="given" if rho is not None else
                   f"estimated: min distance in a sample of {len(sample)} points (upper bound)")
    out["seconds"] = time.time() - t0
    return out
