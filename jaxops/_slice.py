"""Slice-8 (OpenVINO opset8).

Semantics and errata: docs/semantics.md#slice (the clamp is the runtimes'
ONNX rule, not the spec's "python slicing" sentence: SL-1; where it differs
from Python: SL-2; int64 extremes: SL-3; runtime bug RT-10).

Every attribute is static, so the spec resolves at trace time into a
`jaxops._slicing.Plan`, one `_slicing.slice_dim` per sliced axis -- the one
clamp StridedSlice-1 uses too -- and the forward pass and derivative are
`_slicing.apply`'s: one `lax.slice`, `lax.rev` and no reshape; the tangent is
the same plan, transposed into a `pad` in reverse mode.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxops import _common, _export, _slicing, _values
from jaxops._common import (
  ArrayLike,
  IntSequence,
  Shape,
  ShapeLike,
  op_error,
)

OP = "Slice-8"


def _spec(
  rank: int,
  start: Any,
  stop: Any,
  step: Any,
  axes: Any,
  data_shape: Shape,
) -> tuple[tuple[int, ...], ...]:
  """`(start, stop, step, axes)` as int tuples, axes normalized to >= 0
  (default `0..M-1`), or the operator's error."""
  start = _common.static_int_tuple(start, OP, "start")
  stop = _common.static_int_tuple(stop, OP, "stop")
  step = _common.static_int_tuple(step, OP, "step")
  m = len(start)
  context = _common.shapes_context(data=data_shape)
  _common.check_rank(rank, OP, "data", context)
  if not len(stop) == len(step) == m:
    raise op_error(
      OP,
      f"start, stop and step must have one length, got len(start)={m}, "
      f"len(stop)={len(stop)}, len(step)={len(step)}",
    )
  if axes is None:
    if m > rank:
      raise op_error(
        OP,
        f"len(start)={m} must be <= rank(data)={rank} when axes is not "
        f"given (axes default to 0..len(start)-1) {context}",
      )
    axes = tuple(range(m))
  else:
    given = _common.static_int_tuple(axes, OP, "axes")
    if len(given) != m:
      raise op_error(
        OP,
        f"axes must have the length of start, got len(axes)={len(given)} "
        f"and len(start)={m}",
      )
    axes = tuple(
      _common.canonicalize_axis(v, rank, OP, f"axes[{i}]", context=context)
      for i, v in enumerate(given)
    )
    repeated = sorted({v for v in axes if axes.count(v) > 1})
    if repeated:
      raise op_error(
        OP,
        f"axes must be unique, got axes={list(given)} (data dims "
        f"{repeated} repeated) {context}",
      )
  for i, k in enumerate(step):
    if k == 0:
      raise op_error(
        OP, f"step[{i}]=0: a step must be nonzero (step={list(step)})"
      )
  return start, stop, step, axes


def plan(
  data_shape: ShapeLike,
  start: IntSequence,
  stop: IntSequence,
  step: IntSequence,
  axes: IntSequence | None = None,
) -> _slicing.Plan:
  """The static lowering of a Slice-8 spec on `data_shape`, or the
  operator's trace-time error."""
  data_shape = _common.shape_dims(data_shape, OP, "data")
  start, stop, step, axes = _spec(
    len(data_shape), start, stop, step, axes, data_shape
  )
  lo: list[Any] = [0] * len(data_shape)
  hi = list(data_shape)
  stride = [1] * len(data_shape)
  count = list(data_shape)
  reverse, reverse_first = [], []
  for axis, b, e, k in zip(axes, start, stop, step):
    dim = _slicing.slice_dim(data_shape[axis], b, e, k, False, False)
    lo[axis], hi[axis], stride[axis], count[axis] = (
      dim.start,
      dim.limit,
      dim.step,
      dim.count,
    )
    if dim.reverse:
      reverse.append(axis)
    if dim.reverse_first:
      reverse_first.append(axis)
  return _slicing.Plan(
    data_shape,
    tuple(lo),
    tuple(hi),
    tuple(stride),
    tuple(sorted(reverse)),
    tuple(count),
    tuple(sorted(reverse_first)),
  )


def slice_shape(
  data_shape: ShapeLike,
  start: IntSequence,
  stop: IntSequence,
  step: IntSequence,
  axes: IntSequence | None = None,
) -> Shape:
  """Output shape of Slice-8 (rank of data); raises the operator's errors.

  Arguments as in `jaxops.slice`, with `data_shape` for `data`.

  >>> slice_shape((20, 10, 5), [0, 9], [4, -11], [1, -2], axes=[0, 1])
  (4, 5, 5)
  """
  return plan(data_shape, start, stop, step, axes).out_shape


def slice(
  data: ArrayLike,
  start: IntSequence,
  stop: IntSequence,
  step: IntSequence,
  axes: IntSequence | None = None,
) -> jax.Array:
  """Slices `data` along `axes` (Slice-8).

  For each `i`, dim `axes[i]` keeps the elements
  `start[i], start[i] + step[i], ...` before `stop[i]`, like Python's
  `data[start:stop:step]` except where out-of-range values clamp: negative
  `start`/`stop` count from the end (`+ size`); then for a step `k > 0` both
  clamp into `[0, size]`; for `k < 0` start clamps into `[0, size - 1]` and
  stop into `[-1, size - 1]` (-1 meaning "before element 0"). So a negative
  step whose start is below `-size` starts at element 0 (Python would slice
  nothing): the OpenVINO and ONNX runtimes' rule (docs/semantics.md#sl-1).
  Dims not in `axes` are kept whole; the output has data's rank.

  Args:
    data: array of rank r >= 1, any dtype.
    start, stop, step: static int sequences of one length M (lists, tuples
      or concrete 1-D integer arrays); any int64 value; steps nonzero.
    axes: static int sequence of M unique values in `[-r, r-1]`; default
      `0..M-1`.

  Returns:
    Array of data's dtype and rank; its shape is `jaxops.shapes.slice(...)`.

  Raises:
    ValueError: lengths differ, a zero step, repeated or out-of-range axes.
    TypeError: an attribute is not a static int sequence (e.g. traced).

  Example:
    >>> import jax.numpy as jnp, jaxops
    >>> x = jnp.arange(12, dtype=jnp.int32).reshape(3, 4)
    >>> jaxops.slice(x, [-1], [0], [-2], axes=[1])  # x[:, -1:0:-2]
    Array([[ 3,  1],
           [ 7,  5],
           [11,  9]], dtype=int32)
    >>> jaxops.slice(jnp.arange(3), [-5], [-5], [-1])  # Python: empty
    Array([0], dtype=int32)

  Implements OpenVINO Slice-8.
  """
  if _export.active():
    return _exported(data, start, stop, step, axes)
  data = _values.as_data(data, OP)
  return _slicing.apply(plan(data.shape, start, stop, step, axes), data)


# Export primitive (docs/export.md#slice) -------------------------------------
# `jaxops_slice(data; batch_ndim, start, stop, step, axes)`: the spec applied
# to `data.shape[batch_ndim:]` (leading dims come from `vmap`), the attributes
# int tuples as given except `axes`, normalized to >= 0 (and `0..M-1` when
# not given); lowered to ONNX by jaxops/onnx/_slice.py.


slice_p = _export.batch_ndim_primitive("jaxops_slice", slice, slice_shape, OP)


def _exported(
  data: Any, start: Any, stop: Any, step: Any, axes: Any
) -> jax.Array:
  """`slice` while exporting: one `slice_p`."""
  _export.validate(lambda d: slice(d, start, stop, step, axes), data)
  data = jnp.asarray(data)
  rank = data.ndim
  start, stop, step, axes = _spec(rank, start, stop, step, axes, data.shape)
  return slice_p.bind(
    data, batch_ndim=0, start=start, stop=stop, step=step, axes=axes
  )
