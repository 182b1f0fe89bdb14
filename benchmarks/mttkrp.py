"""MTTKRP benchmark: ``ijk,if,jf->if`` and ``ijk,jf,kf->if``.

X is N x N x N, B and C are N x F, float64, from ``np.random.default_rng(0)``.
Runs the selected systems on the same data in one process (see ``common.run_suite``):

    python benchmarks/mttkrp.py [--n 256] [--f 100] [--repeats 5] [--systems ...]
                                [--blas-threads 2] [--json PATH]
"""

from __future__ import annotations

from common import Case, make_parser, run_suite


def cases(n: int, f: int) -> list[Case]:
    arrays = {"X": (n, n, n), "B": (n, f), "C": (n, f)}
    params = {"n": n, "f": f}
    return [
        Case("mttkrp-if-jf", "ijk,if,jf->if", arrays, ("X", "B", "C"), params),
        Case("mttkrp-jf-kf", "ijk,jf,kf->if", arrays, ("X", "B", "C"), params),
    ]


def main(argv: list[str] | None = None) -> dict:
    args = make_parser(__doc__.splitlines()[0]).parse_args(argv)
    return run_suite("mttkrp", cases(args.n, args.f), args)


if __name__ == "__main__":
    main()
