"""Scatter reductions (ScatterNDUpdate-15, ScatterElementsUpdate-12): serial
NumPy references and seeded case generators for the conformance and export
tests.

The references are deliberately naive: a Python loop over index positions in
row-major order applying `out[t] = f(out[t], update)` in the data type, the
order OpenVINO's CPU plugin, onnxruntime on one thread and the ONNX reference
use. They share no code with the operators under test.

`ov_cpu_mean=True` reproduces the OpenVINO CPU plugin's integer `mean`
(docs/semantics.md, runtime bugs): the sum accumulates in the data type
(wrapping) and the quotient truncates toward zero. Without it the integer
mean is the spec's: an exact sum, rounded toward -inf.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import ml_dtypes
import numpy as np

from tests.support import generators as gen

ND_REDUCTIONS = ("none", "sum", "sub", "prod", "min", "max")
ELEMENTS_REDUCTIONS = ("none", "sum", "prod", "min", "max", "mean")

_BOOL = {
  "sum": np.logical_or,
  "sub": np.logical_xor,
  "prod": np.logical_and,
  "min": np.logical_and,
  "max": np.logical_or,
}
_NUMERIC = {
  "sum": np.add,
  "mean": np.add,
  "sub": np.subtract,
  "prod": np.multiply,
  "min": np.minimum,  # NaN propagates
  "max": np.maximum,
}


def combine(reduction: str, old: np.ndarray, new: np.ndarray) -> np.ndarray:
  """`f(old, new)` for one update, in old's dtype (integers wrap)."""
  if reduction == "none":
    return np.asarray(new, old.dtype).copy()
  table = _BOOL if old.dtype == np.bool_ else _NUMERIC
  return table[reduction](old, np.asarray(new, old.dtype)).astype(old.dtype)


def neutral(reduction: str, dtype: Any) -> Any:
  """The value a targeted slot starts from with use_init_val=False."""
  dtype = np.dtype(dtype)
  if dtype == np.bool_:
    return {"sum": False, "prod": True, "min": True, "max": False}[reduction]
  if reduction in ("sum", "mean"):
    return 0
  if reduction == "prod":
    return 1
  if np.issubdtype(dtype, np.integer):
    info = np.iinfo(dtype)
  elif dtype == ml_dtypes.bfloat16:
    info = ml_dtypes.finfo(dtype)
  else:
    info = np.finfo(dtype)
  return info.max if reduction == "min" else info.min


def scatter_nd(data, indices, updates, reduction="none") -> np.ndarray:
  """ScatterNDUpdate-15 tuple by tuple in row-major order."""
  data, indices = np.asarray(data), np.asarray(indices)
  k = indices.shape[-1]
  rows_shape = (math.prod(data.shape[:k]), math.prod(data.shape[k:]))
  out = data.copy().reshape(rows_shape)
  tuples = indices.reshape(-1, k).astype(np.int64)
  updates = np.asarray(updates).reshape(len(tuples), rows_shape[1])
  sizes = np.asarray(data.shape[:k], np.int64)
  for tup, row in zip(tuples, updates):
    tup = np.where(tup < 0, tup + sizes, tup)
    r = int(np.ravel_multi_index(tuple(tup), data.shape[:k])) if k else 0
    out[r] = combine(reduction, out[r], row)
  return out.reshape(data.shape)


def scatter_elements(
  data,
  indices,
  updates,
  axis=0,
  reduction="none",
  use_init_val=True,
  *,
  ov_cpu_mean=False,
) -> np.ndarray:
  """ScatterElementsUpdate-12 position by position in row-major order."""
  data, indices = np.asarray(data), np.asarray(indices)
  updates = np.asarray(updates)
  axis %= data.ndim
  out = data.copy()
  integer = np.issubdtype(data.dtype, np.integer)
  exact_mean = reduction == "mean" and integer and not ov_cpu_mean
  # Exact integer sums for the spec's mean: Python ints.
  acc = out.astype(object) if exact_mean else out
  count = np.zeros(data.shape, np.int64)
  targets = []
  for p in np.ndindex(*indices.shape):
    i = int(indices[p])
    t = p[:axis] + (i + data.shape[axis] if i < 0 else i,) + p[axis + 1 :]
    targets.append((p, t))
    count[t] += 1
  if reduction != "none" and not use_init_val:
    for _, t in targets:
      acc[t] = neutral(reduction, data.dtype)
  for p, t in targets:
    if exact_mean:
      acc[t] = acc[t] + int(updates[p])
    else:
      acc[t] = combine(reduction, np.asarray(acc[t]), updates[p])
  if reduction != "mean":
    return acc
  divisor = count + (1 if use_init_val else 0)
  hit = count > 0
  if exact_mean:
    mean = [s // int(n) for s, n in zip(acc[hit], divisor[hit])]
    out[hit] = np.asarray(mean, np.int64).astype(data.dtype)
  elif integer:  # OpenVINO CPU: truncation of the wrapped sum
    out[hit] = np.trunc(acc[hit].astype(np.float64) / divisor[hit]).astype(
      data.dtype
    )
  else:
    out[hit] = acc[hit] / divisor[hit].astype(data.dtype)
  return out


# Cases ------------------------------------------------------------------------


@dataclasses.dataclass
class NDCase:
  data: np.ndarray
  indices: np.ndarray
  updates: np.ndarray
  reduction: str

  @property
  def inputs(self) -> list[np.ndarray]:
    return [self.data, self.indices, self.updates]

  def expected(self) -> np.ndarray:
    return scatter_nd(*self.inputs, self.reduction)

  def describe(self) -> str:
    return (
      f"{self.reduction} data {self.data.dtype}{list(self.data.shape)} "
      f"indices {self.indices.dtype}{list(self.indices.shape)}"
    )


@dataclasses.dataclass
class ElementsCase:
  data: np.ndarray
  indices: np.ndarray
  updates: np.ndarray
  axis: int
  reduction: str
  use_init_val: bool

  @property
  def inputs(self) -> list[np.ndarray]:
    return [self.data, self.indices, self.updates]

  def expected(self, **kw) -> np.ndarray:
    return scatter_elements(
      *self.inputs, self.axis, self.reduction, self.use_init_val, **kw
    )

  def describe(self) -> str:
    return (
      f"{self.reduction} use_init_val={self.use_init_val} axis={self.axis} "
      f"data {self.data.dtype}{list(self.data.shape)} "
      f"indices {self.indices.dtype}{list(self.indices.shape)}"
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
