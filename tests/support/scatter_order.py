"""Walkers that find the scatters whose result may depend on the order in
which a backend applies repeated indices: every scatter must promise
`unique_indices` or combine with an operation whose result is independent of
order on its dtype (integer add/mul/min/max, bool or/and/xor;
docs/design.md#scatter-reductions)."""

from __future__ import annotations

import re

import jax
import numpy as np

# The paths of scatters with repeated targets a test runs on CPU (the
# `scatter_order` fixture): XLA's serial scatter, the default, and the
# constructed path of every other platform.
ORDERS = ("serial", "constructed")
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


def order_dependent_scatters(jaxpr, found):
  """The scatters of `jaxpr` (sub-jaxprs included) whose result may depend
  on the order of repeated indices, appended to `found`."""
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
        order_dependent_scatters(sub, found)
  return found


_SCATTER = re.compile(
  r'"stablehlo\.scatter"\(.*?<\{(?P<attrs>.*?)\}> \(\{\s*\^bb0\(%\w+: '
  r"tensor<(?P<dtype>\w+)>.*?\):(?P<body>.*?)stablehlo\.return",
  re.S,
)


def order_dependent_hlo(text):
  """The same for the scatters of StableHLO `text`."""
  found = []
  for m in _SCATTER.finditer(text):
    if "unique_indices = true" in m["attrs"]:
      continue
    ops = set(re.findall(r"stablehlo\.(\w+)", m["body"]))
    integer = re.fullmatch(r"u?i\d+", m["dtype"]) is not None
    if not (integer and ops and ops <= HLO_ORDER_FREE):
      found.append(f"{m['dtype']} {sorted(ops)}")
  return found
