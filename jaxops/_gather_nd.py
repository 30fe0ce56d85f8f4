"""GatherND-8 (OpenVINO opset8).

Semantics and errata: docs/semantics.md#gather-nd (negative indices,
out-of-range modes, zero-size inputs, GND-1..GND-3). The lowering is one
`lax.gather` with `batch_dims` as XLA batching dims: docs/design.md#lowerings.

Derivative: `jaxops._linear.linear_custom_jvp`; the tangent is the same gather
of the data tangent with fill value 0, and reverse mode transposes it into a
scatter-add of the cotangent into zeros of data's shape. Fill mode on CPU:
`jaxops._fill` (docs/design.md#lowering-fill). The index normalization runs
outside the derivative rule. See docs/design.md#derivatives.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from jaxops import _checks, _common, _export, _fill, _order, _values
from jaxops._common import (
  ArrayLike,
  IntLike,
  Shape,
  ShapeLike,
  op_error,
  shape_str,
)
from jaxops._linear import ReadDims, linear_custom_jvp

OP = "GatherND-8"


def gather_nd_shape(
  data_shape: ShapeLike, indices_shape: ShapeLike, batch_dims: IntLike = 0
) -> Shape:
  """Output shape of GatherND-8; raises ValueError for shapes the spec rejects.

  `indices_shape[:-1] + data_shape[batch_dims + k:]` with
  `k = indices_shape[-1]`. Every dim may be a symbolic dim of `jax.export`
  but `k`, the index tuple length (a TypeError); the batch dims of data
  and indices must then be the same dim.

  >>> gather_nd_shape((1000, 256, 10, 15), (25, 125, 3))
  (25, 125, 15)
  """
  data_shape = _common.shape_dims(data_shape, OP, "data")
  indices_shape = _common.shape_dims(indices_shape, OP, "indices")
  b = _common.static_int(batch_dims, OP, "batch_dims")
  r, q = len(data_shape), len(indices_shape)
  shapes = _common.shapes_context(data=data_shape, indices=indices_shape)
  _common.check_rank(r, OP, "data", shapes)
  _common.check_rank(q, OP, "indices", shapes)
  if b < 0:
    raise op_error(OP, f"batch_dims={b} must be >= 0 {shapes}")
  if b >= q:
    raise op_error(OP, f"batch_dims={b} must be < rank(indices)={q} {shapes}")
  if b >= r:
    raise op_error(OP, f"batch_dims={b} must be < rank(data)={r} {shapes}")
  if data_shape[:b] != indices_shape[:b]:
    raise op_error(
      OP,
      f"the first batch_dims={b} dims of data and indices must be equal, "
      f"got {shape_str(data_shape[:b])} vs {shape_str(indices_shape[:b])} "
      f"{shapes}",
    )
  k = _common.concrete_dim(
    indices_shape[-1], OP, "indices shape[-1] (the index tuple length k)"
  )
  if b + k > r:
    raise op_error(
      OP,
      f"indices.shape[-1]={k} + batch_dims={b} must be <= "
      f"rank(data)={r} {shapes}",
    )
  return indices_shape[:-1] + data_shape[b + k :]


def _dimension_numbers(
  data_rank: int, indices_rank: int, batch_dims: int, k: int
) -> lax.GatherDimensionNumbers:
  b = batch_dims
  # XLA batching dims express batch_dims directly: no iota index building.
  return lax.GatherDimensionNumbers(
    offset_dims=tuple(
      range(indices_rank - 1, indices_rank - 1 + data_rank - b - k)
    ),
    collapsed_slice_dims=tuple(range(b, b + k)),
    start_index_map=tuple(range(b, b + k)),
    operand_batching_dims=tuple(range(b)),
    start_indices_batching_dims=tuple(range(b)),
  )


def _gather(
  data: jax.Array,
  indices: jax.Array,
  batch_dims: int,
  mode: lax.GatherScatterMode,
  fill_value: Any,
  tangent: bool,
) -> jax.Array:
  k = indices.shape[-1]
  b = batch_dims
  out_shape = indices.shape[:-1] + data.shape[b + k :]
  if any(d == 0 for d in data.shape[b : b + k]) and 0 not in out_shape:
    # Every tuple indexes an empty dim, so every index is out of range; XLA
    # rejects the slice size of 1 such a gather would need.
    if mode != lax.GatherScatterMode.FILL_OR_DROP:
      raise op_error(
        OP,
        f"cannot gather from data of shape {shape_str(data.shape)}: "
        f"an indexed dim has size 0 so every index is out of range; "
        "use mode='fill' to get fill values",
        IndexError,
      )
    return jnp.full(
      out_shape,
      _common.fill_value_or_default(0 if tangent else fill_value, data.dtype),
      data.dtype,
    )
  dnums = _dimension_numbers(data.ndim, indices.ndim, b, k)
  return _fill.gather(data, indices, dnums, mode, fill_value, tangent)


# Linear in data; out-of-range reads have a zero tangent (the fill value is a
# constant). docs/design.md#derivatives.
_gather_nd = linear_custom_jvp(
  _gather,
  nondiff_argnums=(2, 3, 4, 5),
  linear_argnums=(0,),
  tangent_nondiff=lambda b, mode, fill_value, tangent: (b, mode, 0, True),
  gather=True,
  # A tuple keeps the b batch dims and reads the slice of data's dims
  # after the b + k it indexes.
  read_dims=lambda shape, index_shape, b, *_: ReadDims(
    tuple(range(b)), len(shape) - b - index_shape[-1]
  ),
)


def gather_nd(
  data: ArrayLike,
  indices: ArrayLike,
  batch_dims: IntLike = 0,
  *,
  mode: _common.GatherMode = "fill",
  fill_value: ArrayLike | None = None,
) -> jax.Array:
  """Gathers slices of `data` at the index tuples in `indices` (GatherND-8).

  With `k = indices.shape[-1]` and `b = batch_dims`::

    out[i_0, ..., i_{K-2}, ...] =
        data[i_0, ..., i_{b-1}, *indices[i_0, ..., i_{K-2}], ...]

  The first `b` positions select the batch, the tuple selects inside it.

  Args:
    data: array of rank r >= 1, any dtype.
    indices: integer array of rank q >= 1, shape
      `data.shape[:b] + (...) + (k,)` with `k + b <= r`. Index values in
      `[-s, s-1]` for the dim of size `s` they index; negative values count
      from the end.
    batch_dims: static int `b`, `0 <= b < min(r, q)`.
    mode: what an out-of-range index does under `jit`, where raising is
      impossible. `"fill"` (default) returns `fill_value` for that slice and
      never reads outside `data`; `"clip"` clamps the index into range;
      `"promise_in_bounds"` lets XLA assume every index is valid. Index
      values beyond the int32 range (int64/uint32/uint64 indices) count as
      out of range in every mode (no wrap-around). Concrete
      (non-traced) indices are checked eagerly and raise `IndexError`, and
      `jax.experimental.checkify` with `checkify.index_checks` reports traced
      ones.
    fill_value: static scalar for out-of-range reads with `mode="fill"`, of
      data's kind or a lower one (int < float < complex; bool for bool) and
      a value data's dtype holds (TypeError / ValueError otherwise);
      defaults to NaN for inexact dtypes, the minimum of signed ints, the
      maximum of unsigned ints and True for bool (as in `jnp.take`).

  Returns:
    Array of shape `indices.shape[:-1] + data.shape[b + k:]` and data's dtype.

  Example:
    >>> import jax.numpy as jnp, jaxops
    >>> data = jnp.array([[1, 2], [3, 4]], dtype=jnp.int32)
    >>> jaxops.gather_nd(data, jnp.array([[0, 0], [1, 0]]))
    Array([1, 3], dtype=int32)
    >>> jaxops.gather_nd(data, jnp.array([[1], [0]]), batch_dims=1)
    Array([2, 3], dtype=int32)

  Implements OpenVINO GatherND-8.
  """
  if _export.active():
    return _exported(data, indices, batch_dims, mode, fill_value)
  data = _values.as_data(data, OP)
  indices = _common.as_indices(indices, OP)
  b = _common.static_int(batch_dims, OP, "batch_dims")
  gather_nd_shape(data.shape, indices.shape, b)
  gather_mode = _common.canonicalize_mode(
    mode, OP, ("fill", "clip", "promise_in_bounds")
  )
  fill_value = _values.static_fill_value(fill_value, OP, data.dtype)
  k = indices.shape[-1]
  _common.check_concrete_bounds(indices, data.shape[b : b + k], OP)
  return _prepare_and_gather(
    data,
    _values.index_array(indices),
    b,
    gather_mode,
    fill_value,
    _order.constructed_only(),
  )


# Jitted so that an eager call compiles one program per signature instead of
# dispatching (and compiling) each index-normalization op separately; under an
# outer jit/vmap/grad it is simply inlined.
@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _prepare_and_gather(
  data, indices, batch_dims, mode, fill_value, constructed
):
  k = indices.shape[-1]
  dims = tuple(range(batch_dims, batch_dims + k))
  sizes = data.shape[batch_dims : batch_dims + k]
  indices = _common.prepare_indices(indices, sizes)
  if mode == lax.GatherScatterMode.FILL_OR_DROP and k:
    # The fill-mode gather only ever reads in range; checkify.index_checks
    # still reports the tuple that was out of range.
    indices = _checks.checked_gather_indices(indices, data.shape, dims)
  indices = _common.batched_like(indices, data)
  return _gather_nd(
    data, indices, batch_dims, mode, fill_value, False, constructed
  )


# Export primitive (docs/export.md#gather-nd) ---------------------------------
# `jaxops_gather_nd(data, indices; batch_dims, mode, fill_value)`, lowered to
# ONNX by jaxops/onnx/_gather_nd.py.


def _export_batch(args, dims, *, batch_dims, **params):
  data, indices = args
  data_dim, indices_dim = dims
  b = batch_dims
  if _export.mapped(data_dim) and _export.mapped(indices_dim):
    # Both batched: one more batch dim of the same node.
    data = _export.move_to(data, data_dim, 0)
    indices = _export.move_to(indices, indices_dim, 0)
    return gather_nd_p.bind(data, indices, batch_dims=b + 1, **params), 0
  if _export.mapped(indices_dim):
    # More index tuples per batch position: the vmapped axis after the batch
    # dims is just another leading dim of indices.
    indices = _export.move_to(indices, indices_dim, b)
    return gather_nd_p.bind(data, indices, batch_dims=b, **params), b
  # Data batched only: as the last dim of data it is part of every slice.
  data = _export.move_to(data, data_dim, -1)
  out = gather_nd_p.bind(data, indices, batch_dims=b, **params)
  return out, out.ndim - 1


gather_nd_p = _export.primitive(
  "jaxops_gather_nd",
  gather_nd,
  _export.abstract_eval(gather_nd_shape, OP, params=("batch_dims",)),
  _export_batch,
)


def _exported(
  data: Any, indices: Any, batch_dims: Any, mode: Any, fill_value: Any
) -> jax.Array:
  """`gather_nd` while exporting: one `gather_nd_p`, or the normal
  computation where the node cannot express the call (docs/export.md)."""
  data, indices = _export.validated(
    lambda d, i: gather_nd(d, i, batch_dims, mode=mode, fill_value=fill_value),
    data,
    indices,
  )
  b = operator.index(batch_dims)
  k = indices.shape[-1]
  out_shape = indices.shape[:-1] + data.shape[b + k :]
  if k == 0:
    # Every tuple selects all of its batch position's data: a broadcast
    # (OpenVINO's CPU plugin is wrong on GatherND with k = 0).
    lead = indices.ndim - 1
    dims = tuple(range(b)) + tuple(range(lead, lead + data.ndim - b))
    return lax.broadcast_in_dim(data, out_shape, dims)
  if 0 in data.shape[b : b + k] and 0 not in out_shape:
    # Gathers from a zero-size indexed dim: jaxops' fill value or error.
    return _export.normal(
      gather_nd, data, indices, b, mode=mode, fill_value=fill_value
    )
  return gather_nd_p.bind(
    data,
    indices,
    batch_dims=b,
    mode=mode,
    fill_value=_values.static_fill_value(fill_value, OP, data.dtype),
  )
