"""Gather-8 (OpenVINO opset8).

Semantics and errata: docs/semantics.md#gather (out-of-range indices read
zeros, the spec's rule and the default: #gather-out-of-range; why the default
fill value is 0 where GatherND's is NaN: #gather-fill; errata G-1, G-2;
runtime bugs RT-8, RT-9, RT-11). The lowering is one `lax.gather`: the
`batch_dims` leading dims are XLA batching dims of data and indices (as in
GatherND), `axis` the one collapsed, indexed dim, and the dims of data
between them and after `axis` offset dims (docs/design.md#lowering-gather).

Out-of-range reads are the spec's defined behaviour, not an error: in the
default `mode="fill"` (fill value 0) concrete out-of-range indices are not
checked eagerly either. Fill mode on CPU, the derivative (a custom JVP whose
tangent is the same gather with fill value 0, transposed into a scatter-add
of the cotangent) and the index normalization outside it are GatherND's:
`jaxops._fill`, `jaxops._linear`, `jaxops._common.prepare_indices`.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
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

OP = "Gather-8"

FILL = lax.GatherScatterMode.FILL_OR_DROP


def _attributes(
  data_shape: Shape, indices_shape: Shape, axis: Any, batch_dims: Any
) -> tuple[int, int]:
  """`(axis, batch_dims)` normalized to >= 0, or the operator's error."""
  r, q = len(data_shape), len(indices_shape)
  shapes = _common.shapes_context(data=data_shape, indices=indices_shape)
  b = _common.static_int(batch_dims, OP, "batch_dims")
  _common.check_rank(r, OP, "data", shapes)
  a = _common.canonicalize_axis(axis, r, OP, context=shapes)
  bound = min(r, q)
  if not -bound <= b <= bound:
    raise op_error(
      OP,
      f"batch_dims={b} must be in [-min(rank(data), rank(indices)), "
      f"min(rank(data), rank(indices))] = [{-bound}, {bound}] {shapes}",
    )
  # A negative batch_dims counts from rank(indices) (the spec's rule).
  nb = b + q if b < 0 else b
  if nb > a:
    raise op_error(
      OP,
      f"batch_dims={b} (normalized {nb}) must be <= axis={axis} "
      f"(normalized {a}) {shapes}",
    )
  if data_shape[:nb] != indices_shape[:nb]:
    raise op_error(
      OP,
      f"the first batch_dims={nb} dims of data and indices must be equal, "
      f"got {shape_str(data_shape[:nb])} vs "
      f"{shape_str(indices_shape[:nb])} {shapes}",
    )
  return a, nb


def gather_shape(
  data_shape: ShapeLike,
  indices_shape: ShapeLike,
  axis: IntLike = 0,
  batch_dims: IntLike = 0,
) -> Shape:
  """Output shape of Gather-8; raises ValueError for shapes the spec rejects.

  `data_shape[:axis] + indices_shape[batch_dims:] + data_shape[axis + 1:]`
  with `axis` and `batch_dims` normalized (a negative `batch_dims` counts
  from `rank(indices)`); `batch_dims <= axis`, and the first `batch_dims`
  dims of both shapes are equal. Every dim may be a symbolic dim of
  `jax.export` (the batch dims of data and indices then the same dim).

  >>> gather_shape((2, 64, 128), (2, 32, 21), axis=1, batch_dims=1)
  (2, 32, 21, 128)
  """
  data_shape = _common.shape_dims(data_shape, OP, "data")
  indices_shape = _common.shape_dims(indices_shape, OP, "indices")
  a, b = _attributes(data_shape, indices_shape, axis, batch_dims)
  return data_shape[:a] + indices_shape[b:] + data_shape[a + 1 :]


def _dimension_numbers(
  data_rank: int, indices_rank: int, axis: int, batch_dims: int
) -> lax.GatherDimensionNumbers:
  """The gather of `indices[..., None]` (rank `indices_rank + 1`).

  Output dims in order: the batch dims (indices' batching dims), data's dims
  between them and `axis` (offset dims), indices' own dims, data's dims after
  `axis` (offset dims) -- the Gather-8 layout, so no transpose follows.
  """
  a, b = axis, batch_dims
  after = a + indices_rank - b
  return lax.GatherDimensionNumbers(
    offset_dims=tuple(range(b, a))
    + tuple(range(after, after + data_rank - a - 1)),
    collapsed_slice_dims=(a,),
    start_index_map=(a,),
    operand_batching_dims=tuple(range(b)),
    start_indices_batching_dims=tuple(range(b)),
  )


def _gather(
  data: jax.Array,
  indices: jax.Array,
  axis: int,
  batch_dims: int,
  mode: lax.GatherScatterMode,
  fill_value: Any,
  tangent: bool,
) -> jax.Array:
  a, b = axis, batch_dims
  out_shape = data.shape[:a] + indices.shape[b:] + data.shape[a + 1 :]
  if data.shape[a] == 0 and 0 not in out_shape:
    # Every index is out of range; XLA rejects the slice size of 1 such a
    # gather would need.
    if mode != FILL:
      raise op_error(
        OP,
        f"cannot gather along axis={a} of size 0 (data shape "
        f"{shape_str(data.shape)}): every index is out of range; use "
        "mode='fill' to get fill values",
        IndexError,
      )
    return jnp.full(out_shape, 0 if tangent else fill_value, data.dtype)
  dnums = _dimension_numbers(data.ndim, indices.ndim, a, b)
  return _fill.gather(
    data, indices[..., None], dnums, mode, fill_value, tangent
  )


# Linear in data; out-of-range reads have a zero tangent (the fill value is a
# constant). docs/design.md#derivatives.
_gather_linear = linear_custom_jvp(
  _gather,
  nondiff_argnums=(2, 3, 4, 5, 6),
  linear_argnums=(0,),
  tangent_nondiff=lambda a, b, mode, fill_value, tangent: (a, b, mode, 0, True),
  gather=True,
  # An index keeps the b batch dims and reads the slice of data's dims
  # after axis.
  read_dims=lambda shape, index_shape, a, b, *_: ReadDims(
    tuple(range(b)), len(shape) - a - 1
  ),
)


def _host_indices(indices: Any) -> Any:
  """Concrete 64-bit host indices with their values clipped into int32.

  With x64 off, `jnp.asarray` narrows int64/uint64 to 32 bits by wrapping,
  which would turn the out-of-range `2**32 + 1` into the in-range 1 (the
  OpenVINO plugin's bug, docs/semantics.md#rt-8). Clipped, a value beyond
  int32 stays out of range for every dim an x32 array can have. Traced and
  device indices already have their final dtype and pass through.
  """
  if not isinstance(indices, np.ndarray) or indices.dtype.itemsize < 8:
    return indices
  if jax.dtypes.canonicalize_dtype(np.int64) == np.int64:
    return indices
  info = np.iinfo(np.int32)
  if np.issubdtype(indices.dtype, np.unsignedinteger):
    return np.minimum(indices, np.uint64(info.max)).astype(np.int32)
  return np.clip(indices, info.min, info.max).astype(np.int32)


def gather(
  data: ArrayLike,
  indices: ArrayLike,
  axis: IntLike = 0,
  batch_dims: IntLike = 0,
  *,
  mode: _common.GatherMode = "fill",
  fill_value: ArrayLike | None = None,
) -> jax.Array:
  """Gathers slices of `data` along `axis` at `indices` (Gather-8).

  With `a = axis` and `b = batch_dims` (both normalized)::

    out[p_0, ..., p_{a-1}, i_b, ..., i_{q-1}, p_{a+1}, ...] =
        data[p_0, ..., p_{a-1},
             indices[p_0, ..., p_{b-1}, i_b, ..., i_{q-1}], p_{a+1}, ...]

  The first `b` dims are batch dims shared by data and indices. An index
  outside `[-s, s-1]` (`s = data.shape[a]`) reads 0, as the spec says.

  Args:
    data: array of rank r >= 1, any dtype.
    indices: integer array of rank q >= 0 (a 0-d index drops the axis), its
      first `b` dims equal to data's. Values in `[-s, s-1]` count from the
      end when negative; others are out of range (see `mode`).
    axis: static int in `[-r, r-1]`.
    batch_dims: static int in `[-min(r, q), min(r, q)]`, a negative value
      counted from q; `b <= a` after normalization.
    mode: what an out-of-range index does. `"fill"` (default, the spec's
      rule) reads `fill_value`, eagerly and under `jit`, for every index
      value and dtype (int64 values beyond int32 never wrap into range);
      `"clip"` clamps the index into range and `"promise_in_bounds"` lets
      XLA assume every index is valid. Concrete (non-traced) out-of-range
      indices raise `IndexError` in those two modes, as in the other
      gathers, and are not an error in fill mode.
      `jax.experimental.checkify` with `checkify.index_checks` reports
      traced out-of-range indices in every mode.
    fill_value: static scalar read by out-of-range indices with
      `mode="fill"`; default 0 (the spec's zeros; `jaxops.gather_nd`'s
      default is NaN: docs/semantics.md#gather-fill).

  Returns:
    Array of shape `data.shape[:a] + indices.shape[b:] + data.shape[a+1:]`
    and data's dtype.

  Example:
    >>> import jax.numpy as jnp, jaxops
    >>> data = jnp.array([1, 2, 3, 4, 5], dtype=jnp.int32)
    >>> jaxops.gather(data, jnp.array([3, 10, -20]))  # spec example 7
    Array([4, 0, 0], dtype=int32)
    >>> data = jnp.array([[1, 2, 3], [4, 5, 6]], dtype=jnp.int32)
    >>> jaxops.gather(data, jnp.array([[2, 0], [1, 1]]), axis=1, batch_dims=1)
    Array([[3, 1],
           [5, 5]], dtype=int32)

  Implements OpenVINO Gather-8.
  """
  if _export.active():
    return _exported(data, indices, axis, batch_dims, mode, fill_value)
  data = _values.as_data(data, OP)
  indices = _common.as_indices(indices, OP)
  a, b = _attributes(
    _common.shape_dims(data.shape, OP, "data"),
    tuple(indices.shape),
    axis,
    batch_dims,
  )
  gather_mode = _common.canonicalize_mode(
    mode, OP, ("fill", "clip", "promise_in_bounds")
  )
  fill_value = _values.static_fill_value(fill_value, OP, data.dtype)
  if gather_mode != FILL:
    _common.check_concrete_bounds(indices, data.shape[a], OP)
  return _prepare_and_gather(
    data,
    jnp.asarray(_host_indices(indices)),
    a,
    b,
    gather_mode,
    0 if fill_value is None else fill_value,
    _order.constructed_only(),
  )


# Jitted so that an eager call compiles one program per signature (see
# jaxops._gather_nd); inlined under an outer transformation.
@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5, 6))
def _prepare_and_gather(
  data, indices, axis, batch_dims, mode, fill_value, constructed
):
  indices = _common.prepare_indices(indices, data.shape[axis])
  if mode == FILL and indices.size:
    # The fill-mode gather only ever reads in range; checkify.index_checks
    # still reports the index that was out of range.
    indices = _checks.checked_gather_indices(
      indices[..., None], data.shape, (axis,)
    )[..., 0]
  indices = _common.batched_like(indices, data)
  return _gather_linear(
    data, indices, axis, batch_dims, mode, fill_value, False, constructed
  )


# Export primitive (docs/export.md#gather) ------------------------------------
# `jaxops_gather(data, indices; axis, batch_dims, mode, fill_value)`: axis and
# batch_dims normalized (>= 0), mode as given ("fill", "clip",
# "promise_in_bounds"), fill_value the static scalar actually read (0 unless
# the caller gave one; never None). Lowered to ONNX by jaxops/onnx/_gather.py.


def _export_batch(args, dims, *, axis, batch_dims, **params):
  data, indices = args
  data_dim, indices_dim = dims
  a, b = axis, batch_dims
  if _export.mapped(data_dim) and _export.mapped(indices_dim):
    # Both batched: one more batch dim of the same node.
    data = _export.move_to(data, data_dim, 0)
    indices = _export.move_to(indices, indices_dim, 0)
    out = gather_p.bind(data, indices, axis=a + 1, batch_dims=b + 1, **params)
    return out, 0
  if _export.mapped(indices_dim):
    # One more index dim after the batch dims; it lands at the axis.
    indices = _export.move_to(indices, indices_dim, b)
    out = gather_p.bind(data, indices, axis=a, batch_dims=b, **params)
    return out, a
  # Data batched only: as its last dim it is part of every slice.
  data = _export.move_to(data, data_dim, -1)
  out = gather_p.bind(data, indices, axis=a, batch_dims=b, **params)
  return out, out.ndim - 1


gather_p = _export.primitive(
  "jaxops_gather",
  gather,
  _export.abstract_eval(gather_shape, OP, params=("axis", "batch_dims")),
  _export_batch,
)


def _exported(
  data: Any,
  indices: Any,
  axis: Any,
  batch_dims: Any,
  mode: Any,
  fill_value: Any,
) -> jax.Array:
  """`gather` while exporting: one `gather_p`, or the normal computation
  where the node cannot express the call (docs/export.md)."""
  _export.validate(
    lambda d, i: gather(
      d, i, axis, batch_dims, mode=mode, fill_value=fill_value
    ),
    data,
    indices,
  )
  data = jnp.asarray(data)
  indices = _export.index_array(_host_indices(_common.as_array_like(indices)))
  a = operator.index(axis) % data.ndim
  b = operator.index(batch_dims)
  b = b + indices.ndim if b < 0 else b
  out_shape = data.shape[:a] + indices.shape[b:] + data.shape[a + 1 :]
  if data.shape[a] == 0 and 0 not in out_shape:
    # Gathers from a zero-size axis: fill values or jaxops' error.
    return _export.normal(
      gather, data, indices, a, b, mode=mode, fill_value=fill_value
    )
  fill_value = _values.static_fill_value(fill_value, OP, data.dtype)
  return gather_p.bind(
    data,
    indices,
    axis=a,
    batch_dims=b,
    mode=mode,
    fill_value=0 if fill_value is None else fill_value,
  )
