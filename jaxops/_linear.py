"""The one derivative pattern of every operator: a custom JVP that is linear.

Each operator is linear in its float arguments (data, updates) for fixed
integer arguments (indices) and static attributes, so its tangent is the
operator itself applied to the tangents. `linear_custom_jvp` builds that
`jax.custom_jvp` once: forward mode evaluates the rule, and reverse mode
transposes it (the rule is built from gathers, scatters, slices and selects,
which JAX transposes), so `jvp`, `grad`, `vjp`, `hessian` and `vmap` of them
all work. Why this is lean in reverse mode: docs/design.md#derivatives.

`linear_with_transpose` is for the float `sum`/`sub` scatter reductions, whose
tangent's JAX transpose would cost far more than a direct one: their serial
fold transposes into a gather of each update's target, through
`jaxops._transposable` (docs/design.md#fold-cost); `tangent_with_transpose`
is that tangent alone, for a rule built on it (the sum without the initial
value, docs/design.md#sum-without-init). With `moves=True` the
primal of `linear_custom_jvp` moves narrow floats as their bits
(`jaxops._bits`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxops import _common, _order, _reduce
from jaxops._bits import moved_as_bits
from jaxops._duplicates import int_dtype_for
from jaxops._transposable import transposable


def linear_custom_jvp(
  fn: Callable[..., jax.Array],
  nondiff_argnums: Sequence[int] = (),
  *,
  linear_argnums: Sequence[int],
  tangent_nondiff: Callable[..., tuple[Any, ...]] | None = None,
  gather: bool = False,
  read_dims: Callable[..., ReadDims] | None = None,
  moves: bool = False,
) -> Callable[..., jax.Array]:
  """`fn` as a `jax.custom_jvp` whose tangent is `fn` of the tangents.

  Args:
    fn: the operator's core, linear in the arguments at `linear_argnums`.
    nondiff_argnums: static arguments (hashable), as for `jax.custom_jvp`.
    linear_argnums: the array arguments `fn` is linear in. The other array
      arguments (integer indices) keep their primal value in the tangent.
    tangent_nondiff: maps the static arguments to the ones the tangent uses,
      e.g. a fill value of 0 for out-of-range reads (the primal's fill value
      is a constant, so its tangent is 0). Default: the same.
    gather: `fn(data, indices, *static)` is a gather (each output element
      reads at most one data element, linear in data only), whose transpose
      scatter-adds into repeated elements: `ordered_gather` transposes it.
      The returned function then takes one more static argument, last:
      `_order.constructed_only()`, read by the caller outside its `jit`
      (whose traces, and their derivatives, are cached).
    read_dims: for a gather, `read_dims(data.shape, indices.shape,
      *static)`: the dims of data that every read keeps and that every
      read copies whole (`ReadDims`), which its ordered transpose reduces
      over as a batch and as rows. Default: neither.
    moves: `fn` only moves the elements of its linear arguments (one
      dtype), so its primal runs on their bits (`moved_as_bits`);
      the tangent, which JAX transposes, stays in the float type.

  Returns:
    The custom-JVP function. When the linear arguments are integer or bool
    (float0 tangents), the output tangent is float0 zeros.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> double = linear_custom_jvp(lambda x: 2 * x, linear_argnums=(0,))
    >>> x, x_dot = jnp.float32(1), jnp.float32(3)
    >>> [float(v) for v in jax.jvp(double, (x,), (x_dot,))]
    [2.0, 6.0]
  """
  nondiff = tuple(nondiff_argnums)
  linear = frozenset(linear_argnums)
  primal = (
    functools.partial(_on_bits, fn, sorted(linear), nondiff) if moves else fn
  )
  if gather:
    # The order switch, after fn's own arguments.
    flag = max(nondiff) + 1
    wrapped = jax.custom_jvp(
      lambda *args: primal(*args[:flag]), nondiff_argnums=nondiff + (flag,)
    )
  else:
    wrapped = jax.custom_jvp(primal, nondiff_argnums=nondiff)

  def merge(static, arrays):
    args, static, arrays = [], list(static), list(arrays)
    for position in range(len(static) + len(arrays)):
      args.append(static.pop(0) if position in nondiff else arrays.pop(0))
    return args

  def jvp(*args):
    *static, primals, tangents = args
    if gather:
      *static, constructed = static
    out = primal(*merge(static, primals))
    positions = [
      p for p in range(len(static) + len(primals)) if p not in nondiff
    ]
    if any(
      _common.is_float0(t) for p, t in zip(positions, tangents) if p in linear
    ):
      return out, _common.float0_zeros(out.shape)
    tangent_args = [
      t if p in linear else x for p, x, t in zip(positions, primals, tangents)
    ]
    tangent_static = (
      static if tangent_nondiff is None else (tangent_nondiff(*static))
    )
    if gather:
      tangent_fn = functools.partial(
        _with_static, fn, merge, tuple(tangent_static)
      )
      data_dot, indices = tangent_args
      dims = (
        ReadDims()
        if read_dims is None
        else read_dims(data_dot.shape, indices.shape, *static)
      )
      return out, ordered_gather(
        tangent_fn, data_dot, indices, out, dims, constructed=constructed
      )
    return out, fn(*merge(tangent_static, tangent_args))

  wrapped.defjvp(jvp)
  return wrapped


def _with_static(fn, merge, static, *arrays):
  return fn(*merge(static, arrays))


def _on_bits(fn, linear, nondiff, *args):
  """`fn(*args)` with its linear arguments moved as bits (`moved_as_bits`);
  its one other array argument (the indices) is the residual."""
  static = tuple((p, args[p]) for p in nondiff)
  (key,) = (p for p in range(len(args)) if p not in linear and p not in nondiff)
  move = functools.partial(_placed, fn, static, tuple(linear), key, len(args))
  return moved_as_bits(move, args[key], *(args[p] for p in linear))


def _placed(fn, static, linear, key, n, residual, *moved):
  args: list[Any] = [None] * n
  for p, value in static:
    args[p] = value
  for p, x in zip(linear, moved):
    args[p] = x
  args[key] = residual
  return fn(*args)


# --- the transpose of a gather, in order ------------------------------------


class ReadDims(NamedTuple):
  """How a gather's reads sit in data.

  `kept`: the dims of data (in increasing order) whose coordinate every read
  keeps: output dim d reads data dim d at the same coordinate, the sizes
  equal (batch dims; GatherElements' other dims). `whole`: how many of
  data's trailing dims every read copies whole, as the output's trailing
  dims (GatherND's slice, Gather's dims after `axis`)."""

  kept: tuple[int, ...] = ()
  whole: int = 0


def ordered_gather(
  gather: Callable[..., jax.Array],
  data: jax.Array,
  indices: jax.Array,
  like: jax.Array,
  dims: ReadDims,
  *,
  constructed: bool,
) -> jax.Array:
  """`gather(data, indices)`, linear in `data`, whose transpose sums the
  cotangents of repeated reads in order on every platform (`jaxops._order`):
  on CPU JAX's transpose, XLA's scatter-add (serial there); elsewhere, and
  on CPU too where `constructed`, the sorted fold of `_reduce.reduce_rows`,
  never a float scatter-add over repeated indices. `like` has the result's
  type (the primal output); `dims` says how the reads sit in data."""
  if int_dtype_for(math.prod(_indexed(data.shape, dims)) + 1) is None:
    return gather(data, indices)  # No row id fits an index type.
  in_order = functools.partial(_gather_in_order, gather, jax.typeof(like), dims)
  return _order.by_platform(
    gather, in_order, data, indices, only_constructed=constructed
  )


def _indexed(shape, dims: ReadDims) -> tuple[Any, ...]:
  """The sizes of the dims of data a read chooses a row along."""
  rows = len(shape) - dims.whole
  return tuple(shape[d] for d in range(rows) if d not in dims.kept)


def _gather_in_order(gather, out_aval, dims, data, indices):
  (out,) = transposable(
    functools.partial(_gather_apply, gather),
    functools.partial(_gather_transpose, gather, data.shape, dims),
    indices,
    (data,),
    [out_aval],
  )
  return out


def _gather_apply(gather, indices, data):
  return (gather(data, indices),)


def _gather_transpose(gather, shape, dims, indices, ct):
  """Each output row's cotangent summed into the data row it read, in
  output order, separately for every coordinate of the kept dims: rows of
  data's last `dims.whole` dims (one element where there are none). The row
  each output row read is found by gathering row ids (0 for a fill) from
  an array of data's shape with the whole dims of size 1 and the same ids
  along every kept dim. The sort and the fold then have one target per row
  and run per kept coordinate (a batch): a sharding of the kept or whole
  dims stays where it is."""
  kept, whole = dims
  ndim = len(shape)
  rows_at = [d for d in range(ndim - whole) if d not in kept]
  indexed = _indexed(shape, dims)
  slots, r = math.prod(indexed), math.prod(shape[ndim - whole :])
  if slots == 0 or ct.size == 0:
    return (jnp.zeros(shape, ct.dtype),)
  dtype = int_dtype_for(slots + 1)
  ids = (lax.iota(dtype, slots) + np.asarray(1, dtype)).reshape(indexed)
  id_shape = shape[: ndim - whole] + (1,) * whole
  read = gather(lax.broadcast_in_dim(ids, id_shape, rows_at), indices)
  read = read.reshape(read.shape[: read.ndim - whole])
  front = tuple(range(len(kept)))
  batch = tuple(shape[d] for d in kept)
  read = jnp.moveaxis(read, kept, front)
  n = math.prod(read.shape[len(kept) :])
  target = jnp.where(read > 0, read - 1, _common.dim_value(slots, dtype))
  sums = _common.batched(_sum_rows, len(kept))(
    jnp.zeros(batch + (slots, r), ct.dtype),
    target.reshape(batch + (n,)),
    # Each member's rows as they are: reduce_rows takes them as (n, r).
    jnp.moveaxis(ct, kept, front),
  )
  out = sums.reshape(batch + indexed + shape[ndim - whole :])
  return (jnp.moveaxis(out, front, kept),)


def _sum_rows(zeros, target, rows):
  return _reduce.reduce_rows(zeros, target, rows, "sum")


# --- a scatter that is linear in data and updates ---------------------------


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def linear_with_transpose(
  fn: Callable[..., jax.Array],
  transpose: Callable[..., tuple[jax.Array, jax.Array]],
  data: jax.Array,
  indices: jax.Array,
  updates: jax.Array,
) -> jax.Array:
  """`fn(data, indices, updates)`, linear in (data, updates) for fixed
  integer `indices`, whose tangent `fn(data_dot, indices, updates_dot)` is
  transposed by `transpose(indices, ct) -> (ct_data, ct_updates)` instead of
  by JAX (`fn` and `transpose` are static callables)."""
  return fn(data, indices, updates)


@linear_with_transpose.defjvp
def _linear_with_transpose_jvp(fn, transpose, primals, tangents):
  data, indices, updates = primals
  data_dot, _, updates_dot = tangents
  out = fn(data, indices, updates)
  return out, tangent_with_transpose(
    fn, transpose, data_dot, indices, updates_dot, out
  )


def tangent_with_transpose(
  fn: Callable[..., jax.Array],
  transpose: Callable[..., tuple[jax.Array, jax.Array]],
  data_dot: jax.Array,
  indices: jax.Array,
  updates_dot: jax.Array,
  out: jax.Array,
) -> jax.Array:
  """`fn(data_dot, indices, updates_dot)`, the tangent of
  `linear_with_transpose` at the primal output `out`, for a custom JVP
  rule to build on: transposed by `transpose`, not by JAX."""
  (tangent,) = transposable(
    functools.partial(_as_tuple, fn),
    transpose,
    indices,
    (data_dot, updates_dot),
    # The primal output's type, with the manual axes it varies over under
    # shard_map (the custom jvp checks that the tangent's matches).
    [jax.typeof(out)],
  )
  return tangent


def _as_tuple(fn, indices, data, updates):
  return (fn(data, indices, updates),)
