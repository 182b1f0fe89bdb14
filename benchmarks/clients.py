"""scikit-learn on tc arrays against scikit-learn on numpy, in one process.

Times, with the same data for both (fresh ``tc.asarray`` per timed call, outside the timed
region), ``PCA(n_components=10)`` with every solver (``covariance_eigh``, ``full``,
``randomized``) and ``LogisticRegression(solver="lbfgs")``; locally, or with ``--nodes N``
on a private Ray cluster of N nodes (the tc arrays then distributed in N row blocks). BLAS is
pinned (``--blas-threads``, default 1: numpy's and scipy's OpenBLAS pools otherwise make
numpy's own SVD time alternate between runs). Prints medians, the ratio to numpy and, for
lbfgs, the synchronisation points the fit took (``tc.last_stats`` programs run).

    python benchmarks/clients.py [--rows 20000] [--cols 50] [--lr-rows 200000]
                                 [--repeats 7] [--nodes 0] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings

os.environ["SCIPY_ARRAY_API"] = "1"


def _median_ms(fit, make, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        data = make()
        started = time.perf_counter()
        fit(*data)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--rows", type=int, default=20000, help="PCA rows")
    parser.add_argument("--cols", type=int, default=50, help="PCA columns")
    parser.add_argument("--lr-rows", type=int, default=200000, help="LogisticRegression rows")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--nodes", type=int, default=0, help="Ray nodes (0: local)")
    parser.add_argument("--blas-threads", type=int, default=1)
    parser.add_argument("--json", help="also write the results as JSON to this file")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    import numpy as np
    import sklearn
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    import tensorc as tc

    if args.nodes:
        tc.init(num_nodes=args.nodes)
    grid = (max(args.nodes, 1), 1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.rows, args.cols))
    lx = rng.normal(size=(args.lr_rows, 32))
    ly = (lx @ rng.normal(size=32) + rng.normal(size=args.lr_rows) > 0).astype(np.float64)
    rows = []
    with threadpool_limits(args.blas_threads), sklearn.config_context(array_api_dispatch=True):
        for solver in ("covariance_eigh", "full", "randomized"):
            def fit(data, solver=solver):
                np.asarray(PCA(n_components=10, svd_solver=solver).fit(data).components_)

            numpy_ms = _median_ms(fit, lambda: (x,), args.repeats)
            tc_ms = _median_ms(fit, lambda: (tc.asarray(x, grid=grid) if args.nodes
                                             else tc.asarray(x),), args.repeats)
            rows.append({"case": f"PCA {solver} {args.rows}x{args.cols}",
                         "numpy_ms": numpy_ms, "tensorc_ms": tc_ms})

        def fit_lr(data, labels):
            model = LogisticRegression(solver="lbfgs", max_iter=50, tol=0).fit(data, labels)
            np.asarray(model.coef_)

        numpy_ms = _median_ms(fit_lr, lambda: (lx, ly), max(1, args.repeats // 3))
        tc_ms = _median_ms(fit_lr, lambda: (tc.asarray(lx, grid=grid) if args.nodes
                                            else tc.asarray(lx), tc.asarray(ly)),
                           max(1, args.repeats // 3))
        rows.append({"case": f"LogisticRegression lbfgs {args.lr_rows}x32",
                     "numpy_ms": numpy_ms, "tensorc_ms": tc_ms})
    where = f"{args.nodes} Ray nodes" if args.nodes else "local"
    print(f"scikit-learn on tc arrays ({where}, BLAS {args.blas_threads} thread(s)), medians")
    print(f"{'case':45} {'numpy ms':>10} {'tensorc ms':>11} {'ratio':>7}")
    for row in rows:
        row["ratio"] = row["tensorc_ms"] / row["numpy_ms"]
        print(f"{row['case']:45} {row['numpy_ms']:10.1f} {row['tensorc_ms']:11.1f} "
              f"{row['ratio']:6.2f}x")
    result = {"benchmark": "clients", "args": vars(args), "rows": rows}
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=2)
    if args.nodes:
        tc.shutdown()
    return result


if __name__ == "__main__":
    main()
