"""Tall-skinny Gram-matrix benchmark: ``X^T X`` as ``ki,kj->ij``, X of shape (rows, cols).

X is float64 from ``np.random.default_rng(0)`` and is passed as both operands (one array,
counted once in the input size).  Not a mission benchmark; it exercises a long contracted
dimension with a tiny output.  Runs the selected systems on the same data in one process
(see ``common.run_suite``):

    python benchmarks/xtx.py [--rows 1000000] [--cols 64] [--repeats 5] [--systems ...]
                             [--blas-threads 2] [--json PATH]
"""

from __future__ import annotations

from common import Case, make_parser, run_suite


def cases(rows: int, cols: int) -> list[Case]:
    params = {"rows": rows, "cols": cols}
    return [Case("xtx", "ki,kj->ij", {"X": (rows, cols)}, ("X", "X"), params)]


def main(argv: list[str] | None = None) -> dict:
    sizes = {"rows": (1_000_000, "rows of X (K)"), "cols": (64, "columns of X (I = J)")}
    args = make_parser(__doc__.splitlines()[0], sizes).parse_args(argv)
    return run_suite("xtx", cases(args.rows, args.cols), args)


if __name__ == "__main__":
    main()
