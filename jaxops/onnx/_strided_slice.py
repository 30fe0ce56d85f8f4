"""`jaxops.strided_slice` -> Slice (negative steps for reversed dims), then at
most one Squeeze, Unsqueeze or Reshape (docs/export.md#strided-slice)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jax2onnx.plugins.plugin_system import (
  PrimitiveLeafPlugin,
  register_primitive,
)

from jaxops import _export, _slicing, _strided_slice
from jaxops._export import is_int
from jaxops.onnx import _lowering as low


def onnx_slices(
  data_shape: tuple[Any, ...], spec: dict[str, Any]
) -> tuple[list[tuple[int, int, int, int]], tuple[Any, ...]]:
  """The ONNX Slice of a StridedSlice spec on `data_shape` (symbolic dims
  pass through): `jaxops._slicing.onnx_slices` of its plan."""
  return _export.with_symbolic_dims(
    lambda shape: _slicing.onnx_slices(_strided_slice.plan(shape, **spec)),
    [data_shape],
    _strided_slice.OP,
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
    elif is_int(dim) and dim == 1:
      removed.append(i)
    else:
      return None
  return removed if j == len(shorter) else None


@register_primitive(jaxpr_primitive=_strided_slice.strided_slice_p.name)
class StridedSlicePlugin(PrimitiveLeafPlugin):
  """`jaxops_strided_slice` -> Slice, then Squeeze, Unsqueeze or Reshape."""

  def lower(self, ctx: Any, eqn: Any) -> None:
    (data_var,) = eqn.invars
    (out_var,) = eqn.outvars
    params = dict(eqn.params)
    lead = params.pop("batch_ndim")
    shape = tuple(data_var.aval.shape)
    slices, sliced = onnx_slices(shape[lead:], params)
    shape = shape[:lead] + sliced
    value = low.value_of(ctx, data_var, "data")
    dtype = value.dtype
    value = low.slice_node(ctx, value, slices, lead, shape)
    out_shape = tuple(out_var.aval.shape)
    if tuple(map(str, shape)) != tuple(map(str, out_shape)):
      squeezed = _removed_ones(shape, out_shape)
      unsqueezed = _removed_ones(out_shape, shape)
      if squeezed is not None:
        value = low.node_with_const(
          ctx, "Squeeze", value, squeezed, "axes", dtype=dtype, shape=out_shape
        )
      elif unsqueezed is not None:
        value = low.node_with_const(
          ctx,
          "Unsqueeze",
          value,
          unsqueezed,
          "axes",
          dtype=dtype,
          shape=out_shape,
        )
      else:
        if not all(map(is_int, out_shape)):
          raise NotImplementedError(
            "StridedSlice-1: new and shrunk axes around symbolic dims "
            f"need a Reshape to a static shape; got {out_shape}"
          )
        # allowzero: a 0 in the shape is a dim of size 0, not "copy".
        zero = {"allowzero": 1} if 0 in out_shape else {}
        value = low.node_with_const(
          ctx,
          "Reshape",
          value,
          out_shape,
          "shape",
          dtype=dtype,
          shape=out_shape,
          **zero,
        )
    low.bind(ctx, out_var, value)
