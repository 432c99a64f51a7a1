"""Time, memory and size of Theorem 3.2's construction (theory/section3/expressivity.py) at CIFAR-100's size.

    python bench/expressivity_bench.py            # n=50,000 random unit points in d=3072, r=100 labels
    python bench/expressivity_bench.py --quick    # n=5,000, d=512, r=100 (CI)
    python bench/expressivity_bench.py --n 200 --d 20 --r 5

Build time = validation and Assumption 3.1 check + draws and Lemma B.1 margins + weights + Keras
model; verify time = float64 network + float32 model on all n points.  Wall and CPU seconds (CPU
summed over the process's threads: on a shared machine the wall time depends on the load, which
is printed).  Data generation and the Keras import are timed separately.  Peak memory is the
process's peak resident set size (ru_maxrss), data included.  The last lines compare the parameter count with the previous construction (one
threshold for all units, k = ceil(56 ln n / rho^4), no search; by its formula, not built) at this
size and at n=200, d=20, r=5, and print params / (n ln n / rho^2).
"""
import argparse
import json
import math
import os
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _data(n, d, r, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x, rng.integers(0, r, n)


def sizes_line(n, d, r, rho, k_new, label):
    """Parameters of the new network (its k) and of the previous construction (formula), and
    params / (n ln n / rho^2) for both."""
    from theory.section3.expressivity import C_UNIFORM, parameter_formula
    k_old = math.ceil(C_UNIFORM * math.log(n) / rho ** 4)
    new, old = parameter_formula(n, d, k_new, r), parameter_formula(n, d, k_old, r)
    unit = n * math.log(n) / rho ** 2
    return (f"{label:<26} rho={rho:.3f}: new k={k_new:<5} {new:>12,} params ({new / unit:6.1f} n ln n/rho^2)"
            f" | old k={k_old:<5} {old:>12,} ({old / unit:8.1f}) | old/new {old / new:5.1f}x")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=None, help="points (default 50000; 5000 with --quick)")
    p.add_argument("--d", type=int, default=None, help="dimension (default 3072; 512 with --quick)")
    p.add_argument("--r", type=int, default=100, help="classes (default 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the points and labels")
    p.add_argument("--k", type=int, default=None, help="start k (default: the formula)")
    p.add_argument("--thresholds", choices=["per_unit", "uniform"], default="per_unit",
                   help="one threshold per hidden unit (the default), or the proof of Lemma B.1's "
                        "one for all")
    p.add_argument("--quick", action="store_true", help="small sizes for CI")
    p.add_argument("--json", metavar="FILE", help="write the certificate to FILE")
    a = p.parse_args(argv)
    for flag in ("n", "d"):  # 0 is no size, not "the default"
        if getattr(a, flag) is not None and getattr(a, flag) < 1:
            raise SystemExit(f"error: --{flag}={getattr(a, flag)}: give at least 1")
    n = a.n if a.n is not None else 5000 if a.quick else 50000
    d = a.d if a.d is not None else 512 if a.quick else 3072

    from theory.section3.expressivity import fit_network

    t0 = time.time()
    import keras  # noqa: F401  imported here so its start-up time is not counted as build time
    t_import = time.time() - t0
    t0 = time.time()
    x, y = _data(n, d, a.r, a.seed)
    t_data = time.time() - t0

    model, cert = fit_network(x, y, a.r, k=a.k, seed=a.seed, thresholds=a.thresholds, verbose=True)
    t = cert["times"]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    m, m64 = cert["margins"], cert["margins_float64"]
    load = os.getloadavg()[0]
    print(f"data        n={n} d={d} r={a.r}: generated in {t_data:.1f}s (Keras import {t_import:.1f}s, "
          f"not counted below); load average {load:.1f} on {os.cpu_count()} cores")
    print(f"network     {cert['thresholds']} thresholds, k={cert['k']} (formula {cert['k_formula']}; "
          f"rho={cert['rho']:.3f}, {cert['rho_source']}), l={cert['ell']} blocks, "
          f"draws={len(cert['attempts'])}")
    print(f"params      model {cert['params_model']:,} = formula {cert['formula']} "
          f"({cert['params_per_n_ln_n_over_rho2']:.1f} n ln n / rho^2)")
    print(f"margins     Lemma B.1 min over units {m['units']:.4f} (theta in [{m['theta_range'][0]:.3f}, "
          f"{m['theta_range'][1]:.3f}]), final {min(m['final_own'], m['final_cross']):.4f}; float64: "
          f"own {m64['own']:.4f} others {m64['off']:.4f} extra ReLUs {m64['extra_relus']}")
    print(f"fit         float32 all correct={cert['correct_float32']} max|out-onehot|="
          f"{cert['max_abs_err_float32']:.2e} (tol {cert['tol']:g}); float64 max|out-onehot|="
          f"{cert['max_abs_err_float64']:.2e} ({m64['how']}); fits={cert['fits']}")
    c = t["cpu"]
    for name, tt in (("time", t), ("cpu time", c)):
        b = tt["assumption_check"] + tt["draws_and_margins"] + tt["weights_and_model"]
        v = tt["verify_float64"] + tt["verify_float32"]
        print(f"{name:<11} build {b:.1f}s (assumption {tt['assumption_check']:.1f}, draws+margins "
              f"{tt['draws_and_margins']:.1f}, weights+Keras model {tt['weights_and_model']:.1f}); "
              f"verify {v:.1f}s (float64 {tt['verify_float64']:.1f}, float32 {tt['verify_float32']:.1f});"
              f" build+verify {b + v:.1f}s")
    print(f"            cpu time is summed over threads; float32: {cert['float32_check']}")
    print(f"memory      peak RSS {peak:.2f} GiB")
    print(sizes_line(cert["n_unique"], d, a.r, cert["rho"], cert["k"], f"this size (n={n})"))
    if (n, d, a.r) != (200, 20, 5):
        import numpy as np
        from theory.section3 import assumption31
        from theory.section3.expressivity import fit_network as fit
        xs, ys = _data(200, 20, 5, a.seed)
        _, cs = fit(xs, ys, 5, seed=a.seed)
        assert cs["fits"] and np.isfinite(cs["rho"]) and assumption31
        print(sizes_line(200, 20, 5, cs["rho"], cs["k"], "n=200, d=20, r=5"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(cert, f, indent=1, default=str)
    return 0 if cert["fits"] else 1


if __name__ == "__main__":
    sys.exit(main())
