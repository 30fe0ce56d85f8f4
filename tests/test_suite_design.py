"""The suite's own design: what `conftest.py` selects is the same everywhere.

pytest-xdist requires every worker to collect the same tests in the same
order, and the covering designs (`covering_modes`, `scatter_orders`) drop
rows by a hash of the case. That hash must not see anything that differs
between processes -- Python's string hashing is salted per process, and a
parameter's str may hold an object's address (CI once failed with "Different
tests were collected between gw0 and gw1" for that reason).
"""

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
