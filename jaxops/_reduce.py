"""Scatter reductions, deterministic by construction: the one engine of
ScatterNDUpdate-15 and ScatterElementsUpdate-12.

Both operators reduce n update rows into target slots of data viewed as
`(slots, R)`: a ScatterNDUpdate row is a slice `data.shape[k:]`, a
ScatterElementsUpdate row one element (R = 1) with a linear target per
element. `reduce_rows(data, target, updates, reduction, use_init_val)` takes
the linear targets (`slots` marks a dropped update) and returns data with
`out[t] = f(out[t], updates[i])` applied in increasing i
(docs/semantics.md#scatter-reductions).

No scatter here depends on the order in which XLA applies repeated indices
(docs/design.md#scatter-reductions):

* integer and bool data, and float `min`/`max` (on a total-order integer key
  of the float): one scatter with an order-independent integer combiner
  (add, multiply, min, max; bool or/and as uint8 max/min, xor as a sum mod 2);
* float and complex `sum`/`sub`/`prod`/`mean` with repeated targets: a stable
  sort of the positions by target, then `fold_p`, a loop over ranks that adds
  the j-th update of every target at step j (a gather of one row per target),
  and one unique-indices write. This is the serial index order exactly for
  targets with at most `CHUNK` updates; beyond, each target's updates fold in
  consecutive chunks of `CHUNK` (the first starting from data) and the chunk
  results fold in order;
* `none` and every final write: `unique_indices=True`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from jaxops import _duplicates
from jaxops._common import op_error

# Updates per target folded in serial order; longer runs fold in chunks of
# this many (docs/design.md#scatter-reductions).
CHUNK = 1024

NEUTRAL_ADD = ("sum", "sub", "mean")


def neutral(reduction: str, dtype: Any) -> Any:
  """The value every targeted slot starts from when use_init_val=False."""
  dtype = np.dtype(dtype)
  if reduction in NEUTRAL_ADD:
    return np.zeros((), dtype)
  if reduction == "prod":
    return np.ones((), dtype)
  info = (
    np.iinfo(dtype)
    if np.issubdtype(dtype, np.integer)
    else jnp.finfo(dtype)
    if dtype != np.bool_
    else None
  )
  if info is None:
    return np.asarray(reduction == "min")
  return np.asarray(info.max if reduction == "min" else info.min, dtype)


# --- the serial fold ---------------------------------------------------------

fold_p = Primitive("jaxops_serial_fold")


def fold(init, members, start, count, group, *, op: str) -> jax.Array:
  """`out[s] = op(...op(op(init[s], members[start[s]]), ...),
  members[start[s] + count[s] - 1])` for every segment s, in that order.

  `init` (S, R), `members` (m, R), `start`/`count` (S,) int32, `group` (m,)
  int32: the segment that consumes each member, or S for none (used by the
  transpose). op "add" is linear in (init, members); "mul" has no derivative
  rule (`prod` differentiates around it).
  """
  return fold_p.bind(init, members, start, count, group, op=op)


def _fold_impl(init, members, start, count, group, *, op):
  del group
  m = members.shape[0]
  if m == 0 or init.shape[0] == 0:
    return init
  combine = lax.add if op == "add" else lax.mul
  steps = jnp.max(count)

  def body(state):
    j, acc = state
    rows = members.at[jnp.minimum(start + j, m - 1)].get(
      mode="promise_in_bounds"
    )
    live = (j < count)[:, None]
    return j + 1, jnp.where(live, combine(acc, rows), acc)

  return lax.while_loop(
    lambda state: state[0] < steps, body, (jnp.int32(0), init)
  )[1]


def _fold_jvp(primals, tangents, *, op):
  if op != "add":
    raise NotImplementedError("fold 'mul' is differentiated by its caller")
  init, members, start, count, group = primals
  init_dot, members_dot = (
    ad.instantiate_zeros(t) if type(t) is ad.Zero else t for t in tangents[:2]
  )
  out = fold(*primals, op=op)
  return out, fold(init_dot, members_dot, start, count, group, op=op)


def _fold_transpose(ct, init, members, start, count, group, *, op):
  del op
  if type(ct) is ad.Zero:
    return [None] * 5
  init_ct = ct if ad.is_undefined_primal(init) else None
  members_ct = None
  if ad.is_undefined_primal(members):
    # Each member is consumed by at most one segment: a unique gather.
    members_ct = ct.at[group].get(
      mode="fill", fill_value=0, unique_indices=False
    )
  return [init_ct, members_ct, None, None, None]


def _fold_batch(args, dims, *, op):
  size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
  init, members, start, count, group = (
    jnp.moveaxis(x, d, 0) if d is not None else lax.broadcast(x, (size,))
    for x, d in zip(args, dims)
  )
  s, m = init.shape[1], members.shape[1]
  batch = lax.broadcasted_iota(jnp.int32, (size, 1), 0)
  start = (start + batch * m).reshape(-1)
  group = jnp.where(group < s, group + batch * s, size * s).reshape(-1)
  out = fold(
    init.reshape((size * s,) + init.shape[2:]),
    members.reshape((size * m,) + members.shape[2:]),
    start,
    count.reshape(-1),
    group,
    op=op,
  )
  return out.reshape((size, s) + out.shape[1:]), 0


fold_p.def_impl(_fold_impl)
fold_p.def_abstract_eval(lambda init, *_, **__: init)
mlir.register_lowering(fold_p, mlir.lower_fun(_fold_impl, False))
ad.primitive_jvps[fold_p] = _fold_jvp
ad.primitive_transposes[fold_p] = _fold_transpose
batching.primitive_batchers[fold_p] = _fold_batch


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
  member_seg: jax.Array  # (n,) segment consuming the sorted update in a fold


def layout(target: jax.Array, slots: int) -> Layout:
  """The segments of `target` (n,), where `slots` marks dropped updates."""
  n = target.shape[0]
  i = lax.iota(jnp.int32, n)
  sorted_target, order = lax.sort((target, i), num_keys=1, is_stable=True)
  first = jnp.concatenate(
    [jnp.ones((1,), bool), sorted_target[1:] != sorted_target[:-1]]
  )
  last = jnp.concatenate([first[1:], jnp.ones((1,), bool)])
  run_start = lax.cummax(jnp.where(first, i, 0))
  run_end = lax.cummin(jnp.where(last, i, n), reverse=True)
  rank = i - run_start
  starts = rank % CHUNK == 0
  seg = jnp.cumsum(starts, dtype=jnp.int32) - 1
  groups = min(n, slots + 1)
  s = min(n, groups + n // CHUNK + 1)
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
  seg_rank = rank.at[at_start].get(mode="promise_in_bounds")
  seg_chunk0 = used & (seg_rank == 0)
  seg_target = jnp.where(
    used, sorted_target.at[at_start].get(mode="promise_in_bounds"), slots
  )
  run_len = (run_end - run_start + 1).at[at_start].get(mode="promise_in_bounds")
  seg_first = iota_s - seg_rank // CHUNK
  # In a fold a later chunk's first update is its init, not a member.
  member_seg = jnp.where(starts & (rank > 0), s, seg)
  return Layout(
    order=order,
    run_first=first,
    run_last=last,
    member_seg0=seg.at[run_start].get(mode="promise_in_bounds"),
    seg_start=seg_start,
    seg_count=seg_count,
    seg_chunk0=seg_chunk0,
    seg_target=seg_target,
    seg_run=jnp.where(seg_chunk0, run_len, 0),
    seg_first=seg_first,
    member_seg=member_seg,
  )


def serial_fold(init, members, lay: Layout, op: str) -> jax.Array:
  """Per segment (S, R): its target's fold when it is a chunk-0 segment.

  `init` (S, R) is read at chunk-0 segments, `members` (n, R) are the updates
  in sorted order.
  """
  s, n = lay.seg_start.shape[0], members.shape[0]
  later = ~lay.seg_chunk0
  shift = later.astype(jnp.int32)
  heads = members.at[lay.seg_start].get(
    mode="fill", fill_value=0, unique_indices=True
  )
  init1 = jnp.where(later[:, None], heads, init)
  partial = fold(
    init1,
    members,
    jnp.minimum(lay.seg_start + shift, n),
    lay.seg_count - shift,
    lay.member_seg,
    op=op,
  )
  chunks = (lay.seg_run + CHUNK - 1) // CHUNK
  return fold(
    partial,
    partial,
    lax.iota(jnp.int32, s) + 1,
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
  return lax.associative_scan(combine, (flags, x), reverse=reverse)[1]


@jax.custom_jvp
def serial_prod(init, members, lay: Layout) -> jax.Array:
  return serial_fold(init, members, lay, "mul")


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
  init_of = init.at[lay.member_seg0].get(mode="promise_in_bounds")
  others = init_of * before * after
  # The product of a chunk-0 segment's target's updates: its run's suffix.
  all_members = suffix.at[lay.seg_start].get(mode="fill", fill_value=1)
  tangent = serial_fold(
    all_members * init_dot, others * members_dot, lay, "add"
  )
  return out, tangent


# --- min and max on a total order ------------------------------------------


def _key_dtype(dtype):
  return {2: jnp.int16, 4: jnp.int32, 8: jnp.int64}[np.dtype(dtype).itemsize]


def to_key(x: jax.Array, is_max: bool) -> jax.Array:
  """An integer key ordered as the floats, -0 < +0, NaN above everything for
  max and below for min (so it wins, i.e. propagates)."""
  kd = _key_dtype(x.dtype)
  info = np.iinfo(kd)
  bits = lax.bitcast_convert_type(x, kd)
  key = bits ^ ((bits >> (info.bits - 1)) & np.asarray(info.max, kd))
  nan = np.asarray(info.max if is_max else info.min, kd)
  return jnp.where(jnp.isnan(x), nan, key)


def from_key(key: jax.Array, dtype: Any) -> jax.Array:
  kd = key.dtype
  info = np.iinfo(kd)
  bits = key ^ ((key >> (info.bits - 1)) & np.asarray(info.max, kd))
  x = lax.bitcast_convert_type(bits, dtype)
  nan = (key == info.max) | (key == info.min)
  return jnp.where(nan, np.asarray(np.nan, dtype), x)


def _scatter_combine(data, target, updates, reduction):
  """`data.at[target].<op>(updates)`: an order-independent integer combiner."""
  ref = data.at[target]
  kwargs: dict[str, Any] = dict(mode="drop", wrap_negative_indices=False)
  if reduction in ("sum", "sub", "mean"):
    return ref.add(updates, **kwargs)
  if reduction == "prod":
    return ref.multiply(updates, **kwargs)
  if reduction == "min":
    return ref.min(updates, **kwargs)
  return ref.max(updates, **kwargs)


def _float_minmax_primal(data, target, updates, is_max, use_init_val):
  slots = data.shape[0]
  key = to_key(data, is_max)
  if not use_init_val:
    targeted = _targeted(target, slots)
    start = to_key(
      jnp.asarray(neutral("max" if is_max else "min", data.dtype)), is_max
    )
    key = jnp.where(targeted[:, None], start, key)
  reduction = "max" if is_max else "min"
  out = _scatter_combine(key, target, to_key(updates, is_max), reduction)
  return out


def _minmax(data, target, updates, is_max, use_init_val):
  return from_key(
    _float_minmax_primal(data, target, updates, is_max, use_init_val),
    data.dtype,
  )


_minmax = jax.custom_jvp(_minmax, nondiff_argnums=(3, 4))


@_minmax.defjvp
def _minmax_jvp(is_max, use_init_val, primals, tangents):
  data, target, updates = primals
  data_dot, _, updates_dot = tangents
  slots, r = data.shape
  n = updates.shape[0]
  key = _float_minmax_primal(data, target, updates, is_max, use_init_val)
  out = from_key(key, data.dtype)
  # The winner of each element: data when it equals the result (ties go to
  # data), else the first update in index order that equals it.
  won = to_key(updates, is_max) == key.at[target].get(mode="fill", fill_value=0)
  position = lax.broadcasted_iota(jnp.int32, (n, r), 0)
  winner = (
    jnp.full((slots, r), n, jnp.int32)
    .at[target]
    .min(jnp.where(won, position, n), mode="drop", wrap_negative_indices=False)
  )
  if use_init_val:
    winner = jnp.where(to_key(data, is_max) == key, n, winner)
    keep = data_dot
  else:
    keep = jnp.where(_targeted(target, slots)[:, None], 0, data_dot)
  flat = winner * r + lax.broadcasted_iota(jnp.int32, (slots, r), 1)
  picked = (
    updates_dot.reshape(-1)
    .at[jnp.where(winner < n, flat, n * r)]
    .get(mode="fill", fill_value=0, unique_indices=True)
  )
  return out, jnp.where(winner < n, picked, keep)


# --- the engine ------------------------------------------------------------


def _targeted(target, slots):
  return (
    jnp.zeros((slots,), jnp.uint8)
    .at[target]
    .max(np.uint8(1), mode="drop", wrap_negative_indices=False)
    .astype(bool)
  )


def _counts(target, slots):
  return (
    jnp.zeros((slots,), jnp.int32)
    .at[target]
    .add(1, mode="drop", wrap_negative_indices=False)
  )


def _bool(data, target, updates, reduction):
  """OR, XOR, AND as uint8 max, sum mod 2, min."""
  combiner = {"sum": "max", "max": "max", "prod": "min", "min": "min"}
  d, u = data.astype(jnp.uint8), updates.astype(jnp.uint8)
  if reduction == "sub":
    return (_scatter_combine(d, target, u, "sum") & 1).astype(bool)
  return _scatter_combine(d, target, u, combiner[reduction]).astype(bool)


def _int_mean(data, target, updates, use_init_val):
  """floor((data + sum) / count) exactly: each value is split as
  q * c + r with 0 <= r < c, the q summed with wrap-around (the mean fits),
  the r in the widest unsigned type (exact while c * c fits it)."""
  slots = data.shape[0]
  work = data.dtype if data.dtype.itemsize >= 4 else np.dtype(np.int32)
  wide = jax.dtypes.canonicalize_dtype(np.uint64)
  count = _counts(target, slots)[:, None] + int(use_init_val)
  c = jnp.maximum(count, 1).astype(work)
  c_of = c.at[target].get(mode="fill", fill_value=1)

  def split(x, c):
    x = x.astype(work)
    q = jnp.floor_divide(x, c)
    return q, (x - q * c).astype(wide)

  q_u, r_u = split(updates, c_of)
  if use_init_val:
    q, rem = split(data, c)
  else:
    q, rem = jnp.zeros(data.shape, work), jnp.zeros(data.shape, wide)
  q = _scatter_combine(q, target, q_u, "sum")
  rem = _scatter_combine(rem, target, r_u, "sum")
  mean = q + (rem // c.astype(wide)).astype(work)
  return jnp.where(count > int(use_init_val), mean.astype(data.dtype), data)


def _write(data, lay_target, rows, keep):
  """data with `rows` written at the `keep` entries of `lay_target`."""
  slots, s = data.shape[0], lay_target.shape[0]
  dtype = _duplicates.int_dtype_for(slots + s)
  index = jnp.where(keep, lay_target.astype(dtype), slots + lax.iota(dtype, s))
  return data.at[index].set(
    rows, mode="drop", unique_indices=True, wrap_negative_indices=False
  )


def _apply(reduction, acc, rows):
  if reduction in ("sum", "mean"):
    return acc + rows
  if reduction == "sub":
    return acc - rows
  return acc * rows


def reduce_rows(
  data: jax.Array,
  target: jax.Array,
  updates: jax.Array,
  reduction: str,
  use_init_val: bool = True,
  unique_indices: bool = False,
) -> jax.Array:
  """`data` (slots, R) with `updates` (n, R) reduced in at `target` (n,).

  `target` is a signed int array; the value `slots` (or any value out of
  [0, slots)) drops the update. Returns (slots, R).
  """
  slots, r = data.shape
  n = target.shape[0]
  dtype = data.dtype
  if n == 0 or slots == 0:
    return data
  if dtype == np.bool_:
    if not use_init_val:
      data = jnp.where(
        _targeted(target, slots)[:, None], neutral(reduction, dtype), data
      )
    return _bool(data, target, updates, reduction)
  integer = jnp.issubdtype(dtype, jnp.integer)
  if integer and reduction == "mean":
    return _int_mean(data, target, updates, use_init_val)
  if reduction in ("min", "max") and not integer:
    return _minmax(data, target, updates, reduction == "max", use_init_val)
  if integer:
    if not use_init_val:
      data = jnp.where(
        _targeted(target, slots)[:, None], neutral(reduction, dtype), data
      )
    if reduction == "sub":
      updates = -updates
    return _scatter_combine(data, target, updates, reduction)
  # Float and complex sum, sub, prod, mean.
  if unique_indices:
    valid = (target >= 0) & (target < slots)
    init = data.at[target].get(mode="fill", fill_value=0, unique_indices=True)
    if not use_init_val:
      init = jnp.broadcast_to(neutral(reduction, dtype), init.shape)
    rows = _apply(reduction, init, updates)
    if reduction == "mean":
      rows = rows / np.asarray(1 + int(use_init_val), dtype)
    return _write(data, target, rows, valid)
  lay = layout(target, slots)
  members = updates.at[lay.order].get(
    mode="promise_in_bounds", unique_indices=True
  )
  if reduction == "sub":
    members = -members
  keep = lay.seg_chunk0 & (lay.seg_target < slots)
  if use_init_val:
    init = data.at[jnp.where(keep, lay.seg_target, slots)].get(
      mode="fill", fill_value=0, unique_indices=True
    )
  else:
    init = jnp.broadcast_to(
      neutral(reduction, dtype), (lay.seg_start.shape[0], r)
    )
  if reduction == "prod":
    rows = serial_prod(init, members, lay)
  else:
    rows = serial_fold(init, members, lay, "add")
  if reduction == "mean":
    count = (lay.seg_run + int(use_init_val)).astype(dtype)
    rows = rows / jnp.maximum(count, np.ones((), dtype))[:, None]
  return _write(data, lay.seg_target, rows, keep)


def check_reduction(op: str, reduction: Any, allowed, dtype) -> str:
  """Validates the static `reduction` against `allowed` and data's dtype."""
  if not isinstance(reduction, str) or reduction not in allowed:
    raise op_error(op, f"reduction={reduction!r} must be one of {allowed}")
  if reduction == "mean" and np.dtype(dtype) == np.bool_:
    raise op_error(
      op, "reduction='mean' is not defined for bool data", TypeError
    )
  if reduction in ("min", "max") and jnp.issubdtype(dtype, jnp.complexfloating):
    raise op_error(
      op, f"reduction={reduction!r} is not defined for complex data", TypeError
    )
  return reduction
