"""`jaxops.slice` -> one Slice (docs/export.md#slice).

Where the sliced dims are static, the node gets the operator's resolved plan
(`jaxops._slice.plan`, the one clamp of docs/semantics.md#slice) rather than
the attributes as given: in-range starts, ends of `-size - 1` for "before
element 0", steps no larger than the dim. The same elements, and no value
that two runtime bugs catch: onnxruntime reads an end of INT32_MAX or
INT64_MAX with a negative step as "to the beginning" (the clamp gives an
empty slice), and OpenVINO's CPU plugin dies of SIGFPE on a step at or below
INT32_MIN. With symbolic sliced dims the attributes go through, with those
two values replaced by equivalent ones.
"""

from __future__ import annotations

from typing import Any

from jax2onnx.plugins.plugin_system import (
  PrimitiveLeafPlugin,
  register_primitive,
)

from jaxops import _slice, _slicing
from jaxops._export import is_int
from jaxops.onnx import _lowering as low

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MAX = 2**63 - 1


def symbolic_slices(
  start: tuple[int, ...],
  stop: tuple[int, ...],
  step: tuple[int, ...],
  axes: tuple[int, ...],
) -> list[tuple[int, int, int, int]]:
  """The attributes as given, made safe for both runtimes: an end of
  INT32_MAX or INT64_MAX with a negative step becomes INT64_MAX - 1 (both
  clamp to size - 1: nothing kept), and a step below -(2**31 - 1) becomes
  that (one element either way on any dim shorter than 2**31 - 1)."""
  slices = []
  for axis, b, e, k in zip(axes, start, stop, step):
    if k < 0 and e in (INT32_MAX, INT64_MAX):
      e = INT64_MAX - 1
    slices.append((axis, b, e, max(k, INT32_MIN + 1)))
  return slices


@register_primitive(jaxpr_primitive=_slice.slice_p.name)
class SlicePlugin(PrimitiveLeafPlugin):
  """`jaxops_slice` -> Slice."""

  def lower(self, ctx: Any, eqn: Any) -> None:
    (data_var,) = eqn.invars
    (out_var,) = eqn.outvars
    params = dict(eqn.params)
    lead = params.pop("batch_ndim")
    shape = tuple(data_var.aval.shape)[lead:]
    value = low.value_of(ctx, data_var, "data")
    if all(is_int(shape[a]) for a in params["axes"]):
      # Static sliced dims: the plan, with stand-ins for symbolic others.
      stand_in = tuple(d if is_int(d) else 1 for d in shape)
      slices, _ = _slicing.onnx_slices(_slice.plan(stand_in, **params))
    else:
      slices = symbolic_slices(**params)
    value = low.slice_node(ctx, value, slices, lead, out_var.aval.shape)
    low.bind(ctx, out_var, value)
