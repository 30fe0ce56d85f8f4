"""The stable sort of update positions by target that the serial fold's
layout starts from (docs/design.md#fold-cost).

One single-operand sort of unique packed keys `target << b | position`,
about five times faster on XLA:CPU than a stable two-operand sort. The keys
take 64 bits whenever they must, x64 mode or not: `_sort_p` lowers them
itself, so in x32 mode no 64-bit value is ever traced.

Targets that already ascend skip the sort (docs/design.md#presorted):
sorted segment ids are common (CSR graphs, `jnp.unique`, batched graphs),
and one adjacent compare proves them.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir, xla

from jaxops._common import is_symbolic, provable, vary_alike
from jaxops._duplicates import any_in_batch, reduce_whole

_sort_p = Primitive("jaxops_sort_by_target")
_sort_p.multiple_results = True

# From this many updates on, an adjacent compare (about 2 ms per million
# targets) tests whether the targets already ascend before the sort (about
# 28 ms per million sorted targets, 56 ms random; docs/design.md#presorted).
PRESORTED_TEST_MIN = 2**14


def sort_by_target(
  target: jax.Array, slots: int, test_ascending: bool = True
) -> tuple[jax.Array, jax.Array]:
  """`(target[order], order)`, `order` the stable sort of `target` (..., n)
  along its last axis, values in [0, slots].

  One single-operand sort of the unique keys `target << b | position` (b
  the bits of n - 1), about five times faster on XLA:CPU than the stable
  two-operand sort (docs/design.md#fold-cost). The keys are 64-bit when
  they must be, x64 mode or not: `_sort_p` lowers them itself, so in x32
  mode they never reach a traced value.

  From `PRESORTED_TEST_MIN` targets on, ascending targets skip the sort
  unless `test_ascending` is False (a caller whose targets cannot ascend
  saves the test's cond and its compile time).
  """
  # A symbolic count may reach the threshold: tested (right for every size).
  small = provable(operator.lt, target.shape[-1], PRESORTED_TEST_MIN)
  if not test_ascending or small:
    return _sort(target, slots)
  unsorted = reduce_whole(target[..., 1:] < target[..., :-1], "any")
  return lax.cond(
    any_in_batch(unsorted),
    functools.partial(_sort, slots=slots),
    _in_place,
    target,
  )


def _sort(target: jax.Array, slots: int) -> tuple[jax.Array, jax.Array]:
  if _key_type(target.shape[-1], slots) is None:
    i = lax.broadcasted_iota(jnp.int32, target.shape, target.ndim - 1)
    sorted_target, order = lax.sort((target, i), num_keys=1, is_stable=True)
  else:
    sorted_target, order = _sort_p.bind(target, slots=slots)
  return sorted_target, order


def _in_place(target: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Ascending targets are their own stable sort."""
  positions = lax.broadcasted_iota(jnp.int32, target.shape, target.ndim - 1)
  # Typed to vary over shard_map's manual axes as the sorted order does
  # (lax.cond requires both branches' types to match).
  target, positions = vary_alike(target, positions)
  return target, positions


def _key_type(n: Any, slots: Any) -> Any:
  """The narrowest signed type of the packed keys, or None (also where a
  size is symbolic: the keys' bits are not known, and the stable sort is
  right for every size)."""
  if is_symbolic(n) or is_symbolic(slots):
    return None
  bits = max(n - 1, 1).bit_length() + slots.bit_length()
  return np.int32 if bits <= 31 else np.int64 if bits <= 63 else None


def _sort_keys(target, *, slots):
  n = target.shape[-1]
  wide = _key_type(n, slots)
  position_bits = max(n - 1, 1).bit_length()
  shift = lax.full(target.shape, position_bits, wide)
  # lax only: jnp would cache functions traced with 64-bit types.
  keys = lax.sort(
    lax.bitwise_or(
      lax.shift_left(lax.convert_element_type(target, wide), shift),
      lax.broadcasted_iota(wide, target.shape, target.ndim - 1),
    )
  )
  mask = lax.full(target.shape, (1 << position_bits) - 1, wide)
  return [
    lax.convert_element_type(
      lax.shift_right_logical(keys, shift), target.dtype
    ),
    lax.convert_element_type(lax.bitwise_and(keys, mask), np.int32),
  ]


def _sort_lowering(ctx, target, *, slots):
  with jax.enable_x64(True):
    return mlir.lower_fun(_sort_keys, multiple_results=True)(
      ctx, target, slots=slots
    )


def _sort_batch(args, dims, *, slots):
  (target,), (dim,) = args, dims
  return _sort_p.bind(jnp.moveaxis(target, dim, 0), slots=slots), (0, 0)


def _sort_jvp(primals, tangents, *, slots):
  out = _sort_p.bind(*primals, slots=slots)
  return out, [np.zeros(x.shape, jax.dtypes.float0) for x in out]


# Compiled through its lowering, as JAX runs its own primitives eagerly: a
# jit of `bind` would call `bind` again under `jax.disable_jit()`.
_sort_p.def_impl(functools.partial(xla.apply_primitive, _sort_p))
# `update` keeps the input's other properties: under shard_map the outputs
# vary over the manual axes the targets vary over.
_sort_p.def_abstract_eval(
  lambda target, *, slots: [
    target.update(weak_type=False),
    target.update(dtype=np.dtype(np.int32), weak_type=False),
  ]
)
mlir.register_lowering(_sort_p, _sort_lowering)
ad.primitive_jvps[_sort_p] = _sort_jvp
batching.primitive_batchers[_sort_p] = _sort_batch
