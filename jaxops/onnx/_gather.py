"""`jaxops.gather` -> Gather(axis), or for batch_dims > 0 an Unsqueeze (and
an Expand) of the indices into a GatherND(batch_dims) (docs/export.md#gather).

ONNX Gather has no batch dims. Gather-8 with `b` batch dims and axis `a` is
GatherND with `a` batch dims once the indices are given data's dims `b..a-1`
(Unsqueeze, then Expand to data's sizes there) and a last axis of length 1:
`out[p, i, s] = data[p, idx[p[:b], i], s]` is exactly GatherND's
`data[p, (idx'[p, i, 0],), s]`. OpenVINO reads that back as GatherND-8.

Out-of-range indices in the default `mode="fill"` are the runtimes' business
(onnxruntime rejects them; OpenVINO reads zeros, its Gather-8 rule):
docs/export.md#gather.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from jax2onnx.plugins.plugin_system import (
  PrimitiveLeafPlugin,
  register_primitive,
)

from jaxops import _export, _gather
from jaxops.onnx import _lowering as low


@register_primitive(jaxpr_primitive=_gather.gather_p.name)
class GatherPlugin(PrimitiveLeafPlugin):
  """`jaxops_gather` -> Gather(axis), or Unsqueeze (+ Expand) + GatherND."""

  def lower(self, ctx: Any, eqn: Any) -> None:
    data_var, indices_var = eqn.invars
    (out_var,) = eqn.outvars
    a, b = eqn.params["axis"], eqn.params["batch_dims"]
    data_shape = tuple(data_var.aval.shape)
    index_shape = tuple(indices_var.aval.shape)
    data = low.value_of(ctx, data_var, "data")
    clip = eqn.params["mode"] == "clip"
    if b == 0:
      # Gather takes int32 and int64 indices as they are.
      indices = low.indices(
        ctx, indices_var, data_shape[a], clip=clip, keep=(np.int32, np.int64)
      )
      low.output(ctx, out_var, "Gather", [data, indices], axis=a)
      return
    # GatherND takes int64 indices only (onnxruntime).
    indices = low.indices(ctx, indices_var, data_shape[a], clip=clip)
    between = data_shape[b:a]
    shape = index_shape[:b] + (1,) * len(between) + index_shape[b:] + (1,)
    new_axes = list(range(b, a)) + [len(shape) - 1]
    indices = low.node_with_const(
      ctx, "Unsqueeze", indices, new_axes, "axes", dtype=low.INT64, shape=shape
    )
    if any(not _export.is_int(d) or d != 1 for d in between):
      if not all(map(_export.is_int, between)):
        raise NotImplementedError(
          f"{_gather.OP}: batch_dims={b} < axis={a} exports an Expand of "
          f"the indices to data's dims {between}, which must be static"
        )
      shape = index_shape[:b] + between + index_shape[b:] + (1,)
      target = [1] * b + list(between) + [1] * (len(index_shape) - b + 1)
      indices = low.node_with_const(
        ctx, "Expand", indices, target, "shape", dtype=low.INT64, shape=shape
      )
    low.output(ctx, out_var, "GatherND", [data, indices], batch_dims=a)
