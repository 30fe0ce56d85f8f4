"""The serial fold of the scatter reductions (docs/design.md).

See docs/design.md#scatter-reductions.

`layout(target, slots)` sorts the update positions stably by target and cuts
each target's run into segments of at most `CHUNK` updates; `serial_fold`
folds every target's updates in that order with `fold_p`, a loop over ranks
whose step j combines the j-th update of every segment (one gather of one row
per segment, read through the sort order: the updates are never copied into
it; two ranks per iteration), then folds the chunk results of long runs.
Up to CHUNK updates per target this is the serial index order exactly.
`fold_p` add is linear, with its own jvp, transpose and batching rules (JAX
cannot transpose a while loop); under `vmap` it and its transpose keep the
batch as a leading dim of every operand, so that a sharded batch stays
sharded (docs/design.md#serial-cpu). `serial_prod` differentiates the
product without division.
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.core import min_dim
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from jaxops import _sort
from jaxops._common import (
  batch_in_front,
  batched,
  is_symbolic,
  provable,
  vary_alike,
)
from jaxops._duplicates import reduce_whole

# Updates per target folded in serial order; longer runs fold in chunks of
# this many (docs/design.md#scatter-reductions).
CHUNK = 1024
# Ranks per loop iteration: XLA fuses them into one pass over the
# accumulators (docs/design.md#fold-cost).
UNROLL = 2


# --- the serial fold ---------------------------------------------------------

fold_p = Primitive("jaxops_serial_fold")


def fold(init, members, order, start, count, group, *, op: str) -> jax.Array:
  """`out[s] = op(...op(op(init[s], members[order[start[s]]]), ...),
  members[order[start[s] + count[s] - 1]])` for every segment s, in that
  order.

  `init` (S, R), `members` (m, R), `order` (m,) int32 (the fold's sequence
  of member rows: reading through it, the members are never gathered into
  that order, a copy that costs more than the fold at real sizes),
  `start`/`count` (S,) int32, `group` (m,) int32: the segment that consumes
  each member row, or S for none (used by the transpose). op "add" is linear
  in (init, members); "mul" has no derivative rule (`prod` differentiates
  around it).
  """
  # Under shard_map every operand varies alike, so the result may take
  # init's type (and the loop carry keeps it).
  operands = vary_alike(init, members, order, start, count, group)
  return fold_p.bind(*operands, op=op)


def _fold_impl(init, members, order, start, count, group, *, op):
  del group
  batch = order.ndim - 1  # Leading batch dims of every operand (vmap).
  m = order.shape[-1]
  if m == 0 or init.shape[batch] == 0:
    return init
  combine = lax.add if op == "add" else lax.mul
  # The loop counts iterations, not ranks: XLA:CPU (jaxlib 0.10.2) drops a
  # loop whose counter steps by 2 up to a constant bound of 1. One bound
  # for the whole batch: the loop's test stays a scalar.
  iterations = (reduce_whole(count, "max") + UNROLL - 1) // UNROLL
  read = batched(_read, batch)

  def body(state):
    i, acc = state
    for rank in (i * UNROLL + u for u in range(UNROLL)):
      at = read(order, jnp.minimum(start + rank, m - 1))
      rows = read(members, at)
      acc = jnp.where((rank < count)[..., None], combine(acc, rows), acc)
    return i + 1, acc

  return lax.while_loop(
    lambda state: state[0] < iterations, body, (jnp.int32(0), init)
  )[1]


def _fold_jvp(primals, tangents, *, op):
  if op != "add":
    raise NotImplementedError("fold 'mul' is differentiated by its caller")
  init, members, order, start, count, group = primals
  init_dot, members_dot = (
    ad.instantiate_zeros(t) if type(t) is ad.Zero else t for t in tangents[:2]
  )
  out = fold(*primals, op=op)
  return out, fold(init_dot, members_dot, order, start, count, group, op=op)


def _fold_transpose(ct, init, members, order, start, count, group, *, op):
  del op
  if type(ct) is ad.Zero:
    return [None] * 6
  init_ct = ct if ad.is_undefined_primal(init) else None
  members_ct = None
  if ad.is_undefined_primal(members):
    members_ct = spread(ct, order, start, count, group)
  return [init_ct, members_ct, None, None, None, None]


def _read(x, at):
  return x.at[at].get(mode="promise_in_bounds")


def _fold_batch(args, dims, *, op):
  # The batch stays a dim of every operand.
  _, moved = batch_in_front(args, dims)
  return fold(*moved, op=op), 0


fold_p.def_impl(_fold_impl)
fold_p.def_abstract_eval(lambda init, *_, **__: init)
mlir.register_lowering(fold_p, mlir.lower_fun(_fold_impl, False))
ad.primitive_jvps[fold_p] = _fold_jvp
ad.primitive_transposes[fold_p] = _fold_transpose
batching.primitive_batchers[fold_p] = _fold_batch


# --- the fold's transpose --------------------------------------------------

spread_p = Primitive("jaxops_fold_spread")


def spread(ct, order, start, count, group) -> jax.Array:
  """`ct[group[k]]` for every member k (zero where `group[k]` is S): the
  transpose of `fold` add with respect to its members.

  Its own transpose is `fold` add again, over the same segments in the same
  order, so that a reverse pass over a reverse pass sums each segment's
  member cotangents in a fixed order, where the plain gather's transpose
  would be a float scatter-add over repeated indices (docs/design.md
  #scatter-reductions).
  """
  return spread_p.bind(*vary_alike(ct, order, start, count, group))


def _spread_impl(ct, order, start, count, group):
  del order, start, count
  return batched(_spread_read, group.ndim - 1)(ct, group)


def _spread_read(ct, group):
  return ct.at[group].get(mode="fill", fill_value=0)


def _spread_jvp(primals, tangents):
  return spread(*primals), spread(
    ad.instantiate_zeros(tangents[0]), *primals[1:]
  )


def _spread_transpose(cts, ct, order, start, count, group):
  if type(cts) is ad.Zero or not ad.is_undefined_primal(ct):
    return [None] * 5
  zeros = jnp.zeros(ct.aval.shape, ct.aval.dtype)
  return [fold(zeros, cts, order, start, count, group, op="add")] + [None] * 4


def _spread_batch(args, dims):
  _, moved = batch_in_front(args, dims)
  return spread(*moved), 0


spread_p.def_impl(_spread_impl)
spread_p.def_abstract_eval(
  lambda ct, order, *_: ct.update(shape=order.shape + ct.shape[order.ndim :])
)
mlir.register_lowering(spread_p, mlir.lower_fun(_spread_impl, False))
ad.primitive_jvps[spread_p] = _spread_jvp
ad.primitive_transposes[spread_p] = _spread_transpose
batching.primitive_batchers[spread_p] = _spread_batch


# --- segment layout --------------------------------------------------------


class Layout(NamedTuple):
  """The sorted order of the updates and its segments (all int or bool).

  Segments are runs of at most CHUNK consecutive updates of one target, in
  (target, position) order; `S = seg_start.shape[0]` is a static bound and
  unused segments have count 0. A target's first segment ("chunk 0") starts
  from data; the others start from their first update.
  """

  order: jax.Array  # (n,) sorted positions
  run_first: jax.Array  # (n,) sorted update starts its target's run
  run_last: jax.Array  # (n,)
  member_seg0: jax.Array  # (n,) the chunk-0 segment of its target
  seg_start: jax.Array  # (S,)
  seg_count: jax.Array  # (S,)
  seg_chunk0: jax.Array  # (S,) bool
  seg_target: jax.Array  # (S,) slots for dropped updates and unused segments
  seg_run: jax.Array  # (S,) updates of the target (chunk-0 segments)
  seg_first: jax.Array  # (S,) segment whose chunk 0 this segment extends
  seg_next: jax.Array  # (S,) a chunk 0's next chunk (ids run on from there)
  member_seg: jax.Array  # (n,) segment consuming the sorted update in a fold
  position_seg: jax.Array  # (n,) the same, by position (unsorted)


def layout(
  target: jax.Array, slots: int, test_ascending: bool = True
) -> Layout:
  """The segments of `target` (n,), where `slots` marks dropped updates.

  A chunk 0's segment is its run's id: its target where the `slots + 1`
  values fit the `n` segments, else the run's rank among the runs (a
  cumsum). A later chunk's is `groups + k // CHUNK` for its sorted start k,
  distinct because two later chunks' starts are exactly CHUNK apart in one
  run and more than CHUNK apart in two. Few operations, each compiled on
  its own by XLA:CPU (a scan alone about 0.25 s: docs/design.md#fold-cost).
  `test_ascending`: as in `_sort.sort_by_target`.
  """
  n = target.shape[0]
  i = lax.iota(jnp.int32, n)
  sorted_target, order = _sort.sort_by_target(target, slots, test_ascending)
  first = jnp.concatenate(
    [jnp.ones((1,), bool), sorted_target[1:] != sorted_target[:-1]]
  )
  last = jnp.concatenate([first[1:], jnp.ones((1,), bool)])
  # Of symbolic sizes: the smaller, and run ranks (right for every size).
  groups = min_dim(n, slots + 1)
  if provable(operator.eq, groups, slots + 1):
    run = sorted_target.astype(jnp.int32)
  else:
    run = jnp.cumsum(first, dtype=jnp.int32) - 1
  run_start = (
    jnp.zeros((groups,), jnp.int32)
    .at[jnp.where(first, run, groups)]
    .set(i, mode="drop", unique_indices=True, wrap_negative_indices=False)
    .at[run]
    .get(mode="promise_in_bounds")
  )
  run_count = (
    jnp.zeros((groups,), jnp.int32).at[run].add(1, mode="promise_in_bounds")
  )
  rank = i - run_start
  starts = rank % CHUNK == 0
  seg = jnp.where(rank < CHUNK, run, groups + (i - rank % CHUNK) // CHUNK)
  s = groups + n // CHUNK + 1
  iota_s = lax.iota(jnp.int32, s)
  seg_start = (
    (n + iota_s)
    .at[jnp.where(starts, seg, s + i)]
    .set(i, mode="drop", unique_indices=True, wrap_negative_indices=False)
  )
  seg_count = (
    jnp.zeros((s,), jnp.int32).at[seg].add(1, mode="promise_in_bounds")
  )
  at_start = jnp.minimum(seg_start, n - 1)
  used = seg_count > 0
  seg_rank, seg_first = (
    jnp.stack([rank, run], 1).at[at_start].get(mode="promise_in_bounds").T
  )
  run_len = run_count.at[seg_first].get(mode="promise_in_bounds")
  seg_chunk0 = used & (seg_rank == 0)
  seg_target = jnp.where(
    used, sorted_target.at[at_start].get(mode="promise_in_bounds"), slots
  )
  # In a fold a later chunk's first update is its init, not a member.
  member_seg = jnp.where(starts & (rank > 0), s, seg)
  position_seg = member_seg.at[order].set(
    member_seg, mode="promise_in_bounds", unique_indices=True
  )
  return Layout(
    order=order,
    run_first=first,
    run_last=last,
    member_seg0=run,
    seg_start=seg_start,
    seg_count=seg_count,
    seg_chunk0=seg_chunk0,
    seg_target=seg_target,
    seg_run=jnp.where(seg_chunk0, run_len, 0),
    seg_first=seg_first,
    seg_next=groups + (seg_start + CHUNK) // CHUNK,
    member_seg=member_seg,
    position_seg=position_seg,
  )


def serial_fold(
  init, members, lay: Layout, op: str, *, presorted: bool = False
) -> jax.Array:
  """Per segment (S, R): its target's fold when it is a chunk-0 segment.

  `init` (S, R) is read at chunk-0 segments; `members` (n, R) are the
  updates by position, or in sorted order when `presorted`.
  """
  s, n = lay.seg_start.shape[0], members.shape[0]
  if presorted:
    order, group = lax.iota(jnp.int32, n), lay.member_seg
  else:
    order, group = lay.order, lay.position_seg
  # A symbolic n may pass CHUNK: the chunked fold, the same for every run
  # of at most CHUNK.
  if provable(operator.le, n, CHUNK):
    # No run is longer than a chunk: every segment is its target's chunk 0.
    return fold(
      init, members, order, lay.seg_start, lay.seg_count, group, op=op
    )
  later = ~lay.seg_chunk0
  shift = later.astype(jnp.int32)
  head = order.at[lay.seg_start].get(
    mode="fill", fill_value=n, unique_indices=True
  )
  heads = members.at[head].get(mode="fill", fill_value=0, unique_indices=True)
  init1 = jnp.where(later[:, None], heads, init)
  partial = fold(
    init1,
    members,
    order,
    jnp.minimum(lay.seg_start + shift, n),
    lay.seg_count - shift,
    group,
    op=op,
  )
  chunks = (lay.seg_run + CHUNK - 1) // CHUNK
  return fold(
    partial,
    partial,
    lax.iota(jnp.int32, s),
    lay.seg_next,
    jnp.where(lay.seg_chunk0, chunks - 1, 0),
    jnp.where(later & (lay.seg_count > 0), lay.seg_first, s),
    op=op,
  )


def _seg_scan(x, first, reverse=False):
  """Inclusive product scan of `x` (n, R) restarting where `first`."""

  def combine(a, b):
    (fa, va), (fb, vb) = a, b
    return fa | fb, jnp.where(fb, vb, va * vb)

  flags = jnp.broadcast_to(first[:, None], x.shape)
  if is_symbolic(x.shape[0]):
    return _tree_scan(combine, (flags, x), reverse)[1]
  return lax.associative_scan(combine, (flags, x), reverse=reverse)[1]


def _tree_scan(combine, elems, reverse):
  """`lax.associative_scan(combine, elems, reverse)` along axis 0 of a
  symbolic length (which it rejects), combining the same pairs in the
  same order, so every element has the same bits: in place, one level
  per loop iteration (O(n log n) work, where the recursion halves the
  array). The recursion pairs the elements `(i - d, i)`, `(i + 1) % 2d ==
  0`, for d = 1, 2, 4, ... while `2d <= n` (its level of stride d), then
  on the way back fills in `(i - d, i)` where `(i + 1) % 2d == d` and `i +
  1 >= 3d`, for d from the deepest level down to 1. A while loop (its
  length is known at run time only): no reverse-mode derivative of it."""
  if reverse:
    elems = tuple(lax.rev(x, (0,)) for x in elems)
  n = elems[0].shape[0]
  end = lax.convert_element_type(jnp.asarray(n), jnp.int32)
  i = lax.iota(jnp.int32, n) + 1  # (i + 1) of the docstring

  def level(d, elems, pick):
    partner = jnp.maximum(i - 1 - d, 0)
    earlier = tuple(x.at[partner].get(mode="promise_in_bounds") for x in elems)
    combined = combine(earlier, elems)
    mask = pick[:, None]
    return tuple(jnp.where(mask, c, x) for c, x in zip(combined, elems))

  def up(state):
    d, elems = state
    return d * 2, level(d, elems, i % (2 * d) == 0)

  def down(state):
    d, elems = state
    return d // 2, level(d, elems, (i % (2 * d) == d) & (i >= 3 * d))

  one = jnp.int32(1)
  d, elems = lax.while_loop(lambda s: 2 * s[0] <= end, up, (one, elems))
  _, elems = lax.while_loop(lambda s: s[0] >= 1, down, (d // 2, elems))
  if reverse:
    elems = tuple(lax.rev(x, (0,)) for x in elems)
  return elems


@jax.custom_jvp
def serial_prod(init, members, lay: Layout) -> jax.Array:
  """`serial_fold` "mul" of `members` (n, R) in sorted order."""
  return serial_fold(init, members, lay, "mul", presorted=True)


@serial_prod.defjvp
def _serial_prod_jvp(primals, tangents):
  init, members, lay = primals
  init_dot, members_dot, _ = tangents
  out = serial_prod(init, members, lay)
  # d out / d x = the product of the others, with zeros (no division).
  one = jnp.ones((1,) + members.shape[1:], members.dtype)
  prefix = _seg_scan(members, lay.run_first)
  suffix = _seg_scan(members, lay.run_last, reverse=True)
  before = jnp.where(
    lay.run_first[:, None], one, jnp.concatenate([one, prefix[:-1]])
  )
  after = jnp.where(
    lay.run_last[:, None], one, jnp.concatenate([suffix[1:], one])
  )
  # Each member's target's init; a spread, so that reverse over reverse
  # sums the members' cotangents per target in a fixed order.
  init_of = spread(
    init,
    lax.iota(jnp.int32, members.shape[0]),
    lay.seg_start,
    lay.seg_run,
    lay.member_seg0,
  )
  others = init_of * before * after
  # The product of a chunk-0 segment's target's updates: its run's suffix.
  all_members = suffix.at[lay.seg_start].get(mode="fill", fill_value=1)
  tangent = serial_fold(
    all_members * init_dot, others * members_dot, lay, "add", presorted=True
  )
  return out, tangent
