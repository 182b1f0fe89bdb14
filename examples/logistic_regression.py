"""Logistic regression by Newton's method, written once for any array API namespace.

``fit(xp, X, y)`` takes the namespace (``tensorc`` or ``numpy``) and arrays of it. Run as a
script it fits the same data with numpy and with tensorc (lazy arrays: each iteration is one
planned program; on Ray after ``tc.init(...)``) and checks that the weights agree.
"""

from __future__ import annotations

import sys

import numpy as np


def fit(xp, X, y, iterations: int = 8, ridge: float = 1e-6):
    """Weights of the logistic model ``P(y=1) = sigmoid(X @ w)`` after ``iterations``
    Newton steps (a tiny ridge keeps the Hessian invertible)."""
    w = xp.zeros(X.shape[1], dtype=X.dtype)
    eye = xp.eye(X.shape[1], dtype=X.dtype)
    for _ in range(iterations):
        p = 1.0 / (1.0 + xp.exp(-(X @ w)))
        gradient = X.T @ (p - y) + ridge * w
        hessian = X.T @ (X * (p * (1.0 - p))[:, None]) + ridge * eye
        w = w - xp.linalg.solve(hessian, gradient)
        if hasattr(w, "compute"):
            w = w.compute()  # one program per iteration; the plans are reused
    return w


def make_data(n: int = 2000, d: int = 8, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    truth = rng.normal(size=d)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ truth))).astype(np.float64)
    return X, y


def main() -> int:
    import tensorc as tc

    X, y = make_data()
    expected = fit(np, X, y)
    got = fit(tc, tc.asarray(X), tc.asarray(y))
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-8, atol=1e-10)
    accuracy = float(tc.mean((tc.asarray(X) @ got > 0) == (tc.asarray(y) > 0.5)))
    print(f"logistic regression: n={X.shape[0]} d={X.shape[1]}, training accuracy "
          f"{accuracy:.3f}")
    print("all results match numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
