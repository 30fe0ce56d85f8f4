"""GatherElements-11/13 (ONNX).

Semantics and errata: docs/semantics.md#gather-elements (indices smaller than
data in non-axis dims are accepted and never broadcast: #ge-2). Design:
docs/design.md#lowering-gather-elements.

Derivative and fill mode: as for GatherND (`jaxops._linear`,
`jaxops._fill`); the tangent is the same gather with fill value 0.

The gather is one `lax.gather` in which every non-axis dim is a batching dim
of both operand and indices, so the program does not grow with the axis
length (no one-hot or `choose` formulation) and compiles in constant time.
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

OP = "GatherElements-13"


def gather_elements_shape(
  data_shape: ShapeLike, indices_shape: ShapeLike, axis: IntLike = 0
) -> Shape:
  """Output shape of GatherElements-11/13 (= `indices_shape`).

  Raises ValueError unless both ranks are equal and >= 1, `axis` is in
  `[-r, r-1]` and `indices_shape[d] <= data_shape[d]` for every `d != axis`
  (onnxruntime/torch semantics: a smaller indices dim covers the leading part
  of data, it is never broadcast). Every dim may be a symbolic dim of
  `jax.export`; `indices_shape[d] <= data_shape[d]` must then hold for
  every size of them.

  >>> gather_elements_shape((3, 3), (2, 3), axis=0)
  (2, 3)
  """
  data_shape = _common.shape_dims(data_shape, OP, "data")
  indices_shape = _common.shape_dims(indices_shape, OP, "indices")
  shapes = _common.shapes_context(data=data_shape, indices=indices_shape)
  r = len(data_shape)
  _common.check_rank(r, OP, "data", shapes)
  _common.check_same_rank(data_shape, indices_shape, OP, shapes)
  _common.check_elements_dims(data_shape, indices_shape, axis, OP, shapes)
  return indices_shape


def _gather(
  data: jax.Array,
  indices: jax.Array,
  axis: int,
  mode: lax.GatherScatterMode,
  fill_value: Any,
  tangent: bool,
) -> jax.Array:
  r = data.ndim
  if data.shape[axis] == 0 and indices.size:
    if mode != lax.GatherScatterMode.FILL_OR_DROP:
      raise op_error(
        OP,
        f"cannot gather along axis={axis} of size 0 (data shape "
        f"{shape_str(data.shape)}): every index is out of range; "
        "use mode='fill' to get fill values",
        IndexError,
      )
    return jnp.full(
      indices.shape,
      _common.fill_value_or_default(0 if tangent else fill_value, data.dtype),
      data.dtype,
    )
  # Batching dims must match in size: restrict data to the leading part that
  # a smaller indices dim covers (a no-op when the shapes agree).
  limits = tuple(
    data.shape[d] if d == axis else indices.shape[d] for d in range(r)
  )
  if limits != data.shape:
    data = lax.slice(data, (0,) * r, limits)
  batch = tuple(d for d in range(r) if d != axis)
  dnums = lax.GatherDimensionNumbers(
    offset_dims=(),
    collapsed_slice_dims=(axis,),
    start_index_map=(axis,),
    operand_batching_dims=batch,
    start_indices_batching_dims=batch,
  )
  return _fill.gather(
    data, indices[..., None], dnums, mode, fill_value, tangent
  )


# Linear in data; out-of-range reads have a zero tangent.
_gather_elements = linear_custom_jvp(
  _gather,
  nondiff_argnums=(2, 3, 4, 5),
  linear_argnums=(0,),
  tangent_nondiff=lambda axis, mode, fill_value, tangent: (axis, mode, 0, True),
  gather=True,
  # An element keeps its coordinate along every other dim, where indices
  # span data.
  read_dims=lambda shape, index_shape, axis, *_: ReadDims(
    tuple(
      d
      for d, (n, m) in enumerate(zip(shape, index_shape))
      if d != axis and _common.provable(operator.eq, n, m)
    )
  ),
)


def gather_elements(
  data: ArrayLike,
  indices: ArrayLike,
  axis: IntLike = 0,
  *,
  mode: _common.GatherMode = "fill",
  fill_value: ArrayLike | None = None,
) -> jax.Array:
  """Gathers single elements of `data` along `axis` (GatherElements-11/13).

  For rank 3 and `axis=1`: `out[i][j][k] = data[i][indices[i][j][k]][k]`, and
  likewise for every rank and axis.

  Args:
    data: array of rank r >= 1, any dtype.
    indices: integer array of rank r. `indices.shape[d] <= data.shape[d]` for
      `d != axis` (the output covers the leading part of data; no
      broadcasting). Values in `[-s, s-1]` with `s = data.shape[axis]`;
      negative values count from the end.
    axis: static int in `[-r, r-1]`.
    mode: out-of-range policy under `jit`: `"fill"` (default; never reads
      outside `data`), `"clip"` or `"promise_in_bounds"`, as in
      `jaxops.gather_nd`. Concrete indices are checked eagerly
      (`IndexError`); `checkify.index_checks` reports traced ones.
    fill_value: static scalar for out-of-range reads with `mode="fill"`,
      as in `jaxops.gather_nd` (default as in `jnp.take`: NaN for inexact
      dtypes).

  Returns:
    Array of shape `indices.shape` and data's dtype.

  Example:
    >>> import jax.numpy as jnp, jaxops
    >>> data = jnp.array([[1, 2], [3, 4]], dtype=jnp.int32)
    >>> jaxops.gather_elements(data, jnp.array([[0, 0], [1, 0]]), axis=1)
    Array([[1, 1],
           [4, 3]], dtype=int32)

  Implements ONNX GatherElements-11 and -13 (the two differ only in the
  dtypes they list).
  """
  if _export.active():
    return _exported(data, indices, axis, mode, fill_value)
  data = _values.as_data(data, OP)
  indices = _common.as_indices(indices, OP)
  gather_elements_shape(data.shape, indices.shape, axis)
  a = _common.canonicalize_axis(axis, data.ndim, OP)
  gather_mode = _common.canonicalize_mode(
    mode, OP, ("fill", "clip", "promise_in_bounds")
  )
  fill_value = _values.static_fill_value(fill_value, OP, data.dtype)
  _common.check_concrete_bounds(indices, data.shape[a], OP)
  return _prepare_and_gather(
    data,
    _values.index_array(indices),
    a,
    gather_mode,
    fill_value,
    _order.constructed_only(),
  )


# Jitted so that an eager call compiles one program per signature (see
# jaxops._gather_nd); inlined under an outer transformation.
@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _prepare_and_gather(data, indices, axis, mode, fill_value, constructed):
  indices = _common.prepare_indices(indices, data.shape[axis])
  if mode == lax.GatherScatterMode.FILL_OR_DROP:
    # The fill-mode gather only ever reads in range; checkify.index_checks
    # still reports the index that was out of range.
    indices = _checks.checked_gather_indices(
      indices[..., None], data.shape, (axis,)
    )[..., 0]
  indices = _common.batched_like(indices, data)
  return _gather_elements(
    data, indices, axis, mode, fill_value, False, constructed
  )


# Export primitive (docs/export.md#gather-elements) ---------------------------
# `jaxops_gather_elements(data, indices; axis, mode, fill_value)`, lowered to
# ONNX by jaxops/onnx/_gather_elements.py.


def _export_batch(args, dims, *, axis, **params):
  # The node has no batch dims: both operands get the vmapped dim in front
  # (an unbatched one broadcast), and the axis moves one back.
  data, indices = _export.batched_in_front(args, dims)
  return gather_elements_p.bind(data, indices, axis=axis + 1, **params), 0


gather_elements_p = _export.primitive(
  "jaxops_gather_elements",
  gather_elements,
  _export.abstract_eval(gather_elements_shape, OP, params=("axis",)),
  _export_batch,
)


def _exported(
  data: Any, indices: Any, axis: Any, mode: Any, fill_value: Any
) -> jax.Array:
  """`gather_elements` while exporting: one `gather_elements_p`, or the
  normal computation where the node cannot express the call."""
  data, indices = _export.validated(
    lambda d, i: gather_elements(d, i, axis, mode=mode, fill_value=fill_value),
    data,
    indices,
  )
  a = operator.index(axis) % data.ndim
  if data.shape[a] == 0 and indices.size != 0:
    # Gathers from a zero-size axis: jaxops' fill value or error.
    return _export.normal(
      gather_elements, data, indices, a, mode=mode, fill_value=fill_value
    )
  return gather_elements_p.bind(
    data,
    indices,
    axis=a,
    mode=mode,
    fill_value=_values.static_fill_value(fill_value, OP, data.dtype),
  )
