"""Square matrix-multiply benchmark: ``ik,kj->ij`` with A and B n x n, float64.

Not a mission benchmark; a calibration point against the machine's DGEMM peak
(docs/performance.md: ~52 / ~102 GFLOP/s on 1 / 2 threads at n = 2048).  Runs the selected
systems on the same data in one process (see ``common.run_suite``):

    python benchmarks/matmul.py [--n 2048] [--repeats 5] [--systems ...]
                                [--blas-threads 2] [--json PATH]
"""

from __future__ import annotations

from common import Case, make_parser, run_suite


def cases(n: int) -> list[Case]:
    return [Case("matmul", "ik,kj->ij", {"A": (n, n), "B": (n, n)}, ("A", "B"), {"n": n})]


def main(argv: list[str] | None = None) -> dict:
    parser = make_parser(__doc__.splitlines()[0], {"n": (2048, "matrix size n")})
    args = parser.parse_args(argv)
    return run_suite("matmul", cases(args.n), args)


if __name__ == "__main__":
    main()
