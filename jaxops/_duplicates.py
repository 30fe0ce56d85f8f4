"""ScatterNDUpdate's duplicate resolution: which tuple wins each target.

`last_of_targets(target, slots, strategy)` marks, per linear target (the
out-of-range sentinel `slots` included), whether no later one equals it:
the last tuple addressing a slot wins (docs/semantics.md#duplicates),
deterministically on every backend and without relying on XLA's scatter
order. The scatter then redirects every other tuple out of range, so its
indices are unique. `winners_by_columns` does the same on the coordinates
when even the linear target overflows.

A `Strategy` is chosen statically from the shapes by `choose_strategy(n,
sizes)`: n tuples, `slots = prod(sizes)` target slots, `target` the row-major
linear slot of a tuple (out-of-range tuples get the extra target `slots`, so
nothing inside the search indexes out of range). The searches, the repeat
tests that let unique indices skip them, and the measurements behind the
thresholds are in docs/design.md#duplicate-resolution.

Decided (docs/design.md#safe-defaults-decided): last wins by construction;
XLA's scatter order is not relied on, on any backend, although an exact,
order-independent repeat test costs at least 1.35x a donated element update
on XLA:CPU. Sorted indices prove themselves unique in one adjacent compare
(`sorted_unique`), which runs in front of every search but the coordinate
sort and the small untested table (cheaper than the test's branch).
"""

from __future__ import annotations

import enum
import functools
import math
import operator
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from jaxops._common import is_symbolic, linear_index, provable


class Search(enum.Enum):
  """How the winners are found."""

  TABLE = "table"
  """`table = full(slots + 1, -1).at[target].max(position)`; a tuple wins iff
  `table[target] == position`. One fill, one scatter-max, one gather."""
  PACKED_SORT = "packed_sort"
  """One single-operand sort of the unique keys `target * n + position`; the
  last of each run of equal targets wins."""
  RANK_TABLE = "rank_table"
  """Sort the targets, binary-search each one's first occurrence (a group id
  below n), then the winner table over group ids."""
  COLUMNS = "columns"
  """A stable k-key sort of the coordinates (the linear target overflows)."""
  STABLE_SORT = "stable_sort"
  """A stable sort of (target, position) pairs; the last of each run of
  equal targets wins. For symbolic sizes: no packed key, no binary search
  of a length known only at run time."""


class RepeatTest(enum.Enum):
  """The exact test that lets unique indices skip a search. Every search
  but COLUMNS and the untested TABLE runs behind the order test
  (`sorted_unique`) first, which proves sorted unique indices in one pass."""

  NONE = "none"
  BITMAP = "bitmap"
  """One bit per slot, added per tuple; no repeats iff the popcount is n."""
  SORT = "sort"
  """The search's own sort, then an adjacent compare."""


class Strategy(NamedTuple):
  """A winner search with its repeat test and integer types.

  `target_dtype` holds the linear targets up to `slots + n - 1` (None for
  COLUMNS), `key_dtype` the packed keys up to `(slots + 1) * n - 1`
  (PACKED_SORT only).
  """

  search: Search
  repeat_test: RepeatTest = RepeatTest.NONE
  target_dtype: Any = None
  key_dtype: Any = None


# Slots per tuple up to which the winner table beats the sorts, and bitmap
# words (32 slots each) per tuple up to which the bitmap test beats the sort
# it saves: 8 for any bitmap, 40 for one that stays in cache (measured on
# CPU: docs/design.md#thresholds). Tables beyond `TABLE_UNTESTED_SLOTS` go
# behind the bitmap test: under `vmap` a table grows with the batch, and the
# bitmap is 32 times smaller (docs/design.md#tried-scatter-rows).
TABLE_SLOTS_PER_TUPLE = 16
TABLE_MIN_SLOTS = 1 << 16
TABLE_UNTESTED_SLOTS = 1 << 12
BITMAP_WORDS_PER_TUPLE = 8
BITMAP_MIN_WORDS = 1 << 16
CACHED_BITMAP_WORDS_PER_TUPLE = 40
CACHED_BITMAP_MAX_WORDS = 1 << 20


def int_dtype_for(max_value: Any) -> Any:
  """The narrowest enabled signed int dtype holding `max_value`, or None.

  A symbolic `max_value` (a size of `jax.export`'s symbolic dims) gets the
  dimension values' type, int64 with x64 on and int32 off, in which
  jax.export computes every size: a caller stores no value in it above an
  array's size (a redirect past the end, `slots + i`, becomes `-1 - i`;
  docs/export.md#symbolic-index-widths).
  """
  if is_symbolic(max_value):
    return np.dtype(jax.dtypes.canonicalize_dtype(np.int64))
  if max_value <= np.iinfo(np.int32).max:
    return np.dtype(np.int32)
  x64 = jax.dtypes.canonicalize_dtype(np.int64) == np.int64
  if x64 and max_value <= np.iinfo(np.int64).max:
    return np.dtype(np.int64)
  return None


def choose_strategy(n: Any, sizes: tuple[Any, ...]) -> Strategy:
  """The search for n tuples into the indexed dims `sizes`."""
  slots = math.prod(sizes)
  if is_symbolic(n) or is_symbolic(slots):
    return _symbolic_strategy(n, slots)
  # Targets go up to `slots + n - 1`: out-of-range tuples past the end.
  target_dtype = int_dtype_for(slots + n)
  if target_dtype is None:
    return Strategy(Search.COLUMNS)
  if slots <= TABLE_SLOTS_PER_TUPLE * n + TABLE_MIN_SLOTS:
    return Strategy(
      Search.TABLE,
      RepeatTest.BITMAP if slots > TABLE_UNTESTED_SLOTS else RepeatTest.NONE,
      target_dtype,
    )
  words = slots // 32 + 1
  bitmap = (
    words <= BITMAP_WORDS_PER_TUPLE * n + BITMAP_MIN_WORDS
    or words <= min(CACHED_BITMAP_WORDS_PER_TUPLE * n, CACHED_BITMAP_MAX_WORDS)
  )
  repeat_test = RepeatTest.BITMAP if bitmap else RepeatTest.SORT
  key_dtype = int_dtype_for((slots + 1) * n - 1)
  if key_dtype is None:
    return Strategy(Search.RANK_TABLE, repeat_test, target_dtype)
  return Strategy(Search.PACKED_SORT, repeat_test, target_dtype, key_dtype)


def _symbolic_strategy(n: Any, slots: Any) -> Strategy:
  """`choose_strategy` where n or the slots are symbolic: a search valid
  for every size. The untested table where it provably holds at most
  `TABLE_UNTESTED_SLOTS` slots (as for such concrete sizes); otherwise the
  stable sort behind the sort test, whose time (n log n) and memory (n)
  never grow with the slots and whose targets never pass `slots` (the
  bitmap's distinct targets run to `slots + n`, the packed keys to
  `slots * n`: neither fits every size). Every search gives the same
  winners."""
  target_dtype = int_dtype_for(slots)
  if target_dtype is None:
    return Strategy(Search.COLUMNS)
  if provable(operator.le, slots, TABLE_UNTESTED_SLOTS):
    return Strategy(Search.TABLE, RepeatTest.NONE, target_dtype)
  return Strategy(Search.STABLE_SORT, RepeatTest.SORT, target_dtype)


def winners_by_columns(
  indices: jax.Array, in_bounds: jax.Array, sizes: tuple[int, ...]
) -> jax.Array:
  """Marks, per tuple, whether it is the last in-range tuple of its target:
  the COLUMNS search, a stable k-key sort of the coordinates, for when even
  the linear target overflows.

  Args:
    indices: (n, k) signed ints; rows with `in_bounds` False may hold
      anything.
    in_bounds: (n,) bool.
    sizes: the k indexed data dims.

  Returns:
    (n,) bool.
  """
  n, k = indices.shape
  positions = lax.iota(jnp.int32, n)
  # Out-of-range tuples sort as (sizes...), after every valid tuple.
  columns = tuple(
    jnp.where(in_bounds, indices[:, j].astype(jnp.int32), jnp.int32(sizes[j]))
    for j in range(k)
  )
  *sorted_columns, sorted_positions = lax.sort(
    (*columns, positions), num_keys=k, is_stable=True
  )
  is_last = _last_of_runs(sorted_columns[0])
  for column in sorted_columns[1:]:
    is_last = is_last | _last_of_runs(column)
  return _scatter_back(is_last, sorted_positions) & in_bounds


def linear_targets(
  indices: jax.Array, in_bounds: jax.Array, sizes: tuple[int, ...], dtype: Any
) -> jax.Array:
  """The row-major linear slot of each (n, k) tuple, `prod(sizes)` where it
  is out of range."""
  slots = math.prod(sizes)
  return jnp.where(
    in_bounds, linear_index(indices, sizes, dtype), jnp.asarray(slots, dtype)
  )


def last_of_targets(
  target: jax.Array, slots: int, strategy: Strategy
) -> jax.Array:
  """Marks, per target (n,) in [0, slots], whether no later one equals it.

  The out-of-range sentinel `slots` is a target like any other (its winner
  is written to slot `slots` and dropped), so a caller that writes at
  `target` needs no separate in-bounds mask. Not for COLUMNS.
  """
  n = target.shape[0]
  dtype = target.dtype
  positions = lax.iota(jnp.int32, n)
  in_bounds = target < slots
  search: Callable[..., jax.Array]
  if strategy.search is Search.TABLE:
    if strategy.repeat_test is RepeatTest.SORT:
      raise ValueError(f"{strategy}: the sort test needs a sort-based search")
    search = functools.partial(_winner_table, size=slots + 1)
  else:
    search = functools.partial(
      _sorted_search, search=strategy.search, key_dtype=strategy.key_dtype
    )

  def exact(target):
    if strategy.repeat_test is RepeatTest.NONE:
      return search(target, positions)
    if strategy.repeat_test is RepeatTest.SORT:
      return search(target, positions, slots=slots)
    # Out-of-range tuples take distinct slots past the end, so the count to
    # compare with is the constant n.
    distinct = jnp.where(in_bounds, target, slots + positions.astype(dtype))
    repeats = any_in_batch(repeats_in_bitmap(distinct, slots + n))
    return lax.cond(repeats, search, _all_win, target, positions)

  untested = strategy.repeat_test is RepeatTest.NONE
  if strategy.search is Search.TABLE and untested:
    # A table of at most 2**12 slots (one fill, scatter-max and gather) costs
    # no more than the order test and its branch (docs/design.md#order-test).
    return exact(target)
  # Sorted indices prove themselves unique in one pass over the targets, far
  # cheaper than the bitmap or the sort (docs/design.md#order-test).
  unproved = any_in_batch(~sorted_unique(target, slots))
  return lax.cond(unproved, exact, _all_win, target)


def _all_win(target: jax.Array, *_) -> jax.Array:
  # All True, computed from the (integer) target rather than a constant so
  # that it varies over shard_map's manual axes as the other branch does
  # (lax.cond requires both branches' types to match there).
  return target == target


def _winner_table(
  keys: jax.Array, positions: jax.Array, size: int
) -> jax.Array:
  """Whether each position is the largest among those with its key (< size)."""
  # The keys are in [0, size): no wrap of negative indices.
  table = (
    jnp.full((size,), -1, jnp.int32)
    .at[keys]
    .max(positions, mode="promise_in_bounds", wrap_negative_indices=False)
  )
  at = table.at[keys]
  return (
    at.get(mode="promise_in_bounds", wrap_negative_indices=False) == positions
  )


def _last_of_runs(sorted_keys: jax.Array) -> jax.Array:
  """Whether each element of a sorted array is the last of its run."""
  return jnp.concatenate(
    [sorted_keys[:-1] != sorted_keys[1:], jnp.ones((1,), bool)]
  )


def _sorted_search(
  target: jax.Array,
  positions: jax.Array,
  *,
  search: Search,
  key_dtype: Any,
  slots: int | None = None,
) -> jax.Array:
  """The winners among `target` (out-of-range ones as the largest value).

  With `slots` (the sentinel target of out-of-range tuples) the sort it needs
  anyway tests for repeated in-range targets first and the rest is skipped
  when there are none; without, the targets are known to repeat (or assumed
  to).
  """
  n = target.shape[0]
  if search is Search.STABLE_SORT:
    sorted_pairs = lax.sort((target, positions), num_keys=1, is_stable=True)

    def last_of_runs_stable(sorted_target, sorted_positions):
      return _scatter_back(_last_of_runs(sorted_target), sorted_positions)

    return _unless_unique(
      sorted_pairs[0], slots, last_of_runs_stable, sorted_pairs
    )
  if search is Search.RANK_TABLE:
    sorted_target = lax.sort(target)

    def rank_table(sorted_target, target):
      # A group id < n per distinct target (its first occurrence in the
      # sorted array), then the winner table over ids. The scan is a while
      # loop of log2(n) gathers (docs/design.md#tried-scatter-search).
      group = jnp.searchsorted(
        sorted_target, target, side="left", method="scan"
      ).astype(jnp.int32)
      return _winner_table(group, positions, n)

    return _unless_unique(
      sorted_target, slots, rank_table, (sorted_target, target)
    )
  # Packed keys are unique, so an unstable one-operand sort is exact; they
  # sort as the targets do, so the same sort finds repeats and, only if there
  # are some, the last of each run.
  keys = lax.sort(target.astype(key_dtype) * n + positions.astype(key_dtype))
  sorted_target = keys // n

  def last_of_runs(sorted_target, keys):
    return _scatter_back(
      _last_of_runs(sorted_target), (keys % n).astype(jnp.int32)
    )

  return _unless_unique(
    sorted_target, slots, last_of_runs, (sorted_target, keys)
  )


def _unless_unique(
  sorted_target: jax.Array,
  slots: int | None,
  search,
  operands: tuple[jax.Array, ...],
) -> jax.Array:
  """`search(*operands)` if an in-range target repeats, else all True.

  `slots=None`: always search.
  """
  if slots is None:
    return search(*operands)
  repeats = any_in_batch(repeats_in_sorted(sorted_target, slots))
  return lax.cond(
    repeats, search, lambda *_: jnp.ones(sorted_target.shape, bool), *operands
  )


def sorted_unique(target: jax.Array, slots: int) -> jax.Array:
  """Whether the values below `slots` strictly increase and every `slots`
  (an out-of-range tuple) comes after them: then no value below `slots`
  repeats. One adjacent compare; unsorted unique values answer False."""
  return reduce_whole((target[1:] > target[:-1]) | (target[1:] == slots), "all")


def repeats_in_sorted(sorted_target: jax.Array, slots: int) -> jax.Array:
  """Whether a value other than `slots` occurs twice in a sorted array."""
  return reduce_whole(
    (sorted_target[1:] == sorted_target[:-1]) & (sorted_target[1:] != slots),
    "any",
  )


def repeats_in_bitmap(target: jax.Array, slots: int) -> jax.Array:
  """Whether a value occurs twice in `target` (n values in [0, slots)), from
  one bit per slot.

  Each value adds the bit `2**(target % 32)` to the uint32 word
  `target // 32`. The words then hold n set bits iff no bit was added twice:
  an addition loses one set bit per carry, adding a bit that is set carries,
  and without carries bits are never cleared. Integer addition (wrapping
  included) is order independent, so the answer is exact and deterministic
  on every backend.
  """
  bits = jnp.left_shift(jnp.uint32(1), (target % 32).astype(jnp.uint32))
  words = (
    jnp.zeros((slots // 32 + 1,), jnp.uint32)
    .at[target // 32]
    .add(bits, mode="promise_in_bounds")
  )
  return (
    reduce_whole(lax.population_count(words).astype(jnp.int32), "sum")
    != target.shape[0]
  )


def _scatter_back(
  sorted_flags: jax.Array, sorted_positions: jax.Array
) -> jax.Array:
  """Undoes a sort permutation on per-element flags."""
  return (
    jnp.zeros(sorted_flags.shape, bool)
    .at[sorted_positions]
    .set(sorted_flags, unique_indices=True, mode="promise_in_bounds")
  )


# --- one predicate for a whole vmap batch ------------------------------------

_any_in_batch_p = Primitive("jaxops_any_in_batch")


_WHOLE = {
  "any": (lax.bitwise_or, False),
  "all": (lax.bitwise_and, True),
  "max": (lax.max, None),
  "sum": (lax.add, 0),
}


def reduce_whole(x: jax.Array, op: Literal["any", "all", "max", "sum"]):
  """`jnp.<op>(x)` over every axis of a bool or integer `x`, as one XLA
  reduce of the pair (x, x).

  XLA:CPU rewrites a plain reduce over more than 32 elements into a chain
  of reduce-windows, each its own kernel to compile and run (four for a
  million elements); it leaves variadic reduces whole: one loop, about half
  the compile time and a tenth of the run time of the chain
  (docs/design.md#one-pass-reductions). The two halves are combined so
  that neither is dead code.
  """
  combine, identity = _WHOLE[op]
  init = np.asarray(
    jnp.iinfo(x.dtype).min if identity is None else identity, x.dtype
  )
  a, b = lax.reduce(
    (x, x),
    (init, init),
    lambda p, q: (combine(p[0], q[0]), combine(p[1], q[1])),
    tuple(range(x.ndim)),
  )
  return lax.select(a == b, a, b) if op == "sum" else combine(a, b)


def any_in_batch(predicate: jax.Array) -> jax.Array:
  """`predicate` (a bool scalar), or under `vmap` its `any` over the batch.

  A `lax.cond` on a batched predicate becomes a select that runs both
  branches; on this unbatched one it stays a cond, and takes the exact
  branch for the whole batch when any member needs it.
  """
  return _any_in_batch_p.bind(predicate)


def _any_in_batch_batcher(batched_args, batch_dims):
  (predicate,), (dim,) = batched_args, batch_dims
  return any_in_batch(jnp.any(predicate, axis=dim)), None  # not batched


_any_in_batch_p.def_impl(lambda predicate: predicate)
_any_in_batch_p.def_abstract_eval(lambda predicate: predicate)
mlir.register_lowering(_any_in_batch_p, lambda ctx, predicate: [predicate])
batching.primitive_batchers[_any_in_batch_p] = _any_in_batch_batcher
ad.primitive_jvps[_any_in_batch_p] = lambda primals, tangents: (
  any_in_batch(*primals),
  np.zeros(jnp.shape(primals[0]), jax.dtypes.float0),
)
