"""Gradient descent on deep linear networks: residual ``(I + A_ℓ)···(I + A_1)`` against the
standard parameterization ``W_ℓ···W_1``, both from small random initialisation (Section 2 of
Hardt & Ma; Kawaguchi (2016) shows that ``W = 0`` is a saddle of the standard parameterization, with
zero curvature for ``ℓ ≥ 3``, where gradient descent from small initialisation stalls).

    python -m theory.section2.experiment --out DIR [--depths 1 2 4 ...] [--steps N] [--quick]

Both minimise the population risk of Claim 2.3, ``f = ‖E Σ^{1/2}‖_F² + d`` (exact gradients, no
sampling noise), for one fixed target ``R = Q P`` (``Q`` a rotation with angles up to
``--max-angle``, ``P`` symmetric with eigenvalues ``e^{±γ}``, so ``det R > 0``).  What is recorded
is the relative excess risk ``(f − C_opt)/(f(0-map) − C_opt) = ‖EΣ^{1/2}‖² / ‖RΣ^{1/2}‖²``
(1 = the all-zero map, 0 = optimum).  The step size is ``--lr / ℓ`` for both parameterizations.

Writes TensorBoard summaries under ``DIR/{residual,standard}/depth_XXX`` (scalar
``relative_excess_risk``), the figure ``DIR/linear_gd.png`` and ``DIR/linear_gd.json`` (the two
replaced together, whole or not at all). As the run/ entry points do, a bad flag, an ``--out``
that cannot be written and a ``--dim`` whose matrices cannot fit in memory are one line and exit
status 2 before any work, and Ctrl-C is one line and exit status 130.
"""
import argparse
import json
import math
import os
import signal
import sys
import tempfile
import time

import numpy as np

from resnet_nobn.errors import broken_link, first_line, write_failure
from resnet_nobn.files import atomic_file


def make_problem(d, gamma, max_angle, seed):
    """``R = Q P``: ``Q = exp(S)`` a rotation with angles in [−max_angle, max_angle], ``P = V diag(e^u) Vᵀ``
    with ``u`` in [−γ, γ] (endpoints included).  ``Σ = I``.  Returns R, Sigma (numpy float64)."""
    import scipy.linalg as sla
    rng = np.random.default_rng(seed)
    Z = np.linalg.qr(rng.standard_normal((d, d)))[0]
    S = np.zeros((d, d))
    for i in range(0, d - 1, 2):
        t = rng.uniform(-max_angle, max_angle)
        S[i, i + 1], S[i + 1, i] = -t, t
    Q = sla.expm(Z @ S @ Z.T)
    V = np.linalg.qr(rng.standard_normal((d, d)))[0]
    u = rng.uniform(-gamma, gamma, d)
    u[0], u[-1] = -gamma, gamma
    return Q @ (V * np.exp(u)) @ V.T, np.eye(d)


def run(depth, residual, R, Sigma, steps, lr, init_scale, log_every, seed, writer=None):
    """Gradient descent for one depth; returns (steps logged, relative excess risk at those steps,
    ``max_j ‖A_j − A_j(0)‖``: how far gradient descent moved the slices)."""
    import tensorflow as tf
    d = R.shape[0]
    rng = np.random.default_rng(seed)
    init = init_scale / math.sqrt(d) * rng.standard_normal((depth, d, d))
    W = tf.Variable(init)
    Rt, St = tf.constant(R), tf.constant(Sigma)
    eye = tf.eye(d, dtype=tf.float64)
    norm0 = float(np.trace(R @ Sigma @ R.T))
    step_size = lr / depth

    def excess():
        P = eye
        for j in range(depth):          # unrolled: fast per step for the depths used here
            P = P + tf.matmul(W[j], P) if residual else tf.matmul(W[j], P)
        E = P - Rt
        return tf.reduce_sum(tf.matmul(E, St) * E)

    @tf.function
    def chunk(n):
        for _ in tf.range(n):
            with tf.GradientTape() as tape:
                loss = excess()
            W.assign_sub(step_size * tape.gradient(loss, W))
        return excess()

    xs, ys = [0], [float(excess()) / norm0]
    done = 0
    while done < steps:
        n = min(log_every, steps - done)
        val = float(chunk(tf.constant(n))) / norm0
        done += n
        if not math.isfinite(val):
            val = float("inf")
        xs.append(done)
        ys.append(val)
        if not math.isfinite(val):
            break
    if writer is not None:
        write_scalars(writer, "relative_excess_risk", xs, ys)
    norms = np.linalg.norm(W.numpy() - init, ord=2, axis=(-2, -1))
    return xs, ys, float(norms.max())


def write_scalars(writer, tag, xs, ys):
    """TensorBoard scalar summaries through core ``tf.summary.write`` with the "scalars" plugin
    metadata -- what ``tf.summary.scalar`` writes, without needing the tensorboard package
    (not in requirements.txt; install it only to view the runs)."""
    import tensorflow as tf
    from tensorflow.core.framework import summary_pb2
    meta = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")).SerializeToString()
    with writer.as_default():
        for x, y in zip(xs, ys):
            tf.summary.write(tag, tf.constant(y if math.isfinite(y) else 1e30, tf.float32),
                             step=x, metadata=meta)
    writer.flush()


def plot(results, depths, path, target):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    cmap = plt.get_cmap("viridis")
    for ax, kind, title in ((axes[0], "residual", "residual  (I+A_l)...(I+A_1)"),
                            (axes[1], "standard", "standard  W_l...W_1")):
        for k, depth in enumerate(depths):
            xs, ys = results[kind][str(depth)]
            ax.loglog(np.asarray(xs) + 1, np.maximum(ys, 1e-16),
                      color=cmap(k / max(1, len(depths) - 1)), lw=1.6, label=f"depth {depth}")
        ax.axhline(target, color="gray", ls=":", lw=1)
        ax.set_title(title)
        ax.set_xlabel("gradient step + 1")
        ax.set_ylabel("relative excess risk  |E Sigma^1/2|^2 / |R Sigma^1/2|^2")
        ax.set_ylim(1e-13, 10)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8, loc="lower left")
    ax = axes[2]
    for kind, marker in (("residual", "o-"), ("standard", "s-")):
        ax.loglog(depths, [max(results[kind][str(dp)][1][-1], 1e-16) for dp in depths],
                  marker, label=kind)
    ax.axhline(target, color="gray", ls=":", lw=1, label=f"'reached' = {target:g}")
    ax.set_xscale("log", base=2)
    ax.set_title("final relative excess risk vs depth")
    ax.set_xlabel("depth l")
    ax.set_ylim(1e-16, 10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("Gradient descent from small random init on f(A) = |E Sigma^1/2|^2 + d "
                 "(Hardt & Ma, Section 2): the residual form reaches the optimum at every depth, "
                 "the standard one stalls at the saddle W = 0", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


class _Refused(Exception):
    """Bad input: said in one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's usage text and exit: one line instead
        raise _Refused(f"{message} (--help lists every flag)")


def _parser():
    p = _Parser(prog="python -m theory.section2.experiment", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=os.path.expanduser, help="output directory (TensorBoard runs, PNG, JSON)")
    p.add_argument("--depths", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128],
                   help="depths l to train (default: 1 2 4 ... 128)")
    p.add_argument("--steps", type=int, default=1000, help="gradient steps per run (default 1000)")
    p.add_argument("--lr", type=float, default=0.05,
                   help="step size times depth: each run uses lr/l (default 0.05)")
    p.add_argument("--dim", type=int, default=16, help="dimension d of R (default 16)")
    p.add_argument("--gamma", type=float, default=0.5,
                   help="log of the extreme singular values of R's symmetric factor (default 0.5)")
    p.add_argument("--max-angle", type=float, default=1.0,
                   help="largest rotation angle (radians) of R's orthogonal factor (default 1.0)")
    p.add_argument("--init-scale", type=float, default=0.05,
                   help="init entries ~ N(0, (init_scale)^2/d) for A_j and for W_j (default 0.05)")
    p.add_argument("--log-every", type=int, default=10, help="steps between logged points (default 10)")
    p.add_argument("--target", type=float, default=1e-6,
                   help="relative excess risk counted as 'reached the optimum' (default 1e-6)")
    p.add_argument("--seed", type=int, default=0, help="seed of R and of the initialisations")
    p.add_argument("--quick", action="store_true",
                   help="small run: depths 1 4 16 64, 300 steps (overrides --depths/--steps)")
    return p


# The float64 matrices a run holds at once, per d x d matrix of each layer: the slices, their
# initial values and gradient, and the products the unrolled forward pass keeps for the backward.
MATRICES_PER_LAYER = 6


def check_args(args):
    """_Refused for a value the experiment cannot run with, before anything is written: bounds,
    and a --dim (with the deepest --depths) whose matrices cannot fit in this machine's memory."""
    import psutil
    for name, ok in (("steps", args.steps >= 1), ("log-every", args.log_every >= 1),
                     ("depths", min(args.depths) >= 1), ("dim", args.dim >= 2),
                     ("lr", math.isfinite(args.lr) and args.lr > 0),
                     ("target", math.isfinite(args.target) and args.target > 0),
                     ("init-scale", math.isfinite(args.init_scale) and args.init_scale >= 0),
                     ("gamma", math.isfinite(args.gamma)), ("max-angle", math.isfinite(args.max_angle))):
        if not ok:
            value = getattr(args, name.replace("-", "_"))
            raise _Refused(f"--{name}={' '.join(map(str, value)) if isinstance(value, list) else value}"
                           " is out of range: steps, log-every and depths at least 1, dim at least "
                           "2, lr and target positive, every number finite")
    need = 8 * args.dim ** 2 * (MATRICES_PER_LAYER * max(args.depths) + 10)
    total = psutil.virtual_memory().total
    if need > total:
        raise _Refused(f"--dim={args.dim} at depth {max(args.depths)} needs at least "
                       f"{need / 2**30:,.1f} GiB of float64 matrices and this machine has "
                       f"{total / 2**30:.1f} GiB; lower --dim or --depths")


def _writable(out):
    """Creates --out; _Refused naming the path if it cannot be written (tried, before the work)."""
    try:
        if broken_link(out, "--out"):
            raise _Refused(broken_link(out, "--out"))
        os.makedirs(out, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(prefix=".probe-", dir=out))
    except OSError as e:
        raise _Refused(write_failure(e, out, "give another --out")) from None


def main(argv=None):
    # Ctrl-C is a KeyboardInterrupt even when started with SIGINT ignored (a background job)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    args = None
    try:
        args = _parser().parse_args(argv)
        if args.quick:
            args.depths, args.steps = [1, 4, 16, 64], 300
        check_args(args)
        _writable(args.out)
        return experiment(args)
    except _Refused as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        print("interrupted" + (f"; {args.out} holds the TensorBoard runs of the depths finished "
                               "so far" if args else ""), file=sys.stderr, flush=True)
        return 130


def experiment(args):
    """Trains both parameterizations at every depth; writes the runs, the figure and the JSON."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from theory.quiet import tf
    R, Sigma = make_problem(args.dim, args.gamma, args.max_angle, args.seed)
    results = {"residual": {}, "standard": {}}
    norms = {"residual": {}, "standard": {}}
    t0 = time.time()
    print(f"d={args.dim}, det R={np.linalg.det(R):.3g}, steps={args.steps}, lr={args.lr}/l, "
          f"init_scale={args.init_scale}", flush=True)
    print("final relative excess risk of both; move = max_j |A_j - A_j(0)| of the residual run, and "
          "l*move (Theorem 2.1: an optimum O(1/l) from the identity exists)", flush=True)
    print(f"{'depth':>6} {'residual':>12} {'standard':>12} {'move':>12} {'l*move':>8}", flush=True)
    png, js = os.path.join(args.out, "linear_gd.png"), os.path.join(args.out, "linear_gd.json")
    try:
        for depth in args.depths:
            row = []
            for kind in ("residual", "standard"):
                writer = tf.summary.create_file_writer(
                    os.path.join(args.out, kind, f"depth_{depth:03d}"))
                xs, ys, nmax = run(depth, kind == "residual", R, Sigma, args.steps, args.lr,
                                   args.init_scale, args.log_every, args.seed + depth, writer)
                writer.close()
                results[kind][str(depth)] = (xs, ys)
                norms[kind][str(depth)] = nmax
                row.append(ys[-1])
            print(f"{depth:>6} {row[0]:>12.3e} {row[1]:>12.3e} {norms['residual'][str(depth)]:>12.4f} "
                  f"{depth * norms['residual'][str(depth)]:>8.3f}   ({time.time() - t0:.0f}s)",
                  flush=True)
        summary = {
            "args": vars(args),
            "final": {k: {dp: v[1][-1] for dp, v in results[k].items()} for k in results},
            "reached": {k: {dp: bool(v[1][-1] <= args.target) for dp, v in results[k].items()}
                        for k in results},
            "residual_max_move": norms["residual"],
            "standard_max_move": norms["standard"],
            "curves": results,
        }
        # the figure and the JSON replaced together, whole, or not at all
        with atomic_file(png) as png_tmp, atomic_file(js) as js_tmp:
            plot(results, args.depths, png_tmp, args.target)
            with open(js_tmp, "w") as f:
                json.dump(summary, f, indent=1)
    except (OSError, tf.errors.OpError) as e:
        said = write_failure(e, args.out, "give another --out")
        print(f"error: {said or first_line(e)}", file=sys.stderr, flush=True)
        return 2
    print(f"wrote {png} and TensorBoard runs under {args.out} ({time.time() - t0:.0f}s)",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
