"""Scatter reduction references: naive serial loops in row-major index order
(OpenVINO's reference and CPU plugin order), sharing no code with
`jaxops._reduce`.

`np_scatter_reduce(data, targets, rows, reduction, use_init_val)` applies
`out[t] = f(out[t], row)` one update at a time; the two operators' wrappers
compute the targets with NumPy indexing. Float `mean` divides the serial sum
by the count in the data type, integer `mean` floors a Python-int sum; NaN
propagates under min/max; -0 < +0.
"""

from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np


def _integer(dtype):
  """NumPy's integers and ml_dtypes' narrow ones (int4, uint2: kind 'V')."""
  return bool(jnp.issubdtype(dtype, jnp.integer))


def neutral(reduction, dtype):
  dtype = np.dtype(dtype)
  if reduction in ("sum", "sub", "mean"):
    return dtype.type(0)
  if reduction == "prod":
    return dtype.type(1)
  if dtype == np.bool_:
    return np.bool_(reduction == "min")
  info = ml_dtypes.iinfo(dtype) if _integer(dtype) else ml_dtypes.finfo(dtype)
  return dtype.type(info.max if reduction == "min" else info.min)


def _better(new, old, is_max):
  """Whether `new` replaces `old` (ties keep old; NaN wins; -0 < +0)."""
  if not isinstance(old, (np.integer, np.bool_, bool, int)):
    old, new = float(old), float(new)  # bfloat16 is no np.floating
    if np.isnan(old):
      return False
    if np.isnan(new):
      return True
    if new == old:
      return bool(np.signbit(old) != np.signbit(new)) and bool(
        np.signbit(old) == is_max
      )
  return bool(new > old) if is_max else bool(new < old)


def _combine(reduction, old, new, dtype):
  if dtype == np.bool_:
    ops = {
      "sum": np.logical_or,
      "max": np.logical_or,
      "sub": np.logical_xor,
      "prod": np.logical_and,
      "min": np.logical_and,
    }
    return ops[reduction](old, new)
  with np.errstate(over="ignore", invalid="ignore"):
    if reduction in ("sum", "mean"):
      return (old + new).astype(dtype)
    if reduction == "sub":
      return (old - new).astype(dtype)
    if reduction == "prod":
      return (old * new).astype(dtype)
  return new if _better(new, old, reduction == "max") else old


def np_scatter_reduce(
  data, targets, rows, reduction, use_init_val=True, chunk=None
):
  """`data` (slots, ...) with `rows[i]` reduced into `data[targets[i]]`
  elementwise, i increasing; a target of None is dropped. With `chunk`,
  float sum/sub/prod/mean in the constructed path's order instead
  (`_chunked`)."""
  data = np.asarray(data)
  if chunk is not None:
    assert use_init_val, "the chunked order is pinned with data only"
    return _chunked(data, targets, rows, reduction, chunk)
  out = data.copy()
  dtype = data.dtype
  counts: dict[int, int] = {}
  sums: dict[tuple, int] = {}
  for t, row in zip(targets, rows):
    if t is None:
      continue
    if t not in counts:
      counts[t] = int(use_init_val)
      if not use_init_val and reduction != "none":
        out[t] = neutral(reduction, dtype)
    counts[t] += 1
    if reduction == "none":
      out[t] = row
      continue
    for e in np.ndindex(*np.shape(row)):
      if reduction == "mean" and _integer(dtype):
        key = (t,) + e
        start = int(data[key]) if use_init_val else 0
        sums[key] = sums.get(key, start) + int(np.asarray(row)[e])
        continue
      out[(t,) + e] = _combine(reduction, out[(t,) + e], row[e], dtype)
  if reduction == "mean":
    for t, c in counts.items():
      if _integer(dtype):
        for e in np.ndindex(*out.shape[1:]):
          out[(t,) + e] = sums[(t,) + e] // c
      else:
        out[t] = (out[t] / dtype.type(c)).astype(dtype)
  return out


def _wrap(i, size, mode):
  i = int(i)
  i = i + size if i < 0 else i
  if mode == "clip":
    return min(max(i, 0), size - 1)
  return i if 0 <= i < size else None


def np_scatter_nd_reduce(
  data, indices, updates, reduction, mode="drop", chunk=None
):
  data, indices = np.asarray(data), np.asarray(indices)
  k = indices.shape[-1]
  sizes = data.shape[:k]
  tuples = indices.reshape(int(np.prod(indices.shape[:-1])), k)
  rows = np.asarray(updates).reshape((len(tuples),) + data.shape[k:])
  targets = []
  for tup in tuples:
    wrapped = [_wrap(i, s, mode) for i, s in zip(tup, sizes)]
    bad = any(w is None for w in wrapped)
    if bad:
      targets.append(None)
      continue
    targets.append(int(np.ravel_multi_index(wrapped, sizes)) if k else 0)
  flat = data.reshape((int(np.prod(sizes)),) + data.shape[k:])
  out = np_scatter_reduce(flat, targets, rows, reduction, chunk=chunk)
  return out.reshape(data.shape)


def np_scatter_elements(
  data,
  indices,
  updates,
  axis=0,
  reduction="none",
  use_init_val=True,
  mode="drop",
  chunk=None,
):
  data, indices = np.asarray(data), np.asarray(indices)
  updates = np.asarray(updates)
  axis = axis % data.ndim
  targets, rows = [], []
  for p in np.ndindex(*indices.shape):
    w = _wrap(indices[p], data.shape[axis], mode)
    q = list(p)
    q[axis] = w
    targets.append(
      None if w is None else int(np.ravel_multi_index(q, data.shape))
    )
    rows.append(updates[p])
  out = np_scatter_reduce(
    data.reshape(-1), targets, rows, reduction, use_init_val, chunk
  )
  return out.reshape(data.shape)


def _chunked(data, targets, rows, reduction, chunk):
  """Float sum/sub/prod/mean in the constructed path's order
  (docs/semantics.md#reduction-order): each slot's updates, in index order,
  fold in consecutive chunks of `chunk` -- the first from data,
  each later one from its first update -- and the chunk results then fold
  in order. Up to `chunk` updates per slot it is the serial order."""
  dtype = data.dtype
  op = "prod" if reduction == "prod" else "sum"
  runs: dict[int, list] = {}
  for t, row in zip(targets, rows):
    if t is not None:
      runs.setdefault(t, []).append(-row if reduction == "sub" else row)
  out = data.copy()
  for t, run in runs.items():
    results = []
    for start in range(0, len(run), chunk):
      part = run[start : start + chunk]
      acc = data[t] if start == 0 else part[0]
      for row in part if start == 0 else part[1:]:
        acc = _combine(op, acc, row, dtype)
      results.append(acc)
    total = results[0]
    for acc in results[1:]:
      total = _combine(op, total, acc, dtype)
    if reduction == "mean":
      total = (total / dtype.type(len(run) + 1)).astype(dtype)
    out[t] = total
  return out


# A quiet NaN with a payload and one with the sign bit, as bits, per dtype.
_NAN_BITS = {
  "float8_e5m2": (0x7D, 0xFE),
  "float16": (0x7E01, 0xFE00),
  "bfloat16": (0x7FC1, 0xFFC0),
  "float32": (0x7FC00001, 0xFFC00000),
  "float64": (0x7FF8000000000001, 0xFFF8000000000000),
}


def nan_bits_case(dtype, reduction, use_init_val=True):
  """`(data, targets, updates, expected)` for min/max on NaNs with payloads
  (docs/semantics.md#reduction-minmax): six slots, three updates.

  Slots 0, 1 and 5 (a payload NaN, a negative NaN, -0.0) are not targeted
  and keep their bits; slot 2 (0) takes 1; slot 3 (a payload NaN) takes 5,
  and keeps its NaN where data takes part (NaN wins); slot 4 (1) takes a
  payload NaN and holds the canonical NaN.
  """
  dtype = np.dtype(dtype)
  unsigned = np.dtype(f"uint{8 * dtype.itemsize}")
  payload, negative = _NAN_BITS[dtype.name]
  data = np.array([0, 0, 0, 0, 1, -0.0], dtype)
  data.view(unsigned)[[0, 1, 3]] = [payload, negative, payload]
  updates = np.array([1, 5, 0], dtype)
  updates.view(unsigned)[2] = payload
  expected = data.copy()
  expected[2] = 0 if reduction == "min" and use_init_val else 1
  if not use_init_val:
    expected[3] = 5
  expected[4] = np.array(np.nan).astype(dtype)
  return data, np.array([2, 3, 4]), updates, expected
