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

A symbolic dim of `jax.export` is resolved by the same clamp written with
dim expressions, so `lax.slice` gets symbolic starts and limits and the
output dims are expressions that equal the concrete call's sizes for every
size; walked backwards, such a dim is flipped before the slice rather than
after it (docs/export.md#symbolic-dims).

Derivative: the plan applied to the data tangent (`jaxops._linear`); reverse
mode transposes it into a `pad` of the cotangent into zeros of data's shape
(interior padding for the stride), `rev` and reshape: no scatter anywhere
(docs/design.md#derivatives). Integer and bool data get float0 tangents.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.core import max_dim, min_dim

from jaxops._common import Shape, dim_value_bits, is_symbolic
from jaxops._linear import linear_custom_jvp


@dataclasses.dataclass(frozen=True)
class Plan:
  """The static lowering of one slice spec on one data shape.

  `start`, `limit` and `step` (all steps > 0) are the `lax.slice` arguments
  per input dim; `reverse` the input dims to flip after slicing, and
  `reverse_first` those to flip before it (symbolic dims walked backwards,
  whose slice is simple only in reversed coordinates); `out_shape` the final
  shape (new axes in, shrunk dims out). Starts, limits and sizes are dim
  expressions where data's dims are symbolic.
  """

  data_shape: Shape
  start: Shape
  limit: Shape
  step: Shape
  reverse: Shape
  out_shape: Shape
  reverse_first: Shape = ()


class DimSlice(NamedTuple):
  """One sliced dim: `lax.slice` start, limit and step (> 0), whether the
  dim is flipped after the slice (`reverse`) or before it
  (`reverse_first`), and the element count."""

  start: Any
  limit: Any
  step: int
  reverse: bool
  reverse_first: bool
  count: Any


def slice_dim(
  size: Any, b: int, e: int, k: int, begin_masked: bool, end_masked: bool
) -> DimSlice:
  """Resolves one sliced dim.

  Clamping follows the OpenVINO and ONNX runtimes: for k > 0 begin and end
  clamp into [0, size]; for k < 0 begin clamps into [0, size - 1] -- a begin
  still negative after adding size becomes 0 (docs/semantics.md#ss-8; Python
  would make it -1 and return nothing) -- and end into [-1, size], -1 meaning
  "before element 0". Python ints throughout: any int64 value is exact. A
  symbolic size: `_symbolic_dim`.
  """
  if is_symbolic(size):
    return _symbolic_dim(size, b, e, k, begin_masked, end_masked)
  if k > 0:
    lo = 0 if begin_masked else (b + size if b < 0 else b)
    hi = size if end_masked else (e + size if e < 0 else e)
    lo, hi = min(max(lo, 0), size), min(max(hi, 0), size)
    count = max(0, -(-(hi - lo) // k))
    if count == 0:
      return DimSlice(0, 0, 1, False, False, 0)
    if count == 1:
      return DimSlice(lo, lo + 1, 1, False, False, 1)
    return DimSlice(lo, lo + (count - 1) * k + 1, k, False, False, count)
  step = -k
  first = size - 1 if begin_masked else (b + size if b < 0 else b)
  stop = -1 if end_masked else (e + size if e < 0 else e)
  first, stop = min(max(first, 0), size - 1), min(max(stop, -1), size)
  count = max(0, -(-(first - stop) // step)) if size > 0 else 0
  if count == 0:
    return DimSlice(0, 0, 1, False, False, 0)
  if count == 1:
    # One element: the step is irrelevant, and may not fit XLA's int64 (a
    # stride of -2**63 is a step of 2**63).
    return DimSlice(first, first + 1, 1, False, False, 1)
  last = first - (count - 1) * step
  return DimSlice(last, first + 1, step, True, False, count)


def _symbolic_dim(
  size: Any, b: int, e: int, k: int, begin_masked: bool, end_masked: bool
) -> DimSlice:
  """`slice_dim` on a symbolic size: the same clamp as dim expressions
  (`jax.core.max_dim`, `min_dim`), valid for every size >= 1.

  A negative step is a positive one over the reversed dim, where element
  `size - 1 - i` is element `i`: there the clamped begin is the start, with
  no dependence on the count (in forward coordinates the slice would start
  at the last element taken, which does not exist for a count of 0).
  Attributes beyond what a dim value holds (int32 with x64 off) are first
  clamped to that range, which leaves every clamp above unchanged for
  every size a symbolic dim can take.
  """
  bound = (1 << (dim_value_bits() - 1)) - 1
  b, e = (min(max(v, -bound - 1), bound) for v in (b, e))
  step = min(abs(k), bound)
  if k > 0:
    # Begin and end clamped into [0, size].
    def clamp(i: int) -> Any:
      return min_dim(size, i) if i >= 0 else max_dim(0, size + i)

    lo = 0 if begin_masked else clamp(b)
    hi = size if end_masked else clamp(e)
  else:
    # In reversed coordinates: begin clamped into [0, size - 1], end into
    # [-1, size], then mirrored.
    lo = (
      0
      if begin_masked
      else (max_dim(0, size - 1 - b) if b >= 0 else min_dim(size - 1, -1 - b))
    )
    hi = (
      size
      if end_masked
      else (max_dim(-1, size - 1 - e) if e >= 0 else min_dim(size, -1 - e))
    )
  hi = max_dim(hi, lo)
  return DimSlice(lo, hi, step, False, k < 0, _count(lo, hi, step))


def _apply(plan: Plan, x: jax.Array) -> jax.Array:
  if plan.reverse_first:
    x = lax.rev(x, plan.reverse_first)
  # A symbolic dim walked with a step is read by `_every`, not sliced.
  every = [
    d
    for d, (n, k) in enumerate(zip(plan.data_shape, plan.step))
    if k != 1 and is_symbolic(n)
  ]
  start, limit, step = (
    tuple(
      whole if d in every else v
      for d, (v, whole) in enumerate(zip(values, wholes))
    )
    for values, wholes in (
      (plan.start, (0,) * x.ndim),
      (plan.limit, plan.data_shape),
      (plan.step, (1,) * x.ndim),
    )
  )
  if (
    start != (0,) * x.ndim
    or limit != plan.data_shape
    or any(k != 1 for k in step)
  ):
    x = lax.slice(x, start, limit, None if all(k == 1 for k in step) else step)
  for d in every:
    x = _every(x, d, plan.start[d], plan.limit[d], plan.step[d])
  if plan.reverse:
    x = lax.rev(x, plan.reverse)
  if x.shape != plan.out_shape:
    x = lax.reshape(x, plan.out_shape)
  return x


def _count(lo: Any, hi: Any, step: int) -> Any:
  """The size of `lax.slice` from `lo` to `hi` (>= lo) by `step`, as its own
  shape rule writes it, so that symbolic sizes compare equal."""
  return max_dim((hi - lo - 1) // step + 1, 0)


def _every(x: jax.Array, axis: int, lo: Any, hi: Any, k: int) -> jax.Array:
  """`x[lo:hi:k]` along the symbolic `axis`: a gather at
  `lo + k * iota(count)`, as `jnp` indexing does on symbolic dims. Its
  transpose is a scatter-add into `x`'s shape, right for every size; a
  strided `lax.slice` transposes into a pad whose size JAX cannot prove for
  a count that may be 0. The gather reads the whole dim, which is at least
  1 long (a gather from a possibly empty one is not valid)."""
  dtype = jax.dtypes.canonicalize_dtype(np.int64)
  first = lax.convert_element_type(jnp.asarray(lo), dtype)
  starts = first + lax.iota(dtype, _count(lo, hi, k)) * np.asarray(k, dtype)
  dnums = lax.GatherDimensionNumbers(
    offset_dims=tuple(d for d in range(x.ndim) if d != axis),
    collapsed_slice_dims=(axis,),
    start_index_map=(axis,),
  )
  sizes = tuple(1 if d == axis else n for d, n in enumerate(x.shape))
  # The offset dims are every output dim but `axis`, where the index dim
  # lands: the layout of `x`.
  return lax.gather(
    x,
    starts[:, None],
    dnums,
    sizes,
    mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS,
  )


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
