"""ScatterElementsUpdate-12 (OpenVINO opset12; ONNX ScatterElements-18).

Semantics and decisions: docs/semantics.md#scatter-elements-update (update
order, bool rules, `mean` rounding, `use_init_val`, NaN under min/max:
#scatter-reductions; out-of-range modes: #scatter-modes). Design:
docs/design.md#scatter-reductions.

Every update element gets the linear slot of the data element it addresses
(its own coordinates, with `indices` along `axis`), so the operator is the
row-width-1 case of the reduction engine `jaxops._reduce` that ScatterNDUpdate
uses too: `none` resolves duplicates last-wins with `jaxops._duplicates` and
writes once with unique indices; the reductions are `_reduce.reduce_rows`.
A float sum's transpose is a gather (`_linear.linear_with_transpose`), by
rows where the indices are shared; without the initial value, the forward's
mask of the targeted slots zeroes data's cotangent there
(docs/design.md#sum-without-init).
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.interpreters import ad

from jaxops import (
  _checks,
  _common,
  _duplicates,
  _export,
  _linear,
  _order,
  _reduce,
  _values,
)
from jaxops._common import (
  ArrayLike,
  IntLike,
  Shape,
  ShapeLike,
  op_error,
  shape_str,
)
from jaxops._rows import write_rows

OP = "ScatterElementsUpdate-12"
REDUCTIONS = ("none", "sum", "prod", "min", "max", "mean")

# Update elements from which shared indices take the row fold
# (docs/design.md#shared-indices): below, compiling its second branch costs
# more than the smaller sort saves.
ROWS_MIN_ELEMENTS = 1 << 16


def scatter_elements_update_shape(
  data_shape: ShapeLike,
  indices_shape: ShapeLike,
  updates_shape: ShapeLike,
  axis: IntLike = 0,
) -> Shape:
  """Output shape of ScatterElementsUpdate-12 (data's).

  Raises ValueError unless data has rank r >= 1, indices and updates have
  rank r and the same shape, `axis` is in `[-r, r-1]`, and
  `indices_shape[d] <= data_shape[d]` for every `d != axis` (along `axis`
  indices may be longer: duplicates). Every dim may be a symbolic dim of
  `jax.export`; `indices_shape[d] <= data_shape[d]` (d != axis) must then
  hold for every size of them.

  >>> scatter_elements_update_shape((3, 3), (2, 3), (2, 3), axis=0)
  (3, 3)
  """
  data_shape = _common.shape_dims(data_shape, OP, "data")
  indices_shape = _common.shape_dims(indices_shape, OP, "indices")
  updates_shape = _common.shape_dims(updates_shape, OP, "updates")
  shapes = _common.shapes_context(
    data=data_shape, indices=indices_shape, updates=updates_shape
  )
  r = len(data_shape)
  _common.check_rank(r, OP, "data", shapes)
  _common.check_same_rank(data_shape, indices_shape, OP, shapes)
  if updates_shape != indices_shape:
    raise op_error(
      OP,
      f"updates shape {shape_str(updates_shape)} must equal indices shape "
      f"{shape_str(indices_shape)}; updates are not broadcast {shapes}",
    )
  _common.check_elements_dims(data_shape, indices_shape, axis, OP, shapes)
  return data_shape


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _targets(
  indices: jax.Array,
  data_shape: Shape,
  axis: int,
  mode: lax.GatherScatterMode,
) -> jax.Array:
  """The linear data slot of every update element, flattened (n,);
  `data.size` where the element is dropped."""
  size = data_shape[axis]
  slots = math.prod(data_shape)
  n = math.prod(indices.shape)
  dtype = _duplicates.int_dtype_for(slots + n)
  if dtype is None:
    raise op_error(OP, f"{slots} + {n} slots need x64 to be indexed")
  index = _common.prepare_indices(indices, (size,))
  upper = _common.dim_value(size - 1, index.dtype)
  zero = np.zeros((), index.dtype)
  in_bounds = jnp.ones(index.shape, bool)
  if mode == lax.GatherScatterMode.CLIP:
    index = jnp.clip(index, zero, upper)
  elif mode == lax.GatherScatterMode.FILL_OR_DROP:
    index = _checks.checked_indices(
      index[..., None],
      (size,),
      f"{OP}: an index is out of range for axis {axis} of size {size} "
      "(valid: [-s, s-1]); it was dropped",
    )[..., 0]
    in_bounds = (index >= zero) & (index <= upper)
  index = jnp.where(in_bounds, index, zero).astype(dtype)
  coords = [
    index if d == axis else lax.broadcasted_iota(dtype, indices.shape, d)
    for d in range(len(data_shape))
  ]
  target = _common.linear_index(jnp.stack(coords, -1), data_shape, dtype)
  dropped = _common.dim_value(slots, dtype)
  return jnp.where(in_bounds, target, dropped).reshape(-1)


def _none(data, target, updates, strategy, serial=None):
  """Last update of each slot wins: losers redirected out of range, or,
  on CPU, XLA's serial write (`jaxops._order`); `serial` True or False
  takes that path on every platform."""
  if strategy is None:
    return write_rows(data, target, updates)
  in_order = functools.partial(write_rows, serial=True)
  constructed = functools.partial(_write_last, strategy=strategy)
  if serial is not None:
    return (in_order if serial else constructed)(data, target, updates)
  return _order.by_platform(in_order, constructed, data, target, updates)


def _write_none(
  data, target, updates, *, unique_indices, serial=None, test_ascending=True
):
  """`_none` of `updates` (n rows, any shape of n * R elements) into the
  rows of `data` (S, R), with the winner search chosen for n rows: the
  `reduce` of `_by_elements` and `_by_rows` for `none` (`test_ascending` is
  the fold's)."""
  del test_ascending
  n = target.shape[0]
  strategy = None
  # A symbolic n may be 1: the winner search is right for one update too.
  if not unique_indices and _common.provable(operator.gt, n, 1) is not False:
    strategy = _duplicates.choose_strategy(n, (data.shape[0],))
  updates = updates.reshape((n,) + data.shape[1:])
  return _none(data, target, updates, strategy, serial)


def _none_transpose(indices, ct, *, axis, mode, write):
  """(ct_data, ct_updates) of `_by_rows_if_shared` for `none` at `ct`: the
  row test again, each branch the transpose of its own write (so that no
  branch's targets cross into the other's)."""

  def transposed(layout):
    def transpose(indices, ct):
      write_t = jax.linear_transpose(
        lambda d, u: layout(d, indices, u, axis, mode, write),
        jax.ShapeDtypeStruct(ct.shape, ct.dtype),
        jax.ShapeDtypeStruct(indices.shape, ct.dtype),
      )
      return write_t(ct)

    return transpose

  return lax.cond(
    _varies(indices, axis),
    transposed(_by_elements),
    transposed(_by_rows),
    indices,
    ct,
  )


def _write_last(data, target, updates, strategy):
  """The write with the losers redirected out of range by the winner
  search (the winner among dropped updates writes to `slots`, dropped
  too)."""
  slots = data.shape[0]
  last = _duplicates.last_of_targets(target, slots, strategy)
  n = last.shape[0]
  position = lax.iota(target.dtype, n)
  # Past the end; before the start where a size is symbolic (`slots +
  # position` may pass the index type: `_duplicates.int_dtype_for`).
  away = -1 - position if _common.is_symbolic(slots + n) else slots + position
  return write_rows(data, jnp.where(last, target, away), updates)


def scatter_elements_update(
  data: ArrayLike,
  indices: ArrayLike,
  updates: ArrayLike,
  axis: IntLike = 0,
  *,
  reduction: str = "none",
  use_init_val: bool = True,
  mode: _common.ScatterMode = "drop",
  unique_indices: bool = False,
) -> jax.Array:
  """A copy of `data` with `updates` reduced into the elements `indices`
  address along `axis` (ScatterElementsUpdate-12).

  For every position `p` of `indices` (row-major order), with `q = p` except
  `q[axis] = indices[p]`::

    out = copy(data)       # targeted slots start from the neutral value
                           # of `reduction` when use_init_val=False
    out[q] = f(out[q], updates[p])

  `f` is the reduction: `none` (the last update wins), `sum`, `prod`, `min`,
  `max`, or `mean` (the sum divided by the number of contributions, data
  included when use_init_val; integers round toward -inf). Bool data: sum is
  OR, prod AND, min AND, max OR; no mean. The result is the same bits on
  every backend and run (docs/semantics.md#scatter-reductions).

  Args:
    data: array of rank r >= 1, any dtype (no complex min/max, no bool mean).
    indices: integer array of rank r; `indices.shape[d] <= data.shape[d]`
      for `d != axis`. Values in `[-s, s-1]` for `s = data.shape[axis]`.
    updates: array of indices' shape and data's dtype.
    axis: static int in `[-r, r-1]`.
    reduction: "none" | "sum" | "prod" | "min" | "max" | "mean".
    use_init_val: whether data is the initial value of a targeted slot (else
      the neutral value: 0 for sum/mean, 1 for prod, the dtype's max for min
      and its lowest for max). No effect for "none".
    mode: "drop" (default), "clip" or "promise_in_bounds", as for
      `scatter_nd_update`; concrete out-of-range indices raise IndexError
      (except with "clip").
    unique_indices: promise that no two in-range indices target one slot.

  Returns:
    Array of data's shape and dtype.

  Example:
    >>> import jax.numpy as jnp, jaxops
    >>> data = jnp.array([1.0, 2.0, 3.0, 4.0])
    >>> jaxops.scatter_elements_update(
    ...     data, jnp.array([1, 1, 3]), jnp.array([10.0, 20.0, 5.0]),
    ...     reduction="sum")
    Array([ 1., 32.,  3.,  9.], dtype=float32)

  Implements OpenVINO ScatterElementsUpdate-12 (= ONNX ScatterElements-18
  for none/add/mul/min/max with use_init_val=True).
  """
  if _export.active():
    return _exported(
      data,
      indices,
      updates,
      axis,
      reduction,
      use_init_val,
      mode,
      unique_indices,
    )
  data = _values.as_data(data, OP)
  indices = _common.as_indices(indices, OP)
  updates = _values.as_updates(updates, data.dtype, OP)
  scatter_elements_update_shape(data.shape, indices.shape, updates.shape, axis)
  axis = _common.canonicalize_axis(axis, data.ndim, OP)
  _reduce.check_reduction(OP, reduction, REDUCTIONS, data.dtype)
  scatter_mode = _common.canonicalize_mode(
    mode, OP, ("drop", "clip", "promise_in_bounds")
  )
  for name, flag in (
    ("unique_indices", unique_indices),
    ("use_init_val", use_init_val),
  ):
    if not isinstance(flag, (bool, np.bool_)):
      raise op_error(
        OP,
        f"{name} must be a Python bool, got {type(flag).__name__} {flag!r}",
        TypeError,
      )
  if scatter_mode != lax.GatherScatterMode.CLIP:
    _common.check_concrete_bounds(indices, data.shape[axis], OP)
  n = math.prod(indices.shape)
  if n == 0 or data.size == 0:
    return data
  # XLA would fold constant indices (a model's initializers) into targets
  # at compile time, slowly (docs/design.md#constant-indices).
  indices = _values.index_array(indices)
  indices = cast(jax.Array, lax.optimization_barrier(indices))
  # A symbolic count may reach ROWS_MIN_ELEMENTS: the row test, right for
  # every size.
  rows_may_share = _rows_span_data(
    data.shape, indices.shape, axis
  ) and not _common.provable(operator.lt, n, ROWS_MIN_ELEMENTS)

  def by_layout(reduce: Callable[..., jax.Array], rows: bool):
    return functools.partial(
      _by_rows_if_shared if rows else _by_elements,
      axis=axis,
      mode=scatter_mode,
      reduce=reduce,
    )

  if reduction == "none":
    # Shared indices write by rows too: the last update of a row is the
    # last of each of its elements (docs/design.md#shared-indices).
    write = functools.partial(_write_none, unique_indices=bool(unique_indices))
    if not (rows_may_share and jnp.issubdtype(data.dtype, jnp.inexact)):
      return by_layout(write, rows_may_share)(data, indices, updates)
    # Differentiated, the row test's `lax.cond` carries each branch's
    # residuals out of the forward (the elements' targets, 4 bytes per
    # element, written as zeros by the rows' branch). On CPU the transpose
    # runs the test again on the indices instead; the constructed path keeps
    # them, or its transpose would search the winners again.
    in_order = functools.partial(write, serial=True)
    serial = functools.partial(
      _linear.linear_with_transpose,
      by_layout(in_order, True),
      functools.partial(
        _none_transpose, axis=axis, mode=scatter_mode, write=in_order
      ),
    )
    constructed = by_layout(functools.partial(write, serial=False), True)
    return _order.by_platform(serial, constructed, data, indices, updates)
  folds = _reduce.folds(data.dtype, reduction) and not unique_indices

  def reducer(use_init_val: bool) -> Callable[..., jax.Array]:
    reduce = functools.partial(
      _reduce.reduce_rows,
      reduction=reduction,
      use_init_val=use_init_val,
      unique_indices=bool(unique_indices),
    )
    by = by_layout(reduce, folds and rows_may_share)
    if not _reduce.has_serial(data.dtype, reduction, bool(unique_indices)):
      return by
    # XLA:CPU's serial scatter, or the sorted fold and the integer key. The
    # serial scatter takes shared indices by rows too: m row updates
    # instead of m * R element updates, each slot's sequence the same.
    serial = by_layout(functools.partial(reduce, serial=True), rows_may_share)
    return _order.ordered(serial, by)

  by = reducer(bool(use_init_val))
  if not _reduce.transposes_by_gather(data.dtype, reduction):
    return by(data, indices, updates)
  # A gather for its transpose instead of the fold's transpose through
  # both branches of the row test (docs/design.md#fold-cost).
  transpose = functools.partial(
    _sum_transpose,
    shape=data.shape,
    axis=axis,
    mode=scatter_mode,
    reduction=reduction,
    rows=rows_may_share,
  )
  if use_init_val:
    return _linear.linear_with_transpose(by, transpose, data, indices, updates)
  hit = functools.partial(
    _hit, shape=data.shape, axis=axis, mode=scatter_mode, rows=rows_may_share
  )
  return _without_init(
    by, reducer(True), transpose, hit, data, indices, updates
  )


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2, 3))
def _without_init(reduce, summed, transpose, hit, data, indices, updates):
  """`reduce(data, indices, updates)`, a float sum without the initial
  value, differentiated as `where(hit(indices), summed(0, indices,
  updates), data)` with `summed` (the sum with it) transposed by
  `transpose`: the forward's mask of the targeted slots masks the data
  cotangent, where `reduce`'s transpose would scatter the targets again
  (docs/design.md#sum-without-init)."""
  return reduce(data, indices, updates)


@_without_init.defjvp
def _without_init_jvp(reduce, summed, transpose, hit, primals, tangents):
  # The same bits as `reduce`: each targeted slot's sum starts from 0, the
  # neutral value, and adds its updates in the same order.
  del reduce
  data, indices, updates = primals
  data_dot, _, updates_dot = tangents
  touched = hit(indices)
  zeros = jnp.zeros_like(data)
  total = summed(zeros, indices, updates)
  total_dot = _linear.tangent_with_transpose(
    summed, transpose, zeros, indices, ad.instantiate_zeros(updates_dot), total
  )
  out = jnp.where(touched, total, data)
  return out, jnp.where(touched, total_dot, ad.instantiate_zeros(data_dot))


def _hit(indices, *, shape, axis, mode, rows):
  """Whether some in-range update targets each element of data (a uint8
  max of ones), by rows along `axis` where the indices may be shared
  (`rows`) and are."""

  def by_elements(indices):
    target = _targets(indices, shape, axis, mode)
    return _reduce.targeted(target, math.prod(shape)).reshape(shape)

  def by_rows(indices):
    target = _row_targets(indices, shape, axis, mode)
    return lax.broadcast_in_dim(
      _reduce.targeted(target, shape[axis]), shape, (axis,)
    )

  if not rows:
    return by_elements(indices)
  return lax.cond(_varies(indices, axis), by_elements, by_rows, indices)


def _by_rows_if_shared(data, indices, updates, axis, mode, reduce):
  """`_by_rows` when every index is shared along the dims other than axis
  (a graph layer's destination node broadcast over the features), else
  `_by_elements`: m rows sort (or, on CPU's serial path, scatter; for
  `none`, write) instead of m * R elements, with the same bits
  (slot (t, c) takes the updates (p, c) with indices[p, c] = t in
  increasing p; docs/design.md#shared-indices). Only the row branch tests
  for ascending targets: element targets ascend only where none repeats
  (docs/design.md#presorted)."""
  kwargs = dict(axis=axis, mode=mode)
  return lax.cond(
    _varies(indices, axis),
    functools.partial(
      _by_elements,
      reduce=functools.partial(reduce, test_ascending=False),
      **kwargs,
    ),
    functools.partial(_by_rows, reduce=reduce, **kwargs),
    data,
    indices,
    updates,
  )


def _varies(indices, axis):
  """Whether some index differs from the one at position 0 of the dims
  other than `axis` (in some member of a `vmap` batch)."""
  rows = jnp.moveaxis(indices, axis, 0).reshape(indices.shape[axis], -1)
  return _duplicates.any_in_batch(
    _duplicates.reduce_whole(rows != rows[:, :1], "any")
  )


def _sum_transpose(indices, ct, *, shape, axis, mode, reduction, rows):
  """(ct_data, ct_updates) of the float sum or sub at `ct`: data's is
  `ct`, an update's its target's (`_reduce.sum_transpose`), read by rows
  along `axis` where the indices may be shared (`rows`) and are: m row
  reads instead of m * R element targets (docs/design.md#shared-indices)."""
  pickers = [
    functools.partial(
      picked, shape=shape, axis=axis, mode=mode, reduction=reduction
    )
    for picked in (_picked_by_elements, _picked_by_rows)
  ]
  if not rows:
    return ct, pickers[0](indices, ct)
  return ct, lax.cond(_varies(indices, axis), *pickers, indices, ct)


def _picked_by_elements(indices, ct, *, shape, axis, mode, reduction):
  target = _targets(indices, shape, axis, mode)
  _, picked = _reduce.sum_transpose(ct.reshape(-1, 1), target, reduction)
  return picked.reshape(indices.shape)


def _picked_by_rows(indices, ct, *, shape, axis, mode, reduction):
  size, m = shape[axis], indices.shape[axis]
  moved = jnp.moveaxis(ct, axis, 0)
  _, picked = _reduce.sum_transpose(
    moved.reshape(size, -1), _row_targets(indices, shape, axis, mode), reduction
  )
  return jnp.moveaxis(picked.reshape((m,) + moved.shape[1:]), 0, axis)


def _rows_span_data(data_shape: Shape, index_shape: Shape, axis: int) -> bool:
  """Whether the indices cover data in every dim but `axis`, which is not
  data's only dim (so a row along `axis` has more than one element)."""
  return len(data_shape) > 1 and all(
    i == d for k, (i, d) in enumerate(zip(index_shape, data_shape)) if k != axis
  )


def _by_elements(data, indices, updates, axis, mode, reduce):
  target = _targets(indices, data.shape, axis, mode)
  # Updates as they are: `reduce_rows` takes them as rows of one element.
  out = reduce(data.reshape(-1, 1), target, updates)
  return out.reshape(data.shape)


def _by_rows(data, indices, updates, axis, mode, reduce):
  """`_by_elements` when every index equals the one at position 0 of the
  dims other than `axis`: the rows along `axis` reduce whole."""
  size = data.shape[axis]
  moved = jnp.moveaxis(data, axis, 0)
  out = reduce(
    moved.reshape(size, -1),
    _row_targets(indices, data.shape, axis, mode),
    jnp.moveaxis(updates, axis, 0),
  )
  return jnp.moveaxis(out.reshape(moved.shape), 0, axis)


def _row_targets(indices, shape, axis, mode):
  """The row along `axis` of each index at position 0 of the other dims
  (m,): `_targets` of one column of data."""
  m, ndim = indices.shape[axis], len(shape)
  index = jnp.moveaxis(indices, axis, 0).reshape(m, -1)[:, 0]
  # One column of data keeps `axis` (and its name in checkify's message).
  column = tuple(shape[axis] if k == axis else 1 for k in range(ndim))
  index = index.reshape(tuple(m if k == axis else 1 for k in range(ndim)))
  return _targets(index, column, axis, mode)


# Export primitive (docs/export.md) -------------------------------------------
# `jaxops_scatter_elements_update(data, indices, updates; axis, reduction,
# use_init_val, mode, unique_indices)`, axis normalized; lowered to ONNX by
# jaxops/onnx/_scatter_elements_update.py.


def _export_batch(args, dims, *, axis, **params):
  # Every batch position gets its own leading coordinate: slots never
  # collide across positions and the order within one is kept.
  data, indices, updates = _export.batched_in_front(args, dims)
  out = scatter_elements_update_p.bind(
    data, indices, updates, axis=axis + 1, **params
  )
  return out, 0


scatter_elements_update_p = _export.primitive(
  "jaxops_scatter_elements_update",
  scatter_elements_update,
  _export.abstract_eval(scatter_elements_update_shape, OP, params=("axis",)),
  _export_batch,
)


def _exported(
  data: Any,
  indices: Any,
  updates: Any,
  axis: Any,
  reduction: Any,
  use_init_val: Any,
  mode: Any,
  unique_indices: Any,
) -> jax.Array:
  """`scatter_elements_update` while exporting: one primitive, or the normal
  computation for empty indices and zero-size data."""
  params = dict(
    reduction=reduction,
    use_init_val=use_init_val,
    mode=mode,
    unique_indices=unique_indices,
  )
  data, indices, updates = _export.validated(
    lambda d, i, u: scatter_elements_update(d, i, u, axis, **params),
    data,
    indices,
    updates,
  )
  axis = _common.canonicalize_axis(axis, data.ndim, OP)
  if indices.size == 0 or data.size == 0:
    return _export.normal(
      scatter_elements_update, data, indices, updates, axis, **params
    )
  return scatter_elements_update_p.bind(
    data,
    indices,
    updates,
    axis=axis,
    reduction=reduction,
    use_init_val=bool(use_init_val),
    mode=mode,
    unique_indices=bool(unique_indices),
  )
