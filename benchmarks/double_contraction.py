"""Double-contraction benchmark: ``ijk,jkf->if``.

X is N x N x N, Y is N x N x F, float64, from ``np.random.default_rng(0)``.  One GEMM of
(I x JK) by (JK x F), 2 N^3 F flops.  Runs the selected systems on the same data in one
process (see ``common.run_suite``):

    python benchmarks/double_contraction.py [--n 256] [--f 100] [--repeats 5]
                                            [--systems ...] [--blas-threads 2] [--json PATH]
"""

from __future__ import annotations

from common import Case, make_parser, run_suite


def cases(n: int, f: int) -> list[Case]:
    arrays = {"X": (n, n, n), "Y": (n, n, f)}
    return [Case("double-contraction", "ijk,jkf->if", arrays, ("X", "Y"), {"n": n, "f": f})]


def main(argv: list[str] | None = None) -> dict:
    args = make_parser(__doc__.splitlines()[0]).parse_args(argv)
    return run_suite("double_contraction", cases(args.n, args.f), args)


if __name__ == "__main__":
    main()
