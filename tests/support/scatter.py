"""ScatterNDUpdate-3 test support: the NumPy reference and a seeded case
generator (used by the unit, transformation and conformance tests); and for
both scatters' tables of bad input, the arrays of a row (`arrays`) and the
bad calls they share (`bad_calls`).

The reference is deliberately naive (a Python loop over index tuples with
NumPy basic indexing), so that it is obviously right and shares no code with
the `lax.scatter` formulation or the duplicate resolution under test.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from tests.support import rejections
from tests.support.generators import random_indices


def np_scatter_nd_update(data, indices, updates, mode="drop") -> np.ndarray:
  """ScatterNDUpdate applied tuple by tuple, in row-major order (so the last
  duplicate wins); out-of-range tuples are dropped, or clipped with
  `mode="clip"`."""
  data, indices = np.asarray(data), np.asarray(indices)
  out = data.copy()
  k = indices.shape[-1]
  tuples = indices.reshape(-1, k).astype(np.int64)
  rows = np.asarray(updates).reshape((len(tuples),) + data.shape[k:])
  sizes = np.asarray(data.shape[:k], np.int64)
  for tup, row in zip(tuples, rows):
    tup = np.where(tup < 0, tup + sizes, tup)
    if mode == "clip":
      tup = np.clip(tup, 0, sizes - 1)
    elif np.any((tup < 0) | (tup >= sizes)):
      continue
    out[tuple(tup)] = row
  return out


def random_case(
  rng,
  data_shape,
  lead_shape,
  k,
  *,
  unique,
  dtype=np.float64,
  index_dtype=np.int64,
):
  """(data, indices, updates): valid indices in [-s, s-1] (negatives
  included), unique tuples if asked, and normal values scaled by 10."""
  indices = random_indices(
    rng, data_shape[:k], lead_shape, index_dtype, unique=unique
  )
  updates_shape = tuple(lead_shape) + tuple(data_shape[k:])
  data = (rng.standard_normal(data_shape) * 10).astype(dtype)
  updates = (rng.standard_normal(updates_shape) * 10).astype(dtype)
  return data, indices, updates


def arrays(avals: str) -> tuple[tuple[tuple[int, ...], np.dtype], ...]:
  """`(shape, dtype)` of each array of `avals`, written as JAX prints
  abstract values: "f32[4,3] i32[2,1] bool[]"."""
  out = []
  for aval in avals.split():
    match = re.fullmatch(r"([a-z]+)(\d*)\[([\d,]*)\]", aval)
    assert match, aval
    kind, bits, dims = match.groups()
    dtype = np.dtype(np.bool_ if kind == "bool" else f"{kind}{int(bits) // 8}")
    out.append((tuple(int(d) for d in dims.split(",") if d), dtype))
  return tuple(out)


def bad_calls(
  one_index: Any,
  ragged_indices: tuple[Any, Any, Any],
  ragged_updates: tuple[Any, Any, Any],
  index_list_call: Callable[[list], tuple[Any, Any, Any]],
) -> dict[str, tuple]:
  """The bad calls a demanding new user tries on either scatter: what is
  not an array, ragged lists, updates data's dtype does not hold, index
  lists no int64 array holds (the tables of `rejections`), as rows
  `(data, indices, updates, expectation)` for
  `rejections.assert_scatter_rejected`. The operators differ in the form
  of their indices:

  Args:
    one_index: indices that write one update into data's element 0.
    ragged_indices, ragged_updates: (data, indices, updates) with a ragged
      nested list as indices, or as updates.
    index_list_call: (data, indices, updates) with a given list of index
      tuples as indices, one update per tuple.
  """
  return {
    **{
      f"data_{name}": (value, one_index, np.ones(1, np.float32), (exc, regex))
      for name, (value, exc, regex) in rejections.BAD_DATA.items()
    },
    "ragged_index_list": (
      *ragged_indices,
      (ValueError, rejections.ragged("indices")),
    ),
    "ragged_updates_list": (
      *ragged_updates,
      (ValueError, rejections.ragged("updates")),
    ),
    **{
      f"updates_{name}": (data, one_index, updates, expectation)
      for name, (data, updates, expectation) in rejections.BAD_UPDATES.items()
    },
    **{
      f"index_list_{name}": (*index_list_call(indices), (IndexError, regex))
      for name, (indices, regex) in rejections.BIG_INDEX_LISTS.items()
    },
  }
