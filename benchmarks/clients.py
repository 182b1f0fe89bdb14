"""scikit-learn on tc arrays against scikit-learn on numpy, in one process.

Times, with the same data for both (fresh ``tc.asarray`` per timed call, outside the timed
region), ``PCA(n_components=10)`` with every solver (``covariance_eigh``, ``full``,
``randomized``, ``auto``) at each ``--pca-sizes`` size, and
``LogisticRegression(solver="lbfgs", max_iter=50, tol=0)``; locally, or with ``--nodes N``
on a private Ray cluster of N nodes (the tc arrays then distributed in N row blocks). BLAS is
pinned (``--blas-threads``, default 1: numpy's and scipy's OpenBLAS pools otherwise make
numpy's own SVD time alternate between runs).

Each timed call gets a fresh input set, made off the clock: a copy of the data for numpy
(so neither system reads data still in the CPU's cache from the call before: ``tc.asarray``
copies its input), ``tc.asarray`` of it for tensorc. The machine is shared and noisy, so the
two systems are interleaved: after one warm-up call each, every repeat times one numpy fit
and one tensorc fit back to back (the order alternating). Prints the medians, the median of
the per-repeat ratios (tensorc / numpy, each from one pair of neighbouring calls: the figure
to quote) and, for lbfgs, the synchronisation points the fit took (the array programs it
evaluated).

    python benchmarks/clients.py [--pca-sizes 20000x50,200000x50] [--lr-rows 200000]
                                 [--repeats 7] [--nodes 0] [--cases pca,lr] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings

os.environ["SCIPY_ARRAY_API"] = "1"

SOLVERS = ("covariance_eigh", "full", "randomized", "auto")


def _size(text: str) -> tuple[int, int]:
    rows, cols = text.lower().split("x")
    return int(rows), int(cols)


def interleaved(fit, make_numpy, make_tc, repeats: int) -> dict:
    """One warm-up fit each, then ``repeats`` pairs of timed fits (numpy and tensorc back to
    back, the order alternating); inputs are made off the clock."""
    fit(*make_numpy())
    fit(*make_tc())
    numpy_times, tc_times = [], []
    for repeat in range(repeats):
        order = ((make_numpy, numpy_times), (make_tc, tc_times))
        for make, times in order if repeat % 2 == 0 else reversed(order):
            data = make()
            started = time.perf_counter()
            fit(*data)
            times.append(time.perf_counter() - started)
    ratios = [t / n for n, t in zip(numpy_times, tc_times, strict=True)]
    return {"numpy_ms": statistics.median(numpy_times) * 1e3,
            "tensorc_ms": statistics.median(tc_times) * 1e3,
            "ratio": statistics.median(ratios)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--pca-sizes", default="20000x50,200000x50",
                        help="PCA data sizes, rows x columns, comma-separated")
    parser.add_argument("--solvers", default=",".join(SOLVERS), help="PCA solvers")
    parser.add_argument("--lr-rows", type=int, default=200000, help="LogisticRegression rows")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cases", default="pca,lr", help="pca, lr or both")
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

    def as_tc(value):
        return tc.asarray(value, grid=grid) if args.nodes and value.ndim == 2 else \
            tc.asarray(value)

    cases = set(args.cases.split(","))
    rng = np.random.default_rng(0)
    rows = []
    with threadpool_limits(args.blas_threads), sklearn.config_context(array_api_dispatch=True):
        for size in (args.pca_sizes.split(",") if "pca" in cases else ()):
            n, d = _size(size)
            x = rng.normal(size=(n, d))
            for solver in args.solvers.split(","):
                def fit(data, solver=solver):
                    np.asarray(PCA(n_components=10, svd_solver=solver,
                                   random_state=0).fit(data).components_)

                found = interleaved(fit, lambda x=x: (x.copy(),), lambda x=x: (as_tc(x),),
                                    args.repeats)
                rows.append({"case": f"PCA {solver} {n}x{d}", **found})
        if "lr" in cases:
            lx = rng.normal(size=(args.lr_rows, 32))
            ly = (lx @ rng.normal(size=32) + rng.normal(size=args.lr_rows) > 0)
            ly = ly.astype(np.float64)

            def fit_lr(data, labels):
                model = LogisticRegression(solver="lbfgs", max_iter=50, tol=0)
                np.asarray(model.fit(data, labels).coef_)

            found = interleaved(fit_lr, lambda: (lx.copy(), ly.copy()),
                                lambda: (as_tc(lx), as_tc(ly)),
                                max(1, args.repeats // 2))
            programs = _programs_run(tc, fit_lr, as_tc(lx), as_tc(ly))
            rows.append({"case": f"LogisticRegression lbfgs {args.lr_rows}x32", **found,
                         "programs": programs})
    where = f"{args.nodes} Ray nodes" if args.nodes else "local"
    print(f"scikit-learn on tc arrays ({where}, BLAS {args.blas_threads} thread(s)), "
          "medians, numpy and tensorc interleaved")
    print(f"{'case':45} {'numpy ms':>10} {'tensorc ms':>11} {'ratio':>7}")
    for row in rows:
        extra = f"   {row['programs']} programs" if "programs" in row else ""
        print(f"{row['case']:45} {row['numpy_ms']:10.1f} {row['tensorc_ms']:11.1f} "
              f"{row['ratio']:6.2f}x{extra}")
    result = {"benchmark": "clients", "args": vars(args), "rows": rows}
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=2)
    if args.nodes:
        tc.shutdown()
    return result


def _programs_run(tc, fit, *data) -> int:
    """The array programs (synchronisation points) one fit evaluates."""
    from tensorc.lazy import evaluate

    original, count = evaluate.RUNNER.run, [0]

    def counted(*args, **kwargs):
        count[0] += 1
        return original(*args, **kwargs)

    evaluate.RUNNER.run = counted
    try:
        fit(*data)
    finally:
        evaluate.RUNNER.run = original
    return count[0]


if __name__ == "__main__":
    main()
