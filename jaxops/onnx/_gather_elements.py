"""`jaxops.gather_elements` -> GatherElements(axis), after a Slice of data
where indices dims are smaller outside the axis
(docs/export.md#gather-elements)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
from jax2onnx.plugins.plugin_system import (
  PrimitiveLeafPlugin,
  register_primitive,
)

from jaxops import _gather_elements
from jaxops._export import is_int
from jaxops.onnx import _lowering as low


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
    node.replace_input_with(1, low.const(ctx, new, "starts"))


@register_primitive(jaxpr_primitive=_gather_elements.gather_elements_p.name)
class GatherElementsPlugin(PrimitiveLeafPlugin):
  """`jaxops_gather_elements` -> GatherElements(axis)."""

  def lower(self, ctx: Any, eqn: Any) -> None:
    data_var, indices_var = eqn.invars
    (out_var,) = eqn.outvars
    axis = eqn.params["axis"]
    data = low.value_of(ctx, data_var, "data")
    _keep_slice_in_front(ctx, data)
    indices = low.indices(
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
      if d != axis and is_int(size) and is_int(n) and n < size
    ]
    if cut:
      # The leading part of data that smaller indices dims cover (OpenVINO
      # requires equal dims), from -size for the reason above.
      axes, sizes, ends = zip(*cut)
      shape = tuple(
        dict(zip(axes, ends)).get(d, size) for d, size in enumerate(data_shape)
      )
      data = low.node(
        ctx,
        "Slice",
        [
          data,
          low.const(ctx, [-size for size in sizes], "starts"),
          low.const(ctx, ends, "ends"),
          low.const(ctx, axes, "axes"),
        ],
        dtype=data.dtype,
        shape=shape,
      )
    low.output(ctx, out_var, "GatherElements", [data, indices], axis=axis)
