"""`jaxops.gather_nd` -> GatherND(batch_dims), after a Cast of the indices to
int64 (docs/export.md#gather-nd)."""

from __future__ import annotations

from typing import Any

from jax2onnx.plugins.plugin_system import (
  PrimitiveLeafPlugin,
  register_primitive,
)

from jaxops import _gather_nd
from jaxops.onnx import _lowering as low


@register_primitive(jaxpr_primitive=_gather_nd.gather_nd_p.name)
class GatherNDPlugin(PrimitiveLeafPlugin):
  """`jaxops_gather_nd` -> GatherND(batch_dims)."""

  def lower(self, ctx: Any, eqn: Any) -> None:
    data_var, indices_var = eqn.invars
    (out_var,) = eqn.outvars
    b = eqn.params["batch_dims"]
    k = indices_var.aval.shape[-1]
    data = low.value_of(ctx, data_var, "data")
    indices = low.indices(
      ctx,
      indices_var,
      data_var.aval.shape[b : b + k],
      clip=eqn.params["mode"] == "clip",
    )
    low.output(ctx, out_var, "GatherND", [data, indices], batch_dims=b)
