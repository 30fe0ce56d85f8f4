"""Differential tests: `jaxops.scatter_nd_update` vs real runtimes.

* OpenVINO CPU plugin (`openvino.opset4.scatter_nd_update`), seeded random
  cases with unique indices (the spec leaves duplicates undefined) and k >= 1
  (the plugin gets k == 0 wrong, see `test_openvino_cpu_k0_erratum`).
* onnxruntime `ScatterND` (reduction "none", int64 indices as ONNX requires),
  seeded random cases with unique indices, k == 0 included.
* OpenVINO's reference evaluator for the forms the plugin and onnxruntime
  reject or get wrong (k == 0, one-element updates for a 0-d expectation).
* The ONNX package's own ScatterND node cases with reduction none/absent.
* Duplicates: the runtimes apply tuples in order on CPU (last wins); a smaller
  seeded set checks jaxops agrees with both.

Values stay within int32/float32 (the plugin computes int64 as int32 and
float64 as float32, docs/semantics.md#rt-6). Results must be exactly equal.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import openvino.opset4 as ov4
import pytest

import jaxops
from tests.support import generators as gen
from tests.support import oracles
from tests.support.asserts import assert_same


def _scatter_node(data, indices, updates):
  return ov4.scatter_nd_update(data, indices, updates)


# (data shape, leading indices shape, k, data dtype, index dtype)
SIGNATURES = [
  ((8,), (4,), 1, np.float32, np.int32),
  ((8,), (), 1, np.float32, np.int64),
  ((6, 5), (7,), 2, np.float32, np.int64),
  ((6, 5), (3,), 1, np.int32, np.int32),
  ((6, 5), (2, 2), 1, np.float32, np.int64),
  ((4, 3, 5), (5,), 3, np.int64, np.int64),
  ((4, 3, 5), (2, 3), 2, np.float32, np.int32),
  ((4, 3, 5), (3,), 1, np.uint8, np.int64),
  ((5, 2, 3, 4), (2, 2, 2), 2, np.float32, np.int64),
  ((5, 2, 3, 4), (6,), 4, np.int8, np.int32),
  ((10, 4, 3), (1,), 1, np.float32, np.int32),
  ((3, 4, 2), (2, 3), 3, np.int32, np.int64),
]
K0_SIGNATURES = [
  ((4, 3), (1,), 0, np.float32, np.int64),
  ((2, 3, 2), (3,), 0, np.int32, np.int64),
]
SEEDS_PER_SIGNATURE = 15


def _case(signature, seed, *, unique=True):
  data_shape, lead, k, dtype, index_dtype = signature
  rng = np.random.default_rng([seed, k, len(data_shape), len(lead)])
  indices = gen.random_indices(
    rng, data_shape[:k], lead, index_dtype, unique=unique
  )
  updates_shape = tuple(lead) + tuple(data_shape[k:])
  return (
    gen.random_values(rng, data_shape, dtype),
    indices,
    gen.random_values(rng, updates_shape, dtype),
  )


@functools.cache
def _jitted(unique, scatter_order="serial"):
  # One function per scatter order: the order is read when tracing, and
  # jit keeps a function's traces.
  return jax.jit(
    functools.partial(jaxops.scatter_nd_update, unique_indices=unique)
  )


def _ids(signatures):
  return [
    f"{d}-lead{lead}-k{k}-{np.dtype(t).name}-{np.dtype(it).name}"
    for d, lead, k, t, it in signatures
  ]


@pytest.mark.exhaustive(default=6)
@pytest.mark.parametrize("seed", range(SEEDS_PER_SIGNATURE))
@pytest.mark.parametrize("signature", SIGNATURES, ids=_ids(SIGNATURES))
@pytest.mark.covering_modes
def test_openvino_cpu_random_unique(signature, seed):
  data, indices, updates = _case(signature, seed)
  want = oracles.openvino_cpu(_scatter_node, [data, indices, updates])
  assert_same(_jitted(False)(data, indices, updates), want)
  assert_same(_jitted(True)(data, indices, updates), want)


@pytest.mark.parametrize("seed", range(SEEDS_PER_SIGNATURE))
@pytest.mark.parametrize(
  "signature", SIGNATURES + K0_SIGNATURES, ids=_ids(SIGNATURES + K0_SIGNATURES)
)
@pytest.mark.exhaustive(default=2)
@pytest.mark.covering_modes
def test_onnxruntime_random_unique(signature, seed):
  data, indices, updates = _case(signature, seed)
  indices = indices.astype(np.int64)  # ONNX ScatterND takes int64 only
  want = oracles.onnxruntime("ScatterND", [data, indices, updates])
  assert_same(_jitted(False)(data, indices, updates), want)


DUPLICATE_SIGNATURES = [
  ((5,), (12,), 1, np.float32, np.int64),
  ((4, 3), (10,), 2, np.int32, np.int64),
  ((3, 4, 2), (4, 3), 1, np.float32, np.int64),
]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(
  "signature", DUPLICATE_SIGNATURES, ids=_ids(DUPLICATE_SIGNATURES)
)
@pytest.mark.scatter_orders
def test_duplicates_last_wins_like_cpu_runtimes(signature, seed, scatter_order):
  data, indices, updates = _case(signature, seed, unique=False)
  got = _jitted(False, scatter_order)(data, indices, updates)
  inputs = [data, indices, updates]
  # The runtimes keep the order of duplicates on one thread only.
  assert_same(got, oracles.openvino_cpu(_scatter_node, inputs, threads=1))
  assert_same(got, oracles.onnxruntime("ScatterND", inputs, threads=1))


@pytest.mark.parametrize("signature", K0_SIGNATURES, ids=_ids(K0_SIGNATURES))
def test_openvino_cpu_k0_erratum(signature):
  """k == 0: every tuple addresses all of data. The reference evaluator and
  onnxruntime replace data (last tuple wins); the CPU plugin returns data
  unchanged. jaxops follows the reference (docs/semantics.md#snu-1); this
  test fails -- and the erratum needs revisiting -- if the plugin changes."""
  data, indices, updates = _case(signature, 0)
  got = jaxops.scatter_nd_update(data, indices, updates)
  assert_same(
    got,
    oracles.openvino_reference(
      _scatter_node, [data, indices, updates], data.shape, data.dtype
    ),
  )
  assert_same(got, updates.reshape((-1,) + data.shape)[-1])
  assert_same(
    oracles.openvino_cpu(_scatter_node, [data, indices, updates]), data
  )


def test_one_element_updates_for_0d_matches_reference_evaluator():
  """Accepted by OpenVINO's shape inference and reference evaluator; the CPU
  plugin and onnxruntime reject it (docs/semantics.md#snu-2)."""
  data = np.arange(12, dtype=np.float32).reshape(3, 4)
  indices = np.array([2, -1], np.int64)
  updates = np.array([42], np.float32)
  want = oracles.openvino_reference(
    _scatter_node, [data, indices, updates], data.shape, data.dtype
  )
  assert_same(jaxops.scatter_nd_update(data, indices, updates), want)
  with pytest.raises(Exception, match="expectUpdateShape"):
    oracles.openvino_cpu(_scatter_node, [data, indices, updates])
  with pytest.raises(Exception, match="updates tensor should have shape"):
    oracles.onnxruntime("ScatterND", [data, indices, updates])


def _onnx_cases():
  cases = [
    c
    for c in oracles.onnx_node_cases("ScatterND")
    if c[3].get("reduction", b"none") in (b"none", "none")
  ]
  assert cases, "the onnx package ships ScatterND node cases"
  return cases


@pytest.mark.parametrize("case", _onnx_cases(), ids=lambda c: c[0])
def test_onnx_node_cases(case):
  _, inputs, expected, _ = case
  assert_same(jaxops.scatter_nd_update(*inputs), expected)
