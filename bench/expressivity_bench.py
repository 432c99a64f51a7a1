"""Time and memory of Theorem 3.2's construction (theory/expressivity.py) at CIFAR-100's size.

    python bench/expressivity_bench.py            # n=50,000 points in d=3072, r=100 random labels
    python bench/expressivity_bench.py --quick    # n=5,000, d=512, r=100 (CI)

Build time = Assumption 3.1 check + draws and Lemma B.1 margins + weights + Keras model; verify
time = float64 numpy run + float32 Keras run on all n points. Data generation and the Keras import
are timed separately.
Peak memory is the process's peak resident set size (ru_maxrss), data included.
"""
import argparse
import json
import os
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=None, help="points (default 50000; 5000 with --quick)")
    p.add_argument("--d", type=int, default=None, help="dimension (default 3072; 512 with --quick)")
    p.add_argument("--r", type=int, default=100, help="classes (default 100)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--k", type=int, default=None, help="start k (default: the formula)")
    p.add_argument("--quick", action="store_true", help="small sizes for CI")
    p.add_argument("--json", metavar="FILE", help="write the certificate to FILE")
    a = p.parse_args(argv)
    n = a.n or (5000 if a.quick else 50000)
    d = a.d or (512 if a.quick else 3072)

    import numpy as np
    import psutil
    from theory.expressivity import fit_network

    t0 = time.time()
    import keras  # noqa: F401  imported here so its start-up time is not counted as build time
    t_import = time.time() - t0

    t0 = time.time()
    rng = np.random.default_rng(a.seed)
    x = rng.standard_normal((n, d), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = rng.integers(0, a.r, n)
    t_data = time.time() - t0
    rss_data = psutil.Process().memory_info().rss / 2**30

    model, cert = fit_network(x, y, a.r, k=a.k, seed=a.seed, verbose=True)
    t = cert["times"]
    build = t["assumption_check"] + t["draws_and_margins"] + t["weights_and_model"]
    verify = t["verify_float64"] + t["verify_float32"]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    m, m64 = cert["margins"], cert["margins_float64"]
    print(f"data        n={n} d={d} r={a.r}: generated in {t_data:.1f}s, RSS {rss_data:.2f} GiB "
          f"(TensorFlow/Keras import {t_import:.1f}s, not counted below)")
    print(f"network     k={cert['k']} (start {cert['k_start']}, rho={cert['rho']:.3f} "
          f"[{cert['rho_source']}]), l={cert['ell']} blocks, depth={cert['depth']} residual blocks, "
          f"draws={len(cert['attempts'])}")
    print(f"params      model {cert['params_model']:,}  formula {cert['formula']} = "
          f"{cert['params_formula']:,}  (n ln n + r^2 = {cert['n_log_n_plus_r2']:,.0f})")
    print(f"margins     theta={cert['theta']:.4f} own={m['own']:.4f} points={m['points']:.4f} "
          f"labels={m['labels']:.4f} final={min(m['final_own'], m['final_cross']):.4f}; "
          f"float64 run: own={m64['own']:.4f} others={m64['off']:.4f} extra ReLUs={m64['extra_relus']}")
    print(f"fit         float32: all correct={cert['correct_float32']} "
          f"max|out-onehot|={cert['max_abs_err_float32']:.2e} (tol {cert['tol']:g}); "
          f"float64: max|out-onehot|={cert['max_abs_err_float64']:.2e}; fits={cert['fits']}")
    print(f"time        build {build:.1f}s (assumption check {t['assumption_check']:.1f}, draws+margins "
          f"{t['draws_and_margins']:.1f}, weights+Keras model {t['weights_and_model']:.1f}); verify "
          f"{verify:.1f}s (float64 {t['verify_float64']:.1f}, float32 Keras {t['verify_float32']:.1f}); "
          f"build+verify {build + verify:.1f}s")
    print(f"memory      peak RSS {peak:.2f} GiB")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(cert, f, indent=1, default=str)
    return 0 if cert["fits"] else 1


if __name__ == "__main__":
    sys.exit(main())
