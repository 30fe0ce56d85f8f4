"""Elements of floats narrower than float32 moved as their bits.

XLA:CPU computes float16, bfloat16 and the 8-bit floats in float32: a
select, concatenate, broadcast or scatter of them may convert each element to
float32 and back, which quiets signaling NaNs and drops NaN payloads (plain
`jnp.take(..., mode="fill")` and `.at[].set` do). jaxops moves data bit for
bit (docs/semantics.md#data-dtypes), so where its computation only moves
such elements, it moves their bits as unsigned ints instead, inside a
`transposable` whose transpose is the float move's: `grad`, `vmap` and
`jax.linear_transpose` see a linear primitive, never a bitcast
(docs/design.md#moved-as-bits).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxops._common import vary_alike
from jaxops._transposable import transposable


def bits_dtype(dtype: Any) -> np.dtype | None:
  """The unsigned int type that moves elements of `dtype` bit for bit, for
  the floats narrower than float32 (float16, bfloat16, the 8-bit floats),
  which XLA:CPU computes in float32: a select, concatenate or scatter of
  them there may convert each element to float32 and back, which quiets
  signaling NaNs and drops NaN payloads (docs/design.md#moved-as-bits).
  None for every other dtype, which XLA moves as it is."""
  dtype = np.dtype(dtype)
  if not jnp.issubdtype(dtype, jnp.floating) or dtype.itemsize > 2:
    return None
  if jnp.finfo(dtype).bits != 8 * dtype.itemsize:  # 4-bit floats: no NaN
    return None
  return _unsigned(dtype)


def _unsigned(dtype: np.dtype) -> np.dtype:
  return np.dtype(f"uint{8 * dtype.itemsize}")


def moved_as_bits(
  move: Callable[..., jax.Array],
  residual: jax.Array,
  *linear: jax.Array,
  always: bool = False,
) -> jax.Array:
  """`move(residual, *linear)`, for a `move` that only moves the elements of
  `linear` (one dtype; reads, writes, selects, a constant fill): linear, up
  to that constant. Where `bits_dtype` says XLA:CPU would not move
  them exactly (float16, bfloat16, 8-bit floats), or for any real float
  with `always`, it runs on their bits inside a
  `transposable` whose transpose is the float move's, so `grad`, `vmap` and
  `jax.linear_transpose` see a linear primitive, never a bitcast
  (docs/design.md#moved-as-bits). `move` is a hashable static callable."""
  dtype = np.dtype(linear[0].dtype)
  bits = bits_dtype(dtype) or (_unsigned(dtype) if always else None)
  if bits is None:
    return move(residual, *linear)
  out = jax.eval_shape(move, residual, *linear)
  # Inside shard_map the result varies with any operand (the indices too).
  residual, *operands = vary_alike(residual, *linear)
  avals = tuple(jax.typeof(x) for x in operands)
  (moved,) = transposable(
    functools.partial(_bits_apply, move, bits),
    functools.partial(_float_transpose, move, avals),
    residual,
    operands,
    [avals[0].update(shape=out.shape, dtype=out.dtype)],
  )
  return moved


def _bits_apply(move, bits, residual, *linear):
  moved = move(residual, *(lax.bitcast_convert_type(x, bits) for x in linear))
  return (lax.bitcast_convert_type(moved, linear[0].dtype),)


def _float_transpose(move, avals, residual, ct):
  """The cotangents of `linear`: the transpose of the float move (its
  constant fill, if any, has none)."""
  zeros = [jnp.zeros(a.shape, a.dtype) for a in avals]
  _, vjp = jax.vjp(lambda *linear: move(residual, *linear), *zeros)
  return tuple(vjp(ct))
