"""The suite's own design: what `conftest.py` selects is the same everywhere.

pytest-xdist requires every worker to collect the same tests in the same
order, and the covering designs (`covering_modes`, `scatter_orders`) drop
rows by a hash of the case. That hash must not see anything that differs
between processes -- Python's string hashing is salted per process, and a
parameter's str may hold an object's address (CI once failed with "Different
tests were collected between gw0 and gw1" for that reason).
"""

import os
import subprocess
import sys

import pytest

from tests.support import processes

# A file whose parameters are objects (functions, cases), not strings.
FILES = ("tests/test_transforms.py",)


def _collected(hash_seed: str) -> list[str]:
  result = subprocess.run(
    [
      sys.executable,
      "-m",
      "pytest",
      "--collect-only",
      "-q",
      "-p",
      "no:cacheprovider",
      *FILES,
    ],
    cwd=processes.REPO_ROOT,
    env=processes.subprocess_env(PYTHONHASHSEED=hash_seed),
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 0, result.stdout + result.stderr
  return [line for line in result.stdout.splitlines() if "::" in line]


# The default run is this check too (xdist compares its workers'
# collections); this one makes it independent of chance.
@pytest.mark.exhaustive
@pytest.mark.jax_modes(None)
def test_covering_designs_collect_the_same_tests_in_every_process():
  first, second = _collected("1"), _collected("2")
  assert first, "collected nothing"
  assert first == second, (
    "the covering design differs between two processes: "
    f"{sorted(set(first) ^ set(second))[:10]}"
  )


# Where pytest-benchmark before 5.2 is installed (as on a GPU machine's
# image), it warns while pytest configures that xdist disables it; this
# suite's `filterwarnings = error` turned that into an INTERNALERROR before
# any test ran. The same warning, from a stand-in plugin:
_BENCHMARK_LIKE_PLUGIN = """
import warnings
import pytest

def pytest_configure(config):
  warnings.warn(pytest.PytestWarning(
    "Benchmarks are automatically disabled because xdist plugin is "
    "active.Benchmarks cannot be performed reliably in a parallelized "
    "environment."
  ))
"""


@pytest.mark.exhaustive
@pytest.mark.jax_modes(None)
def test_suite_runs_beside_a_plugin_that_warns_at_configure(tmp_path):
  (tmp_path / "benchmark_like.py").write_text(_BENCHMARK_LIKE_PLUGIN)
  env = processes.subprocess_env()
  env["PYTHONPATH"] += os.pathsep + str(tmp_path)
  result = subprocess.run(
    [
      sys.executable,
      "-m",
      "pytest",
      "-q",
      "-n",
      "2",
      "-p",
      "benchmark_like",
      "-p",
      "no:cacheprovider",
      "tests/test_layout.py::test_every_operator_has_its_lowering",
    ],
    cwd=processes.REPO_ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 0, result.stdout + result.stderr
  assert "1 passed" in result.stdout, result.stdout
