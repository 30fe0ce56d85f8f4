"""Fill-mode gathers whose bounds test runs once per index tuple.

Both gathers read through `gather`: a `lax.gather` whose indexed dims are
collapsed with slice size 1. In `mode="fill"` an out-of-range tuple reads
`fill_value` (docs/semantics.md#gather-modes). XLA's fill mode selects the
fill value over the whole output, and XLA:CPU fuses that select with the
gather into one loop that redoes the index wrap and the bounds test for every
output element. So on CPU (docs/design.md#lowering-fill) the per-tuple work
is written once, on whole `(..., k)` index arrays (`_rows`):

* `out_of_range`, 0 for an in-range tuple and at least 1 otherwise (an
  unsigned compare of each component with its dim's size; a negative index
  is huge as unsigned), and `row`, the linear index of the indexed dims,
  which are merged into one;
* a tuple that reads more than one element reads `data` stacked with a block
  of fill values along a new dim of size 2 at `(out_of_range, row)` in clip
  mode (`out_of_range` clamps to 1, the fill block). XLA fuses the stack into
  the gather's reads: nothing of data's size is copied, and the output is
  written once with no select over it;
* a tuple that reads one element reads `data` at `row` in clip mode, and a
  select puts the fill value where `out_of_range` is not 0: one loop with a
  single-component gather, faster than XLA's own clip mode on the batched
  element gathers of `vmap`.

Other backends and every tangent keep XLA's fill mode (its transpose
scatter-adds into zeros of data's shape; the stacked operand's would be
twice that). A tangent whose reads are rows of data (no batching dims)
gathers one linear row per tuple in the form XLA emits as it is, so that
its transpose adds the cotangent where it lies (docs/design.md#row-transpose).
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxops._bits import bits_dtype, moved_as_bits
from jaxops._common import (
  along_last_axis,
  dim_values,
  fill_value_or_default,
  is_symbolic,
  jit_disabled,
  linear_index,
  provable,
)

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
  `tangent=True` selects the formulation whose transpose is leanest; the
  primal (`tangent=False`) reads floats narrower than float32 as their bits
  (`moved_as_bits`), which XLA:CPU's selects and concatenations keep, and
  so does a fill-mode gather whose fill is a NaN or an infinity under
  `jax.disable_jit()`.
  """
  fill = np.asarray(fill_value_or_default(fill_value, data.dtype), data.dtype)
  debugged = _fill_as_bits(fill, mode, tangent)
  if debugged and np.iscomplexobj(fill):
    # Each part's fill as below; the complex NaN appears in the output only.
    def part(x, fill):
      return gather(x, indices, dnums, mode, fill)

    return lax.complex(
      part(jnp.real(data), fill.real), part(jnp.imag(data), fill.imag)
    )
  if tangent or (bits_dtype(data.dtype) is None and not debugged):
    return _gather(data, indices, dnums, mode, fill_value, tangent)
  move = functools.partial(_moved_gather, dnums, mode, fill)
  return moved_as_bits(move, indices, data, always=debugged)


def _fill_as_bits(
  fill: np.ndarray, mode: lax.GatherScatterMode, tangent: bool
) -> bool:
  """Whether the primal's fill, a NaN or an infinity, moves as bits: under
  `jax.disable_jit()` only.

  There `jax_debug_nans` and `jax_debug_infs` check each primitive's
  output, and as bits the fill's NaN or inf exists only in the output,
  where a tuple is out of range: no gather whose result has none is flagged
  (GatherND's default fill is NaN; tests/test_field_config.py). Only there:
  a compiled program is checked at its outputs alone, and its bitcasts,
  though free, count as work that takes a small gather off XLA:CPU's inline
  path (a 3-row GatherND: 14 -> 72 us; docs/design.md#moved-as-bits)."""
  return (
    mode == FILL and not tangent and jit_disabled() and not np.isfinite(fill)
  )


def _moved_gather(dnums, mode, fill, indices, data):
  """The primal's gather of `data`'s bits; of float data, the tangent's
  formulation (`moved_as_bits` only transposes that one)."""
  if data.dtype == fill.dtype:
    return _gather(data, indices, dnums, mode, fill[()], tangent=True)
  return _gather(data, indices, dnums, mode, fill.view(data.dtype)[()], False)


def _gather(data, indices, dnums, mode, fill_value, tangent):
  slice_sizes = _slice_sizes(data.shape, dnums)
  if tangent and _reads_rows(data, indices, dnums):
    return _row_gather(data, indices, mode, fill_value)
  if mode != FILL or tangent or not dnums.start_index_map:
    return lax.gather(
      data, indices, dnums, slice_sizes, mode=mode, fill_value=fill_value
    )
  cpu_gather = _stacked_gather if _stacks(data, dnums) else _element_gather
  return lax.platform_dependent(
    data,
    indices,
    cpu=lambda data, indices: cpu_gather(data, indices, dnums, fill_value),
    default=lambda data, indices: lax.gather(
      data, indices, dnums, slice_sizes, mode=FILL, fill_value=fill_value
    ),
  )


def _reads_rows(
  data: jax.Array, indices: jax.Array, dnums: lax.GatherDimensionNumbers
) -> bool:
  """Whether each index tuple reads one row of data viewed as
  `(rows, *data.shape[k:])`: no batching dims, the k indexed dims leading in
  order and the dims read whole trailing in the output, every shape concrete
  and non-empty, and int32 holding the rows (docs/design.md#row-transpose).

  Batching dims are left out: merged into the rows, a batch dim sharded
  across devices lost its sharding (the gradient came back replicated);
  kept as batching dims, XLA copies the cotangent again."""
  shapes = data.shape + indices.shape
  k = len(dnums.start_index_map)
  whole = data.ndim - k
  out_rank = indices.ndim - 1 + whole
  return (
    k > 0
    and not any(is_symbolic(n) or n == 0 for n in shapes)
    and not dnums.operand_batching_dims
    and dnums.start_index_map == tuple(range(k))
    and dnums.collapsed_slice_dims == dnums.start_index_map
    and dnums.offset_dims == tuple(range(out_rank - whole, out_rank))
    and math.prod(data.shape[:k]) <= np.iinfo(np.int32).max
  )


def _row_gather(
  data: jax.Array,
  indices: jax.Array,
  mode: lax.GatherScatterMode,
  fill_value: Any,
) -> jax.Array:
  """The gather of `_reads_rows` as a gather of rows at one int32 row per
  tuple (out of range where a component is, in fill mode), in the form XLA
  gives every gather and scatter before it emits one: its transpose, a
  scatter-add of the cotangent, is emitted as it is, where the gather's own
  form had XLA copy the cotangent first (docs/design.md#row-transpose)."""
  k = indices.shape[-1]
  sizes, row_shape = data.shape[:k], data.shape[k:]
  rows = math.prod(sizes)
  # The last index in range, in the indices' type (which may hold less:
  # then no index is past it).
  most = jnp.iinfo(indices.dtype).max
  last = along_last_axis(
    np.asarray([min(s - 1, most) for s in sizes], indices.dtype), indices.ndim
  )
  zero = np.zeros((), indices.dtype)
  out_of_range = None
  if mode == lax.GatherScatterMode.CLIP:
    indices = jnp.clip(indices, zero, last)
  elif mode == FILL:
    # Wrapped already: a negative index is out of range. Tested column by
    # column, which fuses with the row (docs/design.md#index-fusion).
    beyond = (indices < zero) | (indices > last)
    for j in range(k):
      out_of_range = beyond[..., j] if j == 0 else out_of_range | beyond[..., j]
    indices = jnp.where(beyond, zero, indices)
  row = linear_index(indices, sizes, np.int32, by_columns=True)
  if out_of_range is not None:
    row = jnp.where(out_of_range, np.int32(rows), row)
  dnums = lax.GatherDimensionNumbers(
    offset_dims=tuple(range(1, len(row_shape) + 2)),
    collapsed_slice_dims=(),
    start_index_map=(0,),
  )
  out = lax.gather(
    data.reshape((rows,) + row_shape),
    row.reshape(-1, 1),
    dnums,
    (1,) + row_shape,
    mode=mode,
    fill_value=fill_value if mode == FILL else None,
  )
  return out.reshape(row.shape + row_shape)


def _stacks(data: jax.Array, dnums: lax.GatherDimensionNumbers) -> bool:
  """Whether a tuple reads more than one element, where a select over the
  output would redo the per-tuple work for each of them; for one element per
  tuple the stacked operand was slower than a gather and a select
  (docs/design.md#tried-gather-modes). A symbolic slice size may be 1 or
  more: the stacked gather, right for both."""
  return provable(operator.gt, _slice_elements(data, dnums), 1) is not False


def _slice_elements(data: jax.Array, dnums: lax.GatherDimensionNumbers) -> Any:
  return math.prod(
    n
    for d, n in enumerate(data.shape)
    if d not in dnums.start_index_map and d not in dnums.operand_batching_dims
  )


class _Rows(NamedTuple):
  """A gather's indexed dims read through one linear row per tuple."""

  data: jax.Array
  """`data` with the k indexed dims merged into one (when the row fits the
  index type; otherwise as it was)."""
  starts: jax.Array
  """(..., 1) unsigned rows, or the k unsigned components as they were."""
  dnums: lax.GatherDimensionNumbers
  """The gather of `starts` from `data`."""
  out_of_range: jax.Array
  """Per tuple, 0 when every component is in range, at least 1 otherwise
  (unsigned)."""


def _rows(
  data: jax.Array, indices: jax.Array, dnums: lax.GatherDimensionNumbers
) -> _Rows:
  """Per tuple the bounds test and the linear row of its indexed dims.

  Both are written on whole `(..., k)` arrays against constant vectors of
  the sizes and strides: XLA:CPU turns per-component slices of the indices
  into strided scalar code in the gather's loop, which doubled the time of
  large element gathers (docs/design.md#tried-gather-modes).
  """
  dims = dnums.start_index_map
  first, k = dims[0], len(dims)
  assert dims == tuple(range(first, first + k)), dims
  assert dnums.collapsed_slice_dims == dims, dnums
  sizes = data.shape[first : first + k]
  unsigned = jnp.dtype(f"uint{jnp.iinfo(indices.dtype).bits}")
  u = (
    lax.bitcast_convert_type(indices, unsigned)
    if jnp.issubdtype(indices.dtype, jnp.signedinteger)
    else indices
  )
  # Read as unsigned, a negative (already wrapped) index is huge, so the
  # bounds test is one unsigned compare per component; for a single
  # component, one division by a constant (a multiply and shifts once
  # compiled, and one flop where the compare and its conversion are two,
  # which keeps small gathers on XLA:CPU's inline path). Dividing by a vector
  # of different sizes compiles to real divisions: 2.5x slower.
  # A symbolic size is a run-time value: a compare, not a division by it.
  symbolic = any(map(is_symbolic, sizes))
  sizes_arr = along_last_axis(dim_values(sizes, unsigned), u.ndim)
  if k == 1 and not symbolic:
    out_of_range = u[..., 0] // sizes_arr[..., 0]
  else:
    out_of_range = jnp.max((u >= sizes_arr).astype(unsigned), axis=-1)
  slots = math.prod(sizes)
  # Rows of symbolic sizes fit 64 bits (no array has 2**64 elements), not
  # always 32 (x32 mode's symbolic dims reach 2**31 - 1 each).
  fits = (
    jnp.iinfo(unsigned).bits == 64
    if symbolic
    else (slots <= jnp.iinfo(unsigned).max)
  )
  if k == 1 or not fits:
    return _Rows(data, u, dnums, out_of_range)
  # Unsigned, so an out-of-range tuple's row wraps harmlessly (it is filled).
  rows = linear_index(u, sizes, unsigned)
  shift = 1 - k
  merged = lax.GatherDimensionNumbers(
    offset_dims=dnums.offset_dims,
    collapsed_slice_dims=(first,),
    start_index_map=(first,),
    operand_batching_dims=tuple(
      d if d < first else d + shift for d in dnums.operand_batching_dims
    ),
    start_indices_batching_dims=dnums.start_indices_batching_dims,
  )
  data = data.reshape(data.shape[:first] + (slots,) + data.shape[first + k :])
  return _Rows(data, rows[..., None], merged, out_of_range)


def _slice_sizes(
  shape: tuple[int, ...], dnums: lax.GatherDimensionNumbers
) -> tuple[int, ...]:
  """1 in the collapsed and batching dims, the full size elsewhere."""
  return tuple(
    1
    if d in dnums.collapsed_slice_dims or d in dnums.operand_batching_dims
    else n
    for d, n in enumerate(shape)
  )


def _stacked_gather(
  data: jax.Array,
  indices: jax.Array,
  dnums: lax.GatherDimensionNumbers,
  fill_value: Any,
) -> jax.Array:
  """The fill-mode gather as one clip-mode gather of (data | fill block)."""
  rows = _rows(data, indices, dnums)
  first = rows.dnums.start_index_map[0]
  k = len(rows.dnums.start_index_map)
  index = jnp.concatenate([rows.out_of_range[..., None], rows.starts], axis=-1)
  fill = fill_value_or_default(fill_value, data.dtype)
  block = jnp.expand_dims(rows.data, first)
  operand = jnp.concatenate(
    [block, jnp.full(block.shape, fill, data.dtype)], axis=first
  )
  collapsed = tuple(range(first, first + k + 1))
  stacked = lax.GatherDimensionNumbers(
    offset_dims=rows.dnums.offset_dims,
    collapsed_slice_dims=collapsed,
    start_index_map=collapsed,
    operand_batching_dims=tuple(
      d if d < first else d + 1 for d in rows.dnums.operand_batching_dims
    ),
    start_indices_batching_dims=rows.dnums.start_indices_batching_dims,
  )
  return lax.gather(
    operand,
    index,
    stacked,
    _slice_sizes(operand.shape, stacked),
    mode=lax.GatherScatterMode.CLIP,
  )


def _element_gather(
  data: jax.Array,
  indices: jax.Array,
  dnums: lax.GatherDimensionNumbers,
  fill_value: Any,
) -> jax.Array:
  """The fill-mode gather of one element per tuple: a clip-mode gather at the
  linear row, then the fill value where the tuple is out of range."""
  rows = _rows(data, indices, dnums)
  out = lax.gather(
    rows.data,
    rows.starts,
    rows.dnums,
    _slice_sizes(rows.data.shape, rows.dnums),
    mode=lax.GatherScatterMode.CLIP,
  )
  in_range = jnp.expand_dims(rows.out_of_range == 0, rows.dnums.offset_dims)
  fill = fill_value_or_default(fill_value, data.dtype)
  return jnp.where(in_range, out, jnp.asarray(fill, data.dtype))
