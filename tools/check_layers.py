"""Check the declared layer order (pyproject's ``[tool.importlinter]``) with import-linter.

import-linter reads a package from one directory tree, but tensorc installs ``passes/``,
``runtime/`` and ``grammar/`` as ``tensorc.passes``, ``tensorc.runtime`` and
``tensorc.grammar`` (setuptools ``package-dir``). This script lays the sources out as they
are installed, in a temporary directory, and runs ``lint-imports`` on that tree with this
project's configuration. Exit status: import-linter's (0 when every contract holds).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAPPED = {"passes": "passes", "runtime": "runtime", "grammar": "grammar"}


def main() -> int:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    with tempfile.TemporaryDirectory(prefix="tensorc-layers-") as staging:
        package = Path(staging) / "tensorc"
        shutil.copytree(ROOT / "tensorc", package, ignore=ignore)
        for name, source in MAPPED.items():
            shutil.copytree(ROOT / source, package / name, ignore=ignore)
        env = {**os.environ, "PYTHONPATH": staging}
        command = [str(Path(sys.executable).parent / "lint-imports"),
                   "--config", str(ROOT / "pyproject.toml"), "--no-cache"]
        return subprocess.call(command, cwd=staging, env=env)


if __name__ == "__main__":
    sys.exit(main())
