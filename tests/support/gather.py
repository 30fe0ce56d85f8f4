"""Shared helpers for the gather-family tests: NumPy references, dtype lists
and seeded random case generators (used by the unit and conformance tests).

The references are deliberately naive (a Python loop over output positions
with NumPy basic indexing), so that they are obviously right and share no code
with the `lax.gather` formulation under test.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
import pytest

from tests.support.asserts import assert_same
from tests.support.generators import (
  half_out_of_range,
  random_indices,
  random_values,
)


def _in_range(values: Sequence[int], sizes: Sequence[int]) -> bool:
  return all(-s <= v < s for v, s in zip(values, sizes))


def np_gather_nd(
  data: np.ndarray, indices: np.ndarray, batch_dims: int = 0, fill: Any = None
) -> np.ndarray:
  """GatherND-8 by its definition: `out[p] = data[p[:b] + tuple(indices[p])]`.

  Raises IndexError (from NumPy) for out-of-range indices, or with `fill`
  gives that value for the slice of an out-of-range tuple.
  """
  data, indices = np.asarray(data), np.asarray(indices)
  b, k = batch_dims, indices.shape[-1]
  out = np.empty(indices.shape[:-1] + data.shape[b + k :], data.dtype)
  for pos in np.ndindex(*indices.shape[:-1]):
    tuple_ = [int(i) for i in indices[pos]]
    if fill is not None and not _in_range(tuple_, data.shape[b : b + k]):
      out[pos] = fill
    else:
      out[pos] = data[pos[:b] + tuple(tuple_)]
  return out


def np_gather(
  data: np.ndarray,
  indices: np.ndarray,
  axis: int = 0,
  batch_dims: int = 0,
  fill: Any = 0,
) -> np.ndarray:
  """Gather-8 by its definition: output position `p` (batch dims, data dims
  before the axis, index dims, data dims after it) reads
  `data[p_before + (indices[p_batch + p_index],) + p_after]`, or `fill` when
  that index is out of range (`fill=None`: NumPy's IndexError instead).
  `axis` and `batch_dims` may be negative (batch_dims counts from the rank
  of indices)."""
  data, indices = np.asarray(data), np.asarray(indices)
  a = axis % data.ndim
  b = batch_dims + indices.ndim if batch_dims < 0 else batch_dims
  q = indices.ndim - b
  out = np.empty(
    data.shape[:a] + indices.shape[b:] + data.shape[a + 1 :], data.dtype
  )
  for pos in np.ndindex(*out.shape):
    before, index_pos, after = pos[:a], pos[a : a + q], pos[a + q :]
    i = int(indices[before[:b] + index_pos])
    if fill is not None and not _in_range([i], [data.shape[a]]):
      out[pos] = fill
    else:
      out[pos] = data[before + (i,) + after]
  return out


def np_gather_elements(
  data: np.ndarray, indices: np.ndarray, axis: int = 0, fill: Any = None
) -> np.ndarray:
  """GatherElements by its definition: position p reads data at p with
  p[axis] replaced by indices[p] (smaller indices dims cover the leading part
  of data; nothing is broadcast). Out-of-range indices raise IndexError, or
  read `fill` when it is given."""
  data, indices = np.asarray(data), np.asarray(indices)
  axis %= data.ndim
  out = np.empty(indices.shape, data.dtype)
  for pos in np.ndindex(*indices.shape):
    src = list(pos)
    src[axis] = int(indices[pos])
    if fill is not None and not _in_range([src[axis]], [data.shape[axis]]):
      out[pos] = fill
    else:
      out[pos] = data[tuple(src)]
  return out


def assert_vmapped(
  vmapped, args: tuple, expected: np.ndarray, context: str, raises: str = ""
) -> None:
  """`vmapped(*args)` equals `expected` jitted and eagerly; with `raises`,
  the eager call raises an IndexError matching it instead (unmapped
  out-of-range indices stay concrete under an eager vmap, and concrete
  indices are checked)."""
  if raises:
    with pytest.raises(IndexError, match=raises):
      vmapped(*args)
  else:
    assert_same(vmapped(*args), expected, context)
  assert_same(jax.jit(vmapped)(*args), expected, context)


def read_counts(reference, data_shape, *args) -> np.ndarray:
  """How often `reference(data, *args)` reads each element of data in range:
  the gradient of the sum of a gather's output with respect to its data (an
  out-of-range index reads a fill, which has no gradient)."""
  size = int(np.prod(data_shape))
  ids = reference(np.arange(size).reshape(data_shape), *args, fill=-1)
  return (
    np.bincount(ids[ids >= 0], minlength=size)
    .reshape(data_shape)
    .astype(np.float64)
  )


def random_dims(rng: np.random.Generator, n: int, low: int, high: int):
  """`n` random dims in [low, high)."""
  return tuple(int(d) for d in rng.integers(low, high, size=n))


@dataclasses.dataclass(frozen=True)
class _Case:
  """A seeded random case; the fields after `indices` are the operator's
  static arguments, in order."""

  seed: int
  data: np.ndarray
  indices: np.ndarray

  @property
  def attrs(self) -> tuple:
    return tuple(getattr(self, f.name) for f in dataclasses.fields(self)[3:])

  def describe(self) -> str:
    named = (
      f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self)[3:]
    )
    return (
      f"seed={self.seed} data {self.data.shape} {self.data.dtype} "
      f"indices {self.indices.shape} {self.indices.dtype} " + " ".join(named)
    )


@dataclasses.dataclass(frozen=True)
class GatherNDCase(_Case):
  batch_dims: int


@dataclasses.dataclass(frozen=True)
class GatherElementsCase(_Case):
  axis: int


@dataclasses.dataclass(frozen=True)
class GatherCase(_Case):
  axis: int
  batch_dims: int


def random_gather_case(
  seed: int,
  dtypes=(np.float32,),
  index_dtypes=(np.int32, np.int64),
  max_rank: int = 5,
  negative: bool = True,
  out_of_range: bool = False,
) -> GatherCase:
  """A random valid Gather-8 case: data rank 1..max_rank, batch_dims in
  [0, min(r - 1, 3)] (written negative, counted from rank(indices), a third
  of the time), axis in [batch_dims, r - 1] (negative half the time),
  indices of rank batch_dims..batch_dims + 2, dims of 1..4. With
  `out_of_range`, about half the indices are out of range on either side."""
  rng = np.random.default_rng(seed)
  r = int(rng.integers(1, max_rank + 1))
  data_shape = random_dims(rng, r, 1, 5)
  b = int(rng.integers(0, min(r - 1, 3) + 1))
  a = int(rng.integers(b, r))
  q = b + int(rng.integers(0, 3))
  lead = data_shape[:b] + random_dims(rng, q - b, 1, 4)
  dtype = dtypes[int(rng.integers(len(dtypes)))]
  index_dtype = index_dtypes[int(rng.integers(len(index_dtypes)))]
  data = random_values(rng, data_shape, dtype)
  if out_of_range:
    indices = half_out_of_range(rng, data_shape[a], lead, index_dtype)
  else:
    indices = random_indices(rng, data_shape[a], lead, index_dtype, negative)
  axis = a - r if rng.random() < 0.5 else a
  batch_dims = b - q if (rng.random() < 1 / 3 and b) else b
  return GatherCase(seed, data, indices, axis, batch_dims)


def random_gather_nd_case(
  seed: int,
  dtypes=(np.float32,),
  index_dtypes=(np.int32, np.int64),
  max_rank: int = 5,
  min_k: int = 0,
  negative: bool = True,
) -> GatherNDCase:
  """A random valid GatherND-8 case: random ranks, batch_dims, tuple length
  k in [min_k, r - b], dims of 1..4 (occasionally 1), index dtypes, and
  negative indices."""
  rng = np.random.default_rng(seed)
  r = int(rng.integers(1, max_rank + 1))
  data_shape = random_dims(rng, r, 1, 5)
  b = int(rng.integers(0, r))  # batch_dims < rank(data)
  q = b + 1 + int(rng.integers(0, 3))  # batch_dims < rank(indices)
  k = int(rng.integers(min(min_k, r - b), r - b + 1))
  lead = data_shape[:b] + random_dims(rng, q - 1 - b, 1, 4)
  dtype = dtypes[int(rng.integers(len(dtypes)))]
  index_dtype = index_dtypes[int(rng.integers(len(index_dtypes)))]
  data = random_values(rng, data_shape, dtype)
  indices = random_indices(
    rng, data_shape[b : b + k], lead, index_dtype, negative
  )
  return GatherNDCase(seed, data, indices, b)


def random_gather_elements_case(
  seed: int,
  dtypes=(np.float32,),
  index_dtypes=(np.int32, np.int64),
  max_rank: int = 4,
  smaller_indices: bool = True,
  negative: bool = True,
) -> GatherElementsCase:
  """A random valid GatherElements case: random rank, axis (negative half the
  time), indices dims along the axis of any size, and in other dims equal to
  data's or (with `smaller_indices`) at most data's."""
  rng = np.random.default_rng(seed)
  r = int(rng.integers(1, max_rank + 1))
  data_shape = random_dims(rng, r, 1, 5)
  axis = int(rng.integers(-r, r))
  a = axis % r
  indices_shape = []
  for d, n in enumerate(data_shape):
    if d == a:
      indices_shape.append(int(rng.integers(1, 6)))
    elif smaller_indices and rng.random() < 0.4:
      indices_shape.append(int(rng.integers(1, n + 1)))
    else:
      indices_shape.append(n)
  dtype = dtypes[int(rng.integers(len(dtypes)))]
  index_dtype = index_dtypes[int(rng.integers(len(index_dtypes)))]
  data = random_values(rng, data_shape, dtype)
  indices = random_indices(
    rng, data_shape[a], tuple(indices_shape), index_dtype, negative
  )
  return GatherElementsCase(seed, data, indices, axis)


def wide_only_in_x64(
  cases: dict[str, tuple[Any, Any]], names: Sequence[str] | None = None
) -> list[Any]:
  """Pytest params for out-of-range index `cases` ({name: (values, dtype)}),
  the 64-bit ones marked to run with x64 on only: with x64 off, JAX itself
  narrows a NumPy int64 array to int32 (wrapping its values) at a jit
  boundary, before jaxops sees it.
  """
  return [
    pytest.param(name, marks=pytest.mark.jax_modes("x64"))
    if np.dtype(cases[name][1]).itemsize == 8
    else name
    for name in (cases if names is None else names)
  ]
