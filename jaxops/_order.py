"""Serial where the backend is serial: who orders a scatter's repeated
targets (docs/design.md#serial-cpu, docs/semantics.md#repeat-order).

XLA:CPU applies a scatter's updates one at a time, in index order: a float
`.at[].add` equals NumPy's `np.add.at` bit for bit and `.at[].set` keeps the
last duplicate, at any size (tests/test_scatter_order.py fails the day that
changes). So on CPU every scatter whose targets may repeat -- the default
ScatterNDUpdate, ScatterElementsUpdate `none`, the float sum/sub/prod/mean
reductions, the gathers' transposes -- is XLA's scatter as it is, and so
are float min/max (XLA:CPU's combiner is IEEE's maximum/minimum, order-free
but for a NaN's bits). On every other platform (GPU atomics, TPU) repeated
targets are resolved by construction: last-wins by a winner search, the
sorted fold, unique-index writes, an integer key for float min/max.

`by_platform` is the one switch. It lowers `serial` for CPU and
`constructed` for every other platform (`lax.platform_dependent`, so a
program compiled for CPU holds only the plain scatter, and `jax.export` for
several platforms holds both). `JAXOPS_SCATTER_ORDER=constructed` in the
environment forces the constructed path on CPU too; it is read when a
function is traced (set it before the first call of a jitted function).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

ENV_VAR = "JAXOPS_SCATTER_ORDER"
VALUES = ("platform", "constructed")


def constructed_only() -> bool:
  """Whether `JAXOPS_SCATTER_ORDER=constructed` forces the constructed
  path on every platform (the default, `platform`, serial on CPU; an empty
  value is unset, as shells write `JAXOPS_SCATTER_ORDER=` to clear it)."""
  value = os.environ.get(ENV_VAR) or "platform"
  if value not in VALUES:
    raise ValueError(
      f"jaxops: {ENV_VAR}={value!r} must be one of {VALUES} "
      "(docs/semantics.md#repeat-order)"
    )
  return value == "constructed"


@contextlib.contextmanager
def forced_constructed() -> Iterator[None]:
  """Functions traced inside take the constructed path on CPU too, as
  `JAXOPS_SCATTER_ORDER=constructed` says (for the tests and the bench;
  the switch is read when tracing)."""
  before = os.environ.get(ENV_VAR)
  os.environ[ENV_VAR] = "constructed"
  try:
    yield
  finally:
    if before is None:
      del os.environ[ENV_VAR]
    else:
      os.environ[ENV_VAR] = before


def by_platform(
  serial: Callable[..., Any],
  constructed: Callable[..., Any],
  *args: Any,
  only_constructed: bool | None = None,
) -> Any:
  """`serial(*args)` where XLA applies a scatter's updates in index order
  (CPU), `constructed(*args)` on every other platform and wherever
  `only_constructed` (default: `constructed_only()`, read now; a caller
  inside a cached inner `jit` reads it outside and passes it). Both must
  return the same types."""
  if constructed_only() if only_constructed is None else only_constructed:
    return _unfolded(constructed)(*args)
  return lax.platform_dependent(
    *args, cpu=serial, default=_unfolded(constructed)
  )


def _unfolded(constructed: Callable[..., Any]) -> Callable[..., Any]:
  """`constructed` with its integer arguments (the indices) behind an
  optimization barrier. XLA constant-folds what constant arguments feed,
  and a model's indices are often constants: it ran the constructed path's
  sorts and searches in its HLO evaluator at compile time
  (docs/design.md#constant-indices)."""

  def call(*args: Any) -> Any:
    at = [i for i, a in enumerate(args) if _is_index(a)]
    barred = dict(zip(at, lax.optimization_barrier([args[i] for i in at])))
    return constructed(*(barred.get(i, a) for i, a in enumerate(args)))

  return call


def _is_index(value: Any) -> bool:
  # jnp's test: int2/4 are no NumPy integers.
  return isinstance(value, (jax.Array, np.ndarray)) and jnp.issubdtype(
    value.dtype, jnp.integer
  )


def ordered(
  serial: Callable[..., Any], constructed: Callable[..., Any]
) -> Callable[..., Any]:
  """`by_platform` of the two, as one function of the arrays."""
  return functools.partial(by_platform, serial, constructed)
