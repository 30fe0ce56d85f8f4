"""Differential tests of `jaxops.gather_elements` against OpenVINO's CPU
plugin (`opset6.gather_elements`), onnxruntime (`GatherElements` at opsets 11
and 13) and the ONNX package's own GatherElements node cases.

Random cases are seeded (see `gs.random_gather_elements_case`:
random rank, axis (negative half the time), negative indices, int32/int64
indices, a dozen data dtypes, and indices dims smaller than data's in non-axis
dims); they run in chunks (jaxops runs each chunk as one jitted program,
OpenVINO as one model), and a failure names the seed, shapes, dtypes and
axis.

Oracle caveats: onnxruntime accepts indices dims smaller than data's outside
the axis, OpenVINO demands equal dims, so cases with smaller indices dims go to
onnxruntime only. The CPU plugin computes int64 data as int32 and float64 as
float32; values stay small and exact in both.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

import jaxops
from tests.support import gather as gs
from tests.support import generators as gen
from tests.support import oracles
from tests.support.asserts import assert_same

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
pytestmark = pytest.mark.covering_modes

NUM_CASES = 320
CHUNK = 40


def _openvino_gather_elements(axis):
  import openvino.opset6 as ov_opset6

  return functools.partial(ov_opset6.gather_elements, axis=axis)


def _equal_non_axis_dims(case):
  a = case.axis % case.data.ndim
  return all(
    n_data == n_idx
    for d, (n_data, n_idx) in enumerate(
      zip(case.data.shape, case.indices.shape)
    )
    if d != a
  )


def _jaxops_outputs(cases):
  """jaxops on every case of a chunk, as one jitted program: one XLA compile
  per chunk instead of one per case (compiles dominate the test time)."""
  run_all = jax.jit(
    lambda arrays: [
      jaxops.gather_elements(data, indices, case.axis)
      for (data, indices), case in zip(arrays, cases)
    ]
  )
  return [
    np.asarray(out)
    for out in run_all([(case.data, case.indices) for case in cases])
  ]


@pytest.mark.exhaustive(default=8)
@pytest.mark.parametrize(
  "chunk",
  range(NUM_CASES // CHUNK),
  ids=lambda c: f"seeds_{c * CHUNK}_{(c + 1) * CHUNK - 1}",
)
@pytest.mark.covering_modes
def test_random_cases_match_runtimes(chunk):
  cases = [
    gs.random_gather_elements_case(seed, dtypes=gen.ORACLE_DTYPES)
    for seed in range(chunk * CHUNK, (chunk + 1) * CHUNK)
  ]
  outputs = _jaxops_outputs(cases)
  for case, out in zip(cases, outputs):
    opset = 11 if case.seed % 2 else 13
    expected = oracles.onnxruntime(
      "GatherElements",
      [case.data, case.indices],
      {"axis": case.axis},
      opset=opset,
    )
    assert_same(out, expected, f"onnxruntime opset {opset} " + case.describe())
  ov_cases = [j for j, case in enumerate(cases) if _equal_non_axis_dims(case)]
  assert len(ov_cases) >= CHUNK // 4, len(ov_cases)
  ov_outputs = oracles.openvino_cpu_many(
    [_openvino_gather_elements(cases[j].axis) for j in ov_cases],
    [(cases[j].data, cases[j].indices) for j in ov_cases],
  )
  for j, expected in zip(ov_cases, ov_outputs):
    assert_same(outputs[j], expected, "openvino_cpu " + cases[j].describe())


NODE_CASES = oracles.onnx_node_cases("GatherElements")


def test_node_cases_found():
  assert len(NODE_CASES) >= 3, [c[0] for c in NODE_CASES]


@pytest.mark.parametrize("case", NODE_CASES, ids=[c[0] for c in NODE_CASES])
def test_onnx_node_case(case):
  name, (data, indices), expected, attrs = case
  out = jaxops.gather_elements(data, indices, attrs.get("axis", 0))
  assert_same(out, expected, name)
