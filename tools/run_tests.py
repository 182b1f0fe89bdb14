"""Run the test suite as two pytest processes side by side: the tests on Ray in one, every
other test in the other (``--ray=only`` / ``--ray=skip``, ``tests/conftest.py``).

The Ray half mostly waits on Ray's processes while the other half computes, so on a
two-core machine the two together take about as long as the longer one. The half without
Ray prints as it runs; the Ray half's output is kept and printed after it. The exit status
is the first failing half's (0 when both pass). Extra arguments go to both halves.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time


def main(arguments: list[str]) -> int:
    command = [sys.executable, "-m", "pytest", *arguments]
    started = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as ray_output:
        on_ray = subprocess.Popen([*command, "--ray=only"], stdout=ray_output,
                                  stderr=subprocess.STDOUT, text=True)
        try:
            without_ray = subprocess.call([*command, "--ray=skip"])
        finally:
            on_ray_code = on_ray.wait()
        ray_output.seek(0)
        print("\n== the tests on Ray", flush=True)
        sys.stdout.write(ray_output.read())
    print(f"\n== both halves in {time.perf_counter() - started:.0f} s: without Ray exit "
          f"{without_ray}, on Ray exit {on_ray_code}", flush=True)
    return without_ray or on_ray_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
