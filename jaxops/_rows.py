"""`write_rows`: the row write that ScatterNDUpdate's default and
ScatterElementsUpdate's `none` end with, batched by flattening
(docs/design.md#batched-write).

`write_rows(data, rows, updates, serial)` is `data.at[rows].set(updates,
mode="drop")` on data viewed as rows. With `serial=False` the in-range rows
are unique (a winner search redirected the losers out of range) and the
write promises it. With `serial=True` rows may repeat and the write relies
on XLA:CPU applying the updates in index order, so that the last one wins:
it is only ever built for CPU (`jaxops._order`).

Under `vmap`, JAX's scatter batching rule writes with (batch, row) index
pairs; this primitive's rule writes the batch's rows as one array of
`batch * S` rows with one linear index each (a row out of its member's range
stays dropped, and each member's updates keep their order), which XLA:CPU
scatters about 1.4x as fast, that index computed once for the write and its
transpose. Linear in (data, updates), with its own jvp and
transpose: a zeroing write and a gather of the winners' cotangents; a serial
write finds its winners by the same serial rule, one scatter of the update
positions (the last one stays): for rows of one float32 or float64 element
as marks in the data cotangent's buffer, else into a table
(docs/design.md#serial-transpose).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from jaxops._bits import bits_dtype, moved_as_bits
from jaxops._common import (
  batch_in_front,
  float0_zeros,
  vary_alike,
)
from jaxops._duplicates import int_dtype_for
from jaxops._export import is_int
from jaxops._scatter import at_rows

write_rows_p = Primitive("jaxops_write_rows")


def write_rows(
  data: jax.Array, rows: jax.Array, updates: jax.Array, serial: bool = False
) -> jax.Array:
  """`data` (S, ...) with `updates` (n, ...) written at `rows` (n,), signed
  ints; rows out of [0, S) are dropped. In range, rows are unique unless
  `serial` (then the last update of a row wins, on CPU only)."""
  return write_rows_p.bind(*vary_alike(data, rows, updates), serial=serial)


def _write_impl(data, rows, updates, *, serial):
  # Floats narrower than float32 as their bits (a primitive's implementation:
  # no derivative is taken through the bitcasts), which XLA:CPU's scatter
  # keeps (docs/design.md#moved-as-bits).
  dtype, bits = data.dtype, bits_dtype(data.dtype)
  if bits is not None:
    data, updates = (lax.bitcast_convert_type(x, bits) for x in (data, updates))
  out = at_rows(data, rows, updates, "set", unique_indices=not serial)
  return out if bits is None else lax.bitcast_convert_type(out, dtype)


def _write_jvp(primals, tangents, *, serial):
  data, rows, updates = primals
  data_dot, _, updates_dot = tangents
  out = write_rows(data, rows, updates, serial)
  if not jnp.issubdtype(data.dtype, jnp.inexact):
    return out, float0_zeros(out.shape)
  tangent = write_rows(
    ad.instantiate_zeros(data_dot),
    rows,
    ad.instantiate_zeros(updates_dot),
    serial,
  )
  return out, tangent


def last_wins(rows: jax.Array, slots: int) -> jax.Array:
  """`rows` with every row but the last of its value redirected out of
  range (to -1): the winners of a serial write, found by the serial rule
  itself (one integer scatter of positions; XLA:CPU keeps the last)."""
  n = rows.shape[0]
  position = lax.iota(np.int32, n)
  table = at_rows(jnp.full((slots,), -1, np.int32), rows, position, "set")
  won = table.at[rows].get(mode="fill", fill_value=-1) == position
  return jnp.where(won, rows, np.asarray(-1, rows.dtype))


# The float dtypes whose cotangent rows can carry a serial write's marks:
# the int type of their bits, the smallest normal's bits (where the marks
# start) and the infinity's (which they stay below).
_MARK_BITS = {
  np.dtype(np.float32): (np.int32, 1 << 23, 0xFF << 23),
  np.dtype(np.float64): (np.int64, 1 << 52, 0x7FF << 52),
}


def _marks(n: Any, dtype: Any) -> jax.Array | None:
  """The update positions 0..n-1 as distinct positive normal floats of
  `dtype` (bits `smallest normal + position`), or None where `dtype` has
  none to spare (16-bit and complex floats) or n is symbolic or too big."""
  if np.dtype(dtype) not in _MARK_BITS or not is_int(n):
    return None
  ints, base, infinity = _MARK_BITS[np.dtype(dtype)]
  if base + n >= infinity:
    return None
  positions = lax.iota(ints, n) + np.asarray(base, ints)
  return lax.bitcast_convert_type(positions, dtype)


def _markable(shape: tuple[Any, ...]) -> bool:
  """Whether data of `shape` has rows of one element: there a table of one
  int per row is as large as data. Wider rows keep the table, a fraction of
  data (and a mark in one element of a row sharded along its trailing dims
  would gather that row's shards)."""
  return all(map(is_int, shape[1:])) and math.prod(shape[1:]) == 1


def _serial_winners(ct: jax.Array, rows: jax.Array):
  """The winners of a serial write (each row's last update; every other
  update redirected to -1), and the buffer the data cotangent clears their
  rows in. Where `ct` can carry marks (`_marks`), they are found as
  `last_wins` finds them but with each update's mark written into its row
  (of one element) of a copy of `ct`: the data cotangent's buffer anyway,
  so no table of `S` ints is allocated and filled (64 MB for elements
  written into `[4096, 4096]`; docs/design.md#serial-transpose). A mark is
  only ever moved, never computed with, and compared as bits; every marked
  row has a winner, whose row is then cleared."""
  shape = ct.shape
  marks = _marks(rows.shape[0], ct.dtype)
  if marks is None or not _markable(shape):
    return last_wins(rows, shape[0]), ct
  marked = at_rows(ct.reshape(-1), rows, marks, "set")
  found = marked.at[rows].get(
    mode="fill", fill_value=0, wrap_negative_indices=False
  )
  bits = np.dtype(f"int{8 * np.dtype(ct.dtype).itemsize}")
  won = lax.bitcast_convert_type(found, bits) == lax.bitcast_convert_type(
    marks, bits
  )
  winners = jnp.where(won, rows, np.asarray(-1, rows.dtype))
  return winners, marked.reshape(shape)


def _write_transpose(ct, data, rows, updates, *, serial):
  if type(ct) is ad.Zero:
    return [None, None, None]
  # An eager backward may hand over a NumPy cotangent, which has no `.at`.
  ct = jnp.asarray(ct)
  cleared = ct
  if serial:
    # The rows into a buffer of their own: XLA copies their wrap and
    # linearization into each gather below, which then ran 2.7x as long
    # (docs/design.md#serial-transpose).
    rows, cleared = _serial_winners(ct, _computed_once(rows))
  ct_data = ct_updates = None
  if ad.is_undefined_primal(data):
    zeros = jnp.zeros(updates.aval.shape, ct.dtype)
    ct_data = write_rows(cleared, rows, zeros)
  if ad.is_undefined_primal(updates):
    ct_updates = ct.at[rows].get(
      mode="fill",
      fill_value=0,
      unique_indices=True,
      wrap_negative_indices=False,
    )
  return [ct_data, None, ct_updates]


def _computed_once(index: jax.Array) -> jax.Array:
  """`index` (n,) through an identity gather, so that XLA computes it once
  into a buffer of its own. A chain of cheap element-wise ops (the tuples'
  wrap, range test and linearization, the batch offset) XLA copies into
  every consumer, here the write's scatter and each gather of its
  transpose; a gather it counts as expensive and does not copy
  (docs/design.md#batched-write)."""
  dtype = int_dtype_for(index.shape[0])
  if dtype is None:
    return index
  return index.at[lax.iota(dtype, index.shape[0])].get(
    mode="promise_in_bounds", indices_are_sorted=True, unique_indices=True
  )


def _write_batch(args, dims, *, serial):
  # An unbatched float narrower than float32 is broadcast as its bits: in
  # float XLA:CPU may convert it to float32 and back (moved_as_bits).
  size, (data, rows, updates) = batch_in_front(
    args,
    dims,
    lambda x, size: moved_as_bits(
      functools.partial(_broadcast, size), args[1], x
    ),
  )
  slots, n = data.shape[1], rows.shape[1]
  # JAX's batching where the flat row index would overflow, or where the
  # batch or the rows are a symbolic dim (`jax.export`), whose range is
  # unknown.
  dtype = int_dtype_for(size * slots) if is_int(size * slots) else None
  if dtype is None:
    impl = lambda d, r, u: _write_impl(d, r, u, serial=serial)
    return jax.vmap(impl)(data, rows, updates), 0
  first_row = lax.broadcasted_iota(dtype, rows.shape, 0) * np.asarray(
    slots, dtype
  )
  in_range = (rows >= 0) & (rows < slots)
  flat = jnp.where(in_range, rows.astype(dtype) + first_row, -1)
  out = write_rows(
    data.reshape((size * slots,) + data.shape[2:]),
    _computed_once(flat.reshape(size * n)),
    updates.reshape((size * n,) + updates.shape[2:]),
    serial,
  )
  return out.reshape(data.shape), 0


def _broadcast(size, rows, x):
  del rows
  return lax.broadcast(x, (size,))


write_rows_p.def_impl(jax.jit(_write_impl, static_argnames="serial"))
write_rows_p.def_abstract_eval(lambda data, rows, updates, *, serial: data)
mlir.register_lowering(write_rows_p, mlir.lower_fun(_write_impl, False))
ad.primitive_jvps[write_rows_p] = _write_jvp
ad.primitive_transposes[write_rows_p] = _write_transpose
batching.primitive_batchers[write_rows_p] = _write_batch
