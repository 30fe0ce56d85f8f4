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

import pytest

from tests.support import gather as gs
from tests.support import gather_checks as checks
from tests.support import generators as gen
from tests.support import oracles
from tests.support.asserts import assert_same
from tests.support.gather_checks import GATHER_ELEMENTS

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
pytestmark = pytest.mark.covering_modes


def _openvino_gather_elements(case):
  import openvino.opset6 as ov_opset6

  return functools.partial(ov_opset6.gather_elements, axis=case.axis)


def _equal_non_axis_dims(case):
  a = case.axis % case.data.ndim
  return all(
    n_data == n_idx
    for d, (n_data, n_idx) in enumerate(
      zip(case.data.shape, case.indices.shape)
    )
    if d != a
  )


@pytest.mark.exhaustive(default=8)
@pytest.mark.parametrize("name", checks.SEED_CHUNKS)
def test_random_cases_match_runtimes(name):
  cases = [
    gs.random_gather_elements_case(seed, dtypes=gen.ORACLE_DTYPES)
    for seed in checks.SEED_CHUNKS[name]
  ]
  outputs = checks.jaxops_outputs(GATHER_ELEMENTS, cases)
  for case, out in zip(cases, outputs):
    opset = 11 if case.seed % 2 else 13
    expected = oracles.onnxruntime(
      "GatherElements",
      [case.data, case.indices],
      {"axis": case.axis},
      opset=opset,
    )
    assert_same(out, expected, f"onnxruntime opset {opset} " + case.describe())
  # OpenVINO demands indices dims equal to data's outside the axis.
  kept = [j for j, case in enumerate(cases) if _equal_non_axis_dims(case)]
  assert len(kept) >= len(cases) // 4, len(kept)
  from_openvino = checks.openvino_outputs(
    _openvino_gather_elements, cases, kept
  )
  for j, expected in from_openvino.items():
    assert_same(outputs[j], expected, "openvino_cpu " + cases[j].describe())


NODE_CASES = checks.node_cases("GatherElements")


def test_node_cases_found():
  assert len(NODE_CASES) >= 3, list(NODE_CASES)


@pytest.mark.parametrize("name", NODE_CASES)
def test_onnx_node_case(name):
  checks.assert_node_case(GATHER_ELEMENTS, NODE_CASES[name], name)
