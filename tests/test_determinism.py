"""Determinism by construction, checked structurally: no scatter in any
reduction path (nor in `none`'s duplicate resolution) can depend on the order
in which a backend applies repeated indices.

For every path, both x64 modes, under jit, vmap, grad, jvp and hessian, the
jaxpr (sub-jaxprs included) and the lowered StableHLO are walked: every
scatter either promises `unique_indices` or combines with an operation whose
result is independent of order on its dtype -- integer add/mul/min/max, or bool
or/and/xor (docs/design.md#scatter-reductions). The same rule makes the
results equal on CPU, GPU and TPU, which this project cannot run.
"""

from __future__ import annotations

import functools
import re

import jax
import numpy as np
import pytest

import jaxops
from jaxops import _scatter_elements_update as _seu

ORDER_FREE = {"scatter-add", "scatter-mul", "scatter-min", "scatter-max"}
HLO_ORDER_FREE = {"add", "multiply", "maximum", "minimum", "or", "and", "xor"}


def _subjaxprs(value):
  if isinstance(value, jax.extend.core.ClosedJaxpr):
    yield value.jaxpr
  elif isinstance(value, jax.extend.core.Jaxpr):
    yield value
  elif isinstance(value, (tuple, list)):
    for item in value:
      yield from _subjaxprs(item)


def _order_dependent_scatters(jaxpr, found):
  for eqn in jaxpr.eqns:
    name = eqn.primitive.name
    if name.startswith("scatter"):
      dtype = eqn.outvars[0].aval.dtype
      exact = np.issubdtype(dtype, np.integer) or dtype == np.bool_
      if not eqn.params.get("unique_indices") and not (
        name in ORDER_FREE and exact
      ):
        found.append(f"{name} {eqn.outvars[0].aval.str_short()}")
    for value in eqn.params.values():
      for sub in _subjaxprs(value):
        _order_dependent_scatters(sub, found)
  return found


_SCATTER = re.compile(
  r'"stablehlo\.scatter"\(.*?<\{(?P<attrs>.*?)\}> \(\{\s*\^bb0\(%\w+: '
  r"tensor<(?P<dtype>\w+)>.*?\):(?P<body>.*?)stablehlo\.return",
  re.S,
)


def _order_dependent_hlo(text):
  found = []
  for m in _SCATTER.finditer(text):
    if "unique_indices = true" in m["attrs"]:
      continue
    ops = set(re.findall(r"stablehlo\.(\w+)", m["body"]))
    integer = re.fullmatch(r"u?i\d+", m["dtype"]) is not None
    if not (integer and ops and ops <= HLO_ORDER_FREE):
      found.append(f"{m['dtype']} {sorted(ops)}")
  return found


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


CALLS = {name: (fn, d, u) for name, fn, d, u in _calls()}


def _transforms(fn, data, updates):
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


@pytest.mark.parametrize("name", CALLS)
def test_no_scatter_depends_on_the_order_of_repeated_indices(name, monkeypatch):
  # Shared-index rows at any size: both branches of ScatterElementsUpdate's
  # lax.cond are in the program.
  monkeypatch.setattr(_seu, "ROWS_MIN_ELEMENTS", 0)
  fn, data, updates = CALLS[name]
  for transform, wrapped, args in _transforms(fn, data, updates):
    jaxpr = jax.make_jaxpr(wrapped)(*args)
    assert _order_dependent_scatters(jaxpr.jaxpr, []) == [], transform
    hlo = wrapped.lower(*args).as_text()
    # Not vacuous (hessians of min/max are constant, and the gradient of a
    # float sum or sub is a gather: no scatter left).
    _, reduction, *_ = name.split("-")
    linear_grad = reduction in ("sum", "sub")
    assert (
      "stablehlo.scatter" in hlo
      or transform == "hessian"
      or (transform.endswith("grad") and linear_grad)
      or (data.dtype != np.float32)
    )
    assert _order_dependent_hlo(hlo) == [], transform


def test_the_walkers_see_an_order_dependent_scatter():
  # The check can fail: a plain float .at[].add with repeats is flagged.
  def plain(d, u):
    return d.at[np.array([0, 0])].add(u)

  args = (np.zeros(3, np.float32), np.ones(2, np.float32))
  jaxpr = jax.make_jaxpr(jax.jit(plain))(*args)
  assert _order_dependent_scatters(jaxpr.jaxpr, []) == [
    "scatter-add float32[3]"
  ]
  assert _order_dependent_hlo(jax.jit(plain).lower(*args).as_text()) == [
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
  reduction, indices, monkeypatch
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
  found = set(_order_dependent_scatters(jaxpr.jaxpr, []))
  assert found <= allowed, found - allowed
