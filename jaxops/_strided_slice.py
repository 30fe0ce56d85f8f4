"""StridedSlice-1 (OpenVINO opset1).

Semantics, mask rules and decisions: docs/semantics.md#strided-slice; errata
SS-1..SS-11 (docs/semantics.md#ss-1 ...). Design: docs/design.md.

Every attribute is static, so the whole slice spec (begin/end/strides and the
five masks) is resolved at trace time into a `jaxops._slicing.Plan` (new axes
inserted, shrunk dims dropped), whose lowering (one `lax.slice`, `lax.rev`
and reshape) and derivative (the same plan of the tangent; a `pad` in
reverse mode) `jaxops._slicing` shares with Slice-8.

Decisions where the StridedSlice-1 text and the OpenVINO runtime disagree, or
both are silent (docs/semantics.md#ss-1 to #ss-11), are listed in
`strided_slice`'s docstring.
"""

from __future__ import annotations

import operator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxops import _common, _export, _slicing, _values
from jaxops._common import (
  ArrayLike,
  IntSequence,
  Mask,
  Shape,
  ShapeLike,
  op_error,
  shape_str,
)

OP = "StridedSlice-1"

_MASK_NAMES = (
  "begin_mask",
  "end_mask",
  "new_axis_mask",
  "shrink_axis_mask",
  "ellipsis_mask",
)


def _mask(value: Any, m: int, name: str) -> tuple[int, ...]:
  """Canonicalizes one mask to a tuple of m 0/1 entries.

  Accepts a sequence (list, tuple, 1-D array) of 0/1 -- zero-extended when
  shorter than m, extra entries ignored when longer, as the spec says -- or a
  TF-style int bitfield whose bit i is entry i (bits >= m ignored likewise).
  """
  if value is None:
    return (0,) * m
  if isinstance(value, (int, np.integer)) and not isinstance(
    value, (bool, np.bool_)
  ):
    bits = operator.index(value)
    if bits < 0:
      raise op_error(
        OP,
        f"{name}={bits} as an int bitfield must be >= 0 (bit i is "
        "entry i of the mask)",
      )
    return tuple((bits >> i) & 1 for i in range(m))
  if isinstance(value, np.ndarray) and value.dtype == np.bool_:
    value = value.astype(np.int64)
  elif isinstance(value, (list, tuple)):
    value = [int(v) if isinstance(v, (bool, np.bool_)) else v for v in value]
  entries = _common.static_int_tuple(value, OP, name)
  for i, v in enumerate(entries):
    if v not in (0, 1):
      raise op_error(
        OP,
        f"{name}[{i}]={v} must be 0 or 1 (masks are lists of 0/1, or "
        f"an int bitfield), got {name}={list(entries)}",
      )
  return (entries + (0,) * m)[:m]


def plan(
  data_shape: ShapeLike,
  begin: IntSequence,
  end: IntSequence,
  strides: IntSequence | None = None,
  begin_mask: Mask = (),
  end_mask: Mask = (),
  new_axis_mask: Mask = (),
  shrink_axis_mask: Mask = (),
  ellipsis_mask: Mask = (),
) -> _slicing.Plan:
  """The static lowering of a spec on `data_shape`, or the operator's
  trace-time error."""
  data_shape = _common.shape_dims(data_shape, OP, "data")
  begin = _common.static_int_tuple(begin, OP, "begin")
  end = _common.static_int_tuple(end, OP, "end")
  m = len(begin)
  if strides is None:
    strides = (1,) * m
  strides = _common.static_int_tuple(strides, OP, "strides")
  if not len(begin) == len(end) == len(strides):
    raise op_error(
      OP,
      f"begin, end and strides must have one length M, got "
      f"len(begin)={len(begin)}, len(end)={len(end)}, "
      f"len(strides)={len(strides)}",
    )
  masks = {
    name: _mask(value, m, name)
    for name, value in zip(
      _MASK_NAMES,
      (begin_mask, end_mask, new_axis_mask, shrink_axis_mask, ellipsis_mask),
    )
  }
  ellipses = [i for i, bit in enumerate(masks["ellipsis_mask"]) if bit]
  if len(ellipses) > 1:
    raise op_error(
      OP,
      f"ellipsis_mask may set at most one bit, got bits at positions "
      f"{ellipses} (ellipsis_mask={list(masks['ellipsis_mask'])})",
    )
  # Precedence at one position: ellipsis, then new_axis, then shrink (TF's
  # order; docs/semantics.md#ss-6 and #ss-10).
  kinds = []
  for i in range(m):
    if masks["ellipsis_mask"][i]:
      kinds.append("ellipsis")
    elif masks["new_axis_mask"][i]:
      kinds.append("new_axis")
    elif masks["shrink_axis_mask"][i]:
      kinds.append("shrink")
    else:
      kinds.append("slice")
  rank = len(data_shape)
  named = sum(kind in ("slice", "shrink") for kind in kinds)
  if named > rank:
    raise op_error(
      OP,
      f"the slice spec names {named} dims of data (entries that are "
      f"neither new_axis nor ellipsis, M={m}) but data has rank {rank} "
      f"(data shape {shape_str(data_shape)})",
    )
  # The ellipsis stands for rank - (M - sum(new_axis_mask) - 1) full dims; a
  # spec without one keeps the dims it does not name whole, as if it ended in
  # an ellipsis.
  if not ellipses:
    kinds.append("ellipsis")
  start: list[Any] = []
  limit: list[Any] = []
  step: list[int] = []
  reverse: list[int] = []
  reverse_first: list[int] = []
  out_shape: list[Any] = []
  dim = 0
  for i, kind in enumerate(kinds):
    if kind == "ellipsis":
      for _ in range(rank - named):
        start.append(0)
        limit.append(data_shape[dim])
        step.append(1)
        out_shape.append(data_shape[dim])
        dim += 1
    elif kind == "new_axis":
      out_shape.append(1)
    elif kind == "shrink":
      size = data_shape[dim]
      index = begin[i] + size if begin[i] < 0 else begin[i]
      # For a symbolic size, in range for every size it can take.
      if not (
        _common.provable(operator.le, 0, index)
        and _common.provable(operator.lt, index, size)
      ):
        raise op_error(
          OP,
          f"shrink_axis_mask[{i}] takes the element at begin[{i}]="
          f"{begin[i]}, out of range for data dim {dim} of size {size} "
          f"(valid: [-{size}, {size - 1}]; data shape "
          f"{shape_str(data_shape)})" + _common.symbolic_constraint_hint(size),
        )
      start.append(index)
      limit.append(index + 1)
      step.append(1)
      dim += 1
    else:
      if strides[i] == 0:
        raise op_error(
          OP,
          f"strides[{i}]=0: a stride must be nonzero where it is used "
          f"(strides={list(strides)})",
        )
      sliced = _slicing.slice_dim(
        data_shape[dim],
        begin[i],
        end[i],
        strides[i],
        bool(masks["begin_mask"][i]),
        bool(masks["end_mask"][i]),
      )
      start.append(sliced.start)
      limit.append(sliced.limit)
      step.append(sliced.step)
      if sliced.reverse:
        reverse.append(dim)
      if sliced.reverse_first:
        reverse_first.append(dim)
      out_shape.append(sliced.count)
      dim += 1
  return _slicing.Plan(
    data_shape,
    tuple(start),
    tuple(limit),
    tuple(step),
    tuple(reverse),
    tuple(out_shape),
    tuple(reverse_first),
  )


def strided_slice_shape(
  data_shape: ShapeLike,
  begin: IntSequence,
  end: IntSequence,
  strides: IntSequence | None = None,
  begin_mask: Mask = (),
  end_mask: Mask = (),
  new_axis_mask: Mask = (),
  shrink_axis_mask: Mask = (),
  ellipsis_mask: Mask = (),
) -> Shape:
  """Output shape of StridedSlice-1; raises the operator's trace-time errors.

  Arguments as in `jaxops.strided_slice`, with `data_shape` for `data`.

  >>> strided_slice_shape((2, 3, 4), [1, 1, 123], [0, 0, 2], [1, 1, -1],
  ...                     begin_mask=[0, 1, 1], end_mask=[1, 1, 1])
  (1, 3, 4)
  """
  return plan(
    data_shape,
    begin,
    end,
    strides,
    begin_mask,
    end_mask,
    new_axis_mask,
    shrink_axis_mask,
    ellipsis_mask,
  ).out_shape


def strided_slice(
  data: ArrayLike,
  begin: IntSequence,
  end: IntSequence,
  strides: IntSequence | None = None,
  begin_mask: Mask = (),
  end_mask: Mask = (),
  new_axis_mask: Mask = (),
  shrink_axis_mask: Mask = (),
  ellipsis_mask: Mask = (),
) -> jax.Array:
  """Extracts a strided slice of `data` (StridedSlice-1), like numpy basic
  indexing and `tf.strided_slice`.

  Entry i of the spec (i < M) is, by its mask bits:

  * ellipsis_mask[i]: `...`, standing for `rank - (M - sum(new_axis_mask) -
    1)` full dims (new_axis bits at the ellipsis position not counted);
  * new_axis_mask[i]: `np.newaxis`, a new dim of size 1;
  * shrink_axis_mask[i]: the single element `begin[i]` (negative counts from
    the end), the dim dropped; end[i], strides[i] and begin_mask[i] ignored;
  * otherwise the slice `begin[i]:end[i]:strides[i]` of the next data dim,
    with `begin_mask[i]`/`end_mask[i]` meaning an omitted begin/end (so
    `::-1` with end_mask keeps all elements).

  Dims not named by the spec are kept whole. Out-of-range begin/end clamp
  silently as in the OpenVINO runtime: for a stride `k > 0`, `begin` and `end`
  (after adding the dim size to negatives) clamp into `[0, size]`; for `k < 0`
  begin clamps into `[0, size - 1]` and end into `[-1, size]` (-1 is "before
  element 0"). Unlike Python, a negative-stride begin below `-size` therefore
  starts at element 0: begin -10, end -20, stride -1 on `[0, 1, 2, 3]` gives
  `[0]`. `begin == end` gives an empty dim.

  Where the spec text, the OpenVINO CPU plugin and its reference evaluator
  differ, jaxops does this (docs/semantics.md#ss-6, #ss-10, #ss-11):

  * new_axis and shrink bits at one position: new_axis wins (TF);
  * ellipsis and new_axis (or shrink) bits at one position: the ellipsis wins
    (TF and OpenVINO shape inference);
  * begin_mask on a shrunk dim is ignored: the element at begin is taken (TF
    and OpenVINO's reference evaluator; the CPU plugin takes element 0);
  * a zero stride is an error only at a slicing entry; at new_axis, shrink
    and ellipsis entries the stride is ignored, zero included (as in both
    OpenVINO implementations).

  Args:
    data: array of any shape and dtype.
    begin: static int sequence of length M (a list, tuple or concrete 1-D
      integer array).
    end: static int sequence of length M.
    strides: static int sequence of length M, nonzero at slicing entries;
      default all ones.
    begin_mask, end_mask, new_axis_mask, shrink_axis_mask, ellipsis_mask:
      sequences of 0/1 (zero-extended when shorter than M, extra entries
      ignored), or TF-style int bitfields (bit i is entry i). At most one
      ellipsis bit.

  Returns:
    Array of data's dtype; its shape is `jaxops.shapes.strided_slice(...)`.

  Raises:
    ValueError: lengths differ, zero stride, more than one ellipsis bit, a
      mask entry not 0/1, more dims named than data has, or a shrunk dim's
      begin out of range.
    TypeError: begin/end/strides/masks are not static integers (e.g. traced).

  Example:
    >>> import jax.numpy as jnp, jaxops
    >>> x = jnp.arange(12, dtype=jnp.int32).reshape(3, 4)
    >>> jaxops.strided_slice(x, [0, -1], [3, 0], [2, -1])  # x[0:3:2, -1:0:-1]
    Array([[ 3,  2,  1],
           [11, 10,  9]], dtype=int32)
    >>> jaxops.strided_slice(x, [0, 1], [0, 0], new_axis_mask=[1],
    ...                      shrink_axis_mask=[0, 1])  # x[np.newaxis, 1]
    Array([[4, 5, 6, 7]], dtype=int32)

  Implements OpenVINO StridedSlice-1.
  """
  if _export.active():
    return _exported(
      data,
      begin,
      end,
      strides,
      begin_mask,
      end_mask,
      new_axis_mask,
      shrink_axis_mask,
      ellipsis_mask,
    )
  data = _values.as_data(data, OP)
  slice_plan = plan(
    data.shape,
    begin,
    end,
    strides,
    begin_mask,
    end_mask,
    new_axis_mask,
    shrink_axis_mask,
    ellipsis_mask,
  )
  return _slicing.apply(slice_plan, data)


# Export primitive (docs/export.md#strided-slice) -----------------------------
# `jaxops_strided_slice(data; batch_ndim, begin, end, strides, *masks)`: the
# spec applied to `data.shape[batch_ndim:]` (leading dims come from `vmap`);
# lowered to ONNX by jaxops/onnx/_strided_slice.py.

SPEC_NAMES = ("begin", "end", "strides") + _MASK_NAMES


strided_slice_p = _export.batch_ndim_primitive(
  "jaxops_strided_slice", strided_slice, strided_slice_shape, OP
)


def _exported(data: Any, *spec: Any) -> jax.Array:
  """`strided_slice` while exporting; `spec` in positional order."""
  _export.validate(lambda d: strided_slice(d, *spec), data)
  params = dict(zip(SPEC_NAMES, map(_export.hashable, spec)))
  return strided_slice_p.bind(jnp.asarray(data), batch_ndim=0, **params)
