"""The benchmark runs end to end at tiny sizes and writes what it promises.

Runs `python -m bench --smoke` in a subprocess (the bench runs with JAX's
default 32-bit mode, unlike this suite's x64) on one IR or large case
per operator plus one sweep (to stay well under 30 s on 2 loaded cores), then checks the table, the JSON (with the
bit-exactness comparisons it ran) and the plots.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
  out = tmp_path_factory.mktemp("bench")
  env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_ENABLE_X64="0")
  proc = subprocess.run(
      [sys.executable, "-m", "bench", "--smoke", "--out", str(out),
       "--cases", "gather_nd/ir_b2,gather_elements/axis0,"
       "scatter_nd_update/large,strided_slice/ir_shrink,gather_nd/sweep*"],
      cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr[-3000:]
  with open(out / "results.json") as f:
    return out, proc.stdout, json.load(f)


def test_outputs_exist(smoke_run):
  out, stdout, _ = smoke_run
  names = set(os.listdir(out))
  assert {"results.json", "results.md"} <= names
  ops = ("gather_nd", "gather_elements", "scatter_nd_update", "strided_slice")
  for op in ops:
    assert f"{op}_bars.png" in names
    assert os.path.getsize(out / f"{op}_bars.png") > 1000
  assert "gather_nd_sweep.png" in names
  assert "## Forward" in stdout and "## Sweep gather_nd" in stdout


def test_environment_recorded(smoke_run):
  env = smoke_run[2]["env"]
  for key in ("jax", "jaxlib", "backend", "device_kind", "cpu_count",
              "thread_env", "peers", "loadavg_start"):
    assert key in env, key
  assert env["backend"] == "cpu"
  assert smoke_run[2]["bandwidth"]["host_copyto_Bps"] > 0


def test_every_case_checked_and_timed(smoke_run):
  results = smoke_run[2]
  assert results["bit_exact_failure"] is None
  cases = results["cases"]
  assert {c["op"] for c in cases} == {
      "gather_nd", "gather_elements", "scatter_nd_update", "strided_slice"}
  for case in cases:
    variants = case["variants"]
    assert variants, case["key"]
    for entry in variants.values():
      assert entry["median_s"] > 0 and entry["reps"] >= 1
    # Every variant but the first of each group was compared bit for bit.
    groups = {e["group"] for e in variants.values()}
    checked = {c["variant"] for c in case["checks"]}
    assert len(checked) == len(variants) - len(groups), case["key"]
    if case["tier"] != "sweep":
      assert {"jaxops", "plain", "openvino", "onnxruntime", "jaxops.grad",
              "plain.grad"} <= set(variants), case["key"]
  scatter = [c for c in cases if c["op"] == "scatter_nd_update"]
  for case in scatter:
    assert case["variants"]["jaxops_unique.donated"]["donation_used"]


def test_bit_exact_gate_fails_loudly():
  """A formulation that disagrees stops the bench before timing."""
  import numpy as np

  from bench import harness
  case = harness.Case(
      op="toy", name="mismatch", tier="ir", shapes="", make_inputs=None,
      forms={}, diff_argnums=(), traffic=harness.Traffic(0))
  outputs = {"jaxops": ("fwd", [np.array([1.0, 2.0], np.float32)]),
             "plain": ("fwd", [np.array([1.0, 3.0], np.float32)])}
  with pytest.raises(harness.BitExactError, match="1 of 2 elements differ"):
    harness.check_bit_exact(case, outputs)
  outputs["plain"] = ("fwd", [np.array([1.0, 2.0], np.float32)])
  assert harness.check_bit_exact(case, outputs)[0]["result"] == "bit-exact"
