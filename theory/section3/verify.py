"""Verification of Theorem 3.2's network (theory.section3.expressivity): the float32 Keras model and the
network in exact (float64) arithmetic, on every training point.

Float32: `model.predict` on every point when n l <= KERAS_ALL_BUDGET; beyond that, `run_float32`
(the model's own weights in one compiled loop) on every point and the Keras model itself on a
sample, which must agree.  Float64: every block literally (`forward64`) when n^2 k <=
LITERAL64_BUDGET; beyond that each point along its own path (`path64`), every other unit being
certified silent by the margin scan of theory.section3.expressivity.margins.
"""
import math

import numpy as np

from theory.section3.model import run_float32, shortcut

LITERAL64_BUDGET = 2e10   # n^2 k up to which the float64 check runs every block literally
KERAS_ALL_BUDGET = 1e6    # n l up to which model.predict runs on every point (else run_float32)


def _final(h, w, labels):
    """The final block in float64, its output and (own, others) pre-activation extremes, extra ReLUs."""
    n, r = h.shape[0], w["Uf"].shape[0]
    af = h @ w["Uf"].T + w["sf"]
    own = af[np.arange(n), labels].copy()
    af[np.arange(n), labels] = -np.inf
    off = float(af.max()) if r > 1 else -math.inf
    extra = int((af > 0).sum())
    af[np.arange(n), labels] = own
    return shortcut(h, r) + np.maximum(af, 0) @ w["Vf"].T, float(own.min()), off, extra


def forward64(z, w, labels, k):
    """Run every block literally in float64 from h_0 = z; returns outputs and the achieved margins.
    Each block computes a = h U^T (one product for all n points); only rows with a positive
    a + s get the second product, equal bit for bit to the dense h + V ReLU(a + s) (the other rows
    add exact zeros)."""
    n = z.shape[0]
    h, buf = z.copy(), np.empty_like(z)
    own_min, off_max, extra = math.inf, -math.inf, 0
    for b in range(w["U"].shape[0]):
        U, s, V = w["U"][b], w["s"][b], w["V"][b]
        a = np.matmul(h, U.T, out=buf)
        rows = np.arange(b * k, min(n, b * k + k))
        cols = rows - b * k
        own = a[rows, cols] + s[cols]
        own_min = min(own_min, float(own.min()))
        saved = a[rows, cols].copy()
        a[rows, cols] = -np.inf
        blk_max = float((a.max(axis=0) + s).max())
        off_max = max(off_max, blk_max)
        if blk_max > 0:                  # some other unit fires: Lemma B.1 broken, count them
            extra += int(((a + s) > 0).sum())
            a[rows, cols] = saved
            act = np.nonzero(((a + s) > 0).any(axis=1))[0]
        else:
            a[rows, cols] = saved
            act = rows[own > 0]
        h[act] += np.maximum(a[act] + s, 0) @ V.T
    out, own_f, off_f, extra_f = _final(h, w, labels)
    return out, {"own": own_min, "off": -off_max, "final_own": own_f, "final_off": -off_f,
                 "extra_relus": extra + extra_f, "how": "every block, literally"}


def path64(z, w, labels, k, m):
    """The network in float64 along each point's own path: its unit in its block, then the final
    block.  Valid because the margin scan `m` certifies every other unit silent at every block (its
    cross values bound the float64 pre-activations from above); returns what forward64 returns."""
    n = z.shape[0]
    b, c = np.arange(n) // k, np.arange(n) % k
    a = np.einsum("ij,ij->i", z, w["U"][b, c]) + w["s"][b, c]
    h = z + np.maximum(a, 0)[:, None] * w["V"][b, :, c]
    out, own_f, off_f, extra_f = _final(h, w, labels)
    off = m["theta"] - m["cross"]
    return out, {"own": float(a.min()), "off": float(off.min()), "final_own": own_f,
                 "final_off": -off_f, "extra_relus": int((off <= 0).sum()) + extra_f,
                 "how": "each point's own path; other units certified silent by the margin scan"}


def verify_network(model, data, dr, w, tol, batch_size, clock):
    """The float32 Keras model on every input row, and the network in float64 (see module
    docstring).  Returns the certificate's verification entries (times into `clock`)."""
    n, k, r = len(data), dr.k, w["Uf"].shape[0]
    if float(n) * n * k <= LITERAL64_BUDGET:
        out64, achieved = forward64(dr.z, w, data.labels, k)
    else:
        out64, achieved = path64(dr.z, w, data.labels, k, dr.m)
    clock.lap("verify_float64")
    if float(data.x32.shape[0]) * w["U"].shape[0] <= KERAS_ALL_BUDGET:
        out32, how32 = model.predict(data.x32, batch_size=batch_size, verbose=0), "model.predict"
    else:
        out32, agree = run_float32(model, data.x32, batch_size)
        how32 = f"run_float32 (the Keras model agrees on 256 rows to {agree:.1e})"
        if agree > 1e-4:
            raise RuntimeError(f"run_float32 differs from the Keras model by {agree:.3g}")
    err = np.abs(out32 - np.eye(r, dtype=np.float32)[data.y]).max(axis=1)
    res = {"margins_float64": achieved,
           "max_abs_err_float64": float(np.abs(out64 - np.eye(r)[data.labels]).max()),
           "correct_float64": bool((out64.argmax(1) == data.labels).all()),
           "max_abs_err_float32": float(err.max()), "worst_point_float32": int(np.argmax(err)),
           "correct_float32": bool((out32.argmax(1) == data.y).all()), "tol": tol,
           "float32_check": how32}
    res["fits"] = bool(res["correct_float32"] and res["max_abs_err_float32"] <= tol
                       and res["correct_float64"] and achieved["extra_relus"] == 0)
    clock.lap("verify_float32")
    return res
