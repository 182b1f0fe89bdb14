"""scikit-learn's own array API estimator check, run on one namespace; prints JSON.

Usage: python sklearn_array_api.py NAMESPACE [RAY_NODES]. Run in a fresh process:
``SCIPY_ARRAY_API=1`` must be set before scipy is first imported. Prints
``{"passed": [...], "failed": {name: error}}`` for every estimator whose tags declare array
API support (scikit-learn's ``check_array_api_input``, float64, values checked).
"""

from __future__ import annotations

import json
import os
import sys
import warnings

os.environ["SCIPY_ARRAY_API"] = "1"

from sklearn.utils._test_common.instance_generator import _tested_estimators  # noqa: E402
from sklearn.utils.estimator_checks import check_array_api_input  # noqa: E402


def main() -> None:
    namespace = sys.argv[1]
    if len(sys.argv) > 2:
        import tensorc as tc

        tc.init(num_nodes=int(sys.argv[2]))
    warnings.filterwarnings("ignore")
    passed, failed = [], {}
    for estimator in _tested_estimators():
        if not getattr(estimator.__sklearn_tags__(), "array_api_support", False):
            continue
        name = type(estimator).__name__
        label = f"{name}({estimator.get_params(deep=False)})"
        try:
            check_array_api_input(name, estimator, array_namespace=namespace,
                                  dtype_name="float64", check_values=True)
        except Exception as err:  # noqa: BLE001 - reported by name
            failed[label] = f"{type(err).__name__}: {err}"[:300]
        else:
            passed.append(label)
    print(json.dumps({"passed": passed, "failed": failed}))


if __name__ == "__main__":
    main()
