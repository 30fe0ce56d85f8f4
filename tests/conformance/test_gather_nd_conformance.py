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


def _openvino_gather_nd(batch_dims):
  import openvino.opset8 as ov_opset8

  return functools.partial(ov_opset8.gather_nd, batch_dims=batch_dims)


def _jaxops_outputs(cases):
  """jaxops on every case of a chunk, as one jitted program: one XLA compile
  per chunk instead of one per case (compiles dominate the test time)."""
  run_all = jax.jit(
    lambda arrays: [
      jaxops.gather_nd(data, indices, case.batch_dims)
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
  # Empty tuples (k == 0) are allowed in one seed in 8 only: OpenVINO cannot
  # check them, and uniform k would make them a third of all cases.
  cases = [
    gs.random_gather_nd_case(
      seed, dtypes=gen.ORACLE_DTYPES, min_k=0 if seed % 8 == 0 else 1
    )
    for seed in range(chunk * CHUNK, (chunk + 1) * CHUNK)
  ]
  outputs = _jaxops_outputs(cases)
  for case, out in zip(cases, outputs):
    expected = oracles.onnxruntime(
      "GatherND",
      [case.data, case.indices.astype(np.int64)],
      {"batch_dims": case.batch_dims},
    )
    assert_same(out, expected, "onnxruntime " + case.describe())
  # The CPU plugin returns garbage for empty index tuples (k == 0).
  ov_cases = [j for j, case in enumerate(cases) if case.indices.shape[-1] > 0]
  assert len(ov_cases) >= CHUNK * 3 // 4, len(ov_cases)
  ov_outputs = oracles.openvino_cpu_many(
    [_openvino_gather_nd(cases[j].batch_dims) for j in ov_cases],
    [(cases[j].data, cases[j].indices) for j in ov_cases],
  )
  for j, expected in zip(ov_cases, ov_outputs):
    assert_same(outputs[j], expected, "openvino_cpu " + cases[j].describe())


NODE_CASES = oracles.onnx_node_cases("GatherND")


def test_node_cases_found():
  assert len(NODE_CASES) >= 3, [c[0] for c in NODE_CASES]


@pytest.mark.parametrize("case", NODE_CASES, ids=[c[0] for c in NODE_CASES])
def test_onnx_node_case(case):
  name, (data, indices), expected, attrs = case
  out = jaxops.gather_nd(data, indices, attrs.get("batch_dims", 0))
  assert_same(out, expected, name)
