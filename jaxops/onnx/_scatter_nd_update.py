"""`jaxops.scatter_nd_update` -> ScatterND (reduction none), after a Cast of
the indices to int64 (docs/export.md#scatter-nd-update)."""

from __future__ import annotations

from typing import Any

from jax2onnx.plugins.plugin_system import (
  PrimitiveLeafPlugin,
  register_primitive,
)

from jaxops import _scatter_nd_update
from jaxops.onnx import _lowering as low


@register_primitive(jaxpr_primitive=_scatter_nd_update.scatter_nd_update_p.name)
class ScatterNDPlugin(PrimitiveLeafPlugin):
  """`jaxops_scatter_nd_update` -> ScatterND (reduction none)."""

  def lower(self, ctx: Any, eqn: Any) -> None:
    data_var, indices_var, updates_var = eqn.invars
    (out_var,) = eqn.outvars
    k = indices_var.aval.shape[-1]
    data = low.value_of(ctx, data_var, "data")
    indices = low.indices(
      ctx,
      indices_var,
      data_var.aval.shape[:k],
      clip=eqn.params["mode"] == "clip",
    )
    updates = low.value_of(ctx, updates_var, "updates")
    low.bind(
      ctx,
      out_var,
      low.node(
        ctx,
        "ScatterND",
        [data, indices, updates],
        dtype=data.dtype,
        shape=out_var.aval.shape,
      ),
    )
