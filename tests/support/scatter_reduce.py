"""Scatter reductions (ScatterNDUpdate-15, ScatterElementsUpdate-12): seeded
case generators for the conformance and export tests, and the two operators'
shared conformance checks. A case's `expected()` is the serial reference of
`tests.support.reductions` (row-major index order, the order OpenVINO's CPU
plugin, onnxruntime on one thread and the ONNX reference use).

Every conformance case is a compilation on each side, so each (reduction,
dtype) pair runs one seeded case per x64 mode (`SEED_OF_MODE`), and `spread`
shifts the seed by the pair so that the pairs together cover ranks 1-5,
int32 and int64 indices, with and without repeats (negative axes for
ScatterElementsUpdate) in each mode.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from tests.support import generators as gen
from tests.support import oracles, reductions
from tests.support.asserts import assert_same

ND_REDUCTIONS = ("none", "sum", "sub", "prod", "min", "max")
ELEMENTS_REDUCTIONS = ("none", "sum", "prod", "min", "max", "mean")
# ONNX's name of each reduction it has (ScatterND-18, ScatterElements-18).
ONNX_REDUCTION = {
  "none": "none",
  "sum": "add",
  "prod": "mul",
  "min": "min",
  "max": "max",
}
_FROM_ONNX = {onnx: ours for ours, onnx in ONNX_REDUCTION.items()}


def reduction_of(attrs: dict[str, Any]) -> str:
  """The reduction of an ONNX node case (`oracles.onnx_node_cases`) by its
  attributes, in jaxops' name ("none" where it has none)."""
  reduction = attrs.get("reduction", "none")
  return _FROM_ONNX[
    reduction.decode() if isinstance(reduction, bytes) else reduction
  ]


# The data dtypes compared on onnxruntime.
ORT_DTYPES = (
  np.float32,
  np.float64,
  np.int32,
  np.int64,
  np.int8,
  np.uint8,
  np.int16,
  np.bool_,
  np.float16,
)
SEED_OF_MODE = {"x32": 0, "x64": 1}
SEEDS = tuple(SEED_OF_MODE.values())


def of_mode(jax_mode, *per_seed):
  """The items of `per_seed` lists (one item per seed of `SEEDS`) that
  belong to this x64 mode's seed."""
  j = list(SEED_OF_MODE).index(jax_mode)
  return tuple(items[j] for items in per_seed)


def spread(seed: int, *pair) -> int:
  """`seed` shifted by a fixed hash of the case's attributes."""
  return seed + zlib.crc32(repr([str(a) for a in pair]).encode()) % 60


def assert_runtime(got, want, context=""):
  """A runtime's output equals a NumPy model exactly (dtype included; no x64
  canonicalization: the runtimes compute in the dtypes they were given)."""
  assert got.dtype == want.dtype, (context, got.dtype, want.dtype)
  np.testing.assert_array_equal(
    got.astype(np.float32) if got.dtype.name == "bfloat16" else got,
    want.astype(np.float32) if want.dtype.name == "bfloat16" else want,
    err_msg=context,
  )


def widened(case, dtype):
  """The same case with data and updates in `dtype`."""
  return dataclasses.replace(
    case, data=case.data.astype(dtype), updates=case.updates.astype(dtype)
  )


# One rounding step of the CPU plugin on bfloat16 data: an f32 (or f64)
# operation, then a rounding to bfloat16 that is at least faithful (the
# plugin's own `ov::bfloat16` rounding truncates or rounds up: an error below
# one bfloat16 ulp, 2**-7 of the value), so within 2**-7 + 2**-23 of the
# exact result.
BF16_STEP = 2**-7 + 2**-23


def assert_within_roundings(case, got, step=BF16_STEP):
  """A runtime's float reduction `got` within the bound of its number of
  roundings of the exact result (element by element).

  An element that `k` updates reach is a sum of `k + 1` terms `x_i` (k with
  `use_init_val=False`); whether the runtime rounds after each addition or
  once at the end, at most `r = k + 1` roundings (one more for `mean`'s
  division by `n`) each of relative error `step` lie between the terms and
  `got`, so `|got - exact| <= gamma_r * sum|x_i| / n` with
  `gamma_r = r * step / (1 - r * step)` (the recursive-summation bound). An
  element no update reaches is `data`, exactly. The exact sums are taken in
  float64, which holds the sums of the generator's bfloat16 values exactly.
  """
  context = case.describe()
  assert got.dtype == case.data.dtype, (context, got.dtype)
  exact = widened(case, np.float64).expected()
  magnitude = dataclasses.replace(
    case,
    data=np.abs(case.data.astype(np.float64)),
    updates=np.abs(case.updates.astype(np.float64)),
    reduction="mean" if case.reduction == "mean" else "sum",
  ).expected()
  hits = dataclasses.replace(
    case,
    data=np.zeros(case.data.shape, np.int64),
    updates=np.ones(case.updates.shape, np.int64),
    reduction="sum",
    **({"use_init_val": True} if hasattr(case, "use_init_val") else {}),
  ).expected()
  r = hits + 1 + (case.reduction == "mean")
  gamma = np.where(hits > 0, r * step / (1 - r * step), 0.0)
  error = np.abs(got.astype(np.float64) - exact)
  worst = np.unravel_index(np.argmax(error - gamma * magnitude), error.shape)
  assert np.all(error <= gamma * magnitude), (
    f"{context}: at {tuple(map(int, worst))} got {got[worst]}, exact "
    f"{exact[worst]}, {hits[worst]} updates, bound "
    f"{gamma[worst] * magnitude[worst]}"
  )


def assert_plugin_and_spec(case, got, plugin_model, ours):
  """One OpenVINO CPU conformance case: the plugin's output `got` against
  `plugin_model` (its documented behaviour), or, where that depends on the
  CPU (`plugin_model` None: bfloat16 sums, docs/semantics.md#rt-20), within
  the bound of `assert_within_roundings`; jaxops' output `ours` against the
  spec; and the two equal where the plugin's model is exact and agrees with
  the spec."""
  if plugin_model is None:
    assert_within_roundings(case, got)
  else:
    assert_runtime(got, plugin_model, case.describe())
  want = case.expected()
  assert_same(ours, want, case.describe())
  if plugin_model is not None and np.array_equal(plugin_model, want):
    assert_same(ours, got, case.describe())


# Cases ------------------------------------------------------------------------


@dataclasses.dataclass
class _Case:
  """What both operators' cases hold: the three arrays."""

  data: np.ndarray
  indices: np.ndarray
  updates: np.ndarray

  @property
  def inputs(self) -> list[np.ndarray]:
    return [self.data, self.indices, self.updates]

  def _arrays(self) -> str:
    return (
      f"data {self.data.dtype}{list(self.data.shape)} "
      f"indices {self.indices.dtype}{list(self.indices.shape)}"
    )


@dataclasses.dataclass
class NDCase(_Case):
  reduction: str

  def expected(self, chunk: int | None = None) -> np.ndarray:
    return reductions.np_scatter_nd_reduce(
      *self.inputs, self.reduction, chunk=chunk
    )

  def describe(self) -> str:
    return f"{self.reduction} {self._arrays()}"


@dataclasses.dataclass
class ElementsCase(_Case):
  axis: int
  reduction: str
  use_init_val: bool

  def expected(self, chunk: int | None = None) -> np.ndarray:
    return reductions.np_scatter_elements(
      *self.inputs, self.axis, self.reduction, self.use_init_val, chunk=chunk
    )

  def describe(self) -> str:
    return (
      f"{self.reduction} use_init_val={self.use_init_val} axis={self.axis} "
      f"{self._arrays()}"
    )


def values(rng, shape, dtype, *, fractional=False) -> np.ndarray:
  """`gen.random_values`, or with `fractional` floats whose sums round (so
  that the order of a float reduction shows in the bits)."""
  dtype = np.dtype(dtype)
  if fractional and np.issubdtype(dtype, np.inexact) and dtype.kind == "f":
    return (rng.standard_normal(shape) * 10).astype(dtype)
  if fractional and dtype == ml_dtypes.bfloat16:
    return (rng.standard_normal(shape) * 10).astype(dtype)
  if dtype == ml_dtypes.bfloat16:
    return gen.random_values(rng, shape, np.float32).astype(dtype)
  return gen.random_values(rng, shape, dtype)


def prod_values(rng, shape, dtype) -> np.ndarray:
  """Values whose products stay small and exact: mostly 1 and -1, some 2,
  some 0 (integers never overflow the data type in a short product)."""
  dtype = np.dtype(dtype)
  if dtype == np.bool_:
    return rng.random(shape) < 0.8
  choices = [1, 1, 1, 2, 0] if dtype.kind == "u" else [1, -1, 1, -1, 2, 0]
  return rng.choice(choices, size=shape).astype(dtype)


def random_nd_case(
  seed: int,
  reduction: str,
  dtype: Any,
  *,
  rank: int | None = None,
  duplicates: bool = True,
  index_dtype: Any = np.int64,
  fractional: bool = False,
) -> NDCase:
  """Data of rank 1-5, k in [1, rank], 1-3 leading index dims, repeated
  tuples when `duplicates` (negative components included)."""
  rng = np.random.default_rng([seed, ND_REDUCTIONS.index(reduction), 7])
  rank = rank or int(rng.integers(1, 6))
  data_shape = tuple(int(s) for s in rng.integers(1, 5, rank))
  k = int(rng.integers(1, rank + 1))
  lead = tuple(int(s) for s in rng.integers(1, 4, rng.integers(1, 3)))
  space = math.prod(data_shape[:k])
  unique = not duplicates and math.prod(lead) <= space
  if not unique and not duplicates:
    lead = (space,)
    unique = True
  if duplicates:
    # Few distinct targets, so repeats are likely.
    lead = tuple(int(s) for s in rng.integers(2, 5, len(lead)))
  indices = gen.random_indices(
    rng, data_shape[:k], lead, index_dtype, unique=unique
  )
  upd_shape = lead + data_shape[k:]
  draw = prod_values if reduction == "prod" else values
  kw = {} if reduction == "prod" else {"fractional": fractional}
  return NDCase(
    draw(rng, data_shape, dtype, **kw),
    indices,
    draw(rng, upd_shape, dtype, **kw),
    reduction,
  )


def random_elements_case(
  seed: int,
  reduction: str,
  dtype: Any,
  *,
  use_init_val: bool = True,
  rank: int | None = None,
  index_dtype: Any = np.int64,
  fractional: bool = False,
  negative_axis: bool = False,
) -> ElementsCase:
  """Data of rank 1-5; indices dims at most data's, longer along the axis
  (repeats) half the time; negative indices included."""
  rng = np.random.default_rng([seed, ELEMENTS_REDUCTIONS.index(reduction), 11])
  rank = rank or int(rng.integers(1, 6))
  data_shape = tuple(int(s) for s in rng.integers(1, 5, rank))
  axis = int(rng.integers(0, rank))
  idx_shape = [int(rng.integers(1, s + 1)) for s in data_shape]
  if rng.random() < 0.5:
    idx_shape[axis] = data_shape[axis] + int(rng.integers(1, 5))
  indices = gen.random_indices(
    rng, data_shape[axis], tuple(idx_shape), index_dtype
  )
  draw = prod_values if reduction == "prod" else values
  kw = {} if reduction == "prod" else {"fractional": fractional}
  return ElementsCase(
    draw(rng, data_shape, dtype, **kw),
    indices,
    draw(rng, tuple(idx_shape), dtype, **kw),
    axis - rank if negative_axis else axis,
    reduction,
    use_init_val,
  )


# Runs longer than a chunk ---------------------------------------------------


def long_run_case(reduction: str, *, elements: bool) -> NDCase | ElementsCase:
  """Float32 updates of which 3 in 5 go to slot 0 (the ScatterElements
  case: to row 0 of each column), over 2.5 chunks of the constructed path
  (`jaxops._fold.CHUNK`): slot 0's run is longer than a chunk, the others'
  are not. Values whose float sums and products round."""
  from jaxops import _fold

  rng = np.random.default_rng([13, spread(0, reduction)])
  n = 2 * _fold.CHUNK + _fold.CHUNK // 2
  lead = (n, 4) if elements else (n, 1)
  indices = rng.choice(np.array([0, 0, 0, 1, 2]), size=lead)
  shape = (n, 4)
  if reduction == "prod":
    updates = 1 + rng.standard_normal(shape) * 1e-3
  else:
    updates = rng.standard_normal(shape) * 10
  data = (rng.standard_normal((3, 4)) * 10).astype(np.float32)
  updates = updates.astype(np.float32)
  if elements:
    return ElementsCase(data, indices, updates, 0, reduction, True)
  return NDCase(data, indices, updates, reduction)


def assert_long_run(case, got, order: str, runtimes: dict[str, np.ndarray]):
  """jaxops on a run longer than a chunk: on the serial path the serial
  loop, bit-equal to every runtime in `runtimes` (on one thread); on the
  constructed path its own chunked order, which the case shows to differ
  from the serial loop."""
  from jaxops import _fold

  serial = case.expected()
  for name, result in runtimes.items():
    assert_same(result, serial, f"{name}: {case.describe()}")
  if order == "serial":
    assert_same(got, serial, case.describe())
    return
  chunked = case.expected(chunk=_fold.CHUNK)
  assert not np.array_equal(chunked, serial)
  assert_same(got, chunked, case.describe())


# The runtimes' outputs on `long_run_case`, by (reduction, elements): one
# OpenVINO compilation per reduction and operator, whichever scatter order
# the test runs in.
_LONG_RUN_RUNTIMES: dict[tuple[str, bool], tuple[Any, dict[str, Any]]] = {}


def _long_run_runtimes(reduction: str, *, elements: bool, node: Callable):
  """(`long_run_case`, each runtime's output on it): OpenVINO's CPU plugin
  (`node(data, indices, updates)` builds its node) and, for the reductions
  ONNX has, onnxruntime, both on one thread."""
  key = (reduction, elements)
  if key in _LONG_RUN_RUNTIMES:
    return _LONG_RUN_RUNTIMES[key]
  case = long_run_case(reduction, elements=elements)
  runtimes = {"OpenVINO": oracles.openvino_cpu(node, case.inputs, threads=1)}
  if reduction in ONNX_REDUCTION:
    attrs = {"reduction": ONNX_REDUCTION[reduction]}
    runtimes["onnxruntime"] = oracles.onnxruntime(
      "ScatterElements" if elements else "ScatterND",
      [case.data, case.indices.astype(np.int64), case.updates],
      {"axis": 0, **attrs} if elements else attrs,
      threads=1,
    )
  _LONG_RUN_RUNTIMES[key] = case, runtimes
  return case, runtimes


def check_runs_longer_than_a_chunk(
  reduction: str,
  order: str,
  scatter: Callable,
  node: Callable,
  *,
  elements: bool,
) -> None:
  """Both operators' `test_runs_longer_than_a_chunk`: `scatter` (the
  jaxops operator) with `reduction` on `long_run_case`, as
  `assert_long_run` checks it against the runtimes of
  `_long_run_runtimes` (`node` builds the OpenVINO node). `scatter` is
  jitted afresh: the scatter `order` is read when tracing."""
  import jax

  case, runtimes = _long_run_runtimes(reduction, elements=elements, node=node)
  fresh = jax.jit(lambda d, i, u: scatter(d, i, u, reduction=reduction))
  assert_long_run(case, fresh(*case.inputs), order, runtimes)
