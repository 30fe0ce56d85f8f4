"""ONNX lowerings of the export primitives, as jax2onnx plugins.

The only module that uses jax2onnx's plugin API (`register_primitive`,
`PrimitiveLeafPlugin` and the lowering context it passes); `jaxops.onnx`
imports it. Each primitive of `jaxops._export` becomes one ONNX node of its
own kind (docs/export.md):

* `jaxops_gather_nd`: GatherND(batch_dims), after a Cast of the indices to
  int64;
* `jaxops_gather_elements`: GatherElements(axis), after a Slice of data where
  indices dims are smaller outside the axis;
* `jaxops_scatter_nd_update`: ScatterND (reduction none), after a Cast of the
  indices to int64;
* `jaxops_strided_slice`: Slice (negative steps for reversed dims), then at
  most one Squeeze, Unsqueeze or Reshape.

Casts: onnxruntime's GatherND and ScatterND take int64 indices only;
GatherElements takes int32 and int64 as they are, other widths are cast. With
`mode="clip"` the indices are clamped into `[-s, s-1]` first (Max and Min, or
Min alone for unsigned indices), which the runtimes' own negative-index wrap
then maps exactly as jaxops' clip does; the other modes leave out-of-range
indices to the runtime.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
from jax2onnx.plugins.plugin_system import (
  PrimitiveLeafPlugin,
  register_primitive,
)

from jaxops import _export

_INT64 = ir.DataType.INT64


def _dims(shape: Sequence[Any]) -> ir.Shape:
  return ir.Shape(
    [int(d) if isinstance(d, (int, np.integer)) else str(d) for d in shape]
  )


def _input(ctx: Any, var: Any, hint: str) -> ir.Value:
  return ctx.get_value_for_var(var, name_hint=ctx.fresh_name(hint))


def _const(ctx: Any, values: Any, hint: str, dtype: Any = np.int64) -> ir.Value:
  return ctx.builder.add_initializer_from_array(
    ctx.fresh_name(hint), np.asarray(values, dtype=dtype)
  )


def _node(
  ctx: Any,
  op_type: str,
  inputs: Sequence[ir.Value],
  *,
  dtype: Any,
  shape: Sequence[Any],
  **attributes: Any,
) -> ir.Value:
  out = getattr(ctx.builder, op_type)(
    *inputs, **attributes, _outputs=[ctx.fresh_name(op_type)]
  )
  out.type = ir.TensorType(dtype)
  out.shape = _dims(shape)
  return out


def _indices(
  ctx: Any, var: Any, sizes: Any, *, clip: bool, keep: Sequence[Any] = ()
) -> ir.Value:
  """The index input of a node: clamped for mode="clip", cast to int64 unless
  its dtype is in `keep`.

  `sizes` is the size of every indexed dim (broadcast along the last axis of
  the indices) or one size for all. Clamping into `[-s, s-1]` keeps an
  in-range negative index as it is (the node wraps it) and turns one below
  `-s` into `-s`, which wraps to 0, as jaxops' clip does.
  """
  value = _input(ctx, var, "indices")
  dtype = np.dtype(var.aval.dtype)
  shape = var.aval.shape
  if clip and not all(
    map(_export._is_int, np.ravel(np.asarray(sizes, object)))
  ):
    raise NotImplementedError(
      f"mode='clip' exports a clamp to the indexed dims' sizes, which must "
      f"be static; got {sizes}"
    )
  sizes = np.asarray(sizes, np.int64) if clip else np.zeros(0, np.int64)
  unsigned = np.issubdtype(dtype, np.unsignedinteger)
  if clip and unsigned:
    # Never negative; clamp before a cast could wrap a huge value negative.
    value = _node(
      ctx,
      "Min",
      [value, _const(ctx, sizes - 1, "upper", dtype)],
      dtype=value.dtype,
      shape=shape,
    )
  if dtype not in [np.dtype(t) for t in keep]:
    value = _node(
      ctx, "Cast", [value], dtype=_INT64, shape=shape, to=int(_INT64.value)
    )
    dtype = np.dtype(np.int64)
  if clip and not unsigned:
    value = _node(
      ctx,
      "Max",
      [value, _const(ctx, -sizes, "lower", dtype)],
      dtype=value.dtype,
      shape=shape,
    )
    value = _node(
      ctx,
      "Min",
      [value, _const(ctx, sizes - 1, "upper", dtype)],
      dtype=value.dtype,
      shape=shape,
    )
  return value


def _bind(ctx: Any, var: Any, value: ir.Value) -> None:
  ctx.bind_value_for_var(var, value)


@register_primitive(jaxpr_primitive=_export.gather_nd_p.name)
class GatherNDPlugin(PrimitiveLeafPlugin):
  """`jaxops.gather_nd` -> GatherND(batch_dims)."""

  def lower(self, ctx: Any, eqn: Any) -> None:
    data_var, indices_var = eqn.invars
    (out_var,) = eqn.outvars
    b = eqn.params["batch_dims"]
    k = indices_var.aval.shape[-1]
    data = _input(ctx, data_var, "data")
    indices = _indices(
      ctx,
      indices_var,
      data_var.aval.shape[b : b + k],
      clip=eqn.params["mode"] == "clip",
    )
    _bind(
      ctx,
      out_var,
      _node(
        ctx,
        "GatherND",
        [data, indices],
        dtype=data.dtype,
        shape=out_var.aval.shape,
        batch_dims=b,
      ),
    )


def _keep_slice_in_front(ctx: Any, value: ir.Value) -> None:
  """Rewrites the zero starts of a Slice producing `value` as -size.

  OpenVINO's transformations drop a Slice whose start is 0 in front of
  GatherElements, as if it only cut the gather axis (then reject the shapes,
  or wrap negative indices around the uncut dim). The same Slice with start
  -size -- the same elements, in ONNX and in OpenVINO -- is kept.
  """
  node = value.producer()
  if node is None or node.op_type != "Slice":
    return
  source, starts_value, *rest = node.inputs
  starts = None if starts_value is None else starts_value.const_value
  if source is None or source.shape is None or starts is None:
    return
  old = starts.numpy().astype(np.int64)
  axes_value = rest[1] if len(rest) > 1 else None
  if axes_value is None:
    axes = np.arange(len(old))
  elif axes_value.const_value is not None:
    axes = axes_value.const_value.numpy()
  else:
    return
  shape = source.shape
  new = old.copy()
  for j, axis in enumerate(axes.tolist()):
    size = shape[axis % len(shape)]
    if new[j] == 0 and isinstance(size, int) and size > 0:
      new[j] = -size
  if not np.array_equal(new, old):
    node.replace_input_with(1, _const(ctx, new, "starts"))


@register_primitive(jaxpr_primitive=_export.gather_elements_p.name)
class GatherElementsPlugin(PrimitiveLeafPlugin):
  """`jaxops.gather_elements` -> GatherElements(axis)."""

  def lower(self, ctx: Any, eqn: Any) -> None:
    data_var, indices_var = eqn.invars
    (out_var,) = eqn.outvars
    axis = eqn.params["axis"]
    data = _input(ctx, data_var, "data")
    _keep_slice_in_front(ctx, data)
    indices = _indices(
      ctx,
      indices_var,
      data_var.aval.shape[axis],
      clip=eqn.params["mode"] == "clip",
      keep=(np.int32, np.int64),
    )
    data_shape = tuple(data_var.aval.shape)
    cut = [
      (d, size, n)
      for d, (size, n) in enumerate(zip(data_shape, indices_var.aval.shape))
      if d != axis and _export._is_int(size) and _export._is_int(n) and n < size
    ]
    if cut:
      # The leading part of data that smaller indices dims cover (OpenVINO
      # requires equal dims), from -size for the reason above.
      axes, sizes, ends = zip(*cut)
      shape = tuple(
        dict(zip(axes, ends)).get(d, size) for d, size in enumerate(data_shape)
      )
      data = _node(
        ctx,
        "Slice",
        [
          data,
          _const(ctx, [-size for size in sizes], "starts"),
          _const(ctx, ends, "ends"),
          _const(ctx, axes, "axes"),
        ],
        dtype=data.dtype,
        shape=shape,
      )
    _bind(
      ctx,
      out_var,
      _node(
        ctx,
        "GatherElements",
        [data, indices],
        dtype=data.dtype,
        shape=out_var.aval.shape,
        axis=axis,
      ),
    )


@register_primitive(jaxpr_primitive=_export.scatter_nd_update_p.name)
class ScatterNDPlugin(PrimitiveLeafPlugin):
  """`jaxops.scatter_nd_update` -> ScatterND (reduction none)."""

  def lower(self, ctx: Any, eqn: Any) -> None:
    data_var, indices_var, updates_var = eqn.invars
    (out_var,) = eqn.outvars
    k = indices_var.aval.shape[-1]
    data = _input(ctx, data_var, "data")
    indices = _indices(
      ctx,
      indices_var,
      data_var.aval.shape[:k],
      clip=eqn.params["mode"] == "clip",
    )
    updates = _input(ctx, updates_var, "updates")
    _bind(
      ctx,
      out_var,
      _node(
        ctx,
        "ScatterND",
        [data, indices, updates],
        dtype=data.dtype,
        shape=out_var.aval.shape,
      ),
    )


def _removed_ones(
  longer: Sequence[Any], shorter: Sequence[Any]
) -> list[int] | None:
  """Positions of `longer` whose removal leaves `shorter`, if they are all
  dims of size 1; None otherwise."""
  removed, j = [], 0
  for i, dim in enumerate(longer):
    if j < len(shorter) and str(dim) == str(shorter[j]):
      j += 1
    elif _export._is_int(dim) and dim == 1:
      removed.append(i)
    else:
      return None
  return removed if j == len(shorter) else None


@register_primitive(jaxpr_primitive=_export.strided_slice_p.name)
class StridedSlicePlugin(PrimitiveLeafPlugin):
  """`jaxops.strided_slice` -> Slice, then Squeeze, Unsqueeze or Reshape."""

  def lower(self, ctx: Any, eqn: Any) -> None:
    (data_var,) = eqn.invars
    (out_var,) = eqn.outvars
    params = dict(eqn.params)
    lead = params.pop("batch_ndim")
    shape = tuple(data_var.aval.shape)
    slices, sliced, _ = _export.slice_plan(shape[lead:], params)
    shape = shape[:lead] + sliced
    value = _input(ctx, data_var, "data")
    dtype = value.dtype
    if slices:
      axes, starts, ends, steps = zip(*slices)
      value = _node(
        ctx,
        "Slice",
        [
          value,
          _const(ctx, starts, "starts"),
          _const(ctx, ends, "ends"),
          _const(ctx, [lead + a for a in axes], "axes"),
          _const(ctx, steps, "steps"),
        ],
        dtype=dtype,
        shape=shape,
      )
    out_shape = tuple(out_var.aval.shape)
    if tuple(map(str, shape)) != tuple(map(str, out_shape)):
      squeezed = _removed_ones(shape, out_shape)
      unsqueezed = _removed_ones(out_shape, shape)
      if squeezed is not None:
        value = _node(
          ctx,
          "Squeeze",
          [value, _const(ctx, squeezed, "axes")],
          dtype=dtype,
          shape=out_shape,
        )
      elif unsqueezed is not None:
        value = _node(
          ctx,
          "Unsqueeze",
          [value, _const(ctx, unsqueezed, "axes")],
          dtype=dtype,
          shape=out_shape,
        )
      else:
        if not all(map(_export._is_int, out_shape)):
          raise NotImplementedError(
            "StridedSlice-1: new and shrunk axes around symbolic dims "
            f"need a Reshape to a static shape; got {out_shape}"
          )
        # allowzero: a 0 in the shape is a dim of size 0, not "copy".
        zero = {"allowzero": 1} if 0 in out_shape else {}
        value = _node(
          ctx,
          "Reshape",
          [value, _const(ctx, out_shape, "shape")],
          dtype=dtype,
          shape=out_shape,
          **zero,
        )
    _bind(ctx, out_var, value)
