"""Child process of tests/test_out_of_core.py: one streamed run under a memory budget.

    python out_of_core_child.py STORE KIND BUDGET

Writes nothing; prints one JSON line: the result's check against numpy (computed slab by
slab here, never whole), the growth of this process's peak resident memory over the run
(measured by the kernel: the high-water mark reset before the run), and tensorc's own
statistics."""

from __future__ import annotations

import json
import sys

import numpy as np
import zarr

import tensorc as tc


def _status(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def main() -> None:
    path, kind, budget = sys.argv[1:4]
    z = zarr.open_array(path, mode="r")
    n = z.shape[0]
    rng = np.random.default_rng(7)
    b, c = rng.random((n, 8)), rng.random((z.shape[1], 8))
    reference = np.zeros((n, 8))
    if kind in ("einsum", "program"):
        for i in range(0, n, 32):  # numpy, slab by slab (the cube's 32-row chunks)
            reference[i:i + 32] = np.einsum("ijk,if,jf->if", z[i:i + 32], b[i:i + 32], c)
    if kind == "gram":
        reference = sum(z[i:i + 4096].T @ z[i:i + 4096] for i in range(0, n, 4096))
    if kind == "standardize":
        total = sum(z[i:i + 4096].sum(axis=0) for i in range(0, n, 4096))
        mean = total / n
        std = np.sqrt(sum(((z[i:i + 4096] - mean) ** 2).sum(axis=0)
                          for i in range(0, n, 4096)) / n)
    tc.init(backend="local", memory_limit=budget)
    x = tc.from_zarr(path)
    before = _status("VmRSS:")
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    if kind == "einsum":
        got = np.asarray(tc.einsum("ijk,if,jf->if", x, b, c))
    elif kind == "gram":
        got = np.asarray(x.T @ x)
    elif kind == "standardize":  # the result (as large as the input) streams to zarr
        out = path + ".standardized.zarr"
        tc.to_zarr((x - tc.mean(x, axis=0)) / tc.std(x, axis=0), out)
        written = zarr.open_array(out, mode="r")
        rows = slice(n // 2, n // 2 + 1024)
        reference = (z[rows] - mean) / std
        got = written[rows]
    else:
        prog = tc.compile("size I, J, K, F\ninput X : f64[I, J, K]\ninput B : f64[I, F]\n"
                          "input C : f64[J, F]\noutput M : f64[I, F]\n"
                          "M[i, f] += X[i, j, k] * B[i, f] * C[j, f]\n")
        got = np.asarray(prog.run(X=x, B=b, C=c)["M"])
    growth = _status("VmHWM:") - before
    stats = tc.last_stats()
    print(json.dumps({"ok": bool(np.allclose(got, reference)), "growth": growth,
                      "modelled": stats.get("modelled_peak_bytes"),
                      "budget": stats.get("memory_limit_bytes"),
                      "measured": stats.get("peak_rss_bytes"),
                      "before": stats.get("rss_before_bytes")}))


if __name__ == "__main__":
    main()
