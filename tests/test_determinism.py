"""Determinism by construction where the backend is not serial, checked
structurally: on every platform but CPU no scatter in any path with repeated
targets -- ScatterNDUpdate's default, every reduction of both scatters, the
gathers' transposes -- can depend on the order in which a backend applies
repeated indices (docs/semantics.md#repeat-order).

For every path, both x64 modes, under jit, vmap, grad, jvp and hessian:
the jaxpr with the constructed path forced on CPU (`JAXOPS_SCATTER_ORDER`;
sub-jaxprs included) and the StableHLO `jax.export` lowers for CUDA are
walked: every scatter either promises `unique_indices` or combines with an
operation whose result is independent of order on its dtype -- integer
add/mul/min/max, or bool or/and/xor (docs/design.md#scatter-reductions).
The same rule makes the results equal on GPU and TPU, which this project
cannot run. On CPU, XLA's serial scatter is relied on instead, and
tests/test_scatter_order.py is its tripwire.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

import jaxops
from jaxops import _order
from jaxops import _scatter_elements_update as _seu
from tests.support.scatter_order import (
  order_dependent_hlo,
  order_dependent_scatters,
)

# Each case runs in one x64 mode, the cases alternating (tests/conftest.py).
pytestmark = pytest.mark.covering_modes

ND = ("sum", "sub", "prod", "min", "max")
ELEMENTS = ("none", "sum", "prod", "min", "max", "mean")


def _calls():
  """(name, fn(data, updates), data, updates) for every reduction path."""
  rng = np.random.default_rng(0)
  nd_idx = rng.integers(0, 4, (6, 1))
  el_idx = rng.integers(0, 4, (6, 3))
  for dtype in (np.float32, np.int32, np.bool_):
    data = np.ones((4, 3), dtype)
    updates = np.ones((6, 3), dtype)
    for reduction in ("none",) + ND:
      yield (
        f"nd-{reduction}-{np.dtype(dtype).name}",
        functools.partial(
          lambda d, u, r: jaxops.scatter_nd_update(d, nd_idx, u, reduction=r),
          r=reduction,
        ),
        data,
        updates,
      )
    for reduction in ELEMENTS:
      if reduction == "mean" and dtype == np.bool_:
        continue
      for init in (True, False):
        yield (
          f"el-{reduction}-{init}-{np.dtype(dtype).name}",
          functools.partial(
            lambda d, u, r, i: jaxops.scatter_elements_update(
              d, el_idx[:, :3], u, reduction=r, use_init_val=i
            ),
            r=reduction,
            i=init,
          ),
          data,
          np.ones((6, 3), dtype),
        )

  # The gathers: their transposes sum the cotangents of repeated reads.
  data = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)
  gathers = {
    "gather_nd": lambda d: jaxops.gather_nd(d, nd_idx),
    "gather_elements": lambda d: jaxops.gather_elements(d, el_idx, axis=0),
    "gather": lambda d: jaxops.gather(d, nd_idx[:, 0], axis=0),
  }
  for name, gather in gathers.items():
    yield (
      f"{name}-float32",
      functools.partial(lambda d, u, g: g(d) * u, g=gather),
      data,
      np.ones(np.shape(gather(data)), np.float32),
    )


CALLS = {name: (fn, d, u) for name, fn, d, u in _calls()}


def _transforms(fn, data, updates):
  # A new function: jit caches traces by function, and the order switch is
  # read when tracing.
  fn = functools.partial(fn)
  yield "jit", jax.jit(fn), (data, updates)
  batched = (np.stack([data, data]), np.stack([updates, updates]))
  yield "vmap", jax.jit(jax.vmap(fn)), batched
  if np.issubdtype(data.dtype, np.floating):
    loss = lambda d, u: fn(d, u).sum()  # noqa: E731
    yield "grad", jax.jit(jax.grad(loss, (0, 1))), (data, updates)
    yield (
      "jvp",
      jax.jit(lambda d, u: jax.jvp(fn, (d, u), (d, u))),
      (data, updates),
    )
    yield (
      "vmap-grad",
      jax.jit(jax.vmap(jax.grad(loss, (0, 1)))),
      batched,
    )
    # Forward over reverse; reverse over reverse: below.
    square = lambda d, u: (fn(d, u) ** 2).sum()  # noqa: E731
    yield "hessian", jax.jit(jax.hessian(square, (0, 1))), (data, updates)


@pytest.fixture
def constructed(monkeypatch):
  """The constructed path on CPU too (`jaxops._order`)."""
  monkeypatch.setenv(_order.ENV_VAR, "constructed")


def _cuda_hlo(wrapped, args):
  """The StableHLO of `wrapped` lowered for CUDA (the default path)."""
  return jax.export.export(wrapped, platforms=("cuda",))(*args).mlir_module()


@pytest.mark.exhaustive(default=8)
@pytest.mark.parametrize("name", CALLS)
@pytest.mark.covering_modes
def test_no_scatter_depends_on_the_order_of_repeated_indices(name, monkeypatch):
  # Shared-index rows at any size: both branches of ScatterElementsUpdate's
  # lax.cond are in the program.
  monkeypatch.setattr(_seu, "ROWS_MIN_ELEMENTS", 0)
  fn, data, updates = CALLS[name]
  for transform, wrapped, args in _transforms(fn, data, updates):
    hlo = _cuda_hlo(wrapped, args)
    # Not vacuous (hessians of min/max are constant, and the gradient of a
    # float sum or sub is a gather: no scatter left; nor has a gather's
    # forward pass).
    _, reduction, *_ = name.split("-")
    linear_grad = reduction in ("sum", "sub")
    assert (
      "stablehlo.scatter" in hlo
      or transform == "hessian"
      or (transform.endswith("grad") and linear_grad)
      or (data.dtype != np.float32)
      or (name.startswith("gather") and transform in ("jit", "vmap", "jvp"))
    )
    assert order_dependent_hlo(hlo) == [], transform
  # The switch is read when tracing: new functions, traced anew.
  monkeypatch.setenv(_order.ENV_VAR, "constructed")
  for transform, wrapped, args in _transforms(fn, data, updates):
    jaxpr = jax.make_jaxpr(wrapped)(*args)
    assert order_dependent_scatters(jaxpr.jaxpr, []) == [], transform


def test_the_walkers_see_an_order_dependent_scatter():
  # The check can fail: a plain float .at[].add with repeats is flagged.
  def plain(d, u):
    return d.at[np.array([0, 0])].add(u)

  args = (np.zeros(3, np.float32), np.ones(2, np.float32))
  jaxpr = jax.make_jaxpr(jax.jit(plain))(*args)
  assert order_dependent_scatters(jaxpr.jaxpr, []) == ["scatter-add float32[3]"]
  assert order_dependent_hlo(jax.jit(plain).lower(*args).as_text()) == [
    "f32 ['add']"
  ]


# Shapes of their own: the fold's segment table (S, R) is neither data's
# (slots, R) nor the updates' (n, R) (by rows S = 6, by elements S = 14).
_GG_DATA = np.ones((4, 3), np.float32)
_GG_UPDATES = np.linspace(0.5, 2.0, 27, dtype=np.float32).reshape(9, 3)
_GG_INDICES = np.random.default_rng(1).integers(0, 4, (9, 3))
_GG_SHARED = np.broadcast_to(_GG_INDICES[:, :1], (9, 3))


@pytest.mark.parametrize(
  "reduction, indices",
  [(r, i) for r in ("sum", "prod", "mean") for i in ("shared", "varying")],
)
def test_grad_of_grad_folds_segments_in_a_fixed_order(
  reduction, indices, monkeypatch, constructed
):
  monkeypatch.setattr(_seu, "ROWS_MIN_ELEMENTS", 0)
  # Reverse over reverse transposes the fold's transpose: `spread_p`, whose
  # transpose is the fold again, not a float scatter-add into the segment
  # table. What the walker still finds are scatter-adds shaped like data or
  # the updates (or their flat views): JAX's transposes of the unique
  # writes and reads, whose gathers drop the unique_indices promise
  # (docs/design.md#scatter-reductions).
  index = _GG_SHARED if indices == "shared" else _GG_INDICES

  def square(d, u):
    out = jaxops.scatter_elements_update(d, index, u, reduction=reduction)
    return (out**2).sum()

  def grad_norm(d, u):
    return sum((g**2).sum() for g in jax.grad(square, (0, 1))(d, u))

  jaxpr = jax.make_jaxpr(jax.grad(grad_norm, (0, 1)))(_GG_DATA, _GG_UPDATES)
  allowed = {
    f"scatter-add float32[{shape}]" for shape in ("4,3", "12,1", "9,3", "27,1")
  }
  found = set(order_dependent_scatters(jaxpr.jaxpr, []))
  assert found <= allowed, found - allowed
