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

That is the constructed path of every platform. On CPU (`serial=True`,
chosen by `jaxops._order`) the float folds are XLA's serial scatter-add or
-multiply and float min/max XLA:CPU's own scatter max/min (its combiner is
IEEE's maximum/minimum) with a pass that gives a NaN its bits.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxops import _duplicates, _fold
from jaxops._bits import bits_dtype, moved_as_bits
from jaxops._common import is_symbolic, op_error
from jaxops._export import is_int
from jaxops._quotient import quotient
from jaxops._scatter import at_rows

NEUTRAL_ADD = ("sum", "sub", "mean")


def neutral(reduction: str, dtype: Any) -> Any:
  """The value every targeted slot starts from when use_init_val=False."""
  dtype = np.dtype(dtype)
  # 0 and 1 as the dtype converts them: float8_e8m0fnu has no zero (NaN).
  if reduction in NEUTRAL_ADD:
    return np.asarray(0).astype(dtype)
  if reduction == "prod":
    return np.asarray(1).astype(dtype)
  info = (
    jnp.iinfo(dtype)
    if jnp.issubdtype(dtype, jnp.integer)
    else jnp.finfo(dtype)
    if dtype != np.bool_
    else None
  )
  if info is None:
    return np.asarray(reduction == "min")
  return np.asarray(info.max if reduction == "min" else info.min, dtype)


# --- min and max on a total order ------------------------------------------


def _bits_type(dtype) -> np.dtype:
  """The signed int type of a float's width (int4 for the 4-bit floats)."""
  return np.dtype(jnp.dtype(f"int{jnp.finfo(dtype).bits}"))


def _as_bits(x: jax.Array) -> jax.Array:
  """The bits of floats `x`, as `_bits_type`."""
  return lax.bitcast_convert_type(x, _bits_type(x.dtype))


def _key_dtype(dtype):
  """The keys' int type: the float's width, at least 16 bits. The keys of
  NaN are the type's extremes, which no number may share: the 8- and 4-bit
  floats use their extreme patterns for numbers (float8_e4m3fnuz's 0x7F is
  240), so their keys are widened."""
  return np.dtype(jnp.dtype(f"int{max(16, jnp.finfo(dtype).bits)}"))


def _signless(dtype) -> bool:
  """Floats without a sign bit (float8_e8m0fnu): their bits order as
  unsigned ints."""
  return float(jnp.finfo(dtype).min) > 0  # compared as the dtype, 0 is NaN


def _order_bits(bits: jax.Array, signless: bool) -> jax.Array:
  """Sign-magnitude bits to ints ordered as the floats, -0 < +0, and back
  (the map is its own inverse); bits of a signless float: the top bit
  flipped, unsigned order as signed."""
  info = jnp.iinfo(bits.dtype)
  if signless:
    return bits ^ np.asarray(info.min, bits.dtype)
  return bits ^ ((bits >> (info.bits - 1)) & np.asarray(info.max, bits.dtype))


def to_key(x: jax.Array, is_max: bool) -> jax.Array:
  """An integer key ordered as the floats, -0 < +0, NaN above everything for
  max and below for min (so it wins, i.e. propagates)."""
  kd = _key_dtype(x.dtype)
  key = _order_bits(_as_bits(x), _signless(x.dtype)).astype(kd)
  nan = np.iinfo(kd).max if is_max else np.iinfo(kd).min
  return jnp.where(jnp.isnan(x), np.asarray(nan, kd), key)


def _canonical_nan(dtype) -> np.ndarray:
  """The bits, as `_bits_type`, of the float's NaN (a 4-bit float has none:
  then whatever NumPy converts NaN to, never selected)."""
  with np.errstate(invalid="ignore"):
    return np.asarray(np.nan).astype(dtype).view(_bits_type(dtype))


def from_key(key: jax.Array, dtype: Any) -> jax.Array:
  """The bits, as `_bits_type(dtype)`, of the float a key orders: NaN keys
  give the canonical NaN. Bits, so that selecting among them moves no
  float (XLA:CPU selects bfloat16 through float32, which drops NaN
  payloads)."""
  info = np.iinfo(key.dtype)
  nan = (key == info.max) | (key == info.min)
  bits = _order_bits(key.astype(_bits_type(dtype)), _signless(dtype))
  return jnp.where(nan, _canonical_nan(dtype), bits)


_COMBINERS = {"sum": "add", "sub": "add", "mean": "add", "prod": "multiply"}


def _scatter_combine(data, target, updates, reduction):
  """`data.at[target].<op>(updates)`: an order-independent integer combiner."""
  return at_rows(data, target, updates, _COMBINERS.get(reduction, reduction))


def _float_minmax_primal(data, target, updates, is_max, use_init_val):
  slots = data.shape[0]
  key = to_key(data, is_max)
  if not use_init_val:
    hit = targeted(target, slots)
    start = to_key(
      jnp.asarray(neutral("max" if is_max else "min", data.dtype)), is_max
    )
    key = jnp.where(hit[:, None], start, key)
  reduction = "max" if is_max else "min"
  out = _scatter_combine(key, target, to_key(updates, is_max), reduction)
  return out


def _kept(key, data, target, is_max, use_init_val):
  """The floats of `key`, with data's own bits where the result is data's
  element: every slot no update reaches, and with use_init_val a slot data
  wins (its NaN keeps payload and sign). A NaN from an update is the
  canonical NaN (docs/semantics.md#reduction-minmax)."""
  if use_init_val:
    kept = key == to_key(data, is_max)
  else:
    kept = ~targeted(target, data.shape[0])[:, None]
  bits = jnp.where(kept, _as_bits(data), from_key(key, data.dtype))
  return lax.bitcast_convert_type(bits, data.dtype)


def _native_minmax(data, target, updates, is_max, use_init_val):
  """XLA:CPU's own float scatter max/min, whose combiner is IEEE 754-2019's
  maximum/minimum (-0 < +0, NaN propagates): the total order's result up
  to a NaN's bits, which one pass over the output sets -- data's own where
  no update reaches the slot or data's NaN wins, else the canonical NaN. No
  key of the n updates is built (tests/test_scatter_order.py trips the day
  XLA:CPU's max changes)."""
  reduction = "max" if is_max else "min"
  if use_init_val:
    start = data
  else:
    hit = targeted(target, data.shape[0])[:, None]
    start = jnp.where(hit, neutral(reduction, data.dtype), data)
  out = _scatter_combine(start, target, updates, reduction)
  own = jnp.isnan(data) if use_init_val else ~hit
  canonical = _canonical_nan(data.dtype)
  # Selected as bits, as in `from_key`: XLA:CPU selects bfloat16 through
  # float32, which drops NaN payloads.
  bits = jnp.where(
    own, _as_bits(data), jnp.where(jnp.isnan(out), canonical, _as_bits(out))
  )
  return lax.bitcast_convert_type(bits, data.dtype)


def _minmax(data, target, updates, is_max, use_init_val, serial):
  if serial:
    return _native_minmax(data, target, updates, is_max, use_init_val)
  key = _float_minmax_primal(data, target, updates, is_max, use_init_val)
  return _kept(key, data, target, is_max, use_init_val)


_minmax = jax.custom_jvp(_minmax, nondiff_argnums=(3, 4, 5))


@_minmax.defjvp
def _minmax_jvp(is_max, use_init_val, serial, primals, tangents):
  data, target, updates = primals
  data_dot, _, updates_dot = tangents
  slots, r = data.shape
  n = updates.shape[0]
  # The output through `_minmax` itself, so that a derivative of this rule
  # (jvp of jvp, hessian) differentiates it with this rule again; computed
  # here as integer keys, it would be a constant to them.
  out = _minmax(data, target, updates, is_max, use_init_val, serial)
  key = to_key(out, is_max)
  # The winner of each element: data when it equals the result (ties go to
  # data), else the first update in index order that equals it.
  won = to_key(updates, is_max) == key.at[target].get(mode="fill", fill_value=0)
  position = lax.broadcasted_iota(jnp.int32, (n, r), 0)
  winner = at_rows(
    jnp.full((slots, r), n, jnp.int32),
    target,
    jnp.where(won, position, n),
    "min",
  )
  if use_init_val:
    winner = jnp.where(to_key(data, is_max) == key, n, winner)
    keep = data_dot
  else:
    keep = jnp.where(targeted(target, slots)[:, None], 0, data_dot)
  flat = winner * r + lax.broadcasted_iota(jnp.int32, (slots, r), 1)
  picked = (
    updates_dot.reshape(-1)
    .at[jnp.where(winner < n, flat, n * r)]
    .get(mode="fill", fill_value=0, unique_indices=True)
  )
  return out, jnp.where(winner < n, picked, keep)


# --- the engine ------------------------------------------------------------


def narrowed(target: jax.Array, slots: Any) -> jax.Array:
  """`target`, values in [0, slots], in the narrowest signed int type that
  holds `slots` (int8, int16, or its own). A scatter reads one index per
  update, and with one-element rows the indices are half of what it reads:
  1M int32 targets into 64 slots are 4 MB beside 4 MB of updates, int8 ones
  1 MB. The conversion fuses into the loop that computes the targets
  (docs/design.md#narrow-targets)."""
  if not is_int(slots):
    return target
  for dtype in (np.dtype(np.int8), np.dtype(np.int16)):
    if slots <= np.iinfo(dtype).max:
      narrower = dtype.itemsize < target.dtype.itemsize
      return target.astype(dtype) if narrower else target
  return target


def targeted(target, slots):
  hit = at_rows(jnp.zeros((slots,), jnp.uint8), target, np.uint8(1), "max")
  return hit.astype(bool)


def _counts(target, slots, dtype):
  return at_rows(jnp.zeros((slots,), dtype), target, 1, "add")


def _bool(data, target, updates, reduction):
  """OR, XOR, AND as uint8 max, sum mod 2, min."""
  combiner = {"sum": "max", "max": "max", "prod": "min", "min": "min"}
  d, u = data.astype(jnp.uint8), updates.astype(jnp.uint8)
  if reduction == "sub":
    return (_scatter_combine(d, target, u, "sum") & 1).astype(bool)
  return _scatter_combine(d, target, u, combiner[reduction]).astype(bool)


def _int_mean(data, target, updates, use_init_val):
  """floor((data + sum) / count) exactly for every count: each value is
  split as q * c + r with 0 <= r < c, the q summed with wrap-around (the
  mean fits), the r in the widest unsigned type. Their sum reaches about
  c * c, so where n updates could overflow that type the r are summed in
  digits of `width` bits (c * 2**width < 2**bits: no digit sum overflows),
  one scatter-add of all digits, and `_divide_digits` divides the digit
  sums by c. One digit, today's single scatter-add, up to 65,535 updates
  in x32 mode and about 2**32 in x64 (docs/semantics.md#reduction-mean)."""
  slots = data.shape[0]
  most = updates.shape[0] + int(use_init_val)  # The largest count c.
  work = np.dtype(data.dtype if data.dtype.itemsize >= 4 else np.int32)
  if most > jnp.iinfo(work).max:
    work = np.dtype(np.int64)  # x64 only: x32 counts fit int32.
  wide = jax.dtypes.canonicalize_dtype(np.uint64)
  bits = np.iinfo(wide).bits
  width = bits - most.bit_length()  # c * 2**width < 2**bits
  digits = max(1, -(-(most - 1).bit_length() // width))
  count = _counts(target, slots, _duplicates.int_dtype_for(most))
  count = count[:, None] + int(use_init_val)
  c = jnp.maximum(count, 1).astype(work)
  c_of = c.at[target].get(mode="fill", fill_value=1)

  def split(x, c):
    x = x.astype(work)
    q = jnp.floor_divide(x, c)
    r = (x - q * c).astype(wide)
    if digits > 1:
      mask = wide.type((1 << width) - 1)
      r = jnp.stack(
        [(r >> wide.type(width * j)) & mask for j in range(digits)], -1
      )
    return q, r

  q_u, r_u = split(updates, c_of)
  if use_init_val:
    q, rem = split(data, c)
  else:
    q = jnp.zeros(data.shape, work)
    rem = jnp.zeros((slots,) + r_u.shape[1:], wide)
  q = _scatter_combine(q, target, q_u, "sum")
  rem = _scatter_combine(rem, target, r_u, "sum")
  if digits > 1:
    rem = _divide_digits(rem, c.astype(wide), width)
  else:
    rem = rem // c.astype(wide)
  mean = q + rem.astype(work)
  return jnp.where(count > int(use_init_val), mean.astype(data.dtype), data)


def _divide_digits(sums, c, width):
  """floor(sum_j sums[..., j] * 2**(width * j) / c) for digit sums below
  c * 2**width <= 2**bits whose value is below c * c (at most c remainders
  below c): a long division from the top digit in which nothing exceeds
  the unsigned type for c < 2**(bits - 1), the quotient included (< c)."""
  wide = sums.dtype.type
  quotient = sums[..., -1] // c
  carry = sums[..., -1] % c
  for j in reversed(range(sums.shape[-1] - 1)):
    digit, shifted = sums[..., j], carry << wide(width)
    rest = shifted % c + digit % c  # < 2c
    over = rest >= c
    quotient = (quotient << wide(width)) + (
      shifted // c + digit // c + over.astype(sums.dtype)
    )
    carry = jnp.where(over, rest - c, rest)
  return quotient


def _write(data, lay_target, rows, keep):
  """data with `rows` written at the `keep` entries of `lay_target`."""
  slots, s = data.shape[0], lay_target.shape[0]
  dtype = _duplicates.int_dtype_for(slots + s)
  # Past the end; before the start where a size is symbolic (`slots + i`
  # may pass the index type: `_duplicates.int_dtype_for`).
  away = lax.iota(dtype, s)
  away = -1 - away if is_symbolic(slots + s) else slots + away
  index = jnp.where(keep, lay_target.astype(dtype), away)
  return at_rows(data, index, rows, "set", unique_indices=True)


def _apply(reduction, acc, rows):
  if reduction in ("sum", "mean"):
    return acc + rows
  if reduction == "sub":
    return acc - rows
  return acc * rows


def folds(dtype: Any, reduction: str) -> bool:
  """Whether `reduce_rows` folds in serial order (sorts) for repeats: float
  and complex sum, sub, prod and mean."""
  return reduction in ("sum", "sub", "prod", "mean") and jnp.issubdtype(
    dtype, jnp.inexact
  )


def has_serial(dtype: Any, reduction: str, unique_indices: bool) -> bool:
  """Whether `reduce_rows(serial=True)` differs from the constructed form,
  so that callers switch between them by platform (`jaxops._order`): the
  folds with repeated targets, and float min/max (XLA:CPU's float max
  instead of the integer key)."""
  if reduction in ("min", "max"):
    return jnp.issubdtype(dtype, jnp.floating)
  return folds(dtype, reduction) and not unique_indices


# Jitted so that an eager call compiles and dispatches once, not op by op
# (the layout alone is a few dozen operations), and computes what the same
# call computes under an outer jit; there it is a call that XLA inlines.
@functools.partial(
  jax.jit,
  static_argnames=(
    "reduction",
    "use_init_val",
    "unique_indices",
    "test_ascending",
    "serial",
  ),
)
def reduce_rows(
  data: jax.Array,
  target: jax.Array,
  updates: jax.Array,
  reduction: str,
  use_init_val: bool = True,
  unique_indices: bool = False,
  test_ascending: bool = True,
  serial: bool = False,
) -> jax.Array:
  """`data` (slots, R) with `updates` (n, R) reduced in at `target` (n,).

  `updates` may come in any shape of n * R elements, the rows in row-major
  order: reshaped here, inside the call, not by the caller, XLA:CPU reads
  them where they are (reshaped across the call, it copied them:
  docs/design.md#canonical-scatter).

  `target` is a signed int array of values in [0, slots]; the value
  `slots` drops the update. `test_ascending=False` sorts without first
  testing whether the targets ascend (docs/design.md#presorted).
  `serial=True` reduces float repeats with XLA's scatter, in index order on
  CPU only (`jaxops._order`), instead of the sorted fold, and float min/max
  with XLA:CPU's float max instead of the integer key. Returns (slots, R).
  """
  slots, r = data.shape
  n = target.shape[0]
  dtype = data.dtype
  updates = updates.reshape((n, r))
  if n == 0 or slots == 0:
    return data
  target = narrowed(target, slots)
  if dtype == np.bool_:
    if not use_init_val:
      data = jnp.where(
        targeted(target, slots)[:, None], neutral(reduction, dtype), data
      )
    return _bool(data, target, updates, reduction)
  integer = jnp.issubdtype(dtype, jnp.integer)
  if integer and reduction == "mean":
    return _int_mean(data, target, updates, use_init_val)
  if reduction in ("min", "max") and not integer:
    return _minmax(
      data, target, updates, reduction == "max", use_init_val, serial
    )
  if integer:
    if not use_init_val:
      data = jnp.where(
        targeted(target, slots)[:, None], neutral(reduction, dtype), data
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
    out = _write(data, target, rows, valid)
  elif serial:
    out = _serial(data, target, updates, reduction, use_init_val)
  else:
    out = _folded(
      data, target, updates, reduction, use_init_val, test_ascending
    )
  if bits_dtype(dtype) is None:
    return out
  return _untouched_keep_bits(out, data, targeted(target, slots)[:, None])


def _untouched_keep_bits(out, data, touched):
  """`out`, with data's own bits in the rows no update touched, where `out`
  equals data as a value but not always as bits: XLA:CPU scatters floats
  narrower than float32 through float32, which drops NaN payloads."""
  return moved_as_bits(_select_rows, touched, out, data)


def _select_rows(touched, out, data):
  return jnp.where(touched, out, data)


def _serial(data, target, updates, reduction, use_init_val):
  """Float sum/sub/prod/mean by XLA's scatter: in index order on CPU."""
  slots = data.shape[0]
  dtype = data.dtype
  counted = reduction == "mean" or (
    reduction in NEUTRAL_ADD and not use_init_val
  )
  if counted and _counts_in_column(data, target, use_init_val):
    return _serial_counted(data, target, updates, reduction, use_init_val)
  if not use_init_val:
    hit = targeted(target, slots)[:, None]
    data = jnp.where(hit, neutral(reduction, dtype), data)
  if reduction == "prod":
    return _serial_prod(data, target, updates)
  if reduction == "sub":
    updates = -updates
  out = at_rows(data, target, updates, "add")
  if reduction != "mean":
    return out
  count = _counts(target, slots, _duplicates.int_dtype_for(target.shape[0]))
  count = count[:, None]
  # At least 1: an untargeted slot's quotient is not taken, but its
  # derivative would be (0 / 0).
  divisor = jnp.maximum(count + int(use_init_val), 1).astype(dtype)
  return jnp.where(count > 0, quotient(out, divisor), data)


def _counts_in_column(data, target, use_init_val):
  """Whether counts can ride in a column beside one-element rows: float32
  or float64 data (XLA:CPU scatters narrower floats through float32) and
  every count, up to n + 1, an integer the dtype holds exactly."""
  n, tail = target.shape[0], data.shape[1:]
  return (
    np.dtype(data.dtype) in (np.dtype(np.float32), np.dtype(np.float64))
    and tail == (1,)
    and is_int(n)
    and n + int(use_init_val) <= 2 ** (jnp.finfo(data.dtype).nmant + 1)
  )


def _serial_counted(data, target, updates, reduction, use_init_val):
  """A float mean, or a sum/sub without the initial value, of one-element
  rows in one scatter (`_sum_and_count`), which adds each row's updates in
  index order as `at_rows` does alone: the bits of the form with a scatter
  each for the sums, the counts and (without the initial value) the
  targeted rows. Without the initial value the sums start from 0, the
  neutral element (`neutral`), and the rows no update targets keep data."""
  if reduction == "sub":
    updates = -updates
  start = data if use_init_val else jnp.zeros_like(data)
  total, count = _sum_and_count(start, target, updates)
  if reduction == "mean":
    total = quotient(total, jnp.maximum(count + int(use_init_val), 1))
  return jnp.where(count > 0, total, data)


@jax.custom_jvp
def _sum_and_count(data, target, updates):
  """(`at_rows(data, target, updates, "add")`, the number of updates each
  row got, in data's float dtype) for data (slots, 1): one scatter of
  (update, 1) pairs into (data, 0) rows, where two scatters would read the
  targets twice (docs/design.md#one-scatter-mean)."""
  slots, n = data.shape[0], target.shape[0]
  pairs = jnp.concatenate([updates, jnp.ones((n, 1), updates.dtype)], 1)
  start = jnp.concatenate([data, jnp.zeros((slots, 1), data.dtype)], 1)
  both = at_rows(start, target, pairs, "add")
  return both[:, :1], both[:, 1:]


@_sum_and_count.defjvp
def _sum_and_count_jvp(primals, tangents):
  # Differentiated, the counts scatter apart, as ints: the backward needs
  # only them, and XLA:CPU runs the gather of the cotangents beside the
  # sums' scatter (docs/design.md#one-scatter-mean). The sums' tangent
  # scatters alone, so that its transpose gathers the sums' cotangent only;
  # the counts are constant.
  data, target, updates = primals
  data_dot, _, updates_dot = tangents
  total = at_rows(data, target, updates, "add")
  ints = _duplicates.int_dtype_for(target.shape[0])
  count = _counts(target, data.shape[0], ints)[:, None].astype(data.dtype)
  total_dot = at_rows(data_dot, target, updates_dot, "add")
  return (total, count), (total_dot, jnp.zeros_like(count))


@jax.custom_jvp
def _serial_prod(data, target, updates):
  return at_rows(data, target, updates, "multiply")


@_serial_prod.defjvp
def _serial_prod_jvp(primals, tangents):
  # JAX has no derivative of a multiply-scatter with repeated indices: the
  # tangent is the fold's (products of the others from sorted scans).
  data, target, updates = primals
  data_dot, _, updates_dot = tangents
  fold = lambda d, u: _folded(d, target, u, "prod", True, True)
  _, tangent = jax.jvp(fold, (data, updates), (data_dot, updates_dot))
  return _serial_prod(data, target, updates), tangent


def _folded(data, target, updates, reduction, use_init_val, test_ascending):
  """Float sum/sub/prod/mean in serial order by construction: the sort and
  the fold (`jaxops._fold`)."""
  slots, r = data.shape
  dtype = data.dtype
  lay = _fold.layout(target, slots, test_ascending)
  if reduction == "sub":
    updates = -updates
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
    # Its derivative scans the products in sorted order.
    members = updates.at[lay.order].get(
      mode="promise_in_bounds", unique_indices=True
    )
    rows = _fold.serial_prod(init, members, lay)
  else:
    rows = _fold.serial_fold(init, updates, lay, "add")
  if reduction == "mean":
    count = jnp.maximum(lay.seg_run + int(use_init_val), 1).astype(dtype)
    rows = quotient(rows, count[:, None])
  return _write(data, lay.seg_target, rows, keep)


def transposes_by_gather(dtype: Any, reduction: str) -> bool:
  """Whether `reduce_rows` is a float sum or sub: linear in (data, updates),
  its transpose is `sum_transpose` (a gather), not the fold's."""
  return folds(dtype, reduction) and reduction in ("sum", "sub")


def sum_transpose(
  ct: jax.Array, target: jax.Array, reduction: str
) -> tuple[jax.Array, jax.Array]:
  """The cotangents (data (slots, R), updates (n, R)) of `reduce_rows` sum
  or sub given the output's `ct` (slots, R) and its `target` (n,): data's
  is `ct`; an update's is its target's row (0 where dropped), negated for
  sub."""
  target = narrowed(target, ct.shape[0])
  picked = ct.at[target].get(mode="fill", fill_value=0)
  return ct, -picked if reduction == "sub" else picked


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
