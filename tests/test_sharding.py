"""The operators on 8 devices: one pytest item per check of sharding_checks.py.

The checks need 8 XLA devices, which the CPU client only creates if
`XLA_FLAGS=--xla_force_host_platform_device_count=8` is set before JAX is
imported -- too late in this process (conftest.py imported JAX). So the whole
check script runs once in a subprocess (on CPU devices, even on a GPU host)
and writes a JSON report; each test below asserts one entry of it. Under
pytest-xdist the first worker to get here runs the script and the others read
its report, so the script runs once per session.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

# Each check runs in a subprocess with its own JAX configuration: run once.
pytestmark = pytest.mark.jax_modes(None)

import sharding_checks
from tests.support import processes

SCRIPT = pathlib.Path(sharding_checks.__file__)
TIMEOUT_S = 300
ERROR = "error"   # report key of a script that did not finish


def _run_checks(report_path: pathlib.Path) -> None:
  """Runs the script; writes its report, or an `error` entry, to report_path."""
  env = processes.subprocess_env(JAX_PLATFORMS="cpu")
  try:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", str(report_path)], env=env,
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    if not report_path.exists():
      report_path.write_text(json.dumps({ERROR: (
          f"{SCRIPT.name} wrote no report (exit {proc.returncode})\n"
          f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}")}))
  except subprocess.TimeoutExpired:
    report_path.write_text(
        json.dumps({ERROR: f"{SCRIPT.name} ran > {TIMEOUT_S} s"}))


def _load(report_path: pathlib.Path) -> dict[str, dict[str, object]]:
  report = json.loads(report_path.read_text())
  if ERROR in report:
    raise RuntimeError(report[ERROR])
  return report


@pytest.fixture(scope="session")
def report(tmp_path_factory, worker_id):
  shared = processes.shared_dir(tmp_path_factory, worker_id,
                                         "sharding")
  return _load(processes.produce_once(
      shared, "sharding_report.json", _run_checks, TIMEOUT_S))


def test_report_has_exactly_the_declared_checks(report):
  assert sorted(report) == sorted(sharding_checks.all_check_names())


@pytest.mark.parametrize("name", sharding_checks.all_check_names())
def test_check(report, name):
  assert name in report, f"{name} missing from the report"
  assert report[name]["ok"], f"{name}: {report[name]['detail']}"
