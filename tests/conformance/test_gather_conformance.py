"""Differential tests of `jaxops.gather` (Gather-8) against OpenVINO's CPU
plugin (`opset8.gather`), onnxruntime (Gather-13) and the ONNX package's own
Gather node cases.

Random cases are seeded (`gs.random_gather_case`: data ranks 1-5,
batch_dims 0-3, axis and batch_dims written negative half the time, negative
indices, int32/int64 indices, every dtype both runtimes take), half of them
with out-of-range indices (Gather-8 reads zeros there); they run in chunks,
one jitted jaxops program and one OpenVINO model per chunk. Every case is
also checked against the NumPy reference `gs.np_gather`.

Oracles, per case (docs/semantics.md#gather, #rt-8, #rt-9, #rt-11):

* OpenVINO's CPU plugin by default, out-of-range indices included;
* not the plugin, only the NumPy reference, where the plugin is known wrong
  (each asserted as such below):
  - "short vector": data of an integer dtype the plugin computes as int32
    (int16, uint16, int32, uint32, int64, uint64) with rank <= 1 and at most
    64 elements, indices of rank <= 1 and at most 64 elements, and an
    out-of-range index: the plugin's 1-D fast path reads outside data
    (`test_openvino_short_integer_vectors_read_outside_data`);
  - "unit batch": batch_dims >= 1 and every data dim before axis of size
    1: the plugin dies of SIGSEGV (`test_openvino_crashes_on_unit_batch`);
* onnxruntime where Gather-13 has the case: batch_dims 0 and every index in
  range (it has no batch dims and rejects out-of-range indices,
  `test_onnxruntime_rejects_out_of_range_indices`).

Index values stay inside int32: the plugin truncates indices to int32
(`test_openvino_truncates_int64_indices`), and computes int64 data as int32
and float64 as float32, so data values stay small and exact in both.
"""

from __future__ import annotations

import collections
import functools
import math
import signal
import subprocess
import sys

import jax
import numpy as np
import pytest

import jaxops
from tests.support import gather as gs
from tests.support import gather_checks as checks
from tests.support import generators as gen
from tests.support import oracles, processes
from tests.support.asserts import assert_same
from tests.support.gather_checks import GATHER

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
pytestmark = pytest.mark.covering_modes

# The integer dtypes OpenVINO's CPU plugin computes as int32.
_INT32_COMPUTED = tuple(
  np.dtype(t)
  for t in (np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64)
)


def _openvino_gather(axis, batch_dims, data, indices):
  import openvino.opset8 as ov_opset8

  return ov_opset8.gather(
    data, indices, ov_opset8.constant(np.int64(axis)), batch_dims
  )


def _make_node(case: gs.GatherCase):
  return functools.partial(_openvino_gather, case.axis, case.batch_dims)


def out_of_range(case: gs.GatherCase) -> bool:
  axis = case.axis % case.data.ndim
  size = case.data.shape[axis]
  indices = case.indices.astype(np.int64)
  return bool(np.any((indices < -size) | (indices >= size)))


def _batch_dims(case: gs.GatherCase) -> int:
  b = case.batch_dims
  return b + case.indices.ndim if b < 0 else b


def route(case: gs.GatherCase) -> str:
  """Which oracles a case goes to (see the module docstring)."""
  axis = case.axis % case.data.ndim
  if _batch_dims(case) > 0 and math.prod(case.data.shape[:axis]) == 1:
    return "unit_batch"
  if (
    out_of_range(case)
    and case.data.dtype in _INT32_COMPUTED
    and case.data.ndim <= 1
    and case.data.size <= 64
    and case.indices.ndim <= 1
    and case.indices.size <= 64
  ):
    return "short_vector"
  return "openvino"


def onnxruntime_takes(case: gs.GatherCase) -> bool:
  return _batch_dims(case) == 0 and not out_of_range(case)


def _cases(name: str) -> list[gs.GatherCase]:
  return [
    gs.random_gather_case(
      seed, dtypes=gen.ORACLE_DTYPES, out_of_range=seed % 2 == 1
    )
    for seed in checks.SEED_CHUNKS[name]
  ]


@functools.cache
def _openvino_outputs(name: str) -> dict[int, np.ndarray]:
  """The plugin's outputs for the chunk's "openvino" cases, by position;
  shared by the x32 and x64 runs."""
  cases = _cases(name)
  kept = [j for j, case in enumerate(cases) if route(case) == "openvino"]
  return checks.openvino_outputs(_make_node, cases, kept)


@pytest.mark.exhaustive(default=8)
@pytest.mark.parametrize("name", checks.SEED_CHUNKS)
def test_random_cases_match_runtimes(name):
  cases = _cases(name)
  outputs = checks.jaxops_outputs(GATHER, cases)
  from_openvino = _openvino_outputs(name)
  for j, (case, out) in enumerate(zip(cases, outputs)):
    context = case.describe()
    assert_same(
      out,
      gs.np_gather(case.data, case.indices, case.axis, case.batch_dims),
      "numpy " + context,
    )
    if j in from_openvino:
      assert_same(out, from_openvino[j], "openvino_cpu " + context)
    if onnxruntime_takes(case):
      expected = oracles.onnxruntime(
        "Gather", [case.data, case.indices], {"axis": case.axis}, opset=13
      )
      assert_same(out, expected, "onnxruntime " + context)


def test_random_cases_cover_every_route():
  """The random cases are not all easy ones."""
  counts = collections.Counter()
  for name in checks.SEED_CHUNKS:
    for case in _cases(name):
      counts[route(case)] += 1
      counts["onnxruntime"] += onnxruntime_takes(case)
      counts["out_of_range"] += out_of_range(case)
      counts[f"batch_dims_{_batch_dims(case)}"] += 1
      counts["negative_axis"] += case.axis < 0
      counts["negative_batch_dims"] += case.batch_dims < 0
      counts["scalar_indices"] += case.indices.ndim == 0
      counts[f"rank_{case.data.ndim}"] += 1
  least = {
    "openvino": 230,
    "unit_batch": 10,
    "short_vector": 2,
    "onnxruntime": 70,
    "out_of_range": 120,
    **{f"batch_dims_{b}": 10 for b in range(4)},
    **{f"rank_{r}": 10 for r in range(1, 6)},
    "negative_axis": 100,
    "negative_batch_dims": 20,
    "scalar_indices": 5,
  }
  for key, n in least.items():
    assert counts[key] >= n, (key, counts)


# The spec's examples: (batch_dims, axis, indices, data, output).
SPEC_EXAMPLES = {
  "example_1": (0, 0, [0, 0, 4], [1, 2, 3, 4, 5], [1, 1, 5]),
  "example_2_batch_dims_1": (
    1,
    1,
    [[0, 0, 4], [4, 0, 0]],
    [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]],
    [[1, 1, 5], [10, 6, 6]],
  ),
  "example_3_batch_dims_2": (
    2,
    2,
    [[[0, 0, 4], [4, 0, 0]], [[1, 2, 4], [4, 3, 2]]],
    np.arange(1, 21).reshape(2, 2, 5),
    [[[1, 1, 5], [10, 6, 6]], [[12, 13, 15], [20, 19, 18]]],
  ),
  "example_4_axis_after_batch_dims": (
    1,
    2,
    [[1, 2, 4], [4, 3, 2]],
    np.arange(1, 41).reshape(2, 1, 5, 4),
    [
      [[[5, 6, 7, 8], [9, 10, 11, 12], [17, 18, 19, 20]]],
      [[[37, 38, 39, 40], [33, 34, 35, 36], [29, 30, 31, 32]]],
    ],
  ),
  "example_5_negative_batch_dims": (
    -1,
    1,
    [[0, 0, 4], [4, 0, 0]],
    [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]],
    [[1, 1, 5], [10, 6, 6]],
  ),
  "example_6_negative_indices": (0, 0, [0, -2, -1], [1, 2, 3, 4, 5], [1, 4, 5]),
  "example_7_out_of_range": (0, 0, [3, 10, -20], [1, 2, 3, 4, 5], [4, 0, 0]),
}


@pytest.mark.parametrize("name", SPEC_EXAMPLES)
@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_spec_example(name, dtype):
  b, axis, indices, data, expected = SPEC_EXAMPLES[name]
  data = np.asarray(data).astype(dtype)
  indices = np.asarray(indices, np.int32)
  expected = np.asarray(expected).astype(dtype)
  assert_same(jaxops.gather(data, indices, axis, b), expected, name)
  assert_same(
    jax.jit(jaxops.gather, static_argnums=(2, 3))(data, indices, axis, b),
    expected,
    name,
  )
  # float32 and int8 data do not take the plugin's short-vector path.
  node = functools.partial(_openvino_gather, axis, b)
  assert_same(oracles.openvino_cpu(node, [data, indices]), expected, name)


def test_spec_ir_example_shape():
  """The spec's IR example: [2, 64, 128] data, [2, 32, 21] indices,
  batch_dims 1, axis 1 -> [2, 32, 21, 128]."""
  assert jaxops.shapes.gather((2, 64, 128), (2, 32, 21), 1, 1) == (
    2,
    32,
    21,
    128,
  )
  rng = np.random.default_rng(0)
  data = gen.random_values(rng, (2, 64, 128), np.float32)
  indices = gen.random_indices(rng, 64, (2, 32, 21), np.int32)
  node = functools.partial(_openvino_gather, 1, 1)
  assert_same(
    jaxops.gather(data, indices, 1, 1),
    oracles.openvino_cpu(node, [data, indices]),
  )


@pytest.mark.parametrize("dtype", gen.DATA_DTYPES, ids=gen.dtype_id)
def test_every_data_dtype(dtype):
  """Every dtype JAX has, against the reference; against the plugin and
  onnxruntime where they take it (not bfloat16 nor complex)."""
  rng = np.random.default_rng(1)
  data = gen.random_values(rng, (3, 5, 2), dtype)
  indices = np.array([[4, -1, 7], [-6, 0, 2]], np.int32)
  out = jaxops.gather(data, indices, axis=1)
  assert_same(out, gs.np_gather(data, indices, 1), gen.dtype_id(dtype))
  if np.dtype(dtype) in map(np.dtype, gen.ORACLE_DTYPES):
    node = functools.partial(_openvino_gather, 1, 0)
    assert_same(out, oracles.openvino_cpu(node, [data, indices]))
    in_range = np.array([[4, -1, 3], [-5, 0, 2]], np.int32)
    assert_same(
      jaxops.gather(data, in_range, axis=1),
      oracles.onnxruntime("Gather", [data, in_range], {"axis": 1}, opset=13),
    )


@pytest.mark.parametrize("index_dtype", gen.INDEX_DTYPES, ids=gen.dtype_id)
def test_every_index_dtype(index_dtype):
  """Every integer index dtype against the plugin, out-of-range indices
  included (unsigned ones wrap to large, out-of-range values)."""
  data = np.arange(1, 25, dtype=np.float32).reshape(2, 6, 2)
  indices = np.array([[0, 5, 6, 200], [3, 1, 2, 9]]).astype(index_dtype)
  if np.issubdtype(index_dtype, np.signedinteger):
    indices[0, 0], indices[1, 1] = -1, -7
  out = jaxops.gather(data, indices, axis=1, batch_dims=1)
  node = functools.partial(_openvino_gather, 1, 1)
  assert_same(out, oracles.openvino_cpu(node, [data, indices]))
  assert_same(out, gs.np_gather(data, indices, 1, 1))


NODE_CASES = checks.node_cases("Gather")


def test_node_cases_found():
  # gather_0, gather_1, gather_2d_indices, gather_negative_indices
  assert len(NODE_CASES) >= 4, list(NODE_CASES)


@pytest.mark.parametrize("name", NODE_CASES)
def test_onnx_node_case(name):
  checks.assert_node_case(GATHER, NODE_CASES[name], name)


# Documented runtime bugs: each asserted as the difference it is. ------------


@pytest.mark.jax_modes("x64")  # int64 indices beyond int32 need x64
def test_openvino_truncates_int64_indices():
  """RT-8: the plugin converts indices to int32, so 2**33 + 1 reads element 1
  and 2**32 element 0; Gather-8 (and jaxops) read zeros there."""
  data = np.arange(1, 6, dtype=np.float32)
  indices = np.array([2**33 + 1, 2**32, -(2**32) + 2, 3], np.int64)
  node = functools.partial(_openvino_gather, 0, 0)
  assert_same(
    oracles.openvino_cpu(node, [data, indices]),
    np.array([2, 1, 3, 4], np.float32),
  )
  assert_same(jaxops.gather(data, indices), np.array([0, 0, 0, 4], np.float32))


@pytest.mark.parametrize(
  "dtype", [np.int32, np.int16, np.int64, np.uint32], ids=gen.dtype_id
)
def test_openvino_short_integer_vectors_read_outside_data(dtype):
  """RT-9: integer data the plugin computes as int32, of at most 64 elements
  and rank <= 1, with at most 64 indices: its 1-D fast path has no bound
  check and returns what lies past data (not reproducible values, so the
  check is that they are not the spec's zeros). With 65 elements, or float
  data, the plugin reads zeros as the spec says, and jaxops always does."""
  data = np.arange(1, 6).astype(dtype)
  indices = np.arange(5, 21, dtype=np.int32)
  node = functools.partial(_openvino_gather, 0, 0)
  garbage = oracles.openvino_cpu(node, [data, indices])
  assert np.any(garbage != 0), garbage
  assert_same(jaxops.gather(data, indices), np.zeros(16, dtype))
  longer = np.arange(1, 66).astype(dtype)
  # (NumPy comparisons: the plugin's dtype is not JAX's in x32.)
  np.testing.assert_array_equal(
    oracles.openvino_cpu(node, [longer, indices + 60]), np.zeros(16, dtype)
  )
  as_float = data.astype(np.float32)
  np.testing.assert_array_equal(
    oracles.openvino_cpu(node, [as_float, indices]), np.zeros(16, np.float32)
  )


_UNIT_BATCH_SCRIPT = """
import numpy as np, openvino as ov, openvino.opset8 as o8
data = o8.parameter([1, 4], np.float32)
indices = o8.parameter([1], np.int32)
node = o8.gather(data, indices, o8.constant(np.int64(1)), 1)
compiled = ov.Core().compile_model(ov.Model([node], [data, indices]), "CPU")
x = np.arange(4, dtype=np.float32).reshape(1, 4)
print(float(compiled([x, np.array([2], np.int32)])[0][0]))
"""


@pytest.mark.jax_modes(None)
def test_openvino_crashes_on_unit_batch():
  """RT-11: batch_dims >= 1 where every data dim before axis has size 1 (here
  data [1, 4], indices [1], axis 1, batch_dims 1) reads out of bounds in the
  plugin: its process dies with SIGSEGV, or (seen in one CI run of a fresh
  clone) the call returns another element; run in a subprocess. Either way
  not data[0, 2], which jaxops gives; the test fails the day OpenVINO does."""
  result = subprocess.run(
    [sys.executable, "-c", _UNIT_BATCH_SCRIPT],
    capture_output=True,
    env=processes.subprocess_env(),
    timeout=120,
  )
  if result.returncode != -signal.SIGSEGV:
    assert result.returncode == 0, result
    assert float(result.stdout) != 2.0, (
      "RT-11 is fixed: update docs/semantics.md"
    )
  data = np.arange(4, dtype=np.float32).reshape(1, 4)
  assert_same(
    jaxops.gather(data, np.array([2], np.int32), 1, 1),
    np.array([2], np.float32),
  )


def test_onnxruntime_rejects_out_of_range_indices():
  """onnxruntime follows ONNX Gather ("it is an error"): it raises where
  Gather-8 reads zeros."""
  data = np.arange(1, 6, dtype=np.float32)
  indices = np.array([3, 10, -20], np.int64)
  with pytest.raises(Exception, match="out of data bounds"):
    oracles.onnxruntime("Gather", [data, indices], {"axis": 0}, opset=13)
  assert_same(jaxops.gather(data, indices), np.array([4, 0, 0], np.float32))
