"""`jaxops.scatter_elements_update` -> ScatterElements(axis, reduction)
(docs/export.md#scatter-elements-update).

`reduction` none/sum/prod/min/max with `use_init_val=True` is one node
(ScatterElements-18 none/add/mul/min/max; bool min/max as mul/add, which are
AND/OR on bool). What ONNX has no node for is a small composite with the
same bits:

* `use_init_val=False`: a first ScatterElements (reduction none) writes the
  reduction's neutral value into every targeted slot -- repeats write the
  same value, so their order cannot matter -- and the reduction runs on that.
* `mean`: the sum as above, the number of updates per slot as an int32
  ScatterElements `add` of ones, and `Where(count > 0, sum / divisor,
  data)` with divisor `count + use_init_val`. Floats divide the sum in the
  data type by the divisor cast to it, as jaxops does. Integers sum in int64
  (exact for data up to 32 bits; 64-bit data must keep its sums within
  int64) and divide rounding toward -inf: `q = Div(s, d)` truncates, so
  `q - (s - q * d < 0)`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
from jax2onnx.plugins.plugin_system import (
  PrimitiveLeafPlugin,
  register_primitive,
)

from jaxops import _reduce, _scatter_elements_update
from jaxops.onnx import _lowering as low
from jaxops.onnx._scatter_nd_update import BOOL_REDUCTION, NODE_REDUCTION

INT64 = ir.DataType.INT64
BOOL = ir.DataType.BOOL


class _Graph:
  """The few nodes of one call, all shaped like data or like indices."""

  def __init__(self, ctx, eqn):
    data_var, indices_var, updates_var = eqn.invars
    self.ctx = ctx
    self.axis = eqn.params["axis"]
    self.data_shape = tuple(data_var.aval.shape)
    self.index_shape = tuple(indices_var.aval.shape)
    self.dtype = np.dtype(data_var.aval.dtype)
    self.data = low.value_of(ctx, data_var, "data")
    self.indices = low.indices(
      ctx,
      indices_var,
      data_var.aval.shape[self.axis],
      clip=eqn.params["mode"] == "clip",
      keep=(np.int32, np.int64),
    )
    self.updates = low.value_of(ctx, updates_var, "updates")

  def node(self, op, inputs, dtype, like_data=True, **attrs):
    shape = self.data_shape if like_data else self.index_shape
    return low.node(self.ctx, op, inputs, dtype=dtype, shape=shape, **attrs)

  def const(self, value, dtype, like_data=True):
    shape = self.data_shape if like_data else self.index_shape
    return low.const(self.ctx, np.full(shape, value, dtype), "fill", dtype)

  def scatter(self, data, updates, reduction):
    attrs = {} if reduction == "none" else {"reduction": reduction}
    return self.node(
      "ScatterElements",
      [data, self.indices, updates],
      data.dtype,
      axis=self.axis,
      **attrs,
    )

  def cast(self, value, to, like_data=True):
    return self.node("Cast", [value], to, like_data, to=int(to.value))

  def init(self, data, reduction, dtype, use_init_val):
    """data, or data with every targeted slot set to the neutral value."""
    if use_init_val:
      return data
    fill = self.const(_reduce.neutral(reduction, dtype), dtype, False)
    return self.scatter(data, fill, "none")

  def reduce(self, reduction, use_init_val):
    node_reduction = NODE_REDUCTION[reduction]
    if self.dtype == np.bool_:
      node_reduction = BOOL_REDUCTION.get(reduction, node_reduction)
    data = self.init(self.data, reduction, self.dtype, use_init_val)
    return self.scatter(data, self.updates, node_reduction)

  def mean(self, use_init_val):
    counts = self.scatter(
      self.const(0, np.int32), self.const(1, np.int32, False), "add"
    )
    divisor = counts
    if use_init_val:
      divisor = self.node(
        "Add", [counts, low.const(self.ctx, 1, "one", np.int32)], counts.dtype
      )
    hit = self.node(
      "Greater", [counts, low.const(self.ctx, 0, "zero", np.int32)], BOOL
    )
    if np.issubdtype(self.dtype, np.integer):
      # Where in int64, then one cast back: onnxruntime 1.30's Where has no
      # int8 or int16 kernel.
      wide = self.cast(self.data, INT64)
      mean = self._int_mean(wide, divisor, use_init_val)
      where = self.node("Where", [hit, mean, wide], INT64)
      return self.cast(where, self.data.dtype)
    total = self.reduce("sum", use_init_val)
    mean = self.node(
      "Div", [total, self.cast(divisor, self.data.dtype)], self.data.dtype
    )
    return self.node("Where", [hit, mean, self.data], self.data.dtype)

  def _int_mean(self, wide, divisor, use_init_val):
    """floor(sum / divisor) in int64, of data already cast to int64."""
    data = self.init(wide, "sum", np.int64, use_init_val)
    updates = self.cast(self.updates, INT64, False)
    total = self.scatter(data, updates, "add")
    # At least 1: untargeted slots (count 0 with use_init_val=False) are
    # replaced by data below, but an integer Div by 0 is a runtime error.
    divisor = self.node(
      "Max",
      [self.cast(divisor, INT64), low.const(self.ctx, 1, "one", np.int64)],
      INT64,
    )
    q = self.node("Div", [total, divisor], INT64)
    rest = self.node(
      "Sub", [total, self.node("Mul", [q, divisor], INT64)], INT64
    )
    below = self.node(
      "Less", [rest, low.const(self.ctx, 0, "zero", np.int64)], BOOL
    )
    return self.node("Sub", [q, self.cast(below, INT64)], INT64)


@register_primitive(
  jaxpr_primitive=_scatter_elements_update.scatter_elements_update_p.name
)
class ScatterElementsPlugin(PrimitiveLeafPlugin):
  """`jaxops_scatter_elements_update` -> ScatterElements(axis, reduction)."""

  def lower(self, ctx: Any, eqn: Any) -> None:
    (out_var,) = eqn.outvars
    graph = _Graph(ctx, eqn)
    reduction = eqn.params["reduction"]
    use_init_val = eqn.params["use_init_val"] or reduction == "none"
    if reduction == "mean":
      out = graph.mean(use_init_val)
    else:
      out = graph.reduce(reduction, use_init_val)
    low.bind(ctx, out_var, out)
