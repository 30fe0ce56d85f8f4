"""Differential tests: `jaxops.scatter_elements_update` (ScatterElementsUpdate-
12) vs real runtimes.

* OpenVINO's CPU plugin (`openvino.opset12.scatter_elements_update`), one
  thread: every reduction, `use_init_val` both ways, f32/f16/bf16/i32/i16/i8/
  u8/i64/bool data, int32 and int64 indices, ranks 1-5, axes negative and
  not, indices longer than data along the axis (repeats) and negative. The
  plugin reduces serially along the axis, in index order, so results are
  bit-equal -- except where it departs from its spec, which each test asserts
  explicitly (docs/semantics.md, runtime bugs): integer `mean` truncates
  toward zero and accumulates (wrapping) in the data type; f16 reductions run
  in f32 and round once; bf16 sums and means round one way or another by
  CPU, so they are held to the bound of their roundings (RT-20).
* onnxruntime `ScatterElements`-18 (`reduction` none/add/mul/min/max; no mean
  and no `use_init_val=False` in ONNX) on one thread; the reductions its CPU
  kernel refuses (f16, bool min/max) are asserted to raise.
* The ONNX package's ScatterElements node cases.
"""

from __future__ import annotations

import functools

import jax
import ml_dtypes
import numpy as np
import openvino.opset12 as ov12
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
  np.int16,
  np.int8,
  np.uint8,
  np.int64,
  np.bool_,
)


def _node(axis, reduction, use_init_val, data, indices, updates):
  return ov12.scatter_elements_update(
    data, indices, updates, np.int64(axis), reduction, use_init_val
  )


@functools.cache
def _jitted(axis, reduction, use_init_val, scatter_order="serial"):
  # One function per scatter order: the order is read when tracing, and
  # jit keeps a function's traces.
  return jax.jit(
    functools.partial(
      jaxops.scatter_elements_update,
      axis=axis,
      reduction=reduction,
      use_init_val=use_init_val,
    )
  )


def _run(case, scatter_order="serial"):
  jitted = _jitted(case.axis, case.reduction, case.use_init_val, scatter_order)
  return jitted(*case.inputs)


def _case(seed, reduction, dtype, use_init_val=True):
  dtype = np.dtype(dtype)
  seed = sr.spread(seed, reduction, dtype.name, use_init_val)
  return sr.random_elements_case(
    seed,
    reduction,
    dtype,
    use_init_val=use_init_val,
    rank=seed % 5 + 1,
    index_dtype=(np.int32, np.int64)[seed % 2],
    fractional=dtype.name in ("float32", "float16", "bfloat16"),
    negative_axis=seed % 3 == 1,
  )


_ROUNDED = ("sum", "mean")


def openvino_model(case) -> np.ndarray | None:
  """What the CPU plugin computes, by its documented departures; None for
  bfloat16 sums and means, whose bits depend on the CPU (RT-20). Products
  of the generator's values are exact in every dtype, so `prod` needs no
  model."""
  name = case.data.dtype.name
  if name == "bfloat16" and case.reduction in _ROUNDED:
    return None
  if name == "float16" and case.reduction in _ROUNDED:
    return sr.widened(case, np.float32).expected().astype(case.data.dtype)
  if case.reduction == "mean" and np.issubdtype(case.data.dtype, np.integer):
    return _truncated_wrapped_mean(case)
  return case.expected()


def _truncated_wrapped_mean(case) -> np.ndarray:
  """The plugin's integer mean: the sum accumulated in the data type
  (wrapping), divided by the count truncating toward zero."""
  data, indices, _ = case.inputs
  wrapped = sr.ElementsCase(*case.inputs, case.axis, "sum", case.use_init_val)
  ones = np.ones(indices.shape, np.int64)
  hits = sr.ElementsCase(
    np.zeros(data.shape, np.int64), indices, ones, case.axis, "sum", True
  ).expected()
  count = hits + int(case.use_init_val)
  mean = np.trunc(wrapped.expected() / np.maximum(count, 1))
  return np.where(hits > 0, mean.astype(data.dtype), data)


def _reductions(dtype):
  return [
    r for r in sr.ELEMENTS_REDUCTIONS if not (dtype == np.bool_ and r == "mean")
  ]


@functools.cache
def _openvino_results(reduction, dtype, use_init_val, seeds=sr.SEEDS):
  cases = [_case(seed, reduction, dtype, use_init_val) for seed in seeds]
  results = oracles.openvino_cpu_many(
    [functools.partial(_node, c.axis, reduction, use_init_val) for c in cases],
    [c.inputs for c in cases],
    threads=1,
  )
  return cases, results


OV_PARAMS = [
  pytest.param(r, t, u, id=f"{r}-{np.dtype(t).name}-init{int(u)}")
  for t in OV_DTYPES
  for r in _reductions(np.dtype(t))
  for u in ((True, False) if r != "none" else (True,))
]


@pytest.mark.exhaustive(default=12)
@pytest.mark.parametrize("reduction,dtype,use_init_val", OV_PARAMS)
@pytest.mark.scatter_orders
def test_openvino_cpu(reduction, dtype, use_init_val, jax_mode, scatter_order):
  cases, results = _openvino_results(reduction, dtype, use_init_val)
  case, got = sr.of_mode(jax_mode, cases, results)
  ours = _run(case, scatter_order)
  sr.assert_plugin_and_spec(case, got, openvino_model(case), ours)


def test_openvino_cpu_departures_are_real():
  """The bug models are not vacuous: cases of the generator above include
  integer means the plugin rounds differently and f16 sums it rounds
  differently (runtime only: eight seeds cost one OpenVINO compilation)."""
  differs = {}
  for reduction, dtype, use_init_val in [
    ("mean", np.int32, True),
    ("mean", np.int8, False),
    ("sum", np.float16, True),
  ]:
    cases, results = _openvino_results(
      reduction, dtype, use_init_val, seeds=tuple(range(8))
    )
    differs[reduction, np.dtype(dtype).name] = sum(
      not np.array_equal(got, c.expected()) for c, got in zip(cases, results)
    )
  assert all(differs.values()), differs


# (data, updates, dtype): the plugin's integer mean vs the spec's.
MEAN_BUGS = {
  # Truncation toward zero: (-1 - 2 - 4) / 3 = -2.33; the spec floors to -3.
  "truncates": ([-1], [-2, -4], np.int32, -3, -2),
  "truncates_zero": ([0], [-1], np.int32, -1, 0),
  # Accumulation in int8: 100 + 100 wraps to -56, halved to -28.
  "wraps": ([100], [100], np.int8, 100, -28),
}


@pytest.mark.parametrize("name", list(MEAN_BUGS))
def test_openvino_cpu_integer_mean_bugs(name):
  data, updates, dtype, spec, cpu = MEAN_BUGS[name]
  data = np.array(data, dtype)
  updates = np.array(updates, dtype)
  indices = np.zeros(len(updates), np.int64)
  inputs = [data, indices, updates]
  got = _jitted(0, "mean", True)(*inputs)
  assert_same(got, np.array([spec], dtype))
  node = functools.partial(_node, 0, "mean", True)
  sr.assert_runtime(
    oracles.openvino_cpu(node, inputs, threads=1), np.array([cpu], dtype)
  )


def test_nan_under_min_max():
  """NaN propagates in jaxops; the plugin keeps NaN in data and drops NaN in
  updates; onnxruntime replaces NaN in data."""
  data = np.array([np.nan, 1, 1], np.float32)
  indices = np.array([0, 1, 1], np.int64)
  updates = np.array([5, np.nan, 2], np.float32)
  inputs = [data, indices, updates]
  for reduction in ("min", "max"):
    assert_same(
      _jitted(0, reduction, True)(*inputs),
      np.array([np.nan, np.nan, 1], np.float32),
    )
  node = functools.partial(_node, 0, "max", True)
  sr.assert_runtime(
    oracles.openvino_cpu(node, inputs, threads=1),
    np.array([np.nan, 2, 1], np.float32),
  )
  got = oracles.onnxruntime(
    "ScatterElements", inputs, {"axis": 0, "reduction": "max"}, threads=1
  )
  sr.assert_runtime(got, np.array([5, 2, 1], np.float32))


def _ort_supported(reduction, dtype):
  name = np.dtype(dtype).name
  if name == "float16":  # unlike its ScatterND, f16 min/max work
    return reduction not in ("sum", "prod")
  return not (name == "bool" and reduction in ("min", "max"))


@pytest.mark.exhaustive(default=6)
@pytest.mark.parametrize("dtype", sr.ORT_DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("reduction", list(sr.ONNX_REDUCTION))
@pytest.mark.scatter_orders
def test_onnxruntime_one_thread(reduction, dtype, jax_mode, scatter_order):
  case = _case(sr.SEED_OF_MODE[jax_mode], reduction, dtype)
  attrs = {"axis": case.axis, "reduction": sr.ONNX_REDUCTION[reduction]}
  if not _ort_supported(reduction, dtype):
    with pytest.raises(Exception, match="not supported"):
      oracles.onnxruntime("ScatterElements", case.inputs, attrs, threads=1)
    return
  want = oracles.onnxruntime("ScatterElements", case.inputs, attrs, threads=1)
  assert_same(_run(case, scatter_order), want, case.describe())


def _onnx_cases():
  cases = oracles.onnx_node_cases("ScatterElements")
  assert len(cases) >= 6, "onnx ships ScatterElements node cases"
  return cases


@pytest.mark.parametrize("case", _onnx_cases(), ids=lambda c: c[0])
def test_onnx_node_cases(case):
  _, inputs, expected, attrs = case
  got = _jitted(attrs.get("axis", 0), sr.reduction_of(attrs), True)(*inputs)
  assert_same(got, expected)


@pytest.mark.parametrize("reduction", ("sum", "prod", "mean"))
@pytest.mark.scatter_orders
@pytest.mark.covering_modes
def test_runs_longer_than_a_chunk(reduction, scatter_order):
  # On CPU, the serial loop at every run length, as both runtimes; the
  # constructed path chunks (docs/semantics.md#reduction-order).
  sr.check_runs_longer_than_a_chunk(
    reduction,
    scatter_order,
    jaxops.scatter_elements_update,
    functools.partial(_node, 0, reduction, True),
    elements=True,
  )
