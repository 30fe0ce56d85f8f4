"""Differential tests: `jaxops.scatter_nd_update(..., reduction=...)`
(ScatterNDUpdate-15) vs real runtimes.

* OpenVINO's CPU plugin (`openvino.opset15.scatter_nd_update` with
  `reduction`), one thread: every reduction, f32/f16/bf16/i32/i8/u8/i64/bool
  data, int32 and int64 indices, ranks 1-5, repeated and negative index
  tuples. The plugin applies reductions serially in index order, the order
  jaxops defines, so results are bit-equal -- except where the plugin departs
  from its spec, which each test asserts explicitly (docs/semantics.md,
  runtime bugs): f16 reductions run in f32 and round once, bool `sub` with
  repeats is `(data - sum) != 0`, not XOR, and bf16 sums round one way or
  another by CPU, so they are held to the bound of their roundings (RT-20).
* onnxruntime `ScatterND`-18 (`reduction` none/add/mul/min/max) on one
  thread, the only count where its reductions do not race: f32/f64/i32/i64/
  i8/u8/i16/bool data; the dtypes and reductions its CPU kernel refuses (f16
  reductions, bool min/max) are asserted to raise.
* The ONNX package's ScatterND node cases with a reduction.
* The spec's own examples that cannot be right, NaN under min/max, and
  onnxruntime's multi-threaded race (lost updates).

Float data with fractional values (float sums round, so the order shows);
f64 only with values exact in f32 (the plugin computes f64 as f32).
"""

from __future__ import annotations

import functools

import jax
import ml_dtypes
import numpy as np
import openvino.opset15 as ov15
import pytest

import jaxops
from tests.support import oracles
from tests.support import scatter_reduce as sr
from tests.support.asserts import assert_same

OV_DTYPES = (
  np.float32,
  np.float16,
  ml_dtypes.bfloat16,
  np.int32,
  np.int8,
  np.uint8,
  np.int64,
  np.bool_,
)


def _node(reduction, data, indices, updates):
  return ov15.scatter_nd_update(data, indices, updates, reduction)


@functools.cache
def _jitted(reduction, scatter_order="serial"):
  # One function per scatter order: the order is read when tracing, and
  # jit keeps a function's traces.
  return jax.jit(
    functools.partial(jaxops.scatter_nd_update, reduction=reduction)
  )


def _case(seed, reduction, dtype):
  dtype = np.dtype(dtype)
  seed = sr.spread(seed, reduction, dtype.name)
  return sr.random_nd_case(
    seed,
    reduction,
    dtype,
    rank=seed % 5 + 1,
    duplicates=seed % 4 != 3,
    index_dtype=(np.int32, np.int64)[seed % 2],
    fractional=dtype.name in ("float32", "float16", "bfloat16"),
  )


def openvino_model(case) -> np.ndarray | None:
  """What the CPU plugin computes, by its documented departures; None for
  bfloat16 sums, whose bits depend on the CPU (RT-20). Products of the
  generator's values are exact in every dtype, so `prod` needs no model."""
  name = case.data.dtype.name
  if name == "bfloat16" and case.reduction in ("sum", "sub"):
    return None
  if name == "float16" and case.reduction in ("sum", "sub"):
    return sr.widened(case, np.float32).expected().astype(case.data.dtype)
  if name == "bool" and case.reduction == "sub":
    return sr.widened(case, np.int32).expected() != 0
  return case.expected()


@functools.cache
def _openvino_results(reduction, dtype, seeds=sr.SEEDS):
  cases = [_case(seed, reduction, dtype) for seed in seeds]
  results = oracles.openvino_cpu_many(
    [functools.partial(_node, reduction)] * len(cases),
    [c.inputs for c in cases],
    threads=1,
  )
  return cases, results


def _dtype_ids(dtypes):
  return [np.dtype(t).name for t in dtypes]


@pytest.mark.exhaustive(default=6)
@pytest.mark.parametrize("dtype", OV_DTYPES, ids=_dtype_ids(OV_DTYPES))
@pytest.mark.parametrize("reduction", sr.ND_REDUCTIONS)
@pytest.mark.scatter_orders
def test_openvino_cpu(reduction, dtype, jax_mode, scatter_order):
  cases, results = _openvino_results(reduction, dtype)
  case, got = sr.of_mode(jax_mode, cases, results)
  sr.assert_plugin_and_spec(
    case,
    got,
    openvino_model(case),
    _jitted(reduction, scatter_order)(*case.inputs),
  )


def test_openvino_cpu_departures_are_real():
  """The documented departures show up in cases of the generator above
  (the bug models are not vacuous): f16 and bf16 sums round differently,
  bool sub is not XOR (runtime only: eight seeds cost one OpenVINO
  compilation)."""
  differs = {
    (reduction, np.dtype(dtype).name): sum(
      not np.array_equal(got, c.expected())
      for c, got in zip(*_openvino_results(reduction, dtype, tuple(range(8))))
    )
    for reduction, dtype in [
      ("sum", np.float16),
      ("sub", np.bool_),
      ("sum", ml_dtypes.bfloat16),
    ]
  }
  assert all(differs.values()), differs


def _ort_supported(reduction, dtype):
  name = np.dtype(dtype).name
  if name == "float16":
    return reduction == "none"
  return not (name == "bool" and reduction in ("min", "max"))


@pytest.mark.exhaustive(default=6)
@pytest.mark.parametrize("dtype", sr.ORT_DTYPES, ids=_dtype_ids(sr.ORT_DTYPES))
@pytest.mark.parametrize("reduction", list(sr.ONNX_REDUCTION))
@pytest.mark.scatter_orders
def test_onnxruntime_one_thread(reduction, dtype, jax_mode, scatter_order):
  attrs = {"reduction": sr.ONNX_REDUCTION[reduction]}
  case = _case(sr.SEED_OF_MODE[jax_mode], reduction, dtype)
  # ONNX's ScatterND takes int64 indices only.
  inputs = [case.data, case.indices.astype(np.int64), case.updates]
  if not _ort_supported(reduction, dtype):
    # The CPU kernel has no such reduction for this dtype.
    with pytest.raises(Exception, match="not supported"):
      oracles.onnxruntime("ScatterND", inputs, attrs, threads=1)
    return
  want = oracles.onnxruntime("ScatterND", inputs, attrs, threads=1)
  got = _jitted(reduction, scatter_order)(*case.inputs)
  assert_same(got, want, case.describe())


def _onnx_cases():
  cases = [
    c
    for c in oracles.onnx_node_cases("ScatterND")
    if sr.reduction_of(c[3]) != "none"
  ]
  assert len(cases) >= 4, "onnx ships ScatterND add/mul/max/min cases"
  return cases


@pytest.mark.parametrize("case", _onnx_cases(), ids=lambda c: c[0])
def test_onnx_node_cases(case):
  _, inputs, expected, attrs = case
  assert_same(_jitted(sr.reduction_of(attrs))(*inputs), expected)


# The spec's examples: data [1, 2, 3, 4], indices [0, 2, -3, -3, 0], updates
# [10, 20, 30, 40, 50]; what the spec prints, and what is right.
SPEC_EXAMPLES = {
  "none": ([50, 20, 20, 4], [50, 40, 20, 4]),
  "prod": ([500, 3600, 40, 4], [500, 2400, 60, 4]),
}


@pytest.mark.parametrize("reduction", list(SPEC_EXAMPLES))
def test_spec_examples_erratum(reduction):
  data = np.array([1, 2, 3, 4], np.int32)
  indices = np.array([[0], [2], [-3], [-3], [0]], np.int64)
  updates = np.array([10, 20, 30, 40, 50], np.int32)
  printed, right = (np.array(v, np.int32) for v in SPEC_EXAMPLES[reduction])
  got = _jitted(reduction)(data, indices, updates)
  assert_same(got, right)
  assert not np.array_equal(got, printed)
  assert_same(
    oracles.openvino_cpu(
      functools.partial(_node, reduction), [data, indices, updates], threads=1
    ),
    right,
  )


def test_text_example_erratum():
  """The spec's text example 1 prints [1, 11, 3, 10, 4, 6, 13, 12]."""
  data = np.arange(1, 9, dtype=np.float32)
  indices = np.array([[4], [3], [1], [7], [-2], [-4]], np.int64)
  updates = np.arange(9, 15, dtype=np.float32)
  want = np.array([1, 11, 3, 10, 14, 6, 13, 12], np.float32)
  got = _jitted("none")(data, indices, updates)
  assert_same(got, want)
  assert not np.array_equal(got, [1, 11, 3, 10, 4, 6, 13, 12])
  assert_same(
    oracles.openvino_cpu(
      functools.partial(_node, "none"), [data, indices, updates]
    ),
    want,
  )


def test_nan_under_min_max_three_answers():
  """NaN propagates in jaxops (as `jnp.maximum`); the plugin keeps NaN in
  data and drops it in updates; onnxruntime's `a > b ? a : b` replaces NaN in
  data and keeps one in updates only where it comes last."""
  data = np.array([np.nan, 1, 1], np.float32)
  indices = np.array([[0], [1], [1]], np.int64)
  updates = np.array([5, np.nan, 2], np.float32)
  inputs = [data, indices, updates]
  assert_same(_jitted("max")(*inputs), np.array([np.nan, np.nan, 1], "f4"))
  assert_same(_jitted("min")(*inputs), np.array([np.nan, np.nan, 1], "f4"))
  node = functools.partial(_node, "max")
  assert_same(
    oracles.openvino_cpu(node, inputs, threads=1),
    np.array([np.nan, 2, 1], np.float32),
  )
  assert_same(
    oracles.onnxruntime("ScatterND", inputs, {"reduction": "max"}, threads=1),
    np.array([5, 2, 1], np.float32),
  )


def test_onnxruntime_multithreaded_reductions_lose_updates():
  """20,000 `add`s of 1 into one row: onnxruntime on one thread and jaxops
  give 20,000 in every slot; on two threads its unsynchronized
  read-modify-writes can only lose updates, never add any."""
  n = 20_000
  data = np.zeros((2, 64), np.float32)
  indices = np.zeros((n, 1), np.int64)
  updates = np.ones((n, 64), np.float32)
  inputs = [data, indices, updates]
  want = np.zeros((2, 64), np.float32)
  want[0] = n
  assert_same(_jitted("sum")(*inputs), want)
  attrs = {"reduction": "add"}
  assert_same(oracles.onnxruntime("ScatterND", inputs, attrs, threads=1), want)
  for _ in range(3):
    got = oracles.onnxruntime("ScatterND", inputs, attrs, threads=2)
    assert np.all(got <= want) and np.all(got[1] == 0)


@pytest.mark.parametrize("reduction", ("sum", "sub", "prod"))
@pytest.mark.scatter_orders
@pytest.mark.covering_modes
def test_runs_longer_than_a_chunk(reduction, scatter_order):
  # On CPU, the serial loop at every run length, as both runtimes; the
  # constructed path chunks (docs/semantics.md#reduction-order).
  sr.check_runs_longer_than_a_chunk(
    reduction,
    scatter_order,
    jaxops.scatter_nd_update,
    functools.partial(_node, reduction),
    elements=False,
  )
