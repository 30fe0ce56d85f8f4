"""What every ONNX lowering of an export primitive uses.

The lowerings are jax2onnx plugins, one module per operator beside this one
(`jaxops/onnx/_<operator>.py`, each registering its operator's primitive with
`register_primitive`); they and this module are the only ones that use
jax2onnx's plugin API and the lowering context it passes. `jaxops.onnx`
imports them when it exports, never `import jaxops`.

Index casts: onnxruntime's GatherND and ScatterND take int64 indices only;
GatherElements takes int32 and int64 as they are, other widths are cast. With
`mode="clip"` the indices are clamped into `[-s, s-1]` first (Max and Min, or
Min alone for unsigned indices), which the runtimes' own negative-index wrap
then maps exactly as jaxops' clip does; the other modes leave out-of-range
indices to the runtime (docs/export.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from jaxops import _export

INT64 = ir.DataType.INT64


def dims(shape: Sequence[Any]) -> ir.Shape:
  """An ONNX shape: ints, and symbolic dims by name."""
  return ir.Shape(
    [int(d) if isinstance(d, (int, np.integer)) else str(d) for d in shape]
  )


def value_of(ctx: Any, var: Any, hint: str) -> ir.Value:
  """The ONNX value of a jaxpr variable."""
  return ctx.get_value_for_var(var, name_hint=ctx.fresh_name(hint))


def const(ctx: Any, values: Any, hint: str, dtype: Any = np.int64) -> ir.Value:
  """An initializer holding `values`."""
  return ctx.builder.add_initializer_from_array(
    ctx.fresh_name(hint), np.asarray(values, dtype=dtype)
  )


def node(
  ctx: Any,
  op_type: str,
  inputs: Sequence[ir.Value],
  *,
  dtype: Any,
  shape: Sequence[Any],
  **attributes: Any,
) -> ir.Value:
  """The output of one new node of `op_type`, typed `dtype` and `shape`."""
  out = getattr(ctx.builder, op_type)(
    *inputs, **attributes, _outputs=[ctx.fresh_name(op_type)]
  )
  out.type = ir.TensorType(dtype)
  out.shape = dims(shape)
  return out


def node_with_const(
  ctx: Any,
  op_type: str,
  value: ir.Value,
  values: Any,
  hint: str,
  *,
  dtype: Any,
  shape: Sequence[Any],
  **attributes: Any,
) -> ir.Value:
  """The output of one new node of `op_type` on `value` and an int64
  initializer holding `values` (its axes, or its target shape)."""
  return node(
    ctx,
    op_type,
    [value, const(ctx, values, hint)],
    dtype=dtype,
    shape=shape,
    **attributes,
  )


def bind(ctx: Any, var: Any, value: ir.Value) -> None:
  """Makes `value` the ONNX value of the jaxpr variable `var`."""
  ctx.bind_value_for_var(var, value)


def output(
  ctx: Any,
  var: Any,
  op_type: str,
  inputs: Sequence[ir.Value],
  **attributes: Any,
) -> None:
  """Makes one new node of `op_type` the ONNX value of the primitive's output
  `var`: typed as its first input (the data), shaped as `var`."""
  out = node(
    ctx,
    op_type,
    inputs,
    dtype=inputs[0].dtype,
    shape=var.aval.shape,
    **attributes,
  )
  bind(ctx, var, out)


def indices(
  ctx: Any, var: Any, sizes: Any, *, clip: bool, keep: Sequence[Any] = ()
) -> ir.Value:
  """The index input of a node: clamped for mode="clip", cast to int64 unless
  its dtype is in `keep`.

  `sizes` is the size of every indexed dim (broadcast along the last axis of
  the indices) or one size for all. Clamping into `[-s, s-1]` keeps an
  in-range negative index as it is (the node wraps it) and turns one below
  `-s` into `-s`, which wraps to 0, as jaxops' clip does.
  """
  value = value_of(ctx, var, "indices")
  dtype = np.dtype(var.aval.dtype)
  shape = var.aval.shape
  if clip and not all(map(_export.is_int, np.ravel(np.asarray(sizes, object)))):
    raise NotImplementedError(
      f"mode='clip' exports a clamp to the indexed dims' sizes, which must "
      f"be static; got {sizes}"
    )
  sizes = np.asarray(sizes, np.int64) if clip else np.zeros(0, np.int64)
  unsigned = np.issubdtype(dtype, np.unsignedinteger)
  if clip and unsigned:
    # Never negative; clamp before a cast could wrap a huge value negative.
    value = _bounded(ctx, "Min", value, sizes - 1, "upper", dtype, shape)
  if dtype not in [np.dtype(t) for t in keep]:
    value = node(
      ctx, "Cast", [value], dtype=INT64, shape=shape, to=int(INT64.value)
    )
    dtype = np.dtype(np.int64)
  if clip and not unsigned:
    value = _bounded(ctx, "Max", value, -sizes, "lower", dtype, shape)
    value = _bounded(ctx, "Min", value, sizes - 1, "upper", dtype, shape)
  return value


def _bounded(
  ctx: Any,
  op_type: str,
  value: ir.Value,
  bound: Any,
  hint: str,
  dtype: Any,
  shape: Sequence[Any],
) -> ir.Value:
  """`op_type` (Max or Min) of `value` and a `bound` initializer of `dtype`."""
  return node(
    ctx,
    op_type,
    [value, const(ctx, bound, hint, dtype)],
    dtype=value.dtype,
    shape=shape,
  )


def slice_node(
  ctx: Any,
  value: ir.Value,
  slices: Sequence[tuple[int, int, int, int]],
  lead: int,
  shape: Sequence[Any],
) -> ir.Value:
  """One Slice of `value` by `(axis, start, end, step)` rows (axes counted
  after `lead` leading dims), or `value` itself when there are none."""
  if not slices:
    return value
  axes, starts, ends, steps = zip(*slices)
  return node(
    ctx,
    "Slice",
    [
      value,
      const(ctx, starts, "starts"),
      const(ctx, ends, "ends"),
      const(ctx, [lead + a for a in axes], "axes"),
      const(ctx, steps, "steps"),
    ],
    dtype=value.dtype,
    shape=shape,
  )
