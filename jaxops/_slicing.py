"""Static slice plans: the lowering shared by StridedSlice-1 and Slice-8.

Every attribute of a slicing operator is static, so the operator resolves its
spec at trace time into a `Plan`: for each input dim a `lax.slice`
start/limit/positive step and whether the dim is reversed, plus the output
shape. The forward pass is then at most one `lax.slice`, one `lax.rev` and
one `reshape` -- no gather, so XLA compiles it to a strided copy (or to
nothing, for a plan that keeps all of data).

A negative step `-a` over the elements `b, b - a, ..., lo` is the positive
slice `lo:b+1:a` followed by a reverse of that dim, which is why a plan only
ever holds positive steps. One dim is resolved by `slice_dim`, the one clamp
of both operators (docs/semantics.md#ss-8).

Derivative: the plan applied to the data tangent (`jaxops._linear`); reverse
mode transposes it into a `pad` of the cotangent into zeros of data's shape
(interior padding for the stride), `rev` and reshape: no scatter anywhere
(docs/design.md#derivatives). Integer and bool data get float0 tangents.
"""

from __future__ import annotations

import dataclasses

import jax
from jax import lax

from jaxops._common import Shape
from jaxops._linear import linear_custom_jvp


@dataclasses.dataclass(frozen=True)
class Plan:
  """The static lowering of one slice spec on one data shape.

  `start`, `limit` and `step` (all steps > 0) are the `lax.slice` arguments
  per input dim; `reverse` the input dims to flip after slicing; `out_shape`
  the final shape (new axes in, shrunk dims out).
  """

  data_shape: Shape
  start: Shape
  limit: Shape
  step: Shape
  reverse: Shape
  out_shape: Shape


def slice_dim(
  size: int, b: int, e: int, k: int, begin_masked: bool, end_masked: bool
) -> tuple[int, int, int, bool, int]:
  """Resolves one sliced dim: (start, limit, step > 0, reversed, count).

  Clamping follows the OpenVINO and ONNX runtimes: for k > 0 begin and end
  clamp into [0, size]; for k < 0 begin clamps into [0, size - 1] -- a begin
  still negative after adding size becomes 0 (docs/semantics.md#ss-8; Python
  would make it -1 and return nothing) -- and end into [-1, size], -1 meaning
  "before element 0". Python ints throughout: any int64 value is exact.
  """
  if k > 0:
    lo = 0 if begin_masked else (b + size if b < 0 else b)
    hi = size if end_masked else (e + size if e < 0 else e)
    lo, hi = min(max(lo, 0), size), min(max(hi, 0), size)
    count = max(0, -(-(hi - lo) // k))
    if count == 0:
      return 0, 0, 1, False, 0
    if count == 1:
      return lo, lo + 1, 1, False, 1
    return lo, lo + (count - 1) * k + 1, k, False, count
  step = -k
  first = size - 1 if begin_masked else (b + size if b < 0 else b)
  stop = -1 if end_masked else (e + size if e < 0 else e)
  first, stop = min(max(first, 0), size - 1), min(max(stop, -1), size)
  count = max(0, -(-(first - stop) // step)) if size > 0 else 0
  if count == 0:
    return 0, 0, 1, False, 0
  if count == 1:
    # One element: the step is irrelevant, and may not fit XLA's int64 (a
    # stride of -2**63 is a step of 2**63).
    return first, first + 1, 1, False, 1
  last = first - (count - 1) * step
  return last, first + 1, step, True, count


def _apply(plan: Plan, x: jax.Array) -> jax.Array:
  if (
    plan.start != (0,) * len(plan.start)
    or plan.limit != plan.data_shape
    or (any(k != 1 for k in plan.step))
  ):
    x = lax.slice(
      x,
      plan.start,
      plan.limit,
      None if all(k == 1 for k in plan.step) else plan.step,
    )
  if plan.reverse:
    x = lax.rev(x, plan.reverse)
  if x.shape != plan.out_shape:
    x = lax.reshape(x, plan.out_shape)
  return x


# Linear in data: the tangent is the same plan applied to the tangent. Jitted:
# one compiled executable per (plan, data type) on the eager path instead of
# one per primitive; under an outer jit this is an inlined nested call.
apply = jax.jit(
  linear_custom_jvp(_apply, nondiff_argnums=(0,), linear_argnums=(1,)),
  static_argnums=0,
)


def onnx_slices(
  plan: Plan,
) -> tuple[list[tuple[int, int, int, int]], tuple[int, ...]]:
  """The ONNX Slice of a plan: `(axis, start, end, step)` for every dim the
  Slice changes (a negative step walks backwards; an end of `-size - 1` is
  "before element 0"), and the shape after the Slice (before new and shrunk
  axes)."""
  slices, sliced_shape = [], []
  for axis, (size, lo, hi, step) in enumerate(
    zip(plan.data_shape, plan.start, plan.limit, plan.step)
  ):
    sliced_shape.append(len(range(lo, hi, step)))
    if axis in plan.reverse:
      # The elements hi - 1, hi - 1 - step, ..., lo.
      slices.append((axis, hi - 1, lo - 1 if lo > 0 else -size - 1, -step))
    elif (lo, hi, step) != (0, size, 1):
      slices.append((axis, lo, hi, step))
  return slices, tuple(sliced_shape)
