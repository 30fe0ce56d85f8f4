"""ScatterNDUpdate-3 (OpenVINO opset3; ONNX ScatterND with reduction "none").

Semantics, decisions and errata: docs/semantics.md#scatter-nd-update (last
tuple wins: #duplicates; k = 0: #snu-1; the (1,) form of a 0-d update:
#snu-2; out-of-range modes: #scatter-modes). Design:
docs/design.md#lowering-scatter-nd-update.

The update is one `.at[].set` (one `lax.scatter`, negative indices not wrapped)
that always promises unique indices, and the promise is kept honest: either the
caller made it (`unique_indices=True`), or every tuple that is not the winner
of its target (a loser to a later duplicate, or out of range under
`mode="drop"`) is redirected to its own negative index `-1 - position`, which
the scatter drops. The winners are found on the linear slot of each tuple, so
the scatter then writes rows of data viewed as `(prod(data.shape[:k]),) +
data.shape[k:]`, one row index per tuple (the k indexed dims stay separate when
that index would overflow); that row write is `jaxops._rows.write_rows`, whose
batching rule keeps one row index under `vmap` (docs/design.md#batched-write).
Finding the winners is `jaxops._duplicates`. The index work only ever sees
integers and runs outside the derivative rule; the derivative is the same
scatter of the tangents (`jaxops._linear`, docs/design.md#derivatives)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxops import (
  _checks,
  _common,
  _duplicates,
  _export,
  _order,
  _reduce,
  _values,
)
from jaxops._common import ArrayLike, Shape, ShapeLike, op_error, shape_str
from jaxops._linear import linear_custom_jvp, linear_with_transpose
from jaxops._rows import write_rows

OP = "ScatterNDUpdate-3"
# The version a call with a reduction implements, and names in its errors;
# reduction "none" is ScatterNDUpdate-3, as OpenVINO converts it
# (docs/semantics.md#scatter-reductions).
OP_REDUCE = "ScatterNDUpdate-15"
REDUCTIONS = ("none", "sum", "sub", "prod", "min", "max")


def _op_of(reduction: Any) -> str:
  """The operator a call with `reduction` implements: ScatterNDUpdate-3 for
  "none", ScatterNDUpdate-15 for any other value (a bad one included: only
  -15 has the attribute)."""
  return OP if isinstance(reduction, str) and reduction == "none" else OP_REDUCE


def _expected_updates_shape(data_shape: Shape, indices_shape: Shape) -> Shape:
  return indices_shape[:-1] + data_shape[indices_shape[-1] :]


def scatter_nd_update_shape(
  data_shape: ShapeLike,
  indices_shape: ShapeLike,
  updates_shape: ShapeLike,
  *,
  _op: str = OP,
) -> Shape:
  """Output shape of ScatterNDUpdate-3 (data's); raises ValueError otherwise.

  Requires `data` rank r >= 1, `indices` rank q >= 1, `k = indices_shape[-1]
  <= r` and `updates_shape == indices_shape[:-1] + data_shape[k:]` exactly (no
  broadcasting). When that expected shape is `()`, a one-element `(1,)` is
  accepted too. Every dim may be a symbolic dim of `jax.export` but `k`,
  the index tuple length (a TypeError); updates' dims must then be the
  same dims as the expected ones.

  The rule is ScatterNDUpdate-15's too; `_op` (private) is the name its
  errors give.

  >>> scatter_nd_update_shape((1000, 256, 10, 15), (25, 125, 3), (25, 125, 15))
  (1000, 256, 10, 15)
  """
  op = _op
  data_shape = _common.shape_dims(data_shape, op, "data")
  indices_shape = _common.shape_dims(indices_shape, op, "indices")
  updates_shape = _common.shape_dims(updates_shape, op, "updates")
  r, q = len(data_shape), len(indices_shape)
  shapes = _common.shapes_context(
    data=data_shape, indices=indices_shape, updates=updates_shape
  )
  _common.check_rank(r, op, "data", shapes)
  _common.check_rank(q, op, "indices", shapes)
  k = _common.concrete_dim(
    indices_shape[-1], op, "indices shape[-1] (the index tuple length k)"
  )
  if k > r:
    raise op_error(
      op, f"indices.shape[-1]={k} must be <= rank(data)={r} {shapes}"
    )
  expected = _expected_updates_shape(data_shape, indices_shape)
  if updates_shape != expected and not (
    expected == () and updates_shape == (1,)
  ):
    one_element = " (or (1,))" if expected == () else ""
    raise op_error(
      op,
      f"updates shape {shape_str(updates_shape)} must equal "
      f"indices.shape[:-1] + data.shape[k:] = {shape_str(expected)}"
      f"{one_element} with k={k}; updates are not broadcast {shapes}",
    )
  return data_shape


def _scatter(
  data: jax.Array,
  indices: jax.Array,
  updates: jax.Array,
  mode: lax.GatherScatterMode,
) -> jax.Array:
  """`data` with `updates` (n,) + data.shape[k:] written at unique `indices`:
  (n,) rows of the k indexed dims merged into one, or (n, k) tuples. Negative
  indices are redirected losers, out of range: never wrapped."""
  # A tangent may arrive as a NumPy array (a zero tangent instantiated by
  # older JAX versions), which has no `.at`.
  data = jnp.asarray(data)
  shape = data.shape
  k = data.ndim - (updates.ndim - 1)
  if indices.ndim == 1:
    # Batched by flattening the batch into the row index (jaxops._rows).
    # Rows come with a strategy, whose losers are redirected out of range:
    # the mode is "drop".
    rows = data.reshape((math.prod(shape[:k]),) + shape[k:])
    return write_rows(rows, indices, updates).reshape(shape)
  where = tuple(indices[:, j] for j in range(k))
  # `.at[]` takes a GatherScatterMode too; its annotation says str only.
  scatter_mode: Any = mode
  out = data.at[where].set(
    updates,
    mode=scatter_mode,
    indices_are_sorted=False,
    unique_indices=True,
    wrap_negative_indices=False,
  )
  return out.reshape(shape)


# Linear in (data, updates): the tangent is the same scatter of the tangents,
# whose transpose is a zeroing scatter and a gather (docs/design.md).
_scatter_unique = linear_custom_jvp(
  _scatter, nondiff_argnums=(3,), linear_argnums=(0, 2), moves=True
)


def _dropped(op: str, sizes: tuple[int, ...]) -> str:
  """checkify's message for a dropped tuple."""
  return (
    f"{op}: an index tuple is out of range for the indexed dims "
    f"{shape_str(sizes)} (valid: [-s, s-1]); it was dropped"
  )


def _in_range(
  indices: jax.Array,
  sizes: tuple[int, ...],
  mode: lax.GatherScatterMode,
  op: str = OP,
) -> tuple[jax.Array, jax.Array]:
  """(n, k) signed tuples with negatives wrapped and `mode` applied ("clip"
  clamps), and whether each is in range (n,); `op` names checkify's
  message."""
  n, k = indices.shape
  indices = _common.prepare_indices(indices, sizes)
  # Run-time values where a size is symbolic.
  bounds = lambda dtype: _common.dim_values(sizes, dtype).reshape(1, k)
  if jnp.issubdtype(indices.dtype, jnp.unsignedinteger):
    # Losers are redirected to negative indices, so go signed; capping at the
    # size first keeps an out-of-range value out of range (2**32 + 1 must not
    # become 1).
    signed = jnp.int64 if indices.dtype == jnp.uint64 else jnp.int32
    indices = jnp.minimum(indices, bounds(indices.dtype)).astype(signed)
  sizes_arr = bounds(indices.dtype)
  zero = np.zeros((), indices.dtype)
  in_bounds = jnp.ones((n,), bool)  # clipped, or promised
  if mode == lax.GatherScatterMode.CLIP:
    indices = jnp.clip(indices, zero, sizes_arr - 1)
  elif mode == lax.GatherScatterMode.FILL_OR_DROP:
    indices = _checks.checked_indices(indices, sizes, _dropped(op, sizes))
    # Reinterpreted as unsigned, a negative index is above every size: one
    # compare per coordinate, and-ed column by column rather than reduced
    # over the last axis, so that they fuse with the wrap and the linear
    # index into one loop (docs/design.md#index-fusion).
    unsigned = jnp.dtype(f"uint{jnp.iinfo(indices.dtype).bits}")
    below = lax.bitcast_convert_type(indices, unsigned) < bounds(unsigned)
    for j in range(k):
      in_bounds = below[:, j] if j == 0 else in_bounds & below[:, j]
  return indices, in_bounds


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _scatter_indices(
  indices: jax.Array,
  sizes: tuple[int, ...],
  mode: lax.GatherScatterMode,
  strategy: _duplicates.Strategy | None,
) -> jax.Array:
  """The indices the final unique scatter uses: (n, k) tuples, or with a
  `strategy` (n,) rows (tuples when a row index would overflow).

  Wraps negative indices, applies `mode` ("clip" clamps here), and with a
  `strategy` (no uniqueness promise) redirects every tuple that is not the
  winner of its target -- losers and out-of-range tuples -- to the distinct
  out-of-range index `-1 - position`. Jitted so that an eager call costs one
  dispatch; it only ever sees integer arrays, so no derivative is taken
  through it.
  """
  n = indices.shape[0]
  indices, in_bounds = _in_range(indices, sizes, mode)
  if strategy is None:
    # The scatter's own out-of-range test drops what "drop" drops.
    return indices
  redirected = -1 - lax.iota(indices.dtype, n)
  if strategy.search is not _duplicates.Search.COLUMNS:
    # The winner among out-of-range tuples writes to the slot past the end,
    # which the scatter drops.
    target = _duplicates.linear_targets(
      indices, in_bounds, sizes, strategy.target_dtype
    )
    last = _duplicates.last_of_targets(target, math.prod(sizes), strategy)
    return jnp.where(last, target, redirected.astype(target.dtype))
  wins = _duplicates.winners_by_columns(indices, in_bounds, sizes)
  row_dtype = _duplicates.int_dtype_for(math.prod(sizes))
  if row_dtype is None:
    return indices.at[:, 0].set(jnp.where(wins, indices[:, 0], redirected))
  rows = _common.linear_index(indices, sizes, row_dtype)
  return jnp.where(wins, rows, redirected.astype(row_dtype))


@functools.partial(jax.jit, static_argnums=(1, 2))
def _targets(
  indices: jax.Array, sizes: tuple[int, ...], mode: lax.GatherScatterMode
) -> jax.Array:
  """The linear slot of each tuple (n,), `prod(sizes)` where it is dropped."""
  n = indices.shape[0]
  slots = math.prod(sizes)
  dtype = _duplicates.int_dtype_for(slots + n)
  if dtype is None:
    raise op_error(
      OP_REDUCE,
      f"reductions need {slots} + {n} to fit an index type; enable x64",
    )
  if not sizes:
    return jnp.zeros((n,), dtype)
  indices, in_bounds = _in_range(indices, sizes, mode, OP_REDUCE)
  valid = jnp.where(in_bounds[:, None], indices, 0)
  return jnp.where(
    in_bounds,
    _common.linear_index(valid, sizes, dtype, by_columns=True),
    _common.dim_value(slots, dtype),
  )


def _reduce_tuples(
  data, tuples, updates, *, sizes, mode, reduction, unique_indices, serial=False
):
  """The reduction of `updates` (the tuples' batch dims + data's slice
  dims) into data at `tuples` (n, k); `serial`: as for
  `_reduce.reduce_rows`, which takes the updates as n rows."""
  out = _reduce.reduce_rows(
    data.reshape(math.prod(sizes), -1),
    _targets(tuples, sizes, mode),
    updates,
    reduction,
    unique_indices=unique_indices,
    serial=serial,
  )
  return out.reshape(data.shape)


def _sum_transpose(tuples, ct, *, sizes, updates_shape, mode, reduction):
  """`_reduce.sum_transpose` on the rows of data."""
  ct_data, ct_updates = _reduce.sum_transpose(
    ct.reshape(math.prod(sizes), -1), _targets(tuples, sizes, mode), reduction
  )
  return ct_data.reshape(ct.shape), ct_updates.reshape(updates_shape)


def scatter_nd_update(
  data: ArrayLike,
  indices: ArrayLike,
  updates: ArrayLike,
  *,
  reduction: str = "none",
  mode: _common.ScatterMode = "drop",
  unique_indices: bool = False,
  _strategy: _duplicates.Strategy | None = None,
) -> jax.Array:
  """A copy of `data` with slices replaced by `updates` (ScatterNDUpdate-3).

  With `k = indices.shape[-1]`, for every index tuple position `i`::

    out = copy(data)
    out[*indices[i], ...] = updates[i, ...]

  `k == rank(data)` updates single elements, `k < rank(data)` whole slices
  `data.shape[k:]`. Duplicate tuples: the last one (in row-major order of
  `indices.shape[:-1]`) wins, on every backend (see the module docstring for
  how this is guaranteed without relying on XLA's scatter order).

  Args:
    data: array of rank r >= 1, any dtype.
    indices: integer array (int32/int64; other int widths accepted) of rank
      q >= 1, shape `(..., k)` with `k <= r`. Values in `[-s, s-1]` for the
      dim of size `s` they index; negative values count from the end.
    updates: array of shape `indices.shape[:-1] + data.shape[k:]` exactly (not
      broadcast) and data's dtype (a TypeError otherwise; Python scalars and
      lists are converted to data's dtype when that keeps their kind). When
      that shape is `()`, a one-element `(1,)` array is accepted too.
    reduction: "none" (default: the last tuple wins, ScatterNDUpdate-3) or
      "sum", "sub", "prod", "min", "max": `out[t] = f(out[t], updates[i])`
      in increasing i (ScatterNDUpdate-15,
      docs/semantics.md#scatter-reductions). Errors name the version the
      call implements.
    mode: what an out-of-range index tuple does under `jit`, where raising is
      impossible. `"drop"` (default) skips that tuple: nothing outside `data`
      is ever written. `"clip"` clamps each index into range.
      `"promise_in_bounds"` lets XLA assume every index is valid. Concrete
      (non-traced) indices are checked eagerly and raise `IndexError` (except
      with `"clip"`); under
      `jax.experimental.checkify` with `checkify.user_checks` out-of-range
      tuples are reported by name.
    unique_indices: keyword-only promise that no two in-range tuples address
      the same target. It skips the duplicate resolution (one scatter, no
      winner search); a broken promise gives an unspecified winner.
    _strategy: private; the duplicate resolution to use instead of
      `jaxops._duplicates.choose_strategy`, on every platform (tests force
      each one).

  Returns:
    Array of data's shape and dtype.

  Example:
    >>> import jax.numpy as jnp, jaxops
    >>> data = jnp.array([1, 2, 3, 4, 5, 6, 7, 8], dtype=jnp.int32)
    >>> indices = jnp.array([[4], [3], [1], [7]], dtype=jnp.int32)
    >>> updates = jnp.array([9, 10, 11, 12], dtype=jnp.int32)
    >>> jaxops.scatter_nd_update(data, indices, updates)
    Array([ 1, 11,  3, 10,  9,  6,  7, 12], dtype=int32)
    >>> jaxops.scatter_nd_update(data, jnp.array([[0], [0]], dtype=jnp.int32),
    ...                          jnp.array([5, 6], dtype=jnp.int32))[:2]
    Array([6, 2], dtype=int32)

  Implements OpenVINO ScatterNDUpdate-3 (= ONNX ScatterND, reduction "none")
  and, with a reduction, ScatterNDUpdate-15 (= ONNX ScatterND-18).
  """
  if _export.active():
    return _exported(data, indices, updates, reduction, mode, unique_indices)
  op = _op_of(reduction)
  data = _values.as_data(data, op)
  indices = _common.as_indices(indices, op)
  updates = _values.as_updates(updates, data.dtype, op)
  scatter_nd_update_shape(data.shape, indices.shape, updates.shape, _op=op)
  _reduce.check_reduction(op, reduction, REDUCTIONS, data.dtype)
  scatter_mode = _common.canonicalize_mode(
    mode, op, ("drop", "clip", "promise_in_bounds")
  )
  if not isinstance(unique_indices, (bool, np.bool_)):
    raise op_error(
      op,
      f"unique_indices must be a Python bool, got "
      f"{type(unique_indices).__name__} {unique_indices!r}",
      TypeError,
    )
  k = indices.shape[-1]
  sizes = data.shape[:k]
  if scatter_mode != lax.GatherScatterMode.CLIP:
    _common.check_concrete_bounds(indices, sizes, op)
  n = math.prod(indices.shape[:-1])
  if n == 0 or data.size == 0:
    # Nothing to write (every index into an empty dim is out of range).
    return data
  if reduction != "none":
    # Updates keep their shape: `reduce_rows` takes them as (n, ...) rows.
    # XLA would fold constant indices (a model's initializers) through the
    # product's derivative, its sort included, at compile time
    # (docs/design.md#constant-indices).
    tuples = lax.optimization_barrier(
      jnp.reshape(_values.index_array(indices), (n, k))
    )
    reduce: Callable[..., jax.Array] = functools.partial(
      _reduce_tuples,
      sizes=sizes,
      mode=scatter_mode,
      reduction=reduction,
      unique_indices=bool(unique_indices),
    )
    if _reduce.has_serial(data.dtype, reduction, bool(unique_indices)):
      # XLA:CPU's serial scatter, or the sorted fold and the integer key.
      reduce = _order.ordered(
        functools.partial(reduce, serial=True),
        functools.partial(reduce, serial=False),
      )
    if _reduce.transposes_by_gather(data.dtype, reduction):
      # Transposed by a gather, not through the fold and the layout's
      # gathers and writes (docs/design.md#fold-cost).
      transpose = functools.partial(
        _sum_transpose,
        sizes=sizes,
        updates_shape=updates.shape,
        mode=scatter_mode,
        reduction=reduction,
      )
      return linear_with_transpose(reduce, transpose, data, tuples, updates)
    return reduce(data, tuples, updates)
  updates = jnp.reshape(updates, (n,) + data.shape[k:])
  if k == 0:
    # Every tuple addresses all of data: the last one wins.
    return updates[-1]

  tuples = jnp.reshape(_values.index_array(indices), (n, k))
  if unique_indices or n == 1:
    return _write_unique(data, tuples, updates, sizes, scatter_mode)
  constructed = functools.partial(
    _write_last,
    sizes=sizes,
    mode=scatter_mode,
    strategy=_strategy or _duplicates.choose_strategy(n, sizes),
  )
  if _duplicates.int_dtype_for(math.prod(sizes)) is None:
    # No row index holds the slots: the coordinates' sort (COLUMNS).
    return constructed(data, tuples, updates)
  serial = functools.partial(_write_serial, sizes=sizes, mode=scatter_mode)
  return _order.by_platform(
    serial,
    constructed,
    data,
    tuples,
    updates,
    # A forced strategy is a test of the constructed path.
    only_constructed=True if _strategy is not None else None,
  )


def _write_unique(data, tuples, updates, sizes, mode):
  """The write of tuples that cannot repeat (promised, or only one)."""
  indices = _scatter_indices(tuples, sizes, mode, None)
  # Dropped tuples must be dropped; clipped or promised ones are in range.
  final_mode = (
    mode
    if mode == lax.GatherScatterMode.FILL_OR_DROP
    else lax.GatherScatterMode.PROMISE_IN_BOUNDS
  )
  return _scatter_unique(data, indices, updates, final_mode)


def _write_last(data, tuples, updates, *, sizes, mode, strategy):
  """Last tuple wins by construction: the losers are redirected out of
  range by the winner search, and the write promises unique indices."""
  indices = _scatter_indices(tuples, sizes, mode, strategy)
  return _scatter_unique(
    data, indices, updates, lax.GatherScatterMode.FILL_OR_DROP
  )


def _write_serial(data, tuples, updates, *, sizes, mode):
  """Last tuple wins because XLA:CPU writes in index order: one write of
  the rows, repeats and all (`jaxops._order`)."""
  rows = _serial_rows(tuples, sizes, mode)
  shape = data.shape
  flat = data.reshape((math.prod(sizes),) + shape[len(sizes) :])
  return write_rows(flat, rows, updates, serial=True).reshape(shape)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _serial_rows(
  indices: jax.Array, sizes: tuple[int, ...], mode: lax.GatherScatterMode
) -> jax.Array:
  """The linear row of each tuple (n,) after `mode`; out of
  [0, prod(sizes)) where dropped."""
  dtype = _duplicates.int_dtype_for(math.prod(sizes))
  if _unsigned_rows_apply(indices, sizes, mode):
    rows = _unsigned_rows(indices, sizes)
    if np.dtype(dtype).itemsize == rows.dtype.itemsize:
      # Past the end, or negative where the top bit is set.
      return lax.bitcast_convert_type(rows, dtype)
    # int64 indices into rows of int32: past the end, then narrowed.
    past = np.asarray(math.prod(sizes), rows.dtype)
    return jnp.minimum(rows, past).astype(dtype)
  indices, in_bounds = _in_range(indices, sizes, mode)
  valid = jnp.where(in_bounds[:, None], indices, np.zeros((), indices.dtype))
  rows = _common.linear_index(valid, sizes, dtype, by_columns=True)
  return jnp.where(in_bounds, rows, np.asarray(-1, dtype))


def _unsigned_rows_apply(indices, sizes, mode) -> bool:
  """Whether `_unsigned_rows` computes the rows: dropped tuples of one or
  two static dims, signed indices of at least 32 bits whose type holds the
  number of rows (so that its unsigned type holds twice that)."""
  dtype = indices.dtype
  return (
    mode == lax.GatherScatterMode.FILL_OR_DROP
    and len(sizes) in (1, 2)
    and all(map(_export.is_int, sizes))
    and jnp.issubdtype(dtype, jnp.signedinteger)
    and jnp.iinfo(dtype).bits >= 32
    and math.prod(sizes) <= jnp.iinfo(dtype).max
  )


def _unsigned_rows(indices: jax.Array, sizes: tuple[int, ...]) -> jax.Array:
  """The linear row of each tuple of one or two dims, as the unsigned type
  of the indices' width: at least prod(sizes) where dropped. In at most as
  many integer operations as the tuples and rows have bytes: XLA:CPU then
  counts the loop memory-bound and runs it on one thread below 256 KiB of
  rows, where the usual wrap, range test and select (16 operations against
  12 bytes a pair) were split over two threads, whose hand-off cost more
  than the loop (docs/design.md#index-fusion).

  As unsigned, a negative i is above every size, so min(i, i + s) is the
  wrapped index where -s <= i < s and at least s elsewhere. A pair's row is
  min(w0, s0) * s1 + (w1 if w1 < s1 else s0 * s1): at least s0 * s1 when
  either coordinate is out of range, and below 2 * s0 * s1, which the
  unsigned type holds (`_unsigned_rows_apply`). checkify checks the tuples
  before the wrap."""
  indices = _checks.checked_indices(
    indices, sizes, _dropped(OP, sizes), negatives_wrap=True
  )
  unsigned = np.dtype(f"uint{jnp.iinfo(indices.dtype).bits}")
  as_unsigned = lax.bitcast_convert_type(indices, unsigned)
  wrapped = []
  for j, size in enumerate(sizes):
    column = as_unsigned[:, j]
    wrapped.append(jnp.minimum(column, column + np.asarray(size, unsigned)))
  if len(sizes) == 1:
    return wrapped[0]
  (s0, s1), (w0, w1) = sizes, wrapped
  first = jnp.minimum(w0, np.asarray(s0, unsigned))
  last = jnp.where(
    w1 < np.asarray(s1, unsigned), w1, np.asarray(s0 * s1, unsigned)
  )
  return first * np.asarray(s1, unsigned) + last


# Export primitive (docs/export.md#scatter-nd-update) -------------------------
# `jaxops_scatter_nd_update(data, indices, updates; reduction, mode,
# unique_indices)`,
# updates exactly `indices.shape[:-1] + data.shape[k:]`; lowered to ONNX by
# jaxops/onnx/_scatter_nd_update.py.


def _export_abstract(data, indices, updates, **params):
  op = _op_of(params["reduction"])
  rule = functools.partial(scatter_nd_update_shape, _op=op)
  return _export.abstract_eval(rule, op)(data, indices, updates)


def _export_batch(args, dims, **params):
  data, indices, updates = args
  data_dim, indices_dim, updates_dim = dims
  if not _export.mapped(indices_dim):
    # Same tuples for every batch position: the vmapped dim goes last in data
    # (so it is part of every updated slice) and in updates.
    size = _export.batch_size(args, dims)
    data, updates = (
      _export.move_to(x, d, -1)
      if _export.mapped(d)
      else _export.broadcast_back(x, size)
      for x, d in ((data, data_dim), (updates, updates_dim))
    )
    out = scatter_nd_update_p.bind(data, indices, updates, **params)
    return out, out.ndim - 1
  # Tuples per batch position: each gets its position as a leading
  # coordinate, so positions never collide and the order within one is kept.
  data, indices, updates = _export.batched_in_front(args, dims)
  if jnp.iinfo(indices.dtype).bits < 32:  # room for every position
    indices = indices.astype(jnp.int32)
  position = lax.broadcasted_iota(indices.dtype, indices.shape[:-1] + (1,), 0)
  indices = lax.concatenate([position, indices], indices.ndim - 1)
  return scatter_nd_update_p.bind(data, indices, updates, **params), 0


scatter_nd_update_p = _export.primitive(
  "jaxops_scatter_nd_update", scatter_nd_update, _export_abstract, _export_batch
)


def _exported(
  data: Any,
  indices: Any,
  updates: Any,
  reduction: Any,
  mode: Any,
  unique_indices: Any,
) -> jax.Array:
  """`scatter_nd_update` while exporting: one `scatter_nd_update_p`, or the
  normal computation where the node cannot express the call: k = 0 (OpenVINO's
  CPU plugin is wrong on it), empty scatters and zero-size data."""
  params = dict(reduction=reduction, mode=mode, unique_indices=unique_indices)
  data, indices, updates = _export.validated(
    lambda d, i, u: scatter_nd_update(d, i, u, **params),
    data,
    indices,
    updates,
  )
  k = indices.shape[-1]
  n = math.prod(indices.shape[:-1])
  if k == 0 or n == 0 or data.size == 0:
    return _export.normal(scatter_nd_update, data, indices, updates, **params)
  expected = _expected_updates_shape(data.shape, indices.shape)
  if updates.shape != expected:
    # The (1,) form of a 0-d update: both runtimes reject it.
    updates = jnp.reshape(updates, expected)
  return scatter_nd_update_p.bind(
    data,
    indices,
    updates,
    reduction=reduction,
    mode=mode,
    unique_indices=bool(unique_indices),
  )
