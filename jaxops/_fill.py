"""Fill-mode gathers whose bounds test runs once per index tuple.

Both gathers (GatherND, GatherElements) read through `gather`, a
`lax.gather` whose indexed dims are collapsed with slice size 1. In
`mode="fill"` an out-of-range tuple reads `fill_value`
(docs/semantics.md#gather-modes). XLA's own fill mode applies the bounds test
as a select over the whole output, and XLA:CPU fuses that select with the
gather into one loop that redoes the index wrap and the test for every output
element. On CPU, `gather` instead reads the fill value through the gather
itself (docs/design.md#lowering-fill):

* per tuple, `row` is the linear index of the indexed dims and `which` is 0
  for an in-range tuple and at least 1 otherwise (a quotient, so the test is
  one unsigned division per index component);
* the gathered operand is `data`, with the indexed dims merged into one,
  stacked with a block of fill values along a new dim of size 2, and the
  gather reads `(which, row)` in clip mode: `which` clamps to 1, the fill
  block. XLA fuses the stack into the gather's operand reads, so nothing of
  data's size is copied, and the output is written once.

When a tuple reads more than one element, the per-tuple values are
reductions, which XLA:CPU computes once per tuple rather than inside the
element loop. The formulation also keeps tiny gathers below XLA:CPU's
1000-flop bound for running a program inline on the calling thread.

Other backends, and the tangent of every backend, use XLA's fill mode: its
transpose is a scatter-add into zeros of data's shape (the stacked operand's
transpose would be twice that size).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxops._common import fill_value_or_default

FILL = lax.GatherScatterMode.FILL_OR_DROP


def gather(
  data: jax.Array,
  indices: jax.Array,
  dnums: lax.GatherDimensionNumbers,
  mode: lax.GatherScatterMode,
  fill_value: Any,
  tangent: bool = False,
) -> jax.Array:
  """`lax.gather(data, indices, dnums, ...)`, slice size 1 in every collapsed
  (indexed) dim and the full size elsewhere, in `mode`.

  `indices` must already be wrapped (negative indices counted from the end).
  `tangent=True` selects the formulation whose transpose is leanest.
  """
  slice_sizes = tuple(
    1
    if d in dnums.collapsed_slice_dims or d in dnums.operand_batching_dims
    else n
    for d, n in enumerate(data.shape)
  )
  if (
    mode != FILL
    or tangent
    or not dnums.start_index_map
    or not _stacks(data, dnums)
  ):
    return lax.gather(
      data, indices, dnums, slice_sizes, mode=mode, fill_value=fill_value
    )
  return lax.platform_dependent(
    data,
    indices,
    cpu=lambda data, indices: _stacked_gather(data, indices, dnums, fill_value),
    default=lambda data, indices: lax.gather(
      data, indices, dnums, slice_sizes, mode=FILL, fill_value=fill_value
    ),
  )


def _stacks(data: jax.Array, dnums: lax.GatherDimensionNumbers) -> bool:
  """Whether the stacked gather beats XLA's fill mode on CPU: when a tuple
  reads more than one element, which XLA's select would redo the per-tuple
  work for. When each reads one, XLA's fill mode is one fused loop already
  and was faster (docs/design.md#tried-gather-modes)."""
  return _slice_elements(data, dnums) > 1


def _slice_elements(data: jax.Array, dnums: lax.GatherDimensionNumbers) -> int:
  return math.prod(
    n
    for d, n in enumerate(data.shape)
    if d not in dnums.start_index_map and d not in dnums.operand_batching_dims
  )


def _stacked_gather(
  data: jax.Array,
  indices: jax.Array,
  dnums: lax.GatherDimensionNumbers,
  fill_value: Any,
) -> jax.Array:
  """The fill-mode gather as one clip-mode gather of (data | fill block)."""
  dims = dnums.start_index_map
  first, k = dims[0], len(dims)
  assert dims == tuple(range(first, first + k)), dims
  assert dnums.collapsed_slice_dims == dims, dnums
  sizes = data.shape[first : first + k]
  unsigned = jnp.dtype(f"uint{jnp.iinfo(indices.dtype).bits}")
  u = (
    lax.bitcast_convert_type(indices, unsigned)
    if (jnp.issubdtype(indices.dtype, jnp.signedinteger))
    else indices
  )
  slots = math.prod(sizes)
  # Merging the indexed dims needs the row to fit the index type; otherwise
  # the gather reads the k components as they are.
  merge = k > 1 and slots <= jnp.iinfo(unsigned).max
  # One division by a constant per component (XLA turns it into a multiply
  # and shifts): 0 when in range, at least 1 otherwise.
  quotients = [
    u[..., j] // np.asarray(n, unsigned) for j, n in enumerate(sizes)
  ]
  which = _fold(quotients, jnp.max)
  if merge:
    strides = np.cumprod((1,) + sizes[:0:-1])[::-1]
    terms = [
      u[..., j] * np.asarray(stride, unsigned) if stride != 1 else u[..., j]
      for j, stride in enumerate(strides.tolist())
    ]
    rows = _fold(terms, jnp.sum)
    index = jnp.stack([which, rows], axis=-1)
    data = data.reshape(data.shape[:first] + (slots,) + data.shape[first + k :])
    new_k = 1
  else:
    index = jnp.concatenate([which[..., None], u], axis=-1)
    new_k = k
  fill = fill_value_or_default(fill_value, data.dtype)
  block = jnp.expand_dims(data, first)
  operand = jnp.concatenate(
    [block, jnp.full(block.shape, fill, data.dtype)], axis=first
  )
  shift = new_k + 1 - k
  collapsed = tuple(range(first, first + new_k + 1))
  stacked = lax.GatherDimensionNumbers(
    offset_dims=dnums.offset_dims,
    collapsed_slice_dims=collapsed,
    start_index_map=collapsed,
    operand_batching_dims=tuple(
      d if d < first else d + shift for d in dnums.operand_batching_dims
    ),
    start_indices_batching_dims=dnums.start_indices_batching_dims,
  )
  slice_sizes = tuple(
    1 if d in collapsed or d in stacked.operand_batching_dims else n
    for d, n in enumerate(operand.shape)
  )
  return lax.gather(
    operand, index, stacked, slice_sizes, mode=lax.GatherScatterMode.CLIP
  )


def _fold(terms: list[jax.Array], reduce) -> jax.Array:
  """`reduce` (jnp.max or jnp.sum) over the per-component arrays: one XLA
  reduction, which XLA:CPU never fuses into a loop that reads its result more
  than once, so it runs once per tuple."""
  if len(terms) == 1:
    return terms[0]
  stacked = jnp.stack(terms, axis=-1)
  if reduce is jnp.sum:
    return jnp.sum(stacked, axis=-1, dtype=stacked.dtype)
  return reduce(stacked, axis=-1)
