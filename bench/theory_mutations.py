"""Mutation campaign for `python -m theory.check --quick`: plausible bugs put into theory/, one at a
time, each in a copy of the repository (the worktree is never touched); a bug is *caught* when the
report exits non-zero through a fatal row (a FAILED: line) without a Python traceback.

    python bench/theory_mutations.py [--jobs 2] [--only NAME,...] [--out docs/theory_mutations.json]

Every mutation is (name, file under theory/, exact text, replacement, what the bug is).  The text
must occur exactly once (else the campaign stops: a mutation that applies to nothing proves
nothing).  Prints one line per mutation as it finishes and a summary table (markdown).
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
S2, S3 = "theory/section2/", "theory/section3/"

MUTATIONS = [
    # Section 2: the linear residual network, Lemma 2.4, eq. (2.3)
    ("product_order", S2 + "linear.py", "acc + tf.matmul(a, acc)", "acc + tf.matmul(acc, a)",
     "prefix products multiplied in the wrong order"),
    ("grad_transpose", S2 + "linear.py", "tf.matmul(after, ES, transpose_a=True)", "tf.matmul(after, ES)",
     "Lemma 2.4: suffix product not transposed"),
    ("grad_sign", S2 + "linear.py", "return 2.0 * tf.matmul(", "return -2.0 * tf.matmul(",
     "gradient sign flipped"),
    ("grad_factor", S2 + "linear.py", "return 2.0 * tf.matmul(", "return 1.0 * tf.matmul(",
     "gradient missing its factor 2"),
    ("risk_constant", S2 + "linear.py", "axis=[-2, -1]) + d", "axis=[-2, -1]) + 1.0",
     "Claim 2.3's constant C = 1 instead of d"),
    ("risk_sigma", S2 + "linear.py", "tf.reduce_sum(tf.matmul(E, Sigma) * E, axis=[-2, -1]) + d",
     "tf.reduce_sum(E * E, axis=[-2, -1]) + d", "risk without Sigma"),
    ("bound_proof_exponent", S2 + "linear.py", '"proof": (log_lhs, base + 2 * (ell - 1) * l1',
     '"proof": (log_lhs, base + (ell - 1) * l1', "eq. (2.3) proof's form with (1-tau)^(l-1)"),
    ("bound_constant_4", S2 + "linear.py", "base = np.log(4 * ell)", "base = np.log(2 * ell)",
     "eq. (2.3): 2l instead of 4l"),
    ("per_layer_factor", S2 + "linear.py", "np.log(2.0) + (ell - 1) * l1", "(ell - 1) * l1",
     "Theorem 2.2 per-layer bound without its factor 2"),
    ("bound_tau_min", S2 + "linear.py", "tau = spectral_norms(An).max(axis=1)",
     "tau = spectral_norms(An).min(axis=1)", "tau = the smallest layer norm, not |||A|||"),
    ("proof_general_s2", S2 + "linear.py", "2 * (ell - 1) * l1 + np.log(s)),",
     "2 * (ell - 1) * l1 + 0.5 * np.log(s)),", "sigma_min to the power 1/2"),
    # Section 2: Theorem 2.1's construction
    ("gamma_one_side", S2 + "optimum.py", "return float(max(abs(math.log(s[0])), abs(math.log(s[-1]))))",
     "return float(abs(math.log(s[0])))", "gamma ignores sigma_min"),
    ("bound_no_3", S2 + "optimum.py", "math.sqrt(3.0 * gamma(R))) ** 2 / depth",
     "math.sqrt(gamma(R))) ** 2 / depth", "Theorem 2.1's bound with sqrt(gamma) for sqrt(3 gamma)"),
    ("split_ceil", S2 + "optimum.py", "q = min(max(1, round(depth * a / (2 * (a + b))))",
     "q = min(max(1, math.ceil(depth * a / (a + b)))", "paper_split: q from the wrong formula"),
    ("rot_factor", S2 + "optimum.py", "B += Zb @ (rotation(t / m) - np.eye(2)) @ Zb.T",
     "B += Zb @ (rotation(t / (m + 1)) - np.eye(2)) @ Zb.T", "rotation root off by one"),
    ("allocate_one_group", S2 + "optimum.py", "        m[j] += 1\n", "        m[0] += 1\n",
     "every extra layer to the first group"),
    ("layer_unused", S2 + "optimum.py", "for _ in range(depth - sum(m)):", "for _ in range(depth - sum(m) - 1):",
     "one layer left unused in the allocation"),
    ("groups_reversed", S2 + "optimum.py",
     'groups = [_Group("rot", _rotation_planes(Vt), d), _Group("diag", (np.eye(d), k), d),\n'
     '                  _Group("rot", _rotation_planes(U), d)]',
     'groups = [_Group("rot", _rotation_planes(U), d), _Group("diag", (np.eye(d), k), d),\n'
     '                  _Group("rot", _rotation_planes(Vt), d)]', "U and V^T groups applied in the wrong order"),
    ("svd_sign", S2 + "optimum.py", "if np.linalg.det(U) < 0:", "if np.linalg.det(U) > 0:",
     "det U = det V = +1 made -1"),
    ("psd_root", S2 + "optimum.py", "(V * z ** (1.0 / depth)) @ V.T", "(V * z ** (1.0 / (depth + 1))) @ V.T",
     "PSD case: R^(1/(l+1))"),
    ("reflect_M", S2 + "optimum.py", "M = R - (1.0 + 1.0 / a) * np.outer(R @ v, v)",
     "M = R - (1.0 + a) * np.outer(R @ v, v)", "det R < 0: wrong remainder M"),
    ("reflect_A1", S2 + "optimum.py", "(-(1.0 + a) * np.outer(v, v))[None]", "(-(1.0 - a) * np.outer(v, v))[None]",
     "det R < 0: first factor's sign"),
    ("refuse_threshold", S2 + "optimum.py", "    if bound <= 1:\n        raise ValueError(",
     "    if bound <= 1.5:\n        raise ValueError(", "det R < 0 refused where the bound is up to 1.5"),
    ("negative_pairs", S2 + "optimum.py", "for a, b in zip(negative[0::2], negative[1::2]):",
     "for a, b in zip(negative[0::2][:1], negative[1::2][:1]):", "only the first -1 pair of an orthogonal factor"),
    ("project_first", S2 + "optimum.py", "return np.concatenate([(-V0 @ V0.T)[None], _positive(M, depth - 1, method)])",
     "return np.concatenate([(V0 @ V0.T)[None], _positive(M, depth - 1, method)])", "singular R: projector sign"),
    # Section 2: the critical-point search (checks_bounds) -- the search is part of the check
    ("search_no_steps", S2 + "checks_bounds.py", "    for _ in range(steps):\n        floor",
     "    for _ in range(0):\n        floor", "critical-point search returns its start points"),
    ("search_accept_worse", S2 + "checks_bounds.py",
     "better = np.linalg.norm(g2, axis=1) < np.linalg.norm(g, axis=1)",
     "better = np.linalg.norm(g2, axis=1) > np.linalg.norm(g, axis=1)", "LM accepts worse steps"),
    # Section 3: Theorem 3.2's construction
    ("k_constant_5", S3 + "expressivity.py", "C_PAPER = 10.0", "C_PAPER = 5.0", "Theorem 3.2's constant 10 -> 5"),
    ("k_rho_power", S3 + "expressivity.py", "** (2 if per_unit else 4)", "** (1 if per_unit else 4)",
     "k with 1/rho instead of 1/rho^2"),
    ("shared_threshold", S3 + "lemma_b1.py", "theta = np.where(np.isfinite(cross), (own + cross) / 2, own / 2)",
     "theta = np.full(n, np.min(np.where(np.isfinite(cross), (own + cross) / 2, own / 2)))",
     "one shared threshold instead of per-unit thresholds"),
    ("default_uniform", S3 + "expressivity.py", 'def fit_network(x, y, num_classes=None, *, rho=None, k=None, c=None, thresholds="per_unit"',
     'def fit_network(x, y, num_classes=None, *, rho=None, k=None, c=None, thresholds="uniform"',
     "fit_network defaults to the proof's single threshold"),
    ("a0_scale", S3 + "expressivity.py", "self.a0 = rng.standard_normal((k, d)) / math.sqrt(k)",
     "self.a0 = rng.standard_normal((k, d)) / math.sqrt(d)", "A_0 scaled by 1/sqrt(d)"),
    ("ell_plus_one", S3 + "lemma_b1.py", "    ell = -(-n // k)\n    U, V, s", "    ell = -(-n // k) + 1\n    U, V, s",
     "an extra block"),
    ("v_column", S3 + "lemma_b1.py", "V[b][:, :hi - lo] = ((v[lo:hi] - z[lo:hi]) / den[:, None]).T",
     "V[b][:, :hi - lo] = ((v[lo:hi] - z[lo:hi]) / (den[:, None] + 1e-3)).T", "V's denominator off"),
    ("final_threshold", S3 + "lemma_b1.py", "theta_f = (1.0 + max_qq) / 2", "theta_f = max_qq",
     "final block's threshold at the largest cross value"),
    ("earlier_labels", S3 + "lemma_b1.py", "np.where(first[None, :] < blk[:, None], z @ q.T, -np.inf)",
     "np.where(first[None, :] > blk[:, None], z @ q.T, -np.inf)", "units see the wrong classes' labels"),
    ("kernel_transposed", S3 + "model.py", 'dense(k, True, f"U{b}", k, w["U"][b].T, w["s"][b])',
     'dense(k, True, f"U{b}", k, w["U"][b], w["s"][b])', "U kernel not transposed"),
    ("truncate_wrong_end", S3 + "model.py", "return h[..., :self.units]", "return h[..., -self.units:]",
     "final skip keeps the last r coordinates"),
    ("loop_bias_sign", S3 + "model.py", "a = tf.nn.relu(tf.matmul(h, KU[j]) + bU[j])",
     "a = tf.nn.relu(tf.matmul(h, KU[j]) - bU[j])", "run_float32's loop subtracts the bias"),
    ("path64_bias", S3 + "verify.py", 'a = np.einsum("ij,ij->i", z, w["U"][b, c]) + w["s"][b, c]',
     'a = np.einsum("ij,ij->i", z, w["U"][b, c])', "float64 per-point path without the bias"),
    ("param_formula", S3 + "expressivity.py", "return k * d + ell * (2 * k * k + k) + (k * r + r * r + r)",
     "return k * d + ell * (2 * k * k) + (k * r + r * r + r)", "parameter formula without the biases"),
]


# one thread per run: several runs at once on a shared machine, without spinning thread pools
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}


def apply(root, path, old, new):
    p = os.path.join(root, path)
    text = open(p, encoding="utf-8").read()
    if text.count(old) != 1:
        raise SystemExit(f"mutation text occurs {text.count(old)} times in {path}: {old[:60]!r}")
    open(p, "w", encoding="utf-8").write(text.replace(old, new))


def run_one(mutation, timeout):
    name, path, old, new, what = mutation
    with tempfile.TemporaryDirectory(prefix=f"mut_{name}_") as tmp:
        for sub in ("theory", "resnet_nobn"):
            shutil.copytree(os.path.join(REPO, sub), os.path.join(tmp, sub),
                            ignore=shutil.ignore_patterns("__pycache__"))
        apply(tmp, path, old, new)
        t = time.time()
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": tmp, **ONE_THREAD}
        try:
            proc = subprocess.run([sys.executable, "-m", "theory.check", "--quick"], cwd=tmp, env=env,
                                  capture_output=True, text=True, timeout=timeout)
            rc, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired:
            rc, out, err = None, "", "timeout"
    fatal = next((line[len("FAILED: "):] for line in out.splitlines() if line.startswith("FAILED: ")), "")
    traceback = "Traceback" in out or "Traceback" in err
    if rc is None:
        verdict = "timeout"
    elif traceback:
        verdict = "traceback"
    elif rc != 0 and fatal:
        verdict = "caught"
    elif rc == 0:
        verdict = "missed"
    else:
        verdict = f"exit {rc}"
    return {"name": name, "file": path, "bug": what, "exit": rc, "verdict": verdict,
            "fatal_rows": fatal, "seconds": round(time.time() - t, 1)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=2, help="mutations run at once, one thread each (default 2)")
    p.add_argument("--only", default="", help="comma-separated mutation names")
    p.add_argument("--timeout", type=float, default=900, help="seconds per run")
    p.add_argument("--out", help="write the results as JSON here")
    args = p.parse_args(argv)
    only = {x for x in args.only.split(",") if x}
    muts = [m for m in MUTATIONS if not only or m[0] in only]
    with tempfile.TemporaryDirectory() as tmp:      # every mutation applies, before any run
        shutil.copytree(os.path.join(REPO, "theory"), os.path.join(tmp, "theory"))
        for m in muts:
            apply(tmp, m[1], m[2], m[3])
            shutil.rmtree(os.path.join(tmp, "theory"))
            shutil.copytree(os.path.join(REPO, "theory"), os.path.join(tmp, "theory"))
    results, t0 = [], time.time()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for res in pool.map(lambda m: run_one(m, args.timeout), muts):
            results.append(res)
            print(f"{res['verdict']:<9} {res['name']:<22} {res['seconds']:>6.1f}s  {res['fatal_rows']}",
                  flush=True)
    caught = sum(r["verdict"] == "caught" for r in results)
    tb = sum(r["verdict"] == "traceback" for r in results)
    print(f"\n| mutation | file | bug | verdict | fatal rows |\n| --- | --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['name']} | {r['file'].replace('theory/', '')} | {r['bug']} | {r['verdict']} | "
              f"{r['fatal_rows']} |")
    print(f"\n{caught} of {len(results)} caught through a fatal row ({100 * caught / len(results):.0f}%), "
          f"{tb} by a traceback, {sum(r['verdict'] == 'missed' for r in results)} missed; "
          f"{time.time() - t0:.0f}s wall, --jobs {args.jobs}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if caught >= 0.9 * len(results) and tb == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
