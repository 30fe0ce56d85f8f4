"""Differential tests of `jaxops.gather_nd` against OpenVINO's CPU plugin
(`opset8.gather_nd`), onnxruntime (`GatherND` with `batch_dims`) and the ONNX
package's own GatherND node cases.

Random cases are seeded (see `gather_support.random_gather_nd_case`: random
ranks, batch_dims, tuple lengths, negative indices, int32/int64 indices and
a dozen data dtypes); they run in chunks so that the per-item overhead stays
small, and a failure names the seed, shapes, dtypes and batch_dims.

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

import jaxops
from tests import gather_support as gs
from tests.conformance import oracles

ORACLE_DTYPES = (np.float32, np.float16, np.float64, np.int8, np.uint8,
                 np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
                 np.bool_)
NUM_CASES = 320
CHUNK = 40


@functools.cache
def _openvino_gather_nd(batch_dims):
  """One make_node per batch_dims, so the oracle's model cache can hit."""
  import openvino.opset8 as ov_opset8
  return functools.partial(ov_opset8.gather_nd, batch_dims=batch_dims)


def _cases(chunk):
  for seed in range(chunk * CHUNK, (chunk + 1) * CHUNK):
    yield gs.random_gather_nd_case(seed, dtypes=ORACLE_DTYPES)


@pytest.mark.parametrize("chunk", range(NUM_CASES // CHUNK),
                         ids=lambda c: f"seeds_{c * CHUNK}_{(c + 1) * CHUNK - 1}")
def test_random_cases_match_runtimes(chunk):
  compared = {"openvino_cpu": 0, "onnxruntime": 0}
  for case in _cases(chunk):
    out = np.asarray(jaxops.gather_nd(case.data, case.indices,
                                      case.batch_dims))
    expected_ort = oracles.onnxruntime(
        "GatherND", [case.data, case.indices.astype(np.int64)],
        {"batch_dims": case.batch_dims})
    gs.assert_same(out, expected_ort, "onnxruntime " + case.describe())
    compared["onnxruntime"] += 1
    if case.indices.shape[-1] > 0:
      expected_ov = oracles.openvino_cpu(
          _openvino_gather_nd(case.batch_dims), [case.data, case.indices])
      gs.assert_same(out, expected_ov, "openvino_cpu " + case.describe())
      compared["openvino_cpu"] += 1
  # Most cases reach both oracles (about 1 in 5 has an empty tuple).
  assert compared["onnxruntime"] == CHUNK
  assert compared["openvino_cpu"] >= CHUNK // 2, compared


NODE_CASES = oracles.onnx_node_cases("GatherND")


def test_node_cases_found():
  assert len(NODE_CASES) >= 3, [c[0] for c in NODE_CASES]


@pytest.mark.parametrize("case", NODE_CASES, ids=[c[0] for c in NODE_CASES])
def test_onnx_node_case(case):
  name, (data, indices), expected, attrs = case
  out = jaxops.gather_nd(data, indices, attrs.get("batch_dims", 0))
  gs.assert_same(out, expected, name)
