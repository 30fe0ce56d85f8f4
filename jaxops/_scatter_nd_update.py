"""ScatterNDUpdate-3 (OpenVINO opset3; ONNX ScatterND with reduction "none").

Semantics, decisions and errata: docs/semantics.md#scatter-nd-update (last
tuple wins: #duplicates; k = 0: #snu-1; the (1,) form of a 0-d update:
#snu-2; out-of-range modes: #scatter-modes). Design and the measurements
behind the thresholds below: docs/design.md#duplicate-resolution.

Forward design
--------------
The update itself is one `lax.scatter` (what `.at[...].set` lowers to) over the
flattened index tuples, always with `unique_indices=True`, and that promise is
kept honest:

* With `unique_indices=True` the caller promises it.
* Otherwise duplicate tuples are resolved before the scatter, by construction
  rather than by XLA's loop order: the winner of each target slot is the tuple
  with the largest position (last wins, as OpenVINO's CPU runtime applies them
  in order). Every other tuple -- a loser of a later duplicate, or an index out
  of range under `mode="drop"` -- is redirected to its own distinct negative
  (out-of-range) index `-1 - position`, which the scatter drops. The remaining
  in-range indices are unique, and so are the dropped ones.

Finding the winners costs O(n) work plus one of these strategies, chosen
statically from the shapes (n tuples, `slots = prod(data.shape[:k])` target
slots, `target` the row-major linear slot of a tuple):

* winner table, while `slots <= 16 * n + 2**16`:
  `table = full(slots + 1, -1).at[target].max(position)`, then a tuple wins iff
  `table[target] == position`: one int32 fill of the table, one scatter-max and
  one gather. Scatter-max is order independent, so it is deterministic on every
  backend.
* packed sort, for more slots when `(slots + 1) * n` fits the widest enabled
  int type (int64 under x64, else int32): one single-operand sort of the unique
  keys `target * n + position`; the last of each run of equal targets wins.
* rank table otherwise: sort the targets alone, binary-search each target's
  first occurrence in the sorted array (a group id < n), then the winner table
  above over group ids instead of slots: O(n log n), independent of slots.
  When even the linear target overflows (no x64, slots >= 2**31) a k-key
  stable sort of the coordinates is used.

The two sort-based searches first test whether any in-range target repeats
and `lax.cond` to "every in-range tuple wins" when none does, so unique
indices (the common case) skip the search at run time:

* bitmap test, while `slots // 32 + 1 <= 8 * n + 2**16` words: each tuple adds
  `2**(target % 32)` to the uint32 word `target // 32` of a zeroed bitmap; the
  words hold one set bit per tuple iff no bit was added twice (an addition
  loses one set bit per carry). Integer addition is order independent, so this
  is exact on every backend. The duplicate branch then runs the full search.
* sort test, for larger bitmaps: the search's own single-operand sort (of the
  targets for the rank table, of the packed keys, which sort as their targets,
  for the packed sort) is done first, an adjacent compare finds repeats (the
  out-of-range sentinel `slots` sorts last and is ignored), and only the
  duplicate branch does the rest on the sorted array: the binary search and
  winner table, or the last-of-runs flags and their scatter back.

Under `vmap` with batched indices the predicate is batched and `lax.cond`
becomes a select that runs both branches: still exact, no longer cheaper.

Derivative design (docs/design.md#derivatives)
-----------------------------------------------
The operator is a `jax.custom_jvp` whose tangent rule applies the same scatter
(same redirected, unique indices) to the tangents of data and updates: a linear
map. Forward mode evaluates it; reverse mode transposes it, which (for a
scatter with unique indices) is exactly one zeroing scatter of the cotangent
for d/d data (overwritten positions get 0) and one gather of the cotangent at
the indices for d/d updates (dropped tuples -- losers and out-of-range ones --
read 0). JAX's default derivative of a non-unique `.at[].set` instead scatters
an id tensor of data's size (u32) and compares it; that never happens here.
Indices are integers and get float0 tangents. The index normalization and the
winner search run outside the custom rule, so no derivative is taken through
them.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxops import _checks, _common
from jaxops._common import Shape, op_error, shape_str

OP = "ScatterNDUpdate-3"

# Slots per tuple up to which the winner table beats the sorts (measured on
# CPU: docs/design.md#thresholds).
_TABLE_SLOTS_PER_TUPLE = 16
_TABLE_MIN_SLOTS = 1 << 16
# Bitmap words (32 slots each) per tuple up to which the bitmap repeat test
# beats the sort it saves (measured on CPU: docs/design.md#thresholds).
_BITMAP_WORDS_PER_TUPLE = 8
_BITMAP_MIN_WORDS = 1 << 16


def _expected_updates_shape(data_shape: Shape, indices_shape: Shape) -> Shape:
  return indices_shape[:-1] + data_shape[indices_shape[-1]:]


def scatter_nd_update_shape(data_shape: Any, indices_shape: Any,
                            updates_shape: Any) -> Shape:
  """Output shape of ScatterNDUpdate-3 (data's); raises ValueError otherwise.

  Requires `data` rank r >= 1, `indices` rank q >= 1, `k = indices_shape[-1]
  <= r` and `updates_shape == indices_shape[:-1] + data_shape[k:]` exactly (no
  broadcasting). When that expected shape is `()`, a one-element `(1,)` is
  accepted too.

  >>> scatter_nd_update_shape((1000, 256, 10, 15), (25, 125, 3), (25, 125, 15))
  (1000, 256, 10, 15)
  """
  data_shape = _common.static_shape(data_shape, OP, "data")
  indices_shape = _common.static_shape(indices_shape, OP, "indices")
  updates_shape = _common.static_shape(updates_shape, OP, "updates")
  r, q = len(data_shape), len(indices_shape)
  shapes = (f"(data shape {shape_str(data_shape)}, "
            f"indices shape {shape_str(indices_shape)}, "
            f"updates shape {shape_str(updates_shape)})")
  if r < 1:
    raise op_error(OP, f"data must have rank >= 1, got rank 0 {shapes}")
  if q < 1:
    raise op_error(OP, f"indices must have rank >= 1, got rank 0 {shapes}")
  k = indices_shape[-1]
  if k > r:
    raise op_error(
        OP, f"indices.shape[-1]={k} must be <= rank(data)={r} {shapes}")
  expected = _expected_updates_shape(data_shape, indices_shape)
  if updates_shape != expected and not (expected == () and
                                        updates_shape == (1,)):
    one_element = " (or (1,))" if expected == () else ""
    raise op_error(
        OP, f"updates shape {shape_str(updates_shape)} must equal "
        f"indices.shape[:-1] + data.shape[k:] = {shape_str(expected)}"
        f"{one_element} with k={k}; updates are not broadcast {shapes}")
  return data_shape


# Kinds of Python values in the order they convert: an int list may fill float
# data, a float list may not fill int data (NumPy's "same_kind").
_KIND_ORDER = {"u": 0, "i": 0, "f": 1, "c": 2}
_KIND_NAMES = {"u": "int", "i": "int", "f": "float", "c": "complex"}


def _as_updates(updates: Any, dtype: np.dtype) -> jax.Array:
  """`updates` as an array of data's `dtype`, or a TypeError.

  Arrays must have data's dtype after JAX's canonicalization (a NumPy float64
  array is float32 when x64 is off, as it would be under jit). Python scalars
  and lists, and the weakly typed arrays JAX makes of them under jit, take
  data's dtype when that keeps or widens their kind. Python bools are not weak
  in JAX and need bool data, as bool arrays do.
  """
  is_array = isinstance(updates, (jax.Array, np.ndarray, jax.core.Tracer))
  weak = (jax.typeof(updates).weak_type if isinstance(
      updates, (jax.Array, jax.core.Tracer)) else not is_array)
  updates = _common.as_array_like(updates)
  given = jax.dtypes.canonicalize_dtype(updates.dtype)
  if weak and given.kind in _KIND_ORDER and np.dtype(dtype).kind in _KIND_ORDER:
    if _KIND_ORDER[given.kind] > _KIND_ORDER[np.dtype(dtype).kind]:
      raise op_error(
          OP, f"updates given as a Python {_KIND_NAMES[given.kind]} cannot be "
          f"converted to data dtype {np.dtype(dtype).name} without changing "
          "kind", TypeError)
  elif given != dtype:
    raise op_error(
        OP, f"updates dtype {given.name} must equal data dtype "
        f"{np.dtype(dtype).name}; jaxops does not cast implicitly, cast one "
        "of them explicitly", TypeError)
  return jnp.asarray(updates, dtype=dtype)


def _dimension_numbers(data_rank: int, k: int) -> lax.ScatterDimensionNumbers:
  # Flattened layout: indices (n, k), updates (n,) + data.shape[k:].
  return lax.ScatterDimensionNumbers(
      update_window_dims=tuple(range(1, 1 + data_rank - k)),
      inserted_window_dims=tuple(range(k)),
      scatter_dims_to_operand_dims=tuple(range(k)))


def _scatter(data, indices, updates, mode):
  return lax.scatter(data, indices, updates,
                     _dimension_numbers(data.ndim, indices.shape[-1]),
                     indices_are_sorted=False, unique_indices=True, mode=mode)


@functools.partial(jax.custom_jvp, nondiff_argnums=(3,))
def _scatter_unique(data, indices, updates, mode):
  """`data` with `updates` written at `indices` (n, k), which are unique."""
  return _scatter(data, indices, updates, mode)


@_scatter_unique.defjvp
def _scatter_unique_jvp(mode, primals, tangents):
  data, indices, updates = primals
  data_dot, _, updates_dot = tangents
  out = _scatter(data, indices, updates, mode)
  if _common.is_float0(data_dot):
    return out, _common.float0_zeros(out.shape)
  # Linear in (data_dot, updates_dot); its transpose is JAX's unique-index
  # scatter transpose: a zeroing scatter and a gather with fill 0.
  return out, _scatter(data_dot, indices, updates_dot, mode)


def _int_dtype_for(max_value: int):
  """The narrowest enabled signed int dtype holding `max_value`, or None."""
  if max_value <= np.iinfo(np.int32).max:
    return jnp.int32
  if jax.config.jax_enable_x64 and max_value <= np.iinfo(np.int64).max:
    return jnp.int64
  return None


def _winner_table(keys: jax.Array, size: int,
                  positions: jax.Array) -> jax.Array:
  """Whether each position is the largest among those with its key (< size)."""
  table = jnp.full((size,), -1, jnp.int32).at[keys].max(
      positions, mode="promise_in_bounds")
  return table.at[keys].get(mode="promise_in_bounds") == positions


def _last_of_runs(sorted_keys: jax.Array) -> jax.Array:
  """Whether each element of a sorted array is the last of its run."""
  return jnp.concatenate([sorted_keys[:-1] != sorted_keys[1:],
                          jnp.ones((1,), bool)])


def _strategy(n: int,
              sizes: tuple[int, ...]) -> tuple[str, Any, Any, str | None]:
  """Picks the winner search statically.

  Returns (name, target dtype, key dtype, repeat test): the repeat test, for
  the sort-based searches only, is "bitmap" or "sort" (see `_winners`).
  """
  slots = math.prod(sizes)
  target_dtype = _int_dtype_for(slots)
  if target_dtype is None:
    return "columns", None, None, None
  if slots <= _TABLE_SLOTS_PER_TUPLE * n + _TABLE_MIN_SLOTS:
    return "table", target_dtype, None, None
  repeat_test = ("bitmap" if slots // 32 + 1 <= _BITMAP_WORDS_PER_TUPLE * n +
                 _BITMAP_MIN_WORDS else "sort")
  key_dtype = _int_dtype_for((slots + 1) * n - 1)
  if key_dtype is None:
    return "rank_table", target_dtype, None, repeat_test
  return "packed_sort", target_dtype, key_dtype, repeat_test


def _winners(indices: jax.Array, in_bounds: jax.Array, sizes: tuple[int, ...],
             strategy: tuple[str, Any, Any, str | None]) -> jax.Array:
  """Marks, per tuple, whether it is the last in-range tuple of its target.

  Args:
    indices: (n, k) signed ints; rows with `in_bounds` False may hold anything.
    in_bounds: (n,) bool.
    sizes: the k indexed data dims.
    strategy: from `_strategy(n, sizes)`.
  """
  n, k = indices.shape
  slots = math.prod(sizes)
  name, target_dtype, key_dtype, repeat_test = strategy
  positions = lax.iota(jnp.int32, n)
  if name == "columns":
    # Even the linear target overflows (no x64): sort the k coordinates;
    # out-of-range tuples sort as (sizes...), after every valid tuple.
    columns = tuple(jnp.where(in_bounds, indices[:, j].astype(jnp.int32),
                              jnp.int32(sizes[j])) for j in range(k))
    *sorted_columns, sorted_positions = lax.sort(
        (*columns, positions), num_keys=k, is_stable=True)
    is_last = _last_of_runs(sorted_columns[0])
    for column in sorted_columns[1:]:
      is_last = is_last | _last_of_runs(column)
    return _scatter_back(is_last, sorted_positions) & in_bounds
  strides = np.cumprod((1,) + sizes[:0:-1])[::-1].reshape(1, k)
  target = jnp.sum(indices.astype(target_dtype) * strides.astype(target_dtype),
                   axis=1, dtype=target_dtype)
  # Out-of-range tuples go to the extra slot `slots`, so no internal gather or
  # scatter here ever indexes out of range (checkify stays quiet about them).
  target = jnp.where(in_bounds, target, jnp.asarray(slots, target_dtype))
  if name == "table":
    return _winner_table(target, slots + 1, positions) & in_bounds
  if repeat_test == "bitmap":
    # A cheap exact test first: without repeated targets every in-range tuple
    # wins and the search below is skipped at run time.
    return lax.cond(_repeats_in_bitmap(target, in_bounds, slots),
                    functools.partial(_sorted_search, name=name,
                                      key_dtype=key_dtype),
                    lambda target, _: jnp.ones((n,), bool), target,
                    positions) & in_bounds
  return _sorted_search(target, positions, name=name, key_dtype=key_dtype,
                        slots=slots) & in_bounds


def _sorted_search(target: jax.Array, positions: jax.Array, *, name: str,
                   key_dtype: Any, slots: int | None = None) -> jax.Array:
  """The winners among `target` (out of range ones as the largest value).

  With `slots` (the sentinel target of out-of-range tuples) the sort it needs
  anyway tests for repeated in-range targets first and the rest is skipped
  when there are none; without, it is known to repeat (or assumed to).
  """
  n = target.shape[0]
  if name == "rank_table":
    sorted_target = lax.sort(target)

    def search(sorted_target, target):
      # A group id < n per distinct target (its first occurrence in the sorted
      # array), then the winner table over ids. The scan is a while loop of
      # log2(n) gathers; measured faster than method "sort" (two multi-operand
      # sorts), "scan_unrolled", and a (target, position) sort with segment
      # maxima ("compare_all" is O(n**2)).
      group = jnp.searchsorted(sorted_target, target, side="left",
                               method="scan").astype(jnp.int32)
      return _winner_table(group, n, positions)

    return _unless_unique(sorted_target, slots, search,
                          (sorted_target, target))
  # Packed keys are unique, so an unstable one-operand sort is exact; they sort
  # as the targets do, so the same sort finds repeats and, only if there are
  # some, the last of each run.
  keys = lax.sort(target.astype(key_dtype) * n + positions.astype(key_dtype))
  sorted_target = keys // n

  def last_of_runs(sorted_target, keys):
    return _scatter_back(_last_of_runs(sorted_target),
                         (keys % n).astype(jnp.int32))

  return _unless_unique(sorted_target, slots, last_of_runs,
                        (sorted_target, keys))


def _unless_unique(sorted_target: jax.Array, slots: int | None, search,
                   operands: tuple[jax.Array, ...]) -> jax.Array:
  """`search(*operands)` if an in-range target repeats, else all True.

  `sorted_target` holds the targets sorted, out-of-range ones as `slots` (the
  largest value, so they form the last run and are ignored). Without repeats
  every tuple wins and the exact search is skipped at run time. Under `vmap` a
  batched predicate turns the `lax.cond` into a select that runs both branches
  (still exact, no longer cheaper). `slots=None`: always search.
  """
  if slots is None:
    return search(*operands)
  return lax.cond(_repeats_in_sorted(sorted_target, slots), search,
                  lambda *_: jnp.ones(sorted_target.shape, bool), *operands)


def _repeats_in_sorted(sorted_target: jax.Array, slots: int) -> jax.Array:
  """Whether a value other than `slots` occurs twice in a sorted array."""
  return jnp.any((sorted_target[1:] == sorted_target[:-1]) &
                 (sorted_target[1:] != slots))


def _repeats_in_bitmap(target: jax.Array, in_bounds: jax.Array,
                       slots: int) -> jax.Array:
  """Whether an in-range target occurs twice, from one bit per slot.

  Each in-range tuple adds the bit `2**(target % 32)` to the uint32 word
  `target // 32`. The words then hold as many set bits as there are in-range
  tuples iff no bit was added twice: an addition loses one set bit per carry,
  adding a bit that is set carries, and without carries bits are never
  cleared. Integer addition (wrapping included) is order independent, so the
  answer is exact and deterministic on every backend.
  """
  bits = jnp.where(in_bounds,
                   jnp.left_shift(jnp.uint32(1),
                                  (target % 32).astype(jnp.uint32)),
                   jnp.uint32(0))
  words = jnp.zeros((slots // 32 + 1,), jnp.uint32).at[target // 32].add(
      bits, mode="promise_in_bounds")
  return (jnp.sum(lax.population_count(words), dtype=jnp.int32) !=
          jnp.sum(in_bounds, dtype=jnp.int32))


def _scatter_back(sorted_flags: jax.Array,
                  sorted_positions: jax.Array) -> jax.Array:
  """Undoes a sort permutation on per-element flags."""
  return jnp.zeros(sorted_flags.shape, bool).at[sorted_positions].set(
      sorted_flags, unique_indices=True, mode="promise_in_bounds")


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _scatter_indices(indices: jax.Array, sizes: tuple[int, ...],
                     mode: lax.GatherScatterMode,
                     strategy: tuple[str, Any, Any, str | None] | None
                     ) -> jax.Array:
  """The (n, k) indices the final unique scatter uses.

  Wraps negative indices, applies `mode` ("clip" clamps here), and with a
  `strategy` (no uniqueness promise) redirects every tuple that is not the
  winner of its target -- losers and out-of-range tuples -- to the distinct
  out-of-range index `-1 - position` in dim 0. Jitted so that an eager call
  costs one dispatch; it only ever sees integer arrays, so no derivative is
  taken through it.
  """
  n, k = indices.shape
  indices = _common.prepare_indices(indices, sizes)
  sizes_arr = np.asarray(sizes, np.int64).reshape(1, k)
  if jnp.issubdtype(indices.dtype, jnp.unsignedinteger):
    # Losers are redirected to negative indices, so go signed; capping at the
    # size first keeps an out-of-range value out of range (2**32 + 1 must not
    # become 1).
    signed = jnp.int64 if indices.dtype == jnp.uint64 else jnp.int32
    indices = jnp.minimum(indices,
                          sizes_arr.astype(indices.dtype)).astype(signed)
  sizes_arr = sizes_arr.astype(indices.dtype)
  zero = np.zeros((), indices.dtype)
  if mode == lax.GatherScatterMode.CLIP:
    indices = jnp.clip(indices, zero, sizes_arr - 1)
    in_bounds = jnp.ones((n,), bool)
  elif mode == lax.GatherScatterMode.FILL_OR_DROP:
    indices = _checks.checked_indices(
        indices, sizes, f"{OP}: an index tuple is out of range for the "
        f"indexed dims {shape_str(sizes)} (valid: [-s, s-1]); it was dropped")
    in_bounds = jnp.all((indices >= zero) & (indices < sizes_arr), axis=1)
  else:
    in_bounds = jnp.ones((n,), bool)  # promised; out of range is undefined
  if strategy is None:
    return indices
  wins = _winners(indices, in_bounds, sizes, strategy)
  redirected = -1 - lax.iota(indices.dtype, n)
  return indices.at[:, 0].set(jnp.where(wins, indices[:, 0], redirected))


def scatter_nd_update(data: Any, indices: Any, updates: Any, *,
                      mode: _common.ScatterMode = "drop",
                      unique_indices: bool = False) -> jax.Array:
  """A copy of `data` with slices replaced by `updates` (ScatterNDUpdate-3).

  With `k = indices.shape[-1]`, for every index tuple position `i`::

    out = copy(data)
    out[*indices[i], ...] = updates[i, ...]

  `k == rank(data)` updates single elements, `k < rank(data)` whole slices
  `data.shape[k:]`. Duplicate tuples: the last one (in row-major order of
  `indices.shape[:-1]`) wins, on every backend (see the module docstring for
  how this is guaranteed without relying on XLA's scatter order).

  Args:
    data: array of rank r >= 1, any dtype.
    indices: integer array (int32/int64; other int widths accepted) of rank
      q >= 1, shape `(..., k)` with `k <= r`. Values in `[-s, s-1]` for the
      dim of size `s` they index; negative values count from the end.
    updates: array of shape `indices.shape[:-1] + data.shape[k:]` exactly (not
      broadcast) and data's dtype (a TypeError otherwise; Python scalars and
      lists are converted to data's dtype when that keeps their kind). When
      that shape is `()`, a one-element `(1,)` array is accepted too.
    mode: what an out-of-range index tuple does under `jit`, where raising is
      impossible. `"drop"` (default) skips that tuple: nothing outside `data`
      is ever written. `"clip"` clamps each index into range.
      `"promise_in_bounds"` lets XLA assume every index is valid. Concrete
      (non-traced) indices are checked eagerly and raise `IndexError` (except
      with `"clip"`); under
      `jax.experimental.checkify` with `checkify.user_checks` out-of-range
      tuples are reported by name.
    unique_indices: keyword-only promise that no two in-range tuples address
      the same target. It skips the duplicate resolution (one scatter, no
      winner search); a broken promise gives an unspecified winner.

  Returns:
    Array of data's shape and dtype.

  Example:
    >>> import jax.numpy as jnp, jaxops
    >>> data = jnp.array([1, 2, 3, 4, 5, 6, 7, 8], dtype=jnp.int32)
    >>> indices = jnp.array([[4], [3], [1], [7]], dtype=jnp.int32)
    >>> updates = jnp.array([9, 10, 11, 12], dtype=jnp.int32)
    >>> jaxops.scatter_nd_update(data, indices, updates)
    Array([ 1, 11,  3, 10,  9,  6,  7, 12], dtype=int32)
    >>> jaxops.scatter_nd_update(data, jnp.array([[0], [0]], dtype=jnp.int32),
    ...                          jnp.array([5, 6], dtype=jnp.int32))[:2]
    Array([6, 2], dtype=int32)

  Implements OpenVINO ScatterNDUpdate-3 (= ONNX ScatterND, reduction "none").
  """
  data = jnp.asarray(data)
  indices = _common.as_indices(indices, OP)
  updates = _as_updates(updates, data.dtype)
  scatter_nd_update_shape(data.shape, indices.shape, updates.shape)
  scatter_mode = _common.canonicalize_mode(mode, OP,
                                           ("drop", "clip", "promise_in_bounds"))
  if not isinstance(unique_indices, (bool, np.bool_)):
    raise op_error(
        OP, f"unique_indices must be a Python bool, got "
        f"{type(unique_indices).__name__} {unique_indices!r}", TypeError)
  k = indices.shape[-1]
  sizes = data.shape[:k]
  if scatter_mode != lax.GatherScatterMode.CLIP:
    _common.check_concrete_bounds(indices, sizes, OP)
  n = math.prod(indices.shape[:-1])
  updates = jnp.reshape(updates, (n,) + data.shape[k:])
  if n == 0 or data.size == 0:
    # Nothing to write (every index into an empty dim is out of range).
    return data
  if k == 0:
    # Every tuple addresses all of data: the last one wins.
    return updates[n - 1]

  dedup = not unique_indices and n > 1
  indices = _scatter_indices(jnp.reshape(jnp.asarray(indices), (n, k)), sizes,
                             scatter_mode,
                             _strategy(n, sizes) if dedup else None)
  if dedup or scatter_mode == lax.GatherScatterMode.CLIP:
    # Redirected tuples must be dropped; clipped ones are in range already.
    scatter_mode = lax.GatherScatterMode.FILL_OR_DROP
  return _scatter_unique(data, indices, updates, scatter_mode)
