"""Differential tests of `jaxops.gather_nd` against OpenVINO's CPU plugin
(`opset8.gather_nd`), onnxruntime (`GatherND` with `batch_dims`) and the ONNX
package's own GatherND node cases.

Random cases are seeded (see `gs.random_gather_nd_case`: random
ranks, batch_dims, tuple lengths, negative indices, int32/int64 indices and
a dozen data dtypes); they run in chunks so that the per-item overhead stays
small (jaxops runs each chunk as one jitted program, OpenVINO as one model),
and a failure names the seed, shapes, dtypes and batch_dims.

Oracle caveats: the CPU plugin computes int64 data as int32 and float64 as
float32, so values stay small and exact in both; it returns uninitialized
memory for an empty index tuple (indices.shape[-1] == 0), so those cases are
compared with onnxruntime only. onnxruntime's GatherND takes int64 indices
only.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.support import gather as gs
from tests.support import gather_checks as checks
from tests.support import generators as gen
from tests.support import oracles
from tests.support.asserts import assert_same
from tests.support.gather_checks import GATHER_ND

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
pytestmark = pytest.mark.covering_modes


def _openvino_gather_nd(case):
  import openvino.opset8 as ov_opset8

  return functools.partial(ov_opset8.gather_nd, batch_dims=case.batch_dims)


@pytest.mark.exhaustive(default=8)
@pytest.mark.parametrize("name", checks.SEED_CHUNKS)
def test_random_cases_match_runtimes(name):
  # Empty tuples (k == 0) are allowed in one seed in 8 only: OpenVINO cannot
  # check them, and uniform k would make them a third of all cases.
  cases = [
    gs.random_gather_nd_case(
      seed, dtypes=gen.ORACLE_DTYPES, min_k=0 if seed % 8 == 0 else 1
    )
    for seed in checks.SEED_CHUNKS[name]
  ]
  outputs = checks.jaxops_outputs(GATHER_ND, cases)
  for case, out in zip(cases, outputs):
    expected = oracles.onnxruntime(
      "GatherND",
      [case.data, case.indices.astype(np.int64)],
      {"batch_dims": case.batch_dims},
    )
    assert_same(out, expected, "onnxruntime " + case.describe())
  # The CPU plugin returns garbage for empty index tuples (k == 0).
  kept = [j for j, case in enumerate(cases) if case.indices.shape[-1] > 0]
  assert len(kept) >= len(cases) * 3 // 4, len(kept)
  from_openvino = checks.openvino_outputs(_openvino_gather_nd, cases, kept)
  for j, expected in from_openvino.items():
    assert_same(outputs[j], expected, "openvino_cpu " + cases[j].describe())


NODE_CASES = checks.node_cases("GatherND")


def test_node_cases_found():
  assert len(NODE_CASES) >= 3, list(NODE_CASES)


@pytest.mark.parametrize("name", NODE_CASES)
def test_onnx_node_case(name):
  checks.assert_node_case(GATHER_ND, NODE_CASES[name], name)
