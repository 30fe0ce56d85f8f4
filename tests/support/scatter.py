"""ScatterNDUpdate-3 test support: the NumPy reference and a seeded case
generator (used by the unit, transformation and conformance tests).

The reference is deliberately naive (a Python loop over index tuples with
NumPy basic indexing), so that it is obviously right and shares no code with
the `lax.scatter` formulation or the duplicate resolution under test.
"""

from __future__ import annotations

import numpy as np

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
