"""`jaxops.scatter_nd_update` -> ScatterND, after a Cast of the indices to
int64 (docs/export.md#scatter-nd-update).

`reduction` none/sum/prod/min/max is the node's `reduction` none/add/mul/
min/max (ScatterND-18). `sub` is `add` of the negated updates: `x - y` and
`x + (-y)` are the same bits in IEEE arithmetic and in wrap-around integers
(unsigned updates, which ONNX's Neg does not take, as `2**bits - y` in
int64).
Bool data: `min`/`max` are AND/OR, so they export as `mul`/`add` (the bool
reductions onnxruntime implements); bool `sub` (XOR over repeats) is data XOR
the parity of the number of true updates per slot, counted with an int32
`add`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
from jax2onnx.plugins.plugin_system import (
  PrimitiveLeafPlugin,
  register_primitive,
)

from jaxops import _scatter_nd_update
from jaxops.onnx import _lowering as low

NODE_REDUCTION = {
  "none": "none",
  "sum": "add",
  "sub": "add",
  "prod": "mul",
  "min": "min",
  "max": "max",
}
# Bool min/max are AND/OR: the node's mul/add on bool.
BOOL_REDUCTION = {"min": "mul", "max": "add"}


def negated(ctx: Any, value: ir.Value, dtype: Any, shape: Any) -> ir.Value:
  """`-value`, bit for bit as jnp.negative.

  Unsigned (ONNX's Neg takes none): `(2**bits - value) mod 2**bits` in
  int64, cast back, for up to 32 bits -- OpenVINO's CPU plugin saturates a
  uint8 `0 - value` to 0 (docs/semantics.md#rt-23); uint64: `0 - value`.
  """
  dtype = np.dtype(dtype)
  if dtype.kind != "u":
    return low.node(ctx, "Neg", [value], dtype=value.dtype, shape=shape)
  if dtype.itemsize == 8:
    zero = low.const(ctx, 0, "zero", dtype)
    return low.node(ctx, "Sub", [zero, value], dtype=value.dtype, shape=shape)
  int64 = ir.DataType.INT64
  wide = low.node(ctx, "Cast", [value], dtype=int64, shape=shape, to=int(int64))
  modulus = low.const(ctx, 2 ** (8 * dtype.itemsize), "modulus", np.int64)
  complement = low.node(ctx, "Sub", [modulus, wide], dtype=int64, shape=shape)
  wrapped = low.node(
    ctx, "Mod", [complement, modulus], dtype=int64, shape=shape
  )
  narrow = ir.DataType.from_numpy(dtype)
  return low.node(
    ctx, "Cast", [wrapped], dtype=narrow, shape=shape, to=int(narrow)
  )


def _bool_xor(ctx, data, indices, updates, data_shape, updates_shape):
  """data XOR (number of true updates per slot is odd)."""
  int32 = ir.DataType.INT32
  zeros = low.const(ctx, np.zeros(data_shape, np.int32), "zeros", np.int32)
  ones = low.node(
    ctx, "Cast", [updates], dtype=int32, shape=updates_shape, to=int(int32)
  )
  count = low.node(
    ctx,
    "ScatterND",
    [zeros, indices, ones],
    dtype=int32,
    shape=data_shape,
    reduction="add",
  )
  odd = low.node(
    ctx,
    "Mod",
    [count, low.const(ctx, 2, "two", np.int32)],
    dtype=int32,
    shape=data_shape,
  )
  flip = low.node(
    ctx, "Cast", [odd], dtype=ir.DataType.BOOL, shape=data_shape, to=9
  )
  return low.node(
    ctx, "Xor", [data, flip], dtype=ir.DataType.BOOL, shape=data_shape
  )


@register_primitive(jaxpr_primitive=_scatter_nd_update.scatter_nd_update_p.name)
class ScatterNDPlugin(PrimitiveLeafPlugin):
  """`jaxops_scatter_nd_update` -> ScatterND(reduction)."""

  def lower(self, ctx: Any, eqn: Any) -> None:
    data_var, indices_var, updates_var = eqn.invars
    (out_var,) = eqn.outvars
    reduction = eqn.params.get("reduction", "none")
    k = indices_var.aval.shape[-1]
    dtype = np.dtype(data_var.aval.dtype)
    data_shape = out_var.aval.shape
    updates_shape = updates_var.aval.shape
    data = low.value_of(ctx, data_var, "data")
    indices = low.indices(
      ctx,
      indices_var,
      data_var.aval.shape[:k],
      clip=eqn.params["mode"] == "clip",
    )
    updates = low.value_of(ctx, updates_var, "updates")
    if dtype == np.bool_ and reduction == "sub":
      out = _bool_xor(ctx, data, indices, updates, data_shape, updates_shape)
      low.bind(ctx, out_var, out)
      return
    node_reduction = NODE_REDUCTION[reduction]
    if dtype == np.bool_:
      node_reduction = BOOL_REDUCTION.get(reduction, node_reduction)
    if reduction == "sub":
      updates = negated(ctx, updates, dtype, updates_shape)
    attributes = (
      {} if node_reduction == "none" else {"reduction": node_reduction}
    )
    low.output(
      ctx, out_var, "ScatterND", [data, indices, updates], **attributes
    )
